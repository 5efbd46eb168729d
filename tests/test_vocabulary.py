"""The package's argument vocabulary, checked on every public signature (CONTRIBUTING: package rules).

One name for one thing: sizes are ``batch``, ``context_len``, ``dim``; randomness is the keyword-only ``rng``
(NumPy) or ``generator`` (torch); ``device`` and ``dtype`` are keyword-only; synonyms are refused.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

MODULES = [
    "tasks",
    "estimators",
    "hermite",
    "features",
    "theory",
    "simulate",
    "stats",
    "train",
    "attention",
    "studies",
    "book",
    "plotting",
    "checks",
]
KEYWORD_ONLY = {"rng", "generator", "device", "dtype"}
# Synonyms of names the package already uses (the accepted name after the arrow).
SYNONYMS = {
    "d": "dim",
    "dimension": "dim",
    "n_dim": "dim",
    "N": "context_len",
    "n_context": "context_len",
    "ell": "context_len",
    "seq_len": "context_len",
    "n_batch": "batch",
    "random_state": "rng",
    "gen": "generator",
    "sigma2": "noise_var",
    "noise": "noise_var",
    "noise_variance": "noise_var",
    "lam": "ridge",
    "lambda_": "ridge",
    "teacher": "link",
    "rho": "noise_var",
    "n_prompts": "batch",
    "W_KQ": "w_kq",
    "W_PV": "w_pv",
    "basis": "kind",  # the polynomial family: features.feature_map(kind=...), deep_bcd_weights(kind=...)
}
# Where ``f`` is the teacher (a single-index task's link) the package calls it ``link``; hermite keeps ``f``
# for the generic function it expands (hermite_coefficients(f, K) of any f with E f² < ∞).
TEACHER_MODULES = {"tasks", "theory", "simulate", "estimators", "checks"}
#: Public functions that take sizes: they come in the order batch, context_len, dim.
SIZE_ORDER = ("batch", "context_len", "dim")


def _public_signatures():
    for name in MODULES:
        module = importlib.import_module(f"icl_book.{name}")
        for public in getattr(module, "__all__", []):
            obj = getattr(module, public)
            targets = [(public, obj)]
            if inspect.isclass(obj):
                targets = [(public, obj.__init__)] + [
                    (f"{public}.{k}", v)
                    for k, v in vars(obj).items()
                    if callable(v) and not k.startswith("_")
                ]
            for label, target in targets:
                try:
                    sig = inspect.signature(target)
                except (TypeError, ValueError):
                    continue
                yield f"{name}.{label}", sig


SIGNATURES = list(_public_signatures())


def test_signatures_found():
    assert len(SIGNATURES) > 100


def _violations(signatures):
    out = []
    for where, sig in signatures:
        for p in sig.parameters.values():
            if p.name in KEYWORD_ONLY and p.kind is not inspect.Parameter.KEYWORD_ONLY:
                out.append(f"{where}: {p.name} must be keyword-only")
            if p.name in SYNONYMS:
                out.append(
                    f"{where}: parameter {p.name!r}: the package calls it {SYNONYMS[p.name]!r}"
                )
            if p.name == "f" and where.split(".")[0] in TEACHER_MODULES:
                out.append(f"{where}: parameter 'f': the teacher is called 'link'")
        # required sizes (those a caller passes positionally); a config's defaulted fields are keywords
        sizes = [
            n
            for n, p in sig.parameters.items()
            if n in SIZE_ORDER and p.default is inspect.Parameter.empty
        ]
        if sizes != sorted(sizes, key=SIZE_ORDER.index):
            out.append(f"{where}: sizes {sizes} must come in the order {SIZE_ORDER}")
    return out


#: Names that are both a string option and another kind of value by design: torch takes a device or its name.
STRING_OR_OBJECT = {"device"}


def _is_string_option(p: inspect.Parameter) -> bool:
    """A parameter annotated ``str`` (or ``str | None``), or unannotated with a string default."""
    note = p.annotation
    if note is inspect.Parameter.empty:
        return isinstance(p.default, str)
    note = (note.__name__ if isinstance(note, type) else str(note)).replace(" ", "")
    return note in ("str", "str|None", "None|str", "Optional[str]")


def _type_conflicts(signatures):
    """One name, one kind of value: a name that is a string option in one public signature and an
    array, matrix, callable or object in another means two things (``preconditioner`` was a
    ``(d, d)`` matrix in ``one_step_gd_predict`` and ``'auto'``/``'none'`` in ``solve_reduced_ridge``)."""
    uses: dict[str, dict[bool, list[str]]] = {}
    for where, sig in signatures:
        for p in sig.parameters.values():
            if p.name in STRING_OR_OBJECT or p.name in ("self", "cls"):
                continue
            uses.setdefault(p.name, {True: [], False: []})[_is_string_option(p)].append(where)
    return [
        f"{name}: a string in {sorted(kinds[True])}, another kind of value in {sorted(kinds[False])}"
        for name, kinds in sorted(uses.items())
        if kinds[True] and kinds[False]
    ]


#: Leaks found and not yet closed, each with the reason; the test fails when one is closed (remove it
#: here) or a new one appears. Chapters pass these by keyword, and renaming one changes a chapter.
KNOWN_LEAKS = {
    "dtype: a string in ['studies.Cohort'], another kind of value in ['attention.DeepTransformer', "
    "'attention.GLUFeedForward', 'attention.LearnedBCD', 'attention.LinearSelfAttention', "
    "'attention.TransformerBlock', 'studies.study_trainer', 'train.BatchedTrainer', "
    "'train.prompts_to_torch', 'train.train_in_context']": "Cohort.dtype is written into the "
    "shipped studies as text; it changes with their next export",
    "model: a string in ['studies.RunSpec'], another kind of value in ['studies.StudyRun', "
    "'train.Member', 'train.TrainResult', 'train.evaluate_in_context', 'train.predict_in_context', "
    "'train.train_in_context']": "RunSpec.model names an architecture; chapters 5 and 6 select "
    'runs by it (studies.select_runs(runs, model="block"))',
    "schedule: a string in ['train.BatchedTrainer', 'train.learning_rate', 'train.train_in_context'], "
    "another kind of value in ['attention.DeepBCDWeights']": "DeepBCDWeights.schedule is the "
    'layer plan of schedule.bcd_schedule; chapter 2 passes schedule="cosine" to train_in_context',
}


def test_vocabulary_holds_on_every_public_signature():
    found = _violations(SIGNATURES) + _type_conflicts(SIGNATURES)
    assert [v for v in found if v not in KNOWN_LEAKS] == []
    assert [k for k in KNOWN_LEAKS if k not in found] == [], "closed: remove them from KNOWN_LEAKS"


def test_the_type_consistency_check_can_fail():
    def matrix(xs, preconditioner=None):
        return xs

    def option(xs, *, preconditioner: str = "auto", device="cpu"):
        return xs

    def module(device=None):
        return device

    signatures = [(f"fake.{f.__name__}", inspect.signature(f)) for f in (matrix, option, module)]
    assert _type_conflicts(signatures) == [
        "preconditioner: a string in ['fake.option'], another kind of value in ['fake.matrix']"
    ]


def test_the_vocabulary_check_can_fail():
    def bad(d, rng=None, *, sigma2=0.0, rho=0.0):  # four violations
        return d

    def teacher(f, dim, context_len):  # two: f is the teacher, sizes out of order
        return f

    problems = _violations([("fake.bad", inspect.signature(bad))])
    assert len(problems) == 4, problems
    problems = _violations([("theory.teacher", inspect.signature(teacher))])
    assert len(problems) == 2, problems


@pytest.mark.parametrize(
    "name, call",
    [
        ("icl_error", dict(alpha=1.0, tau=2.0, rho=0.1)),
        ("equivalent_linear_task", dict(f="tanh")),
    ],
)
def test_old_argument_names_are_refused(name, call):
    """A package never released keeps no alias for a renamed keyword (``rho``, ``f``)."""
    from icl_book import theory

    with pytest.raises(TypeError, match=r"unexpected keyword argument '(rho|f)'|missing .*'link'"):
        getattr(theory, name)(**call)


@pytest.mark.parametrize("name", ["rng", "generator"])
def test_randomness_is_always_an_explicit_keyword(name):
    users = [where for where, sig in SIGNATURES if name in sig.parameters]
    assert users, f"no public function takes {name}"


def _gamma_specs():
    from tests.test_probe_inputs import SPECS

    return sorted(name for name, (_, positional, _, _) in SPECS.items() if "gamma" in positional)


def test_gamma_is_only_ever_the_reduced_model():
    """One name, one thing: ``gamma`` is the ``(d, d+1)`` reduced linear-attention model Γ in
    every public signature; a ``(p, p)`` preconditioner is called ``preconditioner``. Every public
    callable taking ``gamma`` (each has a valid call in the probe suite) refuses a square matrix, naming
    the shape it wants, and accepts the ``(d, d+1)`` one of its valid call."""
    import numpy as np

    from tests.test_probe_inputs import SPECS, _rng

    takers = sorted(where for where, sig in SIGNATURES if "gamma" in sig.parameters)
    assert takers == _gamma_specs(), "a public callable takes gamma without a probe spec"
    for name in takers:
        func, positional, keywords, kinds = SPECS[name]
        call = {**positional, **keywords, **({"rng": _rng()} if "rng" in kinds else {})}
        d = positional["gamma"].shape[0]
        assert positional["gamma"].shape == (d, d + 1)
        func(**call)
        with pytest.raises(ValueError, match=r"gamma must have shape \(d, d\+1\)"):
            func(**{**call, "gamma": np.eye(d)})


def test_the_closed_form_risks_live_in_theory_only():
    """A package never released keeps no forwarding for names that moved."""
    from icl_book import estimators, theory

    assert callable(theory.one_step_gd_risk)
    assert "one_step_gd_risk" not in estimators.__all__
    with pytest.raises(AttributeError):
        estimators.one_step_gd_risk  # noqa: B018
