"""The plain-notebook editions ``notebooks/NN_slug.ipynb`` (booktools/editions.py): current, free of MyST,
rendered by nbconvert + MathJax without raw TeX or errors, solutions collapsed.

The staleness test needs the book's index (``_build/book-index.json``, written by every build
through ``booktools.sphinx.ext``): ``make test`` builds ``_build`` before pytest; when that index is
missing or older than a chapter, the book is read into a temporary folder (about a minute), removed
afterwards.
Running the editions in a fresh venv is in ``tests/test_colab_path.py``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import nbformat
import pytest
import yaml

from booktools import book_index, chapters, editions
from booktools.sphinx import ext
from booktools.sphinx.colab import colab_edition_url

ROOT = Path(__file__).resolve().parent.parent
EDITIONS = [editions.edition_path(ROOT, p) for p in chapters.chapter_notebooks(ROOT)]
MACROS = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]["mathjax3_config"][
    "tex"
]["macros"]


@pytest.fixture(scope="module")
def index():
    return book_index.load_index(ROOT)


def _markdown_cells(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]


def test_every_chapter_has_an_edition():
    # the editions folder holds exactly the chapters' editions (EDITIONS comes from the registry)
    names = [p.name for p in chapters.chapter_notebooks(ROOT)]
    assert names, "no chapters"
    assert sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")) == sorted(names)


@pytest.mark.slow  # the index fixture builds the Sphinx environment (~25 s)
def test_editions_are_current(index):
    problems = editions.stale_editions(ROOT, index)
    assert not problems, "\n".join(problems)


@pytest.mark.slow  # the index fixture builds the Sphinx environment (~25 s)
def test_staleness_check_can_fail(index, tmp_path):
    chapter = chapters.chapter_notebooks(ROOT)[0]
    text = editions._dumps(editions.convert(index, chapter))
    assert text == (ROOT / "notebooks" / chapter.name).read_text()
    nb = nbformat.read(chapter, as_version=4)
    nb.cells[-1].source += "\n\nOne more sentence."
    other = editions._dumps(editions.convert_notebook(index, nb, chapter.stem))
    assert other != text


@pytest.mark.parametrize("path", EDITIONS, ids=lambda p: p.stem)
def test_no_myst_left(path):
    problems = [
        f"cell {i}: {p}"
        for i, cell in enumerate(_markdown_cells(path))
        for p in editions.myst_leftovers(cell.source, MACROS)
    ]
    assert not problems, "\n".join(problems)


def test_myst_scan_can_fail():
    cell = (
        "(hermite-def)=\n```{prf:theorem} Stein\n:label: x\n$\\E[f'(Z)]$ by {cite}`stein1981`\n```\n\n"
        ":::{note}\nsee {numref}`fig-a`, ??\n:::\n\n$$\nx\n$$ (eq-a)"
    )
    found = " ".join(editions.myst_leftovers(cell, MACROS))
    for what in (
        "MyST role",
        "directive fence",
        "colon fence",
        "directive option",
        "target",
        "equation label",
        "??",
        "book macro \\E",
    ):
        assert what in found, what
    assert editions.myst_leftovers("A plain $\\mathbb{E}[x]$ sentence with `code`.", MACROS) == []


@pytest.mark.parametrize("path", EDITIONS, ids=lambda p: p.stem)
def test_solutions_collapsed_and_code_unchanged(path):
    """Solution code: hidden source, a Colab form title; every other code cell exactly the chapter's."""
    nb = nbformat.read(path, as_version=4)
    chapter = nbformat.read(ROOT / "chapters" / path.name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source.removeprefix(editions.SOLUTION_TITLE + "\n") for c in code] == [
        c.source for c in chapter.cells if c.cell_type == "code"
    ]
    n_solutions = 0
    for cell in code:
        if "### BEGIN SOLUTION" in cell.source or cell.metadata.get("icl_edition", {}).get(
            "solution"
        ):
            n_solutions += 1
            assert cell.source.startswith(editions.SOLUTION_TITLE), cell.source[:80]
            assert cell.metadata["jupyter"]["source_hidden"] is True
            assert cell.metadata["cellView"] == "form"
            assert cell.outputs == [], "a solution's outputs would give the answer away in Colab"
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            assert "<details open" not in cell.source
    assert n_solutions > 0
    assert "kernelspec" in nb.metadata and "jupytext" not in nb.metadata
    assert nb.cells[0].source.startswith("# "), "the edition starts with the chapter title"
    # its content (this version's install cell) is checked by tests/test_colab_path.py
    assert "google.colab" in code[0].source and code[0].metadata.get("tags") == ["remove-cell"]


