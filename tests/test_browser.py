"""Real-browser checks of the rendered book (headless Chromium against a local HTTP server).

`make test` builds the book before running these. A missing browser is a failure, not a skip.
"""

from __future__ import annotations

import re

import pytest
import yaml

from icl_book import notebooks

from .browser import find_chromium, inspect_page, serve
from .conftest import ROOT

HTML = ROOT / "_build" / "html"
PAGES = ["chapters/intro.html", "chapters/notation.html"] + [
    f"chapters/{md.stem}.html" for md in notebooks.chapter_sources()
]


@pytest.fixture(scope="module")
def server():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    find_chromium()  # a one-line error naming the fix when the browser is missing
    with serve(HTML) as url:
        yield url


def colab_url(page: str) -> str:
    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    path = repo["url"].removeprefix("https://github.com/")
    return (
        f"https://colab.research.google.com/github/{path}/blob/{repo['branch']}/{page[:-5]}.ipynb"
    )


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_page_renders_math_images_and_no_console_errors(server, page):
    verdict = inspect_page(server, page)
    assert verdict["mathjax"], "MathJax did not load (it is served from _static/mathjax)"
    assert verdict["typeset"] > 0, "no typeset math on the page"
    assert verdict["raw_tex"] == [], f"raw TeX left on the page: {verdict['raw_tex']}"
    assert verdict["broken_images"] == [], f"images that did not load: {verdict['broken_images']}"
    assert verdict["images_without_alt"] == [], (
        f"images without alt text: {verdict['images_without_alt']}"
    )
    assert verdict["wide_math"] == [], (
        f"display equations wider than the text column (break them with aligned): {verdict['wide_math']}"
    )
    assert verdict["console_errors"] == []
    if re.match(r"chapters/\d\d_", page):
        assert verdict["images"] >= 1
        assert colab_url(page) in verdict["colab"], verdict["colab"]


def _broken_copy(tmp_path, edit):
    """A copy of the rendered prologue, edited by ``edit``, beside links to the real static files."""
    site = tmp_path / "site"
    (site / "chapters").mkdir(parents=True)
    for name in ("_static", "_images", "_sphinx_design_static"):
        if (HTML / name).exists():
            (site / name).symlink_to(HTML / name)
    html = (HTML / "chapters" / "00_prologue.html").read_text()
    (site / "chapters" / "broken.html").write_text(edit(html))
    return site


@pytest.mark.browser
def test_the_check_fails_when_math_is_not_typeset(tmp_path):
    find_chromium()
    site = _broken_copy(
        tmp_path,
        lambda h: re.sub(r'<script defer="defer" src="[^"]*mathjax[^"]*"></script>', "", h),
    )
    with serve(site) as url:
        verdict = inspect_page(url, "chapters/broken.html")
    assert verdict["typeset"] == 0
    assert verdict["raw_tex"], "raw TeX should be detected when MathJax is missing"


@pytest.mark.browser
def test_the_check_fails_on_a_broken_image_and_a_console_error(tmp_path):
    find_chromium()

    def edit(html):
        html = re.sub(r'src="\.\./_images/([^"]+)"', r'src="../_images/missing-\1"', html, count=1)
        return html.replace("</body>", "<script>undefinedFunction()</script></body>")

    site = _broken_copy(tmp_path, edit)
    with serve(site) as url:
        verdict = inspect_page(url, "chapters/broken.html")
    assert verdict["broken_images"], "a missing image should be reported"
    assert any("undefinedFunction" in line for line in verdict["console_errors"])


@pytest.mark.browser
def test_the_check_reports_a_display_equation_wider_than_the_column(tmp_path):
    find_chromium()
    wide = " + ".join(f"x_{{{i}}}^2" for i in range(60))
    site = _broken_copy(
        tmp_path,
        lambda h: h.replace(
            '<span id="chapter-prologue"></span>',
            f'<div class="math notranslate nohighlight">\\[{wide}\\]</div>',
        ),
    )
    with serve(site) as url:
        verdict = inspect_page(url, "chapters/broken.html")
    assert verdict["wide_math"], "a 60-term display equation should be reported as too wide"


def test_missing_browser_explains_the_fix(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(RuntimeError, match="apt-get install chromium"):
        find_chromium()
