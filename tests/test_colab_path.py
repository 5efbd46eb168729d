"""The Colab path: the package as a wheel in a fresh virtual environment runs a chapter end to end.

Colab has Python, NumPy, SciPy, Matplotlib, torch and Jupyter preinstalled and gets ``icl_book`` from the
chapter's first cell whenever ``import icl_book`` fails, in Colab or in a local Jupyter. The cell pins the
very build of the package: it fetches ``<site>/packages/<hash>/icl_book-<version>-py3-none-any.whl``
(``make publish`` puts it there; the site's address comes from ``_config.yml``, the folder is the start of
the wheel's SHA-256) or the wheel that ``ICL_BOOK_WHEEL`` names (a mirror's URL or a file), checks its
SHA-256, and pip-installs it. This file tests:

- ``test_every_install_cell_pins_this_package_build_on_the_configured_site``: the first code cell of
  every chapter source, executed chapter and edition names that wheel and its SHA-256 (that of the wheel
  built from the package as it is now: a changed package fails until the cells are regenerated), and
  installs only when the import fails;
- the cell in a kernel: the package present (it does nothing: no output, no pip; and one line when
  NumPy is outside the tested range); missing and installable from the site (one line saying what it
  installs, then the import works in the same kernel); a wheel missing from the site, a wheel whose
  SHA-256 differs, and a wheel pip rejects (each stops with a plain message, the last with pip's one
  decisive line, no colour codes, and no later cell runs: no ``NameError`` cascade); ``ICL_BOOK_WHEEL``
  honoured; and a local kernel without torch (it stops before pip and says how to get PyTorch's CPU
  build, not PyPI's multi-GB CUDA one);
- ``test_wheel_in_fresh_venv_runs_the_prologue_edition``: the package built as a wheel and installed
  into a fresh venv outside the repository (``booktools.fresh_venv``) executes the prologue's edition top
  to bottom with that venv's own kernel (``sys.prefix`` and ``icl_book.__file__`` are checked from inside
  the notebook), every check saying correct;
- that ``make test``'s 1-thread nbval stage executes every chapter in such a venv, and that the chapters
  import nothing the wheel does not declare (statically: that venv also holds myst-nb, for glue).

The wheel's dependencies (the transitive closure of its ``Requires-Dist``, plus ipykernel and nbclient to run
a kernel) are *linked* into the fresh venv from the pinned toolchain instead of pip-installed again: the
venv then holds exactly what the wheel declares and nothing else, and ``pip check`` verifies the
requirements. ``tests/test_packaging.py`` installs the wheel with its lowest declared versions from the
package index and runs two editions there.
"""

from __future__ import annotations

import hashlib
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

from booktools import fresh_venv, install_cell
from booktools.chapters import chapter_notebooks, chapter_sources
from booktools.wheel import build_wheel, wheel_inputs, wheel_sha256

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "chapters" / "00_prologue.ipynb"
WHEEL_RE = re.compile(
    r'SITE = "(?P<site>[^"]+)"\n\s*WHEEL = SITE \+ "(?P<path>[^"]+)"\n\s*SHA256 = "(?P<sha>[0-9a-f]{64})"'
)


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
    sources = chapter_sources(ROOT)
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
def test_every_install_cell_pins_this_package_build_on_the_configured_site(path):
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    site = _site_address()
    sha = wheel_sha256(ROOT)
    expected = f"{site}packages/{sha[:16]}/icl_book-{version}-py3-none-any.whl"
    name, cell = path.relative_to(ROOT), _first_code_cell(path)
    m = WHEEL_RE.search(cell)
    assert m, f"{name}: the first code cell is not the install cell"
    fix = "run `python -m booktools.editions install-cells` and `make editions`"
    assert (m["site"] + m["path"], m["sha"]) == (expected, sha), (
        f"{name} installs {m['site'] + m['path']} ({m['sha'][:16]}), not the wheel of the package as "
        f"it is now ({expected}): {fix}"
    )
    assert cell == install_cell.install_cell(ROOT), (
        f"{name}: not the install cell of booktools.install_cell (edited by hand, or older): {fix}"
    )
    guard = cell.index('try:\n    importlib.import_module("icl_book")\nexcept ImportError:')
    assert guard < cell.index("pip = "), f"{name}: pip must run only when the import fails"


