"""The Colab path: the package as a wheel in a fresh virtual environment runs a chapter end to end.

Colab has Python, NumPy, SciPy, Matplotlib, torch and Jupyter preinstalled and gets ``icl_book`` from the
chapter's first cell, which pip-installs the wheel of this very package version from the book's site
(``<site>/packages/icl_book-<version>-py3-none-any.whl``; ``make publish`` puts it there; the site's address
comes from ``_config.yml``) whenever ``import icl_book`` fails, in Colab or in a local Jupyter. This file
tests:

- ``test_every_install_cell_pins_this_package_version_on_the_configured_site``: the first code cell of
  every chapter source, executed chapter and edition installs that wheel, and only when the import fails;
- the cell in a kernel, in four cases: the package present (it does nothing: no output, no pip),
  missing and installable (one line saying what it installs, then the import works in the same
  kernel), the wheel missing (it stops with a plain message as its only output line, pip's reason on
  stderr, and no later cell runs: no ``NameError`` cascade), and a local kernel without torch (it
  stops before pip and says how to get PyTorch's CPU build, not PyPI's multi-GB CUDA one);
- ``test_wheel_in_fresh_venv_runs_a_chapter``: the package built as a wheel and pip-installed into a fresh
  venv outside the repository executes ``chapters/00_prologue.ipynb`` top to bottom with that venv's own
  kernel (``sys.prefix`` and ``icl_book.__file__`` are checked from inside the notebook).

The wheel's dependencies (the transitive closure of its ``Requires-Dist``, plus ipykernel and nbclient to run
a kernel) are *linked* into the fresh venv from the pinned toolchain instead of pip-installed again: the
venv then holds exactly what the wheel declares and nothing else, and ``pip check`` verifies the
requirements; the test takes ~30 s instead of minutes. Set ``ICL_BOOK_FULL_VENV=1`` to pip-install them
for real from the package index (about a minute on an idle machine, ~7 minutes measured here under load;
torch is pinned to requirements.txt's version, otherwise pip pulls a multi-GB CUDA build).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from booktools import editions

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "chapters" / "00_prologue.ipynb"
WHEEL_RE = re.compile(r'SITE = "(?P<site>[^"]+)"\n\s*WHEEL = SITE \+ "(?P<path>[^"]+)"')


def _site_address():
    """The book's site from _config.yml: html.baseurl, else the GitHub Pages address of repository.url."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    base = (config.get("html") or {}).get("baseurl")
    if base:
        return base.rstrip("/") + "/"
    owner, name = config["repository"]["url"].removeprefix("https://github.com/").split("/")[:2]
    return f"https://{owner.lower()}.github.io/{name}/"


def _first_code_cell(path):
    import jupytext

    nb = jupytext.read(path)
    return next(c for c in nb.cells if c.cell_type == "code").source


def _install_cell_files():
    """Every chapter source, executed chapter and Colab edition (their first code cell installs)."""
    sources = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.md"))
    assert sources, "no chapters"
    files = [
        *sources,
        *(p.with_suffix(".ipynb") for p in sources),
        *(ROOT / "notebooks" / f"{p.stem}.ipynb" for p in sources),
    ]
    return [pytest.param(f, id=str(f.relative_to(ROOT))) for f in files]


def test_the_package_version_is_the_projects():
    import icl_book

    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert icl_book.__version__ == version, "icl_book.__version__ and pyproject.toml disagree"


@pytest.mark.parametrize("path", _install_cell_files())
def test_every_install_cell_pins_this_package_version_on_the_configured_site(path):
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    site = _site_address()
    expected = f"{site}packages/icl_book-{version}-py3-none-any.whl"
    name, cell = path.relative_to(ROOT), _first_code_cell(path)
    m = WHEEL_RE.search(cell)
    assert m, f"{name}: the first code cell is not the install cell"
    assert m["site"] + m["path"] == expected, (
        f"{name} installs {m['site'] + m['path']}, not the wheel of version {version} on "
        f"{site}: run `python -m booktools.editions install-cells` and `make editions`"
    )
    assert cell == editions.install_cell(ROOT), (
        f"{name}: not the install cell of booktools.editions (edited by hand, or older): run "
        "`python -m booktools.editions install-cells` and `make editions`"
    )
    guard = cell.index('try:\n    importlib.import_module("icl_book")\nexcept ImportError:')
    assert guard < cell.index("pip = "), f"{name}: pip must run only when the import fails"


