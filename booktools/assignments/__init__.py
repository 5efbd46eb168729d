"""Course assignments from the chapters: student, instructor and nbgrader-source notebooks, and the
command line of the assignments and the grader (``python -m booktools.assignments
{build,grade,gradebook,table}``; grading itself is :mod:`booktools.grading`). The modules, one job
each:

- ``release``: a chapter's student, instructor and nbgrader-source notebooks (what is graded against).
- ``instructors``: the instructors page's chapter table.
- ``cli``: the command line ``build``, ``grade``, ``gradebook``, ``table`` (run by ``__main__``).

The course's chapters (exercise prefixes, objectives) and the files a selection names come from the
book model, :mod:`booktools.chapters`; the cells' grading metadata is the release format,
:mod:`booktools.release_format`, which the grader reads without importing this package. The
builder's names are re-exported here (``from booktools import assignments as A;
A.student_notebook(nb)``); the command line, :func:`booktools.assignments.cli.main`, is not: it
imports the grader, which a build does not need.
"""

from booktools.assignments.instructors import (
    TABLE_BEGIN,
    TABLE_END,
    instructors_table,
    nbgrader_timeout,
    update_instructors_page,
)
from booktools.assignments.release import (
    ANSWER_STUB,
    BEGIN_SOLUTION,
    CODE_STUB,
    CONTINUE_CELL,
    END_SOLUTION,
    STUB,
    TOP_LEVEL_STUB,
    AssignmentError,
    build,
    chapter_release,
    edition_of,
    instructor_notebook,
    nbgrader_source_notebook,
    release_notebook,
    sample_submission,
    solution_leaks,
    stub_solution,
    student_notebook,
)

__all__ = [
    "ANSWER_STUB",
    "AssignmentError",
    "BEGIN_SOLUTION",
    "build",
    "chapter_release",
    "CODE_STUB",
    "CONTINUE_CELL",
    "edition_of",
    "END_SOLUTION",
    "instructor_notebook",
    "instructors_table",
    "nbgrader_source_notebook",
    "release_notebook",
    "sample_submission",
    "solution_leaks",
    "STUB",
    "stub_solution",
    "student_notebook",
    "TABLE_BEGIN",
    "TABLE_END",
    "TOP_LEVEL_STUB",
    "nbgrader_timeout",
    "update_instructors_page",
]
