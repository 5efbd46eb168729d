"""Tests of icl_book.simulate: exact-in-distribution sampler, matrix-free solver, pretraining."""

import numpy as np
import pytest

from icl_book import simulate
from icl_book._blas import OneBlasThread
from icl_book.simulate import (
    gamma_errors,
    pretrain_reduced_lsa,
    problem_sizes,
    reduced_features,
    sample_reduced_prompts,
    simulated_errors,
    solve_reduced_ridge,
)
from icl_book.tasks import sample_single_index_prompts, sample_task_pool
from icl_book.theory import icl_error


def test_problem_sizes_round_half_up_and_reject_zero():
    assert problem_sizes(10, 1.0, 2.0) == (10, 200, None)
    assert problem_sizes(10, 0.25, 0.005, 0.25) == (3, 1, 3)  # 2.5 → 3, 0.5 → 1, 2.5 → 3
    assert problem_sizes(10, 0.24, 0.0051, 0.26) == (2, 1, 3)  # 2.4 → 2, 0.51 → 1, 2.6 → 3
    with pytest.raises(ValueError, match="alpha"):
        problem_sizes(10, 0.04, 1.0)
    with pytest.raises(ValueError, match="tau"):
        problem_sizes(10, 1.0, 0.004)
    with pytest.raises(ValueError, match="kappa"):
        problem_sizes(10, 1.0, 1.0, 0.04)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"tau": -1.0}, "tau"),
        ({"kappa": 0.0}, "kappa"),
        ({"kappa": -2.0}, "kappa"),
        ({"noise_var": -0.1}, "noise_var"),
        ({"ridge": -0.1}, "ridge"),
        ({"dim": 10.5}, "dim"),
        ({"dim": 0}, "dim"),
    ],
)
def test_pretrain_validation(kwargs, name):
    args = {
        "dim": 6,
        "alpha": 1.0,
        "tau": 2.0,
        "kappa": 1.0,
        "noise_var": 0.1,
        "ridge": 0.0,
    } | kwargs
    with pytest.raises(ValueError, match=name):
        pretrain_reduced_lsa(**args, rng=np.random.default_rng(0))


@pytest.mark.parametrize("rng", [None, True, 0.5, np.random.RandomState(0)])
def test_pretrain_requires_generator(rng):
    # a Generator or an integer seed (SPEC 7); rng=0 is a seed since the SPEC 7 change
    with pytest.raises(TypeError, match="rng"):
        pretrain_reduced_lsa(6, 1.0, 2.0, rng=rng)


def test_pretrain_shapes_pool_and_reproducibility():
    gamma, pool = pretrain_reduced_lsa(
        8, 1.0, 2.0, kappa=0.5, noise_var=0.1, rng=np.random.default_rng(3)
    )
    assert gamma.shape == (8, 9)
    assert pool.shape == (4, 8)
    np.testing.assert_allclose(np.linalg.norm(pool, axis=1), np.sqrt(8), rtol=1e-12)
    again, pool2 = pretrain_reduced_lsa(
        8, 1.0, 2.0, kappa=0.5, noise_var=0.1, rng=np.random.default_rng(3)
    )
    np.testing.assert_array_equal(pool, pool2)
    np.testing.assert_allclose(again, gamma, rtol=0, atol=1e-12)
    gamma_inf, pool_inf = pretrain_reduced_lsa(8, 1.0, 2.0, rng=np.random.default_rng(3))
    assert pool_inf is None and gamma_inf.shape == (8, 9)
    gamma_link, _ = pretrain_reduced_lsa(8, 1.0, 2.0, link=np.tanh, rng=np.random.default_rng(3))
    assert np.all(np.isfinite(gamma_link))


def _dense_solution(p, ridge, d):
    n = p.y_query.shape[0]
    phi = np.einsum("ni,nj->nij", p.x_query, p.h).reshape(n, -1)
    if ridge > 0 or n >= d * (d + 1):
        gram = phi.T @ phi + (n / d) * ridge * np.eye(d * (d + 1))
        return np.linalg.solve(gram, phi.T @ p.y_query).reshape(d, d + 1)
    return (np.linalg.pinv(phi, rcond=1e-12) @ p.y_query).reshape(d, d + 1)


