"""Tests of icl_book.theory: Lu et al.'s closed forms and the exact error of a given Γ."""

import numpy as np
import pytest

from icl_book.simulate import reduced_features
from icl_book.tasks import sample_single_index_prompts, sample_task_pool
from icl_book.theory import error_of_gamma, icl_error, idg_error, task_moments, wishart_stieltjes

RHO = 0.01
KAPPA_INF = 1e12  # SCIENCE.md's reference values use κ = 1e12 for κ = ∞


# Reference values of SCIENCE.md §3 (5 decimals given, so compare to 1e-5 absolute, i.e. half an ulp of
# the printed value plus rounding).
@pytest.mark.parametrize(
    ("tau", "expected"),
    [(0.2, 1.03862), (0.5, 1.27373), (2.0, 1.02498), (5.0, 0.64061), (100.0, 0.51766)],
)
def test_icl_error_reference_values(tau, expected):
    assert icl_error(1.0, tau, KAPPA_INF, RHO) == pytest.approx(expected, abs=1e-5)
    # κ = np.inf (1/κ = 0 exactly) agrees with κ = 1e12 far below the printed precision
    assert icl_error(1.0, tau, np.inf, RHO) == pytest.approx(expected, abs=1e-5)


def test_icl_error_limit_tau_to_infinity():
    limit = RHO + (1 + RHO) / (1 + (1 + RHO))  # ρ + x*/(1+x*), x* = (1+ρ)/α at α = 1
    assert limit == pytest.approx(0.51249, abs=1e-5)
    assert icl_error(1.0, np.inf, np.inf, RHO) == pytest.approx(limit, abs=1e-12)
    # the finite-τ formula approaches it like 1/τ
    assert abs(icl_error(1.0, 1e7, np.inf, RHO) - limit) < 1e-6


def test_icl_error_ridge_reference_value():
    assert icl_error(1.0, 0.5, KAPPA_INF, RHO, ridge=0.1) == pytest.approx(1.19109, abs=1e-5)
    assert icl_error(1.0, 0.5, np.inf, RHO, ridge=0.1) == pytest.approx(1.19109, abs=1e-5)


def test_ridgeless_divergence_at_tau_one():
    assert icl_error(1.0, 1.0, np.inf, RHO) == np.inf
    assert idg_error(1.0, 1.0, 2.0, RHO) == np.inf
    # ... and it really diverges on both sides (not a garbage number next to the point)
    assert icl_error(1.0, 0.999, np.inf, RHO) > 100
    assert icl_error(1.0, 1.001, np.inf, RHO) > 100
    # any ridge removes it
    assert np.isfinite(icl_error(1.0, 1.0, np.inf, RHO, ridge=0.1))


@pytest.mark.parametrize("tau", [0.3, 0.5, 2.0, 5.0])
@pytest.mark.parametrize("kappa", [0.5, 2.0, np.inf])
def test_ridge_formula_tends_to_ridgeless(tau, kappa):
    # Two independent formulas: the ridge branch with λ → 0+ must reach Result 1. The ridge correction is
    # O(λ) with an O(1) constant away from τ = 1, so λ = 1e-7 leaves a difference well below 1e-4.
    ridgeless = icl_error(1.0, tau, kappa, RHO)
    assert icl_error(1.0, tau, kappa, RHO, ridge=1e-7) == pytest.approx(ridgeless, abs=1e-4)


def test_ridge_helps_most_near_interpolation():
    taus = np.array([0.5, 0.9, 1.1, 2.0])
    ridgeless = icl_error(1.0, taus, np.inf, RHO)
    ridge = icl_error(1.0, taus, np.inf, RHO, ridge=0.1)
    assert np.all(ridge < ridgeless)


