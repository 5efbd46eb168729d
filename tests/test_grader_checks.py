"""The checks under the grader: honest Monte Carlo answers accepted, fixed answer tables
refused where inputs are drawn at grading time, and a failed check showing its hint only."""

from __future__ import annotations

import numpy as np
import pytest

from icl_book import checks
from icl_book.hermite import effective_noise, erf_link
from icl_book.simulate import mc_error, pretrain_reduced_lsa, simulated_errors


def _honest_monte_carlo(stream: int, n_test: int = 10_000):
    """``simulate_icl`` as a student may write it: pretrain Γ with the seed's generator, then estimate
    its e_ICL with the package's own ``mc_error`` on ``n_test`` fresh prompts. ``stream`` makes each
    implementation's random numbers independent of the reference's (and of the other streams')."""

    def simulate_icl(tau, noise_var, seed):
        rng = np.random.default_rng([stream, seed])
        gamma, _ = pretrain_reduced_lsa(40, 1.0, tau, np.inf, noise_var, rng=rng, tol=1e-6)
        return mc_error(gamma, None, 1.0, noise_var, n_test=n_test, rng=rng).mean

    return simulate_icl


@pytest.mark.slow  # 30 streams x 21 simulations with 10^4 test prompts each: ~2 min on one core
def test_asymptotics_ex4_accepts_honest_monte_carlo_at_10_4_prompts_on_30_streams():
    """Before: 14 of 30 honest streams were rejected at 10⁴ test prompts (the check knew only the
    exact error's spread). Each stream is graded as the grader grades (its own drawn seeds)."""
    rejected = []
    for stream in range(30):
        with checks._grading_inputs(1000 + stream) as drew:
            try:
                checks.check_asymptotics_ex4(_honest_monte_carlo(stream))
            except checks.CheckFailed as exc:
                rejected.append((stream, str(exc)))
        assert drew == ["asymptotics-ex4"]
    assert rejected == []


@pytest.mark.slow  # one stream at 10^2 test prompts: ~5 s
def test_asymptotics_ex4_refuses_a_monte_carlo_too_noisy_to_tell():
    with pytest.raises(checks.CheckFailed, match="10⁴ test prompts"):
        checks.check_asymptotics_ex4(_honest_monte_carlo(0, n_test=100))


def _table(pairs: dict):
    """An answer that looks its inputs up in a table of the published cases (and guesses elsewhere)."""

    def answer(*args):
        return pairs.get(tuple(float(a) for a in args), 0.5)

    return answer


def test_a_table_of_hermite_ex3_answers_passes_in_the_notebook_but_not_under_the_grader():
    """Before: the check's 8 inputs were fixed and published: a table of 8 numbers scored 2/2."""
    table = {
        (a, rho): effective_noise(erf_link(a), rho)
        for a in (0.25, 0.7, 1.0, 3.0)
        for rho in (0.0, 0.2)
    }
    assert checks.check_hermite_ex3(_table(table))  # the notebook's published inputs
    with checks._grading_inputs(7) as drew, pytest.raises(checks.CheckFailed):
        checks.check_hermite_ex3(_table(table))
    assert drew == ["hermite-ex3"]
    with checks._grading_inputs(7):  # an honest answer still passes on the drawn inputs
        assert checks.check_hermite_ex3(lambda a, rho: effective_noise(erf_link(a), rho))


def test_a_table_of_prologue_ex2_answers_passes_in_the_notebook_but_not_under_the_grader():
    from icl_book.theory import best_one_step_eta

    published = [(5, 20, 0.25), (1, 1, 0.0), (10, 3, 2.0), (3, 100, 1.0)]
    table = {
        (float(d), float(n), s2): best_one_step_eta(np.eye(d), n, s2) for d, n, s2 in published
    }
    assert checks.check_prologue_ex2(_table(table))
    with checks._grading_inputs(5), pytest.raises(checks.CheckFailed):
        checks.check_prologue_ex2(_table(table))
    with checks._grading_inputs(5):
        assert checks.check_prologue_ex2(lambda d, n, s2: n / (n + d + 1 + s2))


@pytest.mark.slow  # 16 reference simulations: ~5 s
def test_a_table_of_asymptotics_ex4_answers_fails_under_the_grader():
    """Before: the check's ten (τ, seed) inputs were fixed: a table of ten numbers passed."""
    rho = 0.5
    table = {
        (tau, rho, float(s)): simulated_errors(
            40, 1.0, tau, np.inf, rho, rng=np.random.default_rng(s), tol=1e-6
        ).icl
        for tau, n in ((0.7, 8), (8.0, 12))
        for s in range(n)
    }
    assert checks.check_asymptotics_ex4(_table(table))
    with checks._grading_inputs(11), pytest.raises(checks.CheckFailed):
        checks.check_asymptotics_ex4(_table(table))


