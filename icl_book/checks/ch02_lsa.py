"""The checks of ``lsa-ex<N>``, the exercises of ``chapters/02_lsa_gradient_descent.md``."""

from __future__ import annotations

import numpy as np

from .. import _validate
from ..estimators import (
    one_step_gd_predict,
)
from ..tasks import sample_linear_prompts
from ..theory import (
    best_one_step_eta,
    optimal_preconditioned_risk,
    optimal_preconditioner,
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
    passed,
    require_close,
)

__all__ = ["check_lsa_ex1", "check_lsa_ex2", "check_lsa_ex4"]


@_graded_in_parts
def check_lsa_ex1(best_eta) -> Passed:
    """``best_eta(input_cov (d, d), context_len, noise_var) -> float``: the risk-minimising scalar step."""

    label = "lsa-ex1"
    rng = np.random.default_rng(2024)
    a = rng.standard_normal((4, 4))
    cases = [
        (np.eye(3), 10, 0.5),
        (np.diag([4.0, 2.0, 1.0, 0.5, 0.25]), 20, 0.1),
        (a @ a.T / 4 + 0.2 * np.eye(4), 7, 0.0),
        (np.diag([9.0, 0.01]), 1, 1.0),
    ]
    drawn = _inputs_rng(label, 2024)
    if drawn is not None:  # graded: fresh covariances, context lengths and noise levels
        cases = []
        for d in (int(drawn.integers(1, 6)), int(drawn.integers(2, 7)), 4):
            b = drawn.standard_normal((d, d))
            cov = b @ b.T / d + float(drawn.uniform(0.05, 0.5)) * np.eye(d)
            cases.append((cov, int(drawn.integers(1, 40)), round(float(drawn.uniform(0, 2)), 3)))
        cases.append((np.diag(drawn.uniform(0.01, 9.0, size=3)), 1, 0.0))
    parts = Parts(label)
    for cov, n, s2 in cases:
        with parts.case(f"d = {cov.shape[0]}, N = {n}, σ² = {s2}"):
            got = call_answer(label, best_eta, cov.copy(), n, s2)
            if np.ndim(got) != 0:
                raise CheckFailed(f"{label}: return one number, got shape {np.shape(got)}")
            # Closed form against closed form: 1e-10 relative is rounding headroom only.
            require_close(
                label,
                got,
                best_one_step_eta(cov, n, s2),
                rtol=1e-10,
                atol=0.0,
                hint=(
                    f"wrong for N = {n}, σ² = {s2} and a {cov.shape[0]}×{cov.shape[0]} Λ. The risk is a parabola "
                    "in η; its η² coefficient needs E[g gᵀ] for g = (1/N) Σ y_i x_i, which has a (1 + 1/N) Λ² "
                    "part and a part from E[(wᵀx)² x xᵀ] and the noise. Does your answer use Λ, not I?"
                ),
            )
    return parts.passed()


@_graded_in_parts
def check_lsa_ex2(lsa_weights_from_w0) -> Passed:
    """``lsa_weights_from_w0(w0 (d,), eta) -> (w_kq, w_pv)`` for one GD step started at ``w0``.

    The prediction is read as ``−[LSA(Z)]_{d+1, N+1}`` from the token matrix whose query label slot holds
    ``−w0ᵀx_q``; it must equal ``x_qᵀ w_1`` with ``w_1 = w0 − η ∇L(w0)``.
    """

    label = "lsa-ex2"
    cases = [(3, 8, 0.7), (1, 5, 1.3), (4, 12, -0.4)]
    rng = _inputs_rng(label, 77)
    if rng is None:
        rng = np.random.default_rng(77)
    else:  # graded: fresh w0, prompts and steps (one negative)
        cases = [
            (d, n, round(float(rng.uniform(0.1, 2.0)) * sign, 3))
            for (d, n, _), sign in zip(cases, (1, 1, -1), strict=True)
        ]
    # Imported here, not at the top: the attention layers import torch (~2 s), and chapters 0, 1
    # and 4 import this module and nothing else that needs it. The grader imports every module first.
    from ..attention import layers

    parts = Parts(label)
    for d, n, eta in cases:
        with parts.case(f"d = {d}, N = {n}, η = {eta}"):
            w0 = rng.standard_normal(d)
            p = sample_linear_prompts(6, n, d, rng=rng, noise_var=0.2)
            got = call_answer(label, lsa_weights_from_w0, w0.copy(), eta)
            if not isinstance(got, tuple) or len(got) != 2:
                raise CheckFailed(f"{label}: return a tuple (w_kq, w_pv)")
            w_kq, w_pv = (np.asarray(w, dtype=np.float64) for w in got)
            for name, w in (("w_kq", w_kq), ("w_pv", w_pv)):
                if w.shape != (d + 1, d + 1):
                    raise CheckFailed(
                        f"{label}: {name} must have shape {(d + 1, d + 1)}, got {w.shape}"
                    )
            z = layers.embed(p.xs, p.ys, p.x_query)
            z[:, -1, -1] = -p.x_query @ w0  # the query's label slot
            got_pred = layers.readout(layers.lsa(z, w_kq, w_pv))
            residuals = p.ys - p.xs @ w0
            w1 = w0 + eta / n * np.einsum("bn,bnd->bd", residuals, p.xs)
            # Exact algebra on O(1) numbers: 1e-10 is rounding headroom only.
            require_close(
                label,
                got_pred,
                np.einsum("bd,bd->b", p.x_query, w1),
                rtol=1e-10,
                atol=1e-10,
                hint=(
                    "the value row must turn each context token z_i = (x_i, y_i) into a multiple of its residual "
                    "y_i − w0ᵀx_i; the key-query block is the same as for w0 = 0. Mind von Oswald's minus sign."
                ),
            )
    return parts.passed()


