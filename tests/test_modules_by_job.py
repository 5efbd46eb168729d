"""One module, one job: a module of ``icl_book`` or ``booktools`` over ``MAX_LINES`` lines either
splits where it holds several jobs or says in its docstring why it is one.

The argument is a line of the module's docstring that starts with ``One job:`` followed by at least
``MIN_WORDS`` words (the reason, not a label): ``One job: the Hermite expansion of a function ...``.
A long module without it fails here with its length, so the choice is made when it grows, not later.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MAX_LINES = 600
MIN_WORDS = 6
_ARGUMENT = re.compile(r"^\s*One job: (.+)$", re.MULTILINE)


def one_job_argument(source: str) -> str | None:
    """The reason after ``One job:`` in the module docstring of ``source``, or ``None`` when the
    docstring has no such line or the reason is shorter than ``MIN_WORDS`` words."""
    doc = ast.get_docstring(ast.parse(source)) or ""
    for m in _ARGUMENT.finditer(doc):
        if len(m[1].split()) >= MIN_WORDS:
            return m[1]
    return None


def long_modules(root: Path = ROOT) -> dict[str, int]:
    """``{path relative to root: lines}`` of every module over ``MAX_LINES`` lines."""
    found = {}
    for package in ("icl_book", "booktools"):
        for path in sorted((root / package).rglob("*.py")):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES:
                found[path.relative_to(root).as_posix()] = n
    return found


def unargued(modules: dict[str, int], root: Path = ROOT) -> list[str]:
    """The modules of ``modules`` whose docstring carries no ``One job:`` argument, with lengths."""
    return [
        f"{rel} ({n} lines)"
        for rel, n in modules.items()
        if one_job_argument((root / rel).read_text(encoding="utf-8")) is None
    ]


def test_every_long_module_argues_its_one_job():
    missing = unargued(long_modules())
    assert missing == [], (
        f"over {MAX_LINES} lines without a 'One job: <why>' line in the module docstring "
        f"(split it by job, or say why it is one): {missing}"
    )


def test_a_long_unargued_module_is_found(tmp_path):
    (tmp_path / "booktools").mkdir()
    body = "\n".join(f"X{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "booktools" / "short.py").write_text('"""Title."""\n' + body[: body.rindex("\n")])
    (tmp_path / "booktools" / "long.py").write_text('"""Title."""\n' + body)
    argued = '"""Title.\n\nOne job: its constants are read together, by one caller, always."""\n'
    (tmp_path / "booktools" / "argued.py").write_text(argued + body)
    assert long_modules(tmp_path) == {
        "booktools/argued.py": MAX_LINES + 3,
        "booktools/long.py": MAX_LINES + 1,
    }
    assert unargued(long_modules(tmp_path), tmp_path) == [
        f"booktools/long.py ({MAX_LINES + 1} lines)"
    ]


@pytest.mark.parametrize(
    ("doc", "argued"),
    [
        (
            '"""Title.\n\nOne job: the expansion, its quadrature and its named links are one."""',
            True,
        ),
        ('"""Title.\n\nOne job: yes."""', False),  # a label, not a reason
        ('"""Title.\n\nIt is one job: the expansion, its quadrature and its links."""', False),
        ('"""Title."""\n# One job: a comment is not the docstring, whatever it says here', False),
    ],
)
def test_the_marker(doc, argued):
    assert (one_job_argument(doc) is not None) is argued
