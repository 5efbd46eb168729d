"""Execute the chapters and keep each ``NN_slug.md`` / ``NN_slug.ipynb`` pair in step.

``python -m booktools.notebooks execute [PATH.md ...]`` regenerates the executed notebooks (``make execute``);
``python -m booktools.notebooks check-pairs`` fails on a missing or stale ``.ipynb`` (``make test``);
``python -m booktools.notebooks time-nbval [PATH.md ...]`` records nbval's run time at 1 and 2 threads.
Each takes ``--root DIR``, the repository (default: the one the current directory is in).

Executed notebooks carry no run-to-run noise: no timings, no execution metadata, and cell ids derived from
the cell's position, so re-executing an unchanged chapter rewrites an identical file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import datetime
from pathlib import Path

from booktools import add_root_option, find_root
from booktools.chapters import chapter_sources

__all__ = [
    "execute_chapter",
    "pair_problems",
    "cells_signature",
    "read_timings",
    "figure_index_markdown",
    "caption_cell",
]


def cells_signature(nb) -> list[tuple[str, str, tuple[str, ...]]]:
    """What must agree between a ``.md`` and its ``.ipynb``: cell type, source and tags of every cell."""
    return [
        (cell.cell_type, cell.source.strip(), tuple(cell.get("metadata", {}).get("tags", [])))
        for cell in nb.cells
    ]


def _merge_streams(outputs: list) -> list:
    """Join consecutive outputs of the same stream: how prints are chunked depends on the machine's load."""
    merged = []
    for output in outputs:
        prev = merged[-1] if merged else None
        if (
            output.get("output_type") == "stream"
            and prev is not None
            and prev.get("output_type") == "stream"
            and prev.get("name") == output.get("name")
        ):
            prev["text"] = prev["text"] + output["text"]
        else:
            merged.append(output)
    return merged


def _stable(nb):
    """Remove run-to-run noise from an executed notebook (in place) and return it."""
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:03d}"
        cell.get("metadata", {}).pop("execution", None)
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                output.get("metadata", {}).pop("execution", None)
            cell["outputs"] = _merge_streams(cell.get("outputs", []))
    nb.metadata.pop("widgets", None)
    return nb


def _cell_seconds(cell) -> float:
    stamps = cell.get("metadata", {}).get("execution", {})
    start, end = stamps.get("iopub.execute_input"), stamps.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def read_timings(chapters_dir: Path | None = None) -> dict:
    """The run times recorded by the last ``make execute``: ``{stem: {"total_s", "cells_s"}}``, from
    ``chapters_dir`` (default: the current directory's repository's ``chapters``)."""
    chapters_dir = chapters_dir if chapters_dir is not None else find_root() / "chapters"
    path = Path(chapters_dir) / "timings.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _record_timing(md_path: Path, nb) -> None:
    """Keep run times out of the notebooks (they would change every run) but beside them, in timings.json."""
    cells = {
        str(i): round(_cell_seconds(c), 2) for i, c in enumerate(nb.cells) if c.cell_type == "code"
    }
    timings = read_timings(md_path.parent)
    entry = timings.setdefault(md_path.stem, {})
    entry.update(total_s=round(sum(cells.values()), 1), cells_s=cells)
    _write_timings(md_path.parent, timings)


def _write_timings(chapters_dir: Path, timings: dict) -> None:
    path = Path(chapters_dir) / "timings.json"
    path.write_text(json.dumps(dict(sorted(timings.items())), indent=1) + "\n")


