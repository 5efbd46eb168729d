"""Tests of icl_book.simulate.sweep: validation, statistics and bitwise-identical tables on every executor.

Bitwise equality is asserted only where it is true: between runs on the same machine, with the same code
(serial, thread pool, process pool, dask, another BLAS thread count in the caller; each task pins one
BLAS thread). A stored table, written on another machine, is compared to rounding (``COMPUTED_REL_TOL``).
"""

import dataclasses
import os
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

from icl_book.simulate import SweepResult, simulated_errors, sweep
from icl_book.theory import nonlinear_error_of_gamma

# Small d so that a full table takes well under a second per task; κ finite (IDG) and a nonlinear teacher.
POINTS = [
    {"dim": 24, "alpha": 1.0, "tau": 2.0, "noise_var": 0.01},
    {"dim": 24, "alpha": 1.0, "tau": 0.5, "kappa": 1.0, "noise_var": 0.01},
    {"dim": 24, "alpha": 2.0, "tau": 1.5, "kappa": 0.5, "noise_var": 0.01, "ridge": 0.1},
    {"dim": 20, "alpha": 1.0, "tau": 3.0, "kappa": 2.0, "noise_var": 0.1, "link": "tanh"},
]
SEEDS = [0, 1, 2]


def _bits(table):
    return [(r.icl, r.idg, r.icl_mean, r.icl_sem, r.idg_mean, r.idg_sem) for r in table]


def _same(a, b):
    """Bitwise equality of two tables (nan == nan)."""
    flat_a = np.array([v for row in _bits(a) for part in row for v in np.atleast_1d(part)])
    flat_b = np.array([v for row in _bits(b) for part in row for v in np.atleast_1d(part)])
    return flat_a.tobytes() == flat_b.tobytes()


@pytest.fixture(scope="module")
def serial_table():
    return sweep(POINTS, seeds=SEEDS)


def test_table_is_tidy_and_matches_the_single_simulations(serial_table):
    assert len(serial_table) == len(POINTS)
    assert all(isinstance(r, SweepResult) for r in serial_table)
    first = serial_table[0]
    assert first.seeds == tuple(SEEDS) and first.kappa == np.inf and first.link is None
    # Each seed is simulated_errors with default_rng(seed): the same numbers (1 BLAS thread for both).
    from icl_book._blas import OneBlasThread

    with OneBlasThread():
        direct = [
            simulated_errors(24, 1.0, 0.5, 1.0, 0.01, rng=np.random.default_rng(s)) for s in SEEDS
        ]
    assert serial_table[1].icl == tuple(e.icl for e in direct)
    assert serial_table[1].idg == tuple(e.idg for e in direct)
    # Mean and standard error over seeds.
    icl = np.array(serial_table[1].icl)
    assert serial_table[1].icl_mean == pytest.approx(icl.mean(), rel=1e-15)
    assert serial_table[1].icl_sem == pytest.approx(icl.std(ddof=1) / np.sqrt(3), rel=1e-12)
    assert np.isnan(first.idg_mean) and np.isnan(first.idg_sem) and all(np.isnan(first.idg))
    # The nonlinear point is evaluated with the exact nonlinear error, not the linear formula.
    nl = serial_table[3]
    assert nl.link == "tanh" and np.all(np.isfinite(nl.idg))
    assert 0 < nl.icl_sem < nl.icl_mean


def test_nonlinear_point_uses_the_exact_nonlinear_error():
    from icl_book._blas import OneBlasThread
    from icl_book.simulate import pretrain_reduced_lsa

    row = sweep([POINTS[3]], seeds=[5])[0]
    with OneBlasThread():
        gamma, _ = pretrain_reduced_lsa(
            20, 1.0, 3.0, 2.0, 0.1, link=np.tanh, rng=np.random.default_rng(5)
        )
    assert row.icl[0] == nonlinear_error_of_gamma(gamma, "tanh", 1.0, 0.1)


def test_thread_pool_gives_the_same_bits(serial_table):
    with ThreadPoolExecutor(max_workers=2) as pool:
        assert _same(sweep(POINTS, seeds=SEEDS, executor=pool), serial_table)


def test_process_pool_gives_the_same_bits(serial_table):
    with ProcessPoolExecutor(max_workers=2) as pool:
        assert _same(sweep(POINTS, seeds=SEEDS, executor=pool), serial_table)


