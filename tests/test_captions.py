"""Figure captions write their mathematics as math: in the chapters' figure metadata, on the rendered
chapter pages and in the figure index (``chapters/figures.md``, a Markdown table, where ``|`` splits cells).

A caption is MyST inline text (myst-nb renders it with ``nested_render_text``), so ``$T^{-1/2}$`` becomes a
MathJax formula; ``T^(−1/2)``, ``σ²`` or ``e_ICL`` written as plain text stay plain text.
"""

from __future__ import annotations

import re

import nbformat
import pytest
from bs4 import BeautifulSoup

from booktools import notebooks
from booktools.chapters import chapter_sources

from .conftest import ROOT

HTML = ROOT / "_build" / "html"
MATH = re.compile(r"\$([^$]+)\$")
# What only mathematics writes, outside ``$…$``: sub- and superscripts (``T^(``, ``e_ICL``, ``σ²``, ``μ₁``,
# ``xᵀ``), TeX, Greek letters, mathematical operators (−, ≤, ∞, ∈, ≈, ≫, √), ``‖``, ``ℓ``, ``×``, ``·``, a
# combining accent (``R̂``), an asterisk (``R*``), bars (``|z|``), and a lone letter other than the words
# "a", "A" and "I" (``against N``, ``d = 5``).
PLAIN_MATH = re.compile(
    r"[\^_\\|*×·‖ℓ¹²³\u0300-\u036f\u0370-\u03ff\u1d2c-\u1d6a\u2070-\u209f\u2200-\u22ff]"
    r"|(?<![\w'’])(?![aAI]\b)[A-Za-z](?![\w'’])"
)


def caption_problems(caption: str) -> list[str]:
    """What in ``caption`` is mathematics written as plain text, or math the figure index cannot hold."""
    if caption.count("$") % 2:
        return ["an unclosed $"]
    problems = [
        f"plain-text math {m.group(0)!r}" for m in PLAIN_MATH.finditer(MATH.sub(" ", caption))
    ]
    for tex in MATH.findall(caption):
        if "|" in tex:  # in a Markdown table an escaped \| is TeX's ‖: write \lvert, \rVert
            problems.append(f"a | in ${tex}$ (write \\lvert … \\rvert or \\lVert … \\rVert)")
        if not tex.isascii():
            problems.append(f"Unicode in ${tex}$ (write TeX: \\sigma, ^2, \\le)")
    return problems


def book_captions() -> dict[str, str]:
    """Every figure's caption, by figure name, from the executed notebooks the book renders."""
    captions = {}
    for md in chapter_sources(ROOT):
        for cell in nbformat.read(md.with_suffix(".ipynb"), as_version=4).cells:
            figure = cell.metadata.get("mystnb", {}).get("figure")
            if figure and figure.get("caption"):
                captions[figure["name"]] = " ".join(figure["caption"].split())
    return captions


def test_every_caption_writes_its_mathematics_as_math():
    captions = book_captions()
    assert len(captions) >= 30, f"only {len(captions)} captions found"
    problems = {name: p for name, caption in captions.items() if (p := caption_problems(caption))}
    assert problems == {}


@pytest.mark.parametrize(
    "caption",
    [
        "Dashed guides show T^(−1/2) and T^(−3/2).",  # a superscript in plain text
        "the risk σ² + E[2‖A‖²_F + (tr A)²]",  # Greek, superscripts, a norm, a subscript
        "the simulated ridgeless e_ICL",  # a subscript
        "the risk R* of the best step",  # an asterisk
        "against the context length N (d = 5)",  # lone letters
        "Kinked links (ReLU, |z|, sign)",  # bars
        "the slope −1",  # a minus sign
        "the risk $\\sigma^2$ at $d = 5",  # an unclosed $
        "the norm $\\|A\\|_F$",  # a | in math splits the figure index's table cell
        "the noise $σ^2$",  # Unicode in math
    ],
)
def test_the_caption_check_finds_plain_math(caption):
    assert caption_problems(caption) != []


