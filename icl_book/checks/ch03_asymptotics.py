"""The checks of ``asymptotics-ex<N>``, the exercises of ``chapters/03_asymptotic_theory.md``."""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import _validate
from ..simulate import simulated_errors
from ..theory import (
    icl_error,
    idg_error,
)
from ._core import (
    CheckFailed,
    Parts,
    Passed,
    _graded_in_parts,
    _inputs_rng,
    _reports_unanswered_in,
    call_answer,
    passed,
    require_close,
)

__all__ = ["check_asymptotics_ex1", "check_asymptotics_ex3", "check_asymptotics_ex4"]


@_graded_in_parts
def check_asymptotics_ex1(limit_error) -> Passed:
    """``limit_error(alpha, rho) -> float``: the τ, κ → ∞ limit of the ridgeless ``e_ICL``."""

    label = "asymptotics-ex1"
    alphas, rhos = (0.25, 1.0, 3.0, 20.0), (0.0, 0.01, 0.5, 2.0)
    drawn = _inputs_rng(label, 0)
    if drawn is not None:  # graded: fresh α (log-uniform on [0.2, 30]) and ρ (still one ρ = 0)
        alphas = tuple(
            round(float(x), 4) for x in np.exp(drawn.uniform(np.log(0.2), np.log(30), 4))
        )
        rhos = (0.0,) + tuple(round(float(x), 4) for x in drawn.uniform(0.005, 2.5, 3))
    parts = Parts(label)
    for alpha in alphas:
        for rho in rhos:
            with parts.case(f"α = {alpha}, ρ = {rho}"):
                got = call_answer(label, limit_error, alpha, rho)
                if np.ndim(got) != 0:
                    raise CheckFailed(f"{label}: return one number, got shape {np.shape(got)}")
                # icl_error at τ = ∞ is the exact limit of the τ > 1 branch (1/(τ − 1) = 0): 1e-10 relative.
                require_close(
                    label,
                    got,
                    icl_error(alpha, np.inf, np.inf, rho),
                    rtol=1e-10,
                    atol=1e-12,
                    hint=f"wrong at α = {alpha}, ρ = {rho}. With κ = ∞, M_κ(x) = 1/(1 + x); let 1/(τ − 1) → 0 in "
                    "the τ > 1 branch and simplify.",
                )
    return parts.passed()


# All or nothing, no parts: the gap vanishes for every κ > 1, so an answer returning 0 would
# pass half of the cases (a part must not be passable by a constant).
def check_asymptotics_ex3(asymptotic_gap) -> Passed:
    """``asymptotic_gap(kappa) -> float``: the α, τ → ∞ limit of ``g = e_ICL − e_IDG`` (ρ = 0)."""

    label = "asymptotics-ex3"
    kappas = (0.1, 0.3, 0.5, 0.8, 1.5, 2.0, 5.0, 50.0)
    drawn = _inputs_rng(label, 0)
    if drawn is not None:  # graded: four κ in [0.1, 0.8] and four in [1.5, 50] (log-uniform)
        low = drawn.uniform(0.1, 0.8, 4)
        high = np.exp(drawn.uniform(np.log(1.5), np.log(50.0), 4))
        kappas = tuple(round(float(k), 4) for k in np.concatenate([low, high]))
    for kappa in kappas:
        got = call_answer(label, asymptotic_gap, kappa)
        if np.ndim(got) != 0:
            raise CheckFailed(f"{label}: return one number for one κ, got shape {np.shape(got)}")
        # The formulas at α = 1e7, τ = 1e10 are within 1e-3 of the limit away from κ = 1 (checked for the
        # κ used here); a wrong limit (e.g. 1 − κ without the max, or 1/κ) is off by ≥ 0.1.
        reference = icl_error(1e7, 1e10, kappa) - idg_error(1e7, 1e10, kappa)
        require_close(
            label,
            got,
            reference,
            rtol=0.0,
            atol=5e-3,
            hint=f"wrong at κ = {kappa}. Treat κ < 1 and κ > 1 separately: how does x* M_κ(x*) behave as "
            "x* → 0 in each case?",
        )
    return passed(label)


@functools.lru_cache(maxsize=64)
def _asymptotics_ex4_reference(tau: float, rho: float, seed: int) -> float:
    """The book's simulated ``e_ICL`` at d = 40, α = 1, κ = ∞, ridgeless, with ``default_rng(seed)``.

    Cached by its inputs (every argument of the simulation is fixed here or among them): the check
    calls it for the same ten (τ, seed) pairs on every call, which cost ~1.5 s each time. The simulation
    is deterministic given its inputs (one BLAS thread inside), so a cached value is the value a fresh
    run gives; it is a float, which nothing can change in place.
    """
    return float(
        simulated_errors(40, 1.0, tau, np.inf, rho, rng=np.random.default_rng(seed), tol=1e-6).icl
    )


# Calibrated at d = 40, α = 1, κ = ∞, ρ = 0.5, ridgeless, τ = 8: the seed-to-seed spread of the book's
# simulated e_ICL (exact in the test prompts; 40 seeds: mean 1.2703, spread 0.0064) and of an honest
# Monte Carlo answer (Γ pretrained on the seed's generator, its error estimated by simulate.mc_error on
# 10⁴ fresh prompts; 30 independent streams × 8 seeds: spread 0.0183, of which ~0.0174 is the Monte
# Carlo noise of 10⁴ prompts).
_EX4_SPREAD_8 = 0.0064
_EX4_MC_SPREAD_8 = 0.0183


