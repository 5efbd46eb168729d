"""Grade the same honest submissions with our grader and with nbgrader; print times and scores.

For one chapter (default 1) this builds a real nbgrader course directory, releases the
chapter with ``nbgrader generate_assignment``, writes ``--students`` honest submissions
(student k answers the first k/(n−1) of the coding exercises with the instructor's solutions,
the rest left as stubs; :func:`booktools.assignments.sample_submission`) and grades them

- with ``nbgrader autograde`` (sequential, its only mode), and
- with ``python -m booktools.assignments grade --release <nbgrader's release>`` (``--jobs``
  submissions side by side, each in its own sandboxed kernel),

then prints each tool's wall time and every student's auto-graded score. It exits non-zero
when the two tools give any student a different score. Run from the repository root::

    .venv/bin/python benchmarks/bench_grader.py            # chapter 1, 5 students
    .venv/bin/python benchmarks/bench_grader.py --chapter 5 --students 3 --jobs 1

Times are wall-clock on the machine it runs on: run it on a quiet machine.

``--hostile N`` grades a batch of N submissions of the chapter with our grader only, as a course
might receive them: each in ``subs/<student>/<stem>/<stem>.ipynb`` (every file named after the
assignment, so the students must be told apart by their folders), the first ones attacks (an escape
from the box that would then hand in the instructor's solutions, a sabotaged ``open``, an endless
loop, a fork bomb, a memory hog, a surviving process, killing every process in sight, a flood of
output, patched checks, another chapter's notebook), the rest honest. It prints the wall time, the
rows written against those expected (one per student and exercise), the attacks' scores and the
messages of their first exercise; it exits non-zero when a row is missing or an attack scores.
``--tree`` grades with another clone's ``booktools`` (e.g. an older commit), for a before/after::

    .venv/bin/python benchmarks/bench_grader.py --hostile 40 --timeout 60
    .venv/bin/python benchmarks/bench_grader.py --hostile 40 --timeout 60 --tree /tmp/old-clone
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(
    0, os.getcwd()
)  # booktools is the clone's, not installed: run from the repository root
from booktools import assignments as A  # noqa: E402


def course_with_release(chapter: str, root: Path) -> tuple[str, Path, Path]:
    """(stem, nbgrader's release, the instructor notebook) in a fresh course under ``root``."""
    A.build([chapter], root / "built")
    (stem,) = [p.name for p in (root / "built" / "nbgrader" / "source").iterdir()]
    shutil.copytree(root / "built" / "nbgrader" / "source", root / "source")
    _nbgrader(root, "generate_assignment", stem)
    release = root / "release" / stem / f"{stem}.ipynb"
    return stem, release, root / "built" / "instructor" / f"{stem}.ipynb"


def _nbgrader(root: Path, command: str, stem: str, *extra: str) -> None:
    # nbgrader starts kernels through jupyter: the environment's bin directory must be on PATH
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [
            sys.executable, "-m", "nbgrader", command, stem, "--force",
            f"--CourseDirectory.root={root}", f"--CourseDirectory.db_url=sqlite:///{root}/gb.db",
            *extra,
        ],
        cwd=root, env=env, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"nbgrader {command} failed:\n{done.stderr[-3000:]}")


def write_submissions(stem, release, instructor, root: Path, n: int) -> list[str]:
    rel = nbformat.read(release, as_version=4)
    inst = nbformat.read(instructor, as_version=4)
    labels = [e["label"] for e in rel.metadata["icl_book"]["exercises"]]
    students = []
    for k in range(n):
        student = f"student{k}"
        solved = set(labels[: round(k * len(labels) / max(n - 1, 1))])
        sub = A.sample_submission(rel, inst, solved)
        for path in (
            root / "submitted" / student / stem / f"{stem}.ipynb",
            root / "ours" / f"{student}.ipynb",
        ):
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(sub, path)
        students.append(student)
    return students


