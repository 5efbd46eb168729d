"""Autograder checks for the book's coding exercises.

Each coding exercise ``<chapter>-ex<N>`` has a check ``check_<chapter>_ex<N>(answer)`` that

- prints ``"<chapter>-ex<N>: correct"`` and returns a truthy :class:`Passed` on a correct answer,
- raises :class:`CheckFailed` with a *hint* on a wrong one (never the solution itself).

The chapters call the check right after the exercise's solution cell; :mod:`icl_book.assignments` grades
a submission by which checks pass. A check must not be fooled by the stub a student notebook starts with
(it raises ``NotImplementedError``): calling a student's function inside a check is wrapped by
:func:`call_answer`, which turns any exception into a :class:`CheckFailed` with a hint.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CheckFailed", "Passed", "passed", "call_answer", "require_close"]
__all__ += ["check_hermite_ex1", "check_hermite_ex3"]  # hermite


class CheckFailed(AssertionError):
    """A check did not pass; the message is a hint for the student."""


class Passed:
    """The value a passing check returns: truthy, and invisible as a notebook cell's result.

    (A plain ``True`` would add an ``Out[…]: True`` under every check cell.)
    """

    def __init__(self, label: str):
        self.label = label

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"Passed({self.label!r})"

    def _ipython_display_(self) -> None:
        """Display nothing: the check already printed its one line."""


def passed(label: str) -> Passed:
    """Report a passed check: print one fixed line (which nbval compares) and return a truthy :class:`Passed`."""
    print(f"{label}: correct")
    return Passed(label)


def call_answer(label: str, func, *args, **kwargs):
    """Call a student's function; any exception becomes a :class:`CheckFailed` naming the exercise."""
    if not callable(func):
        raise CheckFailed(f"{label}: expected a function, got {type(func).__name__}")
    try:
        return func(*args, **kwargs)
    except NotImplementedError:
        raise CheckFailed(f"{label}: not implemented yet (replace the NotImplementedError stub)") from None
    except Exception as exc:  # the student's code crashed: report the kind of error, not the solution
        raise CheckFailed(f"{label}: your function raised {type(exc).__name__}: {exc}") from None


def require_close(label: str, got, expected, *, rtol: float, atol: float, hint: str) -> None:
    """Raise :class:`CheckFailed` with ``hint`` unless ``got`` matches ``expected`` (shape and values)."""
    try:
        got_arr = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        raise CheckFailed(f"{label}: expected numbers, got {type(got).__name__}") from None
    exp_arr = np.asarray(expected, dtype=np.float64)
    if got_arr.shape != exp_arr.shape:
        raise CheckFailed(f"{label}: expected shape {exp_arr.shape}, got {got_arr.shape}")
    if not np.all(np.isfinite(got_arr)):
        raise CheckFailed(f"{label}: your answer contains NaN or inf")
    if not np.allclose(got_arr, exp_arr, rtol=rtol, atol=atol):
        raise CheckFailed(f"{label}: not quite. Hint: {hint}")


# ---------------------------------------------------------------------------------------------------
# Chapter sections below. Each chapter appends its own section (one author per section), in book order.
# ---------------------------------------------------------------------------------------------------

# --- prologue: checks of chapters/00_prologue.md ---


def check_prologue_ex1(ridge_prediction) -> Passed:
    """``ridge_prediction(xs (N, d), ys (N,), x_query (d,), lam) -> float`` for one prompt."""
    label = "prologue-ex1"
    rng = np.random.default_rng(12345)
    for n, d, lam in [(7, 3, 0.5), (3, 6, 0.1), (20, 4, 2.0)]:
        xs, ys, xq = rng.standard_normal((n, d)), rng.standard_normal(n), rng.standard_normal(d)
        got = call_answer(label, ridge_prediction, xs, ys, xq, lam)
        if np.ndim(got) != 0:
            raise CheckFailed(f"{label}: return one number for one prompt, got shape {np.shape(got)}")
        expected = xq @ np.linalg.solve(xs.T @ xs + lam * np.eye(d), xs.T @ ys)
        require_close(
            label,
            got,
            expected,
            rtol=1e-8,
            atol=1e-10,
            hint="the ridge penalty adds λ to the diagonal of XᵀX; check also N < d, where XᵀX is singular.",
        )
    return passed(label)


def check_prologue_ex2(best_eta) -> Passed:
    """``best_eta(dim, context_len, noise_var) -> float``: the risk-minimising step for Λ = I."""
    from .estimators import best_one_step_eta

    label = "prologue-ex2"
    for d, n, s2 in [(5, 20, 0.25), (1, 1, 0.0), (10, 3, 2.0), (3, 100, 1.0)]:
        got = call_answer(label, best_eta, d, n, s2)
        require_close(
            label,
            got,
            best_one_step_eta(np.eye(d), n, s2),
            rtol=1e-10,
            atol=0.0,
            hint="minimise the parabola d + σ² − 2ηd + η²E‖g‖² in η; E‖g‖² has three terms.",
        )
    return passed(label)


# --- hermite: checks of chapters/01_hermite.md ---


def check_hermite_ex1(relu_coefficient) -> Passed:
    """``relu_coefficient(k) -> float``: ``μ_k = E[ReLU(Z) He_k(Z)]`` in closed form, ``k >= 0``."""
    from .hermite import LINKS

    label = "hermite-ex1"
    exact = LINKS["relu"].closed_form_coefficients(14)
    for k in range(15):
        got = call_answer(label, relu_coefficient, k)
        if np.ndim(got) != 0:
            raise CheckFailed(f"{label}: return one number for one k, got shape {np.shape(got)}")
        if k <= 1:
            hint = f"μ_{k} is off: compute E[ReLU(Z) He_{k}(Z)] directly as an integral over z > 0."
        else:
            hint = (
                f"μ_{k} is off (k = {k}): apply Stein's identity twice; ReLU'' is a point mass, "
                "and He_n(0) vanishes for odd n."
            )
        # The closed form is exact; 1e-9 relative leaves room for a numerically evaluated answer.
        require_close(label, got, exact[k], rtol=1e-9, atol=1e-12, hint=hint)
    return passed(label)


def check_hermite_ex3(erf_effective_noise) -> Passed:
    """``erf_effective_noise(a, rho) -> float``: ``ρ + E f² − μ_1²`` for ``f(z) = erf(a z)``."""
    from .hermite import effective_noise, erf_link

    label = "hermite-ex3"
    for a in (0.25, 0.7, 1.0, 3.0):
        for rho in (0.0, 0.2):
            got = call_answer(label, erf_effective_noise, a, rho)
            if np.ndim(got) != 0:
                raise CheckFailed(f"{label}: return one number, got shape {np.shape(got)}")
            # Quadrature reference ~1e-15 accurate; 1e-9 relative accepts any careful closed form.
            require_close(
                label,
                got,
                effective_noise(erf_link(a), rho),
                rtol=1e-9,
                atol=1e-12,
                hint=(
                    f"wrong at a = {a}, ρ = {rho}. ρ_eff = ρ + E f² − μ_1²: check μ_1 against "
                    "hermite_coefficients(erf_link(a), 1) and E f² against "
                    "second_moment(erf_link(a))."
                ),
            )
    return passed(label)
