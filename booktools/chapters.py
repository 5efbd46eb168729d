"""The book model: the chapters ``_toc.yml`` lists (the one registry, in its order), their course
data (``booktools/course.yml``), and each chapter's MyST read once into typed cells.

Every tool that walks the chapters (execution and pair checks, editions, assignments, the grader,
the test suite) asks here, so a chapter added to the table of contents is seen by all of them, and
every reading of a chapter's structure (its directives' fences, its exercises, solution blocks and
check cells, its install cell) is done by this module: ``tests/test_book_model.py`` fails on a
fence pattern or a chapter glob anywhere else.

A chapter notebook (its Jupytext source or its executed ``.ipynb``) or its plain-notebook edition
(``booktools.editions``, solutions marked in cell metadata) reads as a list of :class:`BookCell`,
whose ``kind`` is one of :data:`CELL_KINDS`; a Markdown cell is cut at its solution blocks'
boundaries, so a cell of the notebook may give several book cells.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from booktools import find_root
from booktools.myst import check_call, check_calls, check_label

__all__ = [
    "BEGIN_SOLUTION",
    "END_SOLUTION",
    "CELL_KINDS",
    "STEM_RE",
    "BookCell",
    "BookFormatError",
    "Chapter",
    "chapter_stems",
    "chapter_sources",
    "chapter_notebooks",
    "chapter_title",
    "course_chapters",
    "chapter_info",
    "chapters_folder",
    "chapter_files",
    "load_notebook",
    "read_chapter",
    "is_edition",
    "has_solution_markers",
    "book_cells",
    "exercise_labels",
    "directive_labels",
    "blank_code_cells",
    "exercise_statements",
    "exercise_section_start",
    "solution_chunks",
    "install_cell_span",
]

#: nbgrader's solution markers: a code cell holding them is (part of) an exercise's answer.
BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
#: The kinds of :class:`BookCell`: ``text`` (the chapter's prose, every non-code cell outside the
#: solutions), ``code`` (the chapter's code, the install cell included), ``check`` (a code cell
#: calling one ``check_<chapter>_ex<N>``), ``solution-prose`` (Markdown of a solution block, its
#: directives included), ``solution-code`` (a code cell with solution markers) and
#: ``solution-extra`` (a code cell of a solution block without markers, which the student edition
#: drops).
CELL_KINDS = ("text", "code", "check", "solution-prose", "solution-code", "solution-extra")
#: A chapter's file stem, ``NN_slug``.
STEM_RE = re.compile(r"^(?P<number>\d\d)_(?P<slug>[A-Za-z0-9_]+)$")
_NUMBERED = re.compile(r"^chapters/(?P<stem>\d\d_[A-Za-z0-9_]+)$")
#: The opening line of a MyST directive, backtick or colon fence: ```{name} arg / :::{name} arg
_FENCE_RE = re.compile(r"^\s*(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}\s*(?P<arg>.*?)\s*$")
_LABEL_RE = re.compile(r"^\s*:label:\s*(\S+)")
_EXERCISES_HEADING_RE = re.compile(r"^#{1,4}\s+Exercises\b", re.MULTILINE)
#: The first code cell of a Jupytext MyST source (the install cell): its header, body and fence.
_FIRST_CODE_CELL_RE = re.compile(r"(```\{code-cell\} ipython3\n(?::[^\n]*\n)*\n)(.*?)(\n```)", re.S)
_COURSE_DATA = Path(__file__).with_name("course.yml")


class BookFormatError(ValueError):
    """A chapter does not follow the exercise/solution/check conventions of CONTRIBUTING.md."""


# --------------------------------------------------------------------------------------------------
# The registry: _toc.yml's chapters and their course data
# --------------------------------------------------------------------------------------------------
def _toc_files(node) -> list[str]:
    """Every ``file:`` of a ``_toc.yml`` tree, in order."""
    out = []
    if isinstance(node, dict):
        if isinstance(node.get("file"), str):
            out.append(node["file"])
        for value in node.values():
            if isinstance(value, (list, dict)):
                out += _toc_files(value)
    elif isinstance(node, list):
        for item in node:
            out += _toc_files(item)
    return out


def chapter_stems(root: str | Path | None = None) -> list[str]:
    """``["00_prologue", "01_hermite", ...]``: the numbered chapters of ``_toc.yml``, in book order."""
    root = find_root(root)
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    files = [f.removesuffix(".md").removesuffix(".ipynb") for f in _toc_files(toc)]
    return [m["stem"] for f in files if (m := _NUMBERED.match(f))]


def chapter_sources(root: str | Path | None = None) -> list[Path]:
    """The chapter sources ``chapters/NN_slug.md``, in book order."""
    root = find_root(root)
    return [root / "chapters" / f"{stem}.md" for stem in chapter_stems(root)]


def chapter_notebooks(root: str | Path | None = None) -> list[Path]:
    """The executed chapters ``chapters/NN_slug.ipynb``, in book order."""
    root = find_root(root)
    return [root / "chapters" / f"{stem}.ipynb" for stem in chapter_stems(root)]


def chapter_title(source: str | Path) -> str:
    """A chapter's title: the first ``# `` heading of its ``.md`` source."""
    text = Path(source).read_text(encoding="utf-8")
    if text.startswith("---"):  # the Jupytext front matter
        text = text[text.index("\n---", 3) + 4 :]
    match = re.search(r"^# (.+?)\s*$", text, re.MULTILINE)
    if match is None:
        raise ValueError(f"{source} has no '# ' title heading")
    return match.group(1)


