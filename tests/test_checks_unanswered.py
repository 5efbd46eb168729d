"""How a check talks to a student: only its hint (no traceback), and "not implemented yet" for an
exercise that still holds its stub, which in a student edition lets "Run all" go on.

The notebook side (a kernel running a real student edition) is make test's one-thread nbval stage
(``booktools/student_run.py``, ``tests/test_student_run_all.py``).
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

from icl_book import checks
from icl_book.checks import CheckFailed, NotAnswered, Unanswered

CHECKS = sorted(
    name
    for name, f in vars(checks).items()
    if re.fullmatch(r"check_\w+_ex\d+", name) and callable(f)
)


def _stub(*args, **kwargs):
    raise NotImplementedError()


def _untouched_args(name):
    """The arguments an untouched student notebook passes: stub functions, or None for a top-level
    answer variable (lsa-ex4 takes the task's parameters too)."""
    if name == "check_lsa_ex4":
        return (None, None, np.diag([3.0, 1.0, 0.3]), 10, 0.2)
    params = inspect.signature(getattr(checks, name)).parameters
    assert len(params) == 1, f"{name}: say here what an untouched notebook passes"
    return (_stub,)


def _label(name):
    m = re.fullmatch(r"check_(\w+)_ex(\d+)", name)
    return f"{m[1]}-ex{m[2]}"


@pytest.fixture
def continuing(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    checks.continue_when_unanswered()
    yield
    checks.continue_when_unanswered(False)


def test_every_chapter_check_is_covered():
    assert len(CHECKS) >= 17 and "check_prologue_ex1" in CHECKS


def test_a_failed_check_renders_as_its_message_only():
    exc = CheckFailed("hermite-ex1: not quite. Hint: μ₀ is off")
    assert exc._render_traceback_() == ["hermite-ex1: not quite. Hint: μ₀ is off"]
    assert NotAnswered("x: not implemented yet")._render_traceback_() == ["x: not implemented yet"]


@pytest.mark.parametrize("name", CHECKS)
def test_an_untouched_answer_raises_not_answered_by_default(name):
    """The default (the grader, nbgrader, the book): an unanswered check raises, so it scores 0."""
    with pytest.raises(NotAnswered, match=rf"^{_label(name)}: not implemented yet"):
        getattr(checks, name)(*_untouched_args(name))


@pytest.mark.parametrize("name", CHECKS)
def test_an_untouched_answer_reports_and_goes_on_in_a_student_edition(name, continuing, capsys):
    result = getattr(checks, name)(*_untouched_args(name))
    assert isinstance(result, Unanswered) and not result
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 and printed[0].startswith(f"{_label(name)}: not implemented yet")


def test_a_wrong_answer_still_raises_its_hint_in_a_student_edition(continuing):
    with pytest.raises(CheckFailed, match=r"^hermite-ex1: not quite\. Hint: μ_0 is off") as info:
        checks.check_hermite_ex1(lambda k: 1.0)
    assert not isinstance(info.value, NotAnswered)
    with pytest.raises(CheckFailed, match="expected a function, got float"):
        checks.check_hermite_ex1(0.4)


def test_a_correct_answer_passes_in_a_student_edition(continuing, capsys):
    from icl_book.hermite import LINKS

    mu = LINKS["relu"].closed_form_coefficients(14)
    assert checks.check_hermite_ex1(lambda k: float(mu[k]))
    assert capsys.readouterr().out == "hermite-ex1: correct\n"


def test_nbgrader_keeps_unanswered_checks_raising(monkeypatch):
    """nbgrader's autograder scores a check cell by whether it raises: the switch is a no-op there."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert checks.continue_when_unanswered() is None
    with pytest.raises(NotAnswered):
        checks.check_prologue_ex2(_stub)


def test_continue_when_unanswered_refuses_non_bools():
    with pytest.raises(TypeError, match="enabled must be True or False, got 'yes'"):
        checks.continue_when_unanswered("yes")
    checks.continue_when_unanswered(False)
    with pytest.raises(NotAnswered):
        checks.check_prologue_ex2(_stub)
