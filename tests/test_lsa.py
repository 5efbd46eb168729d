"""Tests of :mod:`icl_book.attention.lsa`: the LSA layer, the GD construction and training (chapter 2)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icl_book.attention import (
    LinearSelfAttention,
    gd_lsa_weights,
    lsa_forward,
    lsa_predict,
    token_matrix,
)
from icl_book.checks import CheckFailed, check_lsa_ex1, check_lsa_ex2, check_lsa_ex4
from icl_book.estimators import one_step_gd_predict
from icl_book.tasks import sample_linear_prompts
from icl_book.theory import optimal_preconditioned_risk, optimal_preconditioner
from icl_book.train import evaluate_in_context, train_in_context


def _spd(rng, d):
    a = rng.standard_normal((d, d))
    return a @ a.T / d + 0.1 * np.eye(d)


@settings(max_examples=60, deadline=None)
@given(
    d=st.integers(1, 8),
    n=st.integers(1, 30),
    b=st.integers(1, 5),
    eta=st.floats(-5, 5, allow_nan=False),
    seed=st.integers(0, 2**32 - 1),
    precondition=st.sampled_from(["none", "spd", "general"]),
)
def test_construction_is_one_gd_step(d, n, b, eta, seed, precondition):
    rng = np.random.default_rng(seed)
    p = sample_linear_prompts(b, n, d, rng=rng, noise_var=0.5)
    gamma = {"none": None, "spd": _spd(rng, d), "general": rng.standard_normal((d, d))}[
        precondition
    ]
    pred = lsa_predict(p.xs, p.ys, p.x_query, *gd_lsa_weights(d, eta, gamma))
    direct = one_step_gd_predict(p.xs, p.ys, p.x_query, eta, gamma)
    assert pred.shape == (b,)
    # Both sides are O(10) sums of O(d·N) products: 1e-12 is ~1e3 ulps of headroom, far below any real error.
    assert np.max(np.abs(pred - direct)) <= 1e-12
    # Independent check against the formula x_qᵀ Γ (η/N) Σ y_i x_i written out here.
    g = np.eye(d) if gamma is None else gamma
    formula = eta / n * np.einsum("bd,de,bn,bne->b", p.x_query, g, p.ys, p.xs)
    assert np.max(np.abs(pred - formula)) <= 1e-12


def test_gd_weights_layout_and_sign():
    gamma = np.array([[2.0, 0.5], [0.5, 1.0]])
    w_kq, w_pv = gd_lsa_weights(2, 0.3, gamma)
    assert w_kq.shape == w_pv.shape == (3, 3)
    np.testing.assert_array_equal(w_kq[:2, :2], gamma)
    # A non-symmetric Γ goes in transposed (the score is x_iᵀ W x_q), and is read back untransposed.
    skew = np.array([[1.0, 2.0], [0.0, 1.0]])
    np.testing.assert_array_equal(gd_lsa_weights(2, 1.0, skew)[0][:2, :2], skew.T)
    model = LinearSelfAttention.from_weights(*gd_lsa_weights(2, 1.0, skew))
    np.testing.assert_array_equal(model.preconditioner(), skew)
    assert np.count_nonzero(w_kq[2]) == 0 and np.count_nonzero(w_kq[:, 2]) == 0
    expected_pv = np.zeros((3, 3))
    expected_pv[2, 2] = -0.3  # von Oswald et al.'s sign: the prediction is minus the read-out entry
    np.testing.assert_array_equal(w_pv, expected_pv)
    np.testing.assert_array_equal(gd_lsa_weights(2, 0.3)[0][:2, :2], np.eye(2))


def test_lsa_forward_is_the_literal_formula_and_masks_the_query():
    rng = np.random.default_rng(0)
    d, n = 3, 6
    p = sample_linear_prompts(2, n, d, rng=rng)
    Z = token_matrix(p.xs, p.ys, p.x_query)
    assert Z.shape == (2, d + 1, n + 1)
    np.testing.assert_array_equal(Z[0, :d, -1], p.x_query[0])
    assert Z[0, d, -1] == 0.0
    w_kq, w_pv = rng.standard_normal((2, d + 1, d + 1))
    out = lsa_forward(Z, w_kq, w_pv)
    mask = np.diag(np.r_[np.ones(n), 0.0])
    for k in range(2):
        loop = Z[k] + w_pv @ Z[k] @ mask @ Z[k].T @ w_kq @ Z[k] / n
        np.testing.assert_allclose(
            out[k], loop, rtol=1e-13, atol=1e-13
        )  # same products, other order
    np.testing.assert_array_equal(lsa_forward(Z[0], w_kq, w_pv), out[0])
    # The mask keeps the query out of keys and values: moving x_q changes only the query column.
    Z2 = Z.copy()
    Z2[:, :d, -1] += 10.0
    out2 = lsa_forward(Z2, w_kq, w_pv)
    np.testing.assert_array_equal(out2[:, :, :n], out[:, :, :n])
    assert not np.allclose(out2[:, :, -1], out[:, :, -1])
    np.testing.assert_allclose(
        lsa_predict(p.xs, p.ys, p.x_query, w_kq, w_pv), -out[:, d, -1], atol=1e-13
    )


def test_output_is_linear_in_the_query_for_any_weights():
    rng = np.random.default_rng(1)
    d, n = 4, 9
    p = sample_linear_prompts(5, n, d, rng=rng)
    W = rng.standard_normal((2, d + 1, d + 1))
    q1, q2 = rng.standard_normal((2, 5, d))
    f = lambda q: lsa_predict(p.xs, p.ys, q, *W)  # noqa: E731
    np.testing.assert_allclose(
        f(2.0 * q1 - 3.0 * q2), 2.0 * f(q1) - 3.0 * f(q2), rtol=1e-12, atol=1e-12
    )


def test_torch_module_matches_numpy_for_any_weights():
    rng = np.random.default_rng(2)
    d, n = 5, 20
    p = sample_linear_prompts(16, n, d, rng=rng, noise_var=0.1)
    w_kq, w_pv = rng.standard_normal((2, d + 1, d + 1))
    model = LinearSelfAttention.from_weights(w_kq, w_pv)
    got = model(*(torch.as_tensor(a) for a in (p.xs, p.ys, p.x_query))).detach().numpy()
    # Same number through a different association of the products: agreement to ~1e-13 relative.
    np.testing.assert_allclose(
        got, lsa_predict(p.xs, p.ys, p.x_query, w_kq, w_pv), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_array_equal(model.weights()[0], w_kq)
    np.testing.assert_array_equal(model.weights()[1], w_pv)


def test_module_preconditioner_reads_the_construction():
    gamma = _spd(np.random.default_rng(3), 3)
    model = LinearSelfAttention.from_weights(*gd_lsa_weights(3, 0.4, gamma))
    np.testing.assert_allclose(model.preconditioner(), 0.4 * gamma, rtol=1e-15, atol=0)
    # The rescaling symmetry (c w_kq, w_pv / c) leaves the preconditioner unchanged.
    w_kq, w_pv = gd_lsa_weights(3, 0.4, gamma)
    model2 = LinearSelfAttention.from_weights(5.0 * w_kq, w_pv / 5.0)
    np.testing.assert_allclose(model2.preconditioner(), 0.4 * gamma, rtol=1e-14, atol=1e-15)


def test_preconditioner_is_the_label_odd_part_for_any_weights():
    rng = np.random.default_rng(5)
    d, n = 3, 7
    p = sample_linear_prompts(10, n, d, rng=rng)
    W = rng.standard_normal((2, d + 1, d + 1))
    model = LinearSelfAttention.from_weights(*W)
    odd = (lsa_predict(p.xs, p.ys, p.x_query, *W) - lsa_predict(p.xs, -p.ys, p.x_query, *W)) / 2
    expected = one_step_gd_predict(p.xs, p.ys, p.x_query, 1.0, model.preconditioner())
    np.testing.assert_allclose(
        odd, expected, rtol=1e-12, atol=1e-12
    )  # exact algebra, rounding only


def test_module_init_is_seeded():
    a = LinearSelfAttention(4, generator=torch.Generator().manual_seed(7))
    b = LinearSelfAttention(4, generator=torch.Generator().manual_seed(7))
    c = LinearSelfAttention(4, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a.w_kq, b.w_kq) and torch.equal(a.w_pv, b.w_pv)
    assert not torch.equal(a.w_kq, c.w_kq)
    assert a.w_kq.shape == (5, 5) and a.w_kq.dtype == torch.float64


def test_bad_inputs_name_the_argument():
    rng = np.random.default_rng(0)
    p = sample_linear_prompts(3, 5, 2, rng=rng)
    W = gd_lsa_weights(2, 1.0)
    with pytest.raises(ValueError, match=r"ys must have shape .*\(3, 5\).*\(3, 4\)"):
        lsa_predict(p.xs, p.ys[:, :4], p.x_query, *W)
    with pytest.raises(ValueError, match=r"x_query must have shape .*\(3, 2\).*\(2, 2\)"):
        lsa_predict(p.xs, p.ys, p.x_query[:2], *W)
    with pytest.raises(ValueError, match=r"w_kq must have shape \(3, 3\), got \(4, 4\)"):
        lsa_predict(p.xs, p.ys, p.x_query, np.eye(4), W[1])
    with pytest.raises(ValueError, match=r"w_pv must have shape \(3, 3\), got \(2, 2\)"):
        lsa_predict(p.xs, p.ys, p.x_query, W[0], np.eye(2))
    with pytest.raises(ValueError, match="eta must be finite"):
        gd_lsa_weights(2, np.inf)
    with pytest.raises(ValueError, match="eta must be finite"):
        gd_lsa_weights(2, np.nan)
    with pytest.raises(ValueError, match="dim must be an integer >= 1"):
        gd_lsa_weights(0, 1.0)
    with pytest.raises(ValueError, match=r"preconditioner must have shape \(2, 2\), got \(3, 3\)"):
        gd_lsa_weights(2, 1.0, np.eye(3))
    with pytest.raises(ValueError, match="preconditioner must be finite"):
        gd_lsa_weights(2, 1.0, np.array([[1.0, np.nan], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="dim must be an integer >= 1"):
        LinearSelfAttention(0)
    with pytest.raises(ValueError, match=r"xs must have shape \(B, N, 2\)"):
        LinearSelfAttention(2, init_scale=0.0)(
            torch.zeros(1, 3, 4), torch.zeros(1, 3), torch.zeros(1, 4)
        )


def _sampler(input_cov, noise_var, n=20):
    def sample(rng, batch_size):
        return sample_linear_prompts(
            batch_size, n, input_cov.shape[0], rng=rng, noise_var=noise_var, input_cov=input_cov
        )

    return sample


def test_training_reruns_are_identical_and_find_the_gd_structure():
    # Small budget (d = 3, N = 10): enough to check reproducibility and the direction of learning.
    cov = np.eye(3)
    results = []
    for _ in range(2):
        model = LinearSelfAttention(3, generator=torch.Generator().manual_seed(0))
        results.append(
            train_in_context(
                model,
                _sampler(cov, 0.1, 10),
                steps=200,
                lr=0.05,
                seed=1,
                batch_size=256,
                schedule="cosine",
                weight_decay=1e-3,
                progress=False,
                num_threads=1,
            )
        )
    np.testing.assert_array_equal(results[0].losses, results[1].losses)
    for a, b in zip(results[0].model.weights(), results[1].model.weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    gamma_star = optimal_preconditioner(cov, 10, 0.1)
    learned = results[0].model.preconditioner()
    # After 200 short steps the preconditioner is already close (measured 2.3 %; the 10 % bound leaves
    # room for the short run's batch noise, while a run that had not learned would be ~100 % off).
    assert np.linalg.norm(learned - gamma_star) / np.linalg.norm(gamma_star) < 0.10


@pytest.mark.slow
@pytest.mark.parametrize("anisotropic", [False, True])
def test_trained_lsa_reaches_optimal_preconditioned_gd(anisotropic):
    """Done-when target: d = 5, N = 20, test risk within 2 % of R*, Γ within 10 % (Frobenius).

    Some random starts end in a spurious rank-one minimum with anisotropic inputs (chapter 2 shows one,
    seed 3); seed 0 is a start that converges in both settings, as the chapter also shows.
    """
    d, n, noise_var = 5, 20, 0.1
    cov = np.diag([4.0, 2.0, 1.0, 0.5, 0.25]) if anisotropic else np.eye(d)
    model = LinearSelfAttention(d, generator=torch.Generator().manual_seed(0))
    train_in_context(
        model,
        _sampler(cov, noise_var),
        steps=800,
        lr=0.02,
        seed=1,
        batch_size=1024,
        schedule="cosine",
        weight_decay=1e-3,
        progress=False,
        num_threads=1,
    )
    test = sample_linear_prompts(
        100_000, n, d, rng=np.random.default_rng(123), noise_var=noise_var, input_cov=cov
    )
    risk = evaluate_in_context(model, test)
    r_star = optimal_preconditioned_risk(cov, n, noise_var)
    # 100k test prompts: Monte Carlo standard error of the risk ≈ 0.5 % of R*, well inside the 2 % target.
    assert abs(risk / r_star - 1) < 0.02
    gamma_star = optimal_preconditioner(cov, n, noise_var)
    assert np.linalg.norm(model.preconditioner() - gamma_star) / np.linalg.norm(gamma_star) < 0.10


# --- autograder checks of the chapter's exercises ---


def _best_eta_solution(input_cov, context_len, noise_var):
    cov = np.asarray(input_cov)
    S = (1 + 1 / context_len) * cov @ cov + (np.trace(cov) + noise_var) / context_len * cov
    return float(np.trace(cov @ cov) / np.trace(S @ cov))


def _stub(*args):
    raise NotImplementedError()


def test_check_lsa_ex1(capsys):
    assert check_lsa_ex1(_best_eta_solution)
    assert "lsa-ex1: correct" in capsys.readouterr().out
    # The isotropic formula of the prologue is wrong for anisotropic Λ.
    wrong = lambda cov, n, s2: n / (n + cov.shape[0] + 1 + s2)  # noqa: E731
    for bad in (wrong, _stub):
        with pytest.raises(CheckFailed):
            check_lsa_ex1(bad)


def test_check_lsa_ex2():
    def solution(w0, eta):
        w_kq, w_pv = gd_lsa_weights(len(w0), eta)
        w_pv[len(w0), : len(w0)] = eta * np.asarray(w0)
        return w_kq, w_pv

    def sign_error(w0, eta):
        w_kq, w_pv = solution(w0, eta)
        w_pv[len(w0), : len(w0)] *= -1
        return w_kq, w_pv

    assert check_lsa_ex2(solution)
    for bad in (lambda w0, eta: gd_lsa_weights(len(w0), eta), sign_error, _stub):
        with pytest.raises(CheckFailed):
            check_lsa_ex2(bad)


def test_check_lsa_ex4_fails_cleanly_on_the_student_stub():
    # The student notebook leaves both answers at None when the solution is not written.
    with pytest.raises(CheckFailed):
        check_lsa_ex4(None, None, np.diag([3.0, 1.0, 0.3]), 10, 0.2)
