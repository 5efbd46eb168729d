"""The package's wheel, built reproducibly, and its SHA-256 (what every install cell pins).

:func:`build_wheel` builds from a temporary copy of the sources (so no ``build/`` folder is left in the
clone) with fixed file modes and ``SOURCE_DATE_EPOCH`` fixed: the same sources give the same bytes on every
machine with the locked setuptools, so the wheel ``make publish`` puts on the site has the SHA-256 that
the chapters' install cells name (``tests/test_colab_path.py`` builds it from a copy with other file
times and modes). The README is part of the wheel (its long description): editing it changes the hash.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["package_version", "wheel_name", "wheel_inputs", "build_wheel", "wheel_sha256"]

#: The wheel's zip timestamps (1980-01-01, the earliest a zip file can hold): no build time in its bytes.
SOURCE_DATE_EPOCH = "315532800"


def package_version(root: Path) -> str:
    """The support package's version, from ``pyproject.toml``."""
    text = (Path(root) / "pyproject.toml").read_text()
    m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    if m is None:
        raise ValueError(f"{root}/pyproject.toml has no version")
    return m[1]


def wheel_name(version: str) -> str:
    return f"icl_book-{version}-py3-none-any.whl"


def wheel_inputs(root: Path) -> list[Path]:
    """Every file the wheel is built from: the package (without caches) and the project's metadata."""
    root = Path(root)
    files = [
        p
        for p in sorted((root / "icl_book").rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    ]
    return files + [
        root / n for n in ("pyproject.toml", "README.md", "LICENSE") if (root / n).exists()
    ]


def build_wheel(root: Path, out: Path) -> Path:
    """The wheel of the package in ``root``, written into ``out``, the same bytes wherever it is built."""
    root = Path(root)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        for path in wheel_inputs(root):
            copy = src / path.relative_to(root)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)
            copy.chmod(0o644)  # the zip records each file's mode; a clone's umask must not show
        env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--no-deps",
             "--no-build-isolation", "-q", "-w", str(out), str(src)],
            check=True, env=env,
        )  # fmt: skip
    wheel = out / wheel_name(package_version(root))
    if not wheel.exists():
        raise SystemExit(f"pip built {sorted(p.name for p in out.iterdir())}, not {wheel.name}")
    return wheel


@functools.lru_cache(maxsize=4)
def _sha256(root: str, state: tuple) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(root), Path(tmp))
        return hashlib.sha256(wheel.read_bytes()).hexdigest()


def wheel_sha256(root: Path) -> str:
    """The SHA-256 of :func:`build_wheel`'s wheel of ``root``; cached per state of its inputs."""
    root = Path(root).resolve()
    state = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in wheel_inputs(root))
    return _sha256(str(root), state)
