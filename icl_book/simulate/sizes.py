"""Problem sizes and the exact-in-distribution sampler of the reduced prompts (chapter 3).

:func:`~icl_book.simulate.problem_sizes` turns the ratios ``(α, τ, κ)`` into the integer sizes ``(ℓ, n, K)``;
:func:`~icl_book.simulate.sample_reduced_prompts` draws what ``n`` prompts contribute to the reduced regression in
``O(ℓ + d)`` each, exactly in law (:mod:`icl_book.simulate`); :func:`~icl_book.simulate.reduced_features` computes
the same from explicit prompts. The public names are documented in :mod:`icl_book.simulate`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .._blas import one_blas_thread
from .._declare import (
    AnyOf,
    Array,
    Flag,
    Integer,
    Interval,
    Options,
    OrNone,
    Rng,
    declare,
)
from .._declare import (
    Callable as CallableArg,
)
from .._validate import (
    as_array,
    callable_output,
    choice,
    flag,
    generator,
    nonnegative_float,
    positive_float,
    positive_int,
    real,
    size_limit,
    task_vectors,
)
from ..hermite import LINKS
from ..tasks import sample_task_pool

#: Prompts are drawn in blocks of this many (fixed, so that a seed always gives the same prompts).
SAMPLE_BATCH = 4096


class ReducedPrompts(NamedTuple):
    """What ``n`` prompts contribute to the reduced regression.

    ``x_query (n, d)``, ``h (n, d+1)`` with ``H_Z = x_q hᵀ``, ``y_query (n,)``; ``tasks (n, d)`` the task of each
    prompt (``None`` unless requested).
    """

    x_query: np.ndarray
    h: np.ndarray
    y_query: np.ndarray
    tasks: np.ndarray | None = None


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


#: Largest ratio α, τ or κ (and dimension) a size is computed from: ``⌊αd⌉`` stays an exact integer.
MAX_RATIO = 1e12
MAX_DIM = 10**6
_RATIO = Interval(0.0, MAX_RATIO, "right")
_KAPPA = AnyOf((_RATIO, Interval(math.inf, math.inf, allow_inf=True)))
_LINK = OrNone(CallableArg(names=tuple(LINKS)))


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


@declare(dim=Integer(1, MAX_DIM), alpha=_RATIO, tau=_RATIO, kappa=_KAPPA)
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


@declare(xs=Array(ndim=3), ys=Array(ndim=2))
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


def _wishart_context(rng, b: int, ell: int, dim: int, norm, sd_noise: float):
    """``(Σ y_i s_i, Σ y_i²)`` of ``b`` linear-teacher contexts in ``O(1)`` each, exactly in law.

    With ``z_i = √d s_i`` and ``ε_i`` i.i.d. standard normal, ``y_i = (‖w‖/√d) z_i + σ ε_i``, so both sums are
    linear in ``A = Σ z_i², B = Σ z_i ε_i, C = Σ ε_i²``, and ``[[A, B], [B, C]] ~ Wishart₂(ℓ, I)``. Bartlett:
    ``A = c₁², B = c₁ m, C = m² + c₂²`` with ``c₁² ~ χ²_ℓ``, ``c₂² ~ χ²_{ℓ−1}``, ``m ~ N(0, 1)``, independent.
    """
    c1 = np.sqrt(rng.chisquare(ell, size=b))
    m = rng.standard_normal(b)
    c2 = rng.chisquare(ell - 1, size=b) if ell > 1 else np.zeros(b)  # χ²₀ = 0
    # Σ y z = c₁ (‖w‖ c₁/√d + σ m) and Σ y² = (‖w‖ c₁/√d + σ m)² + σ² c₂²: sums of squares, never negative
    t = norm / math.sqrt(dim) * c1 + sd_noise * m
    return c1 * t / math.sqrt(dim), t * t + sd_noise**2 * c2


@declare(
    batch=Integer(1, None),
    context_len=Integer(1, None),
    dim=Integer(1, MAX_DIM),
    rng=Rng(),
    noise_var=Interval(0.0, 1e100),
    task_pool=OrNone(Array(ndim=2)),
    link=_LINK,
    return_tasks=Flag(),
    sampler=Options(("labels", "wishart")),
)
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
    sampler: str = "labels",
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
    sampler
        How the context's statistics ``Σ y_i s_i`` and ``Σ y_i²`` are drawn, both exactly in law:
        ``"labels"`` draws the ``ℓ`` pre-activations and labels (``O(ℓ + d)`` per prompt, any link; the
        draws behind the book's stored results); ``"wishart"`` (linear teacher only, ``link=None``) draws
        the 2×2 Gram matrix of the standardised pre-activations ``z`` and noises ``ε`` of the context,
        ``[[Σz², Σzε], [Σzε, Σε²]] ~ Wishart₂(ℓ, I)``, by Bartlett's decomposition (two chi-square draws and
        one normal): ``O(d)`` per prompt, whatever ``ℓ``. The two give different draws from one seed.
    """
    rng = generator(rng)
    dim = positive_int("dim", dim)
    ell = positive_int("context_len", context_len)
    n = positive_int("batch", batch)
    # h is (batch, dim + 1) and each block draws (rows, context_len): refuse sizes before allocating
    size_limit("batch * (dim + 1)", n * (dim + 1))
    size_limit("context_len * dim", ell * dim)
    noise_var = nonnegative_float("noise_var", noise_var)
    return_tasks = flag("return_tasks", return_tasks)
    if link is not None and not callable(link):
        raise TypeError(f"link must be a callable R -> R or None, got {type(link).__name__}")
    sampler = choice("sampler", sampler, ("labels", "wishart"))
    if sampler == "wishart" and link is not None:
        raise ValueError(
            "sampler='wishart' draws the linear teacher's context statistics and needs link=None; "
            "use sampler='labels' for a link"
        )
    if task_pool is not None:
        pool, pool_norms = task_vectors("task_pool", task_pool, dim)
        unit_pool = pool / pool_norms[:, None]  # once, not per block: only directions are gathered
    sd_noise = math.sqrt(noise_var)
    x_query = np.empty((n, dim))
    h = np.empty((n, dim + 1))
    y_query = np.empty(n)
    tasks = np.empty((n, dim)) if return_tasks else None
    # One buffer for every block's normals g: a fresh array per block costs its page faults each time.
    g_buffer = np.empty((min(n, SAMPLE_BATCH), dim))
    for start in range(0, n, SAMPLE_BATCH):
        b = min(SAMPLE_BATCH, n - start)
        rows = slice(start, start + b)
        if task_pool is None:
            w = sample_task_pool(b, dim, rng=rng)
            norm = np.full(b, math.sqrt(dim))
            u = w / norm[:, None]
        else:
            idx = rng.integers(0, pool.shape[0], size=b)
            u, norm = unit_pool[idx], pool_norms[idx]
            w = pool[idx] if return_tasks else None
        if sampler == "labels":
            # Context: only the projections s_i = u·x_i ~ N(0, 1/d) are needed; x_i·w = ‖w‖ s_i.
            s = rng.standard_normal((b, ell)) / math.sqrt(dim)
            y = _apply_link(link, norm[:, None] * s) + sd_noise * rng.standard_normal((b, ell))
            sum_y2 = np.einsum("bl,bl->b", y, y)
            sum_ys = np.einsum("bl,bl->b", y, s)
        else:
            sum_ys, sum_y2 = _wishart_context(rng, b, ell, dim, norm, sd_noise)
        # v⊥ = Σ y_i x_i⊥ given the labels: N(0, (Σ y_i² / d) P⊥_u), so h's first d entries are
        # (d/ℓ)(u Σ y s + c (g − u (g·u))) with c = √(Σ y² / d). Written into h in place: the block's
        # arithmetic, not the normals, was two thirds of the sampling time (d = 32, ℓ = 320).
        g = g_buffer[:b]
        rng.standard_normal(out=g)  # the same draws as standard_normal((b, dim)), in place
        c = np.sqrt(sum_y2 / dim)
        scale = dim / ell
        along = (sum_ys - c * np.einsum("bd,bd->b", g, u)) * scale
        hx = h[rows, :dim]
        np.multiply(u, along[:, None], out=hx)
        g *= (c * scale)[:, None]
        hx += g
        h[rows, dim] = sum_y2 / ell
        xq = x_query[rows]
        rng.standard_normal(out=xq)  # the same draws as standard_normal((b, dim)), in place
        xq /= math.sqrt(dim)
        # x_q·w = ‖w‖ (x_q·u)
        y_query[rows] = _apply_link(
            link, np.einsum("bd,bd->b", xq, u) * norm
        ) + sd_noise * rng.standard_normal(b)
        if return_tasks:
            tasks[rows] = w
    return ReducedPrompts(x_query, h, y_query, tasks)
