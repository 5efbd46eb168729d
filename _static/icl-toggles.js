/* myst-nb's "Show code cell source" toggles (cells tagged hide-input) carry aria-label="Toggle hidden
 * content", an accessible name that does not contain their visible text: axe's serious
 * label-content-name-mismatch, and voice-control users saying "click Show code cell source" miss it.
 * Without the aria-label the name is the visible text (the hidden "Hide …" line is display: none).
 * tests/test_browser.py runs axe on every page.
 */
(() => {
  const fix = () => {
    for (const summary of document.querySelectorAll('summary[aria-label="Toggle hidden content"]')) {
      summary.removeAttribute("aria-label");
    }
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fix);
  else fix();
})();
