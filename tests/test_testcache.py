"""booktools.testcache, make test's cache of passes: it never hides a failure.

Each test builds a scratch repository (git, a chapter notebook, tests) and runs pytest there with the
plugin, as make test does: a pass is stored and not re-run while its inputs stay the same; a failure is
never stored; an edited chapter, an edited test or package file and a changed environment re-run what
they feed; a broken chapter fails under nbval although it passed, cached, a moment before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import nbformat
import pytest

from .conftest import ROOT

TEST_MODULE = """
import os, pathlib, pytest

ROOT = pathlib.Path(__file__).parent.parent

def test_reads_chapter_one():
    assert "2" in (ROOT / "chapters" / "01_demo.ipynb").read_text()

@pytest.mark.testcache_inputs("chapter:01_demo")
def test_declared_to_read_chapter_one():
    assert "2" in (ROOT / "chapters" / "01_demo.ipynb").read_text()

def test_fails_when_told():
    assert not (ROOT / "FAIL").exists()
"""


def _git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _chapter(printed: str):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(1 + 1)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    cell.execution_count = 1
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    return nb


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "chapters").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_demo.py").write_text(TEST_MODULE)
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-ra"\n')
    (tmp_path / ".gitignore").write_text("__pycache__/\n")  # as the book's: not an input
    nbformat.write(_chapter("2\n"), tmp_path / "chapters" / "01_demo.ipynb")
    nbformat.write(_chapter("2\n"), tmp_path / "chapters" / "02_other.ipynb")
    _git(tmp_path, "init", "-q")
    return tmp_path


def run(repo, *args, env=None):
    """pytest with the plugin in ``repo``: (exit code, {outcome: [node ids]}, output)."""
    # only the plugins these runs use: the installed ones that load themselves (hypothesis: 1.5 s of
    # imports) would triple the start-up of each of this module's ~20 runs
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "booktools.testcache"]
    cmd += ["-p", "nbval.plugin", "-q", "-rA", *args]
    environ = {k: v for k, v in os.environ.items() if k not in {"CI", "ICL_TESTCACHE"}}
    environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    environ["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        cmd, cwd=repo, env={**environ, **(env or {})}, capture_output=True, text=True, timeout=300
    )
    outcomes: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in {"PASSED", "FAILED", "ERROR"}:
            outcomes.setdefault(word, []).append(rest.split(" - ")[0])
    return proc.returncode, outcomes, proc.stdout + proc.stderr


def test_a_pass_is_not_rerun_with_the_same_inputs_and_a_failure_always_is(repo):
    code, got, out = run(repo, "tests")
    assert code == 0 and len(got["PASSED"]) == 3, out
    code, got, out = run(repo, "tests")
    assert code == 0 and got == {}, out  # all three cached
    assert "testcache: 3 tests passed before with the same inputs" in out
    assert "tests/test_demo.py: 3 not re-run, cached against key" in out  # named, with its key
    (repo / "FAIL").write_text("")  # an untracked file is an input too: everything runs
    code, got, out = run(repo, "tests")
    assert code == 1 and got["FAILED"] == ["tests/test_demo.py::test_fails_when_told"], out
    code, got, out = run(repo, "tests")  # the failure was not stored; the two passes were
    assert code == 1 and got == {"FAILED": ["tests/test_demo.py::test_fails_when_told"]}, out


def test_a_chapter_edit_reruns_what_reads_it_and_a_code_edit_reruns_everything(repo):
    assert run(repo, "tests")[0] == 0
    nbformat.write(_chapter("2\n\n"), repo / "chapters" / "02_other.ipynb")
    code, got, out = run(repo, "tests")
    # undeclared tests are keyed on every chapter; the declared one only on chapter 1
    assert code == 0 and sorted(got["PASSED"]) == [
        "tests/test_demo.py::test_fails_when_told",
        "tests/test_demo.py::test_reads_chapter_one",
    ], out
    nbformat.write(_chapter("2 \n"), repo / "chapters" / "01_demo.ipynb")
    code, got, out = run(repo, "tests")
    assert code == 0 and len(got["PASSED"]) == 3, out
    (repo / "tests" / "helper.py").write_text("# any file of the tree is in every key\n")
    code, got, out = run(repo, "tests")
    assert code == 0 and len(got["PASSED"]) == 3, out
    code, got, out = run(repo, "tests", env={"OMP_NUM_THREADS": "7"})  # the environment too
    assert code == 0 and len(got["PASSED"]) == 3, out


def _fake_chromium(tmp_path_factory, script: str):
    """A ``chromium`` running ``script``, first on the PATH: (its folder, the environment to pass)."""
    bin_dir = tmp_path_factory.mktemp("bin")
    fake = bin_dir / "chromium"
    fake.write_text(script)
    fake.chmod(0o755)
    return bin_dir, {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_a_tools_noise_on_stderr_is_not_an_input(repo, tmp_path_factory):
    """Debian's chromium launcher prints the free bytes of /dev/shm on stderr with its version, which
    other processes change between two runs (on a loaded machine, the other test process's browser):
    here a fake chromium prints a new number every call. Its version (stdout) is the input, and a
    changed version still re-runs everything."""
    bin_dir, path = _fake_chromium(
        tmp_path_factory,
        '#!/bin/sh\necho "/usr/bin/chromium: 9: [: $(date +%s%N): unexpected operator" >&2\n'
        'echo "Chromium $(cat "$0.version")"\n',
    )
    (bin_dir / "chromium.version").write_text("156.0\n")
    assert run(repo, "tests", env=path)[0] == 0
    code, got, out = run(repo, "tests", env=path)
    assert code == 0 and got == {}, out
    (bin_dir / "chromium.version").write_text("157.0\n")
    code, got, out = run(repo, "tests", env=path)
    assert code == 0 and len(got["PASSED"]) == 3, out


def test_a_tool_that_fails_once_does_not_rerun_everything(repo, tmp_path_factory):
    """A version query that dies once (here a fake chromium kills itself with SIGTRAP, as the real one
    does when a loaded machine refuses it address space) is asked again: nothing re-runs. A tool
    that fails every time is keyed as failing: everything re-runs."""
    bin_dir, path = _fake_chromium(
        tmp_path_factory,
        '#!/bin/sh\nif [ -e "$0.crash" ]; then rm "$0.crash"; kill -TRAP $$; fi\n'
        'if [ -e "$0.broken" ]; then kill -TRAP $$; fi\necho "Chromium 156.0"\n',
    )
    assert run(repo, "tests", env=path)[0] == 0
    (bin_dir / "chromium.crash").write_text("")
    code, got, out = run(repo, "tests", env=path)
    assert not (bin_dir / "chromium.crash").exists(), "the fake never crashed"
    assert code == 0 and got == {}, out
    (bin_dir / "chromium.broken").write_text("")
    code, got, out = run(repo, "tests", env=path)
    assert code == 0 and len(got["PASSED"]) == 3, out
    assert "tool chromium ('exit 0: Chromium 156.0' -> 'exit -5: ')" in out, out


def test_ci_and_the_switch_run_everything(repo):
    assert run(repo, "tests")[0] == 0
    for env in ({"CI": "true"}, {"ICL_TESTCACHE": "off"}):
        code, got, out = run(repo, "tests", env=env)
        assert code == 0 and len(got["PASSED"]) == 3 and "testcache" not in out, (env, out)
    code, got, out = run(repo, "--no-testcache", "tests")
    assert code == 0 and len(got["PASSED"]) == 3, out


@pytest.mark.slow  # three nbval runs of a one-cell notebook (a kernel each)
def test_a_broken_chapter_fails_under_nbval_after_a_cached_pass(repo):
    nbval = ["--nbval", "chapters/01_demo.ipynb", "chapters/02_other.ipynb"]
    code, got, out = run(repo, *nbval)
    assert code == 0 and len(got["PASSED"]) == 2, out
    code, got, out = run(repo, *nbval)
    assert code == 0 and got == {} and "chapters/01_demo.ipynb: 1 not re-run" in out, out
    # the stored output no longer matches what the cell prints: the edited chapter runs and fails
    nbformat.write(_chapter("3\n"), repo / "chapters" / "01_demo.ipynb")
    code, got, out = run(repo, *nbval)
    assert code == 1 and got == {"FAILED": ["chapters/01_demo.ipynb::Cell 0"]}, out
    assert "chapters/02_other.ipynb: 1 not re-run" in out
    records = [json.loads(p.read_text()) for p in (repo / ".testcache").glob("[0-9a-f]*")]
    assert sorted(r["unit"] for r in records) == [
        "nbval:chapters/01_demo.ipynb",
        "nbval:chapters/02_other.ipynb",
    ]  # the first pass of chapter 1 and chapter 2's; nothing for the failure
    assert {tuple(r["inputs"]) for r in records} == {
        ("base", "chapter:01_demo"),
        ("base", "chapter:02_other"),
    }


def test_a_rerun_names_the_inputs_that_changed(repo, tmp_path_factory):
    """A test that passed before and runs again says why: the summary names the inputs that differ
    from its last pass (a tool's version with both texts), so an unexpected re-run (all three tests
    after a chapter-2 edit, once, on a loaded machine) can be traced to its input."""
    bin_dir = tmp_path_factory.mktemp("bin")
    fake = bin_dir / "node"
    fake.write_text('#!/bin/sh\ncat "$0.version"\n')
    fake.chmod(0o755)
    (bin_dir / "node.version").write_text("v20\n")
    path = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    assert run(repo, "tests", env=path)[0] == 0
    nbformat.write(_chapter("2\n\n"), repo / "chapters" / "02_other.ipynb")
    code, got, out = run(repo, "tests", env=path)
    assert code == 0 and len(got["PASSED"]) == 2, out
    assert "testcache: 2 tests that passed before ran again; inputs changed:" in out, out
    assert "  content: 2 tests" in out, out
    (bin_dir / "node.version").write_text("v22\n")  # e.g. a tool that failed or timed out
    code, got, out = run(repo, "tests", env={**path, "OMP_NUM_THREADS": "7"})
    assert code == 0 and len(got["PASSED"]) == 3, out
    assert "  tool node ('exit 0: v20' -> 'exit 0: v22'): 3 tests" in out, out
    assert "  env OMP_NUM_THREADS: 3 tests" in out, out
    assert "  content:" not in out, out  # only what changed since each test's last pass
