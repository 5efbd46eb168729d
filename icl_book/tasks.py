"""Samplers of in-context regression prompts.

A *prompt* is a context of ``N`` labelled examples ``(x_i, y_i)`` plus a query ``x_q`` whose label the model
must predict. Every sampler returns a :class:`Prompts` tuple of NumPy arrays

- ``xs``: ``(B, N, d)`` context inputs,
- ``ys``: ``(B, N)`` context labels,
- ``x_query``: ``(B, d)`` query inputs,
- ``y_query``: ``(B,)`` query labels (with label noise, as a test label would be),
- ``tasks``: ``(B, d)`` the task vector ``w`` of each prompt.

Two conventions are used in the book (chapters 2 and 3):

- *textbook* (chapters 0, 2, 5, 6): ``x ~ N(0, Λ)`` in ``R^d``, ``w ~ N(0, I_d)``;
- *Lu et al.* (chapters 3, 4): ``x ~ N(0, I_d / d)``, ``‖w‖ = √d``, so ``x·w ~ N(0, 1)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ._declare import (
    Array,
    Integer,
    Interval,
    Options,
    OrNone,
    Rng,
    declare,
)
from ._declare import (
    Callable as CallableArg,
)
from ._validate import (
    as_array,
    callable_output,
    finite_values,
    generator,
    nonnegative_float,
    positive_int,
    size_limit,
    square_matrix,
)
from .features import ORTHONORMAL_KINDS, feature_map, n_features

__all__ = [
    "Prompts",
    "sample_linear_prompts",
    "sample_single_index_prompts",
    "sample_task_pool",
    *["sample_quadratic_tasks", "sample_quadratic_prompts", "sample_mixed_prompts"],
    *["sample_polynomial_prompts", "sample_cubic_prompts"],
]


class Prompts(NamedTuple):
    """A batch of in-context regression prompts (see the module docstring for shapes)."""

    xs: np.ndarray
    ys: np.ndarray
    x_query: np.ndarray
    y_query: np.ndarray
    tasks: np.ndarray


def _gaussian_inputs(rng, shape, dim, input_cov):
    z = rng.standard_normal((*shape, dim))
    if input_cov is None:
        return z
    cov = square_matrix("input_cov", input_cov, dim)
    if not np.allclose(cov, cov.T):
        raise ValueError("input_cov must be symmetric")
    # Cholesky fails loudly on a covariance that is not positive definite, which is what we want.
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise ValueError("input_cov must be positive definite") from None
    return z @ chol.T


def _prompt_sizes(batch, context_len, dim, noise_var) -> tuple[int, int, int, float]:
    """The arguments every sampler shares, validated: ``B, N, d >= 1`` and ``σ² >= 0``.

    The prompts' ``B (N + 1) d`` entries are checked against the allocation limit before anything is
    drawn (a typo such as ``batch=10**12`` is refused by name, not as a 14 TiB ``MemoryError``).
    """
    out = (
        positive_int("batch", batch),
        positive_int("context_len", context_len),
        positive_int("dim", dim),
        nonnegative_float("noise_var", noise_var),
    )
    size_limit("batch * (context_len + 1) * dim", out[0] * (out[1] + 1) * out[2])
    return out


def _draw_tasks(task_pool, shape: tuple[int, ...], names: str, batch: int, rng) -> np.ndarray:
    """``batch`` tasks drawn uniformly from a ``(K, *shape)`` pool (``names`` spells the shape out)."""
    pool = as_array("task_pool", task_pool, None)
    if pool.ndim != 1 + len(shape) or pool.shape[1:] != shape or pool.shape[0] < 1:
        want = ", ".join(str(v) for v in shape)
        raise ValueError(
            f"task_pool must have shape (K, {names}) = (K, {want}) with K >= 1, got {pool.shape}"
        )
    return pool[rng.integers(0, pool.shape[0], size=batch)]


@declare(
    batch=Integer(1, None),
    context_len=Integer(1, None),
    dim=Integer(1, None),
    rng=Rng(),
    noise_var=Interval(0.0, 1e100),
    task_pool=OrNone(Array(ndim=2)),
    input_cov=OrNone(Array(ndim=2)),
)
def sample_linear_prompts(
    batch: int,
    context_len: int,
    dim: int,
    *,
    rng: np.random.Generator,
    noise_var: float = 0.0,
    input_cov: np.ndarray | None = None,
    task_pool: np.ndarray | None = None,
) -> Prompts:
    """Linear-regression prompts in the textbook convention: ``y = wᵀx + ε``.

    Parameters
    ----------
    batch, context_len, dim
        ``B``, ``N`` and ``d``; integers ``>= 1``.
    rng
        The only source of randomness.
    noise_var
        ``σ² >= 0``, the variance of the label noise ``ε``.
    input_cov
        ``Λ``, a ``(d, d)`` symmetric positive-definite covariance of ``x``; identity when ``None``.
    task_pool
        Optional ``(K, d)`` array of task vectors; each prompt draws its ``w`` uniformly from it.
        When ``None``, ``w ~ N(0, I_d)`` afresh for every prompt.

    Examples
    --------
    >>> p = sample_linear_prompts(3, 10, 2, rng=np.random.default_rng(0))
    >>> p.xs.shape, p.ys.shape, p.x_query.shape
    ((3, 10, 2), (3, 10), (3, 2))
    """
    rng = generator(rng)
    batch, context_len, dim, noise_var = _prompt_sizes(batch, context_len, dim, noise_var)
    if task_pool is None:
        tasks = rng.standard_normal((batch, dim))
    else:
        tasks = _draw_tasks(task_pool, (dim,), "dim", batch, rng)
    x = _gaussian_inputs(rng, (batch, context_len + 1), dim, input_cov)
    y = np.einsum("bnd,bd->bn", x, tasks) + np.sqrt(noise_var) * rng.standard_normal(
        (batch, context_len + 1)
    )
    return Prompts(x[:, :-1], y[:, :-1], x[:, -1], y[:, -1], tasks)


@declare(
    n_tasks=Integer(1, None),
    dim=Integer(1, None),
    rng=Rng(),
)
def sample_task_pool(n_tasks: int, dim: int, *, rng: np.random.Generator) -> np.ndarray:
    """``K`` task vectors in Lu et al.'s convention: ``w ~ N(0, I_d)`` rescaled to ``‖w‖ = √d``; shape ``(K, d)``."""
    rng = generator(rng)
    n_tasks = positive_int("n_tasks", n_tasks)
    dim = positive_int("dim", dim)
    size_limit("n_tasks * dim", n_tasks * dim)
    w = rng.standard_normal((n_tasks, dim))
    return w * (np.sqrt(dim) / np.linalg.norm(w, axis=1, keepdims=True))


