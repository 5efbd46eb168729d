"""Polynomial and Hermite feature maps, and their partition into blocks (chapters 5 and 6).

Features are indexed by *index tuples*: a sorted tuple ``(i_1 <= i_2 <= … <= i_k)`` of coordinates names the
degree-``k`` monomial ``x_{i_1} x_{i_2} ⋯ x_{i_k}`` (for example ``(0, 0, 2)`` is ``x_0² x_2``). The book's order
(:func:`feature_index_tuples`) is by degree, then lexicographic, and leaves out the constant: a degree-``p`` map
in ``d`` variables has ``C(d+p, p) − 1`` features (:func:`n_features`).

Three kinds of feature values for the same index tuples (``α_j`` counts how often ``j`` appears in the tuple):

- ``"hermite"`` (default): ``h_α(x) = Π_j He_{α_j}(x_j) / √(α_j!)`` (chapter 1's orthonormal Hermite
  polynomials). Under ``x ~ N(0, I_d)`` these features are orthonormal: their covariance is the identity.
- ``"legendre"``: ``h_α(x) = Π_j √(2α_j + 1) P_{α_j}(x_j)`` with the Legendre polynomials ``P_k``: orthonormal
  under ``x`` uniform on the cube ``[−1, 1]^d``, and bounded there (``|h_α| <= Π_j √(2α_j + 1)``), unlike
  the heavy-tailed Gaussian Hermite features of degree ``>= 3``.
- ``"monomial"``: ``c_α x^α`` with ``c_α = √(k! / Π_j α_j!)``, so that
  ``Σ_{|α|=k} φ_α(x) φ_α(x') = (x·x')^k`` and the degree-``p`` map has kernel ``Σ_{m=1}^p (x·x')^m``
  (chapter 5's ``glu_kernel(p)``).

A :class:`FeatureBlock` is a callable ``x (..., d) -> (..., m)`` evaluating a subset of the features; a list of
blocks is what :func:`icl_book.estimators.block_coordinate_gd_predict` takes as ``feature_blocks``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations_with_replacement
from math import comb, factorial, lgamma, log, sqrt

import numpy as np

from ._declare import Array, Free, Integer, Options, OrNone, declare
from ._validate import (
    MAX_ENTRIES,
    ArgumentTypeError,
    as_array,
    callable_output,
    integer,
    kernel_inputs,
    nonnegative_int,
    positive_int,
    size_limit,
)

#: Highest degree :func:`orthonormal_table` evaluates (the same cap as ``hermite.MAX_DEGREE``): the
#: recurrence costs one pass over ``z`` per degree, and the table holds ``K + 1`` rows.
MAX_ORTHONORMAL_DEGREE = 2000
#: Most features :func:`feature_index_tuples` enumerates (checked from ``C(d+p, p) − 1`` first).
MAX_FEATURES = 10**6
# Above this min(dim, degree) the count C(d+p, p) − 1 exceeds any sane limit (C(2000, 1000) ~ 10^600) and
# computing it exactly is slow (comb(2·10^6, 10^6) takes 36 s): it is then estimated through lgamma.
_EXACT_COUNT_UP_TO = 1000

__all__ = [
    "FEATURE_KINDS",
    "ORTHONORMAL_KINDS",
    "recurrence_coefficient",
    "orthonormal_table",
    "FeatureBlock",
    "n_features",
    "feature_index_tuples",
    "feature_degree",
    "feature_map",
    "partition_features",
    "feature_kernel",
]

#: The kinds of feature values (see the module docstring).
FEATURE_KINDS = ("hermite", "legendre", "monomial")

#: Kinds that are orthonormal polynomial bases, and the input distribution each is orthonormal for.
ORTHONORMAL_KINDS = {"hermite": "x ~ N(0, I_d)", "legendre": "x ~ Uniform([-1, 1]^d)"}


def _check_kind(kind) -> str:
    if kind not in FEATURE_KINDS:
        raise ValueError(f"kind must be one of {FEATURE_KINDS}, got {kind!r}")
    return kind


@declare(
    dim=Integer(1, None),
    degree=Integer(1, None),
)
def n_features(dim: int, degree: int) -> int:
    """Number of features of degree ``1..p`` in ``d`` variables: ``C(d+p, p) − 1`` (no constant)."""
    dim = positive_int("dim", dim)
    degree = positive_int("degree", degree)
    return comb(dim + degree, degree) - 1


@declare(
    dim=Integer(1, None),
    degree=Integer(1, None),
)
def feature_index_tuples(dim: int, degree: int) -> list[tuple[int, ...]]:
    """The index tuples of all features of degree ``1..p``, in the book's order (degree, then lexicographic).

    Refused at once, before anything is enumerated, when the count :func:`n_features` exceeds
    ``MAX_FEATURES`` (10⁶): the error names ``dim``, ``degree``, the count and the limit.

    Examples
    --------
    >>> feature_index_tuples(2, 2)
    [(0,), (1,), (0, 0), (0, 1), (1, 1)]
    """
    # Count before enumerating: C(d+p, p) − 1 is cheap, the list of tuples is not. Every enumeration
    # (feature_map, partition_features, …) goes through here.
    dim = positive_int("dim", dim)
    degree = positive_int("degree", degree)
    if min(dim, degree) > _EXACT_COUNT_UP_TO:  # the exact count alone would take seconds
        digits = (lgamma(dim + degree + 1) - lgamma(dim + 1) - lgamma(degree + 1)) / log(10)
        raise ValueError(
            f"the feature space of degree = {degree} in dim = {dim} is too large: it would need "
            f"about 10^{digits:.0f} features, more than the limit of {MAX_FEATURES:,}"
        )
    count = n_features(dim, degree)
    size_limit(
        f"the feature space of degree = {degree} in dim = {dim}",
        count,
        limit=MAX_FEATURES,
        what="features",
    )
    return [t for k in range(1, degree + 1) for t in combinations_with_replacement(range(dim), k)]


@declare(
    index_tuple=Free("a tuple of coordinate indices >= 0, checked one by one in the body"),
)
def feature_degree(index_tuple) -> int:
    """Degree of the feature named by ``index_tuple`` (its length)."""
    return len(_index_tuple("index_tuple", index_tuple))


@declare(
    kind=Options(FEATURE_KINDS),
    k=Integer(0, None),
)
def recurrence_coefficient(kind: str, k: int) -> float:
    """``a_k`` of the three-term recurrence ``z p_k(z) = a_{k+1} p_{k+1}(z) + a_k p_{k−1}(z)``.

    For the orthonormal polynomials ``p_k`` of ``kind``: ``a_k = √k`` (Hermite, ``p_k = He_k/√k!``) and
    ``a_k = k / √(4k² − 1)`` (Legendre, ``p_k = √(2k+1) P_k``); ``a_0 = 0``.
    """
    if kind not in ORTHONORMAL_KINDS:
        raise ValueError(f"kind must be one of {tuple(ORTHONORMAL_KINDS)}, got {kind!r}")
    return _coefficient(kind, nonnegative_int("k", k))


def _coefficient(kind: str, k: int) -> float:
    """:func:`recurrence_coefficient` without validation (the recurrences' inner loops call it)."""
    if k == 0:
        return 0.0
    return sqrt(k) if kind == "hermite" else k / sqrt(4 * k * k - 1)


@declare(
    kind=Options(FEATURE_KINDS),
    max_degree=Integer(0, MAX_ORTHONORMAL_DEGREE),
    z=Array(),
    start=OrNone(Array()),
)
def orthonormal_table(kind: str, max_degree: int, z, start=None) -> np.ndarray:
    """``p_0(z), …, p_K(z)`` (times ``start``) of the orthonormal family ``kind``; ``(K + 1, *z.shape)``.

    The one implementation of the three-term recurrence ``p_{k+1} = (z p_k − a_k p_{k−1}) / a_{k+1}``
    (:func:`recurrence_coefficient`), which never forms ``k!``. The recurrence is linear, so a
    ``start`` other than 1 (e.g. ``√(Gaussian weight)``, as :mod:`icl_book.hermite` passes) gives the
    weighted functions ``p_k(z) · start``, which stay in range where ``p_k`` alone would overflow.

    ``max_degree`` is at most ``MAX_ORTHONORMAL_DEGREE``; ``z`` (and ``start``) must be finite real
    arrays; the table's ``(K + 1) · z.size`` entries are checked against the allocation limit before it
    is built. Cost: ``K`` passes over ``z``.
    """
    if kind not in ORTHONORMAL_KINDS:
        raise ValueError(f"kind must be one of {tuple(ORTHONORMAL_KINDS)}, got {kind!r}")
    max_degree = integer("max_degree", max_degree, minimum=0, maximum=MAX_ORTHONORMAL_DEGREE)
    z = as_array("z", z)
    size_limit("the table", (max_degree + 1) * max(z.size, 1), limit=MAX_ENTRIES)
    if start is None:
        start = np.ones_like(z)
    else:
        start = as_array("start", start)
        try:
            start = np.broadcast_to(start, z.shape)
        except ValueError:
            raise ValueError(
                f"start must broadcast to z's shape {z.shape}, got {start.shape}"
            ) from None
    return _table(kind, max_degree, z, start)


def _table(kind: str, max_degree: int, z: np.ndarray, start: np.ndarray) -> np.ndarray:
    """:func:`orthonormal_table` without validation: the recurrence itself."""
    out = np.empty((max_degree + 1, *z.shape))
    out[0] = start
    if max_degree >= 1:
        out[1] = z * start / _coefficient(kind, 1)  # a_0 = 0
    for m in range(1, max_degree):
        a_m, a_next = _coefficient(kind, m), _coefficient(kind, m + 1)
        out[m + 1] = (z * out[m] - a_m * out[m - 1]) / a_next
    return out


def _orthonormal_last(kind: str, degree: int, z: np.ndarray) -> np.ndarray:
    """``p_K(z)`` alone: :func:`orthonormal_table`'s recurrence keeping two rows (memory ``O(z.size)``,
    not ``O(K z.size)``; the same operations, so the same bits as the table's last row)."""
    prev, cur = None, np.ones_like(z)
    if degree >= 1:
        prev, cur = cur, z * cur / _coefficient(kind, 1)
    for m in range(1, degree):
        a_m, a_next = _coefficient(kind, m), _coefficient(kind, m + 1)
        prev, cur = cur, (z * cur - a_m * prev) / a_next
    return cur


def _monomial_coefficient(index_tuple: tuple[int, ...]) -> float:
    counts = np.bincount(np.asarray(index_tuple, dtype=int))
    return sqrt(factorial(len(index_tuple)) / float(np.prod([factorial(int(c)) for c in counts])))


def _feature_values(x: np.ndarray, index_tuple: tuple[int, ...], kind: str) -> np.ndarray:
    counts = np.bincount(np.asarray(index_tuple, dtype=int))
    out = np.ones(x.shape[:-1])
    for j, c in enumerate(counts):
        if c == 0:
            continue
        if kind in ORTHONORMAL_KINDS:
            out = out * _orthonormal_last(kind, int(c), x[..., j])
        else:
            out = out * x[..., j] ** int(c)
    if kind == "monomial":
        out = out * _monomial_coefficient(index_tuple)
    return out


def _index_tuple(name: str, t, dim: int | None = None) -> tuple[int, ...]:
    """One feature's index tuple: a non-empty sorted tuple (or list) of coordinates in ``[0, dim)``."""
    if not isinstance(t, (tuple, list)):
        raise ArgumentTypeError(
            f"{name} must be a tuple of coordinate indices such as (0, 1), got {t!r} "
            f"({type(t).__name__})"
        )
    top = None if dim is None else dim - 1
    t = tuple(integer(f"{name}: index tuples' coordinates", i, minimum=0, maximum=top) for i in t)
    if len(t) < 1 or list(t) != sorted(t):
        bound = "" if dim is None else f" in [0, {dim})"
        raise ValueError(f"{name} must be a non-empty sorted tuple of coordinates{bound}, got {t}")
    return t


def _check_index_tuples(index_tuples, dim: int) -> tuple[tuple[int, ...], ...]:
    if not isinstance(index_tuples, (tuple, list)):
        raise ArgumentTypeError(
            f"index_tuples must be a tuple of index tuples such as ((0,), (0, 1)), got "
            f"{index_tuples!r} ({type(index_tuples).__name__})"
        )
    return tuple(_index_tuple("index_tuples", t, dim) for t in index_tuples)


@dataclass(frozen=True)
class FeatureBlock:
    """A block of features: a callable ``x (..., d) -> (..., m)`` evaluating ``m`` named features.

    Attributes
    ----------
    dim
        Input dimension ``d``.
    index_tuples
        The ``m`` features, as index tuples (module docstring), in column order.
    kind
        ``"hermite"``, ``"legendre"`` or ``"monomial"``.
    """

    dim: int
    index_tuples: tuple[tuple[int, ...], ...]
    kind: str = "hermite"

    def __post_init__(self):
        object.__setattr__(self, "dim", positive_int("dim", self.dim))
        object.__setattr__(self, "kind", _check_kind(self.kind))
        object.__setattr__(self, "index_tuples", _check_index_tuples(self.index_tuples, self.dim))

    def __len__(self) -> int:
        return len(self.index_tuples)

    def __call__(self, x) -> np.ndarray:
        """Feature values, shape ``(..., m)`` for ``x`` of shape ``(..., d)`` (finite, real)."""
        x = as_array("x", x)
        if x.ndim < 1 or x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (..., d) with d = {self.dim}, got {x.shape}")
        if not self.index_tuples:
            return np.zeros((*x.shape[:-1], 0))
        if self.kind not in ORTHONORMAL_KINDS:
            return np.stack([_feature_values(x, t, self.kind) for t in self.index_tuples], axis=-1)
        # one recurrence over every coordinate at once, then each feature a product of its rows:
        # the operations of _feature_values entry by entry (the same bits), without recomputing
        # p_c(x_j) for every feature that holds it
        counts = [np.bincount(np.asarray(t, dtype=int)) for t in self.index_tuples]
        table = _table(self.kind, max(int(c.max()) for c in counts), x, np.ones_like(x))
        columns = []
        for c in counts:
            out = np.ones(x.shape[:-1])
            for j in np.flatnonzero(c):
                out = out * table[c[j], ..., j]
            columns.append(out)
        return np.stack(columns, axis=-1)

    @property
    def degrees(self) -> tuple[int, ...]:
        """The degree of each feature."""
        return tuple(len(t) for t in self.index_tuples)


@declare(
    x=Array(),
    degree=Integer(1, None),
    kind=Options(FEATURE_KINDS),
)
def feature_map(x, degree: int, *, kind: str = "hermite") -> np.ndarray:
    """All features of degree ``1..p`` of ``x (..., d)``, shape ``(..., C(d+p, p) − 1)``, in the book's order.

    ``x`` must be a finite real array; the feature count is checked before it is enumerated.
    """
    x = as_array("x", x)
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"x must have shape (..., d) with d >= 1, got {x.shape}")
    degree = positive_int("degree", degree)
    return FeatureBlock(
        x.shape[-1], tuple(feature_index_tuples(x.shape[-1], degree)), _check_kind(kind)
    )(x)


