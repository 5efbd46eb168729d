"""Bad input, by class: each gets a clear error naming the argument, fast, never a silent wrong number.

The classes are those of the package review (NaN/inf entries, coerced bools and strings, matrices that
are not covariances, empty contexts, non-integer indices, sizes that would explode, Hermite numerics
and theory edge cases).
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icl_book import estimators, features, hermite, simulate, tasks, theory
from icl_book.attention import deep, schedule

RNG = np.random.default_rng(0)


def _prompts(b=2, n=4, d=3):
    p = tasks.sample_linear_prompts(b, n, d, rng=np.random.default_rng(1))
    return p.xs, p.ys, p.x_query


# --- NaN and inf entries ------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["xs", "ys", "x_query"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nonfinite_prompt_entries_are_refused(which, bad):
    xs, ys, xq = (a.copy() for a in _prompts())
    {"xs": xs, "ys": ys, "x_query": xq}[which].flat[0] = bad
    with pytest.raises(ValueError, match=f"{which} must be finite"):
        estimators.ols_predict(xs, ys, xq)


def test_nonfinite_task_pool_is_refused():
    pool = np.ones((4, 3))
    pool[1, 2] = np.nan
    with pytest.raises(ValueError, match="task_pool"):
        tasks.sample_linear_prompts(2, 4, 3, rng=RNG, task_pool=pool)


def test_link_with_nonfinite_output_is_refused():
    with pytest.raises(ValueError, match="link"):
        tasks.sample_single_index_prompts(2, 4, 3, lambda z: np.log(z), rng=RNG)


def test_kernel_with_nonfinite_output_is_refused():
    xs, ys, xq = _prompts()
    with pytest.raises(ValueError, match="kernel"):
        estimators.kernel_ridge_predict(
            xs, ys, xq, lambda a, b: np.full(a.shape[:-1] + b.shape[-2:-1], np.nan), ridge=0.1
        )


def test_solver_refuses_nan_features():
    x = np.ones((5, 2))
    h = np.ones((5, 3))
    y = np.ones(5)
    h[0, 0] = np.nan
    with pytest.raises(ValueError, match="must be finite"):
        simulate.solve_reduced_ridge(x, h, y, ridge=0.1)


# --- bools and strings are not numbers or flags ----------------------------------------------------
def test_string_flag_is_refused():
    with pytest.raises(TypeError, match="normalized must be True or False"):
        hermite.hermite_table(3, np.zeros(2), normalized="no")


@pytest.mark.parametrize(
    "call",
    [
        lambda: theory.icl_error(1.0, 2.0, ridge=True),
        lambda: theory.icl_error(1.0, 2.0, kappa=True),
        lambda: tasks.sample_linear_prompts(2, 4, 3, rng=RNG, noise_var="0.1"),
        lambda: tasks.sample_linear_prompts(2.0, 4, 3, rng=RNG),
        lambda: estimators.ridge_predict(*_prompts(), ridge="1"),
    ],
)
def test_bools_and_strings_are_not_numbers(call):
    with pytest.raises(TypeError, match="must be"):
        call()


# --- covariances ---------------------------------------------------------------------------------
def test_covariance_arguments_must_be_psd():
    eye = np.eye(3)
    with pytest.raises(ValueError, match="input_cov must be positive semidefinite"):
        theory.one_step_gd_risk(eye, -eye, 5)
    with pytest.raises(ValueError, match="input_cov must be symmetric"):
        theory.optimal_preconditioner(np.triu(np.ones((3, 3))), 5)


# --- empty contexts and non-integer indices ------------------------------------------------------
def test_empty_context_is_refused():
    xs, ys, xq = _prompts()
    with pytest.raises(ValueError, match="N, d >= 1"):
        estimators.ols_predict(xs[:, :0], ys[:, :0], xq)


def test_feature_block_refuses_non_integer_indices():
    with pytest.raises(TypeError, match="index"):
        features.FeatureBlock(3, [(0.7,)])


# --- sizes that would explode: a clear error within a second ------------------------------------
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: schedule.bcd_schedule(30, 6, 10), "too large"),
        (lambda: hermite.hermite_he(10**8, 1.0), "k must be an integer"),
        (lambda: hermite.double_factorial(10**7), "n must be an integer"),
        (lambda: schedule.min_deep_width(3, 3, kind="x"), "kind must be one of"),
    ],
)
def test_explosive_sizes_fail_fast(call, match):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=match):
        call()
    assert time.perf_counter() - start < 1.0


# --- Hermite numerics -----------------------------------------------------------------------------
def test_raw_coefficients_are_finite_for_every_accepted_degree():
    coefs = hermite.hermite_coefficients(np.tanh, hermite.MAX_RAW_DEGREE)
    assert np.all(np.isfinite(coefs))
    with pytest.raises(ValueError, match="normalized=True"):
        hermite.hermite_coefficients(np.tanh, hermite.MAX_RAW_DEGREE + 1)
    assert np.all(np.isfinite(hermite.hermite_coefficients(np.tanh, 400, normalized=True)))


def test_hermite_series_keeps_every_term():
    coefs = np.zeros(201)
    coefs[200] = 1.0
    with pytest.raises(ValueError, match="coefficients"):
        hermite.hermite_series(coefs, np.array([0.5]))


def test_gaussian_expectation_refuses_functions_that_do_not_decay():
    with pytest.raises(ValueError, match="grow"):
        hermite.gaussian_expectation(lambda z: np.exp(z**2 / 2))


def test_declared_kink_far_from_zero_is_accepted():
    relu8 = lambda z: np.maximum(z - 8.0, 0.0)  # noqa: E731
    value = hermite.gaussian_expectation(relu8, kinks=[8.0])
    phi8 = math.exp(-32.0) / math.sqrt(2 * math.pi)
    exact = phi8 - 8.0 * 0.5 * math.erfc(8.0 / math.sqrt(2))
    assert value == pytest.approx(exact, rel=1e-8)


def test_undeclared_kink_is_integrated_as_accurately_as_a_declared_one():
    relu = lambda z: np.maximum(z - 0.37, 0.0)  # noqa: E731
    declared = hermite.hermite_coefficients(relu, 6, kinks=[0.37])
    undeclared = hermite.hermite_coefficients(relu, 6)
    np.testing.assert_allclose(undeclared, declared, rtol=0, atol=1e-9)


# --- theory edge cases ---------------------------------------------------------------------------
def test_alpha_infinite_is_the_limit():
    big = theory.icl_error(1e12, 2.0, 3.0, 0.1)
    assert theory.icl_error(np.inf, 2.0, 3.0, 0.1) == pytest.approx(big, rel=1e-9)


@pytest.mark.parametrize("ridge", [1e-40, 1e-34, 1e-20])
def test_tiny_ridge_at_threshold_is_exact_or_refused(ridge):
    try:
        value = theory.icl_error(1.0, 1.0, ridge=ridge, noise_var=0.01)
    except ValueError as err:
        assert "ridge must be 0 or in [1e-12" in str(err)
    else:
        assert np.isfinite(value) and value > 0


def test_ridge_error_at_the_threshold_grows_like_one_over_root_ridge():
    # At τ = 1 the ridge error diverges as λ → 0+ like λ^{-1/2}: a clean power law down to the
    # smallest accepted ridge shows that no precision is lost on the way.
    lam = np.array([1e-4, 1e-6, 1e-8, 1e-10, theory.MIN_RIDGE])
    e = np.array([theory.icl_error(1.0, 1.0, noise_var=0.01, ridge=v) for v in lam])
    slopes = np.diff(np.log(e)) / np.diff(np.log(lam))
    np.testing.assert_allclose(slopes, -0.5, atol=2e-3)


@pytest.mark.parametrize("kappa", [1e-200, 1e-160, 1e-100])
def test_tiny_kappa_is_exact_or_refused(kappa):
    try:
        value = theory.icl_error(1.0, 2.0, kappa=kappa, noise_var=0.01, ridge=0.1)
    except ValueError as err:
        assert "kappa must be >=" in str(err)
    else:
        assert np.isfinite(value)


# --- torch modules: explicit generators, device and dtype ------------------------------------------
def test_torch_modules_never_draw_from_the_global_rng():
    import torch

    from icl_book.attention import GLUFeedForward, LinearSelfAttention, TransformerBlock

    for build in (
        lambda g: LinearSelfAttention(3, generator=g),
        lambda g: GLUFeedForward(6, 4, generator=g),
        lambda g: TransformerBlock(3, 2, 4, generator=g),
        lambda g: deep.DeepTransformer(3, 8, 2, generator=g),
    ):
        with pytest.raises(TypeError, match="generator must be a torch.Generator"):
            build(None)
        torch.manual_seed(0)
        a = build(torch.Generator().manual_seed(5))
        torch.manual_seed(1)
        b = build(torch.Generator().manual_seed(5))
        for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
            assert torch.equal(pa, pb)


def test_torch_modules_take_device_and_dtype():
    import torch

    from icl_book.attention import LinearSelfAttention

    model = LinearSelfAttention(
        3, generator=torch.Generator().manual_seed(0), device="cpu", dtype=torch.float32
    )
    assert model.w_kq.dtype == torch.float32 and model.w_kq.device.type == "cpu"
    with pytest.raises(TypeError, match="dtype must be a floating"):
        LinearSelfAttention(3, generator=torch.Generator(), dtype=torch.int64)
    with pytest.raises(TypeError, match="device"):
        LinearSelfAttention(3, generator=torch.Generator(), device=3.5)


def test_learned_bcd_holds_its_frozen_writers_as_modules():
    model = deep.LearnedBCD(2, 2, 5, 3, kind="legendre")
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(n.startswith("gammas") for n in trainable)
    assert all(not p.requires_grad for p in model.writers.parameters())


# --- a property over the whole accepted range of the theory ----------------------------------------
_LOG_RATIO = st.floats(min_value=-8.0, max_value=8.0)


@settings(max_examples=300, deadline=None)
@given(
    log_alpha=_LOG_RATIO,
    log_tau=_LOG_RATIO,
    log_kappa=st.one_of(_LOG_RATIO, st.just(np.inf)),
    rho=st.floats(min_value=0.0, max_value=10.0),
    log_ridge=st.one_of(st.just(-np.inf), st.floats(min_value=-12.0, max_value=3.0)),
)
def test_theory_is_finite_and_positive_wherever_it_accepts_its_input(
    log_alpha, log_tau, log_kappa, rho, log_ridge
):
    alpha, tau, kappa = 10.0**log_alpha, 10.0**log_tau, 10.0**log_kappa
    ridge = 0.0 if log_ridge == -np.inf else 10.0**log_ridge
    e = theory.icl_error(alpha, tau, kappa, rho, ridge)
    if ridge == 0.0 and tau == 1.0:
        assert e == np.inf
    else:
        assert np.isfinite(e) and e > 0, (alpha, tau, kappa, rho, ridge, e)
    g = theory.idg_error(alpha, tau, kappa, rho)
    assert g == np.inf if tau == 1.0 else (np.isfinite(g) and g >= 0), (alpha, tau, kappa, rho, g)
