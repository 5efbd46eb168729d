"""The course's chapters: the registry the assignments and the instructors page are built from
(number, slug, exercise prefix, learning objectives, run time), and the chapter files a selection names.

Titles come from the chapters' sources (:func:`booktools.chapters.chapter_title`); a test checks that
:data:`CHAPTERS` lists exactly the chapters of ``_toc.yml``, in its order.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from booktools import find_root
from booktools.chapters import chapter_title

__all__ = [
    "Chapter",
    "CHAPTERS",
    "STEM_RE",
    "chapters_folder",
    "chapter_info",
    "chapter_files",
    "load_notebook",
]


@dataclass(frozen=True)
class Chapter:
    """One chapter of the book.

    ``number`` and ``slug`` name the files ``chapters/<number>_<slug>.{md,ipynb}``; ``short`` is the
    exercise-label prefix (``<short>-ex<N>``, checks ``check_<short>_ex<N>``); ``run_time`` is the
    approximate execution time of the whole chapter on 2 CPU cores (``None`` until measured).
    """

    number: str
    slug: str
    short: str
    objectives: tuple[str, ...]
    run_time: str | None = None

    @property
    def stem(self) -> str:
        return f"{self.number}_{self.slug}"

    @property
    def title(self) -> str:
        """The chapter's title: its source's ``# `` heading (:func:`booktools.chapters.chapter_title`) in
        the current directory's repository (:meth:`title_in` reads another's)."""
        return self.title_in()

    def title_in(self, chapters_dir: str | os.PathLike | None = None) -> str:
        """The chapter's title as ``chapters_dir`` (default: the current directory's repository's
        ``chapters``) has it."""
        return chapter_title(chapters_folder(chapters_dir) / f"{self.stem}.md")


def chapters_folder(
    chapters_dir: str | os.PathLike | None = None, root: str | os.PathLike | None = None
) -> Path:
    """``chapters_dir``, or by default the ``chapters`` folder of the repository ``root`` (default:
    the one the current directory is in; :func:`booktools.find_root`)."""
    return Path(chapters_dir) if chapters_dir is not None else find_root(root) / "chapters"


# run_time=None: the instructors table takes the run time from chapters/timings.json (written when the
# chapters are executed); set a string here to override it.
#: The book's chapters, in order (the instructors page's table is generated from it).
CHAPTERS: tuple[Chapter, ...] = (
    Chapter(
        "00",
        "prologue",
        "prologue",
        (
            "See a prompt as a small regression data set and an in-context learner as a function of it.",
            "Compare least squares, ridge and one gradient-descent step as the context grows.",
            "Derive the best step size of one gradient-descent step.",
        ),
    ),
    Chapter(
        "01",
        "hermite",
        "hermite",
        (
            "Expand a function in probabilists' Hermite polynomials and compute its coefficients.",
            "Separate a link function's linear component from its nonlinear energy.",
            "Use closed forms and quadrature, and know when quadrature converges slowly.",
        ),
    ),
    Chapter(
        "02",
        "lsa_gradient_descent",
        "lsa",
        (
            "Write linear self-attention on a prompt of tokens and read out its prediction.",
            "Build the weights for which linear self-attention equals one (preconditioned) GD step.",
            "Find the optimal preconditioner and its risk.",
        ),
    ),
    Chapter(
        "03",
        "asymptotic_theory",
        "asymptotics",
        (
            "Set up the proportional limit: context, task diversity and pretraining data scaled with d.",
            "Evaluate the exact in-context and in-distribution errors of a given model.",
            "Explain double descent at τ = 1 and the transition from memorisation to generalisation.",
        ),
    ),
    Chapter(
        "04",
        "nonlinearity_noise",
        "nonlinear",
        (
            "Show that linear attention extracts only the linear Hermite component of a teacher.",
            "Map a nonlinear single-index task to a linear task with effective noise.",
            "Check the mapping against simulations as the dimension grows.",
        ),
    ),
    Chapter(
        "05",
        "glu_kernel_regression",
        "glu",
        (
            "Bound what linear self-attention can do on nonlinear tasks.",
            "Build a GLU layer that writes quadratic features, and an LSA+GLU block that takes one "
            "kernel-regression GD step.",
            "Relate the error's decay to the number of features.",
        ),
    ),
    Chapter(
        "06",
        "depth_block_coordinate_descent",
        "depth",
        (
            "Stack blocks that each update a subset of kernel features: block-coordinate descent.",
            "Reach a feature space larger than any one block's width.",
            "Compare trained deep models with kernel baselines against context length and depth.",
        ),
    ),
)


def chapter_info(key: str) -> Chapter | None:
    """The registry entry for a chapter number (``"00"``, ``"0"``), stem, slug or short name; else ``None``."""
    key = str(key).strip()
    for ch in CHAPTERS:
        if key in {ch.number, ch.stem, ch.slug, ch.short} or (
            key.isdigit() and int(key) == int(ch.number)
        ):
            return ch
    return None


STEM_RE = re.compile(r"^(?P<number>\d\d)_(?P<slug>[A-Za-z0-9_]+)$")


def chapter_files(selection=None, chapters_dir: str | os.PathLike | None = None) -> list[Path]:
    """The chapter notebooks to build, in book order (``NN_slug.ipynb``, else ``NN_slug.md``).

    ``selection``: ``None`` for every chapter, or numbers (``"00"``, ``"1"``), stems (``"01_hermite"``),
    slugs or short names (``"lsa"``). Raises ``ValueError`` for a selection that matches no chapter.
    ``chapters_dir``: default the current directory's repository's ``chapters``.
    """
    chapters_dir = chapters_folder(chapters_dir)
    if not chapters_dir.is_dir():
        raise ValueError(f"chapters_dir must be an existing directory, got {chapters_dir}")
    stems = sorted(
        {p.stem for p in chapters_dir.glob("[0-9][0-9]_*") if p.suffix in (".ipynb", ".md")}
    )
    files = []
    for stem in stems:
        ipynb, md = chapters_dir / f"{stem}.ipynb", chapters_dir / f"{stem}.md"
        files.append(ipynb if ipynb.exists() else md)
    if selection is None or len(selection) == 0:
        return files
    chosen = []
    for key in selection:
        key = str(key).strip()
        matches = []
        for path in files:
            m = STEM_RE.match(path.stem)
            keys = {path.stem}
            if m:
                keys |= {m["number"], m["slug"], str(int(m["number"]))}
            info = chapter_info(path.stem)
            if info is not None:
                keys.add(info.short)
            if key in keys or (key.isdigit() and m and int(key) == int(m["number"])):
                matches.append(path)
        if not matches:
            names = ", ".join(p.stem for p in files) or "none"
            raise ValueError(
                f"chapters: {key!r} matches no chapter in {chapters_dir} (have: {names})"
            )
        chosen.extend(p for p in matches if p not in chosen)
    return sorted(chosen, key=lambda p: p.stem)


def load_notebook(path: str | os.PathLike):
    """Read a notebook (``.ipynb``, or a Jupytext ``.md`` through jupytext) as an nbformat v4 node."""
    import nbformat

    path = Path(path)
    if not path.exists():
        raise ValueError(f"path must be an existing notebook, got {path}")
    if path.suffix == ".ipynb":
        return nbformat.read(path, as_version=4)
    import jupytext

    return jupytext.read(path)
