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

# Modules over the limit without the argument when this test was written, each another author's to
# split or argue; remove a name once its module has its line (the test fails on a stale entry).
NOT_YET_ARGUED = {
    "icl_book/attention/glu.py",
}


def one_job_argument(source: str) -> str | None:
    """The reason after ``One job:`` in the module docstring of ``source``, or ``None`` when the
    docstring has no such line or the reason is shorter than ``MIN_WORDS`` words."""
    doc = ast.get_docstring(ast.parse(source)) or ""
    for m in _ARGUMENT.finditer(doc):
        if len(m[1].split()) >= MIN_WORDS:
            return m[1]
    return None


def long_modules() -> dict[str, int]:
    """``{path relative to the repository: lines}`` of every module over ``MAX_LINES`` lines."""
    found = {}
    for package in ("icl_book", "booktools"):
        for path in sorted((ROOT / package).rglob("*.py")):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES:
                found[path.relative_to(ROOT).as_posix()] = n
    return found


def unargued(modules: dict[str, int]) -> list[str]:
    """The modules of ``modules`` whose docstring carries no ``One job:`` argument, with lengths."""
    return [
        f"{rel} ({n} lines)"
        for rel, n in modules.items()
        if one_job_argument((ROOT / rel).read_text(encoding="utf-8")) is None
    ]


def test_every_long_module_argues_its_one_job():
    missing = [m for m in unargued(long_modules()) if m.split(" (")[0] not in NOT_YET_ARGUED]
    assert missing == [], (
        f"over {MAX_LINES} lines without a 'One job: <why>' line in the module docstring "
        f"(split it by job, or say why it is one): {missing}"
    )


def test_the_not_yet_argued_list_is_current():
    still = {m.split(" (")[0] for m in unargued(long_modules())}
    assert NOT_YET_ARGUED - still == set(), "argued or split now: remove from NOT_YET_ARGUED"


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
