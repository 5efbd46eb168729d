"""The subject index: the terms of ``chapters/subject_index.yml`` indexed at every section that
uses them."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms import SphinxTransform

from ._text import plain_text

SUBJECT_PAGES = re.compile(r"chapters/(intro|notation|\d\d_.*)$")
SKIP_SECTIONS = {"summary", "exercises"}
SHORT_PAGE_NAMES = {"chapters/intro": "Introduction"}


@functools.cache
def _subject_terms(path: str, mtime: float) -> list[tuple[str, re.Pattern]]:
    import yaml

    terms = []
    for item in yaml.safe_load(Path(path).read_text()) or []:
        term, forms = (
            (item, [item])
            if isinstance(item, str)
            else (item["term"], item.get("forms") or [item["term"]])
        )
        words = "|".join(re.escape(f).replace(r"\ ", r"[\s\u00a0-]+") for f in forms)
        terms.append((term, re.compile(rf"(?<![\w-])(?:{words})(?![\w-])", re.I)))
    return terms


def subject_terms(app) -> list[tuple[str, re.Pattern]]:
    path = Path(app.srcdir) / app.config.icl_subject_index
    return _subject_terms(str(path), path.stat().st_mtime) if path.is_file() else []


def _prose(node) -> str:
    """The running text of a paragraph, title or caption: no code, no math."""
    if isinstance(node, (nodes.math, nodes.literal, nodes.literal_block, nodes.raw)):
        return " "
    if isinstance(node, nodes.Text):
        return str(node)
    return "".join(_prose(child) for child in node.children)


class _SubjectIndex(SphinxTransform):
    """Index entries for the subject terms; runs before Sphinx collects index entries (850)."""

    default_priority = 840

    def apply(self, **kwargs):
        if not SUBJECT_PAGES.match(self.env.docname) or self.app.builder.format not in (
            "html",
            "latex",
        ):
            return
        terms = subject_terms(self.app)
        if not terms:
            return
        self.env.note_dependency(str(Path(self.app.srcdir) / self.app.config.icl_subject_index))
        page = self.document.next_node(nodes.section)
        if page is None:
            return
        numbered = re.match(r"chapters/(\d\d)_", self.env.docname)
        chapter = int(numbered.group(1)) if numbered and int(numbered.group(1)) > 0 else None
        full_title = plain_text(page[0]) if isinstance(page[0], nodes.title) else ""
        # Unnumbered pages by a short name: "Prologue", "Notation and conventions", "Introduction".
        page_title = SHORT_PAGE_NAMES.get(self.env.docname, full_title.split(":")[0])
        found: dict[tuple[str, str], tuple] = {}
        for section, number in self._sections(page, chapter):
            title = plain_text(section[0])
            if title.strip().lower() in SKIP_SECTIONS:
                continue
            if section is page:
                label = f"{full_title} (chapter {chapter})" if chapter else page_title
            else:
                label = f"{title} (§{number})" if number else f"{title} ({page_title})"
            for node in self._texts(section):
                heading = isinstance(node, nodes.title) and node.parent is section
                named = isinstance(node, nodes.title) and "realtype" in node.parent.attributes
                main = heading or named
                text = _prose(node)
                for term, pattern in terms:
                    key = (term, label)
                    if not pattern.search(text) or (key in found and (found[key][1] or not main)):
                        continue
                    found[key] = (node, main)  # the first place, or a heading/title that names it
        for (term, label), (node, main) in found.items():
            self._add_entry(node, f"{term}; {label}", "main" if main else "")

    def _add_entry(self, node, value, main):
        """An index entry for ``node``: a heading or caption points at its section, result or figure,
        a paragraph at a new target just before it."""
        element = node.parent if isinstance(node, (nodes.title, nodes.caption)) else node
        if element is not node and element["ids"]:
            index = addnodes.index(entries=[("single", value, element["ids"][0], main, None)])
            index["inline"] = False
            if isinstance(element, nodes.section):
                element.insert(1, index)
            else:
                element.parent.insert(element.parent.index(element), index)
            return
        target_id = f"index-{self.env.new_serialno('index')}"
        index = addnodes.index(entries=[("single", value, target_id, main, None)])
        # Inside the paragraph (an inline \index in LaTeX: one that opened a proof's admonition box
        # was written as an empty entry); the link target just before it.
        index["inline"] = True
        element.insert(0, index)
        element.parent.insert(element.parent.index(element), nodes.target("", "", ids=[target_id]))

    @staticmethod
    def _sections(page, chapter):
        """(section, "1.2") for the page and every section below it, in document order; the
        number as Sphinx gives it in a numbered chapter, else ``None``."""
        out = [(page, str(chapter) if chapter else None)]

        def walk(section, prefix):
            count = 0
            for child in section.children:
                if isinstance(child, nodes.section):
                    count += 1
                    number = f"{prefix}.{count}" if prefix else None
                    out.append((child, number))
                    walk(child, number)

        walk(page, str(chapter) if chapter else None)
        return out

    @staticmethod
    def _texts(section):
        """Paragraphs, titles and captions of ``section`` itself (not of its subsections), outside
        code cells."""
        stack = list(section.children)
        while stack:
            node = stack.pop(0)
            if isinstance(node, nodes.section) and isinstance(node.parent, nodes.section):
                continue  # a subsection (a theorem's or exercise's body is a section inside it)
            if isinstance(node, nodes.container) and "cell_input" in node["classes"]:
                continue
            if isinstance(node, (nodes.paragraph, nodes.title, nodes.caption)):
                yield node
                continue
            if isinstance(node, nodes.Element) and not isinstance(node, nodes.FixedTextElement):
                stack[0:0] = list(node.children)


def register(app):
    """Add this part's configuration value and transform."""
    app.add_config_value("icl_subject_index", "chapters/subject_index.yml", "env")
    app.add_transform(_SubjectIndex)