def test_broadcasting_shapes_and_scalars():
    out = icl_error(np.array([0.5, 1.0, 2.0])[:, None], np.array([0.5, 2.0, 5.0, 10.0]), 2.0, RHO)
    assert out.shape == (3, 4)
    assert out[1, 2] == pytest.approx(icl_error(1.0, 5.0, 2.0, RHO), rel=1e-14)
    mixed = icl_error(1.0, [0.5, 2.0], np.inf, RHO, ridge=[0.0, 0.1])
    assert mixed.shape == (2,)
    assert mixed[0] == icl_error(1.0, 0.5, np.inf, RHO)
    assert mixed[1] == icl_error(1.0, 2.0, np.inf, RHO, ridge=0.1)
    assert isinstance(icl_error(1.0, 2.0), float)
    assert isinstance(idg_error(1.0, 2.0, 1.0), float)
    assert idg_error([1.0, 2.0], 2.0, [[1.0], [3.0]]).shape == (2, 2)


def test_gap_tends_to_max_zero_one_minus_kappa():
    # SCIENCE.md: as α, τ → ∞, g = e_ICL − e_IDG → max(0, 1 − κ) (ρ = 0). The approach is slow near κ = 1.
    kappas = np.array([0.25, 0.5, 2.0, 4.0])
    gap = icl_error(1e6, 1e9, kappas) - idg_error(1e6, 1e9, kappas)
    np.testing.assert_allclose(gap, np.maximum(0, 1 - kappas), atol=1e-3)


def test_idg_equals_icl_for_unlimited_tasks_above_threshold():
    # With κ = ∞ and τ > 1 both formulas describe the same limit (the pool is never revisited).
    taus = np.array([1.5, 2.0, 5.0])
    np.testing.assert_allclose(
        idg_error(1.0, taus, np.inf, RHO), icl_error(1.0, taus, np.inf, RHO), rtol=1e-12
    )


def test_wishart_stieltjes_special_cases():
    x = np.array([0.1, 1.0, 10.0])
    np.testing.assert_allclose(wishart_stieltjes(x, np.inf), 1 / (1 + x), rtol=1e-14)
    # M_κ(x) is (1/d) tr (R̂ + x I)^{-1} for R̂ = (1/K) Σ w wᵀ, K = κd: check one large random instance.
    d, kappa = 400, 0.5
    w = sample_task_pool(int(kappa * d), d, rng=np.random.default_rng(1))
    r_hat = w.T @ w / w.shape[0]
    emp = np.trace(np.linalg.inv(r_hat + 1.0 * np.eye(d))) / d
    # finite-d fluctuations of a normalised trace are O(1/d): allow 2 %
    assert wishart_stieltjes(1.0, kappa) == pytest.approx(emp, rel=2e-2)


@pytest.mark.parametrize(
    ("alpha", "tau", "kappa"), [(1.0, 0.5, 2.0), (2.0, 0.3, 0.5), (0.5, 0.8, 4.0)]
)
def test_idg_below_interpolation_is_science_md_formula(alpha, tau, kappa):
    """``idg_error`` for ``τ < 1`` and finite ``κ`` is SCIENCE.md's formula, rearranged so that its
    limits are exact; at ordinary points the rearrangement must give the formula as written (the
    other tests of this file call ``idg_error`` at ``τ >= 1`` only)."""

    def m_kappa(x, k):
        a = x + 1 - 1 / k
        return 2 / (a + np.sqrt(a * a + 4 * x / k))

    x = (1 + RHO) / alpha
    mu = x * m_kappa(x, kappa / tau)
    eps = (1 - tau) * x / (tau * mu)
    c = 1 / (1 - kappa / (1 + kappa * eps / (1 - tau)) ** 2)
    want = tau * (
        (x + eps) ** 2 / eps
        + (RHO + x - 2 * x * (1 - tau) * (x / eps + 1)) / (1 - tau - c * (1 - tau) ** 2)
    )
    assert idg_error(alpha, tau, kappa, RHO) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": -1.0}, "alpha"),
        ({"tau": 0.0}, "tau"),
        ({"tau": [1.0, -2.0]}, "tau"),
        ({"kappa": 0.0}, "kappa"),
        ({"noise_var": -0.1}, "noise_var"),
        ({"ridge": -0.1}, "ridge"),
        ({"alpha": np.nan}, "alpha"),
    ],
)
def test_icl_error_validation(kwargs, name):
    args = {"alpha": 1.0, "tau": 2.0, "kappa": 1.0, "noise_var": 0.1, "ridge": 0.0} | kwargs
    with pytest.raises(ValueError, match=name):
        icl_error(**args)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"tau": -1.0}, "tau"),
        ({"kappa": -1.0}, "kappa"),
        ({"noise_var": -1.0}, "noise_var"),
    ],
)
def test_idg_error_validation(kwargs, name):
    args = {"alpha": 1.0, "tau": 2.0, "kappa": 1.0, "noise_var": 0.1} | kwargs
    with pytest.raises(ValueError, match=name):
        idg_error(**args)


