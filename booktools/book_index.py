"""The built book's index: its numbers, titles and anchors, and the addresses of its web pages.

Every build of the book writes ``_build/book-index.json`` when it finishes
(:func:`booktools.sphinx.ext.book_index`: plain JSON with a format version). :func:`load_index` reads it
into a :class:`BookIndex`, which answers what a reference in a chapter becomes on the web book (the
number and title of ``{prf:ref}``, ``{numref}``, ``{eq}``, ``{doc}`` targets, and their URLs), with the
book's MathJax macros and bibliography from ``_config.yml``. When the index is missing, of another
format version or older than a chapter, ``_toc.yml`` or ``_config.yml``, the book is read into a
temporary folder (Sphinx's ``dummy`` builder, about a minute) that is removed afterwards.

The site address (:func:`site_url`) is ``html.baseurl`` of ``_config.yml`` when set, else the GitHub
Pages address of ``repository.url`` (``https://OWNER.github.io/NAME/``). The plain-notebook editions
(``booktools.editions``) link to the pages through it; the install cells (``booktools.install_cell``)
fetch the package's wheel from it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from booktools.sphinx.ext import BOOK_INDEX_VERSION, book_index_path

__all__ = [
    "BookIndexError",
    "BookIndex",
    "load_index",
    "sphinx_build",
    "site_url",
    "bibliography_anchor",
]


class BookIndexError(ValueError):
    """A reference the book's index does not resolve, or a book it cannot read."""


@dataclass
class BookIndex:
    """Numbers, titles and anchors of the built book: ``data`` is the index a build writes
    (:func:`booktools.sphinx.ext.book_index`)."""

    data: dict
    base_url: str
    macros: dict[str, str]
    bib: dict = field(default_factory=dict)

    # ---- numbers ----
    def chapter_number(self, doc: str) -> str:
        return ".".join(map(str, self.data["secnumbers"].get(doc, {}).get("", ())))

    def section_numbers(self, doc: str) -> list[tuple[str, str]]:
        """``(anchor, "3.1")`` for every numbered section below the page title, in document order."""
        return [
            (k.lstrip("#"), ".".join(map(str, v)))
            for k, v in self.data["secnumbers"].get(doc, {}).items()
            if k
        ]

    def url(self, doc: str, anchor: str = "") -> str:
        return f"{self.base_url}{doc}.html" + (f"#{anchor}" if anchor else "")

    def has_document(self, doc: str) -> bool:
        return doc in self.data["titles"]

    def title(self, doc: str) -> str:
        if doc not in self.data["titles"]:
            raise BookIndexError(f"unknown document {doc!r}")
        return self.data["titles"][doc]

    def _fignumber(self, label: str, types=None) -> tuple[str, str, str] | None:
        """``(doc, type, "3.2")`` of an enumerated object (figure, theorem, exercise, ...)."""
        for doc, by_type in self.data["fignumbers"].items():
            for typ, numbers in by_type.items():
                if (types is None or typ in types) and label in numbers:
                    return doc, typ, ".".join(map(str, numbers[label]))
        return None

    def numfig_text(self, typ: str, number: str) -> str:
        fmt = self.data["numfig_format"].get(typ, typ.title() + " %s")
        text = fmt % number
        return text[0].upper() + text[1:]

    # ---- references ----
    def is_proof(self, label: str) -> bool:
        """Whether ``label`` names a sphinx-proof result (theorem, definition, ...)."""
        return label in self.data["proofs"]

    def proof(self, label: str) -> tuple[str, str]:
        entry = self.data["proofs"].get(label)
        if entry is None:
            raise BookIndexError(f"unresolved {{prf:ref}} {label!r}")
        text = entry["realtype"].title()
        if not entry["nonumber"]:
            numbers = self.data["fignumbers"][entry["docname"]][entry["countertype"]][label]
            text += " " + ".".join(map(str, numbers))
        return text, self.url(entry["docname"], label)

    def exercise(self, label: str) -> tuple[str, str] | None:
        entry = self.data["exercises"].get(label)
        if entry is None or entry.get("type") != "exercise":
            return None
        found = self._fignumber(label, {"exercise"})
        text = "Exercise" + (f" {found[2]}" if found else "")
        return text, self.url(entry["docname"], label)

    def ref(self, label: str) -> tuple[str, str]:
        ex = self.exercise(label)
        if ex is not None:
            return ex
        if self.is_proof(label):
            return self.proof(label)
        labels = self.data["labels"]
        if label not in labels:
            raise BookIndexError(f"unresolved {{ref}} {label!r}")
        doc, anchor, title = labels[label]
        if anchor == label and self.has_document(doc) and title == self.title(doc):
            anchor = ""  # the page's own label: link to the page
        return str(title), self.url(doc, anchor)

    def numref(self, label: str, fmt: str | None = None) -> tuple[str, str]:
        found = self._fignumber(label)
        if found is None:
            raise BookIndexError(f"unresolved {{numref}} {label!r}")
        doc, typ, number = found
        if fmt is None:
            text = self.numfig_text(typ, number)
        else:
            text = fmt.replace("%s", number).replace("{number}", number)
        if typ == "exercise" or self.is_proof(label):
            anchor = label
        else:
            anchor = self.data["labels"].get(label, (doc, label, ""))[1]
        return text, self.url(doc, anchor)

    def equation(self, label: str) -> tuple[str, str]:
        objects = self.data["equations"]
        if label not in objects:
            raise BookIndexError(f"unresolved {{eq}} {label!r}")
        doc, number = objects[label]
        numbers = self.data["fignumbers"].get(doc, {}).get("displaymath", {})
        key = f"equation-{label}"
        if key in numbers:
            number = ".".join(map(str, numbers[key]))
        return str(number), self.url(doc, key)

    def document(self, target: str, from_doc: str) -> str:
        """The document a link or ``{doc}`` target of ``from_doc`` names (``../x.md`` from
        ``chapters/a`` is ``x``; ``/chapters/b`` is ``chapters/b``), known to the book or not."""
        target = target.removesuffix(".md").removesuffix(".ipynb")
        if target.startswith("/"):
            return target.lstrip("/")
        return _norm(str(Path(from_doc).parent / target))

    def doc(self, target: str, from_doc: str) -> tuple[str, str]:
        doc = self.document(target, from_doc)
        return self.title(doc), self.url(doc)

    def python(self, name: str) -> str:
        entry = self.data["python"].get(name)
        if entry is None:
            raise BookIndexError(f"unresolved Python reference {name!r}")
        doc, anchor = entry
        return self.url(doc, anchor)


