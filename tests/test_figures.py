"""Figures are legible and sharp: their smallest text renders at >= 9 CSS px at a 1280-px window, and their PNGs
have at least two pixels per CSS pixel (sharp on 2x screens).

How big the text is comes from the PNG itself: ``icl_book.plotting.figure_png`` (the notebooks' PNG formatter
under ``use_book_style``) records the figure's smallest font size in a PNG text chunk, and every matplotlib PNG
records its pixels per inch. In the browser, text of ``pt`` points in a PNG of ``dpi`` pixels per inch, shown
``rendered`` CSS px wide out of ``natural`` pixels, is ``pt / 72 * dpi * rendered / natural`` CSS px.
``make test`` builds the book before these run (a real browser: playwright driving Debian's chromium).
"""

from __future__ import annotations

import re

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.text
import numpy as np
import pytest
from PIL import Image

from booktools.chapters import chapter_sources, chapter_stems
from icl_book import plotting

from .browser import find_chromium, serve
from .conftest import ROOT

HTML = ROOT / "_build" / "html"
MIN_CSS_PX = 9
WINDOW = {"width": 1280, "height": 900}

# Every image in the article body: its file, its rendered width in CSS px, its natural width in pixels, and
# the width of the box it sits in (the column). Folded solutions are opened first so that their figures count.
_MEASURE_JS = """() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  return Array.from(document.querySelectorAll('article img')).map(img => {
    const box = img.closest('figure') || img.parentElement, cs = getComputedStyle(box);
    return {src: img.getAttribute('src'), url: img.src, complete: img.complete,
            rendered: img.getBoundingClientRect().width, natural: img.naturalWidth,
            in_figure: !!img.closest('figure'),
            column: box.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight)};
  });
}"""


# --- the style: no text below SMALLEST_FONT_PT ------------------------------------------------------
@pytest.fixture
def book_style():
    with matplotlib.rc_context():
        plotting.use_book_style()
        yield
    plt.close("all")


def _busy_figure():
    """A column-wide figure with every kind of text a chapter draws (defaults only)."""
    fig, axes = plt.subplots(1, 2, figsize=(plotting.COLUMN_WIDTH, 3.2))
    x = np.linspace(0.1, 3, 20)
    axes[0].plot(x, x**2, label="theory")
    axes[0].errorbar(x[::4], x[::4] ** 2, yerr=0.3, fmt="o", label="simulation")
    axes[0].set(xlabel=r"context length $N$", ylabel=r"error $e_{\mathrm{ICL}}$", title="a title")
    axes[0].set_yscale("log")
    axes[0].legend(title="legend title")
    axes[0].annotate("an annotation", (1, 1))
    image = axes[1].imshow(np.arange(12.0).reshape(3, 4))
    fig.colorbar(image, ax=axes[1], label="colour bar")
    axes[1].text(0, 0, "text")
    fig.suptitle("a suptitle")
    return fig


def test_style_draws_no_text_below_the_smallest_font(book_style):
    fig = _busy_figure()
    fig.draw_without_rendering()
    texts = [
        t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()
    ]
    assert len(texts) > 20  # tick labels, labels, legend, colour bar, titles
    small = [(t.get_text(), t.get_fontsize()) for t in texts]
    small = [(s, size) for s, size in small if size < plotting.SMALLEST_FONT_PT]
    assert small == []
    assert plotting.smallest_font_size(fig) == plotting.SMALLEST_FONT_PT


def test_smallest_font_size_sees_a_small_text(book_style):
    fig = _busy_figure()
    fig.axes[0].legend(fontsize=7)
    assert plotting.smallest_font_size(fig) == 7


def test_the_style_numbers_agree():
    assert plotting.DPI == 2 * plotting.CSS_PX_PER_INCH  # two PNG pixels per CSS pixel
    assert plotting.COLUMN_WIDTH * plotting.CSS_PX_PER_INCH == pytest.approx(672)
    # At natural size the smallest text is pt/72 in at CSS_PX_PER_INCH:
    natural_px = plotting.SMALLEST_FONT_PT / 72 * plotting.CSS_PX_PER_INCH
    assert natural_px == pytest.approx(13.125) and natural_px >= MIN_CSS_PX


