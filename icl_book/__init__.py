"""Support package of the executable textbook *In-context learning: from Hermite expansions to deep
transformers*.

Modules (one job each):

- :mod:`icl_book.tasks` -- samplers of in-context regression prompts.
- :mod:`icl_book.estimators` -- in-context predictors with one interface ``(xs, ys, x_query) -> (B,)``.
- :mod:`icl_book.hermite` -- Hermite expansions under the Gaussian measure.
- :mod:`icl_book.attention` -- linear self-attention, GLU layers and their exact constructions (torch + NumPy).
- :mod:`icl_book.theory` -- closed-form asymptotics of linear attention (Lu et al.).
- :mod:`icl_book.simulate` -- a fast pretraining simulator for the reduced linear-attention model.
- :mod:`icl_book.train` -- seeded torch training loops.
- :mod:`icl_book.plotting` -- the book's figure style.
- :mod:`icl_book.book` -- helpers for the chapters (glue, Colab detection).
- :mod:`icl_book.checks` / :mod:`icl_book.assignments` -- autograder checks and student notebooks.
"""

__version__ = "0.1.0"
