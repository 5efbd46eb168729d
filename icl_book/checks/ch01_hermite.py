"""The checks of ``hermite-ex<N>``, the exercises of ``chapters/01_hermite.md``."""

from __future__ import annotations

import numpy as np

from ..hermite import LINKS, effective_noise, erf_link
from ._core import (
    CheckFailed,
    Parts,
    Passed,
    _graded_in_parts,
    _inputs_rng,
    _reports_unanswered_in,
    call_answer,
    require_close,
)

__all__ = ["check_hermite_ex1", "check_hermite_ex3"]


@_graded_in_parts
def check_hermite_ex1(relu_coefficient) -> Passed:
    """``relu_coefficient(k) -> float``: ``μ_k = E[ReLU(Z) He_k(Z)]`` in closed form, ``k >= 0``."""

    label = "hermite-ex1"
    exact = LINKS["relu"].closed_form_coefficients(14)
    parts = Parts(label)
    # Three parts: μ_0 and μ_1 (direct integrals) and μ_2..μ_14 together (Stein's identity). Not one
    # part per k: μ_k = 0 for odd k >= 3, which an answer returning 0 would pass.
    for name, ks in (("k = 0", [0]), ("k = 1", [1]), ("k = 2, ..., 14", range(2, 15))):
        with parts.case(name):
            for k in ks:
                got = call_answer(label, relu_coefficient, k)
                if np.ndim(got) != 0:
                    raise CheckFailed(
                        f"{label}: return one number for one k, got shape {np.shape(got)}"
                    )
                if k <= 1:
                    hint = f"μ_{k} is off: compute E[ReLU(Z) He_{k}(Z)] directly as an integral over z > 0."
                else:
                    hint = (
                        f"μ_{k} is off (k = {k}): apply Stein's identity twice; ReLU'' is a point mass, "
                        "and He_n(0) vanishes for odd n."
                    )
                # The closed form is exact; 1e-9 relative leaves room for a numerically evaluated answer, and
                # the absolute floor scales with √k!, the size of μ_k (quadrature leaves ~1e-11 in μ_13 = 0).
                atol = 1e-12 * np.sqrt(float(np.prod(np.arange(1, k + 1))))
                require_close(label, got, exact[k], rtol=1e-9, atol=atol, hint=hint)
    return parts.passed()


@_graded_in_parts
def check_hermite_ex3(erf_effective_noise) -> Passed:
    """``erf_effective_noise(a, rho) -> float``: ``ρ + E f² − μ_1²`` for ``f(z) = erf(a z)``."""

    label = "hermite-ex3"
    widths, noises = (0.25, 0.7, 1.0, 3.0), (0.0, 0.2)
    rng = _inputs_rng(label, 0)
    if rng is not None:  # graded: fresh widths and noise levels, so no table of answers passes
        widths = tuple(float(a) for a in rng.uniform(0.2, 3.5, size=4).round(3))
        noises = (0.0, round(float(rng.uniform(0.05, 0.5)), 3))
    parts = Parts(label)
    for a in widths:
        for rho in noises:
            with parts.case(f"a = {a}, ρ = {rho}"):
                got = call_answer(label, erf_effective_noise, a, rho)
                if np.ndim(got) != 0:
                    raise CheckFailed(f"{label}: return one number, got shape {np.shape(got)}")
                # Quadrature reference ~1e-15 accurate; 1e-9 relative accepts any careful closed form.
                require_close(
                    label,
                    got,
                    effective_noise(erf_link(a), rho),
                    rtol=1e-9,
                    atol=1e-12,
                    hint=(
                        f"wrong at a = {a}, ρ = {rho}. ρ_eff = ρ + E f² − μ_1²: check μ_1 against "
                        "hermite_coefficients(erf_link(a), 1) and E f² against "
                        "second_moment(erf_link(a))."
                    ),
                )
    return parts.passed()


_reports_unanswered_in(globals())  # keep last: wraps every check defined above