def chapters_folder(
    chapters_dir: str | os.PathLike | None = None, root: str | os.PathLike | None = None
) -> Path:
    """``chapters_dir``, or by default the ``chapters`` folder of the repository ``root`` (default:
    the one the current directory is in; :func:`booktools.find_root`)."""
    return Path(chapters_dir) if chapters_dir is not None else find_root(root) / "chapters"


@dataclass(frozen=True)
class Chapter:
    """One chapter of the course.

    ``number`` and ``slug`` name the files ``chapters/<number>_<slug>.{md,ipynb}``; ``short`` is the
    exercise-label prefix (``<short>-ex<N>``, checks ``check_<short>_ex<N>``); ``run_time`` is the
    approximate execution time of the whole chapter on 2 CPU cores (``None``: the measured one).
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
        """The chapter's title: its source's ``# `` heading (:func:`chapter_title`) in the current
        directory's repository (:meth:`title_in` reads another's)."""
        return self.title_in()

    def title_in(self, chapters_dir: str | os.PathLike | None = None) -> str:
        """The chapter's title as ``chapters_dir`` (default: the current directory's repository's
        ``chapters``) has it."""
        return chapter_title(chapters_folder(chapters_dir) / f"{self.stem}.md")


def course_chapters(root: str | os.PathLike | None = None) -> tuple[Chapter, ...]:
    """The chapters of ``_toc.yml`` (repository ``root``, default: the current directory's), in
    its order, with their course data. Raises ``ValueError`` when ``booktools/course.yml`` has no
    entry for one of them, or an entry for a file ``_toc.yml`` does not list."""
    stems = chapter_stems(root)
    data = yaml.safe_load(_COURSE_DATA.read_text(encoding="utf-8")) or {}
    missing, extra = set(stems) - set(data), set(data) - set(stems)
    if missing or extra:
        raise ValueError(
            f"{_COURSE_DATA.name} must describe exactly the chapters of _toc.yml: "
            f"missing {sorted(missing)}, not in _toc.yml {sorted(extra)}"
        )
    out = []
    for stem in stems:
        entry, m = data[stem], STEM_RE.match(stem)
        objectives = tuple(entry["objectives"])
        out.append(
            Chapter(m["number"], m["slug"], entry["short"], objectives, entry.get("run_time"))
        )
    return tuple(out)


def chapter_info(key: str, root: str | os.PathLike | None = None) -> Chapter | None:
    """The course's chapter for a number (``"00"``, ``"0"``), stem, slug or short name; else
    ``None``."""
    key = str(key).strip()
    for ch in course_chapters(root):
        if key in {ch.number, ch.stem, ch.slug, ch.short} or (
            key.isdigit() and int(key) == int(ch.number)
        ):
            return ch
    return None


def chapter_files(selection=None, chapters_dir: str | os.PathLike | None = None) -> list[Path]:
    """The chapter notebooks to build, in book order (``NN_slug.ipynb``, else ``NN_slug.md``).

    ``selection``: ``None`` for every chapter, or numbers (``"00"``, ``"1"``), stems
    (``"01_hermite"``), slugs or short names (``"lsa"``). Raises ``ValueError`` for a selection
    that matches no chapter.
    ``chapters_dir``: default the current directory's repository's ``chapters``; the chapters are
    those of the ``_toc.yml`` of the repository it is in that exist in it.
    """
    chapters_dir = chapters_folder(chapters_dir)
    if not chapters_dir.is_dir():
        raise ValueError(f"chapters_dir must be an existing directory, got {chapters_dir}")
    course = [
        ch
        for ch in course_chapters(chapters_dir)
        if any((chapters_dir / f"{ch.stem}{ext}").exists() for ext in (".ipynb", ".md"))
    ]
    files = {}
    for ch in sorted(course, key=lambda ch: ch.stem):
        ipynb, md = chapters_dir / f"{ch.stem}.ipynb", chapters_dir / f"{ch.stem}.md"
        files[ch.stem] = ipynb if ipynb.exists() else md
    if selection is None or len(selection) == 0:
        return list(files.values())
    chosen = []
    for key in selection:
        key = str(key).strip()
        matches = [
            files[ch.stem]
            for ch in course
            if key in {ch.stem, ch.number, ch.slug, ch.short, str(int(ch.number))}
            or (key.isdigit() and int(key) == int(ch.number))
        ]
        if not matches:
            names = ", ".join(files) or "none"
            raise ValueError(
                f"chapters: {key!r} matches no chapter in {chapters_dir} (have: {names})"
            )
        chosen.extend(p for p in matches if p not in chosen)
    return sorted(chosen, key=lambda p: p.stem)


def load_notebook(path: str | os.PathLike):
    """Read a notebook (``.ipynb``, or a Jupytext ``.md`` through jupytext) as an nbformat v4
    node."""
    import nbformat

    path = Path(path)
    if not path.exists():
        raise ValueError(f"path must be an existing notebook, got {path}")
    if path.suffix == ".ipynb":
        return nbformat.read(path, as_version=4)
    import jupytext

    return jupytext.read(path)


def read_chapter(text: str):
    """A chapter's Jupytext MyST source text as an nbformat v4 notebook (read it with
    :func:`book_cells`)."""
    import jupytext

    return jupytext.reads(text, fmt="md:myst")


# --------------------------------------------------------------------------------------------------
# A chapter's typed cells
# --------------------------------------------------------------------------------------------------
@dataclass
class BookCell:
    """A (part of a) cell of a chapter notebook with its kind (one of :data:`CELL_KINDS`).

    ``index`` is the notebook cell it comes from, ``cell`` that cell; ``label`` the exercise a
    check or solution part belongs to; ``in_block`` whether it lies inside a solution block."""

    index: int
    cell_type: str
    source: str
    kind: str
    label: str | None = None
    cell: object = None
    in_block: bool = False


def _directive(line: str):
    """The fence, name and argument of a directive opening at ``line``, else ``None``."""
    return _FENCE_RE.match(line)


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def _directive_end(lines: list[str], i: int, fence: str) -> int:
    """The index after the line closing the directive that opens at ``lines[i]`` with ``fence``."""
    i += 1
    while i < len(lines) and not _closes(lines[i], fence):
        i += 1
    return min(i + 1, len(lines))


def _directive_label(lines: list[str], i: int) -> str | None:
    """The ``:label:`` among the options of the directive opening at ``lines[i]``."""
    for opt in lines[i + 1 :]:
        lm = _LABEL_RE.match(opt)
        if lm:
            return lm.group(1)
        if not opt.strip().startswith(":"):
            return None
    return None


def has_solution_markers(source: str) -> bool:
    """Whether ``source`` holds a ``### BEGIN SOLUTION`` or ``### END SOLUTION`` line."""
    return any(line.strip() in (BEGIN_SOLUTION, END_SOLUTION) for line in source.split("\n"))


