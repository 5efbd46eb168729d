"""A student's "Run all", checked cell by cell: each chapter's student edition, interleaved with its
solutions, as a notebook nbval can compare.

Run apart, ``make test``'s checks would run every chapter body four times (nbval at two threads and at
one, the grader on the instructor's answers, and "Run all" on the student edition). The one-thread
nbval stage and the student's "Run all" are one run here, a quarter of the chapters' share saved:
:func:`run_all_notebook` lays out, in one notebook,

- every cell of the student edition as a student gets it (the install cell, the cell that makes an
  unanswered check report instead of raise, the stubs, the chapter's own cells), in its order;
- after each exercise's stub, a copy of its check cell, whose expected output is the one line
  ``<label>: not implemented yet (...)`` (``nbval_sanitize.cfg`` keeps the label and drops the reason);
- then the chapter's solution cells and its check cell, expected to print what the chapter printed.

So the student's stubs and unanswered checks run, and every cell of the chapter still runs and is
compared at one thread (its outputs copied from the executed chapter). What the interleaving cannot
see is a chapter cell that reads an answer: in the student's own "Run all" it would meet the stub.
:func:`answers_read_after` finds those statically, and a test holds every chapter to none.
``python -m booktools.student_run OUT`` writes ``OUT/NN_slug.ipynb`` for every chapter.
"""

from __future__ import annotations

import argparse
import ast
import copy
import difflib
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from booktools import add_root_option, find_root, myst
from booktools.chapters import chapter_notebooks, load_notebook

__all__ = ["UNANSWERED", "Cell", "plan", "run_all_notebook", "answers_read_after", "main"]

#: The expected line of an unanswered check; the sanitizer reduces the printed reason to "(...)".
UNANSWERED = "{label}: not implemented yet (...)\n"


@dataclass(frozen=True)
class Cell:
    """One code cell of the plan: ``kind`` is ``"shared"`` (the chapter's cell, unchanged in the student
    edition), ``"student"`` (only in the student edition: stubs, its own cells), ``"solution"`` (only in
    the chapter) or ``"unanswered"`` (a copy of the next check cell, run before its solution)."""

    kind: str
    cell: nbformat.NotebookNode


def plan(chapter: nbformat.NotebookNode, student: nbformat.NotebookNode) -> list[Cell]:
    """The code cells of the student edition and of the chapter merged in order (module docstring)."""
    s = [c for c in student.cells if c.cell_type == "code"]
    ch = [c for c in chapter.cells if c.cell_type == "code"]
    matcher = difflib.SequenceMatcher(
        a=[c.source for c in s], b=[c.source for c in ch], autojunk=False
    )
    out: list[Cell] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += [Cell("shared", ch[j]) for j in range(j1, j2)]
            continue
        out += [Cell("student", s[i]) for i in range(i1, i2)]
        if i2 < len(s) and myst.check_call(s[i2]) and j2 > j1:
            out.append(Cell("unanswered", s[i2]))
        out += [Cell("solution", ch[j]) for j in range(j1, j2)]
    return out


def _expected(item: Cell) -> list:
    if item.kind in ("shared", "solution"):
        return copy.deepcopy(item.cell.outputs)
    if item.kind == "unanswered":
        label = myst.check_label(myst.check_call(item.cell))
        return [
            nbformat.v4.new_output("stream", name="stdout", text=UNANSWERED.format(label=label))
        ]
    return []


def run_all_notebook(chapter_path: str | Path) -> nbformat.NotebookNode:
    """The notebook the one-thread nbval stage runs for the executed chapter ``chapter_path``."""
    from booktools import assignments

    chapter_path = Path(chapter_path)
    chapter = nbformat.read(chapter_path, as_version=4)
    edition = load_notebook(assignments.edition_of(chapter_path))
    student = assignments.student_notebook(edition, chapter_path.stem)
    nb = nbformat.v4.new_notebook(metadata=copy.deepcopy(chapter.metadata))
    for count, item in enumerate(plan(chapter, student), 1):
        cell = nbformat.v4.new_code_cell(item.cell.source, execution_count=count)
        cell.metadata = {"tags": list(item.cell.metadata.get("tags", [])), "run_all": item.kind}
        cell.outputs = _expected(item)  # nbval compares a cell's outputs only where it "ran"
        nb.cells.append(cell)
    return nb


def _names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names loaded, names bound) anywhere in ``tree``."""
    loads, stores = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (stores if isinstance(node.ctx, ast.Store | ast.Del) else loads).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            stores.add(node.name)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            loads.add(node.target.id)  # `x += 1` reads x (its Name is marked Store only)
        elif isinstance(node, ast.alias):
            stores.add((node.asname or node.name).split(".")[0])
    return loads, stores


def answers_read_after(cells: list[Cell]) -> list[tuple[int, list[str]]]:
    """Chapter cells other than checks that read a name last bound by a solution: ``[(plan index,
    names)]`` (a check cell reads its answer by design: its unanswered copy runs before the solution).

    In the student's "Run all" such a cell meets the stub (``None`` or a function that raises), or a
    value the chapter's solution changed. A name is free again once a chapter cell binds it without
    reading it; a cell that reads and binds a name it needs from a solution is still reported.
    """
    answered: set[str] = set()
    found = []
    for i, item in enumerate(cells):
        tree = myst.parse_python(myst.MAGIC_RE.sub(r"\1#", item.cell.source))
        loads, stores = _names(tree)
        if item.kind == "solution":
            answered |= stores
        elif item.kind == "shared":
            if not myst.check_call(item.cell) and (read := sorted(loads & answered)):
                found.append((i, read))
            answered -= stores - loads
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.student_run", description=__doc__)
    parser.add_argument("out", type=Path, help="folder for the notebooks (created)")
    add_root_option(parser)
    args = parser.parse_args(argv)
    root = find_root(args.root)
    args.out.mkdir(parents=True, exist_ok=True)
    for stale in args.out.glob("*.ipynb"):
        stale.unlink()
    for path in chapter_notebooks(root):
        nbformat.write(run_all_notebook(path), args.out / path.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