def test_alt_texts_stay_plain_words():
    """A screen reader reads the alt text aloud: TeX there would be read out character by character."""
    alts = {}
    for md in chapter_sources(ROOT):
        for cell in nbformat.read(md.with_suffix(".ipynb"), as_version=4).cells:
            mystnb = cell.metadata.get("mystnb", {})
            if "figure" in mystnb:
                alts[mystnb["figure"]["name"]] = mystnb.get("image", {}).get("alt", "")
    assert [name for name, alt in alts.items() if not alt] == [], "figures without alt text"
    assert [name for name, alt in alts.items() if "$" in alt or "\\" in alt] == []


def test_the_caption_check_passes_math_and_prose():
    caption = (
        "Error against $\\tau = n/d^2$ at $d = 100$ (mean ± sd over 3 runs; 95 % intervals); "
        "a ridge $\\lambda = 0.1$ for $\\lvert z\\rvert$, the pool's $\\hat R$. Memorisation → "
        "generalisation, log-log axes, a top-left block."
    )
    assert caption_problems(caption) == []


# --- the figure index: a Markdown table cell per caption --------------------------------------------
def test_the_figure_index_escapes_bars_in_text_and_keeps_math_whole():
    cell = notebooks.caption_cell("a | b, $x^2 + \\lVert A\\rVert_F$", "fig-demo")
    assert cell == "a \\| b, $x^2 + \\lVert A\\rVert_F$"


def test_the_figure_index_refuses_a_bar_in_math():
    with pytest.raises(ValueError, match=r"fig-demo.*\|.*\\lvert"):
        notebooks.caption_cell("the norm $\\|A\\|_F$", "fig-demo")


# --- the built site: the captions' math typeset by MathJax --------------------------------------------
def _built(page: str) -> str:
    path = HTML / page
    if not path.exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    return path.read_text(encoding="utf-8")


def _rendered_problems(element, caption: str) -> list[str]:
    """How ``element`` (a rendered caption) fails to show ``caption``'s math as MathJax input."""
    shown = [" ".join(s.get_text().split()) for s in element.select("span.math")]
    wanted = [f"\\({' '.join(tex.split())}\\)" for tex in MATH.findall(caption)]
    problems = [] if shown == wanted else [f"math shown {shown}, wanted {wanted}"]
    for span in element.select("span.math"):
        span.decompose()
    text = element.get_text(" ")
    problems += [f"plain-text math {m.group(0)!r}" for m in PLAIN_MATH.finditer(text)]
    return problems + (["a literal $"] if "$" in text else [])


def _figure_number(element) -> None:
    """Drop the caption's number ("Fig. 1.2") and its permalink, which are not the caption."""
    for part in element.select("span.caption-number, a.headerlink"):
        part.decompose()


def test_chapter_pages_typeset_their_captions_math():
    captions = book_captions()
    seen, problems = set(), {}
    for md in chapter_sources(ROOT):
        page = BeautifulSoup(_built(f"chapters/{md.stem}.html"), "html.parser")
        for figure in page.select("figure[id]"):
            if figure["id"] not in captions:
                continue
            seen.add(figure["id"])
            caption = figure.find("figcaption")
            _figure_number(caption)
            if found := _rendered_problems(caption, captions[figure["id"]]):
                problems[figure["id"]] = found
    assert seen == set(captions), f"figures not found on their pages: {set(captions) - seen}"
    assert problems == {}


def test_the_figure_index_typesets_its_captions_math():
    captions = book_captions()
    page = BeautifulSoup(_built("chapters/figures.html"), "html.parser")
    seen, problems = set(), {}
    for row in page.select("article table tbody tr"):
        cells = row.find_all("td")
        link = cells[0].find("a", href=True)
        name = link["href"].rpartition("#")[2]
        seen.add(name)
        if found := _rendered_problems(cells[1], captions[name]):
            problems[name] = found
    assert seen == set(captions), f"figures missing from the index: {set(captions) - seen}"
    assert problems == {}
