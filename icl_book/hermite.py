"""Hermite expansions under the Gaussian measure (chapter 1).

For ``Z ~ N(0, 1)`` and a function ``f`` with ``E f(Z)² < ∞``,

    f = Σ_k (μ_k / k!) He_k,      μ_k = E[f(Z) He_k(Z)],      E f(Z)² = Σ_k μ_k² / k!,

where ``He_k`` are the probabilists' Hermite polynomials (``He_0 = 1``, ``He_1 = z``,
``He_{k+1} = z He_k − k He_{k−1}``). In the orthonormal basis ``h_k = He_k / √k!`` the
coefficient is ``μ_k / √k!`` (``normalized=True`` everywhere below).

How the expectations are computed
---------------------------------
Every expectation ``E[g(Z)]`` is a *composite Gauss–Legendre* rule: ``[−L, L]`` is cut into panels
of width at most 1/2 (``L = √(4K+2) + 10`` grows with the largest degree ``K``, so the Gaussian tail
beyond it is negligible; panels shrink like ``1/√K`` above ``K = 300``), every panel gets 48
Gauss–Legendre nodes, and the weights carry the density ``φ(z) = e^{−z²/2}/√(2π)``. The
polynomials are evaluated as weighted Hermite functions ``h_k(z)·√w(z)`` by the normalised
recurrence, so nothing overflows or underflows even where ``h_k`` alone would (``K ≳ 300``).
The panel boundaries always include ``z = 0`` and every *kink* of ``f`` (a point where ``f`` or
one of its derivatives jumps). Between breakpoints the integrand
``f·h_k·φ`` is smooth, so the rule converges exponentially fast for kinked links too: ReLU, ``|z|``
and sign come out accurate to ~1e-15, instead of the slow algebraic convergence of a rule whose
nodes straddle the kink.

Kinks: declared or found
------------------------
- Links in :data:`LINKS` (and those built by :func:`erf_link` or :class:`Link`) declare their kinks;
  so does any callable with a ``kinks`` attribute (a sequence of floats), and ``kinks=[...]`` adds
  more. ``z = 0`` is always a breakpoint.
- A kink (or jump) nobody declared is found: on a smooth integrand a 48-node panel and its two halves
  agree to rounding, so every panel whose halves disagree by more than ``1e-12`` of ``∫|f|φ`` is
  bisected towards the half that still disagrees until the kink is pinned down to rounding, and it
  becomes a breakpoint. ``relu_half = lambda z: np.maximum(z - 0.5, 0)`` therefore gets the same
  accuracy with or without ``kinks=[0.5]``; declaring saves the search (a few evaluations of ``f``).
- Degrees: the raw basis ``He_k`` stops at ``MAX_RAW_DEGREE = 170`` (``k!`` overflows float64 beyond
  it, so raw coefficients would be infinite); the orthonormal basis goes to ``MAX_DEGREE``.

Accuracy (checked in ``tests/test_hermite.py``): with ``normalized=True`` the coefficients agree
with closed forms (``k <= 30``) and with a 25-digit mpmath reference (``k <= 20``) to better than
1e-13 absolute, for smooth and for kinked links alike; they stay at ~1e-15 up to ``k = 300`` on
polynomials and ``k = 500`` on sign (at ``k = 1000`` the discrete orthonormality degrades to ~1e-6). The
unnormalised ``μ_k = √k! · (normalised)`` inherit a *relative* error of that size: double
precision cannot do better, because ``μ_k`` itself grows like ``√k!`` (``μ_19 ≈ 6e5`` for
``erf(z)``, whose spacing of doubles is already ~1e-10).

The named links of chapter 1 live in :data:`LINKS` with their closed forms
(:meth:`Link.closed_form_coefficients`, the field ``Link.second_moment_exact``); ``tanh`` has none.

One job: the Hermite expansion of a function under N(0, 1): its polynomials, the quadrature that
computes its coefficients (most of the module, all private) and the named links whose closed forms
test that quadrature.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import erf as _erf

from ._declare import Array, Flag, Integer, Interval, OrNone, Text, declare
from ._declare import Callable as CallableArg
from ._validate import as_array, flag, integer, nonnegative_float, positive_float
from .features import _orthonormal_last, orthonormal_table

__all__ = [
    "Link",
    "LINKS",
    "get_link",
    "erf_link",
    "hermite_he",
    "hermite_normalized",
    "hermite_table",
    "gaussian_expectation",
    "hermite_coefficients",
    "second_moment",
    "linear_component",
    "nonlinear_energy",
    "effective_noise",
    "truncation_errors",
    "hermite_series",
    "double_factorial",
]

_PHI0 = 1.0 / math.sqrt(2.0 * math.pi)  # φ(0)
_VECTORISED = "a vectorised callable R -> R (e.g. np.tanh)"
#: Largest degree in the raw basis ``He_k`` (``k!`` overflows float64 beyond it).
MAX_RAW_DEGREE = 170
#: Largest degree in the orthonormal basis ``h_k`` (quadrature cost grows like ``k²``).
MAX_DEGREE = 2000
_NODES_PER_PANEL = 48
# A panel whose halves disagree by more than this fraction of ∫|f|φ holds a kink or a jump.
_KINK_TOLERANCE = 1e-12
_PANEL_WIDTH = 0.5


# --------------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------------
def _degree(name: str, value, *, normalized: bool = True) -> int:
    """A degree in ``[0, MAX_DEGREE]`` (``[0, MAX_RAW_DEGREE]`` in the raw basis ``He_k``).

    Past ``MAX_RAW_DEGREE = 170``, ``k!`` overflows float64, so raw coefficients ``μ_k`` and raw
    polynomials would be infinite: the orthonormal basis (``normalized=True``) goes further.
    """
    limit = MAX_DEGREE if normalized else MAX_RAW_DEGREE
    try:
        return integer(name, value, minimum=0, maximum=limit)
    except ValueError as err:
        if normalized or isinstance(err, TypeError) or int(value) > MAX_DEGREE:
            raise
        raise ValueError(
            f"{err}: beyond k = {MAX_RAW_DEGREE} the raw Hermite numbers overflow float64; "
            "use normalized=True (orthonormal h_k = He_k/sqrt(k!)), which accepts "
            f"k <= {MAX_DEGREE}"
        ) from None


def _check_callable(f, name: str = "f") -> None:
    if not callable(f):
        raise TypeError(
            f"{name} must be a vectorised callable R -> R (e.g. np.tanh), got {type(f).__name__}"
        )


def _kinks_of(f, kinks) -> tuple[float, ...]:
    """The union of ``f``'s declared kinks (a :class:`Link`) and the ``kinks`` argument, sorted."""
    # A Link declares its kinks; any other callable may too, through a ``kinks`` attribute.
    declared = getattr(f, "kinks", None)
    points = [] if declared is None else _as_points("f.kinks", declared)
    if kinks is not None:
        points.extend(_as_points("kinks", kinks))
    return tuple(sorted(set(points)))