def test_install_cell_regex_can_fail():
    cell = editions.install_cell(ROOT)
    m = WHEEL_RE.search(cell)
    assert m["path"].endswith(".whl") and m["site"] == _site_address()
    assert WHEEL_RE.search(cell.replace("WHEEL = SITE +", "WHEEL =")) is None
    old = '%pip install -q "icl-book @ git+https://github.com/icl-book/icl-book@main"'
    assert WHEEL_RE.search(old) is None


def _closure(names):
    """Distributions (in this environment) needed by ``names``, following Requires-Dist without extras."""
    seen, todo = {}, list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        dist = metadata.distribution(name)
        seen[name] = dist
        for req in dist.requires or []:
            r = Requirement(req)
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r.name)
    return seen


def _link_distributions(dists, site):
    """Symlink every top-level file or directory of ``dists`` into ``site``."""
    for dist in dists.values():
        base = Path(dist.locate_file(""))
        for f in dist.files or []:
            top = f.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue
            src, dst = base / top, site / top
            if src.exists() and not dst.exists():
                dst.symlink_to(src, target_is_directory=src.is_dir())


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{cmd[:4]} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


RUNNER = textwrap.dedent(
    """\
    import sys
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(sys.argv[1], as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="icl-fresh", resources={"metadata": {"path": sys.argv[3]}}).execute()
    nbformat.write(nb, sys.argv[2])
    """
)


def _build_wheel(tmp_path):
    """The wheel, built from a copy of the sources (pip builds in-tree and would leave build/ in the repo)."""
    src = tmp_path / "src"
    shutil.copytree(
        ROOT / "icl_book", src / "icl_book", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run(
        [
            *pip,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ]
    )
    (wheel,) = (tmp_path / "dist").glob("icl_book-*.whl")
    return wheel


def _wheel_requirements(wheel):
    """The distributions the wheel's ``Requires-Dist`` names (without extras)."""
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    requires = [
        Requirement(ln.split(":", 1)[1].strip())
        for ln in text.splitlines()
        if ln.startswith("Requires-Dist:")
    ]
    return [r.name for r in requires if r.marker is None or r.marker.evaluate({"extra": ""})]


def _kernel_for(tmp_path, py, env):
    """Register ``py`` as the kernel ``icl-fresh`` through a private JUPYTER_PATH in ``env``."""
    kernels = tmp_path / "jupyter" / "kernels" / "icl-fresh"
    kernels.mkdir(parents=True)
    spec = {
        "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fresh",
        "language": "python",
    }
    (kernels / "kernel.json").write_text(json.dumps(spec))
    env.update(
        JUPYTER_PATH=str(tmp_path / "jupyter"), JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data")
    )


def _fresh_venv(tmp_path):
    """Steps 1-4: the wheel, a fresh venv outside the repository with it installed, and that venv's kernel.
    Returns ``(python, env, venv, site)``."""
    # 1. The wheel.
    wheel = _build_wheel(tmp_path)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]

    # 2. A fresh venv outside the repository.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    # pip of the toolchain installs into the venv (--python): no ensurepip, same pip behaviour.
    vpip = [*pip, "--python", str(py), "-q"]
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MPLBACKEND", "PYTHONHOME")
    }
    site = Path(
        _run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )

    # 3. Install the wheel and what a Colab runtime already has.
    if os.environ.get("ICL_BOOK_FULL_VENV") == "1":
        torch_pin = next(
            ln.strip()
            for ln in (ROOT / "requirements.txt").read_text().splitlines()
            if ln.startswith("torch==")
        )
        _run(
            [*vpip, "install", str(wheel), "ipykernel", "nbclient", torch_pin],
            env=env,
            cwd=tmp_path,
        )
    else:
        _run([*vpip, "install", "--no-deps", str(wheel)], env=env, cwd=tmp_path)
        needed = _wheel_requirements(wheel)
        assert {"numpy", "torch"} <= {canonicalize_name(n) for n in needed}
        _link_distributions(_closure([*needed, "ipykernel", "nbclient"]), site)
        _run([*vpip, "check"], env=env, cwd=tmp_path)

    # 4. The venv's own kernel, found through a private JUPYTER_PATH.
    _kernel_for(tmp_path, py, env)
    return py, env, venv, site


