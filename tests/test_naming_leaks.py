"""Naming and validation leaks a review found, one test each (its reproducers).

Some were already closed by the package's validators (bools and strings in ``problem_sizes``,
``DeepTransformer(label_norm=np.True_)``, the feature count before enumeration); their tests pin them.
"""

from __future__ import annotations

import inspect
import time

import numpy as np
import pytest

from icl_book import checks, estimators, features, simulate
from icl_book._validate import ArgumentTypeError
from icl_book.attention import deep, gd_lsa_weights, lsa, lsa_predict
from icl_book.simulate import problem_sizes

from .test_api_reference import public_names


# --- 1. problem_sizes: no bool or str for a number; a named tuple ---------------------------------
@pytest.mark.parametrize("position", range(4))
@pytest.mark.parametrize("bad", [True, np.True_, "3"])
def test_problem_sizes_refuses_bools_and_strings_by_name(position, bad):
    args = [10, 1.0, 2.0, 3.0]
    args[position] = bad
    name = ("dim", "alpha", "tau", "kappa")[position]
    with pytest.raises(ArgumentTypeError, match=f"^{name} must be"):
        problem_sizes(*args)


def test_problem_sizes_is_a_named_tuple_that_unpacks_as_before():
    sizes = problem_sizes(10, 1.0, 2.0, 3.0)
    assert isinstance(sizes, simulate.ProblemSizes)
    assert sizes._fields == ("context_len", "batch", "n_tasks")
    assert (sizes.context_len, sizes.batch, sizes.n_tasks) == (10, 200, 30)
    ell, n, k = sizes
    assert (ell, n, k) == (10, 200, 30) and sizes == (10, 200, 30)
    assert problem_sizes(10, 1.0, 2.0).n_tasks is None


# --- 2. gd_lsa_weights: a named tuple -------------------------------------------------------------
def test_gd_lsa_weights_is_a_named_tuple_that_unpacks_as_before():
    weights = gd_lsa_weights(2, 0.5)
    assert isinstance(weights, lsa.LSAWeights) and weights._fields == ("w_kq", "w_pv")
    w_kq, w_pv = weights
    assert w_kq is weights.w_kq and w_pv is weights.w_pv
    assert weights.w_pv[-1, -1] == -0.5
    xs = np.random.default_rng(0).standard_normal((2, 4, 2))
    ys, xq = xs[..., 0], xs[:, 0]
    np.testing.assert_array_equal(
        lsa_predict(xs, ys, xq, *weights), lsa_predict(xs, ys, xq, w_kq, w_pv)
    )


# --- 3. flags: NumPy booleans are booleans, everywhere (_validate.flag) ---------------------------
def test_deep_transformer_takes_a_numpy_bool_flag():
    model = deep.DeepTransformer(2, 6, 1, label_norm=np.True_, init_scale=0.0)
    assert model.label_norm is True


def test_continue_when_unanswered_takes_a_numpy_bool_and_names_the_accepted_values():
    try:
        checks.continue_when_unanswered(np.False_)  # was: "enabled must be a bool, got bool"
        with pytest.raises(ArgumentTypeError, match="enabled must be True or False, got 1"):
            checks.continue_when_unanswered(1)
    finally:
        checks.continue_when_unanswered(False)


# --- 4. the feature count is refused before anything is enumerated --------------------------------
@pytest.mark.parametrize("dim, degree", [(100, 10), (10**6, 10**6), (10**12, 2)])
def test_feature_index_tuples_refuses_a_huge_feature_space_at_once(dim, degree):
    start = time.perf_counter()
    with pytest.raises(ValueError) as err:
        features.feature_index_tuples(dim, degree)
    assert time.perf_counter() - start < 0.5
    text = str(err.value)
    assert f"degree = {degree}" in text and f"dim = {dim}" in text
    assert f"limit of {features.MAX_FEATURES:,}" in text
    if (dim, degree) == (100, 10):
        assert f"{features.n_features(100, 10):,} features" in text  # 46,897,636,623,980


def test_feature_map_shares_the_count_check():
    start = time.perf_counter()
    with pytest.raises(ValueError, match="degree = 10 in dim = 100 is too large"):
        features.feature_map(np.zeros((1, 100)), 10)
    assert time.perf_counter() - start < 0.5


def test_feature_index_tuples_below_the_limit_is_unchanged():
    assert len(features.feature_index_tuples(3, 2)) == features.n_features(3, 2) == 9


# --- 5. every public check is public --------------------------------------------------------------
def test_every_check_function_is_in_checks_all():
    defined = [
        name
        for name, obj in vars(checks).items()
        if name.startswith("check_") and inspect.isfunction(obj)
    ]
    assert "check_prologue_ex1" in defined and "check_prologue_ex2" in defined
    assert [name for name in defined if name not in checks.__all__] == []
    assert "icl_book.checks.check_prologue_ex1" in public_names()  # hence on the API page


# --- 6. one name, one kind of value ----------------------------------------------------------------
def test_solve_reduced_ridge_calls_its_string_option_preconditioning():
    params = inspect.signature(simulate.solve_reduced_ridge).parameters
    assert "preconditioner" not in params and params["preconditioning"].default == "auto"
    rng = np.random.default_rng(0)
    x, h = rng.standard_normal((40, 2)), rng.standard_normal((40, 3))
    y = rng.standard_normal(40)
    auto = simulate.solve_reduced_ridge(x, h, y, 0.1, preconditioning="auto")
    plain = simulate.solve_reduced_ridge(x, h, y, 0.1, preconditioning="none")
    assert auto.info.preconditioned and not plain.info.preconditioned
    np.testing.assert_allclose(auto.gamma, plain.gamma, rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="preconditioning must be one of"):
        simulate.solve_reduced_ridge(x, h, y, 0.1, preconditioning="yes")


def test_preconditioner_is_a_matrix_wherever_it_appears():
    from .test_vocabulary import SIGNATURES, _type_conflicts

    users = [where for where, sig in SIGNATURES if "preconditioner" in sig.parameters]
    assert "estimators.one_step_gd_predict" in users and "attention.gd_lsa_weights" in users
    assert [c for c in _type_conflicts(SIGNATURES) if c.startswith("preconditioner:")] == []


@pytest.mark.parametrize(
    "name",
    [
        "feature_ridge_predict",
        "preconditioned_feature_step_predict",
        "fit_one_step_preconditioner",
        "fit_mixed_preconditioner",
    ],
)
def test_a_callable_feature_map_is_called_feature_map(name):
    """``features`` is the string option of ``glu_lsa_block_weights`` (chapter 5 passes it by
    keyword); the estimators' callable is ``feature_map``."""
    assert "feature_map" in inspect.signature(getattr(estimators, name)).parameters
    assert "features" not in inspect.signature(getattr(estimators, name)).parameters
