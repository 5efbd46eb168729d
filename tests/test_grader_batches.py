"""Batches no student can stall or confuse (booktools/grading/batch.py, grader.py).

A kernel whose builtins are sabotaged is stopped soon, not after the check's whole timeout; students
whose files share a name are told apart (and their rows say how); a notebook of another chapter is
named as such in its row.
"""

from __future__ import annotations

import time

import nbformat
import pytest

from booktools import assignments as A
from booktools.grading import channel
from booktools.grading import grader as G
from booktools.grading import sandbox as S
from booktools.grading.batch import grade, student_names

RIGHT_1 = """def ridge_prediction(xs, ys, x_query, lam):
    d = xs.shape[1]
    w = np.linalg.solve(xs.T @ xs + lam * np.eye(d), xs.T @ ys)
    return float(x_query @ w)"""
# open() that never returns, in a kernel that ignores the interrupt
STUCK_OPEN = """
import builtins, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
def _stuck(*a, **k):
    while True:
        time.sleep(1)
builtins.open = _stuck
"""


def _submission(chapter: str, ex1: str = RIGHT_1):
    release = A.chapter_release(chapter)
    nb = nbformat.from_dict(release)
    nb.cells = [
        c
        for c in nb.cells
        if c.metadata.get("nbgrader")
        or (c.cell_type == "code" and "from icl_book.checks import" in c.source)
    ]
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == f"{chapter}-ex1-solution":
            cell.source = ex1
    return release, nb


@pytest.mark.slow  # one kernel: ~20 s
def test_a_sabotaged_open_costs_seconds_not_the_timeout():
    """Before: the grader waited for a reply that could not come: the check's whole timeout, then
    the interrupt's grace (105 s here; 615 s per exercise at the default timeout). Now the kernel
    that does not take the request within RPC_GRACE_S is stopped."""
    release, nb = _submission("prologue", RIGHT_1 + "\n" + STUCK_OPEN)
    start = time.monotonic()
    rows = G.grade_submission(nbformat.writes(nb).encode(), "mallory", release, timeout=90)
    elapsed = time.monotonic() - start
    by = {r.exercise: r for r in rows}
    assert by["prologue-ex1"].message == channel.NO_RPC, rows
    assert by["prologue-ex2"].score == 0 and by["prologue-ex2"].message == channel.NO_RPC
    assert elapsed < 60, elapsed  # kernel start + RPC_GRACE_S, far from 90 + 15


def test_colliding_names_are_told_apart_by_their_folder(tmp_path):
    """Before: subs/*/03_asymptotic_theory/03_asymptotic_theory.ipynb gave three rows named
    03_asymptotic_theory, with one inputs seed, recorded as one student by the gradebook step."""
    paths = [
        tmp_path / "subs" / s / "03_asymptotic_theory" / "03_asymptotic_theory.ipynb"
        for s in ("ada", "bob", "cy")
    ]
    named = student_names([*paths, tmp_path / "subs" / "dee.ipynb"])
    assert [n for n, _ in named] == ["ada", "bob", "cy", "dee"]
    assert named[0][1] == (
        "named after its folder 'ada': 3 submissions are named '03_asymptotic_theory'"
    )
    assert named[3][1] == ""
    with pytest.raises(ValueError, match="same file"):
        student_names([paths[0], paths[0]])
    with pytest.raises(ValueError, match="both be student 'ada'"):
        student_names([paths[0], paths[1], tmp_path / "ada.ipynb"])


def test_colliding_students_get_rows_of_their_own_that_say_so(tmp_path, monkeypatch):
    release, nb = _submission("prologue")
    rel = tmp_path / "release.ipynb"
    nbformat.write(release, rel)
    paths = []
    for s in ("ada", "bob"):
        path = tmp_path / "subs" / s / "00_prologue" / "00_prologue.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
        paths.append(path)
    monkeypatch.setattr(S, "box_available", lambda: True)
    seeds = {}

    def fake(data, student, release, **kwargs):
        seeds[student] = kwargs["inputs_seed"]
        return [G.ExerciseResult(student, "prologue-ex1", 1, 1, "prologue-ex1: correct")]

    monkeypatch.setattr(G, "grade_submission", fake)
    rows = grade(paths, tmp_path / "g.csv", release=rel, jobs=1)
    assert [r.student for r in rows] == ["ada", "bob"]
    assert rows[0].message == (
        "prologue-ex1: correct; named after its folder 'ada': 2 submissions are named '00_prologue'"
    )
    assert seeds["ada"] != seeds["bob"]  # each draws inputs of its own


def test_a_notebook_of_another_chapter_says_so(tmp_path, monkeypatch):
    """Before: a chapter-1 notebook in a prologue batch scored 0 with a NameError and no word of
    the wrong chapter."""
    release, _ = _submission("prologue")
    _, hermite = _submission("hermite")
    monkeypatch.setattr(S, "start_kernel", lambda *a, **k: pytest.fail("no kernel is needed"))
    from booktools.chapters import course_chapters

    rows = G.grade_submission(
        nbformat.writes(hermite).encode(), "ada", release, chapters=course_chapters()
    )
    coding = [r for r in rows if r.score != "manual"]
    assert coding and all(r.score == 0 for r in coding)
    assert {r.message for r in coding} == {
        "this is chapter 01_hermite's notebook, not 00_prologue's: not graded"
    }
