"""What a student meets in a student edition (``booktools.assignments``), run as "Run all" does: in a
kernel, cell after cell, stopping at the first error.

- An untouched student notebook runs to its last cell, and every check cell prints one line,
  ``<label>: not implemented yet ...``: function stubs raise ``NotImplementedError`` only when called
  (inside the check), top-level answers keep the ``None`` set above their stub, and the edition's
  second code cell (``continue_when_unanswered``) makes unanswered checks report instead of raise.
  ``make test``'s one-thread nbval stage runs this, chapter by chapter, in the notebooks of
  ``booktools.student_run`` (the student edition with the solutions interleaved, so the chapter's
  cells are compared in the same body run); here: that those notebooks hold what the student runs, in
  order, that no chapter cell reads an answer (which the interleaving would hide), and that the stage
  fails where a student's "Run all" would stop.
- A wrong answer stops there with the hint as the cell's only output line (``CheckFailed`` renders as
  its message in IPython), not a traceback through ``icl_book/checks/``.
- Derivation exercises (statement opening with ``*Derivation.*``) get no code stub: their numerical
  confirmations carry no solution markers (CONTRIBUTING), so the student edition drops them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from booktools import assignments as A
from booktools import chapters, myst, student_run

ROOT = Path(__file__).resolve().parent.parent
STEMS = chapters.chapter_stems(ROOT)


def _student(stem):
    path = ROOT / "chapters" / f"{stem}.ipynb"
    return A.student_notebook(chapters.load_notebook(A.edition_of(path)), stem)


def _execute(nb, tmp_path):
    """Execute as "Run all": stop at the first error. Returns the error, or None."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    try:
        client.execute()
    except CellExecutionError as exc:
        return exc
    return None


@pytest.mark.parametrize("stem", STEMS)
def test_the_one_thread_stage_runs_the_student_edition_and_every_chapter_cell(stem):
    chapter = nbformat.read(ROOT / "chapters" / f"{stem}.ipynb", as_version=4)
    student = _student(stem)
    nb = student_run.run_all_notebook(ROOT / "chapters" / f"{stem}.ipynb")
    kinds = [c.metadata["run_all"] for c in nb.cells]
    code = [c for c in student.cells if c.cell_type == "code"]
    # what the student runs, in the student's order, and every chapter cell, in the chapter's
    assert [
        c.source for c, k in zip(nb.cells, kinds, strict=True) if k in ("shared", "student")
    ] == [c.source for c in code]
    assert [
        c.source for c, k in zip(nb.cells, kinds, strict=True) if k in ("shared", "solution")
    ] == [c.source for c in chapter.cells if c.cell_type == "code"]
    assert A.CONTINUE_CELL in [c.source for c in code]
    checks = [c for c in code if myst.check_call(c)]
    assert checks, "no check cells"
    for check in checks:
        label = myst.check_label(myst.check_call(check))
        at = [i for i, c in enumerate(nb.cells) if c.source == check.source]
        # every check runs unanswered first, then all of its exercise's solution cells, then answered
        assert [kinds[i] for i in at] == ["unanswered", "shared"], (label, at)
        between = kinds[at[0] + 1 : at[1]]
        assert between and set(between) == {"solution"}, (label, between)
        (line,) = nb.cells[at[0]].outputs
        assert line.output_type == "stream" and line.text == f"{label}: not implemented yet (...)\n"


@pytest.mark.parametrize("stem", STEMS)
def test_no_chapter_cell_reads_an_answer(stem):
    """The interleaved run defines every answer before the chapter reads on; in a student's own "Run
    all" a chapter cell reading an answer would meet its stub. None may."""
    chapter = nbformat.read(ROOT / "chapters" / f"{stem}.ipynb", as_version=4)
    cells = student_run.plan(chapter, _student(stem))
    assert student_run.answers_read_after(cells) == []


def _cell(kind, source):
    return student_run.Cell(kind, nbformat.v4.new_code_cell(source))


def test_the_answer_rule_can_fail():
    cells = [
        _cell("student", "def f():\n    raise NotImplementedError()"),
        _cell("solution", "def f():\n    return 2\nx = f()"),
        _cell("shared", "check_demo_ex1(f)"),  # a check reads its answer: allowed
        _cell("shared", "print(f() + 1)"),
    ]
    assert student_run.answers_read_after(cells) == [(3, ["f"])]
    rebound = [*cells[:3], _cell("shared", "x = 3"), _cell("shared", "print(x)")]
    assert student_run.answers_read_after(rebound) == []  # bound again by the chapter first
    assert student_run.answers_read_after([*rebound[:3], _cell("shared", "x += 1")]) == [(3, ["x"])]


@pytest.mark.slow  # the prologue's body runs twice under nbval (~10 s each)
def test_the_one_thread_stage_fails_where_run_all_would_stop(tmp_path):
    """Without the edition's continue cell an unanswered check raises, as "Run all" would stop; with
    it the same notebook passes."""
    nb = student_run.run_all_notebook(ROOT / "chapters" / "00_prologue.ipynb")
    assert _nbval(nb, tmp_path / "ok") == 0
    nb.cells = [c for c in nb.cells if c.source != A.CONTINUE_CELL]
    assert _nbval(nb, tmp_path / "stops") == 1