#: The environment variables that set the BLAS/OpenMP thread count of a child process.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def time_nbval(ipynb: Path, threads: int | None, root: Path | None = None) -> tuple[float, float]:
    """``(wall seconds, CPU seconds)`` of nbval on one executed chapter with ``threads`` BLAS threads.

    ``threads=None`` leaves the thread count to the libraries' default (every core: what a student
    running the notebook gets). CPU seconds are those of the pytest process and the kernel it started
    and reaped; a failing nbval run raises ``RuntimeError`` (a time of a broken chapter means nothing).
    nbval runs in the repository ``root`` (default: the one the current directory is in).
    """
    import resource
    import subprocess
    import time

    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    if threads is not None:
        env.update({v: str(threads) for v in THREAD_VARIABLES})
    env.pop("MPLBACKEND", None)
    root = find_root(root)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval"]
    cmd += ["--nbval-sanitize-with", str(Path(root) / "nbval_sanitize.cfg"), str(ipynb)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(
            f"nbval failed on {ipynb} with {threads} thread(s):\n{done.stdout[-3000:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def record_nbval_times(
    paths: list[Path], threads=(1, 2), chapters_dir: Path | None = None, root: Path | None = None
) -> dict:
    """Time nbval on each chapter at each thread count and record it in ``timings.json``.

    Each chapter's entry gains ``nbval_s`` and ``nbval_cpu_s``: ``{"1": seconds, "2": seconds}`` (wall
    and CPU time of ``pytest --nbval`` on the executed notebook, kernel start included); a thread count
    of ``None`` (the libraries' default) is recorded under ``"default"``. nbval runs in the repository
    ``root`` (default: the one the current directory is in), whose ``chapters`` is the default
    ``chapters_dir``.
    """
    root = find_root(root)
    chapters_dir = chapters_dir if chapters_dir is not None else root / "chapters"
    results = {}
    for path in paths:
        ipynb = Path(path).with_suffix(".ipynb")
        for n in threads:
            wall, cpu = time_nbval(ipynb, n, root)
            key = "default" if n is None else str(n)
            results.setdefault(ipynb.stem, {})[key] = (wall, cpu)
            print(f"{ipynb.stem}: {key} thread(s) {wall:6.1f} s wall, {cpu:6.1f} s CPU", flush=True)
            timings = read_timings(chapters_dir)  # re-read: make execute may have written meanwhile
            entry = timings.setdefault(ipynb.stem, {})
            entry.setdefault("nbval_s", {})[key] = round(wall, 1)
            entry.setdefault("nbval_cpu_s", {})[key] = round(cpu, 1)
            _write_timings(chapters_dir, timings)
    return results


def execute_chapter(md_path: Path, timeout: int = 900) -> Path:
    """Execute ``md_path`` top to bottom in a fresh kernel and write the paired ``.ipynb`` beside it.

    The run time of every cell goes to ``timings.json`` beside the chapter (not into the notebook).
    """
    import jupytext
    from nbclient import NotebookClient

    md_path = Path(md_path).resolve()
    if md_path.suffix != ".md" or not md_path.exists():
        raise ValueError(f"md_path must be an existing chapter source NN_slug.md, got {md_path}")
    nb = jupytext.read(md_path)
    # MPLBACKEND=Agg in the environment overrides the kernel's inline backend: every figure vanishes
    # and the run still succeeds, with zero figures (nbval then fails on the missing outputs).
    os.environ.pop("MPLBACKEND", None)
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        record_timing=True,
        resources={"metadata": {"path": str(md_path.parent)}},
    )
    client.execute()
    _record_timing(md_path, nb)
    _stable(nb)
    out = md_path.with_suffix(".ipynb")
    jupytext.write(nb, out, fmt="ipynb")
    return out


def pair_problems(root: Path | None = None) -> list[str]:
    """One message per chapter whose ``.ipynb`` is missing, unexecuted or out of step with its ``.md``
    (the chapters of the repository ``root``, default the one the current directory is in)."""
    import jupytext

    problems = []
    for md in chapter_sources(root):
        nb_path = md.with_suffix(".ipynb")
        if not nb_path.exists():
            problems.append(f"{nb_path.name} is missing: run `make execute` and commit it")
            continue
        md_nb, ipynb = jupytext.read(md), jupytext.read(nb_path)
        if cells_signature(md_nb) != cells_signature(ipynb):
            problems.append(
                f"{nb_path.name} is stale (its cells differ from {md.name}): run `make execute` and commit it"
            )
            continue
        unexecuted = [
            i
            for i, c in enumerate(ipynb.cells)
            if c.cell_type == "code" and c.get("execution_count") is None
        ]
        if unexecuted:
            problems.append(
                f"{nb_path.name} has unexecuted cells {unexecuted[:5]}: run `make execute`"
            )
    return problems


def _title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^# (.+)$", cell.source, re.M)
            if match:
                return match.group(1).strip()
    return "?"


