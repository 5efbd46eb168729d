"""The Bayes floor of chapter 5's random quadratic targets (:func:`estimators.bayes_quadratic_predict`).

Derived in its docstring: ``f(x) = xᵀAx`` with the book's Gaussian ``A`` is a Gaussian process with
covariance ``(x·x')²/(d(d+2))``, so the posterior mean is kernel ridge with that kernel and the ridge
``σ² d(d+2)``. Checked here three ways: equal to kernel ridge at that ridge; its posterior variance is its
excess error (Monte Carlo); and kernel ridge at any other ridge does worse on the same prompts.
"""

from __future__ import annotations

import numpy as np
import pytest

from icl_book import estimators
from icl_book.tasks import sample_quadratic_prompts

D, NOISE = 3, 0.2


def prompts(batch, n, seed):
    return sample_quadratic_prompts(batch, n, D, rng=np.random.default_rng(seed), noise_var=NOISE)


def target(q):
    return np.einsum("bi,bij,bj->b", q.x_query, q.tasks, q.x_query)


def test_posterior_mean_is_kernel_ridge_with_the_matching_ridge():
    q = prompts(200, 20, 0)
    bayes = estimators.bayes_quadratic_predict(*q[:3], NOISE)
    kr = estimators.kernel_ridge_predict(
        *q[:3], estimators.polynomial_kernel(2), ridge=NOISE * D * (D + 2)
    )
    np.testing.assert_allclose(bayes.mean, kr, rtol=1e-9, atol=1e-12)
    assert np.all(bayes.var > 0)


@pytest.mark.parametrize("n", [8, 40])
def test_posterior_variance_is_the_excess_error_by_monte_carlo(n):
    q = prompts(40_000, n, n)
    bayes = estimators.bayes_quadratic_predict(*q[:3], NOISE)
    gap = (bayes.mean - target(q)) ** 2 - bayes.var  # zero-mean if the variance is right
    z = gap.mean() / (gap.std() / np.sqrt(gap.size))
    assert abs(z) < 4, z
    # a wrong prior (twice the variance) is detected by the same check
    wrong = (bayes.mean - target(q)) ** 2 - 2 * bayes.var
    assert abs(wrong.mean() / (wrong.std() / np.sqrt(wrong.size))) > 4


@pytest.mark.parametrize("factor", [0.1, 10.0])
def test_no_other_ridge_beats_the_bayes_ridge(factor):
    q = prompts(4000, 15, 7)
    bayes = estimators.bayes_quadratic_predict(*q[:3], NOISE).mean
    other = estimators.kernel_ridge_predict(
        *q[:3], estimators.polynomial_kernel(2), ridge=factor * NOISE * D * (D + 2)
    )
    diff = (other - q.y_query) ** 2 - (bayes - q.y_query) ** 2
    assert diff.mean() / (diff.std() / np.sqrt(diff.size)) > 3


def test_bad_noise_var_is_named():
    q = prompts(2, 5, 0)
    with pytest.raises(ValueError, match="noise_var"):
        estimators.bayes_quadratic_predict(*q[:3], 0.0)


def test_mixed_preconditioner_is_the_pooled_fit_and_no_better_than_per_n():
    from icl_book.features import feature_map

    def phi(x):
        return feature_map(x, 2, kind="hermite")

    short, long = prompts(3000, 10, 1), prompts(3000, 40, 2)
    mixed = estimators.fit_mixed_preconditioner([short, long], phi)
    # one batch: the same as the single-batch fit
    np.testing.assert_allclose(
        estimators.fit_mixed_preconditioner([short], phi),
        estimators.fit_one_step_preconditioner(*short[:4], phi),
    )
    # on fresh prompts at each N, the per-N fit is at least as good as the pooled one
    for n, train in ((10, short), (40, long)):
        own = estimators.fit_one_step_preconditioner(*train[:4], phi)
        test = prompts(4000, n, 100 + n)
        err = {
            k: np.mean(
                (estimators.preconditioned_feature_step_predict(*test[:3], phi, g) - test.y_query)
                ** 2
            )
            for k, g in (("own", own), ("mixed", mixed))
        }
        assert err["own"] <= err["mixed"] * 1.02, (n, err)
    with pytest.raises(ValueError, match="batches must hold"):
        estimators.fit_mixed_preconditioner([], phi)


@pytest.mark.parametrize("ridge", [1e-3, 0.7, 30.0])
def test_feature_ridge_is_kernel_ridge_in_its_primal_form(ridge):
    """φ(x)·φ(x') with the monomial degree-≤2 map is chapter 5's GLU kernel x·x' + (x·x')²."""
    from icl_book.features import feature_map

    q = prompts(50, 12, 3)
    primal = estimators.feature_ridge_predict(
        *q[:3], lambda x: feature_map(x, 2, kind="monomial"), ridge
    )
    dual = estimators.kernel_ridge_predict(*q[:3], estimators.glu_kernel(), ridge)
    np.testing.assert_allclose(primal, dual, rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="ridge"):
        estimators.feature_ridge_predict(*q[:3], lambda x: x, 0.0)
    with pytest.raises(TypeError, match="feature_map"):
        estimators.feature_ridge_predict(*q[:3], "monomial", 1.0)
