"""The layout of ``booktools`` and ``icl_book``: no import cycle, every module mapped.

Imports inside functions count: a deferred import is how the grader once imported the assignment
builder that imports the grader. The graph is read from the source (``ast``), so a cycle fails here
whether or not Python happens to resolve it at run time. Importing ``a.b.c`` runs ``a/b/__init__.py``
first, so an import of a module is also an edge to each package above it (except the importer's own
packages, which are always imported before it), and a package's ``__init__`` importing its own modules
is an edge like any other: re-exporting ``assignments.cli.main`` from ``booktools.assignments`` would
close ``assignments -> assignments.cli -> grading.batch -> assignments``.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _packages_above(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:k]) for k in range(1, len(parts))}


def import_graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: modules of the same package it imports}``.

    An import of the module ``a.b.c`` is an edge to ``a.b.c`` and to the packages ``a.b`` and ``a``,
    whose ``__init__`` runs first, except to the importer's own packages: they are imported before
    it (a package's ``__init__`` importing its modules is the re-export pattern). An import of a
    *name* from a package (``from a.b import f``, ``f`` not a module) needs that ``__init__`` to have
    run to its end: an edge even to the importer's own package.
    """
    files = {_module_name(p, root): p for p in (root / package).rglob("*.py")}
    graph = {}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        base = name.split(".") if is_pkg else name.split(".")[:-1]
        modules, names_from = set(), set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                stem = base[: len(base) - node.level + 1] if node.level else []
                mod = ".".join([*stem, node.module] if node.module else stem)
                subs = {f"{mod}.{a.name}" for a in node.names} & set(files)
                modules |= subs
                if len(subs) < len(node.names):
                    names_from.add(mod)
        implicit = {m for t in modules | names_from for m in {t} | _packages_above(t)}
        needed = (implicit - _packages_above(name)) | names_from
        graph[name] = {m for m in needed if m in files and m != name}
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


@pytest.mark.parametrize("package", ["booktools", "icl_book"])
def test_no_import_cycle(package):
    cycle = find_cycle(import_graph(package))
    assert cycle is None, " -> ".join(cycle)


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` with each module replaced by its top-level part: a subpackage
    (``booktools.assignments.release`` -> ``booktools.assignments``) or a top-level module."""

    def node(module: str) -> str:
        return ".".join(module.split(".")[:2])

    out: dict[str, set[str]] = {}
    for module, imported in graph.items():
        out.setdefault(node(module), set()).update(node(m) for m in imported)
    return {name: edges - {name} for name, edges in out.items()}


@pytest.mark.parametrize("package", ["booktools", "icl_book"])
def test_no_import_cycle_between_subpackages(package):
    # a cycle of modules through two subpackages (the builder importing the grader for a constant,
    # the grader importing the builder) ties them together even when no module cycle closes:
    # what both need lives in a module of its own (booktools.release_format, booktools.chapters)
    cycle = find_cycle(package_graph(import_graph(package)))
    assert cycle is None, " -> ".join(cycle)


def test_a_cycle_between_subpackages_is_found(tmp_path):
    # asg.release takes a constant of grading.grader, grading.batch takes the builder: no module
    # imports itself again, yet each subpackage needs the other
    files = {
        "demo/__init__.py": "",
        "demo/fmt.py": "KEY = 'partial_credit'\n",
        "demo/asg/__init__.py": "",
        "demo/asg/release.py": "from demo.grading.grader import KEY\n",
        "demo/grading/__init__.py": "",
        "demo/grading/grader.py": "KEY = 'partial_credit'\n",
        "demo/grading/batch.py": "def grade():\n    from demo.asg.release import build\n",
    }
    _write_tree(tmp_path, files)
    graph = import_graph("demo", tmp_path)
    assert find_cycle(graph) is None
    assert find_cycle(package_graph(graph)) == ["demo.asg", "demo.grading", "demo.asg"]
    # the constant in a module both import: the subpackages no longer need each other both ways
    (tmp_path / "demo/asg/release.py").write_text("from demo.fmt import KEY\n")
    assert find_cycle(package_graph(import_graph("demo", tmp_path))) is None


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


def _write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_a_cycle_through_a_package_init_is_found(tmp_path):
    # the cycle a re-export of the assignments' command line would make: importing
    # demo.asg.course runs demo/asg/__init__.py, which imports the command line, which imports the
    # grader, which imports demo.asg.course
    _write_tree(
        tmp_path,
        {
            "demo/__init__.py": "",
            "demo/asg/__init__.py": "",
            "demo/asg/course.py": "CHAPTERS = ()\n",
            "demo/asg/cli.py": "from demo.grading import batch\n",
            "demo/grading/__init__.py": "",
            "demo/grading/batch.py": "from .. import find_root\nfrom ..asg.course import CHAPTERS\n",
        },
    )
    graph = import_graph("demo", tmp_path)
    assert graph["demo.grading.batch"] == {"demo", "demo.asg", "demo.asg.course"}
    assert graph["demo.asg.cli"] == {"demo.grading", "demo.grading.batch"}
    assert find_cycle(graph) is None
    (tmp_path / "demo/asg/__init__.py").write_text("from demo.asg.cli import main\n")
    cycle = find_cycle(import_graph("demo", tmp_path))
    assert cycle == ["demo.asg", "demo.asg.cli", "demo.grading.batch", "demo.asg"]


def test_a_name_from_the_modules_own_package_is_a_cycle_a_module_is_not(tmp_path):
    # demo/pkg/__init__.py imports demo.pkg.a; a takes a module of its package (fine: the re-export
    # pattern) or a name the __init__ defines, which exists only once the __init__ has run to its end
    files = {
        "demo/__init__.py": "",
        "demo/pkg/__init__.py": "from demo.pkg.a import f\nLIMIT = 1\n",
        "demo/pkg/b.py": "",
        "demo/pkg/a.py": "from demo.pkg import b\n\ndef f():\n    return b\n",
    }
    _write_tree(tmp_path, files)
    assert find_cycle(import_graph("demo", tmp_path)) is None
    (tmp_path / "demo/pkg/a.py").write_text("from . import LIMIT\n\ndef f():\n    return LIMIT\n")
    assert find_cycle(import_graph("demo", tmp_path)) == ["demo.pkg", "demo.pkg.a", "demo.pkg"]


def _packages(package: str) -> list[str]:
    """``package`` and its subpackages (folders with an ``__init__.py``), as dotted names."""
    folder = ROOT / package
    return [package] + sorted(
        _module_name(p.parent, ROOT) for p in folder.rglob("__init__.py") if p.parent != folder
    )


@pytest.mark.parametrize("package", ["icl_book", *_packages("booktools")])
def test_the_package_docstring_maps_every_module(package):
    # each package's __init__ says in one line what each of its modules and subpackages is for
    doc = importlib.import_module(package).__doc__
    folder = ROOT.joinpath(*package.split("."))
    modules = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")) + sorted(
        p.name for p in folder.iterdir() if (p / "__init__.py").is_file()
    )
    missing = [m for m in modules if f"``{m}``" not in doc and f"icl_book.{m}`" not in doc]
    assert missing == [], f"{package.replace('.', '/')}/__init__.py does not map {missing}"


