"""Probe suite: bad inputs, by class, against the package's public callables.

Each callable has one valid call (``SPECS``). Every argument is then replaced, one at a time, by each
bad value its kind admits (wrong types, bool/str, None, NaN/inf, complex/bool/string arrays, wrong
shapes, empty arrays, inconsistent lengths, huge sizes, wrong generator types), and the outcome is
classified:

- ``clear``: a ``TypeError``/``ValueError`` whose message names the argument (or an alias listed);
- ``unclear``: any other exception, or one that does not name the argument;
- ``silent``: the call returned although the value can never be meant (``None``, ``"1"``, ``True``,
  NaN, a complex or string array, a ``RandomState`` for ``rng``): it was coerced or ignored;
- ``nonfinite``: the call returned NaN/inf for a mutation it accepted (inf/empty/shape/huge);
- ``hang``: still running after ``TIMEOUT_S`` (in-process, interrupted by ``SIGALRM``).

The suite runs in-process (one fork-free timer per call) and fails on any outcome other than
``clear`` or an accepted, finite return, except those in ``ALLOWED`` (each argued there). A
mutation the generated suite (``tests/test_declarations.py``) tries as the same bad value of the
same argument is left to it (``hand_written``).
"""

from __future__ import annotations

import collections
import signal
import time

import matplotlib.figure
import numpy as np
import pytest
import torch

from icl_book import (
    _declare,
    book,
    checks,
    estimators,
    features,
    hermite,
    limits,
    plotting,
    simulate,
    stats,
    studies,
    tasks,
    theory,
    train,
)
from icl_book.attention import deep, glu, layers, lsa, schedule

TIMEOUT_S = 5.0

# torch imports torch._dynamo at the first optimizer it builds (2-3 s on a loaded machine): paid
# here, not inside the timer of the first probe that reaches train_in_context's Adam.
torch.optim.Adam([torch.zeros(1, requires_grad=True)])


class _Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Hang()


# --- valid calls -------------------------------------------------------------------------------------
def _rng():
    return np.random.default_rng(0)


_P = tasks.sample_linear_prompts(3, 5, 2, rng=np.random.default_rng(1))
_XS, _YS, _XQ, _YQ = _P.xs, _P.ys, _P.x_query, _P.y_query
_KERNEL = estimators.polynomial_kernel(2, offset=1.0)
_BLOCKS = features.partition_features(2, 2, 3)
_GAMMA = np.zeros((2, 3))
_WKQ, _WPV = lsa.gd_lsa_weights(2, 0.5)
_TOKENS = lsa.token_matrix(_XS, _YS, _XQ)
_DEEP = deep.deep_bcd_weights(2, 2, 7, 0.5)


def _arr(*a):
    return a


def _within_budget(**kw):
    """Enter and leave a budget block: its arguments are checked when it is entered."""
    with limits.budget(**kw):
        return 1.0


