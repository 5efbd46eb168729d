"""The shipped deep-transformer weights (chapter 6): healthy on fresh prompts, and regenerated bitwise.

"Catastrophic" is measured two ways on 10,000 fresh prompts per task: no prompt's squared error may exceed 100
times that prompt's own label scale (its mean squared context label), and a model's worst prompt may not be
more than twice as bad as least squares' worst prompt on the same prompts. The plain ratio max/median is not
the test: least squares itself has max/median of 90 to 140 on these tasks (the targets' scale varies from
prompt to prompt, and the Legendre targets have heavy-ish tails), and the ratio grows as a model's median
improves. The last test shows both criteria catching the failure the previous weights had.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from icl_book.estimators import ols_predict
from icl_book.pretrain_depth import (
    EXPERIMENTS,
    TASK_DEGREES,
    data_path,
    load_pretrained,
    make_sampler,
    model_arrays,
    train_one,
)

N_FRESH = 10_000


@pytest.fixture(scope="module", params=sorted(EXPERIMENTS))
def study(request):
    path = data_path(request.param)
    if not path.exists():
        # Not yet shipped (issue 21 is open): chapter 6 makes no claim about these models until they are.
        pytest.skip(
            f"shipped weights {path.name} not generated yet: python -m booktools.pretrain_depth"
        )
    return load_pretrained(request.param)


def test_every_shipped_run_is_present_with_its_curves(study):
    cfg = study.config
    assert len(study.models) == len(cfg.tasks) * len(cfg.depths) * len(cfg.seeds)
    assert len(cfg.seeds) >= 3
    for run in study.models:
        assert np.all(np.isfinite(run.eval_losses)) and run.eval_losses[-1] < run.eval_losses[0]
        assert run.losses.shape == (cfg.steps,)


def test_no_catastrophic_prompt_on_10000_fresh_prompts(study):
    cfg = study.config
    for task in cfg.tasks:
        pr = make_sampler(TASK_DEGREES[task], cfg)(np.random.default_rng(2024), N_FRESH)
        scale = np.mean(pr.ys**2, axis=1)
        ls = (ols_predict(*pr[:3]) - pr.y_query) ** 2
        for depth in cfg.depths:
            for run in study.select(task, depth):
                with torch.no_grad():
                    pred = run.model(*(torch.as_tensor(a) for a in pr[:3])).numpy()
                err = (pred - pr.y_query) ** 2
                where = f"{cfg.name} {task} depth {depth} seed {run.seed}"
                assert np.all(np.isfinite(err)), where
                assert np.max(err / scale) < 100, where
                assert err.max() < 2 * ls.max(), where


def test_the_criterion_catches_the_old_failure():
    """A model with one blown-up prompt (the old depth-4 model: 5.5e4 at median 0.07) fails the test."""
    rng = np.random.default_rng(0)
    err = rng.chisquare(1, N_FRESH) * 0.07
    scale = np.ones(N_FRESH) * 0.3
    ls_max = 30.0  # least squares' worst prompt on these tasks is 25 to 35
    assert np.max(err / scale) < 100 and err.max() < 2 * ls_max
    err[17] = 5.5e4
    assert np.max(err / scale) > 100 and err.max() > 2 * ls_max


@pytest.mark.slow
def test_regenerating_one_run_reproduces_the_shipped_file_bitwise():
    if not data_path("d3").exists():
        pytest.skip(
            "shipped weights depth_d3.npz not generated yet: python -m booktools.pretrain_depth"
        )
    torch.set_num_threads(1)
    study_cfg = EXPERIMENTS["d3"]
    run = train_one(study_cfg, "quadratic", 1, 0)
    fresh = model_arrays(run)
    with np.load(data_path("d3")) as shipped:
        for key, value in fresh.items():
            if key.endswith("cpu_seconds"):
                continue
            assert np.array_equal(shipped[key], value), key
    assert dataclasses.asdict(study_cfg) == dataclasses.asdict(load_pretrained("d3").config)
