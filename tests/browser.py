"""Real-browser checks of rendered pages: playwright (from pip) driving Debian's ``chromium``.

Never `playwright install` (it downloads a browser of its own): the tests launch the system chromium
with ``executable_path`` and the flags below. Pages are served by a local HTTP server (`serve`), so
MathJax, fonts and the theme's scripts load as on the web. Each ``*_check`` function runs in a loaded
page and returns what it found (an empty list means "nothing wrong"), so the tests can assert on it
and the failure-proof tests can show that each check fires on a page built to fail it.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AXE_JS = ROOT / "node_modules" / "axe-core" / "axe.min.js"

# Without the background-networking flags chromium floods the closed network with refused connections.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
PHONE = {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True}
DESKTOP = {"viewport": {"width": 1280, "height": 900}}


class BrowserMissing(RuntimeError):
    pass


def find_chromium() -> str:
    """Path of Debian's chromium; a one-line error naming the fix when it is missing."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise BrowserMissing(
        "headless Chromium is missing: run `sudo apt-get install chromium` (make test does it when run as root)"
    )


def find_axe() -> Path:
    if not AXE_JS.exists():
        raise BrowserMissing(f"axe-core is missing ({AXE_JS}): run `npm ci` (make test does it)")
    return AXE_JS


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output quiet
        pass


@contextmanager
def serve(directory: Path):
    """Serve ``directory`` on a free localhost port; yields the base URL."""
    handler = functools.partial(_Handler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def launch():
    """A headless Debian chromium under playwright; yields the playwright ``Browser``."""
    chromium = find_chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as err:  # pragma: no cover - the lock installs it
        raise BrowserMissing(
            "playwright is missing: run `make book` (it installs the lock)"
        ) from err
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


class Loaded:
    """A page loaded in a fresh context, with its console errors and failed requests recorded."""

    def __init__(self, browser, url: str, device: dict, theme: str = "light"):
        self.context = browser.new_context(**device)
        # The theme reads its mode from localStorage before it paints (pydata-sphinx-theme).
        self.context.add_init_script(
            f"localStorage.setItem('mode', '{theme}'); localStorage.setItem('theme', '{theme}');"
        )
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(f"Uncaught {exc}"))
        self.page.on(
            "console",
            lambda msg: self.errors.append(msg.text) if msg.type == "error" else None,
        )
        self.page.on("requestfailed", lambda req: self.errors.append(f"Failed to load {req.url}"))
        self.page.on(
            "response",
            lambda r: self.errors.append(f"Failed to load {r.url}: {r.status}")
            if r.status >= 400
            else None,
        )
        self.page.goto(url, wait_until="load")
        self.page.evaluate(
            "() => (window.MathJax && MathJax.startup && MathJax.startup.promise) || null"
        )
        self.page.evaluate("() => document.fonts.ready.then(() => null)")
        self.page.wait_for_timeout(150)

    def close(self):
        self.context.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --- checks run in a loaded page -------------------------------------------------------------------

CONTENT_JS = r"""() => {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {acceptNode(n) {
    const p = n.parentElement;
    if (!p || p.closest('script, style, mjx-container, mjx-assistive-mml, .highlight, pre, code, textarea, .sig'))
      return NodeFilter.FILTER_REJECT;
    return NodeFilter.FILTER_ACCEPT; }});
  const raw = [];
  while (walker.nextNode()) {
    const t = walker.currentNode.textContent;
    // TeX delimiters, or TeX commands such as \frac, left in the text: math that MathJax did not typeset.
    // (API signatures, .sig, are code: a default such as label='$\\tanh(z)$' is not math.)
    if (/\\\(|\\\[|\$\$|\\[a-zA-Z]{2,}/.test(t)) raw.push(t.trim().slice(0, 80));
  }
  const imgs = Array.from(document.images).filter(i => !i.closest('.navbar-brand, .theme-switch-button'));
  return {
    mathjax: !!(window.MathJax && window.MathJax.startup),
    typeset: document.querySelectorAll('mjx-container').length,
    raw_tex: raw.slice(0, 5),
    images: imgs.length,
    broken_images: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    images_without_alt: imgs.filter(i => !i.getAttribute('alt')).map(i => i.getAttribute('src')),
    colab: Array.from(document.querySelectorAll('a[href*="colab.research.google.com"]')).map(a => a.href),
  };
}"""


