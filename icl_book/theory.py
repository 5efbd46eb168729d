"""Closed-form theory: the asymptotics of pretrained linear attention (Lu et al., chapter 3), the
nonlinearity–noise mapping (chapter 4), and the exact risks the chapters compare simulations with.

Conventions (chapter 3): inputs ``x ~ N(0, I_d / d)``, tasks with ``‖w‖ = √d``, labels
``y = x·w + ε`` with ``ε ~ N(0, ρ)``; context length ``ℓ = αd``, ``K = κd`` pretraining tasks
(``κ = ∞``: a fresh task for every prompt), ``n = τd²`` pretraining prompts and ridge ``λ``. The reduced
model predicts ``ŷ = ⟨Γ, H_Z⟩`` with ``Γ ∈ R^{d×(d+1)}``.

- :func:`icl_error` -- the asymptotic in-context error ``e_ICL(α, τ, κ, ρ, λ)`` on fresh tasks
  (ridgeless "Result 1" at ``λ = 0``, the ridge self-consistent formula for ``λ > 0``).
- :func:`idg_error` -- the ridgeless in-distribution error ``e_IDG`` on the ``K`` pretraining tasks.
- :func:`error_of_gamma` -- the exact error of a given ``Γ`` at any finite ``d``.
- :func:`wishart_stieltjes` -- the function ``M_κ`` that all the formulas are built from.
- :func:`one_step_gd_risk`, :func:`best_one_step_eta`, :func:`optimal_preconditioner`,
  :func:`optimal_preconditioned_risk` -- the exact risk of one (preconditioned) GD step and its optimum
  (chapters 0 and 2; inputs ``x ~ N(0, Λ)``, tasks ``w ~ N(0, I)``: their own conventions, stated there).
- :func:`best_linear_risk_quadratic`, :func:`hermite_one_step_excess_risk` -- the linear bound on a quadratic
  task and the excess risk of one whitened GD step on Hermite features (chapter 5).

Divergent points return ``inf``: the ridgeless error at ``τ = 1`` exactly (the interpolation peak).

One job: the closed forms the chapters' simulations are checked against. They share one set of
declared ranges and their checks (``MIN_RATIO``, ``MAX_NOISE_VAR``, ``MAX_GD_ENTRY``, …, documented as
``theory.X``), and chapter 4's formulas are chapter 3's at a mapped noise.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import hermite
from ._declare import Array, Callable, Integer, Interval, OrNone, declare
from ._validate import (
    ArgumentTypeError,
    _raw_array,
    as_array,
    callable_output,
    covariance,
    nonnegative_float,
    positive_int,
    real,
    reduced_gamma,
    square_matrix,
    task_vectors,
)

__all__ = [
    "MIN_RATIO",
    "MIN_RIDGE",
    "MAX_RIDGE",
    "MAX_NOISE_VAR",
    "MAX_GD_ENTRY",
    "MAX_COV_ENTRY",
    "wishart_stieltjes",
    "icl_error",
    "idg_error",
    "error_of_gamma",
    "TaskMoments",
    "task_moments",
    "EquivalentTask",
    "equivalent_linear_task",
    "nonlinear_icl_error",
    "nonlinear_idg_error",
    "nonlinear_error_of_gamma",
    "one_step_gd_risk",
    "best_one_step_eta",
    "optimal_preconditioner",
    "optimal_preconditioned_risk",
    "best_linear_risk_quadratic",
    "hermite_one_step_excess_risk",
]


# --- asymptotics: closed forms of Lu et al. (chapter 3) ---


#: Smallest α and κ accepted — below them ``x* = (1+ρ)/α`` or ``1/κ`` overflow the formulas' squares.
MIN_RATIO = 1e-8
#: Smallest positive ridge accepted — below it the self-consistent equation at τ = 1 loses every
#: significant digit (its denominator ``1 − τ − 2εS − ε²S'`` cancels to rounding error).
MIN_RIDGE = 1e-12
#: Largest ridge accepted — above it ``e_ICL`` equals its λ → ∞ limit ``1 + ρ`` to double precision
#: (checked), and beyond about 1e150 the self-consistent formula's squares overflow.
MAX_RIDGE = 1e100
#: Largest label-noise variance accepted — at 1e300, ``x* = (1+ρ)/α`` overflows the formulas' squares
#: (``icl_error`` returned NaN); up to 1e100 every α, τ, κ, ridge of the boundary grid gives a number.
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
#: Largest ``|entry|`` of ``Γ`` and ``Λ`` :func:`one_step_gd_risk` accepts. Its risk grows as
#: ``|Γ|² |Λ|³`` and ``|Γ|² |Λ|² σ²``: a ``(d, d)`` product multiplies the largest entry by at most
#: ``d``, so with every entry at most ``B = 1e40`` and ``σ² <= MAX_NOISE_VAR`` each term is at most
#: ``d⁴ B² (3 d B² + σ² B) B <= 1e280`` for every ``d <= 1e5`` (80 GB a matrix), inside float64; at
#: ``Λ = 1e154 I`` the risk is ``~1e462`` (it returned ``inf``, and ``nan`` at ``1e300``).
MAX_GD_ENTRY = 1e40
#: Largest ``|entry|`` of ``Λ`` :func:`optimal_preconditioner` accepts. ``Γ*`` is computed in units of
#: a power of two near ``max(|Λ|, σ²)`` (exact), so it is the float64 value up to here, where its
#: entries are still ``>= 1 / (3 d · 1e300)``, normal numbers (beyond, ``tr Λ`` overflowed to NaN).
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


def _m_kappa(x, inv_kappa):
    """``M_κ(x)`` written with ``1/κ`` (so that ``κ = ∞`` is ``inv_kappa = 0``), numerically stable."""
    a = x + 1.0 - inv_kappa
    b = x * inv_kappa
    root = np.hypot(a, 2.0 * np.sqrt(b))  # √(a² + 4b) without overflowing a² for huge x
    with np.errstate(divide="ignore", invalid="ignore"):
        # 2 / (a + root) cancels when a < 0; then use the conjugate form (root - a) / (2b).
        stable = np.where(a >= 0, 2.0 / (a + root), (root - a) / (2.0 * np.where(b > 0, b, 1.0)))
    return stable


def _m_kappa_prime(x, inv_kappa):
    """Derivative ``M_κ'(x) = -½ M² [1 + (x + 1 + 1/κ) / √((x + 1 - 1/κ)² + 4x/κ)]``."""
    m = _m_kappa(x, inv_kappa)
    root = np.hypot(x + 1.0 - inv_kappa, 2.0 * np.sqrt(x * inv_kappa))
    return -0.5 * m * m * (1.0 + (x + 1.0 + inv_kappa) / root)


def _m_kappa_parts(nu, inv_kappa):
    """``1 − ν M_κ(ν)`` and ``(ν M_κ)'(ν) = M_κ + ν M_κ'`` without cancellation.

    With ``c = ν + 1 + 1/κ`` and ``r = √(c² − 4/κ) = √((ν + 1 − 1/κ)² + 4ν/κ)``: ``1 − ν M = 2/(c + r)``
    and ``(ν M)' = 2/(r (c + r))``. Formed as differences, both lose every digit when ``κ ≪ 1`` (they
    are then ~κ and ~κ², while ``ν M`` and ``M`` are ~1 and ~1/ν): the ridge formula at ``α = ∞``,
    ``τ = κ = 10⁻⁷`` came out negative.
    """
    c = nu + 1.0 + inv_kappa
    r = np.hypot(nu + 1.0 - inv_kappa, 2.0 * np.sqrt(nu * inv_kappa))
    return 2.0 / (c + r), 2.0 / (r * (c + r))


