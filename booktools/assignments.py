"""Course assignments: student and instructor notebooks from the chapters, and an autograder.

Two commands (the repository: ``--root DIR``, default the one the current directory is in)::

    python -m booktools.assignments build [--root DIR] [--chapters 00 hermite ...] [--out DIR]
    python -m booktools.assignments grade NOTEBOOK... [--root DIR] [--out report.csv] [--timeout S]

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

``grade`` executes each submission in a clean kernel with a per-cell and a per-notebook timeout, and scores
each coding exercise by its *check cell* (a code cell calling exactly one ``check_<chapter>_ex<N>(...)``).
It writes one CSV row per student x exercise. Grading runs student code: run it in a sandbox (a container
or a throw-away VM without credentials), never in an account that holds anything of value.
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import hashlib
import json
import os
import re
import secrets
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from booktools import find_root
from booktools.chapters import chapter_title
from booktools.grading import grader
from booktools.grading.grader import ExerciseResult
from booktools.myst import (
    SOLUTION_TITLE,
    check_call,
    check_calls,
    check_label,
    check_modules,
)

__all__ = [
    "Chapter",
    "CHAPTERS",
    "AssignmentError",
    "chapter_info",
    "chapter_files",
    "load_notebook",
    "stub_solution",
    "exercise_section_start",
    "student_notebook",
    "instructor_notebook",
    "nbgrader_source_notebook",
    "release_notebook",
    "solution_leaks",
    "edition_of",
    "build",
    "ExerciseResult",
    "chapter_release",
    "grade",
    "write_report",
    "instructors_table",
    "update_instructors_page",
    "main",
]


BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
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


# --------------------------------------------------------------------------------------------------
# The chapters (the instructors page's table is generated from this registry)
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Chapter:
    """One chapter of the book.

    ``number`` and ``slug`` name the files ``chapters/<number>_<slug>.{md,ipynb}``; ``short`` is the
    exercise-label prefix (``<short>-ex<N>``, checks ``check_<short>_ex<N>``); ``run_time`` is the
    approximate execution time of the whole chapter on 2 CPU cores (``None`` until measured).
    """

    number: str
    slug: str
    short: str
    objectives: tuple[str, ...]
    run_time: str | None = None

    @property
    def stem(self) -> str:
        return f"{self.number}_{self.slug}"

    @property
    def title(self) -> str:
        """The chapter's title: its source's ``# `` heading (:func:`booktools.chapters.chapter_title`) in
        the current directory's repository (:meth:`title_in` reads another's)."""
        return self.title_in()

    def title_in(self, chapters_dir: str | os.PathLike | None = None) -> str:
        """The chapter's title as ``chapters_dir`` (default: the current directory's repository's
        ``chapters``) has it."""
        return chapter_title(_chapters_dir(chapters_dir) / f"{self.stem}.md")


def _chapters_dir(
    chapters_dir: str | os.PathLike | None = None, root: str | os.PathLike | None = None
) -> Path:
    """``chapters_dir``, or by default the ``chapters`` folder of the repository ``root`` (default:
    the one the current directory is in; :func:`booktools.find_root`)."""
    return Path(chapters_dir) if chapters_dir is not None else find_root(root) / "chapters"


# run_time=None: the instructors table takes the run time from chapters/timings.json (written when the
# chapters are executed); set a string here to override it.
#: The book's chapters, in order (the instructors page's table is generated from it).
CHAPTERS: tuple[Chapter, ...] = (
    Chapter(
        "00",
        "prologue",
        "prologue",
        (
            "See a prompt as a small regression data set and an in-context learner as a function of it.",
            "Compare least squares, ridge and one gradient-descent step as the context grows.",
            "Derive the best step size of one gradient-descent step.",
        ),
    ),
    Chapter(
        "01",
        "hermite",
        "hermite",
        (
            "Expand a function in probabilists' Hermite polynomials and compute its coefficients.",
            "Separate a link function's linear component from its nonlinear energy.",
            "Use closed forms and quadrature, and know when quadrature converges slowly.",
        ),
    ),
    Chapter(
        "02",
        "lsa_gradient_descent",
        "lsa",
        (
            "Write linear self-attention on a prompt of tokens and read out its prediction.",
            "Build the weights for which linear self-attention equals one (preconditioned) GD step.",
            "Find the optimal preconditioner and its risk.",
        ),
    ),
    Chapter(
        "03",
        "asymptotic_theory",
        "asymptotics",
        (
            "Set up the proportional limit: context, task diversity and pretraining data scaled with d.",
            "Evaluate the exact in-context and in-distribution errors of a given model.",
            "Explain double descent at τ = 1 and the transition from memorisation to generalisation.",
        ),
    ),
    Chapter(
        "04",
        "nonlinearity_noise",
        "nonlinear",
        (
            "Show that linear attention extracts only the linear Hermite component of a teacher.",
            "Map a nonlinear single-index task to a linear task with effective noise.",
            "Check the mapping against simulations as the dimension grows.",
        ),
    ),
    Chapter(
        "05",
        "glu_kernel_regression",
        "glu",
        (
            "Bound what linear self-attention can do on nonlinear tasks.",
            "Build a GLU layer that writes quadratic features, and an LSA+GLU block that takes one "
            "kernel-regression GD step.",
            "Relate the error's decay to the number of features.",
        ),
    ),
    Chapter(
        "06",
        "depth_block_coordinate_descent",
        "depth",
        (
            "Stack blocks that each update a subset of kernel features: block-coordinate descent.",
            "Reach a feature space larger than any one block's width.",
            "Compare trained deep models with kernel baselines against context length and depth.",
        ),
    ),
)


class AssignmentError(ValueError):
    """A chapter does not follow the exercise/solution/check conventions of CONTRIBUTING.md."""


def chapter_info(key: str) -> Chapter | None:
    """The registry entry for a chapter number (``"00"``, ``"0"``), stem, slug or short name; else ``None``."""
    key = str(key).strip()
    for ch in CHAPTERS:
        if key in {ch.number, ch.stem, ch.slug, ch.short} or (
            key.isdigit() and int(key) == int(ch.number)
        ):
            return ch
    return None


_STEM_RE = re.compile(r"^(?P<number>\d\d)_(?P<slug>[A-Za-z0-9_]+)$")


def chapter_files(selection=None, chapters_dir: str | os.PathLike | None = None) -> list[Path]:
    """The chapter notebooks to build, in book order (``NN_slug.ipynb``, else ``NN_slug.md``).

    ``selection``: ``None`` for every chapter, or numbers (``"00"``, ``"1"``), stems (``"01_hermite"``),
    slugs or short names (``"lsa"``). Raises ``ValueError`` for a selection that matches no chapter.
    ``chapters_dir``: default the current directory's repository's ``chapters``.
    """
    chapters_dir = _chapters_dir(chapters_dir)
    if not chapters_dir.is_dir():
        raise ValueError(f"chapters_dir must be an existing directory, got {chapters_dir}")
    stems = sorted(
        {p.stem for p in chapters_dir.glob("[0-9][0-9]_*") if p.suffix in (".ipynb", ".md")}
    )
    files = []
    for stem in stems:
        ipynb, md = chapters_dir / f"{stem}.ipynb", chapters_dir / f"{stem}.md"
        files.append(ipynb if ipynb.exists() else md)
    if selection is None or len(selection) == 0:
        return files
    chosen = []
    for key in selection:
        key = str(key).strip()
        matches = []
        for path in files:
            m = _STEM_RE.match(path.stem)
            keys = {path.stem}
            if m:
                keys |= {m["number"], m["slug"], str(int(m["number"]))}
            info = chapter_info(path.stem)
            if info is not None:
                keys.add(info.short)
            if key in keys or (key.isdigit() and m and int(key) == int(m["number"])):
                matches.append(path)
        if not matches:
            names = ", ".join(p.stem for p in files) or "none"
            raise ValueError(
                f"chapters: {key!r} matches no chapter in {chapters_dir} (have: {names})"
            )
        chosen.extend(p for p in matches if p not in chosen)
    return sorted(chosen, key=lambda p: p.stem)


def load_notebook(path: str | os.PathLike):
    """Read a notebook (``.ipynb``, or a Jupytext ``.md`` through jupytext) as an nbformat v4 node."""
    import nbformat

    path = Path(path)
    if not path.exists():
        raise ValueError(f"path must be an existing notebook, got {path}")
    if path.suffix == ".ipynb":
        return nbformat.read(path, as_version=4)
    import jupytext

    return jupytext.read(path)


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


def _has_markers(source: str) -> bool:
    return any(line.strip() in (BEGIN_SOLUTION, END_SOLUTION) for line in source.split("\n"))


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


_FENCE_RE = re.compile(r"^\s*(?P<fence>`{3,}|:{3,})\{(?P<name>[\w-]+)\}\s*(?P<arg>.*?)\s*$")


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


@dataclass
class _Piece:
    """A (part of a) cell of the source notebook with its role."""

    cell_index: int
    cell_type: str
    source: str
    role: str  # text | solution-prose | solution-code | solution-extra | check | code
    label: str | None = None
    cell: object = None
    in_block: bool = False


def _copy_directive(lines: list[str], i: int, fence: str, buf: list[str]) -> int:
    """Append the directive opening at ``lines[i]`` up to its closing ``fence`` to ``buf``; return the next index."""
    buf.append(lines[i])
    i += 1
    while i < len(lines) and not _closes(lines[i], fence):
        buf.append(lines[i])
        i += 1
    if i < len(lines):
        buf.append(lines[i])
        i += 1
    return i


def _pieces(nb) -> list[_Piece]:
    """Split a chapter notebook into pieces: markdown is split at solution-block boundaries."""
    pieces: list[_Piece] = []
    in_block, block_label, current_exercise = False, None, None
    for idx, cell in enumerate(nb.cells):
        source = cell.get("source", "")
        if cell.cell_type == "code":
            check = check_call(cell)
            if len(check_calls(source)) > 1:
                raise AssignmentError(
                    f"cell {idx} calls several checks: give each check its own cell"
                )
            if check is not None:
                if in_block:
                    raise AssignmentError(
                        f"cell {idx}: the check {check} is inside a solution block; "
                        "put it after {solution-end}"
                    )
                pieces.append(_Piece(idx, "code", source, "check", check_label(check), cell))
            elif _has_markers(source):
                label = block_label if in_block else current_exercise
                pieces.append(
                    _Piece(idx, "code", source, "solution-code", label, cell, in_block=in_block)
                )
            elif in_block:
                pieces.append(
                    _Piece(idx, "code", source, "solution-extra", block_label, cell, in_block=True)
                )
            else:
                pieces.append(_Piece(idx, "code", source, "code", None, cell))
            continue
        if cell.cell_type != "markdown":
            pieces.append(_Piece(idx, cell.cell_type, source, "text", None, cell))
            continue
        lines = source.split("\n")
        buf: list[str] = []
        kind = "solution-prose" if in_block else "text"

        def flush(new_kind, label, _buf=buf, _idx=idx, _cell=cell):
            nonlocal kind
            if _buf and (kind != "text" or "\n".join(_buf).strip()):
                pieces.append(
                    _Piece(_idx, "markdown", "\n".join(_buf), kind, label, _cell, kind != "text")
                )
            _buf.clear()
            kind = new_kind

        i = 0
        while i < len(lines):
            line = lines[i]
            m = _FENCE_RE.match(line)
            name = m["name"] if m else None
            if not in_block and name in ("solution-start", "solution"):
                flush("solution-prose", block_label)
                block_label = m["arg"].split()[0] if m["arg"] else current_exercise
                i = _copy_directive(lines, i, m["fence"], buf)
                if name == "solution-start":
                    in_block = True
                else:  # a plain {solution} directive: the whole directive is the block
                    flush("text", block_label)
                continue
            if in_block and name == "solution-end":
                i = _copy_directive(lines, i, m["fence"], buf)
                in_block = False
                flush("text", block_label)
                continue
            if name == "exercise":
                for opt in lines[i + 1 :]:
                    lm = re.match(r"^\s*:label:\s*(\S+)", opt)
                    if lm:
                        current_exercise = lm.group(1)
                        break
                    if not opt.strip().startswith(":"):
                        break
            buf.append(line)
            i += 1
        flush("solution-prose" if in_block else "text", block_label)
    if in_block:
        raise AssignmentError(f"{{solution-start}} {block_label} has no {{solution-end}}")
    return pieces


def _is_edition(nb) -> bool:
    """A plain-notebook edition (``booktools.editions``): its solution parts carry ``icl_edition.solution``."""
    return "icl_edition" in nb.get("metadata", {})


def _edition_pieces(nb) -> list[_Piece]:
    """The pieces of a plain-notebook edition: one per cell, solutions marked by their cell metadata."""
    pieces: list[_Piece] = []
    for idx, cell in enumerate(nb.cells):
        source = cell.get("source", "")
        label = cell.get("metadata", {}).get("icl_edition", {}).get("solution")
        if cell.cell_type == "code":
            if len(check_calls(source)) > 1:
                raise AssignmentError(
                    f"cell {idx} calls several checks: give each check its own cell"
                )
            check = check_call(cell)
            if check is not None:
                if label is not None:
                    raise AssignmentError(
                        f"cell {idx}: the check {check} is inside a solution block; "
                        "put it after {solution-end}"
                    )
                pieces.append(_Piece(idx, "code", source, "check", check_label(check), cell))
            elif label is not None:
                role = "solution-code" if _has_markers(source) else "solution-extra"
                pieces.append(_Piece(idx, "code", source, role, label, cell, in_block=True))
            else:
                pieces.append(_Piece(idx, "code", source, "code", None, cell))
        elif cell.cell_type == "markdown" and label is not None:
            pieces.append(_Piece(idx, "markdown", source, "solution-prose", label, cell, True))
        else:
            pieces.append(_Piece(idx, cell.cell_type, source, "text", None, cell))
    return pieces


def _edition_exercise_labels(nb) -> list[str]:
    """Exercise labels of a plain edition, in order: every exercise has a solution or a check."""
    labels = []
    for p in _edition_pieces(nb):
        if p.label and p.label not in labels:
            labels.append(p.label)
    return labels


def _exercise_labels(nb) -> list[str]:
    if _is_edition(nb):
        return _edition_exercise_labels(nb)
    labels = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.split("\n")
        for i, line in enumerate(lines):
            m = _FENCE_RE.match(line)
            if m and m["name"] == "exercise":
                for opt in lines[i + 1 :]:
                    lm = re.match(r"^\s*:label:\s*(\S+)", opt)
                    if lm:
                        labels.append(lm.group(1))
                        break
                    if not opt.strip().startswith(":"):
                        break
    return labels


def exercise_section_start(nb) -> int:
    """Index of the first cell of the exercises (the ``## Exercises`` heading, else the first
    ``{exercise}``); ``len(nb.cells)`` when there is none."""
    for pattern in (r"^#{1,4}\s+Exercises\b", r"^\s*(`{3,}|:{3,})\{exercise\}"):
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "markdown" and re.search(pattern, cell.source, re.MULTILINE):
                return i
    return len(nb.cells)


# --------------------------------------------------------------------------------------------------
# The three editions
# --------------------------------------------------------------------------------------------------
def _nbgrader(
    grade_id: str, *, solution: bool, grade: bool, points: float | None = None, locked=False
):
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


def _points(cell) -> float:
    pts = cell.get("metadata", {}).get("nbgrader", {}).get("points", 1)
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

    pieces = _edition_pieces(nb) if _is_edition(nb) else _pieces(nb)
    checked = {p.label for p in pieces if p.role == "check"}
    checks = [p for p in pieces if p.role == "check"]
    labels = _exercise_labels(nb)
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
        n = solution_counts[label]
        return f"{label}-solution" if n == 1 else f"{label}-solution-{n}"

    def mark_partial_credit(piece, cell) -> None:
        """A check cell whose check records parts gives partial credit: ``metadata.icl_book``
        (nbgrader's validator drops keys it does not know from ``metadata.nbgrader``)."""
        if piece.role == "check" and piece.label in in_parts:
            cell.metadata.setdefault("icl_book", {})[grader.PARTIAL_CREDIT_KEY] = True

    def grading_metadata(piece) -> dict:
        """nbgrader metadata of a check cell (graded, locked) or of a solution cell (the student's answer)."""
        if piece.role == "check":
            return _nbgrader(
                f"{piece.label}-check",
                solution=False,
                grade=True,
                points=_points(piece.cell),
                locked=True,
            )
        return _nbgrader(solution_id(piece.label or "solution"), solution=True, grade=False)

    if edition == "instructor":
        for cell in nb.cells:
            new = copy.deepcopy(cell)
            new.get("metadata", {}).pop("execution", None)
            cells.append(new)
        by_index = {p.cell_index: p for p in pieces if p.cell_type == "code"}
        for i, new in enumerate(cells):
            p = by_index.get(i)
            if p is None:
                continue
            if p.role in ("check", "solution-code"):
                new.metadata["nbgrader"] = grading_metadata(p)
                mark_partial_credit(p, new)
    else:
        previous_text_cell = None
        for k, p in enumerate(pieces):
            if p.role == "text":
                if previous_text_cell is not None and previous_text_cell[0] == p.cell_index:
                    cell = previous_text_cell[1]
                    cell.source = cell.source.rstrip("\n") + "\n\n" + p.source.lstrip("\n")
                else:
                    cell = nbformat.v4.new_markdown_cell(p.source.strip("\n"))
                    cell.metadata = copy.deepcopy(p.cell.get("metadata", {}))
                    cell.metadata.pop("nbgrader", None)
                    cells.append(cell)
                    previous_text_cell = (p.cell_index, cell)
                continue
            previous_text_cell = None
            if p.role not in ("solution-prose", "solution-extra"):
                new = nbformat.v4.new_code_cell(p.source)
                new.metadata = copy.deepcopy(p.cell.get("metadata", {}))
                new.metadata.pop("execution", None)
                top_level = False
                if p.role == "solution-code":
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
                if p.role in ("check", "solution-code"):
                    # computed for every solution cell, so that grade ids match the instructor's
                    meta = grading_metadata(p)
                    mark_partial_credit(p, new)
                    if not top_level:
                        new.metadata["nbgrader"] = meta
                    else:  # a plain cell; the id says whose answer it holds (sample_submission)
                        new.metadata.pop("nbgrader", None)
                        new.metadata["icl_book"] = {"answer": meta["grade_id"]}
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
                answer.metadata["nbgrader"] = _nbgrader(
                    f"{p.label}-answer", solution=True, grade=True, points=1
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
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get(key, False))


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
            gid = cell.get("metadata", {}).get("icl_book", {}).get("answer")
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
    for p in _pieces(instructor):
        if p.role in ("solution-prose", "solution-extra"):
            solution_lines.update(line.strip() for line in p.source.split("\n"))
        elif p.role == "solution-code":
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

    Returns the paths written. See :func:`chapter_files` for ``chapters`` and ``chapters_dir``.
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


# --------------------------------------------------------------------------------------------------
# Grading (booktools/grading/)
# --------------------------------------------------------------------------------------------------
def chapter_release(key: str, chapters_dir: str | os.PathLike | None = None):
    """The student edition (= nbgrader release) of one chapter, built from the repository: what the
    grader trusts for that chapter's exercises, points and checks (``chapters_dir``: default the
    current directory's repository's ``chapters``)."""
    (path,) = chapter_files([key], chapters_dir)
    return student_notebook(load_notebook(edition_of(path)), path.stem)


NBGRADER_STEPS = ("submitted", "autograded", "feedback")


def student_name(path: str | os.PathLike) -> str:
    """The student a submission belongs to, from its path: ``<student>`` for nbgrader's
    ``submitted/<student>/<assignment>/<notebook>.ipynb`` layout, otherwise the file's stem."""
    parts = Path(path).parts
    if len(parts) >= 4 and parts[-4] in NBGRADER_STEPS:
        return parts[-3]
    return Path(path).stem


def chapter_of_path(path: str | os.PathLike) -> str | None:
    """The chapter a submission's *path* names (nbgrader's assignment folder, else the file name), or
    ``None``; a submission's own metadata is never consulted (it could pick an easier chapter)."""
    path = Path(path)
    names = [path.stem]
    if len(path.parts) >= 4 and path.parts[-4] in NBGRADER_STEPS:
        names.insert(0, path.parts[-2])
    for name in names:
        if _STEM_RE.match(name) and chapter_info(name):
            return chapter_info(name).stem
    found = {ch.stem for name in names for ch in CHAPTERS if ch.stem in name}
    return found.pop() if len(found) == 1 else None


def batch_chapter(paths) -> str:
    """The one chapter a batch of submissions is for, inferred from their paths (see
    :func:`chapter_of_path`); ``ValueError`` when the paths name none or several (pass ``--release``)."""
    named = {chapter_of_path(p) for p in paths} - {None}
    if len(named) != 1:
        what = "no chapter" if not named else f"several chapters ({', '.join(sorted(named))})"
        raise ValueError(
            f"the submissions' paths name {what}: grade one chapter at a time and pass --release "
            "(a submission's own metadata never chooses what it is graded against)"
        )
    return named.pop()


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_safe(cell: str) -> str:
    """A CSV cell a spreadsheet shows as text: one starting with ``= + - @`` (or a tab or carriage
    return) would be read as a formula (``=HYPERLINK(...)`` in a forged message), so it gets a ``'``."""
    cell = str(cell)
    return "'" + cell if cell.startswith(_FORMULA_START) else cell


def grade(
    notebooks,
    out: str | os.PathLike | None = None,
    *,
    release=None,
    timeout: float = 600,
    notebook_timeout: float = 3600,
    limits=None,
    pythonpath=(),
    log=None,
    jobs: int = 1,
    no_sandbox: bool = False,
    inputs_seed: int | None = None,
    root: str | os.PathLike | None = None,
):
    """Grade every submission in ``notebooks`` (paths) and write the CSV report to ``out`` (if given).

    ``release``: the trusted release to grade against (a path or notebook; e.g. nbgrader's release or a
    student edition of :func:`build`). Without it, the chapter is inferred from the batch's *paths*
    (:func:`batch_chapter`: all must name the same chapter) and its student edition built from the
    repository ``root`` (default: the one the current directory is in); a submission's own metadata
    never decides. The student is named from the path (:func:`student_name`: nbgrader's
    ``submitted/<student>/<assignment>/`` layout, else the file stem). All files are read before the
    first submission runs.

    The report is written as grading goes (each student's rows appended when graded, so a killed run
    keeps what it graded) and rewritten in the order of ``notebooks`` at the end. A submission the
    grader cannot read is a row saying why; a kernel that cannot start raises
    :class:`booktools.grading.grader.InfrastructureError` (after writing what was graded), and a sandbox that
    cannot be built raises :class:`booktools.grading.sandbox.SandboxUnavailable` before anything runs,
    unless ``no_sandbox`` (then a warning goes to ``log``, or stderr).

    Checks whose fixed inputs a table of answers could pass draw them at grading time, from a seed per
    submission derived from ``inputs_seed`` and the student's name (``inputs_seed``: random if
    ``None``, printed to ``log``; pass the same to regrade with the same inputs). The row's message
    records the submission's seed.

    ``jobs`` submissions are graded side by side, each in its own sandboxed kernel; with
    ``jobs > 1`` and no ``limits.threads``, each kernel gets ``cpu_count // jobs`` BLAS threads
    (at least one). The report's rows follow the order of ``notebooks`` whatever ``jobs`` is.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    import threading

    from booktools.grading import grader, sandbox

    if not sandbox.namespaces_available():
        if not no_sandbox:
            raise sandbox.SandboxUnavailable(sandbox.SANDBOX_MISSING)
        print(sandbox.NO_SANDBOX_WARNING, file=log or sys.stderr, flush=True)
    notebooks = [Path(p) for p in notebooks]
    if release is not None:
        fixed = release if hasattr(release, "cells") else load_notebook(release)
    else:
        fixed = chapter_release(batch_chapter(notebooks), _chapters_dir(root=root))
    submissions = []
    for path in notebooks:
        try:
            data = path.read_bytes()
        except OSError as exc:
            data = f"unreadable: {exc}".encode()
        submissions.append((student_name(path), data))
    folders = sorted({str(p.resolve().parent) for p in notebooks})
    folders += sorted({str(p.resolve().parents[2]) for p in notebooks if len(p.parts) >= 4
                       and p.parts[-4] in NBGRADER_STEPS})  # fmt: skip

    grader._preload_references()
    if inputs_seed is None:
        inputs_seed = secrets.randbits(32)
    if log is not None:
        print(f"inputs seed {inputs_seed} (--inputs-seed regrades the same)", file=log, flush=True)

    def seed_of(student: str) -> int:
        digest = hashlib.sha256(f"{inputs_seed}:{student}".encode()).digest()
        return int.from_bytes(digest[:4], "big")

    limits = limits or sandbox.Limits()
    if jobs > 1 and limits.threads is None:
        limits = dataclasses.replace(limits, threads=max(1, (os.cpu_count() or 1) // jobs))

    lock = threading.Lock()
    partial = None
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.open("w", newline="", encoding="utf-8")
        _write_rows(csv.writer(partial), [])
        partial.flush()

    def one(k: int) -> list:
        student, data = submissions[k]
        try:
            rows = grader.grade_submission(
                data,
                student,
                fixed,
                timeout=timeout,
                notebook_timeout=notebook_timeout,
                limits=limits,
                pythonpath=pythonpath,
                hide_dirs=folders,
                no_sandbox=no_sandbox,
                inputs_seed=seed_of(student),
            )
        except (grader.InfrastructureError, sandbox.SandboxUnavailable):
            raise
        except Exception as exc:  # noqa: BLE001 - one submission's grader error is its row, not the batch's end
            rows = [
                grader.ExerciseResult(
                    student, "*", 0, 0, f"grader error: {type(exc).__name__}: {exc}"[:300]
                )
            ]
        with lock:
            if partial is not None:
                _write_rows(csv.writer(partial), rows, header=False)
                partial.flush()
                os.fsync(partial.fileno())
            if log is not None:
                got = sum(r.score for r in rows if not isinstance(r.score, str))
                top = sum(r.max_score for r in rows if not isinstance(r.score, str))
                print(f"{student}: {got:g}/{top:g}", file=log, flush=True)
        return rows

    done: dict[int, list] = {}
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:  # the kernels do the work
            futures = {pool.submit(one, k): k for k in range(len(submissions))}
            try:
                for fut in as_completed(futures):
                    done[futures[fut]] = fut.result()
            except BaseException:
                for fut in futures:
                    fut.cancel()
                raise
    finally:
        if partial is not None:
            partial.close()
    results = [row for k in sorted(done) for row in done[k]]
    if out is not None:
        write_report(results, out)
    return results


def write_report(results, out: str | os.PathLike) -> Path:
    """Write ``results`` as CSV: ``student, exercise, score, max_score, message`` (score ``manual``
    for written exercises); written beside ``out`` and renamed into place."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        _write_rows(csv.writer(fh), results)
    os.replace(tmp, out)
    return out


def _write_rows(writer, results, header: bool = True) -> None:
    if header:
        writer.writerow(["student", "exercise", "score", "max_score", "message"])
    for r in results:
        score = r.score if isinstance(r.score, str) else _exact(r.score)
        writer.writerow(
            [_csv_safe(c) for c in (r.student, r.exercise, score, _exact(r.max_score), r.message)]
        )


def _exact(x) -> str:
    """``x`` as the shortest text that reads back as the same float (``1``, ``0.5``,
    ``0.6666666666666666``): the gradebook step reads the report, so 2/3 must not become 0.666667."""
    text = repr(float(x) + 0.0)  # + 0.0: -0.0 is written 0
    return text[:-2] if text.endswith(".0") else text


# --------------------------------------------------------------------------------------------------
# The instructors page
# --------------------------------------------------------------------------------------------------
TABLE_BEGIN = "<!-- BEGIN chapter table: generated by `python -m booktools.assignments table`; do not edit -->"
TABLE_END = "<!-- END chapter table -->"


def _run_times(chapters_dir: Path) -> dict[str, float]:
    try:
        data = json.loads((Path(chapters_dir) / "timings.json").read_text(encoding="utf-8"))
        return {stem: float(entry["total_s"]) for stem, entry in data.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _format_run_time(seconds: float) -> str:
    """Coarse bins: execution times vary by tens of percent with the machine's load."""
    for limit, text in ((15, "< 15 s"), (30, "< 30 s"), (60, "< 1 min"), (120, "1–2 min")):
        if seconds < limit:
            return text
    for limit, text in ((300, "2–5 min"), (600, "5–10 min")):
        if seconds < limit:
            return text
    return "> 10 min"


def instructors_table(chapters_dir: str | os.PathLike | None = None) -> str:
    """The instructors page's chapter table (a MyST list-table) from :data:`CHAPTERS`.

    Titles come from the chapters' sources and run times from ``timings.json`` (whole-chapter
    execution on 2 CPU cores) in ``chapters_dir`` (default: the current directory's repository's
    ``chapters``), unless a chapter's ``run_time`` overrides them.
    """
    chapters_dir = _chapters_dir(chapters_dir)
    times = _run_times(chapters_dir)
    lines = [
        "```{list-table}",
        ":header-rows: 1",
        ":widths: 30 56 14",
        "",
        "* - Chapter",
        "  - Learning objectives",
        "  - Run time",
    ]
    for ch in CHAPTERS:
        if ch.run_time:
            run_time = ch.run_time
        elif ch.stem in times:
            run_time = _format_run_time(times[ch.stem])
        else:
            run_time = "not measured yet"
        lines += [
            f"* - **{ch.title_in(chapters_dir)}**",
            "",
            f"    `{ch.stem}`, exercises `{ch.short}-ex<N>`",
        ]
        lines += [("  - + " if k == 0 else "    + ") + obj for k, obj in enumerate(ch.objectives)]
        lines += [f"  - {run_time}"]
    lines.append("```")
    return "\n".join(lines)


def update_instructors_page(
    page: str | os.PathLike, check: bool = False, root: str | os.PathLike | None = None
) -> bool:
    """Replace the generated table in ``page``; with ``check`` only report whether it is up to date.

    The table is that of the repository ``root`` (default: the one the current directory is in)."""
    page = Path(page)
    text = page.read_text(encoding="utf-8")
    start, end = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"page must contain the table markers, {page} does not")
    new = (
        text[: start + len(TABLE_BEGIN)]
        + "\n"
        + instructors_table(_chapters_dir(root=root))
        + "\n"
        + text[end:]
    )
    if check:
        return new == text
    page.write_text(new, encoding="utf-8")
    return True


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m booktools.assignments {build,grade,table} ...``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m booktools.assignments",
        description="Student/instructor notebooks from the chapters, and an autograder.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    with_root = argparse.ArgumentParser(add_help=False)
    with_root.add_argument(
        "--root", type=Path, default=None, help="the repository (default: found from cwd)"
    )
    b = sub.add_parser(
        "build", parents=[with_root], help="write student, instructor and nbgrader-source notebooks"
    )
    b.add_argument(
        "--chapters", nargs="*", default=None, help="numbers, stems or short names (default: all)"
    )
    b.add_argument("--out", type=Path, default=Path("_build/assignments"), help="output directory")
    b.add_argument("--chapters-dir", type=Path, default=None, help=argparse.SUPPRESS)
    g = sub.add_parser(
        "grade", parents=[with_root], help="execute submissions and write a CSV of scores"
    )
    g.add_argument("notebooks", nargs="+", type=Path)
    g.add_argument(
        "--release",
        type=Path,
        default=None,
        help="the release to grade against (default: the one chapter the submissions' paths "
        "name, built from the repository; never a submission's own metadata)",
    )
    g.add_argument(
        "--feedback",
        type=Path,
        default=None,
        help="write one feedback file per student into this folder (<student>.txt)",
    )
    g.add_argument(
        "--inputs-seed",
        type=int,
        default=None,
        help="seed of the inputs checks draw at grading time (default: random, printed)",
    )
    g.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade even where the sandbox cannot be built (no user namespaces): kernels then run "
        "with your user id and see your files; without it the grader refuses",
    )
    g.add_argument("--out", type=Path, default=None, help="CSV report (default: print it)")
    g.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    g.add_argument(
        "--notebook-timeout", type=int, default=3600, help="seconds per notebook (default 3600)"
    )
    g.add_argument("--memory-mb", type=int, default=4096, help="address space per kernel (MB)")
    g.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="submissions graded side by side (default: the number of CPUs)",
    )
    gb = sub.add_parser(
        "gradebook", help="write a grade report's scores into an nbgrader course's gradebook"
    )
    gb.add_argument("report", type=Path, help="the CSV written by grade --out")
    gb.add_argument("--course", type=Path, required=True, help="the nbgrader course directory")
    gb.add_argument("--assignment", required=True, help="the assignment (e.g. 01_hermite)")
    gb.add_argument(
        "--db", default=None, help="gradebook URL (default: sqlite:///COURSE/gradebook.db)"
    )
    t = sub.add_parser(
        "table", parents=[with_root], help="print the instructors page's chapter table"
    )
    t.add_argument("--write", type=Path, default=None, help="update the table in this page")
    t.add_argument("--check", action="store_true", help="with --write: fail if the page is stale")
    args = parser.parse_args(argv)

    if args.command == "build":
        try:
            chapters_dir = _chapters_dir(args.chapters_dir, args.root)
            written = build(args.chapters, args.out, chapters_dir)
        except (ValueError, FileNotFoundError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for path in written:
            print(f"wrote {path}")
        return 0
    if args.command == "grade":
        if args.timeout <= 0 or args.notebook_timeout <= 0:
            print("error: --timeout and --notebook-timeout must be > 0", file=sys.stderr)
            return 2
        jobs = (os.cpu_count() or 1) if args.jobs is None else args.jobs
        if jobs < 1:
            print(f"error: --jobs must be >= 1, got {jobs}", file=sys.stderr)
            return 2
        from booktools.grading.grader import InfrastructureError
        from booktools.grading.sandbox import NO_SANDBOX_WARNING, Limits, SandboxUnavailable

        try:
            results = grade(
                args.notebooks,
                args.out,
                release=args.release,
                timeout=args.timeout,
                notebook_timeout=args.notebook_timeout,
                limits=Limits(memory_mb=args.memory_mb, cpu_s=2 * args.notebook_timeout),
                log=sys.stderr,
                jobs=min(jobs, len(args.notebooks)),
                no_sandbox=args.no_sandbox,
                inputs_seed=args.inputs_seed,
                root=args.root,
            )
        except SandboxUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except InfrastructureError as exc:
            kept = f"; {args.out} holds the students graded before it" if args.out else ""
            print(f"error: grading stopped, not the students' fault: {exc}{kept}", file=sys.stderr)
            return 3
        except (ValueError, FileNotFoundError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.no_sandbox:
            print(NO_SANDBOX_WARNING, file=sys.stderr)
        if args.feedback is not None:
            from booktools.grading.gradebook import write_feedback

            written = write_feedback(results, args.feedback)
            print(f"wrote {len(written)} feedback files into {args.feedback}", file=sys.stderr)
        if args.out is None:
            _write_rows(csv.writer(sys.stdout), results)
        else:
            print(f"wrote {args.out} ({len(results)} rows)", file=sys.stderr)
        return 0
    if args.command == "gradebook":
        from booktools.grading.gradebook import write_gradebook

        try:
            totals = write_gradebook(args.report, args.course, args.assignment, db_url=args.db)
        except (ValueError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for student, total in totals.items():
            print(f"{student}: {total:g}")
        return 0
    try:
        chapters_dir = _chapters_dir(root=args.root)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.write is None:
        print(instructors_table(chapters_dir))
        return 0
    if args.check:
        ok = update_instructors_page(args.write, check=True, root=chapters_dir.parent)
        print(
            "up to date" if ok else f"{args.write} is stale: run without --check", file=sys.stderr
        )
        return 0 if ok else 1
    update_instructors_page(args.write, root=chapters_dir.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