def check_lsa_ex4(
    gamma_predicted, predict_learned, input_cov, context_len: int, noise_var: float
) -> Passed:
    """Ex. 4: the predicted ``Γ*`` (formula) and the predictions of a *trained* LSA layer.

    ``predict_learned(xs (B, N, d), ys (B, N), x_query (B, d)) -> (B,)`` is the trained layer's
    prediction (e.g. ``lsa_predict`` with the trained weights). The check samples its own fresh
    prompts of the task and compares, prompt by prompt, the squared error of ``predict_learned`` with
    that of the exact optimal step ``Γ*``: a trained layer is within 1 % of ``R*`` (``0.9 Γ*`` is
    2.4 % above it), cannot be below it by more than sampling noise (no LSA beats ``R*``), and
    cannot coincide with ``Γ*`` to rounding (that would be the formula, not training).
    """

    label = "lsa-ex4"
    unanswered = [
        n
        for n, v in [("gamma_predicted", gamma_predicted), ("predict_learned", predict_learned)]
        if v is None
    ]
    if unanswered:  # the student edition sets both to None above the solution
        raise NotAnswered(f"{label}: not implemented yet ({' and '.join(unanswered)} still None)")
    cov = _validate.as_array("input_cov", input_cov, 2)
    if cov.shape[0] == 0:
        raise ValueError(f"input_cov must be a non-empty (d, d) matrix, got shape {cov.shape}")
    cov = _validate.covariance("input_cov", cov, cov.shape[0])
    context_len = _validate.positive_int("context_len", context_len)
    noise_var = _validate.nonnegative_float("noise_var", noise_var)
    expected = optimal_preconditioner(cov, context_len, noise_var)
    require_close(
        label,
        gamma_predicted,
        expected,
        rtol=1e-10,
        atol=1e-12,
        hint="gamma_predicted is not Γ* = [(1 + 1/N) Λ + ((tr Λ + σ²)/N) I]^{-1} for this Λ, N and σ².",
    )
    d = cov.shape[0]
    test_rng = _inputs_rng(label, 4242)  # graded: test prompts no stored predictions can match
    test = sample_linear_prompts(
        100_000,
        context_len,
        d,
        rng=np.random.default_rng(4242) if test_rng is None else test_rng,
        noise_var=noise_var,
        input_cov=cov,
    )
    got = call_answer(label, predict_learned, test.xs.copy(), test.ys.copy(), test.x_query.copy())
    try:
        got = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        raise CheckFailed(f"{label}: predict_learned must return numbers") from None
    if got.shape != (len(test.y_query),):
        raise CheckFailed(
            f"{label}: predict_learned must return one prediction per prompt, shape "
            f"{(len(test.y_query),)}, got {got.shape}"
        )
    if not np.all(np.isfinite(got)):
        raise CheckFailed(f"{label}: predict_learned returned NaN or inf")
    optimal = one_step_gd_predict(test.xs, test.ys, test.x_query, 1.0, expected)
    if np.max(np.abs(got - optimal)) <= 1e-9 * (1 + np.max(np.abs(optimal))):
        raise CheckFailed(
            f"{label}: these are the predictions of Γ* itself. Pass the predictions of the layer "
            "you trained (lsa_predict with its weights), not of the formula."
        )
    r_star = optimal_preconditioned_risk(cov, context_len, noise_var)
    excess = (got - test.y_query) ** 2 - (optimal - test.y_query) ** 2  # paired, per prompt
    mean, se = excess.mean() / r_star, excess.std(ddof=1) / np.sqrt(excess.size) / r_star
    if mean < -4 * se - 1e-9:
        raise CheckFailed(
            f"{label}: the risk of predict_learned is below R*, which no LSA layer reaches: "
            "is it the layer you trained, or another learner (ridge, least squares)?"
        )
    # A trained layer sits within ~0.1 % of R*; 1 % rejects 0.9 Γ* (2.4 % above) by > 7 SE.
    if mean > 0.01:
        raise CheckFailed(
            f"{label}: the trained layer's risk is {100 * mean:.1f} % above R* on fresh prompts. "
            "Train longer or from several random starts (keep the lowest final loss)."
        )
    return passed(label)


_reports_unanswered_in(globals())  # keep last: wraps every check defined above
