"""The chapter pipeline: .md/.ipynb pairs, stable execution, the Colab cell, and checks that can fail."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import jupytext
import nbformat
import pytest
import yaml

from booktools import chapters, notebooks

from .conftest import ROOT, VENV_BIN

PROLOGUE = ROOT / "chapters" / "00_prologue.md"


def repository_url() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    return config["repository"]["url"]


def test_every_chapter_pair_is_in_step():
    assert chapters.chapter_sources(ROOT), "no chapters found"
    assert notebooks.pair_problems() == []


def _copy_chapter_tree(tmp_path):
    # a book of one chapter: the registry (booktools.chapters) reads the chapters from _toc.yml
    (tmp_path / "_config.yml").write_text("title: demo\n")
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: chapters/intro\nchapters:\n  - file: chapters/00_prologue\n"
    )
    (tmp_path / "chapters").mkdir()
    for suffix in (".md", ".ipynb"):
        shutil.copy(PROLOGUE.with_suffix(suffix), tmp_path / "chapters" / f"00_prologue{suffix}")
    return tmp_path / "chapters" / "00_prologue.md"


def test_pair_check_detects_a_stale_notebook(tmp_path):
    md = _copy_chapter_tree(tmp_path)
    assert notebooks.pair_problems(tmp_path) == []
    md.write_text(md.read_text().replace("## Three learners", "## Three in-context learners"))
    problems = notebooks.pair_problems(tmp_path)
    assert len(problems) == 1 and "stale" in problems[0] and "make execute" in problems[0]


def test_pair_check_detects_a_missing_or_unexecuted_notebook(tmp_path):
    md = _copy_chapter_tree(tmp_path)
    nb = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    nb.cells[2].execution_count = None
    nbformat.write(nb, md.with_suffix(".ipynb"))
    assert "unexecuted" in notebooks.pair_problems(tmp_path)[0]
    md.with_suffix(".ipynb").unlink()
    assert "missing" in notebooks.pair_problems(tmp_path)[0]


@pytest.mark.parametrize(
    "md",
    [pytest.param(md, id=md.stem) for md in chapters.chapter_sources(ROOT)],
)
def test_install_cell_is_hidden_and_installs_only_when_the_package_is_missing(md):
    """Where the cell installs from (the wheel of this version on the configured site) and what it does
    in a kernel are checked by tests/test_colab_path.py."""
    first_code = next(c for c in jupytext.read(md).cells if c.cell_type == "code")
    assert "remove-cell" in first_code.metadata.get("tags", [])
    assert 'try:\n    importlib.import_module("icl_book")\nexcept ImportError:' in first_code.source


@pytest.mark.parametrize("md", chapters.chapter_sources(ROOT), ids=lambda p: p.stem)
def test_chapter_has_overview_summary_and_exercises(md):
    text = md.read_text()
    assert "**Overview.**" in text
    assert "## Summary" in text
    assert "## Exercises" in text
    labels = chapters.exercise_labels(chapters.read_chapter(text))
    assert all(re.fullmatch(r"[a-z]+-ex\d+", label) for label in labels), labels
    assert len(labels) >= 3, f"{md.name} has {len(labels)} exercises"


@pytest.mark.slow  # executes a chapter
def test_execution_is_reproducible_byte_for_byte(tmp_path):
    """Re-executing an unchanged chapter rewrites an identical file (no timings, ids or other noise).

    Byte equality holds across kinds of CPU for this chapter: it prints at fixed precision and its PNG
    figures change only if rounding moves a drawn point by 1/256 pixel. Checked one and two SIMD tiers
    below an AVX-512 machine; ``tests/test_portable_numerics.py`` re-runs it one tier lower.
    """
    md = _copy_chapter_tree(tmp_path)
    committed = md.with_suffix(".ipynb").read_text()
    notebooks.execute_chapter(md)
    assert md.with_suffix(".ipynb").read_text() == committed


@pytest.mark.slow  # executes a chapter
def test_nbval_fails_when_an_output_changes(tmp_path):
    md = _copy_chapter_tree(tmp_path)
    nb_path = md.with_suffix(".ipynb")
    nb = json.loads(nb_path.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and c.get("outputs"))
    stream = next(o for o in cell["outputs"] if o["output_type"] == "stream")
    stream["text"] = ["a different output\n"]
    nb_path.write_text(json.dumps(nb))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--nbval",
            "--nbval-sanitize-with",
            str(ROOT / "nbval_sanitize.cfg"),
            str(nb_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode != 0, result.stdout[-2000:]
    assert "a different output" in result.stdout


FAKE_PYTHON = """#!{python}
# An interpreter that reports version {version}: it answers --version and runs -c code with
# sys.version_info set to that version, as the Makefile's check sees it; anything else fails.
import collections, sys
Info = collections.namedtuple("version_info", "major minor micro releaselevel serial")
version = Info(*{version}, "final", 0)
if sys.argv[1:] == ["--version"]:
    print("Python %d.%d.%d" % version[:3])
elif sys.argv[1:2] == ["-c"]:
    code, sys.argv = sys.argv[2], ["-c", *sys.argv[3:]]
    sys.version_info = version
    exec(compile(code, "<string>", "exec"), {{"__name__": "__main__"}})
else:
    sys.exit("fake python: not run past the version check: " + " ".join(sys.argv[1:]))
"""


def _make_install(tmp_path, version):
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable, version=version))
    fake.chmod(0o755)
    return subprocess.run(
        [
            "make",
            "-B",
            "--no-print-directory",
            f"PYTHON={fake}",
            f"VENV={tmp_path / 'venv'}",
            f"{tmp_path / 'venv'}/.installed",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_make_refuses_an_old_python(tmp_path):
    """The Makefile's version check runs (in an interpreter that reports 3.8.10) and refuses it."""
    result = _make_install(tmp_path, (3, 8, 10))
    assert result.returncode != 0
    assert "Python >= 3.10 is needed, found Python 3.8.10" in result.stdout
    assert "not run past the version check" not in result.stderr


@pytest.mark.parametrize("version", [(3, 10, 0), (3, 13, 1)])
def test_make_accepts_a_new_enough_python(tmp_path, version):
    """The same check lets 3.10 and later through (to the venv step, where the fake stops)."""
    result = _make_install(tmp_path, version)
    assert "is needed" not in result.stdout
    assert "fake python: not run past the version check: -m venv" in result.stderr


def test_venv_bin_is_the_running_interpreter():
    # The suite must run inside the project's virtual environment (make test does this).
    assert (VENV_BIN / "jupyter-book").exists()


def test_figure_index_page_is_up_to_date():
    page = ROOT / "chapters" / "figures.md"
    assert page.exists(), "run `python -m booktools.notebooks figure-index` (make execute does it)"
    assert page.read_text() == notebooks.figure_index_markdown(), (
        "chapters/figures.md is stale: run `make execute` (or python -m booktools.notebooks figure-index)"
    )
