"""Train a converged study of chapters 5–6 (:mod:`icl_book.studies`) and write its shipped file.

``python -m booktools.train_study train glu`` trains every cohort of the study under the book's
convergence protocol, one torch thread, saving a checkpoint per cohort in ``--checkpoints`` as it goes
(run the same command again to resume: a study takes hours and may span several sittings; a larger
``--max-steps`` continues the runs that stopped unconverged at the old bound). ``--cohorts`` trains a
subset (e.g. in two processes, one per core).

``python -m booktools.train_study status glu`` prints every run's steps, validation error and state.

``python -m booktools.train_study export glu`` writes ``icl_book/data/study_<name>.npz`` from the
checkpoints of every cohort (or of ``--cohorts``: a study whose other cohorts are still training can
ship the finished ones): weights, protocol records (steps, converged flag, validation curve), CPU
seconds and the training-loss curve of every run. A cohort without a checkpoint is an error; runs still
in training are exported with ``finished = False`` (a chapter must say so).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from icl_book.studies import STUDIES, cohorts, study_arrays, study_path, study_trainer, train_study
from icl_book.train import ConvergenceRecord

CHECKPOINTS = Path(".studies")


def _checkpoint(folder: Path, study: str, cohort) -> Path:
    return folder / f"{study}_{cohort.name}.pt"


def export(study: str, folder: Path, out: Path, names=None) -> None:
    arrays = {}
    for cohort in cohorts(study):
        if names is not None and cohort.name not in names:
            continue
        path = _checkpoint(folder, study, cohort)
        if not path.exists():
            raise SystemExit(f"no checkpoint for cohort {cohort.name}: train it first ({path})")
        saved = torch.load(path, weights_only=False)
        trainer = study_trainer(cohort)
        trainer.load_state_dict(saved["trainer"])
        records = {n: ConvergenceRecord(**r) for n, r in saved["records"].items()}
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


def status(study: str, folder: Path) -> None:
    """Print every run's steps, validation error and state from the checkpoints (no training)."""
    for cohort in cohorts(study):
        path = _checkpoint(folder, study, cohort)
        if not path.exists():
            print(f"{cohort.name}: not started")
            continue
        saved = torch.load(path, weights_only=False)
        cpu_h = float(np.sum(saved["trainer"]["cpu_seconds"])) / 3600
        print(f"{cohort.name}: {cpu_h:.2f} CPU-hours")
        for name, r in saved["records"].items():
            if r["converged"]:
                state = "converged"
            elif r.get("diverged_at"):
                state = f"diverged at step {r['diverged_at']}"
            else:
                state = "at bound" if r["finished"] else "training"
            steps = r["eval_steps"][-1] if r["eval_steps"] else 0
            val = f"{r['val_mse'][-1]:.4f} ± {r['val_se'][-1]:.4f}" if r["val_mse"] else "-"
            print(f"  {name:48s} {steps:6d} steps  val {val}  {state}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["train", "export", "status"])
    parser.add_argument("study", choices=list(STUDIES))
    parser.add_argument("--cohorts", nargs="+", default=None, help="cohort names (default: all)")
    parser.add_argument("--checkpoints", type=Path, default=CHECKPOINTS)
    parser.add_argument("--max-steps", type=int, default=None, help="override the bound")
    parser.add_argument("--out", type=Path, default=None, help="the .npz to write")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # tiny models: one thread is as fast, and bitwise reproducible
    args.checkpoints.mkdir(parents=True, exist_ok=True)
    if args.command == "train":
        try:
            train_study(
                args.study,
                checkpoints=args.checkpoints,
                names=args.cohorts,
                max_steps=args.max_steps,
                log=lambda line: print(line, flush=True),
            )
        except ValueError as err:  # e.g. an unknown cohort name
            raise SystemExit(str(err)) from None
    elif args.command == "status":
        status(args.study, args.checkpoints)
    else:
        known = {c.name for c in cohorts(args.study)}
        unknown = sorted(set(args.cohorts or ()) - known)
        if unknown:
            raise SystemExit(f"--cohorts must be cohorts of {args.study}, got {unknown}")
        export(args.study, args.checkpoints, args.out or study_path(args.study), args.cohorts)


if __name__ == "__main__":
    main()
