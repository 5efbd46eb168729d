/* The book's small fixes of the theme's markup, run on every page (jupyter-book includes _static/*.js).
 * tests/test_browser.py checks the results (axe-core, scroll cues, tab stops, figure text) on every page. */
(() => {
  const ready = (fn) =>
    document.readyState === "loading" ? document.addEventListener("DOMContentLoaded", fn) : fn();

  // --- Boxes wider than their column scroll: inline formulas (span.math), display equations, tables and,
  // on a phone, figures. A box is marked at the edge that has more (icl-more-left/right: a shadow behind
  // the glyphs in icl.css, never a mask over them) only when what the reader sees is wider than the box.
  // MathJax's hidden MathML (mjx-assistive-mml) is wider than the typeset formula and inflates every
  // scrollWidth around it, so a formula is measured by its visible box, mjx-math (tests/browser.py:
  // inline_math_check). Nothing here adds a tab stop: MathJax's mjx-container is one already (its
  // accessibility explorer), and it is the focusable content of the box that scrolls (axe:
  // scrollable-region-focusable); a table's scroll container gets tabindex from the theme.
  const SCROLLERS = "span.math, div.math mjx-container, .pst-scrollable-table-container, a.icl-figure-scroll";
  const scrollers = () => document.querySelectorAll(SCROLLERS);
  // How far the visible content of ``el`` reaches past its box (CSS px) and how far it is scrolled.
  const overflow = (el) => {
    if (el.matches("span.math, div.math mjx-container")) {
      const m = el.querySelector("mjx-math");
      return m ? m.getBoundingClientRect().width - el.clientWidth : 0;
    }
    return el.scrollWidth - el.clientWidth;
  };
  const update = (el) => {
    const more = overflow(el);
    const scrolls = more > 1;
    el.classList.toggle("icl-more-right", scrolls && el.scrollLeft < more - 1);
    el.classList.toggle("icl-more-left", scrolls && el.scrollLeft > 1);
    const fig = el.matches("a.icl-figure-scroll") && el.closest("figure");
    if (fig) fig.classList.toggle("icl-wide", scrolls);
  };
  const updateAll = () => scrollers().forEach(update);

  // --- Figures on a phone. The book's PNGs are drawn at 210 px/in with text of at least 9 pt
  // (icl_book.plotting: DPI, SMALLEST_FONT_PT), so text is 9 pt/72 in × 210 px/in = 26.25 image pixels;
  // at 9 CSS px that is 72/210 CSS px per image pixel. A figure is never shown smaller than that: on a
  // narrow screen it keeps that width and scrolls sideways in its link, which opens the PNG full size.
  const MIN_CSS_PER_PNG_PX = 72 / 210 + 0.005;
  const figures = () => document.querySelectorAll(".bd-article a.image-reference > img");
  const sizeFigure = (img) => {
    if (!img.naturalWidth) return;
    const link = img.parentElement;
    link.classList.add("icl-figure-scroll");
    link.title = "Open the figure full size";
    // Its width in the column (myst-nb gives it half the PNG's pixels), but never below the legible one.
    const shown = parseFloat(img.style.width) || img.naturalWidth / 2;
    img.style.width = "100%";
    img.style.maxWidth = `${shown}px`;
    img.style.minWidth = `${Math.min(shown, Math.ceil(img.naturalWidth * MIN_CSS_PER_PNG_PX))}px`;
    update(link);
  };

  // --- Punctuation that follows inline math stays on its line (the theme's inline-flex box is a break
  // opportunity of its own): the formula and its punctuation share a nowrap span.
  const gluePunctuation = () => {
    document.querySelectorAll(".bd-article span.math").forEach((span) => {
      const next = span.nextSibling;
      if (!next || next.nodeType !== Node.TEXT_NODE || span.parentElement.classList.contains("icl-nobr")) return;
      const m = /^[.,;:!?)\]’”]+/.exec(next.textContent);
      if (!m) return;
      const wrap = document.createElement("span");
      wrap.className = "icl-nobr";
      span.replaceWith(wrap);
      next.textContent = next.textContent.slice(m[0].length);
      wrap.append(span, m[0]);
    });
  };

  // --- A formula wider than its column scrolls from the keyboard too. Its only tab stop is MathJax's
  // mjx-container (focusable for MathJax's explorer); while it has focus, ← and → move the formula by
  // about three characters, Home and End to its ends (keys MathJax left alone). tests/browser.py:
  // keyboard_scroll_check presses them on every formula that scrolls.
  const STEP_EM = 3;
  const scrollByKey = (event) => {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    const container = event.target.closest && event.target.closest("mjx-container");
    const box = container && container.closest("span.math");
    if (!box) return;
    const more = overflow(box);
    if (more <= 1) return;
    const step = STEP_EM * parseFloat(getComputedStyle(box).fontSize);
    const to = { ArrowRight: box.scrollLeft + step, ArrowLeft: box.scrollLeft - step, End: more, Home: 0 }[event.key];
    if (to === undefined) return;
    event.preventDefault();
    box.scrollLeft = Math.max(0, Math.min(more, to));
    update(box);
  };

  ready(() => {
    gluePunctuation();
    document.addEventListener("keydown", scrollByKey);
    document.addEventListener("scroll", (e) => e.target.matches && e.target.matches(SCROLLERS) && update(e.target), true);
    window.addEventListener("resize", updateAll);
    figures().forEach((img) => (img.complete ? sizeFigure(img) : img.addEventListener("load", () => sizeFigure(img))));
    const mj = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
    (mj || Promise.resolve()).then(() => requestAnimationFrame(updateAll));
    window.addEventListener("load", () => requestAnimationFrame(updateAll));
    if (document.fonts) document.fonts.ready.then(() => requestAnimationFrame(updateAll));
  });

  ready(() => {
    // --- The bibliography: role="list" whose children are doc-biblioentry (aria-required-children;
    // doc-biblioentry is deprecated and allowed only inside doc-bibliography). Make them list items.
    document.querySelectorAll('[role="list"] > [role="doc-biblioentry"]').forEach((e) => e.setAttribute("role", "listitem"));

    // --- Buttons whose aria-label differs from their visible text (label-content-name-mismatch):
    // the search field shows "Search Ctrl+K"; the colour-mode icons carry titles of their own.
    document.querySelectorAll(".search-button-field[aria-label]").forEach((b) => b.removeAttribute("aria-label"));
    // fontawesome.js turns the <i> icons into <svg> with a <title>, after this script and again on
    // every mode change: hide the icons from the accessibility tree whenever they appear.
    const quiet = (button) => {
      button.querySelectorAll("i[title], svg").forEach((icon) => {
        icon.removeAttribute("title");
        icon.removeAttribute("aria-labelledby");
        icon.setAttribute("aria-hidden", "true");
        icon.querySelectorAll("title").forEach((t) => t.remove());
      });
    };
    document.querySelectorAll(".theme-switch-button").forEach((button) => {
      quiet(button);
      new MutationObserver(() => quiet(button)).observe(button, { childList: true, subtree: true });
    });
  });
})();
