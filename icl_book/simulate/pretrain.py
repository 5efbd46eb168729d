"""Pretraining the reduced linear attention and the errors of what it learns (chapters 3 and 4).

:func:`~icl_book.simulate.pretrain_reduced_lsa` samples and solves; :func:`~icl_book.simulate.gamma_errors` and
:func:`~icl_book.simulate.simulated_errors` give the exact errors of the learned ``Γ`` for the linear teacher,
:func:`~icl_book.simulate.mc_error` a Monte Carlo estimate for any teacher.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .._blas import one_blas_thread
from .._declare import Array, Cost, Integer, Interval, Options, OrNone, Rng, declare
from .._validate import (
    generator,
    nonnegative_float,
    positive_float,
    positive_int,
    reduced_gamma,
    size_limit,
    task_vectors,
)
from ..tasks import sample_task_pool
from ..theory import _teacher, error_of_gamma
from .sizes import (
    _KAPPA,
    _LINK,
    _RATIO,
    MAX_DIM,
    SAMPLE_BATCH,
    _round_half_up,
    problem_sizes,
    sample_reduced_prompts,
)
from .solver import solve_reduced_ridge


class PretrainedLSA(NamedTuple):
    """What :func:`pretrain_reduced_lsa` returns: the learned ``gamma`` and the ``task_pool`` it was
    pretrained on (``None`` when ``κ = ∞``: a fresh task for every prompt)."""

    gamma: np.ndarray
    task_pool: np.ndarray | None


class SimulatedErrors(NamedTuple):
    """Exact errors of a pretrained ``Γ``: on fresh tasks (``icl``) and on the pretraining pool (``idg``)."""

    icl: float
    idg: float


_NOISE = Interval(0.0, 1e100)
_SOLVER = dict(
    tol=Interval(0.0, 1.0, "right"),
    max_iter=OrNone(Integer(1, None)),
    solver=Options(("auto", "pcg", "dense")),
    sampler=Options(("labels", "wishart")),
)


def _mc_cost(a) -> tuple[float, float]:
    """Operations of :func:`mc_error`, about 1 ns each on one core: per prompt, a fixed ~500 (the
    block's bookkeeping), ~150 per context token and 3 per entry of Γ (measured: 0.8 µs at d = 2,
    ℓ = 2; 35 µs at d = 100, ℓ = 100). Memory is streamed (``SAMPLE_BATCH``): nothing grows."""
    d = np.shape(a["gamma"])[0]
    ell = float(a["alpha"]) * d
    return float(a["n_test"]) * (500.0 + 150.0 * ell + 3.0 * d * d), 0.0


@declare(
    dim=Integer(1, MAX_DIM),
    alpha=_RATIO,
    tau=_RATIO,
    kappa=_KAPPA,
    noise_var=_NOISE,
    ridge=Interval(0.0, 1e100),
    link=_LINK,
    rng=Rng(),
    **_SOLVER,
)
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
    solver: str = "auto",
    sampler: str = "labels",
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
    solver
        ``"auto"`` (the cost model of :func:`solve_reduced_ridge` picks matrix-free PCG or the dense Gram
        matrix from the sizes), ``"pcg"`` or ``"dense"``.
    sampler
        ``"labels"`` or ``"wishart"`` (linear teacher, ``O(d)`` per prompt): :func:`sample_reduced_prompts`.

    Returns
    -------
    gamma : numpy.ndarray
        ``(dim, dim+1)``.
    task_pool : numpy.ndarray or None
        ``(K, dim)`` pretraining tasks (``None`` when ``κ = ∞``).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> gamma, pool = pretrain_reduced_lsa(10, 1.0, 2.0, kappa=1.0, noise_var=0.1, rng=rng)
    >>> gamma.shape, pool.shape
    ((10, 11), (10, 10))
    """
    rng = generator(rng)
    ell, n, k = problem_sizes(dim, alpha, tau, kappa)
    # the n prompts' (n, d + 1) features and (n, d) queries, before anything is drawn
    size_limit("tau * dim**2 * (dim + 1), the pretraining features,", n * (dim + 1))
    noise_var = nonnegative_float("noise_var", noise_var)
    ridge = nonnegative_float("ridge", ridge)
    pool = None if k is None else sample_task_pool(k, dim, rng=rng)
    prompts = sample_reduced_prompts(
        n, ell, dim, rng=rng, noise_var=noise_var, task_pool=pool, link=link, sampler=sampler
    )
    gamma, _ = solve_reduced_ridge(
        prompts.x_query,
        prompts.h,
        prompts.y_query,
        ridge,
        tol=tol,
        max_iter=max_iter,
        solver=solver,
    )
    return PretrainedLSA(gamma, pool)


@declare(
    gamma=Array(ndim=2),
    alpha=Interval(0.0, MAX_DIM * 1e12, "neither"),
    noise_var=_NOISE,
    task_pool=OrNone(Array(ndim=2)),
)
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


@declare(
    dim=Integer(1, MAX_DIM),
    alpha=_RATIO,
    tau=_RATIO,
    kappa=_KAPPA,
    noise_var=_NOISE,
    ridge=Interval(0.0, 1e100),
    rng=Rng(),
    **_SOLVER,
)
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
    solver: str = "auto",
    sampler: str = "labels",
) -> SimulatedErrors:
    """Pretrain with :func:`pretrain_reduced_lsa` and return the exact ``(e_ICL, e_IDG)`` of the learned ``Γ``.

    The errors are exact expectations over test prompts (no Monte-Carlo noise), so the only randomness is that
    of pretraining. ``idg`` is ``nan`` when ``κ = ∞`` (there is no finite pool to test on). ``tol``,
    ``max_iter``, ``solver`` and ``sampler`` go to :func:`pretrain_reduced_lsa` (``tol = 1e-6`` already fixes
    the errors to ~1e-6).
    """
    gamma, pool = pretrain_reduced_lsa(
        dim,
        alpha,
        tau,
        kappa,
        noise_var,
        ridge,
        rng=rng,
        tol=tol,
        max_iter=max_iter,
        solver=solver,
        sampler=sampler,
    )
    ell, _, _ = problem_sizes(dim, alpha, tau, kappa)
    return gamma_errors(gamma, ell / dim, noise_var, pool)


# --- nonlinear: chapter 4 section below ---


class MCError(NamedTuple):
    """A Monte Carlo error estimate: the ``mean`` squared error, its standard error ``sem``, and ``n_test``."""

    mean: float
    sem: float
    n_test: int


@declare(
    gamma=Array(ndim=2),
    link=_LINK,
    alpha=Interval(0.0, _RATIO.high, "neither"),
    noise_var=_NOISE,
    task_pool=OrNone(Array(ndim=2)),
    n_test=Integer(2, None),
    rng=Rng(),
    cost=Cost(_mc_cost, "n_test × (500 + 150 ℓ + 3 d²), ℓ = alpha d, d from gamma"),
)
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
    >>> import numpy as np
    >>> gamma = np.zeros((5, 6))  # predicts 0: the error is E f² + ρ
    >>> rng = np.random.default_rng(0)
    >>> res = mc_error(gamma, np.sign, 2.0, 0.1, n_test=1000, rng=rng)
    >>> print(f"{res.mean:.1f} {res.n_test}")
    1.1 1000
    """
    rng = generator(rng)
    gamma = reduced_gamma("gamma", gamma)
    dim = gamma.shape[0]
    link = _teacher(link, allow_none=True)
    alpha = positive_float("alpha", alpha)
    noise_var = nonnegative_float("noise_var", noise_var)
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
