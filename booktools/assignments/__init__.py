"""Course assignments from the chapters: student, instructor and nbgrader-source notebooks, and the
command line of the assignments and the grader (``python -m booktools.assignments
{build,grade,gradebook,table}``; grading itself is :mod:`booktools.grading`). The modules, one job
each:

- ``course``: the course's chapters (exercise prefixes, objectives) and the files a selection names.
- ``release``: a chapter's student, instructor and nbgrader-source notebooks (what is graded against).
- ``instructors``: the instructors page's chapter table.
- ``cli``: the command line ``build``, ``grade``, ``gradebook``, ``table`` (run by ``__main__``).

The names the rest of the tree uses are re-exported here (``from booktools import assignments as A;
A.student_notebook(nb)``); the command line is :func:`booktools.assignments.cli.main`, which imports
the grader, which imports the release builder: re-exporting it here would be an import cycle.
"""

from booktools.assignments.course import (
    CHAPTERS,
    STEM_RE,
    Chapter,
    chapter_files,
    chapter_info,
    chapters_folder,
    load_notebook,
)
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
    exercise_section_start,
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
    "Chapter",
    "chapter_files",
    "chapter_info",
    "chapter_release",
    "CHAPTERS",
    "chapters_folder",
    "CODE_STUB",
    "CONTINUE_CELL",
    "edition_of",
    "END_SOLUTION",
    "exercise_section_start",
    "instructor_notebook",
    "instructors_table",
    "load_notebook",
    "nbgrader_source_notebook",
    "release_notebook",
    "sample_submission",
    "solution_leaks",
    "STEM_RE",
    "STUB",
    "stub_solution",
    "student_notebook",
    "TABLE_BEGIN",
    "TABLE_END",
    "TOP_LEVEL_STUB",
    "nbgrader_timeout",
    "update_instructors_page",
]
