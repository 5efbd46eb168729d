"""The PDF edition (`make pdf`) and its publication with the site.

`make pdf` builds `_build/latex/icl-book.pdf` with xelatex on A4 (installing the TeX packages when they are
missing and it runs as root) and fails when its log records a missing character, an undefined reference or
a box overfull by more than 5 pt (`booktools/pdf_log.py`, attacked below). `make test` runs it as a stage
of its own before the HTML build, which then publishes the PDF as `_build/html/icl-book.pdf` and links it
from the introduction and every page's download menu (`booktools/sphinx/ext/_pdf.py`); the tests here read
those two builds, so the PDF is built once per `make test`. Without them they fail and name the command.
An HTML build without the PDF links to no PDF at all (tested on a one-page book below), so no link is
ever dead.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import yaml

from booktools import pdf_log

from .browser import serve
from .conftest import ROOT

BUILT = ROOT / "_build"


def pdf_pages(path) -> int:
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True).stdout
    return int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))


@pytest.fixture(scope="module")
def made():
    """The repository's _build folder, where make test's stages 'pdf' and then 'html' built."""
    pdf = BUILT / "latex" / "icl-book.pdf"
    if not pdf.exists():
        pytest.fail("no PDF: run `make pdf html` (make test runs them before these tests)")
    return BUILT


@pytest.fixture(scope="module")
def made_pdf(made):
    return made / "latex" / "icl-book.pdf"


@pytest.mark.slow  # reads the PDF that make test's stage 'pdf' built
def test_make_pdf_builds_a_book_with_math_and_figures(made_pdf):
    pdf = made_pdf
    assert pdf_pages(pdf) > 50
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True).stdout
    assert "(A4)" in info, "the PDF is printed on A4 (_config.yml latex_elements.papersize)"
    log = (pdf.parent / "icl-book.log").read_text(errors="replace")
    assert pdf_log.problems(log) == []  # make pdf fails on them too
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


@pytest.mark.browser
def test_the_site_links_the_pdf_from_the_intro_and_the_download_menu(
    made, made_pdf, tmp_path, chromium
):
    from .test_figures import WINDOW

    html = made / "html"
    if not (html / "icl-book.pdf").exists():
        pytest.fail("the site has no PDF: run `make pdf html` (make test does, in that order)")
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


# --- the log check ---------------------------------------------------------------------------------
_LOG = """\
(./icl-book.aux)
Missing character: There is no \u1d40 (U+1D40) in font [FreeMono.otf]/OT:script=latn;language=df
lt;!
Overfull \\hbox (4.9pt too wide) in paragraph at lines 10--12
[]\\TU/FreeSerif(0)/m/n/10 fits in the margin
 []

LaTeX Warning: Reference `chapters/00_prologue:prologue-ex2' on page 65 undefined on input line 4016.

LaTeX Warning: Citation `lu2025' on page 3 undefined on input line 99.

Overfull \\hbox (124.24786pt too wide) in paragraph at lines 13678--13678
\\TU/FreeMono(0)/m/n/10 hermite_one_step_excess_risk|
 []

Overfull \\vbox (52.4pt too high) detected at line 2898
 []
"""


def test_the_pdf_log_check_fails_on_each_defect():
    found = pdf_log.problems(_LOG)
    assert len(found) == 5, found
    assert found[0].startswith("missing character \u1d40 (U+1D40) in font [FreeMono.otf] (1×)")
    assert "undefined reference chapters/00_prologue:prologue-ex2 on page 65" in found[1]
    assert "undefined citation lu2025 on page 3" in found[2]
    assert "hbox by 124.2 pt" in found[3] and "hermite_one_step" in found[3]
    assert "vbox by 52.4 pt" in found[4]
    assert not [f for f in found if "4.9 pt" in f]  # up to 5 pt is accepted
    clean = "(./icl-book.aux)\nOutput written on icl-book.pdf (269 pages).\n"
    assert pdf_log.problems(clean) == []
    assert subprocess.run(
        [sys.executable, "-m", "booktools.pdf_log", "/dev/stdin"], input=_LOG, text=True,
        capture_output=True,
    ).returncode == 1  # fmt: skip
