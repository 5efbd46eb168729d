"""The autograder: scores submissions against the instructor's release, trusting only the answers.

``python -m booktools.assignments grade SUBMISSION... [--release RELEASE.ipynb] [--out report.csv]``

What runs where:

- **The grader's process** holds everything that decides a score: the *release* (the student edition
  built from the repository, or an nbgrader release given with ``--release``) gives the exercise list,
  the check cells, their points and the cell metadata; the check functions of :mod:`icl_book.checks`
  and every reference value they compare against run here, never in a student's kernel.
- **The student's kernel** (one per submission, boxed by :mod:`booktools.grading.sandbox`) runs the
  submission's cells, except that the release's locked cells replace theirs and check cells are not run
  at all. Where a check cell stands, the grader evaluates the check's argument (``relu_coefficient``) in
  the kernel and runs the reference check here with a proxy: each call of the student's function sends
  the grader's inputs to the kernel and brings back the output, serialized as tagged JSON (numbers,
  arrays as raw bytes, tuples, lists, dicts, named tuples; a returned function becomes another proxy;
  both halves in :mod:`booktools.grading.codec`, whose source is what the kernel runs)
  through a file named with a per-call random token (:mod:`booktools.grading.channel`). Nothing
  else crosses: no code, no pickles, and no printed text is ever read as a result. The grader opens
  those files through a descriptor of the folder it made (no symbolic link followed, regular files
  only), since the kernel can write there.
- **Time**: a cell over its timeout is interrupted and grading goes on; a kernel that does not stop
  within ``channel.INTERRUPT_GRACE_S`` of the interrupt (it ignores ``SIGINT``) is killed and its
  remaining exercises score zero, so one hostile cell costs seconds, not the notebook's timeout.
  The timeout of a cell, and of a check with every call it makes, counts the kernel's CPU time
  (:class:`channel.Budget`): a loaded machine slows an honest cell but cannot time it out; a cell that
  sleeps or blocks is stopped at ``channel.WALL_FACTOR`` times the timeout of wall-clock time. The
  notebook's timeout is wall-clock time.

So patching ``icl_book.checks``, ``np.allclose`` or ``icl_book.hermite`` in the kernel, redefining a
check, editing or deleting check cells, decoy cells, printed pass lines, edited ``points`` or exercise
lists change nothing: the score is what the student's answers earn. Written exercises appear in the
report as ``manual`` (graded by a person, e.g. in nbgrader's formgrader).

**Points and partial credit** come from the release's check cell: ``points`` from its nbgrader
metadata, and partial credit where its ``metadata.icl_book.partial_credit`` is ``true`` (the release
builder writes it for checks built on :class:`icl_book.checks.Parts`). Such a check runs every case,
recording each part's outcome here, and scores ``points × parts passed / parts`` ("k of n parts
correct" in the message); a failure outside its cases, an unanswered stub, a timeout or a crash score
zero. Without the flag an exercise is all or nothing. A submission's own flag or points are never read.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import json
import pkgutil
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from booktools.grading import channel, sandbox
from booktools.myst import parse_python
from booktools.release_format import nbgrader_of, partial_credit, written_label

__all__ = [
    "InfrastructureError",
    "ExerciseResult",
    "GradeItem",
    "release_plan",
    "grade_submission",
]


class InfrastructureError(RuntimeError):
    """The grader could not grade (a kernel that cannot start, a sandbox that cannot be built):
    never a student's zero; the run stops and fails (non-zero exit)."""


@dataclass
class ExerciseResult:
    """One row of the grade report (``score`` is ``"manual"`` for written exercises)."""

    student: str
    exercise: str
    score: float | str
    max_score: float
    message: str


@dataclass(frozen=True)
class GradeItem:
    """One exercise of the release: a coding exercise (check cell) or a written one (answer cell)."""

    label: str
    kind: str  # "coding" | "written"
    points: float
    grade_id: str | None  # nbgrader grade_id of the check/answer cell
    check: str | None = None  # check function name
    module: str | None = None  # module the release imports it from
    args: tuple[str, ...] = ()  # argument expressions of the check call (evaluated in the kernel)
    kwargs: tuple[tuple[str, str], ...] = ()
    partial: bool = False  # partial credit: points × parts passed / parts (release metadata)


