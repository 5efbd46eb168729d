"""Tests of icl_book.hermite: closed forms, an mpmath reference, properties, and error messages.

Tolerances. Coefficients are compared in the orthonormal basis (``normalized=True``), where every
coefficient is bounded by ``√(E f²)`` and double precision gives ~1e-16 absolute. The targets of
the book (1e-10 for smooth links, 1e-8 for kinked ones, k <= 20) are asserted with margin to spare;
where a test uses a tighter tolerance, the comment says why it is achievable.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icl_book import hermite as H
from icl_book.hermite import (
    LINKS,
    Link,
    effective_noise,
    erf_link,
    get_link,
    hermite_coefficients,
    hermite_he,
    hermite_normalized,
    hermite_series,
    hermite_table,
    linear_component,
    nonlinear_energy,
    second_moment,
    truncation_errors,
)

SMOOTH_TOL = 1e-10  # smooth links, k <= 20
KINKED_TOL = 1e-8  # ReLU, |z|, sign, k <= 20


# --------------------------------------------------------------------------------------------------
# Hermite polynomials
# --------------------------------------------------------------------------------------------------
def test_hermite_he_low_degrees_match_explicit_polynomials():
    z = np.linspace(-3, 3, 13)
    expected = [np.ones_like(z), z, z**2 - 1, z**3 - 3 * z, z**4 - 6 * z**2 + 3]
    for k, e in enumerate(expected):
        np.testing.assert_allclose(hermite_he(k, z), e, rtol=0, atol=1e-12)


def test_hermite_he_matches_numpy_hermite_e_and_broadcasts():
    z = np.linspace(-4, 4, 12).reshape(3, 4)
    for k in (0, 1, 5, 12):
        coef = np.zeros(k + 1)
        coef[k] = 1.0
        ref = np.polynomial.hermite_e.hermeval(z, coef)
        got = hermite_he(k, z)
        assert got.shape == z.shape
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-9)
    assert hermite_he(3, 2.0).shape == ()


def test_normalized_recurrence_agrees_with_he_over_sqrt_factorial_and_does_not_overflow():
    z = np.linspace(-5, 5, 11)
    for k in (0, 3, 10, 25):
        np.testing.assert_allclose(
            hermite_normalized(k, z), hermite_he(k, z) / math.sqrt(math.factorial(k)), rtol=1e-12
        )
    # k = 300: He_k overflows float64 at z = 10 (≈ 10^300 · …); h_k must stay finite.
    assert np.all(np.isfinite(hermite_normalized(300, z)))
    table = hermite_table(6, z)
    assert table.shape == (7, 11)
    np.testing.assert_allclose(table[4], hermite_he(4, z))


def test_hermite_he_and_table_reject_bad_degree():
    for bad in (-1, 2.5, "3", True, None):
        with pytest.raises(ValueError, match="k must be an integer >= 0"):
            hermite_he(bad, 1.0)
    with pytest.raises(ValueError, match="max_degree"):
        hermite_table(-2, 1.0)


# --------------------------------------------------------------------------------------------------
# Closed forms against quadrature
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["relu", "abs", "sign"])
def test_kinked_links_match_closed_forms(name):
    link = get_link(name)
    got = hermite_coefficients(link, 30, normalized=True)
    exact = link.closed_form_coefficients(30, normalized=True)
    # Kinks are quadrature breakpoints, so the error is rounding only (~1e-15), far below 1e-8.
    assert np.max(np.abs(got - exact)) < KINKED_TOL * 1e-5
    assert abs(second_moment(link) - link.second_moment_exact) < 1e-13


@pytest.mark.parametrize("name", ["erf", "square", "cube"])
def test_smooth_links_match_closed_forms(name):
    link = get_link(name)
    got = hermite_coefficients(link, 30, normalized=True)
    exact = link.closed_form_coefficients(30, normalized=True)
    assert np.max(np.abs(got - exact)) < SMOOTH_TOL * 1e-2
    # Relative accuracy of the unnormalised μ_k (they grow like √k!, see the module docstring).
    mu, mu_exact = hermite_coefficients(link, 20), link.closed_form_coefficients(20)
    scale = np.sqrt([math.factorial(k) for k in range(21)], dtype=np.float64)
    assert np.max(np.abs(mu - mu_exact) / scale) < SMOOTH_TOL * 1e-2
    assert abs(second_moment(link) - link.second_moment_exact) < 1e-12


@pytest.mark.parametrize("a", [0.05, 0.3, 1.0, 2.5, 8.0])
def test_erf_family_closed_forms(a):
    link = erf_link(a)
    got = hermite_coefficients(link, 25, normalized=True)
    exact = link.closed_form_coefficients(25, normalized=True)
    # a = 8: erf(8z) turns in a layer of width ~0.1 at the breakpoint z = 0; still smooth per panel.
    assert np.max(np.abs(got - exact)) < SMOOTH_TOL
    assert abs(second_moment(link) - link.second_moment_exact) < 1e-12


def test_closed_form_values_from_science_md():
    phi0 = 1 / math.sqrt(2 * math.pi)
    relu = LINKS["relu"].closed_form_coefficients(6)
    np.testing.assert_allclose(relu, [phi0, 0.5, phi0, 0, -phi0, 0, 3 * phi0], atol=1e-15)
    sign = LINKS["sign"].closed_form_coefficients(5)
    c = math.sqrt(2 / math.pi)
    np.testing.assert_allclose(sign, [0, c, 0, -c, 0, 3 * c], atol=1e-15)
    np.testing.assert_allclose(LINKS["cube"].closed_form_coefficients(4), [0, 3, 0, 6, 0])
    with pytest.raises(ValueError, match="no closed form"):
        LINKS["tanh"].closed_form_coefficients(3)


def test_plain_callables_with_kink_at_zero_are_exact():
    # z = 0 is always a breakpoint: plain NumPy callables kinked at the origin need no declaration.
    for f, name in [(lambda z: np.maximum(z, 0), "relu"), (np.abs, "abs"), (np.sign, "sign")]:
        got = hermite_coefficients(f, 20, normalized=True)
        exact = LINKS[name].closed_form_coefficients(20, normalized=True)
        assert np.max(np.abs(got - exact)) < KINKED_TOL * 1e-5


def test_kink_away_from_zero_declared_or_not_is_integrated_exactly():
    c = 0.7
    f = lambda z: np.maximum(z - c, 0.0)  # noqa: E731
    # Closed form: μ_0 = φ(c) − c(1 − Φ(c)), μ_1 = 1 − Φ(c), μ_k = φ(c) He_{k−2}(c) for k >= 2.
    phi_c = math.exp(-c * c / 2) / math.sqrt(2 * math.pi)
    tail = 0.5 * math.erfc(c / math.sqrt(2))
    exact = [phi_c - c * tail, tail] + [phi_c * float(hermite_he(k - 2, c)) for k in range(2, 16)]
    exact = np.array(exact) / np.sqrt([math.factorial(k) for k in range(16)], dtype=np.float64)
    declared = hermite_coefficients(f, 15, normalized=True, kinks=[c])
    as_link = hermite_coefficients(Link("relu_c", f, kinks=(c,)), 15, normalized=True)
    undeclared = hermite_coefficients(f, 15, normalized=True)
    assert np.max(np.abs(declared - exact)) < 1e-14
    assert np.max(np.abs(as_link - exact)) < 1e-14
    # Undeclared, the kink is located (panels whose halves disagree are bisected) and becomes a
    # breakpoint: the same accuracy as a declared one.
    assert np.max(np.abs(undeclared - exact)) < 1e-14


# --------------------------------------------------------------------------------------------------
# mpmath reference for smooth links without closed forms
# --------------------------------------------------------------------------------------------------
def _mp_normalized_coefficient(fm, k: int) -> float:
    """μ_k / √k! by mpmath's tanh-sinh quadrature at 25 digits."""

    def integrand(z):
        a, b = mp.mpf(1), z
        if k == 0:
            h = a
        else:
            for j in range(1, k):
                a, b = b, z * b - j * a
            h = b
        return fm(z) * h * mp.exp(-z * z / 2)

    with mp.workdps(25):
        val = mp.quad(integrand, [-mp.inf, -16, -8, -4, 0, 4, 8, 16, mp.inf])
        return float(val / (mp.sqrt(2 * mp.pi) * mp.sqrt(mp.factorial(k))))