@pytest.mark.parametrize(("n", "ridge"), [(400, 0.0), (400, 0.1), (60, 0.1), (60, 0.0)])
def test_solver_matches_dense_reference(n, ridge):
    # Same prompts, two methods: explicit d(d+1) features with a dense solve (pseudo-inverse, i.e. the
    # minimum-norm interpolator, when n < d(d+1) ridgeless) against matrix-free CG. CG stops at relative
    # residual 1e-12 on a system of condition number < 1e3 here, so 1e-8 relative is a safe bound.
    d = 9
    p = sample_reduced_prompts(n, 7, d, rng=np.random.default_rng(n), noise_var=0.1)
    gamma, info = solve_reduced_ridge(p.x_query, p.h, p.y_query, ridge, tol=1e-12)
    assert info.converged
    assert info.preconditioned == (n >= d * (d + 1))
    ref = _dense_solution(p, ridge, d)
    assert np.abs(gamma - ref).max() <= 1e-8 * np.abs(ref).max()


def test_solver_warns_when_capped():
    p = sample_reduced_prompts(42, 6, 6, rng=np.random.default_rng(0), noise_var=0.1)
    with pytest.warns(RuntimeWarning, match="max_iter"):
        _, info = solve_reduced_ridge(p.x_query, p.h, p.y_query, 0.0, max_iter=2)
    assert not info.converged and info.iterations == 2


def test_solver_validation():
    p = sample_reduced_prompts(30, 4, 4, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="h"):
        solve_reduced_ridge(p.x_query, p.h[:, :4], p.y_query)
    with pytest.raises(ValueError, match="ridge"):
        solve_reduced_ridge(p.x_query, p.h, p.y_query, -1.0)


def _moments(x_query, h, y_query):
    """Per-prompt statistics whose means pin down the regression: E h, E h hᵀ, E y_q x_q hᵀ, E y_q²."""
    hh = np.einsum("ni,nj->nij", h, h).reshape(len(h), -1)
    yxh = np.einsum("n,ni,nj->nij", y_query, x_query, h).reshape(len(h), -1)
    return np.concatenate([h, hh, yxh, y_query[:, None] ** 2], axis=1)


@pytest.mark.parametrize("link", [None, np.tanh, lambda z: np.maximum(z, 0.0)])
def test_fast_sampler_matches_naive_sampler_in_distribution(link):
    # Fast O(ℓ + d) sampler against explicit prompts (O(ℓd)) from tasks.sample_single_index_prompts, on
    # the same fixed task pool: every moment that enters the normal equations must agree within sampling
    # error. 6 standard errors of the difference (≈ 300 statistics, fixed seeds): a wrong variance of v⊥
    # or a missing u Σ y s term shifts some of them by tens of standard errors.
    d, ell, n, rho = 5, 4, 60_000, 0.3
    pool = sample_task_pool(2, d, rng=np.random.default_rng(5)) * np.array([[1.0], [0.7]])
    fast = sample_reduced_prompts(
        n, ell, d, rng=np.random.default_rng(1), noise_var=rho, task_pool=pool, link=link
    )
    naive = sample_single_index_prompts(
        n, ell, d, link, rng=np.random.default_rng(2), noise_var=rho, task_pool=pool
    )
    m_fast = _moments(fast.x_query, fast.h, fast.y_query)
    m_naive = _moments(naive.x_query, reduced_features(naive.xs, naive.ys), naive.y_query)
    diff = m_fast.mean(0) - m_naive.mean(0)
    se = np.sqrt(m_fast.var(0) / n + m_naive.var(0) / n)
    z = np.abs(diff) / se
    assert z.max() < 6, f"max z = {z.max():.1f}"


def test_fast_sampler_mean_of_h_is_mu1_w():
    # SCIENCE.md §1: E[f(x·w) x] = (μ₁/d) w, so E h[:d] = (d/ℓ) ℓ (μ₁/d) w = μ₁ w; for tanh μ₁ ≈ 0.605706.
    d, ell, n = 8, 3, 200_000
    pool = sample_task_pool(1, d, rng=np.random.default_rng(0))
    p = sample_reduced_prompts(
        n, ell, d, rng=np.random.default_rng(1), task_pool=pool, link=np.tanh
    )
    se = p.h[:, :d].std(0) / np.sqrt(n)
    assert np.all(np.abs(p.h[:, :d].mean(0) - 0.605706 * pool[0]) < 5 * se)


