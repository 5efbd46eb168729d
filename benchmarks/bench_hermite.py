"""Benchmark of icl_book.hermite: time of the Hermite coefficients (target: each case < 50 ms).

Run: ``.venv/bin/python benchmarks/bench_hermite.py``. Prints one row per case: the median and the
best of several repeats (after a warm-up call, which also fills the quadrature-rule cache), the
number of quadrature nodes, and the largest error against the closed form where one exists
(orthonormal basis, so the error is on the scale of the coefficients themselves). Timings are
wall-clock on a shared machine: compare medians, and expect them to be inflated when other jobs run.
"""

from __future__ import annotations

import time

import numpy as np

from icl_book.hermite import LINKS, _rule, hermite_coefficients

TARGET_MS = 50.0


def _time(fn, repeats: int = 30) -> tuple[float, float]:
    fn()  # warm-up: builds and caches the quadrature rule
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times)), 1e3 * float(np.min(times))


def _cold(fn) -> float:
    _rule.cache_clear()
    t0 = time.perf_counter()
    fn()
    return 1e3 * (time.perf_counter() - t0)


def main() -> None:
    relu = LINKS["relu"]
    cases = [
        ("hermite_coefficients(np.tanh, 30)", lambda: hermite_coefficients(np.tanh, 30), None),
        ("hermite_coefficients(LINKS['relu'], 30)", lambda: hermite_coefficients(relu, 30), relu),
        (
            "hermite_coefficients(lambda z: np.maximum(z, 0), 30)",
            lambda: hermite_coefficients(lambda z: np.maximum(z, 0.0), 30),
            relu,
        ),
        (
            "hermite_coefficients(LINKS['sign'], 30)",
            lambda: hermite_coefficients(LINKS["sign"], 30),
            LINKS["sign"],
        ),
    ]
    n_nodes = _rule(30, (0.0,))[0].size
    cols = ("cold ms", 8), ("median ms", 10), ("best ms", 8), ("< 50 ms", 8), ("max err", 9)
    header = f"{'case':<56} " + " ".join(f"{c:>{w}}" for c, w in cols)
    print(header)
    print("-" * len(header))
    for name, fn, link in cases:
        cold = _cold(fn)
        med, best = _time(fn)
        err = ""
        if link is not None:
            got = hermite_coefficients(link, 30, normalized=True)
            err = f"{np.max(np.abs(got - link.closed_form_coefficients(30, normalized=True))):.1e}"
        ok = "yes" if med < TARGET_MS and cold < TARGET_MS else "NO"
        print(f"{name:<56} {cold:8.2f} {med:10.2f} {best:8.2f} {ok:>8} {err:>9}")
    print(
        f"\nquadrature nodes for max_degree = 30: {n_nodes} "
        "(composite Gauss–Legendre, split at z = 0)"
    )
    print("'cold' includes building the quadrature rule (first call); later calls reuse the cache.")


if __name__ == "__main__":
    main()
