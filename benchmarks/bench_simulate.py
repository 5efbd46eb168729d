"""Benchmark of icl_book.simulate against the dense reference method.

Run: ``.venv/bin/python benchmarks/bench_simulate.py`` (all three parts; ``--quick`` skips the d = 200 run),
``--figure4-only`` (part 0 alone; ``--dims 10 32`` and ``--ref-fits N`` narrow it). ``--authors-repo PATH``
adds Lu et al.'s own code to part 0 (below); nothing of theirs is in this repository.

0. **Lu et al.'s Figure-4 workload** (their public script's grid: α = τ = 10, ρ = 0.01, λ = 1e-6, twelve κ from
   0.2 to 32, twenty draws each) at d = 10, 32, 64, through :func:`icl_book.simulate.sweep` (``solver="auto"``,
   ``sampler="wishart"``), against the *dense reference*: the same prompts (same seed, same sampler), explicit
   ``d(d+1)`` features ``vec(x_q hᵀ)``, the Gram matrix by one float64 matrix product per block of ``3d²``
   prompts (as the authors' script does), Cholesky, and the same exact errors. One BLAS thread on both
   sides, timed back to back in this run. The simulator runs all 240 fits at each tolerance of ``FIG4_TOLS``
   (the sweep's default 1e-10, and 1e-6, where chapter 3's own simulations stop), its e_ICL compared with
   the reference's on the same fits; the reference runs ``--ref-fits``
   of them (every fit has the same sizes, so its time per fit does not depend on κ; all 240 at d = 64 would
   take hours) and its sweep time is its mean time per fit × 240. Printed per d: both sweep times, their
   ratio, the route the cost model picked for every κ, the largest relative difference of e_ICL between
   the two on the fits both ran, the achieved GFLOP/s of each solve against a large float32 matrix product's
   in the same run, the simulator's time per fit with the default ``sampler="labels"`` (the draws behind
   the book's stored results), and the load average.

   The reference is stricter than the authors' script: it draws its prompts with the simulator's
   ``O(d)`` sampler. With ``--authors-repo PATH`` (a checkout of their public repository,
   github.com/Pehlevan-Group/incontext-asymptotics-experiments, MIT), the table also times their own
   Figure-4 fit, ``errors_from_DATA`` of ``theory_runs/common.py`` with one draw (its per-prompt loop,
   Gram matrix and solve, exactly as their ``quick_and_easy_figure/run.py`` calls it, without the dMMSE
   baseline that script also runs), on ``FIG4_AUTHORS_FITS`` fits spread over the κ like the
   reference's; their sweep time is their mean time per fit × 240, and each of their e_ICL is placed
   in the spread of the simulator's 20 draws at the same κ (``|z|``: distance to their mean in standard
   deviations; their draws are not ours, so this checks that both compute the same quantity, not an
   identity). The median ``|z|`` is printed, about 0.7 when the two agree: at small κ the spread is
   heavy-tailed (two tasks at d = 10, κ = 0.2), and one draw far out says nothing.

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

import math
import os
import resource
import subprocess
import sys
import time

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits

from icl_book.simulate import (
    REFINE_TOL,
    gamma_errors,
    problem_sizes,
    sample_reduced_prompts,
    simulated_errors,
    solve_reduced_ridge,
    sweep,
)
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


# Lu et al.'s Figure-4 grid (their quick_and_easy_figure/run.py): κ, α, τ, ρ, λ and the draws per κ.
FIG4_KAPPAS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.6, 2.0, 4.0, 8.0, 16.0, 32.0)
FIG4_ALPHA, FIG4_TAU, FIG4_RHO, FIG4_RIDGE, FIG4_DRAWS = 10.0, 10.0, 0.01, 1e-6, 20
# The sweep's default tolerance, and the one chapter 3's own simulations stop at (its errors then move
# far below the digits printed): the simulator runs the workload at each, the reference solves exactly.
FIG4_TOLS = (1e-10, 1e-6)
# Reference fits timed per d unless --ref-fits says otherwise (~0.6 s each at d = 32, ~40 s at d = 64).
FIG4_REF_FITS = {10: 240, 32: 24, 64: 3}
# The authors' own fits timed per d with --authors-repo (~1 s each at d = 32, ~20-40 s at d = 64).
FIG4_AUTHORS_FITS = {10: 24, 32: 12, 64: 2}


def _fig4_point(dim: int, kappa: float, tol: float) -> dict:
    return {
        "tol": tol,
        "dim": dim,
        "alpha": FIG4_ALPHA,
        "tau": FIG4_TAU,
        "kappa": kappa,
        "noise_var": FIG4_RHO,
        "ridge": FIG4_RIDGE,
        "sampler": "wishart",
    }


def dense_reference_fit(dim: int, kappa: float, seed: int) -> tuple[float, float, float]:
    """One fit the reference way: ``(e_ICL, seconds, seconds of the Gram product and Cholesky)``.

    The prompts are the simulator's for this seed (same generator calls as
    :func:`icl_book.simulate.pretrain_reduced_lsa`), so the two solve the same system.
    """
    t0 = time.perf_counter()
    ell, n, k = problem_sizes(dim, FIG4_ALPHA, FIG4_TAU, kappa)
    rng = np.random.default_rng(seed)
    pool = sample_task_pool(k, dim, rng=rng)
    p = sample_reduced_prompts(
        n, ell, dim, rng=rng, noise_var=FIG4_RHO, task_pool=pool, sampler="wishart"
    )
    t1 = time.perf_counter()
    gamma = reference_solve(p.x_query, p.h, p.y_query, FIG4_RIDGE, block=3 * dim * dim)
    t2 = time.perf_counter()
    icl = gamma_errors(gamma, ell / dim, FIG4_RHO, pool).icl
    return icl, time.perf_counter() - t0, t2 - t1


def _authors_module(repo: str):
    """Lu et al.'s ``theory_runs/common.py`` from a checkout of their repository, imported by path."""
    import importlib.util

    path = os.path.join(repo, "theory_runs", "common.py")
    if not os.path.isfile(path):
        raise SystemExit(f"--authors-repo: no theory_runs/common.py under {repo!r}")
    spec = importlib.util.spec_from_file_location("lu_et_al_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def authors_fit(module, dim: int, kappa: float, seed: int) -> tuple[float, float]:
    """One fit by the authors' code, one draw: ``(e_ICL, seconds)`` (their global NumPy seed)."""
    np.random.seed(seed)  # noqa: NPY002 -- their code draws from the legacy global generator
    t0 = time.perf_counter()
    icl, _, _, _ = module.errors_from_DATA(
        dim, FIG4_ALPHA, kappa, FIG4_TAU, FIG4_RHO, FIG4_RIDGE, 1
    )
    return float(icl), time.perf_counter() - t0


def sgemm_gflops(size: int = 2000) -> float:
    """One large float32 matrix product: the machine's attainable rate on this thread, now."""
    a = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32)
    a @ a
    t0 = time.perf_counter()
    a @ a
    return 2 * size**3 / (time.perf_counter() - t0) / 1e9