def content_check(loaded: Loaded) -> dict:
    """Typeset math, raw TeX left over, images, the Colab link, and the page's console errors."""
    verdict = loaded.page.evaluate(CONTENT_JS)
    verdict["console_errors"] = list(loaded.errors)
    return verdict


def _describe_js(name: str) -> str:
    return (
        f"const {name} = (e) => {{ const t = (e.querySelector('mjx-assistive-mml') || e).textContent"
        ".replace(/\\s+/g, ' ').trim().slice(0, 50); const id = e.id ? '#' + e.id : '';"
        " const cls = e.classList.length ? '.' + Array.from(e.classList).slice(0, 2).join('.') : '';"
        ' return `${e.tagName.toLowerCase()}${id}${cls} "${t}"`; };'
    )


WIDE_MATH_JS = """() => Array.from(document.querySelectorAll('mjx-container[display="true"]')).filter(c => {
  const box = c.parentElement.getBoundingClientRect().width;
  return c.firstElementChild && c.firstElementChild.getBoundingClientRect().width > box + 1;
}).map(c => (c.querySelector('mjx-assistive-mml') || c).textContent.trim().slice(0, 60))"""


def wide_math_check(loaded: Loaded) -> list[str]:
    """Display equations wider than the column they sit in (cut off, or behind a scroll bar)."""
    return loaded.page.evaluate(WIDE_MATH_JS)


PAGE_WIDTH_JS = (
    "() => {"
    + _describe_js("describe")
    + """
  // The layout viewport: on a phone, innerWidth grows to the content when the page is too wide (the
  // browser zooms out), so it cannot be the yardstick.
  const width = document.documentElement.clientWidth;
  const scroll = Math.max(document.documentElement.scrollWidth, document.body.scrollWidth);
  if (scroll <= width) return [];
  // Name the widest culprits: visible elements whose right edge is past the viewport.
  const out = [];
  const contained = (e) => {  // inside a box that clips or scrolls and itself fits
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement)
      if (getComputedStyle(a).overflowX !== 'visible' && a.getBoundingClientRect().right <= width + 1) return true;
    return false;
  };
  for (const e of document.body.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.right <= width + 1 || getComputedStyle(e).position === 'fixed') continue;
    if (e.parentElement && e.parentElement.getBoundingClientRect().right > width + 1) continue;
    if (contained(e)) continue;
    out.push(`${describe(e)} right=${Math.round(r.right)}`);
  }
  return [`document ${scroll} px wide in a ${width} px viewport`, ...out.slice(0, 8)];
}"""
)


def page_width_check(loaded: Loaded) -> list[str]:
    """The document is no wider than the viewport (no sideways scrolling of the whole page)."""
    return loaded.page.evaluate(PAGE_WIDTH_JS)


CODE_SCROLL_JS = """() => Array.from(document.querySelectorAll('pre')).filter(p =>
  p.getClientRects().length && p.scrollWidth > p.clientWidth + 1).map(p => {
    const line = p.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '');
    return `${p.scrollWidth} > ${p.clientWidth} px: ${line.trim().slice(0, 70)} (${line.length} cols)`;
  })"""


def code_scroll_check(loaded: Loaded) -> list[str]:
    """Code blocks (``pre``) that scroll sideways: their longest line does not fit the column."""
    return loaded.page.evaluate(CODE_SCROLL_JS)


