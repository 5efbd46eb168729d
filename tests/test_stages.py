"""booktools.stages: make test's stages run in order, stop at the first failure, and always end with the
time of each stage (the next slow-down must be visible in every CI log)."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT


def test_stops_at_the_first_failure_and_prints_every_stage_time(tmp_path):
    fake = tmp_path / "make"
    fake.write_text('#!/bin/sh\necho "ran $2"; [ "$2" != lint ]\n')  # the lint stage fails
    fake.chmod(0o755)
    run = subprocess.run(
        [sys.executable, "-m", "booktools.stages", "pairs", "lint", "html"],
        cwd=ROOT,
        env={"MAKE": str(fake), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    out = run.stdout
    assert "ran pairs" in out and "ran lint" in out and "ran html" not in out
    table = out[out.index("== make test: time of each stage") :]
    assert "chapter pairs (.md/.ipynb)" in table and " s  ok" in table
    assert "lint (ruff)" in table and "FAILED (exit 1)" in table
    assert "book build" not in table and "all checks passed" not in out
    assert "total" in table
