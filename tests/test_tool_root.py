"""Every tool finds the repository one way: ``--root DIR``, default the current directory's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = {
    "notebooks check-pairs": ["booktools.notebooks", "check-pairs"],
    "assignments table": ["booktools.assignments", "table"],
}


def _run(args, cwd):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
    }  # booktools is not installed: import it from the clone
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("name", COMMANDS)
def test_tool_outside_the_repository_needs_root(tmp_path, name):
    done = _run([*COMMANDS[name], "--root", str(ROOT)], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    missing = _run(COMMANDS[name], tmp_path)
    assert missing.returncode != 0
    assert "no book repository" in missing.stderr and "--root" in missing.stderr, missing.stderr