CLIPPED_MATH_JS = (
    "() => {"
    + _describe_js("describe")
    + """
  const out = [];
  const cue = (a) => a.classList.contains('icl-more-right') || a.classList.contains('icl-more-left');
  const vw = document.documentElement.clientWidth;
  const offCanvas = (e) => {  // a sidebar drawn off-screen on a phone (its drawer shows a copy)
    const s = e.closest('.bd-sidebar-primary, .bd-sidebar-secondary');
    if (!s) return false;
    const b = s.getBoundingClientRect();
    return b.left >= vw || b.right <= 0 || getComputedStyle(s).visibility === 'hidden';
  };
  for (const c of document.querySelectorAll('mjx-container')) {
    if (!c.getClientRects().length || offCanvas(c)) continue;
    // Measure the typeset formula (mjx-math), not its container: MathJax can let it run past the box.
    const m = c.querySelector('mjx-math') || c;
    const r = m.getBoundingClientRect();
    if (r.width === 0) continue;
    const display = c.getAttribute('display') === 'true';
    // Walk up from the formula: a box that hides its overflow cuts it; one that scrolls must show a
    // cue (a fade at the edge that has more); the first box that contains it ends the walk.
    let verdict = null;
    for (let a = display ? c : c.parentElement; a && a !== document.body; a = a.parentElement) {
      const b = a.getBoundingClientRect();
      const left = b.left + a.clientLeft, right = left + (a.clientWidth || b.width);
      const past = r.right > right + 1 || r.left < left - 1;
      if (!past) continue;
      const ox = getComputedStyle(a).overflowX;
      if (ox === 'visible') continue;
      if (ox === 'hidden' || ox === 'clip') verdict = `cut by ${describe(a).split(' ')[0]} (right ${Math.round(r.right)} > ${Math.round(right)})`;
      else if (!cue(a)) verdict = `scrolls in ${describe(a).split(' ')[0]} with no cue`;
      else verdict = 'ok';
      break;
    }
    // Past the right edge of the viewport: on a phone that is cut off too.
    if (!verdict && r.right > document.documentElement.clientWidth + 1)
      verdict = `past the viewport (right ${Math.round(r.right)})`;
    if (verdict && verdict !== 'ok') out.push(`${describe(c)} ${verdict}`);
  }
  return out;
}"""
)


def clipped_math_check(loaded: Loaded) -> list[str]:
    """Formulas cut off (by a box that hides overflow, or the viewport) or scrolling with no cue."""
    return loaded.page.evaluate(CLIPPED_MATH_JS)


DRAWER_JS = """(kind) => {
  const dialog = document.getElementById(`pst-${kind}-sidebar-modal`);
  if (!dialog || !dialog.open) return {open: false, links: 0};
  const links = Array.from(dialog.querySelectorAll('a[href]')).filter(a => {
    const r = a.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.right > 0 && r.left < innerWidth && getComputedStyle(a).visibility !== 'hidden';
  });
  return {open: true, links: links.length, first: links.slice(0, 3).map(a => a.textContent.trim().slice(0, 40))};
}"""


def drawer_check(loaded: Loaded, kind: str) -> dict:
    """Tap the visible ``kind`` toggle (primary: ☰, secondary: page contents) and see what opens.

    Returns ``{"button": visible toggles, "open": dialog open, "links": visible links in it}``; the
    drawer is closed again with Escape. A page without a secondary sidebar has no contents button.
    """
    page = loaded.page
    buttons = page.locator(f".{kind}-toggle:visible")
    count = buttons.count()
    if count == 0:
        return {"button": 0, "open": False, "links": 0}
    buttons.first.tap()
    page.wait_for_timeout(300)
    state = page.evaluate(DRAWER_JS, kind)
    page.keyboard.press("Escape")
    page.wait_for_timeout(150)
    return {"button": count, **state}


def has_secondary_sidebar(loaded: Loaded) -> bool:
    """Does the page have contents to show (a non-empty secondary sidebar)?"""
    return loaded.page.evaluate(
        "() => !!document.querySelector('#pst-secondary-sidebar a[href], #pst-secondary-sidebar-modal a[href]')"
    )


def axe_check(
    loaded: Loaded, impacts=("critical", "serious"), rules: tuple[str, ...] | None = None
) -> list[dict]:
    """axe-core's violations of the given impacts: ``[{"id", "impact", "nodes": [selector...]}]``;
    every rule, or only ``rules`` (axe's rule ids, e.g. ``("color-contrast",)``)."""
    page = loaded.page
    page.add_script_tag(path=str(find_axe()))
    only = "" if rules is None else f", runOnly: {{type: 'rule', values: {list(rules)!r}}}"
    result = page.evaluate(
        f"() => axe.run(document, {{resultTypes: ['violations']{only}}}).then(r => r.violations.map("
        "v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' '))})))"
    )
    return [v for v in result if v["impact"] in impacts]


