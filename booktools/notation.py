"""The book's notation registry: one symbol, one meaning, across every chapter.

:data:`REGISTRY` lists every symbol with a book-wide meaning, the notation page's section it belongs to,
and the right-hand sides a chapter may give it where it *defines* it. ``chapters/notation.md`` is
generated from it (``python -m booktools.notation write``; ``check`` exits 1 when the page is stale), and
:func:`clashes` scans the chapters' math for definitions: a clause ``X = …``, ``X := …``, ``X \\in …`` or
``X \\sim …`` whose left side is a registered symbol must match one of that symbol's allowed forms, or it
is a clash (the symbol given another meaning). :data:`LOCAL` lists the letters that are deliberately *not*
book-wide (indices, and scratch names a proof or an exercise defines where it uses them); they are named on
the notation page and never checked. ``tests/test_notation.py`` runs the scan on every chapter.

What the scan sees: definitions inside ``$…$`` and ``$$…$$`` of a chapter's markdown (code cells
excluded). A definition in words ("let $p$ be the last row") is not seen; the registry's forms cover the
book's own definitions, and a new meaning written as a formula fails the test.

The symbol scans read the same math. :func:`undefined` names a symbol that is neither registered, nor in
:data:`LOCAL`, nor defined in its chapter (a definition clause, or a lone symbol right after a noun: "with
eigenvalues $\\Lambda_j$"); :func:`other_meanings` a registered letter used as a running index, a scalar
parameter used as a subscripted family, or a bare registered letter redefined; :func:`shared_unregistered`
an unregistered symbol used in several chapters; :func:`second_names` two variants of a letter defined by one
formula. A registered letter given a new meaning without any formula or subscript (an eigenvalue written
$\\lambda$ in a density) is not seen: such a use reads like the registered one.

One job: one symbol, one meaning: the registry and the scans that hold the chapters to it change
together (a symbol's forms are the patterns the scans match; the page is the registry rendered).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from booktools.chapters import blank_code_cells, chapter_sources

from . import add_root_option, find_root

__all__ = [
    "Symbol",
    "Definition",
    "REGISTRY",
    "LOCAL",
    "SECTIONS",
    "Local",
    "definitions",
    "clashes",
    "undefined",
    "other_meanings",
    "shared_unregistered",
    "second_names",
    "render_page",
    "main",
]

PAGE = Path("chapters/notation.md")
# A right-hand side that only sets a parameter to a value (numbers, other parameters, a set of values).
_VALUE_TOKENS = re.compile(
    r"\\(infty|to|times|cdot|tfrac|frac|dfrac|pm|approx|ldots|dots|sigma\^2|rho|tau|alpha|kappa|lambda|ell"
    r"|\{|\})|[\d.,\s{}^()+\-*/=]|(?<![A-Za-z\\])(d|N|K|n|F|I_d|I)(?![A-Za-z])"
)


def is_value(rhs: str) -> bool:
    """True when ``rhs`` only sets a parameter: numbers, the book's parameters, a set of values."""
    return _VALUE_TOKENS.sub("", rhs) == ""


@dataclass(frozen=True)
class Symbol:
    """One registered symbol.

    ``tex`` is the symbol as the page shows it and, unless ``lhs`` is given, as a chapter writes it on the
    left of a definition. ``forms`` are regular expressions searched in the right-hand side of every
    definition a chapter gives (a plain number is always allowed: a parameter set to a value).
    """

    tex: str
    meaning: str
    section: str
    forms: tuple[str, ...] = ()
    lhs: str | None = None

    def matches_lhs(self, lhs: str) -> bool:
        pattern = self.lhs if self.lhs is not None else re.escape(_squash(self.tex))
        return re.fullmatch(pattern, _squash(lhs)) is not None


@dataclass(frozen=True)
class Definition:
    """A definition found in a chapter: ``lhs rel rhs`` on ``line`` of ``path``."""

    path: str
    line: int
    lhs: str
    rel: str
    rhs: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: ${self.lhs} {self.rel} {self.rhs}$"


def _squash(tex: str) -> str:
    tex = re.sub(r"\\(bigl|bigr|Bigl|Bigr|left|right|,|;|!)", "", tex)
    return re.sub(r"\s+", "", tex)


SECTIONS = {
    "task": "The in-context regression task",
    "attention": "Linear self-attention (chapters 2–3)",
    "theory": "Asymptotic theory (chapters 3–4)",
    "hermite": "Hermite expansions (chapters 1, 4, 5)",
    "glu": "Feed-forward layers and depth (chapters 5–6)",
}

ANY = (r".",)  # a symbol whose chapters may define it in several equivalent ways (checked by hand)


def _s(tex, meaning, section, *forms, lhs=None):
    return Symbol(tex, meaning, section, tuple(forms), lhs)


