"""Per-exercise points and partial credit: a check with several cases records each as a
part (``icl_book.checks.Parts``) in the grader's process, and the *release's* check cell decides
whether its exercise scores ``points × parts passed / parts`` or all or nothing."""

from __future__ import annotations

import contextlib
import copy
import csv
import os
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from booktools import assignments as A
from booktools import myst
from booktools.grading import grader as G
from booktools.grading import sandbox
from booktools.grading.batch import grade
from booktools.grading.gradebook import write_feedback
from icl_book import checks
from icl_book.hermite import effective_noise, erf_link

ROOT = Path(__file__).resolve().parent.parent


def _right_at_rho_zero(calls):
    """``erf_effective_noise`` right only without label noise: hermite-ex3 has four widths times
    the noise levels (0, ρ > 0), so exactly half of its eight cases pass, published or drawn."""

    def answer(a, rho):
        calls.append((a, rho))
        return effective_noise(erf_link(a), rho) if rho == 0 else 0.0

    return answer


# --------------------------------------------------------------------------------------------------
# Recording the parts (the checks, in this process)
# --------------------------------------------------------------------------------------------------
def test_in_a_notebook_a_check_with_parts_stops_at_its_first_failure_as_before():
    calls = []
    with pytest.raises(checks.CheckFailed, match=r"wrong at a = 0\.25, ρ = 0\.2\."):
        checks.check_hermite_ex3(_right_at_rho_zero(calls))
    assert calls == [(0.25, 0.0), (0.25, 0.2)]  # nothing recorded, nothing run after the failure


@pytest.mark.parametrize("seed", [None, 7])
def test_recording_runs_every_case_and_raises_the_first_failure(seed):
    calls = []
    inputs = checks._grading_inputs(seed) if seed is not None else contextlib.nullcontext()
    with inputs, checks._recording_parts() as record:
        with pytest.raises(
            checks.CheckFailed, match=r"wrong at a = [0-9.]+, ρ = 0\.[0-9]+\."
        ) as info:
            checks.check_hermite_ex3(_right_at_rho_zero(calls))
    (parts,) = record
    assert parts.label == "hermite-ex3" and info.value is parts.failure
    assert len(parts.outcomes) == len(calls) == 8
    assert [ok for _, ok in parts.outcomes] == [rho == 0 for _, rho in calls]
    assert parts.n_passed == 4
    if seed is None:
        assert parts.outcomes[1] == ("a = 0.25, ρ = 0.2", False)


def test_recording_a_right_answer_passes_every_part():
    with checks._recording_parts() as record:
        assert checks.check_hermite_ex3(lambda a, rho: effective_noise(erf_link(a), rho))
    (parts,) = record
    assert (parts.n_passed, len(parts.outcomes), parts.failure) == (8, 8, None)


def test_an_unanswered_stub_stops_at_once_even_when_recording():
    def stub(a, rho):
        raise NotImplementedError

    with checks._recording_parts() as record, pytest.raises(checks.NotAnswered):
        checks.check_hermite_ex3(stub)
    assert record[0].outcomes == []


def test_every_check_marked_for_partial_credit_records_its_parts_and_no_constant_passes_one():
    """Each marked check, given a constant answer, records at least two parts (every one run), and
    passes none of them: a part a constant passes would be credit for nothing (why hermite-ex1
    groups k >= 2, and asymptotics-ex3 and depth-ex3 are all or nothing)."""
    marked = [
        name
        for name in dir(checks)
        if name.startswith("check_") and getattr(getattr(checks, name), "graded_in_parts", False)
    ]
    assert len(marked) >= 12 and "check_lsa_ex1" in marked and "check_hermite_ex3" in marked
    for unmarked in ("lsa_ex4", "asymptotics_ex3", "asymptotics_ex4", "depth_ex3"):
        assert f"check_{unmarked}" not in marked
    for name in marked:
        for constant in (0.0, 1.0, -1.0, 0, 1, 2):
            for seed in (None, 3):
                calls = []

                def wrong(*args, _calls=calls, _c=constant, **kwargs):
                    _calls.append(args)
                    return _c

                drawn = (
                    checks._grading_inputs(seed) if seed is not None else contextlib.nullcontext()
                )
                with drawn, checks._recording_parts() as record:
                    with pytest.raises(checks.CheckFailed):
                        getattr(checks, name)(wrong)
                (parts,) = record
                assert len(calls) >= len(parts.outcomes) >= 2, name
                assert parts.n_passed == 0, (name, constant, seed, parts.outcomes)


