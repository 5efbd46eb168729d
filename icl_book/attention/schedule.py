"""Which features each layer of a deep block-coordinate stack writes: one cycle's plan (chapter 6).

:func:`bcd_schedule` splits the ``F = C(d+p, p) − 1`` features of degree ``1..p`` into blocks that
fit in a token's scratch, each with the *carriers* (parents of the next layer's features) it must
also write; :func:`min_deep_width` is the narrowest token that has such a plan. Pure Python over
index tuples (no weights, no torch): :func:`icl_book.attention.deep.deep_bcd_weights` builds its
layers from this plan.
"""

from __future__ import annotations

import functools
import heapq
import itertools

from .._declare import Integer, Options, declare
from .._validate import choice, integer, positive_int, size_limit
from ..features import FEATURE_KINDS, feature_index_tuples, n_features

#: Largest feature space (number of features ``F``) that :func:`bcd_schedule` plans. Measured on a
#: loaded 2-core machine, the plan costs about ``F²/S`` steps: 1 s for ``d = 12, p = 4`` (``F = 1819``)
#: with one scratch slot, the worst case at this limit; ``F = 4844`` took 4-6 s.
MAX_PLAN_FEATURES = 2000
#: Highest degree :func:`bcd_schedule` plans: a degree-``p`` feature carries a chain of ``p`` requirements,
#: so the plan's cost also grows with ``p`` (1 s at ``d = 2, p = 40``; 7 s at ``p = 61``).
MAX_PLAN_DEGREE = 40

__all__ = ["bcd_schedule", "min_deep_width"]


@functools.lru_cache(maxsize=2**17)  # the planner asks for the same features many times
def _requirements(item: tuple[int, ...], kind: str) -> tuple[tuple[int, ...], ...]:
    """Features that must be in the scratch a layer receives so that its GLU can write ``item``."""
    if len(item) <= 2:
        return ()
    parent = item[:-1]
    if kind == "monomial":
        return (parent,)
    j = item[-1]
    beta_j = parent.count(j)
    if (
        beta_j >= 1 and len(item) - 2 >= 3
    ):  # the correction h_{β−e_j} is itself a degree >= 3 feature
        pos = len(parent) - 1 - parent[::-1].index(j)
        return (parent, parent[:pos] + parent[pos + 1 :])
    return (parent,)


def _closure_fits(items, n_scratch: int, kind: str) -> bool:
    items = list(dict.fromkeys(items))
    while items:
        if len(items) > n_scratch:
            return False
        items = list(dict.fromkeys(r for a in items for r in _requirements(a, kind)))
    return True


def _scratch_needed(order, kind: str) -> int:
    """Fewest scratch slots that hold some feature together with all it needs (see :func:`_closure_fits`).

    A feature ``a`` fits a scratch of ``S`` slots, alone, iff every level of its chain of requirements
    (``a``; what ``a`` needs; what that needs; ...) has at most ``S`` members; more held features only add
    members. So the plan exists iff ``S`` is at least the largest such level over all features: one pass
    over the features (``O(F p)``) instead of a failed plan (``O(F²)``) per trial width.
    """
    need = 1
    for a in order:
        level = (a,)
        while level:
            need = max(need, len(level))
            level = tuple(dict.fromkeys(r for b in level for r in _requirements(b, kind)))
    return need


