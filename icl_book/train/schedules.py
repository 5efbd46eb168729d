"""Learning-rate schedules, one function for the single-model loop and the batched trainer.

``"constant"`` and ``"rsqrt"`` do not depend on the total number of steps, so a run can be continued
(the batched trainer accepts only those); ``"cosine"`` decays to zero at ``steps``.
"""

from __future__ import annotations

import math

from .._declare import Integer, Interval, Options, OrNone, declare

__all__ = ["learning_rate"]

#: The schedules :func:`learning_rate` knows.
SCHEDULES = ("constant", "cosine", "rsqrt")


@declare(
    step=Integer(0, None),
    lr=Interval(0.0, math.inf, "neither"),  # any finite positive rate (a test diverges at 1e300)
    schedule=Options(SCHEDULES),
    warmup=Integer(0, None),
    decay_start=Integer(0, None),
    steps=OrNone(Integer(1, None)),
)
def learning_rate(
    step: int,
    lr: float,
    schedule: str,
    *,
    warmup: int = 0,
    decay_start: int = 0,
    steps: int | None = None,
) -> float:
    """The learning rate at (0-based) ``step``.

    A linear warm-up over ``warmup`` steps, then: ``"constant"``: ``lr``; ``"rsqrt"``: ``lr`` held until
    ``τ = max(warmup, decay_start)``, then ``lr · √(τ / (step + 1))`` (the usual any-time decay; a later
    ``decay_start`` keeps a larger step size for long runs); ``"cosine"``: from ``lr`` at the end of the
    warm-up to 0 at ``steps`` (which ``"cosine"`` needs).
    """
    if schedule == "cosine" and steps is None:
        raise ValueError("steps must be given for the 'cosine' schedule (it ends at steps)")
    if step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "constant":
        return lr
    if schedule == "rsqrt":
        tau = max(warmup, decay_start)
        return lr if tau == 0 or step + 1 <= tau else lr * math.sqrt(tau / (step + 1))
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * 0.5 * (1.0 + math.cos(math.pi * progress))
