"""The published site in one folder: ``python -m booktools.publish SITE [--keep-from URL]`` (the last step
of ``make publish``).

``make publish`` builds the editions, the whole-book PDF and the HTML (which copies the PDF, the editions and
the chapters' Markdown sources into the site); this step adds the support package's wheel at
``SITE/packages/<hash>/`` (:func:`booktools.install_cell.wheel_path`: the folder is the first 16 hex digits of
the wheel's SHA-256) and then checks that the folder is complete: the PDF, every edition as committed, and
the wheel at the very address, with the very SHA-256, that every edition's install cell names.

The wheel is built reproducibly (:func:`booktools.wheel.build_wheel`): the same sources give the same
bytes on every machine with the locked setuptools, so a notebook executed today pins the wheel the site
serves tomorrow.

A deployment replaces the whole site, so ``--keep-from URL`` first copies every wheel the site at ``URL``
lists in ``packages/index.txt`` (each checked against the SHA-256 its folder names) into the new site, and
the new ``index.txt`` lists them with this one: an older saved notebook still finds the wheel it pins.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from booktools import add_root_option, editions, find_root, install_cell
from booktools.wheel import build_wheel, wheel_sha256

__all__ = ["keep_earlier_wheels", "site_problems", "write_index"]

INDEX = "index.txt"  # packages/index.txt: one wheel path (relative to packages/) a line


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_index(packages: Path) -> list[str]:
    """Write ``packages/index.txt``: every ``<hash>/<wheel>`` in the folder, sorted; returns them."""
    wheels = sorted(str(p.relative_to(packages)) for p in packages.glob("*/*.whl"))
    (packages / INDEX).write_text("".join(f"{w}\n" for w in wheels))
    return wheels


def keep_earlier_wheels(url: str, packages: Path) -> list[str]:
    """Copy into ``packages`` every wheel listed by ``<url>/packages/index.txt`` (the site as deployed
    before); returns what was copied. A site with no index yet (a first deployment) keeps nothing; a
    listed wheel that is missing or whose SHA-256 does not start with its folder's name fails."""
    base = url.rstrip("/") + f"/{install_cell.PACKAGES_DIR}/"
    try:
        with urllib.request.urlopen(base + INDEX, timeout=60) as response:
            listed = response.read().decode().split()
    except urllib.error.HTTPError as err:
        if err.code != 404:
            raise SystemExit(f"--keep-from: {base}{INDEX}: {err}") from None
        print(f"--keep-from: {base}{INDEX} does not exist (a first deployment): no earlier wheels")
        return []
    kept = []
    for entry in listed:
        folder, name = entry.split("/")
        target = packages / folder / name
        if target.exists():
            continue
        with urllib.request.urlopen(base + entry, timeout=120) as response:
            data = response.read()
        if not hashlib.sha256(data).hexdigest().startswith(folder):
            raise SystemExit(
                f"--keep-from: {base}{entry} does not have the SHA-256 its folder names"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        kept.append(entry)
    return kept


def site_problems(root: Path, site: Path) -> list[str]:
    """What the published folder lacks: the PDF, an edition as committed, the wheel the editions install
    (at its path, with its SHA-256), the wheels' index."""
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
    path = install_cell.wheel_path(root)
    wheel = site / path
    if not wheel.exists():
        problems.append(f"{site}: no {path} (the editions install {install_cell.wheel_url(root)})")
    elif sha256(wheel) != wheel_sha256(root):
        problems.append(f"{site}: {path} is not the build the install cells pin (SHA-256)")
    index = site / install_cell.PACKAGES_DIR / INDEX
    listed = index.read_text().split() if index.exists() else []
    if path.removeprefix(install_cell.PACKAGES_DIR + "/") not in listed:
        problems.append(f"{site}: {install_cell.PACKAGES_DIR}/{INDEX} does not list {path}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m booktools.publish", description=__doc__.split("\n")[0]
    )
    parser.add_argument("site", type=Path, help="the built site, e.g. _build/html")
    parser.add_argument(
        "--keep-from",
        metavar="URL",
        help="the site as deployed now: its wheels (packages/index.txt) are kept in the new one",
    )
    add_root_option(parser)
    args = parser.parse_args(argv)
    root = find_root(args.root)
    packages = args.site / install_cell.PACKAGES_DIR
    if args.keep_from:
        kept = keep_earlier_wheels(args.keep_from, packages)
        print(f"kept {len(kept)} earlier wheel(s) from {args.keep_from}")
    with tempfile.TemporaryDirectory() as tmp:
        built = build_wheel(root, Path(tmp))
        wheel = args.site / install_cell.wheel_path(root)
        wheel.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, wheel)
    print(f"wheel: {wheel}")
    write_index(packages)
    problems = site_problems(root, args.site)
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"published site complete: {args.site} (HTML, icl-book.pdf, editions, {wheel.name})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
