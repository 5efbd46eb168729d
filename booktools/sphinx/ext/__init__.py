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

The parts, one private module each, registered by :func:`setup` in this order (the order of
handlers on one event):

- ``_theme``: the duplicate scripts and the theme's default colour mode.
- ``_pdf``: the PDF's front, main and back matter, cross-chapter exercise references, long tables,
  and the whole-book PDF.
- ``_bibliography``: the author–year labels.
- ``_proofs``: ∎ at the end of proofs and the proof index.
- ``_solutions``: the solution markers dropped from shown code.
- ``_subject_index``: the subject index.
- ``_book_index``: the book's index for the notebook editions.
- ``_text``: TeX as plain text, for titles and index entries (``_proofs`` and ``_subject_index``
  use it; it registers nothing).
"""

from __future__ import annotations

from . import _bibliography, _book_index, _pdf, _proofs, _solutions, _subject_index, _theme
from ._book_index import BOOK_INDEX_VERSION, book_index, book_index_path
from ._solutions import strip_solution_markers
from ._text import tex_to_text

__all__ = [
    "BOOK_INDEX_VERSION",
    "book_index",
    "book_index_path",
    "setup",
    "strip_solution_markers",
    "tex_to_text",
]

_PARTS = (_theme, _pdf, _bibliography, _proofs, _solutions, _subject_index, _book_index)


def setup(app):
    """The Sphinx extension's entry point (``_config.yml``'s ``local_extensions``)."""
    for part in _PARTS:
        part.register(app)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
