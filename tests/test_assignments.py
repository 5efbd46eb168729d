"""Tests of booktools.assignments: student/instructor notebooks, the autograder, the instructors page.

The unit tests use a small synthetic chapter (built in a tmp dir, with its own check module that uses the
real framework of icl_book.checks), so they do not depend on any chapter of the book. The integration test
at the end runs over every chapter notebook that exists.
"""

from __future__ import annotations

import csv
import re
import textwrap
import time
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbgrader.utils import compute_checksum

from booktools import assignments as A
from booktools import chapters, myst
from booktools.assignments.cli import release_to_grade
from booktools.grading.batch import grade

ROOT = Path(__file__).resolve().parent.parent

INSTALL = (
    "# Colab only: install the book's support package from its repository.\n"
    "import sys\n\n"
    'if "google.colab" in sys.modules:\n'
    '    %pip install -q "icl-book @ git+https://github.com/icl-book/icl-book@main"'
)

# A chapter that follows CONTRIBUTING.md. SECRET* strings mark solution content that must never reach
# the student notebook.
DEMO_MD = textwrap.dedent(
    """\
    ---
    jupytext:
      formats: ipynb,md:myst
      text_representation:
        extension: .md
        format_name: myst
        format_version: 0.13
        jupytext_version: 1.19.6
    kernelspec:
      display_name: Python 3 (ipykernel)
      language: python
      name: python3
    ---

    (chapter-demo)=
    # A demo chapter

    **Overview.** Nothing but exercises.

    ```{code-cell} ipython3
    :tags: [remove-cell]

    INSTALL
    ```

    ```{code-cell} ipython3
    from demochecks import check_demo_ex1, check_demo_ex3

    SCALE = 3
    ```

    ## Exercises

    ```{exercise}
    :label: demo-ex1

    Write `scaled(x)` returning `SCALE * x`.
    ```

    ```{solution-start} demo-ex1
    :class: dropdown
    ```

    Multiply by the factor defined above, SECRETPROSE1 is the trick.

    ```{code-cell} ipython3
    def scaled(x):
        ### BEGIN SOLUTION
        return SCALE * x  # SECRETCODE1
        ### END SOLUTION
    ```

    ```{solution-end}
    ```

    ```{code-cell} ipython3
    check_demo_ex1(scaled)
    ```

    ```{exercise}
    :label: demo-ex2

    Derive something.
    ```

    ```{solution-start} demo-ex2
    :class: dropdown
    ```

    The derivation goes like this: SECRETPROSE2 and so on.

    ```{code-cell} ipython3
    print("numerical confirmation SECRETCODE2")
    ```

    ```{solution-end}
    ```

    ```{exercise}
    :label: demo-ex3

    Write `clipped_square(x)`: the square of positive `x`, else 0.
    ```

    ```{solution-start} demo-ex3
    :class: dropdown
    ```

    ```{code-cell} ipython3
    def clipped_square(x):
        x = float(x)
        if x > 0:
            ### BEGIN SOLUTION
            return x * x  # SECRETCODE3
            ### END SOLUTION
        return 0.0
    ```

    ```{solution-end}
    ```

    ```{code-cell} ipython3
    check_demo_ex3(clipped_square)
    ```

    ```{exercise}
    :label: demo-ex4

    Explain something.
    ```

    ::::{solution} demo-ex4
    :class: dropdown

    Because SECRETPROSE4 holds.
    ::::

    That is all.
    """
).replace("INSTALL", INSTALL)

DEMO_CHECKS = textwrap.dedent(
    """\
    from icl_book.checks import call_answer, passed, require_close


    def check_demo_ex1(func):
        label = "demo-ex1"
        got = [call_answer(label, func, x) for x in (1.0, -2.0)]
        require_close(label, got, [3.0, -6.0], rtol=0, atol=1e-12, hint="use the chapter's SCALE")
        return passed(label)


    def check_demo_ex3(func):
        label = "demo-ex3"
        got = [call_answer(label, func, x) for x in (2.0, -1.0)]
        require_close(label, got, [4.0, 0.0], rtol=0, atol=1e-12, hint="look at negative inputs")
        return passed(label)
    """
)


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    """A chapters dir with chapters/07_demo.md and the check module demochecks.py beside it."""
    d = tmp_path_factory.mktemp("demo")
    (d / "chapters").mkdir()
    (d / "chapters" / "07_demo.md").write_text(DEMO_MD)
    (d / "demochecks.py").write_text(DEMO_CHECKS)
    return d


