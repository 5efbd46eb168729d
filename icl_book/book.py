"""Small helpers used by the chapters themselves (not by the mathematics).

``glue`` puts a number into the prose; ``claim`` states, beside that number, the sentence the prose
builds on it, and fails the chapter's execution (and so ``make execute`` and nbval) when it is false.
"""

from __future__ import annotations

import sys
from importlib import resources

import numpy as np

from ._declare import Free, OrNone, Text, declare

__all__ = ["in_colab", "glue", "claim", "ClaimFailed", "load_table"]


def in_colab() -> bool:
    """``True`` when running inside Google Colab."""
    return "google.colab" in sys.modules


@declare(
    name=Text(),
    value=Free("any value to show; glue refuses None, nan and inf itself"),
    fmt=OrNone(Text()),
)
def glue(name: str, value, fmt: str | None = None) -> str:
    """Store ``value`` under ``name`` for ``{glue:}`` references and return the text the page shows.

    ``fmt`` (e.g. ``".3f"``) fixes the printed precision, so the text is identical from run to run and
    with 1 or 2 threads. The returned string is exactly the glued text, so a cell can print it:
    ``print(f"μ_1 = {glue('mu1', mu1, '.4f')}")``. Outside the book toolchain (e.g. on Colab, where
    ``myst_nb`` is absent) nothing is stored, and the text is still returned.

    Do not end a cell with a bare ``glue(...)`` call: its text would become the cell's output
    (``tests/test_notebooks.py`` checks this).

    Raises
    ------
    ValueError
        If ``name`` is empty, or if the value is ``None`` or not finite (``nan``, ``±inf``; also inside
        a NumPy array or a 0-d torch tensor, which is glued as its number): a glued number that reads
        "None" or "nan" is a bug in the chapter, not a result.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if value is None:
        raise ValueError(f"value of {name!r} must not be None")
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        if value.dim() != 0:
            raise TypeError(
                f"value of {name!r} must be a number or text, got a tensor of shape "
                f"{tuple(value.shape)}"
            )
        value = value.item()  # a tensor's text is 'tensor(...)': glue its number, checked below
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biufc" and not np.all(np.isfinite(value)):
            raise ValueError(f"value of {name!r} must be finite, got {value}")
        if value.ndim == 0:
            value = value[()]  # a 0-d array: glue its scalar
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        if not np.isfinite(value):
            raise ValueError(f"value of {name!r} must be finite, got {value}")
    if isinstance(value, (complex, np.complexfloating)):
        raise TypeError(f"value of {name!r} must be real, got {value!r}")
    if fmt is not None and isinstance(value, (bool, np.bool_)):
        # a number format turns True into '1.000': glue a bool without fmt, or the number it counts
        raise TypeError(
            f"value of {name!r} is a bool; a number format {fmt!r} would print it as 1/0"
        )
    try:
        text = format(value, fmt) if fmt is not None else str(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"value of {name!r} ({type(value).__name__}) cannot be formatted with fmt={fmt!r}: {exc}"
        ) from None
    try:
        from myst_nb import glue as _myst_glue
    except ImportError:  # Colab and plain installs: no book to glue into.
        return text
    # Glue the formatted *text* so that the page shows exactly the precision the notebook printed.
    _myst_glue(name, _GluedText(text), display=False)
    return text


class _GluedText(str):
    """A string whose plain-text repr is itself (no quotes), so ``{glue:}`` shows ``0.123``, not ``'0.123'``."""

    def __repr__(self) -> str:
        return str(self)


class ClaimFailed(AssertionError):
    """A sentence of the book is contradicted by the number it interprets."""


@declare(
    holds=Free("a boolean scalar (reduce arrays with np.all/np.any), checked by claim"),
    sentence=Text(),
)
def claim(holds, sentence: str) -> None:
    """Fail loudly when a sentence the prose makes about a computed number is false.

    Prints nothing and returns ``None`` when the claim holds; raises :class:`ClaimFailed` (an
    ``AssertionError``) naming the sentence when it does not, so ``make execute`` and nbval fail.

    Parameters
    ----------
    holds : bool
        The condition the sentence asserts, computed from the numbers in the cell. It must be a
        Python or NumPy boolean scalar: reduce arrays with ``np.all`` or ``np.any`` first.
    sentence : str
        The claim in words, as the prose makes it: "block-coordinate descent approaches least squares".

    Examples
    --------
    >>> gap = [1.0, 0.1, 1e-5]
    >>> claim(gap[-1] < 1e-3 * gap[0], "the gap falls by three orders of magnitude")
    """
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError(f"sentence must be a non-empty string, got {sentence!r}")
    if not isinstance(holds, (bool, np.bool_)):
        raise TypeError(
            f"holds must be a bool (use np.all or np.any for arrays), got {type(holds).__name__}"
        )
    if not holds:
        raise ClaimFailed(
            f"the book claims: {sentence!r}, but the numbers computed here contradict it"
        )


@declare(
    name=Text(),
)
def load_table(name: str) -> np.ndarray:
    """A stored sweep table of the book (``icl_book/data/<name>.csv``) as a structured array.

    The tables hold simulations too slow for a chapter's time budget; ``booktools/tables.py``
    defines and computes them (its docstring gives the command). They ship inside the package,
    so a chapter loads them the same way from a clone and on Colab. Columns are named by the
    table's header; text columns (``set``, ``teacher``) are strings.

    Raises
    ------
    ValueError
        If ``name`` is not one of the stored tables (the message lists them).
    """
    data = resources.files("icl_book") / "data"
    names = sorted(p.name[:-4] for p in data.iterdir() if p.name.endswith(".csv"))
    if name not in names:
        raise ValueError(f"name must be one of the stored tables {names}, got {name!r}")
    with (data / f"{name}.csv").open(encoding="utf-8") as fh:
        return np.genfromtxt(
            fh, delimiter=",", names=True, skip_header=3, dtype=None, encoding="utf-8"
        )