def theme_of(loaded: Loaded) -> str:
    return loaded.page.evaluate("() => document.documentElement.dataset.theme")


# --- what a reader sees of inline math, and the keyboard path ----------------------------------------

INLINE_MATH_JS = (
    "() => {"
    + _describe_js("describe")
    + """
  // The glyphs' own box: mjx-math. MathJax's hidden mjx-assistive-mml is wider than the formula and
  // inflates the scrollWidth of every box around it, so scrollWidth cannot tell an overflowing formula.
  const faded = (e) => {  // a mask or transparency between the glyphs and the page
    for (let a = e; a && a !== document.documentElement; a = a.parentElement) {
      const cs = getComputedStyle(a);
      const mask = cs.maskImage || cs.webkitMaskImage || 'none';
      if (mask !== 'none' || parseFloat(cs.opacity) < 1) return describe(a).split(' ')[0];
    }
    return null;
  };
  const vw = document.documentElement.clientWidth;
  const out = {formulas: 0, overflowing: [], faded: [], faded_fitting: [], cue_wrong: []};
  for (const span of document.querySelectorAll('span.math')) {
    const c = span.querySelector('mjx-container');
    const m = c && c.querySelector('mjx-math');
    // Not shown at all (a folded solution): nothing for a reader to see, faded or not.
    if (!m || !span.getClientRects().length || getComputedStyle(m).visibility !== 'visible') continue;
    const sb = span.closest('.bd-sidebar-primary, .bd-sidebar-secondary');
    if (sb) { const b = sb.getBoundingClientRect(); if (b.left >= vw || b.right <= 0) continue; }
    out.formulas += 1;
    const visible = m.getBoundingClientRect().width;
    const over = visible > span.clientWidth + 1;
    const cued = span.classList.contains('icl-more-right') || span.classList.contains('icl-more-left');
    const f = faded(m);
    const what = `${describe(span)} (${Math.round(visible)} px in ${span.clientWidth} px)`;
    if (over) out.overflowing.push(what);
    if (f) out.faded.push(`${what} faded by ${f}`);
    if (f && !over) out.faded_fitting.push(`${what} faded by ${f}`);
    if (cued !== over) out.cue_wrong.push(`${what} ${cued ? 'cued but fits' : 'overflows with no cue'}`);
  }
  return out;
}"""
)


def inline_math_check(loaded: Loaded) -> dict:
    """Inline formulas measured by their visible rendering (``mjx-math``), not their assistive MathML.

    Returns ``{"formulas": n, "overflowing": [...], "faded": [...], "faded_fitting": [...],
    "cue_wrong": [...]}``: formulas wider than their box; formulas whose glyphs sit under a mask or
    transparency (which lowers their contrast); those of them that fit; and formulas whose scroll cue
    (``icl-more-left``/``icl-more-right``) disagrees with their visible overflow.
    """
    return loaded.page.evaluate(INLINE_MATH_JS)


# Elements in the sequential focus order: what Tab visits.
_FOCUSABLE_JS = """
  const FOCUSABLE = 'a[href], button, input, select, textarea, summary, iframe, [tabindex], [contenteditable="true"]';
  const tabbable = (e) => {
    if (e.tabIndex < 0 || e.disabled || e.closest('[inert], dialog:not([open])')) return false;
    if (e.hasAttribute('tabindex') && parseInt(e.getAttribute('tabindex'), 10) < 0) return false;
    const d = e.parentElement && e.parentElement.closest('details:not([open])');
    if (d && e.tagName !== 'SUMMARY') return false;
    if (!e.getClientRects().length) return false;
    const cs = getComputedStyle(e);
    return cs.visibility !== 'hidden' && cs.display !== 'none';
  };
  const stops = Array.from(document.querySelectorAll(FOCUSABLE)).filter(tabbable);
"""

TAB_STOPS_JS = (
    "() => {"
    + _describe_js("describe")
    + _FOCUSABLE_JS
    + """
  const formulas = Array.from(document.querySelectorAll('mjx-container')).filter(c => c.getClientRects().length);
  const perFormula = new Map();
  let math = 0;
  for (const e of stops) {
    const box = e.closest('span.math, div.math') || e.closest('mjx-container');
    if (!box) continue;
    math += 1;
    perFormula.set(box, (perFormula.get(box) || 0) + 1);
  }
  const several = [];
  for (const [box, n] of perFormula) if (n > 1) several.push(`${describe(box)}: ${n} tab stops`);
  return {stops: stops.length, math, controls: stops.length - math, formulas: formulas.length,
          several: several.slice(0, 5), several_count: several.length};
}"""
)


