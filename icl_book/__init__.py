"""Support package of the executable textbook *In-context learning: from Hermite expansions to deep
transformers*: what the chapters import (authoring and grading tools live in the repository's
``booktools``, not here).

Modules (one job each):

- :mod:`icl_book.tasks` -- samplers of in-context regression prompts.
- :mod:`icl_book.estimators` -- in-context predictors with one interface ``(xs, ys, x_query) -> (B,)``.
- :mod:`icl_book.hermite` -- Hermite expansions under the Gaussian measure.
- :mod:`icl_book.features` -- polynomial feature maps (Hermite, Legendre, monomial) and their kernels.
- :mod:`icl_book.attention` -- linear self-attention, GLU layers, deep stacks and their exact constructions.
- :mod:`icl_book.theory` -- closed forms: attention asymptotics, nonlinearity–noise mapping, one-step GD risks.
- :mod:`icl_book.stats` -- Monte Carlo summaries: ``mean_sem``, a sample mean and its standard error.
- :mod:`icl_book.limits` -- the compute budget a declared cost is checked against, and ``budget`` to raise it.
- :mod:`icl_book.simulate` -- the fast reduced-model simulator: ``sizes``, ``solver``, ``pretrain``, ``sweeps``.
- :mod:`icl_book.train` -- seeded torch training: ``loop``, ``schedules``, ``batched``, ``protocol``.
- :mod:`icl_book.studies` -- the converged training studies of chapters 5 and 6: what is trained, and loading it.
- :mod:`icl_book.plotting` -- the book's figure style.
- :mod:`icl_book.book` -- helpers for the chapters: ``glue``, ``claim``, Colab detection.
- :mod:`icl_book.checks` -- the exercises' checks, which chapters and student notebooks call.
- ``icl_book._validate`` (private) -- the argument validation every public function goes through.
- ``icl_book._declare`` (private) -- each public callable's declared constraints and cost, checked first.
"""

__version__ = "0.1.0"