# --------------------------------------------------------------------------------------------------
# The install cell in a kernel
# --------------------------------------------------------------------------------------------------
CELLS_RUNNER = textwrap.dedent(
    """\
    import sys
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(sys.argv[1], as_version=4)
    try:  # stops at the first error, as "Run all" does
        NotebookClient(nb, timeout=300, kernel_name="icl-fresh").execute()
    except CellExecutionError:
        pass
    nbformat.write(nb, sys.argv[2])
    """
)


def _venv_without_the_package(tmp_path, *, torch=True):
    """A venv outside the repository with the wheel's dependencies (or, ``torch=False``, none of
    them), pip and a kernel linked in, but not ``icl_book``; returns ``(python, env, site, wheel)``."""
    wheel = _build_wheel(tmp_path)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    site = Path(
        _run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    # pip runs inside the kernel (the cell calls sys.executable -m pip), so it is linked in too.
    needed = [*(_wheel_requirements(wheel) if torch else []), "ipykernel", "nbclient", "pip"]
    _link_distributions(_closure(needed), site)
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MPLBACKEND", "PYTHONHOME")
    }
    _kernel_for(tmp_path, py, env)
    probe = (
        "import importlib.util as u; print(u.find_spec('icl_book'), u.find_spec('torch') is None)"
    )
    found = _run([str(py), "-c", probe], env=env, cwd=tmp_path).stdout.split()
    assert found == ["None", str(not torch)], found
    return py, env, site, wheel