# Code appended to an attack's first answer cell (``{instructor}``: where the instructor notebook is).
ATTACKS = {
    "escape_then_copy_the_solutions": """
import glob, json, subprocess
for line in open("/proc/self/mounts").read().splitlines()[::-1]:
    dev, mp = line.split()[:2]
    if dev == "tmpfs" and not mp.startswith(("/proc", "/sys", "/dev")):
        subprocess.run(["umount", "-l", mp], capture_output=True)
subprocess.run(["mount", "-o", "remount,bind,rw", "/"], capture_output=True)
def _solution(gid):
    for path in glob.glob({instructor!r}):
        for c in json.load(open(path))["cells"]:
            if c["metadata"].get("nbgrader", {{}}).get("grade_id") == gid:
                return "".join(c["source"])
    return ""
""",
    "sabotaged_open": """
import builtins, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
def _stuck(*a, **k):
    while True:
        time.sleep(1)
builtins.open = _stuck
""",
    "endless_loop": "while True:\n    pass",
    "fork_bomb": """
import os, time
for _ in range(300):
    try:
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
    except OSError:
        break
""",
    "memory_hog": """
_hog = []
try:
    while True:
        _hog.append(bytearray(256 * 1024 * 1024))
except MemoryError:
    pass
""",
    "surviving_process": """
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
""",
    "kill_every_process": """
import os, signal
try:
    os.kill(-1, signal.SIGKILL)
except (ProcessLookupError, PermissionError):
    pass
""",
    "flood_output": """
import sys
for _ in range(64):
    sys.stdout.write("x" * (1 << 20) + "\\n")
""",
    "patched_checks": """
import icl_book.checks as _c
for _n in dir(_c):
    if _n.startswith("check_"):
        setattr(_c, _n, lambda *a, **k: None)
        globals()[_n] = getattr(_c, _n)
""",
}


def write_hostile_batch(stem, release, instructor, root: Path, n: int) -> tuple[list[Path], list]:
    """``n`` submissions in ``root/subs/<student>/<stem>/<stem>.ipynb``: the attacks, another
    chapter's notebook, then honest ones; returns their paths and the students that attack."""
    rel = nbformat.read(release, as_version=4)
    inst = nbformat.read(instructor, as_version=4)
    labels = [e["label"] for e in rel.metadata["icl_book"]["exercises"]]
    other = "hermite" if not stem.startswith("01_") else "prologue"
    paths, hostile = [], []
    for k in range(n):
        student = f"student{k:02d}"
        if k < len(ATTACKS):
            name, code = list(ATTACKS.items())[k]
            sub = A.sample_submission(rel, inst, set())
            solutions = [c for c in sub.cells if c.metadata.get("nbgrader", {}).get("solution")]
            solutions = [c for c in solutions if c.cell_type == "code"]
            solutions[0].source += "\n" + code.format(instructor=str(instructor))
            if name == "escape_then_copy_the_solutions":  # the reward, after each answer
                for c in solutions:
                    gid = c.metadata["nbgrader"]["grade_id"]
                    c.source += f"\nexec(_solution({gid!r}))"
            hostile.append((student, name))
        elif k == len(ATTACKS):
            sub = A.chapter_release(other)
            hostile.append((student, f"{other}_notebook"))
        else:
            solved = set(labels[: round(k * len(labels) / max(n - 1, 1))])
            sub = A.sample_submission(rel, inst, solved)
        path = root / "subs" / student / stem / f"{stem}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(sub, path)
        paths.append(path)
    return paths, hostile


