"""Tests of the seeded training loop :mod:`icl_book.train`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icl_book.tasks import sample_linear_prompts
from icl_book.train import (
    TrainingDiverged,
    TrainResult,
    evaluate_in_context,
    predict_in_context,
    prompts_to_torch,
    train_in_context,
)

DIM, CTX = 3, 8


class LinearReadout(torch.nn.Module):
    """ŷ = θ · (1/N) Σ y_i x_i ⊙ x_q: a tiny trainable model with the book's interface."""

    def __init__(self, dim, generator=None):
        super().__init__()
        self.theta = torch.nn.Parameter(
            0.1 * torch.randn(dim, generator=generator, dtype=torch.float64)
        )

    def forward(self, xs, ys, x_query):
        g = torch.einsum("bn,bnd->bd", ys, xs) / xs.shape[1]
        return (g * x_query) @ self.theta


class Constant(torch.nn.Module):
    """A model whose output ignores its only parameter: the loss cannot improve."""

    def __init__(self):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))

    def forward(self, xs, ys, x_query):
        return 0.0 * self.unused.sum() + torch.zeros(xs.shape[0], dtype=xs.dtype)


def sampler(rng, batch_size):
    return sample_linear_prompts(batch_size, CTX, DIM, rng=rng, noise_var=0.1)


def make_model(seed=0):
    return LinearReadout(DIM, generator=torch.Generator().manual_seed(seed))


def test_reruns_are_bitwise_identical_and_seed_matters():
    runs = [
        train_in_context(
            make_model(), sampler, steps=30, lr=0.05, seed=3, batch_size=64, progress=False
        )
        for _ in range(2)
    ]
    other = train_in_context(
        make_model(), sampler, steps=30, lr=0.05, seed=4, batch_size=64, progress=False
    )
    assert isinstance(runs[0], TrainResult)
    assert runs[0].losses.shape == (30,)
    np.testing.assert_array_equal(runs[0].losses, runs[1].losses)
    assert torch.equal(runs[0].model.theta, runs[1].model.theta)
    # A different data seed must give a different run (otherwise the seed is ignored).
    assert not np.array_equal(runs[0].losses, other.losses)


def test_training_reduces_the_loss_and_global_rng_is_untouched():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    res = train_in_context(
        make_model(),
        sampler,
        steps=200,
        lr=0.05,
        seed=0,
        batch_size=256,
        schedule="cosine",
        progress=False,
    )
    assert torch.equal(torch.random.get_rng_state(), before)
    # Initial θ ≈ 0.1: loss ≈ E y² − small = about 2.5. The best θ = c·1 has risk
    # d + σ² − d²/tr(S) = 1.117 (S = (1 + 1/N + (d + σ²)/N) I); 1.3 leaves room for the batch noise.
    assert res.losses[0] > 2.0
    assert res.final_loss < 1.3
    assert res.steps_run == 200 and not res.stopped_early


def test_schedules():
    const = train_in_context(
        make_model(), sampler, steps=10, lr=0.1, seed=0, batch_size=8, progress=False
    )
    np.testing.assert_array_equal(const.lrs, np.full(10, 0.1))
    cos = train_in_context(
        make_model(),
        sampler,
        steps=10,
        lr=0.1,
        seed=0,
        batch_size=8,
        schedule="cosine",
        progress=False,
    )
    assert cos.lrs[0] == pytest.approx(0.1)
    assert np.all(np.diff(cos.lrs) < 0) and cos.lrs[-1] < 0.01
    warm = train_in_context(
        make_model(), sampler, steps=10, lr=0.1, seed=0, batch_size=8, warmup=4, progress=False
    )
    np.testing.assert_allclose(warm.lrs[:4], [0.025, 0.05, 0.075, 0.1])


def test_divergence_raises_instead_of_returning_garbage():
    with pytest.raises(TrainingDiverged, match="lower lr"):
        train_in_context(
            make_model(), sampler, steps=5, lr=1e300, seed=0, batch_size=8, progress=False
        )


def test_evaluate_matches_manual_mse_and_restores_mode():
    model = make_model()
    prompts = sample_linear_prompts(100, CTX, DIM, rng=np.random.default_rng(1), noise_var=0.1)
    xs, ys, xq, yq = prompts_to_torch(prompts)
    with torch.no_grad():
        manual = float(torch.mean((model(xs, ys, xq) - yq) ** 2))
    model.train()
    # Chunking changes only the order of a float sum: agreement to rounding (1e-13 relative).
    assert evaluate_in_context(model, prompts) == pytest.approx(manual, rel=1e-13)
    assert evaluate_in_context(model, prompts, chunk_size=7) == pytest.approx(manual, rel=1e-13)
    assert model.training


