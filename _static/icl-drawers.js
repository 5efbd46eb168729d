/* Phone and tablet drawers (the ☰ and the page-contents buttons below 992 px).
 *
 * pydata-sphinx-theme 0.17.1 (which sphinx-book-theme 1.3.0 pins) binds its drawer handler to the
 * first `.primary-toggle` / `.secondary-toggle` of the page, a navbar icon that sphinx-book-theme
 * hides; sphinx-book-theme's desktop handler binds the same hidden button. The visible buttons in the
 * article header get no handler and do nothing (pydata-sphinx-theme #2451, sphinx-book-theme #988).
 * Forward a click on any other toggle to the bound one. tests/test_browser.py taps them on every page;
 * drop this file when the theme binds its visible toggles (the test then fails on a double dialog).
 */
(() => {
  const bind = () => {
    for (const kind of ["primary", "secondary"]) {
      const [bound, ...others] = document.querySelectorAll(`.${kind}-toggle`);
      for (const button of others) {
        button.addEventListener("click", (event) => {
          event.preventDefault();
          event.stopPropagation();
          bound.click();
        });
      }
    }
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", bind);
  else bind();
})();
