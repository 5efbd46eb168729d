"""The Colab install cell: the first code cell of every chapter, and so of every edition.

``python -m booktools.editions install-cells [NN ...]`` (:func:`write_install_cells`) writes it into
every chapter source ``chapters/NN_*.md`` and its executed notebook. The cell (:func:`install_cell`)
installs ``icl_book`` when it is missing: the wheel of this very build of the package, fetched from
the book's site (:func:`wheel_url`: ``packages/<hash>/<wheel>``, which ``make publish`` uploads) and
checked by its SHA-256, then notes a NumPy or torch release outside the ones the book was tested with
(:func:`tested_range`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from booktools.book_index import site_url
from booktools.chapters import chapter_sources, install_cell_span
from booktools.wheel import package_version, wheel_name, wheel_sha256

__all__ = [
    "InstallCellError",
    "PACKAGES_DIR",
    "install_cell",
    "tested_range",
    "wheel_path",
    "wheel_url",
    "write_install_cells",
]


class InstallCellError(ValueError):
    """A chapter without a code cell, an unknown chapter, or a lock that pins no NumPy or torch."""


PACKAGES_DIR = "packages"  # where the published site hosts the package's wheels (make publish)
INSTALL_CELL = """\
# Installs the book's package icl_book if it is missing: the very build this notebook
# was run with, checked by its SHA-256. ICL_BOOK_WHEEL (a URL or a file) names a mirror.
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

SITE = "{site}"
WHEEL = SITE + "{path}"
SHA256 = "{sha256}"
# The NumPy and torch releases (major.minor) the book was tested with:
TESTED = {tested}


class InstallFailed(Exception):
    def _render_traceback_(self):  # IPython shows the message alone, no traceback
        return [str(self)]


# The wheel at source (a URL or a file), saved in folder, if its hash is SHA256.
def fetch(source, folder):
    wheel = Path(folder) / source.rsplit("/", 1)[-1]
    try:
        if re.match(r"[a-z]+://", source):
            with urllib.request.urlopen(source, timeout=120) as response:
                wheel.write_bytes(response.read())
        else:
            wheel.write_bytes(Path(source).read_bytes())
    except OSError as err:
        raise InstallFailed(
            f"Could not fetch the book's package from {{source}}\\n({{err}}).\\n"
            "Check that you are online and run this cell again; on a mirror, set\\n"
            "ICL_BOOK_WHEEL to the wheel's URL or file."
        ) from None
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != SHA256:
        raise InstallFailed(f"Refused {{source}}: its SHA-256 is {{digest}}, not {{SHA256}}.")
    return wheel


try:
    importlib.import_module("icl_book")
