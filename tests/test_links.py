"""No broken internal link or anchor in the rendered book (`make test` builds it first)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from .conftest import ROOT

HTML = ROOT / "_build" / "html"


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key) and tag in ("a", "img", "script", "link"):
                self.links.append(attrs[key])


def parse(path: Path) -> _Collector:
    collector = _Collector()
    collector.feed(path.read_text(encoding="utf-8"))
    return collector


def broken_links(site: Path) -> list[str]:
    """Every internal link of ``site`` whose target file or anchor does not exist."""
    pages = [p for p in site.rglob("*.html") if "_static" not in p.parts]
    parsed = {p.resolve(): parse(p) for p in pages}
    problems = []
    for page, info in parsed.items():
        for link in info.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith(("//", "mailto:", "javascript:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.exists():
                problems.append(f"{page.relative_to(site.resolve())}: {link} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else parse(target).ids
                if unquote(parts.fragment) not in ids:
                    problems.append(f"{page.relative_to(site.resolve())}: {link} (no such anchor)")
    return problems


def test_no_broken_internal_links():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    assert broken_links(HTML) == []


def test_the_link_check_finds_a_broken_file_and_anchor(tmp_path):
    (tmp_path / "a.html").write_text(
        '<p id="here"></p><a href="b.html#nowhere">x</a><a href="c.html">y</a>'
    )
    (tmp_path / "b.html").write_text('<a href="a.html#here">back</a>')
    problems = broken_links(tmp_path)
    assert len(problems) == 2
    assert any("no such anchor" in p for p in problems) and any(
        "no such file" in p for p in problems
    )


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)


# A cross-reference renders its own kind ("Exercise 2.3", "Theorem 1.1", "Fig. 4.2"): writing the kind
# before it in the source gives "Exercise Exercise 2.3".
_DOUBLED_KIND = re.compile(
    r"\b(Exercise|Theorem|Proposition|Lemma|Definition|Corollary|Fig\.|Figure|Solution)\s+\1\s+\d",
    re.I,
)


def doubled_reference_words(site: Path) -> list[str]:
    problems = []
    for page in sorted(p for p in site.rglob("*.html") if "_static" not in p.parts):
        text = _Text()
        text.feed(page.read_text(encoding="utf-8"))
        flat = " ".join(" ".join(text.parts).split())
        problems += [f"{page.name}: …{m.group(0)}…" for m in _DOUBLED_KIND.finditer(flat)]
    return problems


def test_no_doubled_reference_words():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    assert doubled_reference_words(HTML) == []


def test_the_doubled_word_check_finds_one(tmp_path):
    (tmp_path / "a.html").write_text(
        '<p>see exercise <a href="#x"><span>Exercise 2.3</span></a>.</p>'
    )
    (tmp_path / "b.html").write_text('<p>see <a href="#x"><span>Exercise 2.3</span></a>.</p>')
    assert doubled_reference_words(tmp_path) == ["a.html: …exercise Exercise 2…"]


# --- index pages, favicon, proofs, bibliography labels, citation record ----------------------------
INDEX_PAGES = {
    "genindex.html": "the general index",
    "py-modindex.html": "the Python module index",
    "prf-prf.html": "sphinx-proof's index of definitions, theorems and proofs",
}


def linked_files(site: Path) -> set[Path]:
    """Every file that a page of ``site`` links to with an ``<a href>`` a reader can click (the
    ``<link rel="index">`` in every page's head does not count)."""
    targets = set()
    for page in (p for p in site.rglob("*.html") if "_static" not in p.parts):
        for href in re.findall(r'<a\b[^>]*\bhref="([^"#]+)', page.read_text(encoding="utf-8")):
            if not urlsplit(href).scheme and not href.startswith("//"):
                targets.add((page.parent / unquote(href)).resolve())
    return targets


def test_index_pages_exist_and_are_linked_from_a_page():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    linked = linked_files(HTML)
    for name, what in INDEX_PAGES.items():
        assert (HTML / name).exists(), f"{what} ({name}) was not built"
        assert (HTML / name).resolve() in linked, f"{what} ({name}) is linked from no page"


def test_the_index_check_sees_an_unlinked_page(tmp_path):
    (tmp_path / "a.html").write_text('<link rel="index" href="c.html"><a href="b.html">b</a>')
    (tmp_path / "b.html").write_text("<p>b</p>")
    (tmp_path / "c.html").write_text("<p>c</p>")
    files = linked_files(tmp_path)
    assert (tmp_path / "b.html").resolve() in files and (tmp_path / "c.html").resolve() not in files


def test_pages_have_the_favicon():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    name = Path(config["html"]["favicon"]).name
    page = HTML / "chapters" / "intro.html"
    icons = re.findall(r'<link rel="icon" href="([^"]+)"', page.read_text(encoding="utf-8"))
    assert icons and all(icon.endswith(name) for icon in icons), icons
    assert (page.parent / icons[0]).resolve().is_file()


class _Proofs(HTMLParser):
    """The text of every sphinx-proof proof (``<div class="proof admonition">``) of a page."""

    def __init__(self):
        super().__init__()
        self.proofs: list[str] = []
        self._depth = 0  # nesting of <div> inside the current proof; 0 = not in a proof

    def handle_starttag(self, tag, attrs):
        if tag != "div":
            return
        if self._depth:
            self._depth += 1
        elif sorted((dict(attrs).get("class") or "").split()) == ["admonition", "proof"]:
            self._depth = 1
            self.proofs.append("")

    def handle_endtag(self, tag):
        if tag == "div" and self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.proofs[-1] += data


def proofs_without_qed(site: Path) -> tuple[int, list[str]]:
    count, missing = 0, []
    for page in sorted((site / "chapters").glob("*.html")):
        parser = _Proofs()
        parser.feed(page.read_text(encoding="utf-8"))
        count += len(parser.proofs)
        missing += [
            f"{page.name}: …{' '.join(p.split())[-60:]}"
            for p in parser.proofs
            if not p.rstrip().endswith("∎")
        ]
    return count, missing


def test_every_proof_ends_with_a_qed_mark():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    count, missing = proofs_without_qed(HTML)
    assert count >= 5 and missing == []


def test_the_qed_check_finds_a_proof_without_one(tmp_path):
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "a.html").write_text(
        '<div class="proof admonition" id="proof"><p>Proof. x</p><div class="math">y</div>'
        '<p class="icl-qed-line"><span class="icl-qed">∎</span></p></div>'
        '<div class="proof admonition" id="proof-1"><p>Proof. z</p><div>w</div></div>'
        '<div class="proof theorem admonition"><p>A theorem</p></div>'
    )
    count, missing = proofs_without_qed(tmp_path)
    assert count == 2 and len(missing) == 1 and missing[0].startswith("a.html: …Proof. z")