def _as_points(name: str, values) -> list[float]:
    """A real number or a sequence of them, as a list of finite floats."""
    arr = as_array(name, values)  # refuses str, bool, None, complex, NaN and inf by name
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a real number or a 1-d sequence of them, got {arr.shape}")
    return [float(c) for c in arr.ravel()]


# --------------------------------------------------------------------------------------------------
# Hermite polynomials
# --------------------------------------------------------------------------------------------------
@declare(
    k=Integer(0, MAX_RAW_DEGREE),
    z=Array(ndim=None),
)
def hermite_he(k: int, z):
    """Probabilists' Hermite polynomial ``He_k(z)``, by the three-term recurrence.

    Parameters
    ----------
    k
        Degree, an integer ``>= 0``.
    z
        Array-like of any shape (NumPy broadcasting).

    Returns
    -------
    numpy.ndarray
        ``He_k(z)``, float64, same shape as ``z`` (a 0-d array for a scalar ``z``).

    Examples
    --------
    >>> float(hermite_he(3, 2.0))  # z³ − 3z at z = 2
    2.0
    """
    k = _degree("k", k, normalized=False)
    z = as_array("z", z, None)
    return _table(k, z, np.ones_like(z), normalized=False)[k]


@declare(
    k=Integer(0, MAX_DEGREE),
    z=Array(ndim=None),
)
def hermite_normalized(k: int, z):
    """Orthonormal Hermite function ``h_k(z) = He_k(z) / √k!`` (``E h_j h_k = δ_jk``).

    Evaluated by the normalised recurrence ``h_{k+1} = (z h_k − √k h_{k−1}) / √(k+1)``, which
    never forms ``k!`` and stays in range for large ``k``. Shapes as :func:`hermite_he`.
    """
    k = _degree("k", k)
    # Only the last row: memory O(z.size) (the whole table peaked at 4 GB for k = 500, 10⁶ points).
    return _orthonormal_last("hermite", k, as_array("z", z, None))


@declare(
    max_degree=Integer(0, MAX_DEGREE),
    z=Array(ndim=None),
    normalized=Flag(),
)
def hermite_table(max_degree: int, z, *, normalized: bool = False):
    """All polynomials up to ``max_degree`` at once.

    Parameters
    ----------
    max_degree
        ``K``, an integer ``>= 0``.
    z
        Array-like of shape ``S``.
    normalized
        ``False``: ``He_k(z)``; ``True``: ``h_k(z) = He_k(z)/√k!``.

    Returns
    -------
    numpy.ndarray
        Shape ``(K + 1, *S)``; row ``k`` holds degree ``k``.
    """
    normalized = flag("normalized", normalized)
    max_degree = _degree("max_degree", max_degree, normalized=normalized)
    z = as_array("z", z, None)
    return _table(max_degree, z, np.ones_like(z), normalized)