# --------------------------------------------------------------------------------------------------
# The release: what is graded, and how
# --------------------------------------------------------------------------------------------------
def release_plan(release) -> tuple[list[GradeItem], dict]:
    """The exercises of a release (trusted) and its cells by nbgrader ``grade_id``.

    Coding exercises come from the release's check cells (``grade: true``, calling one
    ``check_<chapter>_ex<N>``), written ones from its graded answer cells (``solution`` and ``grade``);
    points and partial credit (:func:`booktools.release_format.partial_credit`) are the release's.
    """
    from booktools.myst import check_calls, check_label, check_modules

    modules = check_modules(release)
    items, cells = [], {}
    for cell in release.cells:
        meta = nbgrader_of(cell)
        gid = meta.get("grade_id")
        if gid:
            cells[gid] = cell
        if not meta.get("grade"):
            continue
        points = float(meta.get("points", 0) or 0)
        if cell.cell_type == "code" and not meta.get("solution"):
            partial = partial_credit(cell)
            calls = check_calls(cell.source)
            if len(calls) != 1:
                raise ValueError(f"release check cell {gid} must call exactly one check")
            name = calls[0]
            call = _find_call(cell.source, name)
            args = tuple(ast.unparse(a) for a in call.args)
            kwargs = tuple((k.arg, ast.unparse(k.value)) for k in call.keywords if k.arg)
            items.append(
                GradeItem(
                    check_label(name),
                    "coding",
                    points,
                    gid,
                    name,
                    modules.get(name, "icl_book.checks"),
                    args,
                    kwargs,
                    partial,
                )
            )
        elif meta.get("solution"):
            label = written_label(gid)
            items.append(GradeItem(label, "written", points, gid))
    return items, cells


def _find_call(source: str, name: str) -> ast.Call:
    for node in ast.walk(parse_python(source)):
        if isinstance(node, ast.Call):
            f = node.func
            if (f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)) == name:
                return node
    raise ValueError(f"no call of {name}")


def _preload_references() -> None:
    """Import every ``icl_book`` module now, before any submission runs (the file system the kernel
    could write to is read-only in the box, but without namespaces a submission could still edit the
    package on disk: the grader must already hold its own copy)."""
    import icl_book

    for mod in pkgutil.walk_packages(icl_book.__path__, "icl_book."):
        try:
            importlib.import_module(mod.name)
        except Exception:  # noqa: BLE001 - optional parts (e.g. a missing extra) are not references
            pass


# --------------------------------------------------------------------------------------------------
# Grading one submission
# --------------------------------------------------------------------------------------------------
class MalformedNotebook(ValueError):
    """A submission that is JSON but not a notebook the grader can read (its rows say why)."""