@pytest.mark.slow  # ~2 s of mpmath quadrature per link
@pytest.mark.parametrize(
    "f, fm",
    [
        (np.tanh, mp.tanh),
        (lambda z: np.logaddexp(0.0, z), lambda z: mp.log(1 + mp.exp(z))),  # softplus
    ],
    ids=["tanh", "softplus"],
)
def test_smooth_links_match_mpmath_reference(f, fm):
    degrees = [0, 1, 2, 3, 8, 13, 20]
    got = hermite_coefficients(f, 20, normalized=True)[degrees]
    ref = np.array([_mp_normalized_coefficient(fm, k) for k in degrees])
    # Observed error ~1e-16; 1e-13 leaves room for rounding and is 1000× tighter than the target.
    assert np.max(np.abs(got - ref)) < SMOOTH_TOL * 1e-3


def test_tanh_values_quoted_in_science_md():
    assert abs(linear_component(np.tanh) - 0.605706) < 5e-7
    assert abs(second_moment(np.tanh) - 0.394294) < 5e-7


def test_agrees_with_independent_gauss_hermite_rule_for_tanh():
    from scipy.special import roots_hermitenorm

    z, w = roots_hermitenorm(200)
    w = w / math.sqrt(2 * math.pi)
    ref = hermite_table(25, z, normalized=True) @ (w * np.tanh(z))
    assert np.max(np.abs(hermite_coefficients(np.tanh, 25, normalized=True) - ref)) < 1e-12


