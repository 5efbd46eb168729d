"""The assignments' notebooks from a chapter (``python -m booktools.assignments build``).

``build`` writes, per chapter ``NN_slug``,

- ``DIR/student/NN_slug.ipynb``: solution code between ``### BEGIN SOLUTION`` / ``### END SOLUTION``
  replaced by ``raise NotImplementedError()`` at the same indentation (inside a function), or by
  ``# YOUR CODE HERE`` alone in a cell whose regions are all at the top level, where a ``raise`` would
  stop "Run all"; solution prose (``{solution-start}`` ... ``{solution-end}``) and unmarked solution
  code cells removed, a ``YOUR ANSWER HERE`` cell for written exercises, outputs cleared; install
  cell and checks kept, and a cell after the install cell that lets unanswered checks report
  "not implemented yet" instead of raising (``icl_book.checks.continue_when_unanswered``), so "Run
  all" on an untouched student notebook reaches the end;
- ``DIR/instructor/NN_slug.ipynb``: everything, with the executed outputs;
- ``DIR/nbgrader/source/NN_slug/NN_slug.ipynb``: the student notebook *with* the marked solutions, i.e. an
  nbgrader source notebook whose ``nbgrader generate_assignment`` release is the student notebook.

All three carry nbgrader cell metadata (solution cells ``solution: true``; check cells ``grade: true`` with
``points``; written answers are manually graded answers), with the same ``grade_id`` in every edition.
A check cell whose check records its cases as parts (``icl_book.checks.Parts``) also carries
``metadata.icl_book.partial_credit: true``: the grader then scores ``points × parts passed / parts``
(``booktools.grading.grader``); every other exercise is all or nothing.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from booktools.chapters import (
    BEGIN_SOLUTION,
    END_SOLUTION,
    BookFormatError,
    book_cells,
    chapter_files,
    exercise_labels,
    load_notebook,
)
from booktools.myst import SOLUTION_TITLE, check_call, check_modules
from booktools.release_format import (
    ANSWER_KEY,
    PARTIAL_CREDIT_KEY,
    answer_grade_id,
    check_grade_id,
    nbgrader_metadata,
    nbgrader_of,
    solution_grade_id,
)

__all__ = [
    "AssignmentError",
    "BEGIN_SOLUTION",
    "END_SOLUTION",
    "STUB",
    "CODE_STUB",
    "TOP_LEVEL_STUB",
    "CONTINUE_CELL",
    "ANSWER_STUB",
    "stub_solution",
    "student_notebook",
    "instructor_notebook",
    "nbgrader_source_notebook",
    "release_notebook",
    "sample_submission",
    "solution_leaks",
    "edition_of",
    "build",
    "chapter_release",
]


STUB = "raise NotImplementedError()"
CODE_STUB = (
    "# YOUR CODE HERE",
    STUB,
)  # nbgrader's ClearSolutions.code_stub["python"], line by line
#: The stub of a cell whose solution regions are all at the top level. nbgrader's stub would raise
#: there and stop "Run all"; such a cell is therefore a plain cell (no nbgrader metadata, so nbgrader
#: releases it as it is) holding this stub, in the nbgrader source too. Its answer variables keep the
#: values set above the region (None), for which the checks report "not implemented yet".
TOP_LEVEL_STUB = ("# YOUR CODE HERE",)
#: The student edition's second code cell (after the install cell).
CONTINUE_CELL = (
    "# Student edition: a check whose exercise you have not answered yet says so and\n"
    '# lets "Run all" go on; a wrong answer stops there with a hint.\n'
    "from icl_book.checks import continue_when_unanswered\n"
    "\n"
    "continue_when_unanswered()"
)
#: The first line of a collapsed solution code cell in the plain-notebook edition (booktools.editions).
ANSWER_STUB = (
    "YOUR ANSWER HERE"  # nbgrader's text stub: identical in our build and in nbgrader's release
)


class AssignmentError(ValueError):
    """A chapter does not follow the exercise/solution/check conventions of CONTRIBUTING.md."""


# --------------------------------------------------------------------------------------------------
# Reading the conventions: solution markers, solution blocks, exercises, check cells
# --------------------------------------------------------------------------------------------------
def stub_solution(source: str, stub: tuple[str, ...] = CODE_STUB) -> tuple[str, int]:
    """Replace every ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` region by ``stub``, by default
    nbgrader's (``# YOUR CODE HERE`` and ``raise NotImplementedError()``).

    The stub keeps the indentation of the BEGIN marker; lines outside the regions are kept.
    Returns ``(new_source, number_of_regions)``. Raises :class:`AssignmentError` on unbalanced markers.
    """
    out, in_solution, regions = [], False, 0
    for line in source.split("\n"):
        stripped = line.strip()
        if stripped == BEGIN_SOLUTION:
            if in_solution:
                raise AssignmentError("nested ### BEGIN SOLUTION")
            in_solution, regions = True, regions + 1
            indent = line[: len(line) - len(line.lstrip())]
            out.extend(indent + line for line in stub)
        elif stripped == END_SOLUTION:
            if not in_solution:
                raise AssignmentError("### END SOLUTION without ### BEGIN SOLUTION")
            in_solution = False
        elif not in_solution:
            out.append(line)
    if in_solution:
        raise AssignmentError("### BEGIN SOLUTION without ### END SOLUTION")
    return "\n".join(out), regions


def _top_level_regions(source: str) -> bool:
    """Whether every solution region of ``source`` starts at the top level (no indentation).
    Raises :class:`AssignmentError` when some do and some do not: their stubs differ."""
    begins = [line for line in source.split("\n") if line.strip() == BEGIN_SOLUTION]
    top = [not line[:1].isspace() for line in begins]
    if any(top) and not all(top):
        raise AssignmentError(
            "a cell mixes top-level and indented solution regions: put them in separate cells"
        )
    return bool(top) and all(top)


# --------------------------------------------------------------------------------------------------
# The three editions
# --------------------------------------------------------------------------------------------------
def _book_cells(nb):
    """The chapter's typed cells (:func:`booktools.chapters.book_cells`); a chapter that breaks the
    conventions is an :class:`AssignmentError`."""
    try:
        return book_cells(nb)
    except BookFormatError as exc:
        raise AssignmentError(str(exc)) from None


def _points(cell) -> float:
    pts = nbgrader_of(cell).get("points", 1)
    return int(pts) if float(pts).is_integer() else float(pts)


def _graded_in_parts(name: str | None, module: str) -> bool:
    """Whether the check ``name`` (imported from ``module``) records its cases as parts
    (``icl_book.checks.Parts``, marked ``graded_in_parts``): its release then gives partial credit.
    A check the builder cannot import is graded all or nothing."""
    import importlib

    if not name:
        return False
    try:
        check = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return False
    return getattr(check, "graded_in_parts", False) is True


def _edition(nb, edition: str, source_name: str | None = None):
    """Build one edition: ``instructor``, or ``student``: the nbgrader source (student cells, marked
    solutions kept), whose release (:func:`release_notebook`) is what students get."""
    import nbformat

    pieces = _book_cells(nb)
    checked = {p.label for p in pieces if p.kind == "check"}
    checks = [p for p in pieces if p.kind == "check"]
    labels = exercise_labels(nb)
    for p in checks:
        if p.label not in labels:
            labels.append(p.label)
    out = nbformat.v4.new_notebook()
    out.metadata = copy.deepcopy(nb.metadata)
    if edition != "instructor":
        for key in ("widgets", "jupytext"):
            out.metadata.pop(key, None)
    check_points = {p.label: _points(p.cell) for p in checks}
    modules = check_modules(nb)
    in_parts = {
        p.label
        for p in checks
        if _graded_in_parts(
            check_call(p.cell), modules.get(check_call(p.cell) or "", "icl_book.checks")
        )
    }
    out.metadata["icl_book"] = {
        "edition": edition,
        "chapter": source_name,
        "exercises": [
            {
                "label": label,
                "kind": "coding" if label in check_points else "written",
                "points": check_points.get(label, 1),
                "partial_credit": label in in_parts,
            }
            for label in labels
        ],
    }
    cells = []
    solution_counts: dict[str, int] = {}

    def solution_id(label):
        solution_counts[label] = solution_counts.get(label, 0) + 1
        return solution_grade_id(label, solution_counts[label])

    def mark_partial_credit(piece, cell) -> None:
        """A check cell whose check records parts gives partial credit: ``metadata.icl_book``
        (nbgrader's validator drops keys it does not know from ``metadata.nbgrader``)."""
        if piece.kind == "check" and piece.label in in_parts:
            cell.metadata.setdefault("icl_book", {})[PARTIAL_CREDIT_KEY] = True

    def grading_metadata(piece) -> dict:
        """nbgrader metadata of a check cell (graded, locked) or of a solution cell (the student's answer)."""
        if piece.kind == "check":
            return nbgrader_metadata(
                check_grade_id(piece.label),
                solution=False,
                grade=True,
                points=_points(piece.cell),
                locked=True,
            )
        return nbgrader_metadata(solution_id(piece.label or "solution"), solution=True, grade=False)

    if edition == "instructor":
        for cell in nb.cells:
            new = copy.deepcopy(cell)
            new.get("metadata", {}).pop("execution", None)
            cells.append(new)
        by_index = {p.index: p for p in pieces if p.cell_type == "code"}
        for i, new in enumerate(cells):
            p = by_index.get(i)
            if p is None:
                continue
            if p.kind in ("check", "solution-code"):
                new.metadata["nbgrader"] = grading_metadata(p)
                mark_partial_credit(p, new)
    else:
        previous_text_cell = None
        for k, p in enumerate(pieces):
            if p.kind == "text":
                if previous_text_cell is not None and previous_text_cell[0] == p.index:
                    cell = previous_text_cell[1]
                    cell.source = cell.source.rstrip("\n") + "\n\n" + p.source.lstrip("\n")
                else:
                    cell = nbformat.v4.new_markdown_cell(p.source.strip("\n"))
                    cell.metadata = copy.deepcopy(p.cell.get("metadata", {}))
                    cell.metadata.pop("nbgrader", None)
                    cells.append(cell)
                    previous_text_cell = (p.index, cell)
                continue
            previous_text_cell = None
            if p.kind not in ("solution-prose", "solution-extra"):
                new = nbformat.v4.new_code_cell(p.source)
                new.metadata = copy.deepcopy(p.cell.get("metadata", {}))
                new.metadata.pop("execution", None)
                top_level = False
                if p.kind == "solution-code":
                    # The plain edition collapses solution code (a Colab form, source_hidden); the
                    # student must see the stub: expanded, without the "Solution" title.
                    lines = new.source.split("\n")
                    if lines and lines[0].strip() == SOLUTION_TITLE:
                        new.source = "\n".join(lines[1:])
                    new.metadata.pop("cellView", None)
                    new.metadata.pop("icl_edition", None)
                    jupyter = new.metadata.get("jupyter", {})
                    jupyter.pop("source_hidden", None)
                    if not jupyter:
                        new.metadata.pop("jupyter", None)
                    top_level = _top_level_regions(new.source)
                    if top_level:  # see TOP_LEVEL_STUB
                        new.source, _ = stub_solution(new.source, TOP_LEVEL_STUB)
                if p.kind in ("check", "solution-code"):
                    # computed for every solution cell, so that grade ids match the instructor's
                    meta = grading_metadata(p)
                    mark_partial_credit(p, new)
                    if not top_level:
                        new.metadata["nbgrader"] = meta
                    else:  # a plain cell; the id says whose answer it holds (sample_submission)
                        new.metadata.pop("nbgrader", None)
                        new.metadata["icl_book"] = {ANSWER_KEY: meta["grade_id"]}
                else:
                    new.metadata.pop("nbgrader", None)
                cells.append(new)
            # An exercise without a check (derivation, experiment) gets an answer cell where its
            # solution block ended.
            last_of_block = p.in_block and (
                k + 1 == len(pieces)
                or not (pieces[k + 1].in_block and pieces[k + 1].label == p.label)
            )
            if last_of_block and p.label and p.label not in checked:
                answer = nbformat.v4.new_markdown_cell(ANSWER_STUB)
                answer.metadata["nbgrader"] = nbgrader_metadata(
                    answer_grade_id(p.label), solution=True, grade=True, points=1
                )
                cells.append(answer)
        if cells:
            note = nbformat.v4.new_markdown_cell(
                "> **Student edition.** Write your code where it says `# YOUR CODE HERE` (replacing the "
                f"`raise NotImplementedError()` under it, if any) and your answer in place of *{ANSWER_STUB}*. "
                "Each check cell prints `<exercise>: correct` when your answer is right and "
                '`<exercise>: not implemented yet` while it is not written ("Run all" goes on); '
                "a wrong answer stops there with a hint."
            )
            cells.insert(1, note)
            first_code = next((i for i, c in enumerate(cells) if c.cell_type == "code"), None)
            if first_code is not None:  # after the install cell, which installs icl_book
                cells.insert(first_code + 1, nbformat.v4.new_code_cell(CONTINUE_CELL))
    for i, cell in enumerate(cells):
        cell["id"] = f"cell-{i:03d}"
    out.cells = cells
    nbformat.validate(out)
    return out


