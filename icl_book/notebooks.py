"""Execute the chapters and keep each ``NN_slug.md`` / ``NN_slug.ipynb`` pair in step.

``python -m icl_book.notebooks execute [PATH.md ...]`` regenerates the executed notebooks (``make execute``);
``python -m icl_book.notebooks check-pairs`` fails on a missing or stale ``.ipynb`` (``make test``).

Executed notebooks carry no run-to-run noise: no timings, no execution metadata, and cell ids derived from
the cell's position, so re-executing an unchanged chapter rewrites an identical file.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["chapter_sources", "execute_chapter", "pair_problems", "cells_signature"]

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"


def chapter_sources(root: Path = ROOT) -> list[Path]:
    """The numbered chapter sources ``chapters/NN_*.md``, in book order."""
    return sorted((Path(root) / "chapters").glob("[0-9][0-9]_*.md"))


def cells_signature(nb) -> list[tuple[str, str, tuple[str, ...]]]:
    """What must agree between a ``.md`` and its ``.ipynb``: cell type, source and tags of every cell."""
    return [
        (cell.cell_type, cell.source.strip(), tuple(cell.get("metadata", {}).get("tags", [])))
        for cell in nb.cells
    ]


def _stable(nb):
    """Remove run-to-run noise from an executed notebook (in place) and return it."""
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:03d}"
        cell.get("metadata", {}).pop("execution", None)
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                output.get("metadata", {}).pop("execution", None)
    nb.metadata.pop("widgets", None)
    return nb


def execute_chapter(md_path: Path, timeout: int = 900) -> Path:
    """Execute ``md_path`` top to bottom in a fresh kernel and write the paired ``.ipynb`` beside it."""
    import jupytext
    from nbclient import NotebookClient

    md_path = Path(md_path).resolve()
    if md_path.suffix != ".md" or not md_path.exists():
        raise ValueError(f"md_path must be an existing chapter source NN_slug.md, got {md_path}")
    nb = jupytext.read(md_path)
    # A backend forced through the environment makes inline figures vanish (PITFALLS.md).
    os.environ.pop("MPLBACKEND", None)
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(md_path.parent)}},
    )
    client.execute()
    _stable(nb)
    out = md_path.with_suffix(".ipynb")
    jupytext.write(nb, out, fmt="ipynb")
    return out


def pair_problems(root: Path = ROOT) -> list[str]:
    """One message per chapter whose ``.ipynb`` is missing, unexecuted or out of step with its ``.md``."""
    import jupytext

    problems = []
    for md in chapter_sources(root):
        nb_path = md.with_suffix(".ipynb")
        if not nb_path.exists():
            problems.append(f"{nb_path.name} is missing: run `make execute` and commit it")
            continue
        md_nb, ipynb = jupytext.read(md), jupytext.read(nb_path)
        if cells_signature(md_nb) != cells_signature(ipynb):
            problems.append(
                f"{nb_path.name} is stale (its cells differ from {md.name}): run `make execute` and commit it"
            )
            continue
        unexecuted = [
            i
            for i, c in enumerate(ipynb.cells)
            if c.cell_type == "code" and c.get("execution_count") is None
        ]
        if unexecuted:
            problems.append(
                f"{nb_path.name} has unexecuted cells {unexecuted[:5]}: run `make execute`"
            )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icl_book.notebooks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("execute", help="execute chapters and write their .ipynb")
    ex.add_argument("paths", nargs="*", type=Path, help="chapter sources (default: all)")
    sub.add_parser("check-pairs", help="fail when a chapter's .ipynb is missing or stale")
    args = parser.parse_args(argv)
    if args.command == "execute":
        for md in args.paths or chapter_sources():
            print(f"executing {md} ...", flush=True)
            print(f"  wrote {execute_chapter(md)}", flush=True)
        return 0
    problems = pair_problems()
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"{len(chapter_sources())} chapter pairs in step")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