def test_predict_matches_the_forward_pass_in_any_chunking_and_restores_mode():
    model = make_model()
    prompts = sample_linear_prompts(100, CTX, DIM, rng=np.random.default_rng(1), noise_var=0.1)
    with torch.no_grad():
        whole = model(*prompts_to_torch(prompts)[:3]).numpy()
    model.train()
    for chunk in (1, 7, 100, 512):
        got = predict_in_context(model, prompts, chunk_size=chunk)
        assert got.dtype == np.float64 and got.shape == (100,)
        np.testing.assert_allclose(got, whole, rtol=1e-13, atol=1e-15)
    assert model.training
    with pytest.raises(ValueError, match="chunk_size"):
        predict_in_context(model, prompts, chunk_size=0)
    with pytest.raises(TypeError, match="model"):
        predict_in_context(lambda *a: None, prompts)


def test_eval_and_early_stop():
    val = sample_linear_prompts(64, CTX, DIM, rng=np.random.default_rng(9))
    res = train_in_context(
        Constant(),
        sampler,
        steps=100,
        lr=0.1,
        seed=0,
        batch_size=8,
        eval_prompts=val,
        eval_every=5,
        early_stop_patience=2,
        progress=False,
    )
    # First evaluation sets the best loss; two more without improvement stop the run at step 15.
    assert res.stopped_early and res.steps_run == 15
    np.testing.assert_array_equal(res.eval_steps, [5, 10, 15])
    res2 = train_in_context(
        make_model(),
        sampler,
        steps=20,
        lr=0.05,
        seed=0,
        batch_size=8,
        eval_prompts=val,
        progress=False,
    )
    assert res2.eval_steps[-1] == 20 and res2.eval_losses.shape == res2.eval_steps.shape


def test_progress_bar_goes_to_stderr_only_when_asked(capsys):
    train_in_context(make_model(), sampler, steps=3, lr=0.01, seed=0, batch_size=4, progress=False)
    assert capsys.readouterr().err == ""
    train_in_context(make_model(), sampler, steps=3, lr=0.01, seed=0, batch_size=4, progress=True)
    assert "training" in capsys.readouterr().err


def test_num_threads_is_restored():
    before = torch.get_num_threads()
    train_in_context(
        make_model(), sampler, steps=2, lr=0.01, seed=0, batch_size=4, progress=False, num_threads=1
    )
    assert torch.get_num_threads() == before


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"steps": 0}, "steps must be an integer >= 1"),
        ({"lr": -1.0}, "lr must be > 0"),
        ({"seed": -1}, "seed must be an integer >= 0"),
        ({"batch_size": 0}, "batch_size"),
        ({"schedule": "linear"}, "schedule must be one of"),
        ({"clip_grad": 0.0}, "clip_grad must be > 0"),
        ({"weight_decay": -0.1}, "weight_decay must be >= 0"),
        ({"early_stop_patience": 2}, "early_stop_patience needs eval_prompts"),
        ({"warmup": 10}, "warmup must be < steps"),
    ],
)
def test_bad_arguments(kwargs, match):
    args = {"steps": 10, "lr": 0.01, "seed": 0, "batch_size": 4, "progress": False} | kwargs
    with pytest.raises(ValueError, match=match):
        train_in_context(make_model(), sampler, **args)


def test_bad_model_output_and_sampler():
    class WrongShape(LinearReadout):
        def forward(self, xs, ys, x_query):
            return super().forward(xs, ys, x_query)[:, None]

    with pytest.raises(ValueError, match=r"must return a tensor of shape \(B,\)"):
        train_in_context(
            WrongShape(DIM), sampler, steps=1, lr=0.1, seed=0, batch_size=4, progress=False
        )
    with pytest.raises(TypeError, match="sample_prompts must be a callable"):
        train_in_context(make_model(), None, steps=1, lr=0.1, seed=0, batch_size=4, progress=False)
    with pytest.raises(TypeError, match="prompts must be an icl_book.tasks.Prompts"):
        train_in_context(
            make_model(), lambda r, b: (1, 2), steps=1, lr=0.1, seed=0, batch_size=4, progress=False
        )
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        train_in_context(
            lambda *a: a, sampler, steps=1, lr=0.1, seed=0, batch_size=4, progress=False
        )
