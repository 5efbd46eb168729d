"""The book's figure style: one look for every chapter.

Opaque white backgrounds keep figures readable in the rendered book's dark mode; the palette is the
colour-blind-safe set of Okabe and Ito; markers distinguish series in greyscale print as well.
"""

from __future__ import annotations

import matplotlib as mpl
from cycler import cycler

__all__ = ["PALETTE", "MARKERS", "use_book_style"]

#: Okabe–Ito colour-blind-safe palette (black last, for reference lines).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
#: Marker per series, in the same order as :data:`PALETTE`.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def use_book_style() -> None:
    """Set matplotlib's defaults to the book's style (call once at the top of a chapter)."""
    mpl.rcParams.update(
        {
            "figure.figsize": (6.4, 4.0),
            "figure.dpi": 110,
            "savefig.dpi": 110,
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
            "axes.titlesize": 11,
            "legend.frameon": False,
            "lines.linewidth": 1.8,
            "lines.markersize": 5,
            "image.cmap": "RdBu_r",
        }
    )
