"""The exercise checks of chapters 5 (GLU) and 6 (depth) pass and fail as they should.

Every check is run against a correct answer written differently from the chapter's solution, the typical
wrong answers a student might write, and a faked answer (one that hard-codes what the chapter prints, or
copies a baseline). A check that passes a wrong or faked answer is a bug of the check.
"""

from __future__ import annotations

from itertools import combinations_with_replacement
from math import comb, factorial

import numpy as np
import pytest

from icl_book.attention.glu import glu_lsa_block_weights, glu_token_layout
from icl_book.checks import (
    CheckFailed,
    check_depth_ex2,
    check_depth_ex3,
    check_glu_ex1,
    check_glu_ex2,
    check_glu_ex4,
)
from icl_book.theory import hermite_one_step_excess_risk


def _stub(*args, **kwargs):
    raise NotImplementedError()


# ------------------------------------------------------------------------------------------------
# glu-ex1: min_width(d, p) = C(d+p, p) + 1
# ------------------------------------------------------------------------------------------------


def _width_by_enumeration(d, p):
    """Correct, written differently: list the monomials of degree 2..p and add the fixed slots."""
    scratch = sum(1 for k in range(2, p + 1) for _ in combinations_with_replacement(range(d), k))
    return d + 1 + 1 + scratch


def test_glu_ex1_accepts_a_correct_answer_written_differently(capsys):
    assert check_glu_ex1(_width_by_enumeration)
    assert capsys.readouterr().out == "glu-ex1: correct\n"


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(lambda d, p: comb(d + p, p), id="forgets the label slot"),
        pytest.param(
            lambda d, p: comb(d + p, p) + 2, id="a scratch slot for the constant monomial too"
        ),
        pytest.param(lambda d, p: d + 2 + comb(d + p - 1, p), id="only degree-p monomials"),
        pytest.param(lambda d, p: d + 2 + d**p, id="ordered products d^p"),
        pytest.param(lambda d, p: comb(d + p, p) + 1 + d, id="counts the linear monomials twice"),
        pytest.param(lambda d, p: float(comb(d + p, p) + 1), id="returns a float"),
        pytest.param(lambda d, p: 287, id="faked: the printed d = 10, p = 3 value"),
        pytest.param(_stub, id="stub"),
    ],
)
def test_glu_ex1_rejects_wrong_answers(wrong):
    with pytest.raises(CheckFailed):
        check_glu_ex1(wrong)


# ------------------------------------------------------------------------------------------------
# glu-ex2: weights of one GD step with the kernel (1 + x·x')²
# ------------------------------------------------------------------------------------------------


def _inhomogeneous_from_scratch(dim, eta):
    """Correct, written differently: build w_kq as a fresh diagonal from the token layout."""
    w = glu_lsa_block_weights(dim, eta)
    lay = glu_token_layout(dim, dim * (dim + 1) // 2)
    diag = np.zeros(lay.embed_dim)
    diag[lay.x] = 2.0
    diag[lay.const] = 1.0
    diag[lay.scratch] = 1.0
    return w._replace(w_kq=np.diag(diag))


def _with_diag(x_weight, const_weight, scratch_weight=1.0, eta_sign=1.0):
    def answer(dim, eta):
        w = glu_lsa_block_weights(dim, eta_sign * eta)
        lay = glu_token_layout(dim, dim * (dim + 1) // 2)
        diag = np.zeros(lay.embed_dim)
        diag[lay.x] = x_weight
        diag[lay.const] = const_weight
        diag[lay.scratch] = scratch_weight
        return w._replace(w_kq=np.diag(diag))

    return answer


def test_glu_ex2_accepts_a_correct_answer_written_differently(capsys):
    assert check_glu_ex2(_inhomogeneous_from_scratch)
    assert capsys.readouterr().out == "glu-ex2: correct\n"


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(
            lambda dim, eta: glu_lsa_block_weights(dim, eta), id="unchanged: x.x' + (x.x')^2"
        ),
        pytest.param(_with_diag(1.0, 1.0), id="forgets the factor 2 on x.x'"),
        pytest.param(_with_diag(2.0, 0.0), id="forgets the constant"),
        pytest.param(_with_diag(np.sqrt(2.0), 1.0), id="sqrt 2 on the x slots"),
        pytest.param(
            _with_diag(2.0, 1.0, scratch_weight=2.0), id="also doubles the quadratic part"
        ),
        pytest.param(_with_diag(2.0, 1.0, eta_sign=-1.0), id="flips the sign of eta"),
        pytest.param(lambda dim, eta: np.eye(dim + 2), id="not a GLULSABlockWeights"),
        pytest.param(_stub, id="stub"),
    ],
)
def test_glu_ex2_rejects_wrong_answers(wrong):
    with pytest.raises(CheckFailed):
        check_glu_ex2(wrong)