def _table(max_degree: int, z: np.ndarray, start: np.ndarray, normalized: bool) -> np.ndarray:
    """The recurrence started from ``h_0 = start``: rows are ``start · He_k`` (or ``start · h_k``).

    The orthonormal rows come from :func:`icl_book.features.orthonormal_table` (the one
    implementation of the recurrence); starting from ``√(weight)`` gives the weighted Hermite
    *functions* ``h_k(z) √w(z)``, which stay bounded where ``h_k`` overflows and ``w`` underflows
    (``k ≳ 300``). The raw rows use ``He_{k+1} = z He_k − k He_{k−1}``.
    """
    if normalized:
        return orthonormal_table("hermite", max_degree, z, start)
    out = np.empty((max_degree + 1, *z.shape))
    out[0] = start
    if max_degree >= 1:
        out[1] = z * start
    for j in range(1, max_degree):
        out[j + 1] = z * out[j] - j * out[j - 1]
    return out


#: Largest ``n`` for :func:`double_factorial` (an exact integer of about 18,000 digits).
MAX_DOUBLE_FACTORIAL = 10_000


@declare(
    n=Integer(-1, MAX_DOUBLE_FACTORIAL),
)
def double_factorial(n: int) -> int:
    """``n!! = n (n−2) (n−4) ⋯`` with ``(−1)!! = 0!! = 1``; ``-1 <= n <= MAX_DOUBLE_FACTORIAL``."""
    n = integer("n", n, minimum=-1, maximum=MAX_DOUBLE_FACTORIAL)
    out = 1
    for j in range(int(n), 0, -2):
        out *= j
    return out


def _sqrt_factorials(max_degree: int) -> np.ndarray:
    """``[√0!, √1!, …, √K!]`` as float64 (``inf`` beyond ``k = 170``, where ``k!`` overflows)."""
    out = np.full(max_degree + 1, math.inf)
    for k in range(min(max_degree, 170) + 1):
        out[k] = math.sqrt(float(math.factorial(k)))
    return out


