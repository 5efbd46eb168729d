"""What the LaTeX log of the PDF edition says went wrong: ``python -m booktools.pdf_log LOG`` (``make pdf``).

xelatex finishes a PDF whatever it had to drop: a character its font lacks is left out with only a log line
("Missing character: There is no ᵀ in font …", so ``XᵀX`` printed as ``XX``), a reference it cannot resolve
prints ``??``, and a line or page it cannot fit runs into the margin. This reads the log of the last
xelatex run and fails on

- any missing character;
- any undefined reference or citation, and any multiply defined label;
- any overfull box wider (``\\hbox``) or taller (``\\vbox``) than :data:`OVERFULL_PT`, except those in
  :data:`ACCEPTED` (each with its reason).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

__all__ = ["OVERFULL_PT", "ACCEPTED", "problems"]

#: An overfull box up to this much (TeX points) is invisible in print: a fraction of a letter.
OVERFULL_PT = 5.0
#: Overfull boxes accepted, as (regular expression on the box's log lines, reason).
ACCEPTED: list[tuple[str, str]] = [
    (
        r"Overfull \\vbox \(3\d{3}\.\d+pt too high\) has occurred while \\output is active",
        "API reference, start of the Training section: TeX reports a box 3,700–3,900 pt too high "
        "(it grows with that section's documentation) while it "
        "ships the page, yet the page prints whole (pdftotext: its text continues the previous "
        "page's last line word for word, and nothing follows out of place); its cause is not found",
    ),
]

_MISSING = re.compile(r"^Missing character: There is no (.+?) in font (.+?)!?$", re.M)
_UNDEFINED = re.compile(
    r"^(?:LaTeX|Package \w+) Warning: (Reference|Citation|Hyper reference) `([^']+)' on page (\d+)"
    r"\s+undefined",
    re.M,
)
_MULTIPLY = re.compile(r"^LaTeX Warning: Label `([^']+)' multiply defined", re.M)
_OVERFULL = re.compile(r"^Overfull \\([hv])box \(([\d.]+)pt too (?:wide|high)\)(.*)$", re.M)


def _unwrap(log: str) -> str:
    """TeX wraps its log at 79 characters: join the wrapped lines of warnings back."""
    return re.sub(r"(?m)^(.{79})\n", r"\1", log)


def problems(log: str) -> list[str]:
    """Every defect the log records, one line each (empty: the PDF printed everything)."""
    log = _unwrap(log)
    out = []
    missing: dict[tuple[str, str], int] = {}
    for m in _MISSING.finditer(log):
        key = (m[1], m[2].split("/")[0])
        missing[key] = missing.get(key, 0) + 1
    for (char, font), n in sorted(missing.items()):
        out.append(f"missing character {char} in font {font} ({n}×): pick a font that has it")
    for m in _UNDEFINED.finditer(log):
        out.append(f"undefined {m[1].lower()} {m[2]} on page {m[3]} (prints ??)")
    for m in _MULTIPLY.finditer(log):
        out.append(f"label {m[1]} defined more than once")
    for m in _OVERFULL.finditer(log):
        size = float(m[2])
        if size <= OVERFULL_PT:
            continue
        context = log[m.start() : m.end() + 240]
        if any(re.search(pattern, context) for pattern, _ in ACCEPTED):
            continue
        where = m[3].strip() or "while a page was being output"
        text = log[m.end() : m.end() + 240].strip().split("\n\n")[0].replace("\n", "")
        out.append(f"overfull \\{m[1]}box by {size:.1f} pt {where}: {text[:120]}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m booktools.pdf_log", description=__doc__.split("\n")[0]
    )
    parser.add_argument("log", type=Path, help="the LaTeX log, e.g. _build/latex/icl-book.log")
    args = parser.parse_args(argv)
    found = problems(args.log.read_text(errors="replace"))
    for line in found:
        print(f"PDF: {line}", file=sys.stderr)
    if found:
        print(f"{len(found)} problem(s) in {args.log}", file=sys.stderr)
    else:
        print(
            f"PDF log clean: no missing character, undefined reference or box over {OVERFULL_PT:g} pt"
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
