"""The PDF edition (`make pdf`): checked when a LaTeX toolchain is present.

The TeX packages (~1 GB) are not part of the CI image, so this test is skipped there; `make pdf` prints the
apt-get line that installs them.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from .conftest import ROOT


@pytest.mark.skipif(
    shutil.which("xelatex") is None, reason="xelatex is not installed (see make pdf)"
)
def test_make_pdf_builds_a_book_with_math_and_figures():
    result = subprocess.run(
        ["make", "--no-print-directory", "pdf"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    pdf = ROOT / "_build" / "latex" / "icl-book.pdf"
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True).stdout
    pages = int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))
    assert pages > 20
    images = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True).stdout
    assert len(images.splitlines()) > 3, "the figures are missing from the PDF"
    tex = (ROOT / "_build" / "latex" / "icl-book.tex").read_text()
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
