"""A grader a course can run unattended: no silent zeros, no lost batches, no leaks between
students, the release chosen by the instructor, forged replies and CSV cells defused.

Each test names the defect it guards against; each failed on the grader before its fix. The fast ones
replace the kernel by a stub where the defect lies before any kernel starts; the slow ones start real
boxed kernels (a few seconds each).
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from booktools import assignments as A
from booktools.assignments.cli import main, release_to_grade
from booktools.grading import channel
from booktools.grading import grader as G
from booktools.grading import sandbox as S
from booktools.grading.batch import chapter_of_path, grade, student_name
from booktools.grading.report import write_report, write_rows

ROOT = Path(__file__).resolve().parent.parent

RIGHT_1 = """def ridge_prediction(xs, ys, x_query, lam):
    d = xs.shape[1]
    w = np.linalg.solve(xs.T @ xs + lam * np.eye(d), xs.T @ ys)
    return float(x_query @ w)"""
RIGHT_2 = (
    "def best_eta(dim, context_len, noise_var):\n"
    "    return context_len / (context_len + dim + 1 + noise_var)"
)


def _prologue():
    """The prologue's release and a reduced honest submission (import cell, answers, checks)."""
    release = A.chapter_release("prologue")
    keep = [
        c
        for c in release.cells
        if c.metadata.get("nbgrader")
        or (c.cell_type == "code" and "from icl_book.checks import" in c.source)
    ]
    nb = nbformat.from_dict(release)
    nb.cells = [nbformat.from_dict(c) for c in keep]
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid == "prologue-ex1-solution":
            cell.source = RIGHT_1
        if gid == "prologue-ex2-solution":
            cell.source = RIGHT_2
    return release, nb


@pytest.fixture
def no_box(monkeypatch):
    """A machine where the box cannot be built (no bubblewrap, or Docker's default seccomp profile)."""
    monkeypatch.setenv("ICL_GRADER_NO_BOX", "1")
    monkeypatch.setattr(S, "_BOX_OK", None)
    yield
    S._BOX_OK = None  # re-probe for the next test (monkeypatch restores the env first)


