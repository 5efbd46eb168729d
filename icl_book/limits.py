"""The compute budget of one call: what a declared cost may reach, and how to raise it.

Every public callable whose work grows with an argument declares that cost (``n_test`` prompts ×
their length, cycles × blocks, layers × width², ...). A call whose estimate exceeds the budget is
refused at once with a :class:`CostRefused` that states the estimate, the formula and how to raise
the budget: inside ``with budget(operations=...)`` (or ``bytes=``) the same call runs.

A declared cost counts *operations* calibrated on the book's machines to about a nanosecond of one
core each (each estimate says what it counts and what was measured), so the default of ``5e9`` is
about five seconds; memory is counted in bytes of the largest allocation, 1 GiB by default.

>>> from icl_book.limits import budget
>>> with budget(operations=1e13):
...     pass  # a call the default budget refuses runs here
"""

from __future__ import annotations

import contextlib
import contextvars
import numbers

__all__ = ["DEFAULT_BUDGET", "CostRefused", "budget", "current_budget"]

#: The budget outside any :func:`budget` block, in operations (about 1 ns each) and bytes of memory.
DEFAULT_BUDGET = {"operations": 5e9, "bytes": float(2**30)}
# A context variable, not a module global: threads and asyncio tasks each see their own budget.
_BUDGET = contextvars.ContextVar("icl_book_budget", default=DEFAULT_BUDGET)


class CostRefused(ValueError):
    """A call whose declared cost exceeds the current budget (a ``ValueError``)."""


def current_budget() -> dict:
    """The budget in force here: ``{"operations": ..., "bytes": ...}``."""
    return dict(_BUDGET.get())


@contextlib.contextmanager
def budget(*, operations: float | None = None, bytes: float | None = None):  # noqa: A002
    """Raise (or lower) the budget inside a ``with`` block.

    Parameters
    ----------
    operations
        Operations one call may declare, a number ``> 0`` (``inf``: no limit; ``None``: unchanged).
    bytes
        Bytes its largest allocation may take, ``> 0`` (``inf``: no limit; ``None``: unchanged).
    """
    new = current_budget()
    for key, value in (("operations", operations), ("bytes", bytes)):
        if value is None:
            continue
        if (
            isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0
        ):  # NaN too
            raise ValueError(f"{key} must be a real number > 0, got {value!r}")
        new[key] = float(value)
    token = _BUDGET.set(new)
    try:
        yield
    finally:
        _BUDGET.reset(token)