def test_parts_refuse_bad_arguments_by_name():
    with pytest.raises(TypeError, match="label must be a non-empty string"):
        checks.Parts("")
    parts = checks.Parts("x-ex1")
    with pytest.raises(TypeError, match="name must be a non-empty string"):
        with parts.case(3):
            pass
    with pytest.raises(RuntimeError, match="ran no case"):
        parts.passed()


# --------------------------------------------------------------------------------------------------
# The score (the grader) and the release's metadata
# --------------------------------------------------------------------------------------------------
def test_the_score_counts_parts_only_for_the_failure_of_the_parts():
    item = G.GradeItem("x-ex1", "coding", 3.0, "x-ex1-check", partial=True)
    with checks._recording_parts() as record:
        parts = checks.Parts("x-ex1")
        for k in range(3):
            with parts.case(f"k = {k}"):
                if k == 2:
                    raise checks.CheckFailed("x-ex1: wrong at k = 2")
        with pytest.raises(checks.CheckFailed) as info:
            parts.passed()
    assert G._partial_score(item, record, info.value) == pytest.approx(2.0)
    assert G._partial_message(record, info.value).startswith("2 of 3 parts correct; first wrong:")
    # a failure outside the cases (a later test of the whole answer) is the whole exercise's
    outside = checks.CheckFailed("x-ex1: wrong as a whole")
    assert G._partial_score(item, record, outside) == 0
    assert G._partial_message(record, outside) == "x-ex1: wrong as a whole"
    assert G._partial_score(item, None, info.value) == 0  # no recording: all or nothing


def test_the_release_gives_partial_credit_to_checks_with_parts_only():
    release = A.chapter_release("lsa")
    items = {it.label: it for it in G.release_plan(release)[0]}
    assert items["lsa-ex1"].partial and items["lsa-ex2"].partial
    assert not items["lsa-ex4"].partial  # all or nothing
    listed = {e["label"]: e["partial_credit"] for e in release.metadata["icl_book"]["exercises"]}
    assert listed["lsa-ex1"] and not listed["lsa-ex4"]
    check = next(c for c in release.cells if c.source.startswith("check_lsa_ex1("))
    assert "partial_credit" not in check.metadata["nbgrader"]  # nbgrader drops unknown keys
    check.metadata["icl_book"]["partial_credit"] = "yes"
    with pytest.raises(ValueError, match=r"lsa-ex1-check: metadata icl_book\.partial_credit must"):
        G.release_plan(release)


# --------------------------------------------------------------------------------------------------
# End to end: `grade` on boxed kernels
# --------------------------------------------------------------------------------------------------
HALF_3 = (
    "from icl_book.hermite import effective_noise, erf_link\n\n\n"
    "def erf_effective_noise(a, rho):\n"
    "    return effective_noise(erf_link(a), rho) if rho == 0 else 0.0"
)


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _submission(release):
    """The hermite release reduced to its import cell, answers and checks (a student may delete
    unlocked cells), with exercise 3 half right and exercise 1 at its stub."""
    keep = [
        c
        for c in release.cells
        if c.metadata.get("nbgrader")
        or (c.cell_type == "code" and "from icl_book.checks import check_" in c.source)
    ]
    nb = nbformat.from_dict(copy.deepcopy(release))
    nb.cells = [nbformat.from_dict(c) for c in keep]
    _cell(nb, "hermite-ex3-solution").source = HALF_3
    return nb


def _forged(nb):
    """The same answers, claiming partial credit and 100 points everywhere it could."""
    nb = nbformat.from_dict(copy.deepcopy(nb))
    for gid in ("hermite-ex1-check", "hermite-ex3-check"):
        cell = _cell(nb, gid)
        cell.metadata["nbgrader"]["points"] = 100
        cell.metadata.setdefault("icl_book", {})["partial_credit"] = True
    for e in nb.metadata["icl_book"]["exercises"]:
        e.update(points=100, partial_credit=True)
    return nb


def _all_or_nothing(release):
    release = nbformat.from_dict(copy.deepcopy(release))
    for cell in release.cells:
        cell.metadata.get("icl_book", {}).pop("partial_credit", None)
    for e in release.metadata["icl_book"]["exercises"]:
        e["partial_credit"] = False
    return release


