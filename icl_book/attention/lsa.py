"""Linear self-attention (LSA) and its one-step gradient-descent construction (chapter 2).

Tokens and layer
----------------
A prompt ``(x_1, y_1, …, x_N, y_N, x_q)`` is the token matrix

``Z = [[x_1 … x_N, x_q], [y_1 … y_N, 0]] ∈ R^{(d+1)×(N+1)}``

(one column per token, the query's label slot empty), and one LSA layer maps it to

``LSA(Z) = Z + (1/N) W^{PV} Z M Zᵀ W^{KQ} Z``,  ``M = diag(I_N, 0)``:

the mask ``M`` keeps the query out of the keys and values. ``W^{KQ} = W_Kᵀ W_Q`` and ``W^{PV} = W_P W_V`` are
the merged key-query and projection-value matrices, both ``(d+1)×(d+1)``.

Sign convention
---------------
As in von Oswald et al. (2023), the model's prediction is *minus* the bottom-right entry,
``ŷ = −[LSA(Z)]_{d+1, N+1}``, and the GD construction puts ``−η`` in ``W^{PV}``:

``W^{KQ} = [[Γᵀ, 0], [0, 0]]``, ``W^{PV} = [[0, 0], [0, −η]]``  ⇒  ``ŷ = x_qᵀ Γ (η/N) Σ_i y_i x_i``,

one (preconditioned) GD step from ``w = 0`` on ``L(w) = (1/2N) Σ_i (wᵀx_i − y_i)²``. With this convention
the preconditioner implemented by any weights of that shape is ``Γ = −W^{PV}_{d+1,d+1} · (W^{KQ}_{1:d,1:d})ᵀ``
(see :meth:`LinearSelfAttention.preconditioner`). The transpose matters only for a non-symmetric ``Γ``: the
key-query score of token ``i`` is ``z_iᵀ W^{KQ} z_q = x_iᵀ Γᵀ x_q = x_qᵀ Γ x_i``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from .._declare import Array, Free, Integer, Interval, OrNone, declare
from .._validate import (
    as_array,
    as_tensor,
    check_prompt_shapes,
    finite_float,
    positive_int,
    size_limit,
    square_matrix,
)
from . import layers
from ._params import initial_parameter, prompt_tensors

__all__ = [
    "token_matrix",
    "lsa_forward",
    "LSAWeights",
    "gd_lsa_weights",
    "lsa_predict",
    "LinearSelfAttention",
    "lsa_update",
    "lsa_query_readout",
]


@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
)
def token_matrix(xs, ys, x_query) -> np.ndarray:
    """Stack prompts into token matrices ``Z``; shape ``(B, d+1, N+1)``.

    Column ``i < N`` is ``(x_i, y_i)``; the last column is the query ``(x_q, 0)``: the column view of
    :func:`icl_book.attention.layers.embed`.

    Parameters
    ----------
    xs, ys, x_query
        ``(B, N, d)``, ``(B, N)``, ``(B, d)``.
    """
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    return layers._embed(xs, ys, x_query).swapaxes(1, 2)


def _weights(w_kq, w_pv, dim: int) -> tuple[np.ndarray, np.ndarray]:
    return square_matrix("w_kq", w_kq, dim + 1), square_matrix("w_pv", w_pv, dim + 1)


@declare(
    Z=Array(),
    w_kq=Array(ndim=2),
    w_pv=Array(ndim=2),
)
def lsa_forward(Z, w_kq, w_pv) -> np.ndarray:
    """One LSA layer ``LSA(Z) = Z + (1/N) W^{PV} Z M Zᵀ W^{KQ} Z`` with ``M = diag(I_N, 0)``.

    Parameters
    ----------
    Z
        ``(B, d+1, N+1)`` token matrices (see :func:`token_matrix`), or one ``(d+1, N+1)`` matrix.
    w_kq, w_pv
        ``(d+1, d+1)`` weights.

    Returns
    -------
    numpy.ndarray
        ``LSA(Z)``, same shape as ``Z``.
    """
    Z = as_array("Z", Z)  # before any conversion: bool, complex, string and NaN refused
    single = Z.ndim == 2
    if single:
        Z = Z[None]
    if Z.ndim != 3 or Z.shape[1] < 2 or Z.shape[2] < 2:
        raise ValueError(
            f"Z must have shape (B, d+1, N+1) or (d+1, N+1) with d, N >= 1, got {Z.shape}"
        )
    w_kq, w_pv = _weights(w_kq, w_pv, Z.shape[1] - 1)
    out = _masked_formula(Z, w_kq, w_pv)
    return out[0] if single else out


def _masked_formula(Z, w_kq, w_pv):
    """The masked formula token by token, written to be read, not to be fast.

    Column ``j`` of ``(1/N) W^{PV} Z M Zᵀ W^{KQ} Z`` is ``(1/N) Σ_{i ≤ N} W^{PV} z_i (z_iᵀ W^{KQ} z_j)``:
    every token, the query included, receives the value ``W^{PV} z_i`` of each context token ``z_i``
    weighted by its score; ``M = diag(I_N, 0)`` is the sum stopping before the query. This shares no
    code with :func:`icl_book.attention.layers.lsa`, which ``tests/test_layers.py`` checks against it.
    """
    # the same sums in the same order whatever the caller's memory layout
    Z = np.ascontiguousarray(Z)
    n = Z.shape[2] - 1
    out = Z.copy()
    for b in range(Z.shape[0]):
        for j in range(n + 1):
            z_j = Z[b, :, j]
            for i in range(n):  # the context tokens only: the mask M
                z_i = Z[b, :, i]
                out[b, :, j] += (w_pv @ z_i) * (z_i @ w_kq @ z_j) / n
    return out


@declare(
    z=Array(ndim=3),
    w_kq=Array(ndim=2),
    w_pv=Array(ndim=2),
)
def lsa_update(z: np.ndarray, w_kq: np.ndarray, w_pv: np.ndarray) -> np.ndarray:
    """The LSA update on column tokens ``z (B, D, N+1)``: ``z + (1/N) W^{PV} Z M Zᵀ W^{KQ} z``.

    The column-token view of :func:`icl_book.attention.layers.lsa` (the one implementation of the layer,
    which the torch modules run too); the last column is the query, which ``M = diag(I_N, 0)`` keeps out
    of the keys and values. ``w_kq, w_pv (D, D)``.
    """
    z = as_array("z", z, 3)
    if z.shape[1] < 1 or z.shape[2] < 2:
        raise ValueError(f"z must have shape (B, D, N+1) with D >= 1, N >= 1, got {z.shape}")
    w_kq, w_pv = _weights(w_kq, w_pv, z.shape[1] - 1)
    return _lsa_update(z, w_kq, w_pv)


def _lsa_update(z, w_kq, w_pv):
    """:func:`lsa_update` without validation (its callers validate)."""
    return layers._lsa(z.swapaxes(-1, -2), w_kq, w_pv).swapaxes(-1, -2)


@declare(
    ctx=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    z_query=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    w_kq=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    w_pv_y=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
)
def lsa_query_readout(ctx, z_query, w_kq, w_pv_y):
    """``(1/N) Σ_i (w_pv_y · z_i)(z_iᵀ W^{KQ} z_q)`` for torch row tokens: the query's label slot.

    ``ctx (B, N, D)`` are the context tokens, ``z_query (B, D)`` the query token and ``w_pv_y (D,)``
    the label row of ``W^{PV}``: the label entry of :func:`icl_book.attention.layers.lsa`'s update of the
    query alone, evaluated in ``O(B N D)`` without forming ``C`` (:class:`LinearSelfAttention` uses it;
    ``tests/test_lsa.py`` checks it against the layer). NumPy arrays are read as float64 tensors.
    """
    like = ctx if isinstance(ctx, torch.Tensor) and ctx.is_floating_point() else None
    kind = dict(
        dtype=torch.float64 if like is None else like.dtype,
        device="cpu" if like is None else like.device,
    )
    ctx = as_tensor("ctx", ctx, ndim=3, **kind)
    b, n, d = ctx.shape
    if min(b, n, d) < 1:
        raise ValueError(f"ctx must have shape (B, N, D) with B, N, D >= 1, got {tuple(ctx.shape)}")
    for name, value, shape in (
        ("z_query", z_query, (b, d)),
        ("w_kq", w_kq, (d, d)),
        ("w_pv_y", w_pv_y, (d,)),
    ):
        t = as_tensor(name, value, ndim=len(shape), **kind)
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} must have shape {shape} to match ctx, got {tuple(t.shape)}")
        if name == "z_query":
            z_query = t
        elif name == "w_kq":
            w_kq = t
        else:
            w_pv_y = t
    return _query_readout(ctx, z_query, w_kq, w_pv_y)


def _query_readout(ctx, z_query, w_kq, w_pv_y):
    """:func:`lsa_query_readout` without validation (the modules validate their inputs)."""
    scores = ctx @ (z_query @ w_kq.T)[:, :, None]  # (B, N, 1): z_iᵀ W^{KQ} z_q
    return ((ctx @ w_pv_y) * scores[..., 0]).mean(dim=1)


class LSAWeights(NamedTuple):
    """The two ``(d+1, d+1)`` weights of one LSA layer (what :func:`gd_lsa_weights` returns).

    Unpacks like the pair it is: ``w_kq, w_pv = gd_lsa_weights(d, eta)`` or
    ``lsa_predict(xs, ys, x_query, *gd_lsa_weights(d, eta))``.
    """

    #: ``W^{KQ}``, the merged key-query matrix.
    w_kq: np.ndarray
    #: ``W^{PV}``, the merged projection-value matrix.
    w_pv: np.ndarray


@declare(
    dim=Integer(1, None),
    eta=Interval(),
    preconditioner=OrNone(Array(ndim=2)),
)
def gd_lsa_weights(dim: int, eta: float, preconditioner=None) -> LSAWeights:
    """LSA weights whose prediction is one (preconditioned) GD step from ``w = 0``.

    ``w_kq = [[Γᵀ, 0], [0, 0]]`` and ``w_pv = [[0, 0], [0, −η]]`` (von Oswald et al.'s sign), so that
    :func:`lsa_predict` returns ``x_qᵀ Γ (η/N) Σ_i y_i x_i`` = :func:`icl_book.estimators.one_step_gd_predict`.

    Parameters
    ----------
    dim
        Input dimension ``d >= 1``.
    eta
        Step size ``η`` (any finite real).
    preconditioner
        ``Γ``, a finite ``(d, d)`` matrix (the theory uses symmetric positive definite ones, for which
        ``Γᵀ = Γ``); identity when ``None``.

    Returns
    -------
    LSAWeights
        ``(w_kq, w_pv)``, two ``(d+1, d+1)`` float64 arrays.

    Examples
    --------
    >>> w_kq, w_pv = gd_lsa_weights(2, 0.5)
    >>> w_pv[-1, -1]
    np.float64(-0.5)
    """
    dim = positive_int("dim", dim)
    size_limit("dim", 2 * (dim + 1) ** 2, what="weight entries")
    eta = finite_float("eta", eta)
    gamma = (
        np.eye(dim)
        if preconditioner is None
        else square_matrix("preconditioner", preconditioner, dim)
    )
    w_kq = np.zeros((dim + 1, dim + 1))
    w_kq[:dim, :dim] = (
        gamma.T
    )  # score x_iᵀ Γᵀ x_q = x_qᵀ Γ x_i, so any square Γ is reproduced exactly
    w_pv = np.zeros((dim + 1, dim + 1))
    w_pv[dim, dim] = -eta
    return LSAWeights(w_kq, w_pv)


@declare(
    xs=Array(ndim=3),
    ys=Array(ndim=2),
    x_query=Array(ndim=2),
    w_kq=Array(ndim=2),
    w_pv=Array(ndim=2),
)
def lsa_predict(xs, ys, x_query, w_kq, w_pv) -> np.ndarray:
    """Prediction of one LSA layer at the query, ``ŷ = −[LSA(Z)]_{d+1, N+1}``; shape ``(B,)``.

    Builds the tokens (:func:`icl_book.attention.layers.embed`), applies the layer
    (:func:`icl_book.attention.layers.lsa`: mask and ``1/N`` included, the same numbers as
    :func:`lsa_forward`) and reads the label slot of the query with von Oswald et al.'s minus sign
    (:func:`icl_book.attention.layers.readout`).

    Parameters
    ----------
    xs, ys, x_query
        ``(B, N, d)``, ``(B, N)``, ``(B, d)``.
    w_kq, w_pv
        ``(d+1, d+1)`` weights (e.g. from :func:`gd_lsa_weights`).
    """
    xs, ys, x_query = check_prompt_shapes(xs, ys, x_query)
    w_kq, w_pv = _weights(w_kq, w_pv, xs.shape[2])
    return layers._readout(layers._lsa(layers._embed(xs, ys, x_query), w_kq, w_pv))


class LinearSelfAttention(torch.nn.Module):
    """One linear self-attention layer with both ``(d+1)×(d+1)`` matrices ``w_kq`` and ``w_pv`` free.

    ``forward(xs, ys, x_query)`` returns ``ŷ = −[LSA(Z)]_{d+1, N+1}`` (``(B,)``), the same number as
    :func:`lsa_predict`, computed in ``O(B N d)`` as ``−(1/N) w_pv[d] · Σ_i z_i (z_iᵀ w_kq z_q)`` (only the
    query column's label entry is needed).

    Parameters
    ----------
    dim
        Input dimension ``d >= 1``.
    init_scale
        Standard deviation of the i.i.d. Gaussian initial entries (``>= 0``; 0 gives the all-zero
        weights, a saddle of the training loss, and needs no generator).
    generator
        Seeded ``torch.Generator`` for the initial weights: required when ``init_scale > 0`` (the
        package never draws from torch's global random state).
    dtype, device
        Of the parameters (float64 on the CPU by default).

    Examples
    --------
    >>> model = LinearSelfAttention.from_weights(*gd_lsa_weights(3, 1.0))
    >>> model.preconditioner().shape
    (3, 3)
    """

    @declare(
        dim=Integer(1, None),
        init_scale=Interval(0.0, math.inf),
        generator=Free("a torch.Generator (required when init_scale > 0), checked by _params"),
        dtype=Free("a floating torch.dtype, checked by _params.check_dtype"),
        device=Free("a torch.device or its name, checked by _params.check_device"),
    )
    def __init__(
        self,
        dim: int,
        *,
        init_scale: float = 0.1,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
        device=None,
    ):
        super().__init__()
        self.dim = positive_int("dim", dim)
        size_limit("dim", 2 * (self.dim + 1) ** 2, what="weight entries")
        shape = (self.dim + 1, self.dim + 1)
        self.w_kq = initial_parameter(shape, init_scale, generator, dtype, device)
        self.w_pv = initial_parameter(shape, init_scale, generator, dtype, device)

    @classmethod
    def from_weights(
        cls, w_kq, w_pv, *, dtype: torch.dtype = torch.float64, device=None
    ) -> LinearSelfAttention:
        """Build a layer holding the given NumPy ``(d+1, d+1)`` weights (e.g. :func:`gd_lsa_weights`)."""
        w_kq = as_array("w_kq", w_kq)
        if w_kq.ndim != 2 or w_kq.shape[0] != w_kq.shape[1] or w_kq.shape[0] < 2:
            raise ValueError(
                f"w_kq must be a square (d+1, d+1) matrix with d >= 1, got shape {w_kq.shape}"
            )
        dim = w_kq.shape[0] - 1
        w_kq, w_pv = _weights(w_kq, w_pv, dim)
        model = cls(dim, init_scale=0.0, dtype=dtype, device=device)
        with torch.no_grad():
            model.w_kq.copy_(torch.as_tensor(w_kq, dtype=dtype))
            model.w_pv.copy_(torch.as_tensor(w_pv, dtype=dtype))
        return model

    def forward(self, xs: torch.Tensor, ys: torch.Tensor, x_query: torch.Tensor) -> torch.Tensor:
        """``ŷ (B,)`` for ``xs (B, N, d)``, ``ys (B, N)``, ``x_query (B, d)`` (NumPy arrays or tensors of
        any float dtype, converted to the layer's dtype and device, as in the other modules)."""
        p = self.w_kq
        xs, ys, x_query = prompt_tensors(
            xs, ys, x_query, dim=self.dim, dtype=p.dtype, device=p.device
        )
        z = layers._embed(xs, ys, x_query)  # (B, N+1, d+1)
        ctx, zq = z[:, :-1], z[:, -1]  # the key/value tokens z_i and the query token
        # the query's label slot starts at 0, so after the layer it is the update alone
        return layers._prediction(_query_readout(ctx, zq, self.w_kq, self.w_pv[self.dim]))

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """The current ``(w_kq, w_pv)`` as float64 NumPy arrays."""
        return (
            self.w_kq.detach().cpu().to(torch.float64).numpy().copy(),
            self.w_pv.detach().cpu().to(torch.float64).numpy().copy(),
        )

    def preconditioner(self) -> np.ndarray:
        """The preconditioner the layer applies to the labels; ``(d, d)`` NumPy.

        Write ``A = w_kq[:d, :d]``, ``c = w_kq[d, :d]``, ``p_x = w_pv[d, :d]``, ``p_y = w_pv[d, d]``. The part of
        the prediction that is odd in the labels is exactly ``x_qᵀ Γ (1/N) Σ_i y_i x_i`` with

        ``Γ = −(p_y Aᵀ + c p_xᵀ)``.

        For the GD construction (and for a well-trained layer) ``c = p_x = 0`` and this is
        ``−w_pv[d, d] · w_kq[:d, :d]ᵀ``, the key-query block times the value scalar (with von Oswald's sign).
        The second term is a rank-one route to the same kind of term, which a badly initialised training run
        can get stuck on (chapter 2). Only products of the weights are identifiable:
        ``(w_kq, w_pv) → (c w_kq, w_pv / c)`` changes neither the prediction nor ``Γ``.
        """
        w_kq, w_pv = self.weights()
        d = self.dim
        a, c, p_x, p_y = w_kq[:d, :d], w_kq[d, :d], w_pv[d, :d], w_pv[d, d]
        minus_gamma = p_y * a.T + np.outer(c, p_x)
        return -minus_gamma
