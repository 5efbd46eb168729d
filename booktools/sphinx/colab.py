"""Sphinx extension: each chapter page's Colab button and download menu give the plain-notebook edition.

sphinx-book-theme builds the Colab URL from the page's own source (``chapters/NN_slug.ipynb``, the MyST
notebook the site renders). This extension rewrites that URL to ``notebooks/NN_slug.ipynb``, the edition
written by ``python -m booktools.editions build`` (``make editions``). A chapter page without an edition
is a warning (so ``-W`` fails): the button would open a notebook that does not exist.

The page's download menu offered the authoring files from ``_sources/`` (the executed MyST notebook, with
directive fences and the book's undefined macros when Jupyter renders it). It offers instead the edition
(".ipynb", published at ``notebooks/NN_slug.ipynb`` of the site) and the chapter's Jupytext source (".md",
published beside the page as ``chapters/NN_slug.md``); a plain page offers its ``.md``. The theme's ".pdf"
entry (the browser's print dialog) goes: ``booktools.sphinx.ext`` puts the whole-book PDF there when a
build has one.

Registered in ``_config.yml`` under ``sphinx: local_extensions: {booktools.sphinx.colab: ./}``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
CHAPTER = re.compile(r"^chapters/(?P<stem>\d\d_[\w-]+)$")
EDITION_DIR = "notebooks"


def colab_edition_url(url: str, pagename: str) -> str:
    """``url`` with the page's notebook path replaced by its edition's."""
    m = CHAPTER.match(pagename)
    if not m or not url.endswith(f"/{pagename}.ipynb"):
        return url
    return url[: -len(f"{pagename}.ipynb")] + f"{EDITION_DIR}/{m['stem']}.ipynb"


def _rewrite(app, pagename, templatename, context, doctree):
    m = CHAPTER.match(pagename)
    if not m:
        return None
    edition = Path(app.srcdir) / EDITION_DIR / f"{m['stem']}.ipynb"
    if not edition.exists():
        LOGGER.warning(
            f"{pagename}: no edition {edition.name} in {EDITION_DIR}/ (run `make editions`)"
        )
        return None
    colab = (app.config.html_theme_options.get("launch_buttons") or {}).get("colab_url", "")
    colab = colab.rstrip("/")
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if isinstance(group, dict) else []:
            url = button.get("url", "")
            if colab and url.startswith(colab + "/"):
                button["url"] = colab_edition_url(url, pagename)
    return None


def _sources_of(app) -> dict[str, Path]:
    """What the site publishes beside the pages: ``{site path: file}`` (editions and Markdown sources)."""
    src = Path(app.srcdir)
    out = {}
    for docname in sorted(app.env.found_docs):
        m = CHAPTER.match(docname)
        if m:
            edition = src / EDITION_DIR / f"{m['stem']}.ipynb"
            if edition.exists():
                out[f"{EDITION_DIR}/{edition.name}"] = edition
        md = src / f"{docname}.md"
        if md.exists() and docname.startswith("chapters/"):
            out[f"{docname}.md"] = md
    return out


def _download_menu(app, pagename, templatename, context, doctree):
    published = _sources_of(app)
    m = CHAPTER.match(pagename)
    wanted = []
    if m and f"{EDITION_DIR}/{m['stem']}.ipynb" in published:
        wanted.append(
            {
                "type": "link",
                "url": context["pathto"](f"{EDITION_DIR}/{m['stem']}.ipynb", 1),
                "text": ".ipynb",
                "tooltip": "The chapter as a plain Jupyter notebook (what Colab opens)",
                "icon": "fas fa-code",
                "label": "download-notebook-button",
            }
        )
    if f"{pagename}.md" in published:
        wanted.append(
            {
                "type": "link",
                "url": context["pathto"](f"{pagename}.md", 1),
                "text": ".md",
                "tooltip": "The page's source (MyST Markdown"
                + (", a Jupytext notebook)" if m else ")"),
                "icon": "fas fa-file",
                "label": "download-source-button",
            }
        )
    for group in context.get("header_buttons", []):
        if not isinstance(group, dict) or group.get("label") != "download-buttons":
            continue
        # Keep what is not the theme's source, notebook or print entry (the book's PDF, when built).
        theirs = ("download-source-button", "download-notebook-button", "download-pdf-button")
        group["buttons"] = wanted + [b for b in group["buttons"] if b.get("label") not in theirs]
    context["header_buttons"] = [
        g
        for g in context.get("header_buttons", [])
        if not (isinstance(g, dict) and g.get("label") == "download-buttons" and not g["buttons"])
    ]
    return None


def _publish_sources(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    for rel, path in _sources_of(app).items():
        target = Path(app.outdir) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def setup(app):
    # After the book's PDF entry (booktools.sphinx.ext, priority 600) has been put in the menu.
    app.connect("html-page-context", _download_menu, priority=601)
    app.connect("build-finished", _publish_sources)
    # sphinx-book-theme adds the launch buttons at priority 501; rewrite them right after.
    app.connect("html-page-context", _rewrite, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
