"""Tests of chapter 6: the deep block-coordinate-descent construction, its estimators, samplers and models."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from icl_book import attention as A
from icl_book.attention.glu import glu_embed_prompts, glu_lsa_block_forward
from icl_book.checks import CheckFailed, check_depth_ex2, check_depth_ex3
from icl_book.estimators import (
    block_coordinate_gd_predict,
    kernel_least_squares_predict,
    one_step_kernel_gd_predict,
)
from icl_book.features import (
    feature_index_tuples,
    feature_kernel,
    feature_map,
    n_features,
    partition_features,
)
from icl_book.limits import CostRefused, budget
from icl_book.tasks import sample_cubic_prompts, sample_polynomial_prompts


def _prompts(d, p, n, basis="legendre", batch=6, seed=0, noise_var=0.01):
    return sample_polynomial_prompts(
        batch, n, d, p, rng=np.random.default_rng(seed), noise_var=noise_var, kind=basis
    )


# ------------------------------------------------------------------------------------------------
# The construction equals block-coordinate GD
# ------------------------------------------------------------------------------------------------

CASES = [
    # (d, p, width, eta, n_cycles, kind)
    (1, 1, 4, 0.5, 1, "hermite"),
    (2, 2, 5, 0.3, 2, "hermite"),
    (2, 3, 6, 0.4, 3, "hermite"),
    (3, 3, 9, 0.5, 2, "legendre"),
    (3, 3, 7, 0.2, 1, "legendre"),
    (2, 4, 6, 0.1, 2, "hermite"),
    (2, 5, 8, 0.05, 1, "hermite"),
    (2, 3, 7, 0.05, 2, "monomial"),
]


@pytest.mark.parametrize(("d", "p", "width", "eta", "cycles", "kind"), CASES)
def test_stack_equals_block_coordinate_gd(d, p, width, eta, cycles, kind):
    basis = "hermite" if kind == "monomial" else kind
    pr = _prompts(d, p, 30, basis=basis)
    w = A.deep_bcd_weights(d, p, width, eta, cycles, kind=kind)
    got = A.deep_predict(pr.xs, pr.ys, pr.x_query, w)
    expected = block_coordinate_gd_predict(pr.xs, pr.ys, pr.x_query, w.feature_blocks, eta, cycles)
    # Same arithmetic in a different order through <= 30 layers of O(1..100) numbers: ~1e-13 observed.
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10 * max(1.0, np.abs(expected).max()))
    assert w.depth == cycles * len(w.schedule)
    assert np.abs(expected).max() > 1e-3  # the comparison is not between two zeros


def test_public_signature_positional():
    w = A.deep_bcd_weights(2, 3, 6, 0.5)
    assert w.n_cycles == 1 and w.width == 6 and w.eta == 0.5 and isinstance(w, A.DeepBCDWeights)
    pr = _prompts(2, 3, 20, basis="hermite")
    out = A.deep_predict(pr.xs, pr.ys, pr.x_query, w)
    assert out.shape == (6,) and out.dtype == np.float64


def test_schedule_partitions_features_and_fits():
    for d, p, s in [(3, 3, 4), (2, 4, 1), (3, 3, 1), (2, 5, 6), (4, 3, 5)]:
        plan = A.bcd_schedule(d, p, s)
        feats = [t for f, _ in plan for t in f]
        assert sorted(feats) == sorted(feature_index_tuples(d, p))
        assert len(feats) == len(set(feats))
        assert all(len(f) + len(c) <= s for f, c in plan)
        for (f0, c0), (f1, c1) in zip(
            plan, plan[1:], strict=False
        ):  # parents are in the previous scratch
            for item in f1 + c1:
                if len(item) >= 3:
                    assert item[:-1] in f0 + c0


def test_scratch_holds_the_block_features():
    d, p, width = 3, 3, 9
    w = A.deep_bcd_weights(d, p, width, 0.5, 2, kind="legendre")
    pr = _prompts(d, p, 12)
    z = glu_embed_prompts(pr.xs, pr.ys, pr.x_query, w.n_scratch)
    x_all = np.concatenate([pr.xs, pr.x_query[:, None]], axis=1)
    for layer, (features, carriers) in zip(w.layers, w.schedule * 2, strict=True):
        z = glu_lsa_block_forward(z, layer)  # chapter 5's block forward, layer by layer
        held = features + carriers
        scratch = np.swapaxes(z[:, d + 1 : d + 1 + len(held)], 1, 2)
        np.testing.assert_allclose(
            scratch,
            np.stack([feature_map(x_all, 3, kind="legendre")[..., _col(t)] for t in held], -1),
            atol=1e-12,
        )
        assert np.all(z[:, d + 1 + len(held) : -1] == 0)  # the rest of the scratch is erased
    np.testing.assert_allclose(
        -z[:, -1, -1], A.deep_predict(pr.xs, pr.ys, pr.x_query, w), atol=1e-12
    )


def _col(t):
    return feature_index_tuples(3, 3).index(t)


def test_one_block_is_one_step_kernel_gd():
    pr = _prompts(2, 2, 25)
    blocks = partition_features(2, 2, 5, kind="legendre")
    got = block_coordinate_gd_predict(pr.xs, pr.ys, pr.x_query, blocks, 0.7, 1)
    expected = one_step_kernel_gd_predict(pr.xs, pr.ys, pr.x_query, feature_kernel(blocks), 0.7)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-13)


def test_many_cycles_small_eta_converge_to_kernel_least_squares():
    d, p, width, n = 2, 2, 6, 40  # F = 5 features, S = 2 slots: 3 blocks per cycle, N = 40 > F
    pr = _prompts(d, p, n, batch=8, seed=3, noise_var=0.1)
    w = A.deep_bcd_weights(d, p, width, 0.4, 300, kind="legendre")
    got = A.deep_predict(pr.xs, pr.ys, pr.x_query, w)
    expected = kernel_least_squares_predict(pr.xs, pr.ys, pr.x_query, w.feature_blocks)
    # Linear convergence: after 300 cycles the remaining error is far below 1e-8 (observed ~1e-15).
    np.testing.assert_allclose(got, expected, atol=1e-8)
    few = A.deep_predict(
        pr.xs, pr.ys, pr.x_query, A.deep_bcd_weights(d, p, width, 0.4, 2, kind="legendre")
    )
    assert np.abs(few - expected).max() > 1e-3  # two cycles are not enough: the test can fail


def test_bcd_estimator_converges_cubic():
    pr = _prompts(3, 3, 60, batch=5, seed=4, noise_var=0.05)
    blocks = partition_features(3, 3, 4, kind="legendre")
    got = block_coordinate_gd_predict(pr.xs, pr.ys, pr.x_query, blocks, 0.3, 3000)
    expected = kernel_least_squares_predict(pr.xs, pr.ys, pr.x_query, blocks)
    np.testing.assert_allclose(got, expected, atol=1e-7)


# ------------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------------


def test_bad_input_names_argument_and_smallest_value():
    with pytest.raises(ValueError, match=r"width must be an integer >= 6"):
        A.deep_bcd_weights(3, 2, 5, 0.5)
    with pytest.raises(ValueError, match=r"degree must be an integer >= 1"):
        A.deep_bcd_weights(3, 0, 9, 0.5)
    with pytest.raises(ValueError, match=r"eta must be > 0"):
        A.deep_bcd_weights(3, 2, 9, 0.0)
    with pytest.raises(ValueError, match=r"eta must be > 0"):
        A.deep_bcd_weights(3, 2, 9, -1.0)
    with pytest.raises(ValueError, match=r"n_cycles"):
        A.deep_bcd_weights(3, 2, 9, 0.5, 0)
    need = A.min_deep_width(2, 6)
    assert need > 2 + 3  # degree 6 needs a parent and a grandparent in the scratch
    with pytest.raises(ValueError, match=rf"width must be >= {need}"):
        A.deep_bcd_weights(2, 6, need - 1, 0.5)
    A.deep_bcd_weights(2, 6, need, 0.5)
    pr = _prompts(2, 2, 5)
    with pytest.raises(ValueError, match="eta"):
        block_coordinate_gd_predict(pr.xs, pr.ys, pr.x_query, partition_features(2, 2, 2), 0.0, 1)
    with pytest.raises(TypeError, match="weights"):
        A.deep_predict(pr.xs, pr.ys, pr.x_query, "not weights")
    with pytest.raises(ValueError, match="weights.dim"):
        A.deep_predict(pr.xs, pr.ys, pr.x_query, A.deep_bcd_weights(3, 2, 9, 0.5))


# ------------------------------------------------------------------------------------------------
# torch models
# ------------------------------------------------------------------------------------------------


def _torch(pr):
    return tuple(torch.as_tensor(a) for a in (pr.xs, pr.ys, pr.x_query))


def test_torch_stack_from_construction_matches_numpy():
    w = A.deep_bcd_weights(3, 3, 9, 0.5, 2, kind="legendre")
    pr = _prompts(3, 3, 20)
    got = A.DeepTransformer.from_weights(w)(*_torch(pr)).detach().numpy()
    np.testing.assert_allclose(got, A.deep_predict(pr.xs, pr.ys, pr.x_query, w), atol=1e-10)


def test_learned_bcd_at_init_is_the_construction():
    w = A.deep_bcd_weights(3, 3, 9, 0.4, 2, kind="legendre")
    model = A.LearnedBCD(3, 3, 9, w.depth, eta0=0.4, kind="legendre")
    pr = _prompts(3, 3, 20)
    got = model(*_torch(pr)).detach().numpy()
    np.testing.assert_allclose(got, A.deep_predict(pr.xs, pr.ys, pr.x_query, w), atol=1e-10)
    n_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert n_trainable == 2 * sum(len(f) ** 2 for f, _ in w.schedule)


def test_learned_bcd_with_random_gammas_equals_token_stack():
    w = A.deep_bcd_weights(2, 3, 6, 1.0, 1, kind="legendre")
    model = A.LearnedBCD(2, 3, 6, w.depth, kind="legendre")
    stack = A.DeepTransformer.from_weights(w)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for g, blk, (f, _) in zip(model.gammas, stack.blocks, w.schedule, strict=True):
            g.copy_(torch.randn(g.shape, generator=gen, dtype=g.dtype))
            m = len(f)
            blk.w_kq[3 : 3 + m, 3 : 3 + m] = g
            blk.w_pv[-1, -1] = -1.0
    pr = _prompts(2, 3, 15)
    np.testing.assert_allclose(
        model(*_torch(pr)).detach().numpy(), stack(*_torch(pr)).detach().numpy(), atol=1e-10
    )


def test_deep_transformer_zero_init_and_training_step():
    from icl_book.train import train_in_context

    model = A.DeepTransformer(3, 9, 2, generator=torch.Generator().manual_seed(0))
    pr = _prompts(3, 3, 20)
    assert torch.all(model(*_torch(pr)) == 0)
    plain = A.DeepTransformer(
        3, 9, 2, zero_init_residual=False, generator=torch.Generator().manual_seed(0)
    )
    assert torch.any(plain(*_torch(pr)) != 0)

    def sampler(rng, b):
        return sample_polynomial_prompts(b, 20, 3, 3, rng=rng, kind="legendre")

    res = train_in_context(model, sampler, steps=30, lr=5e-3, seed=0, batch_size=64, progress=False)
    assert np.all(np.isfinite(res.losses)) and res.losses[-10:].mean() < res.losses[:5].mean()
    with pytest.raises(ValueError, match="width"):
        A.DeepTransformer(3, 4, 2)


# ------------------------------------------------------------------------------------------------
# Samplers
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("basis", ["hermite", "legendre"])
def test_polynomial_prompts(basis):
    pr = sample_polynomial_prompts(4000, 3, 2, 3, rng=np.random.default_rng(5), kind=basis)
    assert pr.xs.shape == (4000, 3, 2) and pr.tasks.shape == (4000, 9)
    clean = np.einsum("bf,bf->b", feature_map(pr.x_query, 3, kind=basis), pr.tasks)
    np.testing.assert_allclose(pr.y_query, clean, atol=1e-12)  # noise_var = 0
    # E y² = 1; the Monte Carlo mean of 4,000 heavy-ish tailed y² has sd ~ 0.05: 0.2 is 4 sd.
    assert abs(np.mean(pr.ys**2) - 1.0) < 0.2
    if basis == "legendre":
        assert np.all(np.abs(pr.xs) <= 1)
    again = sample_polynomial_prompts(4000, 3, 2, 3, rng=np.random.default_rng(5), kind=basis)
    np.testing.assert_array_equal(pr.ys, again.ys)
    cubic = sample_cubic_prompts(4000, 3, 2, rng=np.random.default_rng(5), kind=basis)
    np.testing.assert_array_equal(cubic.ys, pr.ys)
    with pytest.raises(ValueError, match="kind must be one of"):
        sample_polynomial_prompts(2, 3, 2, 3, rng=np.random.default_rng(0), kind="fourier")


# ------------------------------------------------------------------------------------------------
# Checks of the chapter's exercises
# ------------------------------------------------------------------------------------------------


def test_checks_pass_on_solutions_and_fail_on_wrong_answers(capsys):
    from math import ceil, comb

    assert check_depth_ex2(block_coordinate_gd_predict)
    assert check_depth_ex3(lambda d, p, w: ceil((comb(d + p, p) - 1) / (w - d - 2)))
    assert "depth-ex3: correct" in capsys.readouterr().out

    def stub(*args):
        raise NotImplementedError()

    for check in (check_depth_ex2, check_depth_ex3):
        with pytest.raises(CheckFailed, match="not implemented"):
            check(stub)

    def one_cycle_only(xs, ys, xq, blocks, eta, n_cycles):
        return block_coordinate_gd_predict(xs, ys, xq, blocks, eta, 1)

    with pytest.raises(CheckFailed, match="Hint"):
        check_depth_ex2(one_cycle_only)
    with pytest.raises(CheckFailed, match="Hint"):
        check_depth_ex3(lambda d, p, w: ceil(comb(d + p, p) / (w - d - 2)))
    with pytest.raises(CheckFailed, match="an integer"):
        check_depth_ex3(lambda d, p, w: 2.5)


def test_deep_transformer_label_norm_is_label_equivariant():
    gen = torch.Generator().manual_seed(0)
    model = A.DeepTransformer(3, 9, 2, zero_init_residual=False, label_norm=True, generator=gen)
    pr = _prompts(3, 3, 20)
    xs, ys, xq = _torch(pr)
    assert torch.allclose(model(xs, 7.0 * ys, xq), 7.0 * model(xs, ys, xq), rtol=1e-12)
    with pytest.raises(TypeError, match="label_norm"):
        A.DeepTransformer(3, 9, 2, label_norm=1)


def test_schedule_fills_the_first_layers():
    """The plan's early layers are full: a stack cut after one block uses its whole scratch.

    The backward-greedy plan alone gave the first layer the remainder (d = 3, p = 2, S = 4: one feature
    and three empty slots). A layer after the embedding can write only features of degree <= 2 (the others
    need a parent in the scratch), so the first layer holds min(S, #features of degree <= 2); for p <= 2
    every layer but the last is full.
    """
    for d in range(1, 5):
        for p in range(1, 5):
            low = n_features(d, min(p, 2))
            for s in range(1, 9):
                try:
                    plan = A.bcd_schedule(d, p, s)
                except ValueError:
                    continue
                assert len(plan[0][0]) == min(s, low), (d, p, s)
                assert not plan[0][1] or len(plan[0][0]) + len(plan[0][1]) <= s
                if p <= 2:
                    assert all(len(f) == s and not c for f, c in plan[:-1]), (d, p, s)
    assert [len(f) for f, _ in A.bcd_schedule(3, 2, 4)] == [4, 4, 1]


def test_depth_one_construction_beats_predicting_zero():
    """With the filled plan, one block of the d = 3, p = 2 construction already beats ŷ = 0."""
    rng = np.random.default_rng(0)
    pr = sample_polynomial_prompts(4000, 50, 3, 2, rng=rng, noise_var=0.01, kind="legendre")
    w = A.deep_bcd_weights(3, 2, 9, 1.0, kind="legendre")
    z = glu_embed_prompts(pr.xs, pr.ys, pr.x_query, w.n_scratch)
    pred = A.layers.readout(A.deep_forward(z, w.layers[:1]).swapaxes(1, 2))
    zero = np.mean(pr.y_query**2)
    assert np.mean((pred - pr.y_query) ** 2) < 0.8 * zero
    assert w.depth == 3


# The compaction as first written (every trial move recomputes all carriers: O(F^3), a minute at
# F = 1,819); the planner now recomputes only the layers a move changes and must give the same plan.
def _plain_compact(plan, n_scratch: int, rank, kind):
    """The planner's compaction as first written: every trial recomputes the whole plan."""
    feats = [list(f) for f, _ in plan]
    for b in range(len(feats) - 1):
        progress = True
        while progress:
            progress = False
            carriers, _ = A.schedule._carriers(feats, kind, rank)
            if len(feats[b]) >= n_scratch:
                break
            prev = set(feats[b - 1]) | set(carriers[b - 1]) if b > 0 else set()
            candidates = sorted(
                ((c, a) for c in range(b + 1, len(feats)) for a in feats[c]),
                key=lambda ca: (ca[1] not in carriers[b], rank[ca[1]]),
            )
            for c, a in candidates:
                if not all(r in prev for r in A.schedule._requirements(a, kind)):
                    continue
                trial = [list(f) for f in feats]
                trial[c].remove(a)
                trial[b].append(a)
                trial[b].sort(key=rank.__getitem__)
                new_carriers, first_needs = A.schedule._carriers(trial, kind, rank)
                if first_needs or any(
                    len(f) + len(k) > n_scratch for f, k in zip(trial, new_carriers, strict=True)
                ):
                    continue
                feats = trial
                progress = True
                break
    while feats and not feats[-1]:
        feats.pop()
    carriers, first_needs = A.schedule._carriers(feats, kind, rank)
    assert not first_needs  # the first layer follows the embedding: it needs nothing
    return [(tuple(f), c) for f, c in zip(feats, carriers, strict=True)]


def test_fast_planner_gives_the_plain_planners_plan(monkeypatch):
    cases = [
        (d, p, s, kind)
        for d in range(1, 6)
        for p in range(1, 7)
        for s in (1, 2, 3, 5, 8)
        for kind in ("hermite", "legendre", "monomial")
        if n_features(d, p) <= 120
    ]
    fast = {c: A.bcd_schedule(*c[:3], kind=c[3]) if _plans(c) else None for c in cases}
    monkeypatch.setattr(A.schedule, "_compact", _plain_compact)
    for c in cases:
        if fast[c] is not None:
            assert A.bcd_schedule(*c[:3], kind=c[3]) == fast[c], c
    assert sum(v is not None for v in fast.values()) > 100


def _plans(case) -> bool:
    d, p, s, kind = case
    return A.min_deep_width(d, p, kind=kind) <= d + 2 + s


def test_min_deep_width_is_the_first_width_with_a_plan():
    """min_deep_width counts requirement levels instead of trying widths; a plan exists exactly from it."""
    for d in range(1, 5):
        for p in range(1, 7):
            for kind in ("hermite", "legendre", "monomial"):
                if n_features(d, p) > 120:
                    continue
                s = A.min_deep_width(d, p, kind=kind) - d - 2
                A.bcd_schedule(d, p, s, kind=kind)
                if s > 1:
                    with pytest.raises(ValueError, match="cannot hold"):
                        A.bcd_schedule(d, p, s - 1, kind=kind)


@pytest.mark.parametrize(
    "call",
    [
        lambda: A.bcd_schedule(12, 4, 3),  # F = 1,819: took 60 s before
        lambda: A.min_deep_width(16, 4),  # refused (F = 4,844); took > 120 s before
        lambda: A.bcd_schedule(14, 4, 3),  # refused (F = 3,059); > 300 s before
        lambda: A.bcd_schedule(2, 41, 30),  # refused: degree cap
        lambda: A.min_deep_width(2, 40),
    ],
)
def test_planner_answers_or_refuses_within_a_second(call):
    start = time.perf_counter()
    try:
        call()
    except ValueError as err:
        assert "too large" in str(err) or "degree must be" in str(err)
    assert time.perf_counter() - start < 2.5  # 1 s on a quiet machine; margin for a loaded CI box


@pytest.mark.parametrize(
    "options",
    [{}, {"label_norm": True}, {"label_norm": True, "output_bound": 0.05}],
    ids=["plain", "label_norm", "bounded"],
)
def test_predictions_by_block_end_at_forward(options):
    """The running predictions read every block with forward's readout; the last row is forward's.

    ``output_bound = 0.05`` saturates most predictions, so a readout that skipped the bound (or the label
    scale) in the running predictions would differ in the last row."""
    gen = torch.Generator().manual_seed(1)
    model = A.DeepTransformer(3, 9, 3, zero_init_residual=False, generator=gen, **options)
    pr = _prompts(3, 3, 20, batch=7)
    running = model.predictions_by_block(pr.xs, 5.0 * pr.ys, pr.x_query)
    assert running.shape == (3, 7)
    assert torch.equal(running[-1], model(pr.xs, 5.0 * pr.ys, pr.x_query))
    # row b is the stack cut after block b + 1
    cut = A.DeepTransformer(3, 9, 2, generator=gen, **options)
    cut.blocks = torch.nn.ModuleList(model.blocks[:2])
    torch.testing.assert_close(running[1], cut(pr.xs, 5.0 * pr.ys, pr.x_query), rtol=0, atol=0)
    states = model.query_states_by_block(pr.xs, 5.0 * pr.ys, pr.x_query)
    assert states.shape == (3, 7, 9)
    if not options:  # the readout is minus the query's label slot
        assert torch.equal(running, -states[..., -1])


def test_predictions_by_block_of_the_construction_are_its_iterates():
    """On the exact construction the running prediction after block t is block-coordinate GD's
    prediction after t block updates."""
    w = A.deep_bcd_weights(2, 3, 6, 0.5, 1, kind="legendre")
    pr = _prompts(2, 3, 15)
    running = A.DeepTransformer.from_weights(w).predictions_by_block(pr.xs, pr.ys, pr.x_query)
    assert running.shape == (w.depth, 6)
    blocks = list(w.feature_blocks)
    for t in range(w.depth):
        direct = block_coordinate_gd_predict(pr.xs, pr.ys, pr.x_query, blocks[: t + 1], 0.5, 1)
        np.testing.assert_allclose(running[t].detach().numpy(), direct, atol=1e-12)


def test_predictions_by_block_name_the_bad_argument():
    model = A.DeepTransformer(3, 9, 2, generator=torch.Generator().manual_seed(0))
    pr = _prompts(3, 3, 20)
    with pytest.raises(ValueError, match="xs"):
        model.predictions_by_block(pr.xs[..., :2], pr.ys, pr.x_query)
    with pytest.raises(ValueError, match="ys"):
        model.predictions_by_block(pr.xs, pr.ys[:, :5], pr.x_query)
    with pytest.raises(ValueError, match="x_query"):
        model.query_states_by_block(pr.xs, pr.ys, pr.x_query[:, :1])
    bad = pr.ys.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="ys"):
        model.predictions_by_block(pr.xs, bad, pr.x_query)


def test_a_stack_too_large_to_build_is_refused_before_it_is_built():
    """``n_cycles`` multiplies the layers: a trillion cycles is refused, by the cost guard and, with
    the budget raised, by the size of the weights (memory), not attempted."""
    with pytest.raises(CostRefused):
        A.deep_bcd_weights(2, 3, width=6, eta=0.5, n_cycles=10**12)
    with budget(operations=1e17), pytest.raises(ValueError, match="weight entries"):
        A.deep_bcd_weights(2, 3, width=6, eta=0.5, n_cycles=10**12)