REGISTRY: tuple[Symbol, ...] = (
    # --- the task -------------------------------------------------------------------------------------
    _s("d", "input dimension", "task"),
    _s(
        r"x,\ y",
        "an input and its label ($y = w^\\top x + \\varepsilon$, or $f(x^\\top w) + \\varepsilon$)",
        "task",
        *ANY,
        lhs=r"[xy]",
    ),
    _s(
        "N",
        "context length: the number of labelled examples in a prompt (chapters 0–2, 5–6)",
        "task",
    ),
    _s(
        r"\ell",
        "context length in chapters 3–4 (Lu et al.'s letter), $\\ell = \\alpha d$",
        "task",
        r"\\alpha\s*d",
    ),
    _s(
        r"x_i,\ y_i",
        "the $i$-th context input and its label",
        "task",
        r"\\Normal",
        r"w\^\\top\s*x_i",
        r"f\(",
        r"x_i\^\\top\s*A",
        r"s_i",
        r"r_i",
        lhs=r"[xy]_[ij]",
    ),
    _s(
        r"x_q,\ y_q",
        "the query and its hidden label",
        "task",
        r"\\Normal",
        r"f\(",
        r"\\mu_1\s*s_q",
        r"s_q\s*w",
        lhs=r"[xy]_q",
    ),
    _s(r"\hat y", "a prediction of $y_q$", "task", *ANY, lhs=r"\\hat\{?y\}?(_q)?"),
    _s("w", "the task vector of a prompt", "task", r"\\Normal", r"^0$", lhs=r"w"),
    _s(
        r"\hat w",
        "an estimate of $w$ computed from a context (a linear predictor $x \\mapsto \\hat w^\\top x$)",
        "task",
        r".",
        lhs=r"\\hat\{?w\}?(_\{?[A-Za-z ]+\}?)?",
    ),
    _s(
        r"\varepsilon",
        "label noise, $\\varepsilon \\sim \\Normal(0, \\sigma^2)$ or $\\Normal(0, \\rho)$",
        "task",
        r"\\Normal\(0,\s*(\\sigma\^2|\\rho)",
        lhs=r"\\varepsilon(_[iq])?",
    ),
    _s(r"\sigma^2", "label-noise variance (chapters 0–2, 5–6); `noise_var` in code", "task"),
    _s(
        r"\rho",
        "label-noise variance in chapters 3–4 (Lu et al.'s letter): the same quantity as $\\sigma^2$",
        "task",
    ),
    _s(
        r"\Lambda",
        "input covariance, $x \\sim \\Normal(0, \\Lambda)$",
        "task",
        r"I",
        r"\\R\^\{d",
        r"\\diag",
    ),
    _s(
        "X",
        "a design matrix, samples as rows (the context's inputs, $X \\in \\R^{N\\times d}$, in chapter 0)",
        "task",
        r"\\R\^\{[Nn]",
    ),
    _s(
        "B",
        "the number of prompts in a batch; arrays are `xs (B, N, d)`, `ys (B, N)`, `x_query (B, d)`",
        "task",
    ),
    _s(
        "g",
        "the context average $g = \\frac1N\\sum_i y_i x_i$ (one GD step from $0$ is $\\eta g$)",
        "task",
        r"\\frac1N\s*\\sum",
        r"\\frac\{1\}\{N\}\s*\\sum",
    ),
    _s("S", "$S = \\E[g g^\\top]$, the second moment of $g$", "task", r"\\Lambda\^2", r"\\E\[g"),
    _s(
        r"\hat g",
        "an estimate of an average like $g$ from a sample ($\\frac1n\\sum_i f(s_i) x_i$, "
        "$\\frac1N\\sum_i y_i\\phi(x_i)$)",
        "task",
        r"\\frac1[nN]\s*\\sum",
        lhs=r"\\hat\{?g\}?",
    ),
    _s(
        r"\hat\Sigma",
        "a sample covariance $X^\\top X/n$ of the rows of a design matrix",
        "task",
        r"X\^\\top\s*X",
        lhs=r"\\hat\\Sigma",
    ),
    _s(
        "R",
        "the test risk $\\E(y_q - \\hat y)^2$ of a predictor, e.g. $R(\\eta)$ of one GD step",
        "task",
        *ANY,
        lhs=r"R(\(.*\))?",
    ),
    _s(
        r"L(w)",
        "the least-squares loss of a context, $\\frac1{2N}\\sum_i (w^\\top x_i - y_i)^2$",
        "task",
        r"\\frac\{1\}\{2N\}",
        lhs=r"L(\(w\))?",
    ),
    # --- attention ------------------------------------------------------------------------------------
    _s(
        "Z",
        "the token matrix: columns $(x_i, y_i)$ for the context and $(x_q, 0)$ for the query",
        "attention",
        r"\\begin\{pmatrix\}",
        r"\\R\^\{\(d\+1\)",
    ),
    _s(
        "z_i,\\ z_q",
        "the columns (tokens) of $Z$: $z_i = (x_i, y_i)$, $z_q = (x_q, 0)$",
        "attention",
        r"\(x_[ijq]",
        lhs=r"z_[ijq]",
    ),
    _s(
        r"W^{KQ},\ W^{PV}",
        "the merged key–query and projection–value matrices of linear self-attention",
        "attention",
        r"\\begin\{pmatrix\}",
        r"W_K",
        r"W_P",
        r"\\R\^\{\(d\+1\)",
        r"\\diag",
        r"\\Gamma",
        r"-\\eta",
        lhs=r"W\^\{(KQ|PV)\}",
    ),
    _s(
        "M",
        "the mask $\\diag(I_N, 0)$: the query is never a key or a value",
        "attention",
        r"\\begin\{pmatrix\}\s*I_N",
        r"\\diag\(I_N",
    ),
    _s(
        r"\Omega",
        "the $d\\times d$ input block $W^{KQ}_{1:d,1:d}$ of the key–query matrix",
        "attention",
        r"W\^\{KQ\}_\{1:d",
        r"\\R\^\{d\s*\\times\s*d\}",
    ),
    _s(
        r"v = (v_x, v_y)",
        "the last row of $W^{PV}$: what a token sends to the query's label slot",
        "attention",
        r"\(v_x",
        lhs=r"v(\^\\top)?|v_[xy]",
    ),
    _s(
        r"\eta,\ \eta^\star",
        "a gradient-descent step size; $\\eta^\\star$ the best one",
        "attention",
        *ANY,
        lhs=r"\\eta(\^\\star)?",
    ),
    _s(
        r"\Gamma",
        "a preconditioner (chapter 2), or the reduced model's parameter matrix "
        "$\\Gamma \\in \\R^{d\\times(d+1)}$ (chapters 3–4)",
        "attention",
        *ANY,
    ),
    _s(
        r"\Gamma^\star,\ R^\star",
        "the optimal preconditioner and its risk $R(\\Gamma^\\star)$",
        "attention",
        r"\\Bigl\[",
        r"\[\(1",
        r"R\(\\Gamma\^\\star\)",
        r"\\tr\\Lambda",
        lhs=r"\\Gamma\^\\star|R\^\\star",
    ),
    _s(
        r"\psi",
        "the reduced model's features of a prompt, "
        "$\\psi = (\\frac d\\ell \\sum_i y_i x_i, \\frac1\\ell\\sum_i y_i^2) \\in \\R^{d+1}$",
        "attention",
        r"\\Bigl\(\\tfrac\{d\}\{\\ell\}",
        r"\\bigl\[\\tfrac\{d\}\{\\ell\}",
        r"w\s*\+\s*\\xi",
    ),
    _s(
        "H_Z",
        "$H_Z = x_q\\psi^\\top$: the reduced model predicts $\\hat y = \\langle\\Gamma, H_Z\\rangle$",
        "attention",
        r"x_q\s*\\psi\^\\top",
        r"x_q\\,\\psi",
    ),
    _s(
        "U,\\ V",
        "the first- and second-moment matrices of the error of a given $\\Gamma$ "
        "(proposition in chapter 3)",
        "attention",
        r"\\R\^\{\(d\+1\)",
        lhs=r"[UV]",
    ),
    _s(
        r"e(\Gamma)",
        "the test error of a given $\\Gamma$",
        "attention",
        r"\\E",
        r"1\s*\+\s*\\rho",
        lhs=r"e\(\\Gamma\)",
    ),
    # --- theory ---------------------------------------------------------------------------------------
    _s(r"\alpha", "context length per dimension, $\\alpha = \\ell/d$", "theory", r"\\ell\s*/\s*d"),
    _s(
        r"\tau",
        "pretraining data: $n = \\tau d^2$ prompts (the reduced model has $d(d+1)$ parameters)",
        "theory",
        r"n\s*/\s*d\^2",
    ),
    _s(
        r"\kappa",
        "task diversity: $K = \\kappa d$ pretraining tasks ($\\kappa = \\infty$: a fresh task per "
        "prompt)",
        "theory",
        r"K\s*/\s*d",
        r"^1\s*/\s*\(1\s*\+\s*x\^\*\)$",  # the location of the peak of k*
    ),
    _s(
        "n",
        "the number of pretraining prompts (or samples of a regression)",
        "theory",
        r"\\tau\s*d\^2",
        r"\\tau\s*F",
    ),
    _s("K", "the number of distinct pretraining tasks", "theory", r"\\kappa\s*d"),
    _s(
        "F",
        "the number of features of a linear model",
        "theory",
        r"d\(d\+1\)",
        r"\\binom",
        r"d\(d\+1\)/2",
    ),
    _s(r"\lambda", "ridge parameter", "theory"),
    _s(
        r"\eICL",
        "in-context learning error, on tasks never seen in pretraining",
        "theory",
        *ANY,
        lhs=r"\\eICL",
    ),
    _s(
        r"\eIDG",
        "in-distribution generalisation error, on the $K$ pretraining tasks",
        "theory",
        *ANY,
        lhs=r"\\eIDG",
    ),
    _s(
        r"\Delta",
        "the task-generalisation gap $\\Delta = \\eICL - \\eIDG$",
        "theory",
        r"\\eICL\s*-\s*\\eIDG",
    ),
    _s(
        r"\hat\mu,\ \hat R",
        "the mean and second-moment matrix of a test prompt's task ($0$ and $I$ for fresh tasks)",
        "theory",
        r"^I$",
        r"\\frac1K",
        r"^0$",
        lhs=r"\\hat\\mu|\\hat\s*R",
    ),
    _s(r"x^*", "$x^* = (1+\\rho)/\\alpha$", "theory", r"\(1\s*\+\s*\\rho\)\s*/\s*\\alpha"),
    _s(
        r"\mathcal M_\kappa",
        "$\\mathcal M_\\kappa(x) = \\frac1d\\tr(\\hat R + xI)^{-1}$ of a pool of $\\kappa d$ "
        "tasks, in the limit: a Marchenko–Pastur Stieltjes transform",
        "theory",
        *ANY,
        lhs=r"\\mathcal\{?M\}?_\\kappa(\(x\))?",
    ),
    _s(
        r"m^*,\ \mu^*,\ k^*",
        "the constants of Lu et al.'s ridgeless formulas",
        "theory",
        *ANY,
        lhs=r"m\^\*|\\mu\^\*|k\^\*",
    ),
    _s(
        r"\omega",
        "the auxiliary $\\omega = (1-\\tau)x^*/(\\tau\\mu^*)$ of the $\\tau < 1$ in-distribution result",
        "theory",
        r"\(1\s*-\s*\\tau\)\s*x\^\*",
    ),
    _s(
        r"\chi,\ \nu",
        "the root of the ridge self-consistency equation, and $\\nu = x^* + \\chi$",
        "theory",
        r"x\^\*\s*\+\s*\\chi",
        lhs=r"\\chi|\\nu",
    ),
    _s(
        r"e_\infty",
        "the ridgeless error with unlimited data and tasks, $\\rho + x^*/(1+x^*)$",
        "theory",
        r"\\rho\s*\+",
        r"\\frac\{x\^\*\}",
    ),
    # --- Hermite --------------------------------------------------------------------------------------
    _s(
        "s",
        "a standard Gaussian variable; in a single-index model the pre-activation $s = x^\\top w$",
        "hermite",
        r"x\^\\top\s*w",
        r"\\Normal\(0,\s*1\)",
        lhs=r"s",
    ),
    _s(
        r"s_i,\ s_q",
        "the pre-activations $x_i^\\top w$, $x_q^\\top w$ of a single-index prompt",
        "hermite",
        r"x_[iq]\^\\top\s*w",
        r"\\Normal\(0,\s*1\)",
        lhs=r"s_[iq]",
    ),
    _s(
        r"\gamma",
        "the standard Gaussian law; $\\langle f_1, f_2\\rangle = \\E[f_1(s) f_2(s)]$",
        "hermite",
    ),
    _s(r"\varphi", "the standard normal density", "hermite", *ANY, lhs=r"\\varphi(\(z\))?"),
    _s(
        r"f",
        "a function of one Gaussian variable: the link of a single-index teacher $y = f(x^\\top w) + "
        "\\varepsilon$",
        "hermite",
        *ANY,
    ),
    _s(
        r"\He_k",
        "probabilists' Hermite polynomials: $\\He_0 = 1$, $\\He_1 = z$, "
        "$\\He_{k+1} = z\\He_k - k\\He_{k-1}$",
        "hermite",
        *ANY,
        lhs=r"\\He_[k0-9{}+\-]+('?)(\(z\))?",
    ),
    _s(
        "h_k",
        "the orthonormal Hermite basis $h_k = \\He_k/\\sqrt{k!}$ of $L^2(\\gamma)$",
        "hermite",
        r"\\He_k\s*/\s*\\sqrt",
        r"z\s*h_k",
        lhs=r"h_\{?k(\+1)?\}?",
    ),
    _s(
        r"\mu_k",
        "the $k$-th Hermite coefficient $\\E[f(s)\\He_k(s)]$; $f = \\sum_k \\mu_k\\He_k/k!$",
        "hermite",
        *ANY,
        lhs=r"\\mu_\{?[0-9km+\-]+\}?",
    ),
    _s(
        "c_k",
        "$c_k = \\mu_k/\\sqrt{k!}$, the coefficient on $h_k$",
        "hermite",
        r"\\mu_[0-9k]\s*/\s*\\sqrt",
        r"\\varphi\(0\)",
        lhs=r"c_[0-9k]",
    ),
    _s(
        r"f_T,\ e_T",
        "the truncation of $f$ at degree $T$ and its error $\\E(f - f_T)^2$",
        "hermite",
        *ANY,
        lhs=r"[fe]_T",
    ),
    _s(
        r"\rho_{\rm eff}",
        "the effective noise of a single-index teacher, $\\rho + \\E f^2 - \\mu_1^2$",
        "hermite",
        r"\\rho\s*\+",
        r"\\E\s*f\^2",
        lhs=r"\\rho_\{\\rm\s*eff\}",
    ),
    _s(
        r"\E f^2 - \mu_0^2 - \mu_1^2",
        "the *nonlinear energy* $\\sum_{k\\ge2}\\mu_k^2/k!$ of $f$",
        "hermite",
        lhs=r"$^",
    ),
    # --- GLU and depth --------------------------------------------------------------------------------
    _s(
        "A",
        "the matrix of a quadratic teacher $y = x^\\top A x + \\varepsilon$ (chapter 5)",
        "glu",
        r"G\s*\+\s*G\^\\top",
        r"\(G",
    ),
    _s(
        "W_1,\\ W_2,\\ W_3",
        "the weights of a GLU feed-forward layer $e \\leftarrow e + W_3[(W_1 e)\\odot(W_2 e)]$",
        "glu",
        *ANY,
        lhs=r"W_[123](\^\{\(t\)\})?",
    ),
    _s(
        r"\phi(x),\ q(x)",
        "a feature map; $q$ collects quadratic features",
        "glu",
        *ANY,
        lhs=r"\\phi(_b)?(\(x\))?|q(\(x\))?",
    ),
    _s("k(x, x')", "a kernel, e.g. $x^\\top x' + (x^\\top x')^2$", "glu", *ANY, lhs=r"k\(x,x'\)"),
    _s("D", "the embedding width of a block", "glu", *ANY),
    _s("H", "the hidden width of a GLU layer (its number of hidden units)", "glu"),
    _s("p", "a polynomial degree", "glu"),
    _s(
        r"\theta",
        "the coefficients of a kernel or feature regression",
        "glu",
        *ANY,
        lhs=r"\\theta(_[0-9b])?(\^\{\(t\)\})?",
    ),
)


