"""Benchmark of icl_book.simulate: matrix-free pretraining against the dense reference method (issue 5).

Run: ``.venv/bin/python benchmarks/bench_simulate.py`` (``--quick`` skips the d = 200 run).

1. For d = 40, 60, 80 (α = 1, τ = 3, κ = 2, ρ = 0.01, ridgeless) one set of prompts is drawn with the fast
   sampler, and the same prompts are solved twice:
   - *reference*: explicit ``d(d+1)`` features ``vec(x_q hᵀ)``, dense Gram matrix ``ΦᵀΦ`` accumulated in row
     blocks, dense Cholesky solve: ``O(n d⁴ + d⁶)`` time, ``O(d⁴)`` memory;
   - *matrix-free*: :func:`icl_book.simulate.solve_reduced_ridge` (preconditioned CG, ``O(n d²)`` per
     iteration, ``O(n d)`` memory), stopped at relative residual 1e-10 (the default).
   Printed: both times, their ratio (target ≥ 20× at d = 80), and ``max |ΔΓ| / max |Γ|`` (target ≤ 1e-6).
2. The paper-scale run d = 200, α = 1, τ = 3, κ = 2 (n = 120,000 prompts, 40,200 features) in a fresh
   subprocess, so that its peak resident memory (``resource.getrusage``) is its own: sampling time, solve time,
   total (target ≤ 60 s), CG iterations and peak memory (target ≤ 4 GiB).

Times are wall-clock on a shared 2-core machine: they are inflated when other jobs run (the load average is
printed). OpenBLAS threads that compete with other processes slow down dramatically; the thread setting in the
environment (``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS``) is printed with the table.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

import numpy as np
import scipy.linalg

from icl_book.simulate import problem_sizes, sample_reduced_prompts, solve_reduced_ridge
from icl_book.tasks import sample_task_pool

ALPHA, TAU, KAPPA, RHO = 1.0, 3.0, 2.0, 0.01


def _prompts(dim: int, seed: int = 0):
    ell, n, k = problem_sizes(dim, ALPHA, TAU, KAPPA)
    rng = np.random.default_rng(seed)
    pool = sample_task_pool(k, dim, rng=rng)
    return sample_reduced_prompts(n, ell, dim, rng=rng, noise_var=RHO, task_pool=pool)


def reference_solve(x_query, h, y_query, ridge: float = 0.0, block: int = 2048) -> np.ndarray:
    """The reference method: explicit features, dense Gram matrix, dense (Cholesky) solve."""
    n, d = x_query.shape
    p = d * (d + 1)
    gram = np.zeros((p, p))
    rhs = np.zeros(p)
    for start in range(0, n, block):
        sl = slice(start, start + block)
        phi = np.einsum("ni,nj->nij", x_query[sl], h[sl]).reshape(-1, p)  # materialised features
        gram += phi.T @ phi
        rhs += phi.T @ y_query[sl]
    gram[np.diag_indices(p)] += (n / d) * ridge
    return scipy.linalg.solve(gram, rhs, assume_a="pos").reshape(d, d + 1)


def compare(dim: int) -> tuple[float, float, float, int]:
    p = _prompts(dim)
    t0 = time.perf_counter()
    ref = reference_solve(p.x_query, p.h, p.y_query)
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    gamma, info = solve_reduced_ridge(p.x_query, p.h, p.y_query, 0.0, tol=1e-10)
    t_fast = time.perf_counter() - t0
    rel = float(np.abs(gamma - ref).max() / np.abs(ref).max())
    return t_ref, t_fast, rel, info.iterations


def big_run() -> None:
    """d = 200 in this process; prints one machine-readable line."""
    dim = 200
    t0 = time.perf_counter()
    p = _prompts(dim)
    t_sample = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, info = solve_reduced_ridge(p.x_query, p.h, p.y_query, 0.0)
    t_solve = time.perf_counter() - t0
    peak_gib = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    )  # ru_maxrss is in KiB on Linux
    n = p.y_query.shape[0]
    print(
        f"BIG {n} {t_sample:.3f} {t_solve:.3f} {info.iterations} {info.residual:.2e} {peak_gib:.3f} "
        f"{matmul_gflops():.1f}"
    )


def matmul_gflops(size: int = 2000) -> float:
    """Speed of one dense float64 matrix product: a yardstick for how busy the machine is."""
    a = np.random.default_rng(0).standard_normal((size, size))
    a @ a
    t0 = time.perf_counter()
    a @ a
    return 2 * size**3 / (time.perf_counter() - t0) / 1e9


def main(quick: bool) -> None:
    threads = os.environ.get("OPENBLAS_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "default"))
    print(
        f"alpha={ALPHA}, tau={TAU}, kappa={KAPPA}, noise_var={RHO}, ridgeless; BLAS threads: {threads}; "
        f"load average {os.getloadavg()[0]:.1f}; 2000x2000 matmul {matmul_gflops():.1f} GFLOP/s"
    )
    print(
        f"{'d':>4} {'n':>7} {'features':>9} {'reference s':>12} {'matrix-free s':>14} {'ratio':>7} "
        f"{'max|dG|/max|G|':>15} {'CG it':>6}"
    )
    for dim in (40, 60, 80):
        t_ref, t_fast, rel, iters = compare(dim)
        _, n, _ = problem_sizes(dim, ALPHA, TAU, KAPPA)
        print(
            f"{dim:>4} {n:>7} {dim * (dim + 1):>9} {t_ref:>12.2f} {t_fast:>14.3f} {t_ref / t_fast:>6.1f}x "
            f"{rel:>15.1e} {iters:>6}"
        )
    if quick:
        return
    out = subprocess.run(
        [sys.executable, __file__, "--big-only"], capture_output=True, text=True, check=True
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("BIG"))
    _, n, t_sample, t_solve, iters, res, peak, gflops = line.split()
    total = float(t_sample) + float(t_solve)
    print(f"\nd = 200, alpha = 1, tau = 3, kappa = 2: n = {n} prompts, 40200 features")
    print(
        f"  sampling {float(t_sample):.1f} s + solve {float(t_solve):.1f} s = {total:.1f} s (target <= 60 s); "
        f"CG iterations {iters}, relative residual {res}; matmul yardstick {gflops} GFLOP/s"
    )
    print(
        f"  peak resident memory {float(peak):.2f} GiB (target <= 4 GiB; the dense Gram alone would be "
        f"{40200**2 * 8 / 2**30:.1f} GiB)"
    )


if __name__ == "__main__":
    if "--big-only" in sys.argv:
        big_run()
    else:
        main(quick="--quick" in sys.argv)
