"""Train a converged study of chapters 5–6 (:mod:`icl_book.studies`) and write its shipped file.

``python -m booktools.train_study train glu`` trains every cohort of the study under the book's
convergence protocol, one torch thread, saving a checkpoint per cohort in ``--checkpoints`` as it goes
(run the same command again to resume: a study takes hours and may span several sittings; a larger
``--max-steps`` continues the runs that stopped unconverged at the old bound). ``--cohorts`` trains a
subset (e.g. in two processes, one per core).

``--device cuda`` trains on a GPU. ``--executor processes`` trains the cohorts in parallel, one local
process each (as many at once as cores); ``--executor dask`` on a ``dask.distributed`` cluster:
``--scheduler ADDRESS`` connects to a running one (its workers must see ``--checkpoints``), without it
a ``LocalCluster`` of ``--workers`` processes is started. Every cohort writes the checkpoint a serial run
writes.

``python -m booktools.train_study status glu`` prints every run's steps, validation error, state and
its last two changes in paired standard errors.

``python -m booktools.train_study export glu`` writes ``icl_book/data/study_<name>.npz`` from the
checkpoints of every cohort (or of ``--cohorts``: a study whose other cohorts are still training can
ship the finished ones): weights, protocol records (steps, converged flag, validation curve), CPU
seconds and the training-loss curve of every run. A cohort without a checkpoint is an error; runs still
in training are exported with ``finished = False`` (a chapter must say so). With ``--max-steps N`` every run
is decided with the bound ``N`` it was trained to (``train --max-steps N``): one at ``N`` steps that did not
converge ships "at the bound" of ``N``, not as still training toward the cohort's own bound. A run
trained past ``N`` is refused: its weights are those of its last step, not of ``N``. ``COHORT=N`` gives
one cohort its own bound (``--max-steps 64000 lsa=128000``), for every command.
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from icl_book.studies import STUDIES, cohorts, study_arrays, study_path, study_trainer, train_study
from icl_book.train import ConvergenceRecord, decide

CHECKPOINTS = Path(".studies")


def _checkpoint(folder: Path, study: str, cohort) -> Path:
    return folder / f"{study}_{cohort.name}.pt"


def _bounds(tokens, study: str) -> dict:
    """``--max-steps`` values: ``N`` (every cohort) and ``NAME=N`` (that cohort), as ``{name or None: N}``."""
    known = [c.name for c in cohorts(study)]
    bounds = {}
    for token in tokens or ():
        name, sep, value = token.rpartition("=")
        if sep and name not in known:
            raise SystemExit(f"--max-steps {token}: {name!r} is not a cohort of {study} {known}")
        if not value.isdigit() or int(value) < 1:
            raise SystemExit(f"--max-steps {token}: the bound must be an integer >= 1")
        bounds[name if sep else None] = int(value)
    return bounds


def _bounded(cohort, bounds: dict):
    """The cohort with the bound its runs were trained to (``--max-steps``), or its own."""
    bound = bounds.get(cohort.name, bounds.get(None))
    return cohort if bound is None else replace(cohort, max_steps=bound)


def export(study: str, folder: Path, out: Path, names=None, bounds: dict | None = None) -> None:
    arrays = {}
    for cohort in cohorts(study):
        if names is not None and cohort.name not in names:
            continue
        cohort = _bounded(cohort, bounds or {})
        path = _checkpoint(folder, study, cohort)
        if not path.exists():
            raise SystemExit(f"no checkpoint for cohort {cohort.name}: train it first ({path})")
        saved = torch.load(path, weights_only=False)
        _refuse_past_the_bound(cohort, saved["trainer"])
        trainer = study_trainer(cohort)
        trainer.load_state_dict(saved["trainer"])
        records = {n: ConvergenceRecord(**r) for n, r in saved["records"].items()}
        for rec in records.values():
            _redecide(rec, cohort)
        arrays.update(study_arrays(cohort, trainer, records))
        n_conv = sum(r.converged for r in records.values())
        n_fin = sum(r.finished for r in records.values())
        n_div = sum(bool(r.diverged_at) for r in records.values())
        cpu_h = float(np.sum(trainer.cpu_seconds)) / 3600
        print(
            f"{cohort.name}: {n_conv} converged, {n_fin - n_conv - n_div} stopped at the bound, "
            f"{n_div} diverged, "
            f"{len(records) - n_fin} still training; {cpu_h:.2f} CPU-hours"
        )
    np.savez_compressed(out, **arrays)
    print(f"wrote {out}")


def _refuse_past_the_bound(cohort, state: dict) -> None:
    """An export at a bound below what a run was trained to would ship the later weights under a
    verdict of the earlier bound (and decide it from checks past that bound): refuse it."""
    past = {
        n: int(s)
        for n, s in zip(state["names"], state["steps"], strict=True)
        if s > cohort.max_steps
    }
    if past:
        name, steps = max(past.items(), key=lambda item: item[1])
        raise SystemExit(
            f"{cohort.name}: {len(past)} run(s) trained past the bound {cohort.max_steps}, e.g. "
            f"{name} to {steps} steps (its weights are those of that step); export with "
            f"--max-steps >= {steps}, or once the runs reach a bound"
        )


def _redecide(rec: ConvergenceRecord, cohort) -> ConvergenceRecord:
    """Decide ``rec`` by today's rule, whatever rule its checkpoint was saved under."""
    rec.min_steps = cohort.min_steps
    return decide(rec, max_steps=cohort.max_steps)


