"""Argument validation shared by every module: clear errors that name the argument and the accepted range.

Every public function of the package validates through these helpers, so one rule holds everywhere:
numbers are real numbers (``bool`` and ``str`` are refused, never coerced), integers are integers
(``2.0`` is refused), arrays are finite, flags are booleans, covariances are symmetric positive
semidefinite, and sizes are checked before anything is allocated or enumerated.
"""

from __future__ import annotations

import numbers

import numpy as np


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong kind (a ``bool`` or ``str`` for a number, ``2.5`` for a count).

    It is both a ``TypeError`` and a ``ValueError``, so callers written against either keep working.
    """


#: Largest number of float64 entries a function may allocate for one result (2 GiB).
MAX_ENTRIES = 2**28


def _describe(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def integer(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as an ``int`` if it is an integer in ``[minimum, maximum]``; raise otherwise.

    Python and NumPy integers are accepted; ``bool``, floats (even ``2.0``) and strings are refused.
    """
    bounds = []
    if minimum is not None:
        bounds.append(f">= {minimum}")
    if maximum is not None:
        bounds.append(f"<= {maximum}")
    wanted = f"{name} must be an integer" + (" " + " and ".join(bounds) if bounds else "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{wanted}, got {_describe(value)} ({type(value).__name__})")
    out = int(value)
    if (minimum is not None and out < minimum) or (maximum is not None and out > maximum):
        raise ValueError(f"{wanted}, got {out}")
    return out


def positive_int(name: str, value, minimum: int = 1) -> int:
    """An integer ``>= minimum`` (default 1); see :func:`integer`."""
    return integer(name, value, minimum=minimum)


def nonnegative_int(name: str, value) -> int:
    """An integer ``>= 0``; see :func:`integer`."""
    return integer(name, value, minimum=0)


