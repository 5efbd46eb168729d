"""The convergence rule of :mod:`icl_book.train.protocol` and the studies it decides.

What is tested: "converged" needs two consecutive flat doublings past a minimum (a run still falling by
two standard errors per doubling is never called converged, and is called so rarely by chance: the
simulated rates against their closed forms); a rise is reported as a rise; a validation set of several
parts (a mix of context lengths) is measured part by part; a resumed checkpoint is re-decided by the
rule, and restarted where its validation set changed; a study trained in local processes or on a dask
cluster writes the checkpoints a serial run writes.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy.stats import norm

from icl_book import studies
from icl_book.limits import budget
from icl_book.tasks import sample_linear_prompts
from icl_book.train import (
    BatchedTrainer,
    ConvergenceRecord,
    Member,
    converged_at,
    false_convergence_rate,
    train_to_convergence,
)
from icl_book.train.protocol import FLAT_DOUBLINGS

from .test_train import Constant, LinearReadout

NAN = float("nan")


def test_converged_needs_two_flat_doublings():
    assert FLAT_DOUBLINGS == 2
    assert converged_at([1.0, 0.96, 0.95], [NAN, 0.06, 0.06])
    # one flat doubling after a fall is not enough: the run may still be falling
    assert not converged_at([1.0, 0.9, 0.89], [NAN, 0.06, 0.06])
    assert not converged_at([1.0, 0.95], [NAN, 0.06])
    assert not converged_at([1.0], [NAN])
    assert not converged_at([1.0, 1.0, 1.0], [NAN, NAN, 0.1])  # no paired error: no verdict
    assert converged_at([0.5, 0.5, 0.5], [NAN, 0.0, 0.0])  # predictions did not change at all


def test_a_run_falling_by_two_standard_errors_per_doubling_is_never_converged():
    se = 0.01
    curve = [1.0 - 2 * se * k for k in range(10)]
    for k in range(3, 11):
        assert not converged_at(curve[:k], [NAN] + [se] * (k - 1))
    # falling by exactly one standard error is the edge of "flat" (the rule is <= 1 SE)
    assert converged_at([1.0, 0.99, 0.98], [NAN, 0.01 + 1e-12, 0.01 + 1e-12])


def test_nothing_is_converged_before_the_minimum():
    mse, se = [1.0, 1.0, 1.0, 1.0], [NAN, 0.1, 0.1, 0.1]
    assert converged_at(mse, se, [1000, 2000, 4000, 8000], min_steps=8000)
    assert not converged_at(mse[:3], se[:3], [1000, 2000, 4000], min_steps=8000)
    with pytest.raises(ValueError, match="min_steps needs eval_steps"):
        converged_at(mse, se, min_steps=8000)
    with pytest.raises(ValueError, match="change_se must have one entry per checkpoint"):
        converged_at(mse, se[:2])


@pytest.mark.parametrize("drift", [0.0, 1.0, 2.0])
def test_false_convergence_rates_match_their_closed_forms(drift):
    # one decision: P(|−c + ε| <= 1) = Φ(1 + c) − Φ(c − 1) for the old rule, its square for the new
    rng = np.random.default_rng(3)
    p_one = norm.cdf(1 + drift) - norm.cdf(drift - 1)
    old = false_convergence_rate(drift, rule="one doubling", checks=1, trials=200_000, rng=rng)
    new = false_convergence_rate(drift, rule="two doublings", checks=1, trials=200_000, rng=rng)
    for got, want in ((old, p_one), (new, p_one**2)):
        assert abs(got - want) < 4 * math.sqrt(want * (1 - want) / 200_000)


def test_the_new_rule_calls_a_falling_run_converged_far_less_often():
    rng = np.random.default_rng(4)
    rate = {
        (rule, drift): false_convergence_rate(drift, rule=rule, checks=6, rng=rng)
        for rule in ("one doubling", "two doublings")
        for drift in (1.0, 2.0)
    }
    # six decisions, as from 2,000 to 64,000 steps: the old rule passed a run falling by 2 SE per
    # doubling more than half the time
    assert rate["one doubling", 2.0] > 0.5 and rate["two doublings", 2.0] < 0.15
    assert rate["two doublings", 1.0] < rate["one doubling", 1.0] - 0.25


def test_a_rise_is_reported_as_a_rise():
    rec = ConvergenceRecord("r", [1, 2, 4], [1.0, 0.8, 0.9], [0.1] * 3, [NAN, 0.05, 0.05])
    assert rec.changes == pytest.approx([-4.0, 2.0])
    assert rec.trend == "rising"
    rec.val_mse[-1] = 0.7
    assert rec.trend == "falling"
    rec.val_mse[-1] = 0.81
    assert rec.trend == "flat"


def linear(n):
    return lambda rng, b: sample_linear_prompts(b, n, 3, rng=rng, noise_var=0.1)


def test_a_validation_set_of_parts_is_measured_part_by_part():
    torch.set_num_threads(1)
    parts = {
        8: linear(8)(np.random.default_rng(1), 400),
        32: linear(32)(np.random.default_rng(2), 400),
    }
    members = [
        Member(
            "m", LinearReadout(3, generator=torch.Generator().manual_seed(0)), linear(8), 1, 0.01
        )
    ]
    trainer = BatchedTrainer(members, batch_size=16)
    rec = train_to_convergence(trainer, {"m": parts}, first_check=5, max_steps=10)["m"]
    assert rec.val_parts == ["8", "32"] and len(rec.val_mse_parts) == 2
    for k in range(2):
        assert rec.val_mse[k] == pytest.approx(np.mean(rec.val_mse_parts[k]), rel=1e-12)
    errors = [float(np.mean((trainer.predict(0, p) - p.y_query) ** 2)) for p in parts.values()]
    assert rec.val_mse_parts[-1] == pytest.approx(errors, rel=1e-12)


def test_a_mix_run_is_validated_at_every_length_of_its_mix():
    cohort = next(c for c in studies.cohorts("glu") if c.name == "block16")
    mix = next(r for r in cohort.runs if r.context_len == 0)
    sets = studies.validation_prompts(cohort, mix)
    assert sorted(sets) == sorted(studies.GLU_MIX)
    for n, prompts in sets.items():
        assert prompts.xs.shape == (cohort.val_size, n, studies.GLU_DIM)
    fixed = next(r for r in cohort.runs if r.context_len == 100)
    assert {n: p.xs.shape for n, p in studies.validation_prompts(cohort, fixed).items()} == {
        100: (cohort.val_size, 100, studies.GLU_DIM)
    }


def test_every_cohort_has_a_minimum_of_four_times_its_warmup_and_hold():
    for study in studies.STUDIES:
        for c in studies.cohorts(study):
            assert c.min_steps >= 4 * max(c.warmup, c.decay_start)
            if any(r.model in ("block", "lsa", "deep") for r in c.runs):
                assert c.min_steps >= 8000, c.name
    with pytest.raises(ValueError, match="min_steps must be at least four times"):
        replace(studies.cohorts("depth")[0], min_steps=100)


def test_a_resumed_run_is_decided_again_by_the_current_rule(tmp_path):
    """A checkpoint the one-doubling rule had called converged trains on until two doublings are flat."""
    torch.set_num_threads(1)
    sampler = linear(8)
    val = {"m": sampler(np.random.default_rng(5), 4000)}

    def trainer():
        model = LinearReadout(3, generator=torch.Generator().manual_seed(0))
        return BatchedTrainer([Member("m", model, sampler, 1, 1e-3)], batch_size=32)

    path = str(tmp_path / "old.pt")
    train_to_convergence(trainer(), val, first_check=10, max_steps=20, checkpoint=path)
    saved = torch.load(path, weights_only=False)
    saved["records"]["m"]["converged"] = saved["records"]["m"]["finished"] = True  # the old verdict
    torch.save(saved, path)
    out = train_to_convergence(trainer(), val, first_check=10, max_steps=40, checkpoint=path)["m"]
    assert out.eval_steps == [10, 20, 40] and out.finished and not out.converged


def test_a_changed_validation_set_restarts_the_curve_where_the_run_stands(tmp_path):
    torch.set_num_threads(1)
    sampler = linear(8)
    members = [Member("c", Constant(), sampler, 1, 0.1)]
    path = str(tmp_path / "ck.pt")
    old = {"c": sampler(np.random.default_rng(5), 300)}
    train_to_convergence(
        BatchedTrainer(members, batch_size=8), old, first_check=5, max_steps=10, checkpoint=path
    )
    new = {"c": {8: old["c"], 16: linear(16)(np.random.default_rng(6), 300)}}
    trainer = BatchedTrainer([Member("c", Constant(), sampler, 1, 0.1)], batch_size=8)
    rec = train_to_convergence(trainer, new, first_check=5, max_steps=40, checkpoint=path)["c"]
    # restarted at step 10 on the new set, then two flat doublings
    assert rec.eval_steps == [10, 20, 40] and rec.converged
    assert math.isnan(rec.change_se[0]) and rec.val_parts == ["8", "16"]


def tiny_study():
    runs = tuple(
        studies.RunSpec("block", "quadratic", 10, seed, 0.01, n_scratch=4, hidden=4)
        for seed in range(3)
    )
    common = dict(
        batch_size=8, warmup=0, clip_grad=1.0, first_check=4, max_steps=16, min_steps=0, val_size=50
    )
    return [
        studies.Cohort("a", runs[:2], **common),
        studies.Cohort("b", runs[2:], **common, dtype="float32"),
    ]


def checkpoint(path):
    saved = torch.load(path, weights_only=False)
    return saved["trainer"]["params"], saved["records"]


def assert_same_checkpoints(a, b):
    for name in ("a", "b"):
        pa, ra = checkpoint(a / f"tiny_{name}.pt")
        pb, rb = checkpoint(b / f"tiny_{name}.pt")
        assert pa.keys() == pb.keys()
        for k in pa:
            assert torch.equal(pa[k], pb[k]), k
        assert repr(ra) == repr(rb)  # nan == nan in repr


@pytest.mark.slow
def test_a_study_in_processes_or_on_a_dask_cluster_equals_a_serial_run(tmp_path, monkeypatch):
    from dask.distributed import Client, LocalCluster

    monkeypatch.setitem(studies.STUDIES, "tiny", tiny_study())
    serial = studies.train_study("tiny", checkpoints=tmp_path / "serial", log=None)
    assert sorted(serial) == sorted(r.name for c in tiny_study() for r in c.runs)
    studies.train_study("tiny", checkpoints=tmp_path / "processes", executor="processes", log=None)
    assert_same_checkpoints(tmp_path / "serial", tmp_path / "processes")
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster,
        Client(cluster) as client,
    ):
        studies.train_study("tiny", checkpoints=tmp_path / "dask", executor=client, log=None)
    assert_same_checkpoints(tmp_path / "serial", tmp_path / "dask")


def test_bad_executor_and_device_name_themselves():
    with pytest.raises(TypeError, match="executor must be None, 'processes'"):
        studies.train_study("glu", executor="threads")
    with pytest.raises((TypeError, ValueError, RuntimeError), match="device"):
        studies.train_study("glu", device="nonsense-device")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no GPU on this machine")
def test_a_study_trains_on_a_gpu_with_one_argument(tmp_path, monkeypatch):
    monkeypatch.setitem(studies.STUDIES, "tiny", tiny_study())
    runs = studies.train_study("tiny", checkpoints=tmp_path, device="cuda", log=None)
    assert all(r.record.eval_steps for r in runs.values())


def test_a_long_run_allocates_its_history_as_it_trains():
    """``steps=10**9`` once allocated 16 GB of history before the first step."""
    import tracemalloc

    from icl_book.attention import LinearSelfAttention
    from icl_book.train import train_in_context

    class Stop(Exception):
        pass

    calls = []

    def sampler(rng, b):
        calls.append(b)
        if len(calls) > 3:
            raise Stop
        return linear(4)(rng, b)

    model = LinearSelfAttention(3, generator=torch.Generator().manual_seed(0))
    tracemalloc.start()
    # its declared cost refuses it by default (tests/test_training_validation.py): asked for
    with pytest.raises(Stop), budget(operations=math.inf, bytes=math.inf):
        train_in_context(model, sampler, steps=10**9, lr=0.01, seed=0, batch_size=4)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1e9, peak  # the old history took 2 × 8 GB at once
