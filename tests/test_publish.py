"""`make publish` builds the published site in one folder, and the Pages workflow runs exactly that.

The whole command (a LaTeX build) is not run here; what it relies on is: the workflow's commands, the
Makefile target, and `booktools.publish.site_problems`, which fails the command on an incomplete folder.
"""

from __future__ import annotations

import re

import yaml

from booktools import editions, publish

from .conftest import ROOT


def test_the_pages_workflow_runs_make_publish_and_uploads_its_folder():
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())
    steps = [s for job in flow["jobs"].values() for s in job["steps"]]
    runs = [s["run"].strip() for s in steps if "run" in s and "make" in s["run"]]
    assert runs == ["make publish"], runs
    uploads = [
        s for s in steps if str(s.get("uses", "")).startswith("actions/upload-pages-artifact")
    ]
    assert [u["with"]["path"] for u in uploads] == ["_build/html"]


def test_make_publish_builds_editions_pdf_html_and_the_wheel():
    text = (ROOT / "Makefile").read_text()
    body = re.search(r"^publish:.*\n((?:\t.*\n)+)", text, re.M)
    assert body, "the Makefile has no publish target"
    assert "editions" in body[1] and "pdf" in body[1] and "booktools.publish _build/html" in body[1]


def test_an_incomplete_site_is_refused(tmp_path):
    site = tmp_path / "html"
    site.mkdir()
    problems = publish.site_problems(ROOT, site)
    assert any("no HTML" in p for p in problems)
    assert any("icl-book.pdf" in p for p in problems)
    assert any(editions.EDITION_DIR in p for p in problems)
    assert any("the editions install" in p for p in problems)
    # Complete it: every problem goes.
    (site / "index.html").write_text("<html></html>")
    (site / "icl-book.pdf").write_bytes(b"%PDF")
    (site / editions.EDITION_DIR).mkdir()
    for ed in (ROOT / editions.EDITION_DIR).glob("*.ipynb"):
        (site / editions.EDITION_DIR / ed.name).write_bytes(ed.read_bytes())
    (site / editions.PACKAGES_DIR).mkdir()
    (site / editions.PACKAGES_DIR / editions.wheel_url(ROOT).rsplit("/", 1)[1]).write_bytes(b"PK")
    assert publish.site_problems(ROOT, site) == []
