"""Grading a batch of submissions: ``python -m booktools.assignments grade NOTEBOOK... [--release
RELEASE] [--out report.csv]`` (:func:`grade`); each submission is scored by :mod:`booktools.grading.grader`.

``grade`` executes each submission in a clean kernel with a per-cell and a per-notebook timeout, and scores
each coding exercise by its *check cell* (a code cell calling exactly one ``check_<chapter>_ex<N>(...)``).
It writes one CSV row per student x exercise. Grading runs student code: run it in a sandbox (a container
or a throw-away VM without credentials), never in an account that holds anything of value.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import os
import secrets
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from booktools.chapters import STEM_RE, chapter_info, course_chapters, load_notebook
from booktools.grading import grader, sandbox
from booktools.grading.report import write_report, write_rows

__all__ = [
    "NBGRADER_STEPS",
    "student_name",
    "student_names",
    "chapter_of_path",
    "batch_chapter",
    "grade",
]


NBGRADER_STEPS = ("submitted", "autograded", "feedback")


def student_name(path: str | os.PathLike) -> str:
    """The student a submission belongs to, from its path: ``<student>`` for nbgrader's
    ``submitted/<student>/<assignment>/<notebook>.ipynb`` layout, otherwise the file's stem."""
    parts = Path(path).parts
    if len(parts) >= 4 and parts[-4] in NBGRADER_STEPS:
        return parts[-3]
    return Path(path).stem


def student_names(paths) -> list[tuple[str, str]]:
    """Each submission's student, unique in the batch, and a note for its rows ("" when none).

    A student is named by :func:`student_name`; submissions that share a name (files named after
    the assignment outside nbgrader's layout, ``subs/ada/01_hermite/01_hermite.ipynb``) are named
    after the nearest folder that tells them all apart (``ada``), and the note says so. Raises
    ``ValueError`` where no folder does (the same file twice) or a new name is another's."""
    paths = [Path(p) for p in paths]
    named = [(student_name(p), "") for p in paths]
    by_name: dict[str, list[int]] = {}
    for k, (name, _) in enumerate(named):
        by_name.setdefault(name, []).append(k)
    for name, ks in by_name.items():
        if len(ks) < 2:
            continue
        folders = [paths[k].resolve().parent.parts[::-1] for k in ks]
        depth = next(
            (
                d
                for d in range(max(map(len, folders)))
                if len({f[d] if d < len(f) else None for f in folders}) == len(ks)
            ),
            None,
        )
        if depth is None or any(depth >= len(f) for f in folders):
            listed = ", ".join(str(paths[k]) for k in ks)
            raise ValueError(f"{len(ks)} submissions are the same file ({listed}): give each once")
        for k, f in zip(ks, folders, strict=True):
            note = f"named after its folder {f[depth]!r}: {len(ks)} submissions are named {name!r}"
            named[k] = (f[depth], note)
    seen: dict[str, Path] = {}
    for path, (name, _) in zip(paths, named, strict=True):
        if name in seen:
            raise ValueError(
                f"two submissions would both be student {name!r} ({seen[name]}, {path}): rename "
                "one, or use nbgrader's submitted/<student>/<assignment>/ layout"
            )
        seen[name] = path
    return named


def chapter_of_path(path: str | os.PathLike) -> str | None:
    """The chapter a submission's *path* names (nbgrader's assignment folder, else the file name), or
    ``None``; a submission's own metadata is never consulted (it could pick an easier chapter)."""
    path = Path(path)
    names = [path.stem]
    if len(path.parts) >= 4 and path.parts[-4] in NBGRADER_STEPS:
        names.insert(0, path.parts[-2])
    for name in names:
        if STEM_RE.match(name) and chapter_info(name):
            return chapter_info(name).stem
    found = {ch.stem for name in names for ch in course_chapters() if ch.stem in name}
    return found.pop() if len(found) == 1 else None


def batch_chapter(paths) -> str:
    """The one chapter a batch of submissions is for, inferred from their paths (see
    :func:`chapter_of_path`); ``ValueError`` when the paths name none or several (pass ``--release``)."""
    named = {chapter_of_path(p) for p in paths} - {None}
    if len(named) != 1:
        what = "no chapter" if not named else f"several chapters ({', '.join(sorted(named))})"
        raise ValueError(
            f"the submissions' paths name {what}: grade one chapter at a time and pass --release "
            "(a submission's own metadata never chooses what it is graded against)"
        )
    return named.pop()


