"""Train a converged study of chapters 5–6 (:mod:`icl_book.studies`) and write its shipped file.

``python -m booktools.train_study glu`` trains every cohort of the study under the book's convergence
protocol, one torch thread, saving a checkpoint per cohort in ``--checkpoints`` as it goes (run the same
command again to resume: a study takes hours and may span several sittings), and writes
``icl_book/data/study_<name>.npz`` once every cohort has finished. ``--cohorts`` trains a subset.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from icl_book.studies import cohorts, members, study_arrays, study_path, validation_prompts
from icl_book.train import BatchedTrainer, train_to_convergence


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", choices=["glu", "depth"])
    parser.add_argument("--cohorts", nargs="+", default=None, help="cohort names (default: all)")
    parser.add_argument("--checkpoints", type=Path, default=Path(".studies"))
    parser.add_argument("--out", type=Path, default=None, help="the .npz to write")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # tiny models: one thread is as fast, and bitwise reproducible
    args.checkpoints.mkdir(parents=True, exist_ok=True)
    arrays, done = {}, True
    for cohort in cohorts(args.study):
        if args.cohorts is not None and cohort.name not in args.cohorts:
            continue
        trainer = BatchedTrainer(
            members(cohort),
            batch_size=cohort.batch_size,
            schedule="rsqrt",
            clip_grad=cohort.clip_grad,
        )
        val = {r.name: validation_prompts(cohort, r) for r in cohort.runs}
        start = time.monotonic()

        def log(line, name=cohort.name, start=start):
            print(f"[{name} {time.monotonic() - start:7.0f} s] {line}", flush=True)

        records = train_to_convergence(
            trainer,
            val,
            first_check=cohort.first_check,
            max_steps=cohort.max_steps,
            checkpoint=str(args.checkpoints / f"{args.study}_{cohort.name}.pt"),
            log=log,
        )
        done &= all(r.finished for r in records.values())
        arrays.update(study_arrays(cohort, trainer, records))
        n_conv = sum(r.converged for r in records.values())
        cpu_h = float(np.sum(trainer.cpu_seconds)) / 3600
        print(
            f"{cohort.name}: {n_conv}/{len(records)} converged, {cpu_h:.2f} CPU-hours", flush=True
        )
    out = args.out or study_path(args.study)
    np.savez_compressed(out, **arrays)
    print(f"wrote {out}" + ("" if done else " (some cohorts unfinished)"), flush=True)


if __name__ == "__main__":
    main()