def test_the_grading_seed_changes_the_inputs_and_is_reproducible():
    def drawn(seed):
        seen = []
        with checks._grading_inputs(seed):
            checks.check_hermite_ex3(lambda a, rho: seen.append((a, rho)) or 0.0 * a)
        return seen

    with pytest.raises(checks.CheckFailed):
        drawn(3)
    seen = []

    def record(a, rho):
        seen.append((a, rho))
        return effective_noise(erf_link(a), rho)

    for seed in (3, 3, 4):
        with checks._grading_inputs(seed):
            checks.check_hermite_ex3(record)
    assert seen[:8] == seen[8:16] != seen[16:]


def test_a_failed_check_shows_only_its_hint_in_ipython():
    """A failed check's traceback through icl_book/checks/ would print reference source
    (``exact = LINKS["relu"].closed_form_coefficients(14)``); IPython shows its hint only."""
    from IPython.core.interactiveshell import InteractiveShell

    # The process's shell (a test run earlier in this worker may have made one; a second, sibling
    # singleton such as IPython.testing's terminal shell would then raise MultipleInstanceError).
    ip = InteractiveShell.instance()
    import io
    from contextlib import redirect_stderr, redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(out):
        ip.run_cell(
            "from icl_book.checks import check_hermite_ex1\ncheck_hermite_ex1(lambda k: 0.1)"
        )
    text = out.getvalue()
    assert "Hint" in text
    assert "closed_form_coefficients" not in text and "ch01_hermite.py" not in text, text


def test_a_table_of_lsa_ex1_answers_passes_in_the_notebook_but_not_under_the_grader():
    """Before: lsa-ex1's four (Λ, N, σ²) inputs were fixed and published: a table of four numbers
    passed. Under the grader the covariances, context lengths and noise levels are drawn."""
    from icl_book.theory import best_one_step_eta

    rng = np.random.default_rng(2024)
    a = rng.standard_normal((4, 4))
    published = [
        (np.eye(3), 10, 0.5),
        (np.diag([4.0, 2.0, 1.0, 0.5, 0.25]), 20, 0.1),
        (a @ a.T / 4 + 0.2 * np.eye(4), 7, 0.0),
        (np.diag([9.0, 0.01]), 1, 1.0),
    ]
    table = {(cov.tobytes(), n, s2): best_one_step_eta(cov, n, s2) for cov, n, s2 in published}

    def looked_up(cov, n, s2):
        return table.get((np.asarray(cov).tobytes(), n, s2), 0.5)

    assert checks.check_lsa_ex1(looked_up)
    for seed in range(20):
        with checks._grading_inputs(seed) as drew, pytest.raises(checks.CheckFailed):
            checks.check_lsa_ex1(looked_up)
        assert drew == ["lsa-ex1"]
        with checks._grading_inputs(seed):  # the honest answer passes on the drawn inputs
            assert checks.check_lsa_ex1(best_one_step_eta)


def test_a_table_of_asymptotics_ex1_answers_passes_in_the_notebook_but_not_under_the_grader():
    """Before: asymptotics-ex1's 16 (α, ρ) inputs were fixed: a table of 16 numbers passed."""
    from icl_book.theory import icl_error

    table = {
        (a, r): icl_error(a, np.inf, np.inf, r)
        for a in (0.25, 1.0, 3.0, 20.0)
        for r in (0.0, 0.01, 0.5, 2.0)
    }
    assert checks.check_asymptotics_ex1(_table(table))
    for seed in range(20):
        with checks._grading_inputs(seed) as drew, pytest.raises(checks.CheckFailed):
            checks.check_asymptotics_ex1(_table(table))
        assert drew == ["asymptotics-ex1"]
        with checks._grading_inputs(seed):
            assert checks.check_asymptotics_ex1(lambda a, r: icl_error(a, np.inf, np.inf, r))


def _chapter_solutions():
    """The instructor's solutions of glu-ex1, glu-ex4 and asymptotics-ex3 (chapters 5 and 3)."""
    from math import comb

    return {
        "glu-ex1": lambda d, p: comb(d + p, p) + 1,
        "glu-ex4": lambda d, s2: s2 * (d + 1) * (d + 2) / 2 + d / 2 + (d + 4) * (d + 6) / 2,
        "asymptotics-ex3": lambda k: np.maximum(0.0, 1.0 - np.asarray(k, dtype=float)),
    }


