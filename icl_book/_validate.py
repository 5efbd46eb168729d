"""Argument validation shared by every module: clear errors that name the argument and the accepted range."""

from __future__ import annotations

import numbers

import numpy as np


def positive_int(name: str, value, minimum: int = 1) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= minimum``; raise otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if (
            isinstance(value, numbers.Real)
            and float(value).is_integer()
            and not isinstance(value, bool)
        ):
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def finite_float(name: str, value) -> float:
    """Return ``value`` as a finite ``float``; raise otherwise."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    if not np.isfinite(out):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return out


def nonnegative_float(name: str, value) -> float:
    """Return ``value`` as a finite ``float >= 0``; raise otherwise."""
    out = finite_float(name, value)
    if out < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return out


def positive_float(name: str, value) -> float:
    """Return ``value`` as a finite ``float > 0``; raise otherwise."""
    out = finite_float(name, value)
    if out <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return out


def as_array(name: str, value, ndim: int) -> np.ndarray:
    """Return ``value`` as a float64 array with ``ndim`` dimensions; raise a ``ValueError`` naming it."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {arr.shape}")
    return arr


def check_prompt_shapes(xs, ys, x_query) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a batch of prompts ``xs (B, N, d)``, ``ys (B, N)``, ``x_query (B, d)``.

    Returns the three arrays as float64; a mismatch raises a ``ValueError`` naming the offending
    argument and both shapes.
    """
    xs = as_array("xs", xs, 3)
    ys = as_array("ys", ys, 2)
    x_query = as_array("x_query", x_query, 2)
    b, n, d = xs.shape
    if ys.shape != (b, n):
        raise ValueError(
            f"ys must have shape (B, N) = {(b, n)} to match xs {xs.shape}, got {ys.shape}"
        )
    if x_query.shape != (b, d):
        raise ValueError(
            f"x_query must have shape (B, d) = {(b, d)} to match xs {xs.shape}, got {x_query.shape}"
        )
    return xs, ys, x_query


def square_matrix(name: str, value, dim: int) -> np.ndarray:
    """Return ``value`` as a ``(dim, dim)`` float64 array; raise a ``ValueError`` naming it otherwise."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (dim, dim):
        raise ValueError(f"{name} must have shape {(dim, dim)}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def generator(rng) -> np.random.Generator:
    """Require an explicit ``numpy.random.Generator`` (no hidden global seeding)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator (e.g. np.random.default_rng(0)), got {type(rng).__name__}"
        )
    return rng


def task_vectors(name: str, value, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """A ``(K, dim)`` pool of single-index task vectors and their norms; rows must be finite and non-zero."""
    pool = as_array(name, value, 2)
    if pool.shape[1] != dim or pool.shape[0] < 1:
        raise ValueError(
            f"{name} must have shape (K, dim) = (K, {dim}) with K >= 1, got {pool.shape}"
        )
    norms = np.linalg.norm(pool, axis=1)
    if not np.all(np.isfinite(pool)) or np.any(norms == 0):
        raise ValueError(f"{name} rows must be finite and non-zero")
    return pool, norms


def reduced_gamma(name: str, value) -> np.ndarray:
    """A finite ``(d, d+1)`` matrix ``Γ`` of the reduced linear-attention model."""
    gamma = as_array(name, value, 2)
    d = gamma.shape[0]
    if gamma.shape != (d, d + 1):
        raise ValueError(f"{name} must have shape (d, d+1), got {gamma.shape}")
    if not np.all(np.isfinite(gamma)):
        raise ValueError(f"{name} must be finite")
    return gamma


def kernel_inputs(x, xp) -> tuple[np.ndarray, np.ndarray]:
    """Inputs ``(..., n, d)`` and ``(..., m, d)`` of a kernel ``k(X, X')`` as float64 arrays."""
    x = np.asarray(x, dtype=np.float64)
    xp = np.asarray(xp, dtype=np.float64)
    if x.ndim < 2 or xp.ndim < 2 or x.shape[-1] != xp.shape[-1]:
        raise ValueError(
            f"kernel inputs must have shapes (..., n, d) and (..., m, d), got {x.shape}, {xp.shape}"
        )
    return x, xp
