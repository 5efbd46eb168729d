"""The package's metadata and bounds: the wheel builds without warnings, and the lowest versions that
``pyproject.toml`` allows really run the book.

- ``test_wheel_builds_without_warnings``: setuptools' build backend, called with ``-W error`` (every
  warning an error), builds the wheel from a copy of the sources with this toolchain's setuptools; the
  wheel declares the SPDX licence (``License-Expression: MIT``) and ships ``LICENSE``.
- ``test_wheel_builds_without_warnings_with_the_newest_setuptools`` (slow, needs the package index): the
  same with the newest setuptools on the index, which is what any build from source gets. It caught
  ``project.license`` as a TOML table ("By 2027-Feb-18 ... your builds will no longer be supported").
- ``test_the_lowest_direct_versions_run_the_fast_editions`` (slow, needs the package index): a fresh
  venv with exactly the lower bound of every dependency (a constraints file generated from
  ``pyproject.toml``: ``numpy==1.24`` for ``numpy>=1.24``, ...; transitive dependencies resolve as pip
  likes), the wheel, and a kernel; the prologue and chapter 1 editions run there top to bottom and print
  what the committed editions print. **torch is the exception**: its lowest allowed version (2.3) exists on
  PyPI only as a CUDA build of several GB, so the venv gets this toolchain's CPU torch (the local wheel
  pinned in ``requirements.txt``). Its bound is not measured here but known: torch 2.3 is the first release
  built against NumPy 2 (pytorch/pytorch#107302, #132179); older ones fail at ``.numpy()``/``from_numpy``
  under NumPy 2, which the bounds allow.

Both slow tests skip, saying so, when the index cannot be reached.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
BUILD = (
    "import sys\nfrom setuptools import build_meta\nprint(build_meta.build_wheel(sys.argv[1]))\n"
)


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{cmd[:5]} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _source_copy(tmp_path: Path) -> Path:
    """What the wheel is built from: the package, pyproject.toml, README.md, LICENSE (building inside
    the repository would leave build/ and *.egg-info there)."""
    src = tmp_path / "src"
    shutil.copytree(
        ROOT / "icl_book", src / "icl_book", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    return src


def _build_strict(python: Path | str, tmp_path: Path) -> Path:
    """Build the wheel with ``python -W error``: any warning of the backend fails the build."""
    src = _source_copy(tmp_path)
    out = tmp_path / "dist"
    proc = subprocess.run(
        [str(python), "-W", "error", "-c", BUILD, str(out)], cwd=src, capture_output=True, text=True
    )
    assert proc.returncode == 0, f"the build warned or failed:\n{proc.stderr[-4000:]}"
    return out / proc.stdout.strip().splitlines()[-1]


def _metadata(wheel: Path) -> tuple[str, list[str]]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    return meta, names


def _check_licence(wheel: Path) -> None:
    meta, names = _metadata(wheel)
    assert "License-Expression: MIT" in meta.splitlines(), meta[:800]
    assert not [ln for ln in meta.splitlines() if ln.startswith("License:")], "legacy License field"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names


def test_wheel_builds_without_warnings(tmp_path):
    wheel = _build_strict(sys.executable, tmp_path)
    _check_licence(wheel)


def test_setuptools_bound_covers_the_spdx_licence():
    """The build requires a setuptools that reads ``license = "MIT"`` and ``license-files``
    (PEP 639 support arrived in setuptools 77.0)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT"
    assert project["project"]["license-files"] == ["LICENSE"]
    (req,) = [
        Requirement(r) for r in project["build-system"]["requires"] if r.startswith("setuptools")
    ]
    lowest = min(Version(s.version) for s in req.specifier if s.operator in (">=", "=="))
    assert lowest >= Version("77"), f"{req} allows setuptools without PEP 639 support"


def test_readme_says_what_installs():
    """No ``icl-book`` distribution exists on PyPI: the README names where the notebooks' wheels are, as
    ``packages/<hash>/<wheel>`` (the hash itself cannot be in the README: the README is in the wheel)."""
    from booktools import install_cell

    readme = (ROOT / "README.md").read_text()
    assert "pip install icl-book" not in readme
    urls = re.findall(r"https://\S+?\.whl", readme)
    url = install_cell.wheel_url(ROOT)
    hashed = url.split("/")[-2]
    assert urls and set(urls) == {url.replace(f"/{hashed}/", "/<hash>/")}, urls


# --------------------------------------------------------------------------------------------------
# With the package index: the newest setuptools, and the lowest versions the bounds allow
# --------------------------------------------------------------------------------------------------
def _pip_env() -> dict[str, str]:
    return {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "MPLBACKEND")
    }


def _venv(path: Path) -> Path:
    _run([sys.executable, "-m", "venv", str(path)])
    return path / "bin" / "python"


def _index_or_skip(python: Path, tmp_path: Path, probe: str) -> None:
    """Skip (with the reason) when pip cannot download ``probe`` from the package index."""
    proc = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "-d",
            str(tmp_path / "probe"),
            probe,
        ],
        capture_output=True,
        text=True,
        env=_pip_env(),
        timeout=300,
    )
    if proc.returncode != 0:
        pytest.skip(
            f"the package index is unreachable (pip download {probe}: {proc.stderr[-300:]})"
        )


