"""Run ``make test``'s stages in order and print the time of each at the end.

``python -m booktools.stages lint pairs pdf html unit nbval-both`` runs ``make <target>`` for each
stage, stops at the first that fails, and always ends with a table of the stages' wall times (and the
stage that failed), so that the next slow-down is visible in every CI log.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

#: What each make target checks, as the stage's heading says it.
LABELS = {
    "lint": "lint (ruff)",
    "pairs": "chapter pairs (.md/.ipynb)",
    "pdf": "PDF (xelatex; its log checked)",
    "html": "book build (-W -n)",
    "unit": "unit, build and browser tests",
    "nbval": "nbval (2 threads)",
    "nbval-1thread": "nbval (1 thread)",
    "nbval-both": "nbval (2 threads and 1 thread, side by side)",
}


def table(done: list[tuple[str, float, int]]) -> str:
    """The summary: one line per stage that ran (seconds, ok/FAILED), and the total."""
    width = max(len(LABELS.get(t, t)) for t, _, _ in done)
    lines = ["== make test: time of each stage"]
    for target, seconds, code in done:
        status = "ok" if code == 0 else f"FAILED (exit {code})"
        lines.append(f"   {LABELS.get(target, target):<{width}}  {seconds:7.1f} s  {status}")
    total = sum(s for _, s, _ in done)
    lines.append(f"   {'total':<{width}}  {total:7.1f} s  ({total / 60:.1f} min)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.stages", description=__doc__)
    parser.add_argument("targets", nargs="+", help="make targets, run in this order")
    args = parser.parse_args(argv)
    make = os.environ.get("MAKE", "make")
    done = []
    for i, target in enumerate(args.targets, 1):
        print(f"== {i}/{len(args.targets)} {LABELS.get(target, target)}", flush=True)
        start = time.perf_counter()
        code = subprocess.call([make, "--no-print-directory", target])
        done.append((target, time.perf_counter() - start, code))
        if code != 0:
            break
    print(table(done), flush=True)
    failed = [t for t, _, c in done if c != 0]
    if not failed:
        print("make test: all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
