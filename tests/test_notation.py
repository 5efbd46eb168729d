"""One symbol, one meaning: the notation registry (booktools/notation.py) against the chapters.

(a) ``chapters/notation.md`` is the page the registry generates (run ``python -m booktools.notation write``).
(b) No symbol is registered twice, and every registered symbol still occurs in some chapter.
(c) No chapter defines a registered symbol with another meaning, except the listed pending clashes in
    chapters the registry's authors may not edit (and those must still exist, so the list stays true).
(d) The scan can fail: each clash the referee of issue 29 found, written back into a chapter, is flagged.
"""

from __future__ import annotations

import re

import pytest

from booktools import notation

from .conftest import ROOT

CHAPTERS = notation.chapter_paths(ROOT)


def test_page_is_generated_from_the_registry():
    page = (ROOT / notation.PAGE).read_text()
    assert page == notation.render_page(), "run: python -m booktools.notation write"


def test_each_symbol_is_registered_once_and_is_used():
    texs = [s.tex for s in notation.REGISTRY]
    assert len(texs) == len(set(texs))
    book = "\n".join(p.read_text() for p in CHAPTERS)
    for symbol in notation.REGISTRY:
        first = re.split(r",\\ | = ", symbol.tex)[0]
        assert first in book, f"${symbol.tex}$ is registered but no chapter uses {first!r}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_chapter_gives_a_registered_symbol_another_meaning(path):
    rel = str(path.relative_to(ROOT))
    found = notation.clashes(path.read_text(), rel)
    pending = notation.PENDING.get(rel, ())
    for item in pending:
        assert any(item in f for f in found), f"{item} no longer clashes: drop it from PENDING"
    new = [f for f in found if not any(item in f for item in pending)]
    assert new == [], "\n".join(new)


# Each clash of the referee's list (issue 29), as a chapter could write it again.
CLASHES = {
    "A as the error proposition's matrix": r"with $A \in \R^{(d+1)\times d}$, $A_{1:d} = \hat R$",
    "A as the key-query block": r"split the weights: $A = W^{KQ}_{1:d,1:d}$, the label row",
    "B as a matrix": r"and $B \in \R^{(d+1)\times(d+1)}$ with",
    "epsilon as the ridge root": r"With $\nu = x^* + \varepsilon$ and",
    "S as M_kappa": r"let $S = \mathcal M_\kappa$ and",
    "g as the gap": r"their difference $g = \eICL - \eIDG$ is the gap",
    "kappa redefined": r"with $\kappa = (\tr\Lambda + \sigma^2)/N$",
    "h_k as reduced features": r"$h_k = \bigl(\tfrac{d}{\ell}\sum_i y_i x_i\bigr)$",
    "psi as something else": r"$\psi = \E[f(s)]$",
    "Z as a Gaussian": r"Let $Z \sim \Normal(0, 1)$ with density",
    "v as another vector": r"$v = w/\|w\|$",
    "z_i as a pre-activation": r"$z_i = x_i^\top w$",
}


@pytest.mark.parametrize("text", CLASHES.values(), ids=CLASHES.keys())
def test_the_scan_flags_each_clash_of_the_referee(text):
    assert notation.clashes(text), f"not flagged: {text}"


def test_the_scan_accepts_the_registered_meanings():
    ok = (
        r"$\Omega = W^{KQ}_{1:d,1:d}$, $U \in \R^{(d+1)\times d}$, $\Delta = \eICL - \eIDG$, "
        r"$\kappa = K/d$, $g = \frac1N \sum_i y_i x_i$, $\alpha = 2$, $\lambda = 10^{-2}$, "
        r"$\varepsilon \sim \Normal(0, \rho)$, $H_Z = x_q\,\psi^\top$, $s = x^\top w \sim \Normal(0, 1)$"
    )
    assert notation.clashes(ok) == []


def test_code_cells_are_not_scanned():
    text = "```{code-cell} ipython3\n# $A \\in \\R^{(d+1)\\times d}$\n```\n"
    assert notation.clashes(text) == []
