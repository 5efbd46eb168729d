"""The bridge into nbgrader (issue 36): ``grade --release`` autogrades, ``gradebook`` writes the scores
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
from booktools import grader as G
from booktools.grader_gradebook import write_feedback

ROOT = Path(A.__file__).resolve().parent.parent
STEM = "00_prologue"


def _run(args, cwd, env):
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (args, r.stdout[-2000:], r.stderr[-4000:])
    return r


@pytest.mark.slow  # nbgrader generate_assignment + export, two boxed kernels: ~1 min
def test_grade_then_gradebook_then_nbgrader_export(tmp_path):
    venv_bin = str(Path(sys.executable).parent)
    # the page's first step: the venv's bin on PATH (nbgrader runs alembic and jupyter from there)
    env = {**os.environ, "PATH": f"{venv_bin}:/usr/bin:/bin"}
    env.pop("PYTHONPATH", None)
    course = tmp_path / "course"
    course.mkdir()
    py = [sys.executable, "-m"]
    _run([*py, "booktools.assignments", "build", "--chapters", STEM, "--out", str(tmp_path / "a")],
         ROOT, env)  # fmt: skip
    shutil.copytree(tmp_path / "a" / "nbgrader" / "source", course / "source")
    _run(["nbgrader", "generate_assignment", STEM], course, env)
    release = course / "release" / STEM / f"{STEM}.ipynb"
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