except ImportError:
    if importlib.util.find_spec("torch") is None and "google.colab" not in sys.modules:
        raise InstallFailed(
            "icl_book needs PyTorch. Install its CPU build first (on Linux pip's\\n"
            "default torch is a CUDA build of several GB), then run this cell again:\\n"
            "  pip install torch --index-url https://download.pytorch.org/whl/cpu"
        ) from None
    source = os.environ.get("ICL_BOOK_WHEEL") or WHEEL
    print(f"Installing the book's package icl_book from {{source}}")
    with tempfile.TemporaryDirectory() as folder:
        wheel = fetch(source, folder)
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-color", str(wheel)]
        env = {{**os.environ, "NO_COLOR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}}
        done = subprocess.run(pip, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        said = re.sub(r"\\x1b\\[[0-9;]*m", "", done.stderr + done.stdout).splitlines()
        errors = [s for s in said if re.match(r"(ERROR|error):", s)]
        reason = (errors or [s for s in said if s.strip()] or ["(pip said nothing)"])[0]
        raise InstallFailed(
            f"pip could not install the book's package icl_book:\\n{{reason.strip()}}"
        ) from None
    importlib.invalidate_caches()  # so that this kernel finds the new package
    importlib.import_module("icl_book")

for name, (low, high) in TESTED.items():
    try:
        have = version(name)
    except PackageNotFoundError:
        continue
    minor = tuple(int(n) for n in re.findall(r"\\d+", have)[:2])
    if not tuple(map(int, low.split("."))) <= minor <= tuple(map(int, high.split("."))):
        span = low if low == high else f"{{low}} to {{high}}"
        print(f"Note: this runtime has {{name}} {{have}}; the book was tested with {{span}}.")"""


def wheel_path(root: Path) -> str:
    """Where the site hosts this build of the package, relative to the site:
    ``packages/<first 16 hex digits of its SHA-256>/<wheel>``. A changed package gets a new folder, so
    the earlier wheels (which older copies of the editions pin) stay where they were."""
    digest = wheel_sha256(root)
    return f"{PACKAGES_DIR}/{digest[:16]}/{wheel_name(package_version(root))}"


def wheel_url(root: Path) -> str:
    """The address every install cell fetches: ``<site>/`` + :func:`wheel_path`."""
    config = yaml.safe_load((Path(root) / "_config.yml").read_text())
    return site_url(config) + wheel_path(root)


def tested_range(root: Path) -> dict[str, tuple[str, str]]:
    """NumPy's and torch's releases the book is tested with, as ``(lowest, highest)`` major.minor: from
    the lower bound ``pyproject.toml`` declares (tests/test_packaging.py runs editions there) to the
    version the lock pins (``requirements.txt``: the whole test suite). torch's lowest allowed release
    exists only as a multi-GB CUDA build, so tests/test_packaging.py runs the lock's: its range is the
    lock's release alone."""
    import tomllib
    from packaging.requirements import Requirement

    root = Path(root)
    declared = {
        r.name: r for r in map(Requirement, tomllib.loads((root / "pyproject.toml").read_text())
                               ["project"]["dependencies"])
    }  # fmt: skip
    lock = (root / "requirements.txt").read_text()
    out = {}
    for name in ("numpy", "torch"):
        pinned = re.search(rf"^{name}==(\S+)", lock, re.M)
        if pinned is None:
            raise InstallCellError(f"requirements.txt pins no {name}")
        high = ".".join(pinned[1].split(".")[:2])
        low = next(s.version for s in declared[name].specifier if s.operator == ">=")
        out[name] = (high if name == "torch" else low, high)
    return out


def install_cell(root: Path) -> str:
    """The source of the chapters' first code cell, for this build of the package and ``_config.yml``."""
    config = yaml.safe_load((Path(root) / "_config.yml").read_text())
    return INSTALL_CELL.format(
        site=site_url(config),
        path=wheel_path(root),
        sha256=wheel_sha256(root),
        tested=repr(tested_range(root)).replace("'", '"'),
    )


def write_install_cells(root: Path, chapters: list[str] | None = None) -> list[Path]:
    """Make the first code cell of every chapter source ``chapters/NN_*.md`` and of its executed
    ``.ipynb`` the install cell of :func:`install_cell` (nothing else in them changes); returns the
    files written. ``chapters``: only the chapters whose file name starts with one of these
    (``["00", "01_hermite"]``); ``None`` for all. ``make editions`` then carries the cell into the
    editions."""
    root = Path(root)
    want = install_cell(root)
    written = []
    sources = chapter_sources(root)
    if chapters is not None:
        chosen = [md for md in sources if any(md.stem.startswith(c) for c in chapters)]
        unknown = [c for c in chapters if not any(md.stem.startswith(c) for md in sources)]
        if unknown:
            raise InstallCellError(f"chapters: {unknown} match no chapters/NN_*.md")
        sources = chosen
    for md in sources:
        text = md.read_text()
        try:
            start, end = install_cell_span(text)
        except ValueError:
            raise InstallCellError(f"{md.name}: no code cell") from None
        if text[start:end] != want:
            md.write_text(text[:start] + want + text[end:])
            written.append(md)
        nb_path = md.with_suffix(".ipynb")
        if not nb_path.exists():
            continue
        raw = nb_path.read_text()
        nb = json.loads(raw)
        cell = next(c for c in nb["cells"] if c["cell_type"] == "code")
        if "".join(cell["source"]) != want:
            cell["source"] = want.splitlines(keepends=True)
            new = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
            nb_path.write_text(new)
            written.append(nb_path)
    return written
