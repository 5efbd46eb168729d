"""The ranges every closed form accepts, as declared constraints, and the check of ratio arrays."""

from __future__ import annotations

import math

import numpy as np

from .. import hermite
from .._declare import Array, Callable, Integer, Interval
from .._validate import (
    ArgumentTypeError,
    _raw_array,
)

# The values of the ranges; each is documented where the package exports it
# (icl_book/theory/__init__.py, shown on the API page).
MIN_RATIO = 1e-8
MIN_RIDGE = 1e-12
MAX_RIDGE = 1e100
MAX_NOISE_VAR = 1e100

# The declared constraints (:mod:`icl_book._declare`), checked before the body runs.
_RATIO = Array(finite=False, within=Interval(MIN_RATIO, math.inf, allow_inf=True))
_NOISE = Array(within=Interval(0.0, MAX_NOISE_VAR))
_NOISE_SCALAR = Interval(0.0, MAX_NOISE_VAR)
_RIDGE = Array(within=(Interval(0.0, 0.0), Interval(MIN_RIDGE, MAX_RIDGE)))
_LINK = Callable(names=tuple(hermite.LINKS))
_GAMMA = Array(ndim=2)
_ALPHA = Interval(MIN_RATIO, math.inf)
_COV = Array(ndim=2)
_CONTEXT = Integer(1, None)
MAX_GD_ENTRY = 1e40
MAX_COV_ENTRY = 1e300
_GD_GAMMA = Array(ndim=2, within=Interval(-MAX_GD_ENTRY, MAX_GD_ENTRY))
_GD_COV = Array(ndim=2, within=Interval(-MAX_GD_ENTRY, MAX_GD_ENTRY))
_PRECONDITIONER_COV = Array(ndim=2, within=Interval(-MAX_COV_ENTRY, MAX_COV_ENTRY))


def _check_array(name: str, value, *, positive: bool, minimum: float | None = None) -> np.ndarray:
    """``value`` as a float64 array; every entry ``> 0`` (``positive``) or ``>= 0``; NaN rejected.

    ``inf`` is accepted (it is a meaningful limit for α, τ and κ). ``bool`` and ``str`` are refused,
    not coerced. ``minimum`` is a stricter lower bound for positive entries.
    """
    if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a real number or an array of them, got {value!r}")
    arr = _raw_array(name, value).astype(np.float64)  # the shared check, before any conversion
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not be NaN, got {value!r}")
    if positive and np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0, got {value!r}")
    if not positive and np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    if minimum is not None and np.any((arr > 0) & (arr < minimum)):
        zero = "" if positive else "0 or "
        raise ValueError(
            f"{name} must be {zero}>= {minimum:g} (smaller values are outside the formulas' "
            f"floating-point range), got {value!r}"
        )
    return arr
