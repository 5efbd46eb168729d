"""Train a converged study of chapters 5–6 (:mod:`icl_book.studies`) and write its shipped file.

``python -m booktools.train_study train glu`` trains every cohort of the study under the book's
convergence protocol, one torch thread, saving a checkpoint per cohort in ``--checkpoints`` as it goes
(run the same command again to resume: a study takes hours and may span several sittings; a larger
``--max-steps`` continues the runs that stopped unconverged at the old bound). ``--cohorts`` trains a
subset (e.g. in two processes, one per core).

``python -m booktools.train_study export glu`` writes ``icl_book/data/study_<name>.npz`` from the
checkpoints of every cohort: weights, protocol records (steps, converged flag, validation curve), CPU
seconds and the training-loss curve of every run. A cohort without a checkpoint is an error; runs still
in training are exported with ``finished = False`` (a chapter must say so).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
import torch

from icl_book.studies import cohorts, members, study_arrays, study_path, validation_prompts
from icl_book.train import BatchedTrainer, ConvergenceRecord, train_to_convergence

CHECKPOINTS = Path(".studies")


def _trainer(cohort) -> BatchedTrainer:
    return BatchedTrainer(
        members(cohort),
        batch_size=cohort.batch_size,
        schedule="rsqrt",
        clip_grad=cohort.clip_grad,
        dtype=cohort.torch_dtype,
    )


def _checkpoint(folder: Path, study: str, cohort) -> Path:
    return folder / f"{study}_{cohort.name}.pt"


def train(study: str, names, folder: Path, max_steps: int | None) -> None:
    known = [c.name for c in cohorts(study)]
    unknown = sorted(set(names or ()) - set(known))
    if unknown:  # a misspelt cohort would otherwise train nothing and exit quietly
        raise SystemExit(
            f"--cohorts must name cohorts of {study} ({', '.join(known)}), got {unknown}"
        )
    for cohort in cohorts(study):
        if names is not None and cohort.name not in names:
            continue
        if max_steps is not None:
            cohort = dataclasses.replace(cohort, max_steps=max_steps)
        trainer = _trainer(cohort)
        val = {r.name: validation_prompts(cohort, r) for r in cohort.runs}
        start = time.monotonic()

        def log(line, name=cohort.name, start=start):
            print(f"[{name} {time.monotonic() - start:7.0f} s] {line}", flush=True)

        records = train_to_convergence(
            trainer,
            val,
            first_check=cohort.first_check,
            max_steps=cohort.max_steps,
            checkpoint=str(_checkpoint(folder, study, cohort)),
            log=log,
        )
        n_conv = sum(r.converged for r in records.values())
        cpu_h = float(np.sum(trainer.cpu_seconds)) / 3600
        print(
            f"{cohort.name}: {n_conv}/{len(records)} converged, {cpu_h:.2f} CPU-hours", flush=True
        )


def export(study: str, folder: Path, out: Path) -> None:
    arrays = {}
    for cohort in cohorts(study):
        path = _checkpoint(folder, study, cohort)
        if not path.exists():
            raise SystemExit(f"no checkpoint for cohort {cohort.name}: train it first ({path})")
        saved = torch.load(path, weights_only=False)
        trainer = _trainer(cohort)
        trainer.load_state_dict(saved["trainer"])
        records = {n: ConvergenceRecord(**r) for n, r in saved["records"].items()}
        arrays.update(study_arrays(cohort, trainer, records))
        n_conv = sum(r.converged for r in records.values())
        n_fin = sum(r.finished for r in records.values())
        cpu_h = float(np.sum(trainer.cpu_seconds)) / 3600
        print(
            f"{cohort.name}: {n_conv} converged, {n_fin - n_conv} stopped at the bound, "
            f"{len(records) - n_fin} still training; {cpu_h:.2f} CPU-hours"
        )
    np.savez_compressed(out, **arrays)
    print(f"wrote {out}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["train", "export"])
    parser.add_argument("study", choices=["glu", "depth"])
    parser.add_argument("--cohorts", nargs="+", default=None, help="cohort names (default: all)")
    parser.add_argument("--checkpoints", type=Path, default=CHECKPOINTS)
    parser.add_argument("--max-steps", type=int, default=None, help="override the bound")
    parser.add_argument("--out", type=Path, default=None, help="the .npz to write")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # tiny models: one thread is as fast, and bitwise reproducible
    args.checkpoints.mkdir(parents=True, exist_ok=True)
    if args.command == "train":
        train(args.study, args.cohorts, args.checkpoints, args.max_steps)
    else:
        export(args.study, args.checkpoints, args.out or study_path(args.study))


if __name__ == "__main__":
    main()