_INTRO = """\
(notation)=
# Notation and conventions

Symbols keep one meaning throughout the book. This page is generated from the registry in
`booktools/notation.py`, and a test fails when a chapter defines a listed symbol with another meaning.
Two scaling conventions are used, and every chapter says which.
"""

_CONVENTIONS = """\
**Textbook convention** (prologue, chapters 2, 5, 6): $x \\sim \\Normal(0, \\Lambda)$ (usually $\\Lambda = I_d$),
$w \\sim \\Normal(0, I_d)$, $y = w^\\top x + \\varepsilon$.

**Lu et al.'s convention** (chapters 3, 4): $x \\sim \\Normal(0, I_d/d)$ and $\\|w\\| = \\sqrt d$
($w \\sim \\Normal(0, I_d)$ renormalised), so that the pre-activation $s = x^\\top w \\sim \\Normal(0, 1)$;
$y = f(x^\\top w) + \\varepsilon$ with $\\varepsilon \\sim \\Normal(0, \\rho)$ and $f(s) = s$ for the linear teacher.

**The prediction's sign.** Chapter 2 reads an LSA layer's prediction with a minus sign,
$\\hat y = -[\\mathrm{LSA}(Z)]_{d+1,N+1}$ (von Oswald et al.'s convention, in which a GD step appears as $-\\eta$ in
$W^{PV}$); chapters 3–4 write the reduced model with a plus sign, $\\hat y = \\langle\\Gamma, H_Z\\rangle$ (Lu et al.'s).
The two describe the same predictors: a layer of chapter 2 with value row $v$ is the reduced model with $-v$.
"""

