"""The PDF edition (`make pdf`) and its publication with the site.

`make pdf` builds `_build/latex/icl-book.pdf` with xelatex (and no HTML); an HTML build made while it exists
(`make pdf html`, as `make publish` runs) copies it to `_build/html/icl-book.pdf` and links it from the
introduction and every page's download menu (`booktools/sphinx/ext.py`). The tests build both in a
temporary folder (`BUILD_ROOT`), so the book's own `_build/html`, which other tests read at the same time,
is neither rewritten nor left publishing a PDF of another state of the book. The tests that build it need xelatex; where it is missing (the TeX packages are
~1 GB; `make pdf` prints the apt-get line) they are skipped, and what the site then shows is checked instead:
an HTML build without the PDF links to no PDF at all (tested on a one-page book below, with or without
xelatex), so no link is ever dead.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest
import yaml

from .browser import serve
from .conftest import ROOT

needs_xelatex = pytest.mark.skipif(
    shutil.which("xelatex") is None, reason="xelatex is not installed (see make pdf)"
)


def pdf_pages(path) -> int:
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True).stdout
    return int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """`make pdf html` into a temporary BUILD_ROOT: its _build folder."""
    out = tmp_path_factory.mktemp("book")
    result = subprocess.run(
        ["make", "--no-print-directory", "pdf", "html", f"BUILD_ROOT={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out / "_build"


@pytest.fixture(scope="module")
def made_pdf(made):
    return made / "latex" / "icl-book.pdf"


@pytest.mark.slow  # make pdf: a whole LaTeX build (~80 s)
@needs_xelatex
def test_make_pdf_builds_a_book_with_math_and_figures(made_pdf):
    pdf = made_pdf
    assert pdf_pages(pdf) > 50
    images = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True).stdout
    assert len(images.splitlines()) > 3, "the figures are missing from the PDF"
    tex = (pdf.parent / "icl-book.tex").read_text()
    assert (
        "\\Normal" in tex and "\\providecommand{\\Normal}" in tex
    )  # the book's macros reach LaTeX
    # Chapter numbers match the web book: the numbered part of _toc.yml is chapters 1, 2, ... in the PDF too
    # (the introduction, notation and prologue are unnumbered front matter).
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True).stdout
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    numbered = next(part for part in toc["parts"] if part.get("numbered"))
    for number, entry in enumerate(numbered["chapters"], start=1):
        source = ROOT / (entry["file"] + ".md")
        title = next(
            line[2:].strip() for line in source.read_text().splitlines() if line.startswith("# ")
        )
        first_words = " ".join(title.split()[:3])
        assert f"Chapter {number}. {first_words}" in text, (number, title)
    assert "∎" in text, "no end-of-proof mark in the PDF"
    assert "[Lu et al., 2025]" in text, "the bibliography's labels are not author-year"


@needs_xelatex
@pytest.mark.browser
def test_the_site_links_the_pdf_from_the_intro_and_the_download_menu(
    made, made_pdf, tmp_path, chromium
):
    from .test_figures import WINDOW

    html = made / "html"
    assert (html / "icl-book.pdf").read_bytes() == made_pdf.read_bytes()  # published, not stale
    with serve(html) as url:
        page = chromium.new_page(viewport=WINDOW)
        try:
            targets = []
            page.goto(f"{url}/chapters/intro.html", wait_until="load")
            link = page.locator("article a.icl-book-pdf")
            assert link.count() == 1, "the introduction does not link the PDF"
            targets.append(link.evaluate("a => a.href"))
            page.goto(f"{url}/chapters/01_hermite.html", wait_until="load")
            page.locator(".dropdown-download-buttons button").click()
            item = page.locator("a.btn-download-book-pdf-button")
            item.wait_for(state="visible")
            targets.append(item.evaluate("a => a.href"))
            assert page.locator("button.btn-download-pdf-button").count() == 0  # no window.print()
            for target in targets:
                response = page.request.get(target)
                assert response.ok, target
                body = response.body()
                assert body[:4] == b"%PDF", target
                (tmp_path / "got.pdf").write_bytes(body)
                assert pdf_pages(tmp_path / "got.pdf") > 50
        finally:
            page.close()


# --- without a PDF: no link --------------------------------------------------------------------------
_CONF = """
extensions = ["booktools.sphinx.ext"]
html_theme = "sphinx_book_theme"
html_theme_options = {"use_download_button": True}
"""
_INDEX = """
Tiny book
=========

.. only:: icl_book_pdf

   Read it as one :book-pdf:`PDF file`.
"""


def _tiny_build(tmp_path, with_pdf: bool, builder: str = "html", index: str = _INDEX, ok=True):
    src, out = tmp_path / "src", tmp_path / "_build" / builder
    src.mkdir()
    (src / "conf.py").write_text(textwrap.dedent(_CONF))
    (src / "index.rst").write_text(textwrap.dedent(index))
    if with_pdf:
        (tmp_path / "_build" / "latex").mkdir(parents=True)
        (tmp_path / "_build" / "latex" / "icl-book.pdf").write_bytes(b"%PDF-1.5 stand-in")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-W", "-b", builder, str(src), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (result.returncode == 0) == ok, result.stderr[-3000:]
    return out if ok else result.stderr


def test_without_a_pdf_the_site_never_mentions_one(tmp_path):
    out = _tiny_build(tmp_path, with_pdf=False)
    page = (out / "index.html").read_text()
    assert "icl-book.pdf" not in page and not (out / "icl-book.pdf").exists()
    assert "PDF file" not in page  # the {only} icl_book_pdf block is dropped
    assert "window.print()" not in page  # nor the theme's print dialog, labelled ".pdf"
    assert "Tiny book" in page


def test_a_pdf_link_outside_the_only_block_fails_a_build_without_the_pdf(tmp_path):
    index = _INDEX.replace(".. only:: icl_book_pdf\n\n   ", "")
    assert ".. only::" not in index
    stderr = _tiny_build(tmp_path, with_pdf=False, index=index, ok=False)
    assert "in a build without the PDF" in stderr


def test_with_a_pdf_the_site_publishes_and_links_it(tmp_path):
    out = _tiny_build(tmp_path, with_pdf=True)
    page = (out / "index.html").read_text()
    assert (out / "icl-book.pdf").read_bytes() == b"%PDF-1.5 stand-in"
    assert page.count('href="icl-book.pdf"') == 2  # the role's link and the download menu's
    assert "window.print()" not in page


def test_in_the_pdf_the_pdf_link_is_text(tmp_path):
    out = _tiny_build(tmp_path, with_pdf=True, builder="latex")
    tex = next(out.glob("*.tex")).read_text()
    assert r"Read it as one \DUrole{icl-book-pdf}{PDF file}." in tex
    assert "icl-book.pdf" not in tex and "not in this build" not in tex