def is_edition(nb) -> bool:
    """A plain-notebook edition (``booktools.editions``): its solution parts carry
    ``icl_edition.solution``."""
    return "icl_edition" in nb.get("metadata", {})


def _one_check(idx: int, cell, in_block: bool) -> str | None:
    """The check a code cell calls; :class:`BookFormatError` for several, or one in a solution."""
    if len(check_calls(cell.get("source", ""))) > 1:
        raise BookFormatError(f"cell {idx} calls several checks: give each check its own cell")
    check = check_call(cell)
    if check is not None and in_block:
        raise BookFormatError(
            f"cell {idx}: the check {check} is inside a solution block; "
            "put it after {solution-end}"
        )
    return check


class _SourceReader:
    """Reads a chapter notebook's cells in order, carrying the solution block they are in."""

    def __init__(self):
        self.cells: list[BookCell] = []
        self.in_block, self.block_label, self.exercise = False, None, None

    def code(self, idx: int, cell) -> None:
        source = cell.get("source", "")
        check = _one_check(idx, cell, self.in_block)
        if check is not None:
            self.cells.append(BookCell(idx, "code", source, "check", check_label(check), cell))
        elif has_solution_markers(source):
            label = self.block_label if self.in_block else self.exercise
            kind, in_block = "solution-code", self.in_block
            self.cells.append(BookCell(idx, "code", source, kind, label, cell, in_block))
        elif self.in_block:
            kind = "solution-extra"
            self.cells.append(BookCell(idx, "code", source, kind, self.block_label, cell, True))
        else:
            self.cells.append(BookCell(idx, "code", source, "code", None, cell))

    def markdown(self, idx: int, cell) -> None:
        """Cut a Markdown cell at its solution blocks' boundaries (the directives go with the
        solution's prose)."""
        lines, buf = cell.get("source", "").split("\n"), []
        kind = "solution-prose" if self.in_block else "text"

        def flush(new_kind, label):
            nonlocal kind
            if buf and (kind != "text" or "\n".join(buf).strip()):
                text = "\n".join(buf)
                self.cells.append(
                    BookCell(idx, "markdown", text, kind, label, cell, kind != "text")
                )
            buf.clear()
            kind = new_kind

        i = 0
        while i < len(lines):
            m = _directive(lines[i])
            name = m["name"] if m else None
            if not self.in_block and name in ("solution-start", "solution"):
                flush("solution-prose", self.block_label)
                self.block_label = m["arg"].split()[0] if m["arg"] else self.exercise
                end = _directive_end(lines, i, m["fence"])
                buf += lines[i:end]
                i = end
                if name == "solution-start":
                    self.in_block = True
                else:  # a plain {solution} directive: the whole directive is the block
                    flush("text", self.block_label)
                continue
            if self.in_block and name == "solution-end":
                end = _directive_end(lines, i, m["fence"])
                buf += lines[i:end]
                i, self.in_block = end, False
                flush("text", self.block_label)
                continue
            if name == "exercise":
                self.exercise = _directive_label(lines, i) or self.exercise
            buf.append(lines[i])
            i += 1
        flush("solution-prose" if self.in_block else "text", self.block_label)


