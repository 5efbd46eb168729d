"""The published site in one folder: ``python -m booktools.publish SITE`` (the last step of ``make publish``).

``make publish`` builds the editions, the whole-book PDF and the HTML (which copies the PDF, the editions and
the chapters' Markdown sources into the site); this step adds the support package's wheel at
``SITE/packages/`` (built from a temporary copy of the sources, so no ``build/`` folder is left in the
clone) and then checks that the folder is complete: the PDF, every edition as committed, and the wheel at
the very address every edition's install cell fetches (``booktools.editions.wheel_url``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from booktools import add_root_option, editions, find_root

__all__ = ["build_wheel", "site_problems"]


def build_wheel(root: Path, out: Path) -> Path:
    """The wheel of the package in ``root``, written into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(
            root / "icl_book", src / "icl_book", ignore=shutil.ignore_patterns("__pycache__")
        )
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            if (root / name).exists():
                shutil.copy(root / name, src / name)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--no-deps",
             "--no-build-isolation", "-q", "-w", str(out), str(src)],
            check=True,
        )  # fmt: skip
    wheel = out / editions.wheel_url(root).rsplit("/", 1)[1]
    if not wheel.exists():
        raise SystemExit(f"pip built {sorted(p.name for p in out.iterdir())}, not {wheel.name}")
    return wheel


def site_problems(root: Path, site: Path) -> list[str]:
    """What the published folder lacks: the PDF, an edition as committed, the wheel the editions install."""
    problems = []
    if not (site / "index.html").exists():
        problems.append(f"{site}: no HTML")
    if not (site / "icl-book.pdf").exists():
        problems.append(f"{site}: no icl-book.pdf (make pdf)")
    for ed in sorted((root / editions.EDITION_DIR).glob("*.ipynb")):
        copy = site / editions.EDITION_DIR / ed.name
        if not copy.exists() or copy.read_bytes() != ed.read_bytes():
            problems.append(
                f"{site}: {editions.EDITION_DIR}/{ed.name} missing or not the committed one"
            )
    url = editions.wheel_url(root)
    wheel = site / editions.PACKAGES_DIR / url.rsplit("/", 1)[1]
    if not wheel.exists():
        problems.append(f"{site}: no {wheel.relative_to(site)} (the editions install {url})")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m booktools.publish", description=__doc__.split("\n")[0]
    )
    parser.add_argument("site", type=Path, help="the built site, e.g. _build/html")
    add_root_option(parser)
    args = parser.parse_args(argv)
    root = find_root(args.root)
    wheel = build_wheel(root, args.site / editions.PACKAGES_DIR)
    print(f"wheel: {wheel}")
    problems = site_problems(root, args.site)
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"published site complete: {args.site} (HTML, icl-book.pdf, editions, {wheel.name})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