def figure4(dims, ref_fits: int | None, authors_repo: str | None = None) -> None:
    print(
        f"Figure-4 workload: alpha = tau = {FIG4_ALPHA:g}, rho = {FIG4_RHO}, lambda = {FIG4_RIDGE:g}, "
        f"{len(FIG4_KAPPAS)} kappas x {FIG4_DRAWS} draws; one BLAS thread on both sides; "
        "the simulator at each tolerance, the reference exact"
    )
    header = (
        f"{'d':>3} {'tol':>6} {'sim s':>7} {'ref s':>8} {'ratio':>6} {'ref fits':>8} {'max|de|':>8} "
        f"{'sim GF/s':>8} {'ref GF/s':>8} {'sgemm':>6} {'labels s/fit':>12} {'load':>5}  routes by kappa"
    )
    authors = None if authors_repo is None else _authors_module(authors_repo)
    print(header)
    authors_rows = []
    seeds = list(range(FIG4_DRAWS))
    for dim in dims:
        with threadpool_limits(1):
            gemm = sgemm_gflops()
            # the reference on a subset of the fits, spread over the kappas
            n_ref = FIG4_REF_FITS.get(dim, 3) if ref_fits is None else ref_fits
            pairs = [(k, s) for s in seeds for k in range(len(FIG4_KAPPAS))][:n_ref]
            ref_icl, ref_times, gram_times = [], [], []
            for k, s in pairs:
                icl, t_fit, t_gram = dense_reference_fit(dim, FIG4_KAPPAS[k], s)
                ref_icl.append(icl)
                ref_times.append(t_fit)
                gram_times.append(t_gram)
            # the default sampler's cost, on the first fits
            labels = [
                _timed(
                    simulated_errors,
                    dim,
                    FIG4_ALPHA,
                    FIG4_TAU,
                    FIG4_KAPPAS[k],
                    FIG4_RHO,
                    FIG4_RIDGE,
                    rng=s,
                )  # fmt: skip
                for k, s in pairs[: min(len(pairs), 5)]
            ]
            _, n, _ = problem_sizes(dim, FIG4_ALPHA, FIG4_TAU)
            features = dim * (dim + 1)
            t_ref = float(np.mean(ref_times)) * len(FIG4_KAPPAS) * len(seeds)
            ref_gflops = (2 * n * features**2 + features**3 / 3) / float(np.mean(gram_times)) / 1e9
            if authors is not None:
                n_auth = FIG4_AUTHORS_FITS.get(dim, 2)
                auth_pairs = [(k, s) for s in seeds for k in range(len(FIG4_KAPPAS))][:n_auth]
                auth = [authors_fit(authors, dim, FIG4_KAPPAS[k], s) for k, s in auth_pairs]
                t_auth = float(np.mean([t for _, t in auth])) * len(FIG4_KAPPAS) * len(seeds)
            for tol in FIG4_TOLS:
                points = [_fig4_point(dim, kappa, tol) for kappa in FIG4_KAPPAS]
                t0 = time.perf_counter()
                table = sweep(points, seeds=seeds)
                t_sim = time.perf_counter() - t0
                diffs = [
                    abs(icl / table[k].icl[s] - 1)
                    for icl, (k, s) in zip(ref_icl, pairs, strict=True)
                ]
                # the route the cost model picked, as each row of the sweep reports it
                sim_solve = _solve_rate(dim, table[FIG4_KAPPAS.index(1.0)].solver, tol)
                routes = " ".join(row.solver for row in table)
                if authors is not None:
                    # their draw against the spread of the simulator's 20 draws at its kappa
                    spread = float(
                        np.median(
                            [
                                abs(icl - float(np.mean(table[k].icl)))
                                / float(np.std(table[k].icl))
                                for (icl, _), (k, _) in zip(auth, auth_pairs, strict=True)
                            ]
                        )
                    )
                    authors_rows.append((dim, tol, t_sim, t_auth, n_auth, spread))
                print(
                    f"{dim:>3} {tol:>6.0e} {t_sim:>7.1f} {t_ref:>8.1f} {t_ref / t_sim:>5.1f}x "
                    f"{len(pairs):>8} {max(diffs):>8.1e} {sim_solve:>8.1f} {ref_gflops:>8.1f} "
                    f"{gemm:>6.1f} {float(np.mean(labels)):>12.3f} {os.getloadavg()[0]:>5.1f}  {routes}"
                )
    if authors_rows:
        print(
            "\nThe authors' own fit (errors_from_DATA, one draw per fit; sweep = mean per fit x 240), "
            "same run, one BLAS thread:"
        )
        print(
            f"{'d':>3} {'tol':>6} {'sim s':>7} {'authors s':>10} {'ratio':>6} {'their fits':>10} "
            f"{'median |z| of their e_ICL':>27}"
        )
        for dim, tol, t_sim, t_auth, n_auth, spread in authors_rows:
            print(
                f"{dim:>3} {tol:>6.0e} {t_sim:>7.1f} {t_auth:>10.1f} {t_auth / t_sim:>5.1f}x "
                f"{n_auth:>10} {spread:>27.2f}"
            )