def test_independent_of_the_callers_blas_threads(serial_table):
    """A fresh interpreter with 1 BLAS thread (this one uses the default) prints the same bits."""
    code = (
        "from tests.test_sweep import POINTS, SEEDS\n"
        "from icl_book.simulate import sweep\n"
        "print([[v.hex() for v in r.icl + r.idg] for r in sweep(POINTS, seeds=SEEDS)])\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == str([[v.hex() for v in r.icl + r.idg] for r in serial_table])


@pytest.mark.slow
def test_dask_local_cluster_gives_the_same_bits(serial_table):
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        table = sweep(POINTS, seeds=SEEDS, executor=client.get_executor())
    assert _same(table, serial_table)


@pytest.mark.parametrize(
    ("points", "seeds", "error", "match"),
    [
        ("abc", [0], TypeError, "points"),
        ([], [0], ValueError, "points"),
        ([{"dim": 10, "alpha": 1.0}], [0], ValueError, "required keys"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0, "noise": 0.1}], [0], ValueError, "unknown keys"),
        ([{"dim": 10.0, "alpha": 1.0, "tau": 1.0}], [0], TypeError, r"points\[0\]\['dim'\]"),
        ([{"dim": 10, "alpha": -1.0, "tau": 1.0}], [0], ValueError, r"points\[0\]\['alpha'\]"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0, "kappa": 0}], [0], ValueError, "kappa"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0, "kappa": "1"}], [0], TypeError, "kappa"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0, "link": "nope"}], [0], ValueError, "link"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0, "link": 3}], [0], TypeError, "link"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1e-4}], [0], ValueError, "tau"),
        ([7], [0], TypeError, r"points\[0\]"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0}], [], ValueError, "seeds"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0}], [0, 0], ValueError, "distinct"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0}], [1.0], TypeError, r"seeds\[0\]"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0}], [-1], ValueError, r"seeds\[0\]"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0}], 3, TypeError, "seeds"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0}], [()], ValueError, r"seeds\[0\]"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0}], [(1, -1)], ValueError, r"seeds\[0\]\[1\]"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0}], [(1, 2.0)], TypeError, r"seeds\[0\]\[1\]"),
        ([{"dim": 10, "alpha": 1.0, "tau": 1.0}], [(1, 2), [1, 2]], ValueError, "distinct"),
    ],
)
def test_bad_inputs_name_the_argument(points, seeds, error, match):
    with pytest.raises(error, match=match):
        sweep(points, seeds=seeds)


def test_a_seed_may_be_a_seed_sequence_entropy():
    # (2026, 1, 0) seeds default_rng((2026, 1, 0)): streams keyed by several indices (booktools.explorer_data)
    from icl_book._blas import OneBlasThread

    row = sweep([POINTS[1]], seeds=[(2026, 1, 0), 3])[0]
    assert row.seeds == ((2026, 1, 0), 3)
    with OneBlasThread():
        direct = [
            simulated_errors(24, 1.0, 0.5, 1.0, 0.01, rng=np.random.default_rng(s))
            for s in ([2026, 1, 0], 3)
        ]
    assert row.icl == tuple(e.icl for e in direct) and row.idg == tuple(e.idg for e in direct)


def test_bad_executor():
    with pytest.raises(TypeError, match="executor"):
        sweep([{"dim": 10, "alpha": 1.0, "tau": 1.0}], seeds=[0], executor=object())


# --- stored sweep tables of chapters 3 and 4: defined and computed by booktools/tables.py ---

from booktools import tables  # noqa: E402
from icl_book.book import load_table  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "icl_book", "data")


def _stored_lines(name):
    with open(os.path.join(DATA, f"{name}.csv")) as fh:
        lines = fh.read().splitlines()
    return lines[:4], [line.split(",") for line in lines[4:]]


@pytest.mark.parametrize("name", sorted(tables.TABLES))
def test_stored_table_is_the_grid_defined_in_booktools(name):
    """Staleness: the header (command, grid, columns) and the rows are what booktools.tables writes now."""
    table = tables.TABLES[name]()
    header, rows = _stored_lines(name)
    assert header == table.header(), f"{name}.csv is stale: re-run {table.command}"
    assert len(rows) == len(table.points) * len(table.seeds)
    assert all(len(r) == len(table.columns) for r in rows)
    # the labels and parameters of every row are the grid's, in order
    for k, (labels, point) in enumerate(table.points):
        for i, seed in enumerate(table.seeds):
            row = dict(zip(table.columns, rows[k * len(table.seeds) + i], strict=True))
            assert int(row["seed"]) == seed
            assert float(row["tau"]) == point["tau"] and float(row["alpha"]) == point["alpha"]
            assert tuple(row[c] for c in table.columns[: len(labels)]) == labels