# ------------------------------------------------------------------------------------------------
# glu-ex4: C = σ² (d+1)(d+2)/2 + d/2 + (d+4)(d+6)/2
# ------------------------------------------------------------------------------------------------


def _constant_from_moments(d, noise_var):
    """Correct, written differently: E[f² ‖φ‖²] − ‖θ‖² from the χ² moments, plus the noise part."""
    e_r2 = d * (d + 2)  # E ‖x‖⁴
    e_r4 = d * (d + 2) * (d + 4) * (d + 6)  # E ‖x‖⁸
    s2 = 1 / (d * (d + 2))  # E_A (xᵀAx)² = s² ‖x‖⁴
    signal = s2 * ((1 + d / 2) * e_r2 + e_r4 / 2) - 1
    n_features = factorial(d + 2) // (factorial(d) * 2)
    return noise_var * n_features + signal


def test_glu_ex4_accepts_a_correct_answer_written_differently(capsys):
    assert check_glu_ex4(_constant_from_moments)
    assert capsys.readouterr().out == "glu-ex4: correct\n"


def _p(d):
    return (d + 1) * (d + 2) / 2


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(lambda d, s2: s2 * _p(d) + _p(d) - 1, id="independence guess p - 1"),
        pytest.param(lambda d, s2: d / 2 + (d + 4) * (d + 6) / 2, id="forgets the noise"),
        pytest.param(lambda d, s2: s2 + d / 2 + (d + 4) * (d + 6) / 2, id="noise without p"),
        pytest.param(lambda d, s2: s2 * _p(d) + (d + 4) * (d + 6) / 2, id="forgets d/2"),
        pytest.param(
            lambda d, s2: s2 * _p(d) + d / 2 + (d + 4) * (d + 6) / 2 + 1, id="forgets -|theta|^2"
        ),
        pytest.param(lambda d, s2: 28.0, id="faked: the d = 2, sigma^2 = 0.5 value"),
        pytest.param(
            lambda d, s2: hermite_one_step_excess_risk(1, d, s2) * (1.01 if d > 1 else 1.0),
            id="faked: 1 % off",
        ),
        pytest.param(_stub, id="stub"),
    ],
)
def test_glu_ex4_rejects_wrong_answers(wrong):
    with pytest.raises(CheckFailed):
        check_glu_ex4(wrong)


# ------------------------------------------------------------------------------------------------
# depth-ex2: cyclic block-coordinate GD in residual form
# ------------------------------------------------------------------------------------------------


def _bcd_in_theta_form(xs, ys, x_query, feature_blocks, eta, n_cycles):
    """Correct, written differently: keep θ per block (not the residuals), prompt by prompt."""
    n = xs.shape[1]
    preds = np.zeros(xs.shape[0])
    for i in range(xs.shape[0]):
        phis = [phi_b(xs[i]) for phi_b in feature_blocks]
        thetas = [np.zeros(p.shape[-1]) for p in phis]
        for _ in range(n_cycles):
            for b, phi in enumerate(phis):
                fitted = sum(p @ t for p, t in zip(phis, thetas, strict=True))
                thetas[b] = thetas[b] + eta / n * phi.T @ (ys[i] - fitted)
        preds[i] = sum(
            phi_b(x_query[i]) @ t for phi_b, t in zip(feature_blocks, thetas, strict=True)
        )
    return preds


