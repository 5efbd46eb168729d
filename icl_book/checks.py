"""Autograder checks for the book's coding exercises.

Each coding exercise ``<chapter>-ex<N>`` has a check ``check_<chapter>_ex<N>(answer)`` that

- prints ``"<chapter>-ex<N>: correct"`` and returns a truthy :class:`Passed` on a correct answer,
- raises :class:`CheckFailed` with a *hint* on a wrong one (never the solution itself), and
  :class:`NotAnswered` (a :class:`CheckFailed`) while the answer is still the stub.

In a notebook a :class:`CheckFailed` shows only its message (IPython's ``_render_traceback_``), not a
traceback through this module. A student edition calls :func:`continue_when_unanswered` so that "Run all"
on an untouched notebook reaches the end: an unanswered check then prints ``<label>: not implemented yet``
and returns a falsy :class:`Unanswered` instead of raising (never under nbgrader's autograder, nor in
``booktools.assignments grade``, which call the checks in their own process).

The chapters call the check right after the exercise's solution cell; ``booktools.grading`` grades
a submission by which checks pass. A check whose cases are independent runs each as a part of a
:class:`Parts`: in a notebook nothing changes (the first failure raises its hint), and under the grader
the release can give such an exercise partial credit (the share of parts passed). A check must not be fooled by the stub a student notebook starts with
(it raises ``NotImplementedError``): calling a student's function inside a check is wrapped by
:func:`call_answer`, which turns any exception into a :class:`CheckFailed` with a hint.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import os
import re
import zlib
from math import ceil, comb

import numpy as np

from . import _validate
from ._declare import Flag, Free, Interval, Text, declare
from .estimators import (
    block_coordinate_gd_predict,
    one_step_gd_predict,
    one_step_kernel_gd_predict,
    polynomial_kernel,
)
from .features import partition_features
from .hermite import LINKS, effective_noise, erf_link
from .simulate import simulated_errors
from .tasks import sample_linear_prompts
from .theory import (
    best_one_step_eta,
    equivalent_linear_task,
    hermite_one_step_excess_risk,
    icl_error,
    idg_error,
    optimal_preconditioned_risk,
    optimal_preconditioner,
)

__all__ = ["CheckFailed", "Passed", "passed", "call_answer", "require_close"]
__all__ += ["NotAnswered", "Unanswered", "continue_when_unanswered"]
__all__ += ["check_prologue_ex1", "check_prologue_ex2"]  # prologue
__all__ += ["check_hermite_ex1", "check_hermite_ex3"]  # hermite
__all__ += ["check_lsa_ex1", "check_lsa_ex2", "check_lsa_ex4"]  # lsa
__all__ += ["check_nonlinear_ex1", "check_nonlinear_ex3"]  # nonlinear
__all__ += ["check_glu_ex1", "check_glu_ex2", "check_glu_ex4"]  # glu
__all__ += ["check_depth_ex2", "check_depth_ex3"]  # depth
__all__ += [
    "check_asymptotics_ex1",
    "check_asymptotics_ex3",
    "check_asymptotics_ex4",
]  # asymptotics


# Inputs drawn at grading time. In a notebook a check uses its published inputs; under the grader
# (``booktools.grading.grader``, in its own process) a check whose fixed inputs a table of answers could pass
# draws them from the submission's seed, which the grader records in the report.
_GRADING_SEED: contextvars.ContextVar[tuple[int, list] | None] = contextvars.ContextVar(
    "icl_book_grading_seed", default=None
)


@contextlib.contextmanager
def _grading_inputs(seed: int):
    """Inside this block, checks draw their inputs from ``seed``; yields the labels that did."""
    drew: list[str] = []
    token = _GRADING_SEED.set((int(seed), drew))
    try:
        yield drew
    finally:
        _GRADING_SEED.reset(token)


# The parts of a check, recorded under the grader when the release gives partial credit. Only the
# grader's process sets this (around the check it runs, which reaches the student's code by RPC), so
# a submission cannot add, remove or forge an outcome.
_PARTS_RECORD: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "icl_book_check_parts", default=None
)


@contextlib.contextmanager
def _recording_parts():
    """Inside this block, a check built on :class:`Parts` runs every case, records each outcome and
    raises its first failure at the end; yields the list of the :class:`Parts` created inside."""
    record: list[Parts] = []
    token = _PARTS_RECORD.set(record)
    try:
        yield record
    finally:
        _PARTS_RECORD.reset(token)


def _inputs_rng(label: str, published_seed: int) -> np.random.Generator | None:
    """The generator a check draws its inputs from under the grader, or ``None`` in a notebook (the
    check then uses its published inputs, seeded by ``published_seed`` where it draws any)."""
    state = _GRADING_SEED.get()
    if state is None:
        return None
    seed, drew = state
    drew.append(label)
    return np.random.default_rng([seed, zlib.crc32(label.encode()), published_seed])


class CheckFailed(AssertionError):
    """A check did not pass; the message is a hint for the student.

    IPython shows an exception with ``_render_traceback_`` as the lines that method returns: the hint
    is the cell's one output line instead of the last line of a 20-line traceback through checks.py.
    """

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


class NotAnswered(CheckFailed):
    """The answer is still the stub: a function raising ``NotImplementedError``, or ``None``."""


class Unanswered:
    """What an unanswered check returns after :func:`continue_when_unanswered`: falsy, and invisible as
    a cell's result (the check printed its one line)."""

    def __init__(self, label: str):
        self.label = label

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"Unanswered({self.label!r})"

    def _ipython_display_(self) -> None:
        """Display nothing."""


_CONTINUE_WHEN_UNANSWERED = False


@declare(
    enabled=Flag(),
)
def continue_when_unanswered(enabled: bool = True) -> None:
    """Let unanswered checks print ``<label>: not implemented yet`` and return :class:`Unanswered`
    instead of raising :class:`NotAnswered`, so that "Run all" on a student notebook reaches its end
    (a raising cell stops it). Wrong answers still raise :class:`CheckFailed` with their hint.

    Student editions call it in their second code cell. It is a no-op under nbgrader's autograder and
    validator (``NBGRADER_EXECUTION`` is set), which score a check cell by whether it raises. Returns
    nothing, so that the cell calling it shows no output. ``enabled`` is a flag: ``True`` or ``False``
    (NumPy booleans too, as every flag of the package).
    """
    global _CONTINUE_WHEN_UNANSWERED
    enabled = _validate.flag("enabled", enabled)
    _CONTINUE_WHEN_UNANSWERED = enabled and not os.environ.get("NBGRADER_EXECUTION")


