"""Members × steps per second of the studies' cohorts, old path against new, and against the machine.

For each cohort of chapters 5–6's studies (:mod:`icl_book.studies`) this trains its members for a few
steps, one torch thread, in one run:

- **old**: the path the studies used before, members one after another inside a step
  (``chunk_size=1``), in the cohort's former dtype (float64 at depth 8);
- **new**: the studies' trainer today, every member in one vectorised call (``chunk_size`` = all),
  float32 (depth 8 after its float64 warm-up);

and prints members × steps / s for both, their ratio, and the new step against the machine:

- its FLOPs (:class:`torch.utils.flop_counter.FlopCounterMode`, forward and backward) and achieved
  GFLOP/s, as a fraction of a 1024 × 1024 float32 matrix product measured in the same run (the
  compute roof one core reaches);
- the bytes its compute operators read and write (every tensor argument and result of each aten
  operator that is not a view: a lower bound on the memory traffic once the tensors leave the
  cache), against the bandwidth of a large ``torch.add`` measured in the same run (the memory roof);
- ``÷ roof``: the step's time over the roofline time ``max(FLOPs / peak, bytes / bandwidth)``, the
  factor a perfect implementation of the same operators could still gain; and the share of the
  step spent drawing the prompts (NumPy).

Run it on a quiet machine: ``python benchmarks/bench_train.py`` (about three minutes); the load
average is printed with the table.
"""

from __future__ import annotations

import os
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
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


class _ByteCounter(TorchDispatchMode):
    """Bytes of the tensors each non-view aten operator reads and writes."""

    def __init__(self):
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not any(isinstance(t, torch.Tensor) and t._is_view() for t in tree_leaves(out)):
            for t in tree_leaves((args, kwargs, out)):
                if isinstance(t, torch.Tensor):
                    self.total += t.numel() * t.element_size()
        return out


def step_bytes(trainer) -> float:
    with _ByteCounter() as counter:
        trainer.step()
    return counter.total / len(trainer.members)


def sampling_share(trainer) -> float:
    """The fraction of a step's time spent in the members' ``sample_prompts``."""
    spent = [0.0]
    originals = [m.sample_prompts for m in trainer.members]

    def timed(fn):
        def wrapper(*args):
            start = time.perf_counter()
            out = fn(*args)
            spent[0] += time.perf_counter() - start
            return out

        return wrapper

    for m in trainer.members:  # frozen dataclass: swap its attribute for the measurement only
        object.__setattr__(m, "sample_prompts", timed(m.sample_prompts))
    try:
        start = time.perf_counter()
        for _ in range(STEPS):
            trainer.step()
        total = time.perf_counter() - start
    finally:
        for m, fn in zip(trainer.members, originals, strict=True):
            object.__setattr__(m, "sample_prompts", fn)
    return spent[0] / total


def bandwidth() -> float:
    """Bytes per second of ``c = a + b`` on 2²⁵ float32 entries (128 MB each, far past the cache)."""
    a, b = torch.randn(2**25), torch.randn(2**25)
    c = torch.empty_like(a)
    torch.add(a, b, out=c)
    start = time.perf_counter()
    for _ in range(10):
        torch.add(a, b, out=c)
    return 10 * 3 * a.numel() * a.element_size() / (time.perf_counter() - start)


def roofline() -> float:
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    start = time.perf_counter()
    for _ in range(20):
        a @ b
    return 20 * 2 * 1024**3 / (time.perf_counter() - start)


def main() -> None:
    torch.set_num_threads(1)
    peak, bw = roofline(), bandwidth()
    print(
        f"load average {os.getloadavg()[0]:.2f}; 1024² float32 matmul: {peak / 1e9:.1f} GFLOP/s; "
        f"a + b on 128 MB: {bw / 1e9:.1f} GB/s"
    )
    print(
        f"{'cohort':>14} {'members':>7} {'old m·s/s':>10} {'new m·s/s':>10} {'new/old':>8} "
        f"{'MFLOP/m·s':>10} {'GFLOP/s':>8} {'of peak':>8} {'MB/m·s':>8} {'GB/s':>6} "
        f"{'÷ roof':>7} {'sampling':>8}"
    )
    for study, name, n, old_dtype in COHORTS:
        cohort = cohort_of(study, name, n)
        old = throughput(studies.study_trainer(cohort, chunk_size=1, dtype=old_dtype))
        trainer = studies.study_trainer(cohort, dtype=torch.float32)
        new = throughput(trainer)
        flops, nbytes = step_flops(trainer), step_bytes(trainer)
        share = sampling_share(trainer)
        rate = flops * new
        roof = max(flops / peak, nbytes / bw)  # seconds per member-step at the roofline
        label = name if n is None else f"{name} N{n}"
        print(
            f"{label:>14} {len(cohort.runs):>7} {old:>10.1f} {new:>10.1f} {new / old:>8.2f} "
            f"{flops / 1e6:>10.1f} {rate / 1e9:>8.2f} {rate / peak:>8.1%} "
            f"{nbytes / 1e6:>8.1f} {nbytes * new / 1e9:>6.2f} {1 / new / roof:>7.1f} {share:>8.0%}"
        )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
