"""The layers written once (:mod:`icl_book.attention.layers`): one prompt = a batch, NumPy = torch,
every other entry point (column-token NumPy helpers, torch modules, the query readout) runs them, the
layer equals the literal masked formula (an independent implementation), and the embedding and the
readout have no second copy anywhere in the package (checked on its syntax tree)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

import icl_book
from icl_book.attention import (
    DeepTransformer,
    GLUFeedForward,
    LinearSelfAttention,
    TransformerBlock,
    glu_embed_prompts,
    glu_update,
    layers,
    lsa,
    lsa_forward,
    lsa_predict,
    lsa_query_readout,
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
    ffn = GLUFeedForward(D, H, init_scale=0.0).load_numpy(w1, w2, w3)
    torch.testing.assert_close(
        ffn(t[0]), layers.glu(*(torch.as_tensor(a) for a in (z_rows, w1, w2, w3))), rtol=0, atol=0
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


# --- the layer against the definition ------------------------------------------------------------------
@pytest.mark.parametrize(("b", "n", "d"), [(1, 1, 1), (3, 7, 2), (2, 12, 5)])
def test_the_layer_is_the_literal_masked_formula(b, n, d):
    """``lsa_forward`` sums the masked products token by token; the layer (and everything that runs
    it: ``lsa_update``, ``lsa_predict``, ``LinearSelfAttention``) must give the same tokens."""
    rng = np.random.default_rng(n)
    xs, ys, xq = (
        rng.standard_normal((b, n, d)),
        rng.standard_normal((b, n)),
        rng.standard_normal((b, d)),
    )
    w_kq, w_pv = rng.standard_normal((2, d + 1, d + 1))
    z = token_matrix(xs, ys, xq)
    want = lsa_forward(z, w_kq, w_pv)
    # Sums of n + 1 products of O(1) numbers in two orders: 1e-12 is rounding headroom only.
    np.testing.assert_allclose(lsa_update(z, w_kq, w_pv), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lsa_predict(xs, ys, xq, w_kq, w_pv), -want[:, d, -1], atol=1e-12)
    model = LinearSelfAttention.from_weights(w_kq, w_pv)
    np.testing.assert_allclose(model(xs, ys, xq).detach().numpy(), -want[:, d, -1], atol=1e-12)


def test_the_literal_formula_runs_without_the_layer(monkeypatch):
    """``lsa_forward`` is an implementation of its own, not a call of the layer it is the check of."""

    def removed(*args, **kwargs):
        raise AssertionError("lsa_forward called the layer it is compared with")

    for name in ("lsa", "_lsa", "glu", "_glu"):
        monkeypatch.setattr(layers, name, removed)
    monkeypatch.setattr(lsa, "_lsa_update", removed)
    z = RNG.standard_normal((2, DIM + 1, N + 1))
    w_kq, w_pv = RNG.standard_normal((2, DIM + 1, DIM + 1))
    assert lsa_forward(z, w_kq, w_pv).shape == z.shape


@pytest.mark.parametrize("h", [1, H])
def test_the_glu_is_the_literal_gated_product(h):
    """Every entry point runs ``layers._glu``, so comparing them cannot see a wrong formula in it:
    here the gated product is summed unit by unit, down to a single hidden unit (``H = 1`` is a
    layer, ``H = 0`` is refused)."""
    rng = np.random.default_rng(h)
    z = rng.standard_normal((N, D))
    w1, w2, w3 = (
        rng.standard_normal((h, D)),
        rng.standard_normal((h, D)),
        rng.standard_normal((D, h)),
    )
    want = z.copy()
    for t in range(N):
        for k in range(h):
            want[t] += w3[:, k] * (w1[k] @ z[t]) * (w2[k] @ z[t])
    np.testing.assert_allclose(layers.glu(z, w1, w2, w3), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="H >= 1"):
        layers.glu(z, w1[:0], w2[:0], w3[:, :0])


def test_every_model_reads_its_prediction_through_the_one_readout(monkeypatch):
    """With the sign of ``layers._prediction`` flipped, every model's prediction flips."""
    xs, ys, xq = prompt_batch()
    gen = torch.Generator().manual_seed(0)
    models = [
        LinearSelfAttention(DIM, generator=gen),
        TransformerBlock(DIM, 2, H, generator=gen),
        TransformerBlock(DIM, 2, 0, generator=gen),
        DeepTransformer(DIM, D, 2, zero_init_residual=False, generator=gen),
        DeepTransformer(DIM, D, 2, zero_init_residual=False, label_norm=True, generator=gen),
    ]
    before = [m(xs, ys, xq).detach().numpy() for m in models]
    monkeypatch.setattr(layers, "_prediction", lambda slot: slot)
    for m, b in zip(models, before, strict=True):
        np.testing.assert_array_equal(m(xs, ys, xq).detach().numpy(), -b, err_msg=type(m).__name__)