def _reports_unanswered(check):
    """Wrap a ``check_*``: with :func:`continue_when_unanswered` on, :class:`NotAnswered` is printed and
    an :class:`Unanswered` returned; otherwise the check is unchanged."""

    @functools.wraps(check)
    def run(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except NotAnswered as exc:
            if not _CONTINUE_WHEN_UNANSWERED:
                raise
            print(exc)
            return Unanswered(str(exc).split(":", 1)[0])

    return run


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


def _text(name: str, value) -> str:
    """A non-empty string argument of a check helper (a label or a hint), refused by name otherwise."""
    if not isinstance(value, str) or not value:
        raise _validate.ArgumentTypeError(
            f"{name} must be a non-empty string, got {_validate._describe(value)}"
        )
    return value


@declare(
    label=Text(),
)
def passed(label: str) -> Passed:
    """Report a passed check: print one fixed line (which nbval compares) and return a truthy :class:`Passed`."""
    label = _text("label", label)
    print(f"{label}: correct")
    return Passed(label)


@declare(
    label=Text(),
    func=Free("the student's answer: anything wrong with it is the student's CheckFailed"),
)
def call_answer(label: str, func, *args, **kwargs):
    """Call a student's function; any exception becomes a :class:`CheckFailed` naming the exercise."""
    label = _text("label", label)
    if func is None:  # an answer variable still at its stub value
        raise NotAnswered(f"{label}: not implemented yet (your function is still None)")
    if not callable(func):
        raise CheckFailed(f"{label}: expected a function, got {type(func).__name__}")
    try:
        return func(*args, **kwargs)
    except NotImplementedError:
        raise NotAnswered(
            f"{label}: not implemented yet (replace the NotImplementedError stub)"
        ) from None
    except (
        Exception
    ) as exc:  # the student's code crashed: report the kind of error, not the solution
        raise CheckFailed(f"{label}: your function raised {type(exc).__name__}: {exc}") from None


@declare(
    label=Text(),
    got=Free("the student's answer: anything wrong with it is the student's CheckFailed"),
    expected=Free("the reference, computed by the check itself"),
    rtol=Interval(0.0, math.inf),
    atol=Interval(0.0, math.inf),
    hint=Text(),
)
def require_close(label: str, got, expected, *, rtol: float, atol: float, hint: str) -> None:
    """Raise :class:`CheckFailed` with ``hint`` unless ``got`` matches ``expected`` (shape and values).

    ``got`` is the student's answer (anything wrong with it is a :class:`CheckFailed`); the other
    arguments are the check's own and are validated by name (a finite real ``expected``, tolerances
    that are finite and >= 0, a non-empty label and hint).
    """
    label = _text("label", label)
    hint = _text("hint", hint)
    expected = _validate.as_array("expected", expected)
    rtol = _validate.nonnegative_float("rtol", rtol)
    atol = _validate.nonnegative_float("atol", atol)
    try:
        got_arr = _validate.as_array("answer", got, allow_inf=True)
    except ValueError as exc:
        if "NaN" in str(exc):
            raise CheckFailed(f"{label}: your answer contains NaN or inf") from None
        raise CheckFailed(f"{label}: expected numbers, got {type(got).__name__}") from None
    except TypeError:
        raise CheckFailed(f"{label}: expected numbers, got {type(got).__name__}") from None
    exp_arr = expected
    if got_arr.shape != exp_arr.shape:
        raise CheckFailed(f"{label}: expected shape {exp_arr.shape}, got {got_arr.shape}")
    if not np.all(np.isfinite(got_arr)):
        raise CheckFailed(f"{label}: your answer contains NaN or inf")
    if not np.allclose(got_arr, exp_arr, rtol=rtol, atol=atol):
        raise CheckFailed(f"{label}: not quite. Hint: {hint}")


class Parts:
    """The cases of a check, each a *part* that passes or fails on its own (for partial credit).

    A check with several independent cases runs each inside ``with parts.case(name):`` and ends
    with ``return parts.passed()``::

        parts = Parts(label)
        for a in widths:
            with parts.case(f"a = {a}"):
                require_close(label, call_answer(label, f, a), reference(a), ...)
        return parts.passed()

    In a notebook a case's :class:`CheckFailed` propagates at once, exactly as in a check without
    parts (the student sees the first failure's hint). Under the grader, when the release gives the
    exercise partial credit (``booktools.grading.grader`` records the parts), every case runs, ``outcomes``
    holds ``(name, passed)`` for each, and :meth:`passed` raises the first failure once all have run;
    the grader then scores ``points × passed / len(outcomes)``. An answer still at its stub
    (:class:`NotAnswered`) and any other exception always propagate at once.

    ``label``: the exercise's label (a non-empty string). A tool of this module's checks, not of the
    chapters (so not in ``__all__``); mark a check built on it with ``@_graded_in_parts``.
    """

    def __init__(self, label: str):
        self.label = _text("label", label)
        self.outcomes: list[tuple[str, bool]] = []
        self.failure: CheckFailed | None = None
        record = _PARTS_RECORD.get()
        self._recording = record is not None
        if record is not None:
            record.append(self)

    @property
    def n_passed(self) -> int:
        """How many cases passed so far."""
        return sum(ok for _, ok in self.outcomes)

    @contextlib.contextmanager
    def case(self, name: str):
        """One case (``name``, a non-empty string, e.g. ``"a = 0.25, ρ = 0"``): passed if its block
        raises nothing, failed if it raises :class:`CheckFailed`."""
        name = _text("name", name)
        try:
            yield
        except NotAnswered:
            raise
        except CheckFailed as exc:
            self.outcomes.append((name, False))
            if not self._recording:
                raise
            if self.failure is None:
                self.failure = exc
        else:
            self.outcomes.append((name, True))

    def passed(self) -> Passed:
        """:func:`passed` if every case passed, else raise the first failure (its hint)."""
        if not self.outcomes:
            raise RuntimeError(f"{self.label}: a check with parts ran no case")
        if self.failure is not None:
            raise self.failure.with_traceback(None)
        return passed(self.label)


def _graded_in_parts(check):
    """Mark a check built on :class:`Parts`: ``booktools.assignments`` gives its exercise partial
    credit in the release (``metadata.icl_book.partial_credit`` of the check cell)."""
    check.graded_in_parts = True
    return check


# ---------------------------------------------------------------------------------------------------
# Chapter sections below. Each chapter appends its own section (one author per section), in book order.
# ---------------------------------------------------------------------------------------------------

# --- prologue: checks of chapters/00_prologue.md ---


@_graded_in_parts
def check_prologue_ex1(ridge_prediction) -> Passed:
    """``ridge_prediction(xs (N, d), ys (N,), x_query (d,), lam) -> float`` for one prompt."""
    label = "prologue-ex1"
    cases = [(7, 3, 0.5), (3, 6, 0.1), (20, 4, 2.0)]
    rng = _inputs_rng(label, 12345)
    if rng is None:
        rng = np.random.default_rng(12345)
    else:  # graded: other penalties on fresh data (still one prompt with N < d)
        cases = [(n, d, round(float(rng.uniform(0.05, 3.0)), 3)) for n, d, _ in cases]
    parts = Parts(label)
    for n, d, lam in cases:
        with parts.case(f"N = {n}, d = {d}, λ = {lam}"):
            xs, ys, xq = rng.standard_normal((n, d)), rng.standard_normal(n), rng.standard_normal(d)
            got = call_answer(label, ridge_prediction, xs, ys, xq, lam)
            if np.ndim(got) != 0:
                raise CheckFailed(
                    f"{label}: return one number for one prompt, got shape {np.shape(got)}"
                )
            expected = xq @ np.linalg.solve(xs.T @ xs + lam * np.eye(d), xs.T @ ys)
            require_close(
                label,
                got,
                expected,
                rtol=1e-8,
                atol=1e-10,
                hint="the ridge penalty adds λ to the diagonal of XᵀX; check also N < d, where XᵀX is singular.",
            )
    return parts.passed()


@_graded_in_parts
def check_prologue_ex2(best_eta) -> Passed:
    """``best_eta(dim, context_len, noise_var) -> float``: the risk-minimising step for Λ = I."""

    label = "prologue-ex2"
    cases = [(5, 20, 0.25), (1, 1, 0.0), (10, 3, 2.0), (3, 100, 1.0)]
    rng = _inputs_rng(label, 0)
    if rng is not None:  # graded: fresh sizes and noise levels (and still d = N = 1 without noise)
        cases = [(1, 1, 0.0)] + [
            (
                int(rng.integers(1, 13)),
                int(rng.integers(1, 121)),
                round(float(rng.uniform(0, 2)), 3),
            )
            for _ in range(3)
        ]
    parts = Parts(label)
    for d, n, s2 in cases:
        with parts.case(f"d = {d}, N = {n}, σ² = {s2}"):
            got = call_answer(label, best_eta, d, n, s2)
            require_close(
                label,
                got,
                best_one_step_eta(np.eye(d), n, s2),
                rtol=1e-10,
                atol=0.0,
                hint="minimise the parabola d + σ² − 2ηd + η²E‖g‖² in η; E‖g‖² has three terms.",
            )
    return parts.passed()


# --- hermite: checks of chapters/01_hermite.md ---


@_graded_in_parts
def check_hermite_ex1(relu_coefficient) -> Passed:
    """``relu_coefficient(k) -> float``: ``μ_k = E[ReLU(Z) He_k(Z)]`` in closed form, ``k >= 0``."""

    label = "hermite-ex1"
    exact = LINKS["relu"].closed_form_coefficients(14)
    parts = Parts(label)
    # Three parts: μ_0 and μ_1 (direct integrals) and μ_2..μ_14 together (Stein's identity). Not one
    # part per k: μ_k = 0 for odd k >= 3, which an answer returning 0 would pass.
    for name, ks in (("k = 0", [0]), ("k = 1", [1]), ("k = 2, ..., 14", range(2, 15))):
        with parts.case(name):
            for k in ks:
                got = call_answer(label, relu_coefficient, k)
                if np.ndim(got) != 0:
                    raise CheckFailed(
                        f"{label}: return one number for one k, got shape {np.shape(got)}"
                    )
                if k <= 1:
                    hint = f"μ_{k} is off: compute E[ReLU(Z) He_{k}(Z)] directly as an integral over z > 0."
                else:
                    hint = (
                        f"μ_{k} is off (k = {k}): apply Stein's identity twice; ReLU'' is a point mass, "
                        "and He_n(0) vanishes for odd n."
                    )
                # The closed form is exact; 1e-9 relative leaves room for a numerically evaluated answer, and
                # the absolute floor scales with √k!, the size of μ_k (quadrature leaves ~1e-11 in μ_13 = 0).
                atol = 1e-12 * np.sqrt(float(np.prod(np.arange(1, k + 1))))
                require_close(label, got, exact[k], rtol=1e-9, atol=atol, hint=hint)
    return parts.passed()


@_graded_in_parts
def check_hermite_ex3(erf_effective_noise) -> Passed:
    """``erf_effective_noise(a, rho) -> float``: ``ρ + E f² − μ_1²`` for ``f(z) = erf(a z)``."""

    label = "hermite-ex3"
    widths, noises = (0.25, 0.7, 1.0, 3.0), (0.0, 0.2)
    rng = _inputs_rng(label, 0)
    if rng is not None:  # graded: fresh widths and noise levels, so no table of answers passes
        widths = tuple(float(a) for a in rng.uniform(0.2, 3.5, size=4).round(3))
        noises = (0.0, round(float(rng.uniform(0.05, 0.5)), 3))
    parts = Parts(label)
    for a in widths:
        for rho in noises:
            with parts.case(f"a = {a}, ρ = {rho}"):
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
    return parts.passed()


# --- nonlinear: checks of chapters/04_nonlinearity_noise.md ---


@_graded_in_parts
def check_nonlinear_ex1(equivalent_from_coefficients) -> Passed:
    """``equivalent_from_coefficients(mu (K+1,), rho) -> (mu1, rho_eff)`` for ``f = Σ_k (μ_k/k!) He_k``."""

    label = "nonlinear-ex1"
    rng = _inputs_rng(label, 4242)  # graded: the two random expansions drawn afresh
    if rng is None:
        rng = np.random.default_rng(4242)
    cases = [
        (np.array([0.0, 1.0]), 0.0),
        (np.array([0.3, 0.8, 0.0, 0.0]), 0.1),
        (np.array([0.0, 0.6, 0.5, -0.4, 1.2]), 0.05),
        (np.array([0.0, 0.0, 2.0]), 0.2),  # He_2
    ] + [(rng.normal(size=k + 1), float(rng.uniform(0, 1))) for k in (3, 6)]
    parts = Parts(label)
    for mu, rho in cases:
        with parts.case(f"K = {mu.size - 1}, ρ = {rho:.3g}"):
            got = call_answer(label, equivalent_from_coefficients, mu.copy(), rho)
            if not isinstance(got, tuple | list) or len(got) != 2:
                raise CheckFailed(
                    f"{label}: return a pair (mu1, rho_eff), got {type(got).__name__}"
                )
            weights = np.array([1.0 / math.factorial(k) for k in range(mu.size)])
            expected_rho_eff = rho + float(np.sum(weights * mu**2)) - mu[1] ** 2
            require_close(
                label,
                got[0],
                mu[1],
                rtol=1e-10,
                atol=1e-12,
                hint="μ_1 is the coefficient of He_1 in f = Σ (μ_k/k!) He_k.",
            )
            require_close(
                label,
                got[1],
                expected_rho_eff,
                rtol=1e-10,
                atol=1e-12,
                hint=(
                    "ρ_eff = ρ + E f² − μ_1²; get E f² from the coefficients by Parseval, remembering that "
                    "E He_k(Z)² = k! (and that a model without bias cannot predict the constant part)."
                ),
            )
    return parts.passed()


@_graded_in_parts
def check_nonlinear_ex3(design_teacher) -> Passed:
    """``design_teacher(mu1, rho_eff, rho) -> f`` with ``equivalent_linear_task(f, rho) == (mu1, rho_eff)``."""

    label = "nonlinear-ex3"
    targets = [
        (0.5, 0.4, 0.1),
        (-1.0, 0.1, 0.1),
        (0.0, 1.5, 0.0),
        (0.8, 0.3, 0.05),
        (2.0, 1.0, 0.0),
    ]
    parts = Parts(label)
    for mu1, rho_eff, rho in targets:
        with parts.case(f"(μ_1, ρ_eff, ρ) = ({mu1}, {rho_eff}, {rho})"):
            f = call_answer(label, design_teacher, mu1, rho_eff, rho)
            if not callable(f):
                raise CheckFailed(
                    f"{label}: design_teacher must return a function f(z), got {type(f).__name__}"
                )
            try:
                got = equivalent_linear_task(f, rho)
            except NotImplementedError:
                raise NotAnswered(
                    f"{label}: not implemented yet (replace the NotImplementedError stub)"
                ) from None
            except Exception as exc:  # the student's f crashed or has no finite second moment
                raise CheckFailed(
                    f"{label}: equivalent_linear_task(f) raised {type(exc).__name__}: {exc}. "
                    "f must be vectorised (take and return NumPy arrays) with E f(Z)² < ∞."
                ) from None
            require_close(
                label,
                got[0],
                mu1,
                rtol=1e-7,
                atol=1e-9,
                hint=f"for the target μ_1 = {mu1}: the coefficient of He_1(z) = z in f sets μ_1 = E[f(Z) Z].",
            )
            require_close(
                label,
                got[1],
                rho_eff,
                rtol=1e-7,
                atol=1e-9,
                hint=(
                    f"for the target (μ_1, ρ_eff, ρ) = ({mu1}, {rho_eff}, {rho}): the part of f orthogonal to z must "
                    "carry the energy ρ_eff − ρ; a Hermite polynomial of degree ≥ 2 does it (E He_k(Z)² = k!)."
                ),
            )
    return parts.passed()


# --- lsa: checks of chapters/02_lsa_gradient_descent.md ---


@_graded_in_parts
def check_lsa_ex1(best_eta) -> Passed:
    """``best_eta(input_cov (d, d), context_len, noise_var) -> float``: the risk-minimising scalar step."""

    label = "lsa-ex1"
    rng = np.random.default_rng(2024)
    a = rng.standard_normal((4, 4))
    cases = [
        (np.eye(3), 10, 0.5),
        (np.diag([4.0, 2.0, 1.0, 0.5, 0.25]), 20, 0.1),
        (a @ a.T / 4 + 0.2 * np.eye(4), 7, 0.0),
        (np.diag([9.0, 0.01]), 1, 1.0),
    ]
    drawn = _inputs_rng(label, 2024)
    if drawn is not None:  # graded: fresh covariances, context lengths and noise levels
        cases = []
        for d in (int(drawn.integers(1, 6)), int(drawn.integers(2, 7)), 4):
            b = drawn.standard_normal((d, d))
            cov = b @ b.T / d + float(drawn.uniform(0.05, 0.5)) * np.eye(d)
            cases.append((cov, int(drawn.integers(1, 40)), round(float(drawn.uniform(0, 2)), 3)))
        cases.append((np.diag(drawn.uniform(0.01, 9.0, size=3)), 1, 0.0))
    parts = Parts(label)
    for cov, n, s2 in cases:
        with parts.case(f"d = {cov.shape[0]}, N = {n}, σ² = {s2}"):
            got = call_answer(label, best_eta, cov.copy(), n, s2)
            if np.ndim(got) != 0:
                raise CheckFailed(f"{label}: return one number, got shape {np.shape(got)}")
            # Closed form against closed form: 1e-10 relative is rounding headroom only.
            require_close(
                label,
                got,
                best_one_step_eta(cov, n, s2),
                rtol=1e-10,
                atol=0.0,
                hint=(
                    f"wrong for N = {n}, σ² = {s2} and a {cov.shape[0]}×{cov.shape[0]} Λ. The risk is a parabola "
                    "in η; its η² coefficient needs E[g gᵀ] for g = (1/N) Σ y_i x_i, which has a (1 + 1/N) Λ² "
                    "part and a part from E[(wᵀx)² x xᵀ] and the noise. Does your answer use Λ, not I?"
                ),
            )
    return parts.passed()


@_graded_in_parts
def check_lsa_ex2(lsa_weights_from_w0) -> Passed:
    """``lsa_weights_from_w0(w0 (d,), eta) -> (w_kq, w_pv)`` for one GD step started at ``w0``.

    The prediction is read as ``−[LSA(Z)]_{d+1, N+1}`` from the token matrix whose query label slot holds
    ``−w0ᵀx_q``; it must equal ``x_qᵀ w_1`` with ``w_1 = w0 − η ∇L(w0)``.
    """

    label = "lsa-ex2"
    cases = [(3, 8, 0.7), (1, 5, 1.3), (4, 12, -0.4)]
    rng = _inputs_rng(label, 77)
    if rng is None:
        rng = np.random.default_rng(77)
    else:  # graded: fresh w0, prompts and steps (one negative)
        cases = [
            (d, n, round(float(rng.uniform(0.1, 2.0)) * sign, 3))
            for (d, n, _), sign in zip(cases, (1, 1, -1), strict=True)
        ]
    # Imported here, not at the top: the attention layers import torch (~2 s), and chapters 0, 1
    # and 4 import this module and nothing else that needs it. The grader imports every module first.
    from .attention import layers

    parts = Parts(label)
    for d, n, eta in cases:
        with parts.case(f"d = {d}, N = {n}, η = {eta}"):
            w0 = rng.standard_normal(d)
            p = sample_linear_prompts(6, n, d, rng=rng, noise_var=0.2)
            got = call_answer(label, lsa_weights_from_w0, w0.copy(), eta)
            if not isinstance(got, tuple) or len(got) != 2:
                raise CheckFailed(f"{label}: return a tuple (w_kq, w_pv)")
            w_kq, w_pv = (np.asarray(w, dtype=np.float64) for w in got)
            for name, w in (("w_kq", w_kq), ("w_pv", w_pv)):
                if w.shape != (d + 1, d + 1):
                    raise CheckFailed(
                        f"{label}: {name} must have shape {(d + 1, d + 1)}, got {w.shape}"
                    )
            z = layers.embed(p.xs, p.ys, p.x_query)
            z[:, -1, -1] = -p.x_query @ w0  # the query's label slot
            got_pred = layers.readout(layers.lsa(z, w_kq, w_pv))
            residuals = p.ys - p.xs @ w0
            w1 = w0 + eta / n * np.einsum("bn,bnd->bd", residuals, p.xs)
            # Exact algebra on O(1) numbers: 1e-10 is rounding headroom only.
            require_close(
                label,
                got_pred,
                np.einsum("bd,bd->b", p.x_query, w1),
                rtol=1e-10,
                atol=1e-10,
                hint=(
                    "the value row must turn each context token z_i = (x_i, y_i) into a multiple of its residual "
                    "y_i − w0ᵀx_i; the key-query block is the same as for w0 = 0. Mind von Oswald's minus sign."
                ),
            )
    return parts.passed()


def check_lsa_ex4(
    gamma_predicted, predict_learned, input_cov, context_len: int, noise_var: float
) -> Passed:
    """Ex. 4: the predicted ``Γ*`` (formula) and the predictions of a *trained* LSA layer.

    ``predict_learned(xs (B, N, d), ys (B, N), x_query (B, d)) -> (B,)`` is the trained layer's
    prediction (e.g. ``lsa_predict`` with the trained weights). The check samples its own fresh
    prompts of the task and compares, prompt by prompt, the squared error of ``predict_learned`` with
    that of the exact optimal step ``Γ*``: a trained layer is within 1 % of ``R*`` (``0.9 Γ*`` is
    2.4 % above it), cannot be below it by more than sampling noise (no LSA beats ``R*``), and
    cannot coincide with ``Γ*`` to rounding (that would be the formula, not training).
    """

    label = "lsa-ex4"
    unanswered = [
        n
        for n, v in [("gamma_predicted", gamma_predicted), ("predict_learned", predict_learned)]
        if v is None
    ]
    if unanswered:  # the student edition sets both to None above the solution
        raise NotAnswered(f"{label}: not implemented yet ({' and '.join(unanswered)} still None)")
    cov = _validate.as_array("input_cov", input_cov, 2)
    if cov.shape[0] == 0:
        raise ValueError(f"input_cov must be a non-empty (d, d) matrix, got shape {cov.shape}")
    cov = _validate.covariance("input_cov", cov, cov.shape[0])
    context_len = _validate.positive_int("context_len", context_len)
    noise_var = _validate.nonnegative_float("noise_var", noise_var)
    expected = optimal_preconditioner(cov, context_len, noise_var)
    require_close(
        label,
        gamma_predicted,
        expected,
        rtol=1e-10,
        atol=1e-12,
        hint="gamma_predicted is not Γ* = [(1 + 1/N) Λ + ((tr Λ + σ²)/N) I]^{-1} for this Λ, N and σ².",
    )
    d = cov.shape[0]
    test_rng = _inputs_rng(label, 4242)  # graded: test prompts no stored predictions can match
    test = sample_linear_prompts(
        100_000,
        context_len,
        d,
        rng=np.random.default_rng(4242) if test_rng is None else test_rng,
        noise_var=noise_var,
        input_cov=cov,
    )
    got = call_answer(label, predict_learned, test.xs.copy(), test.ys.copy(), test.x_query.copy())
    try:
        got = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        raise CheckFailed(f"{label}: predict_learned must return numbers") from None
    if got.shape != (len(test.y_query),):
        raise CheckFailed(
            f"{label}: predict_learned must return one prediction per prompt, shape "
            f"{(len(test.y_query),)}, got {got.shape}"
        )
    if not np.all(np.isfinite(got)):
        raise CheckFailed(f"{label}: predict_learned returned NaN or inf")
    optimal = one_step_gd_predict(test.xs, test.ys, test.x_query, 1.0, expected)
    if np.max(np.abs(got - optimal)) <= 1e-9 * (1 + np.max(np.abs(optimal))):
        raise CheckFailed(
            f"{label}: these are the predictions of Γ* itself. Pass the predictions of the layer "
            "you trained (lsa_predict with its weights), not of the formula."
        )
    r_star = optimal_preconditioned_risk(cov, context_len, noise_var)
    excess = (got - test.y_query) ** 2 - (optimal - test.y_query) ** 2  # paired, per prompt
    mean, se = excess.mean() / r_star, excess.std(ddof=1) / np.sqrt(excess.size) / r_star
    if mean < -4 * se - 1e-9:
        raise CheckFailed(
            f"{label}: the risk of predict_learned is below R*, which no LSA layer reaches: "
            "is it the layer you trained, or another learner (ridge, least squares)?"
        )
    # A trained layer sits within ~0.1 % of R*; 1 % rejects 0.9 Γ* (2.4 % above) by > 7 SE.
    if mean > 0.01:
        raise CheckFailed(
            f"{label}: the trained layer's risk is {100 * mean:.1f} % above R* on fresh prompts. "
            "Train longer or from several random starts (keep the lowest final loss)."
        )
    return passed(label)


# --- glu: checks of chapters/05_glu_kernel_regression.md ---


@_graded_in_parts
def check_glu_ex1(min_width) -> Passed:
    """``min_width(d, p) -> int``: the smallest token width of one block holding every monomial of degree ≤ p."""

    label = "glu-ex1"
    cases = [(1, 1), (1, 2), (2, 2), (4, 2), (3, 3), (8, 2), (5, 4), (10, 3)]
    drawn = _inputs_rng(label, 0)
    if drawn is not None:  # graded: fresh (d, p), still d = p = 1 first
        cases = [(1, 1)] + [
            (int(drawn.integers(1, 13)), int(drawn.integers(1, 6))) for _ in range(7)
        ]
    parts = Parts(label)
    for d, p in cases:
        with parts.case(f"d = {d}, p = {p}"):
            got = call_answer(label, min_width, d, p)
            if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
                raise CheckFailed(f"{label}: return an integer width, got {type(got).__name__}")
            if int(got) != comb(d + p, p) + 1:
                raise CheckFailed(
                    f"{label}: not quite for d = {d}, p = {p}. Hint: count the x slots, the constant, the y slot and "
                    "one scratch slot per monomial of degree 2..p (how many monomials of degree <= p are there?)."
                )
    return parts.passed()


@_graded_in_parts
def check_glu_ex2(inhomogeneous_block_weights) -> Passed:
    """``inhomogeneous_block_weights(dim, eta) -> GLULSABlockWeights`` predicting ``(η/N) Σ y_i (1 + x_i·x_q)²``."""

    label = "glu-ex2"
    from .attention.glu import GLULSABlockWeights, glu_lsa_block_predict  # torch: see check_lsa_ex2

    cases = [(1, 5, 0.7), (3, 12, -1.3), (5, 30, 0.25)]
    rng = _inputs_rng(label, 2024)
    if rng is None:
        rng = np.random.default_rng(2024)
    else:  # graded: fresh dimensions, steps and prompts
        cases = [
            (
                int(rng.integers(1, 7)),
                n,
                round(float(rng.choice([-1, 1]) * rng.uniform(0.2, 1.5)), 3),
            )
            for _, n, _ in cases
        ]
    parts = Parts(label)
    for d, n, eta in cases:
        # drawn before the answer is called: a failed case leaves the next cases' inputs unchanged
        xs, ys, xq = (
            rng.standard_normal((4, n, d)),
            rng.standard_normal((4, n)),
            rng.standard_normal((4, d)),
        )
        with parts.case(f"d = {d}, N = {n}, η = {eta}"):
            weights = call_answer(label, inhomogeneous_block_weights, d, eta)
            if not isinstance(weights, GLULSABlockWeights):
                raise CheckFailed(
                    f"{label}: return a GLULSABlockWeights (start from glu_lsa_block_weights), "
                    f"got {type(weights).__name__}"
                )
            try:
                got = glu_lsa_block_predict(xs, ys, xq, weights)
            except (ValueError, TypeError) as exc:
                raise CheckFailed(
                    f"{label}: the block cannot run with these weights: {exc}"
                ) from None
            expected = one_step_kernel_gd_predict(xs, ys, xq, polynomial_kernel(2, offset=1.0), eta)
            require_close(
                label,
                got,
                expected,
                rtol=1e-9,
                atol=1e-10,
                hint="expand (1 + x·x')² = 1 + 2 x·x' + (x·x')²: which slots of φ must W_KQ weight, and by how much?",
            )
    return parts.passed()


@_graded_in_parts
def check_glu_ex4(excess_constant) -> Passed:
    """``excess_constant(d, noise_var) -> float``: ``C`` in excess risk ``= C/N`` (whitened one-step GD)."""

    label = "glu-ex4"
    cases = [(1, 0.0), (2, 0.5), (4, 0.1), (7, 2.0)]
    drawn = _inputs_rng(label, 0)
    if drawn is not None:  # graded: fresh dimensions and noise levels (still one noiseless case)
        cases = [(int(drawn.integers(1, 11)), 0.0)] + [
            (int(drawn.integers(1, 11)), round(float(drawn.uniform(0.01, 3.0)), 3))
            for _ in range(3)
        ]
    parts = Parts(label)
    for d, s2 in cases:
        with parts.case(f"d = {d}, σ² = {s2}"):
            got = call_answer(label, excess_constant, d, s2)
            require_close(
                label,
                got,
                hermite_one_step_excess_risk(1, d, s2),
                rtol=1e-9,
                atol=1e-12,
                hint="C = E[y² ‖φ(x)‖²] − ‖θ‖²: split off the noise (σ² p), then use ‖φ‖² = 1 + d/2 + ‖x‖⁴/2 and "
                "the χ² moments of ‖x‖².",
            )
    return parts.passed()


# --- asymptotics: checks of chapters/03_asymptotic_theory.md ---


@_graded_in_parts
def check_asymptotics_ex1(limit_error) -> Passed:
    """``limit_error(alpha, rho) -> float``: the τ, κ → ∞ limit of the ridgeless ``e_ICL``."""

    label = "asymptotics-ex1"
    alphas, rhos = (0.25, 1.0, 3.0, 20.0), (0.0, 0.01, 0.5, 2.0)
    drawn = _inputs_rng(label, 0)
    if drawn is not None:  # graded: fresh α (log-uniform on [0.2, 30]) and ρ (still one ρ = 0)
        alphas = tuple(
            round(float(x), 4) for x in np.exp(drawn.uniform(np.log(0.2), np.log(30), 4))
        )
        rhos = (0.0,) + tuple(round(float(x), 4) for x in drawn.uniform(0.005, 2.5, 3))
    parts = Parts(label)
    for alpha in alphas:
        for rho in rhos:
            with parts.case(f"α = {alpha}, ρ = {rho}"):
                got = call_answer(label, limit_error, alpha, rho)
                if np.ndim(got) != 0:
                    raise CheckFailed(f"{label}: return one number, got shape {np.shape(got)}")
                # icl_error at τ = ∞ is the exact limit of the τ > 1 branch (1/(τ − 1) = 0): 1e-10 relative.
                require_close(
                    label,
                    got,
                    icl_error(alpha, np.inf, np.inf, rho),
                    rtol=1e-10,
                    atol=1e-12,
                    hint=f"wrong at α = {alpha}, ρ = {rho}. With κ = ∞, M_κ(x) = 1/(1 + x); let 1/(τ − 1) → 0 in "
                    "the τ > 1 branch and simplify.",
                )
    return parts.passed()


# All or nothing, no parts: the gap vanishes for every κ > 1, so an answer returning 0 would
# pass half of the cases (a part must not be passable by a constant).
def check_asymptotics_ex3(asymptotic_gap) -> Passed:
    """``asymptotic_gap(kappa) -> float``: the α, τ → ∞ limit of ``g = e_ICL − e_IDG`` (ρ = 0)."""

    label = "asymptotics-ex3"
    kappas = (0.1, 0.3, 0.5, 0.8, 1.5, 2.0, 5.0, 50.0)
    drawn = _inputs_rng(label, 0)
    if drawn is not None:  # graded: four κ in [0.1, 0.8] and four in [1.5, 50] (log-uniform)
        low = drawn.uniform(0.1, 0.8, 4)
        high = np.exp(drawn.uniform(np.log(1.5), np.log(50.0), 4))
        kappas = tuple(round(float(k), 4) for k in np.concatenate([low, high]))
    for kappa in kappas:
        got = call_answer(label, asymptotic_gap, kappa)
        if np.ndim(got) != 0:
            raise CheckFailed(f"{label}: return one number for one κ, got shape {np.shape(got)}")
        # The formulas at α = 1e7, τ = 1e10 are within 1e-3 of the limit away from κ = 1 (checked for the
        # κ used here); a wrong limit (e.g. 1 − κ without the max, or 1/κ) is off by ≥ 0.1.
        reference = icl_error(1e7, 1e10, kappa) - idg_error(1e7, 1e10, kappa)
        require_close(
            label,
            got,
            reference,
            rtol=0.0,
            atol=5e-3,
            hint=f"wrong at κ = {kappa}. Treat κ < 1 and κ > 1 separately: how does x* M_κ(x*) behave as "
            "x* → 0 in each case?",
        )
    return passed(label)


@functools.lru_cache(maxsize=64)
def _asymptotics_ex4_reference(tau: float, rho: float, seed: int) -> float:
    """The book's simulated ``e_ICL`` at d = 40, α = 1, κ = ∞, ridgeless, with ``default_rng(seed)``.

    Cached by its inputs (every argument of the simulation is fixed here or among them): the check
    calls it for the same ten (τ, seed) pairs on every call, which cost ~1.5 s each time. The simulation
    is deterministic given its inputs (one BLAS thread inside), so a cached value is the value a fresh
    run gives; it is a float, which nothing can change in place.
    """
    return float(
        simulated_errors(40, 1.0, tau, np.inf, rho, rng=np.random.default_rng(seed), tol=1e-6).icl
    )


# Calibrated at d = 40, α = 1, κ = ∞, ρ = 0.5, ridgeless, τ = 8: the seed-to-seed spread of the book's
# simulated e_ICL (exact in the test prompts; 40 seeds: mean 1.2703, spread 0.0064) and of an honest
# Monte Carlo answer (Γ pretrained on the seed's generator, its error estimated by simulate.mc_error on
# 10⁴ fresh prompts; 30 independent streams × 8 seeds: spread 0.0183, of which ~0.0174 is the Monte
# Carlo noise of 10⁴ prompts).
_EX4_SPREAD_8 = 0.0064
_EX4_MC_SPREAD_8 = 0.0183


def check_asymptotics_ex4(simulate_icl) -> Passed:
    """``simulate_icl(tau, rho, seed) -> float``: simulated ``e_ICL`` at d = 40, α = 1, κ = ∞, ridgeless.

    The answer's mean over seeds is compared with the book's simulator run on the same seeds
    (:func:`icl_book.simulate.simulated_errors`), at two amounts of pretraining data:

    - τ = 0.7, just below the threshold, where ridgeless and ridge pretraining are far apart (at ρ = 0.5
      the simulated ridgeless error is ~5 % above the asymptotic formula at d = 40, a λ = 0.1 simulation
      ~22 % below it, the seed-to-seed spread a heavy-tailed ~5 %); eight seeds (with four, the
      two sample spreads of the pooled tolerance are too rough: 1 honest Monte Carlo stream in 30
      was rejected);
    - τ = 8, where the spread of the exact error is small (~0.5 %) and the finite-d bias is ~1 %; twelve
      seeds, so that an answer imitating a simulation with the formula times a constant plus noise is
      off by many standard errors.

    Every honest method the exercise allows passes: the exact error of the pretrained Γ, or a Monte
    Carlo estimate on fresh prompts (``simulate.mc_error`` with 10⁴ test prompts or more). The tolerance
    on the mean is 4 standard errors of a difference of two independent means, each with its own
    observed spread (the answer's includes its Monte Carlo noise); at τ = 8 the answer's spread must
    lie between a quarter of the exact errors' spread (a formula with a jitter is too smooth) and 2.5
    times the spread of Monte Carlo answers at 10⁴ prompts (fewer test prompts are too noisy to tell
    right from wrong). The same seed must give the same number, different seeds different numbers. In
    a notebook the seeds are 0, 1, ...; under the grader they are drawn per submission.
    """

    label = "asymptotics-ex4"
    rho = 0.5
    plan = [(0.7, 8), (8.0, 12)]
    rng = _inputs_rng(label, 0)
    if rng is None:
        seeds = {tau: tuple(range(n)) for tau, n in plan}
    else:  # graded: seeds no table of answers can hold
        drawn = [int(x) for x in rng.choice(2**31, size=sum(n for _, n in plan), replace=False)]
        seeds = {tau: tuple(drawn[:n]) if tau < 1 else tuple(drawn[-n:]) for tau, n in plan}

    def answer(tau, seed):
        got = call_answer(label, simulate_icl, tau, rho, seed)
        if got is None:
            raise CheckFailed(f"{label}: your function returned None (a missing return?)")
        try:
            got = _validate.as_array("simulate_icl's output", got, allow_inf=True)
        except (TypeError, ValueError):
            raise CheckFailed(f"{label}: return one finite number, got {got!r}") from None
        if np.ndim(got) != 0 or not np.isfinite(got):
            raise CheckFailed(f"{label}: return one finite number, got {got!r}")
        return float(got)

    first = seeds[8.0][0]
    if answer(8.0, first) != answer(8.0, first):
        raise CheckFailed(
            f"{label}: the same seed gave two different values: draw every random number from "
            "np.random.default_rng(seed)"
        )
    for tau, _ in plan:
        got = np.array([answer(tau, s) for s in seeds[tau]])
        ref = np.array([_asymptotics_ex4_reference(tau, rho, s) for s in seeds[tau]])
        if np.unique(got).size < got.size:
            raise CheckFailed(
                f"{label}: different seeds gave the same value: simulate with "
                "np.random.default_rng(seed), do not evaluate the formula"
            )
        spread, ref_spread = got.std(ddof=1), ref.std(ddof=1)
        if tau > 1:  # twelve seeds and a light-tailed spread: the spread itself is tested
            if spread < _EX4_SPREAD_8 / 4:
                raise CheckFailed(
                    f"{label}: at τ = {tau} your values vary from seed to seed by {spread:.2g}, "
                    "unlike a simulation: pretrain Γ on prompts drawn with the seed's generator "
                    "and return its error"
                )
            if spread > 2.5 * math.hypot(_EX4_SPREAD_8, _EX4_MC_SPREAD_8):
                raise CheckFailed(
                    f"{label}: at τ = {tau} your values vary from seed to seed by {spread:.2g}, too "
                    "much to tell: estimate the error on at least 10⁴ test prompts (or exactly)"
                )
        tol = 4 * np.sqrt((spread**2 + ref_spread**2) / len(got))
        if abs(got.mean() - ref.mean()) > tol:
            raise CheckFailed(
                f"{label}: not quite. Hint: at τ = {tau} your mean over seeds is {got.mean():.3f}; "
                "check d = 40, α = 1 (ℓ = 40), κ = ∞, the noise variance ρ, ridge 0 (minimum-norm "
                "least squares), and that the error is e_ICL on fresh tasks."
            )
    return passed(label)


# --- depth: checks of chapters/06_depth_block_coordinate_descent.md ---


@_graded_in_parts
def check_depth_ex2(bcd_predict) -> Passed:
    """``bcd_predict(xs, ys, x_query, feature_blocks, eta, n_cycles) -> (B,)``: cyclic block-coordinate GD."""

    label = "depth-ex2"
    rng = _inputs_rng(label, 606)  # graded: the prompts and steps drawn afresh
    if rng is None:
        rng = np.random.default_rng(606)
    cases = [(1, 3, 1, 6, 0.3, 1), (2, 2, 2, 15, 0.5, 3), (3, 3, 4, 25, 0.2, 2)]
    if _GRADING_SEED.get() is not None:
        cases = [
            (d, p, size, int(rng.integers(4, 30)), round(float(rng.uniform(0.1, 0.6)), 3), c)
            for d, p, size, _, _, c in cases
        ]
    parts = Parts(label)
    for d, p, size, n, eta, cycles in cases:
        with parts.case(f"d = {d}, p = {p}, N = {n}, η = {eta}, {cycles} cycles"):
            blocks = partition_features(d, p, size, kind="legendre")
            xs = rng.uniform(-1, 1, (5, n, d))
            ys = rng.standard_normal((5, n))
            xq = rng.uniform(-1, 1, (5, d))
            got = call_answer(label, bcd_predict, xs, ys, xq, blocks, eta, cycles)
            expected = block_coordinate_gd_predict(xs, ys, xq, blocks, eta, cycles)
            require_close(
                label,
                got,
                expected,
                rtol=1e-9,
                atol=1e-12,
                hint="start from r = y and ŷ = 0; visit the blocks in order, n_cycles times; each step uses the "
                "current residuals, the factor η/N, and updates both the residuals and the query's prediction.",
            )
    return parts.passed()


# All or nothing, no parts: one layer per cycle is the answer of many (d, p, width), so a
# constant 1 would pass two or three of the seven cases.
def check_depth_ex3(min_layers) -> Passed:
    """``min_layers(dim, degree, width) -> int``: ``⌈(C(d+p, p) − 1) / (width − d − 2)⌉`` layers per cycle."""

    label = "depth-ex3"
    cases = [(1, 1, 4), (2, 3, 6), (3, 3, 9), (3, 2, 14), (5, 3, 10), (10, 2, 20), (4, 4, 7)]
    drawn = _inputs_rng(label, 0)
    if (
        drawn is not None
    ):  # graded: fresh (d, p, width), every width leaving at least one scratch slot
        cases = [(1, 1, 4)]
        for _ in range(6):
            d, p = int(drawn.integers(1, 11)), int(drawn.integers(1, 5))
            cases.append((d, p, d + 2 + int(drawn.integers(1, 20))))
    for d, p, width in cases:
        got = call_answer(label, min_layers, d, p, width)
        if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
            raise CheckFailed(f"{label}: return an integer, got {type(got).__name__}")
        if int(got) != ceil((comb(d + p, p) - 1) / (width - d - 2)):
            raise CheckFailed(
                f"{label}: not quite for d = {d}, p = {p}, width = {width}. Hint: how many scratch slots does a "
                "token of this width have, and how many features of degree 1..p must be written in one cycle?"
            )
    return passed(label)


# Keep this at the end of the module: every check above reports an unanswered exercise without
# raising once continue_when_unanswered() is on (the student editions' "Run all").
for _name, _check in list(globals().items()):
    if re.fullmatch(r"check_\w+_ex\d+", _name) and getattr(_check, "__module__", "") == __name__:
        globals()[_name] = _reports_unanswered(_check)
del _name, _check
