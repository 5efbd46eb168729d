"""Closed-form theory: the asymptotics of pretrained linear attention (Lu et al., chapter 3), the
nonlinearity–noise mapping (chapter 4), and the exact risks the chapters compare simulations with.

Conventions (chapter 3): inputs ``x ~ N(0, I_d / d)``, tasks with ``‖w‖ = √d``, labels
``y = x·w + ε`` with ``ε ~ N(0, ρ)``; context length ``ℓ = αd``, ``K = κd`` pretraining tasks
(``κ = ∞``: a fresh task for every prompt), ``n = τd²`` pretraining prompts and ridge ``λ``. The reduced
model predicts ``ŷ = ⟨Γ, H_Z⟩`` with ``Γ ∈ R^{d×(d+1)}``.

- :func:`icl_error` -- the asymptotic in-context error ``e_ICL(α, τ, κ, ρ, λ)`` on fresh tasks
  (ridgeless "Result 1" at ``λ = 0``, the ridge self-consistent formula for ``λ > 0``).
- :func:`idg_error` -- the ridgeless in-distribution error ``e_IDG`` on the ``K`` pretraining tasks.
- :func:`error_of_gamma` -- the exact error of a given ``Γ`` at any finite ``d``.
- :func:`wishart_stieltjes` -- the function ``M_κ`` that all the formulas are built from.
- :func:`one_step_gd_risk`, :func:`best_one_step_eta`, :func:`optimal_preconditioner`,
  :func:`optimal_preconditioned_risk` -- the exact risk of one (preconditioned) GD step and its optimum
  (chapters 0 and 2; inputs ``x ~ N(0, Λ)``, tasks ``w ~ N(0, I)``: their own conventions, stated there).
- :func:`best_linear_risk_quadratic`, :func:`hermite_one_step_excess_risk` -- the linear bound on a quadratic
  task and the excess risk of one whitened GD step on Hermite features (chapter 5).

Divergent points return ``inf``: the ridgeless error at ``τ = 1`` exactly (the interpolation peak).

The package is split by job; every public name is imported here and documented as ``icl_book.theory.X``:

- ``asymptotics`` -- the closed forms of Lu et al. (chapter 3): ``M_κ``, ``e_ICL``, ``e_IDG``, the
  error of a given ``Γ``.
- ``nonlinear`` -- the nonlinearity–noise mapping and the nonlinear errors built on it (chapter 4).
- ``one_step`` -- the exact risks of one GD step (chapters 0 and 2) and chapter 5's bounds.
- ``_ranges`` (private) -- the ranges every formula accepts (the constants below) as declared
  constraints.
"""

from __future__ import annotations

from . import _ranges
from .asymptotics import (
    TaskMoments,
    error_of_gamma,
    icl_error,
    idg_error,
    task_moments,
    wishart_stieltjes,
)
from .nonlinear import (
    EquivalentTask,
    equivalent_linear_task,
    nonlinear_error_of_gamma,
    nonlinear_icl_error,
    nonlinear_idg_error,
)
from .nonlinear import _teacher as _teacher  # the package's one link resolver (simulate uses it)
from .one_step import (
    best_linear_risk_quadratic,
    best_one_step_eta,
    hermite_one_step_excess_risk,
    one_step_gd_risk,
    optimal_preconditioned_risk,
    optimal_preconditioner,
)

__all__ = [
    "MIN_RATIO",
    "MIN_RIDGE",
    "MAX_RIDGE",
    "MAX_NOISE_VAR",
    "MAX_GD_ENTRY",
    "MAX_COV_ENTRY",
    "wishart_stieltjes",
    "icl_error",
    "idg_error",
    "error_of_gamma",
    "TaskMoments",
    "task_moments",
    "EquivalentTask",
    "equivalent_linear_task",
    "nonlinear_icl_error",
    "nonlinear_idg_error",
    "nonlinear_error_of_gamma",
    "one_step_gd_risk",
    "best_one_step_eta",
    "optimal_preconditioner",
    "optimal_preconditioned_risk",
    "best_linear_risk_quadratic",
    "hermite_one_step_excess_risk",
]

#: Smallest α and κ accepted — below them ``x* = (1+ρ)/α`` or ``1/κ`` overflow the formulas' squares.
MIN_RATIO = _ranges.MIN_RATIO
#: Smallest positive ridge accepted — below it the self-consistent equation at τ = 1 loses every
#: significant digit (its denominator ``1 − τ − 2εS − ε²S'`` cancels to rounding error).
MIN_RIDGE = _ranges.MIN_RIDGE
#: Largest ridge accepted — above it ``e_ICL`` equals its λ → ∞ limit ``1 + ρ`` to double precision
#: (checked), and beyond about 1e150 the self-consistent formula's squares overflow.
MAX_RIDGE = _ranges.MAX_RIDGE
#: Largest label-noise variance accepted — at 1e300, ``x* = (1+ρ)/α`` overflows the formulas' squares
#: (``icl_error`` returned NaN); up to 1e100 every α, τ, κ, ridge of the boundary grid gives a number.
MAX_NOISE_VAR = _ranges.MAX_NOISE_VAR
#: Largest ``|entry|`` of ``Γ`` and ``Λ`` :func:`one_step_gd_risk` accepts. Its risk grows as
#: ``|Γ|² |Λ|³`` and ``|Γ|² |Λ|² σ²``: a ``(d, d)`` product multiplies the largest entry by at most
#: ``d``, so with every entry at most ``B = 1e40`` and ``σ² <= MAX_NOISE_VAR`` each term is at most
#: ``d⁴ B² (3 d B² + σ² B) B <= 1e280`` for every ``d <= 1e5`` (80 GB a matrix), inside float64; at
#: ``Λ = 1e154 I`` the risk is ``~1e462`` (it returned ``inf``, and ``nan`` at ``1e300``).
MAX_GD_ENTRY = _ranges.MAX_GD_ENTRY
#: Largest ``|entry|`` of ``Λ`` :func:`optimal_preconditioner` accepts. ``Γ*`` is computed in units of
#: a power of two near ``max(|Λ|, σ²)`` (exact), so it is the float64 value up to here, where its
#: entries are still ``>= 1 / (3 d · 1e300)``, normal numbers (beyond, ``tr Λ`` overflowed to NaN).
MAX_COV_ENTRY = _ranges.MAX_COV_ENTRY


def _public_here(obj) -> None:
    """Give ``obj`` (and every function it wraps) the public home ``icl_book.theory``, as NumPy's
    ``set_module`` does: the API page, pickles and error reports name ``icl_book.theory.X`` whichever
    module defines it."""
    while obj is not None:
        obj.__module__ = __name__
        obj = getattr(obj, "__wrapped__", None)


for _name in __all__:
    if not _name.isupper():  # the constants are numbers, documented above
        _public_here(globals()[_name])
del _name
