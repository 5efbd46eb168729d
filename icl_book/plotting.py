"""The book's figure style: one look for every chapter.

Opaque white backgrounds keep figures readable in the rendered book's dark mode; the palette is the
colour-blind-safe set of Okabe and Ito; markers distinguish series in greyscale print as well.

How big a figure's text is on the page (checked in a browser by ``tests/test_figures.py``): notebook figures
are PNGs drawn at :data:`DPI` (210) pixels per inch and shown at half their pixel size, 105 CSS px per inch
(:func:`figure_png` puts that width into the output's metadata, which Jupyter, Colab and myst-nb honour). The
book's text column is 672 CSS px wide at a 1280-px window (sphinx-book-theme 1.3), that is 6.4 in at that
scale (:data:`COLUMN_WIDTH`). So a figure no wider than the column is shown at its natural size and its
smallest text, :data:`SMALLEST_FONT_PT` = 9 pt, is 9/72 × 105 ≈ 13.1 CSS px, with two PNG pixels per CSS
pixel (sharp on 2× screens). A wider figure is scaled down to the column (CSS ``max-width: 100%``) and its
text with it: ``9/72 × 672 / width_in`` px, still ≥ 9 px up to 9.3 in. Each PNG records its own smallest font
size (a PNG text chunk, :data:`FONT_SIZE_KEY`), so the browser test measures what was drawn.
"""

from __future__ import annotations

import base64
from io import BytesIO

import matplotlib as mpl
import matplotlib.figure
import matplotlib.text
from cycler import cycler

from ._declare import Instance, declare

__all__ = [
    "PALETTE",
    "MARKERS",
    "CSS_PX_PER_INCH",
    "COLUMN_WIDTH",
    "SMALLEST_FONT_PT",
    "DPI",
    "FONT_SIZE_KEY",
    "smallest_font_size",
    "figure_png",
    "use_book_style",
]

#: Okabe–Ito colour-blind-safe palette (black last, for reference lines).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
#: Marker per series, in the same order as :data:`PALETTE`.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: CSS pixels per inch of a figure shown at its natural size (matplotlib's ``figure.dpi``).
CSS_PX_PER_INCH = 105
#: Width of the book's text column in inches at :data:`CSS_PX_PER_INCH` (672 CSS px at a 1280-px window).
#: A figure no wider than this is shown at its natural size, so its text keeps the size it was given;
#: wider figures are scaled down to the column, and their text with them.
COLUMN_WIDTH = 672 / CSS_PX_PER_INCH
#: Smallest text the style uses (tick labels, legends), in points — 9/72 × 105 ≈ 13.1 CSS px at natural
#: size. ``tests/test_figures.py`` measures every figure of the built book (≥ 9 CSS px at 1280 px).
SMALLEST_FONT_PT = 9
#: Pixels per inch of the PNGs — twice :data:`CSS_PX_PER_INCH`, so figures are sharp on 2× screens.
DPI = 2 * CSS_PX_PER_INCH
#: Key of the PNG text chunk in which :func:`figure_png` records the figure's smallest font size (pt).
FONT_SIZE_KEY = "icl-book:smallest-font-pt"


@declare(
    fig=Instance((matplotlib.figure.Figure,)),
)
def smallest_font_size(fig) -> float:
    """Smallest font size (points) of the visible, non-empty text of ``fig`` (``inf`` if it has none).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure, drawn or not (tick labels are laid out first, without rendering).
    """
    if not isinstance(fig, mpl.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    fig.draw_without_rendering()  # tick labels exist only once the figure is laid out
    sizes = [
        t.get_fontsize()
        for t in fig.findobj(matplotlib.text.Text)
        if t.get_visible() and t.get_text().strip() and t.get_alpha() != 0
    ]
    return min(sizes, default=float("inf"))


@declare(
    fig=Instance((matplotlib.figure.Figure,)),
)
def figure_png(fig) -> tuple[str, dict[str, int]] | None:
    """A notebook's PNG of ``fig``: base64 data at :data:`DPI`, and a display size of half its pixels.

    The PNG records the figure's smallest font size (:data:`FONT_SIZE_KEY`) and, as every matplotlib PNG,
    its pixels per inch. :func:`use_book_style` installs this as IPython's PNG formatter for figures.

    Returns
    -------
    (data, metadata) : tuple[str, dict]
        Base64-encoded PNG and ``{"width": w // 2, "height": h // 2}`` in CSS px; ``None`` for an empty
        figure (as IPython's own formatter).
    """
    if not isinstance(fig, mpl.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    if not fig.axes and not fig.lines:
        return None
    smallest = smallest_font_size(fig)
    buffer = BytesIO()
    fig.canvas.print_figure(
        buffer,
        format="png",
        dpi=DPI,
        bbox_inches="tight",
        facecolor=fig.get_facecolor(),
        edgecolor=fig.get_edgecolor(),
        metadata={FONT_SIZE_KEY: f"{smallest:g}"},
    )
    data = buffer.getvalue()
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    scale = CSS_PX_PER_INCH / DPI
    metadata = {"width": int(width * scale), "height": int(height * scale)}
    return base64.b64encode(data).decode("ascii"), metadata


def _shell():
    try:
        from IPython import get_ipython  # optional: plain Python has no IPython
    except ImportError:
        return None
    shell = get_ipython()
    return shell if shell is not None and hasattr(shell, "display_formatter") else None


def _load_inline_backend() -> None:
    # In a notebook, matplotlib loads its inline backend lazily, at the first figure; loading it then would
    # reset the figure formatters (and rcParams it manages). Load it now, before the style is applied.
    if _shell() is not None and "inline" in str(mpl.rcParams._get("backend")):
        import matplotlib.pyplot as plt  # only in a notebook: pyplot picks a backend on import

        plt.switch_backend(mpl.rcParams._get("backend"))


def _install_png_formatter() -> None:
    shell = _shell()
    if shell is None:
        return
    from matplotlib.figure import Figure  # only in a notebook, like the formatter it registers

    formatters = shell.display_formatter.formatters
    for mime in ("image/svg+xml", "image/jpeg", "application/pdf"):
        formatters[mime].pop(Figure, None)  # one image per figure
    formatters["image/png"].for_type(Figure, figure_png)


def use_book_style() -> None:
    """Set matplotlib's defaults to the book's style (call once at the top of a chapter).

    In a notebook it also installs :func:`figure_png` as the figures' PNG formatter (after loading the
    inline backend, which would otherwise reset the formatters when the first figure is made).
    """
    _load_inline_backend()
    mpl.rcParams.update(
        {
            "figure.figsize": (COLUMN_WIDTH, 4.0),
            "figure.dpi": CSS_PX_PER_INCH,
            "savefig.dpi": DPI,
            "figure.facecolor": "white",
            "axes.facecolor": "white",
            "savefig.facecolor": "white",
            "savefig.transparent": False,
            "axes.prop_cycle": cycler(color=PALETTE),
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "font.size": 10,
            "axes.titlesize": 10,
            "axes.labelsize": 10,
            "figure.titlesize": 11,
            "xtick.labelsize": SMALLEST_FONT_PT,
            "ytick.labelsize": SMALLEST_FONT_PT,
            "legend.fontsize": SMALLEST_FONT_PT,
            "legend.title_fontsize": SMALLEST_FONT_PT,
            "legend.frameon": False,
            "lines.linewidth": 1.8,
            "lines.markersize": 5,
            "image.cmap": "RdBu_r",
        }
    )
    _install_png_formatter()
