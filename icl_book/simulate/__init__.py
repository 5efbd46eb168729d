"""A fast pretraining simulator for the reduced linear-attention model (chapter 3).

Pretraining the reduced model ``ŷ = ⟨Γ, H_Z⟩`` on ``n`` prompts is a ridge regression with ``d(d+1)`` features
(chapter 3). The reference method materialises the features and solves the dense ``d(d+1) × d(d+1)``
normal equations: ``O(n d⁴)`` time and ``O(d⁴)`` memory. This module does the same regression exactly, faster:

1. **Exact-in-distribution sampling** (:func:`sample_reduced_prompts`). A prompt enters the regression only
   through the query ``x_q``, its label ``y_q`` and the vector
   ``h = [(d/ℓ) Σ_i y_i x_i, (1/ℓ) Σ_i y_i²] ∈ R^{d+1}`` (then ``H_Z = x_q hᵀ``). Write each context input as
   ``x_i = s_i u + x_i^⊥`` with ``u = w/‖w‖``: ``s_i ~ N(0, 1/d)`` and ``x_i^⊥ ~ N(0, P_u^⊥/d)`` are
   independent, and ``y_i = f(‖w‖ s_i) + ε_i`` depends on ``s_i`` and the noise only. Hence
   ``Σ y_i x_i = u Σ y_i s_i + v^⊥`` where, given the labels, ``v^⊥ = Σ y_i x_i^⊥ ~ N(0, (Σ y_i²/d) P_u^⊥)``.
   So ``ℓ`` scalars and one ``d``-vector per prompt reproduce the *exact* joint law of ``(x_q, h, y_q)``:
   ``O(ℓ + d)`` work instead of ``O(ℓ d)``, for any link ``f``.
2. **A matrix-free solver** (:func:`solve_reduced_ridge`): the normal-equation operator is
   ``Γ ↦ Σ_μ x_μ (x_μᵀ Γ h_μ) h_μᵀ``, i.e. ``Σ_μ (x_μ x_μᵀ) ⊗ (h_μ h_μᵀ)`` in Kronecker form, applied in
   ``O(n d²)`` by two matrix products streamed over row blocks, inside conjugate gradients. Only ``X_q (n, d)``,
   ``H (n, d+1)`` and ``y (n,)`` are stored: memory ``O(n d)``.

Objective: ``Σ_μ (y_μ − ⟨Γ, H_μ⟩)² + (n/d) λ ‖Γ‖_F²``; at ``λ = 0`` the minimum-norm least-squares solution.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np

from ._blas import OneBlasThread, one_blas_thread
from ._compat import NOISE_VAR, renamed
from ._validate import (
    as_array,
    callable_output,
    choice,
    consistent_length,
    flag,
    generator,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    real,
    reduced_gamma,
    size_limit,
    task_vectors,
)
from .hermite import get_link
from .tasks import sample_task_pool
from .theory import error_of_gamma, nonlinear_error_of_gamma

__all__ = [
    "ReducedPrompts",
    "SolveInfo",
    "RidgeSolution",
    "PretrainedLSA",
    "SimulatedErrors",
    "ProblemSizes",
    "problem_sizes",
    "reduced_features",
    "sample_reduced_prompts",
    "solve_reduced_ridge",
    "pretrain_reduced_lsa",
    "gamma_errors",
    "simulated_errors",
]
__all__ += ["MCError", "mc_error"]  # nonlinear (chapter 4)
__all__ += ["SWEEP_KEYS", "SweepResult", "sweep"]  # sweeps through an executor


# --- asymptotics: exact-in-distribution sampler and matrix-free ridge solver (chapter 3) ---

#: Prompts are drawn in blocks of this many (fixed, so that a seed always gives the same prompts).
SAMPLE_BATCH = 4096
#: Rows per block in the streamed matrix-free products (bounds the temporaries to ``O(block · d)``).
MATVEC_BLOCK = 16384
#: Relative accuracy of each single-precision CG round in :func:`solve_reduced_ridge` (float32 products are
#: accurate to ~1e-7 relative, times the condition number, so a round cannot reliably go much further).
REFINE_TOL = 1e-4


class ReducedPrompts(NamedTuple):
    """What ``n`` prompts contribute to the reduced regression.

    ``x_query (n, d)``, ``h (n, d+1)`` with ``H_Z = x_q hᵀ``, ``y_query (n,)``; ``tasks (n, d)`` the task of each
    prompt (``None`` unless requested).
    """

    x_query: np.ndarray
    h: np.ndarray
    y_query: np.ndarray
    tasks: np.ndarray | None = None


class SolveInfo(NamedTuple):
    """Diagnostics of :func:`solve_reduced_ridge`: CG iterations, final relative residual, convergence flag."""

    iterations: int
    residual: float
    converged: bool
    preconditioned: bool


class RidgeSolution(NamedTuple):
    """What :func:`solve_reduced_ridge` returns: the ``(d, d+1)`` solution ``gamma`` and its ``info``."""

    gamma: np.ndarray
    info: SolveInfo


class PretrainedLSA(NamedTuple):
    """What :func:`pretrain_reduced_lsa` returns: the learned ``gamma`` and the ``task_pool`` it was
    pretrained on (``None`` when ``κ = ∞``: a fresh task for every prompt)."""

    gamma: np.ndarray
    task_pool: np.ndarray | None


class SimulatedErrors(NamedTuple):
    """Exact errors of a pretrained ``Γ``: on fresh tasks (``icl``) and on the pretraining pool (``idg``)."""

    icl: float
    idg: float


class ProblemSizes(NamedTuple):
    """What :func:`problem_sizes` returns: the integer sizes of a simulation at ``(d, α, τ, κ)``.

    Unpacks like the tuple ``(ℓ, n, K)`` it replaces: ``ell, n, k = problem_sizes(d, alpha, tau, kappa)``.
    """

    #: ``ℓ = ⌊αd⌉``, the context length of every prompt.
    context_len: int
    #: ``n = ⌊τd²⌉``, the number of pretraining prompts (the ``batch`` of :func:`sample_reduced_prompts`).
    batch: int
    #: ``K = ⌊κd⌉``, the size of the task pool (``None`` when ``κ = ∞``: a fresh task per prompt).
    n_tasks: int | None


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def problem_sizes(dim: int, alpha: float, tau: float, kappa: float = np.inf) -> ProblemSizes:
    """Integer sizes ``(ℓ, n, K)`` of a simulation, as a :class:`ProblemSizes` (unpacks like a tuple).

    ``ℓ = ⌊αd⌉`` (``context_len``), ``n = ⌊τd²⌉`` (``batch``, the pretraining prompts) and
    ``K = ⌊κd⌉`` (``n_tasks``; ``None`` if κ = ∞).

    ``⌊x⌉`` rounds half up (``⌊x + ½⌋``), the same for every size. A size that rounds to 0 raises a
    ``ValueError`` naming the parameter. The theory should then be compared at the *realised* ratios
    ``ℓ/d``, ``n/d²``, ``K/d`` (they differ from α, τ, κ by less than ``1/(2d)``, ``1/(2d²)``, ``1/(2d)``).
    """
    dim = positive_int("dim", dim)
    alpha = positive_float("alpha", alpha)
    tau = positive_float("tau", tau)
    # "2", True and None are refused by name (float() would parse, cast or fail anonymously)
    kappa = real("kappa", kappa, low=0.0, low_open=True, allow_inf=True)
    ell = _round_half_up(alpha * dim)
    if ell < 1:
        raise ValueError(
            f"alpha * dim = {alpha * dim:g} rounds to a context length of 0; alpha must be >= {0.5 / dim:g}"
        )
    n = _round_half_up(tau * dim * dim)
    if n < 1:
        raise ValueError(
            f"tau * dim**2 = {tau * dim * dim:g} rounds to 0 prompts; tau must be >= {0.5 / dim**2:g}"
        )
    if math.isinf(kappa):
        return ProblemSizes(ell, n, None)
    k = _round_half_up(kappa * dim)
    if k < 1:
        raise ValueError(
            f"kappa * dim = {kappa * dim:g} rounds to 0 tasks; kappa must be >= {0.5 / dim:g}"
        )
    return ProblemSizes(ell, n, k)


def reduced_features(xs, ys) -> np.ndarray:
    """``h = [(d/ℓ) Σ_i y_i x_i, (1/ℓ) Σ_i y_i²]`` of a batch of explicit prompts (the naive way, ``O(ℓd)``).

    Parameters
    ----------
    xs
        ``(B, ℓ, d)`` context inputs.
    ys
        ``(B, ℓ)`` context labels.

    Returns
    -------
    numpy.ndarray
        ``(B, d+1)``; the reduced feature matrix of a prompt with query ``x_q`` is ``H_Z = x_q hᵀ``.
    """
    xs = as_array("xs", xs, 3)
    ys = as_array("ys", ys, 2)
    b, ell, d = xs.shape
    if ys.shape != (b, ell):
        raise ValueError(f"ys must have shape {(b, ell)} to match xs {xs.shape}, got {ys.shape}")
    out = np.empty((b, d + 1))
    out[:, :d] = np.einsum("bl,bld->bd", ys, xs) * (d / ell)
    out[:, d] = np.einsum("bl,bl->b", ys, ys) / ell
    return out


def _apply_link(link, z):
    if link is None:
        return z
    out = callable_output("link output", link(z))  # real and finite: a NaN label is refused here
    if out.shape != z.shape:
        raise ValueError(
            f"link must be vectorised (map an array to an array of the same shape), got {out.shape}"
        )
    return out


@renamed(n_prompts="batch", rho="noise_var")
@one_blas_thread
def sample_reduced_prompts(
    batch: int,
    context_len: int,
    dim: int,
    *,
    rng: np.random.Generator,
    noise_var: float = 0.0,
    task_pool: np.ndarray | None = None,
    link: Callable[[np.ndarray], np.ndarray] | None = None,
    return_tasks: bool = False,
) -> ReducedPrompts:
    """Draw ``(x_q, h, y_q)`` of ``n`` prompts exactly in law, in ``O(ℓ + d)`` per prompt (module docstring).

    Conventions of Lu et al.: ``x ~ N(0, I_d/d)``; ``y = f(x·w) + ε``, ``ε ~ N(0, ρ)``; tasks uniform over
    ``task_pool`` (rows of any norm) or, when ``task_pool`` is ``None``, fresh with ``‖w‖ = √d``.
    The result has the same distribution as :func:`reduced_features` applied to
    :func:`icl_book.tasks.sample_single_index_prompts` (not the same draws).

    Parameters
    ----------
    batch, context_len, dim
        The number of prompts ``n``, the context length ``ℓ`` and the dimension ``d``, integers ``>= 1``
        (the order of :func:`icl_book.tasks.sample_linear_prompts`).
    rng
        The only source of randomness; prompts are drawn in blocks of ``SAMPLE_BATCH`` (a module constant).
    noise_var
        Label-noise variance ``ρ >= 0`` (context and query labels).
    task_pool
        ``(K, d)`` task vectors, or ``None`` for fresh tasks.
    link
        Vectorised ``f: R -> R``; ``None`` is the linear teacher ``f(z) = z``.
    return_tasks
        Also return the ``(n, d)`` task of every prompt.
    """
    rng = generator(rng)
    dim = positive_int("dim", dim)
    ell = positive_int("context_len", context_len)
    n = positive_int("batch", batch)
    # h is (batch, dim + 1) and each block draws (rows, context_len): refuse sizes before allocating
    size_limit("batch * (dim + 1)", n * (dim + 1))
    size_limit("context_len * dim", ell * dim)
    noise_var = nonnegative_float(NOISE_VAR, noise_var)
    return_tasks = flag("return_tasks", return_tasks)
    if link is not None and not callable(link):
        raise TypeError(f"link must be a callable R -> R or None, got {type(link).__name__}")
    if task_pool is not None:
        pool, pool_norms = task_vectors("task_pool", task_pool, dim)
    sd_noise = math.sqrt(noise_var)
    x_query = np.empty((n, dim))
    h = np.empty((n, dim + 1))
    y_query = np.empty(n)
    tasks = np.empty((n, dim)) if return_tasks else None
    for start in range(0, n, SAMPLE_BATCH):
        b = min(SAMPLE_BATCH, n - start)
        rows = slice(start, start + b)
        if task_pool is None:
            w = sample_task_pool(b, dim, rng=rng)
            norm = np.full(b, math.sqrt(dim))
        else:
            idx = rng.integers(0, pool.shape[0], size=b)
            w, norm = pool[idx], pool_norms[idx]
        u = w / norm[:, None]
        # Context: only the projections s_i = u·x_i ~ N(0, 1/d) are needed; x_i·w = ‖w‖ s_i.
        s = rng.standard_normal((b, ell)) / math.sqrt(dim)
        y = _apply_link(link, norm[:, None] * s) + sd_noise * rng.standard_normal((b, ell))
        sum_y2 = np.einsum("bl,bl->b", y, y)
        # v⊥ = Σ y_i x_i⊥ given the labels: N(0, (Σ y_i² / d) P⊥_u).
        g = rng.standard_normal((b, dim))
        g -= u * np.einsum("bd,bd->b", g, u)[:, None]
        sum_yx = u * np.einsum("bl,bl->b", y, s)[:, None] + np.sqrt(sum_y2 / dim)[:, None] * g
        h[rows, :dim] = sum_yx * (dim / ell)
        h[rows, dim] = sum_y2 / ell
        xq = rng.standard_normal((b, dim)) / math.sqrt(dim)
        x_query[rows] = xq
        y_query[rows] = _apply_link(
            link, np.einsum("bd,bd->b", xq, w)
        ) + sd_noise * rng.standard_normal(b)
        if return_tasks:
            tasks[rows] = w
    return ReducedPrompts(x_query, h, y_query, tasks)


def _gram_apply(x_query, h, gamma):
    """``Σ_μ x_μ (x_μᵀ Γ h_μ) h_μᵀ`` streamed over row blocks (never forms a ``d(d+1)``-square matrix).

    Computed in the dtype of the arguments (float32 inside the refinement loop of :func:`solve_reduced_ridge`).
    """
    out = np.zeros_like(gamma)
    for start in range(0, x_query.shape[0], MATVEC_BLOCK):
        xb = x_query[start : start + MATVEC_BLOCK]
        hb = h[start : start + MATVEC_BLOCK]
        pred = np.einsum("ij,ij->i", xb @ gamma, hb)
        out += xb.T @ (pred[:, None] * hb)
    return out


def _cross_apply(x_query, h, y):
    out = np.zeros((x_query.shape[1], h.shape[1]))
    for start in range(0, x_query.shape[0], MATVEC_BLOCK):
        sl = slice(start, start + MATVEC_BLOCK)
        out += x_query[sl].T @ (y[sl, None] * h[sl])
    return out


def _pcg(apply, precond, rhs, tol: float, max_iter: int) -> tuple[np.ndarray, int]:
    """Preconditioned conjugate gradients for ``apply(Γ) = rhs`` from ``Γ = 0``.

    Stops when the recursively updated residual is below ``tol · ‖rhs‖`` or after ``max_iter`` steps; returns
    ``(Γ, steps)``. The caller recomputes the true residual (the recursive one drifts in single precision).
    """
    gamma = np.zeros_like(rhs)
    r = rhs.copy()
    z = precond(r)
    p = z.copy()
    rz = float(np.vdot(r, z))
    stop = tol * float(np.linalg.norm(rhs))
    it = 0
    while it < max_iter:
        ap = apply(p)
        step = rz / float(np.vdot(p, ap))
        gamma += step * p
        r -= step * ap
        it += 1
        if float(np.linalg.norm(r)) <= stop:
            break
        z = precond(r)
        rz_new = float(np.vdot(r, z))
        p = z + (rz_new / rz) * p
        rz = rz_new
    return gamma, it


@one_blas_thread
def solve_reduced_ridge(
    x_query,
    h,
    y_query,
    ridge: float = 0.0,
    *,
    tol: float = 1e-10,
    max_iter: int | None = None,
    preconditioning: str = "auto",
) -> RidgeSolution:
    """Minimise ``Σ_μ (y_μ − x_μᵀ Γ h_μ)² + (n/d) λ ‖Γ‖_F²`` over ``Γ ∈ R^{d×(d+1)}``, matrix-free.

    Conjugate gradients on the normal equations ``(1/n) Σ_μ x_μ x_μᵀ Γ h_μ h_μᵀ + (λ/d) Γ = (1/n) Σ_μ y_μ x_μ h_μᵀ``;
    each iteration costs ``O(n d²)`` and memory stays ``O(n d)``.

    - **Mixed-precision refinement.** The two matrix products of each CG step are done in float32 (twice as
      fast), and the result is made float64-accurate by iterative refinement: CG in float32 solves
      ``A δ = r`` to ``REFINE_TOL`` relative accuracy, ``Γ ← Γ + δ``, and ``r = b − AΓ`` is recomputed in
      float64; a few rounds reach ``tol``. Used when ``n >= d(d+1)`` only (see below). If a round fails to
      halve the float64 residual (a problem too ill-conditioned for single precision), the remaining
      iterations are done in float64 throughout.
    - **Preconditioning** (``"auto"``, used when ``n >= d(d+1)``): the Kronecker approximation
      ``S_x ⊗ S_h + (λ/d) I`` of the Gram operator (``S_x = X_qᵀX_q/n``, ``S_h = HᵀH/n``), inverted exactly
      through the eigendecompositions of the two small factors. ``"none"`` disables it.
    - **Underdetermined** (``n < d(d+1)``, i.e. ``τ < 1`` roughly): plain CG started from ``Γ = 0`` keeps its
      iterates in the row space of the features (so do the refinement rounds: every correction is built from
      residuals, which lie in that space). At ``λ = 0`` it converges to the *minimum-norm* interpolator,
      the ``λ → 0+`` limit of ridge that the theory describes (a preconditioner would change which interpolator
      is found); at ``λ > 0`` the row space is where the ridge solution lives, and the directions outside it,
      whose eigenvalue is only ``λ/d``, are never excited. So no preconditioner is used there.
    - **Near the interpolation threshold** (``n ≈ d(d+1)``, ridgeless) the system is ill-conditioned and CG needs
      many iterations; they are capped at ``max_iter`` (default ``max(1000, 2 d)``) and a ``RuntimeWarning`` is
      issued when the cap is hit: the returned ``Γ`` is then an early-stopped (implicitly regularised) solution,
      whose error is *below* the ridgeless one. The theory's error diverges there anyway.

    Parameters
    ----------
    x_query, h, y_query
        ``(n, d)``, ``(n, d+1)``, ``(n,)`` as returned by :func:`sample_reduced_prompts`.
    ridge
        ``λ >= 0``.
    tol
        Stop when ``‖b − AΓ‖ <= tol · ‖b‖`` (residual of the normal equations, computed in float64).
    max_iter
        Cap on the total number of CG iterations (``None``: ``max(1000, 2d)``).
    preconditioning
        ``"auto"`` or ``"none"``: whether a preconditioner may be used (a matrix called
        ``preconditioner`` elsewhere in the package, e.g. :func:`icl_book.estimators.one_step_gd_predict`).

    Returns
    -------
    gamma : numpy.ndarray
        ``(d, d+1)``.
    info : SolveInfo
        ``iterations`` counts CG steps over all refinement rounds; ``residual`` is the final float64 one.
    """
    x_query = as_array("x_query", x_query, 2)
    h = as_array("h", h, 2)
    y_query = as_array("y_query", y_query, 1)
    n = consistent_length(x_query=x_query, h=h, y_query=y_query)
    d = x_query.shape[1]
    if n < 1 or d < 1:
        raise ValueError(f"x_query must have shape (n, d) with n, d >= 1, got {x_query.shape}")
    if h.shape != (n, d + 1):
        raise ValueError(f"h must have shape (n, d+1) = {(n, d + 1)}, got {h.shape}")
    if y_query.shape != (n,):
        raise ValueError(f"y_query must have shape ({n},), got {y_query.shape}")
    ridge = nonnegative_float("ridge", ridge)
    tol = positive_float("tol", tol)
    max_iter = max(1000, 2 * d) if max_iter is None else positive_int("max_iter", max_iter)
    preconditioning = choice("preconditioning", preconditioning, ("auto", "none"))
    shift = ridge / d  # (n/d) λ divided by n

    def apply(gamma):
        return _gram_apply(x_query, h, gamma) / n + shift * gamma

    # Single precision only where the solution is unique: below n = d(d+1), float32 rounding of the products
    # leaks ~1e-7 into the null space of the features, which CG never removes (the minimum-norm property).
    single = n >= d * (d + 1)
    if single:
        x32, h32 = x_query.astype(np.float32), h.astype(np.float32)

    def apply_single(gamma):
        return (
            _gram_apply(x32, h32, gamma.astype(np.float32)).astype(np.float64) / n + shift * gamma
        )

    rhs = _cross_apply(x_query, h, y_query) / n
    use_precond = preconditioning == "auto" and n >= d * (d + 1)
    if use_precond:
        ex, ux = np.linalg.eigh(x_query.T @ x_query / n)
        eh, uh = np.linalg.eigh(h.T @ h / n)
        denom = np.outer(np.maximum(ex, 0), np.maximum(eh, 0)) + shift
        floor = denom.max() * 1e-12  # guards a numerically singular factor
        denom = np.maximum(denom, floor)

        def precond(r):
            return ux @ ((ux.T @ r @ uh) / denom) @ uh.T
    else:

        def precond(r):
            return r

    gamma = np.zeros((d, d + 1))
    rhs_norm = float(np.linalg.norm(rhs))
    if rhs_norm == 0:
        return RidgeSolution(gamma, SolveInfo(0, 0.0, True, use_precond))
    r, res, it = rhs, 1.0, 0
    while it < max_iter and res > tol:
        inner_tol = max(REFINE_TOL, tol / res) if single else tol / res
        delta, steps = _pcg(apply_single if single else apply, precond, r, inner_tol, max_iter - it)
        gamma += delta
        it += steps
        r = rhs - apply(gamma)
        new_res = float(np.linalg.norm(r)) / rhs_norm
        if single and new_res > 0.5 * res:
            single = False  # single precision no longer helps: finish in float64
        res = new_res
    converged = res <= tol
    if not converged:
        warnings.warn(
            f"conjugate gradients stopped at max_iter={max_iter} with relative residual {res:.1e} > tol={tol:g} "
            "(ill-conditioned ridgeless problem near n = d(d+1)?); the returned Γ is early-stopped",
            RuntimeWarning,
            stacklevel=2,
        )
    return RidgeSolution(gamma, SolveInfo(it, res, converged, use_precond))


@renamed(rho="noise_var")
@one_blas_thread
def pretrain_reduced_lsa(
    dim: int,
    alpha: float,
    tau: float,
    kappa: float = np.inf,
    noise_var: float = 0.0,
    ridge: float = 0.0,
    *,
    link: Callable[[np.ndarray], np.ndarray] | None = None,
    rng: np.random.Generator,
    tol: float = 1e-10,
    max_iter: int | None = None,
) -> PretrainedLSA:
    """Pretrain the reduced linear attention ``ŷ = ⟨Γ, H_Z⟩`` by ridge regression (fast and exact).

    Draws ``K = ⌊κd⌉`` tasks (:func:`icl_book.tasks.sample_task_pool`; none when ``κ = ∞``), then
    ``n = ⌊τd²⌉`` prompts of context length ``ℓ = ⌊αd⌉`` (:func:`sample_reduced_prompts`; ``⌊·⌉`` rounds half
    up, see :func:`problem_sizes`), and solves ``min Σ (y − ⟨Γ, H⟩)² + (n/d) λ ‖Γ‖_F²`` with
    :func:`solve_reduced_ridge` (minimum-norm solution at ``λ = 0``).

    Parameters
    ----------
    dim
        ``d``, an integer ``>= 1``.
    alpha, tau, kappa
        ``α, τ > 0``; ``κ > 0`` or ``np.inf`` (a fresh task for every prompt).
    noise_var
        Label-noise variance ``ρ >= 0``.
    ridge
        ``λ >= 0``.
    link
        ``None`` (linear teacher) or a vectorised callable ``f`` (single-index teacher ``y = f(x·w) + ε``).
    rng
        The only source of randomness.
    tol, max_iter
        Passed to :func:`solve_reduced_ridge`.

    Returns
    -------
    gamma : numpy.ndarray
        ``(dim, dim+1)``.
    task_pool : numpy.ndarray or None
        ``(K, dim)`` pretraining tasks (``None`` when ``κ = ∞``).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> gamma, pool = pretrain_reduced_lsa(10, 1.0, 2.0, kappa=1.0, noise_var=0.1, rng=rng)
    >>> gamma.shape, pool.shape
    ((10, 11), (10, 10))
    """
    rng = generator(rng)
    ell, n, k = problem_sizes(dim, alpha, tau, kappa)
    # the n prompts' (n, d + 1) features and (n, d) queries, before anything is drawn
    size_limit("tau * dim**2 * (dim + 1), the pretraining features,", n * (dim + 1))
    noise_var = nonnegative_float(NOISE_VAR, noise_var)
    ridge = nonnegative_float("ridge", ridge)
    pool = None if k is None else sample_task_pool(k, dim, rng=rng)
    prompts = sample_reduced_prompts(
        n, ell, dim, rng=rng, noise_var=noise_var, task_pool=pool, link=link
    )
    gamma, _ = solve_reduced_ridge(
        prompts.x_query, prompts.h, prompts.y_query, ridge, tol=tol, max_iter=max_iter
    )
    return PretrainedLSA(gamma, pool)


@renamed(rho="noise_var")
@one_blas_thread
def gamma_errors(gamma, alpha: float, noise_var: float, task_pool=None) -> SimulatedErrors:
    """Exact errors of ``Γ`` (linear teacher) via :func:`icl_book.theory.error_of_gamma`.

    ``icl``: fresh tasks; ``idg``: tasks drawn uniformly from ``task_pool`` (its mean and second moment),
    ``nan`` when ``task_pool`` is ``None``. ``alpha`` is ``ℓ/d`` for the context length ``ℓ`` that ``Γ`` is
    used with (the first value of :func:`problem_sizes` divided by ``d``), as in every error function.
    """
    gamma = reduced_gamma("gamma", gamma)
    alpha = positive_float("alpha", alpha)
    icl = error_of_gamma(gamma, alpha, noise_var)
    if task_pool is None:
        return SimulatedErrors(icl, float("nan"))
    return SimulatedErrors(icl, error_of_gamma(gamma, alpha, noise_var, task_pool=task_pool))


@renamed(rho="noise_var")
@one_blas_thread
def simulated_errors(
    dim: int,
    alpha: float,
    tau: float,
    kappa: float = np.inf,
    noise_var: float = 0.0,
    ridge: float = 0.0,
    *,
    rng: np.random.Generator,
    tol: float = 1e-10,
    max_iter: int | None = None,
) -> SimulatedErrors:
    """Pretrain with :func:`pretrain_reduced_lsa` and return the exact ``(e_ICL, e_IDG)`` of the learned ``Γ``.

    The errors are exact expectations over test prompts (no Monte-Carlo noise), so the only randomness is that
    of pretraining. ``idg`` is ``nan`` when ``κ = ∞`` (there is no finite pool to test on). ``tol`` and
    ``max_iter`` go to :func:`solve_reduced_ridge` (``tol = 1e-6`` already fixes the errors to ~1e-6).
    """
    gamma, pool = pretrain_reduced_lsa(
        dim, alpha, tau, kappa, noise_var, ridge, rng=rng, tol=tol, max_iter=max_iter
    )
    ell, _, _ = problem_sizes(dim, alpha, tau, kappa)
    return gamma_errors(gamma, ell / dim, noise_var, pool)


# --- nonlinear: chapter 4 section below ---


class MCError(NamedTuple):
    """A Monte Carlo error estimate: the ``mean`` squared error, its standard error ``sem``, and ``n_test``."""

    mean: float
    sem: float
    n_test: int


def _teacher_link(link):
    """``link`` as ``sample_reduced_prompts`` wants it: ``None`` (identity) or a callable; strings are
    looked up."""
    if link is None or callable(link):
        return link
    if isinstance(link, str):
        return get_link(link)
    raise TypeError(
        "link must be a vectorised callable R -> R, a registered link name or None, "
        f"got {type(link).__name__}"
    )


@renamed(f="link", rho="noise_var")
@one_blas_thread
def mc_error(gamma, link, alpha, noise_var, *, task_pool=None, n_test, rng) -> MCError:
    """Monte Carlo test error ``E (y_q − ⟨Γ, H_Z⟩)²`` of a given ``Γ`` on prompts from the teacher ``link``.

    Test prompts follow :func:`sample_reduced_prompts` (Lu et al.'s conventions, exact in law): ``x ~ N(0, I/d)``,
    ``y = f(x·w) + ε`` with ``ε ~ N(0, ρ)`` on context *and* query labels (so the error includes ``ρ``, as in
    :func:`icl_book.theory.error_of_gamma`), context length ``ℓ = ⌊αd⌉`` with ``d = gamma.shape[0]``. They are
    streamed in blocks of ``SAMPLE_BATCH`` (a module constant) prompts, so memory is ``O(SAMPLE_BATCH · (ℓ + d))`` whatever
    ``n_test``, and the draws are those of one call of :func:`sample_reduced_prompts` with ``n_test`` prompts.

    Parameters
    ----------
    gamma
        ``(d, d+1)`` array ``Γ`` (e.g. from :func:`pretrain_reduced_lsa`).
    f
        The teacher's link: a vectorised callable, a name in :data:`icl_book.hermite.LINKS`, or ``None`` for the
        linear teacher ``f(z) = z``.
    alpha
        ``α > 0``; the test context length is ``ℓ = ⌊αd⌉``.
    noise_var
        Label-noise variance ``ρ >= 0``.
    task_pool
        ``None``: a fresh task for every test prompt (the in-context error ``e_ICL``). A ``(K, d)`` array: tasks
        drawn uniformly from its rows (with the pretraining pool, the in-distribution error ``e_IDG``).
    n_test
        Number of test prompts, an integer ``>= 2``.
    rng
        ``numpy.random.Generator``, the only source of randomness.

    Returns
    -------
    MCError
        ``(mean, sem, n_test)``: the mean squared error over the ``n_test`` independent prompts and its standard
        error ``s / √n_test`` (``s`` the sample standard deviation of the per-prompt squared errors).

    Examples
    --------
    >>> gamma = np.zeros((5, 6))  # predicts 0: the error is E f² + ρ
    >>> rng = np.random.default_rng(0)
    >>> res = mc_error(gamma, np.sign, 2.0, 0.1, n_test=1000, rng=rng)
    >>> print(f"{res.mean:.1f} {res.n_test}")
    1.1 1000
    """
    rng = generator(rng)
    gamma = reduced_gamma("gamma", gamma)
    dim = gamma.shape[0]
    link = _teacher_link(link)
    alpha = positive_float("alpha", alpha)
    noise_var = nonnegative_float(NOISE_VAR, noise_var)
    n_test = positive_int("n_test", n_test, minimum=2)
    ell = _round_half_up(alpha * dim)
    if ell < 1:
        raise ValueError(
            f"alpha * d = {alpha * dim:g} rounds to a context length of 0; alpha must be >= {0.5 / dim:g}"
        )
    if task_pool is not None:
        task_pool, _ = task_vectors("task_pool", task_pool, dim)
    # Streaming mean and sum of squared deviations, merged block by block (Chan et al.): no cancellation.
    count, mean, m2 = 0, 0.0, 0.0
    for start in range(0, n_test, SAMPLE_BATCH):
        b = min(SAMPLE_BATCH, n_test - start)
        p = sample_reduced_prompts(
            b, ell, dim, rng=rng, noise_var=noise_var, task_pool=task_pool, link=link
        )
        sq = (p.y_query - np.einsum("bd,bd->b", p.x_query, p.h @ gamma.T)) ** 2
        b_mean = float(sq.mean())
        b_m2 = float(((sq - b_mean) ** 2).sum())
        delta = b_mean - mean
        total = count + b
        mean += delta * b / total
        m2 += b_m2 + delta * delta * count * b / total
        count = total
    return MCError(mean, float(np.sqrt(m2 / (n_test - 1) / n_test)), n_test)


# --- sweeps: many (point, seed) simulations through any concurrent.futures.Executor ---

#: Keys a sweep point may carry: the arguments of :func:`pretrain_reduced_lsa` (``dim``, ``alpha`` and ``tau``
#: are required).
SWEEP_KEYS = ("dim", "alpha", "tau", "kappa", "noise_var", "ridge", "link", "tol", "max_iter")
_SWEEP_REQUIRED = ("dim", "alpha", "tau")


class SweepResult(NamedTuple):
    """One row of :func:`sweep`'s table: a parameter point, its per-seed errors and their mean and SE.

    ``link`` is the teacher's name (``None`` for the linear teacher; ``repr`` of an unnamed callable);
    ``icl``/``idg`` hold one exact error per seed, in the order of ``seeds``; ``*_sem`` is the standard error of
    the mean over seeds (``s/√S``, ``nan`` for one seed); every ``idg*`` is ``nan`` when ``κ = ∞``.
    """

    dim: int
    alpha: float
    tau: float
    kappa: float
    noise_var: float
    ridge: float
    link: str | None
    seeds: tuple[int, ...]
    icl: tuple[float, ...]
    idg: tuple[float, ...]
    icl_mean: float
    icl_sem: float
    idg_mean: float
    idg_sem: float


#: One BLAS thread inside each sweep task (:mod:`icl_book._blas`, threadpoolctl). Multi-threaded BLAS
#: splits sums differently, so the same simulation run with 1 or 2 BLAS threads differs in its last bits
#: (measured: ~1e-9 relative in ``e_ICL`` at d = 80); one thread makes a task's numbers independent of the
#: caller's and the worker's thread settings, on one machine. The limit is reference-counted across
#: threads (a thread-pool sweep shares the process's BLAS).
_SingleBlasThread = OneBlasThread


def _sweep_point(index: int, point) -> dict:
    """Validate one point of :func:`sweep` (a mapping of :data:`SWEEP_KEYS`); return a plain, picklable dict."""
    where = f"points[{index}]"
    if not isinstance(point, Mapping):
        raise TypeError(f"{where} must be a mapping of {SWEEP_KEYS}, got {type(point).__name__}")
    if "rho" in point:  # the label noise's old name (CONTRIBUTING: one name for one thing)
        if "noise_var" in point:
            raise ValueError(
                f"{where} has both 'rho' and its new name 'noise_var'; pass 'noise_var'"
            )
        warnings.warn(
            f"{where}: the key 'rho' is now called 'noise_var'", DeprecationWarning, stacklevel=3
        )
        point = {("noise_var" if k == "rho" else k): v for k, v in point.items()}
    unknown = sorted(set(point) - set(SWEEP_KEYS), key=str)
    if unknown:
        raise ValueError(f"{where} has unknown keys {unknown}; accepted keys are {SWEEP_KEYS}")
    missing = [k for k in _SWEEP_REQUIRED if k not in point]
    if missing:
        raise ValueError(f"{where} lacks the required keys {missing}")
    p = {
        "dim": positive_int(f"{where}['dim']", point["dim"]),
        "alpha": positive_float(f"{where}['alpha']", point["alpha"]),
        "tau": positive_float(f"{where}['tau']", point["tau"]),
        "noise_var": nonnegative_float(f"{where}['noise_var']", point.get("noise_var", 0.0)),
        "ridge": nonnegative_float(f"{where}['ridge']", point.get("ridge", 0.0)),
        "tol": positive_float(f"{where}['tol']", point.get("tol", 1e-10)),
        "max_iter": None
        if point.get("max_iter") is None
        else positive_int(f"{where}['max_iter']", point["max_iter"]),
    }
    kappa = point.get("kappa", np.inf)
    if isinstance(kappa, (bool, np.bool_, str)) or not isinstance(kappa, (int, float, np.number)):
        raise TypeError(f"{where}['kappa'] must be a number > 0 or np.inf, got {kappa!r}")
    kappa = float(kappa)
    if not kappa > 0:
        raise ValueError(f"{where}['kappa'] must be > 0 (np.inf allowed), got {kappa!r}")
    p["kappa"] = kappa
    link = point.get("link")
    if isinstance(link, str):
        try:
            get_link(link)
        except ValueError as err:
            raise ValueError(f"{where}['link']: {err}") from None
    elif link is not None and not callable(link):
        raise TypeError(
            f"{where}['link'] must be None, a registered link name or a callable, got {type(link).__name__}"
        )
    p["link"] = link
    problem_sizes(p["dim"], p["alpha"], p["tau"], kappa)  # sizes that round to 0 raise here
    return p


def _sweep_task(point: dict, seed: int) -> tuple[float, float]:
    """One simulation of :func:`sweep`: pretrain with ``default_rng(seed)``, return the exact ``(e_ICL, e_IDG)``."""
    link = _teacher_link(point["link"])
    with _SingleBlasThread():
        gamma, pool = pretrain_reduced_lsa(
            point["dim"],
            point["alpha"],
            point["tau"],
            point["kappa"],
            point["noise_var"],
            point["ridge"],
            link=link,
            rng=np.random.default_rng(seed),
            tol=point["tol"],
            max_iter=point["max_iter"],
        )
        ell, _, _ = problem_sizes(point["dim"], point["alpha"], point["tau"], point["kappa"])
        if link is None:
            errors = gamma_errors(gamma, ell / point["dim"], point["noise_var"], pool)
            return float(errors.icl), float(errors.idg)
        alpha = ell / point["dim"]
        icl = nonlinear_error_of_gamma(gamma, link, alpha, point["noise_var"])
        idg = (
            float("nan")
            if pool is None
            else nonlinear_error_of_gamma(gamma, link, alpha, point["noise_var"], pool)
        )
        return float(icl), float(idg)


def _mean_sem(values) -> tuple[float, float]:
    arr = np.asarray(values, dtype=float)
    if np.all(np.isnan(arr)):
        return float("nan"), float("nan")
    mean = float(arr.mean())
    sem = float(arr.std(ddof=1) / math.sqrt(arr.size)) if arr.size > 1 else float("nan")
    return mean, sem


def _link_name(link) -> str | None:
    if link is None or isinstance(link, str):
        return link
    return getattr(link, "name", None) or getattr(link, "__name__", None) or repr(link)


def sweep(points, *, seeds, executor=None) -> list[SweepResult]:
    """Pretrain and evaluate the reduced linear attention at many parameter points and seeds.

    Every ``(point, seed)`` pair is one task: :func:`pretrain_reduced_lsa` with ``rng=np.random.default_rng(seed)``,
    then the exact errors of the learned ``Γ`` (:func:`gamma_errors` for the linear teacher,
    :func:`icl_book.theory.nonlinear_error_of_gamma` for a link). Tasks go to ``executor.submit`` — any
    :class:`concurrent.futures.Executor`: a ``ProcessPoolExecutor`` on one machine, or a dask cluster's
    ``distributed.Client(...).get_executor()`` unchanged. The table is the same, bit for bit, whatever the
    executor: each task seeds its own generator, runs its BLAS on one thread (:class:`_SingleBlasThread`), and
    results are ordered by ``(point, seed)``, never by completion.

    Parameters
    ----------
    points
        A list of mappings with keys from :data:`SWEEP_KEYS`: ``dim``, ``alpha``, ``tau`` (required), ``kappa``
        (default ``np.inf``), ``noise_var``, ``ridge`` (default 0), ``link`` (``None`` = linear teacher, a name in
        :data:`icl_book.hermite.LINKS`, or a callable; process and cluster executors need it picklable, so prefer
        names), ``tol``, ``max_iter`` (passed to :func:`solve_reduced_ridge`).
    seeds
        A non-empty list of distinct non-negative integers.
    executor
        ``None`` (serial, in this process) or an object with ``submit(fn, *args) -> Future``.

    Returns
    -------
    list of SweepResult
        One row per point, in the order of ``points``.

    Examples
    --------
    >>> rows = sweep([{"dim": 10, "alpha": 1.0, "tau": 2.0, "noise_var": 0.1}], seeds=[0, 1])
    >>> len(rows), len(rows[0].icl)
    (1, 2)
    """
    if isinstance(points, (str, bytes)) or not hasattr(points, "__iter__"):
        raise TypeError(f"points must be a list of mappings, got {type(points).__name__}")
    points = [_sweep_point(i, p) for i, p in enumerate(points)]
    if not points:
        raise ValueError("points must contain at least one parameter mapping")
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be a list of integers, got {type(seeds).__name__}")
    seeds = tuple(nonnegative_int(f"seeds[{i}]", s) for i, s in enumerate(seeds))
    if not seeds:
        raise ValueError("seeds must contain at least one integer")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {list(seeds)}")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise TypeError(
            f"executor must be None or a concurrent.futures.Executor (with submit), got {type(executor).__name__}"
        )
    if executor is None:
        results = [[_sweep_task(p, s) for s in seeds] for p in points]
    else:
        futures = [[executor.submit(_sweep_task, p, s) for s in seeds] for p in points]
        results = [[f.result() for f in row] for row in futures]
    table = []
    for p, row in zip(points, results, strict=True):
        icl = tuple(r[0] for r in row)
        idg = tuple(r[1] for r in row)
        table.append(
            SweepResult(
                p["dim"],
                p["alpha"],
                p["tau"],
                p["kappa"],
                p["noise_var"],
                p["ridge"],
                _link_name(p["link"]),
                seeds,
                icl,
                idg,
                *_mean_sem(icl),
                *_mean_sem(idg),
            )
        )
    return table
