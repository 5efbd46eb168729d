"""The book's layers, each written once: functions of row tokens and explicit weights.

Every function here takes tokens as *rows*, ``z`` of shape ``(..., T, D)`` (one prompt ``(T, D)`` or any
batch of them, the last ``n_queries`` tokens being queries), and explicit weight matrices; it works on
NumPy arrays and on torch tensors alike (only ``@``, ``*``, slicing and ``swapaxes``), so autograd flows
through it and the NumPy constructions and the trained torch modules run the *same* code. Write for one
prompt; batch by broadcasting (or :func:`torch.func.vmap`).

- :func:`embed`: a prompt ``(x_1, y_1, …, x_N, y_N, x_q)`` → tokens ``[x; 1; scratch; y]`` (the query's
  ``y`` slot 0), the one place a prompt becomes tokens.
- :func:`lsa`: linear self-attention, ``z_t ← z_t + W^{PV} C W^{KQ} z_t`` with
  ``C = (1/N) Σ_{i ≤ N} z_i z_iᵀ`` over the context tokens: the row form of chapter 2's
  ``Z + (1/N) W^{PV} Z M Zᵀ W^{KQ} Z``.
- :func:`glu`: the bilinear GLU feed-forward layer, ``e ← e + W_3[(W_1 e) ⊙ (W_2 e)]`` on every token.
- :func:`readout`: the prediction, ``ŷ = −(last token's y slot)`` (von Oswald et al.'s sign), the one
  place that index and that sign are written (``tests/test_layers.py`` fails on a second copy).
- :func:`bcd_steps`: block-coordinate descent in residual form, what a deep stack's ``y`` slots carry
  (chapter 6).

The column-token NumPy functions of :mod:`~icl_book.attention.lsa`, :mod:`~icl_book.attention.glu` and
:mod:`~icl_book.attention.deep` are thin wrappers around these, and the torch modules hold parameters and
call them. Chapter 2's :func:`~icl_book.attention.lsa.lsa_forward` is the one independent implementation:
the masked formula summed token by token, the definition :func:`lsa` is tested against.
"""

from __future__ import annotations

import numpy as np
import torch

from .._declare import Flag, Free, Integer, declare
from .._validate import (
    ArgumentTypeError,
    as_array,
    as_tensor,
    flag,
    integer,
    nonnegative_int,
    size_limit,
)

__all__ = ["embed", "lsa", "glu", "readout", "bcd_steps"]

# The public functions validate their arguments and call the private ones (``_lsa`` ...), which the
# torch modules run on every training step (inside ``torch.func.vmap``, where data-dependent checks are
# impossible): the modules validate their inputs once, where they enter.


def _checked(name: str, value, like, ndim: int | None = None):
    """``value`` validated as :func:`~icl_book._validate.as_array` does (real, finite) and of the kind of
    ``like`` (the tokens): a tensor of ``like``'s floating dtype and device, or a float64 NumPy array
    (float16/float32 NumPy input is computed in float64, never in the precision it came in: the
    NumPy functions return float64, and a float16 product was 6.8e-5 off)."""
    if isinstance(like, torch.Tensor):
        dtype = like.dtype if like.is_floating_point() else torch.float64
        if _under_vmap(value):  # no data-dependent check can run there: dtype and shape only
            if value.is_complex() or value.dtype == torch.bool:
                raise ArgumentTypeError(f"{name} must be a real numeric array, got {value.dtype}")
            if ndim is not None and value.dim() != ndim:
                raise ValueError(
                    f"{name} must have {ndim} dimensions, got shape {tuple(value.shape)}"
                )
            return value.to(dtype=dtype, device=like.device)
        return as_tensor(name, value, dtype=dtype, device=like.device, ndim=ndim)
    return as_array(name, value, ndim)


def _under_vmap(value) -> bool:
    """Whether ``value`` is a tensor batched by :func:`torch.func.vmap` (per-sample view)."""
    is_batched = getattr(getattr(torch._C, "_functorch", None), "is_batchedtensor", None)
    return isinstance(value, torch.Tensor) and is_batched is not None and is_batched(value)


def _tokens(name: str, z):
    """Row tokens ``(..., T, D)`` with ``T, D >= 1``: a tensor stays a tensor, anything else NumPy."""
    z = _checked(name, z, z)
    if z.ndim < 2 or min(z.shape[-2:]) < 1:
        raise ValueError(f"{name} must have shape (..., T, D) with T, D >= 1, got {tuple(z.shape)}")
    return z


def _matrix(name: str, value, like, shape: tuple[int, int], what: str = "z"):
    w = _checked(name, value, like, 2)
    if tuple(w.shape) != shape:
        raise ValueError(f"{name} must have shape {shape} to match {what}, got {tuple(w.shape)}")
    return w


def _t(a):
    """The matrix transpose of the last two axes (NumPy and torch)."""
    return a.swapaxes(-1, -2)


