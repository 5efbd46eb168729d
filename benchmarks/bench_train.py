"""Members × steps per second: chapter 5's blocks trained one at a time and batched.

The study of chapter 5 trains many LSA+GLU blocks (d = 4, 16 + 16, 256 prompts per step). This prints,
for 8 blocks at N = 25 and N = 100, the throughput of training them one after another with
:func:`icl_book.train.train_in_context` and together with :class:`icl_book.train.BatchedTrainer`
(members run one after another inside a step, or ``chunk_size`` at a time through one ``vmap``), one torch
thread. Run it on a quiet machine: ``python benchmarks/bench_train.py``.
"""

from __future__ import annotations

import time

import torch

from icl_book.attention import TransformerBlock
from icl_book.tasks import sample_quadratic_prompts
from icl_book.train import BatchedTrainer, Member, train_in_context

MEMBERS, STEPS, BATCH = 8, 20, 256


def members(n):
    def sampler(rng, b):
        return sample_quadratic_prompts(b, n, 4, rng=rng, noise_var=0.1)

    return [
        Member(
            f"m{s}",
            TransformerBlock(
                4, 16, 16, init_scale=0.25, generator=torch.Generator().manual_seed(s)
            ),
            sampler,
            seed=s,
            lr=0.01,
            warmup=10,
        )
        for s in range(MEMBERS)
    ]


def one_at_a_time(n) -> float:
    start = time.perf_counter()
    for m in members(n):
        train_in_context(
            m.model, m.sample_prompts, steps=STEPS, lr=m.lr, seed=m.seed,
            batch_size=BATCH, schedule="rsqrt", warmup=m.warmup,
        )  # fmt: skip
    return MEMBERS * STEPS / (time.perf_counter() - start)


def batched(n, chunk_size) -> float:
    trainer = BatchedTrainer(members(n), batch_size=BATCH, chunk_size=chunk_size)
    trainer.step()  # warm-up (vmap's first call traces)
    start = time.perf_counter()
    for _ in range(STEPS):
        trainer.step()
    return MEMBERS * STEPS / (time.perf_counter() - start)


def main() -> None:
    torch.set_num_threads(1)
    print(f"{MEMBERS} blocks 16+16, d = 4, {BATCH} prompts per step, 1 thread")
    print(f"{'N':>5} {'method':>26} {'members x steps / s':>20}")
    for n in (25, 100):
        print(f"{n:>5} {'one at a time':>26} {one_at_a_time(n):20.1f}")
        for chunk in (1, 4, 8):
            print(f"{n:>5} {f'batched, chunk_size={chunk}':>26} {batched(n, chunk):20.1f}")


if __name__ == "__main__":
    main()
