"""The book's layers, each written once: functions of row tokens and explicit weights.

Every function here takes tokens as *rows*, ``z`` of shape ``(..., T, D)`` (one prompt ``(T, D)`` or any
batch of them, the last ``n_queries`` tokens being queries), and explicit weight matrices; it works on
NumPy arrays and on torch tensors alike (only ``@``, ``*``, slicing and ``swapaxes``), so autograd flows
through it and the NumPy constructions and the trained torch modules run the *same* code. Write for one
prompt; batch by broadcasting (or :func:`torch.func.vmap`).

- :func:`embed`: a prompt ``(x_1, y_1, …, x_N, y_N, x_q)`` → tokens ``[x; 1; scratch; y]`` (the query's
  ``y`` slot 0).
- :func:`lsa`: linear self-attention, ``z_t ← z_t + W^{PV} C W^{KQ} z_t`` with
  ``C = (1/N) Σ_{i ≤ N} z_i z_iᵀ`` over the context tokens: the row form of chapter 2's
  ``Z + (1/N) W^{PV} Z M Zᵀ W^{KQ} Z``.
- :func:`glu`: the bilinear GLU feed-forward layer, ``e ← e + W_3[(W_1 e) ⊙ (W_2 e)]`` on every token.
- :func:`readout`: the prediction, ``ŷ = −(last token's y slot)`` (von Oswald et al.'s sign).
- :func:`bcd_steps`: block-coordinate descent in residual form, what a deep stack's ``y`` slots carry
  (chapter 6).

The column-token NumPy functions of :mod:`~icl_book.attention.lsa`, :mod:`~icl_book.attention.glu` and
:mod:`~icl_book.attention.deep` are thin wrappers around these, and the torch modules hold parameters and
call them; chapter 2's :func:`~icl_book.attention.lsa.lsa_forward` stays the literal masked formula, the
definition the others are tested against.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["embed", "lsa", "glu", "readout", "bcd_steps"]


def _t(a):
    """The matrix transpose of the last two axes (NumPy and torch)."""
    return a.swapaxes(-1, -2)


def embed(xs, ys, x_query, *, n_scratch: int = 0, constant: bool = False):
    """Row tokens ``(..., N+1, D)`` of prompts: ``[x_i; 1; 0 (n_scratch); y_i]``, the query last with ``y = 0``.

    ``xs (..., N, d)``, ``ys (..., N)``, ``x_query (..., d)``: NumPy arrays or torch tensors (of one
    kind and dtype). ``D = d + constant + n_scratch + 1``. No validation: callers validate.
    """
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


def lsa(z, w_kq, w_pv, *, n_queries: int = 1, queries_only: bool = False):
    """Linear self-attention on row tokens ``z (..., T, D)``; the last ``n_queries`` tokens are queries.

    Every token (or, with ``queries_only``, only the query tokens, shape ``(..., n_queries, D)``) becomes
    ``z_t + W^{PV} C W^{KQ} z_t`` with ``C = (1/N) Σ_{i ≤ N} z_i z_iᵀ`` over the ``N = T − n_queries``
    context tokens: queries are never keys or values.
    """
    n = z.shape[-2] - n_queries
    ctx = z[..., :n, :]
    cov = _t(ctx) @ ctx / n  # (..., D, D)
    update = _t(w_pv @ cov @ w_kq)  # row form: z_t ← z_t + z_t (W^{PV} C W^{KQ})ᵀ
    if queries_only:
        q = z[..., n:, :]
        return q + q @ update
    return z + z @ update


def glu(z, w1, w2, w3):
    """The bilinear GLU on every row token of ``z (..., T, D)``: ``z + ((z W_1ᵀ) ⊙ (z W_2ᵀ)) W_3ᵀ``.

    ``w1, w2 (H, D)``, ``w3 (D, H)``.
    """
    return z + ((z @ _t(w1)) * (z @ _t(w2))) @ _t(w3)


def readout(z):
    """The prediction from row tokens ``(..., T, D)``: ``−z[..., −1, −1]`` (the last token's ``y`` slot)."""
    return -z[..., -1, -1]


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
    for phi, phi_q, gamma in steps:
        n = phi.shape[-2]
        g = (r[..., None, :] @ phi)[..., 0, :] / n  # (..., m)
        step = g @ gamma  # (..., m): the row form of Γᵀ g
        r = r - (phi @ step[..., None])[..., 0]
        pred = pred + (phi_q * step).sum(-1)
    return r, pred