@pytest.mark.slow  # the index fixture builds the Sphinx environment (~25 s)
def test_converter_output(index):
    """A theorem, a proof, references and a citation come out as the book numbers them."""
    doc = "chapters/03_asymptotic_theory"
    conv = editions.Converter(index, doc, {"x": "0.5"})
    proofs = index.data["proofs"]
    label = next(k for k, v in proofs.items() if v["realtype"] == "theorem")
    numbers = index.data["fignumbers"][proofs[label]["docname"]]["theorem"][label]
    number = ".".join(map(str, numbers))
    md = conv.blocks(
        f"```{{prf:theorem}} Title with $\\E X$\n:label: {label}\n\nBody {{glue:}}`x`.\n```\n\n"
        f"See {{prf:ref}}`{label}` and {{cite:t}}`lu2025asymptotic`."
    )
    assert md.startswith(f"> **Theorem {number} (Title with $\\mathbb{{E}} X$).** Body 0.5.")
    assert f"[Theorem {number}](https://" in md and "Lu *et al.* [[2025]" in md
    with pytest.raises(editions.EditionError, match="directive"):
        conv.blocks("```{unknowndirective}\nx\n```")
    with pytest.raises(book_index.BookIndexError, match="unresolved"):
        conv.blocks("{prf:ref}`no-such-label`")
    with pytest.raises(editions.EditionError, match="glued"):
        conv.blocks("{glue:}`missing`")


# ---- the book's index: written by the build, read by the editions -------------------------------
INDEX_FIELDS = {
    "version", "secnumbers", "fignumbers", "titles", "numfig_format", "proofs", "exercises",
    "labels", "equations", "python",
}  # fmt: skip


def test_the_build_writes_the_index_the_editions_read():
    """``_build/book-index.json`` (written by the HTML build's ``build-finished``) numbers every
    theorem and section as the built pages do."""
    path = ext.book_index_path(ROOT / "_build")
    html = ROOT / "_build" / "html"
    if not path.exists() or not html.exists():
        pytest.skip("no _build/book-index.json or _build/html (make html)")
    data = json.loads(path.read_text())
    assert data["version"] == ext.BOOK_INDEX_VERSION and set(data) == INDEX_FIELDS
    index = book_index.BookIndex(data, "https://example.org/", {})
    theorems = [
        k for k, v in data["proofs"].items() if v["realtype"] == "theorem" and not v["nonumber"]
    ]
    assert len(theorems) >= 5, theorems
    pages: dict[str, str] = {}

    def page(doc):
        if doc not in pages:
            pages[doc] = (html / f"{doc}.html").read_text()
        return pages[doc]

    for label in theorems:
        doc = data["proofs"][label]["docname"]
        shown = re.search(
            rf'id="{re.escape(label)}">\s*<p class="admonition-title">'
            r'<span class="caption-number">([^<]+?) </span>',
            page(doc),
        )
        assert shown, (doc, label)
        assert index.proof(label) == (shown[1], f"https://example.org/{doc}.html#{label}")
    chapter_docs = [f"chapters/{p.stem}" for p in chapters.chapter_notebooks(ROOT)]
    n_sections = 0
    for doc in chapter_docs:
        assert data["titles"][doc] and isinstance(data["titles"][doc], str)
        for anchor, number in index.section_numbers(doc):
            assert re.search(
                rf'<section id="{re.escape(anchor)}">\s*(?:<span id="[^"]*"></span>)*'
                rf'<h\d><span class="section-number">{re.escape(number)}\. </span>',
                page(doc),
            ), (doc, anchor, number)
            n_sections += 1
    assert n_sections >= 10, n_sections


def _fake_build(data, calls):
    """A stand-in for ``book_index.sphinx_build``: writes ``data`` as a build's index into ``out``."""

    def build(root, out):
        calls.append(Path(out))
        build_dir = Path(out) / "_build"
        build_dir.mkdir(parents=True)
        (build_dir / ".doctrees").mkdir()
        ext.book_index_path(build_dir).write_text(json.dumps(data))
        return build_dir

    return build