@declare(
    x=Array(finite=False, within=Interval(0.0, math.inf, "right", allow_inf=True)), kappa=_RATIO
)
def wishart_stieltjes(x, kappa=np.inf):
    """``M_κ(x) = 2 / [(x + 1 − 1/κ) + √((x + 1 − 1/κ)² + 4x/κ)]`` (broadcasts).

    ``M_κ(x) = lim (1/d) tr (R̂ + x I)^{-1}`` for the second-moment matrix ``R̂`` of ``K = κd`` random tasks:
    the Stieltjes transform of a Marchenko–Pastur law, evaluated at ``-x``. ``κ = ∞`` gives ``1/(1 + x)``.

    Parameters
    ----------
    x
        Positive reals (array-like).
    kappa
        Task diversity ``κ >= MIN_RATIO`` (smaller ``κ`` overflow ``1/κ``); ``np.inf`` allowed.
    """
    x = _check_array("x", x, positive=True)
    kappa = _check_array("kappa", kappa, positive=True, minimum=MIN_RATIO)
    return _m_kappa(x, 1.0 / kappa)


def _icl_ridgeless(alpha, tau, inv_kappa, noise_var):
    x = (1.0 + noise_var) / alpha
    m = _m_kappa(x, inv_kappa)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # μ* = x* M_{κ/τ}(x*), only used for τ < 1 (τ = ∞ gives ∞ · 0 here). ((x−ρ)/x) μ* is written
        # (x−ρ) M_{κ/τ}(x*) so that α = ∞ (x* = 0) gives its limit instead of 0/0.
        m_tau = _m_kappa(x, tau * inv_kappa)
        mu = x * m_tau
        small = (
            tau * (1 + x) / (1 - tau) * (1 - tau * (1 - mu) ** 2 - (x - noise_var) * m_tau)
            - 2 * tau * (1 - mu)
            + noise_var
            + 1
        )
        # k* = 1/(1 − κ (m/(κ+m))²), written with u = 1/m and 1/κ so that neither κ = ∞ nor m → ∞
        # (κ <= 1 and α → ∞: M_κ(x*) grows like 1/x* or 1/√x*) cancels or overflows:
        # 1 − κ (m/(κ+m))² = (u² + 2u/κ + (1/κ)(1/κ − 1)) / (u + 1/κ)².
        u = 1.0 / m
        k_star = (u + inv_kappa) ** 2 / (u * u + 2 * u * inv_kappa + inv_kappa * (inv_kappa - 1))
        k_star = np.where(inv_kappa == 0, 1.0, k_star)
        q = 1.0 / (tau - 1)  # 0 at τ = ∞, so the τ → ∞ limit is exact; (3 − 2τ)/(τ − 1) = q − 2
        xm = x * m
        large = (
            (k_star - q) * (1 + x) * xm * xm
            + (q - 2) * xm * x
            + ((1 + noise_var) * q * xm + x)
            + noise_var * m * q
            + noise_var
        )
    out = np.where(tau < 1, small, large)
    out = np.where(np.isinf(alpha), _icl_ridgeless_alpha_inf(tau, inv_kappa, noise_var), out)
    return np.where(tau == 1, np.inf, out)


