"""The layers written once (:mod:`icl_book.attention.layers`): one prompt = a batch, NumPy = torch, and
every other entry point (column-token NumPy helpers, torch modules, the query readout) runs them."""

from __future__ import annotations

import numpy as np
import torch

from icl_book.attention import (
    GLUFeedForward,
    TransformerBlock,
    glu_embed_prompts,
    glu_update,
    layers,
    lsa_forward,
    lsa_query_readout,
    lsa_tokens,
    lsa_update,
    token_matrix,
)

RNG = np.random.default_rng(0)
B, N, DIM, D, H = 3, 7, 2, 6, 4


def prompt_batch():
    return (
        RNG.standard_normal((B, N, DIM)),
        RNG.standard_normal((B, N)),
        RNG.standard_normal((B, DIM)),
    )


def weights():
    return [RNG.standard_normal(s) for s in ((D, D), (D, D), (H, D), (H, D), (D, H))]


def test_one_prompt_equals_its_row_of_a_batch_numpy_and_torch():
    xs, ys, xq = prompt_batch()
    w_kq, w_pv, w1, w2, w3 = weights()

    def run(x, y, q):
        z = layers.embed(x, y, q, n_scratch=D - DIM - 2, constant=True)
        return layers.readout(layers.lsa(layers.glu(z, w1, w2, w3), w_kq, w_pv))

    batch = run(xs, ys, xq)
    for b in range(B):
        np.testing.assert_allclose(run(xs[b], ys[b], xq[b]), batch[b], rtol=1e-12)
    as_t = [torch.as_tensor(a) for a in (xs, ys, xq, w_kq, w_pv, w1, w2, w3)]
    z = layers.embed(*as_t[:3], n_scratch=D - DIM - 2, constant=True)
    out = layers.readout(layers.lsa(layers.glu(z, *as_t[5:]), *as_t[3:5]))
    np.testing.assert_allclose(out.numpy(), batch, rtol=1e-12)


def test_queries_only_is_the_query_rows_of_the_full_update():
    z = RNG.standard_normal((B, N + 2, D))
    w_kq, w_pv = weights()[:2]
    full = layers.lsa(z, w_kq, w_pv, n_queries=2)
    np.testing.assert_allclose(
        layers.lsa(z, w_kq, w_pv, n_queries=2, queries_only=True), full[:, -2:]
    )
    # queries are never keys or values: changing them does not move the context tokens' update
    z2 = z.copy()
    z2[:, -2:] += 1.0
    np.testing.assert_allclose(layers.lsa(z2, w_kq, w_pv, n_queries=2)[:, :N], full[:, :N])


def test_every_entry_point_runs_the_one_implementation():
    xs, ys, xq = prompt_batch()
    w_kq, w_pv, w1, w2, w3 = weights()
    z_rows = RNG.standard_normal((B, N + 1, D))
    z_cols = z_rows.swapaxes(1, 2)
    np.testing.assert_array_equal(
        lsa_update(z_cols, w_kq, w_pv), layers.lsa(z_rows, w_kq, w_pv).swapaxes(1, 2)
    )
    np.testing.assert_array_equal(
        glu_update(z_cols, w1, w2, w3), layers.glu(z_rows, w1, w2, w3).swapaxes(1, 2)
    )
    t = [torch.as_tensor(a) for a in (z_rows, w_kq, w_pv)]
    torch.testing.assert_close(lsa_tokens(*t), layers.lsa(*t), rtol=0, atol=0)
    ffn = GLUFeedForward(D, H, init_scale=0.0).load_numpy(w1, w2, w3)
    torch.testing.assert_close(
        ffn(t[0]), layers.glu(*(torch.as_tensor(a) for a in (z_rows, w1, w2, w3))), rtol=0, atol=0
    )
    # the literal masked formula of chapter 2 (the definition) agrees with the layer
    z_lsa = token_matrix(xs, ys, xq)
    w3x3 = [RNG.standard_normal((DIM + 1, DIM + 1)) for _ in range(2)]
    np.testing.assert_allclose(
        lsa_forward(z_lsa, *w3x3),
        layers.lsa(z_lsa.swapaxes(1, 2), *w3x3).swapaxes(1, 2),
        rtol=1e-12,
        atol=1e-12,
    )
    # the query readout of LinearSelfAttention is the label entry of the layer's query update
    ctx, zq = torch.as_tensor(z_rows[:, :-1]), torch.as_tensor(z_rows[:, -1])
    wk, wp = torch.as_tensor(w_kq), torch.as_tensor(w_pv)
    full = layers.lsa(torch.as_tensor(z_rows), wk, wp, queries_only=True)[:, 0, -1] - zq[:, -1]
    torch.testing.assert_close(lsa_query_readout(ctx, zq, wk, wp[-1]), full)
    # embeddings: NumPy columns, torch rows
    np.testing.assert_array_equal(
        glu_embed_prompts(xs, ys, xq, 2, constant=True),
        layers.embed(xs, ys, xq, n_scratch=2, constant=True).swapaxes(1, 2),
    )
    blk = TransformerBlock(DIM, 2, H, init_scale=0.0)
    np.testing.assert_array_equal(
        blk.embed(xs, ys, xq).numpy(), layers.embed(xs, ys, xq, n_scratch=2, constant=True)
    )
