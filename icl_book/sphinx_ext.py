"""Sphinx glue for rendering the book (loaded through ``_config.yml``; not used by the chapters).

- Removes duplicate ``<script>`` entries: with jupyter-book 1.0.4 the sphinx-thebe configuration script is
  added twice per page, and the second ``const THEBE_JS_URL`` is a console error in every browser.
"""

from __future__ import annotations


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


def setup(app):
    app.connect(
        "html-page-context", _dedupe_scripts, priority=1
    )  # first: a later handler may return a value and stop the event
    return {"parallel_read_safe": True, "parallel_write_safe": True}