def check_asymptotics_ex4(simulate_icl) -> Passed:
    """``simulate_icl(tau, rho, seed) -> float``: simulated ``e_ICL`` at d = 40, α = 1, κ = ∞, ridgeless.

    The answer's mean over seeds is compared with the book's simulator run on the same seeds
    (:func:`icl_book.simulate.simulated_errors`), at two amounts of pretraining data:

    - τ = 0.7, just below the threshold, where ridgeless and ridge pretraining are far apart (at ρ = 0.5
      the simulated ridgeless error is ~5 % above the asymptotic formula at d = 40, a λ = 0.1 simulation
      ~22 % below it, the seed-to-seed spread a heavy-tailed ~5 %); eight seeds (with four, the
      two sample spreads of the pooled tolerance are too rough: 1 honest Monte Carlo stream in 30
      was rejected);
    - τ = 8, where the spread of the exact error is small (~0.5 %) and the finite-d bias is ~1 %; twelve
      seeds, so that an answer imitating a simulation with the formula times a constant plus noise is
      off by many standard errors.

    Every honest method the exercise allows passes: the exact error of the pretrained Γ, or a Monte
    Carlo estimate on fresh prompts (``simulate.mc_error`` with 10⁴ test prompts or more). The tolerance
    on the mean is 4 standard errors of a difference of two independent means, each with its own
    observed spread (the answer's includes its Monte Carlo noise); at τ = 8 the answer's spread must
    lie between a quarter of the exact errors' spread (a formula with a jitter is too smooth) and 2.5
    times the spread of Monte Carlo answers at 10⁴ prompts (fewer test prompts are too noisy to tell
    right from wrong). The same seed must give the same number, different seeds different numbers. In
    a notebook the seeds are 0, 1, ...; under the grader they are drawn per submission.
    """

    label = "asymptotics-ex4"
    rho = 0.5
    plan = [(0.7, 8), (8.0, 12)]
    rng = _inputs_rng(label, 0)
    if rng is None:
        seeds = {tau: tuple(range(n)) for tau, n in plan}
    else:  # graded: seeds no table of answers can hold
        drawn = [int(x) for x in rng.choice(2**31, size=sum(n for _, n in plan), replace=False)]
        seeds = {tau: tuple(drawn[:n]) if tau < 1 else tuple(drawn[-n:]) for tau, n in plan}

    def answer(tau, seed):
        got = call_answer(label, simulate_icl, tau, rho, seed)
        if got is None:
            raise CheckFailed(f"{label}: your function returned None (a missing return?)")
        try:
            got = _validate.as_array("simulate_icl's output", got, allow_inf=True)
        except (TypeError, ValueError):
            raise CheckFailed(f"{label}: return one finite number, got {got!r}") from None
        if np.ndim(got) != 0 or not np.isfinite(got):
            raise CheckFailed(f"{label}: return one finite number, got {got!r}")
        return float(got)

    first = seeds[8.0][0]
    if answer(8.0, first) != answer(8.0, first):
        raise CheckFailed(
            f"{label}: the same seed gave two different values: draw every random number from "
            "np.random.default_rng(seed)"
        )
    for tau, _ in plan:
        got = np.array([answer(tau, s) for s in seeds[tau]])
        ref = np.array([_asymptotics_ex4_reference(tau, rho, s) for s in seeds[tau]])
        if np.unique(got).size < got.size:
            raise CheckFailed(
                f"{label}: different seeds gave the same value: simulate with "
                "np.random.default_rng(seed), do not evaluate the formula"
            )
        spread, ref_spread = got.std(ddof=1), ref.std(ddof=1)
        if tau > 1:  # twelve seeds and a light-tailed spread: the spread itself is tested
            if spread < _EX4_SPREAD_8 / 4:
                raise CheckFailed(
                    f"{label}: at τ = {tau} your values vary from seed to seed by {spread:.2g}, "
                    "unlike a simulation: pretrain Γ on prompts drawn with the seed's generator "
                    "and return its error"
                )
            if spread > 2.5 * math.hypot(_EX4_SPREAD_8, _EX4_MC_SPREAD_8):
                raise CheckFailed(
                    f"{label}: at τ = {tau} your values vary from seed to seed by {spread:.2g}, too "
                    "much to tell: estimate the error on at least 10⁴ test prompts (or exactly)"
                )
        tol = 4 * np.sqrt((spread**2 + ref_spread**2) / len(got))
        if abs(got.mean() - ref.mean()) > tol:
            raise CheckFailed(
                f"{label}: not quite. Hint: at τ = {tau} your mean over seeds is {got.mean():.3f}; "
                "check d = 40, α = 1 (ℓ = 40), κ = ∞, the noise variance ρ, ridge 0 (minimum-norm "
                "least squares), and that the error is e_ICL on fresh tasks."
            )
    return passed(label)


_reports_unanswered_in(globals())  # keep last: wraps every check defined above