# --------------------------------------------------------------------------------------------------
# Properties (hypothesis)
# --------------------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(j=st.integers(0, 40), k=st.integers(0, 40))
def test_orthogonality(j, k):
    # E[h_j h_k] = δ_jk, computed as the k-th coefficient of f = h_j.
    coef = hermite_coefficients(lambda z: hermite_normalized(j, z), max(j, k), normalized=True)
    assert abs(coef[k] - (1.0 if j == k else 0.0)) < 1e-12


@settings(max_examples=40, deadline=None)
@given(
    c=st.lists(
        st.floats(-5, 5, allow_nan=False, allow_infinity=False, allow_subnormal=False),
        min_size=1,
        max_size=21,
    ),
    extra=st.integers(0, 5),
)
def test_random_polynomials_are_recovered(c, extra):
    c = np.array(c)
    f = lambda z: hermite_series(c, z, normalized=True)  # noqa: E731  f = Σ c_k h_k
    got = hermite_coefficients(f, c.size - 1 + extra, normalized=True)
    expected = np.concatenate([c, np.zeros(extra)])
    # Exact up to rounding: error ≲ 1e-14 · Σ|c_k| (a polynomial of degree <= 20 on a rule exact
    # far beyond that degree).
    assert np.max(np.abs(got - expected)) < 1e-13 * (1 + np.abs(c).sum())
    # Unnormalised form of the same statement: f = Σ (μ_k/k!) He_k with μ_k = c_k √k!.
    mu = hermite_coefficients(f, c.size - 1)
    scale = np.sqrt([math.factorial(k) for k in range(c.size)], dtype=np.float64)
    assert np.max(np.abs(mu / scale - c)) < 1e-13 * (1 + np.abs(c).sum())


@settings(max_examples=30, deadline=None)
@given(
    c=st.lists(st.floats(-3, 3, allow_nan=False, allow_subnormal=False), min_size=1, max_size=15)
)
def test_parseval_for_polynomials(c):
    c = np.array(c)
    f = lambda z: hermite_series(c, z, normalized=True)  # noqa: E731
    assert abs(second_moment(f) - np.sum(c**2)) < 1e-12 * (1 + np.sum(c**2))


@settings(max_examples=25, deadline=None)
@given(a=st.floats(0.05, 0.5), shift=st.sampled_from([0.0, 0.3]))
def test_parseval_for_erf_and_truncation_errors(a, shift):
    # erf(a z) + shift: normalised coefficients decay geometrically, ratio 2a²/(1+2a²) <= 1/3,
    # so 80 terms leave a tail below 1e-30: Σ c_k² must equal E f² to rounding.
    f = lambda z: erf_link(a)(z) + shift  # noqa: E731
    c = hermite_coefficients(f, 80, normalized=True)
    ef2 = second_moment(f)
    assert abs(np.sum(c**2) - ef2) < 1e-13
    # Truncation errors: e_K = E f² − Σ_{k<=K} c_k² (computed without the subtraction).
    e = truncation_errors(f, 12)
    np.testing.assert_allclose(e, ef2 - np.cumsum(c[:13] ** 2), rtol=0, atol=1e-13)
    assert np.all(np.diff(e) <= 1e-15)


