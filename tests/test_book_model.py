"""Each chapter is parsed once, by the book model (``booktools.chapters``).

The chapters are those of ``_toc.yml`` with the course data of ``booktools/course.yml``, and their
structure (directives' fences, exercises, solution blocks, check cells, the install cell) is read by
the model alone: a second fence pattern or a ``[0-9][0-9]_`` chapter glob elsewhere in the tools,
the tests or the benchmarks is a second parser that drifts from the first, and fails here (read
from the syntax tree: string constants and glob calls, wherever they are).
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from booktools import chapters

ROOT = Path(__file__).resolve().parent.parent
MODEL = "booktools/chapters.py"
#: This file spells the patterns it looks for.
GUARD = "tests/test_book_model.py"
#: Regex spellings of a MyST directive fence: three backticks or colons, an escaped brace or
#: directive name. MyST text itself ("```{exercise}") has no backslash before its brace.
FENCE_MARKS = ("`{3", ":{3", "```\\{", ":::\\{", "\\{code-cell\\}", "\\{exercise\\}", "\\{solution")
FENCE_MARKS += ("\\{prf:",)
GLOB_CALLS = {"glob", "rglob", "iglob"}
#: Second readings still to move into the model, each with the reason it is still there; an entry
#: whose file no longer holds one fails (the list only shrinks).
PENDING: dict[str, str] = {}


def _strings(node) -> list[str]:
    """The string constants of an expression (an f-string's literal parts included)."""
    return [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def second_readings(path: Path) -> list[str]:
    """``"line: what"`` for each fence pattern and each chapter glob of a Python file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            marks = [m for m in FENCE_MARKS if m in node.value]
            if marks:
                found.append(f"{node.lineno}: fence pattern {marks[0]!r}")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            args = [*node.args, *(k.value for k in node.keywords)]
            if name in GLOB_CALLS and any("[0-9][0-9]" in s for a in args for s in _strings(a)):
                found.append(f"{node.lineno}: chapter glob {ast.unparse(node)[:60]!r}")
    return found


def _scanned(root: Path) -> dict[str, list[str]]:
    files = [
        p for d in ("booktools", "tests", "benchmarks") for p in sorted((root / d).rglob("*.py"))
    ]
    found = {str(p.relative_to(root)): second_readings(p) for p in files}
    return {rel: lines for rel, lines in found.items() if lines and rel not in (MODEL, GUARD)}


def test_the_chapters_are_parsed_only_by_the_book_model():
    found = _scanned(ROOT)
    unlisted = {rel: lines for rel, lines in found.items() if rel not in PENDING}
    assert unlisted == {}, "read the chapters through booktools.chapters"
    assert sorted(set(PENDING) - set(found)) == [], "drop these PENDING entries: they are done"


def test_a_second_reading_is_found(tmp_path):
    (tmp_path / "booktools").mkdir()
    shutil.copy(ROOT / MODEL, tmp_path / MODEL)  # the model itself may hold the patterns
    bad = tmp_path / "booktools" / "mine.py"
    bad.write_text(
        "import re\n"
        "from pathlib import Path\n\n"
        "FENCE = re.compile(r'^(`{3,})\\{(?P<name>[\\w-]+)\\}')\n"
        "SOURCES = sorted(Path('chapters').glob('[0-9][0-9]_*.md'))\n"
        "NAMED = sorted(Path('chapters').glob(f'[0-9][0-9]_{1}*.md'))\n"
        "TEXT = '```{exercise}\\n:label: demo-ex1\\n```'  # MyST text, not a pattern\n"
    )
    assert _scanned(tmp_path) == {
        "booktools/mine.py": [
            "4: fence pattern '`{3'",
            "5: chapter glob \"Path('chapters').glob('[0-9][0-9]_*.md')\"",
            "6: chapter glob \"Path('chapters').glob(f'[0-9][0-9]_{1}*.md')\"",
        ]
    }


def test_course_data_covers_exactly_the_chapters_of_the_toc(tmp_path):
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    (tmp_path / "_toc.yml").write_text(toc.replace("chapters/01_hermite", "chapters/01_other"))
    with pytest.raises(
        ValueError, match=r"missing \['01_other'\], not in _toc.yml \['01_hermite'\]"
    ):
        chapters.course_chapters(tmp_path)
    assert [c.short for c in chapters.course_chapters(ROOT)][:2] == ["prologue", "hermite"]


DEMO = """\
```{exercise}
:label: demo-ex1

*Derivation.* Show it.
```

```{solution-start} demo-ex1
:class: dropdown
```

Prose of the solution.

```{code-cell} ipython3
x = 1
```

```{solution-end}
```

```{code-cell} ipython3
check_demo_ex1(x)
```
"""


def test_a_chapter_reads_as_typed_cells():
    nb = chapters.read_chapter(DEMO)
    cells = chapters.book_cells(nb)
    assert [(c.kind, c.label) for c in cells] == [
        ("text", None),
        ("solution-prose", "demo-ex1"),
        ("solution-extra", "demo-ex1"),
        ("solution-prose", "demo-ex1"),
        ("check", "demo-ex1"),
    ]
    assert {c.kind for c in cells} <= set(chapters.CELL_KINDS)
    assert chapters.exercise_statements(nb) == {"demo-ex1": "*Derivation.* Show it."}
    assert chapters.exercise_labels(nb) == ["demo-ex1"]
    unended = chapters.read_chapter(DEMO.split("```{solution-end}")[0])
    with pytest.raises(chapters.BookFormatError, match=r"demo-ex1 has no \{solution-end\}"):
        chapters.book_cells(unended)
