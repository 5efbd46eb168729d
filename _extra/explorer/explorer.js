/* explorer.js: the interactive theory explorer of chapters/explorer.md (plain SVG, no dependencies).
 *
 * Sliders for alpha, kappa (with an infinity end), rho, lambda and tau drive two figures drawn from
 * window.iclTheory (iclTheory.js): e_ICL and e_IDG against tau on log axes (the ridgeless curves broken at
 * the tau = 1 divergence, a dashed asymptote there), and the (kappa, alpha) phase diagram at the slider's
 * tau. A teacher selector applies the nonlinearity-noise mapping; simulated points of the book's
 * simulator (iclTheoryData.js) are overlaid when the sliders equal their parameters. Every redraw is
 * synchronous and timed: window.iclExplorer.lastRedrawMs (tests/test_explorer.py reads it).
 */
(function () {
  "use strict";
  const SVGNS = "http://www.w3.org/2000/svg";
  const T = window.iclTheory;
  const DATA = window.iclTheoryData || { teachers: [], simulations: [] };

  // --- sliders: integer positions mapped to values (log grids of 20 steps per decade) ------------------
  const snap = (v) => Number(v.toPrecision(12));
  const decade = (i, i0) => snap(Math.pow(10, (i - i0) / 20));
  const SLIDERS = [
    { key: "alpha", label: "Context length α = ℓ/d", max: 60, start: 20,
      value: (i) => decade(i, 20), hint: "0.1 to 100, logarithmic" },
    { key: "kappa", label: "Task diversity κ = K/d", max: 61, start: 61,
      value: (i) => (i === 61 ? Infinity : decade(i, 20)), hint: "0.1 to 100, then ∞ (a fresh task per prompt)" },
    { key: "rho", label: "Label noise ρ", max: 61, start: 21,
      value: (i) => (i === 0 ? 0 : decade(i, 61)), hint: "0, then 0.001 to 1, logarithmic" },
    { key: "ridge", label: "Ridge λ", max: 101, start: 0,
      value: (i) => (i === 0 ? 0 : decade(i, 81)), hint: "0 (ridgeless), then 0.0001 to 10, logarithmic" },
    { key: "tau", label: "Pretraining data τ = n/d² (marker, phase diagram)", max: 60, start: 32,
      value: (i) => decade(i, 20), hint: "0.1 to 100, logarithmic" },
  ];
  const TAU_MIN = 0.1, TAU_MAX = 100, AXIS_MIN = 0.1, AXIS_MAX = 100;

  const SUP = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };
  function fmt(v) {
    if (v === Infinity) return "∞";
    if (!Number.isFinite(v)) return "—";
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1e4 || a < 1e-3) {
      const [m, e] = v.toExponential(2).split("e");
      return `${m}×10${String(Number(e)).replace(/./g, (c) => SUP[c])}`;
    }
    return Number(v.toPrecision(3)).toString();
  }
  const spoken = (v) => (v === Infinity ? "infinity" : fmt(v));

  function el(tag, attrs, parent, ns) {
    const e = ns ? document.createElementNS(SVGNS, tag) : document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  const svgEl = (tag, attrs, parent) => el(tag, attrs, parent, true);

  // --- state ------------------------------------------------------------------------------------------
  const root = document.getElementById("icl-explorer");
  if (!root || !T) return;
  const inputs = {}, outputs = {};
  const state = {};
  let teacherName = "linear", mapMode = "gap";

  function readState() {
    for (const s of SLIDERS) state[s.key] = s.value(Number(inputs[s.key].value));
    teacherName = teacherSelect.value;
    mapMode = mapSelect.value;
  }

  // e_ICL, e_IDG for the selected teacher (the linear teacher, or the nonlinearity-noise mapping).
  function icl(alpha, tau, kappa, rho, ridge) {
    return teacherName === "linear" ? T.iclError(alpha, tau, kappa, rho, ridge)
      : T.nonlinearIclError(teacherName, alpha, tau, kappa, rho, ridge);
  }
  function idg(alpha, tau, kappa, rho) {
    return teacherName === "linear" ? T.idgError(alpha, tau, kappa, rho)
      : T.nonlinearIdgError(teacherName, alpha, tau, kappa, rho);
  }

  // --- controls ---------------------------------------------------------------------------------------
  root.textContent = "";
  const controls = el("div", { class: "icl-x-controls", role: "group", "aria-label": "Parameters of the theory" }, root);
  for (const s of SLIDERS) {
    const id = `icl-x-${s.key}`;
    const box = el("div", { class: "icl-x-control" }, controls);
    const label = el("label", { for: id }, box);
    label.textContent = s.label;
    const row = el("div", { class: "icl-x-row" }, box);
    const input = el("input", { type: "range", id, min: "0", max: String(s.max), step: "1",
      value: String(s.start), "aria-describedby": `${id}-hint` }, row);
    const out = el("output", { for: id, id: `${id}-out`, class: "icl-x-value" }, row);
    const hint = el("span", { id: `${id}-hint`, class: "icl-x-hint" }, box);
    hint.textContent = s.hint;
    inputs[s.key] = input; outputs[s.key] = out;
    input.addEventListener("input", redraw);
  }
  const selects = el("div", { class: "icl-x-selects" }, controls);
  function select(id, text, options, parent) {
    const box = el("div", { class: "icl-x-control" }, parent);
    const label = el("label", { for: id }, box);
    label.textContent = text;
    const sel = el("select", { id }, box);
    for (const [value, name] of options) { const o = el("option", { value }, sel); o.textContent = name; }
    sel.addEventListener("change", redraw);
    sel.addEventListener("input", redraw);
    return sel;
  }
  const teacherOptions = [["linear", "linear: y = x·w + ε"]];
  for (const t of DATA.teachers) teacherOptions.push([t.name, `${t.label}: y = f(x·w) + ε`]);
  const teacherSelect = select("icl-x-teacher", "Teacher f", teacherOptions, selects);
  const mapSelect = select("icl-x-map", "Phase diagram colour",
    [["gap", "gap e_ICL − e_IDG (λ = 0)"], ["icl", "e_ICL (at λ)"]], selects);
  const teacherNote = el("p", { class: "icl-x-note", id: "icl-x-teacher-note" }, root);

  // --- figure 1: errors against tau ---------------------------------------------------------------------
  const fig1 = el("figure", { class: "icl-x-figure" }, root);
  const svg1 = svgEl("svg", { role: "img", "aria-labelledby": "icl-x-cap1", class: "icl-x-svg" }, fig1);
  const legend1 = el("ul", { class: "icl-x-legend" }, fig1);
  const cap1 = el("figcaption", { id: "icl-x-cap1" }, fig1);
  const readout = el("p", { class: "icl-x-readout", "aria-live": "polite", id: "icl-x-readout" }, root);

  // --- figure 2: phase diagram ----------------------------------------------------------------------------
  const fig2 = el("figure", { class: "icl-x-figure" }, root);
  const svg2 = svgEl("svg", { role: "img", "aria-labelledby": "icl-x-cap2", class: "icl-x-svg" }, fig2);
  const cap2 = el("figcaption", { id: "icl-x-cap2" }, fig2);

  // --- drawing helpers ------------------------------------------------------------------------------------
  const log10 = Math.log10;
  function axes(svg, box, xr, yr, xlabel, ylabel, clipId, noGrid) {
    const [x0, x1] = xr.map(log10), [y0, y1] = yr.map(log10);
    const sx = (v) => box.l + (log10(v) - x0) / (x1 - x0) * box.w;
    const sy = (v) => box.t + box.h - (log10(v) - y0) / (y1 - y0) * box.h;
    const g = svgEl("g", { class: "icl-x-axes" }, svg);
    svgEl("rect", { x: box.l, y: box.t, width: box.w, height: box.h, class: "icl-x-frame" }, g);
    const ticks = (lo, hi) => {
      const out = [];
      for (let e = Math.floor(log10(lo)); e <= Math.ceil(log10(hi)); e++) {
        for (const m of [1, 2, 5]) { const v = m * Math.pow(10, e); if (v >= lo * 0.999 && v <= hi * 1.001) out.push([v, m === 1]); }
      }
      return out;
    };
    const xt = ticks(...xr), yt = ticks(...yr);
    const yMajor = yt.filter((t) => t[1]).length >= 2;
    for (const [v, major] of xt) {
      const x = sx(v);
      svgEl("line", { x1: x, x2: x, y1: box.t + box.h, y2: box.t + box.h + (major ? 5 : 3), class: "icl-x-tick" }, g);
      if (major && !noGrid) svgEl("line", { x1: x, x2: x, y1: box.t, y2: box.t + box.h, class: "icl-x-grid" }, g);
      if (major || box.w > 420) {
        const t = svgEl("text", { x, y: box.t + box.h + 17, "text-anchor": "middle", class: major ? "" : "icl-x-minor" }, g);
        t.textContent = fmt(v);
      }
    }
    for (const [v, major] of yt) {
      const y = sy(v);
      svgEl("line", { x1: box.l - (major ? 5 : 3), x2: box.l, y1: y, y2: y, class: "icl-x-tick" }, g);
      if ((major || !yMajor) && !noGrid) svgEl("line", { x1: box.l, x2: box.l + box.w, y1: y, y2: y, class: "icl-x-grid" }, g);
      if (major || !yMajor || box.h > 260) {
        const t = svgEl("text", { x: box.l - 8, y: y + 4, "text-anchor": "end" }, g);
        t.textContent = fmt(v);
      }
    }
    const xl = svgEl("text", { x: box.l + box.w / 2, y: box.t + box.h + 36, "text-anchor": "middle", class: "icl-x-label" }, g);
    xl.textContent = xlabel;
    const yl = svgEl("text", { x: 0, y: 0, "text-anchor": "middle", class: "icl-x-label",
      transform: `translate(${14},${box.t + box.h / 2}) rotate(-90)` }, g);
    yl.textContent = ylabel;
    const defs = svgEl("defs", {}, svg);
    const clip = svgEl("clipPath", { id: clipId }, defs);
    svgEl("rect", { x: box.l, y: box.t, width: box.w, height: box.h }, clip);
    return { sx, sy };
  }

  function path(points, sx, sy, yr) {
    // Values above the axis are drawn just past its top (then clipped): the curve leaves the frame.
    const top = Math.log10(yr[1]) + 0.5, bottom = Math.log10(yr[0]) - 0.5;
    let d = "";
    for (const [x, y] of points) {
      const ly = Math.min(Math.max(Math.log10(y), bottom), top);
      d += (d ? "L" : "M") + sx(x).toFixed(2) + "," + sy(Math.pow(10, ly)).toFixed(2);
    }
    return d;
  }

  // tau samples: a log grid, plus points closing in on tau = 1 from both sides.
  const TAUS = (() => {
    const out = [];
    for (let i = 0; i <= 240; i++) out.push(snap(Math.pow(10, -1 + 3 * i / 240)));
    for (const e of [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 2e-2, 5e-2]) out.push(1 - e, 1 + e);
    return Array.from(new Set(out)).sort((a, b) => a - b);
  })();

  function curve(fn, breakAtOne) {
    // Pieces of [tau, value] with finite values; a ridgeless curve is split at tau = 1.
    const left = [], right = [];
    for (const t of TAUS) {
      if (breakAtOne && t === 1) continue;
      const v = fn(t);
      if (Number.isFinite(v) && v > 0) (breakAtOne && t > 1 ? right : left).push([t, v]);
    }
    return breakAtOne ? [left, right] : [left];
  }

  function matchingSets() {
    const close = (a, b) => (a === b) || (a > 0 && b > 0 && Math.abs(Math.log(a / b)) < 1e-9);
    return DATA.simulations.filter((s) => s.teacher === teacherName && close(s.alpha, state.alpha)
      && close(s.kappa === null ? Infinity : s.kappa, state.kappa) && close(s.rho, state.rho) && close(s.ridge, state.ridge));
  }

  function legendItem(cls, text, kind) {
    const li = el("li", {}, legend1);
    const sw = svgEl("svg", { width: 26, height: 12, "aria-hidden": "true", class: "icl-x-swatch" }, li);
    if (kind === "marker") svgEl("circle", { cx: 13, cy: 6, r: 3.5, class: `icl-x-marker ${cls}` }, sw);
    else svgEl("line", { x1: 1, x2: 25, y1: 6, y2: 6, class: `icl-x-curve ${cls}` }, sw);
    li.appendChild(document.createTextNode(text));
  }

  // e_ICL − e_IDG, with a difference within the evaluation's accuracy shown as 0 (iclTheory.gap).
  const gapAt = (alpha, tau, kappa, rho) => T.gap(teacherName, alpha, tau, kappa, rho);

  function drawTau() {
    const W = Math.max(280, Math.round(fig1.clientWidth || 640));
    const H = Math.round(Math.min(420, Math.max(260, W * 0.62)));
    svg1.textContent = "";
    legend1.textContent = "";
    svg1.setAttribute("width", W); svg1.setAttribute("height", H);
    svg1.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const { alpha, kappa, rho, ridge, tau } = state;
    const ridgeless = ridge === 0;
    const series = [];
    series.push({ cls: "icl-x-c1 icl-x-wide", label: ridgeless ? "e_ICL (fresh tasks)" : `e_ICL at λ = ${fmt(ridge)}`,
      pieces: curve((t) => icl(alpha, t, kappa, rho, ridge), ridgeless) });
    if (ridgeless) {
      series.push({ cls: "icl-x-c2 icl-x-dashed", label: kappa === Infinity ? "e_IDG (equal to e_ICL at κ = ∞)" : "e_IDG (the K pretraining tasks)",
        pieces: curve((t) => idg(alpha, t, kappa, rho), true) });
    } else {
      series.push({ cls: "icl-x-c0 icl-x-dashed", label: "e_ICL at λ = 0, for comparison",
        pieces: curve((t) => icl(alpha, t, kappa, rho, 0), true) });
    }
    if (teacherName !== "linear") {
      series.push({ cls: "icl-x-c0", label: `linear teacher at the same ρ, for comparison`,
        pieces: curve((t) => T.iclError(alpha, t, kappa, rho, ridge), ridgeless) });
    }
    const sims = matchingSets();
    const marks = [];
    for (const s of sims) for (const p of s.points) {
      if (p.icl !== null) marks.push({ cls: "icl-x-c1", tau: p.tau, v: p.icl, se: p.icl_se });
      if (ridgeless && p.idg !== null) marks.push({ cls: "icl-x-c2", tau: p.tau, v: p.idg, se: p.idg_se });
    }
    // y range: every finite value away from the divergence, and the simulated points.
    let lo = Infinity, hi = 0;
    for (const s of series) for (const piece of s.pieces) for (const [t, v] of piece) {
      lo = Math.min(lo, v);
      // a ridgeless curve (two pieces) diverges at tau = 1: its values near there leave the frame
      if (s.pieces.length === 1 || t < 0.6 || t > 1.8) hi = Math.max(hi, v);
    }
    for (const m of marks) { lo = Math.min(lo, m.v - m.se); hi = Math.max(hi, m.v + m.se); }
    if (!(lo < Infinity)) { lo = 0.1; hi = 10; }
    lo = Math.max(lo, 1e-8);
    let yr = [Math.pow(10, Math.floor(log10(lo * 0.9) * 4) / 4), Math.pow(10, Math.ceil(log10(hi * 1.15) * 4) / 4)];
    if (yr[1] / yr[0] < 4) { const c = Math.sqrt(yr[0] * yr[1]); yr = [c / 2, c * 2]; }
    const box = { l: 58, t: 10, w: W - 58 - 14, h: H - 10 - 48 };
    const { sx, sy } = axes(svg1, box, [AXIS_MIN, AXIS_MAX], yr, "pretraining data τ = n/d²", "error", "icl-x-clip1");
    const plot = svgEl("g", { "clip-path": "url(#icl-x-clip1)" }, svg1);
    if (ridgeless || series.some((s) => s.cls.includes("dashed"))) {
      svgEl("line", { x1: sx(1), x2: sx(1), y1: box.t, y2: box.t + box.h, class: "icl-x-asymptote" }, plot);
      const t = svgEl("text", { x: sx(1) + 4, y: box.t + 13, class: "icl-x-small" }, svg1);
      t.textContent = "τ = 1: ridgeless error → ∞";
    }
    svgEl("line", { x1: sx(tau), x2: sx(tau), y1: box.t, y2: box.t + box.h, class: "icl-x-cursor" }, plot);
    for (const s of series) {
      for (const piece of s.pieces) if (piece.length > 1)
        svgEl("path", { d: path(piece, sx, sy, yr), class: `icl-x-curve ${s.cls}` }, plot);
      legendItem(s.cls, s.label, "line");
    }
    for (const m of marks) {
      const x = sx(m.tau);
      if (m.se > 0) svgEl("line", { x1: x, x2: x, y1: sy(Math.max(m.v - m.se, yr[0] / 10)), y2: sy(m.v + m.se), class: `icl-x-errorbar ${m.cls}` }, plot);
      svgEl("circle", { cx: x, cy: sy(m.v), r: 4, class: `icl-x-marker ${m.cls}` }, plot);
    }
    if (marks.length) legendItem("icl-x-c1", `simulation, d = ${sims[0].dim}, mean ± se of ${sims[0].seeds.length} seeds`, "marker");
    // values at the slider's tau
    const eI = icl(alpha, tau, kappa, rho, ridge);
    const eD = ridgeless ? idg(alpha, tau, kappa, rho) : NaN;
    for (const [v, cls] of [[eI, "icl-x-c1"], [eD, "icl-x-c2"]]) {
      if (Number.isFinite(v) && v >= yr[0] && v <= yr[1]) svgEl("circle", { cx: sx(tau), cy: sy(v), r: 5.5, class: `icl-x-dot ${cls}` }, plot);
    }
    readout.textContent = `At τ = ${fmt(tau)}: e_ICL = ${fmt(eI)}` + (ridgeless ? `, e_IDG = ${fmt(eD)}, gap = ${fmt(gapAt(alpha, tau, kappa, rho))}`
      : "; e_IDG has a ridgeless formula only (set λ = 0)") + (tau === 1 && ridgeless ? " (the interpolation threshold n = d²)." : ".");
    const simText = sims.length ? ` Markers: the book's simulator at d = ${sims[0].dim} (${sims[0].points.length} values of τ).`
      : " No simulated points at these parameters (they exist for α = 1, ρ = 0.01 with κ = ∞ or κ = 1 at λ = 0, κ = ∞ at λ = 0.1, and the ReLU teacher at κ = ∞, λ = 0).";
    cap1.textContent = `Asymptotic errors against τ at α = ${fmt(alpha)}, κ = ${fmt(kappa)}, ρ = ${fmt(rho)}, λ = ${fmt(ridge)}` +
      (teacherName === "linear" ? "" : `, teacher ${teacherLabel()}`) + `. Ridgeless curves are broken at τ = 1, where they diverge (dashed line); the vertical grey line marks the τ slider (τ = ${fmt(tau)}).` + simText;
    root.dataset.markers = String(marks.length);
  }

  // --- the phase diagram -------------------------------------------------------------------------------
  const N = 36;
  const GRID = Array.from({ length: N }, (_, i) => Math.pow(10, -1 + 3 * (i + 0.5) / N));
  const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"];
  function viridis(u) {
    u = Math.min(Math.max(u, 0), 1) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(u), VIRIDIS.length - 2), f = u - i;
    const a = parseInt(VIRIDIS[i].slice(1), 16), b = parseInt(VIRIDIS[i + 1].slice(1), 16);
    const mix = (s) => Math.round(((a >> s) & 255) * (1 - f) + ((b >> s) & 255) * f);
    return `rgb(${mix(16)},${mix(8)},${mix(0)})`;
  }

  let phase = null; // the diagram's elements, rebuilt only when the width changes
  function buildPhase(W) {
    const side = Math.min(W - 58 - 100, 360);
    const H = side + 10 + 48;
    svg2.textContent = "";
    svg2.setAttribute("width", W); svg2.setAttribute("height", H);
    svg2.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const box = { l: 58, t: 10, w: side, h: side };
    const { sx, sy } = axes(svg2, box, [0.1, 100], [0.1, 100], "task diversity κ = K/d", "context length α = ℓ/d", "icl-x-clip2", true);
    const cells = svgEl("g", { class: "icl-x-cells" }, svg2);
    svg2.insertBefore(cells, svg2.firstChild); // under the axes' frame
    const cw = box.w / N, ch = box.h / N, rects = [];
    for (let j = 0; j < N; j++) for (let i = 0; i < N; i++) {
      rects.push(svgEl("rect", { x: (box.l + i * cw).toFixed(2), y: (box.t + box.h - (j + 1) * ch).toFixed(2),
        width: (cw + 0.6).toFixed(2), height: (ch + 0.6).toFixed(2) }, cells));
    }
    const ring = svgEl("circle", { r: 6, class: "icl-x-crosshair" }, svg2);
    const dot = svgEl("circle", { r: 2, class: "icl-x-crosshair-dot" }, svg2);
    const inf = svgEl("text", { class: "icl-x-small icl-x-onmap" }, svg2);
    const bx = box.l + box.w + 16, bw = 12;
    const defs = svgEl("defs", {}, svg2);
    const grad = svgEl("linearGradient", { id: "icl-x-grad", x1: 0, x2: 0, y1: 1, y2: 0 }, defs);
    VIRIDIS.forEach((c, i) => svgEl("stop", { offset: i / (VIRIDIS.length - 1), "stop-color": c }, grad));
    svgEl("rect", { x: bx, y: box.t, width: bw, height: box.h, fill: "url(#icl-x-grad)", stroke: "currentColor" }, svg2);
    const hiText = svgEl("text", { x: bx + bw + 4, y: box.t + 4, class: "icl-x-small" }, svg2);
    const loText = svgEl("text", { x: bx + bw + 4, y: box.t + box.h, class: "icl-x-small" }, svg2);
    const warn = svgEl("text", { x: box.l + box.w / 2, y: box.t + box.h / 2, "text-anchor": "middle", class: "icl-x-warning" }, svg2);
    phase = { W, box, sx, sy, rects, ring, dot, inf, hiText, loText, warn };
  }

  function drawPhase() {
    const W = Math.max(280, Math.round(fig2.clientWidth || 640));
    if (!phase || phase.W !== W) buildPhase(W);
    const { alpha, kappa, rho, ridge, tau } = state;
    const gap = mapMode === "gap";
    const values = new Float64Array(N * N);
    let lo = Infinity, hi = -Infinity;
    for (let j = 0; j < N; j++) for (let i = 0; i < N; i++) {
      const a = GRID[j], k = GRID[i];
      const v = gap ? gapAt(a, tau, k, rho) : icl(a, tau, k, rho, ridge);
      values[j * N + i] = v;
      if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    }
    const span = hi > lo ? hi - lo : 1;
    const divergent = !(lo < Infinity);
    for (let n = 0; n < N * N; n++) {
      const v = values[n];
      phase.rects[n].setAttribute("fill", Number.isFinite(v) ? viridis((v - lo) / span) : "#888888");
    }
    // the slider's (kappa, alpha); kappa = infinity sits on the right edge
    const { box, sx, sy } = phase;
    const mx = kappa === Infinity ? box.l + box.w : sx(kappa), my = sy(alpha);
    for (const c of [phase.ring, phase.dot]) { c.setAttribute("cx", mx); c.setAttribute("cy", my); }
    phase.inf.setAttribute("x", mx - 10); phase.inf.setAttribute("y", my + 4);
    phase.inf.setAttribute("text-anchor", "end");
    phase.inf.textContent = kappa === Infinity ? "κ = ∞" : "";
    phase.hiText.textContent = divergent ? "" : fmt(hi);
    phase.loText.textContent = divergent ? "" : fmt(lo);
    phase.warn.textContent = divergent ? "ridgeless errors diverge at τ = 1" : "";
    const what = gap ? "the task-generalisation gap e_ICL − e_IDG (ridgeless)" : `e_ICL at λ = ${fmt(ridge)}`;
    cap2.textContent = `Phase diagram: ${what} over task diversity κ and context length α at τ = ${fmt(tau)}, ρ = ${fmt(rho)}` +
      (teacherName === "linear" ? "" : `, teacher ${teacherLabel()}`) +
      (divergent ? ": undefined at τ = 1 (move τ, or colour by e_ICL with λ > 0)." : `; colour from ${fmt(lo)} (dark) to ${fmt(hi)} (yellow).`) +
      " The ring marks the sliders' (κ, α), on the right edge when κ = ∞. As τ → ∞ and then α → ∞ the gap tends to " +
      `${T.closedForms.gapLimit.text.split(" (")[0]}: memorisation of the K pretraining tasks below κ = 1, task generalisation above;` +
      " at finite τ a label-noise term, growing with α/τ, adds to it below κ = 1.";
  }

  function teacherLabel() {
    const t = DATA.teachers.find((r) => r.name === teacherName);
    return t ? t.label : teacherName;
  }

  function drawTeacherNote() {
    if (teacherName === "linear") {
      teacherNote.textContent = "Linear teacher y = x·w + ε with Var ε = ρ. Choose a nonlinear teacher to see the nonlinearity–noise mapping.";
      return;
    }
    const e = T.equivalentLinearTask(teacherName, state.rho);
    const t = DATA.teachers.find((r) => r.name === teacherName);
    teacherNote.textContent = `${t.label} looks to linear attention like the linear teacher ${fmt(e.mu1)}·(x·w) + ξ with Var ξ = ρ_eff = ${fmt(e.rhoEff)}` +
      ` (${T.closedForms.rhoEff.text}, with μ₀ = ${fmt(Math.abs(t.mu0) < 1e-12 ? 0 : t.mu0)}, μ₁ = ${fmt(Math.abs(t.mu1) < 1e-12 ? 0 : t.mu1)}): its error is μ₁² e_lin(ρ_eff/μ₁², λ/μ₁²)` +
      (Math.abs(t.mu1) < 1e-12 ? `. Here μ₁ = 0: nothing is learned, and the ridgeless curve is the μ₁ → 0 limit ${T.closedForms.noLearning.text}` +
        ` (any α and κ), above the no-learning error E f² + ρ = ${fmt(t.second_moment + state.rho)} of predicting 0.` : ".");
  }

  // --- redraw ------------------------------------------------------------------------------------------
  const api = { lastRedrawMs: NaN, redraws: 0, state };
  function redraw() {
    const start = performance.now();
    readState();
    for (const s of SLIDERS) {
      const v = state[s.key];
      outputs[s.key].textContent = fmt(v);
      inputs[s.key].setAttribute("aria-valuetext", spoken(v));
    }
    drawTeacherNote();
    drawTau();
    drawPhase();
    api.lastRedrawMs = performance.now() - start;
    api.redraws += 1;
    root.dataset.redraws = String(api.redraws);
  }
  api.redraw = redraw;
  window.iclExplorer = api;
  let width = 0;
  new ResizeObserver(() => { if (fig1.clientWidth !== width) { width = fig1.clientWidth; redraw(); } }).observe(root);
  redraw();
})();
