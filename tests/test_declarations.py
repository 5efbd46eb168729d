"""The probe suite generated from the declarations (icl_book/_declare.py), as scikit-learn's
``test_public_functions`` generates its bad inputs from ``validate_params``.

Every public callable of ``icl_book`` (every name in an ``__all__``; a class through its
``__init__``) is *declared* (``__declaration__``: a constraint for each argument, and a cost where
its work grows with one), or listed in :data:`NOT_DECLARED` with its reason (an exception, a result
container, an exercise's check, a frozen dataclass that validates its fields). A new public function
in neither fails ``test_every_public_callable_is_declared``.

For each declared callable, every argument in turn gets each value its constraint refuses, the
others a value their constraints accept; the call must raise a ``TypeError``/``ValueError`` naming
that argument within :data:`LIMIT_S`, before the body runs. Every argument a declared cost's formula
names, given an integer of 10¹⁵, must be refused as a :class:`~icl_book.limits.CostRefused` within
the same time, naming it. The hand-written suite (``tests/test_probe_inputs.py``) keeps what the
declarations cannot state: shapes that must agree between arguments, callables' outputs, and the
accepted, finite results of valid calls.
"""

from __future__ import annotations

import importlib
import inspect
import re
import signal
import time

import numpy as np
import pytest
import torch

import icl_book.estimators
from icl_book import _declare
from icl_book.limits import CostRefused

from .test_api_reference import public_names

LIMIT_S = 1.0

_RESULT = (
    "a result container the package builds and returns (a NamedTuple or dataclass of computed "
    "values); the functions that build it and those that take it back are declared"
)
_ERROR = "an exception class: it takes a message, no data"
_CHECK = (
    "an exercise's check: its argument is the student's answer, and anything wrong with it is the "
    "student's CheckFailed (the grader's verdict), not a bad argument; the hand-written suite "
    "probes it with wrong answers"
)
_FIELDS = (
    "a frozen dataclass whose __post_init__ validates every field (a generated __init__ cannot be "
    "declared); the hand-written suite probes it"
)


def _public_names_of(module: str) -> list[str]:
    return [n for n in public_names() if n.rsplit(".", 1)[0] == module]


#: Public callables that are not declared, and why.
NOT_DECLARED: dict[str, str] = {
    "icl_book.book.ClaimFailed": _ERROR,
    "icl_book.checks.CheckFailed": _ERROR,
    "icl_book.checks.NotAnswered": _ERROR,
    "icl_book.limits.CostRefused": _ERROR,
    "icl_book.train.TrainingDiverged": _ERROR,
    "icl_book.book.in_colab": "takes no argument",
    "icl_book.plotting.use_book_style": "takes no argument",
    "icl_book.limits.current_budget": "takes no argument",
    "icl_book.limits.budget": (
        "the declarations' own budget: checked in its body (declaring it would make icl_book.limits "
        "import the module that imports it)"
    ),
    **{
        name: _CHECK
        for name in _public_names_of("icl_book.checks")
        if name.rsplit(".", 1)[1].startswith("check_")
    },
    "icl_book.hermite.Link": _FIELDS,
    "icl_book.features.FeatureBlock": _FIELDS,
    "icl_book.studies.RunSpec": _FIELDS,
    "icl_book.studies.Cohort": _FIELDS,
    "icl_book.train.Member": _FIELDS,
    **{
        f"icl_book.{name}": _RESULT
        for name in (
            "attention.deep.DeepBCDWeights",
            "attention.glu.GLULSABlockWeights",
            "attention.glu.TokenLayout",
            "attention.lsa.LSAWeights",
            "checks.Passed",
            "checks.Unanswered",
            "estimators.BayesPrediction",
            "estimators.RidgeChoice",
            "simulate.MCError",
            "simulate.PretrainedLSA",
            "simulate.ProblemSizes",
            "simulate.ReducedPrompts",
            "simulate.RidgeSolution",
            "simulate.SimulatedErrors",
            "simulate.SolveInfo",
            "simulate.SweepResult",
            "stats.MeanSEM",
            "studies.StudyRun",
            "tasks.Prompts",
            "theory.EquivalentTask",
            "theory.TaskMoments",
            "train.ConvergenceRecord",
            "train.TrainResult",
        )
    },
}


