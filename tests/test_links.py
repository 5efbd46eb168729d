"""No broken internal link or anchor in the rendered book (`make test` builds it first)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

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
