"""The repository reads on its own: no file points to a tracker a reader of the clone cannot see."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACKER = re.compile(r"\bissues? ?#?\d+\b", re.IGNORECASE)
TEXT = {".py", ".md", ".toml", ".yml", ".yaml", ".cfg", ".txt", ".js", ".css", ".json", ""}


def tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / n for n in names if Path(n).suffix in TEXT and (ROOT / n).is_file()]


def tracker_mentions(paths) -> list[str]:
    out = []
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        for k, line in enumerate(text.splitlines(), 1):
            if TRACKER.search(line):
                out.append(f"{path.relative_to(ROOT)}:{k}: {line.strip()[:100]}")
    return out


def test_no_file_names_a_tracker_issue():
    assert tracker_mentions(tracked_text_files()) == []


def test_the_scan_finds_a_tracker_number(tmp_path):
    # (the numbers are joined at run time, so that this file passes its own scan)
    (tmp_path / "a.py").write_text("x = 1  # fixed in issue " + "35\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("Issue #" + "12 asks for it.\n", encoding="utf-8")
    (tmp_path / "c.py").write_text("# an issue of taste, 35 lines\n", encoding="utf-8")
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        found = tracker_mentions(sorted(tmp_path.iterdir()))
    finally:
        ROOT = old
    assert [f.split(":")[0] for f in found] == ["a.py", "b.md"]