@declare(
    xs=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    ys=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    x_query=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    n_scratch=Integer(0, None),
    constant=Flag(),
)
def embed(xs, ys, x_query, *, n_scratch: int = 0, constant: bool = False):
    """Row tokens ``(..., N+1, D)`` of prompts: ``[x_i; 1; 0 (n_scratch); y_i]``, the query last with ``y = 0``.

    ``xs (..., N, d)``, ``ys (..., N)``, ``x_query (..., d)``: NumPy arrays or torch tensors (of the
    kind of ``xs``). ``D = d + constant + n_scratch + 1``.
    """
    xs = _checked("xs", xs, xs)
    if xs.ndim < 2 or min(xs.shape[-2:]) < 1:
        raise ValueError(f"xs must have shape (..., N, d) with N, d >= 1, got {tuple(xs.shape)}")
    lead, n, d = tuple(xs.shape[:-2]), xs.shape[-2], xs.shape[-1]
    ys = _checked("ys", ys, xs)
    if tuple(ys.shape) != (*lead, n):
        raise ValueError(f"ys must have shape {(*lead, n)} to match xs, got {tuple(ys.shape)}")
    x_query = _checked("x_query", x_query, xs)
    if tuple(x_query.shape) != (*lead, d):
        raise ValueError(
            f"x_query must have shape {(*lead, d)} to match xs, got {tuple(x_query.shape)}"
        )
    n_scratch = nonnegative_int("n_scratch", n_scratch)
    constant = flag("constant", constant)
    # the tokens' entries, refused before anything is allocated
    size_limit("n_scratch", int(np.prod(lead, dtype=object)) * (n + 1) * (d + n_scratch + 2))
    return _embed(xs, ys, x_query, n_scratch=n_scratch, constant=constant)


def _embed(xs, ys, x_query, *, n_scratch: int = 0, constant: bool = False):
    """:func:`embed` without validation (the modules validate their inputs where they enter)."""
    if isinstance(xs, torch.Tensor):
        cat, zeros, ones = torch.cat, xs.new_zeros, xs.new_ones
    else:
        cat = np.concatenate

        def zeros(shape):
            return np.zeros(shape, dtype=xs.dtype)

        def ones(shape):
            return np.ones(shape, dtype=xs.dtype)

    lead, n = xs.shape[:-2], xs.shape[-2]
    x_all = cat([xs, x_query[..., None, :]], -2)  # (..., N+1, d)
    y_all = cat([ys, zeros((*lead, 1))], -1)[..., None]  # (..., N+1, 1)
    parts = [x_all]
    if constant:
        parts.append(ones((*lead, n + 1, 1)))
    if n_scratch:
        parts.append(zeros((*lead, n + 1, n_scratch)))
    parts.append(y_all)
    return cat(parts, -1)


@declare(
    z=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    w_kq=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    w_pv=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    n_queries=Integer(1, None),
    queries_only=Flag(),
)
def lsa(z, w_kq, w_pv, *, n_queries: int = 1, queries_only: bool = False):
    """Linear self-attention on row tokens ``z (..., T, D)``; the last ``n_queries`` tokens are queries.

    Every token (or, with ``queries_only``, only the query tokens, shape ``(..., n_queries, D)``) becomes
    ``z_t + W^{PV} C W^{KQ} z_t`` with ``C = (1/N) Σ_{i ≤ N} z_i z_iᵀ`` over the ``N = T − n_queries``
    context tokens: queries are never keys or values.
    """
    z = _tokens("z", z)
    t, d = z.shape[-2:]
    w_kq = _matrix("w_kq", w_kq, z, (d, d))
    w_pv = _matrix("w_pv", w_pv, z, (d, d))
    n_queries = integer("n_queries", n_queries, minimum=1, maximum=max(t - 1, 1))
    if t - n_queries < 1:
        raise ValueError(f"z must hold at least one context token besides {n_queries} queries")
    queries_only = flag("queries_only", queries_only)
    return _lsa(z, w_kq, w_pv, n_queries=n_queries, queries_only=queries_only)


def _lsa(z, w_kq, w_pv, *, n_queries: int = 1, queries_only: bool = False):
    """:func:`lsa` without validation."""
    n = z.shape[-2] - n_queries
    ctx = z[..., :n, :]
    cov = _t(ctx) @ ctx / n  # (..., D, D)
    update = _t(w_pv @ cov @ w_kq)  # row form: z_t ← z_t + z_t (W^{PV} C W^{KQ})ᵀ
    if queries_only:
        q = z[..., n:, :]
        return q + q @ update
    return z + z @ update


@declare(
    z=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    w1=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    w2=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    w3=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
)
def glu(z, w1, w2, w3):
    """The bilinear GLU on every row token of ``z (..., T, D)``: ``z + ((z W_1ᵀ) ⊙ (z W_2ᵀ)) W_3ᵀ``.

    ``w1, w2 (H, D)``, ``w3 (D, H)``.
    """
    z = _tokens("z", z)
    d = z.shape[-1]
    w1 = _checked("w1", w1, z, 2)
    h = w1.shape[0]
    if tuple(w1.shape) != (h, d) or h < 1:
        raise ValueError(f"w1 must have shape (H, D) = (H, {d}) with H >= 1, got {tuple(w1.shape)}")
    w2 = _matrix("w2", w2, z, (h, d), "z and w1")
    w3 = _matrix("w3", w3, z, (d, h), "z and w1")
    return _glu(z, w1, w2, w3)


