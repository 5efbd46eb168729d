"""The nonlinearity–noise mapping: a nonlinear teacher is a linear one at a higher noise (chapter 4)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import hermite
from .._declare import Array, OrNone, declare
from .._validate import (
    callable_output,
    nonnegative_float,
    real,
    reduced_gamma,
    task_vectors,
)
from ._ranges import (
    _ALPHA,
    _GAMMA,
    _LINK,
    _NOISE_SCALAR,
    _RATIO,
    _RIDGE,
    MIN_RATIO,
)
from .asymptotics import (
    icl_error,
    idg_error,
)

__all__ = [
    "EquivalentTask",
    "equivalent_linear_task",
    "nonlinear_icl_error",
    "nonlinear_idg_error",
    "nonlinear_error_of_gamma",
]


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
    >>> import numpy as np
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
    >>> import numpy as np
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
    >>> import numpy as np
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