def student_notebook(nb, name: str | None = None):
    """The student edition of a chapter notebook ``nb`` (a new notebook; ``nb`` is not modified).

    It is :func:`release_notebook` of :func:`nbgrader_source_notebook`: what ``nbgrader
    generate_assignment`` releases from our nbgrader source, cell for cell (a test runs nbgrader).
    """
    return release_notebook(nbgrader_source_notebook(nb, name))


def _nb_is(cell, key: str) -> bool:
    return bool(nbgrader_of(cell).get(key, False))


def release_notebook(source):
    """The student release of an nbgrader source notebook, as ``nbgrader generate_assignment`` writes it.

    Run through nbgrader's own preprocessors, in its order (LockCells, ClearSolutions, ClearOutput,
    ComputeChecksums; our sources have no header, hidden tests or mark schemes): solution and check cells
    locked, solution regions replaced by ``# YOUR CODE HERE`` / ``raise NotImplementedError()``, written
    answers by ``YOUR ANSWER HERE``, outputs cleared, checksums computed. A test compares the result
    with ``nbgrader generate_assignment``'s release, cell for cell.
    """
    import nbformat
    from nbgrader.preprocessors import ClearOutput, ClearSolutions, ComputeChecksums, LockCells

    nb, resources = copy.deepcopy(source), {}
    for step in (LockCells(), ClearSolutions(), ClearOutput(), ComputeChecksums()):
        try:
            nb, resources = step.preprocess(nb, resources)
        except RuntimeError as exc:  # e.g. a solution region outside a solution cell
            raise AssignmentError(f"nbgrader's {type(step).__name__}: {exc}") from None
    nbformat.validate(nb)
    return nb