@pytest.fixture(scope="module")
def demo_nb(demo_dir):
    return jupytext.read(demo_dir / "chapters" / "07_demo.md")


@pytest.fixture(scope="module")
def student(demo_nb):
    return A.student_notebook(demo_nb, "07_demo")


@pytest.fixture(scope="module")
def instructor(demo_nb):
    return A.instructor_notebook(demo_nb, "07_demo")


def _all_text(nb) -> str:
    return "\n".join(c.source for c in nb.cells)


def _cell_with(nb, text):
    (cell,) = [c for c in nb.cells if text in c.source]
    return cell


# ---------------------------------------------------------------------------------------------------
# Pure transformations (no kernel)
# ---------------------------------------------------------------------------------------------------
def test_stub_keeps_indentation_and_surrounding_lines():
    src = "def f(x):\n    y = 1\n    if x:\n        ### BEGIN SOLUTION\n        return 2\n        ### END SOLUTION\n    return y"
    new, n = A.stub_solution(src)
    assert n == 1
    assert (
        new
        == "def f(x):\n    y = 1\n    if x:\n        # YOUR CODE HERE\n        raise NotImplementedError()\n"
        "    return y"
    )


@pytest.mark.parametrize(
    "src",
    [
        "### BEGIN SOLUTION\nx = 1",
        "x = 1\n### END SOLUTION",
        "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION",
    ],
)
def test_stub_rejects_unbalanced_markers(src):
    with pytest.raises(A.AssignmentError):
        A.stub_solution(src)


def test_instructors_page_table_is_up_to_date():
    # the page's chapter table (objectives, exercises, run times from chapters/timings.json) is
    # generated; `make execute` regenerates it, and this fails while the committed page is stale
    page = ROOT / "chapters" / "instructors.md"
    assert A.update_instructors_page(page, check=True), (
        "chapters/instructors.md is stale: run "
        "`python -m booktools.assignments table --write chapters/instructors.md`"
    )


def test_instructors_page_table_check_can_fail(tmp_path):
    page = tmp_path / "instructors.md"
    text = (ROOT / "chapters" / "instructors.md").read_text()
    page.write_text(text.replace("< 1 min", "9 min", 1))
    assert not A.update_instructors_page(page, check=True)
    assert "9 min" in page.read_text()  # --check writes nothing


def test_check_cell_detection():
    code = nbformat.v4.new_code_cell
    assert myst.check_call(code("check_demo_ex1(f)")) == "check_demo_ex1"
    assert (
        myst.check_call(code("from icl_book import checks\nchecks.check_lsa_ex12(f, n=3)"))
        == "check_lsa_ex12"
    )
    assert myst.check_call(code("%matplotlib inline\ncheck_demo_ex1(f)")) == "check_demo_ex1"
    # imports, definitions, two checks in one cell, markdown: not check cells
    assert (
        myst.check_call(code("from icl_book.checks import (check_demo_ex1, check_demo_ex2)"))
        is None
    )
    assert myst.check_call(code("def check_demo_ex1(f):\n    pass")) is None
    assert myst.check_call(code("check_demo_ex1(f)\ncheck_demo_ex2(g)")) is None
    assert myst.check_call(nbformat.v4.new_markdown_cell("check_demo_ex1(f)")) is None
    assert myst.check_label("check_asymptotics_ex3") == "asymptotics-ex3"
    assert myst.check_label("checker") is None


def test_student_notebook_has_no_solutions(student, instructor):
    text = _all_text(student)
    assert not re.search(r"SECRET(CODE|PROSE)\d", text), (
        "solution content left in the student notebook"
    )
    assert (
        "BEGIN SOLUTION" not in text and "solution-start" not in text and "{solution}" not in text
    )
    assert A.solution_leaks(student, instructor) == []
    # the scanner itself can fail: the instructor notebook is full of solutions
    assert len(A.solution_leaks(instructor, instructor)) >= 6
    leaky = nbformat.from_dict(
        nbformat.v4.new_notebook(
            cells=[
                nbformat.v4.new_code_cell(
                    "# Multiply by the factor defined above, SECRETPROSE1 is the trick."
                )
            ]
        )
    )
    assert A.solution_leaks(leaky, instructor)


