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
- Solution cells without nbgrader's markers: the ``### BEGIN SOLUTION`` / ``### END SOLUTION`` lines that
  ``booktools.assignments`` cuts student notebooks at are authoring marks; the book's code cells (web and
  PDF) show the solution without them.
- The proof index (``prf-prf.html``) lists every labelled definition, theorem, proposition, conjecture and
  remark by its number and title ("Theorem 1.2 Orthogonality"), grouped by chapter in reading order, instead
  of sphinx-proof's internal labels and file paths.
- The theme's default colour mode is ``auto``, so a first visit logs no "invalid theme mode" error.
- A subject index: the terms of ``chapters/subject_index.yml`` are indexed (``genindex.html`` and the PDF's
  index) at every section whose prose, heading, figure caption or theorem title uses them, one entry per term
  and section, in bold where a heading or a definition/theorem title names the term.
- The book's index for the notebook editions: when a build succeeds (any builder: the HTML build
  and the editions' own ``dummy`` read alike), ``build-finished`` writes ``book-index.json`` next to
  the doctrees (``_build/book-index.json`` for ``make html``): the numbers, titles and anchors that
  ``booktools.editions`` needs (:func:`book_index`), as plain JSON with a format version, so the
  editions never read Sphinx's private pickled environment.
"""

from __future__ import annotations

import functools
import json
import os
import re
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
from sphinx import addnodes
from sphinx.transforms import SphinxTransform
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


# --- PDF: references to an exercise of another chapter --------------------------------------------
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


# --- solution cells without nbgrader's markers ------------------------------------------------------
SOLUTION_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)


def strip_solution_markers(source: str) -> str:
    """``source`` without its ``### BEGIN SOLUTION`` / ``### END SOLUTION`` lines."""
    return SOLUTION_MARKER.sub("", source)


class _SolutionMarkers(SphinxTransform):
    """Drop the markers from the code of notebook cells (myst-nb's ``cell_input`` containers)."""

    default_priority = 700

    def apply(self, **kwargs):
        for box in self.document.findall(nodes.container):
            if "cell_input" not in box["classes"]:
                continue
            for block in box.findall(nodes.literal_block):
                text = block.astext()
                clean = strip_solution_markers(text)
                if clean != text:
                    block.children = []
                    block += nodes.Text(clean)
                    block.rawsource = clean


# --- TeX as plain text (index entries cannot hold typeset math) --------------------------------------
_TEX_SYMBOLS = {
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "epsilon": "ϵ",
    "varepsilon": "ε",
    "eta": "η",
    "theta": "θ",
    "kappa": "κ",
    "lambda": "λ",
    "mu": "μ",
    "nu": "ν",
    "xi": "ξ",
    "pi": "π",
    "rho": "ρ",
    "sigma": "σ",
    "tau": "τ",
    "phi": "ϕ",
    "varphi": "φ",
    "chi": "χ",
    "psi": "ψ",
    "omega": "ω",
    "Gamma": "Γ",
    "Delta": "Δ",
    "Theta": "Θ",
    "Lambda": "Λ",
    "Sigma": "Σ",
    "Phi": "Φ",
    "Psi": "Ψ",
    "Omega": "Ω",
    "star": "⋆",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "ne": "≠",
    "approx": "≈",
    "sim": "∼",
    "to": "→",
    "infty": "∞",
    "cdot": "·",
    "times": "×",
    "sum": "Σ",
    "in": "∈",
    "top": "⊤",
    "R": "ℝ",
    "E": "𝔼",
    "ell": "ℓ",
    "pm": "±",
    "eICL": "e_ICL",
    "eIDG": "e_IDG",
    "Normal": "𝒩",
    "frac": "",
    "sqrt": "√",
    "mid": "|",
    "lVert": "‖",
    "rVert": "‖",
    "Vert": "‖",
    "langle": "⟨",
    "rangle": "⟩",
}  # the same table as _static/icl-search.js (search snippets)


def _group(arg: str) -> str:
    arg = arg.strip()
    return f"({arg})" if len(arg) > 1 else arg


def tex_to_text(tex: str) -> str:
    """A readable plain-text form of inline TeX: ``\\mu_1`` → ``μ_1``, ``\\Gamma`` → ``Γ``; other
    commands lose their backslash (``\\He_k`` → ``He_k``), braces and spacing commands go."""
    text = re.sub(r"\\(?:left|right|big|Big|bigl|bigr|,|;|!|quad|qquad)(?![a-zA-Z])", "", tex)
    text = re.sub(
        r"\\(?:mathrm|mathbf|mathit|mathcal|mathbb|operatorname|text|textrm)\{([^{}]*)\}",
        r"\1",
        text,
    )
    text = re.sub(
        r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}",
        lambda m: f"{_group(m.group(1))}/{_group(m.group(2))}",
        text,
    )
    text = re.sub(r"\\([a-zA-Z]+)", lambda m: _TEX_SYMBOLS.get(m.group(1), m.group(1)), text)
    text = re.sub(r"([_^])\{([^{}]*)\}", lambda m: m.group(1) + _group(m.group(2)), text)
    return re.sub(r"\s+", " ", re.sub(r"[{}\\&]", "", text)).strip()