@pytest.mark.slow  # a venv and a download: ~15 s
def test_wheel_builds_without_warnings_with_the_newest_setuptools(tmp_path):
    python = _venv(tmp_path / "venv")
    _index_or_skip(python, tmp_path, "setuptools")
    _run([str(python), "-m", "pip", "install", "-q", "--upgrade", "setuptools"], env=_pip_env())
    version = _run([str(python), "-c", "import setuptools; print(setuptools.__version__)"])
    print(f"built with setuptools {version.stdout.strip()}")
    _check_licence(_build_strict(python, tmp_path))


def lowest_constraints(root: Path = ROOT) -> dict[str, str]:
    """``{distribution: version}``: the lower bound of every dependency in ``pyproject.toml``, except
    torch, which is the toolchain's pin from ``requirements.txt`` (see the module docstring)."""
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {}
    for dep in deps:
        req = Requirement(dep)
        lows = [s.version for s in req.specifier if s.operator == ">="]
        assert len(lows) == 1, f"{dep}: give exactly one lower bound (>=)"
        pins[canonicalize_name(req.name)] = lows[0]
    torch_pin = re.search(r"^torch==(\S+)", (root / "requirements.txt").read_text(), re.M)[1]
    assert Version(torch_pin) >= Version(pins["torch"])
    pins["torch"] = torch_pin
    return pins


def _stream_text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


@pytest.mark.slow  # ~70 MB from the index (cached by pip afterwards) and two editions: 1-2 minutes
def test_the_lowest_direct_versions_run_the_fast_editions(tmp_path):
    from .test_colab_path import RUNNER

    python = _venv(tmp_path / "venv")
    _index_or_skip(python, tmp_path, "threadpoolctl")
    pins = lowest_constraints()
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join(f"{name}=={v}\n" for name, v in pins.items()))
    wheel = _build_strict(sys.executable, tmp_path / "build")
    env = _pip_env()
    _run(
        [str(python), "-m", "pip", "install", "-q", "-c", str(constraints), str(wheel),
         "ipykernel", "nbclient"],
        env=env, cwd=tmp_path, timeout=1200,
    )  # fmt: skip
    listed = _run([str(python), "-m", "pip", "list", "--format", "json"], env=env).stdout
    installed = {canonicalize_name(d["name"]): d["version"] for d in json.loads(listed)}
    for name, version in pins.items():
        # torch's local wheel reports 2.13.0+cpu; the public part is the pin
        assert Version(Version(installed[name]).public) == Version(version), (
            f"{name}: installed {installed[name]}, the bound is {version}"
        )

    kernels = tmp_path / "jupyter" / "kernels" / "icl-lowest"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "lowest",
                "language": "python",
            }
        )
    )
    env.update(JUPYTER_PATH=str(tmp_path / "jupyter"), JUPYTER_DATA_DIR=str(tmp_path / "jd"))
    run = tmp_path / "run"
    run.mkdir()
    (run / "runner.py").write_text(RUNNER.replace("icl-fresh", "icl-lowest"))
    for stem in ("00_prologue", "01_hermite"):
        edition = ROOT / "notebooks" / f"{stem}.ipynb"
        shutil.copy(edition, run / f"{stem}.ipynb")
        _run(
            [str(python), "runner.py", f"{stem}.ipynb", f"{stem}.out.ipynb", str(run)],
            env=env, cwd=run, timeout=900,
        )  # fmt: skip
        done = nbformat.read(run / f"{stem}.out.ipynb", as_version=4)
        want = nbformat.read(edition, as_version=4)
        code = [
            (a, b) for a, b in zip(done.cells, want.cells, strict=True) if a.cell_type == "code"
        ]
        errors = [o for a, _ in code for o in a.outputs if o.output_type == "error"]
        assert not errors, f"{stem}: {errors[0]['ename']}: {errors[0]['evalue']}"
        # Solution cells ship without outputs in the editions; every other printed line must agree.
        differ = [
            (i, _stream_text(a), _stream_text(b))
            for i, (a, b) in enumerate(code)
            if b.outputs and _stream_text(a) != _stream_text(b)
        ]
        assert not differ, f"{stem}: printed output differs at the lowest versions: {differ[:2]}"


def test_the_sdist_holds_the_package_and_no_tests(tmp_path):
    """The source distribution is for users of the package: the package and its data, the metadata,
    README and LICENSE; not the tests, which need the whole repository (MANIFEST.in prunes them;
    setuptools would otherwise add every tests/test*.py)."""
    import shutil
    import tarfile

    src = tmp_path / "src"
    shutil.copytree(
        ROOT / "icl_book", src / "icl_book", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(ROOT / "tests", src / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy(ROOT / name, src / name)
    _run(
        [sys.executable, "-c", "from setuptools import build_meta as b; b.build_sdist('dist')"],
        cwd=src,
    )
    (sdist,) = (src / "dist").glob("*.tar.gz")
    names = [n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n]
    assert not [n for n in names if n.startswith("tests")], names
    assert {"pyproject.toml", "README.md", "LICENSE", "icl_book/__init__.py"} <= set(names)
    assert [n for n in names if n.startswith("icl_book/data/") and n.endswith(".npz")]
