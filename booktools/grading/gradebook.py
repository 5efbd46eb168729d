"""The bridge from ``python -m booktools.assignments grade`` into nbgrader's gradebook.

``python -m booktools.assignments gradebook GRADES.csv --course COURSE --assignment NN_slug``

nbgrader keeps what a course needs around the scores (the gradebook, formgrader for the written
answers, ``nbgrader export`` for the LMS), but its autograder runs the checks *in the student's kernel*,
where a submission can redefine or patch them. This bridge keeps nbgrader for everything but the
autograding: ``grade`` scores the coding exercises (checks in the grader's process, the student's code
reached by RPC, every kernel boxed), then :func:`write_gradebook` writes each score as the ``auto_score``
of the matching autograder-test cell (the check cell's ``grade_id`` in the release), creating the
student and the submission where nbgrader has none. Written exercises keep ``auto_score = None``
(formgrader grades them by hand). Scores are capped at the cell's points; a fraction of the points
(partial credit) is kept as it is.

The submitted notebooks are copied to ``autograded/<student>/<assignment>/`` (where formgrader and
``nbgrader generate_feedback`` look for them) when they are found under ``submitted/`` and no autograded
copy exists yet, and the assignment's notebook there is sanitised as nbgrader's autograder does before it
runs anything (:func:`sanitise_notebook`): a cell whose ``grade_id`` the release does not have (the
instructor edition's extra solution cells, a cell a student tagged) loses its nbgrader metadata, a cell the
release has gets the release's, and nbgrader's own preprocessors (``DeduplicateIds``,
``OverwriteKernelspec``, ``OverwriteCells``, ``CheckCellMetadata``) restore the rest from the gradebook.
Otherwise ``generate_feedback`` stops at the first unknown cell (``MissingEntry: No such taskcomment``).
The outputs are kept (nothing is executed here; nbgrader's ``ClearOutput`` belongs to its re-execution).
An autograded copy that already exists is sanitised in place (and only rewritten when that changes it).
"""

from __future__ import annotations

import copy
import shutil
import tempfile
import warnings
from collections import defaultdict
from pathlib import Path

from booktools.grading.report import read_report

__all__ = ["sanitise_notebook", "write_gradebook", "write_feedback"]


def write_gradebook(
    report, course, assignment: str, *, db_url: str | None = None, release=None
) -> dict[str, float]:
    """Write a ``grade`` report's scores for ``assignment`` into nbgrader's gradebook.

    ``course``: nbgrader's course directory (where ``nbgrader generate_assignment`` ran, so the
    gradebook knows the assignment's cells). ``db_url``: the gradebook (default
    ``sqlite:///COURSE/gradebook.db``, nbgrader's default). ``release``: the release notebook the
    report was graded against (default ``COURSE/release/<assignment>/<assignment>.ipynb``). Returns
    each student's total of coding scores as written.
    """
    import nbformat
    from nbgrader.api import Gradebook, MissingEntry

    from booktools.grading.grader import release_plan

    course = Path(course)
    db_url = db_url or f"sqlite:///{course / 'gradebook.db'}"
    release = Path(release or course / "release" / assignment / f"{assignment}.ipynb")
    notebook = release.stem
    items = {it.label: it for it in release_plan(nbformat.read(release, as_version=4))[0]}
    rows = read_report(report) if not isinstance(report, list) else report
    by_student: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_student[row["student"]].append(row)
    totals: dict[str, float] = {}
    with Gradebook(db_url) as gb:
        try:
            gb.find_notebook(notebook, assignment)
        except MissingEntry:
            raise ValueError(
                f"the gradebook {db_url} has no notebook {notebook} in assignment {assignment}: "
                f"run `nbgrader generate_assignment {assignment}` in {course} first"
            ) from None
        for student, student_rows in by_student.items():
            gb.update_or_create_student(student)
            try:
                gb.find_submission(assignment, student)
            except MissingEntry:
                with warnings.catch_warnings():  # nbgrader 0.9's own autoflush notes (SAWarning)
                    warnings.filterwarnings("ignore", message="Object of type <Submitted")
                    gb.add_submission(assignment, student)
            total = 0.0
            for row in student_rows:
                item = items.get(row["exercise"])
                if item is None or item.kind != "coding" or row["score"] == "manual":
                    continue
                grade = gb.find_grade(item.grade_id, notebook, assignment, student)
                score = min(max(float(row["score"]), 0.0), float(grade.max_score))
                grade.auto_score = score
                grade.needs_manual_grade = False
                total += score
            gb.db.commit()
            totals[student] = total
    for student in by_student:  # after the gradebook is closed: nbgrader's preprocessors open it
        _copy_for_formgrader(course, assignment, student, notebook, release, db_url)
    return totals


