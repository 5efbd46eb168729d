"""Sphinx glue for rendering the book (loaded through ``_config.yml``; not used by the chapters).

- Removes duplicate ``<script>`` entries: with jupyter-book 1.0.4 the sphinx-thebe configuration script is
  added twice per page, and the second ``const THEBE_JS_URL`` is a console error in every browser.
- PDF chapter numbers that match the web book. Sphinx turns every top-level page into a LaTeX ``\\chapter``,
  so the introduction's sections, the notation page and the prologue would be chapters 1–5 and "chapter 4" of
  the text would print as Chapter 9. A raw LaTeX switch is put before ``icl_latex_mainmatter`` (chapters are
  numbered from there on, starting at 1) and before ``icl_latex_backmatter`` (unnumbered again); both are
  document names set in ``_config.yml``, whose LaTeX preamble defines the two switches (``book`` class:
  ``\\@mainmatter`` decides whether a ``\\chapter`` is numbered). Raw LaTeX is ignored by the HTML writer.
- The whole-book PDF on the site. ``make pdf`` builds ``_build/latex/icl-book.pdf``; when that file exists
  at the time of an HTML build, the build copies it to ``_build/html/icl-book.pdf``, the download menu of
  every page links to it and the ``{book-pdf}`` role (used in the introduction) becomes a link. The tag
  ``icl_book_pdf`` is set in such a build (and in the LaTeX build itself), so text about the PDF goes in an
  ``{only} icl_book_pdf`` block: a site without the PDF never mentions one. A ``{book-pdf}`` role left in a
  build without the PDF is a warning (``-W`` fails). The theme's ".pdf" entry, which only opened the
  browser's print dialog, is never offered.
- Bibliography labels in the in-text style: the style ``icl_author_year`` labels the reference list
  ``[Lu et al., 2025]``, exactly as the author–year citations in the text read (both are rendered by the
  same template), sorted by that label. A work with no recorded authors is cited by its short title (the
  entry's ``shorttitle``, else the first five words of its title) and year, in the text and in the list.
- ∎ at the end of every proof (sphinx-proof ``prf:proof``), in the web book and in the PDF.
"""

from __future__ import annotations

import functools
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pybtex.plugin
from docutils import nodes
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting import BaseSortingStyle
from pybtex.style.template import first_of, optional, tag
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)

QED = "∎"
BOOK_PDF_CLASS = "icl-book-pdf"


# --- duplicate scripts ------------------------------------------------------------------------------
def _dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        # The same script registered twice may come as filename None or "": compare file and attributes.
        key = (
            str(getattr(js, "filename", js) or ""),
            repr(sorted(getattr(js, "attributes", {}).items())),
        )
        if key not in seen:
            seen.add(key)
            unique.append(js)
    scripts[:] = unique


# --- PDF front, main and back matter ----------------------------------------------------------------
def _latex_matter_switch(app, doctree):
    switches = {
        app.config.icl_latex_mainmatter: r"\iclnumberedchapters",
        app.config.icl_latex_backmatter: r"\iclunnumberedchapters",
    }
    command = switches.get(app.env.docname)
    if command:
        doctree.insert(0, nodes.raw("", command + "\n", format="latex"))


# --- the whole-book PDF -----------------------------------------------------------------------------
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


# --- bibliography: author-year labels ---------------------------------------------------------------
def short_title(entry) -> str:
    """The entry's ``shorttitle``, else the first five words of its title (with "…" if cut)."""
    if "shorttitle" in entry.fields:
        return Text.from_latex(entry.fields["shorttitle"]).render_as("text")
    words = Text.from_latex(entry.fields.get("title", "")).render_as("text").split()
    return " ".join(words[:5]) + ("…" if len(words) > 5 else "")


def _short_title_node():
    from sphinxcontrib.bibtex.style.template import node

    @node
    def short_title_text(children, data):
        assert not children
        return Text(short_title(data["entry"]))

    return short_title_text