def test_gamma_errors_and_simulated_errors_agree():
    rng = np.random.default_rng(4)
    errs = simulated_errors(10, 1.0, 2.0, 1.0, 0.1, 0.0, rng=rng)
    gamma, pool = pretrain_reduced_lsa(10, 1.0, 2.0, 1.0, 0.1, 0.0, rng=np.random.default_rng(4))
    again = gamma_errors(gamma, 1.0, 0.1, pool)  # ℓ = αd = 10
    assert errs.icl == pytest.approx(again.icl, rel=1e-9)
    assert errs.idg == pytest.approx(again.idg, rel=1e-9)
    # memorisation: fewer tasks than dimensions (κ = 1) → error on the pool well below the fresh-task error
    assert errs.idg < errs.icl
    assert np.isnan(simulated_errors(10, 1.0, 2.0, rng=np.random.default_rng(0)).idg)


@pytest.mark.slow
@pytest.mark.parametrize(("tau", "ridge"), [(0.3, 0.0), (3.0, 0.0), (0.5, 0.1), (2.0, 0.1)])
def test_simulation_approaches_theory_at_d40(tau, ridge):
    # The done-when criterion of chapter 3 is 4 % at d = 100 (3 seeds). Finite-size bias decays like 1/d
    # (chapter 3, figure (d)), so at d = 40 the same criterion scales to 4 % × 100/40 = 10 %; measured
    # deviations here are +2 … +5 %, with seed-to-seed spread of about 2 %.
    d, alpha, rho = 40, 1.0, 0.01
    sims = [
        simulated_errors(d, alpha, tau, np.inf, rho, ridge, rng=np.random.default_rng(seed)).icl
        for seed in range(3)
    ]
    theory = icl_error(alpha, tau, np.inf, rho, ridge)
    assert abs(np.mean(sims) / theory - 1) < 0.10


@pytest.mark.slow
def test_check_asymptotics_ex4():
    from icl_book.checks import CheckFailed, check_asymptotics_ex4
    from icl_book.theory import icl_error as theory_icl

    def solution(tau, rho, seed):
        rng = np.random.default_rng(seed)
        return simulated_errors(40, 1.0, tau, np.inf, rho, rng=rng, tol=1e-6).icl

    assert check_asymptotics_ex4(solution)

    def wrong_alpha(tau, rho, seed):  # α = 4 instead of 1
        rng = np.random.default_rng(seed)
        return simulated_errors(40, 4.0, tau, np.inf, rho, rng=rng, tol=1e-6).icl

    with pytest.raises(CheckFailed, match="asymptotics-ex4"):
        check_asymptotics_ex4(wrong_alpha)
    with pytest.raises(CheckFailed, match="same value"):
        check_asymptotics_ex4(lambda tau, rho, seed: theory_icl(1.0, tau, np.inf, rho))

    def stub(tau, rho, seed):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not implemented"):
        check_asymptotics_ex4(stub)


def test_solver_falls_back_to_double_precision_when_single_stalls(monkeypatch):
    # Make the float32 products useless (30 % relative error): refinement rounds then fail to halve the float64
    # residual, and the solver must finish in float64 and still match the dense solution.
    d, n = 6, 200
    p = sample_reduced_prompts(n, 6, d, rng=np.random.default_rng(7), noise_var=0.1)
    exact_apply = simulate.solver._gram_apply
    noise = np.random.default_rng(8)

    def bad_single(x_query, h, gamma):
        out = exact_apply(x_query, h, gamma)
        if out.dtype == np.float32:
            out = out * (1 + 0.3 * noise.standard_normal(out.shape)).astype(np.float32)
        return out

    monkeypatch.setattr(simulate.solver, "_gram_apply", bad_single)
    gamma, info = solve_reduced_ridge(p.x_query, p.h, p.y_query, 0.0, tol=1e-12)
    assert info.converged
    ref = _dense_solution(p, 0.0, d)
    assert np.abs(gamma - ref).max() <= 1e-8 * np.abs(ref).max()


# --- the solver's routes and the cost model that picks one ---

from icl_book.simulate import solver as solver_module  # noqa: E402