def status(study: str, folder: Path, bounds: dict | None = None) -> None:
    """Print every run's steps, validation error and state from the checkpoints (no training).

    Each run is decided by today's rule, as a resume or an export with the same bounds would
    decide it.
    """
    for cohort in cohorts(study):
        cohort = _bounded(cohort, bounds or {})
        path = _checkpoint(folder, study, cohort)
        if not path.exists():
            print(f"{cohort.name}: not started")
            continue
        saved = torch.load(path, weights_only=False)
        cpu_h = float(np.sum(saved["trainer"]["cpu_seconds"])) / 3600
        print(f"{cohort.name}: {cpu_h:.2f} CPU-hours")
        names = saved["trainer"]["names"]
        trained = dict(zip(names, saved["trainer"]["steps"], strict=True))
        spent = dict(zip(names, saved["trainer"]["cpu_seconds"], strict=True))
        at_bound = []
        for name, r in saved["records"].items():
            rec = _redecide(ConvergenceRecord(**r), cohort)
            if trained[name] > cohort.max_steps:  # what an export at this bound refuses
                state = f"trained past the bound, to {int(trained[name])} steps"
            elif rec.converged:
                state = "converged"
            elif rec.diverged_at:
                state = f"diverged at step {rec.diverged_at}"
            else:
                state = f"at bound ({rec.trend})" if rec.finished else f"training ({rec.trend})"
                at_bound += [name] if rec.finished else []
            val = f"{rec.val_mse[-1]:.4f} ± {rec.val_se[-1]:.4f}" if rec.val_mse else "-"
            last = " ".join(f"{z:+.1f}" for z in rec.changes[-2:])
            print(f"  {name:48s} {rec.steps:7d} steps  val {val}  {state}  Δ/SE {last}")
        if at_bound:
            # a doubling repeats as many steps as the run has taken: at the same speed per step,
            # it costs what the run has cost so far
            next_h = sum(float(spent[n]) for n in at_bound) / 3600
            print(
                f"  one more doubling of its {len(at_bound)} run(s) at the bound: "
                f"about {next_h:.2f} CPU-hours at their speed so far"
            )


@contextlib.contextmanager
def _executor(args):
    """The executor ``train_study`` gets: None, "processes", or a dask Client (closed afterwards)."""
    if args.executor != "dask":
        yield None if args.executor == "serial" else "processes"
        return
    if args.workers is not None and args.scheduler is not None:
        raise SystemExit("--workers starts a LocalCluster; with --scheduler the cluster exists")
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise SystemExit(
            "--executor dask needs dask.distributed: pip install 'dask[distributed]'"
        ) from None
    if args.scheduler is not None:
        with Client(args.scheduler) as client:
            yield client
        return
    # one thread per worker: a cohort's models are small, and each worker trains one cohort
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True) as cluster:
        with Client(cluster) as client:
            yield client


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["train", "export", "status"])
    parser.add_argument("study", choices=list(STUDIES))
    parser.add_argument("--cohorts", nargs="+", default=None, help="cohort names (default: all)")
    parser.add_argument("--checkpoints", type=Path, default=CHECKPOINTS)
    parser.add_argument(
        "--max-steps",
        nargs="+",
        default=None,
        metavar="N|COHORT=N",
        help="override the bound: N for every cohort, COHORT=N for one (later values win)",
    )
    parser.add_argument("--out", type=Path, default=None, help="the .npz to write")
    parser.add_argument("--device", default="cpu", help="torch device to train on (e.g. cuda)")
    parser.add_argument(
        "--executor",
        choices=["serial", "processes", "dask"],
        default="serial",
        help="train the cohorts one after another, in local processes, or on a dask cluster",
    )
    parser.add_argument("--scheduler", default=None, help="address of a running dask scheduler")
    parser.add_argument("--workers", type=int, default=None, help="LocalCluster workers (dask)")
    parser.add_argument(
        "--chunk-size", type=int, default=None, help="members per vectorised call (default: all)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # tiny models: one thread is as fast, and bitwise reproducible
    args.checkpoints.mkdir(parents=True, exist_ok=True)
    bounds = _bounds(args.max_steps, args.study)
    known = {c.name for c in cohorts(args.study)}
    unknown = sorted(set(args.cohorts or ()) - known)
    if unknown:
        raise SystemExit(f"--cohorts must be cohorts of {args.study}, got {unknown}")
    if args.command == "train":
        # one train_study call per bound: the cohorts of each train in parallel on the executor
        groups = {}
        for cohort in cohorts(args.study):
            if args.cohorts is None or cohort.name in args.cohorts:
                bound = bounds.get(cohort.name, bounds.get(None))
                groups.setdefault(bound, []).append(cohort.name)
        with _executor(args) as executor:
            for bound, names in groups.items():
                train_study(
                    args.study,
                    checkpoints=args.checkpoints,
                    names=names,
                    max_steps=bound,
                    device=args.device,
                    executor=executor,
                    chunk_size=args.chunk_size,
                    log=lambda line: print(line, flush=True),
                )
    elif args.command == "status":
        status(args.study, args.checkpoints, bounds)
    else:
        export(
            args.study,
            args.checkpoints,
            args.out or study_path(args.study),
            args.cohorts,
            bounds,
        )


if __name__ == "__main__":
    main()
