"""What every check is built on: its verdicts (:class:`Passed`, :class:`CheckFailed`,
:class:`NotAnswered`, :class:`Unanswered`), the helpers that call and compare a student's answer, the
parts of a check graded for partial credit, and the inputs a check draws under the grader."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import os
import re
import zlib

import numpy as np

from .. import _validate
from .._declare import Flag, Free, Interval, Text, declare

__all__ = ["CheckFailed", "Passed", "passed", "call_answer", "require_close"]
__all__ += ["NotAnswered", "Unanswered", "continue_when_unanswered"]


# Inputs drawn at grading time. In a notebook a check uses its published inputs; under the grader
# (``booktools.grading.grader``, in its own process) a check whose fixed inputs a table of answers could pass
# draws them from the submission's seed, which the grader records in the report.
_GRADING_SEED: contextvars.ContextVar[tuple[int, list] | None] = contextvars.ContextVar(
    "icl_book_grading_seed", default=None
)


@contextlib.contextmanager
def _grading_inputs(seed: int):
    """Inside this block, checks draw their inputs from ``seed``; yields the labels that did."""
    drew: list[str] = []
    token = _GRADING_SEED.set((int(seed), drew))
    try:
        yield drew
    finally:
        _GRADING_SEED.reset(token)


# The parts of a check, recorded under the grader when the release gives partial credit. Only the
# grader's process sets this (around the check it runs, which reaches the student's code by RPC), so
# a submission cannot add, remove or forge an outcome.
_PARTS_RECORD: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "icl_book_check_parts", default=None
)


@contextlib.contextmanager
def _recording_parts():
    """Inside this block, a check built on :class:`Parts` runs every case, records each outcome and
    raises its first failure at the end; yields the list of the :class:`Parts` created inside."""
    record: list[Parts] = []
    token = _PARTS_RECORD.set(record)
    try:
        yield record
    finally:
        _PARTS_RECORD.reset(token)


def _inputs_rng(label: str, published_seed: int) -> np.random.Generator | None:
    """The generator a check draws its inputs from under the grader, or ``None`` in a notebook (the
    check then uses its published inputs, seeded by ``published_seed`` where it draws any)."""
    state = _GRADING_SEED.get()
    if state is None:
        return None
    seed, drew = state
    drew.append(label)
    return np.random.default_rng([seed, zlib.crc32(label.encode()), published_seed])


class CheckFailed(AssertionError):
    """A check did not pass; the message is a hint for the student.

    IPython shows an exception with ``_render_traceback_`` as the lines that method returns: the hint
    is the cell's one output line instead of the last line of a 20-line traceback through this package.
    """

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


class NotAnswered(CheckFailed):
    """The answer is still the stub: a function raising ``NotImplementedError``, or ``None``."""


class Unanswered:
    """What an unanswered check returns after :func:`continue_when_unanswered`: falsy, and invisible as
    a cell's result (the check printed its one line)."""

    def __init__(self, label: str):
        self.label = label

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"Unanswered({self.label!r})"

    def _ipython_display_(self) -> None:
        """Display nothing."""


_CONTINUE_WHEN_UNANSWERED = False


@declare(
    enabled=Flag(),
)
def continue_when_unanswered(enabled: bool = True) -> None:
    """Let unanswered checks print ``<label>: not implemented yet`` and return :class:`Unanswered`
    instead of raising :class:`NotAnswered`, so that "Run all" on a student notebook reaches its end
    (a raising cell stops it). Wrong answers still raise :class:`CheckFailed` with their hint.

    Student editions call it in their second code cell. It is a no-op under nbgrader's autograder and
    validator (``NBGRADER_EXECUTION`` is set), which score a check cell by whether it raises. Returns
    nothing, so that the cell calling it shows no output. ``enabled`` is a flag: ``True`` or ``False``
    (NumPy booleans too, as every flag of the package).
    """
    global _CONTINUE_WHEN_UNANSWERED
    enabled = _validate.flag("enabled", enabled)
    _CONTINUE_WHEN_UNANSWERED = enabled and not os.environ.get("NBGRADER_EXECUTION")


