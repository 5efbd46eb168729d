/* iclTheory.js: Lu et al.'s asymptotic errors of pretrained linear attention, in the browser.
 *
 * The closed forms of icl_book/theory/ (the book's reference implementation), written again, not
 * ported line by line: the ridgeless in-context error e_ICL ("Result 1", both tau branches, kappa finite
 * or Infinity), the ridgeless in-distribution error e_IDG, the ridge e_ICL (the positive root of the
 * self-consistency equation, bracketed, scanned on a 65-point log grid, then Brent's method as in
 * scipy.optimize.brentq, where the package bisects the grid cell; the ridge error as the textbook formula,
 * without the package's cancellation-free forms of 1 - nu M and its derivative), and the nonlinearity-noise
 * mapping e_f = mu1^2 e_lin(rho_eff / mu1^2, lambda / mu1^2) with the teacher table (mu1, E f^2) that
 * booktools/explorer_data.py computes with icl_book.hermite (iclTheoryData.js). tests/test_explorer.py
 * checks it against icl_book.theory to 1e-9 relative on the explorer's ranges.
 * No dependencies; divergent points (ridgeless tau = 1) return Infinity.
 */
(function (root) {
  "use strict";

  function check(name, value, positive) {
    if (typeof value !== "number") throw new TypeError(name + " must be a number, got " + typeof value);
    if (Number.isNaN(value)) throw new RangeError(name + " must not be NaN");
    if (positive && !(value > 0)) throw new RangeError(name + " must be > 0, got " + value);
    if (!positive && !(value >= 0)) throw new RangeError(name + " must be >= 0, got " + value);
    return value;
  }

  // M_kappa(x) written with 1/kappa (kappa = Infinity is invKappa = 0), in the stable form of _m_kappa:
  // 2 / (a + root) cancels when a < 0, then the conjugate (root - a) / (2b) is used.
  function mKappa(x, invKappa) {
    const a = x + 1.0 - invKappa;
    const b = x * invKappa;
    const r = Math.sqrt(a * a + 4.0 * b);
    return a >= 0 ? 2.0 / (a + r) : (r - a) / (2.0 * (b > 0 ? b : 1.0));
  }

  // M_kappa'(x) = -1/2 M^2 [1 + (x + 1 + 1/kappa) / sqrt((x + 1 - 1/kappa)^2 + 4x/kappa)].
  function mKappaPrime(x, invKappa) {
    const m = mKappa(x, invKappa);
    const a = x + 1.0 - invKappa;
    const r = Math.sqrt(a * a + 4.0 * x * invKappa);
    return -0.5 * m * m * (1.0 + (x + 1.0 + invKappa) / r);
  }

  function iclRidgeless(alpha, tau, invKappa, rho) {
    if (tau === 1) return Infinity;
    const x = (1.0 + rho) / alpha;
    const m = mKappa(x, invKappa);
    if (tau < 1) {
      const mu = x * mKappa(x, tau * invKappa);
      const om = 1 - mu;
      return tau * (1 + x) / (1 - tau) * (1 - tau * (om * om) - (x - rho) / x * mu) - 2 * tau * om + rho + 1;
    }
    // kappa (m/(kappa+m))^2 = m^2 (1/kappa) / (1 + m/kappa)^2, finite at kappa = Infinity.
    const d = 1.0 + m * invKappa;
    const kStar = 1.0 / (1.0 - m * m * invKappa / (d * d));
    const q = 1.0 / (tau - 1); // 0 at tau = Infinity; (3 - 2 tau)/(tau - 1) = q - 2
    const xm = x * m;
    return (kStar - q) * (1 + x) * (xm * xm) + (q - 2) * m * x * x + ((1 + rho) * m * q + 1) * x + rho * m * q + rho;
  }

  // Brent's method exactly as scipy.optimize.brentq (scipy/optimize/Zeros/brentq.c).
  function brentq(f, xa, xb, xtol, rtol, maxiter) {
    let xpre = xa, xcur = xb, xblk = 0, fblk = 0, spre = 0, scur = 0;
    let fpre = f(xpre), fcur = f(xcur);
    if (fpre === 0) return xpre;
    if (fcur === 0) return xcur;
    if ((fpre < 0) === (fcur < 0)) throw new Error("brentq: f(a) and f(b) must have different signs");
    for (let i = 0; i < maxiter; i++) {
      if (fpre !== 0 && fcur !== 0 && (fpre < 0) !== (fcur < 0)) {
        xblk = xpre; fblk = fpre; spre = scur = xcur - xpre;
      }
      if (Math.abs(fblk) < Math.abs(fcur)) {
        xpre = xcur; xcur = xblk; xblk = xpre;
        fpre = fcur; fcur = fblk; fblk = fpre;
      }
      const delta = (xtol + rtol * Math.abs(xcur)) / 2;
      const sbis = (xblk - xcur) / 2;
      if (fcur === 0 || Math.abs(sbis) < delta) return xcur;
      if (Math.abs(spre) > delta && Math.abs(fcur) < Math.abs(fpre)) {
        let stry;
        if (xpre === xblk) {
          stry = -fcur * (xcur - xpre) / (fcur - fpre); // interpolate
        } else {
          const dpre = (fpre - fcur) / (xpre - xcur); // extrapolate
          const dblk = (fblk - fcur) / (xblk - xcur);
          stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre));
        }
        if (2 * Math.abs(stry) < Math.min(Math.abs(spre), 3 * Math.abs(sbis) - delta)) {
          spre = scur; scur = stry; // good short step
        } else {
          spre = sbis; scur = sbis; // bisect
        }
      } else {
        spre = sbis; scur = sbis;
      }
      xpre = xcur; fpre = fcur;
      xcur += Math.abs(scur) > delta ? scur : (sbis > 0 ? delta : -delta);
      fcur = f(xcur);
    }
    throw new Error("brentq: no convergence in " + maxiter + " iterations");
  }

  const EPS = 2.220446049250313e-16;
  const GRID = 65; // log-grid points that scan the bracket (as icl_book.theory._ridge_epsilon)

  // The positive root eps of 1 - tau + tau lambda / eps - eps S(eps + x*) = 0.
  function ridgeEpsilon(alpha, tau, invKappa, rho, ridge) {
    const x = (1.0 + rho) / alpha;
    const f = (eps) => 1.0 - tau + tau * ridge / eps - eps * mKappa(eps + x, invKappa);
    // f -> +inf as eps -> 0+ and f -> -tau < 0 as eps -> inf.
    let lo = Math.min(ridge, 1.0);
    while (f(lo) <= 0) lo /= 4.0;
    let hi = Math.max(1.0, 4.0 * lo);
    while (f(hi) >= 0) hi *= 4.0;
    // The first sign change on a log grid (the root continuously connected to lambda -> 0+).
    const l0 = Math.log10(lo), l1 = Math.log10(hi), step = (l1 - l0) / (GRID - 1);
    let prev = lo;
    for (let k = 1; k < GRID; k++) {
      const g = k === GRID - 1 ? hi : Math.pow(10, k * step + l0);
      if (f(g) < 0) return brentq(f, prev, g, 1e-15, 4 * EPS, 200);
      prev = g;
    }
    throw new Error("ridgeEpsilon: no sign change in the bracket");
  }

  function iclRidge(alpha, tau, invKappa, rho, ridge) {
    const x = (1.0 + rho) / alpha;
    let eps, nu, s, sp, ce;
    if (tau === Infinity) {
      // Divide the equation by tau: eps -> lambda, and c_e -> 0 (its denominator contains -tau).
      eps = ridge; nu = x + ridge;
      s = mKappa(nu, invKappa); sp = mKappaPrime(nu, invKappa); ce = 0.0;
    } else {
      eps = ridgeEpsilon(alpha, tau, invKappa, rho, ridge);
      nu = x + eps;
      s = mKappa(nu, invKappa); sp = mKappaPrime(nu, invKappa);
      ce = (rho + nu - nu * nu * s - eps * (1 - 2 * nu * s - nu * nu * sp)) / (1 - 2 * eps * s - eps * eps * sp - tau);
    }
    return (x + 1) * (1 - 2 * nu * s - nu * nu * sp - ce * (s + eps * sp)) - 2 * (1 - nu * s) + 1 + rho;
  }

  function checkIcl(alpha, tau, kappa, rho, ridge) {
    check("alpha", alpha, true); check("tau", tau, true); check("kappa", kappa, true);
    check("rho", rho, false); check("ridge", ridge, false);
    if (!Number.isFinite(rho) || !Number.isFinite(ridge)) throw new RangeError("rho and ridge must be finite");
  }

  /** Asymptotic in-context error e_ICL(alpha, tau, kappa, rho, ridge) on fresh tasks (icl_book.theory.icl_error).
   * kappa = Infinity: a fresh task for every pretraining prompt. Ridgeless tau = 1 returns Infinity. */
  function iclError(alpha, tau, kappa, rho, ridge) {
    if (kappa === undefined) kappa = Infinity;
    if (rho === undefined) rho = 0;
    if (ridge === undefined) ridge = 0;
    checkIcl(alpha, tau, kappa, rho, ridge);
    const invKappa = 1.0 / kappa;
    return ridge === 0 ? iclRidgeless(alpha, tau, invKappa, rho) : iclRidge(alpha, tau, invKappa, rho, ridge);
  }

  /** Asymptotic ridgeless in-distribution error e_IDG(alpha, tau, kappa, rho) (icl_book.theory.idg_error). */
  function checkIdg(alpha, tau, kappa, rho) {
    check("alpha", alpha, true); check("tau", tau, true); check("kappa", kappa, true); check("rho", rho, false);
    if (!Number.isFinite(rho)) throw new RangeError("rho must be finite");
  }

  function idgError(alpha, tau, kappa, rho) {
    if (rho === undefined) rho = 0;
    checkIdg(alpha, tau, kappa, rho);
    if (tau === 1) return Infinity;
    const ik = 1.0 / kappa, t = tau, r = rho;
    const x = (1.0 + r) / alpha;
    if (t < 1) {
      const mu = x * mKappa(x, t * ik);
      const eps = (1 - t) * x / (t * mu);
      const den = ik + eps / (1 - t);
      const c = 1.0 / (1.0 - ik / (den * den));
      const xe = x + eps, omt = 1 - t;
      return t * (xe * xe / eps + (r + x - 2 * x * (1 - t) * (x / eps + 1)) / (1 - t - c * (omt * omt)));
    }
    const m = mKappa(x, ik);
    return (r + x * (1 - x * m)) / (1 - 1 / t);
  }

  // --- the nonlinearity-noise mapping (icl_book.theory.nonlinear_icl_error) ---
  const MU1_ZERO = 1e-12; // theory._MU1_ZERO
  const LIMIT_STEP = 1e-5; // theory._LIMIT_STEP

  function teacherTable() {
    const data = root.iclTheoryData;
    return (data && data.teachers) || [];
  }

  function teacher(name) {
    const table = teacherTable();
    const t = table.find((row) => row.name === name);
    if (!t) throw new RangeError("teacher must be one of " + teacherTable().map((r) => r.name).join(", ") + ", got " + name);
    return t;
  }

  /** {mu1, rhoEff} of the linear teacher equivalent to `name` with label noise rho (equivalent_linear_task). */
  function equivalentLinearTask(name, rho) {
    if (rho === undefined) rho = 0;
    check("rho", rho, false);
    const t = teacher(name);
    return { mu1: t.mu1, rhoEff: closedForms.rhoEff.value(t.second_moment, t.mu1_squared, rho) };
  }

  function mapped(linear, mu1, rhoEff, ridge) {
    let s = mu1 * mu1;
    const baseline = s + rhoEff;
    if (baseline === 0) return 0;
    if (s > MU1_ZERO * baseline) return s * linear(rhoEff / s, ridge / s);
    // mu1 = 0: g(s) = s e_lin(rho_eff/s, lambda/s) is smooth at s = 0; extrapolate from s and 2s.
    s = LIMIT_STEP * rhoEff;
    const g1 = s * linear(rhoEff / s, ridge / s);
    const g2 = 2 * s * linear(rhoEff / (2 * s), ridge / (2 * s));
    return Number.isFinite(g1) && Number.isFinite(g2) ? 2 * g1 - g2 : Infinity;
  }

  /** e_ICL of linear attention pretrained on the teacher `name` (a row of `teachers`). */
  function nonlinearIclError(name, alpha, tau, kappa, rho, ridge) {
    if (kappa === undefined) kappa = Infinity;
    if (rho === undefined) rho = 0;
    if (ridge === undefined) ridge = 0;
    checkIcl(alpha, tau, kappa, rho, ridge); // the linear theory's messages
    const e = equivalentLinearTask(name, rho);
    return mapped((r, lam) => iclError(alpha, tau, kappa, r, lam), e.mu1, e.rhoEff, ridge);
  }

  /** Ridgeless e_IDG for the teacher `name`. */
  function nonlinearIdgError(name, alpha, tau, kappa, rho) {
    if (rho === undefined) rho = 0;
    checkIdg(alpha, tau, kappa, rho);
    const e = equivalentLinearTask(name, rho);
    return mapped((r) => idgError(alpha, tau, kappa, r), e.mu1, e.rhoEff, 0);
  }

  // The relative accuracy of the mu1 -> 0 limit, measured by booktools/explorer_data.py over the explorer's
  // (kappa, alpha) grid and tau slider (limit_accuracy): a gap within twice it of 0 is 0, not round-off.
  function limitAccuracy() {
    const data = root.iclTheoryData;
    const v = data && data.mu1_zero_rel_error;
    if (typeof v !== "number" || !(v >= 0)) throw new Error("iclTheoryData.mu1_zero_rel_error is missing");
    return v;
  }
  // kappa = Infinity: e_ICL and e_IDG are one formula; the two evaluations differ in the last bits only.
  const ROUND_OFF = 1e-12;

  function usesLimit(name, rho) {
    if (name === "linear") return false;
    const e = equivalentLinearTask(name, rho);
    const s = e.mu1 * e.mu1;
    return s + e.rhoEff > 0 && !(s > MU1_ZERO * (s + e.rhoEff));
  }

  /** Ridgeless e_ICL - e_IDG for the teacher `name` ("linear" or a row of `teachers`); a difference within
   * the evaluation's accuracy (twice limitAccuracy() on the mu1 = 0 limit, else ROUND_OFF) is exactly 0. */
  function gap(name, alpha, tau, kappa, rho) {
    const linear = name === "linear";
    const a = linear ? iclError(alpha, tau, kappa, rho, 0) : nonlinearIclError(name, alpha, tau, kappa, rho, 0);
    const b = linear ? idgError(alpha, tau, kappa, rho) : nonlinearIdgError(name, alpha, tau, kappa, rho);
    const tol = usesLimit(name, rho) ? 2 * limitAccuracy() : ROUND_OFF;
    return Math.abs(a - b) <= tol * Math.abs(a) ? 0 : a - b;
  }

  // --- closed forms the explorer displays (tests/test_explorer.py evaluates each against icl_book.theory) ---
  // A teacher with mu1 = 0 (|z|, z^2): linear attention learns nothing; its ridgeless e_ICL and e_IDG (any
  // alpha, kappa) are the mu1 -> 0 limit of the mapping, the no-learning error E f^2 + rho times the cost of
  // pretraining on pure noise. The two branches differ: 1/(1 - tau) below the threshold, tau/(tau - 1) above.
  const closedForms = {
    noLearning: {
      text: "(E f² + ρ)/(1 − τ) for τ < 1 and (E f² + ρ) τ/(τ − 1) for τ > 1",
      value(secondMoment, rho, tau) {
        check("second moment", secondMoment, false); check("rho", rho, false); check("tau", tau, true);
        if (tau === 1) return Infinity;
        const base = secondMoment + rho;
        return tau < 1 ? base / (1 - tau) : (tau === Infinity ? base : base * tau / (tau - 1));
      },
    },
    // The equivalent linear teacher's noise (the mapping of chapter 4).
    rhoEff: {
      text: "ρ_eff = ρ + E f² − μ₁²",
      value(secondMoment, mu1Squared, rho) { return Math.max(rho + secondMoment - mu1Squared, rho); },
    },
    // The task-generalisation gap e_ICL - e_IDG as tau -> infinity, then alpha -> infinity (ridgeless).
    gapLimit: {
      text: "1 − κ for κ < 1 and 0 for κ ≥ 1 (as τ → ∞, then α → ∞)",
      value(kappa) { check("kappa", kappa, true); return Math.max(0, 1 - kappa); },
    },
  };

  root.iclTheory = {
    iclError, idgError, nonlinearIclError, nonlinearIdgError, equivalentLinearTask, closedForms, gap, limitAccuracy,
    wishartStieltjes: (x, kappa) => mKappa(check("x", x, true), 1.0 / check("kappa", kappa === undefined ? Infinity : kappa, true)),
    ridgeEpsilon: (alpha, tau, kappa, rho, ridge) => ridgeEpsilon(alpha, tau, 1.0 / kappa, rho, ridge),
    get teachers() { return teacherTable(); },
  };
})(typeof window !== "undefined" ? window : globalThis);
