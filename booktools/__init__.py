"""Authoring and build tools of the book (not installed with ``icl_book``; run from a clone).

Commands are ``python -m booktools.<module> ...``; every tool that reads the repository takes
``--root DIR`` (default: the repository the current directory is in, :func:`find_root`), except
``tables`` and ``train_study``, which read and write paths relative to the current directory (run
them from the repository root). The modules, one job each:

- ``chapters``: the book model: ``_toc.yml``'s chapters, their course data, their typed cells.
- ``notebooks``: execute the chapters; keep each ``NN_slug.md`` / ``.ipynb`` pair in step; figure index.
- ``editions``: the plain-notebook editions ``notebooks/NN_slug.ipynb`` that Colab and Jupyter open.
- ``book_index``: the built book's index: numbers, titles, anchors and addresses of its web pages.
- ``install_cell``: the Colab install cell every chapter opens with: the wheel it fetches and pins.
- ``myst``: what chapters say about exercises (check calls, labels, check modules, solution titles).
- ``assignments``: a chapter's student, instructor and nbgrader notebooks; the assignments' commands.
- ``grading``: the autograder: scores, sandbox, wire format, batch grading, report and gradebook.
- ``release_format``: the release's cell metadata, which the assignments write and the grader reads.
- ``notation``: the registry of the book's symbols (one symbol, one meaning).
- ``tables``: the stored sweep tables of chapters 3 and 4.
- ``explorer_data``: the theory explorer's data.
- ``train_study``: train, inspect and export the converged studies of chapters 5 and 6.
- ``sphinx``: the Sphinx extensions of the HTML and PDF builds.
- ``publish``: the published site in one folder; keeps the wheels of the site deployed before.
- ``wheel``: the package's wheel, built reproducibly, and its SHA-256 (what the install cells pin).
- ``pdf_log``: what the PDF's LaTeX log says went wrong (missing characters, undefined references, overfull boxes).
- ``fresh_venv``: a venv with the package's wheel and only what it declares, and its Jupyter kernel.
- ``student_run``: each chapter's student edition with its solutions interleaved (the 1-thread nbval stage).
- ``stages``, ``testcache``: ``make test``'s stages with their times, and its local cache of passes.

Each subpackage's ``__init__`` maps its own modules the same way.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["find_root", "add_root_option"]


def find_root(start: str | Path | None = None) -> Path:
    """The repository root: the nearest folder at or above ``start`` (default: the current directory)
    holding both ``_config.yml`` and ``_toc.yml``."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "_config.yml").is_file() and (folder / "_toc.yml").is_file():
            return folder
    raise FileNotFoundError(
        f"no book repository (a folder with _config.yml and _toc.yml) at or above {here}; "
        "run from the clone or pass --root"
    )


def add_root_option(parser: argparse.ArgumentParser) -> None:
    """Give a command line the ``--root DIR`` option of every tool that reads the repository
    (default ``None``: :func:`find_root` from the current directory)."""
    parser.add_argument(
        "--root", type=Path, default=None, help="the repository (default: found from cwd)"
    )
