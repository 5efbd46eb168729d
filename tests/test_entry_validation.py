"""Issue 35's reproducers, one test each: a clear error naming the argument within a second, or the
correct finite value. The probe suite (tests/test_probe_inputs.py) covers the classes over every public
callable; these pin the specific cases the issue found.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icl_book import theory

# --- theory at its accepted boundary points --------------------------------------------------------
_TAUS = [0.25, 0.5, 0.9, 1.5, 2.0, 10.0, np.inf]
_KAPPAS = [0.1, 0.25, 0.5, 0.9, 1.0, 2.0, 10.0, np.inf]


@pytest.mark.parametrize("tau", _TAUS)
@pytest.mark.parametrize("kappa", _KAPPAS + ["tau"])
@pytest.mark.parametrize("rho", [0.0, 0.1])
def test_alpha_infinite_is_the_limit_of_large_alpha(tau, kappa, rho):
    """α = ∞ in closed form: finite limits agree with α = 1e14; divergent ones return inf.

    Before, κ = 1 (τ >= 1) and κ = τ (τ < 1) gave NaN, and κ < 1 (or κ < τ) gave a wrong finite number.
    """
    kappa = tau if kappa == "tau" else kappa
    if np.isinf(tau) and kappa == "tau":
        return
    for error in (
        lambda a: theory.icl_error(a, tau, kappa, rho),
        lambda a: theory.idg_error(a, tau, kappa, rho),
    ):
        limit, big, bigger = error(np.inf), error(1e14), error(1e28)
        assert not np.isnan(limit)
        if np.isinf(limit):
            assert bigger > 1e4 * big > 0, (limit, big, bigger)  # grows without bound
        else:
            assert limit == pytest.approx(bigger, rel=1e-9, abs=1e-12), (limit, big, bigger)
            assert limit == pytest.approx(big, rel=1e-5, abs=1e-6)


def test_issue_reproducers_for_the_theory():
    assert theory.icl_error(np.inf, 2.0, 1.0) == 0.0  # ridgeless, noiseless, κ = 1: was NaN
    assert theory.idg_error(np.inf, 2.0, 1.0) == 0.0
    assert theory.icl_error(1e100, 2.0, 1.0) < 1e-40  # was inf; the limit is 0
    assert theory.icl_error(np.inf, 2.0, 0.25) == pytest.approx(0.9375)  # (1 − κ)(1 + κ/(τ − 1))
    assert theory.icl_error(np.inf, 2.0, 0.25, 0.1) == np.inf  # diverges like α
    assert theory.nonlinear_icl_error(lambda z: 0.0 * z, 1.0, 1.0) == 0.0  # was 0 · inf = NaN
    for call, name in [
        (lambda: theory.icl_error(1.0, 2.0, ridge=1e200), "ridge must be 0 or in"),
        (lambda: theory.wishart_stieltjes(1.0, 5e-324), "kappa must be >="),
        (lambda: theory.error_of_gamma(np.zeros((2, 3)), 5e-324, 0.0), "alpha must be >="),
        (
            lambda: theory.nonlinear_error_of_gamma(np.zeros((2, 3)), "tanh", 5e-324, 0.0),
            "alpha must be >=",
        ),
    ]:
        start = time.perf_counter()
        with pytest.raises(ValueError, match=name):
            call()
        assert time.perf_counter() - start < 1.0
    assert theory.wishart_stieltjes(1e300) == pytest.approx(1e-300)  # was 0 (a² overflowed)


def test_ridge_theory_is_vectorised():
    """10⁴ ridge points in well under a second (was 8.9 s of per-point root finding)."""
    alphas = np.geomspace(0.01, 100, 10_000)
    start = time.perf_counter()
    e = theory.icl_error(alphas, 2.0, np.inf, 0.1, 0.01)
    assert time.perf_counter() - start < 1.0
    assert np.all(np.isfinite(e))
    # each point as it would be alone
    for i in (0, 4321, 9999):
        assert e[i] == pytest.approx(theory.icl_error(alphas[i], 2.0, np.inf, 0.1, 0.01), rel=1e-13)
    assert theory.icl_error(1.0, 0.5, 1e12, 0.01, 0.1) == pytest.approx(1.19109, abs=5e-6)


# A property that reaches the boundary points: κ = 1 and κ = τ with α = ∞, large ρ and ridge.
_LOG = st.floats(min_value=-8.0, max_value=8.0)


@settings(max_examples=300, deadline=None)
@given(
    alpha=st.one_of(_LOG.map(lambda v: 10.0**v), st.just(np.inf)),
    tau=st.one_of(_LOG.map(lambda v: 10.0**v), st.sampled_from([0.5, 1.0, 2.0, np.inf])),
    kappa=st.one_of(_LOG.map(lambda v: 10.0**v), st.sampled_from([1.0, "tau", np.inf])),
    rho=st.one_of(st.just(0.0), st.floats(min_value=-6.0, max_value=6.0).map(lambda v: 10.0**v)),
    ridge=st.one_of(
        st.just(0.0),
        st.floats(min_value=-12.0, max_value=100.0).map(lambda v: 10.0**v),
    ),
)
def test_theory_never_returns_nan_on_accepted_input(alpha, tau, kappa, rho, ridge):
    kappa = tau if kappa == "tau" else kappa
    e = theory.icl_error(alpha, tau, kappa, rho, ridge)
    assert not np.isnan(e) and e >= 0, (alpha, tau, kappa, rho, ridge, e)
    if ridge > 0:
        assert np.isfinite(e), (alpha, tau, kappa, rho, ridge, e)
    g = theory.idg_error(alpha, tau, kappa, rho)
    assert not np.isnan(g) and g >= 0, (alpha, tau, kappa, rho, g)
