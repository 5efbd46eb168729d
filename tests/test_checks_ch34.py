"""The exercise checks of chapters 3 (asymptotics) and 4 (nonlinear teachers).

Each check is run on a correct answer written differently from the chapter's solution, on the typical
wrong answers, and on a faked answer: correct ones must pass, the others must raise ``CheckFailed``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from icl_book import checks, hermite
from icl_book.checks import CheckFailed
from icl_book.simulate import (
    gamma_errors,
    pretrain_reduced_lsa,
    problem_sizes,
    sample_reduced_prompts,
    simulated_errors,
    solve_reduced_ridge,
)
from icl_book.theory import error_of_gamma, icl_error


def _fails(check, answer):
    with pytest.raises(CheckFailed):
        check(answer)


def _stub(*args):
    raise NotImplementedError()


# --- asymptotics-ex1: limit_error(alpha, rho) --------------------------------------------------------


def test_asymptotics_ex1_correct_written_differently(capsys):
    # ρ + x/(1 + x) with x = (1 + ρ)/α, rewritten as ρ + (1 + ρ)/(α + 1 + ρ).
    assert checks.check_asymptotics_ex1(lambda a, r: r + (1 + r) / (a + 1 + r))
    assert capsys.readouterr().out == "asymptotics-ex1: correct\n"


@pytest.mark.parametrize(
    "wrong",
    [
        lambda a, r: (1 + r) / (a + 1 + r),  # noise term forgotten
        lambda a, r: r + 1 / (a + 1),  # x* = 1/α instead of (1 + ρ)/α
        lambda a, r: r + (1 + r) / a,  # x* instead of x*/(1 + x*)
        lambda a, r: icl_error(a, 1e4, np.inf, r),  # the formula at a large but finite τ (fake)
        lambda a, r: np.array([r, r]),  # not a scalar
        _stub,
    ],
)
def test_asymptotics_ex1_rejects(wrong):
    _fails(checks.check_asymptotics_ex1, wrong)


# --- asymptotics-ex3: asymptotic_gap(kappa) ----------------------------------------------------------


def test_asymptotics_ex3_correct_written_differently(capsys):
    assert checks.check_asymptotics_ex3(lambda k: (1.0 - k) if k < 1 else 0.0)
    assert capsys.readouterr().out == "asymptotics-ex3: correct\n"


@pytest.mark.parametrize(
    "wrong",
    [
        lambda k: 1.0 - k,  # no max(0, ·)
        lambda k: min(1.0, 1.0 / k),  # 1/κ
        lambda k: 0.0,  # "no gap"
        lambda k: max(0.0, 1.0 - k) + 0.02,  # faked: right shape, offset
        lambda k: np.array([max(0.0, 1.0 - k)] * 2),  # not a scalar
        _stub,
    ],
)
def test_asymptotics_ex3_rejects(wrong):
    _fails(checks.check_asymptotics_ex3, wrong)


# --- asymptotics-ex4: simulate_icl(tau, rho, seed) ---------------------------------------------------


def _by_hand(tau, rho, seed):
    """A correct answer written differently: sample, solve and evaluate step by step."""
    rng = np.random.default_rng(seed)
    d = 40
    ell, n, _ = problem_sizes(d, 1.0, tau)
    gamma, _ = pretrain_reduced_lsa(d, ell / d, tau, np.inf, rho, rng=rng, tol=1e-6)
    return error_of_gamma(gamma, ell / d, rho)


def _other_stream(tau, rho, seed):
    """A correct simulation whose random numbers differ from the reference (independent implementation)."""
    d = 40
    ell, n, _ = problem_sizes(d, 1.0, tau)
    p = sample_reduced_prompts(n, ell, d, rng=np.random.default_rng([seed, 12345]), noise_var=rho)
    gamma, _ = solve_reduced_ridge(p.x_query, p.h, p.y_query, 0.0, tol=1e-6)
    return gamma_errors(gamma, ell / d, rho).icl


def _ridge(tau, rho, seed):
    return simulated_errors(40, 1.0, tau, np.inf, rho, 0.1, rng=np.random.default_rng(seed)).icl


def _fake(tau, rho, seed):
    """The formula times the typical finite-d excess, plus noise that depends on the seed."""
    jitter = np.random.default_rng(seed).normal(scale=0.01)
    return float(icl_error(1.0, tau, np.inf, rho) * (1.03 + jitter))


def _fake_quiet(tau, rho, seed):
    return float(icl_error(1.0, tau, np.inf, rho) * (1.05 + 1e-6 * seed))


def _unseeded(tau, rho, seed):
    return simulated_errors(40, 1.0, tau, np.inf, rho, rng=np.random.default_rng()).icl


@pytest.mark.slow
@pytest.mark.parametrize("answer", [_by_hand, _other_stream])
def test_asymptotics_ex4_accepts_simulations(answer, capsys):
    assert checks.check_asymptotics_ex4(answer)
    assert capsys.readouterr().out == "asymptotics-ex4: correct\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    "wrong",
    [
        _ridge,  # a ridge λ = 0.1 simulation
        _fake,  # formula × 1.03 plus seed-dependent jitter
        _fake_quiet,  # formula × 1.05, seeds differ by a hair
        _unseeded,  # ignores the seed
        lambda tau, rho, seed: simulated_errors(
            40, 1.0, tau, np.inf, 0.01, rng=np.random.default_rng(seed)
        ).icl,  # wrong ρ
        lambda tau, rho, seed: simulated_errors(
            40, 0.5, tau, np.inf, rho, rng=np.random.default_rng(seed)
        ).icl,  # wrong α (ℓ = 20)
        lambda tau, rho, seed: simulated_errors(
            40, 1.0, tau, 1.0, rho, rng=np.random.default_rng(seed)
        ).idg,  # e_IDG on a finite pool instead of e_ICL
        lambda tau, rho, seed: icl_error(1.0, tau, np.inf, rho),  # the formula itself
        _stub,
    ],
)
def test_asymptotics_ex4_rejects(wrong):
    _fails(checks.check_asymptotics_ex4, wrong)


# --- nonlinear-ex1: equivalent_from_coefficients(mu, rho) ----------------------------------------------


def _from_coefficients(mu, rho):
    mu = np.asarray(mu, dtype=float)
    k = np.arange(mu.size)
    energy = np.sum(mu**2 / np.cumprod(np.r_[1.0, k[1:]]))  # Parseval with E He_k² = k!
    return mu[1], rho + energy - mu[1] ** 2


def test_nonlinear_ex1_correct_written_differently(capsys):
    assert checks.check_nonlinear_ex1(_from_coefficients)
    assert capsys.readouterr().out == "nonlinear-ex1: correct\n"


@pytest.mark.parametrize(
    "wrong",
    [
        lambda mu, rho: (mu[1], rho + sum(m**2 for m in mu[2:])),  # no 1/k!
        lambda mu, rho: (
            mu[1],
            rho + sum(mu[k] ** 2 / math.factorial(k) for k in range(2, len(mu))),
        ),  # μ_0 not counted as noise
        lambda mu, rho: (mu[1], rho + sum(mu[k] ** 2 / math.factorial(k) for k in range(len(mu)))),
        lambda mu, rho: (mu[1] / 2, _from_coefficients(mu, rho)[1]),  # wrong μ_1
        lambda mu, rho: (0.7, 0.5),  # faked constants
        lambda mu, rho: _from_coefficients(mu, rho)[1],  # not a pair
        _stub,
    ],
)
def test_nonlinear_ex1_rejects(wrong):
    _fails(checks.check_nonlinear_ex1, wrong)


# --- nonlinear-ex3: design_teacher(mu1, rho_eff, rho) --------------------------------------------------


def _cubic_teacher(mu1, rho_eff, rho):
    c = np.sqrt((rho_eff - rho) / 6)  # E He_3² = 3! = 6
    return lambda z: mu1 * z + c * (z**3 - 3 * z)


def _constant_teacher(mu1, rho_eff, rho):
    c = np.sqrt(rho_eff - rho)  # μ_0² counts as noise
    return lambda z: mu1 * z + c


@pytest.mark.parametrize("answer", [_cubic_teacher, _constant_teacher])
def test_nonlinear_ex3_correct_written_differently(answer, capsys):
    assert checks.check_nonlinear_ex3(answer)
    assert capsys.readouterr().out == "nonlinear-ex3: correct\n"


@pytest.mark.parametrize(
    "wrong",
    [
        lambda m, r_eff, r: (
            lambda z: m * z + np.sqrt(r_eff - r) * (z**2 - 1)
        ),  # E He_2² = 2 forgotten
        lambda m, r_eff, r: (
            lambda z: m * z + np.sqrt((r_eff - r) / 6) * z**3
        ),  # z³ has a linear part
        lambda m, r_eff, r: (lambda z: m * z),  # no extra energy
        lambda m, r_eff, r: (
            lambda z: m * z + np.sqrt(r_eff) * (z**2 - 1) / np.sqrt(2)
        ),  # ρ_eff, not ρ_eff − ρ
        lambda m, r_eff, r: (lambda z: float(m)),  # not vectorised, and wrong
        lambda m, r_eff, r: (m, r_eff),  # faked: returns the targets, not a function
        _stub,
    ],
)
def test_nonlinear_ex3_rejects(wrong):
    _fails(checks.check_nonlinear_ex3, wrong)


def test_hermite_links_still_there():
    # The chapter's teachers, used as a sanity anchor for the designed teachers above.
    assert {"tanh", "erf", "relu", "sign", "abs"} <= set(hermite.LINKS)


def test_asymptotics_ex4_reference_is_cached_by_its_inputs():
    """The check's reference simulations are cached by (τ, ρ, seed): a cached value is a fresh run's."""
    ref = checks.ch03_asymptotics._asymptotics_ex4_reference
    ref.cache_clear()
    first = ref(8.0, 0.5, 3)
    fresh = simulated_errors(40, 1.0, 8.0, np.inf, 0.5, rng=np.random.default_rng(3), tol=1e-6)
    assert first == fresh.icl
    assert ref(8.0, 0.5, 3) == first and ref.cache_info().hits == 1
    assert ref(8.0, 0.5, 4) != first and ref(8.0, 0.1, 3) != first  # other inputs, other runs
    assert ref.cache_info().misses == 3