def real(
    name: str,
    value,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
) -> float:
    """Return ``value`` as a ``float`` in the given range; raise a ``TypeError``/``ValueError`` otherwise.

    ``bool`` and ``str`` are refused (``True`` is not a noise level, ``"0.1"`` is not a number); NaN
    is always refused; ``±inf`` only with ``allow_inf`` (and then only inside the range).
    """
    parts = []
    if low is not None:
        parts.append(f"> {low:g}" if low_open else f">= {low:g}")
    if high is not None:
        parts.append(f"< {high:g}" if high_open else f"<= {high:g}")
    kind = "a real number" if allow_inf else "a finite real number"
    wanted = f"{name} must be " + (" and ".join(parts) if parts else kind)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        if not (isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf"):
            raise ArgumentTypeError(
                f"{name} must be {kind}"
                + (" " + " and ".join(parts) if parts else "")
                + f", got {_describe(value)} ({type(value).__name__})"
            )
    try:
        out = float(value)
    except OverflowError:  # 10**400 or a Fraction beyond float64: say which argument
        raise ValueError(
            f"{name} must be {kind}"
            + (" " + " and ".join(parts) if parts else "")
            + f", got {_describe(value)}, which is beyond float64"
        ) from None
    if np.isnan(out) or (np.isinf(out) and not allow_inf):
        finite = "not NaN" if allow_inf else "finite"
        raise ValueError(
            f"{name} must be {finite}"
            + (" and " + " and ".join(parts) if parts else "")
            + f", got {out}"
        )
    if low is not None and (out < low or (low_open and out == low)):
        raise ValueError(f"{wanted}, got {out:g}")
    if high is not None and (out > high or (high_open and out == high)):
        raise ValueError(f"{wanted}, got {out:g}")
    return out


def finite_float(name: str, value) -> float:
    """A finite real number; see :func:`real`."""
    return real(name, value)


def nonnegative_float(name: str, value) -> float:
    """A finite real number ``>= 0``; see :func:`real`."""
    return real(name, value, low=0.0)


def positive_float(name: str, value) -> float:
    """A finite real number ``> 0``; see :func:`real`."""
    return real(name, value, low=0.0, low_open=True)


def flag(name: str, value) -> bool:
    """A boolean flag: ``True`` or ``False`` (NumPy booleans too); anything else is refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{name} must be True or False, got {_describe(value)}")
    return bool(value)


def choice(name: str, value, options) -> str:
    """One of a fixed set of strings."""
    options = tuple(options)
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {options}, got {_describe(value)}")
    return value


def size_limit(name: str, size: int, *, limit: int = MAX_ENTRIES, what: str = "entries") -> int:
    """Refuse, before allocating or enumerating, a result of ``size`` items beyond ``limit``."""
    if size > limit:
        raise ValueError(
            f"{name} is too large: it would need {size:,} {what}, more than the limit of {limit:,}"
        )
    return size


def _raw_array(name: str, value) -> np.ndarray:
    """``value`` as a NumPy array *without* changing its dtype; refuse what is not an array of numbers.

    Runs before any conversion, so ``"1.5"``, ``True``, ``None``, ragged lists, object, string, complex
    and boolean data are refused by name instead of being parsed, cast or truncated by ``float64``.
    torch tensors are read through ``.detach().cpu()`` (no torch import here).
    """
    if value is None or isinstance(value, (str, bytes, bool, np.bool_)):
        raise ArgumentTypeError(
            f"{name} must be a real numeric array, got {_describe(value)} ({type(value).__name__})"
        )
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        if value.is_complex() or str(value.dtype) == "torch.bool":
            raise ArgumentTypeError(f"{name} must be a real numeric array, got {value.dtype}")
        value = value.detach().cpu().numpy()
    try:
        raw = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nesting, objects NumPy cannot stack
        raise ArgumentTypeError(f"{name} must be a real numeric array: {exc}") from None
    if raw.dtype.kind == "O":  # exact numbers (Fraction, ints beyond int64) are real numbers too
        raw = _object_reals(name, raw)
    if raw.dtype.kind == "b":
        raise ArgumentTypeError(f"{name} must be a real numeric array, got booleans")
    if raw.dtype.kind == "c":
        raise ArgumentTypeError(
            f"{name} must be a real numeric array, got complex dtype {raw.dtype} (nothing is "
            "truncated to its real part)"
        )
    if raw.dtype.kind not in "iuf":
        raise ArgumentTypeError(f"{name} must be a real numeric array, got dtype {raw.dtype}")
    return raw


def _object_reals(name: str, raw: np.ndarray) -> np.ndarray:
    """An object array of real numbers (``Fraction``, ints beyond int64) as float64, or refused."""
    flat = raw.ravel()
    if not all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) for v in flat):
        bad = next(v for v in flat if not isinstance(v, numbers.Real) or isinstance(v, bool))
        raise ArgumentTypeError(
            f"{name} must be a real numeric array, got an entry {_describe(bad)} "
            f"({type(bad).__name__})"
        )
    try:
        return np.array([float(v) for v in flat], dtype=np.float64).reshape(raw.shape)
    except OverflowError:
        raise ValueError(f"{name} must be finite: an entry is beyond float64") from None


def finite_values(name: str, arr) -> np.ndarray:
    """Raise if an array (e.g. the output of a user's link or kernel) has a NaN or infinite entry."""
    arr = np.asarray(arr)
    if arr.dtype.kind not in "biufc":
        raise ArgumentTypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} must be finite: {bad} of {arr.size} entries are NaN or infinite")
    return arr


def as_array(
    name: str,
    value,
    ndim: int | None = None,
    *,
    shape: tuple | None = None,
    allow_inf: bool = False,
) -> np.ndarray:
    """The one array validator: ``value`` as a float64 array, checked *before* it is converted.

    Refused, with a message naming ``name``: anything that is not an array of real numbers (strings,
    bools, ``None``, complex, object or ragged data; see :func:`_raw_array`), a wrong number of
    dimensions (``ndim``), a wrong ``shape`` (a tuple whose ``None`` entries match any length), and
    NaN or infinite entries (``allow_inf`` lets ``±inf`` through).
    """
    arr = _raw_array(name, value).astype(np.float64, copy=False)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {arr.shape}")
    if shape is not None:
        want = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ")"
        if arr.ndim != len(shape) or any(
            s is not None and s != a for s, a in zip(shape, arr.shape, strict=True)
        ):
            raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if allow_inf:
        if np.any(np.isnan(arr)):
            raise ValueError(f"{name} must not be NaN")
    else:
        finite_values(name, arr)
    return arr


def callable_output(name: str, out, shape: tuple | None = None) -> np.ndarray:
    """Validate what a user's callable returned (a link, a kernel, a feature block).

    ``name`` should say which callable (``"link output"``): a function that forgot ``return`` gives
    ``None``; one that returns NaN or strings is refused here, by name, instead of failing later inside
    NumPy or LAPACK ("SVD did not converge") or passing NaN through.
    """
    if out is None:
        raise ArgumentTypeError(
            f"{name} must be a real numeric array, got None (a missing return?)"
        )
    arr = as_array(name, out, None)
    if shape is not None and arr.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {arr.shape}")
    return arr


def consistent_length(**arrays) -> int:
    """Require the same leading length (batch size) of every array given; return it.

    As scikit-learn's ``check_consistent_length``: ``consistent_length(xs=xs, y_query=yq)`` names both
    arguments and their shapes when they differ.
    """
    lengths = {k: (np.shape(v)[0] if np.ndim(v) else None) for k, v in arrays.items()}
    if any(n is None for n in lengths.values()) or len(set(lengths.values())) > 1:
        got = ", ".join(f"{k} {np.shape(v)}" for k, v in arrays.items())
        raise ValueError(f"{', '.join(arrays)} must have the same first dimension, got {got}")
    return next(iter(lengths.values()))


def as_tensor(name: str, value, *, dtype, device, ndim: int | None = None):
    """The one torch input converter: a NumPy array, tensor or nested list, validated as by
    :func:`as_array` (real, finite, ``ndim``), as a tensor of ``dtype`` on ``device``.

    A tensor already of that dtype and device is returned as is (its gradient kept), so every module
    accepts NumPy arrays and tensors alike; integer data is converted, never the other way round (the
    target dtype must be floating, so nothing is truncated).
    """
    import torch

    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise ArgumentTypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    if isinstance(value, torch.Tensor):
        if value.is_complex() or value.dtype == torch.bool:
            raise ArgumentTypeError(f"{name} must be a real numeric array, got {value.dtype}")
        if ndim is not None and value.dim() != ndim:
            raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(value.shape)}")
        with torch.no_grad():
            finite = torch.isfinite(value)
            if not bool(finite.all()):
                bad = int((~finite).sum())
                raise ValueError(
                    f"{name} must be finite: {bad} of {value.numel()} entries are NaN or infinite"
                )
        return value.to(dtype=dtype, device=device)
    arr = as_array(name, value, ndim)
    return torch.as_tensor(arr, dtype=dtype, device=device)