def test_parseval_for_kinked_links_converges_at_the_expected_rate():
    # sign: e_K ~ K^{-1/2}; ReLU: e_K ~ K^{-3/2} (SCIENCE.md closed forms), measured on K = 20 → 80.
    for name, slope in [("sign", -0.5), ("relu", -1.5), ("abs", -1.5)]:
        e = truncation_errors(LINKS[name], 81)
        k = np.array([20, 40, 80])
        fitted = np.polyfit(np.log(k), np.log(e[k]), 1)[0]
        assert abs(fitted - slope) < 0.05, (name, fitted)


# --------------------------------------------------------------------------------------------------
# Derived quantities
# --------------------------------------------------------------------------------------------------
def test_linear_component_nonlinear_energy_effective_noise():
    relu = LINKS["relu"]
    phi0 = 1 / math.sqrt(2 * math.pi)
    assert abs(linear_component(relu) - 0.5) < 1e-14
    assert abs(nonlinear_energy(relu) - (0.5 - phi0**2 - 0.25)) < 1e-14
    assert abs(effective_noise(relu) - 0.25) < 1e-14
    assert abs(effective_noise(relu, noise_var=0.1) - 0.35) < 1e-14
    assert abs(effective_noise(LINKS["abs"], 0.0) - 1.0) < 1e-14  # μ_1 = 0: all of E f² is noise
    assert abs(nonlinear_energy(lambda z: 2 * z + 1)) < 1e-14
    # erf(a z): effective noise in closed form (exercise hermite-ex3).
    a = 0.8
    s = 2 * a * a / (1 + 2 * a * a)
    expected = 2 / math.pi * math.asin(s) - 4 * a * a / (math.pi * (1 + 2 * a * a))
    assert abs(effective_noise(erf_link(a)) - expected) < 1e-14


def test_gaussian_expectation_and_series():
    assert abs(H.gaussian_expectation(lambda z: z**4) - 3.0) < 1e-13
    z = np.linspace(-2, 2, 5)
    mu = LINKS["cube"].closed_form_coefficients(3)
    np.testing.assert_allclose(hermite_series(mu, z), z**3, atol=1e-13)


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("func", [hermite_coefficients, lambda f, k: linear_component(f)])
def test_non_callable_f_is_a_type_error(func):
    with pytest.raises(TypeError, match="f must be a vectorised callable"):
        func(3.0, 2)


@pytest.mark.parametrize("bad", [-1, 2.5, 3.0, "3", None, True])
def test_bad_max_degree(bad):
    with pytest.raises(ValueError, match="max_degree must be an integer >= 0"):
        hermite_coefficients(np.tanh, bad)


def test_numpy_integer_degree_is_accepted():
    assert hermite_coefficients(np.tanh, np.int64(3)).shape == (4,)


def test_non_finite_values_are_reported():
    with pytest.raises(ValueError, match="non-finite values"):
        hermite_coefficients(np.log, 3)  # nan for z < 0
    with pytest.raises(ValueError, match="non-finite"):
        hermite_coefficients(lambda z: 1.0 / z**2 * np.where(np.abs(z) < 1e-3, np.inf, 1.0), 2)


def test_infinite_second_moment_is_reported():
    with pytest.raises(ValueError, match="infinite"):
        hermite_coefficients(lambda z: np.exp(z * z / 4), 3)
    with pytest.raises(ValueError, match="infinite|non-finite"):
        second_moment(lambda z: np.exp(z * z))


def test_non_vectorised_and_wrong_shape():
    with pytest.raises(TypeError, match="vectorised"):
        hermite_coefficients(lambda z: max(z, 0), 2)
    with pytest.raises(ValueError, match="vectorised"):
        hermite_coefficients(lambda z: z[:3], 2)
    # A constant returned as a scalar broadcasts.
    np.testing.assert_allclose(hermite_coefficients(lambda z: 2.0, 2), [2, 0, 0], atol=1e-14)