def _copy_for_formgrader(
    course: Path, assignment: str, student: str, notebook: str, release: Path, db_url: str
) -> None:
    src = course / "submitted" / student / assignment
    dst = course / "autograded" / student / assignment
    try:
        if dst.exists():  # an earlier run's copy (or nbgrader's own): sanitised in place
            if (dst / f"{notebook}.ipynb").exists():
                sanitise_notebook(dst / f"{notebook}.ipynb", release, assignment, db_url)
            return
        if not src.is_dir():
            return
        dst.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dst.parent, prefix=f".{assignment}.") as tmp:
            staged = Path(tmp) / assignment
            shutil.copytree(src, staged)
            if (staged / f"{notebook}.ipynb").exists():
                sanitise_notebook(staged / f"{notebook}.ipynb", release, assignment, db_url)
            staged.rename(dst)  # formgrader never sees an unsanitised copy
    except _UnreadableNotebook as exc:  # the scores are written; only the copy is left out
        warnings.warn(f"{exc}; no autograded copy for {student}", stacklevel=3)


class _UnreadableNotebook(ValueError):
    pass


def sanitise_notebook(path, release, assignment: str, db_url: str) -> bool:
    """Make the submitted notebook ``path`` carry only the nbgrader metadata of ``release``, as
    nbgrader's autograder does before it executes (``nbgrader autograde``'s sanitising step).

    A cell whose ``grade_id`` the release does not have loses its nbgrader metadata (with a warning,
    as nbgrader warns); a cell the release has gets the release's metadata; then nbgrader's
    ``DeduplicateIds``, ``OverwriteKernelspec``, ``OverwriteCells`` (cell type, locked source, points,
    checksum from the gradebook ``db_url``) and ``CheckCellMetadata`` run. The notebook's id is its
    file name (``<notebook>.ipynb``), which must be a notebook of ``assignment`` in the gradebook.
    Rewrites ``path`` only when something changed; returns whether it did.
    """
    import nbformat
    from nbgrader.preprocessors import (
        CheckCellMetadata,
        DeduplicateIds,
        OverwriteCells,
        OverwriteKernelspec,
    )

    path, release = Path(path), Path(release)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # noqa: BLE001 - re-raised naming the file
        raise _UnreadableNotebook(
            f"cannot read the submitted notebook {path} (for the autograded copy): {exc}"
        ) from exc
    before = copy.deepcopy(nb)
    known = {}
    for cell in nbformat.read(release, as_version=4).cells:
        meta = cell.get("metadata", {}).get("nbgrader")
        if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str):
            known[meta["grade_id"]] = meta
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader")
        if meta is None:
            continue
        gid = meta.get("grade_id") if isinstance(meta, dict) else None
        if isinstance(gid, str) and gid in known:
            cell.metadata["nbgrader"] = copy.deepcopy(known[gid])
        else:
            warnings.warn(
                f"{path}: cell {gid!r} does not exist in the release {release.name}; "
                "its nbgrader metadata is removed (as nbgrader's autograder does)",
                stacklevel=2,
            )
            del cell.metadata["nbgrader"]
    resources = {"nbgrader": {"notebook": path.stem, "assignment": assignment, "db_url": db_url}}
    for pp in (DeduplicateIds, OverwriteKernelspec, OverwriteCells, CheckCellMetadata):
        nb, resources = pp().preprocess(nb, resources)
    if nb == before:
        return False
    nbformat.write(nb, path)
    return True


def write_feedback(rows, folder) -> list[Path]:
    """One plain-text feedback file per student, ``FOLDER/<student>.txt``: each exercise's score out
    of its points and the check's message (the hint of a failed check)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    by_student: dict[str, list] = defaultdict(list)
    for r in rows:
        by_student[r.student].append(r)
    written = []
    for student, student_rows in by_student.items():
        lines = [f"Feedback for {student}", ""]
        got = top = 0.0
        for r in student_rows:
            if isinstance(r.score, str):
                lines.append(f"{r.exercise}: graded by hand (out of {r.max_score:g})")
                continue
            got, top = got + r.score, top + r.max_score
            lines.append(f"{r.exercise}: {r.score:g} / {r.max_score:g}  {r.message}")
        lines += ["", f"autograded total: {got:g} / {top:g}"]
        path = folder / f"{Path(student).name}.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written.append(path)
    return written
