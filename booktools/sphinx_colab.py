"""Sphinx extension: each chapter page's Colab launch button opens its plain-notebook edition.

sphinx-book-theme builds the Colab URL from the page's own source (``chapters/NN_slug.ipynb``, the MyST
notebook the site renders). This extension rewrites that URL to ``notebooks/NN_slug.ipynb``, the edition
written by ``python -m booktools.editions build`` (``make editions``). A chapter page without an edition
is a warning (so ``-W`` fails): the button would open a notebook that does not exist.

Registered in ``_config.yml`` under ``sphinx: local_extensions: {booktools.sphinx_colab: ./}``.
"""

from __future__ import annotations

import re
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


def setup(app):
    # sphinx-book-theme adds the launch buttons at priority 501; rewrite them right after.
    app.connect("html-page-context", _rewrite, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
