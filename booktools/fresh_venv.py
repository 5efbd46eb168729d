"""A fresh virtual environment with the package's wheel and nothing it does not declare, and its kernel.

It is what a student's runtime holds after a chapter's install cell: ``icl_book`` from its wheel, the
wheel's dependencies, a Jupyter kernel, and no repository. ``make test`` executes every chapter in it
(the 1-thread nbval stage, Makefile), so a chapter that imports an undeclared package, or needs a file
the wheel does not ship, fails there; ``tests/test_colab_path.py`` builds its venvs with these functions.

``python -m booktools.fresh_venv FOLDER [--link DIST ...]`` builds one in ``FOLDER`` (replacing it) and
prints the ``JUPYTER_PATH`` under which its kernel, named :data:`KERNEL`, is found. ``make test`` links
``myst-nb`` in too: the chapters' stored outputs hold the records of ``icl_book.book.glue``, which it
writes only where ``myst_nb`` is importable (on Colab it just returns the text). ``myst-nb`` brings
neither NumPy, SciPy, Matplotlib nor torch, and ``tests/test_colab_path.py`` checks statically that the
chapters import nothing the wheel does not declare.

The wheel's dependencies (the transitive closure of its ``Requires-Dist``, plus ipykernel to run a kernel)
are *linked* from the pinned toolchain instead of installed again: the venv holds exactly what the wheel
declares, ``pip check`` verifies the requirements, and it takes seconds instead of minutes. The kernel
starts in an empty folder, as Colab's ``/content``: a chapter that reads a file beside it fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from booktools import add_root_option, find_root
from booktools.wheel import build_wheel

__all__ = ["KERNEL", "FreshVenv", "closure", "create", "link_distributions", "wheel_requirements"]

KERNEL = "icl-fresh"
# The kernel's launcher: start in the empty folder given first, then run ipykernel as `-m` would.
_LAUNCH = (
    "import os, runpy, sys; os.chdir(sys.argv.pop(1)); "
    "runpy.run_module('ipykernel_launcher', run_name='__main__', alter_sys=True)"
)
# Variables of the caller that would put other packages in front of the venv's own (or force a
# matplotlib backend): left out of `env`, and set empty in the kernel's spec, which a kernel started by
# another program (nbval) gets on top of that program's environment. Python ignores them when empty.
_LEAKING = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "MPLBACKEND")


@dataclass(frozen=True)
class FreshVenv:
    """A venv made by :func:`create`: its ``python``, its ``site`` folder, the ``wheel`` built for it,
    ``workdir`` (the empty folder its kernel starts in), ``jupyter_path`` (its kernel's spec is
    ``jupyter_path/kernels/KERNEL``) and ``env``, the environment to run it and its kernel with."""

    python: Path
    site: Path
    wheel: Path
    workdir: Path
    jupyter_path: Path
    env: dict


def closure(names) -> dict:
    """Distributions of this environment needed by ``names``, following ``Requires-Dist`` (no extras)."""
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


def link_distributions(dists: dict, site: Path) -> None:
    """Symlink every top-level file or folder of ``dists`` (from :func:`closure`) into ``site``."""
    for dist in dists.values():
        base = Path(dist.locate_file(""))
        for f in dist.files or []:
            top = f.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue
            src, dst = base / top, site / top
            if src.exists() and not dst.exists():
                dst.symlink_to(src, target_is_directory=src.is_dir())


def wheel_requirements(wheel: Path) -> list[str]:
    """The distributions the wheel's ``Requires-Dist`` names (without extras)."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    requires = [
        Requirement(ln.split(":", 1)[1].strip())
        for ln in text.splitlines()
        if ln.startswith("Requires-Dist:")
    ]
    return [r.name for r in requires if r.marker is None or r.marker.evaluate({"extra": ""})]


def _run(cmd, **kw) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        command = " ".join(map(str, cmd[:4]))
        raise RuntimeError(f"{command} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return proc.stdout


def create(
    folder: str | os.PathLike,
    root: str | os.PathLike | None = None,
    *,
    package: bool = True,
    dependencies: bool = True,
    extra: tuple[str, ...] = ("ipykernel",),
) -> FreshVenv:
    """A fresh venv in ``folder`` (which must not exist) with its kernel :data:`KERNEL`.

    ``package``: install the wheel of ``root``'s package (built into ``folder/dist``); ``dependencies``:
    link the wheel's dependencies; ``extra``: further distributions of this environment to link (with
    their own dependencies; pip too when the venv must install something itself). Without the package
    the wheel is still built and returned, for a test that installs it from inside the kernel.
    """
    folder = Path(folder).resolve()
    if folder.exists():
        raise FileExistsError(f"folder must not exist yet: {folder}")
    root = find_root(root)
    wheel = build_wheel(root, folder / "dist")
    venv = folder / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in _LEAKING}
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run([str(python), "-c", purelib], env=env).strip())
    if package:  # the toolchain's pip installs into the venv (--python): no ensurepip needed
        _run(
            [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python),
             "-q", "install", "--no-deps", str(wheel)],
            env=env,
        )  # fmt: skip
    needed = [*(wheel_requirements(wheel) if dependencies else []), *extra]
    link_distributions(closure(needed), site)
    if package and dependencies:
        _run([sys.executable, "-m", "pip", "--python", str(python), "check"], env=env)

    workdir = folder / "work"
    workdir.mkdir()
    jupyter = folder / "jupyter"
    spec = jupyter / "kernels" / KERNEL
    spec.mkdir(parents=True)
    kernel = {
        "argv": [str(python), "-c", _LAUNCH, str(workdir), "-f", "{connection_file}"],
        "env": dict.fromkeys(_LEAKING, ""),
        "display_name": "icl-book fresh venv",
        "language": "python",
    }
    (spec / "kernel.json").write_text(json.dumps(kernel, indent=1))
    env.update(JUPYTER_PATH=str(jupyter), JUPYTER_DATA_DIR=str(folder / "jupyter-data"))
    return FreshVenv(python, site, wheel, workdir, jupyter, env)


def check_isolated(venv: FreshVenv) -> None:
    """Raise unless ``icl_book`` is imported from the venv's own site folder and the toolchain (jupytext,
    pytest, the repository) is invisible, from the folder the kernel starts in."""
    probe = (
        "import importlib.util as u, icl_book; print(icl_book.__file__); "
        "print([m for m in ('jupytext', 'pytest', 'booktools') if u.find_spec(m)])"
    )
    where, visible = _run(
        [str(venv.python), "-c", probe], env=venv.env, cwd=venv.workdir
    ).splitlines()
    if not Path(where).resolve().is_relative_to(venv.site.resolve()):
        raise RuntimeError(f"icl_book comes from {where}, not the fresh venv's {venv.site}")
    if visible != "[]":
        raise RuntimeError(f"the fresh venv sees the toolchain: {visible}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.fresh_venv", description=__doc__)
    parser.add_argument("folder", type=Path, help="where to build it (replaced)")
    add_root_option(parser)
    parser.add_argument(
        "--link", action="append", default=[], metavar="DIST", help="also link this distribution"
    )
    args = parser.parse_args(argv)
    if args.folder.exists():
        shutil.rmtree(args.folder)
    venv = create(args.folder, args.root, extra=("ipykernel", *args.link))
    check_isolated(venv)
    print(venv.jupyter_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