def _he_at_zero(n: int) -> float:
    """``He_n(0)``: 0 for odd ``n``, ``(−1)^{n/2} (n−1)!!`` for even ``n``."""
    if n % 2:
        return 0.0
    return float((-1) ** (n // 2) * double_factorial(n - 1))


# --------------------------------------------------------------------------------------------------
# Quadrature against the Gaussian density
# --------------------------------------------------------------------------------------------------
def _half_width(max_degree: int) -> float:
    # h_k(z)² φ(z) lives inside the turning point |z| < √(4k + 2); ten more units of Gaussian tail
    # make the rest negligible.
    return math.sqrt(4.0 * max_degree + 2.0) + 10.0


@functools.lru_cache(maxsize=1)
def _legendre() -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights on [−1, 1] (computed once)."""
    return np.polynomial.legendre.leggauss(_NODES_PER_PANEL)


@functools.lru_cache(maxsize=64)
def _rule(
    max_degree: int, kinks: tuple[float, ...], singular: tuple[float, ...] = ()
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes, weights and square-root weights of the rule for ``E[g(Z)]`` (read-only arrays).

    The square roots are computed directly (``e^{−z²/4}``), so they stay positive where the weights
    themselves underflow (``|z| > 38``); the second-moment check uses them. Towards each point of
    ``singular`` the panels shrink geometrically (widths ``2^-j/4``, down to rounding at that point),
    so an integrable power singularity ``|z − c|^-p`` is integrated panel by panel like a smooth
    function, and only the innermost panel's share is left to the estimate of
    :func:`_singular_accuracy`.
    """
    half = _half_width(max_degree)
    # h_k oscillates with local wavelength ~ π/√(4k): shrink the panels for very high degrees.
    width = _PANEL_WIDTH * min(1.0, math.sqrt(300.0 / (max_degree + 1)))
    inner = [c for c in kinks if -half < c < half]
    graded = [c + sign * off for c in singular for off in _graded_offsets(c) for sign in (-1, 1)]
    breaks = np.unique(np.concatenate([[-half, 0.0, half], inner, graded]))
    t, w = _legendre()
    nodes, weights = [], []
    for a, b in zip(breaks[:-1], breaks[1:], strict=True):
        n_panels = max(1, math.ceil((b - a) / width - 1e-12))
        edges = np.linspace(a, b, n_panels + 1)
        mid = 0.5 * (edges[1:] + edges[:-1])
        rad = 0.5 * (edges[1:] - edges[:-1])
        nodes.append((mid[:, None] + rad[:, None] * t).ravel())
        weights.append((rad[:, None] * w).ravel())
    z = np.concatenate(nodes)
    base = np.concatenate(weights)
    wt = base * np.exp(-0.5 * z * z) * _PHI0
    sqrt_wt = np.sqrt(base * _PHI0) * np.exp(-0.25 * z * z)
    for arr in (z, wt, sqrt_wt):
        arr.flags.writeable = False
    return z, wt, sqrt_wt


def _graded_offsets(c: float) -> np.ndarray:
    """Distances ``2^-j/4`` from a singular point ``c``, down to 4096 roundings of ``c`` (so that no
    Gauss–Legendre node of the innermost panel rounds onto ``c`` itself)."""
    j = np.arange(0, 120)
    off = 0.25 * 2.0**-j
    return off[off > 4096 * np.spacing(max(abs(c), 1e-300))]


# A breakpoint where |f| grows like |z − c|^-p with p above this is singular (a log has p → 0
# slowly: 1/ln(1/h) ≈ 0.03 at h = 1e-13, so it counts and gets the graded panels too).
_SINGULAR_EXPONENT = 0.02


def _growth_exponent(f, c: float, name: str) -> float:
    """The exponent ``p`` of ``|f(z)| ~ |z − c|^-p`` as ``z → c`` from either side (0 when bounded).

    ``|f|`` at ``c ± h`` for ``h = 2^-8, 2^-12, …, 2^-44`` (relative to ``max(1, |c|)``): a bounded
    ``f`` levels off, a power singularity keeps the same log-log slope ``-p``; the smallest slope of
    the last three steps is the estimate (a kink or a jump gives 0).
    """
    h = max(1.0, abs(c)) * 2.0 ** -np.arange(8, 48, 4)
    worst = 0.0
    for side in (-1.0, 1.0):
        values = np.abs(_evaluate(f, c + side * h, name))
        if values[-1] <= values[0] or np.any(values == 0):
            continue
        slopes = np.diff(np.log(values)) / (4 * math.log(2.0))
        worst = max(worst, float(slopes[-3:].min()))
    return worst


def _singular_points(f, points, power: int, what: str, name: str) -> tuple[float, ...]:
    """The breakpoints where ``|f|^power`` has an integrable power singularity; refuse a
    non-integrable one (``|f|^power ~ |z − c|^-q`` with ``q >= 1``: the integral is infinite,
    whatever finite number a quadrature would return)."""
    out = []
    for c in dict.fromkeys([0.0, *points]):  # z = 0 and the declared points before any found one
        q = power * _growth_exponent(f, c, name)
        if q >= 1 - 1e-3:
            raise ValueError(
                f"the integral appears to be infinite: {what} grows like |z - {c:.6g}|^-{q:.3g} "
                f"near z = {c:.6g}, and a power >= 1 is not integrable ({name} must have a finite "
                f"{'second moment' if power == 2 else 'expectation'})"
            )
        if q > _SINGULAR_EXPONENT:
            out.append(c)
    return tuple(out)


def _singular_accuracy(f, singular, power: int, total: float, name: str) -> None:
    """Warn with the accuracy where an integrable singularity limits it (beyond 1e-10 relative).

    The innermost panel next to ``c`` (width ``h``) integrates ``|f|^power ~ |z − c|^-q``; its
    share ``≈ |f(c ± h)|^power h / (1 − q)`` bounds the error left by the graded rule.
    """
    for c in singular:
        h = float(_graded_offsets(c)[-1])
        q = power * _growth_exponent(f, c, name)
        near = np.abs(_evaluate(f, np.array([c - h, c + h]), name)) ** power
        bound = float(near.sum()) * h / (1 - q) * _PHI0 * math.exp(-0.5 * c * c)
        if bound > 1e-10 * max(abs(total), 1e-300):
            warnings.warn(
                f"{name} is singular at z = {c:.6g} (it grows like |z - c|^-{q / power:.3g}): the "
                f"quadrature's relative accuracy there is only about {bound / abs(total):.1e}",
                RuntimeWarning,
                stacklevel=3,
            )


def _evaluate(f, z: np.ndarray, name: str = "f") -> np.ndarray:
    """``f(z)`` as a float64 array of ``z``'s shape, with clear errors for a bad ``f``."""
    try:
        with np.errstate(all="ignore"):  # nan/inf are reported below, with a clearer message
            values = f(z.copy())
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{name} must be a vectorised callable R -> R that accepts a NumPy array "
            f"(calling it on an array raised {type(exc).__name__}: {exc})"
        ) from None
    values = np.asarray(values)
    if np.iscomplexobj(values):
        raise ValueError(f"{name} must be real-valued, got complex values")
    if values.dtype.kind not in "biuf":  # strings are not parsed, objects not converted
        raise TypeError(f"{name} must return real numbers, got an array of dtype {values.dtype}")
    try:
        values = np.broadcast_to(values.astype(np.float64), z.shape)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be vectorised: it returned shape {values.shape} "
            f"for an input of shape {z.shape}"
        ) from None
    bad = ~np.isfinite(values)
    if bad.any():
        where = z[bad]
        raise ValueError(
            f"{name} returned non-finite values (nan or inf) at {bad.sum()} of the {z.size} "
            "quadrature nodes, "
            f"e.g. f({where[0]:.4g}) = {values[bad][0]}; f(Z) needs a finite second moment "
            f"(nodes lie in [{z.min():.3g}, {z.max():.3g}])"
        )
    return values