@pytest.mark.parametrize(("n", "ridge"), [(400, 0.0), (400, 0.1), (60, 0.1)])
def test_dense_route_matches_the_dense_reference_and_pcg(n, ridge):
    # The same tolerance as the PCG route's test above: both routes solve one system to residual 1e-12.
    d = 9
    p = sample_reduced_prompts(n, 7, d, rng=np.random.default_rng(n), noise_var=0.1)
    ref = _dense_solution(p, ridge, d)
    dense, info = solve_reduced_ridge(p.x_query, p.h, p.y_query, ridge, tol=1e-12, solver="dense")
    assert info.converged and info.solver == ("dense32" if n >= d * (d + 1) else "dense64")
    assert np.abs(dense - ref).max() <= 1e-8 * np.abs(ref).max()
    pcg, info = solve_reduced_ridge(p.x_query, p.h, p.y_query, ridge, tol=1e-12, solver="pcg")
    assert info.solver == "pcg"
    assert np.abs(dense - pcg).max() <= 1e-8 * np.abs(ref).max()


def test_dense_route_refuses_the_ridgeless_underdetermined_problem():
    p = sample_reduced_prompts(60, 7, 9, rng=np.random.default_rng(0), noise_var=0.1)
    with pytest.raises(ValueError, match="solver='dense' needs n >= d"):
        solve_reduced_ridge(p.x_query, p.h, p.y_query, 0.0, solver="dense")
    with pytest.raises(ValueError, match="solver must be one of"):
        solve_reduced_ridge(p.x_query, p.h, p.y_query, 0.0, solver="cholesky")


def test_dense_route_falls_back_to_double_precision_when_single_cannot_reach_tol():
    # Two nearly collinear features (h's last column = its first + 1e-3 noise) give the Gram matrix a
    # condition number ~1e7: a float32 factor (ε ≈ 6e-8) is not positive definite or cannot refine to
    # 1e-12, the float64 one can; the result is the dense reference's, itself accurate to cond·ε ≈ 1e-9.
    d, n = 6, 400
    p = sample_reduced_prompts(n, 6, d, rng=np.random.default_rng(3), noise_var=0.1)
    h = p.h.copy()
    h[:, d] = h[:, 0] + 1e-3 * np.random.default_rng(4).standard_normal(n)
    gamma, info = solve_reduced_ridge(p.x_query, h, p.y_query, 0.0, tol=1e-12, solver="dense")
    assert info.converged and info.solver == "dense64"
    ref = _dense_solution(p._replace(h=h), 0.0, d)
    assert np.abs(gamma - ref).max() <= 1e-8 * np.abs(ref).max()


@pytest.mark.parametrize(
    ("dim", "expected"), [(6, "dense"), (10, "dense"), (32, "pcg"), (64, "pcg"), (200, "pcg")]
)
def test_auto_takes_dense_at_small_dim_and_pcg_at_large_on_the_figure4_sizes(dim, expected):
    # α = τ = 10 (n = 10 d²): the dense Gram product 2 n d²(d+1)² outgrows ~20 PCG steps of 4 n d(d+1)
    # (plus their per-step overhead) between d = 10 and d = 32 (measured: dense 3.7 ms vs PCG 10.6 ms at
    # d = 10, 0.28 s vs 0.05 s at d = 32, one thread; benchmarks/bench_simulate.py prints both).
    _, n, _ = problem_sizes(dim, 10.0, 10.0)
    assert solver_module._choose_solver(n, dim, 1e-10) == expected


def test_auto_never_takes_dense_below_the_threshold_or_beyond_the_memory_cap():
    d = 10
    assert solver_module._choose_solver(d * (d + 1) - 1, d, 1e-10) == "pcg"  # minimum-norm: CG's
    assert solver_module._choose_solver(d * (d + 1), d, 1e-10) == "dense"  # one more step count
    big = 120  # (d(d+1))² > DENSE_MAX_ENTRIES
    assert (big * (big + 1)) ** 2 > solver_module.DENSE_MAX_ENTRIES
    assert solver_module._choose_solver(10**9, big, 1e-10) == "pcg"


def test_predicted_pcg_steps_match_the_measured_ones():
    # The Marchenko–Pastur prediction of the preconditioned route's steps, against a run (Figure-4 sizes
    # at d = 16, κ = 0.4): within 30 % either way.
    d = 16
    ell, n, k = problem_sizes(d, 10.0, 10.0, 0.4)
    rng = np.random.default_rng(0)
    pool = sample_task_pool(k, d, rng=rng)
    p = sample_reduced_prompts(n, ell, d, rng=rng, noise_var=0.01, task_pool=pool)
    _, info = solve_reduced_ridge(p.x_query, p.h, p.y_query, 1e-6, solver="pcg")
    predicted = solver_module._pcg_steps(n, d, 1e-10)
    assert 0.7 * info.iterations <= predicted <= 1.3 * info.iterations


