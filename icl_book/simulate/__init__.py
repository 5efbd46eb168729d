"""A fast pretraining simulator for the reduced linear-attention model (chapter 3).

Pretraining the reduced model ``ŷ = ⟨Γ, H_Z⟩`` on ``n`` prompts is a ridge regression with ``d(d+1)`` features
(chapter 3). The reference method materialises the features and solves the dense ``d(d+1) × d(d+1)``
normal equations: ``O(n d⁴)`` time and ``O(d⁴)`` memory. This module does the same regression exactly, faster:

1. **Exact-in-distribution sampling** (:func:`sample_reduced_prompts`). A prompt enters the regression only
   through the query ``x_q``, its label ``y_q`` and the vector
   ``h = [(d/ℓ) Σ_i y_i x_i, (1/ℓ) Σ_i y_i²] ∈ R^{d+1}`` (then ``H_Z = x_q hᵀ``). Write each context input as
   ``x_i = s_i u + x_i^⊥`` with ``u = w/‖w‖``: ``s_i ~ N(0, 1/d)`` and ``x_i^⊥ ~ N(0, P_u^⊥/d)`` are
   independent, and ``y_i = f(‖w‖ s_i) + ε_i`` depends on ``s_i`` and the noise only. Hence
   ``Σ y_i x_i = u Σ y_i s_i + v^⊥`` where, given the labels, ``v^⊥ = Σ y_i x_i^⊥ ~ N(0, (Σ y_i²/d) P_u^⊥)``.
   So ``ℓ`` scalars and one ``d``-vector per prompt reproduce the *exact* joint law of ``(x_q, h, y_q)``:
   ``O(ℓ + d)`` work instead of ``O(ℓ d)``, for any link ``f``.
   For the linear teacher, ``sampler="wishart"`` draws the context's sums themselves in ``O(1)`` (the 2×2
   Gram of its standardised pre-activations and noises is Wishart), ``O(d)`` per prompt.
2. **A matrix-free solver** (:func:`solve_reduced_ridge`): the normal-equation operator is
   ``Γ ↦ Σ_μ x_μ (x_μᵀ Γ h_μ) h_μᵀ``, i.e. ``Σ_μ (x_μ x_μᵀ) ⊗ (h_μ h_μᵀ)`` in Kronecker form, applied in
   ``O(n d²)`` by two matrix products streamed over row blocks, inside conjugate gradients. Only ``X_q (n, d)``,
   ``H (n, d+1)`` and ``y (n,)`` are stored: memory ``O(n d)``. At small ``d`` the dense Gram matrix and
   Cholesky are cheaper; ``solver="auto"`` (the simulator's default) picks by a cost model of the sizes.

Objective: ``Σ_μ (y_μ − ⟨Γ, H_μ⟩)² + (n/d) λ ‖Γ‖_F²``; at ``λ = 0`` the minimum-norm least-squares solution.

The package is split by job; every public name is imported here and documented as ``icl_book.simulate.X``:

- :mod:`icl_book.simulate.sizes` -- problem sizes and the exact-in-distribution sampler of the reduced prompts.
- :mod:`icl_book.simulate.solver` -- the ridge solver: matrix-free mixed-precision PCG or a dense Gram, by cost.
- :mod:`icl_book.simulate.pretrain` -- pretraining the reduced model and the errors of what it learns.
- :mod:`icl_book.simulate.sweeps` -- the sweep engine: many ``(point, seed)`` runs through any executor.
"""

from __future__ import annotations

from . import sweeps as _sweeps
from .pretrain import (
    MCError,
    PretrainedLSA,
    SimulatedErrors,
    gamma_errors,
    mc_error,
    pretrain_reduced_lsa,
    simulated_errors,
)
from .sizes import SAMPLE_BATCH as SAMPLE_BATCH  # module constants stay importable from here
from .sizes import (
    ProblemSizes,
    ReducedPrompts,
    problem_sizes,
    reduced_features,
    sample_reduced_prompts,
)
from .solver import MATVEC_BLOCK as MATVEC_BLOCK
from .solver import REFINE_TOL as REFINE_TOL
from .solver import RidgeSolution, SolveInfo, solve_reduced_ridge
from .sweeps import SweepResult, sweep

__all__ = [
    "ReducedPrompts",
    "SolveInfo",
    "RidgeSolution",
    "PretrainedLSA",
    "SimulatedErrors",
    "ProblemSizes",
    "problem_sizes",
    "reduced_features",
    "sample_reduced_prompts",
    "solve_reduced_ridge",
    "pretrain_reduced_lsa",
    "gamma_errors",
    "simulated_errors",
]
__all__ += ["MCError", "mc_error"]  # nonlinear (chapter 4)
__all__ += ["SWEEP_KEYS", "SweepResult", "sweep"]  # sweeps through an executor

#: Keys a sweep point may carry — the arguments of :func:`pretrain_reduced_lsa` (``dim``, ``alpha`` and ``tau``
#: are required).
SWEEP_KEYS = _sweeps.SWEEP_KEYS


def _public_here(obj) -> None:
    """Give ``obj`` (and every function it wraps) the public home ``icl_book.simulate``, as NumPy's
    ``set_module`` does: the API page, pickles and error reports name ``icl_book.simulate.X`` whichever
    submodule defines it."""
    while obj is not None:
        obj.__module__ = __name__
        obj = getattr(obj, "__wrapped__", None)


for _name in __all__:
    if _name != "SWEEP_KEYS":
        _public_here(globals()[_name])
del _name
