"""GLU feed-forward layers and the LSA+GLU transformer block (chapter 5).

Token layout
------------
Every token is a column (NumPy construction) or a row (torch modules) of width ``D = d + c + F + 1``::

    e = [ x (d) ; 1 (c = 1 if constant else 0) ; scratch (F) ; y (1) ]

Context tokens carry ``(x_i, y_i)`` with an empty (zero) scratch; the query token (the last one) carries
``x_q`` and ``y = 0``. The constant-1 coordinate lets a GLU write ``(x_j + 1)(x_j − 1) = x_j² − 1`` and
erase scratch (chapter 6).

Layers
------
- GLU feed-forward (bilinear, per token): ``e ← e + W_3 [(W_1 e) ⊙ (W_2 e)]`` with ``W_1, W_2 (H, D)`` and
  ``W_3 (D, H)``.
- Linear self-attention (chapter 2): ``Z ← Z + (1/N) W^{PV} Z M Zᵀ W^{KQ} Z`` with
  ``M = diag(I_N, 0)`` (the query is never a key or value).
- The prediction is read with a minus sign from the query's ``y`` slot: ``ŷ = −Z[y, query]``, von Oswald et
  al.'s convention, by :func:`icl_book.attention.layers.readout` (as chapter 2's ``lsa_predict``).

The explicit construction (:func:`glu_lsa_block_weights`) writes ``q(x)`` with ``q_jj = x_j²`` and
``q_jk = √2 x_j x_k`` (``j < k``) into the scratch, so ``q(x)·q(x') = (x·x')²``; the LSA with
``W^{KQ} = diag(I, 0)`` over ``φ = [x; q(x)]`` and ``−η`` on the ``y`` slot then predicts
``ŷ = (η/N) Σ_i y_i k(x_i, x_q)`` with ``k(x, x') = x·x' + (x·x')²``: one GD step on kernel regression.

One job: chapter 5's LSA+GLU block, as the construction's exact weights and as the torch modules
trained against them (:meth:`TransformerBlock.from_weights` loads the construction); both read the
same token layout (:func:`glu_token_layout`) and weight checks.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from .._declare import Array, Flag, Free, Instance, Integer, Interval, Options, OrNone, declare
from .._validate import (
    as_array,
    as_tensor,
    check_prompt_shapes,
    finite_float,
    flag,
    nonnegative_float,
    nonnegative_int,
    positive_int,
    size_limit,
)
from ..features import feature_map
from . import layers
from ._params import (
    _CHECKED,
    check_generator,
    initial_parameter,
    prompt_tensors,
)
from .lsa import _lsa_update, _query_readout

__all__ = [
    "GLULSABlockWeights",
    "quadratic_feature_pairs",
    "quadratic_features",
    "glu_token_layout",
    "TokenLayout",
    "glu_lsa_block_weights",
    "glu_lsa_block_forward",
    "glu_lsa_block_predict",
    "glu_embed_prompts",
    "glu_update",
    "GLUFeedForward",
    "TransformerBlock",
]

_FEATURES = ("kernel", "hermite")


class GLULSABlockWeights(NamedTuple):
    """Weights of one LSA+GLU block, NumPy float64 arrays (token layout in the module docstring).

    Attributes
    ----------
    w1, w2 : (H, D)
        GLU gate and value projections.
    w3 : (D, H)
        GLU output projection.
    w_kq : (D, D)
        Merged key-query matrix of the LSA.
    w_pv : (D, D)
        Merged projection-value matrix of the LSA.
    dim : int
        Input dimension ``d`` (fixes where the constant, scratch and ``y`` slots are).
    constant : bool
        Whether tokens carry the constant-1 coordinate.
    """

    w1: np.ndarray
    w2: np.ndarray
    w3: np.ndarray
    w_kq: np.ndarray
    w_pv: np.ndarray
    dim: int
    constant: bool


@declare(
    dim=Integer(1, None),
)
def quadratic_feature_pairs(dim: int) -> list[tuple[int, int]]:
    """The index pairs ``(j, k)``, ``j <= k``, of the quadratic features, in the book's order.

    ``[(0, 0), (0, 1), …, (0, d−1), (1, 1), …, (d−1, d−1)]``: ``d(d+1)/2`` pairs.
    """
    dim = positive_int("dim", dim)
    size_limit("dim", dim * (dim + 1) // 2, what="pairs")
    return [(j, k) for j in range(dim) for k in range(j, dim)]


@declare(
    x=Array(),
    whitened=Flag(),
)
def quadratic_features(x, *, whitened: bool = False) -> np.ndarray:
    """Quadratic features of ``x`` (shape ``(..., d)``), shape ``(..., d(d+1)/2)``, in pair order.

    ``whitened=False``: ``q_jj = x_j²``, ``q_jk = √2 x_j x_k`` (``j < k``), so ``q(x)·q(x') = (x·x')²``.
    ``whitened=True``: the Hermite-orthonormal features ``(x_j² − 1)/√2`` and ``x_j x_k`` (``j < k``),
    whose covariance under ``x ~ N(0, I_d)`` is the identity (chapter 1: ``He_2(z)/√2!``).
    """
    whitened = flag("whitened", whitened)
    x = as_array("x", x)
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"x must have shape (..., d) with d >= 1, got {x.shape}")
    # The degree-2 part of the book's feature map (icl_book.features), whose pair order is
    # quadratic_feature_pairs: orthonormal Hermite features, or monomials scaled so that
    # q(x)·q(x') = (x·x')².
    return feature_map(x, 2, kind="hermite" if whitened else "monomial")[..., x.shape[-1] :]


class TokenLayout(NamedTuple):
    """Where each part of a token sits (:func:`glu_token_layout`): slices of the coordinates and the width.

    ``x`` the input, ``const`` the constant coordinate (an empty slice without one), ``scratch`` the GLU's
    write slots, ``y`` the label, and ``embed_dim`` the token width ``D`` (as the torch modules call it).
    """

    x: slice
    const: slice
    scratch: slice
    y: slice
    embed_dim: int


@declare(
    dim=Integer(1, None),
    n_scratch=Integer(0, None),
    constant=Flag(),
)
def glu_token_layout(dim: int, n_scratch: int, *, constant: bool = True) -> TokenLayout:
    """The token layout ``[x; 1; scratch; y]`` of width ``D = dim + constant + n_scratch + 1``.

    ``const`` is an empty slice when ``constant`` is ``False``.
    """
    dim = positive_int("dim", dim)
    n_scratch = nonnegative_int("n_scratch", n_scratch)
    c = 1 if flag("constant", constant) else 0
    return TokenLayout(
        x=slice(0, dim),
        const=slice(dim, dim + c),
        scratch=slice(dim + c, dim + c + n_scratch),
        y=slice(dim + c + n_scratch, dim + c + n_scratch + 1),
        embed_dim=dim + c + n_scratch + 1,
    )


@declare(
    dim=Integer(1, None),
    eta=Interval(),
    features=Options(_FEATURES),
)
def glu_lsa_block_weights(dim: int, eta: float, *, features: str = "kernel") -> GLULSABlockWeights:
    """Weights of one LSA+GLU block whose prediction is one GD step on polynomial-kernel regression.

    Parameters
    ----------
    dim
        Input dimension ``d >= 1``. Tokens have width ``D = d + 2 + d(d+1)/2`` (constant coordinate included)
        and the GLU has ``H = d(d+1)/2`` hidden units, one per pair ``j <= k``.
    eta
        GD step size ``η`` (any finite real).
    features
        ``"kernel"`` (default): the GLU writes ``q_jj = x_j²``, ``q_jk = √2 x_j x_k`` and the LSA uses
        ``φ = [x; q(x)]``, so ``ŷ = (η/N) Σ_i y_i k(x_i, x_q)`` with ``k(x, x') = x·x' + (x·x')²``.
        ``"hermite"``: the GLU writes the whitened features ``(x_j+1)(x_j−1)/√2 = (x_j² − 1)/√2`` and
        ``x_j x_k`` (the constant coordinate supplies the ``±1``), and the LSA also uses the constant, so
        ``φ = [1; x; h(x)]`` is the full Hermite-orthonormal basis of degree ``<= 2`` and
        ``k(x, x') = 1 + x·x' + h(x)·h(x')``.

    Returns
    -------
    GLULSABlockWeights
        ``w1, w2 (H, D)``, ``w3 (D, H)``, ``w_kq, w_pv (D, D)``; ``W^{KQ} = diag(I, 0)`` over the feature
        slots and ``W^{PV}`` is zero except ``−η`` at the ``(y, y)`` entry.
    """
    dim = positive_int("dim", dim)
    # D = d + 2 + d(d+1)/2: the two (D, D) matrices, refused before any pair is enumerated
    size_limit("dim", 2 * (dim + 2 + dim * (dim + 1) // 2) ** 2, what="weight entries")
    eta = finite_float("eta", eta)
    if features not in _FEATURES:
        raise ValueError(f"features must be one of {_FEATURES}, got {features!r}")
    pairs = quadratic_feature_pairs(dim)
    n_feat = len(pairs)
    lay = glu_token_layout(dim, n_feat, constant=True)
    big_d = lay.embed_dim
    one = lay.const.start
    s0 = lay.scratch.start
    w1 = np.zeros((n_feat, big_d))
    w2 = np.zeros((n_feat, big_d))
    w3 = np.zeros((big_d, n_feat))
    for h, (j, k) in enumerate(pairs):
        if features == "kernel":
            w1[h, j] = 1.0
            w2[h, k] = 1.0
            w3[s0 + h, h] = 1.0 if j == k else np.sqrt(2.0)
        elif j == k:  # (x_j + 1)(x_j - 1) / sqrt(2) = He_2(x_j) / sqrt(2)
            w1[h, j], w1[h, one] = 1.0, 1.0
            w2[h, j], w2[h, one] = 1.0, -1.0
            w3[s0 + h, h] = 1.0 / np.sqrt(2.0)
        else:
            w1[h, j] = 1.0
            w2[h, k] = 1.0
            w3[s0 + h, h] = 1.0
    w_kq = np.zeros((big_d, big_d))
    idx = [*range(dim), *range(s0, s0 + n_feat), *([one] if features == "hermite" else [])]
    w_kq[idx, idx] = 1.0
    w_pv = np.zeros((big_d, big_d))
    w_pv[-1, -1] = -eta
    return GLULSABlockWeights(w1, w2, w3, w_kq, w_pv, dim, True)


def _check_weights(weights) -> GLULSABlockWeights:
    if not isinstance(weights, GLULSABlockWeights):
        raise TypeError(
            "weights must be a GLULSABlockWeights (from glu_lsa_block_weights), "
            f"got {type(weights).__name__}"
        )
    names = ("weights.w1", "weights.w2", "weights.w3", "weights.w_kq", "weights.w_pv")
    w1, w2, w3, w_kq, w_pv = (as_array(n, w) for n, w in zip(names, weights[:5], strict=True))
    big_d = w_kq.shape[0] if w_kq.ndim == 2 else -1
    hidden = w1.shape[0] if w1.ndim == 2 else -1
    if w_kq.shape != (big_d, big_d) or w_pv.shape != (big_d, big_d):
        raise ValueError(
            f"weights.w_kq and w_pv must be square (D, D), got {w_kq.shape}, {w_pv.shape}"
        )
    if w1.shape != (hidden, big_d) or w2.shape != (hidden, big_d) or w3.shape != (big_d, hidden):
        raise ValueError(
            f"weights.w1, w2 must be (H, D) and w3 (D, H) with D = {big_d}, "
            f"got {w1.shape}, {w2.shape}, {w3.shape}"
        )
    dim = positive_int("weights.dim", weights.dim)
    if big_d < dim + int(flag("weights.constant", weights.constant)) + 1:
        raise ValueError(f"token width D = {big_d} is too small for dim = {dim}")
    constant = flag("weights.constant", weights.constant)
    return GLULSABlockWeights(w1, w2, w3, w_kq, w_pv, dim, constant)


@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    n_scratch=Integer(0, None),
    constant=Flag(),
)
def glu_embed_prompts(xs, ys, x_query, n_scratch: int, *, constant: bool = True) -> np.ndarray:
    """Token matrices ``Z`` of a batch of prompts, shape ``(B, D, N+1)`` (tokens are columns).

    Column ``i < N`` is ``[x_i; 1; 0; y_i]``, the last column is ``[x_q; 1; 0; 0]`` (no ``1`` when
    ``constant=False``): the column view of :func:`icl_book.attention.layers.embed`.
    """
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    glu_token_layout(xs.shape[2], n_scratch, constant=constant)  # validates n_scratch, constant
    z = layers.embed(xs, ys, x_query, n_scratch=n_scratch, constant=constant)  # size checked
    return z.swapaxes(-1, -2)


@declare(
    tokens=Array(ndim=3),
    weights=Instance((GLULSABlockWeights,)),
)
def glu_lsa_block_forward(tokens, weights: GLULSABlockWeights) -> np.ndarray:
    """Run one block (GLU on every token, then LSA) on token matrices ``(B, D, N+1)``; same shape out.

    The last column is the query: ``M = diag(I_N, 0)`` keeps it out of the keys and values.
    """
    w1, w2, w3, w_kq, w_pv, _, _ = _check_weights(weights)
    z = as_array("tokens", tokens)
    if z.ndim != 3 or z.shape[1] != w_kq.shape[0] or z.shape[2] < 2:
        raise ValueError(
            f"tokens must have shape (B, D = {w_kq.shape[0]}, N+1 >= 2), got {z.shape}"
        )
    return _lsa_update(_glu_update(z, w1, w2, w3), w_kq, w_pv)


@declare(
    z=Array(ndim=3),
    w1=Array(ndim=2),
    w2=Array(ndim=2),
    w3=Array(ndim=2),
)
def glu_update(z: np.ndarray, w1: np.ndarray, w2: np.ndarray, w3: np.ndarray) -> np.ndarray:
    """The bilinear GLU on every column token of ``z (B, D, N+1)``: ``z + W_3 [(W_1 z) ⊙ (W_2 z)]``.

    The column view of :func:`icl_book.attention.layers.glu` (the one implementation, which
    :class:`GLUFeedForward` runs too). ``w1, w2 (H, D)``, ``w3 (D, H)``.
    """
    z = as_array("z", z, 3)
    if min(z.shape) < 1:
        raise ValueError(f"z must have shape (B, D, N+1) with B, D, N+1 >= 1, got {z.shape}")
    d = z.shape[1]
    w1 = as_array("w1", w1, 2)
    h = w1.shape[0]
    if w1.shape != (h, d) or h < 1:
        raise ValueError(f"w1 must have shape (H, D) = (H, {d}) with H >= 1, got {w1.shape}")
    w2, w3 = as_array("w2", w2, 2), as_array("w3", w3, 2)
    for name, w, shape in (("w2", w2, (h, d)), ("w3", w3, (d, h))):
        if w.shape != shape:
            raise ValueError(
                f"{name} must have shape {shape} to match w1 {w1.shape}, got {w.shape}"
            )
    return _glu_update(z, w1, w2, w3)


def _glu_update(z, w1, w2, w3):
    """:func:`glu_update` without validation (its callers validate)."""
    return layers._glu(z.swapaxes(-1, -2), w1, w2, w3).swapaxes(-1, -2)


@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    weights=Instance((GLULSABlockWeights,)),
)
def glu_lsa_block_predict(xs, ys, x_query, weights: GLULSABlockWeights) -> np.ndarray:
    """Prediction of one LSA+GLU block, computed by running it on the tokens: ``ŷ = −Z'[y, query]``; ``(B,)``.

    Parameters
    ----------
    xs, ys, x_query
        ``(B, N, d)``, ``(B, N)``, ``(B, d)``; ``d`` must equal ``weights.dim``.
    weights
        A :class:`GLULSABlockWeights` (e.g. from :func:`glu_lsa_block_weights`).
    """
    weights = _check_weights(weights)
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    if xs.shape[2] != weights.dim:
        raise ValueError(f"xs must have d = weights.dim = {weights.dim}, got d = {xs.shape[2]}")
    n_scratch = weights.w_kq.shape[0] - weights.dim - int(weights.constant) - 1
    z = glu_embed_prompts(xs, ys, x_query, n_scratch, constant=weights.constant)
    return layers._readout(glu_lsa_block_forward(z, weights).swapaxes(-1, -2))


# ---------------------------------------------------------------------------------------------------
# torch modules (tokens are rows: shape (B, T, D), the last token is the query)
# ---------------------------------------------------------------------------------------------------


_param = initial_parameter


class GLUFeedForward(nn.Module):
    """Bilinear GLU feed-forward layer with a residual connection: ``e ← e + W_3 [(W_1 e) ⊙ (W_2 e)]``.

    Acts on each token independently; input and output shape ``(..., D)``.

    Parameters
    ----------
    embed_dim
        Token width ``D >= 1``.
    hidden_dim
        Number of hidden units ``H >= 1``.
    init_scale
        Standard deviation of the random initial weights (``1/√D`` when ``None``).
    generator
        ``torch.Generator`` for the initial weights (the only source of randomness).
    dtype, device
        Of the parameters (``torch.float64`` on the CPU by default).

    Attributes
    ----------
    w1, w2 : Parameter (H, D)
    w3 : Parameter (D, H)
    """

    @declare(
        embed_dim=Integer(1, None),
        hidden_dim=Integer(0, None),
        init_scale=OrNone(Interval(0.0, math.inf)),
        generator=Free("a torch.Generator (required when init_scale > 0), checked by _params"),
        dtype=Free("a floating torch.dtype, checked by _params.check_dtype"),
        device=Free("a torch.device or its name, checked by _params.check_device"),
    )
    def __init__(
        self,
        embed_dim: int,
        hidden_dim: int,
        *,
        init_scale: float | None = None,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
        device=None,
    ):
        super().__init__()
        self.embed_dim = positive_int("embed_dim", embed_dim)
        self.hidden_dim = positive_int("hidden_dim", hidden_dim)
        size_limit("embed_dim * hidden_dim", 3 * self.embed_dim * self.hidden_dim, what="weights")
        scale = (
            1 / np.sqrt(self.embed_dim)
            if init_scale is None
            else nonnegative_float("init_scale", init_scale)
        )
        check_generator(generator, scale)
        self.w1 = _param((self.hidden_dim, self.embed_dim), scale, generator, dtype, device)
        self.w2 = _param((self.hidden_dim, self.embed_dim), scale, generator, dtype, device)
        self.w3 = _param((self.embed_dim, self.hidden_dim), scale, generator, dtype, device)

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        """``e + ((e W_1ᵀ) ⊙ (e W_2ᵀ)) W_3ᵀ`` for tokens ``e`` of shape ``(..., D)`` (a tensor or a NumPy
        array, converted to the layer's dtype and device)."""
        if not _CHECKED.get():
            p = self.w1
            e = as_tensor("e", e, dtype=p.dtype, device=p.device)
            if e.ndim < 1:
                raise ValueError(f"e must have shape (..., D = {self.embed_dim}), got a scalar")
        if e.shape[-1] != self.embed_dim:
            raise ValueError(
                f"e must have last dimension D = {self.embed_dim}, got shape {tuple(e.shape)}"
            )
        return layers._glu(e, self.w1, self.w2, self.w3)

    @torch.no_grad()
    def load_numpy(self, w1, w2, w3) -> GLUFeedForward:
        """Copy NumPy weights ``w1, w2 (H, D)``, ``w3 (D, H)`` into the layer; returns ``self``."""
        for name, value in (("w1", w1), ("w2", w2), ("w3", w3)):
            p = getattr(self, name)
            arr = as_array(name, value)  # real, finite: NaN weights are refused by name
            if arr.shape != tuple(p.shape):
                raise ValueError(f"{name} must have shape {tuple(p.shape)}, got {arr.shape}")
            p.copy_(torch.from_numpy(arr).to(dtype=p.dtype, device=p.device))
        return self


class TransformerBlock(nn.Module):
    """One LSA+GLU block: a GLU feed-forward layer on every token, then linear self-attention.

    Tokens are rows ``[x (d); 1 (if constant); scratch (n_scratch); y]`` of width
    ``D = d + constant + n_scratch + 1``; the last token is the query (``y = 0``) and is never a key or value.
    The model follows the book's interface ``model(xs, ys, x_query) -> (B,)`` (so :mod:`icl_book.train` can
    train it) and reads the prediction with a minus sign from the query's ``y`` slot, as chapter 2's
    ``lsa_predict``. Deep stacks (chapter 6) call :meth:`forward_tokens` block after block.

    Parameters
    ----------
    dim
        Input dimension ``d >= 1``.
    n_scratch
        Number of scratch coordinates (``>= 0``).
    hidden_dim
        GLU hidden width ``H``; ``0`` means no feed-forward layer (a plain LSA).
    constant
        Whether tokens carry a constant-1 coordinate.
    init_scale
        Standard deviation of the random initial weights (``1/√D`` when ``None``).
    generator, dtype, device
        As in :class:`GLUFeedForward`.

    Attributes
    ----------
    glu : GLUFeedForward or None
    w_kq, w_pv : Parameter (D, D)
    """

    @declare(
        dim=Integer(1, None),
        n_scratch=Integer(0, None),
        hidden_dim=Integer(0, None),
        constant=Flag(),
        init_scale=OrNone(Interval(0.0, math.inf)),
        generator=Free("a torch.Generator (required when init_scale > 0), checked by _params"),
        dtype=Free("a floating torch.dtype, checked by _params.check_dtype"),
        device=Free("a torch.device or its name, checked by _params.check_device"),
    )
    def __init__(
        self,
        dim: int,
        n_scratch: int,
        hidden_dim: int,
        *,
        constant: bool = True,
        init_scale: float | None = None,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
        device=None,
    ):
        super().__init__()
        self.dim = positive_int("dim", dim)
        self.n_scratch = nonnegative_int("n_scratch", n_scratch)
        hidden_dim = nonnegative_int("hidden_dim", hidden_dim)
        self.constant = flag("constant", constant)
        self.embed_dim = glu_token_layout(
            self.dim, self.n_scratch, constant=self.constant
        ).embed_dim
        size_limit(
            "dim + n_scratch (the token width D) with hidden_dim",
            self.embed_dim * (2 * self.embed_dim + 3 * hidden_dim),
            what="weights",
        )
        scale = (
            1 / np.sqrt(self.embed_dim)
            if init_scale is None
            else nonnegative_float("init_scale", init_scale)
        )
        check_generator(generator, scale)
        self.glu = (
            GLUFeedForward(
                self.embed_dim,
                hidden_dim,
                init_scale=scale,
                generator=generator,
                dtype=dtype,
                device=device,
            )
            if hidden_dim > 0
            else None
        )
        self.w_kq = _param((self.embed_dim, self.embed_dim), scale, generator, dtype, device)
        self.w_pv = _param((self.embed_dim, self.embed_dim), scale, generator, dtype, device)

    def embed(self, xs, ys, x_query, *, scratch: bool = True) -> torch.Tensor:
        """Row tokens ``(B, N+1, D)`` of a batch of prompts (NumPy arrays or tensors), in the block's dtype.

        ``scratch=False`` leaves out the (zero) scratch coordinates: ``(B, N+1, d + c + 1)``.
        """
        p = self.w_kq
        xs, ys, x_query = prompt_tensors(
            xs, ys, x_query, dim=self.dim, dtype=p.dtype, device=p.device
        )
        return layers._embed(
            xs, ys, x_query, n_scratch=self.n_scratch if scratch else 0, constant=self.constant
        )

    def forward_tokens(self, z: torch.Tensor, n_queries: int = 1) -> torch.Tensor:
        """Apply the block to row tokens ``z (B, T, D)`` (the last ``n_queries`` are queries)."""
        if z.shape[-1] != self.embed_dim:
            raise ValueError(
                f"z must have last dimension D = {self.embed_dim}, got {tuple(z.shape)}"
            )
        if z.shape[-2] - n_queries < 1:
            raise ValueError(f"z must hold at least one context token besides {n_queries} queries")
        if self.glu is not None:
            z = self.glu(z)
        return layers._lsa(z, self.w_kq, self.w_pv, n_queries=n_queries)

    def forward(self, xs, ys, x_query) -> torch.Tensor:
        """Predictions ``ŷ = −(query's y slot after the block)``, shape ``(B,)``.

        The same number as :meth:`forward_tokens` followed by the readout, computed in the order that
        costs least (training spends nearly all its time here): the scratch of a fresh prompt is zero,
        so the GLU's hidden units read only ``(x, 1, y)``; and the LSA needs each context token after
        the GLU only through two numbers, its score ``e_iᵀ W^{KQ} e_q`` and its value ``W^{PV}_y · e_i``,
        which are linear in the hidden units ``h_i``: ``W_3 h_i`` is never formed for context tokens.
        """
        if self.glu is None:
            z = self.embed(xs, ys, x_query)
            ctx, zq = z[:, :-1, :], z[:, -1, :]
            return layers._prediction(zq[:, -1] + _query_readout(ctx, zq, self.w_kq, self.w_pv[-1]))
        zk = self.embed(xs, ys, x_query, scratch=False)  # (B, T, d + c + 1): the non-zero part
        s0 = self.dim + int(self.constant)
        keep = [*range(s0), self.embed_dim - 1]  # where those coordinates sit in a token
        w1, w2, w3 = self.glu.w1, self.glu.w2, self.glu.w3
        h = (zk @ w1[:, keep].T) * (zk @ w2[:, keep].T)  # (B, T, H): the GLU's hidden units
        e_q = h[:, -1, :] @ w3.T  # (B, D): the query after the GLU
        e_q = e_q.index_add(1, torch.tensor(keep, device=e_q.device), zk[:, -1, :])
        a = e_q @ self.w_kq.T  # score of context token i: e_i · a
        b = self.w_pv[-1]  # value of context token i: e_i · b
        ctx_z, ctx_h = zk[:, :-1, :], h[:, :-1, :]
        scores = ctx_z @ a[:, keep, None] + ctx_h @ (a @ w3)[:, :, None]  # (B, N, 1)
        values = ctx_z @ b[keep] + ctx_h @ (b @ w3)  # (B, N)
        return layers._prediction(e_q[:, -1] + (values * scores[..., 0]).mean(dim=1))

    @classmethod
    def from_weights(
        cls, weights: GLULSABlockWeights, *, dtype: torch.dtype = torch.float64, device=None
    ):
        """A block holding NumPy :class:`GLULSABlockWeights` (e.g. the exact construction)."""
        w = _check_weights(weights)
        n_scratch = w.w_kq.shape[0] - w.dim - int(w.constant) - 1
        block = cls(
            w.dim,
            n_scratch,
            w.w1.shape[0],
            constant=w.constant,
            init_scale=0.0,
            dtype=dtype,
            device=device,
        )
        block.glu.load_numpy(w.w1, w.w2, w.w3)
        with torch.no_grad():
            block.w_kq.copy_(torch.from_numpy(w.w_kq).to(block.w_kq))
            block.w_pv.copy_(torch.from_numpy(w.w_pv).to(block.w_pv))
        return block