# name -> (callable, positional args as {name: value} in order, keyword args, kinds)
# kinds: for each argument name, what it is: "array", "int", "float", "flag", "rng", "callable",
# "choice", "any" (skipped). "float+inf" accepts inf; "array+inf" accepts inf entries.
SPECS = {
    "theory.icl_error": (
        theory.icl_error,
        dict(alpha=1.0, tau=2.0, kappa=np.inf, noise_var=0.1, ridge=0.1),
        {},
        dict(
            alpha="float+inf", tau="float+inf", kappa="float+inf", noise_var="float", ridge="float"
        ),
    ),
    "theory.idg_error": (
        theory.idg_error,
        dict(alpha=1.0, tau=2.0, kappa=1.0, noise_var=0.1),
        {},
        dict(alpha="float+inf", tau="float+inf", kappa="float+inf", noise_var="float"),
    ),
    "theory.wishart_stieltjes": (
        theory.wishart_stieltjes,
        dict(x=1.0, kappa=2.0),
        {},
        dict(x="float+inf", kappa="float+inf"),
    ),
    "theory.error_of_gamma": (
        theory.error_of_gamma,
        dict(gamma=_GAMMA, alpha=1.0, noise_var=0.1),
        {},
        dict(gamma="array", alpha="float", noise_var="float"),
    ),
    "theory.task_moments": (
        theory.task_moments,
        dict(task_pool=np.ones((3, 2))),
        {},
        dict(task_pool="array"),
    ),
    "theory.nonlinear_icl_error": (
        theory.nonlinear_icl_error,
        dict(link="tanh", alpha=1.0, tau=2.0, kappa=np.inf, noise_var=0.1, ridge=0.0),
        {},
        dict(link="callable", alpha="float+inf", tau="float+inf", noise_var="float"),
    ),
    "theory.nonlinear_error_of_gamma": (
        theory.nonlinear_error_of_gamma,
        dict(gamma=_GAMMA, link="tanh", alpha=1.0, noise_var=0.1),
        {},
        dict(gamma="array", link="callable", alpha="float", noise_var="float"),
    ),
    "estimators.ols_predict": (
        estimators.ols_predict,
        dict(xs=_XS, ys=_YS, x_query=_XQ),
        {},
        dict(xs="array", ys="array", x_query="array"),
    ),
    "estimators.ridge_predict": (
        estimators.ridge_predict,
        dict(xs=_XS, ys=_YS, x_query=_XQ, ridge=0.1),
        {},
        dict(xs="array", ys="array", x_query="array", ridge="float"),
    ),
    "estimators.one_step_gd_predict": (
        estimators.one_step_gd_predict,
        dict(xs=_XS, ys=_YS, x_query=_XQ, eta=0.5),
        {},
        dict(xs="array", ys="array", x_query="array", eta="float"),
    ),
    "estimators.kernel_ridge_predict": (
        estimators.kernel_ridge_predict,
        dict(xs=_XS, ys=_YS, x_query=_XQ, kernel=_KERNEL, ridge=0.1),
        {},
        dict(xs="array", ys="array", x_query="array", kernel="callable", ridge="float"),
    ),
    "estimators.select_kernel_ridge": (
        estimators.select_kernel_ridge,
        dict(xs=_XS, ys=_YS, x_query=_XQ, y_query=_YQ, kernel=_KERNEL, ridges=[0.1, 1.0]),
        {},
        dict(xs="array", ys="array", x_query="array", y_query="array", kernel="callable"),
    ),
    "theory.best_one_step_eta": (
        theory.best_one_step_eta,
        dict(input_cov=np.eye(2), context_len=5, noise_var=0.1),
        {},
        dict(input_cov="array", context_len="int", noise_var="float"),
    ),
    "theory.best_linear_risk_quadratic": (
        theory.best_linear_risk_quadratic,
        dict(A=np.eye(2), noise_var=0.1),
        {},
        dict(A="array", noise_var="float"),
    ),
    "theory.hermite_one_step_excess_risk": (
        theory.hermite_one_step_excess_risk,
        dict(context_len=5, dim=2, noise_var=0.1),
        {},
        dict(context_len="int", dim="int", noise_var="float"),
    ),
    "estimators.block_coordinate_gd_predict": (
        estimators.block_coordinate_gd_predict,
        dict(xs=_XS, ys=_YS, x_query=_XQ, feature_blocks=_BLOCKS, eta=0.1, n_cycles=2),
        {},
        dict(
            xs="array",
            ys="array",
            x_query="array",
            feature_blocks="callable",
            eta="float",
            n_cycles="int",
        ),
    ),
    "estimators.kernel_least_squares_predict": (
        estimators.kernel_least_squares_predict,
        dict(xs=_XS, ys=_YS, x_query=_XQ, feature_blocks=_BLOCKS),
        {},
        dict(xs="array", ys="array", x_query="array", feature_blocks="callable"),
    ),
    "tasks.sample_linear_prompts": (
        tasks.sample_linear_prompts,
        dict(batch=2, context_len=3, dim=2),
        dict(rng=None, noise_var=0.1),
        dict(batch="int", context_len="int", dim="int", rng="rng", noise_var="float"),
    ),
    "tasks.sample_single_index_prompts": (
        tasks.sample_single_index_prompts,
        dict(batch=2, context_len=3, dim=2, link=np.tanh),
        dict(rng=None, noise_var=0.1),
        dict(
            batch="int", context_len="int", dim="int", link="callable", rng="rng", noise_var="float"
        ),
    ),
    "hermite.hermite_he": (
        hermite.hermite_he,
        dict(k=3, z=np.linspace(-1, 1, 4)),
        {},
        dict(k="int", z="array"),
    ),
    "hermite.hermite_normalized": (
        hermite.hermite_normalized,
        dict(k=3, z=np.linspace(-1, 1, 4)),
        {},
        dict(k="int", z="array"),
    ),
    "hermite.hermite_table": (
        hermite.hermite_table,
        dict(max_degree=3, z=np.linspace(-1, 1, 4)),
        dict(normalized=False),
        dict(max_degree="int", z="array", normalized="flag"),
    ),
    "hermite.hermite_coefficients": (
        hermite.hermite_coefficients,
        dict(f=np.tanh, max_degree=3),
        dict(normalized=False),
        dict(f="callable", max_degree="int", normalized="flag"),
    ),
    "hermite.double_factorial": (hermite.double_factorial, dict(n=5), {}, dict(n="int")),
    "features.orthonormal_table": (
        features.orthonormal_table,
        dict(kind="legendre", max_degree=3, z=np.linspace(-1, 1, 4)),
        {},
        dict(kind="choice", max_degree="int", z="array"),
    ),
    "features.feature_map": (
        features.feature_map,
        dict(x=np.ones((3, 2)), degree=2),
        {},
        dict(x="array", degree="int"),
    ),
    "features.feature_index_tuples": (
        features.feature_index_tuples,
        dict(dim=2, degree=2),
        {},
        dict(dim="int", degree="int"),
    ),
    "features.n_features": (
        features.n_features,
        dict(dim=2, degree=2),
        {},
        dict(dim="int", degree="int"),
    ),
    "simulate.problem_sizes": (
        simulate.problem_sizes,
        dict(dim=4, alpha=1.0, tau=2.0, kappa=1.0),
        {},
        dict(dim="int", alpha="float", tau="float", kappa="float+inf"),
    ),
    "simulate.reduced_features": (
        simulate.reduced_features,
        dict(xs=_XS, ys=_YS),
        {},
        dict(xs="array", ys="array"),
    ),
    "simulate.sample_reduced_prompts": (
        simulate.sample_reduced_prompts,
        dict(batch=3, context_len=4, dim=2),
        dict(rng=None, noise_var=0.1, link=np.tanh, return_tasks=False, sampler="labels"),
        dict(
            batch="int",
            context_len="int",
            dim="int",
            rng="rng",
            noise_var="float",
            link="callable",
            return_tasks="flag",
            sampler="choice",
        ),
    ),
    "simulate.simulated_errors": (
        simulate.simulated_errors,
        dict(dim=4, alpha=1.0, tau=2.0, kappa=2.0, noise_var=0.1, ridge=0.1),
        dict(rng=None),
        dict(
            dim="int",
            alpha="float",
            tau="float",
            kappa="float+inf",
            noise_var="float",
            ridge="float",
            rng="rng",
        ),
    ),
    "attention.bcd_schedule": (
        schedule.bcd_schedule,
        dict(dim=2, degree=2, n_scratch=3),
        {},
        dict(dim="int", degree="int", n_scratch="int"),
    ),
    "attention.min_deep_width": (
        schedule.min_deep_width,
        dict(dim=2, degree=3),
        {},
        dict(dim="int", degree="int"),
    ),
    "attention.deep_bcd_weights": (
        deep.deep_bcd_weights,
        dict(dim=2, degree=2, width=7, eta=0.5, n_cycles=1),
        {},
        dict(dim="int", degree="int", width="int", eta="float", n_cycles="int"),
    ),
    "attention.deep_predict": (
        deep.deep_predict,
        dict(xs=_XS, ys=_YS, x_query=_XQ, weights=_DEEP),
        {},
        dict(xs="array", ys="array", x_query="array"),
    ),
    "attention.lsa_forward": (
        lsa.lsa_forward,
        dict(Z=_TOKENS, w_kq=_WKQ, w_pv=_WPV),
        {},
        dict(Z="array", w_kq="array", w_pv="array"),
    ),
    "attention.lsa_predict": (
        lsa.lsa_predict,
        dict(xs=_XS, ys=_YS, x_query=_XQ, w_kq=_WKQ, w_pv=_WPV),
        {},
        dict(xs="array", ys="array", x_query="array", w_kq="array", w_pv="array"),
    ),
    "attention.quadratic_features": (
        glu.quadratic_features,
        dict(x=np.ones((3, 2))),
        dict(whitened=False),
        dict(x="array", whitened="flag"),
    ),
    "limits.budget": (
        lambda **kw: _within_budget(**kw),
        {},
        dict(operations=1e10, bytes=2.0**30),
        dict(operations="float+inf?", bytes="float+inf?"),  # inf: no limit, as documented
    ),
    "book.glue": (
        lambda value: book.glue("probe", value, ".3f"),
        dict(value=1.5),
        {},
        dict(value="float"),
    ),
}

# --- the rest of the public API ----------------------------------------------
_X = np.ones((3, 2)) * np.array([0.3, -0.5])


def _tg():
    return torch.Generator().manual_seed(0)


_PHI = lambda x: features.feature_map(x, 2)  # noqa: E731 - a feature map (B, ..., d) -> (..., p)
_P_DIM = features.n_features(2, 2)
_GW = glu.glu_lsa_block_weights(2, 0.5)
_GTOK = glu.glu_embed_prompts(_XS, _YS, _XQ, 3)
_ROW = layers.embed(_XS, _YS, _XQ)  # row tokens (B, N+1, d+1)
_TROW = torch.as_tensor(_ROW)
_BLOCK = features.FeatureBlock(2, ((1,), (0, 1)), "hermite")
_LSA_LAYER = lsa.LinearSelfAttention(2, generator=_tg())
_GLU_LAYER = glu.GLUFeedForward(4, 3, generator=_tg())
_TBLOCK = glu.TransformerBlock(2, 1, 3, generator=_tg())
_DEEP_T = deep.DeepTransformer(2, 6, 2, generator=_tg())
_LBCD = deep.LearnedBCD(2, 2, 7, 2)
_RUN = studies.cohorts("glu")[0].runs[0]
_TINY_COHORT = studies.Cohort(
    "probe", (_RUN,), 4, 0, 1.0, first_check=2, max_steps=4, val_size=8, val_seed=1
)
_TINY_RECORDS = {m.name: train.ConvergenceRecord(m.name) for m in studies.members(_TINY_COHORT)}
_FIG = matplotlib.figure.Figure()
_FIG.add_subplot().plot([0, 1])
_COHORT = studies.cohorts("glu")[0]


def _sampler(rng, b):
    return tasks.sample_linear_prompts(b, 5, 2, rng=rng)


def _member(**kw):
    return train.Member(
        **{
            "name": "m",
            "model": lsa.LinearSelfAttention(2, generator=_tg()),
            "sample_prompts": _sampler,
            "seed": 0,
            "lr": 0.01,
            **kw,
        }
    )