def _undeclared_kinks(f, z: np.ndarray) -> list[float]:
    """Points inside a panel where ``f`` is not smooth, located by bisection to rounding accuracy.

    A 48-node Gauss–Legendre panel integrates a smooth ``f φ`` to rounding error, so the panel and
    its two halves agree to ~1e-16 of ``∫|f|φ``; across a kink or jump they disagree by far more.
    All panels are tested at once (one evaluation of ``f`` on every half-panel); bisecting a panel
    that disagrees, towards the half that still disagrees, pins the kink down, and it then becomes a
    breakpoint, integrated exactly like a declared one.
    """
    n = _NODES_PER_PANEL
    t, w = _legendre()
    zp = z.reshape(-1, n)
    # The panels' end points, from their Gauss–Legendre nodes (affine images of t).
    rad = (zp[:, -1] - zp[:, 0]) / (t[-1] - t[0])
    mid = zp[:, 0] - rad * t[0]
    a, b = mid - rad, mid + rad
    gaps, sizes = _split_gaps(f, a, b)
    found = []
    for i in np.flatnonzero(gaps > _KINK_TOLERANCE * sizes):
        lo, hi = float(a[i]), float(b[i])
        for _ in range(200):
            if hi - lo <= 4 * np.spacing(max(abs(lo), abs(hi), 1.0)):
                break
            m = 0.5 * (lo + hi)
            try:
                g, sz = _split_gaps(f, np.array([lo, m]), np.array([m, hi]))
            except ValueError:  # f is infinite on a node: the kink (a pole) is pinned down
                break
            bad = g > _KINK_TOLERANCE * np.maximum(sz, 1e-300)
            if bad[0] == bad[1]:  # the kink sits at the midpoint (or there are two)
                if not bad[0]:
                    break
                lo, hi = (lo, m) if g[0] >= g[1] else (m, hi)
            else:
                lo, hi = (lo, m) if bad[0] else (m, hi)
        found.append(0.5 * (lo + hi))
    return found


