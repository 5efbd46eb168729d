"""The release format: the cell metadata the assignments' builder writes and the grader reads.

A release is an nbgrader notebook (``booktools.assignments.release`` builds it,
``booktools.grading`` scores submissions against it). Both sides import this module, neither the
other's package:

- ``metadata.nbgrader`` of a graded cell (:func:`nbgrader_metadata`): a check cell is graded and
  locked (grade id ``<label>-check``), a solution cell is the student's answer
  (``<label>-solution``, ``-solution-2``, ...), a written exercise's answer cell is graded by hand
  (``<label>-answer``);
- ``metadata.icl_book`` of a cell: ``partial_credit`` (:data:`PARTIAL_CREDIT_KEY`, a check cell
  whose check records parts) and ``answer`` (:data:`ANSWER_KEY`, the grade id a plain top-level
  answer cell stands for). nbgrader's validator drops keys it does not know from
  ``metadata.nbgrader``, so they live beside it.
"""

from __future__ import annotations

import re

__all__ = [
    "PARTIAL_CREDIT_KEY",
    "ANSWER_KEY",
    "nbgrader_metadata",
    "nbgrader_of",
    "check_grade_id",
    "solution_grade_id",
    "answer_grade_id",
    "written_label",
    "partial_credit",
]

#: ``metadata.icl_book.partial_credit: true`` on a check cell: points × parts passed / parts.
PARTIAL_CREDIT_KEY = "partial_credit"
#: ``metadata.icl_book.answer``: the grade id of the answer a plain top-level answer cell holds.
ANSWER_KEY = "answer"
_ANSWER_SUFFIX = "-answer"


def nbgrader_metadata(
    grade_id: str, *, solution: bool, grade: bool, points: float | None = None, locked=False
) -> dict:
    """A cell's ``metadata.nbgrader`` (schema 3); ``grade_id`` is made of nbgrader's characters."""
    meta = {
        "grade": grade,
        "grade_id": re.sub(r"[^A-Za-z0-9_\-]", "_", grade_id),
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if grade:
        meta["points"] = points
    return meta


def nbgrader_of(cell) -> dict:
    """A cell's ``metadata.nbgrader`` (empty when it has none)."""
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def check_grade_id(label: str) -> str:
    """The grade id of exercise ``label``'s check cell."""
    return f"{label}-check"


def solution_grade_id(label: str, n: int = 1) -> str:
    """The grade id of the ``n``-th solution cell of exercise ``label``."""
    return f"{label}-solution" if n == 1 else f"{label}-solution-{n}"


def answer_grade_id(label: str) -> str:
    """The grade id of the written answer cell of exercise ``label``."""
    return f"{label}{_ANSWER_SUFFIX}"


def written_label(grade_id: str) -> str:
    """The exercise label of a graded answer cell's grade id (the id itself if it is not one)."""
    return grade_id.removesuffix(_ANSWER_SUFFIX)


def partial_credit(cell) -> bool:
    """Whether a release's check cell gives partial credit: its ``metadata.icl_book.partial_credit``
    (``true``/``false``, absent = ``false``: all or nothing). Read from the release only, never from
    a submission. (Not under ``metadata.nbgrader``, whose extra keys nbgrader's validator drops.)"""
    own = cell.get("metadata", {}).get("icl_book", {})
    if not isinstance(own, dict):
        raise ValueError(
            f"release cell {nbgrader_of(cell).get('grade_id')}: metadata icl_book must be a "
            f"mapping, got {type(own).__name__}"
        )
    value = own.get(PARTIAL_CREDIT_KEY, False)
    if not isinstance(value, bool):
        raise ValueError(
            f"release cell {nbgrader_of(cell).get('grade_id')}: metadata "
            f"icl_book.{PARTIAL_CREDIT_KEY} must be true or false, got {value!r}"
        )
    return value
