"""The shipped converged studies of chapters 5 and 6 (:mod:`icl_book.studies`).

What is tested: every run of a study is in its shipped file with its spec, its protocol record and its CPU
time; a run called converged really met the protocol's rule at its last check; and on 10,000 fresh prompts
from a seed the book does not use, no shipped model's worst prompt exceeds five times least squares' worst
on the same prompts (at every context length the model was trained on; a run that diverged is flagged
where it did and not scored).

Five times, not once: least squares' worst prompt is not a bound a good model meets on every draw (the
single worst of 10,000 prompts is noisy, and on this seed's prompts some shipped models' worst exceeds
least squares' worst), while the failure this test exists for (a deep stack's error of 1e5 on one prompt
in 10,000) is orders of magnitude beyond five times it. The chapters quote the ratio they measure on their own prompts and this test's bound
in these words: "no model's worst prompt exceeds five times least squares' worst".
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icl_book import studies
from icl_book.estimators import ols_predict
from icl_book.train import predict_in_context

SHIPPED = ["glu", "depth"]
N_FRESH = 10_000
UNUSED_SEED = 90_210  # no chapter, test or validation set draws from it
TAIL_FACTOR = 5  # a model's worst prompt may reach this many times least squares' worst


@pytest.fixture(scope="module", params=SHIPPED)
def study(request):
    return request.param, studies.load_study(request.param)


def test_every_run_is_shipped_with_its_spec_record_and_cpu_time(study):
    name, runs = study
    expected = {r.name: r for c in studies.cohorts(name) for r in c.runs}
    assert set(runs) == set(expected)
    for key, run in runs.items():
        assert run.spec == expected[key], key
        rec = run.record
        assert rec.eval_steps and np.all(np.isfinite(rec.val_mse)), key
        assert len(rec.val_mse) == len(rec.eval_steps) == len(rec.val_se), key
        assert run.cpu_seconds > 0 and np.all(np.isfinite(run.losses)), key
        assert not rec.converged or rec.finished, key


def test_a_run_called_converged_met_the_rule_at_its_last_check(study):
    name, runs = study
    violations = []
    for key, run in runs.items():
        rec = run.record
        if not rec.converged:
            continue
        # the rule, from the record's curve: past the cohort's minimum, two flat doublings
        cohort = next(c for c in studies.cohorts(name) if run.spec in c.runs)
        flat = [
            abs(rec.val_mse[k] - rec.val_mse[k - 1]) <= rec.change_se[k]
            for k in range(max(1, len(rec.val_mse) - 2), len(rec.val_mse))
        ]
        if rec.steps < cohort.min_steps or len(flat) < 2 or not all(flat):
            violations.append(key)
    assert violations == []


@pytest.mark.slow  # 10,000 prompts through every shipped model
def test_no_models_worst_prompt_exceeds_five_times_least_squares_worst(study):
    torch.set_num_threads(1)
    _, runs = study
    beyond = []
    by_setting = {}
    for run in runs.values():
        if run.status == "diverged":
            # stopped at its last finite step and flagged; the chapter reports it and scores none
            # of its predictions (test_a_diverged_run_is_flagged_where_it_diverged)
            continue
        spec = run.spec
        lengths = studies.GLU_MIX if spec.context_len == 0 else (spec.context_len,)
        for n in lengths:
            by_setting.setdefault((spec.task, spec.model, spec.input_dim, n), []).append(run)
    for (task, _, _, n), group in sorted(by_setting.items()):
        rng = np.random.default_rng([UNUSED_SEED, n, len(task)])
        pr = studies.make_sampler(group[0].spec, n)(rng, N_FRESH)
        ls_worst = np.max((ols_predict(*pr[:3]) - pr.y_query) ** 2)
        for run in group:
            err = (predict_in_context(run.model, pr) - pr.y_query) ** 2
            where = (
                f"{run.spec.name} at N = {n}: worst {err.max():.3g}, least squares' {ls_worst:.3g}"
            )
            assert np.all(np.isfinite(err)), where
            if not err.max() <= TAIL_FACTOR * ls_worst:
                beyond.append(f"{where} ({err.max() / ls_worst:.2f}x)")
    assert beyond == [], f"worst prompt above {TAIL_FACTOR}x least squares' worst: {beyond}"


def test_a_diverged_run_is_flagged_where_it_diverged(study):
    _, runs = study
    for key, run in runs.items():
        rec = run.record
        if rec.diverged_at:
            assert rec.finished and not rec.converged, key
            assert rec.diverged_at >= rec.eval_steps[-1], key
            assert run.status == "diverged", key
