"""Prompt samplers and classical in-context estimators (prologue, chapter 2)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icl_book import estimators, tasks, theory


def rng(seed=0):
    return np.random.default_rng(seed)


def test_linear_prompts_shapes_and_noiseless_labels():
    p = tasks.sample_linear_prompts(7, 11, 3, rng=rng())
    assert p.xs.shape == (7, 11, 3) and p.ys.shape == (7, 11)
    assert p.x_query.shape == (7, 3) and p.y_query.shape == (7,) and p.tasks.shape == (7, 3)
    np.testing.assert_allclose(p.ys, np.einsum("bnd,bd->bn", p.xs, p.tasks), atol=1e-14)
    np.testing.assert_allclose(p.y_query, np.einsum("bd,bd->b", p.x_query, p.tasks), atol=1e-14)


def test_linear_prompts_are_reproducible_and_seed_dependent():
    a = tasks.sample_linear_prompts(4, 5, 2, rng=rng(1), noise_var=0.3)
    b = tasks.sample_linear_prompts(4, 5, 2, rng=rng(1), noise_var=0.3)
    c = tasks.sample_linear_prompts(4, 5, 2, rng=rng(2), noise_var=0.3)
    np.testing.assert_array_equal(a.ys, b.ys)
    assert not np.allclose(a.ys, c.ys)


def test_linear_prompts_noise_and_covariance_statistics():
    cov = np.array([[2.0, 0.6], [0.6, 0.5]])
    p = tasks.sample_linear_prompts(20000, 4, 2, rng=rng(3), noise_var=0.25, input_cov=cov)
    x = p.xs.reshape(-1, 2)
    # 80,000 samples: the empirical covariance is within ~4 standard errors (≈ 0.02) of Λ.
    np.testing.assert_allclose(x.T @ x / len(x), cov, atol=0.05)
    resid = p.ys - np.einsum("bnd,bd->bn", p.xs, p.tasks)
    assert abs(resid.var() - 0.25) < 0.01


def test_task_pool_is_used():
    pool = np.array([[1.0, 0.0], [0.0, -1.0]])
    p = tasks.sample_linear_prompts(50, 3, 2, rng=rng(), task_pool=pool)
    assert all(any(np.array_equal(t, w) for w in pool) for t in p.tasks)


def test_single_index_prompts_follow_lu_conventions():
    d = 50
    p = tasks.sample_single_index_prompts(2000, 10, d, np.tanh, rng=rng(4))
    np.testing.assert_allclose(np.linalg.norm(p.tasks, axis=1), np.sqrt(d))
    z = np.einsum("bnd,bd->bn", p.xs, p.tasks)
    np.testing.assert_allclose(p.ys, np.tanh(z), atol=1e-14)
    assert abs(z.var() - 1) < 0.03  # x·w ~ N(0, 1); 20,000 samples give a standard error ≈ 0.01


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch": 0}, "batch must be an integer >= 1"),
        ({"context_len": 2.5}, "context_len must be an integer >= 1"),
        ({"noise_var": -1}, "noise_var must be >= 0"),
        ({"input_cov": np.eye(3)}, r"input_cov must have shape \(2, 2\)"),
        ({"input_cov": -np.eye(2)}, "input_cov must be positive definite"),
        ({"task_pool": np.ones((3, 5))}, "task_pool must have shape"),
    ],
)
def test_linear_prompts_reject_bad_input(kwargs, message):
    args = {"batch": 2, "context_len": 3, "dim": 2} | kwargs
    with pytest.raises(ValueError, match=message):
        tasks.sample_linear_prompts(
            args.pop("batch"), args.pop("context_len"), args.pop("dim"), rng=rng(), **args
        )


def test_rng_is_a_generator_or_an_integer_seed():
    # SPEC 7: an integer seed means np.random.default_rng(seed); None, bools, floats, RandomState and
    # negative seeds are refused by name (no hidden global seeding)
    by_seed = tasks.sample_linear_prompts(2, 3, 2, rng=7)
    by_gen = tasks.sample_linear_prompts(2, 3, 2, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(by_seed.xs, by_gen.xs)
    np.testing.assert_array_equal(by_seed.ys, by_gen.ys)
    for bad in (None, True, 1.0, "0", np.random.RandomState(0)):
        with pytest.raises(TypeError, match="rng must be a numpy.random.Generator or an integer"):
            tasks.sample_linear_prompts(2, 3, 2, rng=bad)
    with pytest.raises(ValueError, match="rng must be a seed >= 0"):
        tasks.sample_linear_prompts(2, 3, 2, rng=-1)


def test_ols_matches_lstsq_and_is_minimum_norm_when_underdetermined():
    for n, d in [(12, 4), (3, 6)]:
        p = tasks.sample_linear_prompts(5, n, d, rng=rng(n), noise_var=0.1)
        expected = [
            xq @ np.linalg.lstsq(x, y, rcond=None)[0]
            for x, y, xq in zip(p.xs, p.ys, p.x_query, strict=True)
        ]
        np.testing.assert_allclose(
            estimators.ols_predict(p.xs, p.ys, p.x_query), expected, atol=1e-10
        )


def test_ridge_and_bayes_optimal():
    p = tasks.sample_linear_prompts(6, 8, 3, rng=rng(5), noise_var=0.5)
    expected = [
        xq @ np.linalg.solve(x.T @ x + 0.5 * np.eye(3), x.T @ y)
        for x, y, xq in zip(p.xs, p.ys, p.x_query, strict=True)
    ]
    np.testing.assert_allclose(
        estimators.ridge_predict(p.xs, p.ys, p.x_query, 0.5), expected, atol=1e-12
    )
    np.testing.assert_allclose(
        estimators.bayes_optimal_predict(p.xs, p.ys, p.x_query, noise_var=0.5), expected, atol=1e-12
    )
    with pytest.raises(ValueError, match="ridge must be > 0"):
        estimators.ridge_predict(p.xs, p.ys, p.x_query, 0.0)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 30),
    d=st.integers(1, 6),
    eta=st.floats(-3, 3, allow_nan=False),
    seed=st.integers(0, 2**32 - 1),
)
def test_one_step_gd_is_the_gradient_step(n, d, eta, seed):
    g = rng(seed)
    p = tasks.sample_linear_prompts(3, n, d, rng=g)
    a = g.standard_normal((d, d))
    gamma = a @ a.T + np.eye(d)
    # w₁ = −η Γ ∇L(0) with ∇L(0) = −(1/N) Σ y_i x_i.
    grad = -np.einsum("bn,bnd->bd", p.ys, p.xs) / n
    expected = np.einsum("bd,bd->b", p.x_query, -eta * grad @ gamma.T)
    got = estimators.one_step_gd_predict(p.xs, p.ys, p.x_query, eta, preconditioner=gamma)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_one_step_gd_risk_matches_monte_carlo():
    cov = np.diag([2.0, 1.0, 0.25])
    gamma = np.array([[0.4, 0.1, 0.0], [0.1, 0.6, 0.0], [0.0, 0.0, 1.2]])
    p = tasks.sample_linear_prompts(200_000, 6, 3, rng=rng(6), noise_var=0.3, input_cov=cov)
    err = (estimators.one_step_gd_predict(p.xs, p.ys, p.x_query, 1.0, gamma) - p.y_query) ** 2
    sem = err.std() / np.sqrt(err.size)
    exact = theory.one_step_gd_risk(gamma, cov, 6, 0.3)
    assert abs(err.mean() - exact) < 4 * sem


def test_optimal_preconditioner_minimises_the_risk():
    cov = np.diag([3.0, 1.0, 0.2])
    n, s2 = 10, 0.5
    best = theory.optimal_preconditioner(cov, n, s2)
    r_star = theory.optimal_preconditioned_risk(cov, n, s2)
    assert r_star == pytest.approx(theory.one_step_gd_risk(best, cov, n, s2), rel=1e-12)
    g = rng(7)
    for _ in range(20):
        bump = 1e-2 * g.standard_normal((3, 3))
        assert theory.one_step_gd_risk(best + bump, cov, n, s2) > r_star
    eta = theory.best_one_step_eta(cov, n, s2)
    r_eta = theory.one_step_gd_risk(eta * np.eye(3), cov, n, s2)
    assert r_eta < theory.one_step_gd_risk(1.01 * eta * np.eye(3), cov, n, s2)
    assert r_eta < theory.one_step_gd_risk(0.99 * eta * np.eye(3), cov, n, s2)
    assert r_star <= r_eta


def test_isotropic_closed_forms():
    d, n, s2 = 5, 20, 0.25
    eye = np.eye(d)
    assert theory.best_one_step_eta(eye, n, s2) == pytest.approx(n / (n + d + 1 + s2), rel=1e-14)
    np.testing.assert_allclose(
        theory.optimal_preconditioner(eye, n, s2), eye / (1 + (d + 1 + s2) / n), rtol=1e-14
    )


def test_shape_mismatch_names_the_argument_and_both_shapes():
    p = tasks.sample_linear_prompts(4, 5, 3, rng=rng())
    with pytest.raises(ValueError, match=r"ys must have shape \(B, N\) = \(4, 5\).*got \(4, 6\)"):
        estimators.ols_predict(p.xs, np.zeros((4, 6)), p.x_query)
    with pytest.raises(
        ValueError, match=r"x_query must have shape \(B, d\) = \(4, 3\).*got \(4, 2\)"
    ):
        estimators.one_step_gd_predict(p.xs, p.ys, np.zeros((4, 2)), 1.0)
    with pytest.raises(ValueError, match="eta must be finite"):
        estimators.one_step_gd_predict(p.xs, p.ys, p.x_query, np.inf)
