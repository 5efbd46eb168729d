"""What the book's MyST chapters and their notebooks say about exercises: check calls and titles.

One place for the reading of a cell's Python that the book model (``booktools.chapters``), the
editions, the assignments and the grader share: which ``check_<chapter>_ex<N>`` a cell calls, the
exercise label of a check, the module a notebook imports its checks from, and the title line of a
collapsed solution cell. (The chapters' Markdown structure is the book model's.)
"""

from __future__ import annotations

import ast
import re
import threading

__all__ = [
    "parse_python",
    "SOLUTION_TITLE",
    "MAGIC_RE",
    "check_label",
    "check_calls",
    "check_call",
    "check_modules",
]

#: The first line of a solution code cell in the editions (Colab collapses a cell titled so).
SOLUTION_TITLE = "# @title Solution (click to show)"
#: IPython magics and shell escapes at the start of a line (commented out before ``ast.parse``).
MAGIC_RE = re.compile(r"^(\s*)([%!])", re.MULTILINE)

#: CPython 3.11's ast.parse is not thread-safe (SystemError: "AST constructor recursion depth
#: mismatch" when two threads parse at once: grade --jobs 2 scored a correct notebook 0 once).
_AST_LOCK = threading.Lock()


def parse_python(source: str) -> ast.Module:
    """``ast.parse(source)``, one thread at a time."""
    with _AST_LOCK:
        return ast.parse(source)


_CHECK_NAME_RE = re.compile(r"^check_(?P<short>[A-Za-z0-9_]+?)_ex(?P<n>\d+)$")
_CHECK_CALL_RE = re.compile(r"(?<![\w.])(?:\w+\.)?(check_[A-Za-z0-9_]+?_ex\d+)\s*\(")


def check_label(name: str) -> str | None:
    """``"check_hermite_ex2"`` -> ``"hermite-ex2"``; ``None`` for any other name."""
    m = _CHECK_NAME_RE.match(name)
    return f"{m['short']}-ex{int(m['n'])}" if m else None


def check_calls(source: str) -> list[str]:
    """Names of the ``check_<chapter>_ex<N>`` functions called in ``source`` (one entry per call)."""
    try:
        tree = parse_python(MAGIC_RE.sub(r"\1#", source))
    except SyntaxError:  # not Python: fall back to a textual scan (definitions excluded)
        return [
            m.group(1)
            for m in _CHECK_CALL_RE.finditer(source)
            if not source[: m.start()].rstrip().endswith("def")
        ]
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name and check_label(name):
                calls.append(name)
    return calls


def check_call(cell) -> str | None:
    """The check function a *check cell* calls (a code cell calling exactly one ``check_*_ex*``), else ``None``."""
    if cell.get("cell_type") != "code":
        return None
    calls = check_calls(cell.get("source", ""))
    return calls[0] if len(calls) == 1 else None


def check_modules(nb) -> dict[str, str]:
    """``{check name: module}`` for every ``from <module> import check_*`` in the notebook's code."""
    found = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = parse_python(MAGIC_RE.sub(r"\1#", cell.source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if check_label(alias.name) and alias.asname is None:
                        found.setdefault(alias.name, node.module)
    return found