def test_other_argument_errors():
    with pytest.raises(ValueError, match="noise_var"):
        effective_noise(np.tanh, -0.1)
    with pytest.raises(TypeError, match="kinks"):
        hermite_coefficients(np.tanh, 2, kinks=["a"])
    with pytest.raises(ValueError, match="kinks"):
        hermite_coefficients(np.tanh, 2, kinks=[np.inf])
    with pytest.raises(ValueError, match="a must be"):
        erf_link(0.0)
    with pytest.raises(ValueError, match="name must be one of"):
        get_link("gelu")


# --------------------------------------------------------------------------------------------------
# Autograder checks of chapter 1 (icl_book.checks, hermite section)
# --------------------------------------------------------------------------------------------------
def _relu_coefficient(k):
    return float(LINKS["relu"].closed_form_coefficients(k)[k])


def _stub(*args):
    raise NotImplementedError()


def test_check_hermite_ex1(capsys):
    from icl_book.checks import CheckFailed, check_hermite_ex1

    assert check_hermite_ex1(_relu_coefficient)
    assert capsys.readouterr().out == "hermite-ex1: correct\n"
    with pytest.raises(CheckFailed, match="not implemented"):
        check_hermite_ex1(_stub)
    # A classic mistake: forgetting the sign (−1)^m of He_{k−2}(0).
    with pytest.raises(CheckFailed, match="μ_4 is off") as info:
        check_hermite_ex1(lambda k: abs(_relu_coefficient(k)))
    assert "0.39" not in str(info.value)  # the hint does not leak the value
    with pytest.raises(CheckFailed, match="μ_0 is off"):
        check_hermite_ex1(lambda k: 0.5 if k == 0 else _relu_coefficient(k))
    with pytest.raises(CheckFailed, match="one number"):
        check_hermite_ex1(lambda k: [_relu_coefficient(k)] * 2)
    with pytest.raises(CheckFailed, match="expected a function"):
        check_hermite_ex1(0.4)


def test_check_hermite_ex3(capsys):
    from icl_book.checks import CheckFailed, check_hermite_ex3

    def solution(a, rho):
        s = 2 * a * a / (1 + 2 * a * a)
        return rho + 2 / math.pi * (math.asin(s) - s)

    assert check_hermite_ex3(solution)
    assert capsys.readouterr().out == "hermite-ex3: correct\n"
    with pytest.raises(CheckFailed, match="not implemented"):
        check_hermite_ex3(_stub)
    # Forgetting the label noise, or subtracting μ_1 instead of μ_1², must fail.
    with pytest.raises(CheckFailed, match="wrong at a"):
        check_hermite_ex3(lambda a, rho: solution(a, 0.0))
    with pytest.raises(CheckFailed, match="wrong at a"):
        check_hermite_ex3(
            lambda a, rho: solution(a, rho) + 2 / math.pi * (2 * a * a / (1 + 2 * a * a))
        )
    with pytest.raises(CheckFailed, match="raised ZeroDivisionError"):
        check_hermite_ex3(lambda a, rho: 1 / 0)


def test_high_degrees_stay_accurate():
    # Degree 300 polynomial (h_300 overflows unweighted near its turning point |z| ≈ 35) and the
    # sign link to degree 500: weighted Hermite functions keep every number in range.
    c = hermite_coefficients(
        lambda z: hermite_normalized(300, z) + hermite_normalized(150, z), 300, normalized=True
    )
    expected = np.zeros(301)
    expected[[150, 300]] = 1.0
    assert np.max(np.abs(c - expected)) < 1e-13
    sign = LINKS["sign"]
    c = hermite_coefficients(sign, 500, normalized=True)
    assert np.max(np.abs(c[:171] - sign.closed_form_coefficients(170, normalized=True))) < 1e-14
    # Parseval at degree 500, with the tail computed independently from the residual.
    assert abs(np.sum(c**2) + truncation_errors(sign, 500)[-1] - 1.0) < 1e-13


def test_any_callable_may_declare_kinks():
    class ShiftedRelu:
        kinks = (0.7,)

        def __call__(self, z):
            return np.maximum(z - 0.7, 0.0)

    by_attribute = hermite_coefficients(ShiftedRelu(), 12, normalized=True)
    by_argument = hermite_coefficients(lambda z: np.maximum(z - 0.7, 0.0), 12, kinks=0.7)
    scale = np.sqrt([math.factorial(k) for k in range(13)], dtype=np.float64)
    np.testing.assert_allclose(by_attribute, by_argument / scale, rtol=0, atol=1e-15)
