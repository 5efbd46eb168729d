"""Autograder checks for the book's coding exercises.

Each coding exercise ``<chapter>-ex<N>`` has a check ``check_<chapter>_ex<N>(answer)`` that

- prints ``"<chapter>-ex<N>: correct"`` and returns a truthy :class:`Passed` on a correct answer,
- raises :class:`CheckFailed` with a *hint* on a wrong one (never the solution itself), and
  :class:`NotAnswered` (a :class:`CheckFailed`) while the answer is still the stub.

In a notebook a :class:`CheckFailed` shows only its message (IPython's ``_render_traceback_``), not a
traceback through this package. A student edition calls :func:`continue_when_unanswered` so that "Run all"
on an untouched notebook reaches the end: an unanswered check then prints ``<label>: not implemented yet``
and returns a falsy :class:`Unanswered` instead of raising (never under nbgrader's autograder, nor in
``booktools.assignments grade``, which call the checks in their own process).

The chapters call the check right after the exercise's solution cell; ``booktools.grading`` grades
a submission by which checks pass. A check whose cases are independent runs each as a part of a
:class:`Parts`: in a notebook nothing changes (the first failure raises its hint), and under the grader
the release can give such an exercise partial credit (the share of parts passed). A check must not be fooled by the stub a student notebook starts with
(it raises ``NotImplementedError``): calling a student's function inside a check is wrapped by
:func:`call_answer`, which turns any exception into a :class:`CheckFailed` with a hint.

The package is split by job, one module per chapter in book order; every public name is imported
here and documented as ``icl_book.checks.X``:

- ``_core`` (private) -- what every check is built on: verdicts, :func:`call_answer`,
  :func:`require_close`, parts, the inputs drawn under the grader.
- ``ch00_prologue`` -- ``prologue-ex<N>`` (chapter 0).
- ``ch01_hermite`` -- ``hermite-ex<N>`` (chapter 1).
- ``ch02_lsa`` -- ``lsa-ex<N>`` (chapter 2).
- ``ch03_asymptotics`` -- ``asymptotics-ex<N>`` (chapter 3).
- ``ch04_nonlinear`` -- ``nonlinear-ex<N>`` (chapter 4).
- ``ch05_glu`` -- ``glu-ex<N>`` (chapter 5).
- ``ch06_depth`` -- ``depth-ex<N>`` (chapter 6).
"""

from __future__ import annotations

from ._core import (
    CheckFailed,
    NotAnswered,
    Passed,
    Unanswered,
    call_answer,
    continue_when_unanswered,
    passed,
    require_close,
)

# Parts, the tool a check runs its cases in (not the chapters', so not in __all__), and what the
# grader's process sets around a check (booktools.grading.grader imports them from here).
from ._core import Parts as Parts
from ._core import _grading_inputs as _grading_inputs
from ._core import _recording_parts as _recording_parts
from .ch00_prologue import check_prologue_ex1, check_prologue_ex2
from .ch01_hermite import check_hermite_ex1, check_hermite_ex3
from .ch02_lsa import check_lsa_ex1, check_lsa_ex2, check_lsa_ex4
from .ch03_asymptotics import check_asymptotics_ex1, check_asymptotics_ex3, check_asymptotics_ex4
from .ch04_nonlinear import check_nonlinear_ex1, check_nonlinear_ex3
from .ch05_glu import check_glu_ex1, check_glu_ex2, check_glu_ex4
from .ch06_depth import check_depth_ex2, check_depth_ex3

__all__ = ["CheckFailed", "Passed", "passed", "call_answer", "require_close"]
__all__ += ["NotAnswered", "Unanswered", "continue_when_unanswered"]
__all__ += ["check_prologue_ex1", "check_prologue_ex2"]  # prologue
__all__ += ["check_hermite_ex1", "check_hermite_ex3"]  # hermite
__all__ += ["check_lsa_ex1", "check_lsa_ex2", "check_lsa_ex4"]  # lsa
__all__ += [
    "check_asymptotics_ex1",
    "check_asymptotics_ex3",
    "check_asymptotics_ex4",
]  # asymptotics
__all__ += ["check_nonlinear_ex1", "check_nonlinear_ex3"]  # nonlinear
__all__ += ["check_glu_ex1", "check_glu_ex2", "check_glu_ex4"]  # glu
__all__ += ["check_depth_ex2", "check_depth_ex3"]  # depth


def _public_here(obj) -> None:
    """Give ``obj`` (and every function it wraps) the public home ``icl_book.checks``, as NumPy's
    ``set_module`` does: the API page, pickles and error reports name ``icl_book.checks.X`` whichever
    module defines it."""
    while obj is not None:
        obj.__module__ = __name__
        obj = getattr(obj, "__wrapped__", None)


for _name in __all__:
    _public_here(globals()[_name])
del _name