# --- each thing written once: no second copy anywhere in icl_book/ ----------------------------------------
# the models live in PACKAGE/attention, the one copy of each thing in its layers.py
PACKAGE = Path(icl_book.__file__).parent
_JOINS = {"concatenate", "concat", "cat", "hstack", "vstack", "dstack", "column_stack", "row_stack",
          "stack", "block", "append", "r_", "c_"}  # fmt: skip
_PROMPT = {"xs", "ys", "x_query"}


def _walk(node, func):
    """``(enclosing function name or None, node)`` for every node under ``node``, outermost first."""
    for child in ast.iter_child_nodes(node):
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
        yield inner, child
        yield from _walk(child, inner)


def _nodes(root: Path = PACKAGE):
    """``(path, enclosing function name or None, node)`` for every node of every module under ``root``."""
    for path in sorted(root.rglob("*.py")):
        for func, node in _walk(ast.parse(path.read_text(), str(path)), None):
            yield path, func, node


def _is_minus_one(node) -> bool:
    return (isinstance(node, ast.Constant) and node.value == -1) or (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and node.operand.value == 1
    )


def _index(node) -> list:
    return node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]


def _reads_a_label_slot(node) -> bool:
    """A read of the last coordinate of a batch of tokens: ``z[..., -1]``, ``z[:, d, -1]``, ..."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)):
        return False
    idx = _index(node)
    return len(idx) >= 2 and _is_minus_one(idx[-1])


def _reads_the_query_label(node) -> bool:
    """``z[..., -1, -1]`` / ``z[:, -1, -1]``: the last token's last coordinate."""
    return _reads_a_label_slot(node) and _is_minus_one(_index(node)[-2])


def _is_prompt(node) -> bool:
    """A prompt's arrays themselves (``ys``, ``p.x_query``, ``ys[..., None]``), not a value computed from them."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return (isinstance(node, ast.Name) and node.id in _PROMPT) or (
        isinstance(node, ast.Attribute) and node.attr in _PROMPT
    )


def _is_join(node) -> bool:
    """A reference to a NumPy/torch function that joins arrays (``np.concatenate``, ``torch.cat``, ``np.r_``...)."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr in _JOINS
        and isinstance(node.value, ast.Name)
        and node.value.id in {"np", "numpy", "torch"}
    )


class _Findings(dict):
    """One finding per line of a module, the outermost node's (``-z[:, -1, -1]`` is one copy, not two)."""

    def add(self, root, path, func, node):
        where = f"{path.relative_to(root.parent)}:{node.lineno}"
        self.setdefault(where, f"{where} in {func}: {ast.unparse(node)[:90]}")

    def listed(self) -> list[str]:
        return list(self.values())


def readout_copies(root: Path = PACKAGE) -> list[str]:
    """Places outside ``layers._readout`` / ``layers._prediction`` that read or negate a prediction.

    A read of the query's label slot ``[..., -1, -1]``; a minus sign on anything that reads a label slot;
    and, inside ``icl_book/attention/`` (where the models live), a minus sign on anything but a name or a
    constant (``-eta`` builds a weight; ``-(...)`` of an expression is how a prediction gets its sign).
    """
    found = _Findings()
    for path, func, node in _nodes(root):
        if path == root / "attention" / "layers.py" and func in ("_readout", "_prediction"):
            continue
        if _reads_the_query_label(node):
            found.add(root, path, func, node)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand = node.operand
            in_models = root / "attention" in path.parents
            if any(_reads_a_label_slot(n) for n in ast.walk(operand)) or (
                in_models and not isinstance(operand, (ast.Name, ast.Constant))
            ):
                found.add(root, path, func, node)
    return found.listed()


