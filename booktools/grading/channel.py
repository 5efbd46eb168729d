"""The grader's channel to a submission's kernel: cells run with a timeout, checks' calls as requests.

:class:`KernelSession` runs code in the boxed kernel (:mod:`booktools.grading.sandbox`) and waits for
it: a cell over its :class:`Budget` is interrupted (:class:`KernelTimeout`). A timeout counts the
kernel's CPU time (every process of the box), so a loaded machine, which slows an honest cell in
wall-clock time but does not make it compute more, cannot time it out; code that sleeps or blocks
spends no CPU time and is stopped at ``WALL_FACTOR`` times the timeout of wall-clock time. A kernel that is not idle
``INTERRUPT_GRACE_S`` after the interrupt, or that does not take a request within ``RPC_GRACE_S``, is
killed (:class:`KernelDied`: the submission's remaining exercises score zero). A request (evaluate a
check's argument, call the student's function on the grader's inputs) is a JSON file named with a
per-call random token in a folder the grader made and reads only through a descriptor of it (no
symbolic link followed, regular files only, at most ``MAX_REPLY_BYTES``); the kernel runs
:func:`booktools.grading.codec.kernel_code` on it, and the reply is decoded by the codec's grader
half, a returned function becoming another proxy (:meth:`KernelSession.proxy`). Nothing else
crosses: no code from the kernel, no pickles, no printed text read as a result.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import secrets
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from booktools.grading import codec

__all__ = [
    "HUNG",
    "INTERRUPT_GRACE_S",
    "MAX_REPLY_BYTES",
    "NO_RPC",
    "RPC_GRACE_S",
    "WALL_FACTOR",
    "Budget",
    "KernelDied",
    "KernelSession",
    "KernelTimeout",
    "RemoteError",
]

# A reply larger than this is a failed answer, rejected by its size before it is read or parsed (a
# forged 60 MB reply once took the grader from 328 MB to 1.87 GB); the largest honest answer of the
# book's checks is far below a megabyte.
MAX_REPLY_BYTES = 8 * 1024 * 1024


class KernelTimeout(BaseException):
    """The kernel did not answer in time (not an ``Exception``: a check's ``call_answer`` must not
    turn it into a hint)."""


class KernelDied(BaseException):
    """The kernel is gone (its message, if any, is the report's)."""


HUNG = "timeout; the kernel ignored the interrupt and was stopped"
INTERRUPT_GRACE_S = 15  # how long an interrupted cell may take to stop before the kernel is killed
# How long the kernel may take to pick up a request (run the wire format's code, read the request
# file, mark it taken) before the grader stops waiting: milliseconds for a working kernel; a kernel
# whose builtins, ``exec`` or files the submission broke never gets there, and must not hold the
# batch for the check's whole timeout.
RPC_GRACE_S = 10
NO_RPC = (
    f"the kernel did not take the grader's request within {RPC_GRACE_S} s (the submission broke "
    "what the request runs on, e.g. builtins.open) and was stopped"
)


# A timeout counts the kernel's CPU time; wall-clock time is capped at this many times the timeout,
# for code that spends none (a sleep, a blocking read). Generous, because on a loaded machine an
# honest cell gets a fraction of a core: the attack batch's import cell, 0.5 s of CPU, took over
# 20 s of wall-clock time with the kernel slowed from outside, and scored an honest answer zero when
# the timeout was wall-clock time.
WALL_FACTOR = 3
CPU_POLL_S = 0.25  # how often a running cell's CPU time is read (a /proc scan: milliseconds)


class RemoteError(Exception):
    """The student's function raised ``name: message`` in the kernel."""


@dataclass(frozen=True)
class Budget:
    """What a cell, or a check with every call it makes, may still spend: the kernel's CPU time
    until ``clock()`` reaches ``cpu_end``, and wall-clock time until ``time.monotonic()`` reaches
    ``wall_end``."""

    clock: Callable[[], float | None]
    cpu_end: float
    wall_end: float

    @classmethod
    def start(cls, clock, timeout: float, wall: float | None = None) -> Budget:
        """``timeout`` seconds of ``clock`` (the kernel's CPU time) from now, and ``WALL_FACTOR``
        times that of wall-clock time, or ``wall`` seconds if fewer (what is left of the notebook's
        time)."""
        wall_s = WALL_FACTOR * timeout if wall is None else min(WALL_FACTOR * timeout, wall)
        now = clock()
        cpu_end = math.inf if now is None else now + timeout
        return cls(clock, cpu_end, time.monotonic() + wall_s)

    def wall_left(self) -> float:
        return self.wall_end - time.monotonic()

    def cpu_spent(self) -> bool:
        used = self.clock()
        return used is not None and used >= self.cpu_end

    def spent(self) -> bool:
        return self.wall_left() <= 0 or self.cpu_spent()


class KernelSession:
    """The grader's side of one submission's kernel ``box`` (a started
    :class:`booktools.grading.sandbox` kernel): ``check_budget`` is what the check now running may
    still spend (:meth:`budget`), which bounds every call of a proxy."""

    def __init__(self, box):
        self.box = box
        # The kernel's CPU time where /proc tells it; elsewhere (no_sandbox on another system)
        # wall-clock time, so the timeout still holds.
        self.clock = box.cpu_seconds if box.cpu_seconds() is not None else time.monotonic
        self.check_budget: Budget | None = None
        self.channel = box.private / "work" / f".grader-{secrets.token_hex(8)}"
        self.channel.mkdir()
        # The kernel can rename the channel and put a symlink in its place: the grader reads and
        # writes through a descriptor of the directory it made, never following a link.
        self.dir_fd = os.open(self.channel, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.dir_fd)

    def budget(self, timeout: float, wall: float | None = None) -> Budget:
        """``timeout`` seconds of the kernel's CPU time from now (:meth:`Budget.start`)."""
        return Budget.start(self.clock, timeout, wall)

    def run(self, code: str, budget: Budget, taken=None) -> dict:
        """Execute ``code`` within ``budget``; return {"status", "error": (ename, evalue) | None}.
        ``taken``: for a request, whether the kernel has taken it; a kernel still busy without
        having taken it ``RPC_GRACE_S`` after the request is killed (:data:`NO_RPC`)."""
        kc = self.box.client
        msg_id = kc.execute(code, store_history=False, allow_stdin=False, stop_on_error=False)
        start = time.monotonic()
        cpu_read = start  # when to read the kernel's CPU time next
        error, status = None, None
        while True:
            now = time.monotonic()
            if taken is not None and now - start > RPC_GRACE_S:
                if not taken():
                    self.box.kill()
                    raise KernelDied(NO_RPC)
                taken = None
            left = budget.wall_left()
            over = left <= 0
            if not over and now >= cpu_read:
                over, cpu_read = budget.cpu_spent(), now + CPU_POLL_S
            if over:
                if not self._interrupt(msg_id):
                    # SIGINT ignored or swallowed: every later cell would wait its whole timeout
                    self.box.kill()
                    raise KernelDied(HUNG)
                raise KernelTimeout()
            try:
                msg = kc.get_iopub_msg(timeout=max(0.01, min(left, cpu_read - now)))
            except queue.Empty:
                if not self.box.alive():
                    raise KernelDied() from None
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "error":
                error = (msg["content"].get("ename", "Error"), msg["content"].get("evalue", ""))
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                status = "ok" if error is None else "error"
                break
        return {"status": status, "error": error}

    def _interrupt(self, msg_id: str) -> bool:
        """Interrupt the cell ``msg_id``; whether it ended (or the kernel died) within the grace."""
        try:
            self.box.interrupt()
        except Exception:  # noqa: BLE001
            return False
        kc = self.box.client
        end = time.monotonic() + INTERRUPT_GRACE_S
        while time.monotonic() < end:  # drain until the kernel is idle again
            try:
                msg = kc.get_iopub_msg(timeout=1.0)
            except queue.Empty:
                if not self.box.alive():
                    return True
                continue
            # the interrupt request has a busy/idle status of its own: wait for the cell's
            if (
                msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"
                and msg.get("parent_header", {}).get("msg_id") == msg_id
            ):
                return True
        return False

    def request(self, req: dict, budget: Budget):
        token = secrets.token_hex(16)
        req_name, reply_name = f"req-{token}.json", f"reply-{token}.json"
        taken_name = f"taken-{token}"
        body = json.dumps(
            {
                **req,
                "token": token,
                "reply": str(self.channel / reply_name),
                "taken": str(self.channel / taken_name),
            }
        )
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(req_name, flags, 0o644, dir_fd=self.dir_fd)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)

        def taken() -> bool:
            try:
                os.stat(taken_name, dir_fd=self.dir_fd, follow_symlinks=False)
                return True
            except OSError:
                return False

        try:
            self.run(codec.kernel_code(str(self.channel / req_name)), budget, taken)
        finally:
            for name in (req_name, taken_name):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=self.dir_fd)
        try:
            # non-blocking: a FIFO in the reply's place must not stall the grader
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
            fd = os.open(reply_name, flags, dir_fd=self.dir_fd)
            with os.fdopen(fd, "rb") as fh:
                info = os.fstat(fh.fileno())
                if not stat.S_ISREG(info.st_mode):
                    raise RemoteError("the answer is not a file")
                if info.st_size > MAX_REPLY_BYTES:
                    raise RemoteError("the answer is too large")
                data = json.loads(fh.read(MAX_REPLY_BYTES + 1).decode("utf-8"))
        except FileNotFoundError:
            if not self.box.alive():
                raise KernelDied() from None
            raise RemoteError("the submission did not answer") from None
        except (OSError, ValueError, RecursionError) as exc:
            raise RemoteError(f"unreadable answer: {str(exc)[:200]}") from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(reply_name, dir_fd=self.dir_fd)
        if not isinstance(data, dict) or data.get("token") != token:
            raise RemoteError("the answer did not come from this request")
        if "error" in data:
            name, message, not_impl = (list(data["error"]) + ["", "", False])[:3]
            if not_impl:
                raise NotImplementedError(str(message))
            raise RemoteError(f"{str(name)[:80]}: {str(message)[:300]}")
        try:
            return codec.decode(data.get("value"), remote=self.proxy)
        except (ValueError, TypeError, RecursionError) as exc:
            # the submission's own reply: this check fails, the next exercises are still graded
            raise RemoteError(f"unreadable answer: {str(exc)[:200]}") from None

    def proxy(self, ref: int):
        session = self

        class StudentFunction:
            """The student's function, called in their kernel on the grader's inputs."""

            __name__ = "student_function"

            def __call__(self, *args, **kwargs):
                budget = session.check_budget
                if budget is None or budget.spent():
                    raise KernelTimeout()
                req = {
                    "op": "call",
                    "ref": ref,
                    "args": [codec.encode(a) for a in args],
                    "kwargs": {str(k): codec.encode(v) for k, v in kwargs.items()},
                }
                return session.request(req, budget)

        return StudentFunction()