def test_student_notebook_keeps_statements_stubs_checks_and_install_cell(student, demo_nb):
    text = _all_text(student)
    for label in ("demo-ex1", "demo-ex2", "demo-ex3", "demo-ex4"):
        assert f":label: {label}" in text  # the exercise statements stay
    assert "That is all." in text  # prose after a solution block stays
    assert (
        _cell_with(student, "def scaled").source
        == "def scaled(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"
    )
    assert _cell_with(student, "def clipped_square").source == (
        "def clipped_square(x):\n    x = float(x)\n    if x > 0:\n        # YOUR CODE HERE\n"
        "        raise NotImplementedError()\n    return 0.0"
    )
    assert (
        _cell_with(student, "google.colab").source == demo_nb.cells[1].source
    )  # install cell intact
    assert _cell_with(student, "google.colab").metadata["tags"] == ["remove-cell"]
    for label in ("ex1", "ex3"):
        check = _cell_with(student, f"check_demo_{label}(")
        assert (
            check.metadata["nbgrader"]["grade"] is True
            and check.metadata["nbgrader"]["points"] == 1
        )
    # written exercises get an answer cell; coding ones do not
    answers = [c for c in student.cells if c.source == A.ANSWER_STUB]
    assert [c.metadata["nbgrader"]["grade_id"] for c in answers] == [
        "demo-ex2-answer",
        "demo-ex4-answer",
    ]
    assert all(c.get("outputs", []) == [] for c in student.cells if c.cell_type == "code")
    nbformat.validate(student)
    kinds = {e["label"]: e["kind"] for e in student.metadata["icl_book"]["exercises"]}
    assert kinds == {
        "demo-ex1": "coding",
        "demo-ex2": "written",
        "demo-ex3": "coding",
        "demo-ex4": "written",
    }


def test_instructor_notebook_keeps_everything(instructor, demo_nb):
    sources = [c.source for c in instructor.cells]
    assert sources == [c.source for c in demo_nb.cells]
    assert "SECRETCODE2" in _all_text(instructor) and "SECRETPROSE4" in _all_text(instructor)
    assert _cell_with(instructor, "def scaled").metadata["nbgrader"]["solution"] is True


def _nbgrader_cells(nb):
    return [c for c in nb.cells if "nbgrader" in c.metadata]


@pytest.mark.parametrize("edition", ["student", "instructor", "nbgrader"])
def test_nbgrader_metadata_follows_nbgraders_rules(demo_nb, edition):
    nb = {
        "student": A.student_notebook,
        "instructor": A.instructor_notebook,
        "nbgrader": A.nbgrader_source_notebook,
    }[edition](demo_nb)
    ids = [c.metadata["nbgrader"]["grade_id"] for c in _nbgrader_cells(nb)]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"[A-Za-z0-9_\-]+", i) for i in ids)
    for c in _nbgrader_cells(nb):
        meta = c.metadata["nbgrader"]
        assert meta["schema_version"] == 3
        if meta["grade"]:
            assert float(meta["points"]) >= 0
        if c.cell_type == "markdown":  # nbgrader: markdown cells are grade AND solution, or neither
            assert meta["grade"] == meta["solution"]
        if "BEGIN SOLUTION" in c.source:
            assert meta["solution"]
    assert all("nbgrader" in c.metadata for c in nb.cells if "BEGIN SOLUTION" in c.source), (
        "nbgrader refuses solution regions outside solution cells"
    )


def test_nbgrader_release_equals_student_notebook(demo_nb, student):
    """The student edition is the release of the nbgrader source: stubs, locks and checksums."""
    source = A.nbgrader_source_notebook(demo_nb)
    assert "SECRETCODE1" in _all_text(source) and "SECRETPROSE1" not in _all_text(source)
    assert [c.id for c in source.cells] == [c.id for c in student.cells]
    for src, rel in zip(source.cells, student.cells, strict=True):
        meta = rel.metadata.get("nbgrader")
        if meta is None:
            assert rel.source == src.source and "deletable" not in rel.metadata
            continue
        assert meta["checksum"] == compute_checksum(rel)
        if meta["grade"] and not meta["solution"]:  # check cells: locked
            assert rel.metadata["editable"] is False and rel.metadata["deletable"] is False
            assert rel.source == src.source
        if meta["solution"]:
            assert rel.metadata["deletable"] is False and "SECRET" not in rel.source


