"""The fair one-block baselines of chapter 5: a fitted preconditioner and kernel ridge with a validated ridge."""

from __future__ import annotations

import numpy as np
import pytest

from icl_book import estimators as E
from icl_book.attention import quadratic_features
from icl_book.tasks import sample_quadratic_prompts


def _phi(x):
    return np.concatenate(
        [np.ones((*x.shape[:-1], 1)), x, quadratic_features(x, whitened=True)], axis=-1
    )


def test_preconditioned_step_with_identity_is_one_gd_step():
    q = sample_quadratic_prompts(20, 30, 3, rng=np.random.default_rng(0), noise_var=0.1)
    p = _phi(q.x_query).shape[1]
    pred = E.preconditioned_feature_step_predict(q.xs, q.ys, q.x_query, _phi, np.eye(p))
    g = np.einsum("bn,bnp->bp", q.ys, _phi(q.xs)) / 30
    assert np.allclose(pred, np.einsum("bp,bp->b", g, _phi(q.x_query)), atol=1e-12)


def test_fitted_preconditioner_recovers_a_planted_gamma():
    rng = np.random.default_rng(1)
    q = sample_quadratic_prompts(3000, 20, 2, rng=rng)
    p = _phi(q.x_query).shape[1]
    gamma = rng.standard_normal((p, p))
    target = E.preconditioned_feature_step_predict(q.xs, q.ys, q.x_query, _phi, gamma)
    fitted = E.fit_one_step_preconditioner(q.xs, q.ys, q.x_query, target, _phi, ridge=0.0)
    assert np.allclose(fitted, gamma, atol=1e-8)


def test_fitted_preconditioner_beats_the_identity_on_fresh_prompts():
    rng = np.random.default_rng(2)
    train = sample_quadratic_prompts(4000, 50, 3, rng=rng, noise_var=0.1)
    test = sample_quadratic_prompts(4000, 50, 3, rng=rng, noise_var=0.1)
    gamma = E.fit_one_step_preconditioner(*train[:4], _phi)
    p = gamma.shape[0]
    fitted = np.mean(
        (E.preconditioned_feature_step_predict(*test[:3], _phi, gamma) - test.y_query) ** 2
    )
    plain = np.mean(
        (E.preconditioned_feature_step_predict(*test[:3], _phi, np.eye(p)) - test.y_query) ** 2
    )
    assert fitted < 0.9 * plain


def test_select_kernel_ridge_picks_the_grid_minimum():
    rng = np.random.default_rng(3)
    val = sample_quadratic_prompts(300, 40, 3, rng=rng, noise_var=0.1)
    k = E.glu_kernel()
    grid = [1e-3, 1e-1, 1.0, 10.0, 1e3]
    best, errors = E.select_kernel_ridge(*val[:4], k, grid)
    assert best == grid[int(np.argmin(errors))]
    assert errors.shape == (5,) and errors[-1] > errors.min()


def test_bad_inputs_name_the_argument():
    q = sample_quadratic_prompts(5, 10, 2, rng=np.random.default_rng(4))
    with pytest.raises(TypeError, match="feature_map"):
        E.preconditioned_feature_step_predict(*q[:3], "phi", np.eye(3))
    with pytest.raises(ValueError, match="preconditioner"):
        E.preconditioned_feature_step_predict(*q[:3], _phi, np.eye(3))
    with pytest.raises(ValueError, match="ridges"):
        E.select_kernel_ridge(*q[:4], E.glu_kernel(), [1.0, -1.0])
    with pytest.raises(ValueError, match="y_query"):
        E.fit_one_step_preconditioner(*q[:3], q.y_query[:3], _phi)
