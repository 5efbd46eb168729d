"""The batched trainer and the convergence protocol of :mod:`icl_book.train` (chapters 5-6's studies).

What is tested: a batched run equals each member trained alone (Adam, schedule, clipping, its own data
and learning rate); the protocol flags a run that cannot converge within its bound and stops one that has
converged; a run stopped and resumed from its checkpoint is bitwise the uninterrupted run (same machine,
same thread count: that is where bitwise is true); bad arguments name themselves.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from icl_book import studies
from icl_book.attention import (
    TransformerBlock,
    glu_lsa_block_weights,
)
from icl_book.tasks import sample_linear_prompts, sample_quadratic_prompts
from icl_book.train import (
    BatchedTrainer,
    Member,
    TrainingDiverged,
    check_steps,
    prompts_to_torch,
    train_in_context,
    train_to_convergence,
)

from .test_train import Constant, LinearReadout


def quadratic(n):
    return lambda rng, b: sample_quadratic_prompts(b, n, 3, rng=rng, noise_var=0.1)


def block(seed):
    return TransformerBlock(3, 6, 6, init_scale=0.25, generator=torch.Generator().manual_seed(seed))


def block_members():
    # three members: two context lengths (two shape groups), three learning rates
    return [
        Member(f"m{s}", block(s), quadratic(12 if s < 2 else 20), 10 + s, 0.01 * (s + 1), 5)
        for s in range(3)
    ]


@pytest.mark.parametrize("chunk_size", [1, 2])
def test_batched_training_equals_training_each_member_alone(chunk_size):
    torch.set_num_threads(1)
    trainer = BatchedTrainer(block_members(), batch_size=16, clip_grad=0.5, chunk_size=chunk_size)
    for _ in range(40):
        trainer.step()
    for i, m in enumerate(block_members()):
        alone = train_in_context(
            m.model,
            m.sample_prompts,
            steps=40,
            lr=m.lr,
            seed=m.seed,
            batch_size=16,
            clip_grad=0.5,
            schedule="rsqrt",
            warmup=m.warmup,
        )
        np.testing.assert_allclose(trainer.losses[i], alone.losses, rtol=1e-10, atol=1e-12)
        batched = trainer.model(i).state_dict()
        for key, value in alone.model.state_dict().items():
            torch.testing.assert_close(batched[key], value, rtol=1e-10, atol=1e-12)
    # the members really differ (each has its own data, weights and learning rate)
    assert trainer.losses[0] != trainer.losses[1]


def test_only_active_members_move():
    trainer = BatchedTrainer(block_members(), batch_size=8)
    before = {k: v.clone() for k, v in trainer.params.items()}
    trainer.step([1])
    for value, old in zip(trainer.params.values(), before.values(), strict=True):
        assert torch.equal(value[0], old[0]) and torch.equal(value[2], old[2])
        assert not torch.equal(value[1], old[1]) or old[1].abs().sum() == 0
    assert list(trainer.steps) == [0, 1, 0]


def linear_members(lr):
    sampler = lambda rng, b: sample_linear_prompts(b, 8, 3, rng=rng, noise_var=0.1)  # noqa: E731
    model = LinearReadout(3, generator=torch.Generator().manual_seed(0))
    return [Member("linear", model, sampler, 1, lr)], sampler


def test_a_run_that_cannot_converge_within_its_bound_is_flagged():
    members, sampler = linear_members(1e-3)  # far too small a step to settle in 40 steps
    val = sampler(np.random.default_rng(5), 20_000)
    rec = train_to_convergence(
        BatchedTrainer(members, batch_size=32), {"linear": val}, first_check=10, max_steps=40
    )["linear"]
    assert rec.eval_steps == [10, 20, 40]
    assert rec.finished and not rec.converged
    assert abs(rec.val_mse[-1] - rec.val_mse[-2]) > rec.change_se[-1]
    # the paired standard error is far below the plain one: the prompts' own spread cancels
    assert rec.change_se[-1] < rec.val_se[-1] / 5


def test_a_run_whose_loss_becomes_nonfinite_is_stopped_flagged_and_the_others_train_on():
    """A multi-hour study must not die because one member diverged, nor hide that it did."""
    torch.set_num_threads(1)
    (ok,), sampler = linear_members(0.05)
    # Adam moves every weight by about lr per step: after one step of lr 1e200 the predictions
    # are ~1e200 and their squared errors overflow float64
    bad_model = LinearReadout(3, generator=torch.Generator().manual_seed(1))
    bad = Member("bad", bad_model, sampler, 2, 1e200)
    val = sampler(np.random.default_rng(5), 500)
    both = BatchedTrainer([ok, bad], batch_size=8)
    logged = []
    recs = train_to_convergence(
        both, {"linear": val, "bad": val}, first_check=10, max_steps=40, log=logged.append
    )
    assert recs["bad"].diverged_at == 2 and recs["bad"].finished and not recs["bad"].converged
    assert recs["bad"].eval_steps == [] and both.steps[1] == 1
    assert any("bad diverged at step 2" in line for line in logged)
    # it keeps the weights of its last (finite) step
    assert all(torch.isfinite(w).all() for w in both.model(1).parameters())
    alone = BatchedTrainer(linear_members(0.05)[0], batch_size=8)
    rec_alone = train_to_convergence(alone, {"linear": val}, first_check=10, max_steps=40)
    assert recs["linear"] == rec_alone["linear"]
    for a, b in zip(both.model(0).parameters(), alone.model(0).parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    alone_bad = BatchedTrainer([Member("bad", LinearReadout(3), sampler, 2, 1e200)], batch_size=8)
    alone_bad.step()
    with pytest.raises(TrainingDiverged, match="bad"):
        alone_bad.step()  # the default still raises


def test_a_run_that_has_converged_stops_at_its_checkpoint():
    sampler = linear_members(1e-3)[1]
    members = [Member("constant", Constant(), sampler, 1, 0.1)]
    val = sampler(np.random.default_rng(5), 500)
    trainer = BatchedTrainer(members, batch_size=8)
    rec = train_to_convergence(trainer, {"constant": val}, first_check=10, max_steps=80)
    # two unchanged doublings: converged at the third checkpoint, and stopped there
    assert rec["constant"].converged and rec["constant"].eval_steps == [10, 20, 40]
    assert trainer.steps[0] == 40


def test_resumed_run_is_bitwise_the_uninterrupted_run(tmp_path):
    torch.set_num_threads(1)
    val = {f"m{s}": quadratic(12 if s < 2 else 20)(np.random.default_rng(9), 300) for s in range(3)}
    whole = BatchedTrainer(block_members(), batch_size=16, clip_grad=0.5)
    rec_whole = train_to_convergence(whole, val, first_check=8, max_steps=32)

    class Interrupted(BatchedTrainer):
        def step(self, active=None, **kwargs):
            if self.steps.max() == 13:
                raise KeyboardInterrupt
            return super().step(active, **kwargs)

    path = str(tmp_path / "ck.pt")
    first = Interrupted(block_members(), batch_size=16, clip_grad=0.5)
    with pytest.raises(KeyboardInterrupt):
        train_to_convergence(
            first, val, first_check=8, max_steps=32, checkpoint=path, save_every_s=0
        )
    resumed = BatchedTrainer(block_members(), batch_size=16, clip_grad=0.5)
    rec = train_to_convergence(resumed, val, first_check=8, max_steps=32, checkpoint=path)
    for key, value in whole.params.items():
        assert torch.equal(value, resumed.params[key]), key
    # (through JSON: nan != nan, and the first change of every run is nan)
    assert {k: json.dumps(vars(v)) for k, v in rec.items()} == {
        k: json.dumps(vars(v)) for k, v in rec_whole.items()
    }


def test_checkpoints_double():
    assert check_steps(500, 4000) == [500, 1000, 2000, 4000]
    with pytest.raises(ValueError, match="max_steps must be first_check times a power of two"):
        check_steps(500, 3000)


def test_bad_arguments_name_themselves():
    with pytest.raises(TypeError, match="members must be a non-empty sequence"):
        BatchedTrainer([], batch_size=4)
    m = block_members()
    with pytest.raises(ValueError, match="distinct names"):
        BatchedTrainer([m[0], m[0]], batch_size=4)
    other = Member("wide", TransformerBlock(3, 7, 6, init_scale=0.0), quadratic(5), 0, 0.1)
    with pytest.raises(ValueError, match="parameter shapes"):
        BatchedTrainer([m[0], other], batch_size=4)
    with pytest.raises(ValueError, match="schedule must be"):
        BatchedTrainer(m, batch_size=4, schedule="cosine")
    with pytest.raises(ValueError, match="batch_size"):
        BatchedTrainer(m, batch_size=0)
    with pytest.raises(ValueError, match="lr"):
        BatchedTrainer([Member("a", block(0), quadratic(5), 0, -1.0)], batch_size=4)
    with pytest.raises(ValueError, match="no validation set for members"):
        train_to_convergence(BatchedTrainer(m, batch_size=4), {}, first_check=2, max_steps=4)
    with pytest.raises(ValueError, match="on_nonfinite must be"):
        BatchedTrainer(m, batch_size=4).step(on_nonfinite="ignore")


def test_prompts_and_flags_that_training_would_misread_are_refused():
    """Found by the probe classes on the training entry points."""
    pr = quadratic(5)(np.random.default_rng(0), 4)
    with pytest.raises(TypeError, match="dtype must be a floating torch.dtype"):
        prompts_to_torch(pr, dtype=torch.int64)  # would truncate every input and label
    nan_labels = pr._replace(ys=np.where(np.arange(5) == 2, np.nan, pr.ys))
    with pytest.raises(ValueError, match="prompts.ys must be finite"):
        prompts_to_torch(nan_labels)
    # a sampler's NaN is its fault, not the learning rate's
    with pytest.raises(ValueError, match="prompts.ys must be finite"):
        train_in_context(
            block(0), lambda rng, b: nan_labels, steps=2, lr=0.01, seed=0, batch_size=4
        )
    with pytest.raises(TypeError, match="progress must be True or False"):
        train_in_context(
            block(0), quadratic(5), steps=2, lr=0.01, seed=0, batch_size=4, progress="False"
        )


def test_study_runs_started_at_the_construction_are_the_construction():
    """A construction run's block holds exactly the construction's weights (that this block computes
    the NumPy construction is tests/test_glu.py's subject)."""
    cohort = next(c for c in studies.cohorts("glu") if c.name == "block10")
    run = next(r for r in cohort.runs if r.init == "construction")
    construction = TransformerBlock.from_weights(glu_lsa_block_weights(4, 1.0, features="hermite"))
    started = dict(studies.build_model(run).named_parameters())
    expected = dict(construction.named_parameters())
    assert started.keys() == expected.keys()
    for name, weight in expected.items():
        torch.testing.assert_close(
            started[name], weight, rtol=0, atol=0, msg=lambda m, name=name: f"{name}: {m}"
        )


def test_every_model_the_chapters_train_has_a_cohort():
    """Chapter 5's LSA layers and mixed-target blocks, chapter 6's stacks and learned BCD."""
    names = {s: {c.name for c in studies.cohorts(s)} for s in studies.STUDIES}
    assert {"block16", "block10", "lsa", "mixed"} <= names["glu"]
    assert {"deep1", "deep2", "deep4", "deep8", "deep1-d5", "lbcd10-cubic"} <= names["depth"]
    lsa = next(c for c in studies.cohorts("glu") if c.name == "lsa")
    assert {r.task for r in lsa.runs} == {"quadratic", "mixed"}
    from booktools.train_study import main

    with pytest.raises(SystemExit, match=r"--cohorts must be cohorts of glu, got \['misspelt'\]"):
        main(["train", "glu", "--cohorts", "lsa", "misspelt"])


def test_study_names_seeds_and_validation_sets():
    for name in studies.STUDIES:
        runs = [r for c in studies.cohorts(name) for r in c.runs]
        assert len({r.name for r in runs}) == len(runs)
        assert len({r.data_seed for r in runs}) == len(runs)
        for cohort in studies.cohorts(name):
            assert cohort.max_steps in check_steps(cohort.first_check, cohort.max_steps)
            # at least five seeds of every random-init configuration
            configs = {}
            for r in cohort.runs:
                if r.init == "random":
                    configs.setdefault(r.name.rsplit("/", 1)[0], set()).add(r.seed)
            assert all(len(s) >= 5 for s in configs.values())
    cohort = studies.cohorts("glu")[0]
    run = cohort.runs[0]
    a, b = (studies.validation_prompts(cohort, run)[run.context_len] for _ in range(2))
    np.testing.assert_array_equal(a.xs, b.xs)
    with pytest.raises(ValueError, match="study must be one of"):
        studies.cohorts("nope")


def test_frozen_parameters_stay_frozen_and_match_training_alone():
    """LearnedBCD's feature writers are frozen (requires_grad False): only its Γ's train."""
    cohort = next(c for c in studies.cohorts("depth") if c.name == "lbcd2-quadratic")
    run = cohort.runs[0]
    trainer = BatchedTrainer(studies.members(cohort)[:1], batch_size=16, clip_grad=1.0)
    frozen = {k: v.clone() for k, v in trainer.params.items() if k not in trainer.trainable}
    assert frozen and all(k.startswith("gammas") for k in trainer.trainable)
    for _ in range(30):
        trainer.step()
    for k, v in frozen.items():
        assert torch.equal(trainer.params[k], v), k
    alone = train_in_context(
        studies.build_model(run),
        studies.make_sampler(run),
        steps=30,
        lr=run.lr,
        seed=run.data_seed,
        batch_size=16,
        clip_grad=1.0,
        schedule="rsqrt",
        warmup=cohort.warmup,
    )
    batched = trainer.model(0).state_dict()
    for key, value in alone.model.state_dict().items():
        torch.testing.assert_close(batched[key], value, rtol=1e-10, atol=1e-12)


def test_runs_decided_by_the_unpaired_rule_are_decided_again(tmp_path):
    """A checkpoint written before the paired rule (no change_se, no per-prompt errors) is re-decided."""
    members, sampler = linear_members(1e-3)
    val = {"linear": sampler(np.random.default_rng(5), 4000)}
    path = str(tmp_path / "old.pt")
    train_to_convergence(
        BatchedTrainer(members, batch_size=32), val, first_check=10, max_steps=20, checkpoint=path
    )
    saved = torch.load(path, weights_only=False)
    saved.pop("errors")
    rec = saved["records"]["linear"]
    rec.pop("change_se")
    rec["converged"] = rec["finished"] = True  # what the unpaired rule had decided
    torch.save(saved, path)
    trainer = BatchedTrainer(linear_members(1e-3)[0], batch_size=32)
    out = train_to_convergence(trainer, val, first_check=10, max_steps=40, checkpoint=path)[
        "linear"
    ]
    assert out.eval_steps == [10, 20, 40] and not out.converged and out.finished
    assert np.isnan(out.change_se[0]) and np.isfinite(out.change_se[-1])


def test_rsqrt_decay_starts_at_decay_start_and_defaults_to_the_warmup():
    m = block_members()[0]
    late = Member("late", m.model, m.sample_prompts, 1, 0.01, warmup=5, decay_start=100)
    trainer = BatchedTrainer([m, late], batch_size=4)
    # default: the peak at the end of the warm-up, then lr·√(warmup / t) (the shipped glu runs)
    assert trainer.lr_at(0, 4) == pytest.approx(m.lr)
    assert trainer.lr_at(0, 79) == pytest.approx(m.lr * np.sqrt(5 / 80))
    # decay_start holds the peak until step 100, then lr·√(100 / t)
    assert trainer.lr_at(1, 2) == pytest.approx(0.01 * 3 / 5)
    assert trainer.lr_at(1, 99) == pytest.approx(0.01)
    assert trainer.lr_at(1, 399) == pytest.approx(0.01 * 0.5)
    with pytest.raises(ValueError, match="decay_start"):
        BatchedTrainer(
            [Member("bad", m.model, m.sample_prompts, 1, 0.01, decay_start=-1)], batch_size=4
        )


def _tiny_cohort(name, seed=0):
    """A cohort of one LSA run that trains in a fraction of a second."""
    run = studies.RunSpec("lsa", "quadratic", 20, seed, 0.01)
    return studies.Cohort(
        name, (run,), batch_size=8, warmup=2, clip_grad=1.0, first_check=4, max_steps=8, val_size=50
    )


def test_train_study_trains_and_returns_what_load_study_reads(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    tiny = _tiny_cohort("tiny")
    (run,) = tiny.runs
    monkeypatch.setitem(studies.STUDIES, "tiny", [tiny])
    lines = []
    runs = studies.train_study("tiny", checkpoints=tmp_path, log=lines.append)
    assert (tmp_path / "tiny_tiny.pt").exists() and lines
    (trained,) = runs.values()
    assert trained.spec == run and trained.record.finished and trained.record.eval_steps[0] == 4
    np.savez(tmp_path / "s.npz", **studies.study_arrays(tiny, *_resumed(tiny, tmp_path)))
    (loaded,) = studies.load_study("tiny", path=tmp_path / "s.npz").values()
    for a, b in zip(trained.model.parameters(), loaded.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with pytest.raises(ValueError, match="names must be cohorts of tiny"):
        studies.train_study("tiny", checkpoints=tmp_path, names=["nope"])


def test_export_decides_with_the_bound_the_runs_were_trained_to(tmp_path, monkeypatch):
    """``--max-steps`` on export: a run trained to a lower bound than its cohort's ships "at the bound"
    of what it was trained to; without it the cohort's own bound applies and the run is still training."""
    torch.set_num_threads(1)
    from booktools.train_study import main

    monkeypatch.setitem(studies.STUDIES, "tiny", [_tiny_cohort("a", 0)])
    studies.train_study("tiny", checkpoints=tmp_path, max_steps=4, log=None)
    out = tmp_path / "a.npz"
    args = ["export", "tiny", "--checkpoints", str(tmp_path), "--out", str(out)]
    main(args)
    (run,) = studies.load_study("tiny", path=out).values()
    assert run.steps == 4 and run.status == "unfinished"
    main([*args, "--max-steps", "4"])
    (run,) = studies.load_study("tiny", path=out).values()
    assert run.steps == 4 and run.status == "at the bound"
    # trained on to 8 steps, the run cannot ship as "at the bound" of 4: its weights are step 8's
    studies.train_study("tiny", checkpoints=tmp_path, max_steps=8, log=None)
    with pytest.raises(SystemExit, match=r"past the bound 4, e\.g\. .* to 8 steps"):
        main([*args, "--max-steps", "4"])
    main([*args, "--max-steps", "8"])
    (run,) = studies.load_study("tiny", path=out).values()
    assert run.steps == 8 and run.status == "at the bound"


def test_each_cohort_can_have_its_own_bound(tmp_path, monkeypatch, capsys):
    """``--max-steps 4 b=8``: cohort a trains to and ships at the bound 4, b at 8, in one command each."""
    torch.set_num_threads(1)
    from booktools.train_study import main

    monkeypatch.setitem(studies.STUDIES, "tiny", [_tiny_cohort("a", 0), _tiny_cohort("b", 1)])
    folder = ["--checkpoints", str(tmp_path)]
    main(["train", "tiny", *folder, "--max-steps", "4", "b=8"])
    out = tmp_path / "s.npz"
    export = ["export", "tiny", *folder, "--out", str(out)]
    with pytest.raises(SystemExit, match="b: 1 run.* past the bound 4"):
        main([*export, "--max-steps", "4"])
    # CPU time as if the runs had been long: a's run 1.5 h, b's 1 h (b is past the bound: not priced)
    for name, seconds in (("a", 5400.0), ("b", 3600.0)):
        saved = torch.load(tmp_path / f"tiny_{name}.pt", weights_only=False)
        saved["trainer"]["cpu_seconds"] = np.full_like(saved["trainer"]["cpu_seconds"], seconds)
        torch.save(saved, tmp_path / f"tiny_{name}.pt")
    main(["status", "tiny", *folder, "--max-steps", "4"])  # says what that export refuses
    lines = capsys.readouterr().out.splitlines()
    assert sum("at bound" in line for line in lines) == 1
    assert sum("trained past the bound, to 8 steps" in line for line in lines) == 1
    # another doubling of the run at the bound costs what it has cost so far
    assert [line.strip() for line in lines if "one more doubling" in line] == [
        "one more doubling of its 1 run(s) at the bound: about 1.50 CPU-hours at their speed so far"
    ]
    main([*export, "--max-steps", "4", "b=8"])
    runs = {r.spec.seed: r for r in studies.load_study("tiny", path=out).values()}
    assert {s: (r.steps, r.status) for s, r in runs.items()} == {
        0: (4, "at the bound"),
        1: (8, "at the bound"),
    }
    for bad, message in [
        ("c=4", r"--max-steps c=4: 'c' is not a cohort of tiny \['a', 'b'\]"),
        ("b=0", "--max-steps b=0: the bound must be an integer >= 1"),
        ("4.5", "--max-steps 4.5: the bound must be an integer >= 1"),
    ]:
        with pytest.raises(SystemExit, match=message):
            main([*export, "--max-steps", bad])


def test_export_writes_the_named_cohorts_and_refuses_unknown_names(tmp_path, monkeypatch):
    """A study whose other cohorts still train can ship its finished ones (``--cohorts``)."""
    torch.set_num_threads(1)
    from booktools.train_study import main

    monkeypatch.setitem(studies.STUDIES, "tiny", [_tiny_cohort("a", 0), _tiny_cohort("b", 1)])
    studies.train_study("tiny", checkpoints=tmp_path, names=["a"], log=None)
    out = tmp_path / "a.npz"
    main(["export", "tiny", "--cohorts", "a", "--checkpoints", str(tmp_path), "--out", str(out)])
    (run,) = studies.load_study("tiny", path=out).values()
    assert run.spec.seed == 0
    with pytest.raises(SystemExit, match="no checkpoint for cohort b"):
        main(["export", "tiny", "--checkpoints", str(tmp_path), "--out", str(out)])
    with pytest.raises(SystemExit, match="--cohorts must be cohorts of tiny"):
        main(
            ["export", "tiny", "--cohorts", "c", "--checkpoints", str(tmp_path), "--out", str(out)]
        )


def _resumed(cohort, folder):
    saved = torch.load(folder / f"tiny_{cohort.name}.pt", weights_only=False)
    trainer = studies.study_trainer(cohort)
    trainer.load_state_dict(saved["trainer"])
    from icl_book.train import ConvergenceRecord

    return trainer, {n: ConvergenceRecord(**r) for n, r in saved["records"].items()}


def test_select_runs_matches_fields_and_refuses_typos_and_empty_selections(tmp_path, monkeypatch):
    runs = {}
    for seed in (2, 0, 1):
        spec = studies.RunSpec("lsa", "quadratic", 20, seed, 0.01)
        runs[spec.name] = studies.StudyRun(spec, None, None, 0.0, np.zeros(0))
    picked = studies.select_runs(runs, model="lsa", context_len=20)
    assert [r.spec.seed for r in picked] == [0, 1, 2]
    with pytest.raises(ValueError, match="fields must be RunSpec fields"):
        studies.select_runs(runs, context=20)
    with pytest.raises(ValueError, match="no run matches"):
        studies.select_runs(runs, context_len=21)