def test_install_cell_regex_can_fail():
    cell = install_cell.install_cell(ROOT)
    m = WHEEL_RE.search(cell)
    assert m["path"].endswith(".whl") and m["site"] == _site_address()
    assert WHEEL_RE.search(cell.replace("WHEEL = SITE +", "WHEEL =")) is None
    assert WHEEL_RE.search(re.sub(r'SHA256 = "\w+"', 'SHA256 = ""', cell)) is None
    old = '%pip install -q "icl-book @ git+https://github.com/icl-book/icl-book@main"'
    assert WHEEL_RE.search(old) is None


def test_the_wheel_build_is_reproducible(tmp_path):
    """The pin holds only if the site's wheel, built later on another machine, has the same bytes: two
    builds of the same sources, with other file times and modes, give the same SHA-256."""

    copy = tmp_path / "root"
    for path in wheel_inputs(ROOT):
        target = copy / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        target.chmod(0o600)
        os.utime(target, (1.9e9, 1.9e9))
    one = build_wheel(ROOT, tmp_path / "one")
    two = build_wheel(copy, tmp_path / "two")
    digests = {hashlib.sha256(w.read_bytes()).hexdigest() for w in (one, two)}
    assert digests == {wheel_sha256(ROOT)}
    (copy / "icl_book" / "__init__.py").write_text(
        (copy / "icl_book" / "__init__.py").read_text() + "\n# changed\n"
    )
    changed = build_wheel(copy, tmp_path / "three")
    assert hashlib.sha256(changed.read_bytes()).hexdigest() not in digests


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
    # pip runs inside the kernel (the cell calls sys.executable -m pip), so it is linked in too.
    venv = fresh_venv.create(
        tmp_path / "fresh", ROOT, package=False, dependencies=torch,
        extra=("ipykernel", "nbclient", "pip"),
    )  # fmt: skip
    probe = (
        "import importlib.util as u; print(u.find_spec('icl_book'), u.find_spec('torch') is None)"
    )
    found = _run([str(venv.python), "-c", probe], env=venv.env, cwd=venv.workdir).stdout.split()
    assert found == ["None", str(not torch)], found
    return venv.python, venv.env, venv.site, venv.wheel


