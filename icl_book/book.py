"""Small helpers used by the chapters themselves (not by the mathematics)."""

from __future__ import annotations

import sys

__all__ = ["in_colab", "glue"]


def in_colab() -> bool:
    """``True`` when running inside Google Colab."""
    return "google.colab" in sys.modules


def glue(name: str, value, fmt: str | None = None) -> None:
    """Store ``value`` under ``name`` for ``{glue:}`` references in the rendered book.

    ``fmt`` (e.g. ``".3f"``) fixes the printed precision, so the text is identical from run to run and
    with 1 or 2 threads. Outside the book toolchain (e.g. on Colab, where ``myst_nb`` is absent) nothing is
    stored. Nothing is returned, so a ``glue`` call at the end of a cell adds no output.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    text = format(value, fmt) if fmt is not None else str(value)
    try:
        from myst_nb import glue as _myst_glue
    except ImportError:  # Colab and plain installs: no book to glue into.
        return None
    # Glue the formatted *text* so that the page shows exactly the precision the notebook printed.
    _myst_glue(name, _GluedText(text), display=False)
    return None


class _GluedText(str):
    """A string whose plain-text repr is itself (no quotes), so ``{glue:}`` shows ``0.123``, not ``'0.123'``."""

    def __repr__(self) -> str:
        return str(self)