def _source_cells(nb) -> list[BookCell]:
    reader = _SourceReader()
    for idx, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            reader.code(idx, cell)
        elif cell.cell_type == "markdown":
            reader.markdown(idx, cell)
        else:
            reader.cells.append(
                BookCell(idx, cell.cell_type, cell.get("source", ""), "text", None, cell)
            )
    if reader.in_block:
        raise BookFormatError(f"{{solution-start}} {reader.block_label} has no {{solution-end}}")
    return reader.cells


def _edition_cells(nb) -> list[BookCell]:
    """The cells of a plain-notebook edition: solutions are marked by their cell metadata."""
    cells: list[BookCell] = []
    for idx, cell in enumerate(nb.cells):
        source = cell.get("source", "")
        label = cell.get("metadata", {}).get("icl_edition", {}).get("solution")
        if cell.cell_type == "code":
            check = _one_check(idx, cell, label is not None)
            if check is not None:
                cells.append(BookCell(idx, "code", source, "check", check_label(check), cell))
            elif label is not None:
                kind = "solution-code" if has_solution_markers(source) else "solution-extra"
                cells.append(BookCell(idx, "code", source, kind, label, cell, in_block=True))
            else:
                cells.append(BookCell(idx, "code", source, "code", None, cell))
        elif cell.cell_type == "markdown" and label is not None:
            cells.append(BookCell(idx, "markdown", source, "solution-prose", label, cell, True))
        else:
            cells.append(BookCell(idx, cell.cell_type, source, "text", None, cell))
    return cells


