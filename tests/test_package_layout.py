"""The layout of ``booktools`` and ``icl_book`` (issue 31): no import cycle, every module mapped.

Imports inside functions count: a deferred import is how the grader once imported the assignment
builder that imports the grader. The graph is read from the source (``ast``), so a cycle fails here
whether or not Python happens to resolve it at run time.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: modules of the same package it imports}``, without a package's edges to and from its
    own ``__init__`` (the re-export pattern, not a cycle between two modules' jobs)."""
    files = {_module_name(p, root): p for p in (root / package).rglob("*.py")}
    graph = {}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        base = name.split(".") if is_pkg else name.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                stem = base[: len(base) - node.level + 1] if node.level else []
                mod = ".".join([*stem, node.module] if node.module else stem)
                targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
            else:
                continue
            found |= {t for t in targets if t in files and t != name}
        graph[name] = {t for t in found if not _is_package_init_edge(name, t)}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def _is_package_init_edge(a: str, b: str) -> bool:
    # a package's __init__ importing its own submodules, and those importing siblings through the
    # package, is the usual re-export pattern, not a cycle between two modules' jobs
    return b.startswith(a + ".") or a.startswith(b + ".")


@pytest.mark.parametrize("package", ["booktools", "icl_book"])
def test_no_import_cycle(package):
    cycle = find_cycle(import_graph(package))
    assert cycle is None, " -> ".join(cycle)


def test_a_cycle_is_found():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_deferred_imports(tmp_path):
    pkg = tmp_path / "demo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "one.py").write_text("from demo import two\n")
    (pkg / "two.py").write_text("def f():\n    from demo.one import g\n")
    graph = import_graph("demo", tmp_path)
    assert graph["demo.one"] == {"demo.two"} and graph["demo.two"] == {"demo.one"}
    assert find_cycle(graph) == ["demo.one", "demo.two", "demo.one"]


@pytest.mark.parametrize("package", ["booktools", "icl_book"])
def test_the_package_docstring_maps_every_module(package):
    # each package's __init__ says in one line what each of its modules is for
    doc = importlib.import_module(package).__doc__
    modules = sorted(
        p.stem for p in (ROOT / package).glob("*.py") if not p.stem.startswith("_")
    ) + sorted(p.name for p in (ROOT / package).iterdir() if (p / "__init__.py").is_file())
    missing = [m for m in modules if f"``{m}``" not in doc and f"icl_book.{m}`" not in doc]
    assert missing == [], f"{package}/__init__.py does not map {missing}"


def test_one_chapter_registry():
    # _toc.yml is the list of chapters; the tools that keep per-chapter data (the assignments'
    # objectives and exercise prefixes) must cover exactly its chapters, in its order
    from booktools import assignments, chapters

    stems = chapters.chapter_stems(ROOT)
    assert stems and all((ROOT / "chapters" / f"{s}.md").is_file() for s in stems)
    assert [c.stem for c in assignments.CHAPTERS] == stems
    assert all(c.title for c in assignments.CHAPTERS)  # each source has its "# " title
