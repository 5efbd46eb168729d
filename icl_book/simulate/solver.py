"""The ridge solver of the reduced regression (chapter 3): matrix-free PCG or a dense Gram, by a cost model.

Two routes solve the same normal equations (:func:`~icl_book.simulate.solve_reduced_ridge`):

- ``"pcg"``: the operator ``Γ ↦ Σ_μ x_μ (x_μᵀ Γ h_μ) h_μᵀ`` is applied in ``O(n d²)`` by two matrix products
  streamed over row blocks, inside preconditioned conjugate gradients with float32 products and float64
  iterative refinement: memory ``O(n d)``, never a ``d(d+1)``-square matrix.
- ``"dense"``: the ``d(d+1)``-square Gram matrix of the explicit features, formed by one matrix product per row
  block (float32, or float64 when single precision cannot reach the tolerance), factored by Cholesky and
  refined against the float64 operator: ``O(n d⁴ + d⁶)`` time, ``O(d⁴)`` memory, no iteration count to pay.

``solver="auto"`` takes the cheaper by the cost model of ``_choose_solver``, a function of the sizes only (never
of a timing), so that a sweep's table is the same on every executor.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import scipy.linalg

from .._blas import one_blas_thread
from .._declare import Array, Integer, Interval, Options, OrNone, declare
from .._validate import (
    as_array,
    choice,
    consistent_length,
    nonnegative_float,
    positive_float,
    positive_int,
)

#: Rows per block in the streamed matrix-free products (bounds the temporaries to ``O(block · d)``).
MATVEC_BLOCK = 16384
#: Relative accuracy of each single-precision CG round in :func:`solve_reduced_ridge` (float32 products are
#: accurate to ~1e-7 relative, times the condition number, so a round cannot reliably go much further).
REFINE_TOL = 1e-4
#: Entries of a dense Gram matrix the ``"auto"`` route may allocate (``d(d+1)`` squared; 2**27 is 512 MiB in
#: float32, reached at d = 107): beyond it only ``solver="dense"`` asked by name builds one.
DENSE_MAX_ENTRIES = 2**27

# The cost model of _choose_solver, in seconds on one core of the book's machines (measured with one BLAS
# thread: a float32 Gram product at ~80 GFLOP/s, float64 at ~40, the two skinny products of one operator
# application at ~20 GFLOP/s in float32 and ~12 in float64, and ~60 µs of NumPy overhead per CG step).
# Only their ratios decide; a machine twice as fast in every kernel makes the same choices.
_GEMM32_FLOPS = 80e9
_GEMM64_FLOPS = 40e9
_SKINNY32_FLOPS = 20e9
_SKINNY64_FLOPS = 12e9
_STEP_OVERHEAD_S = 60e-6
# Refinement rounds the dense route needs (float32 factor, residuals in float64), and the float64 operator
# applications the PCG route spends on refinement residuals, at the default tolerance.
_DENSE_ROUNDS = 3
_PCG_RESIDUALS = 4


class SolveInfo(NamedTuple):
    """Diagnostics of :func:`solve_reduced_ridge`: steps, final relative residual, convergence, route.

    ``iterations`` counts CG steps over all refinement rounds (``"pcg"``) or refinement solves with the
    Cholesky factor (``"dense32"``, ``"dense64"``); ``solver`` is the route that produced ``gamma``.
    """

    iterations: int
    residual: float
    converged: bool
    preconditioned: bool
    solver: str = "pcg"


class RidgeSolution(NamedTuple):
    """What :func:`solve_reduced_ridge` returns: the ``(d, d+1)`` solution ``gamma`` and its ``info``."""

    gamma: np.ndarray
    info: SolveInfo


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


def _pcg_steps(n: int, d: int, tol: float) -> int:
    """CG steps the preconditioned route needs to reach ``tol``, predicted from the spectrum.

    The Kronecker preconditioner is the Gram operator's expectation (``x_q`` is independent of ``h``), so the
    preconditioned operator is a sample covariance of ``n`` features in ``p = d(d+1)`` dimensions around the
    identity: a Marchenko–Pastur spectrum of ratio ``γ = p/n``, on which CG contracts the error by ``√γ`` per
    step. Measured on the Figure-4 workload (α = τ = 10): 21 steps predicted 20 at d = 32, 20 at d = 64.
    """
    ratio = d * (d + 1) / n
    if ratio >= 1:
        return 10**9  # no contraction: at or below the interpolation threshold
    return max(1, math.ceil(math.log(tol / 2) / math.log(math.sqrt(ratio))))


def _solver_costs(n: int, d: int, tol: float) -> dict[str, float]:
    """Predicted seconds of each route at these sizes (module constants; see :func:`_choose_solver`)."""
    p = d * (d + 1)
    apply_flops = 4 * n * p  # the two skinny products of one operator application
    pcg = (
        _pcg_steps(n, d, tol) * (apply_flops / _SKINNY32_FLOPS + _STEP_OVERHEAD_S)
        + _PCG_RESIDUALS * apply_flops / _SKINNY64_FLOPS
        + 2 * n * (d * d + p) / _SKINNY64_FLOPS  # the preconditioner's two covariances
    )
    dense = (
        2 * n * p * p / _GEMM32_FLOPS  # the Gram matrix, one product per row block
        + p**3 / 3 / _GEMM32_FLOPS  # Cholesky
        + _DENSE_ROUNDS * (apply_flops / _SKINNY64_FLOPS + 2 * p * p / _SKINNY32_FLOPS)
    )
    return {"pcg": pcg, "dense": dense}


def _choose_solver(n: int, d: int, tol: float) -> str:
    """The route ``solver="auto"`` takes: ``"dense"`` or ``"pcg"``, from the sizes alone (deterministic).

    ``"pcg"`` whenever ``n < d(d+1)`` (the ridgeless minimum-norm solution is CG's from ``Γ = 0``; with a ridge
    the Gram matrix is singular up to ``λ/d`` and single precision cannot factor it) or the Gram matrix would
    exceed :data:`DENSE_MAX_ENTRIES`; otherwise the cheaper of the two by :func:`_solver_costs`.
    """
    p = d * (d + 1)
    if n < p or p * p > DENSE_MAX_ENTRIES:
        return "pcg"
    costs = _solver_costs(n, d, tol)
    return "dense" if costs["dense"] < costs["pcg"] else "pcg"


def _route(solver: str, n: int, d: int, tol: float) -> str:
    """The route a solve with ``solver`` (``"auto"``, ``"pcg"`` or ``"dense"``) takes at these sizes."""
    return _choose_solver(n, d, tol) if solver == "auto" else solver


def _dense_gram(x_query, h, n: int, shift: float, dtype):
    """Upper Cholesky factor of ``ΦᵀΦ/n + shift·I`` with ``Φ = [vec(x_μ h_μᵀ)]`` built block by block in
    ``dtype`` (one matrix product per block); ``None`` when it is not numerically positive definite."""
    d = x_query.shape[1]
    p = d * (d + 1)
    gram = np.zeros((p, p), dtype)
    rows = max(1, 2**22 // p)  # blocks of ~4M feature entries
    for start in range(0, n, rows):
        xb = x_query[start : start + rows].astype(dtype, copy=False)
        hb = h[start : start + rows].astype(dtype, copy=False)
        phi = (xb[:, :, None] * hb[:, None, :]).reshape(len(xb), p)
        gram += phi.T @ phi
    gram /= n
    gram[np.diag_indices(p)] += shift
    try:
        return scipy.linalg.cho_factor(gram, lower=False, overwrite_a=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None


def _solve_dense(x_query, h, rhs, apply, n, shift, tol, max_rounds, single):
    """Cholesky of the dense Gram matrix, then iterative refinement against the float64 operator ``apply``.

    Returns ``(Γ, rounds, residual, route)``. A float32 factor that is not positive definite, or whose
    refinement fails to halve the residual, is replaced by a float64 one (the route then says so).
    """
    d = x_query.shape[1]
    rhs_norm = float(np.linalg.norm(rhs))
    for dtype, route in ((np.float32, "dense32"), (np.float64, "dense64")):
        if dtype is np.float32 and not single:
            continue
        factor = _dense_gram(x_query, h, n, shift, dtype)
        if factor is None:
            continue
        gamma = np.zeros((d, d + 1))
        r, res, rounds = rhs, 1.0, 0
        while rounds < max_rounds and res > tol:
            delta = scipy.linalg.cho_solve(factor, r.ravel().astype(dtype), check_finite=False)
            gamma += delta.reshape(d, d + 1)
            rounds += 1
            r = rhs - apply(gamma)
            new_res = float(np.linalg.norm(r)) / rhs_norm
            if new_res > 0.5 * res:
                break  # this factor cannot improve on Γ
            res = new_res
        if res <= tol or dtype is np.float64:
            return gamma, rounds, res, route
    raise np.linalg.LinAlgError(
        "the dense Gram matrix is not positive definite in float64 (ridgeless and rank-deficient?); "
        "use solver='pcg'"
    )


@declare(
    x_query=Array(ndim=2),
    h=Array(ndim=2),
    y_query=Array(ndim=1),
    ridge=Interval(0.0, 1e100),
    tol=Interval(0.0, 1.0, "right"),
    max_iter=OrNone(Integer(1, None)),
    preconditioning=Options(("auto", "none")),
    solver=Options(("pcg", "dense", "auto")),
)
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
    solver: str = "pcg",
) -> RidgeSolution:
    """Minimise ``Σ_μ (y_μ − x_μᵀ Γ h_μ)² + (n/d) λ ‖Γ‖_F²`` over ``Γ ∈ R^{d×(d+1)}``.

    The normal equations ``(1/n) Σ_μ x_μ x_μᵀ Γ h_μ h_μᵀ + (λ/d) Γ = (1/n) Σ_μ y_μ x_μ h_μᵀ`` are solved by one
    of two routes (``solver``; the one taken is ``info.solver``):

    - ``"pcg"`` (the default here), **matrix-free conjugate gradients**: each iteration costs ``O(n d²)``
      and memory stays ``O(n d)``.
    - ``"dense"``: the ``d(d+1)``-square Gram matrix of the explicit features by one matrix product per row
      block, in float32, factored by Cholesky; iterative refinement (residuals of the float64 operator)
      reaches ``tol``. A float32 factor that fails (not positive definite, or refinement that stalls) is
      replaced by a float64 one: ``info.solver`` is ``"dense32"`` or ``"dense64"``. Needs
      ``n >= d(d+1)`` or ``λ > 0`` (a ridgeless underdetermined problem has no unique solution).
    - ``"auto"``: the cheaper of the two by a cost model of the sizes ``(n, d, tol)`` alone, so the same
      problem always takes the same route (``icl_book.simulate.pretrain_reduced_lsa`` uses it). PCG's steps
      are predicted from the spectrum (about ``log(tol)/log √(d(d+1)/n)``), the dense route's cost is its
      product ``2 n d²(d+1)²``; dense wins at small ``d`` (d = 10 at ``n = 10 d²``), PCG from d ≈ 20 on.
      Below ``n = d(d+1)``, or when the Gram matrix would exceed ``DENSE_MAX_ENTRIES``, it is always PCG.

    Inside the PCG route:

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
        Cap on the total number of CG iterations, or of refinement solves on the dense route (``None``:
        ``max(1000, 2d)``).
    preconditioning
        ``"auto"`` or ``"none"``: whether a preconditioner may be used (a matrix called
        ``preconditioner`` elsewhere in the package, e.g. :func:`icl_book.estimators.one_step_gd_predict`).
    solver
        ``"pcg"``, ``"dense"`` or ``"auto"`` (above).

    Returns
    -------
    gamma : numpy.ndarray
        ``(d, d+1)``.
    info : SolveInfo
        ``iterations`` counts CG steps over all refinement rounds (refinement solves on the dense route);
        ``residual`` is the final float64 one; ``solver`` the route taken.
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
    solver = choice("solver", solver, ("auto", "pcg", "dense"))
    solver = _route(solver, n, d, tol)
    if solver == "dense" and n < d * (d + 1) and ridge == 0:
        raise ValueError(
            f"solver='dense' needs n >= d(d+1) = {d * (d + 1)} or ridge > 0 (got n = {n}, ridge = 0: "
            "the minimum-norm interpolator is solver='pcg''s)"
        )
    shift = ridge / d  # (n/d) λ divided by n

    def apply(gamma):
        return _gram_apply(x_query, h, gamma) / n + shift * gamma

    rhs = _cross_apply(x_query, h, y_query) / n
    if float(np.linalg.norm(rhs)) == 0:
        precond = solver == "pcg" and preconditioning == "auto" and n >= d * (d + 1)
        return RidgeSolution(np.zeros((d, d + 1)), SolveInfo(0, 0.0, True, precond, solver))
    if solver == "dense":
        gamma, rounds, res, route = _solve_dense(
            x_query, h, rhs, apply, n, shift, tol, max_iter, single=n >= d * (d + 1)
        )
        info = SolveInfo(rounds, res, res <= tol, False, route)
    else:
        gamma, info = _solve_pcg(x_query, h, rhs, apply, n, shift, tol, max_iter, preconditioning)
    if not info.converged:
        warnings.warn(
            f"{info.solver} stopped at max_iter={max_iter} with relative residual {info.residual:.1e} > "
            f"tol={tol:g} (ill-conditioned ridgeless problem near n = d(d+1)?); the returned Γ is "
            "early-stopped",
            RuntimeWarning,
            stacklevel=2,
        )
    return RidgeSolution(gamma, info)


def _solve_pcg(x_query, h, rhs, apply, n, shift, tol, max_iter, preconditioning):
    """The PCG route of :func:`solve_reduced_ridge` (its docstring); returns ``(Γ, SolveInfo)``."""
    d = x_query.shape[1]
    # Single precision only where the solution is unique: below n = d(d+1), float32 rounding of the products
    # leaks ~1e-7 into the null space of the features, which CG never removes (the minimum-norm property).
    single = n >= d * (d + 1)
    if single:
        x32, h32 = x_query.astype(np.float32), h.astype(np.float32)

    def apply_single(gamma):
        return (
            _gram_apply(x32, h32, gamma.astype(np.float32)).astype(np.float64) / n + shift * gamma
        )

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
    return gamma, SolveInfo(it, res, res <= tol, use_precond, "pcg")