def _kernel_at(make):
    """A kernel factory, evaluated: a bad argument must be refused when the kernel is made or used."""

    def run(**kw):
        return make(**kw)(_XS, _XQ[:, None, :])

    run.__wrapped__ = make
    return run


def _continue_when_unanswered(enabled):
    try:
        return checks.continue_when_unanswered(enabled)
    finally:
        checks.continue_when_unanswered(False)  # never leave the probe's setting behind


def _answer(label):
    return {label: "answer"}


def _on_prompts(func, values, kinds, keywords=None):
    """A spec of a callable of prompts ``(xs, ys, x_query, ...)``: the shared prompt and its kinds."""
    return (
        func,
        dict(xs=_XS, ys=_YS, x_query=_XQ, **values),
        keywords or {},
        dict(xs="array", ys="array", x_query="array", **kinds),
    )


SPECS.update(
    {
        # theory
        "theory.nonlinear_idg_error": (
            theory.nonlinear_idg_error,
            dict(link="tanh", alpha=1.0, tau=2.0, kappa=1.0, noise_var=0.1),
            {},
            dict(
                link="callable",
                alpha="float+inf",
                tau="float+inf",
                kappa="float+inf",
                noise_var="float",
            ),
        ),
        "theory.equivalent_linear_task": (
            theory.equivalent_linear_task,
            dict(link=np.tanh, noise_var=0.1),
            {},
            dict(link="callable", noise_var="float"),
        ),
        # hermite
        "hermite.effective_noise": (
            hermite.effective_noise,
            dict(link=np.tanh, noise_var=0.1),
            dict(kinks=np.array([0.5])),
            dict(link="callable", noise_var="float", kinks="array?"),
        ),
        "hermite.erf_link": (hermite.erf_link, dict(a=1.0), {}, dict(a="float")),
        "hermite.gaussian_expectation": (
            hermite.gaussian_expectation,
            dict(g=np.cos),
            dict(kinks=np.array([0.5])),
            dict(g="callable", kinks="array?"),
        ),
        "hermite.get_link": (hermite.get_link, dict(name="tanh"), {}, dict(name="choice")),
        "hermite.hermite_series": (
            hermite.hermite_series,
            dict(coefficients=np.array([0.0, 1.0, 0.5]), z=np.linspace(-1, 1, 4)),
            dict(normalized=False),
            dict(coefficients="array", z="array", normalized="flag"),
        ),
        "hermite.linear_component": (
            hermite.linear_component,
            dict(f=np.tanh),
            dict(kinks=np.array([0.5])),
            dict(f="callable", kinks="array?"),
        ),
        "hermite.nonlinear_energy": (
            hermite.nonlinear_energy,
            dict(f=np.tanh),
            dict(kinks=np.array([0.5])),
            dict(f="callable", kinks="array?"),
        ),
        "hermite.second_moment": (
            hermite.second_moment,
            dict(f=np.tanh),
            dict(kinks=np.array([0.5])),
            dict(f="callable", kinks="array?"),
        ),
        "hermite.truncation_errors": (
            hermite.truncation_errors,
            dict(f=np.tanh, max_degree=3),
            dict(kinks=np.array([0.5])),
            dict(f="callable", max_degree="int", kinks="array?"),
        ),
        "hermite.Link": (  # a Link is lazy: its function is evaluated where it is used
            lambda **kw: hermite.effective_noise(hermite.Link(**kw)),
            dict(name="probe", func=np.tanh),
            dict(kinks=(0.5,)),
            dict(name="text", func="callable", kinks="array?"),
        ),
        # features
        "features.FeatureBlock": (
            features.FeatureBlock,
            dict(dim=2, index_tuples=((1,), (0, 1)), kind="hermite"),
            {},
            dict(dim="int", index_tuples="object", kind="choice"),
        ),
        "features.feature_degree": (
            features.feature_degree,
            dict(index_tuple=(0, 1)),
            {},
            dict(index_tuple="object"),
        ),
        "features.feature_kernel": (
            lambda feature_blocks: features.feature_kernel(feature_blocks)(_XS, _XS),
            dict(feature_blocks=_BLOCKS),
            {},
            dict(feature_blocks="callable"),
        ),
        "features.partition_features": (
            features.partition_features,
            dict(dim=2, degree=2, block_size=3),
            dict(kind="hermite"),
            dict(dim="int", degree="int", block_size="int", kind="choice"),
        ),
        "features.recurrence_coefficient": (
            features.recurrence_coefficient,
            dict(kind="hermite", k=3),
            {},
            dict(kind="choice", k="int"),
        ),
        # estimators
        "estimators.bayes_optimal_predict": _on_prompts(
            estimators.bayes_optimal_predict,
            dict(noise_var=0.1, prior_var=1.0),
            dict(noise_var="float", prior_var="float"),
        ),
        "estimators.bayes_quadratic_predict": _on_prompts(
            estimators.bayes_quadratic_predict, dict(noise_var=0.1), dict(noise_var="float")
        ),
        "estimators.feature_ridge_predict": _on_prompts(
            estimators.feature_ridge_predict,
            dict(feature_map=_PHI, ridge=0.1),
            dict(feature_map="callable", ridge="float"),
        ),
        "estimators.fit_one_step_preconditioner": _on_prompts(
            estimators.fit_one_step_preconditioner,
            dict(y_query=_YQ, feature_map=_PHI),
            dict(y_query="array", feature_map="callable", ridge="float"),
            dict(ridge=1e-8),
        ),
        "estimators.fit_mixed_preconditioner": (
            estimators.fit_mixed_preconditioner,
            dict(batches=[_P, _P], feature_map=_PHI),
            dict(ridge=1e-8),
            dict(batches="object", feature_map="callable", ridge="float"),
        ),
        "estimators.preconditioned_feature_step_predict": _on_prompts(
            estimators.preconditioned_feature_step_predict,
            dict(feature_map=_PHI, preconditioner=np.eye(_P_DIM)),
            dict(feature_map="callable", preconditioner="array"),
        ),
        "estimators.glu_kernel": (
            _kernel_at(estimators.glu_kernel),
            dict(degree=2),
            {},
            dict(degree="int"),
        ),
        "estimators.hermite_quadratic_kernel": (
            _kernel_at(estimators.hermite_quadratic_kernel),
            {},
            dict(constant=True),
            dict(constant="flag"),
        ),
        "estimators.polynomial_kernel": (
            _kernel_at(estimators.polynomial_kernel),
            dict(degree=2, offset=1.0, scale=1.0),
            {},
            dict(degree="int", offset="float", scale="float"),
        ),
        "estimators.one_step_kernel_gd_predict": _on_prompts(
            estimators.one_step_kernel_gd_predict,
            dict(kernel=_KERNEL, eta=0.5),
            dict(kernel="callable", eta="float"),
        ),
        "theory.one_step_gd_risk": (
            theory.one_step_gd_risk,
            dict(preconditioner=0.3 * np.eye(2), input_cov=np.eye(2), context_len=5, noise_var=0.1),
            {},
            dict(preconditioner="array", input_cov="array", context_len="int", noise_var="float"),
        ),
        "theory.optimal_preconditioner": (
            theory.optimal_preconditioner,
            dict(input_cov=np.eye(2), context_len=5, noise_var=0.1),
            {},
            dict(input_cov="array", context_len="int", noise_var="float"),
        ),
        "theory.optimal_preconditioned_risk": (
            theory.optimal_preconditioned_risk,
            dict(input_cov=np.eye(2), context_len=5, noise_var=0.1),
            {},
            dict(input_cov="array", context_len="int", noise_var="float"),
        ),
        # tasks
        "tasks.sample_cubic_prompts": (
            tasks.sample_cubic_prompts,
            dict(batch=2, context_len=3, dim=2),
            dict(rng=None, noise_var=0.1, task_pool=None, kind="hermite"),
            dict(
                batch="int",
                context_len="int",
                dim="int",
                rng="rng",
                noise_var="float",
                kind="choice",
            ),
        ),
        "tasks.sample_mixed_prompts": (
            tasks.sample_mixed_prompts,
            dict(batch=2, context_len=3, dim=2),
            dict(rng=None, noise_var=0.1),
            dict(batch="int", context_len="int", dim="int", rng="rng", noise_var="float"),
        ),
        "tasks.sample_polynomial_prompts": (
            tasks.sample_polynomial_prompts,
            dict(batch=2, context_len=3, dim=2, degree=3),
            dict(rng=None, noise_var=0.1, kind="legendre"),
            dict(
                batch="int",
                context_len="int",
                dim="int",
                degree="int",
                rng="rng",
                noise_var="float",
                kind="choice",
            ),
        ),
        "tasks.sample_quadratic_prompts": (
            tasks.sample_quadratic_prompts,
            dict(batch=2, context_len=3, dim=2),
            dict(
                rng=None,
                noise_var=0.1,
                task_pool=tasks.sample_quadratic_tasks(4, 2, rng=np.random.default_rng(0)),
            ),
            dict(
                batch="int",
                context_len="int",
                dim="int",
                rng="rng",
                noise_var="float",
                task_pool="array?",
            ),
        ),
        "tasks.sample_quadratic_tasks": (
            tasks.sample_quadratic_tasks,
            dict(n_tasks=3, dim=2),
            dict(rng=None),
            dict(n_tasks="int", dim="int", rng="rng"),
        ),
        "tasks.sample_task_pool": (
            tasks.sample_task_pool,
            dict(n_tasks=3, dim=2),
            dict(rng=None),
            dict(n_tasks="int", dim="int", rng="rng"),
        ),
        # simulate
        "simulate.gamma_errors": (
            simulate.gamma_errors,
            dict(gamma=_GAMMA + 0.1, alpha=1.0, noise_var=0.1, task_pool=np.ones((3, 2))),
            {},
            dict(gamma="array", alpha="float", noise_var="float", task_pool="array?"),
        ),
        "simulate.mc_error": (
            simulate.mc_error,
            dict(gamma=_GAMMA + 0.1, link=np.tanh, alpha=1.0, noise_var=0.1),
            dict(task_pool=np.ones((3, 2)), n_test=50, rng=None),
            # n_test: Monte Carlo prompts, streamed in blocks (memory bounded); the time is linear in
            # n_test and asked for, so a huge n_test is a long run by request ("count")
            dict(
                gamma="array",
                link="callable",
                alpha="float",
                noise_var="float",
                task_pool="array?",
                n_test="count",
                rng="rng",
            ),
        ),
        "simulate.pretrain_reduced_lsa": (
            simulate.pretrain_reduced_lsa,
            dict(dim=3, alpha=1.0, tau=2.0, kappa=2.0, noise_var=0.1, ridge=0.1),
            dict(link=np.tanh, rng=None, tol=1e-10, max_iter=50, solver="auto", sampler="labels"),
            dict(
                dim="int",
                alpha="float",
                tau="float",
                kappa="float+inf",
                noise_var="float",
                ridge="float",
                link="callable",
                rng="rng",
                tol="float",
                max_iter="int?",
                solver="choice",
                sampler="choice",
            ),
        ),
        "simulate.solve_reduced_ridge": (
            simulate.solve_reduced_ridge,
            dict(
                x_query=np.ones((4, 2)) * [0.3, -0.2],
                h=np.arange(12.0).reshape(4, 3) / 10,
                y_query=np.arange(4.0),
                ridge=0.1,
            ),
            dict(tol=1e-10, max_iter=50, preconditioning="auto", solver="pcg"),
            dict(
                x_query="array",
                h="array",
                y_query="array",
                ridge="float",
                tol="float",
                max_iter="int?",
                preconditioning="choice",
                solver="choice",
            ),
        ),
        "simulate.sweep": (
            simulate.sweep,
            dict(points=[{"dim": 3, "alpha": 1.0, "tau": 2.0, "kappa": 2.0, "noise_var": 0.1}]),
            dict(seeds=[0], executor=None),
            dict(points="object", seeds="object", executor="object"),  # executor=None: serial
        ),
        # stats: bool/str/NaN/inf/complex values, empty, one row along the axis ("shorter" of two rows,
        # "extra dim" puts one row on axis 0), and axis of the wrong type or out of range
        "stats.mean_sem": (
            stats.mean_sem,
            dict(values=np.array([[0.5, 1.0], [2.0, 4.0]])),
            dict(axis=0),
            dict(values="array", axis="int?"),
        ),
        # attention
        "attention.LinearSelfAttention": (
            lsa.LinearSelfAttention,
            dict(dim=2),
            dict(init_scale=0.1, generator=_tg(), dtype=torch.float64),
            dict(dim="int", init_scale="float", generator="tgen", dtype="tdtype"),
        ),
        "attention.LinearSelfAttention.forward": _on_prompts(
            lambda xs, ys, x_query: _LSA_LAYER(xs, ys, x_query), {}, {}
        ),
        "attention.LinearSelfAttention.from_weights": (
            lsa.LinearSelfAttention.from_weights,
            dict(w_kq=_WKQ, w_pv=_WPV),
            dict(dtype=torch.float64),
            dict(w_kq="array", w_pv="array", dtype="tdtype"),
        ),
        "attention.gd_lsa_weights": (
            lsa.gd_lsa_weights,
            dict(dim=2, eta=0.5, preconditioner=np.eye(2)),
            {},
            dict(dim="int", eta="float", preconditioner="array?"),
        ),
        "attention.lsa_update": (
            lsa.lsa_update,
            dict(z=_TOKENS, w_kq=_WKQ, w_pv=_WPV),
            {},
            dict(z="array", w_kq="array", w_pv="array"),
        ),
        "attention.token_matrix": _on_prompts(lsa.token_matrix, {}, {}),
        "attention.lsa_query_readout": (
            lsa.lsa_query_readout,
            dict(
                ctx=_TROW[:, :-1],
                z_query=_TROW[:, -1],
                w_kq=torch.as_tensor(_WKQ),
                w_pv_y=torch.as_tensor(_WPV[-1]),
            ),
            {},
            dict(ctx="array", z_query="array", w_kq="array", w_pv_y="array"),
        ),
        "attention.GLUFeedForward": (
            glu.GLUFeedForward,
            dict(embed_dim=4, hidden_dim=3),
            dict(init_scale=0.1, generator=_tg(), dtype=torch.float64),
            dict(
                embed_dim="int",
                hidden_dim="int",
                init_scale="float?",
                generator="tgen",
                dtype="tdtype",
            ),
        ),
        "attention.GLUFeedForward.forward": (
            lambda e: _GLU_LAYER(e),
            dict(e=torch.ones(2, 3, 4, dtype=torch.float64)),
            {},
            dict(e="array"),
        ),
        "attention.GLUFeedForward.load_numpy": (
            lambda w1, w2, w3: glu.GLUFeedForward(4, 3, generator=_tg()).load_numpy(w1, w2, w3),
            dict(w1=np.ones((3, 4)), w2=np.ones((3, 4)), w3=np.ones((4, 3))),
            {},
            dict(w1="array", w2="array", w3="array"),
        ),
        "attention.GLULSABlockWeights": (
            lambda **w: glu.glu_lsa_block_forward(_GTOK, glu.GLULSABlockWeights(**w)),
            dict(_GW._asdict()),
            {},
            dict(
                w1="array",
                w2="array",
                w3="array",
                w_kq="array",
                w_pv="array",
                dim="int",
                constant="flag",
            ),
        ),
        "attention.TransformerBlock": (
            glu.TransformerBlock,
            dict(dim=2, n_scratch=1, hidden_dim=3),
            dict(constant=True, init_scale=0.1, generator=_tg(), dtype=torch.float64),
            dict(
                dim="int",
                n_scratch="int",
                hidden_dim="int",
                constant="flag",
                init_scale="float?",
                generator="tgen",
                dtype="tdtype",
            ),
        ),
        "attention.TransformerBlock.forward": _on_prompts(
            lambda xs, ys, x_query: _TBLOCK(xs, ys, x_query), {}, {}
        ),
        "attention.glu_embed_prompts": _on_prompts(
            glu.glu_embed_prompts,
            dict(n_scratch=3),
            dict(n_scratch="int", constant="flag"),
            dict(constant=True),
        ),
        "attention.glu_lsa_block_forward": (
            glu.glu_lsa_block_forward,
            dict(tokens=_GTOK, weights=_GW),
            {},
            dict(tokens="array", weights="object"),
        ),
        "attention.glu_lsa_block_predict": _on_prompts(
            glu.glu_lsa_block_predict, dict(weights=_GW), dict(weights="object")
        ),
        "attention.glu_lsa_block_weights": (
            glu.glu_lsa_block_weights,
            dict(dim=2, eta=0.5),
            dict(features="kernel"),
            dict(dim="int", eta="float", features="choice"),
        ),
        "attention.glu_token_layout": (
            glu.glu_token_layout,
            dict(dim=2, n_scratch=1),
            dict(constant=True),
            dict(dim="int", n_scratch="int", constant="flag"),
        ),
        "attention.glu_update": (
            glu.glu_update,
            dict(z=np.ones((2, 4, 3)), w1=np.ones((3, 4)), w2=np.ones((3, 4)), w3=np.ones((4, 3))),
            {},
            dict(z="array", w1="array", w2="array", w3="array"),
        ),
        "attention.quadratic_feature_pairs": (
            glu.quadratic_feature_pairs,
            dict(dim=3),
            {},
            dict(dim="int"),
        ),
        "attention.DeepBCDWeights": (
            lambda **w: deep.deep_predict(_XS, _YS, _XQ, deep.DeepBCDWeights(**w)),
            {f: getattr(_DEEP, f) for f in _DEEP.__dataclass_fields__},
            {},
            dict(
                layers="object",
                feature_blocks="object",
                schedule="object",
                dim="int",
                degree="int",
                width="int",
                eta="float",
                n_cycles="int",
                kind="choice",
            ),
        ),
        "attention.DeepTransformer": (
            deep.DeepTransformer,
            dict(dim=2, width=6, depth=2),
            dict(
                hidden_dim=4,
                init_scale=0.1,
                zero_init_residual=True,
                label_norm=True,
                output_bound=5.0,
                generator=_tg(),
                dtype=torch.float64,
            ),
            dict(
                dim="int",
                width="int",
                depth="int",
                hidden_dim="int?",
                init_scale="float?",
                zero_init_residual="flag",
                label_norm="flag",
                output_bound="float?",
                generator="tgen",
                dtype="tdtype",
            ),
        ),
        "attention.DeepTransformer.forward": _on_prompts(
            lambda xs, ys, x_query: _DEEP_T(xs, ys, x_query), {}, {}
        ),
        "attention.LearnedBCD": (
            deep.LearnedBCD,
            dict(dim=2, degree=2, width=7, depth=2),
            dict(eta0=0.1, kind="hermite", dtype=torch.float64),
            dict(
                dim="int",
                degree="int",
                width="int",
                depth="int",
                eta0="float",
                kind="choice",
                dtype="tdtype",
            ),
        ),
        "attention.LearnedBCD.forward": _on_prompts(
            lambda xs, ys, x_query: _LBCD(xs, ys, x_query), {}, {}
        ),
        "attention.deep_forward": (
            deep.deep_forward,
            dict(tokens=glu.glu_embed_prompts(_XS, _YS, _XQ, 3), layers=_DEEP.layers),
            {},
            dict(tokens="array", layers="object"),
        ),
        "attention.layers.embed": _on_prompts(
            layers.embed,
            {},
            dict(n_scratch="int", constant="flag"),
            dict(n_scratch=1, constant=True),
        ),
        "attention.layers.lsa": (
            layers.lsa,
            dict(z=_ROW, w_kq=_WKQ, w_pv=_WPV),
            dict(n_queries=1, queries_only=False),
            dict(z="array", w_kq="array", w_pv="array", n_queries="int", queries_only="flag"),
        ),
        "attention.layers.glu": (
            layers.glu,
            dict(z=_ROW, w1=np.ones((2, 3)), w2=np.ones((2, 3)), w3=np.ones((3, 2))),
            {},
            dict(z="array", w1="array", w2="array", w3="array"),
        ),
        "attention.layers.readout": (layers.readout, dict(z=_ROW), {}, dict(z="array")),
        "attention.layers.bcd_steps": (
            layers.bcd_steps,
            dict(r=_YS, pred=np.zeros(3), steps=[(_BLOCK(_XS), _BLOCK(_XQ), 0.1 * np.eye(2))]),
            {},
            dict(r="array", pred="array", steps="object"),
        ),
        # book
        "book.claim": (
            book.claim,
            dict(holds=True, sentence="a probe"),
            {},
            dict(holds="flag", sentence="text"),
        ),
        "book.load_table": (
            book.load_table,
            dict(name="asymptotics_points"),
            {},
            dict(name="choice"),
        ),
        # plotting
        "plotting.figure_png": (plotting.figure_png, dict(fig=_FIG), {}, dict(fig="object")),
        "plotting.smallest_font_size": (
            plotting.smallest_font_size,
            dict(fig=_FIG),
            {},
            dict(fig="object"),
        ),
        # checks
        **{
            f"checks.{name}": (getattr(checks, name), {arg: None}, {}, _answer(arg))
            for name, arg in [
                ("check_asymptotics_ex1", "limit_error"),
                ("check_asymptotics_ex3", "asymptotic_gap"),
                ("check_asymptotics_ex4", "simulate_icl"),
                ("check_depth_ex2", "bcd_predict"),
                ("check_depth_ex3", "min_layers"),
                ("check_glu_ex1", "min_width"),
                ("check_glu_ex2", "inhomogeneous_block_weights"),
                ("check_glu_ex4", "excess_constant"),
                ("check_hermite_ex1", "relu_coefficient"),
                ("check_hermite_ex3", "erf_effective_noise"),
                ("check_lsa_ex1", "best_eta"),
                ("check_lsa_ex2", "lsa_weights_from_w0"),
                ("check_nonlinear_ex1", "equivalent_from_coefficients"),
                ("check_nonlinear_ex3", "design_teacher"),
                ("check_prologue_ex1", "ridge_prediction"),
                ("check_prologue_ex2", "best_eta"),
            ]
        },
        "checks.check_lsa_ex4": (
            checks.check_lsa_ex4,
            dict(
                gamma_predicted=np.eye(2),
                predict_learned=estimators.ols_predict,
                input_cov=np.eye(2),
                context_len=5,
                noise_var=0.1,
            ),
            {},
            dict(
                gamma_predicted="answer-value",
                predict_learned="answer",
                input_cov="array",
                context_len="int",
                noise_var="float",
            ),
        ),
        "checks.call_answer": (
            lambda label, func: checks.call_answer(label, func, 1.0),
            dict(label="probe-ex1", func=np.tanh),
            {},
            dict(label="text", func="answer-call"),
        ),
        "checks.require_close": (
            checks.require_close,
            dict(label="probe-ex1", got=np.ones(2), expected=np.ones(2)),
            dict(rtol=1e-6, atol=1e-9, hint="a hint"),
            dict(
                label="text",
                got="answer-value",
                expected="array",
                rtol="float",
                atol="float",
                hint="text",
            ),
        ),
        "checks.passed": (checks.passed, dict(label="probe-ex1"), {}, dict(label="text")),
        "checks.continue_when_unanswered": (
            _continue_when_unanswered,
            dict(enabled=True),
            {},
            dict(enabled="flag"),
        ),
        # studies
        "studies.RunSpec": (
            lambda **kw: studies.build_model(studies.RunSpec(**kw)),
            dict(model="block", task="quadratic", context_len=5, seed=0, lr=0.01),
            dict(n_scratch=2, hidden=3, depth=1, init="random", dim=0, width=0, batch_size=4),
            dict(
                model="choice",
                task="choice",
                context_len="int",
                seed="int",
                lr="float",
                n_scratch="int",
                hidden="int",
                depth="int",
                init="choice",
                dim="int",
                width="int",
                batch_size="int",
            ),
        ),
        "studies.Cohort": (
            lambda **kw: studies.study_trainer(studies.Cohort(**kw)),
            dict(name="probe", runs=(_RUN,), batch_size=4, warmup=0, clip_grad=1.0),
            dict(
                decay_start=0, first_check=2, max_steps=4, val_size=8, val_seed=1, dtype="float64"
            ),
            dict(
                name="text",
                runs="object",
                batch_size="int",
                warmup="count",
                clip_grad="float?",
                decay_start="count",
                first_check="count",
                max_steps="count",
                val_size="int",
                val_seed="int",
                dtype="choice",
            ),
        ),
        "studies.build_model": (studies.build_model, dict(run=_RUN), {}, dict(run="object")),
        "studies.cohorts": (studies.cohorts, dict(study="glu"), {}, dict(study="choice")),
        "studies.load_study": (
            studies.load_study,
            dict(study="glu"),
            dict(path=None),
            dict(study="choice", path="object"),
        ),
        "studies.make_sampler": (
            lambda run, context_len: studies.make_sampler(run, context_len)(_rng(), 4),
            dict(run=_RUN, context_len=5),
            {},
            dict(run="object", context_len="int"),
        ),
        "studies.members": (studies.members, dict(cohort=_COHORT), {}, dict(cohort="object")),
        "studies.select_runs": (
            lambda runs, model: studies.select_runs(runs, model=model),
            dict(runs=studies.load_study("glu"), model="block"),
            {},
            dict(runs="object", model="choice"),
        ),
        "studies.study_arrays": (
            studies.study_arrays,
            dict(
                cohort=_TINY_COHORT,
                trainer=studies.study_trainer(_TINY_COHORT),
                records=_TINY_RECORDS,
            ),
            {},
            dict(cohort="object", trainer="object", records="object"),
        ),
        "studies.study_path": (studies.study_path, dict(study="glu"), {}, dict(study="choice")),
        "studies.study_trainer": (
            studies.study_trainer,
            dict(cohort=_COHORT),
            {},
            dict(cohort="object"),
        ),
        "studies.train_study": (
            # only the study's name is probed: any accepted call would train (hours)
            lambda study: studies.train_study(study, checkpoints="/nonexistent/probe", max_steps=1),
            dict(study="glu"),
            {},
            dict(study="choice"),
        ),
        "studies.validation_prompts": (
            studies.validation_prompts,
            dict(cohort=_COHORT, run=_RUN),
            {},
            dict(cohort="object", run="object"),
        ),
        # train
        "train.Member": (
            lambda **kw: train.BatchedTrainer([train.Member(**kw)], batch_size=4).step(),
            dict(
                name="m",
                model=lsa.LinearSelfAttention(2, generator=_tg()),
                sample_prompts=_sampler,
                seed=0,
                lr=0.01,
            ),
            dict(warmup=0, batch_size=4, decay_start=0),
            dict(
                name="text",
                model="object",
                sample_prompts="callable",
                seed="int",
                lr="float",
                warmup="count",
                batch_size="int?",
                decay_start="count",
            ),
        ),
        "train.BatchedTrainer": (
            train.BatchedTrainer,
            dict(members=[_member()]),
            dict(
                batch_size=4,
                schedule="rsqrt",
                clip_grad=1.0,
                chunk_size=1,
                device="cpu",
                dtype=torch.float64,
            ),
            dict(
                members="object",
                batch_size="int",
                schedule="choice",
                clip_grad="float?",
                chunk_size="int",
                device="choice?",
                dtype="tdtype",
            ),
        ),
        "train.check_steps": (
            train.check_steps,
            dict(first_check=2, max_steps=8),
            {},
            dict(first_check="int", max_steps="int"),
        ),
        "train.converged_at": (
            train.converged_at,
            dict(val_mse=np.array([1.0, 0.9]), change_se=np.array([0.0, 0.2])),
            {},
            dict(val_mse="array", change_se="array"),
        ),
        "train.evaluate_in_context": (
            train.evaluate_in_context,
            dict(model=_LSA_LAYER, prompts=_P),
            dict(chunk_size=2),
            dict(model="object", prompts="object", chunk_size="int"),
        ),
        "train.predict_in_context": (
            train.predict_in_context,
            dict(model=_LSA_LAYER, prompts=_P),
            dict(chunk_size=2),
            dict(model="object", prompts="object", chunk_size="int"),
        ),
        "train.prompts_to_torch": (
            train.prompts_to_torch,
            dict(prompts=_P),
            dict(device="cpu", dtype=torch.float64),
            dict(prompts="object", device="choice?", dtype="tdtype"),
        ),
        "train.train_in_context": (
            train.train_in_context,
            dict(model=lsa.LinearSelfAttention(2, generator=_tg()), sample_prompts=_sampler),
            dict(
                steps=2,
                lr=0.01,
                seed=0,
                batch_size=4,
                weight_decay=0.0,
                clip_grad=1.0,
                schedule="constant",
                warmup=0,
                progress=False,
                dtype=torch.float64,
            ),
            dict(
                model="object",
                sample_prompts="callable",
                steps="count",
                lr="float",
                seed="int",
                batch_size="int",
                weight_decay="float",
                clip_grad="float?",
                schedule="choice",
                warmup="count",
                progress="flag",
                dtype="tdtype",
            ),
        ),
        "train.train_to_convergence": (
            lambda **kw: train.train_to_convergence(
                train.BatchedTrainer([_member()], batch_size=4), **kw
            ),
            dict(val_prompts={"m": _P}),
            dict(first_check=2, max_steps=4),
            dict(val_prompts="object", first_check="count", max_steps="count"),
        ),
    }
)