def test_figure_png_records_its_density_and_smallest_font_and_shows_at_half_size(book_style):
    import base64
    import io

    fig = _busy_figure()
    data, metadata = plotting.figure_png(fig)
    png = Image.open(io.BytesIO(base64.b64decode(data)))
    assert png.info["dpi"][0] == pytest.approx(plotting.DPI, abs=0.1)
    assert float(png.info[plotting.FONT_SIZE_KEY]) == plotting.SMALLEST_FONT_PT
    assert metadata == {"width": png.width // 2, "height": png.height // 2}
    assert plotting.figure_png(plt.figure()) is None  # empty figure: no image, as IPython's own


# --- the built book, in a browser -------------------------------------------------------------------
def png_record(path):
    """(pixels per inch, smallest font in points or None) recorded in the PNG at ``path``."""
    with Image.open(path) as png:
        dpi = png.info.get("dpi", (None,))[0]
        font = png.info.get(plotting.FONT_SIZE_KEY)
    return dpi, (float(font) if font is not None else None)


def measure_figures(site, pages, browser):
    """For every image of ``pages`` (paths under ``site``) at a 1280-px window in ``browser`` (a
    playwright ``Browser``, e.g. the ``chromium`` fixture): one row of facts."""
    rows = []
    with serve(site) as url:
        page = browser.new_page(viewport=WINDOW)
        try:
            for name in pages:
                page.goto(f"{url}/{name}", wait_until="load")
                for row in page.evaluate(_MEASURE_JS):
                    path = site / row["url"].removeprefix(url + "/")
                    if path.suffix.lower() != ".png":
                        continue
                    row["page"], row["file"] = name, path
                    row["dpi"], row["font_pt"] = png_record(path)
                    rows.append(row)
        finally:
            page.close()
    return rows


def text_css_px(row) -> float:
    """CSS px of the image's smallest text: pt/72 in at ``dpi`` pixels per inch, scaled by the browser."""
    return row["font_pt"] / 72 * row["dpi"] * row["rendered"] / row["natural"]


def figure_problems(rows) -> list[str]:
    problems = []
    for row in rows:
        where = f"{row['page']}: {row['src'].rsplit('/', 1)[-1][:12]}"
        if not (row["complete"] and row["natural"] > 0 and row["rendered"] > 0):
            problems.append(f"{where}: not loaded or not visible")
            continue
        if row["dpi"] is None or row["font_pt"] is None:
            problems.append(
                f"{where}: the PNG records no smallest font size: draw it under use_book_style() "
                "and re-execute the chapter (make execute)"
            )
            continue
        px = text_css_px(row)
        if px < MIN_CSS_PX:
            problems.append(
                f"{where}: smallest text {row['font_pt']:g} pt renders at {px:.1f} CSS px < {MIN_CSS_PX} "
                f"({row['natural']} px PNG at {row['dpi']:.0f} px/in shown {row['rendered']:.0f} px wide)"
            )
        if row["natural"] < 2 * row["rendered"] - 0.5:
            problems.append(
                f"{where}: {row['natural']} px PNG shown {row['rendered']:.0f} CSS px wide: "
                f"{row['natural'] / row['rendered']:.2f} pixels per CSS px, < 2 (soft on 2x screens)"
            )
    return problems


def _chapter_pages():
    return [f"chapters/{stem}.html" for stem in chapter_stems(ROOT)]


@pytest.fixture(scope="module")
def book_figures(chromium):
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    return measure_figures(HTML, _chapter_pages(), chromium)


@pytest.mark.browser
def test_every_figure_is_legible_and_sharp_at_1280_px(book_figures):
    assert len(book_figures) >= len(_chapter_pages())  # every chapter has figures
    problems = figure_problems(book_figures)
    measured = [text_css_px(r) for r in book_figures if r["font_pt"] and r["natural"]]
    if measured:
        print(f"smallest figure text over {len(measured)} figures: {min(measured):.1f} CSS px")
    assert problems == []


@pytest.mark.browser
def test_figures_fill_at_most_the_column_that_plotting_assumes(book_figures):
    # COLUMN_WIDTH (in) at CSS_PX_PER_INCH is the widest box a captioned figure sits in at 1280 px (one in a
    # folded solution or an admonition has less room; the legibility test measures it where it is).
    columns = [r["column"] for r in book_figures if r["in_figure"]]
    assert round(max(columns)) == round(plotting.COLUMN_WIDTH * plotting.CSS_PX_PER_INCH), columns


@pytest.mark.browser
def test_the_figure_check_fails_on_small_or_soft_images(tmp_path, chromium):
    find_chromium()
    with matplotlib.rc_context():
        plotting.use_book_style()
        # 1: a 12-in figure drawn by the style, scaled into the 672-px column: 9 pt become ~7 CSS px.
        wide, _ = plt.subplots(figsize=(12, 3))
        wide.axes[0].plot([0, 1], [0, 1], label="a legend")
        wide.axes[0].legend()
        wide.savefig(
            tmp_path / "wide.png",
            dpi=plotting.DPI,
            metadata={plotting.FONT_SIZE_KEY: "9"},
        )
        # 2: a 110-px/in PNG shown at its natural size: one pixel per CSS px.
        soft, _ = plt.subplots(figsize=(4, 3))
        soft.savefig(tmp_path / "soft.png", dpi=110, metadata={plotting.FONT_SIZE_KEY: "9"})
        # 3: the same PNG squeezed to 200 CSS px: sharp (2.2 pixels per CSS px) but its text ~6 px.
        soft.savefig(tmp_path / "squeezed.png", dpi=110, metadata={plotting.FONT_SIZE_KEY: "9"})
        plt.close("all")
    (tmp_path / "page.html").write_text(
        '<html><body style="margin:0"><article style="width:672px">'
        '<div><img src="wide.png" style="max-width:100%" alt="w"></div>'
        '<div><img src="soft.png" style="max-width:100%" alt="s"></div>'
        '<div><img src="squeezed.png" style="width:200px" alt="q"></div>'
        "</article></body></html>"
    )
    rows = measure_figures(tmp_path, ["page.html"], chromium)
    problems = figure_problems(rows)
    assert len(rows) == 3
    assert any(p.startswith("page.html: wide.png") and "CSS px <" in p for p in problems), problems
    assert any(p.startswith("page.html: soft.png") and "soft on 2x" in p for p in problems), (
        problems
    )
    squeezed = [p for p in problems if p.startswith("page.html: squeezed.pn")]
    assert len(squeezed) == 1 and "CSS px <" in squeezed[0], problems
    row = next(r for r in rows if r["src"] == "squeezed.png")
    assert text_css_px(row) == pytest.approx(9 / 72 * 110 * 200 / 440, rel=1e-3)
    assert len(problems) == 3, problems


# --- chapter sources: no explicit font below the style's smallest ----------------------------------
_FONT_ARG = re.compile(r"\b(fontsize|labelsize|title_fontsize)\s*=\s*([0-9.]+|['\"][a-z-]+['\"])")
_RELATIVE = {"xx-small": 0.579, "x-small": 0.694, "small": 0.833, "medium": 1.0}


def small_font_arguments(text: str, base_pt: float = 10.0) -> list[str]:
    """Explicit font sizes below SMALLEST_FONT_PT in code (numbers, or names relative to font.size)."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in _FONT_ARG.finditer(line):
            value = match.group(2).strip("'\"")
            if value[0].isalpha():
                # names are relative to font.size; "large", "x-large", ... are never below
                points = _RELATIVE.get(value, 1.0) * base_pt
            else:
                points = float(value)
            if points < plotting.SMALLEST_FONT_PT:
                found.append(f"{number}: {line.strip()}")
    return found


def test_chapters_set_no_font_below_the_smallest():
    sources = chapter_sources(ROOT)
    found = {src.name: small_font_arguments(src.read_text()) for src in sources}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_the_font_argument_scan_finds_small_fonts():
    code = (
        "ax.legend(fontsize=8)\nax.text(0, 0, 's', fontsize='small')\nax.tick_params(labelsize=9)\n"
    )
    code += "sample(size=3)\nax.set_title('t', fontsize='large')\n"
    assert [line.split(":")[0] for line in small_font_arguments(code)] == ["1", "2"]
