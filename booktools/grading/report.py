"""The grade report: one CSV row per student and exercise (``student, exercise, score, max_score,
message``), safe to open in a spreadsheet, with scores that read back exactly; written by ``grade``,
read by the gradebook step.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

__all__ = ["write_report", "write_rows", "read_report", "defuse_csv"]


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_safe(cell: str) -> str:
    """A CSV cell a spreadsheet shows as text: one starting with ``= + - @`` (or a tab or carriage
    return) would be read as a formula (``=HYPERLINK(...)`` in a forged message), so it gets a ``'``."""
    cell = str(cell)
    return "'" + cell if cell.startswith(_FORMULA_START) else cell


def write_report(results, out: str | os.PathLike) -> Path:
    """Write ``results`` as CSV: ``student, exercise, score, max_score, message`` (score ``manual``
    for written exercises); written beside ``out`` and renamed into place."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        write_rows(csv.writer(fh), results)
    os.replace(tmp, out)
    return out


def write_rows(writer, results, header: bool = True) -> None:
    if header:
        writer.writerow(["student", "exercise", "score", "max_score", "message"])
    for r in results:
        score = r.score if isinstance(r.score, str) else _exact(r.score)
        writer.writerow(
            [_csv_safe(c) for c in (r.student, r.exercise, score, _exact(r.max_score), r.message)]
        )


def defuse_csv(path: str | os.PathLike) -> Path:
    """Write ``path`` again as ``<stem>-safe.csv`` with every cell that a spreadsheet would read as
    a formula guarded as :func:`write_report` guards its own (for nbgrader's ``grades.csv``, which
    writes student ids as they are); returns the new file."""
    path = Path(path)
    if path.suffix != ".csv":
        raise ValueError(f"path must be a .csv file, got {path}")
    out = path.with_name(f"{path.stem}-safe.csv")
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    with out.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([[_csv_safe(c) for c in row] for row in rows])
    return out


def _exact(x) -> str:
    """``x`` as the shortest text that reads back as the same float (``1``, ``0.5``,
    ``0.6666666666666666``): the gradebook step reads the report, so 2/3 must not become 0.666667."""
    text = repr(float(x) + 0.0)  # + 0.0: -0.0 is written 0
    return text[:-2] if text.endswith(".0") else text


def _unneutralise(cell: str) -> str:
    """Undo the spreadsheet guard of :func:`_csv_safe` (``'`` before a cell that starts like a formula)."""
    if cell.startswith("'") and cell[1:2].startswith(_FORMULA_START):
        return cell[1:]
    return cell


def read_report(path) -> list[dict]:
    """The rows of a ``grade`` report (``student, exercise, score, max_score, message``)."""
    with Path(path).open(newline="", encoding="utf-8") as fh:
        return [{k: _unneutralise(v) for k, v in row.items()} for row in csv.DictReader(fh)]
