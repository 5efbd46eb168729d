"""The checks of ``nonlinear-ex<N>``, the exercises of ``chapters/04_nonlinearity_noise.md``."""

from __future__ import annotations

import math

import numpy as np

from ..theory import (
    equivalent_linear_task,
)
from ._core import (
    CheckFailed,
    NotAnswered,
    Parts,
    Passed,
    _graded_in_parts,
    _inputs_rng,
    _reports_unanswered_in,
    call_answer,
    require_close,
)

__all__ = ["check_nonlinear_ex1", "check_nonlinear_ex3"]


@_graded_in_parts
def check_nonlinear_ex1(equivalent_from_coefficients) -> Passed:
    """``equivalent_from_coefficients(mu (K+1,), rho) -> (mu1, rho_eff)`` for ``f = Σ_k (μ_k/k!) He_k``."""

    label = "nonlinear-ex1"
    rng = _inputs_rng(label, 4242)  # graded: the two random expansions drawn afresh
    if rng is None:
        rng = np.random.default_rng(4242)
    cases = [
        (np.array([0.0, 1.0]), 0.0),
        (np.array([0.3, 0.8, 0.0, 0.0]), 0.1),
        (np.array([0.0, 0.6, 0.5, -0.4, 1.2]), 0.05),
        (np.array([0.0, 0.0, 2.0]), 0.2),  # He_2
    ] + [(rng.normal(size=k + 1), float(rng.uniform(0, 1))) for k in (3, 6)]
    parts = Parts(label)
    for mu, rho in cases:
        with parts.case(f"K = {mu.size - 1}, ρ = {rho:.3g}"):
            got = call_answer(label, equivalent_from_coefficients, mu.copy(), rho)
            if not isinstance(got, tuple | list) or len(got) != 2:
                raise CheckFailed(
                    f"{label}: return a pair (mu1, rho_eff), got {type(got).__name__}"
                )
            weights = np.array([1.0 / math.factorial(k) for k in range(mu.size)])
            expected_rho_eff = rho + float(np.sum(weights * mu**2)) - mu[1] ** 2
            require_close(
                label,
                got[0],
                mu[1],
                rtol=1e-10,
                atol=1e-12,
                hint="μ_1 is the coefficient of He_1 in f = Σ (μ_k/k!) He_k.",
            )
            require_close(
                label,
                got[1],
                expected_rho_eff,
                rtol=1e-10,
                atol=1e-12,
                hint=(
                    "ρ_eff = ρ + E f² − μ_1²; get E f² from the coefficients by Parseval, remembering that "
                    "E He_k(Z)² = k! (and that a model without bias cannot predict the constant part)."
                ),
            )
    return parts.passed()


@_graded_in_parts
def check_nonlinear_ex3(design_teacher) -> Passed:
    """``design_teacher(mu1, rho_eff, rho) -> f`` with ``equivalent_linear_task(f, rho) == (mu1, rho_eff)``."""

    label = "nonlinear-ex3"
    targets = [
        (0.5, 0.4, 0.1),
        (-1.0, 0.1, 0.1),
        (0.0, 1.5, 0.0),
        (0.8, 0.3, 0.05),
        (2.0, 1.0, 0.0),
    ]
    parts = Parts(label)
    for mu1, rho_eff, rho in targets:
        with parts.case(f"(μ_1, ρ_eff, ρ) = ({mu1}, {rho_eff}, {rho})"):
            f = call_answer(label, design_teacher, mu1, rho_eff, rho)
            if not callable(f):
                raise CheckFailed(
                    f"{label}: design_teacher must return a function f(z), got {type(f).__name__}"
                )
            try:
                got = equivalent_linear_task(f, rho)
            except NotImplementedError:
                raise NotAnswered(
                    f"{label}: not implemented yet (replace the NotImplementedError stub)"
                ) from None
            except Exception as exc:  # the student's f crashed or has no finite second moment
                raise CheckFailed(
                    f"{label}: equivalent_linear_task(f) raised {type(exc).__name__}: {exc}. "
                    "f must be vectorised (take and return NumPy arrays) with E f(Z)² < ∞."
                ) from None
            require_close(
                label,
                got[0],
                mu1,
                rtol=1e-7,
                atol=1e-9,
                hint=f"for the target μ_1 = {mu1}: the coefficient of He_1(z) = z in f sets μ_1 = E[f(Z) Z].",
            )
            require_close(
                label,
                got[1],
                rho_eff,
                rtol=1e-7,
                atol=1e-9,
                hint=(
                    f"for the target (μ_1, ρ_eff, ρ) = ({mu1}, {rho_eff}, {rho}): the part of f orthogonal to z must "
                    "carry the energy ρ_eff − ρ; a Hermite polynomial of degree ≥ 2 does it (E He_k(Z)² = k!)."
                ),
            )
    return parts.passed()


_reports_unanswered_in(globals())  # keep last: wraps every check defined above