def _timed(fn, *args, **kwargs) -> float:
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t0


def _solve_rate(dim: int, route: str, tol: float) -> float:
    """GFLOP/s of the simulator's solve on one Figure-4 fit (κ = 1): the route's floating-point work
    (PCG: 4 n d(d+1) per step and per float64 residual; dense: the Gram product and Cholesky) over its time."""
    ell, n, k = problem_sizes(dim, FIG4_ALPHA, FIG4_TAU, 1.0)
    rng = np.random.default_rng(0)
    pool = sample_task_pool(k, dim, rng=rng)
    p = sample_reduced_prompts(
        n, ell, dim, rng=rng, noise_var=FIG4_RHO, task_pool=pool, sampler="wishart"
    )
    features = dim * (dim + 1)
    t0 = time.perf_counter()
    _, info = solve_reduced_ridge(p.x_query, p.h, p.y_query, FIG4_RIDGE, tol=tol, solver=route)
    elapsed = time.perf_counter() - t0
    if route == "pcg":
        # the right-hand side and one float64 residual per float32 refinement round
        rounds = max(1, math.ceil(math.log(tol) / math.log(REFINE_TOL)))
        flops = (info.iterations + rounds + 1) * 4 * n * features
    else:
        flops = 2 * n * features**2 + features**3 / 3
    return flops / elapsed / 1e9


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


def _figure4_args(argv: list[str]) -> tuple[list[int], int | None, str | None]:
    dims = [10, 32, 64]
    if "--dims" in argv:
        i = argv.index("--dims") + 1
        dims = []
        while i < len(argv) and argv[i].isdigit():
            dims.append(int(argv[i]))
            i += 1
        if not dims or 0 in dims:
            raise SystemExit("--dims takes one or more integers >= 1")
    ref_fits = _flag_value(argv, "--ref-fits")
    if ref_fits is not None:
        if not ref_fits.isdigit() or int(ref_fits) < 1:
            raise SystemExit(f"--ref-fits takes an integer >= 1, got {ref_fits!r}")
        ref_fits = int(ref_fits)
    return dims, ref_fits, _flag_value(argv, "--authors-repo")


def _flag_value(argv: list[str], flag: str) -> str | None:
    """The value after ``flag`` in ``argv``, ``None`` without the flag; a flag without one is refused."""
    if flag not in argv:
        return None
    i = argv.index(flag) + 1
    if i == len(argv) or argv[i].startswith("--"):
        raise SystemExit(f"{flag} needs a value")
    return argv[i]


if __name__ == "__main__":
    if "--big-only" in sys.argv:
        big_run()
    else:
        dims, ref_fits, authors_repo = _figure4_args(sys.argv)
        figure4(dims, ref_fits, authors_repo)
        if "--figure4-only" not in sys.argv:
            print()
            main(quick="--quick" in sys.argv)