def _submission_cells(sub, items, release_cells):
    """The cells to run, in the submission's order, each as (kind, source, item):

    ``code`` (the student's cell, or the release's source for a locked release cell), ``check``
    (where a release check cell stands: the check runs there). Cells claiming a check's grade_id,
    and any cell calling a ``check_*``, run nothing of their own.
    """
    from booktools.myst import check_calls

    by_gid = {it.grade_id: it for it in items if it.kind == "coding"}
    plan, placed = [], set()
    for number, cell in enumerate(sub.get("cells", []), start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            bad = [type(x).__name__ for x in source if not isinstance(x, str)]
            if bad:
                raise MalformedNotebook(
                    f"code cell {number}: its source holds a {bad[0]}, not text"
                )
            source = "".join(source)
        elif not isinstance(source, str):
            raise MalformedNotebook(
                f"code cell {number}: its source is a {type(source).__name__}, not text"
            )
        meta = cell.get("metadata", {}) if isinstance(cell.get("metadata"), dict) else {}
        gid = (
            (meta.get("nbgrader") or {}).get("grade_id")
            if isinstance(meta.get("nbgrader"), dict)
            else None
        )
        if gid is not None and not isinstance(gid, str):
            raise MalformedNotebook(
                f"code cell {number}: its nbgrader grade_id is a {type(gid).__name__}, not text"
            )
        if gid in by_gid and gid not in placed:
            placed.add(gid)
            plan.append(("check", None, by_gid[gid]))
            continue
        rel = release_cells.get(gid)
        if rel is not None and not nbgrader_of(rel).get("solution") and rel.cell_type == "code":
            plan.append(("code", rel.source, None))  # a locked release cell: the release's source
            continue
        try:
            calls = check_calls(source)
        except Exception:  # noqa: BLE001
            calls = []
        if calls:  # a student's (decoy, moved or edited) check cell: its output would mean nothing
            continue
        plan.append(("code", source, None))
    for it in items:  # a check cell the submission deleted or relabelled: run it at the end
        if it.kind == "coding" and it.grade_id not in placed:
            plan.append(("check", None, it))
    return plan


def other_chapter(sub: dict, items, chapters) -> str | None:
    """The chapter a submission belongs to when it is not the release's, or ``None``: told by its
    graded cells' nbgrader ``grade_id`` (``hermite-ex1-solution``), when none of them is one of the
    release's and all name one other chapter. Only the report's message uses it; what is graded is
    always the release. ``chapters``: the course's chapters (``stem``, exercise prefix ``short``)."""
    own = {it.grade_id for it in items}
    gids = set()
    for cell in sub.get("cells", []):
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
        gid = nbg.get("grade_id") if isinstance(nbg, dict) else None
        if isinstance(gid, str):
            gids.add(gid)
    if not gids or gids & own:
        return None
    found = {ch.stem for ch in chapters for g in gids if g.startswith(f"{ch.short}-ex")}
    return found.pop() if len(found) == 1 else None


def release_chapter(items, chapters) -> str:
    """The chapter a release is (its exercises' label prefix), or ``"the release"``."""
    found = {ch.stem for ch in chapters for it in items if it.label.startswith(f"{ch.short}-ex")}
    return f"{found.pop()}'s" if len(found) == 1 else "the release's"


_CHECK_LOCK = threading.Lock()


def _run_check(session, item: GradeItem, timeout: float, wall: float) -> tuple[float, str]:
    """Run ``item``'s check: ``timeout`` seconds of the kernel's CPU time for the whole check,
    at most ``wall`` seconds of wall-clock time (what is left of the notebook's)."""
    module = importlib.import_module(item.module)
    check = getattr(module, item.check)
    # One check at a time when submissions are graded side by side (the notebooks themselves still
    # run in parallel): redirect_stdout swaps the process-wide sys.stdout, and some references set
    # process-wide state (torch's seed inside fork_rng, BLAS threads). The check's time starts once
    # it holds the lock: waiting for another submission's check is not this one's timeout.
    with _CHECK_LOCK:
        session.check_budget = budget = session.budget(timeout, wall)
        return _run_check_locked(session, item, check, budget)


def _run_check_locked(session, item: GradeItem, check, budget) -> tuple[float, str]:
    from icl_book.checks import CheckFailed

    try:
        args = [session.request({"op": "eval", "expr": e}, budget) for e in item.args]
        kwargs = {k: session.request({"op": "eval", "expr": e}, budget) for k, e in item.kwargs}
    except channel.RemoteError as exc:
        return 0, str(exc)
    except NotImplementedError:
        return 0, "not implemented yet"
    from icl_book.checks import _grading_inputs, _recording_parts

    out = io.StringIO()
    seed = getattr(session, "inputs_seed", None)
    seed = secrets.randbits(32) if seed is None else seed
    note = ""
    # Partial credit (the release's metadata): the check runs every case and records each outcome
    # here, in the grader's process; without it the check stops at its first failure, as always.
    recording = _recording_parts() if item.partial else contextlib.nullcontext(None)
    try:
        with contextlib.redirect_stdout(out), _grading_inputs(seed) as drew, recording as parts:
            try:
                check(*args, **kwargs)
            finally:
                # recorded in the report: the same seed draws the same inputs on a regrade
                note = f" (inputs drawn with seed {seed})" if drew else ""
    except CheckFailed as exc:
        return _partial_score(item, parts, exc), _partial_message(parts, exc) + note
    except (channel.KernelTimeout, channel.KernelDied):
        raise
    except Exception as exc:  # noqa: BLE001 - a reference check crashing on odd data is a zero
        return 0, f"{type(exc).__name__}: {exc}"
    return item.points, (out.getvalue().strip() or f"{item.label}: correct") + note


def _failed_parts(parts, exc):
    """The one :class:`icl_book.checks.Parts` whose failure ``exc`` is, or ``None`` (a failure
    outside its cases, a check without parts, or no partial credit): then the check scores zero."""
    if not parts or len(parts) != 1:
        return None
    record = parts[0]
    return record if record.failure is exc and record.outcomes else None


def _partial_score(item: GradeItem, parts, exc) -> float:
    record = _failed_parts(parts, exc)
    if record is None:
        return 0
    return item.points * record.n_passed / len(record.outcomes)


def _partial_message(parts, exc) -> str:
    record = _failed_parts(parts, exc)
    if record is None:
        return str(exc)
    return f"{record.n_passed} of {len(record.outcomes)} parts correct; first wrong: {exc}"


def grade_submission(
    data: bytes,
    student: str,
    release,
    *,
    timeout: float = 600,
    notebook_timeout: float = 3600,
    limits: sandbox.Limits | None = None,
    pythonpath=(),
    hide_dirs=(),
    no_sandbox: bool = False,
    inputs_seed: int | None = None,
    chapters=(),
) -> list[ExerciseResult]:
    """Grade one submission (its bytes) against ``release`` (an nbformat notebook the grader trusts).

    ``inputs_seed``: the seed checks draw their grading-time inputs from (random if ``None``; the
    report's message records it). Raises :class:`InfrastructureError` when its kernel cannot start (before any of the student's
    code runs, so never the student's doing) and :class:`sandbox.SandboxUnavailable` when the
    box cannot be built and ``no_sandbox`` is not set."""
    items, release_cells = release_plan(release)
    results = {
        it.label: ExerciseResult(student, it.label, "manual", it.points, "manual")
        for it in items
        if it.kind == "written"
    }
    coding = [it for it in items if it.kind == "coding"]

    def finish():
        order = [it.label for it in items]
        return sorted(results.values(), key=lambda r: order.index(r.exercise))

    try:
        sub = json.loads(data.decode("utf-8"))
        if not isinstance(sub, dict) or not isinstance(sub.get("cells"), list):
            raise ValueError("not a notebook")
    except (ValueError, UnicodeDecodeError) as exc:
        for it in coding:
            results[it.label] = ExerciseResult(
                student, it.label, 0, it.points, f"unreadable notebook: {exc}"[:300]
            )
        return finish()
    # (the course's chapters come from the caller: the grader imports nothing of the builder)
    other = other_chapter(sub, items, chapters)
    if other is not None:  # it would score zero anyway, with a NameError: say why instead
        message = (
            f"this is chapter {other}'s notebook, not {release_chapter(items, chapters)}: "
            "not graded"
        )
        for it in coding:
            results[it.label] = ExerciseResult(student, it.label, 0, it.points, message)
        return finish()
    try:
        plan = _submission_cells(sub, items, release_cells)
    except MalformedNotebook as exc:
        for it in coding:
            message = f"malformed notebook, not graded: {exc}"[:300]
            results[it.label] = ExerciseResult(student, it.label, 0, it.points, message)
        return finish()
    private = Path(tempfile.mkdtemp(prefix="icl-grade-"))
    box = session = None
    try:
        try:
            box = sandbox.start_kernel(
                private,
                limits or sandbox.Limits(),
                pythonpath=pythonpath,
                hide_dirs=hide_dirs,
                no_sandbox=no_sandbox,
            )
        except sandbox.SandboxUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - no student code has run yet: the grader's fault
            raise InfrastructureError(
                f"the kernel for {student} could not start: {type(exc).__name__}: {exc}"
            ) from exc
        (private / "work" / "submission.ipynb").write_bytes(data)  # its own copy, nothing else
        session = channel.KernelSession(box)
        session.inputs_seed = secrets.randbits(32) if inputs_seed is None else int(inputs_seed)
        nb_end = time.monotonic() + notebook_timeout
        stopped = None
        for kind, source, item in plan:
            left = nb_end - time.monotonic()
            if stopped is None and left <= 0:
                stopped = "notebook timeout"
            if kind == "code":
                if stopped is not None:
                    continue
                try:
                    session.run(source, session.budget(timeout, left))
                except channel.KernelTimeout:
                    continue  # interrupted: go on with the next cell
                except channel.KernelDied as exc:
                    stopped = str(exc) or "kernel died"
                continue
            if stopped is not None:
                results[item.label] = ExerciseResult(student, item.label, 0, item.points, stopped)
                continue
            try:
                score, message = _run_check(session, item, timeout, left)
            except channel.KernelTimeout:
                score, message = 0, "timeout"
            except channel.KernelDied as exc:
                score, message = 0, str(exc) or "kernel died"
                stopped = message
            results[item.label] = ExerciseResult(
                student, item.label, score, item.points, " ".join(str(message).split())[:500]
            )
    except (InfrastructureError, sandbox.SandboxUnavailable):
        raise
    except Exception as exc:  # noqa: BLE001 - a grader error on this submission: its rows say so
        for it in coding:
            if it.label not in results:
                results[it.label] = ExerciseResult(
                    student,
                    it.label,
                    0,
                    it.points,
                    f"could not execute: {type(exc).__name__}: {exc}",
                )
    finally:
        if session is not None:
            session.close()
        if box is not None:
            box.kill()
        shutil.rmtree(private, ignore_errors=True)
    for it in coding:
        results.setdefault(it.label, ExerciseResult(student, it.label, 0, it.points, "not run"))
    return finish()
