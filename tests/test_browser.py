"""Real-browser checks of the rendered book: playwright driving Debian's chromium, every page.

For each page of `_build/html`: at 390 × 844 with touch, the visible ☰ opens the chapter navigation and
the contents button the page contents, the page is no wider than the viewport, and no formula is cut
off (one that scrolls shows a cue); at 1280 px no code block scrolls sideways, display equations fit
their column, math is typeset, images load, there are no console errors, and axe-core finds no critical
or serious violation in light or dark mode. Every check has a test below that shows it can fail, on a
copy of a real page edited to break it, served by the same server.

`make test` builds the book and installs chromium (apt, as root), playwright (the lock) and axe-core
(`npm ci`) before running these. A missing browser is a failure naming the fix, not a skip.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from booktools import chapters

from . import browser
from .browser import DESKTOP, PHONE, Loaded, find_axe, find_chromium, serve
from .conftest import ROOT
from .test_figures import MIN_CSS_PX, png_record, text_css_px

# ICL_BOOK_SITE: check another build of the site (e.g. a copy with older _static files) instead.
HTML = Path(os.environ.get("ICL_BOOK_SITE") or ROOT / "_build" / "html")
CHAPTERS = [f"chapters/{md.stem}.html" for md in chapters.chapter_sources(ROOT)]
MATH_PAGES = ["chapters/intro.html", "chapters/notation.html", *CHAPTERS]


# A keyboard reader reaches a chapter's "Next" link in at most this many Tabs (formulas are not tab stops;
# each box that scrolls is one).
MAX_TABS_TO_NEXT = 40


def book_pages() -> list[str]:
    """Every page of the built book: chapters/*.html and the generated indexes."""
    pages = sorted(str(p.relative_to(HTML)) for p in (HTML / "chapters").glob("*.html"))
    if not pages:  # not built yet: the fixture fails with the fix; keep the ids meaningful
        return MATH_PAGES
    extra = ["genindex.html", "prf-prf.html", "py-modindex.html", "search.html"]
    return pages + [n for n in extra if (HTML / n).exists()]


PAGES = book_pages()


# session: one server and one browser per process of make test, shared by the pages' groups
# (tests/conftest.py), which that process runs between other modules' tests
@pytest.fixture(scope="session")
def site(chromium):
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    find_axe()  # a one-line error naming the fix when axe-core is missing
    with serve(HTML) as url:
        yield url, chromium


_cache: dict[str, dict] = {}


def measure(site, page: str) -> dict:
    """Load ``page`` on a phone and on a desktop once; every check of this module reads the result."""
    if page not in _cache:
        url, chromium = site
        out: dict = {}
        with Loaded(chromium, f"{url}/{page}", PHONE) as phone:
            out["phone_width"] = browser.page_width_check(phone)
            out["phone_math"] = browser.clipped_math_check(phone)
            out["has_contents"] = browser.has_secondary_sidebar(phone)
            out["primary"] = browser.drawer_check(phone, "primary")
            out["primary_hrefs"] = phone.page.evaluate(
                "() => Array.from(document.querySelectorAll('#pst-primary-sidebar a[href]'))"
                ".map(a => a.href)"
            )
            out["secondary"] = browser.drawer_check(phone, "secondary")
            out["phone_inline_math"] = browser.inline_math_check(phone)
            out["phone_keyboard"] = browser.keyboard_scroll_check(phone)
            out["phone_boxes"] = browser.scroll_boxes_check(phone)
            out["phone_code_cue"] = browser.code_cue_check(phone)
            out["phone_titles"] = browser.title_lines(phone)
            out["phone_tooltips"] = browser.stuck_tooltip_check(phone)
            out["phone_figures"] = browser.figures_of(phone)  # opens folded solutions: last
            out["markers"] = browser.solution_markers_check(phone)
        with Loaded(chromium, f"{url}/{page}", DESKTOP) as desk:
            out["content"] = browser.content_check(desk)
            out["wide_math"] = browser.wide_math_check(desk)
            out["code"] = browser.code_scroll_check(desk)
            out["desktop_math"] = browser.clipped_math_check(desk)
            out["inline_math"] = browser.inline_math_check(desk)
            out["tabs"] = browser.tab_stops_check(desk)
            out["downloads"] = browser.downloads_of(desk)
            out["search_fields"] = browser.search_fields_of(desk)
            out["formula_focus"] = browser.formula_focus_check(desk)
            out["boxes"] = browser.scroll_boxes_check(desk)
            if re.match(r"chapters/\d\d_", page):
                out["tabs_to_next"] = browser.tabs_to_next(desk, limit=MAX_TABS_TO_NEXT)
            out["axe_light"] = browser.axe_check(desk)
            # Switch to dark mode and let the theme's colour transitions finish before measuring
            # contrast (a run mid-transition saw half-faded text).
            desk.page.evaluate(
                "() => { document.documentElement.dataset.theme = 'dark';"
                " return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() =>"
                " Promise.all(document.getAnimations().map(a => a.finished)).then(() => r(null))))); }"
            )
            desk.page.wait_for_timeout(400)
            out["theme"] = browser.theme_of(desk)
            # what a theme changes is colour: the structural rules ran on the light page (a whole
            # axe run costs 15-17 s on a chapter, its contrast rule 11 s)
            out["axe_dark"] = browser.axe_check(desk, rules=("color-contrast",))
            out["focus"] = browser.focus_visible_check(desk)
        _cache[page] = out
    return _cache[page]


def colab_url(page: str) -> str:
    """The chapter's Colab link: its plain-notebook edition, notebooks/NN_slug.ipynb."""
    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    path = repo["url"].removeprefix("https://github.com/")
    return (
        f"https://colab.research.google.com/github/{path}/blob/{repo['branch']}/notebooks/"
        f"{page.removeprefix('chapters/')[:-5]}.ipynb"
    )


# --- every page --------------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_phone_navigation_opens(site, page):
    m = measure(site, page)
    primary = m["primary"]
    assert primary["button"] >= 1, "no visible ☰ (primary sidebar toggle) at 390 px"
    assert primary["open"], "tapping ☰ opened nothing (see _static/icl-drawers.js)"
    names = [c.rsplit("/", 1)[1] for c in CHAPTERS]
    missing = [c for c in names if not any(h.split("#")[0].endswith(c) for h in m["primary_hrefs"])]
    assert not missing, f"the navigation lacks chapters: {missing}"
    assert primary["links"] >= len(names), f"only {primary['links']} visible links in the drawer"
    if m["has_contents"]:
        secondary = m["secondary"]
        assert secondary["button"] >= 1, "the page has contents but no visible contents button"
        assert secondary["open"] and secondary["links"] >= 1, (
            f"tapping the contents button showed no contents: {secondary}"
        )


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_phone_page_is_not_wider_than_the_viewport(site, page):
    assert measure(site, page)["phone_width"] == []


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_formulas_are_not_cut_off(site, page):
    m = measure(site, page)
    assert m["phone_math"] == [], f"at 390 px: {m['phone_math']}"
    assert m["desktop_math"] == [], f"at 1280 px: {m['desktop_math']}"


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_code_blocks_do_not_scroll_at_1280px(site, page):
    code = measure(site, page)["code"]
    assert code == [], f"{len(code)} code blocks scroll sideways (lines over 88 columns?): {code}"


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_page_renders_math_images_and_no_console_errors(site, page):
    m = measure(site, page)
    verdict = m["content"]
    assert verdict["console_errors"] == []
    assert verdict["raw_tex"] == [], f"raw TeX left on the page: {verdict['raw_tex']}"
    assert verdict["broken_images"] == [], f"images that did not load: {verdict['broken_images']}"
    assert verdict["images_without_alt"] == [], (
        f"images without alt text: {verdict['images_without_alt']}"
    )
    assert m["wide_math"] == [], (
        f"display equations wider than the text column (break them with aligned): {m['wide_math']}"
    )
    if page in MATH_PAGES:
        assert verdict["mathjax"], "MathJax did not load (it is served from _static/mathjax)"
        assert verdict["typeset"] > 0, "no typeset math on the page"
    if re.match(r"chapters/\d\d_", page):
        assert verdict["images"] >= 1
        assert colab_url(page) in verdict["colab"], verdict["colab"]


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_no_serious_accessibility_violations(site, page, theme):
    m = measure(site, page)
    assert m["theme"] == "dark"
    found = m[f"axe_{theme}"]
    assert found == [], "axe-core: " + "; ".join(
        f"{v['impact']} {v['id']} ({v['help']}): {v['nodes'][:3]}" for v in found
    )


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_inline_math_is_cued_by_its_visible_width_and_never_faded(site, page):
    # The visible formula (mjx-math), not MathJax's hidden MathML, decides whether a formula scrolls
    # and gets the cue; the cue never lowers the glyphs' contrast (no mask, no transparency).
    m = measure(site, page)
    desk, phone = m["inline_math"], m["phone_inline_math"]
    assert desk["faded_fitting"] == [], (
        f"{len(desk['faded_fitting'])} of {desk['formulas']} inline formulas faded at 1280 px "
        f"though they fit: {desk['faded_fitting'][:3]}"
    )
    assert desk["faded"] == [] and phone["faded"] == [], (desk["faded"][:3], phone["faded"][:3])
    assert desk["cue_wrong"] == [], f"at 1280 px: {desk['cue_wrong'][:3]}"
    assert phone["cue_wrong"] == [], f"at 390 px: {phone['cue_wrong'][:3]}"


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_keyboard_path_one_stop_per_formula_and_visible_focus(site, page):
    m = measure(site, page)
    tabs, focus = m["tabs"], m["focus"]
    assert tabs["several"] == [], f"{tabs['several_count']} formulas with several tab stops"
    assert tabs["stops"] <= tabs["formulas"] + tabs["controls"], tabs
    assert focus["checked"] >= 3, f"only {focus['checked']} controls could take focus"
    assert focus["invisible"] == [], (
        f"{len(focus['invisible'])} controls show no focus: {focus['invisible'][:4]}"
    )
    formulas = m["formula_focus"]
    assert formulas["invisible"] == [], (
        f"{len(formulas['invisible'])} of {formulas['checked']} formulas show no focus ring (or a "
        f"clipped one): {formulas['invisible'][:4]}"
    )


@pytest.mark.browser
@pytest.mark.parametrize("page", [p for p in PAGES if re.match(r"chapters/\d\d_", p)])
def test_keyboard_reaches_next_in_at_most_40_tabs(site, page):
    found = measure(site, page)["tabs_to_next"]
    assert found["before"] >= 0, "no Next link"
    assert found["tabs"] is not None, (
        f"Next not reached in {MAX_TABS_TO_NEXT} Tabs: {found['before']} tab stops before it "
        f"({found['stops']} on the page)"
    )


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_every_box_that_scrolls_is_one_named_tab_stop_with_a_focus_ring(site, page):
    m = measure(site, page)
    for width, boxes in (("1280", m["boxes"]), ("390", m["phone_boxes"])):
        assert boxes["problems"] == [], (
            f"at {width} px, {len(boxes['problems'])} of {boxes['boxes']} boxes that scroll "
            f"({boxes['kinds']}): {boxes['problems'][:4]}"
        )


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_phone_code_cue_titles_and_no_stuck_tooltip(site, page):
    m = measure(site, page)
    assert m["phone_code_cue"] == [], f"code blocks scroll with no cue: {m['phone_code_cue'][:3]}"
    long = [t for t in m["phone_titles"] if t["lines"] > 3]
    assert long == [], f"titles over 3 lines at 390 px: {long}"
    assert m["phone_tooltips"] == [], f"tooltips left over the page: {m['phone_tooltips']}"


def _fetch(site, href: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(href) as response:  # the test's own localhost server
        return response.read()


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_page_download_is_the_clean_edition_and_no_dead_pdf(site, page):
    downloads = measure(site, page)["downloads"]
    hrefs = [d["href"] or "" for d in downloads]
    assert not any("/_sources/" in h for h in hrefs), f"authoring files offered: {hrefs}"
    if not (HTML / "icl-book.pdf").exists():  # a site without the PDF never mentions one
        said = [d for d in downloads if "pdf" in (d["text"] + (d["onclick"] or "")).lower()]
        assert said == [], said
    stem = page.removeprefix("chapters/").removesuffix(".html")
    if not re.match(r"chapters/\d\d_", page):
        return
    by_text = {d["text"]: d["href"] for d in downloads}
    assert set(by_text) >= {".ipynb", ".md"}, by_text
    assert by_text[".ipynb"].endswith(f"/notebooks/{stem}.ipynb"), by_text
    assert _fetch(site, by_text[".ipynb"]) == (ROOT / "notebooks" / f"{stem}.ipynb").read_bytes()
    assert _fetch(site, by_text[".md"]) == (ROOT / "chapters" / f"{stem}.md").read_bytes()


def phone_figure_problems(rows, url) -> tuple[list[str], list[str]]:
    """Figures whose smallest text is below MIN_CSS_PX, and figures a tap does not open full size."""
    small, no_zoom = [], []
    for row in rows:
        dpi, pt = png_record(HTML / row["url"].removeprefix(url + "/"))
        if pt is None:
            continue  # tests/test_figures.py fails on a PNG without its record
        px = text_css_px({**row, "dpi": dpi, "font_pt": pt})
        if px < MIN_CSS_PX:
            small.append(f"{row['src'][-16:]}: {px:.1f} CSS px ({row['rendered']:.0f} px wide)")
        if row["zoom"] != row["url"]:
            no_zoom.append(row["src"][-16:])
    return small, no_zoom


@pytest.mark.browser
@pytest.mark.parametrize("page", [p for p in PAGES if re.match(r"chapters/\d\d_", p)])
def test_figures_are_legible_on_a_phone_and_open_full_size(site, page):
    rows = [r for r in measure(site, page)["phone_figures"] if r["url"].endswith(".png")]
    assert rows, "no figures"
    small, no_zoom = phone_figure_problems(rows, site[0])
    assert small == [], f"smallest figure text at 390 px below {MIN_CSS_PX} CSS px: {small}"
    assert no_zoom == [], f"figures a tap does not open full size: {no_zoom}"


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_no_solution_markers_and_one_search_field(site, page):
    # nbgrader's markers are authoring marks (booktools/sphinx/ext drops them from the book's code);
    # pydata-sphinx-theme 0.17 drew a second search field in a header bar at 1280 px (icl.css hides it).
    m = measure(site, page)
    assert m["markers"] == 0, f"{m['markers']} '### BEGIN/END SOLUTION' lines in the page's code"
    assert len(m["search_fields"]) <= 1, f"search fields at 1280 px: {m['search_fields']}"


@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES)
def test_phone_wide_formulas_scroll_from_the_keyboard(site, page):
    kb = measure(site, page)["phone_keyboard"]
    assert kb["stuck"] == [], f"{len(kb['stuck'])} of {kb['wide']} wide formulas: {kb['stuck'][:3]}"


@pytest.mark.browser
def test_phone_wide_formulas_exist(site):
    # The keyboard check above must have something to press keys on: the book has formulas wider than
    # a phone's column (27 when it was written). Counted from the measurements of the chapters, made
    # here for any chapter this process has not measured (make test spreads the pages over two
    # processes, and its cache may not re-run a chapter's page tests at all).
    measured = []
    for page in CHAPTERS:
        if page in _cache:
            measured.append(_cache[page]["phone_keyboard"]["wide"])
            continue
        with Loaded(site[1], f"{site[0]}/{page}", PHONE) as phone:  # a count only: a short load
            measured.append(len(phone.page.evaluate(browser.WIDE_FORMULAS_JS)))
    assert sum(measured) >= 5, measured


def _text(html: str) -> str:
    import html as html_lib

    return re.sub(r"\s+", " ", html_lib.unescape(re.sub(r"<[^>]+>", " ", html)))


def _text_after(page: str, anchor: str, chars: int = 1500) -> str | None:
    """The text of the built ``page`` from the element with id ``anchor`` on (None: no such id)."""
    html = (HTML / page).read_text()
    at = html.find(f'id="{anchor}"')
    return None if at < 0 else _text(html[at:])[:chars]


RESULT_KINDS = "Definition|Theorem|Lemma|Proposition|Corollary|Conjecture|Remark|Example|Algorithm"


@pytest.mark.browser
def test_the_proof_index_lists_results_by_number_and_title(site):
    url, chromium = site
    with Loaded(chromium, f"{url}/prf-prf.html", DESKTOP) as loaded:
        groups = loaded.page.evaluate(
            "() => Array.from(document.querySelectorAll('article section')).map(s => ({"
            " heading: s.querySelector('h2').textContent.trim(),"
            " items: Array.from(s.querySelectorAll('li')).map(li => ({"
            "  name: li.querySelector('a').textContent.trim(), href: li.querySelector('a').getAttribute('href'),"
            "  text: li.textContent.replace(/\\s+/g, ' ').trim()}))}))"
        )
    labelled = [
        label
        for md in chapters.chapter_sources(ROOT)
        for name, label in chapters.directive_labels(chapters.read_chapter(md.read_text()))
        if name.startswith("prf:") and name != "prf:proof"
    ]
    items = [i for g in groups for i in g["items"]]
    assert len(items) == len(labelled) >= 15, (len(items), len(labelled))
    assert [g["heading"] for g in groups][:2] == [
        "Chapter 1. Hermite expansions under the Gaussian measure",
        "Chapter 2. Linear self-attention as one step of gradient descent",
    ], groups
    for item in items:
        assert re.fullmatch(rf"({RESULT_KINDS}) \d+\.\d+", item["name"]), item
        title = item["text"].removeprefix(item["name"]).strip()
        assert (
            title
            and "chapters/" not in title
            and not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", title)
        ), item
        assert not re.search(RAW_TEX_PY, title), item
        page, anchor = item["href"].split("#")
        after = _text_after(page, anchor)
        assert after is not None, f"{item['href']} leads nowhere"
        assert item["name"] in after[:200], (item, after[:200])


RAW_TEX_PY = re.compile(r"\\\(|\\\[|\$\$|\\[a-zA-Z]{2,}")


def _subject_terms() -> list[tuple[str, list[str]]]:
    out = []
    for item in yaml.safe_load((ROOT / "chapters" / "subject_index.yml").read_text()):
        term = item if isinstance(item, str) else item["term"]
        forms = [item] if isinstance(item, str) else item.get("forms") or [item["term"]]
        out.append((term, forms))
    return out


@pytest.mark.browser
def test_the_general_index_is_also_a_subject_index(site):
    # Every term of chapters/subject_index.yml is an entry of genindex.html, with one link per section
    # that uses it, labelled by the section's title and number; every link lands on text with the term.
    url, chromium = site
    with Loaded(chromium, f"{url}/genindex.html", DESKTOP) as loaded:
        entries = loaded.page.evaluate(
            "() => Array.from(document.querySelectorAll('table.indextable td > ul > li')).map(li => ({"
            " term: (li.firstChild && li.firstChild.textContent || '').trim(),"
            " subs: Array.from(li.querySelectorAll(':scope > ul > li > a')).map(a => ({"
            "  text: a.textContent.trim(), href: a.getAttribute('href')}))}))"
        )
        shown = loaded.page.evaluate("() => document.querySelector('article').innerText")
    by_term = {e["term"]: e["subs"] for e in entries}
    missing = [t for t, _ in _subject_terms() if not by_term.get(t)]
    assert missing == [], f"subject terms without entries: {missing}"
    assert not RAW_TEX_PY.search(shown), RAW_TEX_PY.search(shown)
    links = 0
    for term, forms in _subject_terms():
        pattern = re.compile(
            "|".join(re.escape(f).replace(r"\ ", r"[\s\u00a0-]+") for f in forms), re.I
        )
        for sub in by_term[term]:
            assert re.search(r"\((§\d+(\.\d+)*|chapter \d)|\(\w", sub["text"]) or sub["text"] in (
                "Introduction",
                "Prologue",
                "Notation and conventions",
            ), sub
            page, anchor = sub["href"].split("#")
            after = _text_after(page, anchor, 3000)
            assert after is not None, f"{term}: {sub['href']} leads nowhere"
            assert pattern.search(after), f"{term}: no {forms} after {sub['href']}: {after[:200]}"
            links += 1
    assert links >= 150, links


@pytest.mark.browser
def test_bibliography_links_every_work_and_has_stable_anchors(site):
    import pybtex.database

    url, chromium = site
    with Loaded(chromium, f"{url}/chapters/bibliography.html", DESKTOP) as loaded:
        works = loaded.page.evaluate(
            "() => Array.from(document.querySelectorAll('div.citation')).map(d => ({id: d.id,"
            " text: d.textContent.replace(/\\s+/g, ' ').trim(),"
            " links: Array.from(d.querySelectorAll('a[href]')).map(a => a.href)}))"
        )
    keys = set(pybtex.database.parse_file(str(ROOT / "references.bib")).entries)
    assert {w["id"] for w in works} == {f"cite-{k.lower().replace('.', '-')}" for k in keys}, works
    for work in works:
        arxiv = [h for h in work["links"] if h.startswith("https://arxiv.org/abs/")]
        assert arxiv, f"no arXiv link: {work['text'][:80]}"


SEARCHES = ["hermite coefficient", "ridge regression", "preconditioned gradient descent"]


@pytest.mark.browser
@pytest.mark.parametrize("query", SEARCHES)
def test_search_snippets_are_text_without_page_chrome(site, query):
    url, chromium = site
    with Loaded(chromium, f"{url}/search.html?q={query.replace(' ', '+')}", DESKTOP) as loaded:
        results = browser.search_snippets(loaded)
        errors = list(loaded.errors)
    assert errors == []
    snippets = [r["snippet"] for r in results if r["snippet"]]
    assert len(snippets) >= 3, results
    raw = [s for s in snippets if re.search(browser.RAW_TEX, s)]
    assert raw == [], f"raw TeX in {len(raw)} of {len(snippets)} snippets: {raw[:2]}"
    chrome = [s for s in snippets if re.search(browser.PAGE_CHROME, s)]
    assert chrome == [], f"page chrome in {len(chrome)} snippets: {chrome[:2]}"


# --- each check can fail -----------------------------------------------------------------------------


def _broken_copy(tmp_path, edit, page="chapters/00_prologue.html"):
    """A copy of a rendered page, edited by ``edit``, beside links to the real static files."""
    site = tmp_path / "site"
    (site / "chapters").mkdir(parents=True)
    for name in ("_static", "_images", "_sphinx_design_static", "searchindex.js"):
        if (HTML / name).exists():
            (site / name).symlink_to(HTML / name)
    html = (HTML / page).read_text()
    edited = edit(html)
    assert edited != html, "the edit changed nothing: the page's markup has changed"
    (site / "chapters" / "broken.html").write_text(edited)
    return site


def _inject(html: str, snippet: str) -> str:
    """Put ``snippet`` at the start of the article's first section."""
    return re.sub(r"(<section[^>]*>)", lambda m: m.group(1) + snippet, html, count=1)


@contextmanager
def broken_page(chromium, tmp_path, edit, device, page="chapters/00_prologue.html"):
    """The edited copy of ``page``, loaded in ``device`` from its own server."""
    with serve(_broken_copy(tmp_path, edit, page)) as url:
        with Loaded(chromium, f"{url}/chapters/broken.html", device) as loaded:
            yield loaded


@pytest.mark.browser
def test_the_check_fails_on_a_dead_menu_button(chromium, tmp_path):
    # The theme's bug as shipped: without the binding script, the visible ☰ does nothing.
    def edit(html):
        return re.sub(r'<script src="[^"]*icl-drawers\.js[^"]*"></script>', "", html)

    with broken_page(chromium, tmp_path, edit, PHONE) as loaded:
        assert browser.drawer_check(loaded, "primary")["open"] is False
        assert browser.drawer_check(loaded, "secondary")["open"] is False


@pytest.mark.browser
def test_the_check_fails_on_an_element_wider_than_the_phone(chromium, tmp_path):
    snippet = '<div id="too-wide" style="width: 600px">a 600 px wide box</div>'
    with broken_page(chromium, tmp_path, lambda h: _inject(h, snippet), PHONE) as loaded:
        found = browser.page_width_check(loaded)
        assert found and "too-wide" in " ".join(found), found


@pytest.mark.browser
def test_the_check_fails_on_a_code_line_too_long_and_88_columns_fit(chromium, tmp_path):
    def pre(cols):
        return f'<div class="highlight"><pre id="c{cols}">{"x" * cols}</pre></div>'

    snippet = pre(88) + pre(100)
    with broken_page(chromium, tmp_path, lambda h: _inject(h, snippet), DESKTOP) as loaded:
        found = browser.code_scroll_check(loaded)
        assert any("xxxx (100 cols)" in f for f in found), found
        assert not any("xxxx (88 cols)" in f for f in found), (
            "88 columns of code must fit at 1280 px"
        )


@pytest.mark.browser
def test_the_check_fails_on_a_clipped_formula_and_on_one_that_scrolls_without_a_cue(
    chromium, tmp_path
):
    terms = " + ".join(f"x_{{{i}}}" for i in range(40))
    # The theme's own rule before icl.css: span.math {overflow: hidden}.
    clipped = (
        '<p><span class="math notranslate nohighlight" style="overflow: hidden">'
        f"\\({terms}\\)</span></p>"
    )

    def edit(html):
        html = re.sub(r'<script src="[^"]*icl\.js[^"]*"></script>', "", html)  # no cue
        return _inject(
            html,
            clipped + f'<p><span class="math notranslate nohighlight">\\({terms}\\)</span></p>',
        )

    with broken_page(chromium, tmp_path, edit, PHONE) as loaded:
        found = browser.clipped_math_check(loaded)
        assert any("cut by span" in f for f in found), found
        assert any("with no cue" in f for f in found), found


@pytest.mark.browser
def test_the_check_fails_on_low_contrast_text(chromium, tmp_path):
    snippet = '<p id="faint" style="color: #c8c8c8; background: #fff">faint text</p>'
    with broken_page(chromium, tmp_path, lambda h: _inject(h, snippet), DESKTOP) as loaded:
        found = browser.axe_check(loaded)
        assert any(v["id"] == "color-contrast" and "#faint" in v["nodes"] for v in found), found


@pytest.mark.browser
def test_the_check_fails_when_math_is_not_typeset(chromium, tmp_path):
    def edit(html):
        return re.sub(r'<script defer="defer" src="[^"]*mathjax[^"]*"></script>', "", html)

    with broken_page(chromium, tmp_path, edit, DESKTOP) as loaded:
        verdict = browser.content_check(loaded)
        assert verdict["typeset"] == 0
        assert verdict["raw_tex"], "raw TeX should be detected when MathJax is missing"


@pytest.mark.browser
def test_the_check_fails_on_a_broken_image_and_a_console_error(chromium, tmp_path):
    def edit(html):
        html = re.sub(r'src="\.\./_images/([^"]+)"', r'src="../_images/missing-\1"', html, count=1)
        return html.replace("</body>", "<script>undefinedFunction()</script></body>")

    with broken_page(chromium, tmp_path, edit, DESKTOP) as loaded:
        verdict = browser.content_check(loaded)
        assert verdict["broken_images"], "a missing image should be reported"
        assert any("undefinedFunction" in line for line in verdict["console_errors"])


@pytest.mark.browser
def test_the_check_reports_a_display_equation_wider_than_the_column(chromium, tmp_path):
    wide = " + ".join(f"x_{{{i}}}^2" for i in range(60))
    snippet = f'<div class="math notranslate nohighlight">\\[{wide}\\]</div>'
    with broken_page(chromium, tmp_path, lambda h: _inject(h, snippet), DESKTOP) as loaded:
        assert browser.wide_math_check(loaded), "a 60-term display equation should be too wide"


def test_missing_browser_explains_the_fix(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(RuntimeError, match="apt-get install chromium"):
        find_chromium()


def test_missing_axe_explains_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(browser, "AXE_JS", tmp_path / "axe.min.js")
    with pytest.raises(RuntimeError, match="npm ci"):
        find_axe()


@pytest.mark.browser
def test_the_checks_fail_on_faded_math_extra_tab_stops_and_hidden_focus(chromium, tmp_path):
    # What the site did before: a mask over a formula that fits, a span.math made focusable around
    # MathJax's own focusable container, a header button whose focus style was removed.
    fade = "linear-gradient(to right, #000 calc(100% - 2.5em), rgb(0 0 0 / 0.15))"
    snippet = (
        f'<p><span id="faded" class="math notranslate nohighlight" tabindex="0" '
        f'style="-webkit-mask-image: {fade}; mask-image: {fade}">\\(x\\)</span></p>'
        '<button id="nofocus" style="outline: none !important; box-shadow: none !important">b</button>'
    )

    # MathJax's own tab stop (inTabOrder, its default) inside that span: two stops for one formula.
    def edit(html):
        assert '"inTabOrder": false' in html
        return _inject(html.replace('"inTabOrder": false', '"inTabOrder": true'), snippet)

    with broken_page(chromium, tmp_path, edit, DESKTOP) as loaded:
        found = browser.inline_math_check(loaded)
        assert any("faded" in f for f in found["faded_fitting"]), found
        tabs = browser.tab_stops_check(loaded)
        assert tabs["several_count"] >= 1 and "2 tab stops" in tabs["several"][0], tabs
        focus = browser.focus_visible_check(loaded)
        assert any(f.startswith("button#nofocus") for f in focus["invisible"]), focus


@pytest.mark.browser
def test_the_checks_fail_on_an_uncued_wide_formula_and_small_phone_figures(chromium, tmp_path):
    # Without icl.js: a formula wider than the phone gets no cue, and figures shrink to the column.
    terms = " + ".join(f"x_{{{i}}}" for i in range(40))

    def edit(html):
        html = re.sub(r'<script src="[^"]*icl\.js[^"]*"></script>', "", html)
        return _inject(
            html, f'<p><span class="math notranslate nohighlight">\\({terms}\\)</span></p>'
        )

    with broken_page(chromium, tmp_path, edit, PHONE) as loaded:
        found = browser.inline_math_check(loaded)
        assert any("overflows with no cue" in f for f in found["cue_wrong"]), found
        url = loaded.page.url.split("/chapters/")[0]
        rows = [r for r in browser.figures_of(loaded) if r["url"].endswith(".png")]
        small, _ = phone_figure_problems(rows, url)
        assert rows and len(small) == len(rows), (small, rows)


@pytest.mark.browser
def test_the_checks_fail_on_markers_a_second_search_field_and_a_keyboard_stuck_formula(
    chromium, tmp_path
):
    # What the site did before: solution code with nbgrader's markers, the theme's header bar with its
    # own search field at 1280 px (no icl.css), and without icl.js/icl.css: Next only after every link
    # and copy button, a phone-wide formula that is no tab stop and that no key scrolls, code blocks
    # that scroll with no cue, a five-line title and the tooltip left after the drawer closed.
    terms = " + ".join(f"x_{{{i}}}" for i in range(40))
    code = (
        '<div class="highlight"><pre>def f():\n    ### BEGIN SOLUTION\n    return 1\n</pre></div>'
    )

    def edit(html):
        html = re.sub(r"<link[^>]*icl\.css[^>]*>", "", html)
        html = re.sub(r'<script src="[^"]*icl\.js[^"]*"></script>', "", html)
        return _inject(
            html, code + f'<p><span class="math notranslate nohighlight">\\({terms}\\)</span></p>'
        )

    with broken_page(chromium, tmp_path, edit, DESKTOP) as loaded:
        assert len(browser.search_fields_of(loaded)) == 2
        assert browser.tabs_to_next(loaded, limit=40)["tabs"] is None  # no Next in the header
    with broken_page(chromium, tmp_path / "phone", edit, PHONE) as loaded:
        boxes = browser.scroll_boxes_check(loaded)
        assert any("not a tab stop" in p for p in boxes["problems"]), boxes
        assert browser.code_cue_check(loaded), "a code block that scrolls with no cue"
        kb = browser.keyboard_scroll_check(loaded)
        assert kb["wide"] >= 1 and len(kb["stuck"]) == kb["wide"], kb
        assert browser.solution_markers_check(loaded) == 1
    chapter6 = "chapters/06_depth_block_coordinate_descent.html"
    with broken_page(chromium, tmp_path / "title", edit, PHONE, page=chapter6) as loaded:
        assert [t for t in browser.title_lines(loaded) if t["lines"] > 3], "the theme's 42 px title"
        assert browser.stuck_tooltip_check(loaded), "the theme's tooltip after the drawer closed"


@pytest.mark.browser
def test_a_first_visit_logs_no_theme_mode_error(site):
    # Loaded stores a colour mode before the page loads; a reader's first visit has none, and the theme
    # logged "Got invalid theme mode: . Resetting to auto." until default_mode was set (booktools/sphinx/ext).
    url, chromium = site
    context = chromium.new_context(**DESKTOP)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.goto(f"{url}/chapters/01_hermite.html", wait_until="load")
        page.wait_for_timeout(300)
        theme = page.evaluate(
            "() => [document.documentElement.dataset.mode, document.documentElement.dataset.theme]"
        )
    finally:
        context.close()
    assert errors == [], errors
    assert theme[0] == "auto" and theme[1] in ("light", "dark"), theme


ICONS_JS = """() => Array.from(document.querySelectorAll('i[class*="fa-"], span[class*="fa-"], svg.svg-inline--fa'))
  .filter(e => e.getClientRects().length).map(e => {
    const before = getComputedStyle(e, '::before');
    return {cls: String(e.className.baseVal ?? e.className), tag: e.tagName,
            width: e.getBoundingClientRect().width, font: before.fontFamily, glyph: before.content};
  })"""


@pytest.mark.browser
@pytest.mark.parametrize("device", [DESKTOP, PHONE], ids=["1280px", "390px"])
def test_icons_come_from_the_webfont_without_fontawesome_js(site, device):
    # The theme's fontawesome.js (1.49 MB) turned every icon into an inline SVG; the theme's CSS already
    # draws them from the Font Awesome webfonts, so the book does not load the script
    # (_templates/static/webpack-macros.html).
    url, chromium = site
    with Loaded(chromium, f"{url}/chapters/01_hermite.html", device) as loaded:
        scripts = loaded.page.evaluate(
            "() => performance.getEntriesByType('resource').map(r => r.name)"
        )
        icons = loaded.page.evaluate(ICONS_JS)
        fonts = loaded.page.evaluate(
            "() => document.fonts.ready.then(() => Array.from(document.fonts)"
            ".filter(f => f.family.includes('Font Awesome') && f.status === 'loaded')"
            ".map(f => `${f.family.replace(/\"/g, '')} ${f.weight}`))"
        )
    assert not [s for s in scripts if "fontawesome.js" in s], scripts
    assert len(icons) >= 4, icons
    broken = [
        i
        for i in icons
        if i["tag"] == "svg"
        or "Font Awesome" not in i["font"]
        or i["glyph"] in ("none", "normal", '""')
        or i["width"] < 8
    ]
    assert broken == [], broken
    assert {"Font Awesome 6 Free 900", "Font Awesome 6 Brands 400"} <= set(fonts), fonts
