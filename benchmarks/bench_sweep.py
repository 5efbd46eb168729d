"""Lu et al.'s Figure 1 sweep through :func:`icl_book.simulate.sweep`, beside the theory, on any executor.

Ridgeless reduced linear attention at τ ∈ {0.2, 0.5, 0.85, 1.15, 1.5, 2}, α ∈ {1, 10, 100}, κ = 0.5,
ρ = 0.01, d = 100, 10 seeds (Lu et al., arXiv:2405.11751, Figure 1): for every point the mean ± standard error
over seeds of the exact e_ICL and e_IDG of each pretrained Γ, the asymptotic formulas
(:func:`icl_book.theory.icl_error`, :func:`icl_book.theory.idg_error`, at the realised ℓ/d, n/d², K/d) and the
relative deviations. The table is identical, bit for bit, whatever the executor (``tests/test_sweep.py``).

Run (from the repository root)::

    .venv/bin/python benchmarks/bench_sweep.py                        # serial
    .venv/bin/python benchmarks/bench_sweep.py --executor process -j 2 # concurrent.futures process pool
    .venv/bin/python benchmarks/bench_sweep.py --executor dask -j 2    # dask.distributed LocalCluster
    .venv/bin/python benchmarks/bench_sweep.py --scheduler tcp://host:8786  # an existing dask cluster

``--timing`` runs a small sweep (d = 60, 4 seeds) on all three executors and prints their wall times and
whether the tables agree bitwise. ``--dim``, ``--seeds``, ``--alphas``, ``--taus`` change the grid.
dask/distributed are development requirements only (``requirements.in``), not dependencies of the package.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from concurrent.futures import ProcessPoolExecutor

from icl_book.simulate import problem_sizes, sweep
from icl_book.theory import icl_error, idg_error

TAUS = [0.2, 0.5, 0.85, 1.15, 1.5, 2.0]
ALPHAS = [1.0, 10.0, 100.0]
KAPPA, RHO = 0.5, 0.01


@contextlib.contextmanager
def make_executor(kind: str, workers: int, scheduler: str | None):
    if scheduler is not None:
        import distributed

        with distributed.Client(scheduler) as client:
            yield client.get_executor()
    elif kind == "serial":
        yield None
    elif kind == "process":
        with ProcessPoolExecutor(max_workers=workers) as pool:
            yield pool
    elif kind == "dask":
        import distributed

        with (
            distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=40,
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            yield client.get_executor()
    else:
        raise ValueError(f"executor must be serial, process or dask, got {kind!r}")


def grid(dim: int, alphas, taus) -> list[dict]:
    return [
        {"dim": dim, "alpha": a, "tau": t, "kappa": KAPPA, "noise_var": RHO, "tol": 1e-6}
        for a in alphas
        for t in taus
    ]


def theory(point: dict) -> tuple[float, float]:
    d = point["dim"]
    ell, n, k = problem_sizes(d, point["alpha"], point["tau"], point["kappa"])
    a, t, kap = ell / d, n / d**2, k / d
    return float(icl_error(a, t, kap, RHO)), float(idg_error(a, t, kap, RHO))


def print_table(points, table) -> None:
    print(
        f"{'alpha':>6} {'tau':>5} {'e_ICL sim':>17} {'theory':>8} {'dev':>7}"
        f" {'e_IDG sim':>17} {'theory':>8} {'dev':>7}"
    )
    for p, r in zip(points, table, strict=True):
        icl_t, idg_t = theory(p)
        print(
            f"{p['alpha']:>6g} {p['tau']:>5g} {r.icl_mean:>8.4f} ± {r.icl_sem:.4f} {icl_t:>8.4f}"
            f" {100 * (r.icl_mean / icl_t - 1):>+6.1f}% {r.idg_mean:>8.4f} ± {r.idg_sem:.4f}"
            f" {idg_t:>8.4f} {100 * (r.idg_mean / idg_t - 1):>+6.1f}%",
            flush=True,
        )


def timing(workers: int) -> None:
    points = grid(60, [1.0, 10.0], [0.5, 2.0])
    seeds = list(range(4))
    tables = {}
    for kind in ("serial", "process", "dask"):
        t0 = time.perf_counter()
        with make_executor(kind, workers, None) as ex:
            t1 = time.perf_counter()
            tables[kind] = sweep(points, seeds=seeds, executor=ex)
            t2 = time.perf_counter()
        print(
            f"{kind:>8}: sweep {t2 - t1:6.1f} s (with executor start-up and shutdown"
            f" {time.perf_counter() - t0:6.1f} s), {len(points) * len(seeds)} tasks",
            flush=True,
        )
    same = all(tables[k] == tables["serial"] for k in ("process", "dask"))
    print(f"tables bitwise identical on all executors: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor", choices=["serial", "process", "dask"], default="serial")
    parser.add_argument("-j", "--workers", type=int, default=2)
    parser.add_argument("--scheduler", help="address of a running dask scheduler")
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--alphas", type=float, nargs="+", default=ALPHAS)
    parser.add_argument("--taus", type=float, nargs="+", default=TAUS)
    parser.add_argument("--timing", action="store_true")
    args = parser.parse_args()
    if args.timing:
        timing(args.workers)
        return
    points = grid(args.dim, args.alphas, args.taus)
    print(
        f"Lu et al. Figure 1: d = {args.dim}, kappa = {KAPPA}, rho = {RHO}, ridgeless,"
        f" {args.seeds} seeds (mean ± SE), executor = {args.scheduler or args.executor}"
    )
    t0 = time.perf_counter()
    with make_executor(args.executor, args.workers, args.scheduler) as ex:
        table = sweep(points, seeds=list(range(args.seeds)), executor=ex)
    print_table(points, table)
    print(f"{len(points) * args.seeds} simulations in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
