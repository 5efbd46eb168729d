"""The exercise checks of chapters 0-2 accept correct answers written differently and reject wrong or faked ones.

Fast: no notebook is executed. Each check is fed (i) a correct answer that is not a copy of the reference
implementation, (ii) the typical mistakes, and (iii) a faked answer (the right formula scaled by 1.03, a copy of
the optimum where a trained model is asked for).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icl_book import checks, estimators, theory
from icl_book.attention import LinearSelfAttention, gd_lsa_weights, lsa_predict
from icl_book.checks import CheckFailed
from icl_book.hermite import LINKS, hermite_coefficients, hermite_he
from icl_book.train import train_in_context

PHI0 = 1 / math.sqrt(2 * math.pi)


def scaled(f, factor=1.03):
    """A faked answer: the right function, off by a few per cent."""

    def g(*args):
        return factor * np.asarray(f(*args), dtype=float)

    return g


# --- prologue-ex1: ridge prediction for one prompt ---------------------------------------------------


def ridge_dual(xs, ys, x_query, lam):  # the kernel (dual) form: x_qᵀ Xᵀ (X Xᵀ + λI)⁻¹ y
    n = xs.shape[0]
    return float(x_query @ xs.T @ np.linalg.solve(xs @ xs.T + lam * np.eye(n), ys))


def ridge_augmented(xs, ys, x_query, lam):  # least squares on [X; √λ I], [y; 0]
    d = xs.shape[1]
    a = np.vstack([xs, math.sqrt(lam) * np.eye(d)])
    b = np.concatenate([ys, np.zeros(d)])
    return float(x_query @ np.linalg.lstsq(a, b, rcond=None)[0])


@pytest.mark.parametrize("answer", [ridge_dual, ridge_augmented])
def test_prologue_ex1_accepts_correct_forms(answer):
    assert checks.check_prologue_ex1(answer)


@pytest.mark.parametrize(
    "answer",
    [
        lambda xs, ys, xq, lam: float(xq @ np.linalg.pinv(xs) @ ys),  # no penalty
        lambda xs, ys, xq, lam: ridge_dual(xs, ys, xq, lam**2),  # λ² instead of λ
        lambda xs, ys, xq, lam: ridge_dual(xs, ys, xq, 2 * lam),  # 2λ from the gradient
        lambda xs, ys, xq, lam: np.array([ridge_dual(xs, ys, xq, lam)]),  # an array, not a float
        scaled(ridge_dual),
        None,
    ],
    ids=["ols", "lam2", "2lam", "array", "fake1.03", "none"],
)
def test_prologue_ex1_rejects_wrong_answers(answer):
    with pytest.raises(CheckFailed):
        checks.check_prologue_ex1(answer)


# --- prologue-ex2: best step for Λ = I ----------------------------------------------------------------


def best_eta_from_moments(dim, n, s2):  # η* = d / E‖g‖²
    return dim / (dim * (1 + 1 / n) + dim * (dim + s2) / n)


def test_prologue_ex2_accepts_a_correct_form():
    assert checks.check_prologue_ex2(best_eta_from_moments)


@pytest.mark.parametrize(
    "answer",
    [
        lambda d, n, s2: n / (n + d + s2),  # lost the +1 of the fourth moment
        lambda d, n, s2: n / (n + d + 1),  # lost the noise
        lambda d, n, s2: 1.0,  # the population step
        scaled(best_eta_from_moments),
    ],
    ids=["no+1", "no-noise", "one", "fake1.03"],
)
def test_prologue_ex2_rejects_wrong_answers(answer):
    with pytest.raises(CheckFailed):
        checks.check_prologue_ex2(answer)


# --- hermite-ex1: ReLU coefficients --------------------------------------------------------------------


def relu_from_hermite_at_zero(k):  # μ_k = φ(0) He_{k−2}(0) for k ≥ 2, evaluated by the recurrence
    if k == 0:
        return PHI0
    if k == 1:
        return 0.5
    return PHI0 * float(hermite_he(k - 2, 0.0))


def relu_by_quadrature(k):  # the package's kink-aware quadrature: accurate to ~1e-15
    return float(hermite_coefficients(LINKS["relu"], k)[k])


@pytest.mark.parametrize("answer", [relu_from_hermite_at_zero, relu_by_quadrature])
def test_hermite_ex1_accepts_correct_forms(answer):
    assert checks.check_hermite_ex1(answer)


def relu_no_sign(k):
    return abs(relu_from_hermite_at_zero(k))


def relu_wrong_mu1(k):
    return PHI0 if k == 1 else relu_from_hermite_at_zero(k)


def relu_shifted(k):  # He_{k−1}(0) instead of He_{k−2}(0): odd k non-zero
    return relu_from_hermite_at_zero(k) if k < 2 else PHI0 * float(hermite_he(k - 1, 0.0))


@pytest.mark.parametrize(
    "answer",
    [relu_no_sign, relu_wrong_mu1, relu_shifted, scaled(relu_from_hermite_at_zero)],
    ids=["no-sign", "mu1", "shifted", "fake1.03"],
)
def test_hermite_ex1_rejects_wrong_answers(answer):
    with pytest.raises(CheckFailed):
        checks.check_hermite_ex1(answer)


# --- hermite-ex3: effective noise of erf(a z) ----------------------------------------------------------


def erf_noise_from_series(a, rho):  # E f² − μ_1² summed from the odd closed-form coefficients
    s = 2 * a * a / (1 + 2 * a * a)
    mu1_sq = 2 / math.pi * s
    # arcsin s = Σ_m c_m s^(2m+1)/(2m+1), c_m = (2m−1)!!/(2m)!!, built by c_m = c_(m−1)(2m−1)/(2m)
    total, c = 0.0, 1.0
    for m in range(4000):
        if m:
            c *= (2 * m - 1) / (2 * m)
        total += c * s ** (2 * m + 1) / (2 * m + 1)
    ef2 = 2 / math.pi * total
    return rho + ef2 - mu1_sq


def test_hermite_ex3_accepts_a_correct_form():
    assert checks.check_hermite_ex3(erf_noise_from_series)


def erf_noise(a, rho):
    s = 2 * a * a / (1 + 2 * a * a)
    return rho + 2 / math.pi * (math.asin(s) - s)


@pytest.mark.parametrize(
    "answer",
    [
        lambda a, rho: erf_noise(a, rho) - rho,  # forgot the label noise
        lambda a, rho: rho + 2 / math.pi * (math.asin(a * a / (1 + a * a)) - a * a / (1 + a * a)),
        lambda a, rho: rho
        + 2 / math.pi * math.asin(2 * a * a / (1 + 2 * a * a)),  # E f², not minus μ_1²
        scaled(erf_noise),
    ],
    ids=["no-rho", "wrong-s", "no-mu1", "fake1.03"],
)
def test_hermite_ex3_rejects_wrong_answers(answer):
    with pytest.raises(CheckFailed):
        checks.check_hermite_ex3(answer)


# --- lsa-ex1: best scalar step for any Λ ----------------------------------------------------------------


def best_eta_eigen(cov, n, s2):  # in the eigenbasis of Λ
    lam = np.linalg.eigvalsh(cov)
    return float(
        np.sum(lam**2) / ((1 + 1 / n) * np.sum(lam**3) + (lam.sum() + s2) / n * np.sum(lam**2))
    )


def test_lsa_ex1_accepts_a_correct_form():
    assert checks.check_lsa_ex1(best_eta_eigen)


@pytest.mark.parametrize(
    "answer",
    [
        lambda cov, n, s2: n / (n + cov.shape[0] + 1 + s2),  # the isotropic formula
        lambda cov, n, s2: float(np.trace(cov @ cov) / np.trace(cov @ cov @ cov)),  # N → ∞
        lambda cov, n, s2: float(np.trace(cov) / np.trace(cov @ cov)),  # wrong powers
        scaled(best_eta_eigen),
    ],
    ids=["isotropic", "no-1/N", "powers", "fake1.03"],
)
def test_lsa_ex1_rejects_wrong_answers(answer):
    with pytest.raises(CheckFailed):
        checks.check_lsa_ex1(answer)


# --- lsa-ex2: one GD step from w0 -----------------------------------------------------------------------


def weights_rescaled(
    w0, eta
):  # (c w_kq, w_pv / c) is the same layer; unread entries may be anything
    d = len(w0)
    w_kq = np.zeros((d + 1, d + 1))
    w_kq[:d, :d] = -2.0 * np.eye(d)
    w_pv = np.full((d + 1, d + 1), 3.0)  # the first d rows of w_pv are never read
    w_pv[d, :d] = -eta * np.asarray(w0) / 2.0
    w_pv[d, d] = eta / 2.0
    return w_kq, w_pv


def test_lsa_ex2_accepts_a_correct_form():
    assert checks.check_lsa_ex2(weights_rescaled)


def weights_plain(w0, eta):  # ignores w0
    return gd_lsa_weights(len(w0), eta)


def weights_wrong_sign(w0, eta):
    w_kq, w_pv = gd_lsa_weights(len(w0), eta)
    w_pv[len(w0), : len(w0)] = -eta * np.asarray(w0)
    return w_kq, w_pv


def weights_fake(w0, eta):
    w_kq, w_pv = gd_lsa_weights(len(w0), 1.03 * eta)
    w_pv[len(w0), : len(w0)] = 1.03 * eta * np.asarray(w0)
    return w_kq, w_pv


@pytest.mark.parametrize(
    "answer",
    [weights_plain, weights_wrong_sign, weights_fake, lambda w0, eta: np.eye(len(w0) + 1)],
    ids=["no-w0", "sign", "fake1.03", "not-a-tuple"],
)
def test_lsa_ex2_rejects_wrong_answers(answer):
    with pytest.raises(CheckFailed):
        checks.check_lsa_ex2(answer)


# --- lsa-ex4: predict Γ*, then hand in a trained layer's predictions --------------------------------------

COV4, N4, S4 = np.diag([3.0, 1.0, 0.3]), 10, 0.2
GAMMA4 = theory.optimal_preconditioner(COV4, N4, S4)


def gamma_written_differently():
    lam = np.diag(COV4)
    return np.diag(1 / ((1 + 1 / N4) * lam + (lam.sum() + S4) / N4))


def layer_predictions(gamma, scale=1.0):
    """Predictions of an LSA layer whose preconditioner is ``gamma`` (weights rescaled by ``scale``)."""
    w_kq, w_pv = gd_lsa_weights(3, 1.0, gamma)
    return lambda xs, ys, xq: lsa_predict(xs, ys, xq, scale * w_kq, w_pv / scale)


def test_lsa_ex4_accepts_a_near_optimal_layer():
    """What training produces: Γ within a few per cent of Γ*, weights in a rescaled, sign-flipped form."""
    rng = np.random.default_rng(0)
    gamma = GAMMA4 * (1 + 0.03 * rng.standard_normal((3, 3)))
    assert checks.check_lsa_ex4(
        gamma_written_differently(), layer_predictions(gamma, -2.0), COV4, N4, S4
    )


@pytest.mark.slow
def test_lsa_ex4_accepts_a_really_trained_layer():
    def sample(r, b):
        from icl_book.tasks import sample_linear_prompts

        return sample_linear_prompts(b, N4, 3, rng=r, noise_var=S4, input_cov=COV4)

    fits = []
    for s in range(3):  # as in the solution: three random starts (seed 0 alone ends on the plateau)
        layer = LinearSelfAttention(3, generator=torch.Generator().manual_seed(s))
        fits.append(
            train_in_context(
                layer,
                sample,
                seed=s,
                steps=300,
                lr=0.05,
                batch_size=512,
                schedule="cosine",
                weight_decay=1e-3,
                progress=False,
                num_threads=1,
            )
        )
    fit = min(fits, key=lambda r: r.final_loss)
    w_kq, w_pv = fit.model.weights()
    predict = lambda xs, ys, xq: lsa_predict(xs, ys, xq, w_kq, w_pv)  # noqa: E731
    assert checks.check_lsa_ex4(GAMMA4.copy(), predict, COV4, N4, S4)


def untrained_layer():
    w_kq, w_pv = LinearSelfAttention(3, generator=torch.Generator().manual_seed(1)).weights()
    return lambda xs, ys, xq: lsa_predict(xs, ys, xq, w_kq, w_pv)


def bayes(xs, ys, xq):
    return estimators.bayes_optimal_predict(xs, ys, xq, S4)


@pytest.mark.parametrize(
    ("gamma_predicted", "predict"),
    [
        (np.linalg.inv(COV4), layer_predictions(GAMMA4)),  # Newton's Λ⁻¹ instead of Γ*
        (1.03 * GAMMA4, layer_predictions(GAMMA4 * 1.01)),  # faked Γ*
        (GAMMA4, layer_predictions(GAMMA4)),  # no training: the formula's own predictions
        (GAMMA4, layer_predictions(GAMMA4, scale=-3.0)),  # the same, in rescaled weights
        (GAMMA4, layer_predictions(0.9 * GAMMA4)),  # 2.4 % above R*
        (GAMMA4, untrained_layer()),  # random initial weights
        (GAMMA4, bayes),  # not an LSA at all: below R*
        (GAMMA4, lambda xs, ys, xq: np.zeros((len(xq), 1))),  # wrong shape
        (GAMMA4, GAMMA4),  # a matrix where a function is expected (the old interface)
        (GAMMA4, None),  # the student stub
    ],
    ids=[
        "newton",
        "fake1.03",
        "copy",
        "copy-rescaled",
        "0.9",
        "untrained",
        "bayes",
        "shape",
        "matrix",
        "none",
    ],
)
def test_lsa_ex4_rejects_wrong_answers(gamma_predicted, predict):
    with pytest.raises(CheckFailed):
        checks.check_lsa_ex4(gamma_predicted, predict, COV4, N4, S4)


def test_importing_the_checks_does_not_import_torch():
    """Every chapter imports ``icl_book.checks``; chapters 0, 1 and 4 never need torch, whose import
    cost ~2 s at each kernel start (each graded submission, each student's Run all). The two checks
    that use the attention layers import them when called (their tests above and in
    test_checks_ch56.py run them)."""
    import subprocess
    import sys

    code = "import sys, icl_book.checks; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr  # True before the lazy imports