@declare(
    batch=Integer(1, None),
    context_len=Integer(1, None),
    dim=Integer(1, None),
    rng=Rng(),
    noise_var=Interval(0.0, 1e100),
    task_pool=OrNone(Array(ndim=2)),
    link=OrNone(CallableArg()),
)
def sample_single_index_prompts(
    batch: int,
    context_len: int,
    dim: int,
    link: Callable[[np.ndarray], np.ndarray] | None = None,
    *,
    rng: np.random.Generator,
    noise_var: float = 0.0,
    task_pool: np.ndarray | None = None,
) -> Prompts:
    """Single-index prompts in Lu et al.'s convention: ``y = f(x·w) + ε``.

    ``x ~ N(0, I_d / d)`` and ``‖w‖ = √d``, so the pre-activation ``x·w`` is standard normal and the Hermite
    coefficients of ``f`` (chapter 1) describe the task. ``link=None`` is the linear teacher ``f(z) = z``.

    Parameters
    ----------
    batch, context_len, dim
        ``B``, ``N = ℓ`` and ``d``; integers ``>= 1``.
    link
        Vectorised callable ``f: R -> R``, or ``None`` for the identity.
    rng
        The only source of randomness.
    noise_var
        ``ρ >= 0``, the variance of the label noise.
    task_pool
        Optional ``(K, d)`` task vectors (e.g. from :func:`sample_task_pool`); fresh tasks when ``None``.
    """
    rng = generator(rng)
    batch, context_len, dim, noise_var = _prompt_sizes(batch, context_len, dim, noise_var)
    if link is not None and not callable(link):
        raise TypeError(f"link must be a callable R -> R or None, got {type(link).__name__}")
    if task_pool is None:
        tasks = sample_task_pool(batch, dim, rng=rng)
    else:
        tasks = _draw_tasks(task_pool, (dim,), "dim", batch, rng)
    x = rng.standard_normal((batch, context_len + 1, dim)) / np.sqrt(dim)
    z = np.einsum("bnd,bd->bn", x, tasks)
    clean = z if link is None else callable_output("link output", link(z))
    if clean.shape != z.shape:
        raise ValueError(
            f"link must be vectorised (map an array to an array of the same shape), got {clean.shape}"
        )
    finite_values("link output", clean)
    y = clean + np.sqrt(noise_var) * rng.standard_normal(z.shape)
    return Prompts(x[:, :-1], y[:, :-1], x[:, -1], y[:, -1], tasks)


# --- glu: quadratic targets y = xᵀAx + ε (chapter 5) ---


