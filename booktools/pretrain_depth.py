"""Train chapter 6's unconstrained deep transformers and write the shipped weights and curves.

``python -m booktools.pretrain_depth`` (from the repository root, where it writes ``icl_book/data/``) trains every run of every study in
:data:`icl_book.pretrain_depth.EXPERIMENTS` with one torch thread and writes ``icl_book/data/depth_<name>.npz``;
the result is bitwise identical to the shipped files (``tests/test_shipped_weights.py`` regenerates one run).
``--steps``/``--seeds``/``--depths`` make a short run for testing; ``--out-dir`` writes elsewhere.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import torch

from icl_book.pretrain_depth import EXPERIMENTS, model_arrays, train_one

#: The package data folder of the clone this runs in (never the installed package's location).
OUT_DIR = Path("icl_book") / "data"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", choices=[*EXPERIMENTS, "all"], default="all")
    parser.add_argument(
        "--out-dir", type=Path, default=OUT_DIR, help="where to write the .npz files"
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="Adam steps per run (default: the study's)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=None)
    parser.add_argument("--depths", type=int, nargs="+", default=None)
    parser.add_argument("--tasks", nargs="+", default=None)
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 2:
        parser.error(f"--steps must be >= 2, got {args.steps}")
    torch.set_num_threads(1)  # bitwise reproducible, and faster for these tiny models
    names = list(EXPERIMENTS) if args.experiment == "all" else [args.experiment]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        config = EXPERIMENTS[name]
        changes = {}
        if args.steps is not None:
            changes.update(
                steps=args.steps,
                warmup=min(config.warmup, args.steps // 10),
                eval_every=max(1, args.steps // 20),
            )
        for key in ("seeds", "depths", "tasks"):
            if getattr(args, key) is not None:
                changes[key] = tuple(getattr(args, key))
        config = dataclasses.replace(config, **changes)
        arrays = {"config": np.array(config.to_json())}
        for task in config.tasks:
            for depth in config.depths:
                for seed in config.seeds:
                    run = train_one(config, task, depth, seed)
                    arrays.update(model_arrays(run))
                    print(
                        f"{name} {task} depth {depth} seed {seed}: validation MSE "
                        f"{run.eval_losses[-1]:.4f} (max {run.eval_losses.max():.3f}), "
                        f"{run.cpu_seconds:.0f} s CPU",
                        flush=True,
                    )
        out = args.out_dir / f"depth_{name}.npz"
        np.savez_compressed(out, **arrays)
        print(f"wrote {out}", flush=True)


if __name__ == "__main__":
    main()
