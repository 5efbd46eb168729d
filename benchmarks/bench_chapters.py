"""Every chapter at one BLAS thread and at the default thread count, in one run.

A student on Colab's free tier runs a notebook with every BLAS thread the machine has (two). OpenBLAS
threads spin-wait between calls, so code made of many tiny products can burn several times the CPU of one
thread and run slower; the chapters' budget (≤ 90 s, CPU within 1.3x of one thread) is about that seat.

    .venv/bin/python benchmarks/bench_chapters.py [chapters/NN_slug.md ...]

runs nbval on each executed chapter (``pytest --nbval``: the whole notebook, kernel start included) with
``OMP/OPENBLAS/MKL_NUM_THREADS=1`` and with none of them set, prints wall and CPU seconds and their
ratios, and records both in ``chapters/timings.json`` (``nbval_s``/``nbval_cpu_s``, keys ``"1"`` and
``"default"``). Measure on a quiet machine: anything else running inflates the default-thread run most.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from booktools.chapters import chapter_sources  # noqa: E402
from booktools.notebooks import record_nbval_times  # noqa: E402


def main(argv: list[str]) -> None:
    paths = [Path(a) for a in argv] or chapter_sources()
    results = record_nbval_times(paths, threads=(1, None))
    print(f"\n{os.cpu_count()} cores; default = the libraries' own thread count\n")
    head = f"{'chapter':<36} {'1 thread':>16} {'default':>16} {'CPU ratio':>10} {'wall ratio':>10}"
    print(head)
    print(f"{'':<36} {'wall / CPU s':>16} {'wall / CPU s':>16}")
    for name, r in results.items():
        (w1, c1), (wd, cd) = r["1"], r["default"]
        print(
            f"{name:<36} {w1:7.1f} / {c1:6.1f} {wd:7.1f} / {cd:6.1f} "
            f"{cd / c1:10.2f} {wd / w1:10.2f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
