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
    "train",
    "attention",
    "pretrain_depth",
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
}


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
    return out


def test_vocabulary_holds_on_every_public_signature():
    assert _violations(SIGNATURES) == []


def test_the_vocabulary_check_can_fail():
    def bad(d, rng=None, *, sigma2=0.0):  # three violations
        return d

    problems = _violations([("fake.bad", inspect.signature(bad))])
    assert len(problems) == 3, problems


@pytest.mark.parametrize("name", ["rng", "generator"])
def test_randomness_is_always_an_explicit_keyword(name):
    users = [where for where, sig in SIGNATURES if name in sig.parameters]
    assert users, f"no public function takes {name}"