# Which public name each spec probes, where the callable is a wrapper (a lambda, a method or a factory
# evaluated): the coverage test (tests/test_probe_coverage.py) counts a public name as probed when a
# spec names it here or its callable is the public object itself.
COVERS = {
    "limits.budget": "icl_book.limits.budget",
    "book.glue": "icl_book.book.glue",
    "hermite.Link": "icl_book.hermite.Link",
    "features.feature_kernel": "icl_book.features.feature_kernel",
    "estimators.glu_kernel": "icl_book.estimators.glu_kernel",
    "estimators.hermite_quadratic_kernel": "icl_book.estimators.hermite_quadratic_kernel",
    "estimators.polynomial_kernel": "icl_book.estimators.polynomial_kernel",
    "attention.LinearSelfAttention.forward": "icl_book.attention.lsa.LinearSelfAttention",
    "attention.LinearSelfAttention.from_weights": "icl_book.attention.lsa.LinearSelfAttention",
    "attention.GLUFeedForward.forward": "icl_book.attention.glu.GLUFeedForward",
    "attention.GLUFeedForward.load_numpy": "icl_book.attention.glu.GLUFeedForward",
    "attention.GLULSABlockWeights": "icl_book.attention.glu.GLULSABlockWeights",
    "attention.TransformerBlock.forward": "icl_book.attention.glu.TransformerBlock",
    "attention.DeepBCDWeights": "icl_book.attention.deep.DeepBCDWeights",
    "attention.DeepTransformer.forward": "icl_book.attention.deep.DeepTransformer",
    "attention.LearnedBCD.forward": "icl_book.attention.deep.LearnedBCD",
    "checks.call_answer": "icl_book.checks.call_answer",
    "checks.continue_when_unanswered": "icl_book.checks.continue_when_unanswered",
    "studies.RunSpec": "icl_book.studies.RunSpec",
    "studies.Cohort": "icl_book.studies.Cohort",
    "studies.make_sampler": "icl_book.studies.make_sampler",
    "studies.select_runs": "icl_book.studies.select_runs",
    "studies.train_study": "icl_book.studies.train_study",
    "train.Member": "icl_book.train.Member",
    "train.train_to_convergence": "icl_book.train.train_to_convergence",
}