def _public_callables() -> dict[str, object]:
    out = {}
    for name in public_names():
        module, attr = name.rsplit(".", 1)
        obj = getattr(importlib.import_module(module), attr)
        if callable(obj):
            out[name] = obj
    return out


def _declaration(obj):
    return getattr(obj.__init__ if inspect.isclass(obj) else obj, "__declaration__", None)


def undeclared(callables=None) -> list[str]:
    callables = _public_callables() if callables is None else callables
    return [
        name
        for name, obj in callables.items()
        if _declaration(obj) is None and name not in NOT_DECLARED
    ]


DECLARED = sorted(n for n, obj in _public_callables().items() if _declaration(obj) is not None)


def test_every_public_callable_is_declared():
    missing = undeclared()
    assert missing == [], (
        f"{len(missing)} public callables have no declaration (icl_book._declare.declare) and no "
        f"argued entry in NOT_DECLARED: {missing}"
    )


def test_the_lists_are_current():
    """No stale entry: every listed name is a public callable and not declared after all."""
    callables = _public_callables()
    assert sorted(set(NOT_DECLARED) - set(callables)) == []
    assert sorted(n for n in NOT_DECLARED if _declaration(callables[n]) is not None) == []


def test_a_new_public_function_without_a_declaration_fails(monkeypatch):
    def new_estimator(xs, ys, x_query):
        return xs

    new_estimator.__module__ = "icl_book.estimators"
    new_estimator.__qualname__ = "new_estimator"
    monkeypatch.setattr(icl_book.estimators, "new_estimator", new_estimator, raising=False)
    monkeypatch.setattr(
        icl_book.estimators, "__all__", [*icl_book.estimators.__all__, "new_estimator"]
    )
    assert undeclared() == ["icl_book.estimators.new_estimator"]
    with pytest.raises(AssertionError, match="new_estimator"):
        test_every_public_callable_is_declared()


def test_a_declaration_must_cover_every_argument():
    with pytest.raises(TypeError, match=r"no constraint declared for \['b'\]"):

        @_declare.declare(a=_declare.Integer())
        def f(a, b):
            return a


# --- the generated probes -------------------------------------------------------------------------
def _examples() -> dict[type, object]:
    """A valid instance of each class a declaration asks for (built once)."""
    import matplotlib.figure

    from icl_book import studies, train
    from icl_book.attention import deep, glu, lsa
    from icl_book.tasks import sample_linear_prompts

    def sampler(rng, b):
        return sample_linear_prompts(b, 4, 2, rng=rng)

    model = lsa.LinearSelfAttention(2, generator=torch.Generator().manual_seed(0))
    member = train.Member("m", model, sampler, 0, 0.01)
    run = studies.RunSpec("lsa", "quadratic", 5, 0, 0.01)
    return {
        train.ConvergenceRecord: train.ConvergenceRecord("m"),
        train.BatchedTrainer: train.BatchedTrainer([member], batch_size=2),
        glu.GLULSABlockWeights: glu.glu_lsa_block_weights(2, 0.5),
        deep.DeepBCDWeights: deep.deep_bcd_weights(2, 2, 7, 0.5),
        matplotlib.figure.Figure: matplotlib.figure.Figure(),
        torch.nn.Module: model,
        studies.RunSpec: run,
        studies.Cohort: studies.Cohort("probe", (run,), 2, 0, 1.0, first_check=2, max_steps=4),
        dict: {},
        str: "/nonexistent/probe",  # a path no probe can write to
    }


def _valid(constraint, examples):
    if isinstance(constraint, _declare.Instance):
        return examples[constraint.types[0]]
    return constraint.valid()


class _Late(Exception):
    pass