def _glu(z, w1, w2, w3):
    """:func:`glu` without validation."""
    return z + ((z @ _t(w1)) * (z @ _t(w2))) @ _t(w3)


@declare(
    z=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
)
def readout(z):
    """The prediction from row tokens ``(..., T, D)``: ``−z[..., −1, −1]`` (the last token's ``y`` slot)."""
    return _readout(_tokens("z", z))


def _readout(z):
    """:func:`readout` without validation: the query is the last token, its ``y`` slot the last
    coordinate."""
    return _prediction(z[..., -1, -1])


def _prediction(label_slot):
    """``ŷ`` from the query's ``y`` slot after the model: minus it (von Oswald et al.'s sign).

    :func:`_readout` and the evaluation orders that compute that slot alone
    (:class:`~icl_book.attention.lsa.LinearSelfAttention`,
    :meth:`~icl_book.attention.glu.TransformerBlock.forward`) call it: the sign is written here only.
    """
    return -label_slot


@declare(
    r=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    pred=Free(
        "a NumPy array or torch tensor, checked where it enters (vmap-aware, no copy of a tensor)"
    ),
    steps=Free("a sequence of (phi, q, gamma) triples, each checked in the body"),
)
def bcd_steps(r, pred, steps):
    """Block-coordinate descent steps in residual form, the updates of a deep stack's ``y`` slots.

    Parameters
    ----------
    r
        ``(..., N)`` the context residuals (the labels before the first step).
    pred
        ``(...)`` the prediction so far (0 before the first step).
    steps
        Iterable of ``(phi, phi_q, gamma)``: the block's features on the context ``(..., N, m)`` and at the
        query ``(..., m)``, and its ``(m, m)`` step matrix (``η I`` for plain block-coordinate GD).

    Returns
    -------
    r, pred
        After every step ``g = (1/N) Σ_j r_j φ(x_j)``, ``r_i ← r_i − φ(x_i)ᵀ Γᵀ g`` and
        ``ŷ ← ŷ + φ(x_q)ᵀ Γᵀ g``: one preconditioned GD step on the block's coordinates of
        ``L(θ) = (1/2N) Σ_i (θᵀφ(x_i) − y_i)²``.
    """
    r = _checked("r", r, r)
    if r.ndim < 1 or r.shape[-1] < 1:
        raise ValueError(f"r must have shape (..., N) with N >= 1, got {tuple(r.shape)}")
    lead, n = tuple(r.shape[:-1]), r.shape[-1]
    pred = _checked("pred", pred, r)
    if tuple(pred.shape) != lead:
        raise ValueError(f"pred must have shape {lead} to match r, got {tuple(pred.shape)}")
    try:
        steps = list(steps)
    except TypeError:
        raise ArgumentTypeError(
            f"steps must be an iterable of (phi, phi_q, gamma), got {type(steps).__name__}"
        ) from None
    checked, seen = [], {}
    for k, step in enumerate(steps):
        if id(step) in seen:  # a cycle repeats the same steps: each is validated once
            checked.append(seen[id(step)])
            continue
        if not isinstance(step, (tuple, list)) or len(step) != 3:
            raise ArgumentTypeError(
                f"steps[{k}] must be a triple (phi, phi_q, gamma), got {step!r}"[:200]
            )
        phi = _checked(f"steps[{k}] phi", step[0], r)
        m = phi.shape[-1] if phi.ndim else 0
        if tuple(phi.shape) != (*lead, n, m) or m < 1:
            raise ValueError(
                f"steps[{k}] phi must have shape {(*lead, n)} + (m,) with m >= 1, got {tuple(phi.shape)}"
            )
        phi_q = _checked(f"steps[{k}] phi_q", step[1], r)
        if tuple(phi_q.shape) != (*lead, m):
            raise ValueError(
                f"steps[{k}] phi_q must have shape {(*lead, m)}, got {tuple(phi_q.shape)}"
            )
        gamma = _matrix(f"steps[{k}] gamma", step[2], r, (m, m), f"steps[{k}] phi")
        checked.append(seen.setdefault(id(step), (phi, phi_q, gamma)))
    return _bcd_steps(r, pred, checked)


def _bcd_steps(r, pred, steps):
    """:func:`bcd_steps` without validation."""
    for phi, phi_q, gamma in steps:
        n = phi.shape[-2]
        g = (r[..., None, :] @ phi)[..., 0, :] / n  # (..., m)
        step = g @ gamma  # (..., m): the row form of Γᵀ g
        r = r - (phi @ step[..., None])[..., 0]
        pred = pred + (phi_q * step).sum(-1)
    return r, pred