def hostile_batch(args) -> int:
    root = Path(tempfile.mkdtemp(prefix="icl-bench-hostile-"))
    tree = Path(args.tree).resolve() if args.tree else Path.cwd()
    try:
        built = root / "built"
        A.build([args.chapter], built)
        (stem,) = [p.stem for p in (built / "student").glob("*.ipynb")]
        release = built / "student" / f"{stem}.ipynb"
        instructor = built / "instructor" / f"{stem}.ipynb"
        paths, hostile = write_hostile_batch(stem, release, instructor, root, args.hostile)
        report = root / "grades.csv"
        env = {**os.environ, "PYTHONPATH": str(tree)}
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "booktools.assignments", "grade", *map(str, paths),
             "--release", str(release), "--out", str(report), "--jobs", str(args.jobs),
             "--timeout", str(args.timeout)],
            cwd=tree, env=env, capture_output=True, text=True, timeout=7200,
        )  # fmt: skip
        elapsed = time.perf_counter() - t0
        rows = list(csv.DictReader(report.open())) if report.exists() else []
        n_ex = len(nbformat.read(release, as_version=4).metadata["icl_book"]["exercises"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    pairs = {(r["student"], r["exercise"]) for r in rows}
    students = sorted({r["student"] for r in rows})
    print(f"{stem}: {args.hostile} submissions ({len(hostile)} hostile), --jobs {args.jobs}, "
          f"--timeout {args.timeout}, grader from {tree}, exit status {done.returncode}")  # fmt: skip
    print(f"wall time {elapsed:.1f} s; load average {os.getloadavg()[0]:.1f}")
    print(f"rows {len(rows)} (distinct student x exercise {len(pairs)}), expected "
          f"{args.hostile * n_ex}; {len(students)} distinct students")  # fmt: skip
    scored = []
    for student, name in hostile:
        mine = [r for r in rows if r["student"] == student]
        got = sum(float(r["score"]) for r in mine if r["score"] != "manual")
        first = next((r["message"] for r in mine if r["score"] != "manual"), "no row")
        print(f"  {name:32s} {student}: {got:g}  {first[:110]}")
        scored += [name] if got else []
    if done.returncode != 0:
        print(done.stderr[-2000:])
    ok = len(pairs) == args.hostile * n_ex and not scored
    print("no row lost, no attack scored" if ok else "ROWS LOST OR AN ATTACK SCORED")
    return 0 if ok else 1


def nbgrader_scores(root: Path, stem: str, students: list[str]) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root}/gb.db") as gb:
        return {s: float(gb.find_submission(stem, s).code_score) for s in students}


def our_scores(report: Path) -> dict[str, float]:
    scores: dict[str, float] = {}
    with report.open() as fh:
        for row in csv.DictReader(fh):
            if row["score"] != "manual":
                scores[row["student"]] = scores.get(row["student"], 0.0) + float(row["score"])
    return scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapter", default="1")
    parser.add_argument("--students", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--hostile", type=int, default=0, help="a hostile batch of this size")
    parser.add_argument("--timeout", type=int, default=600, help="--hostile: seconds per cell")
    parser.add_argument("--tree", default=None, help="--hostile: the clone whose grader runs")
    args = parser.parse_args()
    if args.hostile:
        return hostile_batch(args)
    root = Path(tempfile.mkdtemp(prefix="icl-bench-grader-"))
    try:
        stem, release, instructor = course_with_release(args.chapter, root)
        students = write_submissions(stem, release, instructor, root, args.students)
        # nbgrader's default 30 s cell timeout interrupts the training cells under load
        t0 = time.perf_counter()
        _nbgrader(root, "autograde", stem, "--ExecutePreprocessor.timeout=600")
        t_nbgrader = time.perf_counter() - t0
        theirs = nbgrader_scores(root, stem, students)

        report = root / "ours.csv"
        t0 = time.perf_counter()
        subprocess.run(
            [
                sys.executable, "-m", "booktools.assignments", "grade",
                *[str(root / "ours" / f"{s}.ipynb") for s in students],
                "--release", str(release), "--out", str(report), "--jobs", str(args.jobs),
            ],
            check=True, capture_output=True, timeout=3600,
        )  # fmt: skip
        t_ours = time.perf_counter() - t0
        ours = our_scores(report)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(f"{stem}: {len(students)} honest submissions, {os.cpu_count()} CPUs")
    print(f"| tool | wall time (s) | {' | '.join(students)} |")
    print(f"|---|---:|{'---:|' * len(students)}")
    cols_theirs = " | ".join(f"{theirs[s]:g}" for s in students)
    cols_ours = " | ".join(f"{ours[s]:g}" if s in ours else "missing" for s in students)
    print(f"| nbgrader autograde | {t_nbgrader:.1f} | {cols_theirs} |")
    print(f"| booktools grade --jobs {args.jobs} | {t_ours:.1f} | {cols_ours} |")
    same = all(ours.get(s) == theirs[s] for s in students)
    print("scores agree" if same else "SCORES DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