def probed_names() -> set[str]:
    """The public names (``module.name``) some spec probes."""
    out = set(COVERS.values())
    for func, *_ in SPECS.values():
        target = getattr(func, "__wrapped__", func)
        module, qualname = getattr(target, "__module__", ""), getattr(target, "__qualname__", "")
        if module.startswith("icl_book") and "<" not in qualname:
            out.add(f"{module}.{qualname.split('.')[0]}")  # a method probes its class
    return out


# Argument aliases a message may use instead of the parameter's name.
# A Link's ``func`` is evaluated as ``f`` by the hermite functions it is passed to.
ALIASES = {
    "link": ("f",),
    "f": ("link",),
    "func": ("f",),
    "feature_blocks": ("block",),
}


# --- bad values by kind -------------------------------------------------------------------------------
def _mutations(kind: str, valid):
    """(label, value, never_valid) triples; never_valid: accepting it silently is a wrong answer."""
    if kind.endswith("?"):  # optional: None is the documented default, every other mutation applies
        return [m for m in _mutations(kind[:-1], valid) if m[0] != "None"]
    if kind == "text":  # free text (a sentence, a label, a name)
        return [("None", None, True), ("int", 3, True), ("empty", "", True)]
    common = [("None", None, True), ("str", "1", True), ("bool", True, True)]
    if kind.startswith("float"):
        out = [*common, ("nan", float("nan"), True), ("complex", 1 + 1j, True)]
        out.append(("inf", float("inf"), kind != "float+inf"))
        out.append(("-inf", -float("inf"), True))
        out.append(("array", np.full(2, 0.7), False))  # not 1: τ = 1 is the documented divergence
        return out
    if kind in ("int", "count"):
        out = [
            *common,
            ("float", 2.5, True),
            ("nan", float("nan"), True),
            ("negative", -3, True),
        ]
        # "count": a number of steps or checks, whose cost is linear in it and asked for (a huge
        # count is a long run by request, not a cliff); "int": a size, where a huge one must be refused
        return out if kind == "count" else [*out, ("huge", 10**12, False)]
    if kind == "object":  # a structured argument (a figure, a config, a model): wrong types only
        return [("None", None, valid is not None), ("str", "1", True), ("float", 3.0, True)]
    if kind == "tdtype":
        return [("None", None, True), ("str", "float64", True), ("int64", torch.int64, True)]
    if kind == "tgen":
        return [("numpy Generator", np.random.default_rng(0), True), ("int seed", 0, True)]
    if kind in ("answer", "answer-call"):  # a student's function: a CheckFailed is the clear answer
        out = [("None", None, True), ("not callable", 3.0, True)]
        if kind == "answer":
            out += [
                ("None-return", lambda *a, **k: None, True),
                ("nan-return", lambda *a, **k: float("nan"), True),
                ("raises", lambda *a, **k: 1 / 0, True),
            ]
        return out
    if kind == "answer-value":  # a student's value
        return [("None", None, True), ("str", "1", True), ("nan", float("nan"), True)]
    if kind == "flag":
        return [("None", None, True), ("str", "False", True), ("int", 2, True)]
    if kind == "rng":
        return [
            ("None", None, True),
            ("bool seed", True, True),
            ("negative seed", -1, True),
            ("RandomState", np.random.RandomState(0), True),
        ]
    if kind == "callable":
        return [
            ("None-return", lambda *a: None, True),
            ("nan-return", lambda *a: np.full(np.shape(a[0])[:-1] + (2,), np.nan), True),
            ("not callable", 3.0, True),
        ]
    if kind == "choice":
        return [("None", None, True), ("unknown", "nope", True), ("bool", True, True)]
    if kind.startswith("array"):
        arr = np.asarray(valid, dtype=float)
        out = [
            ("None", None, True),
            ("str", "1", True),
            ("bool", True, True),
            ("bool array", arr > 0, True),
            ("complex array", arr + 1j, True),
            ("str array", arr.astype(str), True),
            ("extra dim", arr[None], False),
            ("empty", np.zeros((0,) * max(arr.ndim, 1)), False),
        ]
        if arr.size:
            bad = arr.copy()
            bad.flat[0] = np.nan
            out.append(("nan entry", bad, True))
            bad = arr.copy()
            bad.flat[0] = np.inf
            out.append(("inf entry", bad, kind != "array+inf"))
        if arr.ndim >= 1 and arr.shape[0] > 1:
            out.append(("shorter", arr[:-1], False))  # inconsistent lengths with the others
        return out
    return []