@pytest.mark.parametrize("name", sorted(tables.TABLES))
def test_load_table_reads_the_stored_table(name):
    table = tables.TABLES[name]()
    loaded = load_table(name)
    assert loaded.dtype.names == table.columns
    assert loaded.shape == (len(table.points) * len(table.seeds),)


def test_load_table_refuses_an_unknown_name():
    with pytest.raises(ValueError, match="name must be one of the stored tables"):
        load_table("asymptotics")


# The computed columns of the stored tables and how closely a fresh run on another machine must agree
# with the stored value (relative). The tables are written on one machine and re-run on any other, whose
# CPU may have other SIMD kernels (NumPy dispatches tanh, exp, ... to AVX-512 where the CPU has it) and
# another OpenBLAS kernel: such values agree to rounding, never as text (mu1 was compared as
# text and failed on an AVX-512 machine, '0.6057055096021587' != '0.6057055096021589'). Every other
# column is an input (a label, a grid value, a seed) and is compared as text.
COMPUTED_REL_TOL = {
    # e_ICL, e_IDG of a Γ pretrained by conjugate gradients: another summation order (another BLAS
    # kernel, or BLAS threads) moves them by up to ~1e-9 relative (measured at d = 80 with 1 and 2
    # BLAS threads; icl_book._blas.OneBlasThread). Measured between AVX-512, AVX2 and SSE4 kernels
    # (NPY_DISABLE_CPU_FEATURES, OPENBLAS_CORETYPE): <= 9e-16.
    "icl": 1e-9,
    "idg": 1e-9,
    # μ_1 and ρ_eff of the teacher: sums over the quadrature's ~10^3 nodes of ufunc values each right to
    # a few ulps, so <= ~1e-13 relative; measured <= 9e-16 between the same three kinds of kernels.
    "mu1": 1e-12,
    "rho_eff": 1e-12,
}


def test_every_computed_column_has_a_tolerance():
    """A new computed column must say how precise it is (else it would be compared as text)."""
    inputs = {"set", "teacher", "dim", "alpha", "tau", "kappa", "noise_var", "ridge", "seed"}
    for name, make in tables.TABLES.items():
        columns = set(make().columns)
        assert columns - inputs <= set(COMPUTED_REL_TOL), name
        assert columns - set(COMPUTED_REL_TOL) <= inputs, name


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(tables.TABLES))
def test_stored_table_reproduces(name):
    """Consistency: re-running the table's first (cheapest) point with its first seed gives the stored line:
    its inputs as text, its computed values to the rounding of :data:`COMPUTED_REL_TOL`. Holds on any CPU;
    ``tests/test_portable_numerics.py`` re-runs it with the machine's widest SIMD kernels disabled."""
    table = tables.TABLES[name]()
    first = dataclasses.replace(table, points=table.points[:1], seeds=table.seeds[:1])
    _, rows = _stored_lines(name)
    got = tables.compute(first)[4].split(",")
    stored = dict(zip(table.columns, rows[0], strict=True))
    fresh = dict(zip(table.columns, got, strict=True))
    for col in table.columns:
        if col in COMPUTED_REL_TOL:
            assert float(fresh[col]) == pytest.approx(
                float(stored[col]), rel=COMPUTED_REL_TOL[col], abs=0, nan_ok=True
            ), col
        else:
            assert fresh[col] == stored[col], col


def test_a_changed_stored_value_fails_the_comparison():
    """The tolerances are rounding, not slack: a stored μ_1 off in its 11th digit is refused."""
    stored, fresh = 0.6057055096021589, 0.6057055096021587
    assert fresh == pytest.approx(stored, rel=COMPUTED_REL_TOL["mu1"], abs=0)
    assert fresh != pytest.approx(stored * (1 + 1e-11), rel=COMPUTED_REL_TOL["mu1"], abs=0)
    assert 0.66739 != pytest.approx(0.66740, rel=COMPUTED_REL_TOL["icl"], abs=0)