@declare(
    n_tasks=Integer(1, None),
    dim=Integer(1, None),
    rng=Rng(),
)
def sample_quadratic_tasks(n_tasks: int, dim: int, *, rng: np.random.Generator) -> np.ndarray:
    """Random symmetric matrices ``A``, shape ``(K, d, d)``, normalised so that ``E[(xᵀAx)²] = 1``.

    ``A = (G + Gᵀ) / (2 √(d(d+2)))`` with ``G`` i.i.d. ``N(0, 1)`` (a scaled GOE matrix): diagonal entries have
    variance ``1/(d(d+2))`` and off-diagonal ones ``1/(2d(d+2))``. For ``x ~ N(0, I_d)``,
    ``E[(xᵀAx)² | A] = 2‖A‖_F² + (tr A)²``, whose mean over ``A`` is ``(d(d+1) + d)/(d(d+2)) = 1``: the
    signal has unit power whatever ``d``, and the best linear predictor's risk averages ``1 + σ²``.
    """
    rng = generator(rng)
    n_tasks = positive_int("n_tasks", n_tasks)
    dim = positive_int("dim", dim)
    size_limit("n_tasks * dim * dim", n_tasks * dim * dim)
    g = rng.standard_normal((n_tasks, dim, dim))
    return (g + np.swapaxes(g, 1, 2)) / (2 * np.sqrt(dim * (dim + 2)))


@declare(
    batch=Integer(1, None),
    context_len=Integer(1, None),
    dim=Integer(1, None),
    rng=Rng(),
    noise_var=Interval(0.0, 1e100),
    task_pool=OrNone(Array(ndim=3)),
)
def sample_quadratic_prompts(
    batch: int,
    context_len: int,
    dim: int,
    *,
    rng: np.random.Generator,
    noise_var: float = 0.0,
    task_pool: np.ndarray | None = None,
) -> Prompts:
    """Quadratic-target prompts ``y = xᵀAx + ε`` with ``x ~ N(0, I_d)``.

    Parameters
    ----------
    batch, context_len, dim
        ``B``, ``N`` and ``d``; integers ``>= 1``.
    rng
        The only source of randomness.
    noise_var
        ``σ² >= 0``, the variance of the label noise ``ε``.
    task_pool
        Optional ``(K, d, d)`` symmetric matrices; each prompt draws its ``A`` uniformly from it. When ``None``,
        a fresh ``A`` per prompt from :func:`sample_quadratic_tasks` (normalised so ``E[(xᵀAx)²] = 1``).

    Returns
    -------
    Prompts
        As in the module docstring, except ``tasks`` holds the matrices ``A``, shape ``(B, d, d)``.
    """
    rng = generator(rng)
    batch, context_len, dim, noise_var = _prompt_sizes(batch, context_len, dim, noise_var)
    if task_pool is None:
        tasks = sample_quadratic_tasks(batch, dim, rng=rng)
    else:
        pool = as_array("task_pool", task_pool, None)
        if pool.ndim == 3 and not np.allclose(pool, np.swapaxes(pool, 1, 2)):
            raise ValueError("task_pool matrices must be symmetric")
        tasks = _draw_tasks(pool, (dim, dim), "d, d", batch, rng)
    x = rng.standard_normal((batch, context_len + 1, dim))
    y = np.sum((x @ tasks) * x, axis=-1)  # xᵀAx for every token (faster than a three-way einsum)
    y = y + np.sqrt(noise_var) * rng.standard_normal(y.shape)
    return Prompts(x[:, :-1], y[:, :-1], x[:, -1], y[:, -1], tasks)


# --- depth: polynomial (Hermite-expansion) targets of degree p, e.g. cubic (chapter 6) ---


@declare(
    batch=Integer(1, None),
    context_len=Integer(1, None),
    dim=Integer(1, None),
    rng=Rng(),
    noise_var=Interval(0.0, 1e100),
)
def sample_mixed_prompts(
    batch: int,
    context_len: int,
    dim: int,
    *,
    rng: np.random.Generator,
    noise_var: float = 0.0,
) -> Prompts:
    """Mixed linear-plus-quadratic prompts ``y = βᵀx + xᵀAx + ε`` (chapter 5's test of "LSA ≤ linear").

    ``A`` as in :func:`sample_quadratic_prompts` and ``β ~ N(0, I_d / d)``, fresh per prompt; a linear
    predictor can learn ``βᵀx`` in context, so an LSA layer has something to learn and the bound can be tested.

    Returns
    -------
    Prompts
        As in :func:`sample_quadratic_prompts`: ``tasks`` holds the matrices ``A`` (the linear parts ``β``
        are not stored: the best linear predictor's risk does not depend on them).
    """
    rng = generator(rng)
    q = sample_quadratic_prompts(batch, context_len, dim, rng=rng, noise_var=noise_var)
    beta = rng.standard_normal((q.xs.shape[0], q.xs.shape[2])) / np.sqrt(q.xs.shape[2])
    return q._replace(
        ys=q.ys + np.einsum("bnj,bj->bn", q.xs, beta),
        y_query=q.y_query + np.einsum("bj,bj->b", q.x_query, beta),
    )


