"""Sphinx glue for rendering the book (loaded through ``_config.yml``; not used by the chapters).

- Removes duplicate ``<script>`` entries: with jupyter-book 1.0.4 the sphinx-thebe configuration script is
  added twice per page, and the second ``const THEBE_JS_URL`` is a console error in every browser.
- PDF chapter numbers that match the web book. Sphinx turns every top-level page into a LaTeX ``\\chapter``,
  so the introduction's sections, the notation page and the prologue would be chapters 1–5 and "chapter 4" of
  the text would print as Chapter 9. A raw LaTeX switch is put before ``icl_latex_mainmatter`` (chapters are
  numbered from there on, starting at 1) and before ``icl_latex_backmatter`` (unnumbered again); both are
  document names set in ``_config.yml``, whose LaTeX preamble defines the two switches (``book`` class:
  ``\\@mainmatter`` decides whether a ``\\chapter`` is numbered). Raw LaTeX is ignored by the HTML writer.
"""

from __future__ import annotations

from docutils import nodes


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


def _latex_matter_switch(app, doctree):
    switches = {
        app.config.icl_latex_mainmatter: r"\iclnumberedchapters",
        app.config.icl_latex_backmatter: r"\iclunnumberedchapters",
    }
    command = switches.get(app.env.docname)
    if command:
        doctree.insert(0, nodes.raw("", command + "\n", format="latex"))


def setup(app):
    app.connect(
        "html-page-context", _dedupe_scripts, priority=1
    )  # first: a later handler may return a value and stop the event
    app.add_config_value("icl_latex_mainmatter", "", "env")
    app.add_config_value("icl_latex_backmatter", "", "env")
    app.connect("doctree-read", _latex_matter_switch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