def tab_stops_check(loaded: Loaded) -> dict:
    """The page's tab stops: ``{"stops", "math", "controls", "formulas", "several", "several_count"}``.

    ``math`` counts stops inside a formula's box (``span.math``/``div.math``/``mjx-container``),
    ``several`` names formulas with more than one.
    """
    return loaded.page.evaluate(TAB_STOPS_JS)


FOCUS_VISIBLE_JS = (
    "(scope) => {"
    + _describe_js("describe")
    + _FOCUSABLE_JS
    + """
  const root = document.querySelector(scope);
  const out = {checked: 0, invisible: []};
  for (const e of stops) {
    if (root && !root.contains(e)) continue;
    if (e.closest('span.math, div.math, mjx-container')) continue;
    e.focus({preventScroll: true});
    if (document.activeElement !== e) continue;
    out.checked += 1;
    const cs = getComputedStyle(e);
    const outline = cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2 &&
      !/rgba\\(.*, 0\\)$|transparent/.test(cs.outlineColor);
    const shadow = cs.boxShadow !== 'none' && !/rgba\\([^)]*, 0\\)/.test(cs.boxShadow.split(')')[0] + ')');
    if (!(outline || shadow) || !e.matches(':focus-visible'))
      out.invisible.push(`${describe(e)} outline ${cs.outlineStyle} ${cs.outlineWidth}, box-shadow ${cs.boxShadow}`);
    e.blur();
  }
  return out;
}"""
)


def focus_visible_check(loaded: Loaded, scope: str = "body") -> dict:
    """Focus each control (tab stop outside formulas) inside ``scope`` from the keyboard and read its
    computed style: ``{"checked": n, "invisible": [...]}`` lists controls with neither an outline of
    at least 2 px nor a box shadow while focused (WCAG 2.4.7)."""
    loaded.page.keyboard.press(
        "Shift"
    )  # keyboard modality: script focus then matches :focus-visible
    return loaded.page.evaluate(FOCUS_VISIBLE_JS, scope)


DOWNLOADS_JS = """() => Array.from(document.querySelectorAll('.dropdown-download-buttons .dropdown-menu a[href], '
  + '.dropdown-download-buttons .dropdown-menu button')).map(a => ({
    text: a.textContent.trim(), href: a.href || null, onclick: a.getAttribute('onclick')}))"""


def downloads_of(loaded: Loaded) -> list[dict]:
    """The page's download menu: ``[{"text", "href", "onclick"}]``."""
    return loaded.page.evaluate(DOWNLOADS_JS)


FIGURES_JS = """() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  return Array.from(document.querySelectorAll('article img')).filter(i => i.getClientRects().length).map(img => ({
    src: img.getAttribute('src'), url: img.src, rendered: img.getBoundingClientRect().width,
    natural: img.naturalWidth, zoom: (img.closest('a[href]') || {}).href || null}));
}"""


def figures_of(loaded: Loaded) -> list[dict]:
    """Every visible image of the article (folded solutions opened): its rendered width in CSS px, its
    natural width in pixels and the link a tap follows (``zoom``)."""
    loaded.page.wait_for_timeout(100)
    return loaded.page.evaluate(FIGURES_JS)


# --- what else a reader meets: markers, the keyboard on wide formulas, search fields, search snippets ---

MARKERS_JS = """() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  // In code, where the markers are cell lines (the instructors' page names them in its prose).
  const code = Array.from(document.querySelectorAll('article pre')).map(p => p.innerText).join(' ');
  return (code.match(/### (BEGIN|END) SOLUTION/g) || []).length;
}"""


def solution_markers_check(loaded: Loaded) -> int:
    """How many nbgrader markers (``### BEGIN SOLUTION`` / ``### END SOLUTION``) the article's code shows
    with every solution and hidden cell opened (call it last on a load: it opens them)."""
    return loaded.page.evaluate(MARKERS_JS)


