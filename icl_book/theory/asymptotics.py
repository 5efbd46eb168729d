"""The asymptotics of pretrained linear attention: closed forms of Lu et al. (chapter 3)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._declare import Array, Interval, OrNone, declare
from .._validate import (
    as_array,
    covariance,
    nonnegative_float,
    real,
    reduced_gamma,
    task_vectors,
)
from ._ranges import (
    _ALPHA,
    _GAMMA,
    _NOISE,
    _NOISE_SCALAR,
    _RATIO,
    _RIDGE,
    MAX_RIDGE,
    MIN_RATIO,
    MIN_RIDGE,
    _check_array,
)

__all__ = [
    "wishart_stieltjes",
    "icl_error",
    "idg_error",
    "error_of_gamma",
    "TaskMoments",
    "task_moments",
]


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


@declare(task_pool=Array(ndim=2))
def task_moments(task_pool) -> TaskMoments:
    """Mean ``(d,)`` and second-moment matrix ``(d, d)`` of a ``(K, d)`` task pool (uniform over its rows)."""
    pool = as_array("task_pool", task_pool, 2)
    if pool.shape[0] < 1:
        raise ValueError("task_pool must have at least one row")
    return TaskMoments(pool.mean(axis=0), pool.T @ pool / pool.shape[0])
