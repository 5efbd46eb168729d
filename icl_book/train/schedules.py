"""Learning-rate schedules, one function for the single-model loop and the batched trainer.

``"constant"`` and ``"rsqrt"`` do not depend on the total number of steps, so a run can be continued
(the batched trainer accepts only those); ``"cosine"`` decays to zero at ``steps``.
"""

from __future__ import annotations

import math

__all__ = ["SCHEDULES", "learning_rate"]

#: The schedules :func:`learning_rate` knows.
SCHEDULES = ("constant", "cosine", "rsqrt")


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
    warm-up to 0 at ``steps``. The callers validate the arguments.
    """
    if step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "constant":
        return lr
    if schedule == "rsqrt":
        tau = max(warmup, decay_start)
        return lr if tau == 0 or step + 1 <= tau else lr * math.sqrt(tau / (step + 1))
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * 0.5 * (1.0 + math.cos(math.pi * progress))