def test_the_release_clears_outputs(demo_nb):
    """An executed chapter's outputs (a solution's printout) do not reach the student's release."""
    source = A.nbgrader_source_notebook(demo_nb)
    code = [c for c in source.cells if c.cell_type == "code"]
    assert code
    for i, cell in enumerate(code):
        cell.execution_count = i + 1
        cell.outputs = [nbformat.v4.new_output("stream", text="SECRETOUTPUT\n")]
    release = A.release_notebook(source)
    for cell in release.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.id


# ---------------------------------------------------------------------------------------------------
# Grading a batch of submissions (real kernels)
# ---------------------------------------------------------------------------------------------------
def _edit(nb, old, new):
    nb = nbformat.from_dict(nb)
    cell = _cell_with(nb, old)
    cell.source = cell.source.replace(old, new)
    return nb


@pytest.fixture(scope="module")
def graded(demo_dir, demo_nb, student, tmp_path_factory):
    """Grade one batch: instructor, untouched student, partial (+crashing cell, +cheat), loop, dead kernel, corrupt."""
    subs = tmp_path_factory.mktemp("subs")
    inst = A.instructor_notebook(demo_nb)
    partial = _edit(
        student,
        "def scaled(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()",
        "def scaled(x):\n    return SCALE * x",
    )
    partial = _edit(
        partial,
        "def clipped_square",
        "def check_demo_ex3(f):\n    print('demo-ex3: correct')\n\n\ndef clipped_square",
    )
    partial.cells.insert(3, nbformat.v4.new_code_cell("1 / 0"))
    loop = _edit(
        student,
        "def scaled(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()",
        "def scaled(x):\n    while True:\n        pass",
    )
    dead = nbformat.from_dict(student)
    dead.cells.insert(3, nbformat.v4.new_code_cell("import os\nos._exit(1)"))
    books = {
        "1_loop": loop,
        "2_instructor": inst,
        "3_untouched": student,
        "4_partial": partial,
        "5_dead": dead,
    }
    paths = []
    for name, nb in books.items():
        nbformat.write(nb, subs / f"{name}.ipynb")
        paths.append(subs / f"{name}.ipynb")
    (subs / "6_corrupt.ipynb").write_text("{ this is not json")
    paths.append(subs / "6_corrupt.ipynb")
    report = subs / "report.csv"
    release = subs.parent / "release.ipynb"
    nbformat.write(student, release)
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(demo_dir))  # the grader imports the reference checks from demochecks
    try:
        # 8 s per cell: the loop costs 8 s; every legitimate cell here takes well under a second.
        grade(paths, report, release=release, timeout=8, pythonpath=[demo_dir])
    finally:
        mp.undo()
    with report.open() as fh:
        rows = list(csv.DictReader(fh))
    return {(r["student"], r["exercise"]): r for r in rows}


@pytest.mark.slow  # one batch of six submissions: ~15 s idle, ~30 s under load
def test_grade_instructor_full_marks(graded):
    for ex in ("demo-ex1", "demo-ex3"):
        row = graded[("2_instructor", ex)]
        assert (row["score"], row["max_score"], row["message"]) == ("1", "1", f"{ex}: correct")


@pytest.mark.slow  # one batch of six submissions: ~15 s idle, ~30 s under load
def test_grade_untouched_student_zero_with_hint(graded):
    for ex in ("demo-ex1", "demo-ex3"):
        row = graded[("3_untouched", ex)]
        assert row["score"] == "0" and row["message"].startswith(f"{ex}: not implemented yet")


@pytest.mark.slow  # one batch of six submissions: ~15 s idle, ~30 s under load
def test_grade_partial_survives_crash_and_cheat(graded):
    assert graded[("4_partial", "demo-ex1")]["score"] == "1"  # after a ZeroDivisionError cell
    cheat = graded[("4_partial", "demo-ex3")]  # the redefined check is replaced by the real one
    assert cheat["score"] == "0" and "not implemented yet" in cheat["message"]


@pytest.mark.slow  # one batch of six submissions: ~15 s idle, ~30 s under load
def test_grade_infinite_loop_times_out_and_batch_continues(graded):
    assert graded[("1_loop", "demo-ex1")]["message"] == "timeout"
    assert graded[("1_loop", "demo-ex1")]["score"] == "0"
    assert "not implemented yet" in graded[("1_loop", "demo-ex3")]["message"]  # graded on
    assert graded[("2_instructor", "demo-ex1")]["score"] == "1"  # the batch went on