@declare(
    dim=Integer(1, None),
    degree=Integer(1, None),
    n_scratch=Integer(1, None),
    kind=Options(FEATURE_KINDS),
)
def bcd_schedule(dim: int, degree: int, n_scratch: int, *, kind: str = "hermite"):
    """The construction's plan: which features (and carriers) each layer of one cycle writes.

    Built backwards: the last layer takes the last features (highest degree) that fit, the layer before it
    must hold their parents, and so on; each layer fills its free slots with further features. The first
    layer is then left with the remainder, so a forward pass moves features (lowest degree first) into the
    free slots of earlier layers wherever what they need is in the scratch they receive: every layer but the
    last is full when the requirements allow it. Every feature appears in exactly one layer, and the first
    layer needs nothing from its predecessor, so the plan can be repeated cyclically.

    Parameters
    ----------
    dim, degree
        ``d >= 1`` and ``1 <= p <=`` ``MAX_PLAN_DEGREE``, with at most ``MAX_PLAN_FEATURES``
        features ``F = C(d+p, p) − 1`` (checked before any feature is enumerated). The plan costs about
        ``F²/S`` steps: about a second at the limits on a 2-core machine.
    n_scratch
        Scratch slots per token, ``S >= 1``; too few (see :func:`min_deep_width`) is refused at once.
    kind
        ``"hermite"``, ``"legendre"`` or ``"monomial"`` (see :mod:`icl_book.features`).

    Returns
    -------
    list of (features, carriers)
        One pair of tuples of index tuples per layer, in stack order; the scratch of layer ``b`` holds
        ``features + carriers`` in that order (slots ``0, 1, …``).

    Raises
    ------
    ValueError
        If ``S`` is too small for some feature together with what it needs (see :func:`min_deep_width`).
    """
    dim = positive_int("dim", dim)
    degree = integer("degree", degree, minimum=1, maximum=MAX_PLAN_DEGREE)
    n_scratch = positive_int("n_scratch", n_scratch)
    kind = choice("kind", kind, FEATURE_KINDS)
    # The plan is built by list scans over all features: refuse, before enumerating, a feature
    # space whose plan would take minutes.
    size_limit(
        f"the feature space of degree = {degree} in dim = {dim}",
        n_features(dim, degree),
        limit=MAX_PLAN_FEATURES,
        what="features",
    )
    order = feature_index_tuples(dim, degree)
    if n_scratch < _scratch_needed(order, kind):
        raise ValueError(
            f"a scratch of {n_scratch} slots cannot hold a degree-{degree} feature and its parents"
        )
    rank = {t: i for i, t in enumerate(order)}
    unassigned = list(order)
    needed: list[tuple[int, ...]] = []
    backwards = []
    assigned: set = set()  # membership tests on a set: the lists below are scanned once per layer
    while unassigned or needed:
        held = list(needed)
        features = [a for a in needed if a not in assigned]
        if features:
            taken = set(features)
            unassigned = [a for a in unassigned if a not in taken]
        i = len(unassigned) - 1
        while len(held) < n_scratch and i >= 0:
            a = unassigned[i]
            if _closure_fits([*held, a], n_scratch, kind):
                held.append(a)
                features.append(a)
                del unassigned[i]
            i -= 1
        if not features and not needed:
            raise ValueError(
                f"a scratch of {n_scratch} slots cannot hold a degree-{degree} feature and its parents"
            )
        assigned.update(features)
        features.sort(key=rank.__getitem__)
        written = set(features)
        carriers = sorted((a for a in held if a not in written), key=rank.__getitem__)
        backwards.append((tuple(features), tuple(carriers)))
        needed = list(dict.fromkeys(r for a in held for r in _requirements(a, kind)))
    return _compact(backwards[::-1], n_scratch, rank, kind)


def _carriers(plan_features, kind, rank):
    """Carriers of every layer for given feature sets: what the next layer needs and the layer does not write.

    Computed backwards (a carrier is written by its layer's GLU, so it needs its own parent one layer
    earlier). The first layer's needs must be empty (it follows the embedding, whose scratch is zero).
    """
    carriers = [()] * len(plan_features)
    needed: list = []
    for b in range(len(plan_features) - 1, -1, -1):
        feats = plan_features[b]
        carriers[b] = tuple(sorted((a for a in needed if a not in feats), key=rank.__getitem__))
        held = [*feats, *carriers[b]]
        needed = list(dict.fromkeys(r for a in held for r in _requirements(a, kind)))
    return carriers, needed


def _compact(plan, n_scratch: int, rank, kind):
    """Fill the free slots of early layers with features of later layers, lowest degree first.

    The backward-greedy plan leaves its *first* layer with what is left over (for ``p = 2`` and ``d = 3`` in a
    4-slot scratch: one feature, three empty slots), so a stack cut after one block would use a quarter of its
    width. A feature moves from layer ``c`` to an earlier layer ``b`` when the scratch layer ``b`` receives
    holds everything it needs (layer 0 receives nothing) and the carriers recomputed afterwards still fit;
    layers left empty at the end are dropped.

    Candidates are tried in the order (carriers of layer ``b`` first, then by rank). A trial move changes
    the carriers of layers ``c`` and below only, and only down to the first layer whose needs are
    unchanged; recomputing just those (instead of the whole plan, as :func:`_carriers` does) makes the
    pass about ``F`` times cheaper for ``F`` features while giving the same plan
    (``tests/test_depth.py`` compares it with the plain recomputation).
    """
    plan_state = _Compaction(plan, n_scratch, rank, kind)
    for b in range(len(plan_state.feats) - 1):
        plan_state.fill(b)
    feats = plan_state.feats
    while feats and not feats[-1]:
        feats.pop()
    carriers, first_needs = _carriers(feats, kind, rank)
    assert not first_needs  # the first layer follows the embedding: it needs nothing
    return [(tuple(f), c) for f, c in zip(feats, carriers, strict=True)]


