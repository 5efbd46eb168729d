"""Seeded torch training of in-context learners, one module a job.

- :mod:`~icl_book.train.loop`: the single-model loop :func:`train_in_context` (Adam on fresh prompts every
  step), and evaluating or predicting with a model on a prompt batch.
- :mod:`~icl_book.train.schedules`: the learning-rate schedules both trainers use.
- :mod:`~icl_book.train.batched`: :class:`BatchedTrainer`, many small models of one architecture trained
  at once, each exactly as if alone.
- :mod:`~icl_book.train.protocol`: the book's convergence protocol (:func:`train_to_convergence`,
  :func:`converged_at`) on a batched trainer, resumable from checkpoints.

Every trainable model follows one interface, ``model(xs, ys, x_query) -> y_hat`` with ``xs (B, N, d)``,
``ys (B, N)``, ``x_query (B, d)`` and ``y_hat (B,)``; prompts come from a sampler
``sample_prompts(rng, batch_size) -> icl_book.tasks.Prompts``.
"""

from .batched import BatchedTrainer, Member
from .loop import (
    TrainingDiverged,
    TrainResult,
    evaluate_in_context,
    predict_in_context,
    prompts_to_torch,
    train_in_context,
)
from .protocol import (
    ConvergenceRecord,
    check_steps,
    converged_at,
    decide,
    false_convergence_rate,
    train_to_convergence,
)
from .schedules import learning_rate

__all__ = [
    "Member",
    "BatchedTrainer",
    "ConvergenceRecord",
    "train_to_convergence",
    "converged_at",
    "decide",
    "false_convergence_rate",
    "check_steps",
    "TrainResult",
    "TrainingDiverged",
    "train_in_context",
    "evaluate_in_context",
    "predict_in_context",
    "prompts_to_torch",
    "learning_rate",
]


def _public_here(obj) -> None:
    """Give ``obj`` (and every function it wraps) the public home ``icl_book.train``, as
    :mod:`icl_book.simulate` does: the API page and error reports name ``icl_book.train.X``
    whichever module defines it."""
    while callable(obj):
        obj.__module__ = __name__
        obj = getattr(obj, "__wrapped__", None)


for _name in __all__:
    _public_here(globals()[_name])
