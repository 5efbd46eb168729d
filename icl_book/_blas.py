"""One BLAS thread around code made of many tiny matrix products (``threadpoolctl``).

OpenBLAS hands every product or factorisation above a small size to all its threads, and the threads
spin-wait between calls. Code that runs thousands of tiny problems one after another (a batch of
prompts' ``N × N`` kernel systems, a stack of ``N × d`` least-squares fits, a simulator's small solves)
then burns several times the CPU of one thread and runs slower: chapter 5 under nbval took 392 s with
two BLAS threads and 63 s with one (190 against 23 CPU-seconds). :data:`one_blas_thread` runs such code
on one thread, as a context manager or a decorator; large dense products outside it keep their threads.

The limit is process-wide (BLAS has one thread count per process), so calls that overlap in several
threads share it, reference-counted: the first to enter sets one thread, the last to leave restores the
previous counts. Nested uses cost a counter increment. One thread also makes results independent of the
caller's thread setting (another thread count splits sums differently and changes the last bits).
"""

from __future__ import annotations

import contextlib
import sys
import threading

__all__ = ["one_blas_thread", "OneBlasThread"]


class OneBlasThread(contextlib.ContextDecorator):
    """Context manager and decorator: every loaded BLAS runs on one thread inside."""

    _lock = threading.Lock()
    _active = 0
    _limits = None
    _controller = None
    _modules_seen = -1

    @classmethod
    def _current_controller(cls):
        # Inspecting the loaded libraries costs ~1 ms; a BLAS is loaded by an import (numpy,
        # scipy.linalg, torch), so the inspection is redone only when modules were imported since.
        from threadpoolctl import ThreadpoolController

        if cls._controller is None or len(sys.modules) != cls._modules_seen:
            cls._controller = ThreadpoolController()
            cls._modules_seen = len(sys.modules)
        return cls._controller

    def __enter__(self):
        cls = type(self)
        with cls._lock:
            if cls._active == 0:
                cls._limits = cls._current_controller().limit(limits=1, user_api="blas")
            cls._active += 1
        return self

    def __exit__(self, *exc):
        cls = type(self)
        with cls._lock:
            cls._active -= 1
            if cls._active == 0:
                cls._limits.restore_original_limits()
                cls._limits = None
        return False


#: The shared instance — ``with one_blas_thread:`` or ``@one_blas_thread``.
one_blas_thread = OneBlasThread()
