"""The PDF edition (`make pdf`): checked when a LaTeX toolchain is present.

The TeX packages (~1 GB) are not part of the CI image, so this test is skipped there; `make pdf` prints the
apt-get line that installs them.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

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
