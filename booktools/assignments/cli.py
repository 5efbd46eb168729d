"""The command line of the assignments and the grader: ``python -m booktools.assignments
{build,grade,gradebook,table} ...`` (every command but ``gradebook`` takes ``--root DIR``, default the
repository the current directory is in)::

    python -m booktools.assignments build [--root DIR] [--chapters 00 hermite ...] [--out DIR]
    python -m booktools.assignments grade NOTEBOOK... [--root DIR] [--out report.csv] [--timeout S]
    python -m booktools.assignments gradebook REPORT.csv --course COURSE --assignment NN_slug
    python -m booktools.assignments table [--root DIR] [--write PAGE [--check]]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

from booktools import add_root_option
from booktools.assignments.instructors import instructors_table, update_instructors_page
from booktools.assignments.release import build, chapter_release
from booktools.chapters import chapters_folder
from booktools.grading.batch import batch_chapter, grade
from booktools.grading.report import write_rows

__all__ = ["main", "release_to_grade"]


def release_to_grade(notebooks, release=None, root: str | os.PathLike | None = None):
    """The trusted release a batch of submissions is graded against: ``release`` (a path or a
    notebook), or else the student edition of the one chapter the submissions' *paths* name
    (:func:`booktools.grading.batch.batch_chapter`; ``ValueError`` when they name none or several),
    built from the repository ``root`` (default: the one the current directory is in). A
    submission's own metadata never decides."""
    if release is not None:
        return release
    chapter = batch_chapter([Path(p) for p in notebooks])
    return chapter_release(chapter, chapters_folder(root=root))


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m booktools.assignments {build,grade,gradebook,defuse,table} ...``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m booktools.assignments",
        description="Student/instructor notebooks from the chapters, and an autograder.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    with_root = argparse.ArgumentParser(add_help=False)
    add_root_option(with_root)
    b = sub.add_parser(
        "build", parents=[with_root], help="write student, instructor and nbgrader-source notebooks"
    )
    b.add_argument(
        "--chapters", nargs="*", default=None, help="numbers, stems or short names (default: all)"
    )
    b.add_argument("--out", type=Path, default=Path("_build/assignments"), help="output directory")
    b.add_argument("--chapters-dir", type=Path, default=None, help=argparse.SUPPRESS)
    g = sub.add_parser(
        "grade", parents=[with_root], help="execute submissions and write a CSV of scores"
    )
    g.add_argument("notebooks", nargs="+", type=Path)
    g.add_argument(
        "--release",
        type=Path,
        default=None,
        help="the release to grade against (default: the one chapter the submissions' paths "
        "name, built from the repository; never a submission's own metadata)",
    )
    g.add_argument(
        "--feedback",
        type=Path,
        default=None,
        help="write one feedback file per student into this folder (<student>.txt)",
    )
    g.add_argument(
        "--inputs-seed",
        type=int,
        default=None,
        help="seed of the inputs checks draw at grading time (default: random, printed)",
    )
    g.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade even where the sandbox cannot be built (no bubblewrap): kernels then run "
        "with your user id and see your files; without it the grader refuses",
    )
    g.add_argument("--out", type=Path, default=None, help="CSV report (default: print it)")
    g.add_argument(
        "--timeout",
        type=int,
        default=600,
        help="CPU seconds per cell (default 600; wall clock capped at 3x)",
    )
    g.add_argument(
        "--notebook-timeout", type=int, default=3600, help="seconds per notebook (default 3600)"
    )
    g.add_argument("--memory-mb", type=int, default=4096, help="address space per kernel (MB)")
    g.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="submissions graded side by side (default: the number of CPUs)",
    )
    gb = sub.add_parser(
        "gradebook", help="write a grade report's scores into an nbgrader course's gradebook"
    )
    gb.add_argument("report", type=Path, help="the CSV written by grade --out")
    gb.add_argument("--course", type=Path, required=True, help="the nbgrader course directory")
    gb.add_argument("--assignment", required=True, help="the assignment (e.g. 01_hermite)")
    gb.add_argument(
        "--db", default=None, help="gradebook URL (default: sqlite:///COURSE/gradebook.db)"
    )
    d = sub.add_parser(
        "defuse",
        help="copy a CSV (nbgrader's grades.csv) to <name>-safe.csv with formula-like cells "
        "shown as text in a spreadsheet",
    )
    d.add_argument("csv", type=Path)
    t = sub.add_parser(
        "table", parents=[with_root], help="print the instructors page's chapter table"
    )
    t.add_argument("--write", type=Path, default=None, help="update the table in this page")
    t.add_argument("--check", action="store_true", help="with --write: fail if the page is stale")
    args = parser.parse_args(argv)

    if args.command == "build":
        try:
            chapters_dir = chapters_folder(args.chapters_dir, args.root)
            written = build(args.chapters, args.out, chapters_dir)
        except (ValueError, FileNotFoundError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for path in written:
            print(f"wrote {path}")
        return 0
    if args.command == "defuse":
        from booktools.grading.report import defuse_csv

        try:
            print(f"wrote {defuse_csv(args.csv)}")
        except (ValueError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.command == "grade":
        if args.timeout <= 0 or args.notebook_timeout <= 0:
            print("error: --timeout and --notebook-timeout must be > 0", file=sys.stderr)
            return 2
        jobs = (os.cpu_count() or 1) if args.jobs is None else args.jobs
        if jobs < 1:
            print(f"error: --jobs must be >= 1, got {jobs}", file=sys.stderr)
            return 2
        from booktools.grading.grader import InfrastructureError
        from booktools.grading.sandbox import NO_SANDBOX_WARNING, Limits, SandboxUnavailable

        try:
            results = grade(
                args.notebooks,
                args.out,
                release=release_to_grade(args.notebooks, args.release, args.root),
                timeout=args.timeout,
                notebook_timeout=args.notebook_timeout,
                limits=Limits(memory_mb=args.memory_mb, cpu_s=2 * args.notebook_timeout),
                log=sys.stderr,
                jobs=min(jobs, len(args.notebooks)),
                no_sandbox=args.no_sandbox,
                inputs_seed=args.inputs_seed,
                root=args.root,
            )
        except SandboxUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except InfrastructureError as exc:
            kept = f"; {args.out} holds the students graded before it" if args.out else ""
            print(f"error: grading stopped, not the students' fault: {exc}{kept}", file=sys.stderr)
            return 3
        except (ValueError, FileNotFoundError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.no_sandbox:
            print(NO_SANDBOX_WARNING, file=sys.stderr)
        if args.feedback is not None:
            from booktools.grading.gradebook import write_feedback

            written = write_feedback(results, args.feedback)
            print(f"wrote {len(written)} feedback files into {args.feedback}", file=sys.stderr)
        if args.out is None:
            write_rows(csv.writer(sys.stdout), results)
        else:
            print(f"wrote {args.out} ({len(results)} rows)", file=sys.stderr)
        return 0
    if args.command == "gradebook":
        from booktools.grading.gradebook import write_gradebook

        try:
            totals = write_gradebook(args.report, args.course, args.assignment, db_url=args.db)
        except (ValueError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for student, total in totals.items():
            print(f"{student}: {total:g}")
        return 0
    try:
        chapters_dir = chapters_folder(root=args.root)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.write is None:
        print(instructors_table(chapters_dir))
        return 0
    if args.check:
        ok = update_instructors_page(args.write, check=True, root=chapters_dir.parent)
        print(
            "up to date" if ok else f"{args.write} is stale: run without --check", file=sys.stderr
        )
        return 0 if ok else 1
    update_instructors_page(args.write, root=chapters_dir.parent)
    return 0
