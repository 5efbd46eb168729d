"""Every public callable of ``icl_book`` is probed with bad inputs, or excluded here with a reason.

The bad values a declaration states are generated from it (``tests/test_declarations.py``, which
also checks that every public callable is declared); this suite keeps the hand-written probes of
what declarations do not state (shapes that must agree, callables' outputs, accepted values).

"Public" is what the API page documents: every name in the ``__all__`` of every module
(``tests.test_api_reference.public_names``), classes included; constants (tuples, dicts, numbers,
paths) are not callables and are skipped. A callable is *probed* when a spec of
``tests/test_probe_inputs.py`` calls it (directly, through ``__wrapped__``, or as named in its
``COVERS``). A new public function without a spec fails ``test_every_public_callable_is_probed``.
"""

from __future__ import annotations

import importlib

import pytest

import icl_book.estimators

from . import test_probe_inputs as probes
from .test_api_reference import public_names

_RESULT = (
    "a result container the package builds and returns (a NamedTuple or dataclass of computed "
    "values); its fields are not validated inputs, and the functions that take it back are probed"
)
_ERROR = "an exception class: it takes a message, no data"
EXCLUDED: dict[str, str] = {
    # exceptions
    "icl_book.book.ClaimFailed": _ERROR,
    "icl_book.checks.CheckFailed": _ERROR,
    "icl_book.checks.NotAnswered": _ERROR,
    "icl_book.train.TrainingDiverged": _ERROR,
    "icl_book.limits.CostRefused": _ERROR,
    # declared: every constraint is attacked by tests/test_declarations.py's generated suite
    "icl_book.train.decide": "declared; probed by tests/test_declarations.py",
    "icl_book.train.false_convergence_rate": "declared; probed by tests/test_declarations.py",
    "icl_book.train.learning_rate": "declared; probed by tests/test_declarations.py",
    "icl_book.studies.train_cohort": "declared; probed by tests/test_declarations.py",
    # functions without arguments: nothing to probe
    "icl_book.book.in_colab": "takes no argument (reads sys.modules)",
    "icl_book.plotting.use_book_style": "takes no argument (sets matplotlib's rcParams)",
    "icl_book.limits.current_budget": "takes no argument (reads the budget in force)",
    # result containers
    "icl_book.attention.glu.TokenLayout": _RESULT + " (glu_token_layout, probed)",
    "icl_book.attention.lsa.LSAWeights": _RESULT + " (gd_lsa_weights, probed)",
    "icl_book.checks.Passed": _RESULT + " (a check's verdict)",
    "icl_book.checks.Unanswered": _RESULT + " (a check's verdict)",
    "icl_book.estimators.BayesPrediction": _RESULT,
    "icl_book.estimators.RidgeChoice": _RESULT,
    "icl_book.simulate.MCError": _RESULT,
    "icl_book.simulate.PretrainedLSA": _RESULT,
    "icl_book.simulate.ProblemSizes": _RESULT + " (problem_sizes, probed)",
    "icl_book.simulate.ReducedPrompts": _RESULT,
    "icl_book.simulate.RidgeSolution": _RESULT,
    "icl_book.simulate.SimulatedErrors": _RESULT,
    "icl_book.simulate.SolveInfo": _RESULT,
    "icl_book.simulate.SweepResult": _RESULT,
    "icl_book.stats.MeanSEM": _RESULT + " (mean_sem, probed)",
    "icl_book.studies.StudyRun": _RESULT + " (load_study, probed)",
    "icl_book.tasks.Prompts": _RESULT
    + " (the samplers; prompts_to_torch etc. probed with bad prompts)",
    "icl_book.theory.EquivalentTask": _RESULT,
    "icl_book.theory.TaskMoments": _RESULT,
    "icl_book.train.ConvergenceRecord": _RESULT + " (train_to_convergence)",
    "icl_book.train.TrainResult": _RESULT + " (train_in_context)",
}


def public_callables() -> list[str]:
    out = []
    for name in public_names():
        module, attr = name.rsplit(".", 1)
        if callable(getattr(importlib.import_module(module), attr)):
            out.append(name)
    return out


def unprobed(names=None) -> list[str]:
    """Public callables with neither a probe spec nor an entry in ``EXCLUDED``."""
    probed = probes.probed_names()
    return [
        n
        for n in (public_callables() if names is None else names)
        if n not in probed | set(EXCLUDED)
    ]


def test_every_public_callable_is_probed_or_excluded_with_a_reason():
    missing = unprobed()
    assert missing == [], (
        f"{len(missing)} public callables have no probe spec in tests/test_probe_inputs.py "
        f"(SPECS) and no argued entry in EXCLUDED: {missing}"
    )


def test_exclusions_are_current():
    """No stale entry: every excluded name is public, callable and not probed after all."""
    public = set(public_callables())
    stale = [n for n in EXCLUDED if n not in public]
    assert stale == [], f"EXCLUDED names that are no longer public callables: {stale}"
    both = sorted(set(EXCLUDED) & probes.probed_names())
    assert both == [], f"names both probed and excluded: {both}"


def test_every_spec_probes_a_public_callable():
    public = set(public_callables())
    strays = sorted(probes.probed_names() - public)
    assert strays == [], f"specs whose target is not a public callable: {strays}"


def test_a_new_public_function_without_a_spec_fails(monkeypatch):
    def new_estimator(xs, ys, x_query):
        return xs

    new_estimator.__module__ = "icl_book.estimators"
    new_estimator.__qualname__ = "new_estimator"
    monkeypatch.setattr(icl_book.estimators, "new_estimator", new_estimator, raising=False)
    monkeypatch.setattr(
        icl_book.estimators, "__all__", [*icl_book.estimators.__all__, "new_estimator"]
    )
    assert unprobed() == ["icl_book.estimators.new_estimator"]
    with pytest.raises(AssertionError, match="new_estimator"):
        test_every_public_callable_is_probed_or_excluded_with_a_reason()


def test_counts():
    """The numbers the suite reports: every public callable is accounted for."""
    callables = public_callables()
    assert len(callables) == len(set(callables))
    probed = [n for n in callables if n in probes.probed_names()]
    assert len(probed) + len(EXCLUDED) == len(callables)