WIDE_FORMULAS_JS = """() => Array.from(document.querySelectorAll('span.math')).filter(s => {
  const m = s.querySelector('mjx-math');
  return m && s.getClientRects().length && getComputedStyle(m).visibility === 'visible' &&
    !s.closest('.bd-sidebar-primary, .bd-sidebar-secondary, details:not([open])') &&
    m.getBoundingClientRect().width > s.clientWidth + 1;
}).map((s, i) => { s.dataset.iclWide = String(i); return i; })"""


def keyboard_scroll_check(loaded: Loaded) -> dict:
    """Every inline formula wider than its box, scrolled from the keyboard: the box (``span.math``, one
    tab stop when it scrolls) is focused, then End, ← and Home are pressed. Returns ``{"wide": n, "stuck":
    [...]}``, naming formulas that cannot take focus or that the keys do not scroll to both ends."""
    page = loaded.page
    wide = page.evaluate(WIDE_FORMULAS_JS)
    stuck = []
    for i in wide:
        span = page.locator(f'span.math[data-icl-wide="{i}"]')
        state = span.evaluate(
            "s => { s.focus(); "
            "return {focus: document.activeElement === s && s.tabIndex >= 0, "
            "more: s.querySelector('mjx-math').getBoundingClientRect().width - s.clientWidth}; }"
        )
        what = span.evaluate(
            "s => s.querySelector('mjx-assistive-mml, mjx-container').textContent.slice(0, 40)"
        )
        if not state["focus"]:
            stuck.append(f"{what!r}: cannot take keyboard focus")
            continue
        page.keyboard.press("End")
        end = span.evaluate("s => s.scrollLeft")
        page.keyboard.press("ArrowLeft")
        left = span.evaluate("s => s.scrollLeft")
        page.keyboard.press("Home")
        home = span.evaluate("s => s.scrollLeft")
        if end < state["more"] - 2 or not left < end or home > 0:
            stuck.append(
                f"{what!r}: End → {end:.0f} of {state['more']:.0f} px, ← → {left:.0f}, Home → {home:.0f}"
            )
    return {"wide": len(wide), "stuck": stuck}


SEARCH_FIELDS_JS = """() => Array.from(document.querySelectorAll('.search-button-field, .bd-search input')).filter(e => {
  if (e.closest('article, .bd-search-container')) return false;  // the search page's own field
  const r = e.getBoundingClientRect();
  return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden';
}).map(e => `${e.closest('header, aside, nav, section, div[id]')?.id || e.parentElement.className}`)"""


def search_fields_of(loaded: Loaded) -> list[str]:
    """The visible search fields of the page's frame (where each sits), not counting the query field
    of the search page's article."""
    return loaded.page.evaluate(SEARCH_FIELDS_JS)


SNIPPETS_JS = """async () => {
  for (let i = 0; i < 100; i++) {  // Sphinx fetches every result page for its snippet
    const status = document.querySelector('#search-results .search-summary');
    if (status && /found/i.test(status.textContent)) break;
    await new Promise(r => setTimeout(r, 100));
  }
  await new Promise(r => setTimeout(r, 1500));
  return Array.from(document.querySelectorAll('#search-results li')).map(li => ({
    href: li.querySelector('a').getAttribute('href'),
    snippet: (li.querySelector('p.context') || {}).textContent || null}));
}"""


def search_snippets(loaded: Loaded) -> list[dict]:
    """The results of a loaded ``search.html?q=…``: ``[{"href", "snippet"}]``."""
    return loaded.page.evaluate(SNIPPETS_JS)


RAW_TEX = r"\\\(|\\\[|\$\$|\\[a-zA-Z]{2,}"
# The header's buttons, and two numbered lines in a row: the page's contents list.
PAGE_CHROME = r"Open issue|\.ipynb\s+\.md|\n\s*\d+\.\d+\. [^\n]+\n\s*\d+\.\d+\. "


