"""The checks of ``glu-ex<N>``, the exercises of ``chapters/05_glu_kernel_regression.md``."""

from __future__ import annotations

from math import comb

import numpy as np

from ..estimators import (
    one_step_kernel_gd_predict,
    polynomial_kernel,
)
from ..theory import (
    hermite_one_step_excess_risk,
)
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

__all__ = ["check_glu_ex1", "check_glu_ex2", "check_glu_ex4"]


@_graded_in_parts
def check_glu_ex1(min_width) -> Passed:
    """``min_width(d, p) -> int``: the smallest token width of one block holding every monomial of degree ≤ p."""

    label = "glu-ex1"
    cases = [(1, 1), (1, 2), (2, 2), (4, 2), (3, 3), (8, 2), (5, 4), (10, 3)]
    drawn = _inputs_rng(label, 0)
    if drawn is not None:  # graded: fresh (d, p), still d = p = 1 first
        cases = [(1, 1)] + [
            (int(drawn.integers(1, 13)), int(drawn.integers(1, 6))) for _ in range(7)
        ]
    parts = Parts(label)
    for d, p in cases:
        with parts.case(f"d = {d}, p = {p}"):
            got = call_answer(label, min_width, d, p)
            if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
                raise CheckFailed(f"{label}: return an integer width, got {type(got).__name__}")
            if int(got) != comb(d + p, p) + 1:
                raise CheckFailed(
                    f"{label}: not quite for d = {d}, p = {p}. Hint: count the x slots, the constant, the y slot and "
                    "one scratch slot per monomial of degree 2..p (how many monomials of degree <= p are there?)."
                )
    return parts.passed()


@_graded_in_parts
def check_glu_ex2(inhomogeneous_block_weights) -> Passed:
    """``inhomogeneous_block_weights(dim, eta) -> GLULSABlockWeights`` predicting ``(η/N) Σ y_i (1 + x_i·x_q)²``."""

    label = "glu-ex2"
    from ..attention.glu import (  # torch: see check_lsa_ex2
        GLULSABlockWeights,
        glu_lsa_block_predict,
    )

    cases = [(1, 5, 0.7), (3, 12, -1.3), (5, 30, 0.25)]
    rng = _inputs_rng(label, 2024)
    if rng is None:
        rng = np.random.default_rng(2024)
    else:  # graded: fresh dimensions, steps and prompts
        cases = [
            (
                int(rng.integers(1, 7)),
                n,
                round(float(rng.choice([-1, 1]) * rng.uniform(0.2, 1.5)), 3),
            )
            for _, n, _ in cases
        ]
    parts = Parts(label)
    for d, n, eta in cases:
        # drawn before the answer is called: a failed case leaves the next cases' inputs unchanged
        xs, ys, xq = (
            rng.standard_normal((4, n, d)),
            rng.standard_normal((4, n)),
            rng.standard_normal((4, d)),
        )
        with parts.case(f"d = {d}, N = {n}, η = {eta}"):
            weights = call_answer(label, inhomogeneous_block_weights, d, eta)
            if not isinstance(weights, GLULSABlockWeights):
                raise CheckFailed(
                    f"{label}: return a GLULSABlockWeights (start from glu_lsa_block_weights), "
                    f"got {type(weights).__name__}"
                )
            try:
                got = glu_lsa_block_predict(xs, ys, xq, weights)
            except (ValueError, TypeError) as exc:
                raise CheckFailed(
                    f"{label}: the block cannot run with these weights: {exc}"
                ) from None
            expected = one_step_kernel_gd_predict(xs, ys, xq, polynomial_kernel(2, offset=1.0), eta)
            require_close(
                label,
                got,
                expected,
                rtol=1e-9,
                atol=1e-10,
                hint="expand (1 + x·x')² = 1 + 2 x·x' + (x·x')²: which slots of φ must W_KQ weight, and by how much?",
            )
    return parts.passed()


@_graded_in_parts
def check_glu_ex4(excess_constant) -> Passed:
    """``excess_constant(d, noise_var) -> float``: ``C`` in excess risk ``= C/N`` (whitened one-step GD)."""

    label = "glu-ex4"
    cases = [(1, 0.0), (2, 0.5), (4, 0.1), (7, 2.0)]
    drawn = _inputs_rng(label, 0)
    if drawn is not None:  # graded: fresh dimensions and noise levels (still one noiseless case)
        cases = [(int(drawn.integers(1, 11)), 0.0)] + [
            (int(drawn.integers(1, 11)), round(float(drawn.uniform(0.01, 3.0)), 3))
            for _ in range(3)
        ]
    parts = Parts(label)
    for d, s2 in cases:
        with parts.case(f"d = {d}, σ² = {s2}"):
            got = call_answer(label, excess_constant, d, s2)
            require_close(
                label,
                got,
                hermite_one_step_excess_risk(1, d, s2),
                rtol=1e-9,
                atol=1e-12,
                hint="C = E[y² ‖φ(x)‖²] − ‖θ‖²: split off the noise (σ² p), then use ‖φ‖² = 1 + d/2 + ‖x‖⁴/2 and "
                "the χ² moments of ‖x‖².",
            )
    return parts.passed()


_reports_unanswered_in(globals())  # keep last: wraps every check defined above
