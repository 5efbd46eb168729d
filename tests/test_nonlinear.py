"""Tests of chapter 4: the nonlinearity–noise equivalence (``theory.nonlinear`` and simulate.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import erf

from icl_book import simulate, theory
from icl_book.tasks import sample_task_pool

# Closed-form moments (SCIENCE.md §1): (μ_1, E f²) for Z ~ N(0, 1).
SIGN = (np.sqrt(2 / np.pi), 1.0)
RELU = (0.5, 0.5)
ERF = (2 / np.sqrt(3 * np.pi), (2 / np.pi) * np.arcsin(2 / 3))
TANH = (0.605706, 0.394294)  # numerical values quoted in SCIENCE.md (6 digits)


def relu(z):
    return np.maximum(z, 0.0)


def he2(z):
    return z * z - 1.0


# ------------------------------------------------------------------------------------------------
# equivalent_linear_task
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("f", "moments", "tol"),
    [
        (np.tanh, TANH, 2e-6),  # SCIENCE.md quotes 6 digits
        (erf, ERF, 1e-9),
        (relu, RELU, 1e-6),  # kinked links converge slowly under plain quadrature
        (np.sign, SIGN, 1e-6),
    ],
)
def test_equivalent_linear_task_matches_closed_forms(f, moments, tol):
    mu1, second = moments
    got_mu1, got_rho_eff = theory.equivalent_linear_task(f, noise_var=0.1)
    assert got_mu1 == pytest.approx(mu1, abs=tol)
    assert got_rho_eff == pytest.approx(0.1 + second - mu1**2, abs=2 * tol)


def test_equivalent_linear_task_linear_teacher_and_scaling():
    mu1, rho_eff = theory.equivalent_linear_task(lambda z: z, noise_var=0.3)
    assert mu1 == pytest.approx(1.0, abs=1e-12)
    assert rho_eff == pytest.approx(0.3, abs=1e-12)
    # f(z) = -2z: the sign of μ_1 is kept, no effective noise is added.
    mu1, rho_eff = theory.equivalent_linear_task(lambda z: -2 * z)
    assert mu1 == pytest.approx(-2.0, abs=1e-12)
    assert rho_eff == pytest.approx(0.0, abs=1e-12)


def test_mean_counts_as_noise():
    # f(z) = z + 3: μ_0 = 3 is counted in ρ_eff (the model has no bias); centring removes it.
    mu1, rho_eff = theory.equivalent_linear_task(lambda z: z + 3.0, noise_var=0.0)
    assert mu1 == pytest.approx(1.0, abs=1e-12)
    assert rho_eff == pytest.approx(9.0, abs=1e-10)


@pytest.mark.parametrize("f", [np.abs, he2])
def test_even_links_have_no_linear_component(f):
    mu1, rho_eff = theory.equivalent_linear_task(f, noise_var=0.1)
    assert abs(mu1) < 1e-10
    assert rho_eff == pytest.approx(0.1 + (1.0 if f is np.abs else 2.0), rel=1e-6)


def test_bad_links_raise():
    with pytest.raises(ValueError, match="second moment"):
        theory.equivalent_linear_task(lambda z: np.exp(z * z))  # E f² = E exp(2Z²) = ∞
    with pytest.raises(ValueError):
        theory.equivalent_linear_task(lambda z: np.full_like(z, np.nan))
    with pytest.raises(TypeError):
        theory.equivalent_linear_task(3.0)
    with pytest.raises(ValueError, match="noise_var"):
        theory.equivalent_linear_task(np.tanh, noise_var=-1.0)


# ------------------------------------------------------------------------------------------------
# nonlinear_icl_error / nonlinear_idg_error
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ridge", [0.0, 0.1])
@pytest.mark.parametrize(("tau", "kappa"), [(0.5, 2.0), (3.0, np.inf), (3.0, 2.0)])
def test_linear_teacher_reduces_to_linear_theory(tau, kappa, ridge):
    got = theory.nonlinear_icl_error(lambda z: z, 2.0, tau, kappa, noise_var=0.1, ridge=ridge)
    assert got == pytest.approx(
        theory.icl_error(2.0, tau, kappa, noise_var=0.1, ridge=ridge), rel=1e-12
    )


def test_mapping_formula_for_tanh():
    mu1, rho_eff = theory.equivalent_linear_task(np.tanh, noise_var=0.1)
    for tau, kappa in [(0.5, np.inf), (3.0, 2.0)]:
        expected = mu1**2 * theory.icl_error(
            2.0, tau, kappa, noise_var=rho_eff / mu1**2, ridge=0.05 / mu1**2
        )
        got = theory.nonlinear_icl_error(np.tanh, 2.0, tau, kappa, noise_var=0.1, ridge=0.05)
        assert got == pytest.approx(expected, rel=1e-12)
        expected = mu1**2 * theory.idg_error(2.0, tau, kappa, noise_var=rho_eff / mu1**2)
        assert theory.nonlinear_idg_error(np.tanh, 2.0, tau, kappa, noise_var=0.1) == pytest.approx(
            expected, rel=1e-12
        )


def test_scaling_covariance():
    # Teacher c·f with noise c²ρ and ridge c²λ has exactly c² times the error of (f, ρ, λ).
    c = 1.7
    base = theory.nonlinear_icl_error(erf, 1.5, 2.5, 3.0, noise_var=0.2, ridge=0.1)
    scaled = theory.nonlinear_icl_error(
        lambda z: c * erf(z), 1.5, 2.5, 3.0, noise_var=c * c * 0.2, ridge=c * c * 0.1
    )
    assert scaled == pytest.approx(c * c * base, rel=1e-9)


@pytest.mark.parametrize("tau", [0.5, 3.0])
@pytest.mark.parametrize("kappa", [2.0, np.inf])
def test_mu1_zero_is_the_limit_of_the_mapping(tau, kappa):
    # Ridgeless with μ_1 = 0, pretraining fits pure noise: the limit μ_1 → 0 of the mapped formula is
    # (E f² + ρ) / (1 − τ) for τ < 1 and (E f² + ρ) τ / (τ − 1) for τ > 1, whatever κ (derived in chapter 4).
    rho = 0.1
    baseline = 1.0 + rho  # E|z|² + ρ
    factor = 1 / (1 - tau) if tau < 1 else tau / (tau - 1)
    assert theory.nonlinear_icl_error(np.abs, 2.0, tau, kappa, noise_var=rho) == pytest.approx(
        baseline * factor, rel=1e-7
    )
    assert theory.nonlinear_idg_error(np.abs, 2.0, tau, kappa, noise_var=rho) == pytest.approx(
        baseline * factor, rel=1e-7
    )
    # Continuity: a small linear component moves the error by O(μ_1²).
    eps = 1e-3
    near = theory.nonlinear_icl_error(lambda z: np.abs(z) + eps * z, 2.0, tau, kappa, noise_var=rho)
    assert near == pytest.approx(baseline * factor, rel=1e-4)


def test_mu1_zero_with_ridge_lies_between_baseline_and_ridgeless():
    baseline = 2.0 + 0.1  # E He_2² + ρ
    ridgeless = theory.nonlinear_icl_error(he2, 2.0, 3.0, noise_var=0.1)
    ridge = theory.nonlinear_icl_error(he2, 2.0, 3.0, noise_var=0.1, ridge=0.5)
    assert baseline < ridge < ridgeless
    # As τ → ∞ the pretrained Γ → 0: the no-learning baseline.
    assert theory.nonlinear_icl_error(he2, 2.0, 1e6, noise_var=0.1) == pytest.approx(
        baseline, rel=1e-5
    )


def test_zero_teacher_zero_noise_has_zero_error():
    assert theory.nonlinear_icl_error(np.zeros_like, 2.0, 3.0) == 0.0


def test_nonlinear_errors_broadcast_over_tau():
    taus = np.array([0.5, 2.0, 5.0])
    got = theory.nonlinear_icl_error(np.tanh, 2.0, taus, noise_var=0.1)
    assert got.shape == (3,)
    for t, g in zip(taus, got, strict=True):
        assert g == pytest.approx(
            theory.nonlinear_icl_error(np.tanh, 2.0, t, noise_var=0.1), rel=1e-12
        )


def test_ridgeless_divergence_is_inf():
    assert theory.nonlinear_icl_error(np.tanh, 2.0, 1.0, noise_var=0.1) == np.inf


def test_nonlinear_error_validation():
    with pytest.raises(ValueError, match="alpha"):
        theory.nonlinear_icl_error(np.tanh, -1.0, 2.0)
    with pytest.raises(ValueError, match="ridge"):
        theory.nonlinear_icl_error(np.tanh, 1.0, 2.0, ridge=-0.1)
    with pytest.raises(ValueError, match="second moment"):
        theory.nonlinear_idg_error(lambda z: np.exp(z * z), 1.0, 2.0, 2.0)
    with pytest.raises(ValueError, match="kappa"):
        theory.nonlinear_idg_error(np.tanh, 1.0, 2.0, 0.0)


# ------------------------------------------------------------------------------------------------
# mc_error
# ------------------------------------------------------------------------------------------------


def _random_gamma(dim, rng, scale=0.5):
    return np.eye(dim, dim + 1) + scale * rng.standard_normal((dim, dim + 1)) / np.sqrt(dim)


@pytest.mark.parametrize("pool_size", [None, 7])
def test_mc_error_matches_exact_error_of_gamma_for_linear_teacher(pool_size):
    # error_of_gamma is exact at finite d for the linear teacher: the Monte Carlo mean must agree with it
    # within 4 standard errors (a 4σ test fails by chance with probability 6e-5).
    rng = np.random.default_rng(1)
    dim, alpha, rho = 12, 1.5, 0.2
    gamma = _random_gamma(dim, rng)
    pool = None
    moments = {}
    if pool_size is not None:
        w = rng.standard_normal((pool_size, dim))
        pool = w * np.sqrt(dim) / np.linalg.norm(w, axis=1, keepdims=True)
        mean, second = theory.task_moments(pool)
        moments = {"task_mean": mean, "task_second_moment": second}
    res = simulate.mc_error(gamma, None, alpha, rho, task_pool=pool, n_test=60_000, rng=rng)
    exact = theory.error_of_gamma(gamma, alpha, rho, **moments)
    assert res.n_test == 60_000
    assert 0 < res.sem < 0.02 * res.mean
    assert abs(res.mean - exact) < 4 * res.sem


def test_mc_error_of_zero_gamma_is_the_label_second_moment():
    rng = np.random.default_rng(2)
    dim = 10
    res = simulate.mc_error(np.zeros((dim, dim + 1)), np.sign, 2.0, 0.1, n_test=40_000, rng=rng)
    assert abs(res.mean - 1.1) < 4 * res.sem  # E sign² + ρ


def test_mc_error_is_reproducible_and_streams_the_sampler():
    # Streaming in blocks must give exactly the draws of one sample_reduced_prompts call (n_test > one block).
    dim, n_test = 8, simulate.SAMPLE_BATCH + 123
    gamma = _random_gamma(dim, np.random.default_rng(0))
    a = simulate.mc_error(gamma, np.tanh, 2.0, 0.1, n_test=n_test, rng=np.random.default_rng(3))
    b = simulate.mc_error(gamma, np.tanh, 2.0, 0.1, n_test=n_test, rng=np.random.default_rng(3))
    assert a == b
    p = simulate.sample_reduced_prompts(
        n_test, 16, dim, rng=np.random.default_rng(3), noise_var=0.1, link=np.tanh
    )
    sq = (p.y_query - np.einsum("bd,bd->b", p.x_query, p.h @ gamma.T)) ** 2
    assert a.mean == pytest.approx(sq.mean(), rel=1e-12)
    assert a.sem == pytest.approx(sq.std(ddof=1) / np.sqrt(n_test), rel=1e-9)


def test_mc_error_accepts_link_names():
    gamma = _random_gamma(6, np.random.default_rng(0))
    a = simulate.mc_error(gamma, "relu", 1.0, 0.0, n_test=100, rng=np.random.default_rng(4))
    b = simulate.mc_error(
        gamma, lambda z: np.maximum(z, 0), 1.0, 0.0, n_test=100, rng=np.random.default_rng(4)
    )
    assert a == b


def test_mc_error_validation():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="gamma"):
        simulate.mc_error(np.zeros((3, 3)), np.tanh, 1.0, 0.0, n_test=10, rng=rng)
    with pytest.raises(ValueError, match="alpha"):
        simulate.mc_error(np.zeros((3, 4)), np.tanh, 0.0, 0.0, n_test=10, rng=rng)
    with pytest.raises(ValueError, match="noise_var"):
        simulate.mc_error(np.zeros((3, 4)), np.tanh, 1.0, -0.1, n_test=10, rng=rng)
    with pytest.raises(ValueError, match="n_test"):
        simulate.mc_error(np.zeros((3, 4)), np.tanh, 1.0, 0.0, n_test=1, rng=rng)
    with pytest.raises(ValueError, match="task_pool"):
        simulate.mc_error(
            np.zeros((3, 4)), np.tanh, 1.0, 0.0, task_pool=np.ones((2, 5)), n_test=10, rng=rng
        )
    with pytest.raises(TypeError, match="rng"):  # rng=0 is a seed (SPEC 7); a float is not
        simulate.mc_error(np.zeros((3, 4)), np.tanh, 1.0, 0.0, n_test=10, rng=0.5)
    with pytest.raises(TypeError, match="link"):
        simulate.mc_error(np.zeros((3, 4)), 5, 1.0, 0.0, n_test=10, rng=rng)
    with pytest.raises(ValueError, match="link"):
        simulate.mc_error(np.zeros((3, 4)), lambda z: z[:1], 1.0, 0.0, n_test=10, rng=rng)


# ------------------------------------------------------------------------------------------------
# Simulation against the mapped theory (at a smaller d than the benchmark)
# ------------------------------------------------------------------------------------------------
# At d = 100 the acceptance run (benchmarks/bench_nonlinear.py) asks for 5 %. Here d = 40 to keep the test fast.
# Finite-d corrections are O(1/d) and systematically positive: at d = 40 the benchmark measured deviations of
# +1.5 % to +9 % from the theory for these teachers (3 seeds), the *linear* teacher showing the same size of
# deviation. With 2 seeds and 20,000 test prompts the Monte Carlo and seed spread adds ~2 %. Hence 13 %: it still
# fails on a wrong mapping (e.g. forgetting μ_0² in ρ_eff moves ReLU by ~40 %, dropping the ridge or noise
# rescaling moves the errors by far more than 13 %).
D_SMALL, ALPHA_T, RHO_T = 40, 2.0, 0.1
NAMES = ["tanh", "erf", "relu", "sign"]


def _simulate(link, tau, kappa, rho, seeds=(0, 1), n_test=20_000):
    icl, idg = [], []
    for seed in seeds:
        gamma, pool = simulate.pretrain_reduced_lsa(
            D_SMALL, ALPHA_T, tau, kappa, rho, link=link, rng=np.random.default_rng(seed)
        )
        icl.append(
            simulate.mc_error(
                gamma, link, ALPHA_T, rho, n_test=n_test, rng=np.random.default_rng(100 + seed)
            ).mean
        )
        if pool is not None:
            idg.append(
                simulate.mc_error(
                    gamma,
                    link,
                    ALPHA_T,
                    rho,
                    task_pool=pool,
                    n_test=n_test,
                    rng=np.random.default_rng(200 + seed),
                ).mean
            )
    return np.mean(icl), (np.mean(idg) if idg else None)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("tau", [0.5, 3.0])
def test_simulation_matches_mapped_theory_small_d(name, tau):
    from icl_book import hermite

    link = hermite.get_link(name)
    icl, idg = _simulate(link, tau, 2.0, RHO_T)
    th_icl = theory.nonlinear_icl_error(link, ALPHA_T, tau, 2.0, RHO_T)
    th_idg = theory.nonlinear_idg_error(link, ALPHA_T, tau, 2.0, RHO_T)
    assert abs(icl / th_icl - 1) < 0.13
    assert abs(idg / th_idg - 1) < 0.13


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tanh", "sign"])
def test_teacher_matches_equivalent_linear_teacher_small_d(name):
    # Same seeds: same tasks, inputs and standard-normal noise; only the label map differs. At d = 40, τ = 3,
    # κ = ∞ the benchmark measured ratios within 1.6 % of 1 for tanh and sign (3 seeds); 2 seeds add ~1.5 % of
    # seed spread, hence 5 %. A teacher mapped with the wrong ρ_eff (e.g. ρ instead of ρ_eff) misses by > 20 %.
    from icl_book import hermite

    link = hermite.get_link(name)
    mu1, rho_eff = theory.equivalent_linear_task(link, RHO_T)
    icl, _ = _simulate(link, 3.0, np.inf, RHO_T)
    icl_lin, _ = _simulate(lambda z: mu1 * z, 3.0, np.inf, rho_eff)
    assert abs(icl / icl_lin - 1) < 0.05


@pytest.mark.slow
def test_mu1_zero_teacher_sits_at_the_noise_fitting_limit():
    # |z| at d = 40, τ = 3: predicted (1 + ρ)·3/2 = 1.65, above the baseline 1.1. Finite-d: the number of
    # parameters is d(d+1) rather than d², i.e. an effective τ = 4800/1640 = 2.93 (factor 1.52 instead of 1.5),
    # plus O(1/d) effects; 10 % tolerance, while the baseline 1.1 is 33 % away.
    icl, _ = _simulate(np.abs, 3.0, np.inf, RHO_T)
    assert abs(icl / theory.nonlinear_icl_error(np.abs, ALPHA_T, 3.0, noise_var=RHO_T) - 1) < 0.10
    assert icl > 1.3 * (1 + RHO_T)


# ------------------------------------------------------------------------------------------------
# Exercise checks: pass on a solution, fail (CheckFailed, not a crash) on wrong answers and on the stub
# ------------------------------------------------------------------------------------------------


def _stub(*args, **kwargs):
    raise NotImplementedError()


def test_check_nonlinear_ex1():
    from math import factorial

    from icl_book.checks import CheckFailed, check_nonlinear_ex1

    def good(mu, rho):
        return mu[1], rho + sum(m * m / factorial(k) for k, m in enumerate(mu) if k != 1)

    def forgets_mu0(mu, rho):
        return mu[1], rho + sum(m * m / factorial(k) for k, m in enumerate(mu) if k >= 2)

    def no_factorial(mu, rho):
        return mu[1], rho + sum(m * m for k, m in enumerate(mu) if k != 1)

    assert check_nonlinear_ex1(good)
    for wrong in (forgets_mu0, no_factorial, _stub, lambda mu, rho: 0.0):
        with pytest.raises(CheckFailed):
            check_nonlinear_ex1(wrong)


def test_check_nonlinear_ex3():
    from icl_book.checks import CheckFailed, check_nonlinear_ex3

    def good(mu1, rho_eff, rho):
        c = np.sqrt(rho_eff - rho)
        return lambda z: mu1 * z + c * (z**3 - 3 * z) / np.sqrt(6)

    def wrong_scale(mu1, rho_eff, rho):  # forgets E He_2² = 2
        c = np.sqrt(rho_eff - rho)
        return lambda z: mu1 * z + c * (z**2 - 1)

    def not_vectorised(mu1, rho_eff, rho):
        return lambda z: float(z[0])

    assert check_nonlinear_ex3(good)
    for wrong in (wrong_scale, not_vectorised, _stub, lambda *a: 3.0):
        with pytest.raises(CheckFailed):
            check_nonlinear_ex3(wrong)


# ------------------------------------------------------------------------------------------------
# nonlinear_error_of_gamma: the exact error of a given Γ for any single-index teacher
# ------------------------------------------------------------------------------------------------


def _random_gamma(d, seed):
    return 0.3 * np.random.default_rng(seed).standard_normal((d, d + 1))


@pytest.mark.parametrize("alpha", [0.5, 1.5, 3.0])
def test_error_of_gamma_nonlinear_reduces_to_linear_closed_form(alpha):
    # f(z) = z: the formula must be chapter 3's error_of_gamma, for fresh tasks and for a pool.
    d = 10
    gamma = _random_gamma(d, 1)
    pool = sample_task_pool(4, d, rng=np.random.default_rng(2))
    mean, second = theory.task_moments(pool)
    for f in (None, lambda z: z):
        assert theory.nonlinear_error_of_gamma(gamma, f, alpha, 0.2) == pytest.approx(
            theory.error_of_gamma(gamma, alpha, 0.2), rel=1e-12
        )
        assert theory.nonlinear_error_of_gamma(
            gamma, f, alpha, 0.2, task_pool=pool
        ) == pytest.approx(theory.error_of_gamma(gamma, alpha, 0.2, mean, second), rel=1e-12)


def test_error_of_gamma_nonlinear_zero_gamma_is_second_moment():
    # Γ = 0 predicts 0: the error is E f² + ρ (ReLU: 1/2 + ρ), whatever the pool.
    gamma = np.zeros((6, 7))
    assert theory.nonlinear_error_of_gamma(gamma, relu, 2.0, 0.1) == pytest.approx(0.6, abs=1e-9)


@pytest.mark.parametrize("link", ["sign", "relu", "tanh", "abs"])
def test_error_of_gamma_nonlinear_matches_monte_carlo(link):
    # The closed form against mc_error on the same Γ: fresh tasks, and a pool whose rows have different norms
    # (so σ = ‖w‖/√d ≠ 1 and the moments are recomputed per norm). 4 standard errors: a false alarm is ~1e-4.
    d, alpha, rho = 8, 1.5, 0.2
    gamma = _random_gamma(d, 3)
    pool = sample_task_pool(5, d, rng=np.random.default_rng(4))
    pool *= np.array([1.0, 2.0, 0.5, 1.0, 1.3])[:, None]
    for tp, seed in [(None, 5), (pool, 6)]:
        exact = theory.nonlinear_error_of_gamma(gamma, link, alpha, rho, task_pool=tp)
        mc = simulate.mc_error(
            gamma, link, alpha, rho, task_pool=tp, n_test=200_000, rng=np.random.default_rng(seed)
        )
        assert abs(mc.mean - exact) < 4 * mc.sem, (link, tp is None, mc, exact)


def test_error_of_gamma_nonlinear_validation():
    gamma = np.zeros((4, 5))
    with pytest.raises(ValueError, match="gamma"):
        theory.nonlinear_error_of_gamma(np.zeros((4, 4)), np.tanh, 1.0, 0.1)
    with pytest.raises(ValueError, match="alpha"):
        theory.nonlinear_error_of_gamma(gamma, np.tanh, 0.0, 0.1)
    with pytest.raises(ValueError, match="noise_var"):
        theory.nonlinear_error_of_gamma(gamma, np.tanh, 1.0, -0.1)
    with pytest.raises(ValueError, match="task_pool"):
        theory.nonlinear_error_of_gamma(gamma, np.tanh, 1.0, 0.1, task_pool=np.ones((3, 5)))
    with pytest.raises(ValueError, match="task_pool"):
        theory.nonlinear_error_of_gamma(gamma, np.tanh, 1.0, 0.1, task_pool=np.zeros((3, 4)))
    with pytest.raises(TypeError, match="link"):
        theory.nonlinear_error_of_gamma(gamma, 3.0, 1.0, 0.1)