def _run_cells(tmp_path, py, env, sources):
    """Run code cells in the venv's kernel until the first error; return the cells."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    run = tmp_path / "cells"
    run.mkdir(parents=True)
    nbformat.write(nb, run / "in.ipynb")
    (run / "runner.py").write_text(CELLS_RUNNER)
    _run([str(py), "runner.py", "in.ipynb", "out.ipynb"], env=env, cwd=run, timeout=600)
    return nbformat.read(run / "out.ipynb", as_version=4).cells


def _streams(cell, name):
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == name)


def _empty(tmp_path):
    """A site folder without any wheel."""
    (tmp_path / "empty").mkdir(parents=True)
    return tmp_path / "empty"


def _served_cell(url, **replace):
    """The install cell with the site at ``url`` (and ``replace``: name → new text of a line ``NAME =``)."""
    cell = install_cell.install_cell(ROOT)
    served = cell.replace(_site_address(), f"{url}/")
    assert served != cell
    for name, value in replace.items():
        served, n = re.subn(rf"^{name} = .*$", f"{name} = {value}", served, flags=re.M)
        assert n == 1, name
    return served


def _site_with(tmp_path, data: bytes):
    """A site folder serving ``data`` where the install cell looks for the wheel."""
    site = tmp_path / "site"
    wheel = site / install_cell.wheel_path(ROOT)
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(data)
    return site


def test_install_cell_does_nothing_when_the_package_is_present(tmp_path):
    """In the toolchain's kernel (icl_book installed) and pointed at a site with no wheel: no output, no
    error, so it never tried pip. With a tested range that excludes this NumPy: one line saying so."""
    import numpy
    from nbclient import NotebookClient

    from .browser import serve

    with serve(tmp_path) as url:
        nb = nbformat.v4.new_notebook()
        narrow = '{"numpy": ("1.24", "1.26"), "torch": ("2.3", "99.0")}'
        nb.cells = [
            nbformat.v4.new_code_cell(_served_cell(url)),
            nbformat.v4.new_code_cell(_served_cell(url, TESTED=narrow)),
        ]
        NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    assert nb.cells[0].outputs == []
    assert [o.output_type for o in nb.cells[1].outputs] == ["stream"], nb.cells[1].outputs
    assert _streams(nb.cells[1], "stdout") == (
        f"Note: this runtime has numpy {numpy.__version__}; the book was tested with 1.24 to 1.26.\n"
    )


def test_install_cell_installs_the_pinned_wheel_and_imports_it(tmp_path):
    from .browser import serve

    py, env, site, wheel = _venv_without_the_package(tmp_path)
    assert wheel.read_bytes() == publish_wheel_bytes(
        tmp_path
    )  # the venv's wheel is the pinned build
    served = _site_with(tmp_path, wheel.read_bytes())
    with serve(served) as url:
        cells = _run_cells(
            tmp_path, py, env, [_served_cell(url), "import icl_book\nprint(icl_book.__file__)"]
        )
    install, after = cells
    assert [o.output_type for o in install.outputs] == ["stream"], install.outputs
    assert _streams(install, "stdout") == (
        f"Installing the book's package icl_book from {url}/{install_cell.wheel_path(ROOT)}\n"
    )
    module = Path(_streams(after, "stdout").strip()).resolve()
    assert module.is_relative_to(site.resolve()), module


def publish_wheel_bytes(tmp_path) -> bytes:
    """The wheel ``make publish`` puts on the site (its SHA-256 is the one every cell names)."""
    wheel = build_wheel(ROOT, tmp_path / "published")
    assert wheel_sha256(ROOT) == hashlib.sha256(wheel.read_bytes()).hexdigest()
    return wheel.read_bytes()


def _stopped(cells) -> str:
    """The install cell stopped with InstallFailed shown as its message alone, and no later cell ran:
    returns the message."""
    install = cells[0]
    errors = [o for o in install.outputs if o.output_type == "error"]
    assert [e.ename for e in errors] == ["InstallFailed"], install.outputs
    message = errors[0].evalue
    assert errors[0].traceback == [message], "IPython must show the message alone"
    assert "\x1b" not in message and _streams(install, "stderr") == "", install.outputs
    assert all(c.get("execution_count") is None and not c.outputs for c in cells[1:]), (
        "the notebook went on after the failure"
    )
    return message


def test_a_failed_install_stops_with_one_clear_message_and_no_cascade(tmp_path):
    """In a venv without the package: the wheel missing from the site, a wheel whose SHA-256 is not the
    pinned one, and a wheel pip rejects each stop the cell with a plain message (no traceback, no pip
    dump, no colour codes) and no later cell runs. Then ICL_BOOK_WHEEL, naming the right wheel as a
    file while the site has none, installs it."""
    from .browser import serve

    py, env, site, wheel = _venv_without_the_package(tmp_path)
    later = ["from icl_book import hermite\nprint(hermite)", "print('end')"]
    runs = {}
    with serve(_empty(tmp_path)) as url:
        runs["missing"] = (
            url,
            _run_cells(tmp_path / "missing", py, env, [_served_cell(url), *later]),
        )
    tampered = wheel.read_bytes() + b"\0"
    with serve(_site_with(tmp_path / "tampered", tampered)) as url:
        runs["tampered"] = (url, _run_cells(tmp_path / "t", py, env, [_served_cell(url), *later]))
    broken = b"this is not a zip file"
    sha = hashlib.sha256(broken).hexdigest()
    with serve(_site_with(tmp_path / "broken", broken)) as url:
        cell = _served_cell(url, SHA256=f'"{sha}"')
        runs["broken"] = (url, _run_cells(tmp_path / "b", py, env, [cell, *later]))

    url, cells = runs["missing"]
    message = _stopped(cells)
    source = f"{url}/{install_cell.wheel_path(ROOT)}"
    assert message.startswith(f"Could not fetch the book's package from {source}\n"), message
    assert "404" in message and "run this cell again" in message and "ICL_BOOK_WHEEL" in message

    url, cells = runs["tampered"]
    message = _stopped(cells)
    assert message == (
        f"Refused {url}/{install_cell.wheel_path(ROOT)}: its SHA-256 is "
        f"{hashlib.sha256(tampered).hexdigest()}, not {wheel_sha256(ROOT)}."
    )
    assert _streams(cells[0], "stdout").count("\n") == 1  # "Installing ...": pip never ran

    url, cells = runs["broken"]
    message = _stopped(cells)
    head, reason = message.split("\n")
    assert head == "pip could not install the book's package icl_book:"
    assert reason.startswith("ERROR: ") and "icl_book-" in reason and "invalid" in reason, reason

    # The override: the right wheel as a local file; the site (empty) is never asked.
    with serve(_empty(tmp_path / "override")) as url:
        cells = _run_cells(
            tmp_path / "o", py, {**env, "ICL_BOOK_WHEEL": str(wheel)},
            [_served_cell(url), "import icl_book\nprint(icl_book.__file__)"],
        )  # fmt: skip
    assert _streams(cells[0], "stdout") == f"Installing the book's package icl_book from {wheel}\n"
    assert [o.output_type for o in cells[0].outputs] == ["stream"], cells[0].outputs
    assert Path(_streams(cells[1], "stdout").strip()).resolve().is_relative_to(site.resolve())


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
    fresh = fresh_venv.create(tmp_path / "fresh", ROOT, extra=("ipykernel", "nbclient"))
    py, env, venv, site = fresh.python, fresh.env, fresh.python.parents[1], fresh.site
    # Execute the chapter there, with a last cell reporting where the package came from.
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
def test_wheel_in_fresh_venv_runs_the_prologue_edition(tmp_path):
    """The prologue's edition as Colab opens it, in a fresh venv with nothing the wheel does not
    declare (no myst-nb either): it runs to the end and every check says correct."""
    edition = ROOT / "notebooks" / "00_prologue.ipynb"
    code = _run_in_fresh_venv(tmp_path, edition)
    printed = "".join(o.get("text", "") for c in code for o in c.outputs)
    checks = re.findall(r"^(\w+-ex\d+): correct$", printed, re.M)
    source = nbformat.read(edition, as_version=4)
    expected = re.findall(r"check_(\w+?)_ex(\d+)\(", "".join(c.source for c in source.cells))
    assert "prologue-ex1" in checks and len(checks) == len(expected), (checks, expected)


# Every chapter runs in such a fresh venv in make test's 1-thread nbval stage (Makefile,
# booktools/fresh_venv.py), where nbval also compares every output: the student edition with the
# chapter's solutions interleaved (booktools/student_run.py), and an edition's code cells are its
# chapter's apart from the solution title comments (tests/test_editions.py), so that stage is the run of
# every edition, and of every student edition, in a student's runtime. Its venv has myst-nb too (for glue's records); the chapters'
# imports are checked against what the wheel declares statically, below.
def test_the_one_thread_nbval_stage_runs_every_chapter_in_a_fresh_venv():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k != "MFLAGS"}
    dry = _run(["make", "-n", "--no-print-directory", "nbval-1thread"], cwd=ROOT, env=env).stdout
    build, notebooks, run = dry.split("\n", 2)
    assert re.fullmatch(r"\S+/python -m booktools\.fresh_venv (\S+) --link myst-nb", build), build
    folder = build.split()[3]
    # every chapter, as booktools.student_run lays it out (the student's Run all and the chapter)
    assert re.fullmatch(r"\S+/python -m booktools\.student_run (\S+)", notebooks), notebooks
    assert f"JUPYTER_PATH={ROOT / folder}/jupyter" in run, run
    assert f"--nbval-kernel-name {fresh_venv.KERNEL} " in run, run
    assert "--nbval " in run and run.rstrip().endswith(f"{notebooks.split()[3]}/*.ipynb"), run


def _declared_closure():
    """Every distribution the wheel's requirements pull in, and a kernel's (IPython)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [Requirement(r).name for r in project["dependencies"]]
    return set(fresh_venv.closure([*names, "ipykernel"]))


def _undeclared_imports(source: str, allowed: set[str]) -> list[str]:
    """Top-level modules ``source`` imports that are neither the standard library, ``icl_book`` nor
    provided by a distribution in ``allowed``."""
    import ast

    from booktools import myst

    code = "\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!")))
    modules = set()
    for node in ast.walk(myst.parse_python(code)):
        if isinstance(node, ast.Import):
            modules |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules.add(node.module.split(".")[0])
    provided = metadata.packages_distributions()
    return sorted(
        m
        for m in modules - set(sys.stdlib_module_names) - {"icl_book"}
        if not {canonicalize_name(d) for d in provided.get(m, [])} & allowed
    )


@pytest.mark.parametrize("path", chapter_notebooks(ROOT), ids=lambda p: p.stem)
def test_chapters_import_only_what_the_wheel_declares(path):
    nb = nbformat.read(path, as_version=4)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert _undeclared_imports(source, _declared_closure()) == []


def test_import_scan_can_fail():
    allowed = _declared_closure()
    assert _undeclared_imports("import numpy as np\nfrom scipy import stats", allowed) == []
    assert _undeclared_imports("%matplotlib inline\nimport sphinx.util, IPython", allowed) == [
        "sphinx"
    ]