@pytest.mark.slow  # three boxed kernels (two side by side): ~1 min
def test_half_right_scores_half_and_a_submission_cannot_raise_its_credit(tmp_path):
    release = A.chapter_release("hermite")
    assert G.release_plan(release)[0][2].partial  # hermite-ex3 gives partial credit
    honest = _submission(release)
    paths = {}
    for name, nb in (("half", honest), ("forged", _forged(honest))):
        paths[name] = tmp_path / "subs" / f"{name}.ipynb"
        paths[name].parent.mkdir(exist_ok=True)
        nbformat.write(nb, paths[name])
    rel_on, rel_off = tmp_path / "release.ipynb", tmp_path / "release-all-or-nothing.ipynb"
    nbformat.write(release, rel_on)
    nbformat.write(_all_or_nothing(release), rel_off)
    kwargs = {
        "timeout": 120,
        "notebook_timeout": 600,
        "limits": sandbox.Limits(cpu_s=600, nproc=64),
    }
    report = tmp_path / "report.csv"
    rows = grade([paths["half"], paths["forged"]], report, release=rel_on, jobs=2, **kwargs)
    table = {(r["student"], r["exercise"]): r for r in csv.DictReader(report.open())}
    for student in ("half", "forged"):  # the forged points and flags change nothing
        row = table[(student, "hermite-ex3")]
        assert (row["score"], row["max_score"]) == ("0.5", "1"), row
        assert row["message"].startswith(
            "4 of 8 parts correct; first wrong: hermite-ex3: not quite"
        )
        row = table[(student, "hermite-ex1")]  # the stub: not answered, no parts
        assert (row["score"], row["max_score"]) == ("0", "1"), row
        assert row["message"].startswith("hermite-ex1: not implemented yet"), row
    (feedback,) = write_feedback([r for r in rows if r.student == "half"], tmp_path / "feedback")
    text = feedback.read_text()
    assert "hermite-ex3: 0.5 / 1  4 of 8 parts correct" in text
    assert "autograded total: 0.5 / 2" in text

    # the release says all or nothing: the submission's own flag earns nothing
    (ex1, ex3) = [
        r for r in grade([paths["forged"]], release=rel_off, **kwargs) if r.score != "manual"
    ]
    assert (ex3.exercise, ex3.score, ex3.max_score) == ("hermite-ex3", 0, 1.0), ex3
    assert "parts correct" not in ex3.message and "hermite-ex3: not quite" in ex3.message
    assert np.isclose(ex1.score, 0)


# --------------------------------------------------------------------------------------------------
# nbgrader's gradebook keeps a fraction
# --------------------------------------------------------------------------------------------------
def test_the_gradebook_bridge_writes_a_fractional_score(tmp_path, monkeypatch):
    pytest.importorskip("nbgrader")
    # nbgrader's Gradebook runs alembic from the environment's bin (CONTRIBUTING: nbgrader from a script)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    from nbgrader.api import Gradebook

    from booktools.grading.gradebook import write_gradebook

    release = A.chapter_release("prologue")
    path = tmp_path / "release" / "00_prologue" / "00_prologue.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(release, path)
    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(db) as gb:  # what `nbgrader generate_assignment` records of the check cells
        gb.add_assignment("00_prologue")
        gb.add_notebook("00_prologue", "00_prologue")
        for it in G.release_plan(release)[0]:
            if it.kind == "coding":
                gb.add_grade_cell(
                    it.grade_id, "00_prologue", "00_prologue", max_score=it.points, cell_type="code"
                )
    report = [
        {"student": "ada", "exercise": "prologue-ex1", "score": "0.25", "max_score": "1"},
        {"student": "ada", "exercise": "prologue-ex2", "score": "1", "max_score": "1"},
    ]
    totals = write_gradebook(report, tmp_path, "00_prologue", db_url=db, release=path)
    assert totals == {"ada": pytest.approx(1.25)}
    with Gradebook(db) as gb:
        grade = gb.find_grade("prologue-ex1-check", "00_prologue", "00_prologue", "ada")
        assert grade.score == pytest.approx(0.25)


def test_the_instructors_page_names_exactly_the_exercises_with_partial_credit():
    """The page lists the exercises graded in parts; a check gaining or losing parts fails here."""
    import re

    page = (ROOT / "chapters" / "instructors.md").read_text()
    para = page.split("**Points and partial credit.**", 1)[1].split("Such an exercise", 1)[0]
    listed = set(re.findall(r"`([a-z]+-ex\d+)`", para))
    marked = {
        myst.check_label(name)
        for name in dir(checks)
        if name.startswith("check_") and getattr(getattr(checks, name), "graded_in_parts", False)
    }
    assert listed == marked