def _call(func, kwargs):
    """``func(**kwargs)``: the exception it raised, or ``None``; interrupted after ``LIMIT_S``."""

    def late(signum, frame):
        raise _Late()

    old = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, LIMIT_S)
    try:
        func(**kwargs)
    except _Late:
        return _Late(f"still running after {LIMIT_S} s")
    except Exception as err:  # noqa: BLE001 - the kind is what is checked
        return err
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return None


def _from_declaration(err: BaseException) -> bool:
    """Whether ``err`` was raised by the declaration's checks, before the body ran: the frame the
    decorator's wrapper called is one of ``_declare``'s (a constraint or the cost), not the body."""
    frames = [tb.tb_frame.f_code for tb in _walk(err.__traceback__)]
    for outer, inner in zip(frames, frames[1:], strict=False):
        if outer.co_filename == _declare.__file__ and outer.co_name == "wrapper":
            return inner.co_filename == _declare.__file__
    return False


def _walk(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def probe(name: str) -> list[str]:
    """Every refused value of every declared argument of ``name``: the failures, as text."""
    func = _public_callables()[name]
    declaration = _declaration(func)
    examples = _examples()
    base = {arg: _valid(c, examples) for arg, c in declaration.constraints.items()}
    failures = []
    for arg, constraint in declaration.constraints.items():
        for value in constraint.invalid():
            err = _call(func, {**base, arg: value})
            if (
                not isinstance(err, (TypeError, ValueError))
                or not re.search(rf"\b{arg}\b", str(err))
                or not _from_declaration(err)
            ):
                failures.append(f"{name}({arg}={value!r:.40}): {type(err).__name__}: {err}")
    if declaration.cost is not None:
        for arg, constraint in declaration.constraints.items():
            if isinstance(constraint, _declare.Integer) and re.search(
                rf"\b{arg}\b", declaration.cost.formula
            ):
                start = time.perf_counter()
                err = _call(func, {**base, arg: 10**15})
                if (
                    not isinstance(err, CostRefused)
                    or arg not in str(err)
                    or not _from_declaration(err)
                ):
                    failures.append(f"{name}({arg}=10**15): not refused by its cost: {err!r}")
                assert time.perf_counter() - start < LIMIT_S
    return failures


@pytest.mark.parametrize("name", DECLARED)
def test_every_refused_value_is_refused_by_name_before_the_body(name):
    failures = probe(name)
    assert failures == [], "\n".join(failures)


def test_the_costs_are_declared_where_the_work_grows():
    """The callables whose work grows with an integer argument without bound declare a cost."""
    callables = _public_callables()
    costed = {n for n in DECLARED if _declaration(callables[n]).cost is not None}
    assert {
        "icl_book.simulate.mc_error",
        "icl_book.estimators.block_coordinate_gd_predict",
        "icl_book.attention.deep.deep_bcd_weights",
        "icl_book.attention.deep.DeepTransformer",
        "icl_book.attention.deep.LearnedBCD",
        "icl_book.train.train_in_context",
        "icl_book.train.BatchedTrainer",
        "icl_book.studies.train_cohort",
        "icl_book.studies.train_study",
    } <= costed


def test_a_refused_cost_says_how_to_raise_the_budget():
    from icl_book import simulate
    from icl_book.limits import budget

    gamma = np.zeros((2, 3))
    with pytest.raises(CostRefused, match=r"n_test = 1000000000.*budget\(operations="):
        simulate.mc_error(gamma, None, 1.0, 0.1, n_test=10**9, rng=0)
    with budget(operations=1e13):  # the same call is accepted inside (checked, not run: too long)
        decl = _declaration(simulate.mc_error)
        decl.cost.check("mc_error", {"gamma": gamma, "alpha": 1.0, "n_test": 10**9})
    with pytest.raises(CostRefused):  # and refused again outside
        decl.cost.check("mc_error", {"gamma": gamma, "alpha": 1.0, "n_test": 10**9})
