"""The book's chapters, one registry: the numbered chapters ``chapters/NN_slug`` that ``_toc.yml`` lists,
in its order, and their titles (each source's first ``# `` heading).

Every tool that walks the chapters (execution and pair checks, editions, assignments, the test suite)
asks here, so a chapter added to the table of contents is seen by all of them.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from booktools import find_root

__all__ = ["chapter_stems", "chapter_sources", "chapter_notebooks", "chapter_title"]

_NUMBERED = re.compile(r"^chapters/(?P<stem>\d\d_[A-Za-z0-9_]+)$")


def _toc_files(node) -> list[str]:
    """Every ``file:`` of a ``_toc.yml`` tree, in order."""
    out = []
    if isinstance(node, dict):
        if isinstance(node.get("file"), str):
            out.append(node["file"])
        for value in node.values():
            if isinstance(value, (list, dict)):
                out += _toc_files(value)
    elif isinstance(node, list):
        for item in node:
            out += _toc_files(item)
    return out


def chapter_stems(root: str | Path | None = None) -> list[str]:
    """``["00_prologue", "01_hermite", ...]``: the numbered chapters of ``_toc.yml``, in book order."""
    root = find_root(root)
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    files = [f.removesuffix(".md").removesuffix(".ipynb") for f in _toc_files(toc)]
    return [m["stem"] for f in files if (m := _NUMBERED.match(f))]


def chapter_sources(root: str | Path | None = None) -> list[Path]:
    """The chapter sources ``chapters/NN_slug.md``, in book order."""
    root = find_root(root)
    return [root / "chapters" / f"{stem}.md" for stem in chapter_stems(root)]


def chapter_notebooks(root: str | Path | None = None) -> list[Path]:
    """The executed chapters ``chapters/NN_slug.ipynb``, in book order."""
    root = find_root(root)
    return [root / "chapters" / f"{stem}.ipynb" for stem in chapter_stems(root)]


def chapter_title(source: str | Path) -> str:
    """A chapter's title: the first ``# `` heading of its ``.md`` source."""
    text = Path(source).read_text(encoding="utf-8")
    if text.startswith("---"):  # the Jupytext front matter
        text = text[text.index("\n---", 3) + 4 :]
    match = re.search(r"^# (.+?)\s*$", text, re.MULTILINE)
    if match is None:
        raise ValueError(f"{source} has no '# ' title heading")
    return match.group(1)