@functools.cache
def _reference_styles():
    """The referencing style (in-text) and its person style, built on sphinxcontrib-bibtex's author-year."""
    from sphinxcontrib.bibtex.style.referencing import PersonStyle
    from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
    from sphinxcontrib.bibtex.style.template import names

    short_title_text = _short_title_node()

    @dataclass
    class ShortTitlePersonStyle(PersonStyle):
        """Authors as sphinxcontrib-bibtex writes them; no authors or editors: the short title."""

        def author_or_editor_or_title(self, full: bool):
            other = None if full else self.other
            kwargs = dict(sep=self.sep, sep2=self.sep2, last_sep=self.last_sep, other=other)
            return first_of[
                optional[names("author", **kwargs)],
                optional[names("editor", **kwargs)],
                tag("em")[short_title_text],
            ]

    @dataclass
    class IclAuthorYearReferenceStyle(AuthorYearReferenceStyle):
        person: PersonStyle = field(default_factory=ShortTitlePersonStyle)

    return IclAuthorYearReferenceStyle


def author_year_label(entry, reference_style=None) -> str:
    """The entry's in-text author–year reference as plain text, e.g. ``Lu et al., 2025``."""
    from sphinxcontrib.bibtex.style.template import join, year

    style = reference_style or _reference_styles()()
    template = join(sep=style.author_year_sep)[
        style.person.author_or_editor_or_title(full=False), year
    ]
    return template.format_data({"entry": entry, "style": style}).render_as("text")


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels as the in-text citations read; equal labels get a, b, … (``Lu et al., 2025a``)."""

    def format_labels(self, sorted_entries):
        style = _reference_styles()()
        labels = [author_year_label(entry, style) for entry in sorted_entries]
        counts, seen = Counter(labels), Counter()
        for label in labels:
            if counts[label] > 1:
                seen[label] += 1
                yield label + "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
            else:
                yield label


class AuthorYearSortingStyle(BaseSortingStyle):
    """Sorted by the label's text (first author's surname or short title), then year and title."""

    def sorting_key(self, entry):
        style = _reference_styles()()
        label = author_year_label(entry, style).lower().removeprefix("von ")
        return (label, entry.fields.get("year", ""), entry.fields.get("title", "").lower())


class AuthorYearStyle(UnsrtStyle):
    """pybtex's unsrt entries with author–year labels, sorted by label."""

    default_label_style = "icl_author_year"
    default_sorting_style = "icl_author_year"


def _register_bibliography_styles():
    from sphinxcontrib.bibtex.plugin import register_plugin

    pybtex.plugin.register_plugin("pybtex.style.labels", "icl_author_year", AuthorYearLabelStyle)
    pybtex.plugin.register_plugin("pybtex.style.sorting", "icl_author_year", AuthorYearSortingStyle)
    pybtex.plugin.register_plugin("pybtex.style.formatting", "icl_author_year", AuthorYearStyle)
    register_plugin(
        "sphinxcontrib.bibtex.style.referencing", "icl_author_year", _reference_styles()
    )


# --- ∎ at the end of proofs -------------------------------------------------------------------------
def _qed_marks(app, doctree):
    from sphinx_proof.nodes import proof_node

    for proof in doctree.findall(proof_node):
        body = proof[0] if len(proof) and isinstance(proof[0], nodes.Element) else proof
        mark = nodes.inline("", QED, classes=["icl-qed"])
        last = body[-1] if len(body) else None
        if isinstance(last, nodes.paragraph):
            last += nodes.Text(" ")
            last += mark
        else:
            body += nodes.paragraph("", "", mark, classes=["icl-qed-line"])


def setup(app):
    app.connect(
        "html-page-context", _dedupe_scripts, priority=1
    )  # first: a later handler may return a value and stop the event
    app.add_config_value("icl_latex_mainmatter", "", "env")
    app.add_config_value("icl_latex_backmatter", "", "env")
    app.connect("doctree-read", _latex_matter_switch)
    app.add_config_value("icl_book_pdf", "icl-book.pdf", "html")
    app.add_role("book-pdf", _book_pdf_role)
    app.connect("builder-inited", _pdf_tag)
    app.add_post_transform(_BookPdfLinks)
    # After sphinx-book-theme's add_header_buttons (priority 501) has filled the download menu.
    app.connect("html-page-context", _download_menu_pdf, priority=600)
    app.connect("build-finished", _publish_pdf)
    _register_bibliography_styles()
    app.connect("doctree-read", _qed_marks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
