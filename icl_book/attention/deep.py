"""Deep LSA+GLU stacks: cyclic block-coordinate descent in a feature space no single block can hold (chapter 6).

Token layout (chapter 5's, :func:`icl_book.attention.glu.glu_token_layout`): every token has width ``D = width``::

    e = [ x (d) ; 1 ; scratch (S = D − d − 2) ; y ]

Context tokens start as ``[x_i; 1; 0; y_i]``, the query as ``[x_q; 1; 0; 0]``. A layer (block) is a bilinear GLU
on every token, ``e ← e + W_3[(W_1 e) ⊙ (W_2 e)]``, followed by linear self-attention
``Z ← Z + (1/N) W^{PV} Z M Zᵀ W^{KQ} Z``; the prediction is ``ŷ = −Z[y, query]`` after the last layer.

The construction (:func:`deep_bcd_weights`, see chapter 6)
----------------------------------------------------------------
The ``F = C(d+p, p) − 1`` Hermite features of degree ``1..p`` (:mod:`icl_book.features`) are split into blocks
``φ_1, …, φ_B`` that fit in the scratch. Layer ``b``:

1. its GLU *erases* the scratch (the hidden unit ``s_t · 1`` with output weight ``−1``: this is what the constant
   coordinate is for) and *writes* ``φ_b(x)`` on every token. A bilinear unit can multiply two linear functions of
   the token, so it writes degree-1 and degree-2 features from ``[x; 1]`` directly
   (``(x_j + 1)(x_j − 1)/√2 = He_2(x_j)/√2``); a degree-``k >= 3`` feature ``h_{β+e_j}`` is
   ``(x_j h_β − √β_j h_{β−e_j}) / √(β_j + 1)`` and needs its degree-``(k−1)`` parent ``h_β`` in the scratch the
   layer receives. When the previous layer's features do not include that parent, the previous layer also writes
   it as a *carrier* (a scratch coordinate the attention ignores). A layer whose scratch holds only carriers
   (no features) is allowed; its attention does nothing.
2. its LSA, with ``W^{KQ}`` the identity on ``φ_b``'s scratch slots and ``W^{PV} = −η`` at ``(y, y)``, maps every
   token's ``y`` slot ``r`` to ``r − (η/N) Σ_j r_j φ_b(x_j)·φ_b(x)``: the context slots carry the residuals of
   block-coordinate GD and the query slot accumulates ``−ŷ``.

So ``n_cycles`` passes through the ``B`` layers are ``n_cycles`` cycles of block-coordinate GD on
``L(θ) = (1/2N) Σ_i (θᵀφ(x_i) − y_i)²`` — exactly
:func:`icl_book.estimators.block_coordinate_gd_predict` with the construction's ``feature_blocks``.

One job: chapter 6's deep stack, as the construction's exact weights and as the torch modules
trained against them (:class:`LearnedBCD` freezes the construction's feature writers); both read
the same token layout and weight checks. The plan of a cycle is :mod:`icl_book.attention.schedule`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from math import sqrt

import numpy as np
import torch
from torch import nn

from .._declare import (
    Array,
    Cost,
    Flag,
    Free,
    Instance,
    Integer,
    Interval,
    Options,
    OrNone,
    declare,
)
from .._validate import (
    ArgumentTypeError,
    _describe,
    as_array,
    check_prompt_shapes,
    choice,
    flag,
    integer,
    positive_float,
    positive_int,
    size_limit,
)
from ..features import (
    FEATURE_KINDS,
    FeatureBlock,
    recurrence_coefficient,
)
from . import layers
from ._params import inputs_checked, prompt_tensors
from .glu import (
    GLUFeedForward,
    GLULSABlockWeights,
    TransformerBlock,
    _check_weights,
    _glu_update,
    glu_embed_prompts,
)
from .lsa import _lsa_update
from .schedule import MAX_PLAN_DEGREE, bcd_schedule, min_deep_width

__all__ = [
    "DeepBCDWeights",
    "deep_bcd_weights",
    "deep_forward",
    "deep_predict",
    "DeepTransformer",
    "LearnedBCD",
]


# Declared costs, in operations of about 1 ns on one core (icl_book.limits), measured here.
def _deep_bcd_cost(a) -> tuple[float, float]:
    """deep_bcd_weights: about 8 µs per cycle at width 7 (the layers of a cycle are shared, not copied)."""
    w = float(a["width"])
    return float(a["n_cycles"]) * (1e4 + 5.0 * w * w), 0.0


def _deep_transformer_cost(a) -> tuple[float, float]:
    """DeepTransformer: about 0.75 ms per block at width 6 (module construction), and its weights."""
    w = float(a["width"])
    h = 2.0 * w if a["hidden_dim"] is None else float(a["hidden_dim"])
    weights = float(a["depth"]) * w * (2.0 * w + 3.0 * h)
    return float(a["depth"]) * 1e6 + 10.0 * weights, 8.0 * weights


def _learned_bcd_cost(a) -> tuple[float, float]:
    """LearnedBCD: about 50 µs per layer (a step matrix and its parameter)."""
    return float(a["depth"]) * 1e5, 0.0


# ---------------------------------------------------------------------------------------------------
# The weights
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeepBCDWeights:
    """Weights of the block-coordinate-descent stack (:func:`deep_bcd_weights`).

    Attributes
    ----------
    layers
        One :class:`~icl_book.attention.GLULSABlockWeights` per layer (chapter 5's container: ``w1, w2 (H, D)``,
        ``w3 (D, H)``, ``w_kq, w_pv (D, D)``), ``n_cycles · len(schedule)`` of them, in stack order.
    feature_blocks
        The blocks ``φ_1, …, φ_B`` of one cycle, in stack order, as :class:`~icl_book.features.FeatureBlock`
        callables (layers that only write carriers are skipped). Pass them to
        :func:`icl_book.estimators.block_coordinate_gd_predict` to run the same algorithm directly.
    schedule
        :func:`~icl_book.attention.schedule.bcd_schedule`'s plan for one cycle: ``(features,
        carriers)`` index tuples per layer.
    dim, degree, width, eta, n_cycles, kind
        The arguments of :func:`deep_bcd_weights`; ``width`` is the token width ``D``.
    """

    layers: tuple[GLULSABlockWeights, ...]
    feature_blocks: tuple[FeatureBlock, ...]
    schedule: tuple
    dim: int
    degree: int
    width: int
    eta: float
    n_cycles: int
    kind: str

    def __post_init__(self):
        # validation only: the fields are kept as given
        for name, kind in (
            ("layers", GLULSABlockWeights),
            ("feature_blocks", FeatureBlock),
            ("schedule", tuple),
        ):
            value = getattr(self, name)
            if not isinstance(value, (tuple, list)) or not all(isinstance(v, kind) for v in value):
                raise ArgumentTypeError(
                    f"{name} must be a tuple of {kind.__name__} (as deep_bcd_weights builds it), "
                    f"got {_describe(value)}"
                )
        if not self.layers:
            raise ValueError("layers must hold at least one GLULSABlockWeights, got none")
        dim = positive_int("dim", self.dim)
        size_limit("dim", 2 * (dim + 3) ** 2, what="weights")  # width >= dim + 3
        integer("degree", self.degree, minimum=1, maximum=MAX_PLAN_DEGREE)
        width = positive_int("width", self.width, minimum=dim + 3)
        widths = {np.shape(layer.w_kq)[0] if np.ndim(layer.w_kq) else None for layer in self.layers}
        if widths != {width}:
            raise ValueError(
                f"width must be the layers' token width {sorted(widths, key=str)}, got {width}"
            )
        positive_float("eta", self.eta)
        positive_int("n_cycles", self.n_cycles)
        choice("kind", self.kind, FEATURE_KINDS)

    @property
    def depth(self) -> int:
        """Number of layers (blocks) of the stack."""
        return len(self.layers)

    @property
    def n_scratch(self) -> int:
        """Scratch slots per token, ``S = D − d − 2``."""
        return self.width - self.dim - 2


class _GLUWriter:
    """Accumulates the hidden units of one GLU: unit ``(a·e)(b·e)`` with output ``coef`` into one coordinate."""

    def __init__(self, dim: int, width: int):
        self.dim, self.width = dim, width
        self.one = dim
        self.s0 = dim + 1
        self.units: list[tuple[np.ndarray, np.ndarray, int, float]] = []

    def vec(self, **coords) -> np.ndarray:
        v = np.zeros(self.width)
        for idx, val in coords.get("entries", []):
            v[idx] += val
        return v

    def add(self, a_entries, b_entries, out: int, coef: float) -> None:
        self.units.append((self.vec(entries=a_entries), self.vec(entries=b_entries), out, coef))

    def write(self, item, coef: float, out: int, prev_slot: dict, kind: str) -> None:
        """Add units writing ``coef · feature(item)`` into coordinate ``out``.

        Orthonormal kinds use the three-term recurrence ``z p_k = a_{k+1} p_{k+1} + a_k p_{k−1}``
        (:func:`icl_book.features.recurrence_coefficient`): ``p_1 = z/a_1``,
        ``p_2 = (z − a_1)(z + a_1)/(a_1 a_2)`` and, with ``m = α_j``,
        ``h_α = (x_j h_{α−e_j} − a_{m−1} h_{α−2e_j}) / a_m``.
        """
        one = self.one
        if kind == "monomial":
            if len(item) == 1:
                self.add([(item[0], 1.0)], [(one, 1.0)], out, coef)
            elif len(item) == 2:
                j, k = item
                self.add([(j, 1.0)], [(k, 1.0)], out, coef * (1.0 if j == k else sqrt(2.0)))
            else:
                # c_α x^α = (c_α / c_β) x_j (c_β x^β) with c_α² = k!/Π α_i!: the ratio is √(k / α_j).
                j = item[-1]
                src = self.s0 + prev_slot[item[:-1]]
                self.add([(src, 1.0)], [(j, 1.0)], out, coef * sqrt(len(item) / item.count(j)))
            return
        a1, a2 = recurrence_coefficient(kind, 1), recurrence_coefficient(kind, 2)
        if len(item) == 1:
            self.add([(item[0], 1.0)], [(one, 1.0)], out, coef / a1)
        elif len(item) == 2:
            j, k = item
            if j == k:  # (x_j − a_1)(x_j + a_1)/(a_1 a_2); Hermite: He_2(x_j)/√2
                self.add([(j, 1.0), (one, -a1)], [(j, 1.0), (one, a1)], out, coef / (a1 * a2))
            else:
                self.add([(j, 1.0)], [(k, 1.0)], out, coef / (a1 * a1))
        else:
            parent, j = item[:-1], item[-1]
            m = item.count(j)
            src = self.s0 + prev_slot[parent]
            self.add([(src, 1.0)], [(j, 1.0)], out, coef / recurrence_coefficient(kind, m))
            if m >= 2:  # − a_{m−1} h_{α−2e_j} / a_m
                pos = len(parent) - 1 - parent[::-1].index(j)
                gamma = parent[:pos] + parent[pos + 1 :]
                c = -coef * recurrence_coefficient(kind, m - 1) / recurrence_coefficient(kind, m)
                if len(gamma) >= 3:
                    self.add([(self.s0 + prev_slot[gamma], 1.0)], [(one, 1.0)], out, c)
                else:
                    self.write(gamma, c, out, prev_slot, kind)

    def matrices(self):
        h = max(1, len(self.units))
        w1, w2, w3 = np.zeros((h, self.width)), np.zeros((h, self.width)), np.zeros((self.width, h))
        for u, (a, b, out, coef) in enumerate(self.units):
            w1[u], w2[u] = a, b
            w3[out, u] = coef
        return w1, w2, w3


def _layer_weights(dim, width, eta, held, n_features, prev_slot, kind) -> GLULSABlockWeights:
    writer = _GLUWriter(dim, width)
    n_scratch = width - dim - 2
    for t in range(n_scratch):  # erase every scratch slot: s_t ← s_t − s_t · 1
        writer.add([(writer.s0 + t, 1.0)], [(writer.one, 1.0)], writer.s0 + t, -1.0)
    for t, item in enumerate(held):
        writer.write(item, 1.0, writer.s0 + t, prev_slot, kind)
    w1, w2, w3 = writer.matrices()
    w_kq = np.zeros((width, width))
    idx = writer.s0 + np.arange(n_features)
    w_kq[idx, idx] = 1.0
    w_pv = np.zeros((width, width))
    if n_features:
        w_pv[-1, -1] = -eta
    return GLULSABlockWeights(w1, w2, w3, w_kq, w_pv, dim, True)


@declare(
    dim=Integer(1, None),
    degree=Integer(1, None),
    width=Integer(3, None),
    eta=Interval(0.0, math.inf, "neither"),
    n_cycles=Integer(1, None),
    kind=Options(FEATURE_KINDS),
    cost=Cost(_deep_bcd_cost, "n_cycles × (10⁴ + 5 width²)"),
)
def deep_bcd_weights(
    dim: int, degree: int, width: int, eta: float, n_cycles: int = 1, *, kind: str = "hermite"
) -> DeepBCDWeights:
    """Weights of a deep LSA+GLU stack that runs cyclic block-coordinate GD on kernel regression.

    The kernel is that of the ``F = C(d+p, p) − 1`` features of degree ``1..p`` (Hermite-orthonormal by
    default); the stack has ``n_cycles · B`` layers, where ``B`` (the length of
    :func:`~icl_book.attention.schedule.bcd_schedule`'s plan) is about ``F / S`` with
    ``S = width − d − 2`` scratch slots. See the module docstring for the mechanism.

    Parameters
    ----------
    dim
        Input dimension ``d >= 1``.
    degree
        Polynomial degree ``p >= 1``.
    width
        Token width ``D``; at least ``d + 3`` (``x``, the constant, one scratch slot and ``y``), and
        :func:`~icl_book.attention.schedule.min_deep_width` for degrees whose features need more
        than one parent (``p >= 5``).
    eta
        Step size ``η > 0`` of every block's GD step.
    n_cycles
        Passes over the blocks (``>= 1``).
    kind
        ``"hermite"`` (default), ``"legendre"`` or ``"monomial"`` features (:mod:`icl_book.features`).

    Returns
    -------
    DeepBCDWeights
        The layers' weights, the feature blocks of one cycle and the plan.

    Examples
    --------
    >>> w = deep_bcd_weights(2, 3, width=6, eta=0.5)
    >>> # all C(5, 3) − 1 = 9 features, in blocks of <= 2
    >>> w.width, sum(len(b) for b in w.feature_blocks)
    (6, 9)
    """
    dim = positive_int("dim", dim)
    degree = positive_int("degree", degree)
    if kind not in FEATURE_KINDS:
        raise ValueError(f"kind must be one of {FEATURE_KINDS}, got {kind!r}")
    smallest = dim + 3
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < smallest:
        raise ValueError(
            f"width must be an integer >= {smallest} (dim = {dim} inputs, a constant, one scratch slot "
            "and y), "
            f"got {width!r}"
        )
    width = int(width)
    eta = positive_float("eta", eta)
    n_cycles = positive_int("n_cycles", n_cycles)
    n_scratch = width - dim - 2
    try:
        plan = bcd_schedule(dim, degree, n_scratch, kind=kind)
    except ValueError:
        need = min_deep_width(dim, degree, kind=kind)
        raise ValueError(
            f"width must be >= {need} for dim = {dim}, degree = {degree} (a feature and its parents must fit "
            f"in the scratch), got {width}"
        ) from None
    # Five (width x width)-sized matrices per layer, n_cycles * len(plan) layers: refuse before building.
    size_limit(
        "width**2 * n_cycles * layers",
        5 * width * width * len(plan) * n_cycles,
        what="weight entries",
    )
    one_cycle = []
    prev_slot: dict = {}
    for features, carriers in (
        plan * 2
    ):  # the second pass gives the first layer its cyclic predecessor
        held = features + carriers
        one_cycle.append(_layer_weights(dim, width, eta, held, len(features), prev_slot, kind))
        prev_slot = {item: t for t, item in enumerate(held)}
    one_cycle = one_cycle[len(plan) :]
    blocks = tuple(FeatureBlock(dim, f, kind) for f, _ in plan if f)
    return DeepBCDWeights(
        layers=tuple(one_cycle * n_cycles),
        feature_blocks=blocks,
        schedule=tuple(plan),
        dim=dim,
        degree=degree,
        width=width,
        eta=eta,
        n_cycles=n_cycles,
        kind=kind,
    )


def _check_deep_weights(weights) -> DeepBCDWeights:
    if not isinstance(weights, DeepBCDWeights):
        raise TypeError(
            f"weights must be a DeepBCDWeights (from deep_bcd_weights), got {type(weights).__name__}"
        )
    return weights


@declare(
    tokens=Array(ndim=3),
    layers=Free("a sequence of GLULSABlockWeights, each checked in the body"),
)
def deep_forward(tokens, layers) -> np.ndarray:
    """Run the layers (a sequence of ``GLULSABlockWeights``) on token matrices ``(B, D, N+1)``; same shape out."""
    z = as_array("tokens", tokens)
    if z.ndim != 3 or z.shape[2] < 2:
        raise ValueError(f"tokens must have shape (B, D, N+1) with N >= 1, got {z.shape}")
    if not isinstance(layers, (tuple, list)):
        raise ArgumentTypeError(
            f"layers must be a sequence of GLULSABlockWeights, got {type(layers).__name__}"
        )
    for i, layer in enumerate(layers):
        if not isinstance(layer, GLULSABlockWeights):
            raise TypeError(f"layers[{i}] must be a GLULSABlockWeights, got {type(layer).__name__}")
        if layer.w_kq.shape != (z.shape[1], z.shape[1]):
            raise ValueError(
                f"layers[{i}] has width {layer.w_kq.shape[0]}, tokens have D = {z.shape[1]}"
            )
        w1, w2, w3, w_kq, w_pv, _, _ = _check_weights(layer)
        z = _lsa_update(_glu_update(z, w1, w2, w3), w_kq, w_pv)
    return z


@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    weights=Instance((DeepBCDWeights,)),
)
def deep_predict(xs, ys, x_query, weights: DeepBCDWeights) -> np.ndarray:
    """Prediction of the stack, computed by running every layer on the token matrix; shape ``(B,)``.

    Parameters
    ----------
    xs, ys, x_query
        ``(B, N, d)``, ``(B, N)``, ``(B, d)`` with ``d = weights.dim``.
    weights
        A :class:`DeepBCDWeights` from :func:`deep_bcd_weights`.

    Returns
    -------
    numpy.ndarray
        ``ŷ = −Z[y, query]`` after the last layer, ``(B,)``. It equals
        ``block_coordinate_gd_predict(xs, ys, x_query, weights.feature_blocks, weights.eta, weights.n_cycles)``.
    """
    weights = _check_deep_weights(weights)
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    if xs.shape[2] != weights.dim:
        raise ValueError(f"xs must have d = weights.dim = {weights.dim}, got d = {xs.shape[2]}")
    z = glu_embed_prompts(xs, ys, x_query, weights.n_scratch)
    return layers._readout(deep_forward(z, weights.layers).swapaxes(-1, -2))


# ---------------------------------------------------------------------------------------------------
# torch: the unconstrained deep transformer and learned block-coordinate descent
# ---------------------------------------------------------------------------------------------------


class DeepTransformer(nn.Module):
    """A stack of ``depth`` LSA+GLU blocks (chapter 5's :class:`~icl_book.attention.TransformerBlock`), all free.

    Tokens have width ``D = width``: ``[x (d); 1; scratch (width − d − 2); y]``; the model follows the book's
    interface ``model(xs, ys, x_query) -> (B,)`` and is trainable with :func:`icl_book.train.train_in_context`.

    Parameters
    ----------
    dim
        Input dimension ``d >= 1``.
    width
        Token width ``D >= d + 2`` (``d + 2`` leaves no scratch).
    depth
        Number of blocks ``>= 1``.
    hidden_dim
        GLU hidden units per block (default ``2 · width``).
    init_scale
        Standard deviation of the random initial weights (default ``1/√D``).
    zero_init_residual
        If ``True`` (default), every block's residual branches start at zero (``W_3 = 0``, ``W^{PV} = 0``), so the
        untrained stack is the identity map and predicts ``0``; training then grows the branches. With ``False``
        all weights are random, the plain initialisation.
    label_norm
        If ``True``, the context labels are divided by their root mean square ``s`` (per prompt) before the
        stack runs and the prediction is multiplied by ``s``: the model is then homogeneous of degree one in
        the labels, as every regression predictor is. Without it a stack of ``L`` blocks is a polynomial of
        degree up to ``3^L`` in the labels, and a rare prompt with large labels gives a huge prediction
        (chapter 6 measures both). Default ``False`` (the plain transformer).
    output_bound
        ``None`` (default) or ``b > 0``, with ``label_norm`` only: the normalised prediction ``u`` is read out
        as ``b · tanh(u / b)``, so ``|ŷ| <= b · s`` on every prompt. Label normalisation removes the labels'
        scale from the stack, but the stack is still a polynomial of high degree in its inputs, and a rare
        prompt can drive it far outside the range of the labels it was given. A saturating readout bounds that; for ``|u| <= b/5`` it changes
        the prediction by under 1.4 %.
    generator
        ``torch.Generator`` for the initial weights.
    dtype, device
        Of the parameters (float64 on the CPU by default).
    """

    @declare(
        dim=Integer(1, None),
        width=Integer(3, None),
        depth=Integer(1, None),
        hidden_dim=OrNone(Integer(1, None)),
        init_scale=OrNone(Interval(0.0, math.inf)),
        zero_init_residual=Flag(),
        label_norm=Flag(),
        output_bound=OrNone(Interval(0.0, math.inf, "neither")),
        generator=Free("a torch.Generator (required when init_scale > 0), checked by _params"),
        dtype=Free("a floating torch.dtype, checked by _params.check_dtype"),
        device=Free("a torch.device or its name, checked by _params.check_device"),
        cost=Cost(_deep_transformer_cost, "depth × (10⁶ + 10 width (2 width + 3 hidden_dim))"),
    )
    def __init__(
        self,
        dim: int,
        width: int,
        depth: int,
        *,
        hidden_dim: int | None = None,
        init_scale: float | None = None,
        zero_init_residual: bool = True,
        label_norm: bool = False,
        output_bound: float | None = None,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
        device=None,
    ):
        super().__init__()
        self.dim = positive_int("dim", dim)
        size_limit("dim", 2 * (self.dim + 2) ** 2, what="weights")  # width >= dim + 2
        self.width = positive_int("width", width, minimum=self.dim + 2)
        self.depth = positive_int("depth", depth)
        hidden = 2 * self.width if hidden_dim is None else positive_int("hidden_dim", hidden_dim)
        size_limit(
            "width, depth and hidden_dim",
            self.depth * self.width * (2 * self.width + 3 * hidden),
            what="weights",
        )
        zero_init_residual = flag("zero_init_residual", zero_init_residual)
        label_norm = flag("label_norm", label_norm)  # NumPy booleans too
        self.label_norm = label_norm
        if output_bound is not None:
            if not label_norm:
                raise ValueError("output_bound needs label_norm=True (it bounds |y| / s)")
            output_bound = positive_float("output_bound", output_bound)
        self.output_bound = output_bound
        n_scratch = self.width - self.dim - 2
        self.blocks = nn.ModuleList(
            TransformerBlock(
                self.dim,
                n_scratch,
                hidden,
                constant=True,
                init_scale=init_scale,
                generator=generator,
                dtype=dtype,
                device=device,
            )
            for _ in range(self.depth)
        )
        if zero_init_residual:
            with torch.no_grad():
                for blk in self.blocks:
                    blk.glu.w3.zero_()
                    blk.w_pv.zero_()

    @classmethod
    def from_weights(
        cls, weights: DeepBCDWeights, *, dtype: torch.dtype = torch.float64, device=None
    ):
        """The exact construction as a torch stack (each block keeps its own hidden width)."""
        weights = _check_deep_weights(weights)
        model = cls.__new__(cls)
        nn.Module.__init__(model)
        model.dim, model.width = weights.dim, weights.width
        model.blocks = nn.ModuleList(
            TransformerBlock.from_weights(layer, dtype=dtype, device=device)
            for layer in weights.layers
        )
        model.depth = len(model.blocks)
        model.label_norm, model.output_bound = False, None
        return model

    def forward_tokens(self, z: torch.Tensor) -> torch.Tensor:
        """Apply every block to row tokens ``(B, N+1, D)``."""
        for blk in self.blocks:
            z = blk.forward_tokens(z)
        return z

    def _embed(self, xs, ys, x_query) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Validated prompts as row tokens ``(B, N+1, D)``, and the label scale ``s`` ``(B,)``.

        With ``label_norm`` the tokens carry the labels divided by ``s``; without it ``s`` is ``None``.
        """
        p = self.blocks[0].w_kq
        xs, ys, x_query = prompt_tensors(
            xs, ys, x_query, dim=self.dim, dtype=p.dtype, device=p.device
        )
        with inputs_checked():  # validated once here, not again in every block
            if not self.label_norm:
                return self.blocks[0].embed(xs, ys, x_query), None
            scale = torch.sqrt((ys**2).mean(dim=1) + 1e-12)
            return self.blocks[0].embed(xs, ys / scale[:, None], x_query), scale

    def _read(self, z: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
        """The prediction ``(B,)`` from row tokens ``z`` after any block: minus the query's label
        slot, through the saturating bound and times the label scale when the model has them."""
        u = layers._readout(z)
        if scale is None:
            return u
        if self.output_bound is not None:
            u = self.output_bound * torch.tanh(u / self.output_bound)
        return scale * u

    def forward(self, xs, ys, x_query) -> torch.Tensor:
        """Predictions ``ŷ = −(query's y slot after the last block)``, shape ``(B,)``.

        With ``label_norm``: ``ŷ = s · u``, ``u = model(xs, ys / s, x_query)``, ``s = (mean_i y_i² + 1e-12)^{1/2}``;
        with ``output_bound = b`` also: ``ŷ = s · b · tanh(u / b)``.
        """
        z, scale = self._embed(xs, ys, x_query)
        with inputs_checked():
            return self._read(self.forward_tokens(z), scale)

    def _by_block(self, xs, ys, x_query, read) -> torch.Tensor:
        """``read(tokens, scale)`` after every block, in one ``(depth, ...)`` tensor (filled, not
        joined: in this package only ``layers._embed`` puts arrays together)."""
        z, scale = self._embed(xs, ys, x_query)
        out = None
        with inputs_checked():
            for b, blk in enumerate(self.blocks):
                z = blk.forward_tokens(z)
                value = read(z, scale)
                if out is None:
                    out = value.new_empty((self.depth, *value.shape))
                out[b] = value
        return out

    def predictions_by_block(self, xs, ys, x_query) -> torch.Tensor:
        """The running prediction after every block, shape ``(depth, B)``; the last row is :meth:`forward`.

        Row ``b`` (``b = 0, …, depth − 1``) is the model's own readout — minus the query's label slot,
        with the label normalisation and the saturating bound of :meth:`forward` — applied to the
        tokens after block ``b + 1``, as if the stack ended there.

        Parameters
        ----------
        xs, ys, x_query
            ``(B, N, d)``, ``(B, N)``, ``(B, d)``, NumPy arrays or tensors, ``d = dim``.
        """
        return self._by_block(xs, ys, x_query, self._read)

    def query_states_by_block(self, xs, ys, x_query) -> torch.Tensor:
        """The query token after every block (the residual stream a probe reads), ``(depth, B, D)``.

        With ``label_norm`` the stream is that of the normalised labels, the one the blocks compute on.
        Arguments as in :meth:`predictions_by_block`.
        """
        return self._by_block(xs, ys, x_query, lambda z, scale: z[:, -1, :])


class LearnedBCD(nn.Module):
    """Learned block-coordinate descent: the construction's feature writers fixed, each block's step learned.

    Layer ``l`` (``l = 0, …, depth − 1``) is layer ``l mod B`` of the exact construction
    (:func:`deep_bcd_weights` with ``n_cycles = 1``): its GLU weights are frozen, and its LSA has ``W^{PV} = −1``
    at ``(y, y)`` and ``W^{KQ} = Γ_l`` on the slots of its ``m_l`` features, where the ``m_l × m_l`` matrix
    ``Γ_l`` (preconditioner and step size together) is the layer's only trainable parameter. With
    ``Γ_l = η I`` the model is the exact construction; ``depth`` beyond one cycle continues cyclically.

    Each layer then maps the ``y`` slots ``r`` to ``r − (1/N) Σ_j r_j φ_l(x_j)ᵀ Γ_l φ_l(x)``. The GLUs never read
    the ``y`` slots, so the features they write do not depend on the attention layers: the forward pass runs
    the frozen GLUs once (without gradients) to read the features off the scratch, then applies the attention
    updates to the ``y`` slots only — the same numbers as running the full token stack, for a fraction of the
    cost.

    Parameters
    ----------
    dim, degree, width
        As in :func:`deep_bcd_weights`.
    depth
        Number of layers ``>= 1`` (layers that only write carriers count, and have no parameters).
    eta0
        Initial step: ``Γ_l = eta0 · I``.
    kind
        Feature kind of the construction.
    dtype, device
        Of the parameters and buffers.
    """

    @declare(
        dim=Integer(1, None),
        degree=Integer(1, None),
        width=Integer(3, None),
        depth=Integer(1, None),
        eta0=Interval(0.0, math.inf, "neither"),
        kind=Options(FEATURE_KINDS),
        dtype=Free("a floating torch.dtype, checked by _params.check_dtype"),
        device=Free("a torch.device or its name, checked by _params.check_device"),
        cost=Cost(_learned_bcd_cost, "depth × 10⁵"),
    )
    def __init__(
        self,
        dim: int,
        degree: int,
        width: int,
        depth: int,
        *,
        eta0: float = 0.1,
        kind: str = "hermite",
        dtype: torch.dtype = torch.float64,
        device=None,
    ):
        super().__init__()
        eta0 = positive_float("eta0", eta0)
        self.depth = positive_int("depth", depth)
        self.construction = deep_bcd_weights(dim, degree, width, eta0, 1, kind=kind)
        self.dim, self.width = self.construction.dim, self.construction.width
        # one (m, m) step matrix per layer: refused before the layers are built
        m = max(len(f) for f, _ in self.construction.schedule)
        size_limit("depth", self.depth * m * m, what="parameters")
        n_writers = min(self.depth, len(self.construction.layers))
        # The construction's feature writers, frozen: GLU layers whose weights are not trained.
        self.writers = nn.ModuleList()
        for w in self.construction.layers[:n_writers]:
            glu = GLUFeedForward(
                w.w1.shape[1], w.w1.shape[0], init_scale=0.0, dtype=dtype, device=device
            )
            glu.load_numpy(w.w1, w.w2, w.w3).requires_grad_(False)
            self.writers.append(glu)
        self.n_writers = n_writers
        self.n_features = [len(self.construction.schedule[b][0]) for b in range(n_writers)]
        self.gammas = nn.ParameterList(
            nn.Parameter(
                eta0 * torch.eye(self.n_features[layer % n_writers], dtype=dtype, device=device)
            )
            for layer in range(self.depth)
        )

    def features(self, xs, ys, x_query) -> list[torch.Tensor]:
        """The features each writer layer puts in the scratch: ``(B, N+1, m_b)`` per layer of one cycle."""
        s0 = self.dim + 1
        out = []
        ref = self.writers[0].w1
        xs, ys, x_query = prompt_tensors(
            xs, ys, x_query, dim=self.dim, dtype=ref.dtype, device=ref.device
        )
        with torch.no_grad(), inputs_checked():
            # [x; 1; scratch; y = 0]: the GLUs never read y
            z = layers._embed(
                xs,
                torch.zeros_like(ys),
                x_query,
                n_scratch=self.width - self.dim - 2,
                constant=True,
            )
            for b, glu in enumerate(self.writers):
                z = glu(z)
                out.append(z[..., s0 : s0 + self.n_features[b]].clone())
        return out

    def forward(self, xs, ys, x_query) -> torch.Tensor:
        """Predictions ``(B,)`` of the stack."""
        feats = self.features(xs, ys, x_query)
        r = torch.as_tensor(ys, dtype=feats[0].dtype, device=feats[0].device)
        n = r.shape[1]
        steps = (
            (phi[:, :n], phi[:, n], self.gammas[layer])
            for layer, phi in ((t, feats[t % self.n_writers]) for t in range(self.depth))
            if phi.shape[-1] > 0  # a layer that only writes carriers does nothing
        )
        return layers._bcd_steps(r, r.new_zeros(r.shape[0]), steps)[1]