FORMULA_FOCUS_JS = """(limit) => {
  const ring = (e) => { const cs = getComputedStyle(e);
    return cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2 && !/rgba\\(.*, 0\\)$|transparent/.test(cs.outlineColor); };
  const out = {checked: 0, invisible: []};
  for (const span of Array.from(document.querySelectorAll('article span.math')).slice(0, limit)) {
    if (span.tabIndex < 0 || !span.getClientRects().length) continue;
    span.focus({preventScroll: true});
    if (document.activeElement !== span) continue;
    out.checked += 1;
    // The box scrolls, so a ring drawn outside it would be clipped by nothing but must show: the ring
    // is the box's own outline.
    if (!(ring(span) && span.matches(':focus-visible')))
      out.invisible.push((span.querySelector('mjx-assistive-mml') || span).textContent.slice(0, 30));
    span.blur();
  }
  return out;
}"""


def formula_focus_check(loaded: Loaded, limit: int = 40) -> dict:
    """Focus the inline formulas among the first ``limit`` that are tab stops (those that scroll) from the
    keyboard: ``{"checked", "invisible"}`` lists formulas that show no focus ring."""
    loaded.page.keyboard.press(
        "Shift"
    )  # keyboard modality: script focus then matches :focus-visible
    return loaded.page.evaluate(FORMULA_FOCUS_JS, limit)


# --- the keyboard path to "Next", the boxes that scroll, the phone's header and titles -------------------

TABS_TO_NEXT_JS = _FOCUSABLE_JS.join(
    [
        "() => {",
        """
  const next = document.querySelector('a.right-next');
  return {before: next ? stops.indexOf(next) : -1, stops: stops.length};
}""",
    ]
)


def tabs_to_next(loaded: Loaded, limit: int = 40) -> dict:
    """Press Tab from the top of the page, as a keyboard reader does, until a "Next" control has focus (the
    link at the page's foot, ``a.right-next``, or a link to the same page named "Next…", as the header's)
    or ``limit`` presses have gone by: the chapter link in the navigation does not count. Returns
    ``{"tabs": presses or None, "before": tab stops ahead of the foot's link in document order,
    "stops": all tab stops}``."""
    page = loaded.page
    # Start from the top: focus the document itself (a blurred element would stay the starting point).
    page.evaluate(
        "() => { const h = document.documentElement; h.tabIndex = -1; h.focus({preventScroll: true});"
        " h.removeAttribute('tabindex'); window.scrollTo(0, 0); }"
    )
    counted = page.evaluate(TABS_TO_NEXT_JS)
    tabs = None
    for n in range(1, limit + 1):
        page.keyboard.press("Tab")
        if page.evaluate(
            "() => { const a = document.activeElement, n = document.querySelector('a.right-next');"
            " return !!a && !!n && a.href === n.href &&"
            " (a === n || /^Next\\b/.test(a.getAttribute('aria-label') || a.textContent.trim())); }"
        ):
            tabs = n
            break
    return {"tabs": tabs, **counted}


SCROLL_BOXES_JS = (
    "() => {"
    + _describe_js("describe")
    + _FOCUSABLE_JS
    + """
  const out = {boxes: 0, kinds: {}, problems: []};
  const math = (e) => e.matches('span.math, div.math mjx-container');
  const more = (e) => {
    if (math(e)) { const m = e.querySelector('mjx-math'); return m ? m.getBoundingClientRect().width - e.clientWidth : 0; }
    return e.scrollWidth - e.clientWidth;
  };
  const ring = (e) => { const cs = getComputedStyle(e);
    return cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2 && !/rgba\\(.*, 0\\)$|transparent/.test(cs.outlineColor) &&
      parseFloat(cs.outlineOffset) <= -parseFloat(cs.outlineWidth); };  // drawn inside: nothing clips it
  const name = (e) => e.getAttribute('aria-label') || (e.querySelector('img[alt]') || {}).alt || '';
  const article = document.querySelector('article') || document.body;
  for (const e of article.querySelectorAll('*')) {
    const ox = getComputedStyle(e).overflowX;
    if (!(ox === 'auto' || ox === 'scroll') || !e.getClientRects().length || e.closest('details:not([open])')) continue;
    if (getComputedStyle(e).visibility !== 'visible') continue;  // in a folded solution: not shown
    if (more(e) <= 1 || e.clientWidth === 0) continue;
    out.boxes += 1;
    const kind = e.tagName.toLowerCase() + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ')[0] : '');
    out.kinds[kind] = (out.kinds[kind] || 0) + 1;
    const own = stops.filter(s => e === s || e.contains(s));
    const what = describe(e);
    if (!stops.includes(e)) { out.problems.push(`${what}: not a tab stop (${own.length} inside)`); continue; }
    if (math(e) && own.length !== 1) { out.problems.push(`${what}: ${own.length} tab stops`); continue; }
    if (!name(e)) out.problems.push(`${what}: no accessible name`);
    e.focus({preventScroll: true});
    if (document.activeElement !== e || !e.matches(':focus-visible') || !ring(e))
      out.problems.push(`${what}: no focus ring drawn inside its edge`);
    e.blur();
  }
  return out;
}"""
)


