"""One symbol, one meaning: the notation registry (booktools/notation.py) against the chapters.

(a) ``chapters/notation.md`` is the page the registry generates (run ``python -m booktools.notation write``).
(b) No symbol is registered twice, and every registered symbol still occurs in some chapter.
(c) No chapter defines a registered symbol with another meaning.
(d) The scan can fail: each clash a referee found, written back into a chapter, is flagged.
(e) Every symbol of a chapter's math is registered, listed as local, or defined in that chapter; no registered
    symbol is used in another role (as a running index, as a subscripted family, redefined); a symbol used in
    several chapters is registered; no quantity has two names. Each defect of the second referee's list,
    written back, is flagged, and a local definition in words is accepted.
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
    assert found == [], "\n".join(found)


# Each clash of the referee's list, as a chapter could write it again.
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


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_symbol_is_registered_local_or_defined_in_its_chapter(path):
    rel = str(path.relative_to(ROOT))
    found = notation.undefined(path.read_text(), rel)
    assert found == [], "\n".join(found)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_registered_symbol_is_used_in_another_role(path):
    rel = str(path.relative_to(ROOT))
    found = notation.other_meanings(path.read_text(), rel)
    assert found == [], "\n".join(found)


def test_book_wide_symbols_are_registered_and_have_one_name():
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in CHAPTERS}
    shared = notation.shared_unregistered(texts)
    assert shared == [], "\n".join(shared)
    assert notation.second_names(texts) == []


# Each defect of the second referee's list, as a chapter could write it again.
UNDEFINED = {
    "h for psi": r"Each entry of $\E[hh^\top \mid w]$ is a double sum",
    "Theta never defined": r"a small multiple of $W^{KQ} = \diag(\Theta\Theta^\top, 0)$",
    "Phi never defined": r"$\mu_0 = \varphi(c) - c\,(1 - \Phi(c))$",
}
OTHER_ROLE = {
    "lambda as eigenvalues": r"diagonal with entries $1/[(1+\frac1N)\lambda_j + \beta]$",
    "mu as a sample index": r"$\sum_{\mu=1}^n \bigl(y^\mu - \langle \Gamma, H_Z\rangle\bigr)^2$",
    "mu as a leave-one-out index": r"$t = \frac1n x_i^\top G_{-\mu} x_i$",
    "sigma as a norm": r"$\sigma = \|w\|/\sqrt d$, and let",
    "S as another second moment": r"the Kronecker approximation $S_x \otimes S_\psi$",
}


@pytest.mark.parametrize("text", UNDEFINED.values(), ids=UNDEFINED.keys())
def test_the_scan_flags_each_undefined_symbol_of_the_referee(text):
    assert notation.undefined(text), f"not flagged: {text}"


@pytest.mark.parametrize("text", OTHER_ROLE.values(), ids=OTHER_ROLE.keys())
def test_the_scan_flags_each_other_role_of_the_referee(text):
    assert notation.other_meanings(text), f"not flagged: {text}"


def test_the_scan_flags_a_second_name_and_an_unregistered_shared_symbol():
    mu_star = r"$\mu^* = x^* \mathcal M_{\kappa/\tau}(x^*)$"
    mu_tilde = r"with $\tilde\mu = x^*\mathcal M_{\kappa/\tau}(x^*)$, the error"
    assert notation.second_names({"a": mu_star, "b": mu_tilde})
    # an eigenvalue letter defined in two chapters (as omega was) belongs in the registry
    two = {"a": r"with eigenvalues $\varsigma_j$", "b": r"with $\varsigma = 1 - \tau$"}
    assert notation.shared_unregistered(two)


def test_a_local_definition_in_words_or_formula_is_accepted():
    ok = (
        r"In the eigenbasis, with eigenvalues $\varsigma_j$, $R = \sum_j \varsigma_j$; "
        r"write $\vartheta = 2\tau$, so $\vartheta^2 = 4\tau^2$; with $\Theta \in \R^{d\times d}$, "
        r"$\Theta\Theta^\top$"
    )
    assert notation.undefined(ok) == []
    assert (
        notation.other_meanings(r"$\sum_{t=1}^n y^{(t)} \mathcal M_\kappa(x)$, $\min_\Gamma$") == []
    )


def test_code_cells_are_not_scanned():
    text = "```{code-cell} ipython3\n# $A \\in \\R^{(d+1)\\times d}$\n```\n"
    assert notation.clashes(text) == []
