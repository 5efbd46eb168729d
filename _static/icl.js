/* The book's small fixes of the theme's markup, run on every page (jupyter-book includes _static/*.js).
 * tests/test_browser.py checks the results (axe-core, scroll cues) on every page. */
(() => {
  const ready = (fn) =>
    document.readyState === "loading" ? document.addEventListener("DOMContentLoaded", fn) : fn();

  // --- Formulas wider than their column scroll; mark the edge that has more (fade in icl.css) and
  // let keyboard users reach them (axe: scrollable-region-focusable).
  const SCROLLERS = "span.math, div.math mjx-container, .pst-scrollable-table-container";
  const scrollers = () => document.querySelectorAll(SCROLLERS);
  const update = (el) => {
    const more = el.scrollWidth - el.clientWidth;
    const scrolls = more > 1;
    el.classList.toggle("icl-more-right", scrolls && el.scrollLeft < more - 1);
    el.classList.toggle("icl-more-left", scrolls && el.scrollLeft > 1);
    if (scrolls && !el.hasAttribute("tabindex")) el.setAttribute("tabindex", "0");
    if (!scrolls && el.getAttribute("tabindex") === "0") el.removeAttribute("tabindex");
  };
  const updateAll = () => scrollers().forEach(update);
  ready(() => {
    document.addEventListener("scroll", (e) => e.target.matches && e.target.matches(SCROLLERS) && update(e.target), true);
    window.addEventListener("resize", updateAll);
    const mj = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
    (mj || Promise.resolve()).then(() => requestAnimationFrame(updateAll));
    window.addEventListener("load", () => requestAnimationFrame(updateAll));
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