def _reports_unanswered(check):
    """Wrap a ``check_*``: with :func:`continue_when_unanswered` on, :class:`NotAnswered` is printed and
    an :class:`Unanswered` returned; otherwise the check is unchanged."""

    @functools.wraps(check)
    def run(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except NotAnswered as exc:
            if not _CONTINUE_WHEN_UNANSWERED:
                raise
            print(exc)
            return Unanswered(str(exc).split(":", 1)[0])

    return run


class Passed:
    """The value a passing check returns: truthy, and invisible as a notebook cell's result.

    (A plain ``True`` would add an ``Out[…]: True`` under every check cell.)
    """

    def __init__(self, label: str):
        self.label = label

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"Passed({self.label!r})"

    def _ipython_display_(self) -> None:
        """Display nothing: the check already printed its one line."""


def _text(name: str, value) -> str:
    """A non-empty string argument of a check helper (a label or a hint), refused by name otherwise."""
    if not isinstance(value, str) or not value:
        raise _validate.ArgumentTypeError(
            f"{name} must be a non-empty string, got {_validate._describe(value)}"
        )
    return value


@declare(
    label=Text(),
)
def passed(label: str) -> Passed:
    """Report a passed check: print one fixed line (which nbval compares) and return a truthy :class:`Passed`."""
    label = _text("label", label)
    print(f"{label}: correct")
    return Passed(label)


@declare(
    label=Text(),
    func=Free("the student's answer: anything wrong with it is the student's CheckFailed"),
)
def call_answer(label: str, func, *args, **kwargs):
    """Call a student's function; any exception becomes a :class:`CheckFailed` naming the exercise."""
    label = _text("label", label)
    if func is None:  # an answer variable still at its stub value
        raise NotAnswered(f"{label}: not implemented yet (your function is still None)")
    if not callable(func):
        raise CheckFailed(f"{label}: expected a function, got {type(func).__name__}")
    try:
        return func(*args, **kwargs)
    except NotImplementedError:
        raise NotAnswered(
            f"{label}: not implemented yet (replace the NotImplementedError stub)"
        ) from None
    except (
        Exception
    ) as exc:  # the student's code crashed: report the kind of error, not the solution
        raise CheckFailed(f"{label}: your function raised {type(exc).__name__}: {exc}") from None


@declare(
    label=Text(),
    got=Free("the student's answer: anything wrong with it is the student's CheckFailed"),
    expected=Free("the reference, computed by the check itself"),
    rtol=Interval(0.0, math.inf),
    atol=Interval(0.0, math.inf),
    hint=Text(),
)
def require_close(label: str, got, expected, *, rtol: float, atol: float, hint: str) -> None:
    """Raise :class:`CheckFailed` with ``hint`` unless ``got`` matches ``expected`` (shape and values).

    ``got`` is the student's answer (anything wrong with it is a :class:`CheckFailed`); the other
    arguments are the check's own and are validated by name (a finite real ``expected``, tolerances
    that are finite and >= 0, a non-empty label and hint).
    """
    label = _text("label", label)
    hint = _text("hint", hint)
    expected = _validate.as_array("expected", expected)
    rtol = _validate.nonnegative_float("rtol", rtol)
    atol = _validate.nonnegative_float("atol", atol)
    try:
        got_arr = _validate.as_array("answer", got, allow_inf=True)
    except ValueError as exc:
        if "NaN" in str(exc):
            raise CheckFailed(f"{label}: your answer contains NaN or inf") from None
        raise CheckFailed(f"{label}: expected numbers, got {type(got).__name__}") from None
    except TypeError:
        raise CheckFailed(f"{label}: expected numbers, got {type(got).__name__}") from None
    exp_arr = expected
    if got_arr.shape != exp_arr.shape:
        raise CheckFailed(f"{label}: expected shape {exp_arr.shape}, got {got_arr.shape}")
    if not np.all(np.isfinite(got_arr)):
        raise CheckFailed(f"{label}: your answer contains NaN or inf")
    if not np.allclose(got_arr, exp_arr, rtol=rtol, atol=atol):
        raise CheckFailed(f"{label}: not quite. Hint: {hint}")


class Parts:
    """The cases of a check, each a *part* that passes or fails on its own (for partial credit).

    A check with several independent cases runs each inside ``with parts.case(name):`` and ends
    with ``return parts.passed()``::

        parts = Parts(label)
        for a in widths:
            with parts.case(f"a = {a}"):
                require_close(label, call_answer(label, f, a), reference(a), ...)
        return parts.passed()

    In a notebook a case's :class:`CheckFailed` propagates at once, exactly as in a check without
    parts (the student sees the first failure's hint). Under the grader, when the release gives the
    exercise partial credit (``booktools.grading.grader`` records the parts), every case runs, ``outcomes``
    holds ``(name, passed)`` for each, and :meth:`passed` raises the first failure once all have run;
    the grader then scores ``points × passed / len(outcomes)``. An answer still at its stub
    (:class:`NotAnswered`) and any other exception always propagate at once.

    ``label``: the exercise's label (a non-empty string). A tool of this package's checks, not of the
    chapters (so not in ``__all__``); mark a check built on it with ``@_graded_in_parts``.
    """

    def __init__(self, label: str):
        self.label = _text("label", label)
        self.outcomes: list[tuple[str, bool]] = []
        self.failure: CheckFailed | None = None
        record = _PARTS_RECORD.get()
        self._recording = record is not None
        if record is not None:
            record.append(self)

    @property
    def n_passed(self) -> int:
        """How many cases passed so far."""
        return sum(ok for _, ok in self.outcomes)

    @contextlib.contextmanager
    def case(self, name: str):
        """One case (``name``, a non-empty string, e.g. ``"a = 0.25, ρ = 0"``): passed if its block
        raises nothing, failed if it raises :class:`CheckFailed`."""
        name = _text("name", name)
        try:
            yield
        except NotAnswered:
            raise
        except CheckFailed as exc:
            self.outcomes.append((name, False))
            if not self._recording:
                raise
            if self.failure is None:
                self.failure = exc
        else:
            self.outcomes.append((name, True))

    def passed(self) -> Passed:
        """:func:`passed` if every case passed, else raise the first failure (its hint)."""
        if not self.outcomes:
            raise RuntimeError(f"{self.label}: a check with parts ran no case")
        if self.failure is not None:
            raise self.failure.with_traceback(None)
        return passed(self.label)


def _graded_in_parts(check):
    """Mark a check built on :class:`Parts`: ``booktools.assignments`` gives its exercise partial
    credit in the release (``metadata.icl_book.partial_credit`` of the check cell)."""
    check.graded_in_parts = True
    return check


def _reports_unanswered_in(namespace: dict) -> None:
    """Wrap every ``check_<chapter>_ex<N>`` a chapter's module defines (``namespace``: its
    ``globals()``) with :func:`_reports_unanswered`; the module calls this last, after its checks."""
    for name, check in list(namespace.items()):
        if (
            re.fullmatch(r"check_\w+_ex\d+", name)
            and getattr(check, "__module__", "") == namespace["__name__"]
        ):
            namespace[name] = _reports_unanswered(check)
