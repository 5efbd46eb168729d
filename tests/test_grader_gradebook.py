"""The bridge into nbgrader: ``grade --release`` autogrades, ``gradebook`` writes the scores
into a real nbgrader 0.9 gradebook, and ``nbgrader export`` shows them; the steps are the instructors
page's, run as commands."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from booktools import assignments as A
from booktools.grading import grader as G
from booktools.grading.gradebook import write_feedback
from booktools.grading.report import write_report

ROOT = Path(__file__).resolve().parent.parent
STEM = "00_prologue"


def _run(args, cwd, env):
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (args, r.stdout[-2000:], r.stderr[-4000:])
    return r


def _course(tmp_path, stem):
    """The instructors page's first steps: the venv's bin on PATH (nbgrader runs alembic and jupyter
    from there), our build, the nbgrader source copied into a course, nbgrader's release of ``stem``.
    Returns ``(env, course, release path)``."""
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{venv_bin}:/usr/bin:/bin"}
    env.pop("PYTHONPATH", None)
    course = tmp_path / "course"
    course.mkdir()
    build = [sys.executable, "-m", "booktools.assignments", "build", "--chapters", stem]
    _run([*build, "--out", str(tmp_path / "a")], ROOT, env)
    shutil.copytree(tmp_path / "a" / "nbgrader" / "source", course / "source")
    _run(["nbgrader", "generate_assignment", stem], course, env)
    return env, course, course / "release" / stem / f"{stem}.ipynb"


@pytest.mark.slow  # nbgrader generate_assignment + export, two boxed kernels: ~1 min
def test_grade_then_gradebook_then_nbgrader_export(tmp_path):
    env, course, release = _course(tmp_path, STEM)
    py = [sys.executable, "-m"]
    assert release.exists()

    # two students hand in (nbgrader's collect puts them here): one full, one half done
    rel = nbformat.read(release, as_version=4)
    inst = nbformat.read(tmp_path / "a" / "instructor" / f"{STEM}.ipynb", as_version=4)
    coding = [it.label for it in G.release_plan(rel)[0] if it.kind == "coding"]
    for student, answered in (("ada", set(coding)), ("bob", set(coding[:1]))):
        path = course / "submitted" / student / STEM / f"{STEM}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(A.sample_submission(rel, inst, answered), path)

    subs = sorted(str(p) for p in (course / "submitted").glob(f"*/{STEM}/*.ipynb"))
    report, feedback = course / "autograded.csv", course / "feedback-files"
    _run([*py, "booktools.assignments", "grade", *subs, "--release", str(release),
          "--out", str(report), "--feedback", str(feedback), "--jobs", "2"], ROOT, env)  # fmt: skip
    rows = list(csv.DictReader(report.open()))
    assert {r["student"] for r in rows} == {"ada", "bob"}  # named from submitted/<student>/
    _run([*py, "booktools.assignments", "gradebook", str(report), "--course", str(course),
          "--assignment", STEM], ROOT, env)  # fmt: skip
    _run(["nbgrader", "export"], course, env)
    exported = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert float(exported["ada"]["score"]) == len(coding)
    assert float(exported["bob"]["score"]) == 1
    assert float(exported["ada"]["max_score"]) >= len(coding)
    text = (feedback / "bob.txt").read_text()
    assert "prologue-ex2: 0 / 1" in text and "autograded total: 1 / 2" in text
    assert (course / "autograded" / "ada" / STEM / f"{STEM}.ipynb").exists()  # for formgrader


def test_feedback_files_and_partial_credit_rows(tmp_path):
    rows = [
        G.ExerciseResult("ada", "hermite-ex1", 0.5, 2, "hermite-ex1: half"),
        G.ExerciseResult("ada", "hermite-ex2", "manual", 1, "manual"),
    ]
    (path,) = write_feedback(rows, tmp_path)
    text = path.read_text()
    assert "hermite-ex1: 0.5 / 2" in text and "graded by hand" in text
    assert "autograded total: 0.5 / 2" in text


@pytest.mark.slow  # nbgrader generate_assignment, gradebook, export and generate_feedback: ~30 s
def test_extra_nbgrader_cells_and_fractional_scores_reach_nbgrader(tmp_path):
    """Before: the bridge copied a submission into autograded/ unchanged, so the instructor edition
    (extra solution cells hermite-ex4-solution, hermite-ex5-solution, ...) made `nbgrader
    generate_feedback` fail with MissingEntry: No such taskcomment; and the report's scores had six
    significant digits, so 2/3 reached the gradebook as 0.666667. Now the autograded copy carries
    only the release's nbgrader metadata and the scores arrive exactly."""
    from nbgrader.api import Gradebook

    stem = "01_hermite"
    env, course, release = _course(tmp_path, stem)
    py = [sys.executable, "-m"]
    rel = nbformat.read(release, as_version=4)
    inst = nbformat.read(tmp_path / "a" / "instructor" / f"{stem}.ipynb", as_version=4)

    def gids(nb):
        return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]

    assert set(gids(inst)) - set(gids(rel)) >= {"hermite-ex4-solution", "hermite-ex5-solution"}
    # alice hands in the instructor edition, plus a cell she tagged herself and a check cell whose
    # points she raised; carol the same, but an earlier bridge already copied it unsanitised
    alice = nbformat.from_dict(inst)
    alice.cells.append(nbformat.v4.new_markdown_cell("mine"))
    alice.cells[-1].metadata["nbgrader"] = {
        "grade": False, "grade_id": "alice-task", "locked": True, "points": 3,
        "schema_version": 3, "solution": False, "task": True,
    }  # fmt: skip
    check = next(c for c in alice.cells if c.metadata.get("nbgrader", {}).get("grade"))
    check.metadata["nbgrader"]["points"] = 10
    plan = G.release_plan(rel)[0]
    coding = [it for it in plan if it.kind == "coding"]
    assert len(coding) >= 2
    subs = {
        "alice": alice,
        "bob": A.sample_submission(rel, inst, {it.label for it in coding}),
        "carol": nbformat.from_dict(inst),
    }
    for student, nb in subs.items():
        path = course / "submitted" / student / stem / f"{stem}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    stale = course / "autograded" / "carol" / stem
    shutil.copytree(course / "submitted" / "carol" / stem, stale)

    # the report as `grade` writes it, with fractions a partly correct check gives
    third = 1 / 3
    scores = {"alice": (2 * third, 2 * third), "bob": (1.0, third), "carol": (third, 0.0)}
    rows = [
        G.ExerciseResult(s, it.label, sc, it.points, "partly")
        for s, pair in scores.items()
        for it, sc in zip(coding[:2], pair, strict=True)
    ] + [G.ExerciseResult(s, it.label, "manual", it.points, "manual") for s in scores
         for it in plan if it.kind != "coding"]  # fmt: skip
    report = write_report(rows, course / "autograded.csv")
    read = {(r["student"], r["exercise"]): r["score"] for r in csv.DictReader(report.open())}
    assert float(read[("alice", coding[0].label)]) == 2 / 3  # exactly, not 0.666667
    assert read[("bob", coding[0].label)] == "1"  # whole points stay as they were written

    r = _run([*py, "booktools.assignments", "gradebook", str(report), "--course", str(course),
              "--assignment", stem], ROOT, env)  # fmt: skip
    assert "alice-task" in r.stderr  # warned, as nbgrader's autograder warns
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        known = {c.name for c in gb.find_notebook(stem, stem).source_cells}
        grade = gb.find_grade(coding[0].grade_id, stem, stem, "alice")
        assert abs(grade.auto_score - 2 / 3) < 1e-12
    by_gid = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"] for c in rel.cells
              if "nbgrader" in c.metadata}  # fmt: skip
    for student in scores:
        nb = nbformat.read(course / "autograded" / student / stem / f"{stem}.ipynb", as_version=4)
        ids = gids(nb)
        assert ids and set(ids) <= known, (student, ids)
        for c in nb.cells:
            if "nbgrader" in c.metadata:
                meta = c.metadata["nbgrader"]
                want = {k: v for k, v in by_gid[meta["grade_id"]].items() if k != "checksum"}
                assert {k: v for k, v in meta.items() if k != "checksum"} == want, (student, meta)
    auto = course / "autograded" / "alice" / stem / f"{stem}.ipynb"
    assert "hermite-ex4-solution" not in auto.read_text()
    assert not list((course / "autograded" / "alice").glob(".*"))  # no staging left behind

    _run(["nbgrader", "generate_feedback", stem], course, env)
    for student in scores:
        assert (course / "feedback" / student / stem / f"{stem}.html").exists(), student
    _run(["nbgrader", "export"], course, env)
    exported = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    for student, pair in scores.items():
        assert abs(float(exported[student]["score"]) - sum(pair)) < 1e-12, exported[student]
    # a second run leaves the sanitised copies as they are
    before = auto.read_bytes()
    _run([*py, "booktools.assignments", "gradebook", str(report), "--course", str(course),
          "--assignment", stem], ROOT, env)  # fmt: skip
    assert auto.read_bytes() == before