def instructor_notebook(nb, name: str | None = None):
    """The instructor edition: every cell and output of ``nb``, plus nbgrader metadata."""
    return _edition(nb, "instructor", name)


def nbgrader_source_notebook(nb, name: str | None = None):
    """The student edition with the marked solutions kept: a source notebook for ``nbgrader``."""
    return _edition(nb, "student", name)


def sample_submission(release, instructor, solved):
    """A submission an honest student could hand in: ``release`` with the instructor's answers in
    the solution cells of the exercises in ``solved`` (labels) and the stubs elsewhere.

    Used to try a grading set-up before a course (``benchmarks/bench_grader.py`` grades such
    submissions with our grader and with nbgrader and compares the scores).
    """
    answers = {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in instructor.cells
        if _nb_is(c, "solution")
    }
    sub = copy.deepcopy(release)
    for cell in sub.cells:
        if _nb_is(cell, "solution"):
            gid = cell.metadata["nbgrader"]["grade_id"]
        else:  # a top-level answer cell (TOP_LEVEL_STUB) is a plain cell naming its answer
            gid = cell.get("metadata", {}).get("icl_book", {}).get(ANSWER_KEY)
        if gid is not None and gid.split("-solution")[0] in solved:
            cell.source = answers[gid]
    return sub


def solution_leaks(student, instructor, min_chars: int = 24) -> list[str]:
    """Solution text of ``instructor`` that appears in ``student`` (an empty list when none does).

    Scans for the solution markers and directives, and for every line of solution code (inside the
    markers, or in a code cell inside a solution block) and of solution prose that is at least
    ``min_chars`` long and does not also occur outside the solutions (e.g. a line of the chapter's body
    that a solution repeats).
    """
    problems = []
    for i, cell in enumerate(student.cells):
        for token in (
            BEGIN_SOLUTION,
            END_SOLUTION,
            "{solution-start}",
            "{solution-end}",
            "{solution}",
        ):
            if token in cell.source:
                problems.append(f"student cell {i} contains {token!r}")
    solution_lines, other_lines = set(), set()
    for p in _book_cells(instructor):
        if p.kind in ("solution-prose", "solution-extra"):
            solution_lines.update(line.strip() for line in p.source.split("\n"))
        elif p.kind == "solution-code":
            inside = False
            for line in p.source.split("\n"):
                s = line.strip()
                if s in (BEGIN_SOLUTION, END_SOLUTION):
                    inside = s == BEGIN_SOLUTION
                    continue
                (solution_lines if inside else other_lines).add(s)
        else:
            other_lines.update(line.strip() for line in p.source.split("\n"))
    other_text = "\n".join(other_lines)
    secret = {s for s in solution_lines if len(s) >= min_chars and s not in other_text}
    for i, cell in enumerate(student.cells):
        for text in sorted(secret):
            if text in cell.source:
                problems.append(f"student cell {i} contains solution text: {text[:60]!r}")
    return problems