def _bibliography_labels() -> dict[str, str]:
    html = (HTML / "chapters" / "bibliography.html").read_text(encoding="utf-8")
    entries = re.findall(
        r'<div class="citation" id="([^"]+)" role="doc-biblioentry">\s*<span class="label">'
        r'<span class="fn-bracket">\[</span>(.*?)<span class="fn-bracket">\]</span>',
        html,
        re.S,
    )
    return {anchor: re.sub(r"<[^>]+>", "", label) for anchor, label in entries}


def test_bibliography_labels_read_as_the_citations_in_the_text():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    from pybtex.database import parse_file

    labels = _bibliography_labels()
    entries = parse_file(str(ROOT / "references.bib")).entries
    assert len(labels) == len(entries)
    # In-text parenthetical citations "[Lu et al., 2025]" link to the entry: their text is its label.
    cited: dict[str, set[str]] = {}
    for page in (HTML / "chapters").glob("*.html"):
        html = page.read_text(encoding="utf-8")
        for anchor, text in re.findall(r'href="bibliography\.html#([^"]+)"[^>]*>(.*?)</a>', html):
            cited.setdefault(anchor, set()).add(re.sub(r"<[^>]+>", "", text))
    for anchor, label in labels.items():
        assert not re.fullmatch(r"[A-Za-z]{2,5}\+?\d\d", label), f"alphabetic label [{label}]"
        assert re.search(r", (19|20)\d\d[a-z]?$", label), f"no year in the label [{label}]"
        parenthetical = {t for t in cited.get(anchor, set()) if re.search(r", \d{4}", t)}
        assert not parenthetical or label in parenthetical, (label, parenthetical)
    # A work without recorded authors is labelled by its title's first words and year.
    for entry in entries.values():
        if "author" not in entry.persons and "editor" not in entry.persons:
            first_words = " ".join(entry.fields["title"].split()[:3])
            assert any(label.startswith(first_words) for label in labels.values()), first_words


def test_citation_cff_matches_the_config_and_the_package():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    pyproject = (ROOT / "pyproject.toml").read_text()
    project = {"version": re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1)}
    assert cff["cff-version"] == "1.2.0"
    assert cff["title"] == config["title"]
    assert cff["authors"] == [{"name": config["author"]}]
    assert cff["repository-code"] == config["repository"]["url"]
    assert cff["version"] == project["version"]
    assert cff["license"] == "MIT" and str(cff["date-released"]) == "2026-12-03"
    intro = (ROOT / "chapters" / "intro.md").read_text()
    assert "## How to cite" in intro
    assert f"version = {{{project['version']}}}" in intro and config["repository"]["url"] in intro


# "Lu et al. [Lu et al., 2025]": the author written before a parenthetical citation that names them again.
# Write {cite:t}`key` ("Lu et al. [2025]") instead.
_DOUBLED_AUTHOR = re.compile(
    r"\b([A-Z][\w-]+)((?: et al\.)|(?: and [A-Z][\w-]+))? \[\1\2?, (?:19|20)\d\d"
)


def doubled_citation_names(site: Path) -> list[str]:
    problems = []
    for page in sorted(p for p in site.rglob("*.html") if "_static" not in p.parts):
        text = _Text()
        text.feed(page.read_text(encoding="utf-8"))
        flat = " ".join("".join(text.parts).split())
        problems += [f"{page.name}: …{m.group(0)}…" for m in _DOUBLED_AUTHOR.finditer(flat)]
    return problems


def test_no_author_named_twice_before_a_citation():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    assert doubled_citation_names(HTML) == []


def test_the_doubled_author_check_finds_one(tmp_path):
    (tmp_path / "a.html").write_text(
        '<p>the forms of Lu et al. [<a href="b.html#x">Lu <em>et al.</em>, 2025</a>] and of '
        'Lu et al. [<a href="b.html#x">2025</a>], by Garg [<a href="#">Zhang, 2024</a>].</p>'
    )
    assert doubled_citation_names(tmp_path) == ["a.html: …Lu et al. [Lu et al., 2025…"]