def _bcd_variant(*, jacobi=False, scale_by_n=True, update_residuals=True, cycles_offset=0):
    """The typical mistakes of the residual-form loop, one switch each."""

    def answer(xs, ys, x_query, feature_blocks, eta, n_cycles):
        n = xs.shape[1]
        r = np.array(ys, dtype=float)
        pred = np.zeros(xs.shape[0])
        factor = eta / n if scale_by_n else eta
        for _ in range(n_cycles + cycles_offset):
            r_start = r.copy()
            for phi_b in feature_blocks:
                phi, q = phi_b(xs), phi_b(x_query)
                g = factor * np.einsum("bn,bnm->bm", r_start if jacobi else r, phi)
                if update_residuals:
                    r = r - np.einsum("bnm,bm->bn", phi, g)
                pred = pred + np.einsum("bm,bm->b", q, g)
        return pred

    return answer


def _one_step_on_all_features(xs, ys, x_query, feature_blocks, eta, n_cycles):
    """Faked: one kernel GD step on all features, whatever n_cycles."""
    k = sum(np.einsum("bnm,bm->bn", phi_b(xs), phi_b(x_query)) for phi_b in feature_blocks)
    return eta / xs.shape[1] * np.einsum("bn,bn->b", ys, k)


def test_depth_ex2_accepts_a_correct_answer_written_differently(capsys):
    assert check_depth_ex2(_bcd_in_theta_form)
    assert capsys.readouterr().out == "depth-ex2: correct\n"


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(
            _bcd_variant(jacobi=True), id="Jacobi: every block from the cycle's residuals"
        ),
        pytest.param(_bcd_variant(scale_by_n=False), id="forgets 1/N"),
        pytest.param(_bcd_variant(update_residuals=False), id="never updates the residuals"),
        pytest.param(_bcd_variant(cycles_offset=-1), id="one cycle too few"),
        pytest.param(_bcd_variant(cycles_offset=1), id="one cycle too many"),
        pytest.param(_one_step_on_all_features, id="faked: one step on all features"),
        pytest.param(lambda xs, ys, xq, fb, eta, c: np.zeros(xs.shape[0]), id="faked: zeros"),
        pytest.param(_stub, id="stub"),
    ],
)
def test_depth_ex2_rejects_wrong_answers(wrong):
    with pytest.raises(CheckFailed):
        check_depth_ex2(wrong)


# ------------------------------------------------------------------------------------------------
# depth-ex3: min_layers = ⌈(C(d+p, p) − 1) / (D − d − 2)⌉
# ------------------------------------------------------------------------------------------------


def _min_layers_by_filling(dim, degree, width):
    """Correct, written differently: fill slots layer by layer until every feature is placed."""
    left, layers = comb(dim + degree, degree) - 1, 0
    while left > 0:
        left -= width - dim - 2
        layers += 1
    return layers


def test_depth_ex3_accepts_a_correct_answer_written_differently(capsys):
    assert check_depth_ex3(_min_layers_by_filling)
    assert capsys.readouterr().out == "depth-ex3: correct\n"


def _plan_length(dim, degree, width):
    from icl_book.attention import bcd_schedule

    return len(bcd_schedule(dim, degree, width - dim - 2))


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(
            lambda d, p, w: (comb(d + p, p) - 1) // (w - d - 2), id="floor instead of ceiling"
        ),
        pytest.param(
            lambda d, p, w: -(-comb(d + p, p) // (w - d - 2)), id="counts the constant feature"
        ),
        pytest.param(lambda d, p, w: -(-(comb(d + p, p) - 1) // (w - d - 1)), id="w - d - 1 slots"),
        pytest.param(
            lambda d, p, w: -(-(comb(d + p, p) - 1 - d) // (w - d - 2)),
            id="skips the linear features",
        ),
        pytest.param(
            lambda d, p, w: (comb(d + p, p) - 1) / (w - d - 2), id="returns a float ratio"
        ),
        pytest.param(_plan_length, id="faked: the construction's plan length"),
        pytest.param(lambda d, p, w: 5, id="faked: the chapter's printed value"),
        pytest.param(_stub, id="stub"),
    ],
)
def test_depth_ex3_rejects_wrong_answers(wrong):
    with pytest.raises(CheckFailed):
        check_depth_ex3(wrong)