def _nbval(nb, folder):
    folder.mkdir()
    nbformat.write(nb, folder / "run.ipynb")
    # only the plugin this run uses (the autoloaded ones cost seconds of start-up)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "nbval.plugin", "-q"]
    cmd += ["--nbval", "--nbval-sanitize-with", str(ROOT / "nbval_sanitize.cfg"), "run.ipynb"]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True).returncode


def test_a_wrong_answer_shows_the_hint_as_its_only_output_line(tmp_path):
    nb = _student("00_prologue")
    (answer,) = [
        c for c in nb.cells if c.cell_type == "code" and "def ridge_prediction" in c.source
    ]
    assert A.STUB in answer.source
    # least squares instead of ridge: a typical mistake, with the check's hint about λ
    answer.source = answer.source.replace(
        "# YOUR CODE HERE\n    " + A.STUB,
        "return float(x_query @ np.linalg.lstsq(xs, ys, rcond=None)[0])",
    )
    assert A.STUB not in answer.source
    error = _execute(nb, tmp_path)
    assert error is not None, "the wrong answer passed its check"
    (check,) = [c for c in nb.cells if myst.check_call(c) == "check_prologue_ex1"]
    assert [o.output_type for o in check.outputs] == ["error"], check.outputs
    (out,) = check.outputs
    assert out.ename == "CheckFailed"
    assert out.traceback == [out.evalue], "the hint arrives inside a traceback"
    assert re.fullmatch(r"prologue-ex1: not quite\. Hint: [^\n]+", out.evalue), out.evalue


def _sources():
    return [pytest.param(md, id=md.stem) for md in chapters.chapter_sources(ROOT)]


def _stub_calls(source):
    """Top-level calls, in the student's stub of ``source``, of the functions the stub leaves raising."""
    import ast

    stubbed, _ = A.stub_solution(source)
    tree = ast.parse(stubbed)
    raising = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(
            isinstance(s, ast.Raise) and "NotImplementedError" in ast.unparse(s) for s in node.body
        )
    }
    calls = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and getattr(sub.func, "id", None) in raising:
                calls.append(sub.func.id)
    return calls


@pytest.mark.parametrize("md", _sources())
def test_no_solution_cell_calls_its_own_stub(md):
    """A marked cell that defines a function and then uses it (a demo, a table) stops "Run all" in the
    student edition at that call: the use belongs in a following unmarked cell of the solution block,
    which the student edition drops."""
    nb = chapters.load_notebook(md)
    bad = [
        (i, calls)
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and A.BEGIN_SOLUTION in cell.source
        for calls in [_stub_calls(cell.source)]
        if calls
    ]
    assert not bad, f"{md.name}: cells calling their stubbed functions: {bad}"


def test_the_stub_call_rule_can_fail():
    demo = "def f(k):\n    ### BEGIN SOLUTION\n    return k\n    ### END SOLUTION\n\n\nprint(f(2))"
    assert _stub_calls(demo) == ["f"]
    assert _stub_calls(demo.replace("print(f(2))", "g = 2")) == []


def _exercises(md_text):
    """``{label: statement}`` of a chapter source's ``{exercise}`` directives."""
    return chapters.exercise_statements(chapters.read_chapter(md_text))


def _solution_code(md_text, label):
    """The code cells of the solution block of exercise ``label``."""
    cells = chapters.book_cells(chapters.read_chapter(md_text))
    return [c.source for c in cells if c.cell_type == "code" and c.in_block and c.label == label]


@pytest.mark.parametrize("md", chapters.chapter_sources(ROOT), ids=str)
def test_derivation_exercises_get_no_code_stub(md):
    text = md.read_text()
    derivations = [
        label for label, body in _exercises(text).items() if body.startswith("*Derivation.*")
    ]
    for label in derivations:
        marked = [c for c in _solution_code(text, label) if A.BEGIN_SOLUTION in c]
        assert not marked, (
            f"{md.name}: {label} is a derivation, yet its solution has marked code, which becomes a "
            "code stub in the student edition; drop the markers (CONTRIBUTING, 'Student editions')"
        )


def test_the_derivation_rule_sees_chapter_1s_derivation():
    text = (ROOT / "chapters" / "01_hermite.md").read_text()
    exercises = _exercises(text)
    assert exercises["hermite-ex2"].startswith("*Derivation.*")
    assert _solution_code(text, "hermite-ex2"), "its numerical confirmation is a solution cell"
    stub = text.replace(
        "```{code-cell} ipython3\nlhs = ", "```{code-cell} ipython3\n### BEGIN SOLUTION\nlhs = "
    )
    assert [c for c in _solution_code(stub, "hermite-ex2") if A.BEGIN_SOLUTION in c]