def test_error_of_gamma_zero_and_validation():
    d = 5
    assert error_of_gamma(np.zeros((d, d + 1)), 2.0, 0.3) == pytest.approx(1.3, abs=1e-15)
    with pytest.raises(ValueError, match="gamma"):
        error_of_gamma(np.zeros((d, d)), 2.0, 0.3)
    with pytest.raises(ValueError, match="alpha"):
        error_of_gamma(np.zeros((d, d + 1)), 0.0, 0.3)
    with pytest.raises(ValueError, match="noise_var"):
        error_of_gamma(np.zeros((d, d + 1)), 1.0, -0.3)
    with pytest.raises(ValueError, match="task_"):
        error_of_gamma(np.zeros((d, d + 1)), 1.0, 0.3, task_mean=np.zeros(d))


def _mc_error(gamma, ell, rho, pool, seed, n_test):
    d = gamma.shape[0]
    p = sample_single_index_prompts(
        n_test, ell, d, rng=np.random.default_rng(seed), noise_var=rho, task_pool=pool
    )
    pred = np.einsum("bi,ij,bj->b", p.x_query, gamma, reduced_features(p.xs, p.ys))
    sq = (p.y_query - pred) ** 2
    return sq.mean(), sq.std() / np.sqrt(n_test)


@pytest.mark.parametrize("use_pool", [False, True])
def test_error_of_gamma_matches_monte_carlo(use_pool):
    # The closed form is exact at finite d: compare with a Monte-Carlo average over explicit prompts.
    d, ell, rho = 6, 9, 0.2
    rng = np.random.default_rng(7)
    gamma = np.eye(d, d + 1) * 0.8 + 0.15 * rng.standard_normal((d, d + 1))
    gamma[:, d] = 0.1 * rng.standard_normal(
        d
    )  # exercise the Σ y² column, which couples to the task mean
    pool = sample_task_pool(3, d, rng=rng) if use_pool else None
    mean, se = _mc_error(gamma, ell, rho, pool, seed=11, n_test=200_000)
    if pool is None:
        exact = error_of_gamma(gamma, ell / d, rho)
    else:
        exact = error_of_gamma(gamma, ell / d, rho, *task_moments(pool))
    # 4 standard errors: a wrong term in A or B (e.g. the 1/ℓ corrections, ~10 % here) moves it by far more.
    assert abs(mean - exact) < 4 * se
    assert se / exact < 0.01


def test_task_moments():
    pool = np.array([[1.0, 0.0], [0.0, 2.0]])
    mean, second = task_moments(pool)
    np.testing.assert_allclose(mean, [0.5, 1.0])
    np.testing.assert_allclose(second, [[0.5, 0.0], [0.0, 2.0]])


# Checks of chapter 3's exercises (icl_book.checks): pass on the solution, fail on a wrong answer and a stub.


def _stub(*args):
    raise NotImplementedError()


