"""Train chapter 5's LSA layers and LSA + GLU blocks and write the shipped weights and losses.

``python -m booktools.pretrain_glu`` (from the repository root, where it writes ``icl_book/data/glu_runs.npz``)
trains every run of :data:`icl_book.pretrain_glu.RUNS` with one torch thread; the result is bitwise identical
to the shipped file (``tests/test_shipped_weights.py`` retrains one run). ``--runs`` trains a subset and
``--out`` writes elsewhere.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from icl_book.pretrain_glu import RUNS, runs_arrays, train_run

#: The package data file of the clone this runs in (never the installed package's location).
OUT = Path("icl_book") / "data" / "glu_runs.npz"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", choices=list(RUNS), default=list(RUNS))
    parser.add_argument("--out", type=Path, default=OUT, help="the .npz to write")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # bitwise reproducible, and faster for these tiny models
    trained = []
    for name in args.runs:
        run = train_run(name)
        trained.append(run)
        last = float(np.mean(run.losses[-50:]))
        print(f"{name}: last-50-step loss {last:.4f}, {run.cpu_seconds:.0f} s CPU", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **runs_arrays(trained))
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