def _split_gaps(f, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each panel ``[a_i, b_i]``: ``|rule − (left half + right half)|`` and ``∫|f|φ`` (rule)."""
    t, w = _legendre()
    m = 0.5 * (a + b)
    lo = np.concatenate([a, a, m])
    hi = np.concatenate([b, m, b])
    centre, rad = 0.5 * (lo + hi), 0.5 * (hi - lo)
    nodes = centre[:, None] + rad[:, None] * t
    fz = _evaluate(f, nodes.ravel()).reshape(nodes.shape)
    weights = rad[:, None] * w * np.exp(-0.5 * nodes * nodes) * _PHI0
    parts = np.einsum("pn,pn->p", weights, fz)
    sizes = np.einsum("pn,pn->p", weights, np.abs(fz))
    k = a.size
    whole, left, right = parts[:k], parts[k : 2 * k], parts[2 * k :]
    return np.abs(whole - (left + right)), sizes[:k]


def _values_on_rule(f, max_degree: int, kinks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes, square-root weights and checked values of ``f`` for a rule up to ``max_degree``.

    Kinks that ``f`` does not declare are found and added as breakpoints (see
    :func:`_undeclared_kinks`), so the accuracy does not depend on declaring them.
    """
    _check_callable(f)
    points = _kinks_of(f, kinks)
    z, _, sqrt_w = _rule(max_degree, points)
    fz = _evaluate(f, z)
    extra = _undeclared_kinks(f, z)
    singular = _singular_points(f, [*points, *extra], 2, "f(z)²", "f")
    points = tuple(sorted(set(points) | set(extra)))
    if extra or singular:
        z, _, sqrt_w = _rule(max_degree, points, singular)
        fz = _evaluate(f, z)
    with np.errstate(over="ignore"):  # an overflow means E f² = inf, refused by the check
        density = (fz * sqrt_w) ** 2
    _check_decay("f(z)² φ(z)", density, z)
    _singular_accuracy(f, singular, 2, float(np.sum(density)), "f")
    return z, sqrt_w, fz


def _check_decay(what: str, density, z: np.ndarray) -> None:
    """Refuse an integrand that has not decayed at the ends of the rule (its integral would be wrong)."""
    if density is not None:
        density = np.abs(density)
        total = float(np.sum(density))
        edge = float(max(density[:_NODES_PER_PANEL].max(), density[-_NODES_PER_PANEL:].max()))
    if density is None or not math.isfinite(total) or edge > 1e-14 * max(total, 1e-300):
        raise ValueError(
            f"the integral appears to be infinite: {what} has not decayed at |z| = "
            f"{abs(float(z[0])):.3g} (the function must grow slower than exp(z²/4))"
        )


@declare(
    g=CallableArg(what=_VECTORISED),
    kinks=OrNone(Array(ndim=None)),
)
def gaussian_expectation(g, *, kinks: Iterable[float] | None = None) -> float:
    """``E[g(Z)]`` for ``Z ~ N(0, 1)`` by the kink-aware quadrature of this module.

    ``g`` is a vectorised callable; points where ``g`` is not smooth may be declared with ``kinks``
    (``z = 0`` is always a breakpoint) and are otherwise located automatically. The rule covers
    ``|z| <= 22.7`` (enough for ``g = f · He_k²`` with ``k <= 40`` and ``f`` of polynomial growth);
    a ``g`` whose ``g φ`` has not decayed there (``E|g| = ∞``, or a tail beyond the rule) is refused.
    Raises like :func:`hermite_coefficients`.
    """
    _check_callable(g, "g")
    points = _kinks_of(g, kinks)
    z, w, _ = _rule(40, points)
    gz = _evaluate(g, z, "g")
    extra = _undeclared_kinks(g, z)
    singular = _singular_points(g, [*points, *extra], 1, "g(z)", "g")
    points = tuple(sorted(set(points) | set(extra)))
    if extra or singular:
        z, w, _ = _rule(40, points, singular)
        gz = _evaluate(g, z, "g")
    with np.errstate(over="ignore", invalid="ignore"):
        density = w * gz
    _check_decay("g(z) φ(z)", density if np.all(np.isfinite(density)) else None, z)
    _singular_accuracy(g, singular, 1, float(np.sum(np.abs(density))), "g")
    return float(np.einsum("n,n->", w, gz))


@declare(
    f=CallableArg(what=_VECTORISED),
    max_degree=Integer(0, MAX_DEGREE),
    normalized=Flag(),
    kinks=OrNone(Array(ndim=None)),
)
def hermite_coefficients(
    f: Callable[[np.ndarray], np.ndarray],
    max_degree: int,
    *,
    normalized: bool = False,
    kinks: Iterable[float] | None = None,
) -> np.ndarray:
    """Hermite coefficients ``[μ_0, …, μ_K]``, ``μ_k = E[f(Z) He_k(Z)]``, ``Z ~ N(0, 1)``.

    Parameters
    ----------
    f
        Vectorised callable ``R -> R`` with ``E f(Z)² < ∞`` (a :class:`Link` or e.g. ``np.tanh``).
    max_degree
        ``K``, an integer ``>= 0``.
    normalized
        If ``True`` return ``μ_k / √k!``, the coefficients in the orthonormal basis
        ``h_k = He_k / √k!`` (their squares sum to ``E f²``: Parseval).
    kinks
        Points where ``f`` or a derivative jumps, in addition to ``f.kinks`` if ``f`` declares any;
        ``z = 0`` is always a breakpoint of the quadrature. See the module docstring.

    Returns
    -------
    numpy.ndarray
        Shape ``(K + 1,)``, float64.

    Raises
    ------
    TypeError
        ``f`` is not callable (or not vectorised).
    ValueError
        ``max_degree`` is negative or not an integer; ``f`` returns nan/inf on the quadrature nodes;
        ``E f(Z)²`` is infinite.

    Examples
    --------
    >>> np.round(hermite_coefficients(lambda z: z**3, 4), 12)  # z³ = He_3 + 3 He_1
    array([0., 3., 0., 6., 0.])
    """
    _check_callable(f)
    normalized = flag("normalized", normalized)
    max_degree = _degree("max_degree", max_degree, normalized=normalized)
    z, sqrt_w, fz = _values_on_rule(f, max_degree, kinks)
    h = _table(max_degree, z, sqrt_w, normalized=True)  # h_k(z_i) √w_i
    coef = np.einsum("kn,n->k", h, sqrt_w * fz)  # deterministic summation (no BLAS threading)
    if not normalized:
        coef = coef * _sqrt_factorials(max_degree)
    return coef


@declare(
    f=CallableArg(what=_VECTORISED),
    kinks=OrNone(Array(ndim=None)),
)
def second_moment(f, *, kinks: Iterable[float] | None = None) -> float:
    """``E f(Z)²`` by direct quadrature (not by summing a truncated Parseval series)."""
    _check_callable(f)
    _, sqrt_w, fz = _values_on_rule(f, 1, kinks)
    fw = sqrt_w * fz
    return float(np.einsum("n,n->", fw, fw))


@declare(
    f=CallableArg(what=_VECTORISED),
    kinks=OrNone(Array(ndim=None)),
)
def linear_component(f, *, kinks: Iterable[float] | None = None) -> float:
    """The linear Hermite component ``μ_1 = E[f(Z) Z]`` (the only part a linear model can see)."""
    return float(hermite_coefficients(f, 1, kinks=kinks)[1])


@declare(
    f=CallableArg(what=_VECTORISED),
    kinks=OrNone(Array(ndim=None)),
)
def nonlinear_energy(f, *, kinks: Iterable[float] | None = None) -> float:
    """``E f² − μ_0² − μ_1² = Σ_{k≥2} μ_k²/k!``: the energy of ``f`` outside its best affine fit."""
    mu = hermite_coefficients(f, 1, kinks=kinks)
    return max(second_moment(f, kinks=kinks) - mu[0] ** 2 - mu[1] ** 2, 0.0)


@declare(
    link=CallableArg(),
    noise_var=Interval(0.0, 1e100),
    kinks=OrNone(Array(ndim=None)),
)
def effective_noise(link, noise_var: float = 0.0, *, kinks: Iterable[float] | None = None) -> float:
    """Effective noise ``ρ_eff = ρ + E f² − μ_1²`` of the teacher ``y = f(x·w) + ε``, ``Var ε = ρ``.

    ``link`` is the teacher ``f`` and ``noise_var`` the label-noise variance ``ρ``. This is what
    linear attention sees as noise (chapter 4): the nonlinear energy *plus* ``μ_0²`` (the model
    has no bias and is odd in the query).
    """
    noise_var = nonnegative_float("noise_var", noise_var)
    mu1 = linear_component(link, kinks=kinks)
    return max(float(noise_var) + second_moment(link, kinks=kinks) - mu1**2, float(noise_var))


@declare(
    f=CallableArg(what=_VECTORISED),
    max_degree=Integer(0, MAX_DEGREE),
    kinks=OrNone(Array(ndim=None)),
)
def truncation_errors(f, max_degree: int, *, kinks: Iterable[float] | None = None) -> np.ndarray:
    """``e_K = E[(f(Z) − f_K(Z))²]`` for ``K = 0, …, max_degree``, ``f_K = Σ_{k≤K} (μ_k/k!) He_k``.

    Computed as the quadrature of the squared residual (no cancellation in ``E f² − Σ μ_k²/k!``),
    so values far below ``E f²`` are still accurate (down to ~1e-28 · E f²).
    Shape ``(max_degree + 1,)``.
    """
    _check_callable(f)
    max_degree = _degree("max_degree", max_degree)
    z, sqrt_w, fz = _values_on_rule(f, max_degree, kinks)
    h = _table(max_degree, z, sqrt_w, normalized=True)  # h_k(z_i) √w_i
    fw = sqrt_w * fz
    c = np.einsum("kn,n->k", h, fw)
    residual = fw - np.cumsum(c[:, None] * h, axis=0)  # (f − f_K)(z_i) √w_i
    return np.einsum("kn,kn->k", residual, residual)


@declare(
    coefficients=Array(ndim=1),
    z=Array(ndim=None),
    normalized=Flag(),
)
def hermite_series(coefficients, z, *, normalized: bool = False):
    """Evaluate ``Σ_k (μ_k/k!) He_k(z)`` (or ``Σ_k c_k h_k(z)`` with ``normalized=True``).

    ``coefficients`` has shape ``(K + 1,)`` as returned by :func:`hermite_coefficients` with the
    same ``normalized`` flag; the result has the shape of ``z``.
    """
    normalized = flag("normalized", normalized)
    c = as_array("coefficients", coefficients, 1)
    if c.size < 1:
        raise ValueError(f"coefficients must have shape (K + 1,) with K >= 0, got {c.shape}")
    if not normalized and c.size - 1 > MAX_RAW_DEGREE:
        raise ValueError(
            f"coefficients has {c.size} raw terms; raw (μ_k) series are limited to K <= "
            f"{MAX_RAW_DEGREE} (k! overflows): pass orthonormal coefficients with normalized=True"
        )
    h = hermite_table(c.size - 1, z, normalized=True)
    scale = np.ones(c.size) if normalized else 1.0 / _sqrt_factorials(c.size - 1)
    return np.tensordot(c * scale, h, axes=1)


# --------------------------------------------------------------------------------------------------
# Named links with closed forms
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    """A link function ``f: R -> R`` with its kinks and (optionally) closed-form Hermite data.

    Parameters
    ----------
    name
        Short name (the key in :data:`LINKS`).
    func
        Vectorised callable.
    kinks
        Points where ``f`` or a derivative jumps (quadrature breakpoints).
    coefficient
        ``k -> μ_k`` in closed form, or ``None`` (numerical only).
    second_moment_exact
        ``E f(Z)²`` in closed form, or ``None``.
    label
        LaTeX label for tables and figures.

    A ``Link`` is callable like ``func`` and can be passed wherever a callable ``f`` is accepted.
    """

    name: str
    func: Callable[[np.ndarray], np.ndarray]
    kinks: tuple[float, ...] = ()
    coefficient: Callable[[int], float] | None = field(default=None, repr=False)
    second_moment_exact: float | None = None
    label: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        _check_callable(self.func, "func")
        object.__setattr__(self, "kinks", tuple(_as_points("kinks", self.kinks)))

    def __call__(self, z):
        return self.func(z)

    @property
    def has_closed_form(self) -> bool:
        """Whether the coefficients are known in closed form."""
        return self.coefficient is not None

    def closed_form_coefficients(self, max_degree: int, *, normalized: bool = False) -> np.ndarray:
        """``[μ_0, …, μ_K]`` from the closed form (``ValueError`` when the link has none).

        ``K <= MAX_RAW_DEGREE``: the closed forms give the raw ``μ_k``, which overflow beyond it.
        """
        max_degree = _degree("max_degree", max_degree, normalized=False)
        normalized = flag("normalized", normalized)
        if self.coefficient is None:
            raise ValueError(
                f"link {self.name!r} has no closed form; use hermite_coefficients(link, K)"
            )
        mu = np.array([float(self.coefficient(k)) for k in range(max_degree + 1)])
        if normalized:
            mu = mu / _sqrt_factorials(max_degree)
        return mu


def _relu_mu(k: int) -> float:
    if k == 0:
        return _PHI0
    if k == 1:
        return 0.5
    return _PHI0 * _he_at_zero(k - 2)


def _abs_mu(k: int) -> float:
    if k == 0:
        return 2.0 * _PHI0
    if k % 2:
        return 0.0
    return 2.0 * _PHI0 * _he_at_zero(k - 2)


def _sign_mu(k: int) -> float:
    if k % 2 == 0:
        return 0.0
    m = (k - 1) // 2
    return math.sqrt(2.0 / math.pi) * (-1) ** m * double_factorial(2 * m - 1)


def _poly_mu(table: dict[int, float]) -> Callable[[int], float]:
    return lambda k: float(table.get(k, 0.0))


@declare(
    a=Interval(0.0, math.inf, "neither"),
)
def erf_link(a: float = 1.0) -> Link:
    """The link ``f(z) = erf(a z)`` with its closed forms, for a real ``a > 0``.

    ``μ_{2m+1} = (2a/√π)(1+2a²)^{−1/2} (−1)^m (2m−1)!! (2a²/(1+2a²))^m``, even ``μ_k = 0``,
    ``E f² = (2/π) arcsin(2a²/(1+2a²))``.
    """
    a = positive_float("a", a)
    s = 2.0 * a * a / (1.0 + 2.0 * a * a)
    pre = 2.0 * a / math.sqrt(math.pi) / math.sqrt(1.0 + 2.0 * a * a)

    def mu(k: int) -> float:
        if k % 2 == 0:
            return 0.0
        m = (k - 1) // 2
        return pre * (-1) ** m * double_factorial(2 * m - 1) * s**m

    label = r"$\mathrm{erf}(z)$" if a == 1.0 else rf"$\mathrm{{erf}}({a:g}z)$"
    return Link(
        name="erf" if a == 1.0 else f"erf({a:g}z)",
        func=lambda z: _erf(a * np.asarray(z, dtype=np.float64)),
        coefficient=mu,
        second_moment_exact=2.0 / math.pi * math.asin(s),
        label=label,
    )


def _relu(z):
    return np.maximum(np.asarray(z, dtype=np.float64), 0.0)


def _square(z):
    z = np.asarray(z, dtype=np.float64)
    return z * z


def _cube(z):
    z = np.asarray(z, dtype=np.float64)
    return z * z * z


#: The named links of chapter 1 (the table reads this registry). ``tanh`` has no closed form.
LINKS: dict[str, Link] = {
    "relu": Link("relu", _relu, (0.0,), _relu_mu, 0.5, r"$\mathrm{ReLU}(z)$"),
    "abs": Link("abs", np.abs, (0.0,), _abs_mu, 1.0, r"$|z|$"),
    "sign": Link("sign", np.sign, (0.0,), _sign_mu, 1.0, r"$\mathrm{sign}(z)$"),
    "erf": erf_link(1.0),
    "tanh": Link("tanh", np.tanh, (), None, None, r"$\tanh(z)$"),
    "square": Link("square", _square, (), _poly_mu({0: 1.0, 2: 2.0}), 3.0, r"$z^2$"),
    "cube": Link("cube", _cube, (), _poly_mu({1: 3.0, 3: 6.0}), 15.0, r"$z^3$"),
}


@declare(
    name=Text(),
)
def get_link(name: str) -> Link:
    """The registered link called ``name`` (one of :data:`LINKS`' keys)."""
    if not isinstance(name, str) or name not in LINKS:
        raise ValueError(f"name must be one of {sorted(LINKS)}, got {name!r}")
    return LINKS[name]