def book_cells(nb) -> list[BookCell]:
    """The typed cells of a chapter notebook (its source or executed notebook, or its edition).

    Raises :class:`BookFormatError` on a cell calling several checks, a check inside a solution
    block, or a solution block that never ends."""
    return _edition_cells(nb) if is_edition(nb) else _source_cells(nb)


def _labelled_directives(nb):
    """``(name, label, lines, i, fence)`` of every labelled directive of a chapter's Markdown:
    ``lines[i]`` opens it."""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.split("\n")
        for i, line in enumerate(lines):
            m = _directive(line)
            if m and (label := _directive_label(lines, i)) is not None:
                yield m["name"], label, lines, i, m["fence"]


def _exercise_directives(nb):
    """``(label, lines, i, fence)`` of every labelled ``{exercise}`` directive of a chapter's
    Markdown."""
    for name, *rest in _labelled_directives(nb):
        if name == "exercise":
            yield tuple(rest)


def directive_labels(nb) -> list[tuple[str, str]]:
    """``(name, label)`` of every labelled directive of a chapter's Markdown, in order, nested ones
    included: ``("prf:theorem", "thm-hermite-plancherel")``."""
    return [(name, label) for name, label, *_ in _labelled_directives(nb)]


def blank_code_cells(text: str) -> str:
    """A chapter's Jupytext MyST source ``text`` with its code cells' lines (fences included) made
    empty, the line count kept: what a scan of its prose and math reads, with line numbers."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _directive(lines[i])
        if m and m["name"] == "code-cell":
            end = _directive_end(lines, i, m["fence"])
            lines[i:end] = [""] * (end - i)
            i = end
        else:
            i += 1
    return "\n".join(lines)


def exercise_labels(nb) -> list[str]:
    """The exercise labels of a chapter, in order: its ``{exercise}`` directives', or in an edition,
    those of its solutions and checks (every exercise has one or the other)."""
    if not is_edition(nb):
        return [label for label, *_ in _exercise_directives(nb)]
    labels = []
    for c in _edition_cells(nb):
        if c.label and c.label not in labels:
            labels.append(c.label)
    return labels


def exercise_statements(nb) -> dict[str, str]:
    """``{label: statement}``: the body of each ``{exercise}`` directive of a chapter (its options
    and the blank lines around it left out)."""
    found = {}
    for label, lines, i, fence in _exercise_directives(nb):
        body = lines[i + 1 : _directive_end(lines, i, fence) - 1]
        while body and body[0].strip().startswith(":"):
            body = body[1:]
        found[label] = "\n".join(body).strip("\n")
    return found


def exercise_section_start(nb) -> int:
    """Index of the first cell of the exercises (the ``## Exercises`` heading, else the first
    ``{exercise}``); ``len(nb.cells)`` when there is none."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and _EXERCISES_HEADING_RE.search(cell.source):
            return i
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and any(
            (m := _directive(line)) and m["name"] == "exercise" for line in cell.source.split("\n")
        ):
            return i
    return len(nb.cells)


def solution_chunks(source: str) -> list[str]:
    """The source of a Markdown cell cut at its ``{solution-start}`` / ``{solution-end}``
    directives (each directive a chunk of its own), so that a converter can switch between
    collapsed and visible text."""
    lines = source.split("\n")
    cuts, i = [0], 0
    while i < len(lines):
        m = _directive(lines[i])
        if m and m["name"] in ("solution-start", "solution-end"):
            end = _directive_end(lines, i, m["fence"])
            cuts += [i, end]
            i = end
        else:
            i += 1
    cuts.append(len(lines))
    return ["\n".join(lines[a:b]) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def install_cell_span(text: str) -> tuple[int, int]:
    """``(start, end)`` of the body of the first code cell (the install cell) in a chapter's
    Jupytext MyST source ``text``; ``ValueError`` when it has no code cell."""
    m = _FIRST_CODE_CELL_RE.search(text)
    if m is None:
        raise ValueError("no code cell")
    return m.start(2), m.end(2)