def check_prompt_shapes(xs, ys, x_query) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a batch of prompts ``xs (B, N, d)``, ``ys (B, N)``, ``x_query (B, d)``.

    Returns the three arrays as float64; a mismatch raises a ``ValueError`` naming the offending
    argument and both shapes.
    """
    xs = as_array("xs", xs, 3)
    ys = as_array("ys", ys, 2)
    x_query = as_array("x_query", x_query, 2)
    b, n, d = xs.shape
    if min(b, n, d) < 1:
        raise ValueError(
            f"xs must have shape (B, N, d) with B, N, d >= 1 (an empty context predicts nothing), "
            f"got {xs.shape}"
        )
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
    """Return ``value`` as a finite ``(dim, dim)`` float64 array; raise a ``ValueError`` naming it."""
    arr = as_array(name, value, 2)
    if arr.shape != (dim, dim):
        raise ValueError(f"{name} must have shape {(dim, dim)}, got {arr.shape}")
    return arr


def covariance(name: str, value, dim: int) -> np.ndarray:
    """A ``(dim, dim)`` symmetric positive semidefinite matrix (a covariance or second moment)."""
    arr = square_matrix(name, value, dim)
    scale = max(1.0, float(np.max(np.abs(arr))))
    if not np.allclose(arr, arr.T, rtol=0.0, atol=1e-10 * scale):
        raise ValueError(
            f"{name} must be symmetric, got max |A - A^T| = {np.max(np.abs(arr - arr.T)):.3g}"
        )
    lowest = float(np.linalg.eigvalsh((arr + arr.T) / 2)[0])
    if lowest < -1e-10 * scale:
        raise ValueError(
            f"{name} must be positive semidefinite, got smallest eigenvalue {lowest:.3g}"
        )
    return arr


def generator(rng) -> np.random.Generator:
    """The ``numpy.random.Generator`` of ``rng``: a Generator as given, or a fresh one from an integer
    seed ``>= 0`` (SciPy's and NumPy's SPEC 7 convention). ``None`` is refused: there is no hidden
    global seeding, every random draw of the book says where it comes from."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        if rng < 0:
            raise ValueError(f"rng must be a seed >= 0 or a numpy.random.Generator, got {rng}")
        return np.random.default_rng(int(rng))
    raise TypeError(
        "rng must be a numpy.random.Generator or an integer seed >= 0 "
        f"(e.g. np.random.default_rng(0) or 0), got {type(rng).__name__}"
    )


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
    if d < 1 or gamma.shape != (d, d + 1):
        raise ValueError(f"{name} must have shape (d, d+1) with d >= 1, got {gamma.shape}")
    return gamma


def kernel_inputs(x, xp) -> tuple[np.ndarray, np.ndarray]:
    """Inputs ``(..., n, d)`` and ``(..., m, d)`` of a kernel ``k(X, X')`` as float64 arrays."""
    x = as_array("x", x, None)
    xp = as_array("x_prime", xp, None)
    if x.ndim < 2 or xp.ndim < 2 or x.shape[-1] != xp.shape[-1]:
        raise ValueError(
            f"kernel inputs must have shapes (..., n, d) and (..., m, d), got {x.shape}, {xp.shape}"
        )
    return x, xp
