"""The checks of ``prologue-ex<N>``, the exercises of ``chapters/00_prologue.md``."""

from __future__ import annotations

import numpy as np

from ..theory import (
    best_one_step_eta,
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

__all__ = ["check_prologue_ex1", "check_prologue_ex2"]


@_graded_in_parts
def check_prologue_ex1(ridge_prediction) -> Passed:
    """``ridge_prediction(xs (N, d), ys (N,), x_query (d,), lam) -> float`` for one prompt."""
    label = "prologue-ex1"
    cases = [(7, 3, 0.5), (3, 6, 0.1), (20, 4, 2.0)]
    rng = _inputs_rng(label, 12345)
    if rng is None:
        rng = np.random.default_rng(12345)
    else:  # graded: other penalties on fresh data (still one prompt with N < d)
        cases = [(n, d, round(float(rng.uniform(0.05, 3.0)), 3)) for n, d, _ in cases]
    parts = Parts(label)
    for n, d, lam in cases:
        with parts.case(f"N = {n}, d = {d}, λ = {lam}"):
            xs, ys, xq = rng.standard_normal((n, d)), rng.standard_normal(n), rng.standard_normal(d)
            got = call_answer(label, ridge_prediction, xs, ys, xq, lam)
            if np.ndim(got) != 0:
                raise CheckFailed(
                    f"{label}: return one number for one prompt, got shape {np.shape(got)}"
                )
            expected = xq @ np.linalg.solve(xs.T @ xs + lam * np.eye(d), xs.T @ ys)
            require_close(
                label,
                got,
                expected,
                rtol=1e-8,
                atol=1e-10,
                hint="the ridge penalty adds λ to the diagonal of XᵀX; check also N < d, where XᵀX is singular.",
            )
    return parts.passed()


@_graded_in_parts
def check_prologue_ex2(best_eta) -> Passed:
    """``best_eta(dim, context_len, noise_var) -> float``: the risk-minimising step for Λ = I."""

    label = "prologue-ex2"
    cases = [(5, 20, 0.25), (1, 1, 0.0), (10, 3, 2.0), (3, 100, 1.0)]
    rng = _inputs_rng(label, 0)
    if rng is not None:  # graded: fresh sizes and noise levels (and still d = N = 1 without noise)
        cases = [(1, 1, 0.0)] + [
            (
                int(rng.integers(1, 13)),
                int(rng.integers(1, 121)),
                round(float(rng.uniform(0, 2)), 3),
            )
            for _ in range(3)
        ]
    parts = Parts(label)
    for d, n, s2 in cases:
        with parts.case(f"d = {d}, N = {n}, σ² = {s2}"):
            got = call_answer(label, best_eta, d, n, s2)
            require_close(
                label,
                got,
                best_one_step_eta(np.eye(d), n, s2),
                rtol=1e-10,
                atol=0.0,
                hint="minimise the parabola d + σ² − 2ηd + η²E‖g‖² in η; E‖g‖² has three terms.",
            )
    return parts.passed()


_reports_unanswered_in(globals())  # keep last: wraps every check defined above