@pytest.mark.slow  # one batch of six submissions: ~15 s idle, ~30 s under load
def test_grade_dead_kernel_and_corrupt_file(graded):
    for ex in ("demo-ex1", "demo-ex3"):
        assert (graded[("5_dead", ex)]["score"], graded[("5_dead", ex)]["message"]) == (
            "0",
            "kernel died",
        )
    for ex in ("demo-ex1", "demo-ex3"):
        row = graded[("6_corrupt", ex)]
        assert row["score"] == "0" and row["message"].startswith("unreadable notebook")


@pytest.mark.slow
def test_notebook_timeout_stops_the_notebook(demo_dir, student, tmp_path):
    nb = nbformat.from_dict(student)
    for _ in range(6):
        nb.cells.insert(3, nbformat.v4.new_code_cell("import time\ntime.sleep(1.5)"))
    nbformat.write(nb, tmp_path / "slow.ipynb")
    nbformat.write(student, tmp_path / "release.ipynb")
    start = time.monotonic()
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(demo_dir))
        rows = grade(
            [tmp_path / "slow.ipynb"], release=tmp_path / "release.ipynb", notebook_timeout=4
        )
    coding = [r for r in rows if r.score != "manual"]
    assert coding and all(r.message == "notebook timeout" for r in coding), rows
    assert time.monotonic() - start < 30  # kernel start-up + 4 s, not 6 x 1.5 s


# ---------------------------------------------------------------------------------------------------
# Integration: every chapter of the book, and nbgrader itself
# ---------------------------------------------------------------------------------------------------
CHAPTER_NOTEBOOKS = chapters.chapter_notebooks(ROOT)
STEMS = [p.stem for p in CHAPTER_NOTEBOOKS]


@pytest.mark.parametrize("path", CHAPTER_NOTEBOOKS, ids=STEMS)
def test_chapter_editions(path):
    """Built on the plain edition; no solution in the student edition; every exercise is graded."""
    edition = chapters.load_notebook(A.edition_of(path))
    assert "icl_edition" in edition.metadata
    student = A.student_notebook(edition, path.stem)
    instructor = A.instructor_notebook(edition, path.stem)
    assert A.solution_leaks(student, instructor) == []
    from booktools.grading.grader import release_plan

    items, _ = release_plan(student)
    listed = [e["label"] for e in student.metadata["icl_book"]["exercises"]]
    assert [it.label for it in items] == listed
    assert {it.kind for it in items} <= {"coding", "written"}


