"""Shared fixtures and paths for the test suite, and how `make test` spreads and caches it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Torch with one thread: tiny models train several times faster than with two on a busy
    2-core machine (threads spin), and results do not depend on the thread count."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def chromium():
    """The one headless Chromium of this test process (tests/browser.py), shared by every browser test:
    playwright's sync API allows one instance per thread, and a launch costs a second or two."""
    from .browser import launch

    with launch() as browser:
        yield browser


# --- make test: two processes (pytest-xdist, --dist loadgroup) ---------------------------------------
# Every test runs in the process of its module's group, as with --dist loadfile, so module fixtures
# (a server, a browser, an nbgrader course, a built Sphinx environment) are set up once and tests that
# share a file, directory or port never run side by side. A new test file needs nothing here. These
# tests get groups of their own, so that their heavy work spreads over both processes; each such
# group sets up the module's fixtures again in the process that runs it.
def _params(item) -> dict:
    return getattr(item, "callspec", None) and item.callspec.params or {}


def _page_group(item):
    page = _params(item).get("page")
    return None if page is None else f"page:{page}"


def _stem_group(item):
    return f"chapter:{_params(item)['stem']}"


SPLIT = [
    # one browser and server per process (session fixture `site`); a page's tests share its measurement
    ("tests/test_browser.py::*[[]*", _page_group),
    # a chapter executed by the grader (2-70 s each); the nbgrader course is built once per process
    ("tests/test_assignments.py::test_the_instructors_solutions_score_full_marks*", _stem_group),
]

# --- make test: heaviest groups first ----------------------------------------------------------------
# xdist (make test passes --no-loadscope-reorder) hands the groups out in the order of their first test.
# Longest first: the long groups start early and the many short ones fill both processes at the end,
# instead of one process idling while the other runs a 100 s chapter last. A chapter's groups cost its
# recorded run time (chapters/timings.json); modules cost what a fresh clone's `--durations=0` measured
# (2026-12-05, seconds per process). These numbers only order the work: a wrong one costs time, never a
# check.
MODULE_SECONDS = {
    "test_grader_attacks": 150,
    "test_assignments": 150,
    "test_grader_checks": 110,
    "test_browser": 80,
    "test_testcache": 65,
    "test_packaging": 65,
    "test_editions": 100,
    "test_shipped_studies": 55,
    "test_grader_time": 45,
    "test_grader_gradebook": 55,
    "test_colab_path": 40,
    "test_portable_numerics": 25,
    "test_figures": 25,
}


def _group_seconds(group: str, timings: dict) -> float:
    kind, _, name = group.partition(":")
    if kind == "chapter":
        return timings.get(name, {}).get("total_s", 60.0)
    return MODULE_SECONDS.get(group, 0.0)


# --- make test: what a test reads beyond the base, for the cache (booktools/testcache.py) ------------
# The base of every key: every file of the work tree except the chapters' content, the installed
# packages, the platform, the environment and the options. A test listed nowhere here is keyed on the
# base, every chapter's content and the whole built site, so it re-runs after any edit: a new test
# needs no entry. Entries may only narrow what is known to be read:
#   "chapter:<NN_stem>"  chapters/<stem>.* and notebooks/<stem>.* (and its timings.json entry)
#   "site-page:<page>"   the built page, its sources and downloads, its images, every unowned site file
#   "content", "site"    every chapter's content, the whole of _build/html
#   "nocache"            never cached (its outcome depends on something outside the work tree)
_CHAPTER_PAGE = re.compile(r"chapters/(\d\d_[^/]+)\.html")


def _page_inputs(item):
    page = _params(item).get("page")
    if page is None:
        return None  # not a page's test: keyed on everything
    m = _CHAPTER_PAGE.fullmatch(page)
    # the chapter's .md and edition are fetched and compared with the repository's files
    return [f"site-page:{page}", *([f"chapter:{m[1]}"] if m else [])]


def _param_chapter(name):
    def inputs(item):
        value = _params(item)[name]
        return [f"chapter:{Path(str(value)).stem}"]

    return inputs


READS = [
    # Per page: the page, what it loads and its downloads; searchindex.js, which every page loads but
    # only a search reads, belongs to search.html (the search tests and the changed page re-run).
    ("tests/test_browser.py::*[[]*", _page_inputs),
    # The attack batch grades the prologue's release (booktools.assignments.chapter_release).
    ("tests/test_grader_attacks.py::*", ["chapter:00_prologue"]),
    # The grader on a made-up chapter (the module's demo_dir, demo_nb, student, graded fixtures).
    *[
        (f"tests/test_assignments.py::test_{name}*", [])
        for name in (
            "stub_",
            "check_cell_detection",
            "student_notebook_",
            "instructor_notebook_",
            "nbgrader_metadata_",
            "nbgrader_release_equals_student_notebook",
            "grade_",
            "notebook_timeout_",
        )
    ],
    # A chapter's release, grading and editions.
    (
        "tests/test_assignments.py::test_the_instructors_solutions_score_full_marks*",
        _param_chapter("stem"),
    ),
    ("tests/test_assignments.py::test_honest_submissions_score_the_same*", _param_chapter("stem")),
    (
        "tests/test_assignments.py::test_student_edition_is_nbgraders_release*",
        _param_chapter("stem"),
    ),
    ("tests/test_assignments.py::test_chapter_editions*", _param_chapter("path")),
    ("tests/test_student_run_all.py::test_the_one_thread_stage_runs*", _param_chapter("stem")),
    ("tests/test_student_run_all.py::test_no_chapter_cell_reads*", _param_chapter("stem")),
    (
        "tests/test_colab_path.py::test_wheel_in_fresh_venv_runs_an_edition*",
        _param_chapter("edition"),
    ),
    # The lowest versions run the prologue's and chapter 1's editions.
    (
        "tests/test_packaging.py::test_the_lowest_direct_versions_run_the_fast_editions",
        ["chapter:00_prologue", "chapter:01_hermite"],
    ),
    # Asks the package index for the newest setuptools: not a function of the work tree.
    ("tests/test_packaging.py::test_wheel_builds_without_warnings_with_the_newest*", ["nocache"]),
    # The cache's own tests build scratch repositories; shipped weights and studies read the package
    # and .studies/ (all in the base).
    ("tests/test_testcache.py::*", []),
    ("tests/test_shipped_studies.py::*", []),
]


def pytest_configure(config):
    # also without the plugins that define them (a run with -p no:xdist, or without the cache)
    config.addinivalue_line("markers", "xdist_group(name): tests run in one process (xdist)")
    config.addinivalue_line("markers", "testcache_inputs(*inputs): see booktools/testcache.py")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups and the cache reads the inputs
def pytest_collection_modifyitems(config, items):
    import json

    from booktools.testcache import MARK, pattern_inputs

    groups = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is None:
            # short: xdist appends the group to the node id it reports ("...::test_x@test_links")
            mark = pytest.mark.xdist_group(pattern_inputs(item, SPLIT) or item.path.stem)
            item.add_marker(mark)
        groups[item] = mark.args[0] if mark.args else mark.kwargs.get("name")
        if not item.get_closest_marker(MARK):
            inputs = pattern_inputs(item, READS)
            if inputs is not None:
                item.add_marker(getattr(pytest.mark, MARK)(*inputs))
    timings = json.loads((ROOT / "chapters" / "timings.json").read_text())
    items.sort(key=lambda item: -_group_seconds(groups[item], timings))  # stable: order kept within
