"""The book's figure style: one look for every chapter.

Opaque white backgrounds keep figures readable in the rendered book's dark mode; the palette is the
colour-blind-safe set of Okabe and Ito; markers distinguish series in greyscale print as well.
"""

from __future__ import annotations

import matplotlib as mpl
from cycler import cycler

__all__ = ["PALETTE", "MARKERS", "COLUMN_WIDTH", "SMALLEST_FONT_PT", "DPI", "use_book_style"]

#: Okabe–Ito colour-blind-safe palette (black last, for reference lines).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
#: Marker per series, in the same order as :data:`PALETTE`.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: Width of the book's text column in inches at the style's nominal 105 CSS px per inch (672 px at a
#: 1280-px window). A figure no wider than this is shown at its natural size, so its text keeps the size
#: it was given; wider figures are scaled down, and their text with them.
COLUMN_WIDTH = 6.4
#: Smallest text the style uses (tick labels, legends), in points. At :data:`COLUMN_WIDTH` it renders
#: at about 9.5 CSS px; ``tests/test_figures.py`` measures every figure of the built book against it.
SMALLEST_FONT_PT = 9
#: Pixels per inch of the PNGs: twice the column's nominal 105, so figures are sharp on 2x screens.
DPI = 210


def use_book_style() -> None:
    """Set matplotlib's defaults to the book's style (call once at the top of a chapter)."""
    mpl.rcParams.update(
        {
            "figure.figsize": (COLUMN_WIDTH, 4.0),
            "figure.dpi": DPI,
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