_MAP_LINE = re.compile(r"^- (``\w+``(?:, ``\w+``)*): (.+)$")


def _docstring_map(package: str) -> list[tuple[str, str]]:
    """The ``- ``name``: job`` lines of a package's docstring (a line may wrap), names in Markdown."""
    entries: list[list[str]] = []
    for line in importlib.import_module(package).__doc__.splitlines():
        if m := _MAP_LINE.match(line):
            entries.append([m[1].replace("``", "`"), m[2].replace("``", "`")])
        elif entries and line.startswith("  ") and line.strip():
            entries[-1][1] += " " + line.strip().replace("``", "`")
        elif entries and not line.strip():
            break
    return [(names, job) for names, job in entries]


def booktools_map() -> list[str]:
    """The map of ``booktools`` as CONTRIBUTING.md has it: ``booktools/__init__.py``'s lines, each
    subpackage's own lines under it (names prefixed with the subpackage)."""
    lines = []
    for names, job in _docstring_map("booktools"):
        lines.append(f"- {names}: {job}")
        name = names.strip("`")
        if (ROOT / "booktools" / name / "__init__.py").is_file():
            for sub_names, sub_job in _docstring_map(f"booktools.{name}"):
                prefixed = sub_names.replace("`", "").split(", ")
                joined = ", ".join(f"`{name}.{n}`" for n in prefixed)
                lines.append(f"  - {joined}: {sub_job}")
    return lines


def test_contributing_maps_booktools_as_its_docstrings_do():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("\n## The tools: `booktools/`\n", 1)[1].split("\n## ", 1)[0]
    listed = [line for line in section.splitlines() if line.lstrip().startswith("- `")]
    assert listed == booktools_map()
    # every module and subpackage of booktools is in the map
    names = {n.strip("`") for line in listed for n in re.findall(r"`[\w.]+`(?=[:,])", line)}
    modules = {
        _module_name(p, ROOT / "booktools").removesuffix(".__init__")
        for p in (ROOT / "booktools").rglob("*.py")
        if not p.name.startswith("_") or p.name == "__init__.py"
    } - {""}
    assert modules - names == set()


def test_one_chapter_registry():
    # _toc.yml is the list of chapters; the course's data of each (the assignments' objectives and
    # exercise prefixes, booktools/course.yml) covers exactly its chapters, in its order
    from booktools import chapters

    stems = chapters.chapter_stems(ROOT)
    assert stems and all((ROOT / "chapters" / f"{s}.md").is_file() for s in stems)
    course = chapters.course_chapters(ROOT)
    assert [c.stem for c in course] == stems
    assert all(c.title for c in course)  # each source has its "# " title


def test_assignments_reexports_exactly_its_modules_public_names():
    # callers write ``from booktools import assignments as A; A.student_notebook(nb)``: the package
    # re-exports every public name of its builder modules, the same objects, and nothing else
    from booktools import assignments
    from booktools.assignments import instructors, release

    modules = (release, instructors)
    names = [n for m in modules for n in m.__all__]
    assert sorted(assignments.__all__) == sorted(names)
    for m in modules:
        for n in m.__all__:
            assert getattr(assignments, n) is getattr(m, n), n


_ICL_MAP_LINE = re.compile(
    r"^- (?::mod:`(icl_book\.\w+)`|``(icl_book\.\w+)`` \(private\)) -- (.+)$"
)


def test_contributing_maps_icl_book_as_its_docstring_does():
    doc = importlib.import_module("icl_book").__doc__
    expected = [
        f"- `{m[1] or m[2]}`{' (private)' if m[2] else ''}: {m[3].replace('``', '`')}"
        for m in map(_ICL_MAP_LINE.match, doc.splitlines())
        if m
    ]
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("\n## The package: `icl_book/`\n", 1)[1].split("\n## ", 1)[0]
    listed = [line for line in section.splitlines() if line.startswith("- `")]
    assert listed == expected and len(expected) >= 10