_TYPOGRAPHY = """\
## Typography

Vectors are columns; $\\|\\cdot\\|$ is the Euclidean norm and $\\|\\cdot\\|_F$ the Frobenius norm; $\\tr$ is the trace;
$\\langle P, Q\\rangle = \\tr(P^\\top Q)$ for matrices. Code names appear in `monospace` and match the package `icl_book`.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_page() -> str:
    """The text of ``chapters/notation.md``, generated from :data:`REGISTRY` and :data:`LOCAL`."""
    out = [_INTRO]
    for key, title in SECTIONS.items():
        out += [f"## {title}\n", "| symbol | meaning |", "|---|---|"]
        out += [f"| ${_cell(s.tex)}$ | {_cell(s.meaning)} |" for s in REGISTRY if s.section == key]
        out.append("")
        if key == "task":
            out.append(_CONVENTIONS)
    out += [
        "## Local names\n",
        "These are not book-wide; each use defines them where it needs them:\n",
    ]
    out += [f"- ${entry.symbols}$: {entry.meaning}" for entry in LOCAL]
    out += ["", _TYPOGRAPHY]
    return "\n".join(out)


# --- the scan ------------------------------------------------------------------------------------------

_MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?!\$)(.+?)(?<!\\)\$", re.S)
_SEP = re.compile(r"(?<!\\),|;|&|\\\\|\\quad|\\qquad|\\text\{[^}]*\}|\\;|\\:")
_REL = re.compile(
    r"^(?P<lhs>.+?)\s*(?P<rel>:=|=|\\in(?![a-z])|\\sim(?![a-z])|\\propto(?![a-z]))\s*(?P<rhs>.*)$",
    re.S,
)


_ALIGNED_REL = re.compile(r"&(?=\s*(?::=|=|\\in(?![a-z])|\\sim(?![a-z])|\\propto(?![a-z])))")


def _clauses(math: str):
    depth, start = 0, 0
    for i, ch in enumerate(math):
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        elif depth == 0:
            m = _SEP.match(math, i)
            if m and m.end() > i:
                yield start, math[start:i]
                start = m.end()
    yield start, math[start:]


def definitions(text: str, path: str = "<text>"):
    """Every ``lhs rel rhs`` clause of the math of a MyST text (code cells excluded)."""
    text = blank_code_cells(text)
    for m in _MATH.finditer(text):
        body_start = m.start(1) if m.group(1) is not None else m.start(2)
        body = m.group(1) if m.group(1) is not None else m.group(2)
        # an alignment mark before a relation (``h(x) &= …``) is not a clause break; a blank
        # of the same length keeps the offsets, hence the line numbers
        body = _ALIGNED_REL.sub(" ", body)
        for offset, clause in _clauses(body):
            rel = _REL.match(clause.strip())
            if not rel:
                continue
            lhs = rel.group("lhs").strip()
            if len(_squash(lhs)) > 40:
                continue
            line = text.count("\n", 0, body_start + offset) + 1
            rhs = " ".join(rel.group("rhs").split())
            yield Definition(path, line, lhs, rel.group("rel"), rhs)


def symbol_of(lhs: str) -> Symbol | None:
    for symbol in REGISTRY:
        if symbol.matches_lhs(lhs):
            return symbol
    return None


def clashes(text: str, path: str = "<text>") -> list[str]:
    """One message per definition of a registered symbol that none of its forms allows."""
    found = []
    for d in definitions(text, path):
        symbol = symbol_of(d.lhs)
        if symbol is None:
            continue
        rhs = d.rhs.strip()
        if is_value(rhs) or any(re.search(f, rhs) for f in symbol.forms):
            continue
        found.append(f"{d}: ${symbol.tex}$ is registered as '{symbol.meaning}'")
    return found


# --- symbols used but defined nowhere --------------------------------------------------------------------

_GREEK = (
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi rho "
    "varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma "
    "Upsilon Phi Psi Omega"
).split()
_DECOR = r"\\(?:hat|tilde|bar|widetilde|widehat|mathcal|mathbf)\s*\{?\s*"
_TOKEN = re.compile(
    r"(?P<index>[_^]\{?)?"
    rf"(?P<dec>(?:{_DECOR})?)(?P<base>\\(?:{'|'.join(_GREEK)})(?![A-Za-z])|(?<![\\A-Za-z])[A-Za-z])"
    r"(?P<star>\^\s*(?:\*|\{\*\}|\\star))?"
)
_SUBSCRIPTED = re.compile(r"\s*\}?\s*_")
# Text inside math that is not a symbol: words, labels, operator names, upright subscripts (e_{\rm ICL}).
_NOT_SYMBOLS = re.compile(
    r"\\(?:text|mathrm|operatorname|label|tag|rm)\s*\{[^{}]*\}|\\rm\s*[A-Za-z]+|\^\{[A-Z]{2,}\}"
    r"|\\(?:begin|end)\{[a-z*]+\}"
)
_COMMAND = re.compile(r"\\([A-Za-z]+)")


def _tokens(math: str, indices: bool = False):
    """The symbols of a math string: ``(symbol, subscripted)``, ``symbol`` with its decoration
    (``\\tilde\\mu``, ``\\hat y``, ``\\mathcal M``); commands other than Greek letters are skipped.
    A symbol that is itself a sub- or superscript (the ``K`` of ``W_K``, the ``\\mu`` of ``x_\\mu``) is an
    index: yielded only with ``indices=True``, and then only the indices."""
    math = _NOT_SYMBOLS.sub(" ", math)
    keep = set(_GREEK) | {
        "hat",
        "tilde",
        "bar",
        "widetilde",
        "widehat",
        "mathcal",
        "mathbf",
        "star",
    }
    # a dropped command leaves a mark, so that its sub- and superscripts (\sum_i) attach to nothing
    math = _COMMAND.sub(lambda m: m.group(0) if m.group(1) in keep else " # ", math)
    for m in _TOKEN.finditer(math):
        if bool(m.group("index")) != indices:
            continue
        dec = re.sub(r"[\s{]", "", m.group("dec"))
        sub = _SUBSCRIPTED.match(math, m.end()) is not None
        star = "^*" if m.group("star") else ""  # x^*, \eta^\star: a symbol of its own
        yield (f"{dec} {m.group('base')}{star}" if dec else m.group("base") + star), sub


def _symbol_keys(tex: str) -> set[str]:
    """The symbols a registry or local entry names: the first symbol of each comma-separated piece (a
    subscripted entry ``h_k`` names ``h_``: only subscripted uses of ``h``)."""
    keys = set()
    for piece in re.split(r",\\\s", tex):
        first = next(_tokens(piece), None)
        if first is not None:
            keys.add(f"{first[0]}_" if first[1] else first[0])
    return keys


@dataclass(frozen=True)
class Local:
    """Letters that are not book-wide: ``symbols`` (TeX, comma separated) and what they are for."""

    symbols: str
    meaning: str


LOCAL = (
    Local("i, j, k, m, t, l", "indices"),
    Local(
        "a, b, c, q, r, u, G, \\xi, \\beta, \\zeta",
        "scratch names of a proof, an exercise or a paragraph, defined where they are used "
        "(e.g. $c$ for the label row of $W^{KQ}$ in chapters 2–3, $u = w/\\|w\\|$ in chapters 3–4)",
    ),
    Local("z", "the argument of a function of one real variable ($\\He_k(z)$, $f(z)$)"),
    Local(
        "e, \\pi, I, O, P, \\delta",
        "the constants $e$ and $\\pi$, the identity $I$ ($I_d$), "
        "$O(\\cdot)$, a probability or projection $P$, Kronecker's $\\delta_{jk}$",
    ),
)


def _local_keys(local=LOCAL) -> set[str]:
    """Every symbol :data:`LOCAL` lists, with and without a subscript."""
    keys = set()
    for entry in local:
        for piece in entry.symbols.split(","):
            keys |= {s for s, _ in _tokens(piece)} | {s + "_" for s, _ in _tokens(piece)}
    return keys


def _known(registry=REGISTRY, local=LOCAL) -> set[str]:
    keys = _local_keys(local)
    for symbol in registry:
        keys |= _symbol_keys(symbol.tex)
    return keys


# A lone symbol named right after a word is introduced by it ("with eigenvalues $\omega_j$", "let $h$");
# after a preposition or a verb it is only used ("of $h$", "is $h$").
_INTRODUCED = re.compile(r"(?P<word>[A-Za-z]{2,})[,:]?\s+\$(?P<math>[^$]+)\$")
_NOT_INTRODUCING = {
    "of",
    "in",
    "on",
    "is",
    "are",
    "and",
    "or",
    "to",
    "at",
    "by",
    "as",
    "from",
    "than",
    "that",
    "so",
    "gives",
    "give",
    "equals",
    "times",
    "into",
    "over",
    "under",
    "then",
    "hence",
    "because",
    "if",
}
_LONE = re.compile(
    rf"^\s*(?:{_DECOR})?(?:\\(?:{'|'.join(_GREEK)})(?![A-Za-z])|[A-Za-z])\s*\}}?"
    r"(?:_\s*(?:\{[^{}]*\}|\\?[A-Za-z0-9]+))?(?:\^\s*(?:\{[^{}]*\}|\\?[A-Za-z0-9*]+))?\s*$"
)


def _local_definitions(text: str) -> set[str]:
    """The symbols a chapter defines: ``h`` for a bare ``h``, ``h_`` for a subscripted one."""
    found = set()
    for d in definitions(text):
        first = next(_tokens(d.lhs), None)
        # λ_3 = 0.3 says what λ_3 is worth, not what it is
        if first is not None and not re.fullmatch(r"[-+\d.,\s]+", d.rhs):
            found.add(first[0] + "_" if first[1] else first[0])
    for m in _INTRODUCED.finditer(text):
        if m.group("word").lower() in _NOT_INTRODUCING or not _LONE.match(m.group("math")):
            continue
        first = next(_tokens(m.group("math")))
        found.add(first[0] + "_" if first[1] else first[0])
    return found


def undefined(text: str, path: str = "<text>", known: set[str] | None = None) -> list[str]:
    """One message per symbol of a chapter's math that is neither registered, nor listed in
    :data:`LOCAL`, nor defined in the chapter (a definition clause, or introduced by a word)."""
    text = blank_code_cells(text)
    known = _known() if known is None else known
    local = _local_definitions(text)
    seen, found = set(), []
    for m in _MATH.finditer(text):
        body = m.group(1) if m.group(1) is not None else m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        for sym, sub in _tokens(body):
            key = sym + "_" if sub else sym
            defined = {sym, sym + "_"} & local  # a local definition names the letter
            if sym in known or key in known or defined or key in seen:
                continue
            seen.add(key)
            found.append(f"{path}:{line}: ${sym}$ is used but defined nowhere")
    return found


# A Greek letter as a running index: of a sum or product, a leave-one-out subscript, a superscript label.
_G = "|".join(_GREEK)
_RUNNING = re.compile(
    rf"\\(?:sum|prod)_\{{?\s*\\({_G})(?![A-Za-z])|_\{{-\\({_G})\}}|\^\{{?\\({_G})(?![A-Za-z])"
)


# The book's scalar parameters: subscripted, they name another quantity (λ_j an eigenvalue, σ_min a singular
# value), unless the registry or the chapter defines the subscripted form.
_SCALARS = {"S", "\\lambda", "\\sigma", "\\alpha", "\\tau", "\\kappa", "\\rho", "d", "N", "n", "K"}


def _registered_keys() -> set[str]:
    """The symbols of :data:`REGISTRY` that :data:`LOCAL` does not also list."""
    keys = set()
    for symbol in REGISTRY:
        keys |= _symbol_keys(symbol.tex)
    return keys - _local_keys()


def _meaning(key: str) -> str:
    for symbol in REGISTRY:
        if key in _symbol_keys(symbol.tex):
            return symbol.meaning
    return "?"


def other_meanings(text: str, path: str = "<text>") -> list[str]:
    """One message per use of a registered symbol in another role than its registered one, where the
    chapter does not define it: a registered letter as an index (``x_\\mu``, ``\\sum_\\mu``), a registered
    scalar as a subscripted family (``\\lambda_j``), or a definition of a registered letter in a form the
    registry does not know (``\\sigma = \\|w\\|/\\sqrt d`` beside the registered ``\\sigma^2``)."""
    text = blank_code_cells(text)
    registered = _registered_keys()
    local = _local_definitions(text)
    seen, found = set(), []
    for m in _MATH.finditer(text):
        body = m.group(1) if m.group(1) is not None else m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        for match in _RUNNING.finditer(body):
            sym = "\\" + next(g for g in match.groups() if g)
            if {sym, sym + "_", sym + "^*"} & registered and ("index", sym) not in seen:
                seen.add(("index", sym))
                found.append(
                    f"{path}:{line}: ${sym}$ is used as an index; registered as '{_meaning(sym)}'"
                )
        for sym, sub in _tokens(body):
            if sub and sym in _SCALARS and sym + "_" not in registered | local:
                if ("family", sym) not in seen:
                    seen.add(("family", sym))
                    found.append(
                        f"{path}:{line}: ${sym}_\\cdot$ is used as a family; ${sym}$ is registered "
                        f"as '{_meaning(sym)}'"
                    )
    for d in definitions(text, path):
        bare = list(_tokens(d.lhs))
        if len(bare) != 1 or _squash(d.lhs) != bare[0][0].replace(" ", "") or symbol_of(d.lhs):
            continue
        if is_value(d.rhs.strip()):
            continue
        sym = bare[0][0]
        if sym in registered:
            found.append(f"{d}: defines ${d.lhs}$, registered as '{_meaning(sym)}'")
    return found


def second_names(texts: dict[str, str]) -> list[str]:
    """Two variants of one letter defined by the same formula (``\\tilde\\mu = x^*\\mathcal M_{\\kappa/\\tau}(x^*)``
    beside ``\\mu^* = x^* \\mathcal M_{\\kappa/\\tau}(x^*)``): one quantity under two names."""
    names: dict[tuple[str, str], dict[str, str]] = {}
    for path, text in texts.items():
        for d in definitions(text, path):
            lhs = list(_tokens(d.lhs))
            if d.rel != "=" or len(lhs) != 1 or not _LONE.match(d.lhs) or is_value(d.rhs.strip()):
                continue
            base = lhs[0][0].split()[-1].removesuffix("^*")  # \tilde\mu and \mu^* are both \mu
            names.setdefault((base, _squash(d.rhs)), {}).setdefault(_squash(d.lhs), str(d))
    return [
        " and ".join(sorted(found.values())) + ": one formula, two names"
        for found in names.values()
        if len(found) > 1
    ]


def shared_unregistered(texts: dict[str, str]) -> list[str]:
    """Symbols that are neither registered nor in :data:`LOCAL` but used in more than one chapter:
    a book-wide symbol belongs in the registry, with one meaning."""
    known = _known()
    chapters: dict[str, list[str]] = {}
    for path, text in texts.items():
        symbols = set()
        for m in _MATH.finditer(blank_code_cells(text)):
            body = m.group(1) if m.group(1) is not None else m.group(2)
            symbols |= {s + "_" if sub else s for s, sub in _tokens(body)}
        for key in symbols:
            if key not in known and key.rstrip("_") not in known:
                chapters.setdefault(key.rstrip("_"), []).append(path)
    return [
        f"${key}$ is used in {', '.join(sorted(set(paths)))} and registered nowhere"
        for key, paths in sorted(chapters.items())
        if len(set(paths)) > 1
    ]


def chapter_paths(root: Path) -> list[Path]:
    """The pages the scans read: the chapters' sources (``_toc.yml``'s) and the theory explorer."""
    return chapter_sources(root) + [root / "chapters/explorer.md"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["write", "check", "scan"])
    add_root_option(parser)
    args = parser.parse_args(argv)
    root = args.root or find_root()
    page = root / PAGE
    if args.command == "write":
        page.write_text(render_page())
        return 0
    if args.command == "check":
        stale = page.read_text() != render_page()
        if stale:
            print(f"{PAGE} is stale: run python -m booktools.notation write")
        return int(stale)
    problems = []
    for path in chapter_paths(root):
        problems += clashes(path.read_text(), str(path.relative_to(root)))
    print("\n".join(problems) or "no clashes")
    return int(bool(problems))


if __name__ == "__main__":
    sys.exit(main())
