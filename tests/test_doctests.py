"""Every docstring example of the package runs and prints what it says (the API page shows them)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import icl_book

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(icl_book.__path__, prefix="icl_book.")
    if not info.name.rsplit(".", 1)[-1].startswith("_")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def _missing_files(text: str, root) -> list[str]:
    import re

    names = set(re.findall(r"[A-Za-z0-9_./-]+\.(?:py|md|ipynb|json|npz|toml|yml|cfg)\b", text))
    return sorted(n for n in names if not ((root / n).exists() or (root / "icl_book" / n).exists()))


def _docstrings(source: str) -> str:
    import ast

    tree = ast.parse(source)
    nodes = [tree] + [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    return "\n".join(ast.get_docstring(n) or "" for n in nodes)


def test_no_docstring_cites_a_file_the_repository_lacks(root):
    sources = sorted((root / "icl_book").rglob("*.py"))
    missing = {p.name: _missing_files(_docstrings(p.read_text()), root) for p in sources}
    assert {k: v for k, v in missing.items() if v} == {}


def test_the_file_citation_check_can_fail(root):
    assert _missing_files("see ``SCIENCE.md`` and chapters/intro.md", root) == ["SCIENCE.md"]