def _finite(result) -> bool:
    values = []

    def walk(v):
        if isinstance(v, (float, int, np.number)) and not isinstance(v, bool):
            values.append(float(v))
        elif isinstance(v, np.ndarray) and v.dtype.kind in "iuf":
            values.append(v)
        elif isinstance(v, torch.Tensor) and v.is_floating_point():
            values.append(v.detach().numpy())
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)

    walk(result)
    return all(np.all(np.isfinite(v)) for v in values)


def _names(arg: str) -> tuple[str, ...]:
    return (arg, *ALIASES.get(arg, ()))


# What tests/test_declarations.py generates from a declaration, this table does not restate; it
# keeps shapes, callables' outputs and the results of accepted values, which a declaration does not
# state. Two levels: kinds whose every bad value a declaration states (a number's interval, an
# integer's range, a flag, options, an rng, text) are left to it whole; of the other kinds (arrays,
# objects, callables), each mutation the generated suite tries as the same bad value (None, a
# string, a boolean, a boolean, complex or string array, a NaN or infinite entry, an instance of
# the wrong type, something not callable) is left to it, which asks more: the refusal must come
# from the declaration, before the body, and name the argument.
_GENERATED_KINDS = ("int", "count", "float", "float+inf", "flag", "choice", "rng", "text")