def _run_cells(tmp_path, py, env, sources):
    """Run code cells in the venv's kernel until the first error; return the cells."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    run = tmp_path / "cells"
    run.mkdir()
    nbformat.write(nb, run / "in.ipynb")
    (run / "runner.py").write_text(CELLS_RUNNER)
    _run([str(py), "runner.py", "in.ipynb", "out.ipynb"], env=env, cwd=run, timeout=600)
    return nbformat.read(run / "out.ipynb", as_version=4).cells


def _streams(cell, name):
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == name)


def _empty(tmp_path):
    """A site folder without any wheel."""
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


def _served_cell(url):
    cell = editions.install_cell(ROOT)
    served = cell.replace(_site_address(), f"{url}/")
    assert served != cell
    return served


def test_install_cell_does_nothing_when_the_package_is_present(tmp_path):
    """In the toolchain's kernel (icl_book installed) and pointed at a site with no wheel: no output, no
    error, so it never tried pip."""
    from nbclient import NotebookClient

    from .browser import serve

    with serve(tmp_path) as url:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(_served_cell(url))]
        NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    assert nb.cells[0].outputs == []


def test_install_cell_installs_a_missing_package_and_imports_it(tmp_path):
    from .browser import serve

    py, env, site, wheel = _venv_without_the_package(tmp_path)
    served = tmp_path / "site"
    (served / editions.PACKAGES_DIR).mkdir(parents=True)
    shutil.copy(wheel, served / editions.PACKAGES_DIR / wheel.name)
    with serve(served) as url:
        cells = _run_cells(
            tmp_path, py, env, [_served_cell(url), "import icl_book\nprint(icl_book.__file__)"]
        )
    install, after = cells
    assert [o.output_type for o in install.outputs] == ["stream"], install.outputs
    assert _streams(install, "stdout") == (
        f"Installing the book's package icl_book from {url}/packages/{wheel.name}\n"
    )
    assert "restart" not in _streams(install, "stdout") + _streams(install, "stderr")
    module = Path(_streams(after, "stdout").strip()).resolve()
    assert module.is_relative_to(site.resolve()), module


def test_a_failed_install_stops_with_a_message_and_no_cascade(tmp_path):
    """The install cell pointed at a wheel the server does not have: the cell stops with a plain
    message (its only rendered line: no traceback), and no later cell runs (no NameError)."""
    from .browser import serve

    py, env, site, wheel = _venv_without_the_package(tmp_path)
    with serve(_empty(tmp_path)) as url:
        later = "from icl_book import hermite\nprint(hermite)"
        cells = _run_cells(tmp_path, py, env, [_served_cell(url), later, "print('end')"])
    install = cells[0]
    errors = [o for o in install.outputs if o.output_type == "error"]
    assert [e.ename for e in errors] == ["InstallFailed"], install.outputs
    message = errors[0].evalue
    assert errors[0].traceback == [message], "IPython must show the message alone"
    assert f"Could not install the book's package icl_book from {url}/packages/" in message
    assert "run this cell again" in message and "Colab button" in message
    assert "404" in _streams(install, "stderr")  # pip's own reason, for whoever wants it
    assert all(c.get("execution_count") is None and not c.outputs for c in cells[1:]), (
        "the notebook went on after the failure"
    )


def test_a_local_kernel_without_torch_is_told_how_to_get_the_cpu_build(tmp_path):
    """Outside Colab, without torch: pip would fetch PyPI's torch (on Linux a CUDA build of several
    GB). The cell stops before pip and says how to install the CPU build."""
    from .browser import serve

    py, env, site, wheel = _venv_without_the_package(tmp_path, torch=False)
    with serve(_empty(tmp_path)) as url:
        cells = _run_cells(tmp_path, py, env, [_served_cell(url), "print('end')"])
    install = cells[0]
    assert [o.output_type for o in install.outputs] == ["error"], install.outputs
    message = install.outputs[0].evalue
    assert install.outputs[0].traceback == [message]
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in message
    assert cells[1].get("execution_count") is None


def _run_in_fresh_venv(tmp_path, notebook):
    """Execute ``notebook`` top to bottom in a fresh venv; return the executed code cells."""
    py, env, venv, site = _fresh_venv(tmp_path)
    # 5. Execute the chapter there, with a last cell reporting where the package came from.
    run = tmp_path / "run"
    run.mkdir()
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "import importlib.util, sys, icl_book\n"
            "print(sys.prefix)\nprint(icl_book.__file__)\n"
            "print(importlib.util.find_spec('jupytext') is None)"  # the toolchain is not visible
        )
    )
    nbformat.write(nb, run / "chapter.ipynb")
    (run / "runner.py").write_text(RUNNER)
    _run(
        [str(py), "runner.py", "chapter.ipynb", "executed.ipynb", str(run)],
        env=env,
        cwd=run,
        timeout=900,
    )

    done = nbformat.read(run / "executed.ipynb", as_version=4)
    code = [c for c in done.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    # the last cell's three printed lines may arrive as one stream output or several
    printed = "".join(o.get("text", "") for o in code[-1].outputs if o.output_type == "stream")
    prefix, module, isolated = printed.split()
    assert isolated == "True", "the fresh venv sees packages the wheel does not declare"
    assert Path(prefix).resolve() == venv.resolve()
    assert Path(module).resolve().is_relative_to(site.resolve()), module
    assert ROOT not in Path(module).resolve().parents
    return code


@pytest.mark.slow
def test_wheel_in_fresh_venv_runs_a_chapter(tmp_path):
    if not CHAPTER.exists():
        pytest.skip(f"{CHAPTER.name} does not exist yet")
    code = _run_in_fresh_venv(tmp_path, CHAPTER)
    printed = "".join(o.get("text", "") for c in code for o in c.outputs)
    assert "prologue-ex1: correct" in printed


# The editions Colab opens (notebooks/NN_slug.ipynb). By default the cheap ones run: chapters whose recorded
# run time (chapters/timings.json) is at most 15 s, i.e. the prologue and chapter 1. The others take
# 40-115 s each on two cores (about 7 minutes together); their code cells equal the chapter's, which nbval
# executes, apart from the solution title line (tests/test_editions.py checks that equality), so what an
# edition could break is exercised by the cheap ones. ICL_BOOK_ALL_EDITIONS=1 runs every edition.
EDITION_BUDGET_S = 15.0


def _editions():
    timings = json.loads((ROOT / "chapters" / "timings.json").read_text())
    params = []
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        seconds = timings.get(path.stem, {}).get("total_s", float("inf"))
        cheap = seconds <= EDITION_BUDGET_S or os.environ.get("ICL_BOOK_ALL_EDITIONS") == "1"
        marks = (
            []
            if cheap
            else [pytest.mark.skip(reason=f"{seconds:.0f} s > {EDITION_BUDGET_S:.0f} s budget")]
        )
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


@pytest.mark.slow
@pytest.mark.parametrize("edition", _editions())
def test_wheel_in_fresh_venv_runs_an_edition(tmp_path, edition):
    code = _run_in_fresh_venv(tmp_path, edition)
    printed = "".join(o.get("text", "") for c in code for o in c.outputs)
    checks = re.findall(r"^(\w+-ex\d+): correct$", printed, re.M)
    source = nbformat.read(edition, as_version=4)
    expected = re.findall(r"check_(\w+?)_ex(\d+)\(", "".join(c.source for c in source.cells))
    assert len(checks) == len(expected), (checks, expected)