def edition_of(chapter: str | os.PathLike) -> Path:
    """The plain-notebook edition ``notebooks/NN_slug.ipynb`` of a chapter file (the assignments are
    built on it, so they render in Colab and Jupyter as the editions do); the chapter itself when the
    edition does not exist (e.g. a chapter being written)."""
    chapter = Path(chapter)
    edition = chapter.resolve().parent.parent / "notebooks" / f"{chapter.stem}.ipynb"
    return edition if edition.exists() else chapter


def build(
    chapters=None,
    out: str | os.PathLike = "_build/assignments",
    chapters_dir: str | os.PathLike | None = None,
) -> list[Path]:
    """Write the student, instructor and nbgrader-source notebooks of the selected chapters.

    Returns the paths written. See :func:`booktools.chapters.chapter_files` for ``chapters`` and
    ``chapters_dir``.
    """
    import nbformat

    out = Path(out)
    written = []
    for path in chapter_files(chapters, chapters_dir):
        nb = load_notebook(edition_of(path))
        try:
            editions = {
                "student": student_notebook(nb, path.stem),
                "instructor": instructor_notebook(nb, path.stem),
                "nbgrader": nbgrader_source_notebook(nb, path.stem),
            }
        except AssignmentError as exc:
            raise AssignmentError(f"{path.name}: {exc}") from None
        for edition, book in editions.items():
            if edition == "nbgrader":
                target = out / "nbgrader" / "source" / path.stem / f"{path.stem}.ipynb"
            else:
                target = out / edition / f"{path.stem}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(book, target)
            written.append(target)
    return written


def chapter_release(key: str, chapters_dir: str | os.PathLike | None = None):
    """The student edition (= nbgrader release) of one chapter, built from the repository: what the
    grader trusts for that chapter's exercises, points and checks (``chapters_dir``: default the
    current directory's repository's ``chapters``)."""
    (path,) = chapter_files([key], chapters_dir)
    return student_notebook(load_notebook(edition_of(path)), path.stem)
