"""The book's index for the notebook editions: numbers, titles and anchors as plain JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

BOOK_INDEX = "book-index.json"
BOOK_INDEX_VERSION = 1  # raise it when the fields below change: an older file is then rebuilt


def book_index_path(build_dir) -> Path:
    """Where a build whose doctrees are in ``<build_dir>/.doctrees`` writes its index."""
    return Path(build_dir) / BOOK_INDEX


def _numbers(value) -> list[int]:
    return [int(n) for n in value]


def book_index(app) -> dict:
    """What ``booktools.book_index.BookIndex`` reads, from the complete environment of a build:

    - ``secnumbers``: document → {anchor ("" for the page, else ``"#id"``) → [chapter, section, …]},
      in document order (Sphinx's ``toc_secnumbers``);
    - ``fignumbers``: document → {type ("figure", "theorem", "exercise", "displaymath", …) → {id →
      [numbers]}} (``toc_fignumbers``);
    - ``titles``: document → its title as text; ``numfig_format``: type → format (``"Fig. %s"``);
    - ``proofs``: sphinx-proof's labels → {docname, realtype, countertype, nonumber};
    - ``exercises``: sphinx-exercise's labels → {docname, type} (``exercise`` or ``solution``);
    - ``labels``: std labels → [document, anchor, title text]; ``equations``: math labels →
      [document, number]; ``python``: Python objects → [document, anchor].
    """
    env = app.env
    domains = env.domaindata
    return {
        "version": BOOK_INDEX_VERSION,
        "secnumbers": {
            doc: {anchor: _numbers(n) for anchor, n in numbers.items()}
            for doc, numbers in env.toc_secnumbers.items()
        },
        "fignumbers": {
            doc: {
                typ: {key: _numbers(n) for key, n in numbers.items()}
                for typ, numbers in by_type.items()
            }
            for doc, by_type in env.toc_fignumbers.items()
        },
        "titles": {doc: title.astext() for doc, title in env.titles.items()},
        # str(): Sphinx's default formats are lazy translations, which JSON cannot hold
        "numfig_format": {typ: str(fmt) for typ, fmt in app.config.numfig_format.items()},
        "proofs": {
            label: {k: entry[k] for k in ("docname", "realtype", "countertype", "nonumber")}
            for label, entry in getattr(env, "proof_list", {}).items()
        },
        "exercises": {
            label: {"docname": entry["docname"], "type": entry.get("type")}
            for label, entry in getattr(env, "sphinx_exercise_registry", {}).items()
        },
        "labels": {
            label: [doc, anchor, str(title)]
            for label, (doc, anchor, title) in domains["std"]["labels"].items()
        },
        "equations": {
            label: [doc, number] for label, (doc, number) in domains["math"]["objects"].items()
        },
        "python": {
            name: [entry.docname, entry.node_id] for name, entry in domains["py"]["objects"].items()
        },
    }


def _write_book_index(app, exception):
    """``build-finished``: write :func:`book_index` to ``<doctrees>/../book-index.json`` when the
    build succeeded (through a temporary file, so a reader never sees half of it)."""
    if exception is not None:
        return
    path = book_index_path(Path(app.doctreedir).parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(book_index(app), ensure_ascii=False, indent=1) + "\n")
    os.replace(tmp, path)


def register(app):
    """Write the index once the build has finished: the environment is complete then."""
    app.connect("build-finished", _write_book_index)