def test_a_stale_index_is_rebuilt_in_a_folder_that_is_removed(tmp_path, monkeypatch):
    """Missing, older than a chapter, or of another version: the index is read from a build into a
    temporary folder, which is gone afterwards (also when the build fails); a fresh one is used as
    is."""
    data = {"version": ext.BOOK_INDEX_VERSION, "titles": {"chapters/intro": "Built"}}
    calls: list[Path] = []
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(book_index, "sphinx_build", _fake_build(data, calls))
    build_dir = tmp_path / "_build"

    assert book_index.load_index(ROOT, build_dir).data == data  # missing
    assert len(calls) == 1 and calls[0].parent == temp and list(temp.iterdir()) == []

    build_dir.mkdir()
    own = {**data, "titles": {"chapters/intro": "Own"}}
    path = ext.book_index_path(build_dir)
    path.write_text(json.dumps(own))
    assert book_index.load_index(ROOT, build_dir).data == own  # fresh: no build
    assert len(calls) == 1

    os.utime(path, (0, 0))  # older than every chapter
    assert book_index.load_index(ROOT, build_dir).data == data
    path.write_text(json.dumps({**own, "version": -1}))  # another format
    assert book_index.load_index(ROOT, build_dir).data == data
    assert len(calls) == 3 and list(temp.iterdir()) == []

    def failing(root, out):
        (Path(out) / "partial").write_text("x")
        raise book_index.BookIndexError("book build failed")

    monkeypatch.setattr(book_index, "sphinx_build", failing)
    with pytest.raises(book_index.BookIndexError, match="failed"):
        book_index.load_index(ROOT, tmp_path / "none")
    assert list(temp.iterdir()) == []