def scroll_boxes_check(loaded: Loaded) -> dict:
    """Every box of the article that scrolls sideways (its visible content wider than it): ``{"boxes",
    "kinds", "problems"}``, naming boxes that are not a tab stop themselves (a formula's: its only one),
    have no accessible name, or
    show no focus ring (at least 2 px, drawn inside the box, where no scrolling ancestor clips it)."""
    loaded.page.keyboard.press("Shift")  # keyboard modality: script focus matches :focus-visible
    return loaded.page.evaluate(SCROLL_BOXES_JS)


CODE_CUE_JS = """() => Array.from(document.querySelectorAll('article pre')).filter(p =>
  p.getClientRects().length && p.scrollWidth > p.clientWidth + 1 &&
  !(p.classList.contains('icl-more-right') || p.classList.contains('icl-more-left'))).map(p =>
  `${p.scrollWidth - p.clientWidth} px hidden: ${p.textContent.trim().slice(0, 40)}`)"""


def code_cue_check(loaded: Loaded) -> list[str]:
    """Code blocks that scroll sideways with no cue at their edge."""
    return loaded.page.evaluate(CODE_CUE_JS)


TOOLTIPS_JS = """() => Array.from(document.querySelectorAll('.tooltip')).filter(t => {
  const r = t.getBoundingClientRect(), cs = getComputedStyle(t);
  return r.width > 0 && r.height > 0 && cs.display !== 'none' && cs.visibility !== 'hidden' && parseFloat(cs.opacity) > 0;
}).map(t => t.textContent.trim())"""


def stuck_tooltip_check(loaded: Loaded) -> list[str]:
    """On a phone: tap the page-contents button, close its drawer by tapping beside it, scroll; returns
    the tooltips still shown (none expected). A page without contents has nothing to tap: ``[]``."""
    page = loaded.page
    button = page.locator(".secondary-toggle:visible")
    if button.count() == 0:
        return []
    button.first.tap()
    page.wait_for_timeout(600)
    page.touchscreen.tap(10, 400)  # beside the drawer, which opens from the right
    page.wait_for_timeout(600)
    page.mouse.wheel(0, 600)
    page.evaluate("() => window.scrollBy(0, 600)")
    page.wait_for_timeout(300)
    return page.evaluate(TOOLTIPS_JS)


TITLE_LINES_JS = """() => Array.from(document.querySelectorAll('article h1')).map(h => {
  const cs = getComputedStyle(h);
  const line = parseFloat(cs.lineHeight) || 1.2 * parseFloat(cs.fontSize);
  // The lines its words sit on: the tops of its text's boxes (not the hidden ¶ link), a line apart.
  const tops = [];
  const walker = document.createTreeWalker(h, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const n = walker.currentNode;
    if (!n.textContent.trim() || n.parentElement.closest('.headerlink, mjx-assistive-mml')) continue;
    const range = document.createRange(); range.selectNodeContents(n);
    for (const r of range.getClientRects()) if (r.width > 1) tops.push(r.top);
  }
  tops.sort((a, b) => a - b);
  const lines = tops.filter((t, i) => i === 0 || t - tops[i - 1] > line / 2).length;
  return {title: h.textContent.replace('¶', '').trim().slice(0, 60), lines, px: parseFloat(cs.fontSize)};
})"""


def title_lines(loaded: Loaded) -> list[dict]:
    """Each ``h1`` of the article: how many lines its text takes, its font size and line height."""
    return loaded.page.evaluate(TITLE_LINES_JS)
