"""The package's one mean ± standard-error helper, :func:`icl_book.stats.mean_sem`."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from icl_book import simulate
from icl_book.simulate import sweeps
from icl_book.stats import MeanSEM, mean_sem


def test_mean_and_standard_error_by_hand():
    values = [1.0, 2.0, 4.0, 9.0]  # mean 4, squared deviations 9 + 4 + 0 + 25 = 38
    got = mean_sem(values)
    assert isinstance(got, MeanSEM)
    assert got.mean == 4.0 and got.n == 4
    assert got.sem == pytest.approx(math.sqrt(38 / 3) / 2, rel=1e-15)  # s / √n with ddof = 1
    assert type(got.mean) is float and type(got.sem) is float


def test_it_is_numpys_mean_and_ddof_one_standard_deviation_bit_for_bit():
    draws = np.random.default_rng(0).exponential(size=1001)
    got = mean_sem(draws)
    assert got.mean == draws.mean()
    assert got.sem == draws.std(ddof=1) / np.sqrt(draws.size)


def test_integers_and_lists_of_lists_are_read_as_numbers():
    assert mean_sem([[1, 3], [5, 7]]) == mean_sem([1.0, 3.0, 5.0, 7.0])


def test_axis_summarises_along_one_axis():
    table = np.random.default_rng(1).standard_normal((5, 3, 4))
    by_rows = mean_sem(table, axis=1)
    assert by_rows.n == 3
    assert by_rows.mean.shape == by_rows.sem.shape == (5, 4)
    for i in range(5):
        for k in range(4):
            one = mean_sem(table[i, :, k])
            assert by_rows.mean[i, k] == pytest.approx(one.mean, rel=1e-14)
            assert by_rows.sem[i, k] == pytest.approx(one.sem, rel=1e-14)
    last = mean_sem(table, axis=-1)
    np.testing.assert_array_equal(last.mean, mean_sem(table, axis=2).mean)
    assert last.n == 4


def test_a_95_percent_half_width_is_196_standard_errors():
    """Chapter 2's error bars: 1.96 standard errors (ddof = 1)."""
    draws = np.random.default_rng(2).standard_normal(20_000) ** 2
    half_width = 1.96 * mean_sem(draws).sem
    assert half_width == pytest.approx(1.96 * draws.std(ddof=1) / math.sqrt(draws.size))


@pytest.mark.parametrize(
    "values, axis, match",
    [
        ([3.0], None, r"values must hold at least 2 values \(a standard error needs two\)"),
        ([], None, r"values must hold at least 2 values"),
        (np.ones((1, 5)), 0, r"values must hold at least 2 values along axis 0"),
        (np.ones((4, 0)), None, r"values must hold at least 2 values"),
        ([1.0, np.nan], None, r"values must be finite"),
        ([1.0, np.inf], None, r"values must be finite"),
        ([True, False], None, r"values must be a real numeric array"),
        ("1.5", None, r"values must be a real numeric array"),
        ([1 + 1j, 2.0], None, r"values must be a real numeric array"),
        (None, None, r"values must be a real numeric array"),
        (np.ones((3, 2)), 2, r"axis must be an integer >= -2 and <= 1, got 2"),
        (np.ones((3, 2)), -3, r"axis must be an integer"),
        (np.ones((3, 2)), True, r"axis must be an integer"),
        (np.ones((3, 2)), 1.0, r"axis must be an integer"),
        (np.ones((3, 2)), "0", r"axis must be an integer"),
        (2.0, 0, r"axis must be None"),
    ],
)
def test_bad_input_is_refused_by_name(values, axis, match):
    with pytest.raises((ValueError, TypeError), match=match):
        mean_sem(values, axis=axis)


def test_the_sweep_tabulates_through_mean_sem():
    point = {"dim": 3, "alpha": 1.0, "tau": 2.0, "kappa": 2.0, "noise_var": 0.1}
    (row,) = simulate.sweep([point], seeds=[0, 1, 2])
    icl, idg = mean_sem(row.icl), mean_sem(row.idg)
    assert (row.icl_mean, row.icl_sem, row.idg_mean, row.idg_sem) == (
        icl.mean,
        icl.sem,
        idg.mean,
        idg.sem,
    )
    # the documented exceptions, made at the call site: one seed has no SE; κ = ∞ has no idg
    (one,) = simulate.sweep([{**point, "kappa": np.inf}], seeds=[0])
    assert one.icl_mean == one.icl[0] and math.isnan(one.icl_sem)
    assert math.isnan(one.idg_mean) and math.isnan(one.idg_sem)


def test_the_old_helpers_are_gone(root):
    """One mean ± SE helper: neither the chapters nor the package define their own."""
    assert not hasattr(sweeps, "_mean_sem")
    helper = re.compile(r"^\s*def (mean_and_sem|mean_se|_mean_sem|_mean_se)\b", re.M)
    paths = [*sorted((root / "chapters").glob("*.md")), *sorted((root / "icl_book").rglob("*.py"))]
    found = [str(p.relative_to(root)) for p in paths if helper.search(p.read_text("utf-8"))]
    assert found == []
    for chapter in ("00_prologue.md", "02_lsa_gradient_descent.md"):
        assert "from icl_book.stats import mean_sem" in (root / "chapters" / chapter).read_text()