@pytest.mark.slow  # reads the whole book with the dummy builder (~60 s)
def test_the_fallback_build_writes_the_index(tmp_path, monkeypatch):
    """The editions' own read of the book (no usable index) goes through ``booktools.sphinx.ext``'s
    hook as the HTML build does, gives the committed editions, and leaves no folder behind."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    index = book_index.load_index(ROOT, tmp_path / "no-build")
    assert set(index.data) == INDEX_FIELDS
    assert list(temp.iterdir()) == []
    problems = editions.stale_editions(ROOT, index)
    assert not problems, "\n".join(problems)


def test_readme_colab_links_open_editions():
    links = re.findall(
        r"colab\.research\.google\.com/github/[^)\s]+", (ROOT / "README.md").read_text()
    )
    assert links
    for link in links:
        path = link.split("/blob/", 1)[1].split("/", 1)[1]
        assert path.startswith("notebooks/"), link
        assert (ROOT / path).exists(), link


def test_site_colab_button_url():
    url = "https://colab.research.google.com/github/icl-book/icl-book/blob/main/chapters/03_asymptotic_theory.ipynb"
    assert colab_edition_url(url, "chapters/03_asymptotic_theory").endswith(
        "/main/notebooks/03_asymptotic_theory.ipynb"
    )
    assert colab_edition_url(
        url.replace("03_asymptotic_theory", "intro"), "chapters/intro"
    ).endswith("chapters/intro.ipynb")


def test_built_site_colab_buttons_open_editions():
    html = ROOT / "_build" / "html" / "chapters"
    if not html.exists():
        pytest.skip("no _build/html (make html)")
    for path in EDITIONS:
        page = (html / (path.stem + ".html")).read_text()
        urls = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', page)
        assert urls and all(u.endswith(f"/notebooks/{path.name}") for u in urls), (path.stem, urls)


# ---- rendered as Jupyter renders it -----------------------------------------------------------------
@pytest.fixture(scope="module")
def mathjax():
    from tests.edition_render import site_mathjax

    found = site_mathjax(ROOT)
    if found is None:
        pytest.skip("the site's MathJax (_build/html/**/tex-chtml.js) is missing: make html")
    return found


def _render(paths, out, mathjax, browser):
    from tests.edition_render import inspect, render_html

    htmls = [render_html(p, out / f"{p.stem}.html", mathjax) for p in paths]
    return dict(zip([p.stem for p in paths], inspect(htmls, browser).values(), strict=True))


@pytest.mark.browser
def test_editions_render_clean(tmp_path, mathjax, chromium):
    results = _render(EDITIONS, tmp_path, mathjax, chromium)
    for stem, r in results.items():
        assert r["math"] > 0, stem
        assert r["raw_tex"] == [], (stem, r["raw_tex"][:5])
        assert r["merror"] == 0, (stem, r["merror"])
        assert r["details"] > 0 and r["open_details"] == 0, (stem, r)
        assert r["visible_solution_text"] == [], (stem, r["visible_solution_text"][:3])
        assert r["hidden_code_cells"] > 0 and r["visible_solution_code"] == [], (stem, r)


@pytest.mark.browser
def test_render_check_can_fail(tmp_path, mathjax, chromium):
    """The MyST chapter itself shows raw TeX / MathJax errors; open details and visible solution code count."""
    chapter = ROOT / "chapters" / "01_hermite.ipynb"  # uses \\He and \\E in its prose
    bad = nbformat.v4.new_notebook()
    bad.cells = [
        nbformat.v4.new_markdown_cell("Macro $\\E[X]$ and raw \\frac{1}{2} text."),
        nbformat.v4.new_markdown_cell(
            "<details open>\n<summary>Solution</summary>\n\nThe answer.\n\n</details>"
        ),
        nbformat.v4.new_code_cell("x = 1\n### BEGIN SOLUTION\nx = 2\n### END SOLUTION"),
    ]
    nbformat.write(bad, tmp_path / "bad.ipynb")
    results = _render([chapter, tmp_path / "bad.ipynb"], tmp_path, mathjax, chromium)
    myst, synthetic = results[chapter.stem], results["bad"]
    assert myst["merror"] > 0 or myst["raw_tex"], myst
    assert synthetic["merror"] > 0 and synthetic["raw_tex"], synthetic
    assert synthetic["open_details"] == 1 and synthetic["visible_solution_text"], synthetic
    assert synthetic["visible_solution_code"], synthetic


def test_citations_link_the_web_bibliography():
    # Colab does not follow in-notebook anchors (googlecolab/colabtools#3983): a citation opens its entry
    # on the book's bibliography page, whose ids come from _config.yml's bibtex_cite_id.
    import pybtex.database

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["config"]["bibtex_cite_id"] == "cite-{key}"
    keys = set(pybtex.database.parse_file(str(ROOT / "references.bib")).entries)
    ids = {book_index.bibliography_anchor(k) for k in keys}
    assert book_index.bibliography_anchor("arxiv2610.10761") == "cite-arxiv2610-10761"
    built = ROOT / "_build" / "html" / "chapters" / "bibliography.html"
    if built.exists():
        assert ids <= set(re.findall(r'id="(cite-[^"]+)"', built.read_text())), ids
    page = f"{book_index.site_url(config)}chapters/bibliography.html"
    cited = 0
    for path in EDITIONS:
        text = "".join(c.source for c in _markdown_cells(path))
        assert "](#ref-" not in text, f"{path.name}: an in-notebook citation anchor"
        for anchor in re.findall(re.escape(page) + r"#([\w-]+)\)", text):
            assert anchor in ids, (path.name, anchor)
            cited += 1
    assert cited >= 10, cited


def test_a_value_glued_in_another_chapter_comes_from_that_chapter_s_notebook(tmp_path):
    """``{glue:}`05_other.ipynb::k``` (the book's cross-document glue) reads the other executed notebook;
    an unknown key or notebook is an error that names it, not an empty string."""
    nb = nbformat.v4.new_notebook()
    out = nbformat.v4.new_output(
        "display_data",
        data={"text/plain": "0.123"},
        metadata={"scrapbook": {"name": "k", "mime_prefix": ""}},
    )
    nb.cells.append(nbformat.v4.new_code_cell("glue('k', 0.123)", outputs=[out]))
    nbformat.write(nb, tmp_path / "05_other.ipynb")
    index = book_index.BookIndex(data={"secnumbers": {}, "titles": {}}, base_url="", macros={})
    conv = editions.Converter(index, "chapters/06_x", {"x": "0.5"}, tmp_path)
    md = conv.blocks("{glue:}`x`, {glue:}`05_other.ipynb::k`, {glue:text}`05_other::k:.1f`.")
    assert md == "0.5, 0.123, 0.1."
    with pytest.raises(editions.EditionError, match="no glued value 'nope' in 05_other"):
        conv.blocks("{glue:}`05_other::nope`")
    with pytest.raises(editions.EditionError, match="04_missing::k"):
        conv.blocks("{glue:}`04_missing::k`")
