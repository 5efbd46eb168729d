"""The matrix-free, mixed-precision conjugate-gradient ridge solver of the reduced regression (chapter 3).

The normal-equation operator ``Γ ↦ Σ_μ x_μ (x_μᵀ Γ h_μ) h_μᵀ`` is applied in ``O(n d²)`` by two matrix products
streamed over row blocks, inside preconditioned conjugate gradients with float32 products and float64 iterative
refinement (:func:`~icl_book.simulate.solve_reduced_ridge`): memory ``O(n d)``, never a ``d(d+1)``-square matrix.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

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


@declare(
    x_query=Array(ndim=2),
    h=Array(ndim=2),
    y_query=Array(ndim=1),
    ridge=Interval(0.0, 1e100),
    tol=Interval(0.0, 1.0, "right"),
    max_iter=OrNone(Integer(1, None)),
    preconditioning=Options(("auto", "none")),
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
