"""Unit tests of the book's Sphinx extension (``booktools/sphinx/ext/``) that need no build: its text
transforms, on inputs written here. The rendered pages are checked in ``tests/test_browser.py``."""

from __future__ import annotations

from booktools.sphinx.ext import strip_solution_markers, tex_to_text


def test_tex_as_index_text():
    assert tex_to_text(r"\mu_k = \E[f(Z)\He_k(Z)]") == "μ_k = 𝔼[f(Z)He_k(Z)]"
    assert tex_to_text(r"\He_{k+1} = \frac{a}{bc}") == "He_(k+1) = a/(bc)"
    assert tex_to_text(r"\Gamma^\star") == "Γ^⋆"


def test_solution_markers_are_stripped_from_shown_code():
    source = "def f(k):\n    ### BEGIN SOLUTION\n    return k\n    ### END SOLUTION\n"
    assert strip_solution_markers(source) == "def f(k):\n    return k\n"