@pytest.mark.parametrize(
    ("label", "published"),
    [
        ("glu-ex1", [(1, 1), (1, 2), (2, 2), (4, 2), (3, 3), (8, 2), (5, 4), (10, 3)]),
        ("glu-ex4", [(1, 0.0), (2, 0.5), (4, 0.1), (7, 2.0)]),
        ("asymptotics-ex3", [(k,) for k in (0.1, 0.3, 0.5, 0.8, 1.5, 2.0, 5.0, 50.0)]),
    ],
)
def test_a_table_of_published_answers_fails_under_the_grader(label, published):
    """Before: these checks' inputs were fixed and published: a table of their answers passed.
    Under the grader they are drawn per submission; the chapter's solution passes on every seed."""
    check = getattr(checks, "check_" + label.replace("-", "_"))
    honest = _chapter_solutions()[label]
    table = {tuple(float(a) for a in args): honest(*args) for args in published}
    assert check(_table(table))
    for seed in range(20):
        with checks._grading_inputs(seed) as drew, pytest.raises(checks.CheckFailed):
            check(_table(table))
        assert drew == [label]
        with checks._grading_inputs(seed):
            assert check(honest)


def test_depth_checks_draw_their_inputs_under_the_grader():
    """Before: depth-ex2's prompts came from a published seed and depth-ex3's seven (d, p, width)
    were fixed: a table passed. Under the grader both draw; the reference answers still pass."""
    from math import ceil, comb

    from icl_book.estimators import block_coordinate_gd_predict

    published = [(1, 1, 4), (2, 3, 6), (3, 3, 9), (3, 2, 14), (5, 3, 10), (10, 2, 20), (4, 4, 7)]

    def honest(d, p, w):
        return ceil((comb(d + p, p) - 1) / (w - d - 2))

    table = {tuple(float(a) for a in c): honest(*c) for c in published}

    def looked_up(*args):
        return int(table.get(tuple(float(a) for a in args), 1))

    assert checks.check_depth_ex3(looked_up)
    seen = {}

    def remembering(xs, ys, xq, blocks, eta, cycles):  # a table keyed by the published prompts
        out = block_coordinate_gd_predict(xs, ys, xq, blocks, eta, cycles)
        seen[xs.tobytes()] = out
        return out

    def replaying(xs, ys, xq, blocks, eta, cycles):
        return seen.get(xs.tobytes(), np.zeros(len(xq)))

    assert checks.check_depth_ex2(remembering)
    assert checks.check_depth_ex2(replaying)  # the published inputs: a replayed table passes
    for seed in range(20):
        with checks._grading_inputs(seed) as drew:
            with pytest.raises(checks.CheckFailed):
                checks.check_depth_ex3(looked_up)
            with pytest.raises(checks.CheckFailed):
                checks.check_depth_ex2(replaying)
            assert checks.check_depth_ex3(honest)
            assert checks.check_depth_ex2(block_coordinate_gd_predict)
        assert drew == ["depth-ex3", "depth-ex2", "depth-ex3", "depth-ex2"]


def test_lsa_ex2_and_glu_ex2_draw_their_inputs_under_the_grader():
    """Before: their (d, η) and w0 came from published seeds: a table of the published weights
    passed. Under the grader they are drawn; the chapters' solutions pass on every drawn seed."""
    from icl_book.attention.glu import glu_lsa_block_weights
    from icl_book.attention.lsa import gd_lsa_weights

    def lsa_solution(w0, eta):
        d = len(w0)
        w_kq, w_pv = gd_lsa_weights(d, eta)
        w_pv[d, :d] = eta * np.asarray(w0)
        return w_kq, w_pv

    def glu_solution(dim, eta):
        w = glu_lsa_block_weights(dim, eta)
        w_kq = w.w_kq.copy()
        w_kq[dim, dim] = 1.0
        w_kq[np.arange(dim), np.arange(dim)] = 2.0
        return w._replace(w_kq=w_kq)

    lsa_table, glu_table = {}, {}

    def lsa_recorded(w0, eta):
        return lsa_table.setdefault((w0.tobytes(), eta), lsa_solution(w0, eta))

    def glu_recorded(dim, eta):
        return glu_table.setdefault((dim, eta), glu_solution(dim, eta))

    assert checks.check_lsa_ex2(lsa_recorded) and checks.check_glu_ex2(glu_recorded)

    def lsa_replayed(w0, eta):
        return lsa_table.get((w0.tobytes(), eta), gd_lsa_weights(len(w0), eta))

    def glu_replayed(dim, eta):
        return glu_table.get((dim, eta), glu_lsa_block_weights(dim, eta))

    assert checks.check_lsa_ex2(lsa_replayed) and checks.check_glu_ex2(glu_replayed)
    for seed in range(20):
        with checks._grading_inputs(seed):
            with pytest.raises(checks.CheckFailed):
                checks.check_lsa_ex2(lsa_replayed)
            with pytest.raises(checks.CheckFailed):
                checks.check_glu_ex2(glu_replayed)
            assert checks.check_lsa_ex2(lsa_solution)
            assert checks.check_glu_ex2(glu_solution)
