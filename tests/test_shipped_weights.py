"""The shipped deep-transformer weights (chapter 6): healthy on fresh prompts, and regenerated bitwise.

"Catastrophic" is measured against each prompt's own label scale: on 10,000 fresh prompts no shipped model may
have a squared error above 100 times that prompt's mean squared context label. (The plain ratio max/median is
above 100 for least squares itself on these tasks — the targets' scale varies from prompt to prompt — so it is
reported beside, in chapter 6, not used as the test; the test also bounds it by least squares' own ratio.)
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
        pytest.fail(f"missing shipped weights {path} (python -m booktools.pretrain_depth)")
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
                assert err.max() / np.median(err) < 2 * ls.max() / np.median(ls), where


def test_the_criterion_catches_the_old_failure():
    """A model with one blown-up prompt (the old depth-4 model: 5.5e4 at median 0.07) fails the test."""
    rng = np.random.default_rng(0)
    err = rng.chisquare(1, N_FRESH) * 0.07
    scale = np.ones(N_FRESH) * 0.3
    assert np.max(err / scale) < 100
    err[17] = 5.5e4
    assert np.max(err / scale) > 100


@pytest.mark.slow
def test_regenerating_one_run_reproduces_the_shipped_file_bitwise():
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
