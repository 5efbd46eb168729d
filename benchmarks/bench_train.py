"""Members × steps per second of the studies' cohorts, old path against new, and against the machine.

For each cohort of chapters 5–6's studies (:mod:`icl_book.studies`) this trains its members for a few
steps, one torch thread, in one run:

- **old**: the path the studies used before, members one after another inside a step
  (``chunk_size=1``), in the cohort's former dtype (float64 at depth 8);
- **new**: the studies' trainer today, every member in one vectorised call (``chunk_size`` = all),
  float32 (depth 8 after its float64 warm-up);

and prints members × steps / s for both, their ratio, the new step's achieved GFLOP/s (counted by
:class:`torch.utils.flop_counter.FlopCounterMode`, forward and backward) and that as a fraction of a
1024 × 1024 float32 matrix product measured in the same run (the roofline one core reaches). Sampling
the prompts (NumPy) is part of every step. Run it on a quiet machine: ``python benchmarks/bench_train.py``
(about three minutes); the load average is printed with the table.
"""

from __future__ import annotations

import os
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from icl_book import studies

STEPS = 8
#: (study, cohort, context length of the runs kept or None for the cohort's first, former dtype)
COHORTS = [
    ("glu", "block16", 25, torch.float32),
    ("glu", "block16", 100, torch.float32),
    ("glu", "lsa", None, torch.float32),
    ("depth", "deep1", None, torch.float32),
    ("depth", "deep2", None, torch.float32),
    ("depth", "deep4", None, torch.float32),
    ("depth", "deep8", None, torch.float64),
]


def cohort_of(study, name, n):
    from dataclasses import replace

    cohort = next(c for c in studies.cohorts(study) if c.name == name)
    runs = tuple(r for r in cohort.runs if n is None or (r.context_len == n and r.lr == 0.01))
    return replace(cohort, runs=runs[:10])


def throughput(trainer) -> float:
    trainer.step()  # warm-up (vmap traces on its first call)
    start = time.perf_counter()
    for _ in range(STEPS):
        trainer.step()
    return len(trainer.members) * STEPS / (time.perf_counter() - start)


def step_flops(trainer) -> float:
    with FlopCounterMode(display=False) as counter:
        trainer.step()
    return counter.get_total_flops() / len(trainer.members)


def roofline() -> float:
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    start = time.perf_counter()
    for _ in range(20):
        a @ b
    return 20 * 2 * 1024**3 / (time.perf_counter() - start)


def main() -> None:
    torch.set_num_threads(1)
    peak = roofline()
    print(f"load average {os.getloadavg()[0]:.2f}; 1024² float32 matmul: {peak / 1e9:.1f} GFLOP/s")
    print(
        f"{'cohort':>14} {'members':>7} {'old m·s/s':>10} {'new m·s/s':>10} {'new/old':>8} "
        f"{'MFLOP/step':>10} {'GFLOP/s':>8} {'of peak':>8}"
    )
    for study, name, n, old_dtype in COHORTS:
        cohort = cohort_of(study, name, n)
        old = throughput(studies.study_trainer(cohort, chunk_size=1, dtype=old_dtype))
        trainer = studies.study_trainer(cohort, dtype=torch.float32)
        new = throughput(trainer)
        flops = step_flops(trainer)
        rate = flops * new
        label = name if n is None else f"{name} N{n}"
        print(
            f"{label:>14} {len(cohort.runs):>7} {old:>10.1f} {new:>10.1f} {new / old:>8.2f} "
            f"{flops / 1e6:>10.1f} {rate / 1e9:>8.2f} {rate / peak:>8.1%}"
        )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