def figure_index_markdown(root: Path | None = None) -> str:
    """The text of ``chapters/figures.md``: every figure of every chapter, from the executed notebooks
    of the repository ``root`` (default: the one the current directory is in).

    For each figure: its name and caption, the chapter, the ``icl_book`` functions the figure's cell calls, and
    the run time of that cell and of the whole chapter (from ``timings.json``).
    """
    import nbformat

    root = find_root(root)
    timings = read_timings(root / "chapters")
    lines = [
        "(figure-index)=",
        "# Index of figures",
        "",
        "Every figure in the book, the chapter that makes it, the package functions its cell calls, and the run",
        "time of that cell and of the whole chapter on the machine that last executed the book (2 CPU cores).",
        "To regenerate a figure, run its chapter top to bottom (`make execute CHAPTERS=chapters/<file>.md`) or",
        "open the chapter in Colab. This page is generated by `python -m booktools.notebooks figure-index`.",
        "",
    ]
    for md in chapter_sources(root):
        if not md.with_suffix(".ipynb").exists():  # the pair check reports it
            continue
        nb = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
        figures = []
        for i, cell in enumerate(nb.cells):
            fig = cell.get("metadata", {}).get("mystnb", {}).get("figure")
            if cell.cell_type != "code" or not fig:
                continue
            calls = sorted(set(re.findall(r"\b([a-z_]+\.[a-z_][a-z0-9_]*)\(", cell.source)))
            calls = [c for c in calls if c.split(".")[0] in _package_aliases(nb)]
            seconds = timings.get(md.stem, {}).get("cells_s", {}).get(str(i))
            name = fig.get("name", f"cell {i}")
            figures.append((name, caption_cell(str(fig.get("caption", "")), name), calls, seconds))
        if not figures:
            continue
        total = timings.get(md.stem, {}).get("total_s")
        lines += [
            f"## {_title(nb)}",
            "",
            f"{{doc}}`{md.stem}` — {len(figures)} figure(s); the whole chapter runs in "
            + (f"{total:.0f} s." if total is not None else "(not timed yet)."),
            "",
            # The PDF's column widths (the web page sizes its own): the package calls' long names
            # ran 124 pt off the page in a column LaTeX's tabulary made too narrow.
            "```{tabularcolumns} \\Y{0.17}\\Y{0.43}\\Y{0.28}\\Y{0.12}",
            "```",
            "",
            "| figure | what it shows | package calls in the cell | cell run time |",
            "|---|---|---|---|",
        ]
        for name, caption, calls, seconds in figures:
            call_text = ", ".join(f"`{c}`" for c in calls) or "(plotting only)"
            time_text = f"{seconds:.1f} s" if seconds is not None else "–"
            lines.append(f"| {{numref}}`{name}` | {caption} | {call_text} | {time_text} |")
        lines.append("")
    return "\n".join(lines)


_INLINE_MATH = re.compile(r"(\$[^$]+\$)")


def caption_cell(caption: str, name: str) -> str:
    """``caption`` as the cell of a Markdown table: on one line, ``|`` escaped in its text and its inline
    math ``$…$`` kept as it is (MyST typesets it in the cell).

    The table splits cells at every unescaped ``|``, math included, and an escaped ``\\|`` in math is TeX's
    ``‖``: a ``|`` inside math raises ``ValueError`` naming the figure ``name``.
    """
    parts = _INLINE_MATH.split(" ".join(caption.split()))
    for math in parts[1::2]:
        if "|" in math:
            raise ValueError(
                f"caption of {name}: a | in {math} would split the figure index's table cell; "
                "write \\lvert z\\rvert or \\lVert A\\rVert"
            )
    return "".join(p if i % 2 else p.replace("|", "\\|") for i, p in enumerate(parts))


def _package_aliases(nb) -> set[str]:
    """Names under which a notebook imported ``icl_book`` modules (``from icl_book import tasks`` → tasks)."""
    names = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for match in re.finditer(r"from icl_book(?:\.\w+)* import \(?([\w ,\n]+)\)?", cell.source):
            names.update(
                n.strip().split(" as ")[-1] for n in match.group(1).replace("\n", ",").split(",")
            )
        names.update(re.findall(r"import icl_book\.\w+ as (\w+)", cell.source))
    return {n for n in names if n}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.notebooks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    with_root = argparse.ArgumentParser(add_help=False)
    add_root_option(with_root)
    ex = sub.add_parser(
        "execute", parents=[with_root], help="execute chapters and write their .ipynb"
    )
    ex.add_argument("paths", nargs="*", type=Path, help="chapter sources (default: all)")
    sub.add_parser(
        "check-pairs",
        parents=[with_root],
        help="fail when a chapter's .ipynb is missing or stale",
    )
    sub.add_parser(
        "figure-index",
        parents=[with_root],
        help="write chapters/figures.md from the executed chapters",
    )
    tn = sub.add_parser(
        "time-nbval",
        parents=[with_root],
        help="time nbval per chapter at 1 and 2 threads (timings.json)",
    )
    tn.add_argument("paths", nargs="*", type=Path, help="chapter sources (default: all)")
    tn.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args(argv)
    if args.command == "execute" and args.paths and args.root is None:
        root = None  # the chapters are named: no repository needed
    else:
        try:
            root = find_root(args.root)
        except FileNotFoundError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.command == "figure-index":
        page = root / "chapters" / "figures.md"
        try:
            text = figure_index_markdown(root)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        page.write_text(text)
        print(f"wrote {page}")
        return 0
    if args.command == "time-nbval":
        record_nbval_times(args.paths or chapter_sources(root), tuple(args.threads), root=root)
        return 0
    if args.command == "execute":
        for md in args.paths or chapter_sources(root):
            print(f"executing {md} ...", flush=True)
            print(f"  wrote {execute_chapter(md)}", flush=True)
        return 0
    problems = pair_problems(root)
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"{len(chapter_sources(root))} chapter pairs in step")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
