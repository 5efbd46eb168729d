"""The exact risks of one (preconditioned) gradient-descent step (chapters 0 and 2) and chapter 5's
linear bound and whitened step on a quadratic task."""

from __future__ import annotations

import math

import numpy as np

from .._declare import Array, Integer, Interval, declare
from .._validate import (
    _raw_array,
    as_array,
    covariance,
    nonnegative_float,
    positive_int,
    square_matrix,
)
from ._ranges import (
    _CONTEXT,
    _COV,
    _GD_COV,
    _GD_GAMMA,
    _NOISE_SCALAR,
    _PRECONDITIONER_COV,
)

__all__ = [
    "one_step_gd_risk",
    "best_one_step_eta",
    "optimal_preconditioner",
    "optimal_preconditioned_risk",
    "best_linear_risk_quadratic",
    "hermite_one_step_excess_risk",
]


# --- one-step GD: the exact risks of one preconditioned GD step (chapters 0 and 2) ---


def _gd_inputs(input_cov, context_len, noise_var):
    """``Λ`` (a checked covariance), ``N`` and ``σ²`` of the one-step GD formulas."""
    cov = as_array("input_cov", input_cov, 2)
    if cov.shape[0] != cov.shape[1] or cov.shape[0] < 1:
        raise ValueError(f"input_cov must be a square (d, d) matrix, got shape {cov.shape}")
    cov = covariance("input_cov", cov, cov.shape[0])
    return cov, int(context_len), float(noise_var)


def _unit(*scales: float) -> float:
    """A power of two near the largest of ``scales`` (1 when all are 0): dividing by it is exact."""
    return 2.0 ** np.frexp(max(scales))[1]


def _second_moment(cov, n: int, s2: float) -> np.ndarray:
    """``S = E[g gᵀ]`` for ``g = (1/N) Σ y_i x_i`` with ``w ~ N(0, I)``, ``x ~ N(0, Λ)``:
    ``(1 + 1/N) Λ² + ((tr Λ + σ²)/N) Λ``."""
    return (1 + 1 / n) * cov @ cov + ((np.trace(cov) + s2) / n) * cov


@declare(preconditioner=_GD_GAMMA, input_cov=_GD_COV, context_len=_CONTEXT, noise_var=_NOISE_SCALAR)
def one_step_gd_risk(preconditioner, input_cov, context_len: int, noise_var: float = 0.0) -> float:
    """Exact risk ``E(y_q − ŷ)²`` of one preconditioned GD step (step folded into ``Γ``).

    For ``x ~ N(0, Λ)``, ``w ~ N(0, I)``, noise ``σ²``:
    ``R(Γ) = tr Λ + σ² − 2 tr(Λ Γ Λ) + tr(Γ S Γᵀ Λ)`` with ``S = (1+1/N) Λ² + ((tr Λ+σ²)/N) Λ``.
    Every entry of ``Γ`` and ``Λ`` is at most :data:`MAX_GD_ENTRY` in size, where the risk is a
    float64 number.
    """
    cov, n, s2 = _gd_inputs(input_cov, context_len, noise_var)
    gamma = square_matrix("preconditioner", preconditioner, cov.shape[0])
    return float(
        np.trace(cov)
        + s2
        - 2 * np.trace(cov @ gamma @ cov)
        + np.trace(gamma @ _second_moment(cov, n, s2) @ gamma.T @ cov)
    )


@declare(input_cov=_COV, context_len=_CONTEXT, noise_var=_NOISE_SCALAR)
def best_one_step_eta(input_cov, context_len: int, noise_var: float = 0.0) -> float:
    """The step ``η*`` minimising the risk of one plain GD step: ``tr(Λ²) / tr(S Λ)``.

    ``input_cov`` must be a non-zero ``(d, d)`` covariance (``Λ = 0`` has no best step: refused).
    """
    cov, n, s2 = _gd_inputs(input_cov, context_len, noise_var)
    if not np.any(cov):
        # Λ = 0: every step has the same risk σ², and tr(Λ²)/tr(SΛ) is 0/0.
        raise ValueError("input_cov must be non-zero (with Λ = 0 every step η has the same risk)")
    # In units of c = a power of two near max|Λ| (exact): Λ = c L, S Λ = c³ (...), η* = (1/c) ×
    # tr(L²)/tr(S_L L) with σ²/c in place of σ², so Λ ~ 1e-300 or 1e200 neither under- nor overflows.
    c = _unit(float(np.max(np.abs(cov))))
    unit = cov / c
    return float(np.trace(unit @ unit) / np.trace(_second_moment(unit, n, s2 / c) @ unit) / c)


@declare(input_cov=_PRECONDITIONER_COV, context_len=_CONTEXT, noise_var=_NOISE_SCALAR)
def optimal_preconditioner(input_cov, context_len: int, noise_var: float = 0.0) -> np.ndarray:
    """``Γ* = [(1 + 1/N) Λ + ((tr Λ + σ²)/N) I]^{-1}``, the risk-minimising preconditioner; ``(d, d)``.

    It minimises :func:`one_step_gd_risk` over all ``Γ`` (chapter 2). Every entry of ``Λ`` is at
    most :data:`MAX_COV_ENTRY` in size; ``tr Λ + σ²`` must not be so small that ``Γ*`` (of size
    up to ``N / (tr Λ + σ²)``) is beyond float64.
    """
    cov, n, s2 = _gd_inputs(input_cov, context_len, noise_var)
    return _optimal_preconditioner(cov, n, s2)