def _constraint(func, arg: str):
    """The declared constraint of ``arg`` of ``func`` (or of the class it builds); ``None`` where
    it is undeclared or ``Free`` (checked by the body, so probed here)."""
    target = getattr(func, "__init__", None) if isinstance(func, type) else func
    declaration = getattr(target, "__declaration__", None)
    constraint = declaration.constraints.get(arg) if declaration is not None else None
    return None if isinstance(constraint, _declare.Free) else constraint


def _same_bad_value(hand, generated) -> bool:
    """Whether a hand-written mutation is the same kind of bad value as one the generated suite
    tries: ``None``, an equal scalar or string, or an array whose defect is the same (booleans,
    complex numbers, strings, a NaN, an infinity). A finite float array (a shape or a range) is
    never the same: the generated suite's finite arrays are out-of-range values, not shapes."""
    if hand is None or generated is None:
        return hand is generated
    if isinstance(hand, np.ndarray) or isinstance(generated, np.ndarray):
        if not (isinstance(hand, np.ndarray) and isinstance(generated, np.ndarray)):
            return False
        if hand.dtype.kind != generated.dtype.kind:
            return False
        if hand.dtype.kind != "f":
            return hand.dtype.kind in "bcUSO"
        return any(
            bool(test(hand).any()) and bool(test(generated).any()) for test in (np.isnan, np.isinf)
        )
    if type(hand) is not type(generated) or callable(hand):
        return False
    try:
        return bool(hand == generated) or (hand != hand and generated != generated)  # NaN
    except (TypeError, ValueError):
        return False


