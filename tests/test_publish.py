"""`make publish` builds the published site in one folder; the Pages workflow runs it on a tested commit.

The whole command (a LaTeX build) is not run here; what it relies on is: the workflow's commands, the
Makefile target, and `booktools.publish.site_problems`, which fails the command on an incomplete folder.
"""

from __future__ import annotations

import hashlib
import re
import shutil

import pytest
import yaml

from booktools import editions, install_cell, publish
from booktools.wheel import build_wheel

from .conftest import ROOT


def _workflow(name):
    return yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())


def _steps(flow):
    return [s for job in flow["jobs"].values() for s in job["steps"]]


def test_the_pages_workflow_publishes_only_a_tested_commit_and_keeps_the_wheels():
    flow = _workflow("pages.yml")
    trigger = flow[True]  # YAML 1.1 reads the key `on` as True
    assert set(trigger) == {"workflow_run"}, "pages.yml must start only from a finished test run"
    assert trigger["workflow_run"]["workflows"] == [_workflow("test.yml")["name"]]
    assert trigger["workflow_run"]["branches"] == ["main"]
    (job,) = flow["jobs"].values()
    assert "github.event.workflow_run.conclusion == 'success'" in job["if"]
    checkouts = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout")]
    assert [c["with"]["ref"] for c in checkouts] == ["${{ github.event.workflow_run.head_sha }}"]
    runs = [s["run"].strip() for s in job["steps"] if "run" in s and "make " in s["run"]]
    site = install_cell.wheel_url(ROOT).split(install_cell.PACKAGES_DIR + "/")[0]
    assert runs == [f"make publish KEEP_FROM={site}"], runs
    uploads = [
        s
        for s in job["steps"]
        if str(s.get("uses", "")).startswith("actions/upload-pages-artifact")
    ]
    assert [u["with"]["path"] for u in uploads] == ["_build/html"]


def test_the_test_workflow_runs_the_readmes_command_on_every_pull_request_and_push():
    flow = _workflow("test.yml")
    assert {"push", "pull_request"} <= set(flow[True])
    assert flow[True]["push"] is None, "every branch's pushes are tested"
    runs = [s["run"].strip() for s in _steps(flow) if "run" in s]
    assert runs[-1] == ".ci/run", runs
    assert "make test" in (ROOT / ".ci" / "run").read_text().splitlines()[-1]
    assert "make test" in (ROOT / "README.md").read_text()


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
    wheel = site / install_cell.wheel_path(ROOT)
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"PK")  # at its path, but not the build the cells pin
    publish.write_index(site / install_cell.PACKAGES_DIR)
    assert [p for p in publish.site_problems(ROOT, site) if "SHA-256" in p]
    build_wheel(ROOT, tmp_path / "dist")
    shutil.copyfile(tmp_path / "dist" / wheel.name, wheel)
    assert publish.site_problems(ROOT, site) == []
    (site / install_cell.PACKAGES_DIR / publish.INDEX).write_text("")
    assert [p for p in publish.site_problems(ROOT, site) if "does not list" in p]


def test_publish_keeps_the_wheels_of_the_site_deployed_before(tmp_path):
    """A deployment replaces the site: --keep-from copies every wheel the live site lists (checked
    against its folder's hash) into the new one, and the new index lists old and new. A first
    deployment (no index yet) keeps nothing; a listed wheel whose bytes do not match its folder fails."""
    from .browser import serve

    old_site, new_packages = tmp_path / "old", tmp_path / "new" / install_cell.PACKAGES_DIR
    data = b"an earlier build of the package"
    folder = hashlib.sha256(data).hexdigest()[:16]
    (old_site / install_cell.PACKAGES_DIR / folder).mkdir(parents=True)
    (old_site / install_cell.PACKAGES_DIR / folder / "icl_book-0.1.0-py3-none-any.whl").write_bytes(
        data
    )
    with serve(old_site) as url:
        assert (
            publish.keep_earlier_wheels(url, new_packages) == []
        )  # no index.txt: first deployment
        publish.write_index(old_site / install_cell.PACKAGES_DIR)
        kept = publish.keep_earlier_wheels(url, new_packages)
        assert kept == [f"{folder}/icl_book-0.1.0-py3-none-any.whl"]
        assert (new_packages / kept[0]).read_bytes() == data
        (new_packages / "0123456789abcdef").mkdir()
        (new_packages / "0123456789abcdef" / "icl_book-0.1.0-py3-none-any.whl").write_bytes(b"new")
        assert publish.write_index(new_packages) == sorted(
            [kept[0], "0123456789abcdef/icl_book-0.1.0-py3-none-any.whl"]
        )
        (old_site / install_cell.PACKAGES_DIR / kept[0]).write_bytes(b"tampered")
        with pytest.raises(SystemExit, match="does not have the SHA-256 its folder names"):
            publish.keep_earlier_wheels(url, tmp_path / "other")