def plain_text(node) -> str:
    """A node's text with its math as :func:`tex_to_text` writes it."""
    if isinstance(node, nodes.math):
        return tex_to_text(node.astext())
    if isinstance(node, nodes.Text):
        return str(node)
    return "".join(plain_text(child) for child in node.children)


# --- the proof index: numbers and titles, by chapter -------------------------------------------------
def _proof_titles(app, doctree):
    """Remember each labelled proof-type node's title (sphinx-proof keeps only its label)."""
    proofs = getattr(app.env, "proof_list", {})
    for node in doctree.findall(nodes.Element):
        label = node.get("label") if "realtype" in node.attributes else None
        if label in proofs and proofs[label]["docname"] == app.env.docname:
            title = next(iter(node.findall(nodes.title)), None)
            text = plain_text(title).strip() if title is not None else ""
            if text.startswith("(") and text.endswith(")"):  # sphinx-proof's title format " (%t)"
                text = text[1:-1]
            proofs[label]["icl_title"] = text


def reading_order(env) -> list[str]:
    """Every document of the book in the order of its table of contents."""
    order, stack = [], [env.config.root_doc]
    while stack:
        doc = stack.pop(0)
        if doc in order:
            continue
        order.append(doc)
        stack[0:0] = env.toctree_includes.get(doc, [])
    return order


def chapter_heading(env, docname: str) -> str:
    """``Chapter 1. Hermite expansions …`` for a numbered chapter, else the page's title."""
    title = plain_text(env.titles[docname]) if docname in env.titles else docname
    number = env.toc_secnumbers.get(docname, {}).get("")
    return f"Chapter {'.'.join(map(str, number))}. {title}" if number else title


def _proof_index_class():
    from sphinx.domains import Index, IndexEntry

    class ProofIndex(Index):
        """sphinx-proof's index (same name, so the page stays ``prf-prf.html``), made readable: one
        group per chapter in reading order, each entry "Theorem 1.2" with the result's title."""

        name = "prf"
        localname = "Index of definitions, theorems and other results"
        shortname = "Results"

        def generate(self, docnames=None):
            env = self.domain.env
            proofs = getattr(env, "proof_list", {})
            by_doc: dict[str, list] = {}
            for label, info in proofs.items():
                doc = info["docname"]
                number = env.toc_fignumbers.get(doc, {}).get(info["countertype"], {}).get(label)
                kind = info["realtype"].title()
                name = f"{kind} {'.'.join(map(str, number))}" if number else kind
                by_doc.setdefault(doc, []).append(
                    (
                        number or (),
                        IndexEntry(name, 0, doc, label, info.get("icl_title", ""), "", ""),
                    )
                )
            order = {doc: i for i, doc in enumerate(reading_order(env))}
            content = []
            for doc in sorted(by_doc, key=lambda d: (order.get(d, len(order)), d)):
                entries = [entry for _, entry in sorted(by_doc[doc], key=lambda t: t[0])]
                content.append((chapter_heading(env, doc), entries))
            return content, False

    return ProofIndex


# --- the subject index -------------------------------------------------------------------------------
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


# --- the book's index for the notebook editions --------------------------------------------------
BOOK_INDEX = "book-index.json"
BOOK_INDEX_VERSION = 1  # raise it when the fields below change: an older file is then rebuilt


def book_index_path(build_dir) -> Path:
    """Where a build whose doctrees are in ``<build_dir>/.doctrees`` writes its index."""
    return Path(build_dir) / BOOK_INDEX


def _numbers(value) -> list[int]:
    return [int(n) for n in value]


def book_index(app) -> dict:
    """What ``booktools.editions.BookIndex`` reads, from the complete environment of a build:

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


# --- the theme's first-visit console error ----------------------------------------------------------
def _default_mode(app, pagename, templatename, context, doctree):
    """pydata-sphinx-theme starts from ``localStorage.mode || default_mode`` (a template variable); left
    empty, a first visit (nothing stored yet) logs "Got invalid theme mode: . Resetting to auto." as a
    console error. ``auto`` is what it resets to anyway: the reader's system setting."""
    context.setdefault("default_mode", "auto")


def setup(app):
    app.connect("html-page-context", _default_mode)
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
    app.add_post_transform(_CrossChapterExerciseRefs)
    app.add_post_transform(_LongTables)
    # After sphinx-book-theme's add_header_buttons (priority 501) has filled the download menu.
    app.connect("html-page-context", _download_menu_pdf, priority=600)
    app.connect("build-finished", _publish_pdf)
    _register_bibliography_styles()
    app.connect("doctree-read", _qed_marks)
    app.add_transform(_SolutionMarkers)
    app.connect("doctree-read", _proof_titles)
    from sphinx_proof.domain import ProofDomain

    ProofDomain.indices = {_proof_index_class()}
    app.add_config_value("icl_subject_index", "chapters/subject_index.yml", "env")
    app.add_transform(_SubjectIndex)
    # The environment is complete once the build has finished: write the editions' index then.
    app.connect("build-finished", _write_book_index)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