def _icl_ridgeless_alpha_inf(tau, inv_kappa, noise_var):
    """The ``α → ∞`` limit (``x* → 0``) of the ridgeless ``e_ICL``, in closed form.

    ``M_κ(x*)`` stays finite as ``x* → 0`` only for ``κ > 1`` (``M_κ(0) = κ/(κ − 1)``); for ``κ <= 1`` it
    grows (``x* M_κ(x*) → 1 − κ``), and the term ``ρ M_κ(x*)/(τ − 1)`` diverges when ``ρ > 0``. With
    ``q = 1/(τ − 1)``, ``τ > 1``: ``ρ(1 + qκ/(κ − 1))`` for ``κ > 1``; ``(1 − κ)(1 + qκ) + ρ`` for ``κ <= 1``
    and ``ρ = 0`` or ``τ = ∞``; ``inf`` for ``κ <= 1``, ``ρ > 0``, finite ``τ``. ``τ < 1`` is the same with ``M_{κ/τ}``: for ``κ > τ``,
    ``τ/(1 − τ)(1 − τ + ρ m) − 2τ + 1 + ρ`` with ``m = κ/(κ − τ)``; for ``κ <= τ``,
    ``κ(1 − κ)/(1 − τ) − 2κ + 1`` at ``ρ = 0`` and ``inf`` for ``ρ > 0`` (tested against large α).
    """
    tau, inv_kappa, rho = np.broadcast_arrays(tau, inv_kappa, noise_var)
    kappa = np.divide(1.0, inv_kappa, out=np.full(inv_kappa.shape, np.inf), where=inv_kappa > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = 1.0 / (tau - 1)
        m_large = np.where(kappa > 1, 1.0 / (1.0 - inv_kappa), np.inf)
        large = np.where(
            kappa > 1,
            rho * (1 + q * m_large),
            # ρ M q diverges unless q = 0 (τ = ∞) or ρ = 0
            np.where((rho > 0) & (q > 0), np.inf, (1 - kappa) * (1 + q * kappa) + rho),
        )
        m_small = 1.0 / (1.0 - tau * inv_kappa)
        # κ > τ tested as τ/κ < 1, the very product M_{κ/τ} is evaluated at (so κ = τ is exact).
        small = np.where(
            tau * inv_kappa < 1,
            tau / (1 - tau) * (1 - tau + rho * m_small) - 2 * tau + 1 + rho,
            np.where(rho > 0, np.inf, kappa * (1 - kappa) / (1 - tau) - 2 * kappa + 1),
        )
    return np.where(tau < 1, small, large)


def _ridge_epsilon(x, tau, inv_kappa, ridge):
    """The positive root ``ε`` of ``1 − τ + τλ/ε − ε S(ε + x*) = 0`` for arrays of points (finite τ).

    Vectorised over the points: bracket, scan the bracket on a 65-point log grid so that the first sign
    change (the smallest root, continuously connected to ``λ → 0+``) is taken if there were several (at
    the book's parameters the root is unique), then bisect that grid cell to the last bit. One pass costs
    about 200 evaluations of ``S`` per point, in NumPy (10⁴ points: milliseconds; the per-point Brent
    search it replaces took about 1 ms per point).
    """

    def f(eps, sel=slice(None)):
        # 1 − ε S(ε + x*) = (1 − ν S) + x* S with ν = ε + x*: no cancellation before the one with τ
        nu = eps + x[sel]
        q, _ = _m_kappa_parts(nu, inv_kappa[sel])
        return q + x[sel] * _m_kappa(nu, inv_kappa[sel]) - tau[sel] + tau[sel] * ridge[sel] / eps

    # f → +∞ as ε → 0+ (the τλ/ε term) and f → −τ < 0 as ε → ∞ (ε S(ε + x*) → 1).
    lo = np.minimum(ridge, 1.0)
    while np.any(bad := f(lo) <= 0):
        lo = np.where(bad, lo / 4.0, lo)
    hi = np.maximum(1.0, 4.0 * lo)
    while np.any(bad := f(hi) >= 0):
        hi = np.where(bad, hi * 4.0, hi)
    steps = np.linspace(0.0, 1.0, 65)
    grid = lo[:, None] * (hi / lo)[:, None] ** steps[None, :]
    grid[:, 0], grid[:, -1] = lo, hi
    values = f(grid, (slice(None), None))
    k = np.argmax(values < 0, axis=1)
    rows = np.arange(len(lo))
    a, b = grid[rows, k - 1], grid[rows, k]  # f(a) > 0 > f(b)
    for _ in range(200):
        mid = 0.5 * (a + b)
        done = (mid <= a) | (mid >= b)
        if np.all(done):
            break
        positive = f(mid) > 0
        a = np.where(positive & ~done, mid, a)
        b = np.where(~positive & ~done, mid, b)
    # The root lies in [a, b], adjacent floats; take the end with the smaller residual.
    return np.where(np.abs(f(a)) <= np.abs(f(b)), a, b)


def _icl_ridge(alpha, tau, inv_kappa, noise_var, ridge):
    """Ridge ``e_ICL`` for 1-D arrays of points (``λ > 0``), vectorised."""
    x = (1.0 + noise_var) / alpha
    eps = np.array(ridge, dtype=np.float64)
    finite = np.isfinite(tau)
    if np.any(finite):
        eps[finite] = _ridge_epsilon(x[finite], tau[finite], inv_kappa[finite], ridge[finite])
    # τ = ∞: divide the equation by τ: ε → λ, and c_e → 0 (its denominator contains −τ).
    nu = x + eps
    s = _m_kappa(nu, inv_kappa)
    sp = _m_kappa_prime(nu, inv_kappa)
    # SCIENCE.md's ridge formula rearranged exactly, with P = ν S, G = (ν S)' and H = S + ε S' = G − x* S'
    # (_m_kappa_parts: 1 − P and G without cancellation; S + ε S' formed directly is a difference of
    # two numbers up to 10¹⁴ times larger than it when κ ≪ 1, then multiplied by the large c_e).
    q, g = _m_kappa_parts(nu, inv_kappa)  # q = 1 − P, g = G
    h = g - x * sp
    with np.errstate(divide="ignore", invalid="ignore"):
        # 1 − τ − ε S − ε H, with 1 − ε S = 1 − P + x* S = q + x* S
        c_e = (noise_var + x * q + eps * nu * g) / (q + x * s - tau - eps * h)
    c_e = np.where(finite, c_e, 0.0)
    return (x + 1) * (q - nu * g - c_e * h) - 2 * q + 1 + noise_var


@declare(alpha=_RATIO, tau=_RATIO, kappa=_RATIO, noise_var=_NOISE, ridge=_RIDGE)
def icl_error(alpha, tau, kappa=np.inf, noise_var=0.0, ridge=0.0):
    """Asymptotic in-context error ``e_ICL`` of the pretrained reduced linear attention (Lu et al.).

    The limit ``d → ∞`` with ``ℓ/d → α``, ``n/d² → τ``, ``K/d → κ``, evaluated on prompts with *fresh* tasks.
    ``ridge = 0`` uses the ridgeless formula ("Result 1"), which diverges at ``τ = 1`` (returned as ``inf``);
    ``ridge > 0`` solves the ridge self-consistency equation for ``ε > 0`` with a bracketing root finder.

    Parameters
    ----------
    alpha, tau
        Context length ``α = ℓ/d > 0`` and pretraining data ``τ = n/d² > 0`` (arrays broadcast).
    kappa
        Task diversity ``κ = K/d > 0``; ``np.inf`` (default) means a fresh task for every pretraining prompt.
    noise_var
        Label-noise variance ``ρ >= 0``.
    ridge
        Ridge ``λ`` of the pretraining objective ``Σ (y − ⟨Γ, H⟩)² + (n/d) λ ‖Γ‖_F²``: 0, or in
        ``[MIN_RIDGE, MAX_RIDGE]``. Ridge points are solved together (vectorised bisection): 10⁴
        points take milliseconds.

    Returns
    -------
    float or numpy.ndarray
        ``e_ICL``, with the broadcast shape of the arguments (a Python ``float`` when all are scalars).

    Examples
    --------
    >>> round(icl_error(1.0, 2.0, noise_var=0.01), 5)
    1.02498
    """
    alpha = _check_array("alpha", alpha, positive=True, minimum=MIN_RATIO)
    tau = _check_array("tau", tau, positive=True, minimum=MIN_RATIO)
    kappa = _check_array("kappa", kappa, positive=True, minimum=MIN_RATIO)
    noise_var = _check_array("noise_var", noise_var, positive=False)
    ridge = _check_array("ridge", ridge, positive=False, minimum=MIN_RIDGE)
    if np.any(np.isinf(noise_var)):
        raise ValueError("noise_var must be finite")
    if np.any(ridge > MAX_RIDGE):
        raise ValueError(
            f"ridge must be 0 or in [{MIN_RIDGE:g}, {MAX_RIDGE:g}] (above it e_ICL is 1 + noise_var "
            f"to double precision), got {ridge.max():g}"
        )
    a, t, ik, r, lam = np.broadcast_arrays(alpha, tau, 1.0 / kappa, noise_var, ridge)
    shape = a.shape
    a, t, ik, r, lam = (np.ravel(v) for v in (a, t, ik, r, lam))
    out = np.empty(a.shape, dtype=np.float64)
    ridgeless = lam == 0
    out[ridgeless] = _icl_ridgeless(a[ridgeless], t[ridgeless], ik[ridgeless], r[ridgeless])
    if not np.all(ridgeless):
        ridge_pts = ~ridgeless
        out[ridge_pts] = _icl_ridge(
            a[ridge_pts], t[ridge_pts], ik[ridge_pts], r[ridge_pts], lam[ridge_pts]
        )
    return float(out[0]) if shape == () else out.reshape(shape)


@declare(alpha=_RATIO, tau=_RATIO, kappa=_RATIO, noise_var=_NOISE)
def idg_error(alpha, tau, kappa, noise_var=0.0):
    """Asymptotic ridgeless in-distribution error ``e_IDG``: test prompts reuse the ``K = κd`` pretraining tasks.

    The task-generalisation gap is ``g = icl_error(α, τ, κ, ρ) − idg_error(α, τ, κ, ρ)``. ``inf`` at ``τ = 1``.

    Parameters
    ----------
    alpha, tau, kappa
        ``α > 0``, ``τ > 0``, ``κ > 0`` (``np.inf`` allowed); arrays broadcast.
    noise_var
        Label-noise variance ``ρ >= 0``.

    Returns
    -------
    float or numpy.ndarray
        ``e_IDG`` with the broadcast shape of the arguments.
    """
    alpha = _check_array("alpha", alpha, positive=True, minimum=MIN_RATIO)
    tau = _check_array("tau", tau, positive=True, minimum=MIN_RATIO)
    kappa = _check_array("kappa", kappa, positive=True, minimum=MIN_RATIO)
    noise_var = _check_array("noise_var", noise_var, positive=False)
    if np.any(np.isinf(noise_var)):
        raise ValueError("noise_var must be finite")
    a, t, ik, r = np.broadcast_arrays(alpha, tau, 1.0 / kappa, noise_var)
    x = (1.0 + r) / a
    m = _m_kappa(x, ik)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # ε = (1−τ) x*/(τ μ̃) with μ̃ = x* M_{κ/τ}(x*): written without x*/x* so α = ∞ works.
        eps = (1 - t) / (t * _m_kappa(x, t * ik))
        # c = 1 / (1 − κ / (1 + κ ε/(1−τ))²), with κ/(1 + κ a)² = (1/κ) / (1/κ + a)².
        # The denominator 1 − τ − c(1−τ)² = (1−τ)(τ − κ/(1+κa)²)/(1 − κ/(1+κa)²), a = ε/(1−τ), is
        # written so that its zero at κ = τ, α = ∞ is exact instead of a difference of rounded terms:
        # τ − (1/κ)/(1/κ + a)² = [(1/κ)(τ/κ − 1) + τa(2/κ + a)] / (1/κ + a)².
        a_ = eps / (1 - t)
        denominator = (1 - t) * (ik * (t * ik - 1) + t * a_ * (2 * ik + a_)) / ((ik + a_) ** 2 - ik)
        small = t * ((x + eps) ** 2 / eps + (r + x - 2 * x * (1 - t) * (x / eps + 1)) / denominator)
        large = (r + x * (1 - x * m)) / (1 - 1 / t)
        # α = ∞ (x* = 0) in closed form: x*(1 − x* M) → 0 for τ > 1 (x* M stays bounded); for τ < 1,
        # M_{κ/τ}(0) is finite only for κ > τ (the formula above then holds at x* = 0); for κ < τ,
        # ε → 0 like x*, c → 1/(1 − κ) and e → τρ(1 − κ)/((1 − τ)(τ − κ)); at κ = τ the denominator
        # vanishes: inf for ρ > 0, 0 for ρ = 0 (tested against large α).
        kap = np.divide(1.0, ik, out=np.full(ik.shape, np.inf), where=ik > 0)
        at_kappa_tau = np.where(r > 0, np.inf, 0.0)
        small_inf = np.where(
            t * ik < 1,  # κ > τ, tested on the product M_{κ/τ} is evaluated at
            small,
            np.where(t * ik > 1, t * r * (1 - kap) / ((1 - t) * (t - kap)), at_kappa_tau),
        )
        limit = np.where(t < 1, small_inf, r / (1 - 1 / t))
    out = np.where(t < 1, small, large)
    out = np.where(np.isinf(a), limit, out)
    out = np.where(t == 1, np.inf, out)
    return float(out) if out.ndim == 0 else out


@declare(
    gamma=_GAMMA,
    alpha=_ALPHA,
    noise_var=_NOISE_SCALAR,
    task_mean=OrNone(Array(ndim=1)),
    task_second_moment=OrNone(Array(ndim=2)),
    task_pool=OrNone(Array(ndim=2)),
)
def error_of_gamma(
    gamma, alpha, noise_var, task_mean=None, task_second_moment=None, *, task_pool=None
):
    """Exact test error ``E (y_q − ⟨Γ, H_Z⟩)²`` of a given ``Γ`` at finite ``d`` (linear teacher).

    ``e = 1 + ρ + ((1+ρ)/d) tr(ΓᵀΓB) − (2/d) tr(ΓA)``, with ``A``, ``B`` built from the task moments
    ``μ̂ = E w`` and ``R̂ = E w wᵀ`` (chapter 3) and ``ℓ = αd`` with ``d = gamma.shape[0]``, for tasks of
    norm ``√d``. Without task moments the error is for fresh tasks (``μ̂ = 0``, ``R̂ = I``: ``e_ICL``); with
    a task pool (``task_pool=``, as in :func:`nonlinear_error_of_gamma`) or its moments
    (:func:`task_moments`) it is the in-distribution error ``e_IDG``. A pool's rows may have any norm:
    then ``1 + ρ`` becomes ``E y² = ‖w‖²/d + ρ`` inside the average over the rows, which also needs
    ``E[‖w‖² w]`` and ``E ‖w‖⁴`` (so moments alone are accepted only with ``tr R̂ = d``).

    Parameters
    ----------
    gamma
        ``(d, d+1)`` array ``Γ``.
    alpha
        ``α = ℓ/d >= MIN_RATIO``; pass ``ℓ/d`` exactly for the context length ``ℓ`` that ``Γ`` is used with.
    noise_var
        Label-noise variance ``ρ >= 0``.
    task_mean, task_second_moment
        ``(d,)`` and ``(d, d)``; both or neither; tasks of norm ``√d`` (``tr R̂ = d``).
    task_pool
        ``None`` or a ``(K, d)`` array of non-zero task vectors (rows of any norm); not together
        with the moments.

    Returns
    -------
    float
    """
    gamma = reduced_gamma("gamma", gamma)
    d = gamma.shape[0]
    alpha = real("alpha", alpha, low=MIN_RATIO)  # MIN_RATIO: ℓ = αd and 1/α enter below
    noise_var = nonnegative_float("noise_var", noise_var)
    if task_pool is not None:
        if task_mean is not None or task_second_moment is not None:
            raise ValueError("pass task_pool or task_mean/task_second_moment, not both")
        pool, norms = task_vectors("task_pool", task_pool, d)
        mu, r_hat = task_moments(pool)
        # The moments a pool of any norm needs (for ‖w‖ = √d: s2 = s4 = 1 and v = μ̂).
        sq = norms**2 / d
        s2, s4 = float(sq.mean()), float((sq * sq).mean())
        v = (sq[:, None] * pool).mean(axis=0)
    elif (task_mean is None) != (task_second_moment is None):
        raise ValueError(
            "task_mean and task_second_moment must be given together (or both omitted)"
        )
    elif task_mean is None:
        mu, r_hat, s2, s4 = np.zeros(d), np.eye(d), 1.0, 1.0
        v = mu
    else:
        mu = as_array("task_mean", task_mean, 1)
        if mu.shape != (d,):
            raise ValueError(f"task_mean must have shape ({d},), got {mu.shape}")
        r_hat = covariance("task_second_moment", task_second_moment, d)
        # Two moments describe the error only for tasks of norm √d (E‖w‖² = tr R̂ = d); other
        # norms need E[‖w‖² w] and E‖w‖⁴ too, which the pool itself gives.
        mean_sq = float(np.trace(r_hat)) / d
        if not abs(mean_sq - 1.0) <= 1e-8:
            raise ValueError(
                "task_second_moment must describe tasks of norm sqrt(d) (trace = d), got trace "
                f"{mean_sq * d:.6g} for d = {d}; pass task_pool= for a pool of any norm"
            )
        s2, s4, v = 1.0, 1.0, mu
    # Given w: E y² = m2(w) = ‖w‖²/d + ρ; E h = [w; m2]; E[h hᵀ] has blocks (d m2/ℓ) I + (1 + 1/ℓ) w wᵀ,
    # (1 + 2/ℓ) m2 w and (1 + 2/ℓ) m2²; averaged over the tasks with the moments above.
    ell = alpha * d
    m2_w = v + noise_var * mu  # E[m2(w) w]
    a_mat = np.empty((d + 1, d))
    a_mat[:d] = r_hat
    a_mat[d] = m2_w
    b_mat = np.empty((d + 1, d + 1))
    b_mat[:d, :d] = (s2 + noise_var) * np.eye(d) / alpha + (1 + 1 / ell) * r_hat
    b_mat[d, :d] = b_mat[:d, d] = (1 + 2 / ell) * m2_w
    b_mat[d, d] = (1 + 2 / ell) * (s4 + 2 * noise_var * s2 + noise_var * noise_var)
    quad = np.einsum("ij,ij->", gamma @ b_mat, gamma)  # tr(Γᵀ Γ B) = tr(Γ B Γᵀ)
    lin = np.einsum("ij,ji->", gamma, a_mat)  # tr(Γ A)
    return float(s2 + noise_var + quad / d - 2 / d * lin)


class TaskMoments(NamedTuple):
    """Moments of a task pool, uniform over its rows (:func:`task_moments`).

    Attributes
    ----------
    mean
        ``μ̂ = E w``, shape ``(d,)``.
    second_moment
        ``R̂ = E w wᵀ``, shape ``(d, d)``.
    """

    mean: np.ndarray
    second_moment: np.ndarray


class EquivalentTask(NamedTuple):
    """The linear teacher ``y = μ_1 (x·w) + ξ``, ``Var ξ = ρ_eff``, of :func:`equivalent_linear_task`.

    Attributes
    ----------
    mu1
        The linear Hermite component ``μ_1`` (its sign kept; errors depend on ``μ_1²`` only).
    rho_eff
        The effective noise ``ρ_eff >= ρ``.
    """

    mu1: float
    rho_eff: float


@declare(task_pool=Array(ndim=2))
def task_moments(task_pool) -> TaskMoments:
    """Mean ``(d,)`` and second-moment matrix ``(d, d)`` of a ``(K, d)`` task pool (uniform over its rows)."""
    pool = as_array("task_pool", task_pool, 2)
    if pool.shape[0] < 1:
        raise ValueError("task_pool must have at least one row")
    return TaskMoments(pool.mean(axis=0), pool.T @ pool / pool.shape[0])


# --- nonlinear: chapter 4 section below ---


def _teacher(link, *, allow_none: bool = False):
    """``link`` as a callable (a string is looked up in :data:`icl_book.hermite.LINKS`).

    The package's one teacher-link resolver (:mod:`icl_book.simulate` uses it too). With ``allow_none``,
    ``None`` (the linear teacher ``f(z) = z``) is returned as is, as :func:`icl_book.simulate.sample_reduced_prompts`
    takes it.
    """
    if allow_none and link is None:
        return None
    if isinstance(link, str):
        return hermite.get_link(link)
    if not callable(link):
        accepted = "a registered link name or None" if allow_none else "or a registered link name"
        raise TypeError(
            f"link must be a vectorised callable R -> R{',' if allow_none else ''} {accepted}, "
            f"got {type(link).__name__}"
        )
    return link


@declare(link=_LINK, noise_var=_NOISE_SCALAR)
def equivalent_linear_task(link, noise_var=0.0) -> EquivalentTask:
    """The linear teacher that linear attention cannot tell apart from the teacher ``link`` (``f``).

    For ``y = f(x·w) + ε`` with ``x·w ~ N(0, 1)`` and ``ε ~ N(0, ρ)``, linear attention extracts only the linear
    Hermite component ``μ_1 = E[f(Z) Z]``; everything else acts as label noise (arXiv:2610.10761; working form
    of chapter 4). The equivalent teacher is ``y = μ_1 (x·w) + ξ`` with ``ξ ~ N(0, ρ_eff)`` and

        ``ρ_eff = ρ + E f(Z)² − μ_1² = ρ + μ_0² + Σ_{k≥2} μ_k² / k!``.

    The mean ``μ_0 = E f(Z)`` is counted as noise: the model has no bias and its output is odd in ``x_q``, so a
    constant offset of the labels can never be predicted (centring ``f`` removes ``μ_0²`` from ``ρ_eff``).
    How arXiv:2610.10761 itself treats ``μ_0`` is not confirmed here.

    Parameters
    ----------
    link
        The teacher ``f``: a vectorised callable ``R -> R`` with ``E f(Z)² < ∞`` (e.g. ``np.tanh`` or a
        :class:`icl_book.hermite.Link`),
        or the name of a link in :data:`icl_book.hermite.LINKS`. Moments are computed by
        :mod:`icl_book.hermite`'s kink-aware quadrature (kinks are located when not declared).
    noise_var
        ``ρ >= 0``, the variance of the teacher's own label noise.

    Returns
    -------
    EquivalentTask
        ``(mu1, rho_eff)``: ``μ_1`` (its sign is kept; the errors depend on ``μ_1²`` only) and
        ``ρ_eff >= ρ``.

    Raises
    ------
    ValueError
        If ``E f(Z)²`` is infinite, or ``link`` is not finite on the quadrature nodes, or ``noise_var < 0``.
    TypeError
        If ``link`` is neither callable nor a link name.

    Examples
    --------
    >>> mu1, rho_eff = equivalent_linear_task(np.sign, noise_var=0.1)
    >>> print(f"{mu1:.6f} {rho_eff:.6f}")  # √(2/π) and 0.1 + 1 − 2/π
    0.797885 0.463380
    """

    noise_var = nonnegative_float("noise_var", noise_var)
    link = _teacher(link)
    try:
        mu1 = hermite.linear_component(link)
        rho_eff = hermite.effective_noise(link, noise_var)
    except TypeError as exc:  # what the link returned is not a real number
        raise TypeError(f"link must be a real function f(z): {exc}") from None
    except ValueError as exc:
        raise ValueError(
            f"link must have a finite second moment E f(Z)^2 under Z ~ N(0, 1): {exc}"
        ) from None
    return EquivalentTask(float(mu1), float(rho_eff))


# Below this fraction of E y² = E f² + ρ the linear component counts as exactly zero (the quadrature leaves
# ~1e-16 for an even link); the errors are then the μ_1 → 0 limit of the mapped formula.
_MU1_ZERO = 1e-12
# Surrogate μ_1² (relative to ρ_eff) used to take that limit; a two-point extrapolation removes the O(μ_1²)
# term, leaving a relative error that grows with α/κ: measured over α, τ in [0.1, 100] (the explorer's
# ranges) at most 2e-8 for κ = ∞, 1.4e-6 for κ = 1 and 1.4e-5 for κ = 0.1
# (booktools.explorer_data.limit_accuracy measures it for the explorer's zero-gap test).
_LIMIT_STEP = 1e-5


def _mapped(linear_error, mu1: float, rho_eff: float, ridge: float):
    """``μ_1² · e_lin(ρ_eff/μ_1², λ/μ_1²)``, continued to ``μ_1 = 0`` by its limit."""
    s = mu1 * mu1
    baseline = s + rho_eff  # E f² + ρ: the error of the predictor ŷ = 0
    if baseline == 0.0:  # f = 0 and ρ = 0: every label is 0, and so is every prediction
        # 0, with the arguments' shape (not 0 · e_lin: that is NaN at the ridgeless τ = 1, where the
        # minimum-norm fit of all-zero labels is still Γ = 0).
        shape = np.shape(linear_error(1.0, ridge))
        return 0.0 if shape == () else np.zeros(shape)
    if s > _MU1_ZERO * baseline:
        return s * linear_error(rho_eff / s, ridge / s)
    # μ_1 = 0: g(s) = s · e_lin(ρ_eff/s, λ/s) is smooth at s = 0; extrapolate linearly from s and 2s.
    s = _LIMIT_STEP * rho_eff
    with np.errstate(invalid="ignore"):  # inf − inf at the divergence τ = 1 stays inf below
        g1 = s * np.asarray(linear_error(rho_eff / s, ridge / s))
        g2 = 2 * s * np.asarray(linear_error(rho_eff / (2 * s), ridge / (2 * s)))
        out = np.where(np.isfinite(g1) & np.isfinite(g2), 2 * g1 - g2, np.inf)
    return float(out) if out.ndim == 0 else out


@declare(link=_LINK, alpha=_RATIO, tau=_RATIO, kappa=_RATIO, noise_var=_NOISE_SCALAR, ridge=_RIDGE)
def nonlinear_icl_error(link, alpha, tau, kappa=np.inf, noise_var=0.0, ridge=0.0):
    """Asymptotic in-context (fresh-task) error of linear attention pretrained on the teacher ``link`` (``f``).

    The nonlinearity–noise mapping (chapter 4): with ``(μ_1, ρ_eff) = equivalent_linear_task(f, ρ)``,

        ``e_f(α, τ, κ, ρ, λ) = μ_1² · e_lin(α, τ, κ, ρ_eff / μ_1², λ / μ_1²)``,

    where ``e_lin`` is :func:`icl_error`. (Dividing the labels by ``μ_1`` turns the equivalent teacher into the
    unit linear teacher with noise ``ρ_eff/μ_1²``; the pretraining ridge scales by the same ``1/μ_1²``.)

    ``μ_1 = 0`` (an even link such as ``|z|`` or ``He_2``) is not an error. Linear attention then learns nothing
    about the task: the population-optimal ``Γ`` is 0, whose error is the *no-learning baseline* ``E f² + ρ``
    (the error of predicting 0). The value returned is the limit ``μ_1 → 0`` of the mapped formula, which is that
    baseline plus what pretraining on pure noise costs: ridgeless, ``(E f² + ρ)/(1 − τ)`` for ``τ < 1`` and
    ``(E f² + ρ) τ/(τ − 1)`` for ``τ > 1`` (any ``κ``); it tends to the baseline as ``τ → ∞``.

    Parameters
    ----------
    link
        The teacher ``f`` (callable or registered name) with ``E f(Z)² < ∞``; see
        :func:`equivalent_linear_task`.
    alpha, tau, kappa, noise_var, ridge
        As in :func:`icl_error` (context ``ℓ = αd``, ``n = τd²`` pretraining prompts, ``K = κd`` tasks with
        ``np.inf`` for fresh tasks, label-noise variance ``ρ >= 0``, pretraining ridge ``λ >= 0``);
        ``alpha``, ``tau`` and ``kappa`` may be arrays (they broadcast).

    Returns
    -------
    float or numpy.ndarray
        The predicted error; ``inf`` where the linear theory diverges (ridgeless ``τ = 1``).

    Examples
    --------
    >>> e = nonlinear_icl_error(np.abs, 2.0, 3.0, noise_var=0.1)  # μ_1 = 0: (1 + 0.1) · 3/2
    >>> print(f"{e:.4f}")
    1.6500
    """
    noise_var = nonnegative_float("noise_var", noise_var)
    ridge = nonnegative_float("ridge", ridge)
    # Validate alpha, tau, kappa with the linear theory's own messages.
    icl_error(alpha, tau, kappa, noise_var=noise_var, ridge=ridge)
    mu1, rho_eff = equivalent_linear_task(link, noise_var)
    return _mapped(
        lambda r, lam: icl_error(alpha, tau, kappa, noise_var=r, ridge=lam), mu1, rho_eff, ridge
    )


@declare(link=_LINK, alpha=_RATIO, tau=_RATIO, kappa=_RATIO, noise_var=_NOISE_SCALAR)
def nonlinear_idg_error(link, alpha, tau, kappa, noise_var=0.0):
    """Asymptotic in-distribution error (test tasks = the ``K = κd`` pretraining tasks) for the teacher ``link``.

    Ridgeless, ``μ_1² · e_IDG(α, τ, κ, ρ_eff/μ_1²)`` with :func:`idg_error`; for ``μ_1 = 0`` the limit of that
    formula (see :func:`nonlinear_icl_error`). Arguments as in :func:`idg_error`; returns a float or an array.
    """
    noise_var = nonnegative_float("noise_var", noise_var)
    idg_error(alpha, tau, kappa, noise_var=noise_var)
    mu1, rho_eff = equivalent_linear_task(link, noise_var)
    return _mapped(lambda r, _lam: idg_error(alpha, tau, kappa, noise_var=r), mu1, rho_eff, 0.0)


def _token_moments(
    link, sigma: float, noise_var: float
) -> tuple[float, float, float, float, float]:
    """Per-token moments of ``y = f(σg) + ε`` (``g ~ N(0, 1)``, ``ε ~ N(0, ρ)``) that the error of Γ needs.

    Returns ``E[y g]``, ``E y²``, ``E[y² g²]``, ``E[y³ g]`` and ``E y⁴``, with the noise integrated out exactly.
    """

    kinks = [c / sigma for c in (getattr(link, "kinks", None) or ())]

    def f(z):  # the link's output checked by name before it enters a moment
        out = callable_output("link output", link(z))
        try:
            return np.broadcast_to(out, np.shape(z))
        except ValueError:
            raise ValueError(
                f"link must be vectorised: it returned shape {out.shape} for an input of shape "
                f"{np.shape(z)}"
            ) from None

    def moment(power: int, g_power: int) -> float:
        return hermite.gaussian_expectation(
            lambda g: f(sigma * g) ** power * g**g_power, kinks=kinks
        )

    f1g, f2, f2g2, f3g, f4 = moment(1, 1), moment(2, 0), moment(2, 2), moment(3, 1), moment(4, 0)
    return (
        f1g,
        f2 + noise_var,
        f2g2 + noise_var,
        f3g + 3 * noise_var * f1g,
        f4 + 6 * noise_var * f2 + 3 * noise_var * noise_var,
    )


@declare(
    gamma=_GAMMA,
    link=OrNone(_LINK),
    alpha=_ALPHA,
    noise_var=_NOISE_SCALAR,
    task_pool=OrNone(Array(ndim=2)),
)
def nonlinear_error_of_gamma(gamma, link, alpha, noise_var, task_pool=None) -> float:
    """Exact test error ``E (y_q − ⟨Γ, H_Z⟩)²`` of a given ``Γ`` at finite ``d`` for a single-index teacher.

    The teacher is ``y = f(x·w) + ε`` with the conventions of :func:`error_of_gamma` (``x ~ N(0, I/d)``,
    ``ε ~ N(0, ρ)`` on context and query labels, ``ℓ = αd``). Write ``Γ = [G | c]``, ``u = w/‖w‖``,
    ``σ = ‖w‖/√d`` and take the per-token moments ``m_1 = E[y g]``, ``m_2 = E y²``, ``m_{22} = E[y² g²]``,
    ``m_{31} = E[y³ g]``, ``m_4 = E y⁴`` of ``y = f(σg) + ε``, ``g ~ N(0, 1)`` (1-D quadrature, kink-aware).
    Because ``H_Z = x_q hᵀ`` with ``x_q`` independent of ``h``, only the first two moments of ``h`` given ``w``
    enter, and ``Σ_i y_i x_i = u Σ_i y_i s_i + v^⊥`` (as in :mod:`icl_book.simulate`) gives them exactly:

        ``e(w) = m_2 − 2 m_1 (m_1 uᵀGu + m_2 uᵀc/√d) + (1/d)[b ‖G‖_F² + (a − b)‖Gu‖² + 2 q cᵀGu + t ‖c‖²]``

    with ``a = (d/ℓ²)(ℓ m_{22} + ℓ(ℓ−1) m_1²)``, ``b = d m_2/ℓ``, ``q = (√d/ℓ²)(ℓ m_{31} + ℓ(ℓ−1) m_1 m_2)`` and
    ``t = (ℓ m_4 + ℓ(ℓ−1) m_2²)/ℓ²``. Fresh tasks (``task_pool=None``, ``‖w‖ = √d``) average ``u`` over the
    sphere (``uᵀGu → tr G/d``, ``‖Gu‖² → ‖G‖_F²/d``, odd terms → 0): the in-context error ``e_ICL``. A task pool
    averages ``e(w)`` over its rows: the in-distribution error ``e_IDG``. For ``f(z) = z`` this is
    :func:`error_of_gamma`; for any ``f`` it is what :func:`icl_book.simulate.mc_error` estimates, without the
    Monte Carlo noise.

    Parameters
    ----------
    gamma
        ``(d, d+1)`` array ``Γ``.
    link
        The teacher ``f`` (vectorised callable or registered name; ``None`` is ``f(z) = z``) with
        ``E f(Z)⁴ < ∞``.
    alpha
        ``α = ℓ/d >= MIN_RATIO``; pass ``ℓ/d`` exactly for the context length ``ℓ`` that ``Γ`` is used with.
    noise_var
        Label-noise variance ``ρ >= 0``.
    task_pool
        ``None`` (fresh tasks) or a ``(K, d)`` array of non-zero task vectors (rows of any norm).

    Returns
    -------
    float

    Examples
    --------
    >>> gamma = np.zeros((4, 5))  # predicts 0: the error is E f² + ρ
    >>> print(f"{nonlinear_error_of_gamma(gamma, np.sign, 2.0, 0.1):.4f}")
    1.1000
    """
    gamma = reduced_gamma("gamma", gamma)
    d = gamma.shape[0]
    link = (lambda z: z) if link is None else _teacher(link)
    alpha = real("alpha", alpha, low=MIN_RATIO)  # MIN_RATIO: ℓ = αd and 1/α enter below
    noise_var = nonnegative_float("noise_var", noise_var)
    ell = alpha * d
    g_mat, c = gamma[:, :d], gamma[:, d]
    fro2 = float(np.einsum("ij,ij->", g_mat, g_mat))
    moments = {}

    def coefficients(sigma: float):
        if sigma not in moments:
            m1, m2, m22, m31, m4 = _token_moments(link, sigma, noise_var)
            a = d / ell**2 * (ell * m22 + ell * (ell - 1) * m1 * m1)
            b = d * m2 / ell
            q = np.sqrt(d) / ell**2 * (ell * m31 + ell * (ell - 1) * m1 * m2)
            t = (ell * m4 + ell * (ell - 1) * m2 * m2) / ell**2
            moments[sigma] = (m1, m2, a, b, q, t)
        return moments[sigma]

    if task_pool is None:
        m1, m2, a, b, _, t = coefficients(1.0)
        quad = b * fro2 + (a - b) * fro2 / d + t * float(c @ c)
        return float(m2 - 2 * m1 * m1 * np.trace(g_mat) / d + quad / d)
    pool, norms = task_vectors("task_pool", task_pool, d)
    u = pool / norms[:, None]
    gu = u @ g_mat.T  # row k: (G u_k)ᵀ
    u_g_u = np.einsum("kd,kd->k", gu, u)
    gu2 = np.einsum("kd,kd->k", gu, gu)
    u_c = u @ c
    c_g_u = gu @ c
    total = 0.0
    # Rows of equal norm share their moments (a pool from sample_task_pool has ‖w‖ = √d for all rows).
    sigmas = np.round(norms / np.sqrt(d), 12)
    for sigma in np.unique(sigmas):
        rows = sigmas == sigma
        m1, m2, a, b, q, t = coefficients(float(sigma))
        e = (
            m2
            - 2 * m1 * (m1 * u_g_u[rows] + m2 * u_c[rows] / np.sqrt(d))
            + (b * fro2 + (a - b) * gu2[rows] + 2 * q * c_g_u[rows] + t * float(c @ c)) / d
        )
        total += float(e.sum())
    return total / pool.shape[0]


# --- one-step GD: the exact risks of one preconditioned GD step (chapters 0 and 2) ---


def _gd_inputs(input_cov, context_len, noise_var):
    """``Λ`` (a checked covariance), ``N`` and ``σ²`` of the one-step GD formulas."""
    cov = as_array("input_cov", input_cov, 2)
    if cov.shape[0] != cov.shape[1] or cov.shape[0] < 1:
        raise ValueError(f"input_cov must be a square (d, d) matrix, got shape {cov.shape}")
    cov = covariance("input_cov", cov, cov.shape[0])
    return cov, int(context_len), float(noise_var)


def _unit(*scales: float) -> float:
    """A power of two near the largest of ``scales`` (1 when all are 0): dividing by it is exact."""
    return 2.0 ** np.frexp(max(scales))[1]


def _second_moment(cov, n: int, s2: float) -> np.ndarray:
    """``S = E[g gᵀ]`` for ``g = (1/N) Σ y_i x_i`` with ``w ~ N(0, I)``, ``x ~ N(0, Λ)``:
    ``(1 + 1/N) Λ² + ((tr Λ + σ²)/N) Λ``."""
    return (1 + 1 / n) * cov @ cov + ((np.trace(cov) + s2) / n) * cov


@declare(preconditioner=_GD_GAMMA, input_cov=_GD_COV, context_len=_CONTEXT, noise_var=_NOISE_SCALAR)
def one_step_gd_risk(preconditioner, input_cov, context_len: int, noise_var: float = 0.0) -> float:
    """Exact risk ``E(y_q − ŷ)²`` of one preconditioned GD step (step folded into ``Γ``).

    For ``x ~ N(0, Λ)``, ``w ~ N(0, I)``, noise ``σ²``:
    ``R(Γ) = tr Λ + σ² − 2 tr(Λ Γ Λ) + tr(Γ S Γᵀ Λ)`` with ``S = (1+1/N) Λ² + ((tr Λ+σ²)/N) Λ``.
    Every entry of ``Γ`` and ``Λ`` is at most :data:`MAX_GD_ENTRY` in size, where the risk is a
    float64 number.
    """
    cov, n, s2 = _gd_inputs(input_cov, context_len, noise_var)
    gamma = square_matrix("preconditioner", preconditioner, cov.shape[0])
    return float(
        np.trace(cov)
        + s2
        - 2 * np.trace(cov @ gamma @ cov)
        + np.trace(gamma @ _second_moment(cov, n, s2) @ gamma.T @ cov)
    )


@declare(input_cov=_COV, context_len=_CONTEXT, noise_var=_NOISE_SCALAR)
def best_one_step_eta(input_cov, context_len: int, noise_var: float = 0.0) -> float:
    """The step ``η*`` minimising the risk of one plain GD step: ``tr(Λ²) / tr(S Λ)``.

    ``input_cov`` must be a non-zero ``(d, d)`` covariance (``Λ = 0`` has no best step: refused).
    """
    cov, n, s2 = _gd_inputs(input_cov, context_len, noise_var)
    if not np.any(cov):
        # Λ = 0: every step has the same risk σ², and tr(Λ²)/tr(SΛ) is 0/0.
        raise ValueError("input_cov must be non-zero (with Λ = 0 every step η has the same risk)")
    # In units of c = a power of two near max|Λ| (exact): Λ = c L, S Λ = c³ (...), η* = (1/c) ×
    # tr(L²)/tr(S_L L) with σ²/c in place of σ², so Λ ~ 1e-300 or 1e200 neither under- nor overflows.
    c = _unit(float(np.max(np.abs(cov))))
    unit = cov / c
    return float(np.trace(unit @ unit) / np.trace(_second_moment(unit, n, s2 / c) @ unit) / c)


@declare(input_cov=_PRECONDITIONER_COV, context_len=_CONTEXT, noise_var=_NOISE_SCALAR)
def optimal_preconditioner(input_cov, context_len: int, noise_var: float = 0.0) -> np.ndarray:
    """``Γ* = [(1 + 1/N) Λ + ((tr Λ + σ²)/N) I]^{-1}``, the risk-minimising preconditioner; ``(d, d)``.

    It minimises :func:`one_step_gd_risk` over all ``Γ`` (chapter 2). Every entry of ``Λ`` is at
    most :data:`MAX_COV_ENTRY` in size; ``tr Λ + σ²`` must not be so small that ``Γ*`` (of size
    up to ``N / (tr Λ + σ²)``) is beyond float64.
    """
    cov, n, s2 = _gd_inputs(input_cov, context_len, noise_var)
    return _optimal_preconditioner(cov, n, s2)


def _optimal_preconditioner(cov, n: int, s2: float) -> np.ndarray:
    # In units of c = a power of two near max(|Λ|, σ²) (exact, so the same bits wherever nothing
    # under- or overflows): Γ* = (1/c) [(1 + 1/N) L + ((tr L + σ²/c)/N) I]^{-1} with Λ = c L, so
    # neither tr Λ nor the matrix overflows for Λ up to MAX_COV_ENTRY.
    c = _unit(float(np.max(np.abs(cov))), s2)
    unit = cov / c
    matrix = (1 + 1 / n) * unit + ((np.trace(unit) + s2 / c) / n) * np.eye(cov.shape[0])
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # checked just below
        try:
            gamma = np.linalg.inv(matrix) / c
        except np.linalg.LinAlgError:  # Λ = 0 and σ² = 0: singular
            gamma = np.full(cov.shape, np.inf)
    if not np.all(np.isfinite(gamma)):
        raise ValueError(
            "input_cov and noise_var must not both be so small that Γ* = [(1 + 1/N) Λ + "
            "((tr Λ + σ²)/N) I]^-1 is beyond float64 (its entries reach N / (tr Λ + σ²)), got "
            f"tr Λ = {np.trace(cov):g} and noise_var = {s2:g} with N = {n}"
        )
    return gamma


@declare(input_cov=_PRECONDITIONER_COV, context_len=_CONTEXT, noise_var=_NOISE_SCALAR)
def optimal_preconditioned_risk(input_cov, context_len: int, noise_var: float = 0.0) -> float:
    """``R* = tr Λ + σ² − tr(Λ Γ* Λ)``, the risk of the best one-step preconditioned GD predictor."""
    cov, n, s2 = _gd_inputs(input_cov, context_len, noise_var)
    gamma = _optimal_preconditioner(cov, n, s2)
    return float(np.trace(cov) + s2 - np.trace(cov @ gamma @ cov))


# --- glu: the best linear predictor of a quadratic task, the whitened step's excess risk (chapter 5) ---


@declare(A=Array(ndim=None), noise_var=_NOISE_SCALAR)
def best_linear_risk_quadratic(A, noise_var: float = 0.0):
    """Risk of the best linear predictor ``uᵀx`` of ``y = xᵀAx + ε``, ``x ~ N(0, I_d)``: ``σ² + 2‖A‖_F² + (tr A)²``.

    Every LSA's prediction is linear in ``x_q`` given the context, so this is a lower bound on its risk
    (chapter 5). The best ``u`` is ``0``: ``E[y x] = 0`` (odd moments of a Gaussian vanish).

    Parameters
    ----------
    A
        Symmetric ``(d, d)`` matrix, or a batch ``(B, d, d)``.
    noise_var
        ``σ² >= 0``.

    Returns
    -------
    float or numpy.ndarray
        A float for one matrix, a ``(B,)`` array for a batch.
    """
    a = as_array("A", A)
    if a.ndim not in (2, 3) or a.shape[-1] != a.shape[-2] or a.shape[-1] < 1:
        raise ValueError(
            f"A must be a square (d, d) matrix or a (B, d, d) batch, got shape {a.shape}"
        )
    if not np.all(np.isfinite(a)):
        raise ValueError("A must be finite")
    if not np.allclose(a, np.swapaxes(a, -1, -2), rtol=1e-10, atol=1e-12):
        raise ValueError("A must be symmetric (use (A + Aᵀ)/2: xᵀAx only sees the symmetric part)")
    noise_var = nonnegative_float("noise_var", noise_var)
    risk = noise_var + 2 * np.sum(a**2, axis=(-1, -2)) + np.trace(a, axis1=-2, axis2=-1) ** 2
    return float(risk) if a.ndim == 2 else risk


@declare(
    context_len=Array(within=Interval(1.0, math.inf)), dim=Integer(1, None), noise_var=_NOISE_SCALAR
)
def hermite_one_step_excess_risk(context_len, dim: int, noise_var: float = 0.0):
    """Exact excess risk of one GD step (``η = 1``) on the Hermite features, averaged over random quadratics.

    Features ``φ = [1; x; h(x)]`` (``p = (d+1)(d+2)/2``, identity covariance under ``x ~ N(0, I_d)``), tasks
    ``A`` from :func:`icl_book.tasks.sample_quadratic_tasks` (``E_A[(xᵀAx)²] = 1``), noise ``σ²``. Writing
    ``y = θᵀφ(x) + ε``, the step ``ĝ = (1/N) Σ_i y_i φ(x_i)`` is unbiased and its excess risk is exactly

    ``E‖ĝ − θ‖² = (E[y² ‖φ(x)‖²] − ‖θ‖²) / N = (σ² p + d/2 + (d+4)(d+6)/2) / N``  for every ``N >= 1``

    (use ``‖φ‖² = 1 + d/2 + ‖x‖⁴/2``, ``E_A[(xᵀAx)²] = ‖x‖⁴ / (d(d+2))`` and ``E‖x‖^{2k}`` of a ``χ²_d``).

    Parameters
    ----------
    context_len
        ``N >= 1``, an int or an array of ints.
    dim
        ``d >= 1``.
    noise_var
        ``σ² >= 0``.

    Returns
    -------
    float or numpy.ndarray
        The excess risk (risk minus ``σ²``), shaped like ``context_len``.
    """
    dim = positive_int("dim", dim)
    noise_var = nonnegative_float("noise_var", noise_var)
    n = _raw_array("context_len", context_len) if not isinstance(context_len, bool) else None
    if n is None or not np.issubdtype(n.dtype, np.integer) or np.any(n < 1):
        raise ValueError(
            f"context_len must be an integer (or integer array) >= 1, got {context_len!r}"
        )
    p = (dim + 1) * (dim + 2) / 2
    constant = noise_var * p + dim / 2 + (dim + 4) * (dim + 6) / 2
    out = constant / n
    return float(out) if out.ndim == 0 else out
