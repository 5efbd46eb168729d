/* Search result snippets that read as text (search.html; jupyter-book includes _static/*.js on every page).
 *
 * Sphinx's searchtools.js fetches each matching page and cuts its snippet from the text of [role="main"]:
 * with this theme that is also the page's header buttons ("Colab Repository Open issue .ipynb .md") and its
 * contents list, and every formula is raw TeX ("\(\mu_k = \E[f(Z)\He_k(Z)]\)"), since the fetched page is
 * not typeset. Snippets here come from the article alone, with each formula as readable text ("μ_k =
 * 𝔼[f(Z)He_k(Z)]"). tests/test_browser.py searches the built site and checks the snippets.
 */
(() => {
  const SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ϵ", varepsilon: "ε", eta: "η", theta: "θ",
    kappa: "κ", lambda: "λ", mu: "μ", nu: "ν", xi: "ξ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ",
    phi: "ϕ", varphi: "φ", chi: "χ", psi: "ψ", omega: "ω", Gamma: "Γ", Delta: "Δ", Theta: "Θ",
    Lambda: "Λ", Sigma: "Σ", Phi: "Φ", Psi: "Ψ", Omega: "Ω", star: "⋆", le: "≤", leq: "≤", ge: "≥",
    geq: "≥", ne: "≠", approx: "≈", sim: "∼", to: "→", infty: "∞", cdot: "·", times: "×", sum: "Σ",
    in: "∈", top: "⊤", R: "ℝ", E: "𝔼", ell: "ℓ", pm: "±", eICL: "e_ICL", eIDG: "e_IDG", Normal: "𝒩",
    frac: "", sqrt: "√", mid: "|", lVert: "‖", rVert: "‖", Vert: "‖", langle: "⟨", rangle: "⟩",
  };
  // The same rules as booktools/sphinx/ext/_text.py's tex_to_text (the index pages' titles).
  const group = (arg) => (arg.trim().length > 1 ? `(${arg.trim()})` : arg.trim());
  const texToText = (tex) =>
    tex
      .replace(/^\s*(\\\(|\\\[|\$\$?)/, "")
      .replace(/(\\\)|\\\]|\$\$?)\s*$/, "")
      .replace(/\\(?:left|right|big|Big|bigl|bigr|,|;|!|quad|qquad)(?![a-zA-Z])/g, "")
      .replace(/\\(?:mathrm|mathbf|mathit|mathcal|mathbb|operatorname|text|textrm)\{([^{}]*)\}/g, "$1")
      .replace(/\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}/g, (_, a, b) => `${group(a)}/${group(b)}`)
      .replace(/\\([a-zA-Z]+)/g, (_, name) => (name in SYMBOLS ? SYMBOLS[name] : name))
      .replace(/([_^])\{([^{}]*)\}/g, (_, op, arg) => op + group(arg))
      .replace(/[{}\\&]/g, "")
      .replace(/\s+/g, " ")
      .trim();

  const htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    for (const junk of [".headerlink", "script", "style", ".bd-header-article", ".bd-sidebar-secondary", ".prev-next-area"])
      doc.querySelectorAll(junk).forEach((el) => el.remove());
    doc.querySelectorAll("span.math, div.math").forEach((el) => {
      const text = ` ${texToText(el.textContent)} `;
      el.replaceWith(doc.createTextNode(el.tagName === "DIV" ? `\n${text}\n` : text));
    });
    const main = doc.querySelector('[role="main"] article') || doc.querySelector('[role="main"]');
    if (!main) return "";
    let part = null;
    try {
      part = anchor ? main.querySelector(anchor) : null;
    } catch (err) {
      part = null; // an id that is no CSS selector
    }
    if (!part) return main.textContent;
    // An index entry's anchor is an empty target before its paragraph: read on from it.
    let text = part.textContent;
    for (let next = part.nextElementSibling; next && text.trim().length < 480; next = next.nextElementSibling)
      text += ` ${next.textContent}`;
    return text.trim() ? text : main.textContent;
  };

  const install = () => {
    if (typeof Search === "undefined" || !Search.htmlToText) return false;
    Search.htmlToText = htmlToText;
    return true;
  };
  window.iclSearchText = { texToText, htmlToText };
  if (!install()) document.addEventListener("DOMContentLoaded", install);
})();