def _norm(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def site_url(config: dict) -> str:
    """The web book's address, ending in ``/``, from ``_config.yml``'s ``config``: ``html.baseurl``
    when set, else the GitHub Pages address of ``repository.url``."""
    base = (config.get("html") or {}).get("baseurl")
    if not base:
        url = config["repository"]["url"].rstrip("/")
        m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+)", url)
        if not m:
            raise BookIndexError(f"cannot derive the site address from repository.url {url!r}")
        base = f"https://{m[1].lower()}.github.io/{m[2]}/"
    return base.rstrip("/") + "/"


# --------------------------------------------------------------------------------------------------------


def bibliography_anchor(key: str) -> str:
    """The id of ``key``'s entry on the web book's bibliography page (``bibtex_cite_id: cite-{key}``,
    made an HTML id as docutils does: ``arxiv2610.10761`` → ``cite-arxiv2610-10761``)."""
    from docutils.nodes import make_id

    return make_id(f"cite-{key}")


def _macros(config: dict) -> dict[str, str]:
    macros = config["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"]
    out = {}
    for name, value in macros.items():
        if not isinstance(value, str):
            raise BookIndexError(
                f"macro \\{name} takes arguments; the converter expands only plain macros"
            )
        out[name] = value
    return out


def _bibliography(root: Path, config: dict) -> dict:
    from pybtex.database import parse_file

    entries = {}
    for name in config.get("bibtex_bibfiles", []):
        entries.update(parse_file(str(root / name), bib_format="bibtex").entries)
    return entries


def sphinx_build(root: Path, out: Path) -> Path:
    """Read the book with Sphinx's ``dummy`` builder (no HTML written) into ``out``; return its
    build dir, which holds the book's index (``book-index.json``, written by
    ``booktools.sphinx.ext``)."""
    cmd = [
        str(Path(sys.executable).parent / "jupyter-book"),
        "build", str(root), "--all", "--builder", "custom", "--custom-builder", "dummy",
        "--path-output", str(out),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BookIndexError(f"book build failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return Path(out) / "_build"


def _read_index(path: Path) -> dict | None:
    """The index at ``path``, or ``None`` if it is missing, unreadable or of another format
    version."""
    try:
        data = json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("version") == BOOK_INDEX_VERSION else None


def load_index(root: Path, build_dir: Path | None = None) -> BookIndex:
    """The book's index from ``build_dir`` (default ``root/_build``: its ``book-index.json``);
    when that index is missing, of another format version, or older than a chapter notebook,
    ``_toc.yml`` or ``_config.yml``, the book is read into a temporary folder, which is removed
    once the index is read."""
    root = Path(root)
    config = yaml.safe_load((root / "_config.yml").read_text())
    build_dir = Path(build_dir) if build_dir else root / "_build"
    path = book_index_path(build_dir)
    sources = [
        root / "_config.yml",
        root / "_toc.yml",
        *sorted((root / "chapters").glob("*.ipynb")),
    ]
    sources += sorted((root / "chapters").glob("*.md"))
    fresh = path.exists() and path.stat().st_mtime >= max(p.stat().st_mtime for p in sources)
    data = _read_index(path) if fresh else None
    if data is None:
        with tempfile.TemporaryDirectory(prefix="icl-editions-") as tmp:
            built = book_index_path(sphinx_build(root, Path(tmp)))
            data = _read_index(built)
            if data is None:
                raise BookIndexError(
                    f"the book build wrote no index of version {BOOK_INDEX_VERSION}"
                )
    return BookIndex(data, site_url(config), _macros(config), _bibliography(root, config))


# --------------------------------------------------------------------------------------------------------