# session: each process of make test builds it once, though the chapters' grading tests come to it in
# groups of their own (tests/conftest.py), between other modules' tests
@pytest.fixture(scope="session")
def nbgrader_course(tmp_path_factory):
    """A real nbgrader course directory with every chapter's source, released by nbgrader 0.9."""
    import shutil
    import subprocess
    import sys

    course = tmp_path_factory.mktemp("course")
    A.build(None, course / "built")
    shutil.copytree(course / "built" / "nbgrader" / "source", course / "source")
    env = {**__import__("os").environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    for stem in STEMS:
        subprocess.run(
            [
                sys.executable, "-m", "nbgrader", "generate_assignment", stem, "--force",
                f"--CourseDirectory.root={course}", f"--CourseDirectory.db_url=sqlite:///{course}/gb.db",
            ],
            cwd=course, env=env, check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    return course


@pytest.mark.slow  # nbgrader takes ~9 s per chapter
@pytest.mark.parametrize("stem", STEMS)
def test_student_edition_is_nbgraders_release(nbgrader_course, stem):
    """Our release path (``build``'s student edition: ``release_notebook``, four of nbgrader's
    preprocessors chosen and ordered by us) against nbgrader's own ``generate_assignment`` (its whole
    pipeline, from the command line) on the source ``build`` writes, for every chapter. The unit tests
    above pin each of our four steps on the demo; this one fails when a chapter uses something only
    nbgrader's whole pipeline handles (hidden tests, a mark scheme, a header), which our path would
    hand to the students as it is."""
    ours = nbformat.read(nbgrader_course / "built" / "student" / f"{stem}.ipynb", as_version=4)
    theirs = nbformat.read(nbgrader_course / "release" / stem / f"{stem}.ipynb", as_version=4)
    assert ours.metadata == theirs.metadata
    assert len(ours.cells) == len(theirs.cells)
    for i, (a, b) in enumerate(zip(ours.cells, theirs.cells, strict=True)):
        assert a == b, f"{stem} cell {i} ({a.get('id')}) differs from nbgrader's release"


def _autograde(course, stem):
    import subprocess
    import sys

    env = {**__import__("os").environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    subprocess.run(
        [
            sys.executable, "-m", "nbgrader", "autograde", stem, "--force",
            "--ExecutePreprocessor.timeout=600",
            f"--CourseDirectory.root={course}", f"--CourseDirectory.db_url=sqlite:///{course}/gb.db",
        ],
        cwd=course, env=env, check=True, capture_output=True, timeout=1200,
    )  # fmt: skip


# The two chapters graded by nbgrader and by our grader side by side; their "all" submission is the
# instructor's solutions, so the full-marks test below covers only the other chapters (each chapter's
# instructor solutions are graded once per make test).
NBGRADER_STEMS = ["00_prologue", "01_hermite"]


@pytest.mark.slow  # nbgrader autograde and our grader each execute the chapter three times (~1 min)
@pytest.mark.parametrize("stem", NBGRADER_STEMS)
def test_honest_submissions_score_the_same_in_nbgrader_and_in_our_grader(
    nbgrader_course, stem, tmp_path
):
    from nbgrader.api import Gradebook

    release_path = nbgrader_course / "release" / stem / f"{stem}.ipynb"
    release = nbformat.read(release_path, as_version=4)
    instructor = nbformat.read(
        nbgrader_course / "built" / "instructor" / f"{stem}.ipynb", as_version=4
    )
    from booktools.grading.grader import release_plan

    coding = [it.label for it in release_plan(release)[0] if it.kind == "coding"]
    assert len(coding) >= 2, f"{stem} needs two coding exercises for this test"
    solved = {"all": set(coding), "half": set(coding[: len(coding) // 2]), "none": set()}
    ours = []
    for student, answered in solved.items():
        sub = A.sample_submission(release, instructor, answered)
        path = nbgrader_course / "submitted" / student / stem / f"{stem}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(sub, path)
        nbformat.write(sub, tmp_path / f"{student}.ipynb")
        ours.append(tmp_path / f"{student}.ipynb")
    _autograde(nbgrader_course, stem)
    with Gradebook(f"sqlite:///{nbgrader_course}/gb.db") as gb:
        theirs = {s: float(gb.find_submission(stem, s).code_score) for s in solved}
    rows = grade(ours, release=release_path, jobs=2)
    mine = {s: sum(r.score for r in rows if r.student == s and r.score != "manual") for s in solved}
    # the grader's own messages, so a disagreement says which exercise and why
    assert mine == theirs, [(r.student, r.exercise, r.score, r.message) for r in rows]
    assert theirs["all"] > theirs["half"] > theirs["none"] == 0  # the submissions differ
    # the instructor's solutions score full marks on every exercise (as on the other chapters)
    lost = [r for r in rows if r.student == "all" and r.score not in ("manual", r.max_score)]
    assert lost == [], [(r.exercise, r.score, r.message) for r in lost]
    labels = {it.label for it in release_plan(release)[0]}
    assert {r.exercise for r in rows if r.student == "all"} == labels


@pytest.mark.slow  # each chapter executed once (2-70 s); make test spreads them over both cores
@pytest.mark.parametrize("stem", [s for s in STEMS if s not in NBGRADER_STEMS])
def test_the_instructors_solutions_score_full_marks_on_every_chapter(
    nbgrader_course, stem, tmp_path
):
    """nbval runs each chapter's checks on its own solutions; the grader must agree on every chapter
    (a correct answer returned as ``np.float64`` once scored 0 through the kernel's encoder). One
    chapter per test, so that make test's cache re-grades only a chapter that changed; the
    chapters of ``NBGRADER_STEMS`` get the same assertion in the nbgrader comparison above."""
    from booktools.grading.grader import release_plan

    release = nbformat.read(nbgrader_course / "release" / stem / f"{stem}.ipynb", as_version=4)
    instructor = nbformat.read(
        nbgrader_course / "built" / "instructor" / f"{stem}.ipynb", as_version=4
    )
    labels = {it.label for it in release_plan(release)[0]}
    path = tmp_path / f"{stem}.ipynb"
    nbformat.write(A.sample_submission(release, instructor, labels), path)
    # against the release of the chapter its path names, as the command line builds it
    rows = grade([path], release=release_to_grade([path]), jobs=1)
    lost = [r for r in rows if r.score != "manual" and r.score != r.max_score]
    assert lost == [], [(r.student, r.exercise, r.message) for r in lost]
    assert {r.student for r in rows} == {stem}
    assert {r.exercise for r in rows} == labels
