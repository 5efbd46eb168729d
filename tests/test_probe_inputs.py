"""Probe suite (issue 35): bad inputs, by class, against the package's public callables.

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
``clear`` or an accepted, finite return, except those in ``ALLOWED`` (each argued there).
"""

from __future__ import annotations

import collections
import signal
import time

import numpy as np
import pytest

from icl_book import book, estimators, features, hermite, simulate, tasks, theory
from icl_book.attention import deep, glu, lsa

TIMEOUT_S = 5.0


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
    "estimators.best_one_step_eta": (
        estimators.best_one_step_eta,
        dict(input_cov=np.eye(2), context_len=5, noise_var=0.1),
        {},
        dict(input_cov="array", context_len="int", noise_var="float"),
    ),
    "estimators.best_linear_risk_quadratic": (
        estimators.best_linear_risk_quadratic,
        dict(A=np.eye(2), noise_var=0.1),
        {},
        dict(A="array", noise_var="float"),
    ),
    "estimators.hermite_one_step_excess_risk": (
        estimators.hermite_one_step_excess_risk,
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
        dict(rng=None, noise_var=0.1, link=np.tanh, return_tasks=False),
        dict(
            batch="int",
            context_len="int",
            dim="int",
            rng="rng",
            noise_var="float",
            link="callable",
            return_tasks="flag",
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
        deep.bcd_schedule,
        dict(dim=2, degree=2, n_scratch=3),
        {},
        dict(dim="int", degree="int", n_scratch="int"),
    ),
    "attention.min_deep_width": (
        deep.min_deep_width,
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
    "book.glue": (
        lambda value: book.glue("probe", value, ".3f"),
        dict(value=1.5),
        {},
        dict(value="float"),
    ),
}

# Argument aliases a message may use instead of the parameter's name.
ALIASES = {"noise_var": ("rho",), "link": ("f",), "f": ("link",), "feature_blocks": ("block",)}


# --- bad values by kind -------------------------------------------------------------------------------
def _mutations(kind: str, valid):
    """(label, value, never_valid) triples; never_valid: accepting it silently is a wrong answer."""
    common = [("None", None, True), ("str", "1", True), ("bool", True, True)]
    if kind.startswith("float"):
        out = [*common, ("nan", float("nan"), True), ("complex", 1 + 1j, True)]
        out.append(("inf", float("inf"), kind != "float+inf"))
        out.append(("-inf", -float("inf"), True))
        out.append(("array", np.full(2, 0.7), False))  # not 1: τ = 1 is the documented divergence
        return out
    if kind == "int":
        return [
            *common,
            ("float", 2.5, True),
            ("nan", float("nan"), True),
            ("negative", -3, True),
            ("huge", 10**12, False),
        ]
    if kind == "flag":
        return [("None", None, True), ("str", "False", True), ("int", 2, True)]
    if kind == "rng":
        return [
            ("None", None, True),
            ("int seed", 0, True),
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
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)

    walk(result)
    return all(np.all(np.isfinite(v)) for v in values)


def _names(arg: str) -> tuple[str, ...]:
    return (arg, *ALIASES.get(arg, ()))


def probe(name: str):
    """Every (argument, mutation) of one callable: a list of (arg, label, outcome, detail)."""
    func, positional, keywords, kinds = SPECS[name]
    rows = []
    old = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        for arg, kind in kinds.items():
            base = {**positional, **keywords}
            for label, value, never_valid in _mutations(kind, base.get(arg)):
                call = dict(base, **{arg: value})
                if "rng" in kinds and arg != "rng":
                    call["rng"] = _rng()
                start = time.perf_counter()
                signal.setitimer(signal.ITIMER_REAL, TIMEOUT_S)
                try:
                    result = func(**call)
                except _Hang:
                    rows.append((arg, label, "hang", f"> {TIMEOUT_S} s"))
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
ALLOWED: dict[tuple[str, str, str], str] = {}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_bad_inputs_get_a_clear_error_or_a_finite_answer(name):
    rows = probe(name)
    bad = [
        (arg, label, outcome, detail)
        for arg, label, outcome, detail in rows
        if outcome not in ("clear", "accepted") and (name, arg, label) not in ALLOWED
    ]
    assert not bad, "\n".join(f"{name}({arg}={label}): {o}: {d}" for arg, label, o, d in bad)


def summary() -> collections.Counter:
    """Counts of each outcome over every spec (for the report: python -m tests.test_probe_inputs)."""
    counts = collections.Counter()
    for name in SPECS:
        for arg, label, outcome, detail in probe(name):
            counts[outcome] += 1
            if outcome not in ("clear", "accepted"):
                print(f"{name}({arg}={label}): {outcome}: {detail}")
    return counts


if __name__ == "__main__":
    start = time.perf_counter()
    print(summary(), f"{time.perf_counter() - start:.1f} s")
