"""Authoring and build tools of the book (not installed with ``icl_book``; run from a clone).

Each module is a command run from the repository root, ``python -m booktools.<module> ...``, and takes
the repository (``--root``, default: found from the current directory) and other paths as arguments;
nothing here locates the repository from an installed package.

- ``editions``: the plain-notebook editions ``notebooks/NN_slug.ipynb`` that Colab and Jupyter open
  (MyST resolved to the book's numbers, macros expanded, solutions collapsed) and their staleness check.
- ``sphinx_colab``: a Sphinx extension that points each chapter page's Colab button at its edition.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["find_root"]


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
