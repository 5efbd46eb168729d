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
    args = parser.parse_args()
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
