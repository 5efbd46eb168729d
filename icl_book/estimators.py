"""In-context predictors with one interface.

Every predictor takes a batch of prompts ``xs (B, N, d)``, ``ys (B, N)``, ``x_query (B, d)`` (plus its own
hyper-parameters) and returns the predictions ``(B,)`` at the queries: what a transformer would output, computed
by a classical algorithm.

The closed-form risks that chapters 0, 2 and 5 compare these predictors with (``one_step_gd_risk``,
``best_one_step_eta``, ``optimal_preconditioner``, ``optimal_preconditioned_risk``, ``best_linear_risk_quadratic``,
``hermite_one_step_excess_risk``) live in :mod:`icl_book.theory`, where they are documented and where the chapters
call them.

One job: in-context predictors with the one interface ``(xs, ys, x_query) -> (B,)``; the module is
long because there are about twenty of them, each short, not because it does several things.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ._blas import one_blas_thread
from ._declare import Array, Callable, Cost, Flag, Free, Integer, Interval, OrNone, declare
from ._validate import (
    ArgumentTypeError,
    as_array,
    callable_output,
    check_prompt_shapes,
    finite_float,
    flag,
    integer,
    kernel_inputs,
    nonnegative_float,
    positive_float,
    positive_int,
    size_limit,
    square_matrix,
)

__all__ = [
    "ols_predict",
    "ridge_predict",
    "bayes_optimal_predict",
    "one_step_gd_predict",
    *["polynomial_kernel", "glu_kernel", "hermite_quadratic_kernel"],
    *["one_step_kernel_gd_predict", "kernel_ridge_predict", "feature_ridge_predict"],
    *["block_coordinate_gd_predict", "kernel_least_squares_predict"],
    *["fit_one_step_preconditioner", "preconditioned_feature_step_predict"],
    "fit_mixed_preconditioner",
    "select_kernel_ridge",
    "RidgeChoice",
    "BayesPrediction",
    "bayes_quadratic_predict",
]


#: Highest degree of :func:`polynomial_kernel` and :func:`glu_kernel` (the book uses 1-3; beyond a few
#: dozen, ``(x·x')^degree`` overflows float64 for any ``|x·x'| > 1.01`` anyway).
MAX_KERNEL_DEGREE = 64

_BLOCKS = Free("a callable or a sequence of callables, each block's output checked when evaluated")


def _bcd_cost(a) -> tuple[float, float]:
    """Operations of :func:`block_coordinate_gd_predict`, about 1 ns each: per block update ~10⁴ of
    fixed cost (measured 11 µs with tiny prompts) and ~10 per context entry of the batch."""
    blocks = a["feature_blocks"]
    n_blocks = len(blocks) if isinstance(blocks, (list, tuple)) else 1
    b, n = np.shape(a["xs"])[:2]
    return float(a["n_cycles"]) * n_blocks * (1e4 + 10.0 * b * n), 0.0


def _solve_batched(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    return np.linalg.solve(gram, rhs[..., None])[..., 0]


@one_blas_thread
@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
)
def ols_predict(xs, ys, x_query) -> np.ndarray:
    """Least squares fitted on the context, evaluated at the query; shape ``(B,)``.

    When the context is shorter than the dimension (``N < d``) the fit is the minimum-norm interpolant.
    """
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    w = (
        np.linalg.pinv(xs) @ ys[..., None]
    )  # (B, d, 1); pinv gives the minimum-norm solution when N < d
    return np.einsum("bd,bd->b", x_query, w[..., 0])


@one_blas_thread
@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    ridge=Interval(0.0, math.inf, "neither"),
)
def ridge_predict(xs, ys, x_query, ridge: float) -> np.ndarray:
    """Ridge regression ``ŵ = argmin Σ_i (y_i − wᵀx_i)² + ridge·‖w‖²`` evaluated at the query; ``(B,)``.

    ``ridge`` must be ``> 0`` (use :func:`ols_predict` for ``ridge = 0``).
    """
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    ridge = finite_float("ridge", ridge)
    if ridge <= 0:
        raise ValueError(f"ridge must be > 0 (use ols_predict for 0), got {ridge!r}")
    d = xs.shape[2]
    gram = np.einsum("bni,bnj->bij", xs, xs) + ridge * np.eye(d)
    w = _solve_batched(gram, np.einsum("bni,bn->bi", xs, ys))
    return np.einsum("bd,bd->b", x_query, w)


@one_blas_thread
@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    noise_var=Interval(0.0, math.inf),
    prior_var=Interval(0.0, math.inf, "neither"),
)
def bayes_optimal_predict(xs, ys, x_query, noise_var: float, prior_var: float = 1.0) -> np.ndarray:
    """Posterior-mean prediction for ``w ~ N(0, prior_var·I)`` and Gaussian noise of variance ``noise_var``.

    It is ridge regression with ``ridge = noise_var / prior_var`` whatever the input distribution; at
    ``noise_var = 0`` it is the minimum-norm interpolant. This is the smallest achievable risk on the textbook
    task, so every other predictor is measured against it.
    """
    noise_var = nonnegative_float("noise_var", noise_var)
    prior_var = positive_float("prior_var", prior_var)
    ridge = noise_var / prior_var
    if ridge == 0:  # noise_var = 0, or a ratio below the smallest double: the interpolant
        return ols_predict(xs, ys, x_query)
    if not np.isfinite(ridge):
        raise ValueError(
            f"noise_var / prior_var must be a finite ridge, got {noise_var:g} / {prior_var:g} "
            "(beyond float64): rescale both"
        )
    return ridge_predict(xs, ys, x_query, ridge)


class BayesPrediction(NamedTuple):
    """The posterior mean ``mean (B,)`` of ``f(x_q)`` and its posterior variance ``var (B,)``."""

    mean: np.ndarray
    var: np.ndarray


@one_blas_thread
@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    noise_var=Interval(0.0, math.inf, "neither"),
)
def bayes_quadratic_predict(xs, ys, x_query, noise_var: float) -> BayesPrediction:
    """The Bayes-optimal prediction for chapter 5's random quadratic targets, and its posterior variance.

    For ``f(x) = xᵀAx`` with ``A`` from :func:`icl_book.tasks.sample_quadratic_tasks`
    (``A = c (G + Gᵀ)/2``, ``G`` i.i.d. ``N(0, 1)``, ``c² = 1/(d(d+2))``), ``f`` is linear in the Gaussian
    ``A``, so it is a Gaussian process with covariance ``E f(x) f(x') = c² (x·x')²``; in the features
    ``q_jj = x_j²``, ``q_jk = √2 x_j x_k`` (``q(x)·q(x') = (x·x')²``) it is ``f = θᵀq(x)`` with
    ``θ ~ N(0, c² I)``. Given the context and Gaussian noise of variance ``σ²``, the posterior of ``θ`` is
    Gaussian with covariance ``Σ = (QᵀQ/σ² + I/c²)⁻¹`` and mean ``Σ Qᵀy/σ²``: the posterior mean is kernel
    ridge regression with the kernel ``(x·x')²`` and the ridge ``σ²/c² = σ² d(d+2)``. No predictor has a
    smaller expected squared error ``E(ŷ − y_q)²``; that floor is ``σ² + E var`` (the **Bayes floor**),
    and the excess error of the posterior mean, ``E(mean − f(x_q))²``, is ``E var``.

    Parameters
    ----------
    xs, ys, x_query
        ``(B, N, d)``, ``(B, N)``, ``(B, d)``.
    noise_var
        ``σ² > 0``, the label-noise variance of the prompts.

    Returns
    -------
    BayesPrediction
        ``mean`` and ``var``, each ``(B,)``. Cost ``O(B (N F² + F³))`` with ``F = d(d+1)/2``.
    """
    from .features import feature_map  # features imports nothing from here; keep the top light

    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    noise_var = positive_float("noise_var", noise_var)
    d = xs.shape[2]
    prior_var = 1.0 / (d * (d + 2))
    q_ctx = feature_map(xs, 2, kind="monomial")[..., d:]  # (B, N, F): degree-2 part only
    q_query = feature_map(x_query, 2, kind="monomial")[..., d:]  # (B, F)
    f = q_ctx.shape[-1]
    # σ² × the posterior precision, QᵀQ + (σ²/c²) I: no 1/σ² to overflow when σ² is tiny.
    scaled = np.swapaxes(q_ctx, 1, 2) @ q_ctx + (noise_var / prior_var) * np.eye(f)
    chol = np.linalg.cholesky(scaled)  # (B, F, F); positive definite
    rhs = np.stack([np.einsum("bnf,bn->bf", q_ctx, ys), q_query], axis=-1)
    sol = np.linalg.solve(np.swapaxes(chol, 1, 2), np.linalg.solve(chol, rhs))
    mean = np.einsum("bf,bf->b", q_query, sol[..., 0])
    var = noise_var * np.einsum("bf,bf->b", q_query, sol[..., 1])
    return BayesPrediction(mean, var)


@one_blas_thread
@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    eta=Interval(),
    preconditioner=OrNone(Array(ndim=2)),
)
def one_step_gd_predict(xs, ys, x_query, eta: float, preconditioner=None) -> np.ndarray:
    """Prediction after one (preconditioned) GD step from ``w = 0``; shape ``(B,)``.

    On the loss ``L(w) = (1/2N) Σ_i (wᵀx_i − y_i)²`` one step ``w₁ = −η Γ ∇L(0) = (η/N) Γ Σ_i y_i x_i`` gives
    ``ŷ = x_qᵀ w₁ = x_qᵀ Γ (η/N) Σ_i y_i x_i``. ``preconditioner`` is ``Γ`` (``(d, d)``), identity when ``None``.
    """
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    eta = finite_float("eta", eta)
    n, d = xs.shape[1], xs.shape[2]
    g = np.einsum("bn,bnd->bd", ys, xs) / n
    if preconditioner is not None:
        g = g @ square_matrix("preconditioner", preconditioner, d).T
    return eta * np.einsum("bd,bd->b", x_query, g)


# --- glu: polynomial kernels, one-step kernel GD, kernel ridge, the linear bound (chapter 5) ---
# A *kernel* is a callable k(X, X') taking X (..., n, d) and X' (..., m, d) and returning the Gram blocks
# (..., n, m); leading (batch) dimensions broadcast.


@declare(
    degree=Integer(1, MAX_KERNEL_DEGREE),
    offset=Interval(0.0, math.inf),
    scale=Interval(0.0, math.inf, "neither"),
)
def polynomial_kernel(degree: int, offset: float = 0.0, scale: float = 1.0):
    """The polynomial kernel ``k(x, x') = (offset + scale · x·x')^degree`` as a batched callable.

    Parameters
    ----------
    degree
        Integer ``p >= 1``.
    offset
        ``c >= 0``; ``c = 0`` is the homogeneous kernel ``(x·x')^p``, ``c = 1`` the inhomogeneous ``(1 + x·x')^p``
        (all monomials of degree ``<= p``).
    scale
        ``> 0``, multiplies the inner product.

    Returns
    -------
    callable
        ``k(X, X')`` with ``X (..., n, d)``, ``X' (..., m, d)`` -> ``(..., n, m)``.

    Examples
    --------
    >>> k = polynomial_kernel(2, offset=1.0)
    >>> float(k(np.ones((1, 2)), np.ones((1, 2)))[0, 0])
    9.0
    """
    degree = integer("degree", degree, minimum=1, maximum=MAX_KERNEL_DEGREE)
    offset = nonnegative_float("offset", offset)
    scale = positive_float("scale", scale)

    def kernel(x, xp):
        x, xp = kernel_inputs(x, xp)
        with np.errstate(over="ignore", invalid="ignore"):
            out = (offset + scale * (x @ np.swapaxes(xp, -1, -2))) ** degree
        return _finite_kernel(out, degree)

    kernel.__doc__ = f"k(x, x') = ({offset:g} + {scale:g} x·x')^{degree}"
    return kernel


def _finite_kernel(out: np.ndarray, degree: int) -> np.ndarray:
    if not np.all(np.isfinite(out)):
        raise ValueError(
            f"the kernel of degree {degree} overflows float64 on these inputs: lower degree "
            "or rescale the inputs"
        )
    return out


@declare(
    degree=Integer(1, MAX_KERNEL_DEGREE),
)
def glu_kernel(degree: int = 2):
    """``k(x, x') = Σ_{m=1}^{degree} (x·x')^m``; ``degree = 2`` is the LSA+GLU block's ``x·x' + (x·x')²``.

    Returns a batched callable ``k(X (..., n, d), X' (..., m, d)) -> (..., n, m)``.
    """
    degree = integer("degree", degree, minimum=1, maximum=MAX_KERNEL_DEGREE)

    def kernel(x, xp):
        x, xp = kernel_inputs(x, xp)
        g = x @ np.swapaxes(xp, -1, -2)
        with np.errstate(over="ignore", invalid="ignore"):
            out = sum(g**m for m in range(1, degree + 1))
        return _finite_kernel(out, degree)

    kernel.__doc__ = f"k(x, x') = sum_(m=1..{degree}) (x·x')^m"
    return kernel


@declare(
    constant=Flag(),
)
def hermite_quadratic_kernel(*, constant: bool = True):
    """The kernel of the Hermite-orthonormal features of degree ``<= 2`` under ``x ~ N(0, I_d)``.

    ``k(x, x') = 1 + x·x' + h(x)·h(x')`` with ``h = ((x_j² − 1)/√2, x_j x_k (j < k))``, i.e.
    ``h(x)·h(x') = ½ (x·x')² − ½ ‖x‖² − ½ ‖x'‖² + d/2``; ``constant=False`` drops the ``1``.
    The features ``[1; x; h(x)]`` have identity covariance, so one GD step with ``η = 1`` is unbiased.
    Returns a batched callable ``k(X (..., n, d), X' (..., m, d)) -> (..., n, m)``.
    """

    constant = flag("constant", constant)  # checked here: 2 or "no" is not a flag

    def kernel(x, xp):
        x, xp = kernel_inputs(x, xp)
        g = x @ np.swapaxes(xp, -1, -2)
        n2 = np.sum(x**2, axis=-1)[..., :, None]
        np2 = np.sum(xp**2, axis=-1)[..., None, :]
        return float(constant) + g + 0.5 * g**2 - 0.5 * n2 - 0.5 * np2 + 0.5 * x.shape[-1]

    return kernel


def _check_kernel(kernel):
    if not callable(kernel):
        raise TypeError(
            f"kernel must be a callable k(X, X') -> Gram matrix, got {type(kernel).__name__}"
        )
    return kernel


def _kernel_values(kernel, x, xp) -> np.ndarray:
    """``kernel(x, xp)`` as float64, refusing NaN or infinite entries (a broken kernel, not a result)."""
    return callable_output("kernel output", kernel(x, xp))


@one_blas_thread
@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    kernel=Callable(),
    eta=Interval(),
)
def one_step_kernel_gd_predict(xs, ys, x_query, kernel, eta: float) -> np.ndarray:
    """One GD step from ``f = 0`` on kernel regression: ``ŷ = (η/N) Σ_i y_i k(x_i, x_q)``; shape ``(B,)``.

    It is one step on ``L(θ) = (1/2N) Σ_i (θᵀφ(x_i) − y_i)²`` in the feature space of ``k = φ·φ``.

    Parameters
    ----------
    xs, ys, x_query
        ``(B, N, d)``, ``(B, N)``, ``(B, d)``.
    kernel
        Batched callable ``k(X (..., n, d), X' (..., m, d)) -> (..., n, m)`` (e.g. :func:`glu_kernel`).
    eta
        Step size (finite).
    """
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    kernel = _check_kernel(kernel)
    eta = finite_float("eta", eta)
    k = _kernel_values(kernel, xs, x_query[:, None, :])
    if k.shape != (*xs.shape[:2], 1):
        raise ValueError(
            f"kernel returned shape {k.shape}, expected (B, N, 1) = {(*xs.shape[:2], 1)}"
        )
    return eta * np.einsum("bn,bn->b", ys, k[..., 0]) / xs.shape[1]


@one_blas_thread
@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    kernel=Callable(),
    ridge=Interval(0.0, math.inf, "neither"),
)
def kernel_ridge_predict(xs, ys, x_query, kernel, ridge: float) -> np.ndarray:
    """Kernel ridge regression fitted on the context: ``ŷ = k(x_q, X) (K + ridge·I)^{-1} y``; ``(B,)``.

    ``ridge`` must be ``> 0``. Cost ``O(B N³)``: keep ``N`` in the hundreds.
    """
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    kernel = _check_kernel(kernel)
    ridge = positive_float("ridge", ridge)
    n = xs.shape[1]
    gram = _kernel_values(kernel, xs, xs)
    kq = _kernel_values(kernel, xs, x_query[:, None, :])
    if gram.shape != (xs.shape[0], n, n) or kq.shape != (xs.shape[0], n, 1):
        raise ValueError(
            f"kernel returned shapes {gram.shape}, {kq.shape}; expected (B, N, N), (B, N, 1)"
        )
    alpha = _solve_batched(gram + ridge * np.eye(n), ys)
    return np.einsum("bn,bn->b", alpha, kq[..., 0])


@one_blas_thread
@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    feature_map=Callable(),
    ridge=Interval(0.0, math.inf, "neither"),
)
def feature_ridge_predict(xs, ys, x_query, feature_map, ridge: float) -> np.ndarray:
    """Kernel ridge regression with the kernel ``k(x, x') = φ(x)·φ(x')``, in its primal form; ``(B,)``.

    ``ŷ = φ(x_q)ᵀ (ΦᵀΦ + ridge·I)^{-1} Φᵀy`` equals :func:`kernel_ridge_predict` with that kernel
    (``k(x_q, X)(K + ridge·I)^{-1}y``, the push-through identity) at cost ``O(B (N p² + p³))`` instead of
    ``O(B N³)``: the way to run kernel ridge with a polynomial kernel on long contexts, e.g.
    ``feature_map = lambda x: features.feature_map(x, 2, kind="monomial")`` for :func:`glu_kernel`.

    Parameters
    ----------
    xs, ys, x_query
        ``(B, N, d)``, ``(B, N)``, ``(B, d)``.
    feature_map
        ``φ(x (..., d)) -> (..., p)``.
    ridge
        ``> 0``.
    """
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    ridge = positive_float("ridge", ridge)
    if not callable(feature_map):
        raise TypeError(
            f"feature_map must be a callable phi(x (..., d)) -> (..., p), got {type(feature_map).__name__}"
        )
    phi = callable_output("feature_map output", feature_map(xs))
    phi_q = callable_output("feature_map output", feature_map(x_query))
    if phi.ndim != 3 or phi.shape[:2] != xs.shape[:2] or phi_q.shape != (xs.shape[0], phi.shape[2]):
        raise ValueError(
            f"feature_map returned shapes {phi.shape}, {phi_q.shape}; expected (B, N, p), (B, p)"
        )
    p = phi.shape[2]
    gram = np.swapaxes(phi, 1, 2) @ phi + ridge * np.eye(p)
    coef = _solve_batched(gram, np.einsum("bnp,bn->bp", phi, ys))
    return np.einsum("bp,bp->b", coef, phi_q)


# --- depth: block-coordinate GD in a feature space, kernel least squares (chapter 6) ---
# ``feature_blocks`` is a sequence of callables φ_b: x (..., d) -> (..., m_b), one per block of coordinates
# (e.g. icl_book.features.FeatureBlock objects, or the ``feature_blocks`` of a deep construction). The full
# feature map is their concatenation φ = [φ_1; …; φ_B], with kernel k(x, x') = Σ_b φ_b(x)·φ_b(x').


def _evaluate_blocks(feature_blocks, xs, x_query):
    if not callable(feature_blocks) and not np.iterable(feature_blocks):
        raise TypeError(
            "feature_blocks must be a callable x (..., d) -> (..., m) or a sequence of them, "
            f"got {type(feature_blocks).__name__}"
        )
    blocks = [feature_blocks] if callable(feature_blocks) else list(feature_blocks)
    if not blocks:
        raise ValueError("feature_blocks must hold at least one block")
    phis, qs = [], []
    for i, block in enumerate(blocks):
        if not callable(block):
            raise TypeError(
                f"feature_blocks[{i}] must be a callable x (..., d) -> (..., m), got {type(block).__name__}"
            )
        phi = callable_output(f"feature_blocks[{i}] output", block(xs))
        q = callable_output(f"feature_blocks[{i}] output", block(x_query))
        if phi.ndim != 3 or phi.shape[:2] != xs.shape[:2] or q.shape != (xs.shape[0], phi.shape[2]):
            raise ValueError(
                f"feature_blocks[{i}] must map (B, N, d) -> (B, N, m) and (B, d) -> (B, m), "
                f"got {phi.shape} and {q.shape}"
            )
        phis.append(phi)
        qs.append(q)
    return phis, qs


@one_blas_thread
@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    feature_blocks=_BLOCKS,
    eta=Interval(0.0, math.inf, "neither"),
    n_cycles=Integer(1, None),
    cost=Cost(_bcd_cost, "n_cycles × len(feature_blocks) × (10⁴ + 10 B N), B N from xs"),
)
def block_coordinate_gd_predict(
    xs, ys, x_query, feature_blocks, eta: float, n_cycles: int = 1
) -> np.ndarray:
    """Cyclic block-coordinate GD on the kernel regression loss, from ``θ = 0``; prediction ``(B,)``.

    The loss is ``L(θ) = (1/2N) Σ_i (θᵀφ(x_i) − y_i)²`` with ``φ = [φ_1; …; φ_B]``. One *cycle* visits the
    blocks in order ``b = 1, …, B`` and updates only block ``b``'s coordinates by a gradient step,
    ``θ_b ← θ_b + (η/N) Σ_j r_j φ_b(x_j)``, where ``r_j = y_j − θᵀφ(x_j)`` are the current residuals. In
    residual form (what the deep transformer's ``y`` slots carry, chapter 6):

    ``r_i ← r_i − (η/N) Σ_j r_j φ_b(x_j)·φ_b(x_i)``,   ``ŷ ← ŷ + (η/N) Σ_j r_j φ_b(x_j)·φ_b(x_q)``.

    Parameters
    ----------
    xs, ys, x_query
        ``(B, N, d)``, ``(B, N)``, ``(B, d)``.
    feature_blocks
        Sequence of callables ``φ_b: (..., d) -> (..., m_b)`` (e.g. :class:`icl_book.features.FeatureBlock`);
        a single callable is one block (then this is plain GD on the features).
    eta
        Step size ``η > 0``.
    n_cycles
        Number of passes over all blocks (``>= 1``).

    Returns
    -------
    numpy.ndarray
        ``(B,)`` predictions ``θᵀφ(x_q)`` after ``n_cycles · B`` block updates.

    Raises
    ------
    ValueError
        If a block's output is not a finite real ``(B, N, m)`` / ``(B, m)`` array, or if the iteration
        diverges (``eta`` too large): never a NaN prediction.
    """
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    eta = positive_float("eta", eta)
    n_cycles = positive_int("n_cycles", n_cycles)
    phis, qs = _evaluate_blocks(feature_blocks, xs, x_query)
    # the list of block steps is n_cycles * B long: refuse a count that could never run
    size_limit("n_cycles * len(feature_blocks)", n_cycles * len(phis), what="block updates")
    # the residual updates of a deep stack's y slots, written once (imported here: it needs torch)
    from .attention.layers import bcd_steps

    steps = [(phi, q, eta * np.eye(phi.shape[-1])) for phi, q in zip(phis, qs, strict=True)]
    with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported below, by name
        out = bcd_steps(ys.copy(), np.zeros(xs.shape[0]), steps * n_cycles)[1]
    if not np.all(np.isfinite(out)):
        raise ValueError(
            f"eta = {eta:g} is too large for these features: block-coordinate GD diverged to "
            "inf/NaN (take eta below 2 / the largest eigenvalue of each block's Gram matrix / N)"
        )
    return out


@one_blas_thread
@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    feature_blocks=_BLOCKS,
)
def kernel_least_squares_predict(xs, ys, x_query, feature_blocks) -> np.ndarray:
    """Least squares in the feature space of ``feature_blocks``, evaluated at the query; shape ``(B,)``.

    ``θ̂ = Φ⁺ y`` (minimum-norm when the ``N × F`` feature matrix ``Φ`` has rank ``< F``), ``ŷ = θ̂ᵀφ(x_q)``: the
    ridgeless kernel regression prediction for ``k = Σ_b φ_b·φ_b``. When ``Φ`` has full column rank
    (``N >= F`` generic points) it is the unique minimiser of the loss of :func:`block_coordinate_gd_predict`,
    which is where block-coordinate GD converges for a small enough ``η``.
    """
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    phis, qs = _evaluate_blocks(feature_blocks, xs, x_query)
    phi = np.concatenate(phis, axis=2)
    q = np.concatenate(qs, axis=1)
    theta = np.linalg.pinv(phi) @ ys[..., None]
    return np.einsum("bm,bm->b", q, theta[..., 0])


# ---------------------------------------------------------------------------------------------------
# Fair one-block baselines: a fitted preconditioner, kernel ridge with a validated ridge
# ---------------------------------------------------------------------------------------------------


@one_blas_thread
def _feature_step_design(xs, ys, x_query, feature_map):
    """``g = (1/N) Σ_i y_i φ(x_i)`` ``(B, p)`` and ``φ(x_q)`` ``(B, p)`` for a feature map ``feature_map``."""
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    if not callable(feature_map):
        raise TypeError(
            f"feature_map must be a callable phi(x (..., d)) -> (..., p), got {type(feature_map).__name__}"
        )
    phi_q = callable_output("feature_map output", feature_map(x_query))
    if phi_q.ndim != 2 or phi_q.shape[0] != xs.shape[0]:
        raise ValueError(
            f"feature_map returned shape {phi_q.shape} at the queries; expected (B, p)"
        )
    if phi_q.shape[1] == 0:
        raise ValueError("feature_map must give at least one feature, got 0")
    g = np.empty_like(phi_q)
    chunk = max(1, 2**22 // (xs.shape[1] * phi_q.shape[1]))  # bounded memory for long contexts
    for lo in range(0, xs.shape[0], chunk):
        phi_ctx = callable_output("feature_map output", feature_map(xs[lo : lo + chunk]))
        if phi_ctx.shape != (*xs[lo : lo + chunk].shape[:2], phi_q.shape[1]):
            raise ValueError(
                f"feature_map returned shape {phi_ctx.shape} on the context; expected (B, N, p)"
            )
        g[lo : lo + chunk] = np.einsum("bn,bnp->bp", ys[lo : lo + chunk], phi_ctx) / xs.shape[1]
    return g, phi_q


# A (p, p) preconditioner, not `gamma`: that name is the reduced model's (d, d+1) everywhere.
@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    feature_map=Callable(),
    preconditioner=Array(ndim=2),
)
def preconditioned_feature_step_predict(xs, ys, x_query, feature_map, preconditioner) -> np.ndarray:
    """One preconditioned GD step on features ``φ``: ``ŷ = gᵀ Γ φ(x_q)``, ``g = (1/N) Σ_i y_i φ(x_i)``; ``(B,)``.

    This is what one LSA+GLU block computes when its GLU writes ``φ`` and its ``W^{KQ}`` is ``Γ`` on those slots
    (chapter 5): the whole family of one-block predictors with these features. ``preconditioner`` is that
    ``(p, p)`` matrix ``Γ`` (e.g. from :func:`fit_one_step_preconditioner`).
    """
    g, phi_q = _feature_step_design(xs, ys, x_query, feature_map)
    preconditioner = square_matrix("preconditioner", preconditioner, g.shape[1])
    return np.einsum("bp,pq,bq->b", g, preconditioner, phi_q)


@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    y_query=Array(ndim=1),
    feature_map=Callable(),
    ridge=Interval(0.0, math.inf),
)
def fit_one_step_preconditioner(
    xs, ys, x_query, y_query, feature_map, *, ridge: float = 1e-8
) -> np.ndarray:
    """The best preconditioner ``Γ`` for :func:`preconditioned_feature_step_predict`, fitted on training prompts.

    The prediction ``gᵀΓφ(x_q)`` is linear in ``Γ``, so the ``Γ`` that minimises the mean squared error over the
    given prompts is a least-squares problem in ``p²`` unknowns (solved with a tiny relative ridge for
    stability). Fit on one set of prompts and evaluate on fresh ones: the result is the best *one-block*
    construction with these features, a fair yardstick for a trained block.

    Parameters
    ----------
    xs, ys, x_query, y_query
        Training prompts ``(B, N, d)``, ``(B, N)``, ``(B, d)``, ``(B,)``; ``B`` should exceed ``p²``.
    feature_map
        ``φ(x (..., d)) -> (..., p)``.
    ridge
        Relative ridge ``>= 0`` (times the mean diagonal of the normal equations).

    Returns
    -------
    numpy.ndarray
        ``Γ``, shape ``(p, p)``.
    """
    return fit_mixed_preconditioner([(xs, ys, x_query, y_query)], feature_map, ridge=ridge)


@declare(
    batches=Free("a list of prompt batches, each checked as the prompts of one call"),
    feature_map=Callable(),
    ridge=Interval(0.0, math.inf),
)
def fit_mixed_preconditioner(batches, feature_map, *, ridge: float = 1e-8) -> np.ndarray:
    """The one ``Γ`` that is best over several prompt batches at once, e.g. a mix of context lengths.

    :func:`fit_one_step_preconditioner` over the union of the batches: the yardstick for a block
    trained with one set of weights on prompts whose ``N`` varies (it must serve every ``N`` with the
    same ``Γ``, so it cannot take the per-``N`` best step).

    Parameters
    ----------
    batches
        A non-empty sequence of ``(xs, ys, x_query, y_query)`` (e.g. :class:`~icl_book.tasks.Prompts`);
        the context length may differ between batches.
    feature_map, ridge
        As in :func:`fit_one_step_preconditioner`.
    """
    if not isinstance(batches, (list, tuple)):
        raise ArgumentTypeError(
            "batches must be a list of prompt batches (xs, ys, x_query, y_query), got "
            f"{type(batches).__name__}"
        )
    if not batches:
        raise ValueError(
            "batches must hold at least one prompt batch (xs, ys, x_query, y_query), got an empty "
            f"{type(batches).__name__}"
        )
    for b in batches:
        if not isinstance(b, tuple) or len(b) < 4:
            raise ArgumentTypeError(
                "batches must hold prompt batches (xs, ys, x_query, y_query) such as tasks.Prompts, "
                f"got {type(b).__name__}"
            )
    batches = list(batches)
    ridge = nonnegative_float("ridge", ridge)
    designs, targets = [], []
    for xs, ys, x_query, y_query in (tuple(b)[:4] for b in batches):
        g, phi_q = _feature_step_design(xs, ys, x_query, feature_map)
        y_query = as_array("y_query", y_query)
        if y_query.shape != (g.shape[0],):
            raise ValueError(f"y_query must have shape ({g.shape[0]},), got {y_query.shape}")
        if designs and g.shape[1] ** 2 != designs[0].shape[1]:
            raise ValueError("feature_map must give the same number of features on every batch")
        designs.append((g[:, :, None] * phi_q[:, None, :]).reshape(len(g), -1))
        targets.append(y_query)
    design, target = np.concatenate(designs), np.concatenate(targets)
    p2 = design.shape[1]
    p = int(round(np.sqrt(p2)))
    normal = design.T @ design
    scale = np.trace(normal) / p2
    if scale == 0:  # all labels 0 (g = 0): every Γ predicts 0; the least-norm fit is Γ = 0
        return np.zeros((p, p))
    normal += ridge * scale * np.eye(p2)
    return np.linalg.solve(normal, design.T @ target).reshape(p, p)


class RidgeChoice(NamedTuple):
    """What :func:`select_kernel_ridge` returns: the chosen ``ridge`` and the validation ``errors`` of every
    candidate (in the order given)."""

    ridge: float
    errors: np.ndarray


@one_blas_thread
@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    y_query=Array(ndim=1),
    kernel=Callable(),
    ridges=Array(ndim=None, within=Interval(0.0, math.inf, "neither")),
)
def select_kernel_ridge(xs, ys, x_query, y_query, kernel, ridges) -> RidgeChoice:
    """Choose kernel ridge's ``ridge`` on validation prompts: the grid value with the lowest mean squared error.

    Parameters
    ----------
    xs, ys, x_query, y_query
        Validation prompts (not the test prompts).
    kernel
        As in :func:`kernel_ridge_predict`.
    ridges
        Candidate values, each ``> 0``.

    Returns
    -------
    RidgeChoice
        ``(ridge, errors)``: the chosen ridge and the validation error of every candidate.
    """
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    # y_query (B,): a (B, 1) column would broadcast against the (B,) predictions into a (B, B) error
    # matrix and silently pick the wrong ridge.
    y_query = as_array("y_query", y_query, shape=(xs.shape[0],))
    if isinstance(ridges, (str, bytes)) or not np.iterable(ridges):
        ridges = [ridges]
    if not isinstance(ridges, (list, tuple)):  # an array or a tensor: its real numbers, by name
        ridges = list(as_array("ridges", ridges).ravel())
    grid = [positive_float(f"ridges[{i}]", r) for i, r in enumerate(ridges)]
    if not grid:
        raise ValueError("ridges must hold at least one value")
    errors = np.array(
        [np.mean((kernel_ridge_predict(xs, ys, x_query, kernel, r) - y_query) ** 2) for r in grid]
    )
    return RidgeChoice(grid[int(np.argmin(errors))], errors)
