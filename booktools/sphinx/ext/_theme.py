"""The theme's console errors: a script registered twice, and the colour mode a first visit
starts from."""

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


def _default_mode(app, pagename, templatename, context, doctree):
    """pydata-sphinx-theme starts from ``localStorage.mode || default_mode`` (a template variable); left
    empty, a first visit (nothing stored yet) logs "Got invalid theme mode: . Resetting to auto." as a
    console error. ``auto`` is what it resets to anyway: the reader's system setting."""
    context.setdefault("default_mode", "auto")


def register(app):
    """Connect this part's handlers (called by :func:`booktools.sphinx.ext.setup`)."""
    app.connect("html-page-context", _default_mode)
    app.connect(
        "html-page-context", _dedupe_scripts, priority=1
    )  # first: a later handler may return a value and stop the event