def _optimal_preconditioner(cov, n: int, s2: float) -> np.ndarray:
    # In units of c = a power of two near max(|Λ|, σ²) (exact, so the same bits wherever nothing
    # under- or overflows): Γ* = (1/c) [(1 + 1/N) L + ((tr L + σ²/c)/N) I]^{-1} with Λ = c L, so
    # neither tr Λ nor the matrix overflows for Λ up to MAX_COV_ENTRY.
    c = _unit(float(np.max(np.abs(cov))), s2)
    unit = cov / c
    matrix = (1 + 1 / n) * unit + ((np.trace(unit) + s2 / c) / n) * np.eye(cov.shape[0])
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # checked just below
        try:
            gamma = np.linalg.inv(matrix) / c
        except np.linalg.LinAlgError:  # Λ = 0 and σ² = 0: singular
            gamma = np.full(cov.shape, np.inf)
    if not np.all(np.isfinite(gamma)):
        raise ValueError(
            "input_cov and noise_var must not both be so small that Γ* = [(1 + 1/N) Λ + "
            "((tr Λ + σ²)/N) I]^-1 is beyond float64 (its entries reach N / (tr Λ + σ²)), got "
            f"tr Λ = {np.trace(cov):g} and noise_var = {s2:g} with N = {n}"
        )
    return gamma


@declare(input_cov=_PRECONDITIONER_COV, context_len=_CONTEXT, noise_var=_NOISE_SCALAR)
def optimal_preconditioned_risk(input_cov, context_len: int, noise_var: float = 0.0) -> float:
    """``R* = tr Λ + σ² − tr(Λ Γ* Λ)``, the risk of the best one-step preconditioned GD predictor."""
    cov, n, s2 = _gd_inputs(input_cov, context_len, noise_var)
    gamma = _optimal_preconditioner(cov, n, s2)
    return float(np.trace(cov) + s2 - np.trace(cov @ gamma @ cov))


# --- glu: the best linear predictor of a quadratic task, the whitened step's excess risk (chapter 5) ---


@declare(A=Array(ndim=None), noise_var=_NOISE_SCALAR)
def best_linear_risk_quadratic(A, noise_var: float = 0.0):
    """Risk of the best linear predictor ``uᵀx`` of ``y = xᵀAx + ε``, ``x ~ N(0, I_d)``: ``σ² + 2‖A‖_F² + (tr A)²``.

    Every LSA's prediction is linear in ``x_q`` given the context, so this is a lower bound on its risk
    (chapter 5). The best ``u`` is ``0``: ``E[y x] = 0`` (odd moments of a Gaussian vanish).

    Parameters
    ----------
    A
        Symmetric ``(d, d)`` matrix, or a batch ``(B, d, d)``.
    noise_var
        ``σ² >= 0``.

    Returns
    -------
    float or numpy.ndarray
        A float for one matrix, a ``(B,)`` array for a batch.
    """
    a = as_array("A", A)
    if a.ndim not in (2, 3) or a.shape[-1] != a.shape[-2] or a.shape[-1] < 1:
        raise ValueError(
            f"A must be a square (d, d) matrix or a (B, d, d) batch, got shape {a.shape}"
        )
    if not np.all(np.isfinite(a)):
        raise ValueError("A must be finite")
    if not np.allclose(a, np.swapaxes(a, -1, -2), rtol=1e-10, atol=1e-12):
        raise ValueError("A must be symmetric (use (A + Aᵀ)/2: xᵀAx only sees the symmetric part)")
    noise_var = nonnegative_float("noise_var", noise_var)
    risk = noise_var + 2 * np.sum(a**2, axis=(-1, -2)) + np.trace(a, axis1=-2, axis2=-1) ** 2
    return float(risk) if a.ndim == 2 else risk


@declare(
    context_len=Array(within=Interval(1.0, math.inf)), dim=Integer(1, None), noise_var=_NOISE_SCALAR
)
def hermite_one_step_excess_risk(context_len, dim: int, noise_var: float = 0.0):
    """Exact excess risk of one GD step (``η = 1``) on the Hermite features, averaged over random quadratics.

    Features ``φ = [1; x; h(x)]`` (``p = (d+1)(d+2)/2``, identity covariance under ``x ~ N(0, I_d)``), tasks
    ``A`` from :func:`icl_book.tasks.sample_quadratic_tasks` (``E_A[(xᵀAx)²] = 1``), noise ``σ²``. Writing
    ``y = θᵀφ(x) + ε``, the step ``ĝ = (1/N) Σ_i y_i φ(x_i)`` is unbiased and its excess risk is exactly

    ``E‖ĝ − θ‖² = (E[y² ‖φ(x)‖²] − ‖θ‖²) / N = (σ² p + d/2 + (d+4)(d+6)/2) / N``  for every ``N >= 1``

    (use ``‖φ‖² = 1 + d/2 + ‖x‖⁴/2``, ``E_A[(xᵀAx)²] = ‖x‖⁴ / (d(d+2))`` and ``E‖x‖^{2k}`` of a ``χ²_d``).

    Parameters
    ----------
    context_len
        ``N >= 1``, an int or an array of ints.
    dim
        ``d >= 1``.
    noise_var
        ``σ² >= 0``.

    Returns
    -------
    float or numpy.ndarray
        The excess risk (risk minus ``σ²``), shaped like ``context_len``.
    """
    dim = positive_int("dim", dim)
    noise_var = nonnegative_float("noise_var", noise_var)
    n = _raw_array("context_len", context_len) if not isinstance(context_len, bool) else None
    if n is None or not np.issubdtype(n.dtype, np.integer) or np.any(n < 1):
        raise ValueError(
            f"context_len must be an integer (or integer array) >= 1, got {context_len!r}"
        )
    p = (dim + 1) * (dim + 2) / 2
    constant = noise_var * p + dim / 2 + (dim + 4) * (dim + 6) / 2
    out = constant / n
    return float(out) if out.ndim == 0 else out
