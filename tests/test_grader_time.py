"""The grader's timeouts count the kernel's CPU time (booktools/grading/channel.py): load cannot zero
an honest answer, and a hostile cell is still stopped.

Before, a cell's timeout was wall-clock time: on a loaded machine the attack batch's honest import cell
(0.5 s of CPU) passed its 20 s, was interrupted, and exercise 1 then scored 0 with ``NameError: name
'np' is not defined``. Here the load is made on purpose and without the kernel's help: its processes
are stopped (SIGSTOP) from outside for longer than the timeout, then continued.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from pathlib import Path

import nbformat
import pytest

from booktools.grading import channel, grader, sandbox

from .test_grader_attacks import _base, _honest

needs_box = pytest.mark.skipif(
    not sandbox.box_available(), reason="the box needs bubblewrap and user namespaces"
)


def _box_pids(box) -> list[int]:
    """The launcher of ``box`` and every process under it, read here from /proc (not with the
    sandbox's own walk, which the CPU clock uses)."""
    parent = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        parent[int(name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found = [box.manager.provisioner.process.pid]
    for pid in found:
        found += [p for p, pp in parent.items() if pp == pid]
    return found


def _stop_for(box, seconds: float, after: float = 0.2) -> threading.Thread:
    """Stop every process of ``box`` ``after`` seconds from now, for ``seconds``: a machine too
    busy to run it, which the kernel's own code has no part in."""
    pids = _box_pids(box)
    assert len(pids) > 1, "the box's processes were not found"

    def stop():
        time.sleep(after)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)

    thread = threading.Thread(target=stop, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def session(tmp_path):
    box = sandbox.start_kernel(tmp_path / "box", sandbox.Limits())
    s = channel.KernelSession(box)
    try:
        yield s
    finally:
        s.close()
        box.kill()


def _value(session, name):
    budget = session.budget(30)
    session.check_budget = budget
    return session.request({"op": "eval", "expr": name}, budget)


@pytest.mark.slow  # one kernel: ~10 s
@needs_box
def test_a_kernel_slowed_from_outside_is_not_timed_out(session):
    """Stopped for 4 s in a cell whose timeout is 2 s (of CPU; wall-clock time capped at 60 s): the
    cell finishes. Before: KernelTimeout at 2 s of wall-clock time."""
    cell = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5:\n    pass"
    start = time.monotonic()
    stopper = _stop_for(session.box, 4)
    got = session.run(cell + "\nanswer = 42", session.budget(2, 60))
    assert time.monotonic() - start >= 4  # the kernel really was stopped in the cell
    stopper.join()
    assert got["status"] == "ok" and _value(session, "answer") == 42


@pytest.mark.slow  # one kernel: ~10 s
@needs_box
def test_a_cell_burning_cpu_is_stopped_at_its_timeout_of_cpu_time(session):
    """``while True: pass`` is interrupted once it has used its 2 s of CPU time, however long the
    machine takes to give it those (wall-clock time capped at 60 s here), and the kernel goes on."""
    before = session.box.cpu_seconds()
    start = time.monotonic()
    with pytest.raises(channel.KernelTimeout):
        session.run("while True:\n    pass", session.budget(2, 60))
    used = session.box.cpu_seconds() - before
    assert 2 <= used < 2 + 2 * channel.CPU_POLL_S + 1, used
    assert time.monotonic() - start < 60
    session.run("after = 1", session.budget(5))
    assert _value(session, "after") == 1


@pytest.mark.slow  # one kernel: ~10 s
@needs_box
def test_a_sleeping_cell_is_stopped_by_the_wall_clock_cap(session):
    """A cell that spends no CPU time (sleeps, blocks) is stopped at WALL_FACTOR times its timeout
    of wall-clock time."""
    timeout = 1.5
    start = time.monotonic()
    with pytest.raises(channel.KernelTimeout):
        session.run("import time\ntime.sleep(1000)", session.budget(timeout))
    elapsed = time.monotonic() - start
    assert channel.WALL_FACTOR * timeout <= elapsed < channel.WALL_FACTOR * timeout + 10, elapsed
    with pytest.raises(channel.KernelTimeout):  # a smaller wall-clock limit (the notebook's) wins
        start = time.monotonic()
        session.run("import time\ntime.sleep(1000)", session.budget(30, wall=1))
    assert time.monotonic() - start < 10


def test_a_budget_without_a_cpu_clock_counts_wall_clock_time(tmp_path):
    """Where the kernel's CPU time cannot be read the timeout is wall-clock time, as before."""
    budget = channel.Budget.start(lambda: None, 0.2)
    assert budget.cpu_end == math.inf and not budget.spent()

    class Box:
        private = tmp_path

        def cpu_seconds(self):
            return None

    (tmp_path / "work").mkdir()
    session = channel.KernelSession(Box())
    session.close()
    assert session.clock is time.monotonic
    budget = session.budget(0.1)
    time.sleep(0.15)
    assert budget.spent()


@pytest.mark.slow  # one submission, its kernel stopped for 12 s: ~20 s
@needs_box
def test_an_honest_submission_on_a_stalled_machine_keeps_its_score(monkeypatch):
    """The attack batch's honest part (exercise 1 right, 2 wrong) with its kernel stopped for twice
    the timeout during the import cell: exercise 1 still scores 1. Before: 0, "NameError: name 'np'
    is not defined" (the import cell was interrupted)."""
    timeout = 6
    release, base = _base()
    nb = _honest(nbformat.from_dict(base))
    run = channel.KernelSession.run
    stalls = []

    def stalled_import(self, code, budget, taken=None):
        if code.rstrip().endswith("SEED = 0"):  # the import cell
            stalls.append(_stop_for(self.box, 2 * timeout, after=0.05))
        return run(self, code, budget, taken)

    monkeypatch.setattr(channel.KernelSession, "run", stalled_import)
    rows = grader.grade_submission(
        nbformat.writes(nb).encode(), "ada", release, timeout=timeout, inputs_seed=1
    )
    assert len(stalls) == 1
    stalls[0].join()
    scores = {r.exercise: (r.score, r.message) for r in rows}
    assert scores["prologue-ex1"][0] == 1, scores
    assert scores["prologue-ex2"][0] == 0 and "not quite" in scores["prologue-ex2"][1], scores