@declare(
    batch=Integer(1, None),
    context_len=Integer(1, None),
    dim=Integer(1, None),
    rng=Rng(),
    noise_var=Interval(0.0, 1e100),
    task_pool=OrNone(Array(ndim=2)),
    degree=Integer(1, None),
    kind=Options(tuple(ORTHONORMAL_KINDS)),
)
def sample_polynomial_prompts(
    batch: int,
    context_len: int,
    dim: int,
    degree: int,
    *,
    rng: np.random.Generator,
    noise_var: float = 0.0,
    task_pool: np.ndarray | None = None,
    kind: str = "hermite",
) -> Prompts:
    """Prompts whose target is a random polynomial of degree ``<= p`` without constant term.

    ``y = Σ_α c_α h_α(x) + ε`` over the ``F = C(d+p, p) − 1`` orthonormal features ``h_α`` of degree ``1..p``
    (:func:`icl_book.features.feature_map`, in the book's order) with ``c ~ N(0, I_F / F)``, and

    - ``kind="hermite"``: ``x ~ N(0, I_d)`` and Hermite features;
    - ``kind="legendre"``: ``x`` uniform on ``[−1, 1]^d`` and Legendre features (bounded: chapter 6).

    The features are orthonormal under their input distribution, so ``E[f(x)² | c] = ‖c‖²`` and the signal has
    unit power on average whatever ``d`` and ``p``; degree ``k`` carries the share ``C(d+k−1, k) / F`` of it.

    Parameters
    ----------
    batch, context_len, dim
        ``B``, ``N`` and ``d``; integers ``>= 1``.
    degree
        ``p >= 1`` (``3``: the chapter's cubic task, see :func:`sample_cubic_prompts`).
    rng
        The only source of randomness.
    noise_var
        ``σ² >= 0``, the variance of the label noise ``ε``.
    task_pool
        Optional ``(K, F)`` coefficient vectors; each prompt draws its ``c`` uniformly from them. Fresh
        ``c`` per prompt when ``None``.
    kind
        ``"hermite"`` or ``"legendre"`` (input distribution and features, above).

    Returns
    -------
    Prompts
        As in the module docstring, except ``tasks`` holds the coefficients ``c``, shape ``(B, F)``.
    """

    if kind not in ORTHONORMAL_KINDS:
        raise ValueError(f"kind must be one of {tuple(ORTHONORMAL_KINDS)}, got {kind!r}")

    rng = generator(rng)
    batch, context_len, dim, noise_var = _prompt_sizes(batch, context_len, dim, noise_var)
    degree = positive_int("degree", degree)
    n_feat = n_features(dim, degree)
    size_limit(
        "batch * (context_len + 1) * n_features(dim, degree)", batch * (context_len + 1) * n_feat
    )
    if task_pool is None:
        tasks = rng.standard_normal((batch, n_feat)) / np.sqrt(n_feat)
    else:
        tasks = _draw_tasks(task_pool, (n_feat,), "F", batch, rng)
    shape = (batch, context_len + 1, dim)
    x = rng.standard_normal(shape) if kind == "hermite" else rng.uniform(-1.0, 1.0, shape)
    y = np.einsum("bnf,bf->bn", feature_map(x, degree, kind=kind), tasks)
    y = y + np.sqrt(noise_var) * rng.standard_normal(y.shape)
    return Prompts(x[:, :-1], y[:, :-1], x[:, -1], y[:, -1], tasks)


@declare(
    batch=Integer(1, None),
    context_len=Integer(1, None),
    dim=Integer(1, None),
    rng=Rng(),
    noise_var=Interval(0.0, 1e100),
    task_pool=OrNone(Array(ndim=2)),
    kind=Options(tuple(ORTHONORMAL_KINDS)),
)
def sample_cubic_prompts(
    batch: int,
    context_len: int,
    dim: int,
    *,
    rng: np.random.Generator,
    noise_var: float = 0.0,
    task_pool: np.ndarray | None = None,
    kind: str = "hermite",
) -> Prompts:
    """Cubic-target prompts: :func:`sample_polynomial_prompts` with ``degree = 3``."""
    return sample_polynomial_prompts(
        batch, context_len, dim, 3, rng=rng, noise_var=noise_var, task_pool=task_pool, kind=kind
    )
