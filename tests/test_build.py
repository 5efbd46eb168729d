"""The book build: the warning-free check really fails on a warning."""

from __future__ import annotations

import subprocess

from .conftest import VENV_BIN


def test_a_warning_fails_the_build(tmp_path):
    """A broken cross-reference in an otherwise valid book must make `jupyter-book build -W -n` fail."""
    (tmp_path / "_config.yml").write_text(
        "title: t\nexecute:\n  execute_notebooks: 'off'\nonly_build_toc_files: true\n"
    )
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: index\n")
    (tmp_path / "index.md").write_text("# Index\n\nSee {doc}`a-page-that-does-not-exist`.\n")
    result = subprocess.run(
        [str(VENV_BIN / "jupyter-book"), "build", str(tmp_path), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert "unknown document" in result.stdout + result.stderr