def embedding_copies(root: Path = PACKAGE) -> list[str]:
    """Places outside ``layers._embed`` that put a prompt's arrays together into tokens.

    Inside ``icl_book/attention/``: any joining of arrays. Anywhere in the package: a join that takes a
    prompt's arrays (``xs``, ``ys``, ``x_query``) as operands, or an array slice assigned one of them.
    """
    found = _Findings()
    for path, func, node in _nodes(root):
        if path == root / "attention" / "layers.py" and func == "_embed":
            continue
        if _is_join(node) and root / "attention" in path.parents:
            found.add(root, path, func, node)
        elif isinstance(node, ast.Call) and _is_join(node.func):
            operands = [
                e
                for a in node.args
                for e in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])
            ]
            if any(_is_prompt(e) for e in operands):
                found.add(root, path, func, node)
        elif isinstance(node, (ast.Assign, ast.AugAssign)) and _is_prompt(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Subscript) for t in targets):
                found.add(root, path, func, node)
    return found.listed()


def test_the_readout_index_and_sign_are_written_once():
    assert readout_copies() == []


def test_a_prompt_becomes_tokens_in_one_function():
    assert embedding_copies() == []


@pytest.mark.parametrize(
    ("copy", "finder"),
    [
        ("def predict(z):\n    return -z[:, -1, -1]\n", readout_copies),
        ("def predict(z):\n    return -z[:, 3, -1]\n", readout_copies),
        ("def predict(zq, u):\n    return -(zq[:, -1] + u)\n", readout_copies),
        (
            "def predict(q, upd):\n    return -upd(q)\n",
            readout_copies,
        ),  # in attention/: any expression
        (
            "def tokens(xs, ys):\n    return np.concatenate([xs, ys[..., None]], -1)\n",
            embedding_copies,
        ),
        ("def tokens(a, b):\n    cat = torch.cat\n    return cat([a, b], 1)\n", embedding_copies),
        ("def tokens(z, p):\n    z[:, :-1, -1] = p.ys\n    return z\n", embedding_copies),
    ],
)
def test_the_checks_find_a_second_copy(tmp_path, copy, finder):
    """Each check fails on a second copy written in a new module of the models' package."""
    (tmp_path / "attention").mkdir()
    (tmp_path / "attention" / "copy.py").write_text(copy)
    assert len(finder(tmp_path)) == 1


def test_lsa_refuses_a_prompt_with_no_context_token():
    """One token and one query: no context to average over (the sum over N = 0 tokens would be
    divided by 0): an error that says so, not NaN."""
    z = np.ones((1, 3))
    with pytest.raises(ValueError, match="at least one context token"):
        layers.lsa(z, np.eye(3), np.eye(3))


def test_the_smallest_valid_shapes_are_accepted():
    """One prompt, one context token, an unbatched residual: inputs the entry checks must accept (a
    mutation sample changed two of these checks to refuse them, unnoticed)."""
    rng = np.random.default_rng(1)
    z = torch.as_tensor(rng.standard_normal((1, 2, 3)))  # one prompt: one context token + the query
    wk, wp = (torch.as_tensor(rng.standard_normal((3, 3))) for _ in range(2))
    full = layers.lsa(z, wk, wp, queries_only=True)[:, 0, -1] - z[:, -1, -1]
    torch.testing.assert_close(lsa_query_readout(z[:, :-1], z[:, -1], wk, wp[-1]), full)
    # one GD step on one context example of one unbatched prompt (r of shape (N,) = (1,)):
    # g = r φ, then the residual and the prediction by hand
    r, phi, phi_q = np.array([2.0]), np.array([[0.5, 1.0]]), np.array([1.0, -1.0])
    r_new, pred = layers.bcd_steps(r, np.zeros(()), [(phi, phi_q, 0.1 * np.eye(2))])
    g = r[0] * phi[0]
    np.testing.assert_allclose(r_new, [2.0 - 0.1 * phi[0] @ g])
    np.testing.assert_allclose(pred, 0.1 * phi_q @ g)


def test_too_many_queries_is_refused_by_name():
    """Two tokens hold at most one query: the error names ``n_queries`` and its range."""
    z = RNG.standard_normal((1, 2, 3))
    w = np.eye(3)
    with pytest.raises(ValueError, match=r"n_queries must be an integer >= 1 and <= 1, got 2"):
        layers.lsa(z, w, w, n_queries=2)