def _write(nb, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# --------------------------------------------------------------------------------------------------
# 1. No silent zeros
# --------------------------------------------------------------------------------------------------
def test_without_the_box_the_grader_refuses_to_run(no_box, tmp_path, capsys):
    """Before: every kernel died (setsid EPERM), every row read 'could not execute', the reference
    solution scored 0/2 and `grade` exited 0. Now: it refuses, with exit status 2, naming --no-sandbox."""
    release, nb = _prologue()
    rel = _write(release, tmp_path / "release.ipynb")
    sub = _write(nb, tmp_path / "ada.ipynb")
    with pytest.raises(S.SandboxUnavailable, match="--no-sandbox"):
        grade([sub], release=rel)
    status = main(["grade", str(sub), "--release", str(rel), "--out", str(tmp_path / "g.csv")])
    assert status == 2
    assert "--no-sandbox" in capsys.readouterr().err
    assert not (tmp_path / "g.csv").exists()


@pytest.mark.slow  # one kernel without the box: ~10 s
def test_no_sandbox_grades_the_reference_solution_in_full_and_says_so(no_box, tmp_path, capsys):
    """With an explicit --no-sandbox the reference scores 2/2 (the launcher's setsid() no longer
    fails with EPERM in the session jupyter_client already made), and the run warns loudly."""
    release, nb = _prologue()
    rel = _write(release, tmp_path / "release.ipynb")
    sub = _write(nb, tmp_path / "ada.ipynb")
    out = tmp_path / "g.csv"
    status = main(
        ["grade", str(sub), "--release", str(rel), "--out", str(out), "--no-sandbox", "--jobs", "1"]
    )
    assert status == 0
    err = capsys.readouterr().err
    assert "WITHOUT the sandbox" in err
    rows = {r["exercise"]: r for r in csv.DictReader(out.open())}
    assert rows["prologue-ex1"]["score"] == "1", rows
    assert rows["prologue-ex2"]["score"] == "1", rows


def test_a_kernel_that_cannot_start_fails_the_run_not_the_student(tmp_path, monkeypatch, capsys):
    """Before: 'could not execute: RuntimeError: Kernel died before replying to kernel_info' as every
    student's 0, exit 0. Now: an infrastructure error, exit status 3, no zero written for anyone."""
    release, nb = _prologue()
    rel = _write(release, tmp_path / "release.ipynb")
    subs = [_write(nb, tmp_path / f"{name}.ipynb") for name in ("ada", "bob")]
    monkeypatch.setattr(S, "box_available", lambda: True)

    def dead(*a, **k):
        raise RuntimeError("Kernel died before replying to kernel_info")

    monkeypatch.setattr(S, "start_kernel", dead)
    with pytest.raises(G.InfrastructureError, match="kernel_info"):
        grade(subs, release=rel)
    out = tmp_path / "g.csv"
    status = main(["grade", *map(str, subs), "--release", str(rel), "--out", str(out)])
    assert status == 3
    assert "not the students' fault" in capsys.readouterr().err
    rows = list(csv.DictReader(out.open()))
    assert rows == []  # nobody graded, nobody given a zero


# --------------------------------------------------------------------------------------------------
# 2. One malformed notebook does not lose the batch; results are written as they come
# --------------------------------------------------------------------------------------------------
def test_a_malformed_notebook_is_a_row_and_the_batch_goes_on(tmp_path, monkeypatch):
    """Before: a grade_id that is a list or a source list holding an int raised TypeError outside the
    error handling, after other students were graded, naming nobody and writing no CSV."""
    release, nb = _prologue()
    rel = _write(release, tmp_path / "release.ipynb")

    def solution_cell(data):
        return next(
            c
            for c in data["cells"]
            if c["metadata"].get("nbgrader", {}).get("grade_id") == "prologue-ex1-solution"
        )

    bad_gid = json.loads(nbformat.writes(nb))
    solution_cell(bad_gid)["metadata"]["nbgrader"]["grade_id"] = ["prologue-ex1-solution"]
    bad_src = json.loads(nbformat.writes(nb))
    solution_cell(bad_src)["source"] = ["x = 1\n", 7]
    paths = []
    for name, data in (("gid_list", bad_gid), ("source_int", bad_src)):
        paths.append(tmp_path / f"{name}.ipynb")
        paths[-1].write_text(json.dumps(data))
    monkeypatch.setattr(S, "box_available", lambda: True)
    started = []
    monkeypatch.setattr(S, "start_kernel", lambda *a, **k: started.append(1) / 0)
    out = tmp_path / "g.csv"
    rows = grade(paths, out, release=rel)
    assert started == []  # neither needed a kernel to be refused
    by = {(r.student, r.exercise): r for r in rows}
    assert "grade_id is a list" in by[("gid_list", "prologue-ex1")].message
    assert "source holds a int" in by[("source_int", "prologue-ex2")].message
    assert all(r.score in (0, "manual") for r in rows)
    assert len(list(csv.DictReader(out.open()))) == len(rows)


def test_a_killed_run_keeps_what_it_graded(tmp_path, monkeypatch):
    """Before: the CSV was written only at the end. Now each student's rows are appended (and synced)
    as soon as they are graded: a run stopped after the first student keeps that student's rows."""
    release, nb = _prologue()
    rel = _write(release, tmp_path / "release.ipynb")
    subs = [_write(nb, tmp_path / f"{name}.ipynb") for name in ("ada", "bob")]
    monkeypatch.setattr(S, "box_available", lambda: True)

    def fake(data, student, release, **kwargs):
        if student == "bob":
            raise KeyboardInterrupt  # the instructor's Ctrl-C, or the machine going away
        return [G.ExerciseResult(student, "prologue-ex1", 1, 1, "prologue-ex1: correct")]

    monkeypatch.setattr(G, "grade_submission", fake)
    out = tmp_path / "g.csv"
    with pytest.raises(KeyboardInterrupt):
        grade(subs, out, release=rel, jobs=1)
    rows = list(csv.DictReader(out.open()))
    assert [(r["student"], r["score"]) for r in rows] == [("ada", "1")]


@pytest.mark.slow  # one kernel, then a SIGKILL: ~15 s
def test_a_grader_killed_by_sigkill_keeps_the_rows_it_wrote(tmp_path):
    """The real thing: `grade` as a command, killed (SIGKILL: no clean-up runs) while the second
    student's notebook sleeps; the report holds the first student's rows."""
    import signal
    import subprocess
    import time

    release, nb = _prologue()
    rel = _write(release, tmp_path / "release.ipynb")
    first = _write(nb, tmp_path / "ada.ipynb")
    slow = nbformat.from_dict(nb)
    for cell in slow.cells:  # bob's first answer sleeps
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "prologue-ex1-solution":
            cell.source = "import time\ntime.sleep(600)"
    second = _write(slow, tmp_path / "bob.ipynb")
    out = tmp_path / "g.csv"
    grader = subprocess.Popen(
        [sys.executable, "-m", "booktools.assignments", "grade", str(first), str(second),
         "--release", str(rel), "--out", str(out), "--jobs", "1"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        end = time.monotonic() + 300
        while time.monotonic() < end:
            if out.exists() and "ada" in out.read_text():
                break
            time.sleep(0.5)
        time.sleep(2)  # bob's kernel is running now
    finally:
        grader.send_signal(signal.SIGKILL)
        grader.wait()
    rows = list(csv.DictReader(out.open()))
    assert {(r["student"], r["exercise"]) for r in rows} >= {("ada", "prologue-ex1")}, rows
    assert {r["student"] for r in rows} == {"ada"}
    assert [r["score"] for r in rows if r["exercise"] != "prologue-ex3"] == ["1", "1"]


# --------------------------------------------------------------------------------------------------
# 3. Isolation: /dev/shm, /tmp and the neighbours
# --------------------------------------------------------------------------------------------------
def _run(box, code: str) -> str:
    out = []
    box.client.execute_interactive(
        code,
        timeout=120,
        output_hook=lambda m: out.append(
            m["content"].get("text", "") or str(m["content"].get("evalue", ""))
        ),
    )
    return "".join(out)


needs_box = pytest.mark.skipif(
    not S.box_available(), reason="the box needs bubblewrap and user namespaces"
)


@pytest.mark.slow  # two kernels: ~10 s
@needs_box
def test_dev_shm_is_private_to_each_kernel(tmp_path):
    """Before: /dev/shm was the host's, writable: one submission left an answer there and a later one
    scored 2/2; a 100 MB file survived grading."""
    planted = Path("/dev/shm") / f"icl-grader-host-{os.getpid()}"
    answer = Path("/dev/shm") / f"icl-answer-{os.getpid()}"
    planted.write_text("the host's")
    try:
        first = S.start_kernel(tmp_path / "a")
        try:
            said = _run(
                first,
                f"import os\nopen({str(answer)!r}, 'w').write('42')\n"
                f"print('sees host file:', os.path.exists({str(planted)!r}))",
            )
        finally:
            first.kill()
        assert "sees host file: False" in said
        assert not answer.exists()  # nothing reached the host
        second = S.start_kernel(tmp_path / "b")
        try:
            said = _run(second, f"import os\nprint('left:', os.path.exists({str(answer)!r}))")
        finally:
            second.kill()
        assert "left: False" in said
    finally:
        planted.unlink()
        answer.unlink(missing_ok=True)  # (an earlier box left it on the host)


@pytest.mark.slow  # two kernels side by side: ~10 s
@needs_box
def test_neighbours_cannot_read_each_other_when_the_venv_lives_in_the_temporary_directory(
    monkeypatch,
):
    """Before: the temporary directory was not hidden when it held the clone or the venv (a clone
    under /tmp): with --jobs 2 a submission read its neighbour's submission.ipynb and scored 2/2.
    Here the temporary directory is the venv's parent, and both kernels run at once."""
    parent = Path(sys.prefix).resolve().parent
    if not os.access(parent, os.W_OK):
        pytest.skip("the venv's folder is not writable")
    monkeypatch.setattr(tempfile, "tempdir", str(parent))
    a_dir, b_dir = (
        Path(tempfile.mkdtemp(prefix="icl-grade-")),
        Path(tempfile.mkdtemp(prefix="icl-grade-")),
    )
    a = b = None
    try:
        a = S.start_kernel(a_dir)
        b = S.start_kernel(b_dir)
        (a_dir / "work" / "submission.ipynb").write_text("ada's answers")
        said = _run(
            b,
            "import glob, os\n"
            f"print('neighbour:', os.path.exists({str(a_dir / 'work' / 'submission.ipynb')!r}))\n"
            f"print('found:', glob.glob({str(parent / 'icl-grade-*' / 'work' / '*.ipynb')!r}))\n"
            "import icl_book, numpy\nprint('imports: ok')",
        )
        assert "neighbour: False" in said, said
        assert "found: []" in said, said
        assert "imports: ok" in said, said  # the venv and the package stay readable
    finally:
        for box in (a, b):
            if box is not None:
                box.kill()
        import shutil

        shutil.rmtree(a_dir, ignore_errors=True)
        shutil.rmtree(b_dir, ignore_errors=True)


@pytest.mark.slow  # one kernel: ~5 s
@needs_box
def test_the_kernel_sees_no_folder_but_its_own_the_package_and_the_system(tmp_path):
    """The clone (the instructor's solutions), the grader's home, /tmp, /var, /run are hidden; the
    package and the interpreter are readable and read-only."""
    box = S.start_kernel(tmp_path / "box")
    repo = ROOT
    try:
        said = _run(
            box,
            "import os, icl_book\n"
            f"print('repo:', sorted(os.listdir({str(repo)!r})))\n"
            f"print('home:', os.listdir({str(Path.home())!r}) if os.path.isdir({str(Path.home())!r}) else [])\n"
            "print('var:', os.listdir('/var') if os.path.isdir('/var') else [])\n"
            "try:\n"
            "    open(os.path.join(os.path.dirname(icl_book.__file__), 'x'), 'w')\n"
            "except OSError as e:\n"
            "    print('package:', type(e).__name__)\n",
        )
    finally:
        box.kill()
    listed = said.split("repo:")[1].splitlines()[0]
    assert "booktools" not in listed and "chapters" not in listed, said
    assert "var: []" in said, said
    assert "package: OSError" in said, said


# --------------------------------------------------------------------------------------------------
# 4. The release is the instructor's choice, never the submission's
# --------------------------------------------------------------------------------------------------
def test_a_submission_cannot_choose_its_own_chapter(tmp_path, monkeypatch):
    """Before: without --release, metadata.icl_book.chapter decided: a prologue notebook in a
    chapter-1 batch was graded on the prologue (2/2). Now the batch's paths decide."""
    _, nb = _prologue()
    nb.metadata["icl_book"] = {"chapter": "00_prologue"}
    paths = [
        _write(nb, tmp_path / "submitted" / s / "01_hermite" / "01_hermite.ipynb")
        for s in ("ada", "bob")
    ]
    monkeypatch.setattr(S, "box_available", lambda: True)
    seen = []

    def fake(data, student, release, **kwargs):
        seen.append((student, {G.release_plan(release)[0][0].label.split("-")[0]}))
        return []

    monkeypatch.setattr(G, "grade_submission", fake)
    grade(paths, release=release_to_grade(paths), jobs=1)
    assert sorted(seen) == [("ada", {"hermite"}), ("bob", {"hermite"})]


def test_a_batch_naming_no_chapter_or_several_needs_release(tmp_path, monkeypatch):
    _, nb = _prologue()
    nb.metadata["icl_book"] = {"chapter": "00_prologue"}
    monkeypatch.setattr(S, "box_available", lambda: True)
    anonymous = [_write(nb, tmp_path / "ada.ipynb")]
    with pytest.raises(ValueError, match="pass --release"):
        release_to_grade(anonymous)
    mixed = [_write(nb, tmp_path / "00_prologue.ipynb"), _write(nb, tmp_path / "01_hermite.ipynb")]
    with pytest.raises(ValueError, match="several chapters"):
        release_to_grade(mixed)
    assert main(["grade", str(anonymous[0])]) == 2


# --------------------------------------------------------------------------------------------------
# 5. Forged replies, spreadsheet formulas, student names
# --------------------------------------------------------------------------------------------------
def _stub_session(tmp_path):
    """A grader's session on a stand-in box (alive, no CPU clock): the tests forge the kernel's side."""

    class Box:
        private = tmp_path

        def alive(self):
            return True

        def cpu_seconds(self):
            return None

    (tmp_path / "work").mkdir()
    return channel.KernelSession(Box())


def test_a_60_mb_reply_is_rejected_by_its_size_without_parsing(tmp_path, monkeypatch):
    """Before: a forged 60 MB reply was read and parsed (the grader's RSS: 328 MB -> 1.87 GB)."""
    session = _stub_session(tmp_path)
    real_loads = json.loads

    def forge(code, timeout, taken=None):  # the kernel's side: a huge, well-formed reply
        (req,) = session.channel.glob("req-*.json")
        reply = real_loads(req.read_text())["reply"]
        with open(reply, "w") as fh:
            fh.write('{"token": "x", "value": "')
            fh.write("A" * (60 * 1024 * 1024))
            fh.write('"}')
        return {"status": "ok", "error": None}

    parsed = []
    monkeypatch.setattr(session, "run", forge)
    monkeypatch.setattr(
        channel.json, "loads", lambda *a, **k: parsed.append(1) or real_loads(*a, **k)
    )
    try:
        with pytest.raises(channel.RemoteError, match="too large"):
            session.request({"op": "eval", "expr": "answer"}, 10)
    finally:
        session.close()
    assert parsed == []
    assert list(session.channel.iterdir()) == []  # the forged reply is removed


@pytest.mark.parametrize("reply", ['{"token": "x", "value": 1}', "[1, 2]", '"x"'])
def test_a_reply_without_this_requests_token_is_refused(tmp_path, monkeypatch, reply):
    """A well-formed, small reply that is not a dict holding this request's token (a submission
    that guessed the reply's path and wrote first) is refused, not decoded as the answer."""
    session = _stub_session(tmp_path)

    def forge(code, timeout, taken=None):  # the kernel's side: a reply of its own making
        (req,) = session.channel.glob("req-*.json")
        Path(json.loads(req.read_text())["reply"]).write_text(reply)
        return {"status": "ok", "error": None}

    monkeypatch.setattr(session, "run", forge)
    try:
        with pytest.raises(channel.RemoteError, match="did not come from this request"):
            session.request({"op": "eval", "expr": "answer"}, 10)
    finally:
        session.close()


def test_csv_cells_that_start_a_formula_are_neutralised(tmp_path):
    """Before: a forged message put =HYPERLINK(...) at the start of a CSV cell."""
    rows = [
        G.ExerciseResult("=cmd|'/c calc'!A1", "prologue-ex1", 0, 1, '=HYPERLINK("http://x","y")'),
        G.ExerciseResult("ada", "prologue-ex2", 0, 1, "+1"),
        G.ExerciseResult("bob", "prologue-ex2", 0, 1, "-2"),
        G.ExerciseResult("eve", "prologue-ex2", 0, 1, "@SUM(A1)"),
        G.ExerciseResult("kim", "prologue-ex2", 1, 1, "prologue-ex2: correct"),
    ]
    out = write_report(rows, tmp_path / "g.csv")
    cells = [c for row in csv.reader(out.open()) for c in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")], cells
    assert '\'=HYPERLINK("http://x","y")' in cells
    assert "prologue-ex2: correct" in cells  # ordinary cells are untouched
    buf = io.StringIO()
    write_rows(csv.writer(buf), rows[:1])
    assert "'=HYPERLINK" in buf.getvalue()


def test_nbgrader_grades_csv_is_defused_by_the_command_the_instructors_page_gives(tmp_path, capsys):
    """nbgrader's export writes student ids as they are; ``defuse`` guards each formula-like cell
    as our own report does, and leaves the rest of the file as it was."""
    grades = tmp_path / "grades.csv"
    rows = [
        ["student_id", "score"],
        ['=HYPERLINK("http://x","y")', "3"],
        ["ada", "-1"],
        ["bob", "2"],
    ]
    with grades.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    assert main(["defuse", str(grades)]) == 0
    safe = tmp_path / "grades-safe.csv"
    assert f"wrote {safe}" in capsys.readouterr().out
    with safe.open(newline="") as fh:
        got = list(csv.reader(fh))
    assert got == [
        ["student_id", "score"],
        ['\'=HYPERLINK("http://x","y")', "3"],
        ["ada", "'-1"],
        ["bob", "2"],
    ]
    assert main(["defuse", str(tmp_path / "grades.txt")]) == 2
    assert "path must be a .csv file" in capsys.readouterr().err


def test_a_grader_error_is_the_submissions_row_and_scores_zero(tmp_path, monkeypatch):
    """An unexpected error while grading one submission is that submission's row (score 0, the error
    named), not the batch's end and not a point."""
    release, nb = _prologue()
    rel = _write(release, tmp_path / "release.ipynb")
    subs = [_write(nb, tmp_path / "ada.ipynb"), _write(nb, tmp_path / "bob.ipynb")]
    monkeypatch.setattr(S, "box_available", lambda: True)

    def broken(data, student, *a, **k):
        raise RuntimeError(f"grader bug on {student}")

    monkeypatch.setattr(G, "grade_submission", broken)
    rows = grade(subs, tmp_path / "g.csv", release=rel, jobs=1)
    assert [(r.student, r.exercise, r.score, r.max_score) for r in rows] == [
        ("ada", "*", 0, 0),
        ("bob", "*", 0, 0),
    ]
    assert all("grader error: RuntimeError: grader bug on" in r.message for r in rows)


def test_students_are_named_from_their_path():
    """Before: with nbgrader's submitted/<student>/<assignment>/ layout every student was named
    after the notebook (01_hermite)."""
    assert student_name("course/submitted/ada/01_hermite/01_hermite.ipynb") == "ada"
    assert student_name("submitted/bob/01_hermite/01_hermite.ipynb") == "bob"
    assert student_name("subs/carol.ipynb") == "carol"
    assert chapter_of_path("course/submitted/ada/01_hermite/01_hermite.ipynb") == "01_hermite"
    assert chapter_of_path("subs/carol.ipynb") is None
    # nbgrader's assignment folder names the chapter when the file does not; a file name that
    # holds exactly one chapter's name names it; one that holds two names none
    assert chapter_of_path("submitted/ada/03_asymptotic_theory/homework.ipynb") == (
        "03_asymptotic_theory"
    )
    assert chapter_of_path("subs/ada_03_asymptotic_theory_v2.ipynb") == "03_asymptotic_theory"
    assert chapter_of_path("subs/01_hermite_and_02_lsa_gradient_descent.ipynb") is None