def grade(
    notebooks,
    out: str | os.PathLike | None = None,
    *,
    release,
    timeout: float = 600,
    notebook_timeout: float = 3600,
    limits=None,
    pythonpath=(),
    log=None,
    jobs: int = 1,
    no_sandbox: bool = False,
    inputs_seed: int | None = None,
    root: str | os.PathLike | None = None,
):
    """Grade every submission in ``notebooks`` (paths) and write the CSV report to ``out`` (if given).

    ``release``: the trusted release to grade against (a path or notebook; e.g. nbgrader's release or a
    student edition of :func:`booktools.assignments.build`; the command line builds the one of the
    chapter the batch's paths name, :func:`batch_chapter`), never a submission's own metadata.
    ``root``: the repository whose course's chapters tell a submission of another chapter
    (default: the one the current directory is in).

    The student is named from the path (:func:`student_names`: nbgrader's
    ``submitted/<student>/<assignment>/`` layout, else the file stem; submissions sharing a name are
    named after the folder that tells them apart, and their rows say so). All files are read before
    the first submission runs.

    The report is written as grading goes (each student's rows appended when graded, so a killed run
    keeps what it graded) and rewritten in the order of ``notebooks`` at the end. A submission the
    grader cannot read is a row saying why; a kernel that cannot start raises
    :class:`booktools.grading.grader.InfrastructureError` (after writing what was graded), and a sandbox that
    cannot be built raises :class:`booktools.grading.sandbox.SandboxUnavailable` before anything runs,
    unless ``no_sandbox`` (then a warning goes to ``log``, or stderr).

    Checks whose fixed inputs a table of answers could pass draw them at grading time, from a seed per
    submission derived from ``inputs_seed`` and the student's name (``inputs_seed``: random if
    ``None``, printed to ``log``; pass the same to regrade with the same inputs). The row's message
    records the submission's seed.

    ``jobs`` submissions are graded side by side, each in its own sandboxed kernel; with
    ``jobs > 1`` and no ``limits.threads``, each kernel gets ``cpu_count // jobs`` BLAS threads
    (at least one). The report's rows follow the order of ``notebooks`` whatever ``jobs`` is.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    if not sandbox.box_available():
        if not no_sandbox:
            raise sandbox.SandboxUnavailable(sandbox.SANDBOX_MISSING)
        print(sandbox.NO_SANDBOX_WARNING, file=log or sys.stderr, flush=True)
    notebooks = [Path(p) for p in notebooks]
    fixed = release if hasattr(release, "cells") else load_notebook(release)
    chapters = course_chapters(root)
    submissions = []
    for path, (student, note) in zip(notebooks, student_names(notebooks), strict=True):
        try:
            data = path.read_bytes()
        except OSError as exc:
            data = f"unreadable: {exc}".encode()
        submissions.append((student, note, data))
    folders = sorted({str(p.resolve().parent) for p in notebooks})
    folders += sorted({str(p.resolve().parents[2]) for p in notebooks if len(p.parts) >= 4
                       and p.parts[-4] in NBGRADER_STEPS})  # fmt: skip

    grader._preload_references()
    if inputs_seed is None:
        inputs_seed = secrets.randbits(32)
    if log is not None:
        print(f"inputs seed {inputs_seed} (--inputs-seed regrades the same)", file=log, flush=True)

    def seed_of(student: str) -> int:
        digest = hashlib.sha256(f"{inputs_seed}:{student}".encode()).digest()
        return int.from_bytes(digest[:4], "big")

    limits = limits or sandbox.Limits()
    if jobs > 1 and limits.threads is None:
        limits = dataclasses.replace(limits, threads=max(1, (os.cpu_count() or 1) // jobs))

    lock = threading.Lock()
    partial = None
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.open("w", newline="", encoding="utf-8")
        write_rows(csv.writer(partial), [])
        partial.flush()

    def one(k: int) -> list:
        student, note, data = submissions[k]
        try:
            rows = grader.grade_submission(
                data,
                student,
                fixed,
                timeout=timeout,
                notebook_timeout=notebook_timeout,
                limits=limits,
                pythonpath=pythonpath,
                hide_dirs=folders,
                no_sandbox=no_sandbox,
                inputs_seed=seed_of(student),
                chapters=chapters,
            )
        except (grader.InfrastructureError, sandbox.SandboxUnavailable):
            raise
        except Exception as exc:  # noqa: BLE001 - one submission's grader error is its row, not the batch's end
            rows = [
                grader.ExerciseResult(
                    student, "*", 0, 0, f"grader error: {type(exc).__name__}: {exc}"[:300]
                )
            ]
        if note:
            rows = [dataclasses.replace(r, message=f"{r.message}; {note}") for r in rows]
        with lock:
            if partial is not None:
                write_rows(csv.writer(partial), rows, header=False)
                partial.flush()
                os.fsync(partial.fileno())
            if log is not None:
                got = sum(r.score for r in rows if not isinstance(r.score, str))
                top = sum(r.max_score for r in rows if not isinstance(r.score, str))
                print(f"{student}: {got:g}/{top:g}", file=log, flush=True)
        return rows

    done: dict[int, list] = {}
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:  # the kernels do the work
            futures = {pool.submit(one, k): k for k in range(len(submissions))}
            try:
                for fut in as_completed(futures):
                    done[futures[fut]] = fut.result()
            except BaseException:
                for fut in futures:
                    fut.cancel()
                raise
    finally:
        if partial is not None:
            partial.close()
    results = [row for k in sorted(done) for row in done[k]]
    if out is not None:
        write_report(results, out)
    return results