def hand_written(func, arg: str, kind: str, value) -> bool:
    """Whether this suite probes ``arg = value`` itself (see the comment above)."""
    constraint = _constraint(func, arg)
    if constraint is None:
        return True
    if kind.rstrip("?") in _GENERATED_KINDS:
        return False
    return not any(_same_bad_value(value, bad) for bad in constraint.invalid())


def probe(name: str, timeout: float = TIMEOUT_S):
    """Every (argument, mutation) of one callable: a list of (arg, label, outcome, detail)."""
    func, positional, keywords, kinds = SPECS[name]
    rows = []
    old = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        for arg, kind in kinds.items():
            base = {**positional, **keywords}
            for label, value, never_valid in _mutations(kind, base.get(arg)):
                if not hand_written(func, arg, kind, value):
                    continue
                call = dict(base, **{arg: value})
                if "rng" in kinds and arg != "rng":
                    call["rng"] = _rng()
                start = time.perf_counter()
                signal.setitimer(signal.ITIMER_REAL, timeout)
                try:
                    result = func(**call)
                except _Hang:
                    rows.append((arg, label, "hang", f"> {timeout} s"))
                    continue
                except checks.CheckFailed as err:  # a check's verdict on a student's answer
                    ok = kind.startswith("answer")
                    rows.append((arg, label, "clear" if ok else "unclear", str(err)[:160]))
                    continue
                except (TypeError, ValueError) as err:
                    text = str(err)
                    named = any(n in text for n in _names(arg))
                    rows.append((arg, label, "clear" if named else "unclear", text[:160]))
                    continue
                except Exception as err:  # noqa: BLE001 - any other kind is what we look for
                    rows.append((arg, label, "unclear", f"{type(err).__name__}: {err}"[:160]))
                    continue
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                elapsed = time.perf_counter() - start
                if never_valid:
                    rows.append((arg, label, "silent", repr(result)[:120]))
                elif not _finite(result) and not (kind.endswith("+inf") and "inf" in label):
                    rows.append((arg, label, "nonfinite", repr(result)[:120]))
                else:
                    rows.append((arg, label, "accepted", f"{elapsed:.2f} s"))
    finally:
        signal.signal(signal.SIGALRM, old)
    return rows


# Outcomes that are not "clear" or a finite, accepted return, each with its reason, keyed by
# (callable, argument, mutation label). Empty: every probe above gives a clear error or a finite value.
# The training entry points (icl_book/train.py) are probed by hand with the same classes in
# tests/test_train_batched.py (integer dtypes, NaN labels, a string for a flag).
ALLOWED: dict[tuple[str, str, str], str] = {
    ("simulate.sweep", "executor", "None"): (
        "not a bad input (executor=None runs serially); the row's icl_sem/idg_sem are NaN because "
        "the spec runs one seed: SweepResult documents 'nan for one seed' (no spread to estimate), "
        "and the stored tables read it that way"
    ),
    ("studies.make_sampler", "context_len", "None"): (
        "not a bad input: None is make_sampler's documented default (the run's own context_len, "
        "what members() and validation_prompts() use); every other value is validated as an integer "
        ">= 0"
    ),
    **{
        ("checks.require_close", "expected", label): (
            "not a bad input of the check: the probe changes the shape of expected while the answer "
            "keeps its own, and an answer whose shape differs from the reference is a wrong answer; "
            "require_close reports it as the student's CheckFailed ('expected shape ..., got ...'), "
            "which is what a grader must record"
        )
        for label in ("extra dim", "empty", "shorter")
    },
    ("train.converged_at", "change_se", "nan entry"): (
        "not a bad input: ConvergenceRecord.change_se is documented as nan where the previous "
        "checkpoint's errors are not known, which is always its first entry (the entry this probe "
        "sets); converged_at refuses inf and reads only the last entry (nan there: not converged)"
    ),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_bad_inputs_get_a_clear_error_or_a_finite_answer(name):
    rows = probe(name)
    bad = [
        (arg, label, outcome, detail)
        for arg, label, outcome, detail in rows
        if outcome not in ("clear", "accepted") and (name, arg, label) not in ALLOWED
    ]
    assert not bad, "\n".join(f"{name}({arg}={label}): {o}: {d}" for arg, label, o, d in bad)


def test_what_is_left_to_the_generated_suite_is_generated():
    """Every declaration a spec defers to is one tests/test_declarations.py probes (a public
    callable's), so no mutation this suite leaves to it goes untried."""
    from .test_declarations import DECLARED, _declaration, _public_callables

    generated = {id(_declaration(_public_callables()[name])) for name in DECLARED}
    deferred = [
        name
        for name, (func, _, _, kinds) in SPECS.items()
        if any(_constraint(func, arg) is not None for arg in kinds)
        and id(getattr(func.__init__ if isinstance(func, type) else func, "__declaration__", None))
        not in generated
    ]
    assert deferred == []


# Specs whose unmutated call is not a valid call, and why: everything else must run, or each
# mutation would be refused for the base's fault, not its own.
INVALID_BASE = {
    "studies.train_study": "a valid study name trains for hours; only bad names are probed",
    **{
        name: "the base is the student's unanswered stub (None); only the bad answers are probed"
        for name in SPECS
        if name.startswith("checks.check_")
    },
}


@pytest.mark.parametrize("name", sorted(set(SPECS) - set(INVALID_BASE)))
def test_every_spec_starts_from_a_valid_call(name):
    func, positional, keywords, kinds = SPECS[name]
    call = {**positional, **keywords}
    if "rng" in kinds:
        call["rng"] = _rng()
    func(**call)


def summary() -> collections.Counter:
    """Counts of each outcome over every spec, printing every finding
    (for a report: python -m tests.test_probe_inputs)."""
    counts = collections.Counter()
    for name in SPECS:
        for arg, label, outcome, detail in probe(name):
            counts[outcome] += 1
            if outcome not in ("clear", "accepted"):
                print(f"{name}({arg}={label}): {outcome}: {detail}")
    return counts


if __name__ == "__main__":
    start = time.perf_counter()
    total = summary()
    print(f"{len(SPECS)} specs; all: {dict(total)}")
    print(f"{time.perf_counter() - start:.1f} s")