@pytest.fixture
def solver_routes(monkeypatch):
    """The route (``info.solver``) of every solve pretraining runs in this process, in order."""
    seen = []
    solve = simulate.pretrain.solve_reduced_ridge

    def spy(*args, **kwargs):
        out = solve(*args, **kwargs)
        seen.append(out.info.solver)
        return out

    monkeypatch.setattr(simulate.pretrain, "solve_reduced_ridge", spy)
    return seen


def test_the_route_is_visible_and_overridable_through_pretraining(solver_routes):
    seen = solver_routes
    runs = {
        s: pretrain_reduced_lsa(10, 10.0, 10.0, 0.4, 0.01, 1e-6, rng=1, solver=s).gamma
        for s in ("auto", "pcg", "dense")
    }
    assert seen == ["dense32", "pcg", "dense32"]  # auto takes dense at d = 10, n = 10 d²
    scale = np.abs(runs["dense"]).max()
    assert np.abs(runs["pcg"] - runs["dense"]).max() <= 1e-8 * scale
    np.testing.assert_array_equal(runs["auto"], runs["dense"])
    with pytest.raises(ValueError, match="solver"):
        pretrain_reduced_lsa(10, 1.0, 2.0, rng=1, solver="lu")


# --- the samplers against explicit prompts: moments and a two-sample test ---


def _explicit_and_fast(sampler, link, n, ell, d, rho, pool, seed):
    fast = sample_reduced_prompts(
        n, ell, d, rng=np.random.default_rng(seed), noise_var=rho, task_pool=pool, link=link,
        sampler=sampler,
    )  # fmt: skip
    naive = sample_single_index_prompts(
        n, ell, d, link, rng=np.random.default_rng(seed + 1), noise_var=rho, task_pool=pool
    )
    return fast, (naive.x_query, reduced_features(naive.xs, naive.ys), naive.y_query)


def _scalar_statistics(x_query, h, y_query, u):
    """Scalars whose laws pin down a prompt's contribution: Σy²/ℓ, the task-direction and orthogonal parts
    of h, the query's label and prediction-like products."""
    along = h[:, :-1] @ u
    ortho = np.linalg.norm(h[:, :-1] - along[:, None] * u, axis=1)
    return {
        "sum_y2": h[:, -1],
        "along_u": along,
        "ortho_norm": ortho,
        "y_query": y_query,
        "xq_h": np.einsum("ni,ni->n", x_query, h[:, :-1]),
        "yq_xq_u": y_query * (x_query @ u),
    }


def _sampler_disagreement(sampler, ell, n=20_000, seed=11):
    """Smallest two-sample (Kolmogorov–Smirnov) p-value over the scalar statistics, and the largest
    moment z-score, of the fast sampler against explicit prompts on one task (d = 5, ρ = 0.3)."""
    from scipy.stats import ks_2samp

    d, rho = 5, 0.3
    pool = sample_task_pool(1, d, rng=np.random.default_rng(5)) * 0.8
    u = pool[0] / np.linalg.norm(pool[0])
    fast, naive = _explicit_and_fast(sampler, None, n, ell, d, rho, pool, seed)
    a = _scalar_statistics(fast.x_query, fast.h, fast.y_query, u)
    b = _scalar_statistics(*naive, u)
    p_min = min(ks_2samp(a[k], b[k]).pvalue for k in a)
    m_fast, m_naive = _moments(fast.x_query, fast.h, fast.y_query), _moments(*naive)
    se = np.sqrt(m_fast.var(0) / n + m_naive.var(0) / n)
    z_max = float(np.max(np.abs(m_fast.mean(0) - m_naive.mean(0)) / se))
    return p_min, z_max


@pytest.mark.parametrize(("sampler", "ell"), [("labels", 4), ("wishart", 4), ("wishart", 1)])
def test_fast_samplers_match_explicit_prompts_in_distribution(sampler, ell):
    # Six KS tests (Bonferroni: each at 1e-3) and ~300 moments (6 standard errors), fixed seeds. The
    # attack below shows a sampler wrong by one degree of freedom failing the same check.
    p_min, z_max = _sampler_disagreement(sampler, ell)
    assert p_min > 1e-3 and z_max < 6, (p_min, z_max)


