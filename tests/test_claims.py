"""Numbers the book shows are real numbers, and the claims that guard them can fail.

(a) No executed output or glued value of any chapter reads ``None``, ``nan`` or ``inf`` (``inf`` is allowed in
    a cell whose source says ``# expect inf``).
(b) No code cell ends with a bare ``glue(...)`` expression (its text would become a visible output).
(c) A chapter whose guarded number is perturbed fails ``make execute``'s executor and nbval with ``ClaimFailed``.
(d) The guards of chapter 3's range sentences (where k* peaks, when e_ICL grows without bound, the order of
    the limits) pass as the chapter has them and raise ``ClaimFailed`` with the number moved past the sentence.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest

from booktools import notebooks
from booktools.chapters import chapter_notebooks, chapter_sources

from .conftest import ROOT

CHAPTERS = ROOT / "chapters"
EXECUTED = chapter_notebooks(ROOT)
SOURCES = chapter_sources(ROOT)

BAD_WORD = re.compile(r"(?<![\w.])(None|nan|NaN|NAN|-?inf|-?Inf)(?![\w])")
INF_WORD = re.compile(r"^-?[iI]nf$")
TEXT_KEYS = ("text/plain", "text/html")


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _output_texts(output: dict):
    """(kind, text) for every piece of text an output shows or glues."""
    if output.get("output_type") == "stream":
        yield output.get("name", "stream"), _text(output.get("text", ""))
    glued = output.get("metadata", {}).get("scrapbook")
    for key, value in output.get("data", {}).items():
        if key.endswith(
            TEXT_KEYS
        ):  # plain keys and myst-nb's application/papermill.record/... keys
            kind = f"glue {glued['name']!r}" if glued else key
            yield kind, _text(value)


def output_problems(nb: dict, name: str = "notebook") -> list[str]:
    """One message per output or glued value that reads None, nan or (unexpectedly) inf."""
    problems = []
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        expect_inf = "# expect inf" in _text(cell.get("source", ""))
        for output in cell.get("outputs", []):
            for kind, text in _output_texts(output):
                for match in BAD_WORD.finditer(text):
                    if expect_inf and INF_WORD.match(match.group(1)):
                        continue
                    line = text[: match.start()].count("\n")
                    shown = text.splitlines()[line] if text.splitlines() else text
                    problems.append(
                        f"{name} cell {index} ({kind}): {match.group(1)!r} in {shown.strip()!r}"
                    )
    return problems


@pytest.mark.parametrize("path", EXECUTED, ids=lambda p: p.stem)
def test_no_output_reads_none_nan_or_inf(path):
    problems = output_problems(json.loads(path.read_text()), path.name)
    assert problems == [], "\n".join(problems)


def _code_cell(source: str, outputs: list) -> dict:
    return {"cell_type": "code", "source": source, "outputs": outputs, "metadata": {}}


def test_output_check_can_fail():
    stream = {
        "output_type": "stream",
        "name": "stdout",
        "text": ["tanh: μ_1 = None, E f² = 0.39\n"],
    }
    nan_plain = {"output_type": "execute_result", "data": {"text/plain": "nan"}, "metadata": {}}
    glued_inf = {
        "output_type": "display_data",
        "data": {"application/papermill.record/text/plain": "inf"},
        "metadata": {"scrapbook": {"name": "risk", "mime_prefix": "application/papermill.record/"}},
    }
    html = {"output_type": "display_data", "data": {"text/html": "<td>NaN</td>"}, "metadata": {}}
    fine = {
        "output_type": "stream",
        "name": "stdout",
        "text": "infinite, nonce, Nonetheless, 1.0e-12, info\n",
    }
    nb = {
        "cells": [
            _code_cell("print(x)", [stream, fine]),
            _code_cell("x", [nan_plain]),
            _code_cell("glue('risk', r)", [glued_inf]),
            _code_cell("display(t)", [html]),
            _code_cell(
                "r = float('inf')  # expect inf\nprint(r)",
                [{"output_type": "stream", "text": "inf\n"}],
            ),
            _code_cell("print(r)  # expect inf", [{"output_type": "stream", "text": "None\n"}]),
        ]
    }
    problems = output_problems(nb)
    assert len(problems) == 5, problems
    assert "'None'" in problems[0] and "cell 0" in problems[0]
    assert "nan" in problems[1] and "glue 'risk'" in problems[2] and "NaN" in problems[3]
    assert "cell 5" in problems[4]  # "# expect inf" allows inf, not None


# --- (b) no bare glue(...) at the end of a cell ---------------------------------------------------------------


def _python(source: str) -> str:
    """Drop IPython magics and shell escapes so that the cell parses as Python."""
    lines = source.splitlines()
    return "\n".join(
        line[: len(line) - len(line.lstrip())] + "pass"
        if line.lstrip().startswith(("%", "!"))
        else line
        for line in lines
    )


def _is_glue_call(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    func = node.value.func
    return (isinstance(func, ast.Name) and func.id == "glue") or (
        isinstance(func, ast.Attribute) and func.attr == "glue"
    )


def bare_glue_problems(sources: dict[str, str]) -> list[str]:
    """One message per code cell (name -> source) whose last statement is a bare ``glue(...)`` call."""
    problems = []
    for name, source in sources.items():
        body = ast.parse(_python(source)).body
        if body and _is_glue_call(body[-1]):
            problems.append(f"{name}: ends with a bare glue(...) call, line {body[-1].lineno}")
    return problems


def _chapter_code_cells(md: Path) -> dict[str, str]:
    cells = jupytext.read(md).cells
    return {
        f"{md.name} code cell {i}": c.source for i, c in enumerate(cells) if c.cell_type == "code"
    }


@pytest.mark.parametrize("md", SOURCES, ids=lambda p: p.stem)
def test_no_cell_ends_with_a_bare_glue(md):
    problems = bare_glue_problems(_chapter_code_cells(md))
    assert problems == [], "\n".join(problems)


def test_bare_glue_check_can_fail():
    sources = {
        "bare": "x = 1\nglue('x', x, '.1f')",
        "attribute": "book.glue('x', 1)",
        "magic": "%matplotlib inline\nglue('x', 1)",
        "printed": "print(f\"x = {glue('x', 1, '.1f')}\")",
        "assigned": "text = glue('x', 1)",
        "not last": "glue('x', 1)\nprint('done')",
    }
    problems = bare_glue_problems(sources)
    assert [p.split(":")[0] for p in problems] == ["bare", "attribute", "magic"]


# --- (c) a perturbed guarded number fails execution and nbval ------------------------------------------------

PROLOGUE = CHAPTERS / "00_prologue.md"
GUARD = 'claim(\n    bool(np.all(z_ols < 4)), "least squares: simulation and formula agree within 4 SE"\n)'


def _perturb(source: str) -> str:
    """Multiply the guarded number by 10 right before its claim."""
    assert source.count(GUARD) == 1, "the guarded claim moved: update GUARD"
    return source.replace(GUARD, "z_ols = 10 * z_ols  # perturbed\n" + GUARD)


@pytest.mark.slow
def test_perturbed_claim_fails_execution_and_nbval(tmp_path):
    committed = PROLOGUE.with_suffix(".ipynb").read_bytes()
    md = tmp_path / PROLOGUE.name
    md.write_text(_perturb(PROLOGUE.read_text()))
    with pytest.raises(
        Exception
    ) as info:  # nbclient's CellExecutionError carries the kernel's traceback
        notebooks.execute_chapter(md)
    assert "ClaimFailed" in str(info.value) and "least squares: simulation and formula" in str(
        info.value
    )
    assert not md.with_suffix(".ipynb").exists()  # a failed run writes no notebook
    assert PROLOGUE.with_suffix(".ipynb").read_bytes() == committed  # and chapters/ is untouched

    # nbval on the committed, executed notebook whose cell now carries the perturbation
    nb_path = tmp_path / PROLOGUE.with_suffix(".ipynb").name
    nb = json.loads(PROLOGUE.with_suffix(".ipynb").read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and GUARD in _text(c["source"]))
    cell["source"] = _perturb(_text(cell["source"]))
    nb_path.write_text(json.dumps(nb))
    shutil.copy(ROOT / "nbval_sanitize.cfg", tmp_path / "nbval_sanitize.cfg")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--nbval",
            "--nbval-sanitize-with",
            "nbval_sanitize.cfg",
            nb_path.name,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode != 0, result.stdout[-2000:]
    assert "ClaimFailed" in result.stdout


# --- (d) the guards of the range sentences fail when their number is moved past the sentence ------------

ASYMPTOTICS = CHAPTERS / "03_asymptotic_theory.md"
SETUP = "from icl_book.theory import icl_error, idg_error, wishart_stieltjes\n" + (
    "from icl_book.book import claim, glue\nfrom scipy.optimize import minimize_scalar\n"
    "import numpy as np\nRHO_A = 0.1\n"
)
# (the cell's marker, the line to perturb, its perturbed form, the sentence that must then fail)
RANGE_GUARDS = {
    "k* peak": (
        "def k_star_peak(x):",
        "peaks = np.array([k_star_peak(x) for x in x_peak])",
        "peaks = 1.05 * np.array([k_star_peak(x) for x in x_peak])",
        "k* is largest at κ = 1/(1 + x*), for every x*",
    ),
    "unbounded growth": (
        "def growth_rate(tau, kappa, noise_var=RHO_A):",
        "    share = max(0.0, min(1.0, tau) - kappa)",
        "    share = max(0.0, 1.0 - kappa)",  # the old sentence: κ < 1 is enough
        "e_ICL grows without bound exactly when κ < min(1, τ)",
    ),
    "order of limits": (
        "def gap_at(alpha, tau, kappa=0.5, noise_var=RHO):",
        "claim(gap_at(1e6, 1e3) > 2,",
        "claim(gap_at(1e6, 1e3) < 0.6,",  # the old sentence: the limit along any path
        "along α = τ² the noisy gap grows instead",
    ),
}


def _guard_cell(marker: str) -> str:
    cells = [c.source for c in jupytext.read(ASYMPTOTICS).cells if c.cell_type == "code"]
    found = [c for c in cells if marker in c]
    assert len(found) == 1, f"the guarded cell moved: update RANGE_GUARDS ({marker!r})"
    return found[0]


@pytest.mark.parametrize("case", RANGE_GUARDS.values(), ids=RANGE_GUARDS.keys())
def test_a_range_guard_fails_when_its_number_moves(case):
    """Each guard runs in a kernel as the chapter has it (passes) and perturbed (raises ClaimFailed)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    marker, line, perturbed, sentence = case
    source = _guard_cell(marker)
    assert source.count(line) == 1, f"the guarded line moved: update RANGE_GUARDS ({line!r})"
    setup = SETUP + "RHO = 0.01\n"
    for code, fails in ((source, False), (source.replace(line, perturbed), True)):
        nb = nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell(setup), nbformat.v4.new_code_cell(code)]
        )
        client = NotebookClient(nb, timeout=300, kernel_name="python3")
        if not fails:
            client.execute()
            continue
        with pytest.raises(CellExecutionError) as info:
            client.execute()
        assert "ClaimFailed" in str(info.value) and sentence in str(info.value)