@declare(
    dim=Integer(1, None),
    degree=Integer(1, None),
    block_size=Integer(1, None),
    kind=Options(FEATURE_KINDS),
)
def partition_features(
    dim: int, degree: int, block_size: int, *, kind: str = "hermite"
) -> list[FeatureBlock]:
    """Split the degree-``1..p`` features, in the book's order, into consecutive blocks of ``block_size``.

    The last block holds the remainder. (The deep transformer of chapter 6 uses its own partition, which also
    respects what each block can compute; see :func:`icl_book.attention.deep.deep_bcd_weights`.)

    Returns
    -------
    list of FeatureBlock
        ``ceil(F / block_size)`` blocks covering each feature exactly once.
    """
    dim = positive_int("dim", dim)
    degree = positive_int("degree", degree)
    block_size = positive_int("block_size", block_size)
    kind = _check_kind(kind)
    tuples = feature_index_tuples(dim, degree)
    return [
        FeatureBlock(dim, tuple(tuples[i : i + block_size]), kind)
        for i in range(0, len(tuples), block_size)
    ]


@declare(
    feature_blocks=Free("a callable or a non-empty sequence of callables, checked in the body"),
)
def feature_kernel(feature_blocks: Sequence):
    """The kernel ``k(x, x') = Σ_b φ_b(x)·φ_b(x')`` of a list of feature maps, as a batched callable.

    The result follows chapter 5's kernel interface, ``k(X (..., n, d), X' (..., m, d)) -> (..., n, m)``, so it
    can be passed to :func:`icl_book.estimators.kernel_ridge_predict` and
    :func:`icl_book.estimators.one_step_kernel_gd_predict`. A single callable is accepted as a one-block list.
    """
    if callable(feature_blocks):
        blocks = [feature_blocks]
    elif isinstance(feature_blocks, (list, tuple)):
        blocks = list(feature_blocks)
    else:
        blocks = []
    if not blocks or not all(callable(b) for b in blocks):
        raise TypeError(
            "feature_blocks must be a non-empty sequence of callables x (..., d) -> (..., m)"
        )

    def kernel(x, xp):
        x, xp = kernel_inputs(x, xp)
        try:
            np.broadcast_shapes(x.shape[:-2], xp.shape[:-2])
        except ValueError:
            raise ValueError(
                f"x and x_prime must have broadcastable batch dimensions (..., n, d) and "
                f"(..., m, d), got {x.shape} and {xp.shape}"
            ) from None
        return sum(
            callable_output("feature_blocks output", b(x))
            @ np.swapaxes(callable_output("feature_blocks output", b(xp)), -1, -2)
            for b in blocks
        )

    return kernel