def test_a_wishart_sampler_off_by_one_degree_of_freedom_is_caught(monkeypatch):
    real = simulate.sizes._wishart_context

    class OffByOne:  # χ²_ℓ where Bartlett's decomposition has χ²_{ℓ−1}
        def __init__(self, rng):
            self.rng = rng

        def chisquare(self, df, size):
            return self.rng.chisquare(df + 1 if df == 3 else df, size=size)

        def standard_normal(self, *args, **kwargs):
            return self.rng.standard_normal(*args, **kwargs)

    monkeypatch.setattr(
        simulate.sizes,
        "_wishart_context",
        lambda rng, *args: real(OffByOne(rng), *args),
    )
    p_min, z_max = _sampler_disagreement("wishart", 4)
    assert p_min < 1e-3 or z_max > 6, (p_min, z_max)


def test_wishart_sampler_refuses_a_link_and_an_unknown_name():
    with pytest.raises(ValueError, match="sampler='wishart'"):
        sample_reduced_prompts(10, 4, 3, rng=0, link=np.tanh, sampler="wishart")
    with pytest.raises(ValueError, match="sampler must be one of"):
        sample_reduced_prompts(10, 4, 3, rng=0, sampler="bartlett")


def test_every_stored_simulation_stays_on_the_route_it_was_computed_with():
    """The stored tables and the explorer's data were computed by PCG; the two routes agree to ~1e-9, not
    bitwise, so a cost-model change that moved one of their points to the dense route would shift stored
    numbers by as much as their tolerances. Every such point must still take PCG under ``"auto"``."""
    from booktools import explorer_data, tables

    points = [p for make in tables.TABLES.values() for _, p in make().points]
    points += [
        explorer_data._point(spec, tau)
        for spec in explorer_data.SIMULATIONS
        for tau in spec["taus"]
    ]
    assert len(points) > 20
    for p in points:
        _, n, _ = problem_sizes(p["dim"], p["alpha"], p["tau"], p.get("kappa", np.inf))
        assert solver_module._choose_solver(n, p["dim"], p.get("tol", 1e-10)) == "pcg", p


def test_a_sweep_row_names_the_route_its_solves_took(solver_routes):
    seen = solver_routes
    fig4 = {"alpha": 10.0, "tau": 10.0, "kappa": 0.4, "noise_var": 0.01, "ridge": 1e-6}
    points = [fig4 | {"dim": 10}, fig4 | {"dim": 10, "solver": "pcg"}, fig4 | {"dim": 32}]
    rows = simulate.sweep(points, seeds=[0, 1])
    assert [r.solver for r in rows] == ["dense", "pcg", "pcg"]  # auto: dense at d = 10, PCG at 32
    # each row's route is the one its two solves reported (the dense route's factor is float32 here)
    assert seen == ["dense32", "dense32", "pcg", "pcg", "pcg", "pcg"]


def test_sweep_points_choose_solver_and_sampler_by_name():
    base = {"dim": 8, "alpha": 2.0, "tau": 3.0, "kappa": 1.0, "noise_var": 0.1, "ridge": 1e-3}
    rows = {s: simulate.sweep([base | {"solver": s}], seeds=[0, 1])[0] for s in ("pcg", "dense")}
    np.testing.assert_allclose(rows["pcg"].icl, rows["dense"].icl, rtol=1e-8)
    np.testing.assert_allclose(rows["pcg"].idg, rows["dense"].idg, rtol=1e-8)
    wishart = simulate.sweep([base | {"sampler": "wishart"}], seeds=[0])[0]
    with OneBlasThread():  # as every sweep task
        direct = simulated_errors(8, 2.0, 3.0, 1.0, 0.1, 1e-3, rng=0, sampler="wishart")
    assert wishart.icl[0] == pytest.approx(direct.icl, rel=1e-12)
    with pytest.raises(ValueError, match=r"points\[0\]\['solver'\]"):
        simulate.sweep([base | {"solver": "lu"}], seeds=[0])
    with pytest.raises(ValueError, match=r"points\[0\]\['sampler'\]"):
        simulate.sweep([base | {"sampler": "wishart", "link": "tanh"}], seeds=[0])