def test_check_asymptotics_ex1():
    from icl_book.checks import CheckFailed, check_asymptotics_ex1

    def solution(alpha, rho):
        x = (1 + rho) / alpha
        return rho + x / (1 + x)

    assert check_asymptotics_ex1(solution)
    with pytest.raises(CheckFailed, match="asymptotics-ex1"):
        check_asymptotics_ex1(
            lambda alpha, rho: (1 + rho) / alpha / (2 + rho / alpha)
        )  # forgets +ρ
    with pytest.raises(CheckFailed, match="not implemented"):
        check_asymptotics_ex1(_stub)


def test_check_asymptotics_ex3():
    from icl_book.checks import CheckFailed, check_asymptotics_ex3

    assert check_asymptotics_ex3(lambda kappa: max(0.0, 1.0 - kappa))
    with pytest.raises(CheckFailed, match="asymptotics-ex3"):
        check_asymptotics_ex3(lambda kappa: 1.0 - kappa)  # no max: negative gap for κ > 1
    with pytest.raises(CheckFailed, match="not implemented"):
        check_asymptotics_ex3(_stub)


def _icl_ridge_mp(alpha, tau, kappa, rho, lam):
    """The ridge e_ICL formula, term by term as SCIENCE.md writes it, in 80-digit arithmetic (mpmath):
    the reference for the double-precision rearrangement of ``theory.asymptotics._icl_ridge``."""
    import mpmath as mp

    with mp.workdps(80):
        x = mp.mpf(0) if np.isinf(alpha) else (1 + mp.mpf(rho)) / alpha
        tau, rho, lam = mp.mpf(tau), mp.mpf(rho), mp.mpf(lam)
        ik = mp.mpf(0) if np.isinf(kappa) else 1 / mp.mpf(kappa)

        def m(z):
            a = z + 1 - ik
            return 2 / (a + mp.sqrt(a * a + 4 * z * ik))

        def m_prime(z):
            return -(m(z) ** 2) / 2 * (1 + (z + 1 + ik) / mp.sqrt((z + 1 - ik) ** 2 + 4 * z * ik))

        def f(e):
            return 1 - tau + tau * lam / e - e * m(e + x)

        lo, hi = lam, mp.mpf(1)
        while f(lo) <= 0:
            lo /= 4
        while f(hi) >= 0:
            hi *= 4
        eps = mp.findroot(f, (lo, hi), solver="anderson")
        nu = x + eps
        s, sp = m(nu), m_prime(nu)
        c_e = (rho + nu - nu * nu * s - eps * (1 - 2 * nu * s - nu * nu * sp)) / (
            1 - 2 * eps * s - eps * eps * sp - tau
        )
        e = (x + 1) * (1 - 2 * nu * s - nu * nu * sp - c_e * (s + eps * sp))
        return float(e - 2 * (1 - nu * s) + 1 + rho)


@pytest.mark.parametrize(
    "point",
    [
        (1.0, 2.0, np.inf, 0.25, 0.1),  # the book's range
        (2.0, 2.0, 0.5, 0.1, 1e-3),
        (0.3, 0.7, 1.3, 0.0, 1e-4),
        # κ ≪ 1 at α = ∞: S + εS' formed as a difference lost every digit, and e_ICL came out
        # as -4164.6 here (found by test_entry_validation's property test)
        (np.inf, 8.374980998958419e-08, 8.374980998958419e-08, 1.0, 2.3713737056616554e-12),
        (np.inf, 1e-7, 1e-7, 1.0, 1e-12),
        (1e8, 8.37e-8, 8.37e-8, 1.0, 1e-10),
        (100.0, 1e-8, 1e-8, 1e6, 1e-12),
    ],
)
def test_ridge_formula_matches_80_digit_arithmetic(point):
    assert icl_error(*point) == pytest.approx(_icl_ridge_mp(*point), rel=1e-6)
