"""The PDF: chapter numbers that match the web book, references to another chapter's exercise,
long tables that may cross pages, and the whole-book PDF published with the web book."""

from __future__ import annotations

import shutil
from pathlib import Path

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
BOOK_PDF_CLASS = "icl-book-pdf"


def _latex_matter_switch(app, doctree):
    switches = {
        app.config.icl_latex_mainmatter: r"\iclnumberedchapters",
        app.config.icl_latex_backmatter: r"\iclunnumberedchapters",
    }
    command = switches.get(app.env.docname)
    if command:
        doctree.insert(0, nodes.raw("", command + "\n", format="latex"))


class _CrossChapterExerciseRefs(SphinxPostTransform):
    """In the PDF, a reference to an exercise of another chapter printed "Exercise ??". sphinx-exercise
    writes a same-chapter reference as ``\\hyperref[exercise:<label>]{Exercise 2.1}`` (the number as text,
    its ``refid``), but one across chapters keeps the standard domain's ``\\ref`` to a label LaTeX never
    sees. Give such a reference the exercise's ``refid`` before sphinx-exercise's transform (priority 22)
    rewrites references, so it is written like a same-chapter one, with the number the web book shows."""

    default_priority = 21
    formats = ("latex",)

    def run(self, **kwargs):
        registry = getattr(self.env, "sphinx_exercise_registry", {})
        for node in self.document.findall(nodes.reference):
            uri = node.get("refuri", "")
            if node.get("refid") or not uri.startswith("%") or "#" not in uri:
                continue
            label = uri.rsplit("#", 1)[1]
            if label in registry:
                del node["refuri"]
                node["refid"] = label


class _LongTables(SphinxPostTransform):
    """In the PDF, a table of more than :data:`LONG_TABLE_ROWS` rows may cross pages (``longtable``).
    Sphinx makes only tables of more than 30 rows long ones; a shorter table of long cells (the results
    page, the instructors' table, the figure index) was one box taller than a page and ran past its foot."""

    default_priority = 800
    formats = ("latex",)

    def run(self, **kwargs):
        for table in self.document.findall(nodes.table):
            rows = sum(len(body.children) for body in table.findall(nodes.tbody))
            if rows > LONG_TABLE_ROWS and "longtable" not in table["classes"]:
                # A longtable's columns need widths (tabulary finds its own): those of the source.
                table["classes"] += ["longtable", "colwidths-given"]


LONG_TABLE_ROWS = 4


def book_pdf(app) -> Path | None:
    """The book's PDF made by ``make pdf`` (``<outdir>/../latex/<icl_book_pdf>``) if this is an HTML
    build and the file exists, else ``None``."""
    if app.builder.format != "html":
        return None
    pdf = Path(app.outdir).parent / "latex" / app.config.icl_book_pdf
    return pdf if pdf.is_file() else None


def _book_pdf_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{book-pdf}`text```: a link to the whole-book PDF (resolved per builder by _BookPdfLinks)."""
    node = nodes.reference(rawtext, text, refuri="", classes=[BOOK_PDF_CLASS])
    return [node], []


PDF_TAG = "icl_book_pdf"


def _pdf_tag(app):
    """Set the tag ``icl_book_pdf`` when the build publishes the PDF (or is the PDF)."""
    if app.builder.format == "latex" or book_pdf(app) is not None:
        app.tags.add(PDF_TAG)


class _BookPdfLinks(SphinxPostTransform):
    """Point ``{book-pdf}`` links at the published PDF; without one, a warning (text about the PDF belongs
    in an ``{only} icl_book_pdf`` block). Runs after Sphinx has dropped the ``only`` blocks (priority 50)."""

    default_priority = 60

    def run(self, **kwargs):
        pdf = book_pdf(self.app)
        for node in list(self.document.findall(nodes.reference)):
            if BOOK_PDF_CLASS not in node["classes"]:
                continue
            if pdf is not None:
                depth = self.env.docname.count("/")
                node["refuri"] = "../" * depth + pdf.name
            else:  # plain text (an inline: replace_self keeps the node's classes)
                if self.app.builder.format == "html":
                    LOGGER.warning(
                        f"{{book-pdf}} `{node.astext()}` in a build without the PDF: put it in an "
                        f"{{only}} {PDF_TAG} block (run `make pdf` for the PDF)",
                        location=node,
                    )
                node.replace_self(nodes.inline("", node.astext()))


def _download_menu_pdf(app, pagename, templatename, context, doctree):
    pdf = book_pdf(app)
    for group in context.get("header_buttons", []):
        if group.get("label") != "download-buttons":
            continue
        # The theme's ".pdf" entry is the browser's print dialog, not a PDF: never offered.
        buttons = [b for b in group["buttons"] if b.get("label") != "download-pdf-button"]
        group["buttons"] = buttons
        if pdf is None:
            continue
        buttons.append(
            {
                "type": "link",
                "url": context["pathto"](pdf.name, 1),
                "text": "book .pdf",
                "tooltip": "The whole book as a PDF",
                "icon": "fas fa-file-pdf",
                "label": "download-book-pdf-button",
            }
        )


def _publish_pdf(app, exception):
    pdf = book_pdf(app)
    if exception is None and pdf is not None:
        shutil.copy2(pdf, Path(app.outdir) / pdf.name)


def register(app):
    """Connect this part's handlers and its configuration values."""
    app.add_config_value("icl_latex_mainmatter", "", "env")
    app.add_config_value("icl_latex_backmatter", "", "env")
    app.connect("doctree-read", _latex_matter_switch)
    app.add_config_value("icl_book_pdf", "icl-book.pdf", "html")
    app.add_role("book-pdf", _book_pdf_role)
    app.connect("builder-inited", _pdf_tag)
    app.add_post_transform(_BookPdfLinks)
    app.add_post_transform(_CrossChapterExerciseRefs)
    app.add_post_transform(_LongTables)
    # After sphinx-book-theme's add_header_buttons (priority 501) has filled the download menu.
    app.connect("html-page-context", _download_menu_pdf, priority=600)
    app.connect("build-finished", _publish_pdf)