class _Compaction:
    """The state of :func:`_compact`'s pass: each layer's features, carriers and needs, where each
    feature is, and from each feature to the features that need it."""

    def __init__(self, plan, n_scratch: int, rank, kind):
        self.n_scratch, self.rank, self.kind = n_scratch, rank, kind
        self._reqs: dict = {}
        self.feats = [list(f) for f, _ in plan]
        n_layers = len(self.feats)
        # carriers[b] as in _carriers; needs[b]: what layer b needs in the scratch it receives.
        self.carriers: list = [()] * n_layers
        self.needs: list = [frozenset()] * n_layers
        needed: frozenset = frozenset()
        for b in range(n_layers - 1, -1, -1):
            self.carriers[b] = self._by_rank(a for a in needed if a not in self.feats[b])
            needed = self.needs[b] = self.needs_of(self.feats[b], self.carriers[b])
        self.where = {a: c for c, f in enumerate(self.feats) for a in f}
        # Candidates for layer b must have all they need in the scratch b receives (``prev``): those
        # that need nothing (degree <= 2), kept sorted by rank, and the children of what ``prev`` holds.
        self.free_later = sorted((a for a in self.where if not self.req(a)), key=rank.__getitem__)
        self.children: dict = {}
        for a in self.where:
            for r in self.req(a):
                self.children.setdefault(r, []).append(a)

    def req(self, a):
        """:func:`_requirements` of ``a``, cached for this pass."""
        r = self._reqs.get(a)
        if r is None:
            r = self._reqs[a] = _requirements(a, self.kind)
        return r

    def needs_of(self, feats_b, carriers_b) -> frozenset:
        """What a layer writing ``feats_b`` and ``carriers_b`` needs in the scratch it receives."""
        return frozenset(r for a in (*feats_b, *carriers_b) for r in self.req(a))

    def _by_rank(self, items) -> tuple:
        return tuple(sorted(items, key=self.rank.__getitem__))

    def fill(self, b: int) -> None:
        """Move features of later layers into layer ``b`` while it has a free slot and one fits."""
        self.free_later = [a for a in self.free_later if self.where[a] > b]
        while len(self.feats[b]) < self.n_scratch:
            for a in self.candidates(b):
                result = self.retry(b, self.where[a], a)
                if result is not None:
                    self.move(b, a, result)
                    break
            else:
                return

    def candidates(self, b: int):
        """Features of later layers whose requirements are all in the scratch layer ``b`` receives:
        the carriers of layer ``b`` first, then the others by rank."""
        feats, carriers, where, req = self.feats, self.carriers, self.where, self.req
        prev = set(feats[b - 1]) | set(carriers[b - 1]) if b > 0 else set()
        first = sorted(
            (a for a in carriers[b] if where[a] > b and all(r in prev for r in req(a))),
            key=self.rank.__getitem__,
        )
        firsts = set(first)
        gated = {
            x
            for p in prev
            for x in self.children.get(p, ())
            if where[x] > b and x not in firsts and all(r in prev for r in req(x))
        }
        rest = heapq.merge(
            sorted(gated, key=self.rank.__getitem__),
            (x for x in self.free_later if x not in firsts),
            key=self.rank.__getitem__,
        )
        return itertools.chain(first, rest)

    def retry(self, b: int, c: int, a):
        """``(features, carriers, needs)`` of the layers that change when ``a`` moves from layer
        ``c`` to layer ``b``, or None if the move does not fit."""
        feats, needs, n_layers = self.feats, self.needs, len(self.feats)
        trial_feats = {
            c: [x for x in feats[c] if x != a],
            b: sorted([*feats[b], a], key=self.rank.__getitem__),
        }
        new_carriers, new_needs = {}, {}
        needed = needs[c + 1] if c + 1 < n_layers else frozenset()
        k = c
        while k >= 0:
            fk = trial_feats.get(k, feats[k])
            ck = self._by_rank(x for x in needed if x not in fk)
            if len(fk) + len(ck) > self.n_scratch:
                return None
            new_carriers[k] = ck
            needed = new_needs[k] = self.needs_of(fk, ck)
            if needed == needs[k]:
                if k <= b:  # nothing below changes
                    return trial_feats, new_carriers, new_needs
                # Layers b+1 .. k-1 keep their features and receive the same needs: skip to b.
                needed, k = needs[b + 1], b
                continue
            k -= 1
        return None if needed else (trial_feats, new_carriers, new_needs)

    def move(self, b: int, a, result) -> None:
        """Apply :meth:`retry`'s ``result``: ``a`` is now written by layer ``b``."""
        trial_feats, new_carriers, new_needs = result
        for k, f in trial_feats.items():
            self.feats[k] = f
        for k, ck in new_carriers.items():
            self.carriers[k] = ck
        for k, nk in new_needs.items():
            self.needs[k] = nk
        self.where[a] = b
        if not self.req(a):
            self.free_later.remove(a)


@declare(
    dim=Integer(1, None),
    degree=Integer(1, None),
    kind=Options(FEATURE_KINDS),
)
def min_deep_width(dim: int, degree: int, *, kind: str = "hermite") -> int:
    """Smallest token width ``D`` for which :func:`~icl_book.attention.deep.deep_bcd_weights` has
    a plan (``d + 3`` up to degree 4).

    ``D = d + 2 + S`` for the fewest scratch slots ``S`` that hold the largest level of some feature's chain
    of requirements; found in one pass over the ``F`` features (no plan is built), under the same size limit
    as :func:`bcd_schedule`.
    """
    dim = positive_int("dim", dim)
    degree = integer("degree", degree, minimum=1, maximum=MAX_PLAN_DEGREE)
    kind = choice("kind", kind, FEATURE_KINDS)
    size_limit(
        f"the feature space of degree = {degree} in dim = {dim}",
        n_features(dim, degree),
        limit=MAX_PLAN_FEATURES,
        what="features",
    )
    return dim + 2 + _scratch_needed(feature_index_tuples(dim, degree), kind)
