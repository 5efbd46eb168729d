/* The book's small fixes of the theme's markup, run on every page (jupyter-book includes _static/*.js).
 * tests/test_browser.py checks the results (axe-core, scroll cues, tab stops, figure text) on every page. */
(() => {
  const ready = (fn) =>
    document.readyState === "loading" ? document.addEventListener("DOMContentLoaded", fn) : fn();

  // --- Boxes wider than their column scroll: inline formulas (span.math), display equations, code blocks,
  // cell outputs, tables and, on a phone, figures. A box is marked at the edge that has more
  // (icl-more-left/right: a shadow behind the glyphs in icl.css, never a mask over them) only when what
  // the reader sees is wider than the box. MathJax's hidden MathML (mjx-assistive-mml) is wider than the
  // typeset formula and inflates every scrollWidth around it, so a formula is measured by its visible box,
  // mjx-math (tests/browser.py: inline_math_check).
  // The keyboard: formulas are not tab stops (MathJax's inTabOrder is off in _config.yml: 77 to 557 of a
  // chapter's stops were formulas). A box that scrolls is one tab stop instead, named by what it holds
  // ("Formula, scrolls sideways"), with a focus ring (icl.css); ← → Home End scroll it. A figure's
  // scrolling link is a tab stop already; pydata-sphinx-theme makes code blocks, outputs and tables that
  // scroll tab stops, and this names them.
  const SCROLLERS =
    "span.math, div.math mjx-container, .pst-scrollable-table-container, a.icl-figure-scroll, " +
    ".bd-article pre, .bd-article .cell_output > .output";
  const KINDS = [
    ["span.math, div.math mjx-container", "Formula"],
    ["pre", "Code"],
    [".cell_output > .output", "Output"],
    [".pst-scrollable-table-container", "Table"],
  ];
  const scrollers = () => document.querySelectorAll(SCROLLERS);
  const isMath = (el) => el.matches("span.math, div.math mjx-container");
  // How far the visible content of ``el`` reaches past its box (CSS px) and how far it is scrolled.
  const overflow = (el) => {
    if (isMath(el)) {
      const m = el.querySelector("mjx-math");
      return m ? m.getBoundingClientRect().width - el.clientWidth : 0;
    }
    return el.scrollWidth - el.clientWidth;
  };
  const label = (el, scrolls) => {
    const kind = KINDS.find(([selector]) => el.matches(selector));
    if (!kind) return;  // a figure's link: named by its image
    if (scrolls) {
      el.tabIndex = 0;
      el.setAttribute("role", "group");
      el.setAttribute("aria-label", `${kind[1]}, scrolls sideways`);
    } else if (el.getAttribute("aria-label")) {
      el.removeAttribute("role");
      el.removeAttribute("aria-label");
      if (isMath(el)) el.removeAttribute("tabindex");
    }
  };
  const update = (el) => {
    const more = overflow(el);
    const scrolls = more > 1;
    el.classList.toggle("icl-more-right", scrolls && el.scrollLeft < more - 1);
    el.classList.toggle("icl-more-left", scrolls && el.scrollLeft > 1);
    label(el, scrolls);
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

  // --- A box that scrolls, focused, scrolls from the keyboard: ← and → by about three characters, Home
  // and End to its ends (a browser scrolls a focused box with the arrows, but Home and End move the page;
  // and a formula's scrollWidth includes MathJax's hidden MathML). tests/browser.py: keyboard_scroll_check.
  const STEP_EM = 3;
  const scrollByKey = (event) => {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    const box = event.target.matches && event.target.matches(SCROLLERS) ? event.target : null;
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

  // --- The next chapter within a few Tabs: a skip link and a "Next" button in the article's header, the
  // same link as the one at the page's foot, which a keyboard reader reached only after every link and
  // copy button of the chapter (47 links and 60 copy buttons in chapter 3). tests/test_browser.py counts
  // the Tabs.
  const nextInHeader = () => {
    const next = document.querySelector("a.right-next");
    const buttons = document.querySelector(".bd-header-article .article-header-buttons");
    if (!next || !buttons || buttons.querySelector(".icl-next-chapter")) return;
    const title = (next.querySelector(".prev-next-title") || next).textContent.trim();
    const link = document.createElement("a");
    link.href = next.getAttribute("href");
    link.className = "btn btn-sm icl-next-chapter";
    link.setAttribute("aria-label", `Next: ${title}`);
    link.title = `Next: ${title}`;
    link.innerHTML = '<i class="fa-solid fa-arrow-right" aria-hidden="true"></i>';
    buttons.append(link);
    // And a skip link after the theme's "Skip to main content": the second Tab of the page (the header
    // comes after the navigation, which lists the current chapter's sections too).
    const skip = document.querySelector("a.skip-link");
    if (skip) {
      const jump = document.createElement("a");
      jump.className = "skip-link d-print-none icl-skip-next";
      jump.href = next.getAttribute("href");
      jump.textContent = `Next: ${title}`;
      skip.after(jump);
    }
  };

  ready(() => {
    nextInHeader();
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
