"""icl_book._blas.one_blas_thread: one BLAS thread inside, the caller's counts restored after, shared
(reference-counted) by overlapping calls in several threads; and the tiny-matrix hot paths run inside it.

OpenBLAS threads spin-wait between the tiny products of batched prompts and small simulations (chapter
5 under nbval: 392 s with 2 BLAS threads, 63 s with 1); the fix is only real if the decorated functions
see one thread while they run, which the recording kernel and link below observe from the inside.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from icl_book import estimators, simulate
from icl_book._blas import one_blas_thread
from icl_book.tasks import sample_quadratic_prompts


def _blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


@pytest.fixture
def two_threads():
    """Two BLAS threads outside (the default on a 2-core machine; set here so that 1 core also tests)."""
    with threadpool_limits(2, "blas"):
        assert _blas_threads() == {2}
        yield


def test_one_thread_inside_and_restored_after(two_threads):
    with one_blas_thread:
        assert _blas_threads() == {1}
        with one_blas_thread:  # nested: still one, and the inner exit does not restore
            assert _blas_threads() == {1}
        assert _blas_threads() == {1}
    assert _blas_threads() == {2}

    @one_blas_thread
    def inside():
        return _blas_threads()

    assert inside() == {1} and _blas_threads() == {2}


def test_overlapping_threads_share_the_limit(two_threads):
    """The first thread leaves while the second still runs: the second keeps its one thread."""
    first_in, first_out, second_done = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with one_blas_thread:
            first_in.set()
        first_out.set()

    def second():
        with one_blas_thread:
            first_in.wait(10)
            first_out.wait(10)
            seen["after the first left"] = _blas_threads()
        second_done.set()

    t2 = threading.Thread(target=second)
    t2.start()
    t1 = threading.Thread(target=first)
    t1.start()
    t1.join(10)
    t2.join(10)
    assert second_done.is_set()
    assert seen["after the first left"] == {1}
    assert _blas_threads() == {2}


def test_an_exception_inside_restores_the_threads(two_threads):
    with pytest.raises(ZeroDivisionError):
        with one_blas_thread:
            raise ZeroDivisionError
    assert _blas_threads() == {2}


def test_the_hot_paths_run_on_one_thread(two_threads):
    """A kernel and a link called by the package from inside its batched estimators and simulator."""
    seen = []

    def kernel(x, xp):
        seen.append(("kernel", _blas_threads()))
        return (x @ np.swapaxes(xp, -1, -2)) ** 2

    p = sample_quadratic_prompts(8, 12, 3, rng=np.random.default_rng(0), noise_var=0.1)
    estimators.kernel_ridge_predict(p.xs, p.ys, p.x_query, kernel, 0.1)
    estimators.one_step_kernel_gd_predict(p.xs, p.ys, p.x_query, kernel, 0.5)
    estimators.select_kernel_ridge(p.xs, p.ys, p.x_query, p.y_query, kernel, [0.1, 1.0])

    def link(z):
        seen.append(("link", _blas_threads()))
        return np.tanh(z)

    simulate.pretrain_reduced_lsa(8, 1.0, 2.0, np.inf, 0.1, link=link, rng=np.random.default_rng(1))
    assert {kind for kind, _ in seen} == {"kernel", "link"}
    assert all(threads == {1} for _, threads in seen), seen
    assert _blas_threads() == {2}
