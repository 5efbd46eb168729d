"""Stored numbers pass on a CPU of another kind: the numeric comparisons re-run one SIMD tier lower.

The stored artefacts (the sweep tables in ``icl_book/data/*.csv``, the shipped trained weights, the
explorer's teacher table and simulated runs, the executed chapters that nbval compares) were computed on
one machine and are checked against a fresh run on any other. NumPy dispatches ufuncs (``tanh``, ``exp``,
...) to the widest SIMD kernels the CPU has, torch picks AVX-512, AVX2 or plain kernels, and OpenBLAS a
kernel per CPU family: the last bits of a computed float differ between kinds of CPU (a stored
μ_1 compared as text failed on an AVX-512 machine). The rule (CONTRIBUTING.md, "Portable numerics"): no
computed float is compared as exact text or bits between a stored artefact and a fresh run; it is stored
or printed at the precision it has, or compared with a tolerance that its computation justifies.

:func:`lower_tier_environment` names the machine's highest SIMD tier and asks NumPy
(``NPY_DISABLE_CPU_FEATURES``), torch (``ATEN_CPU_CAPABILITY``) and OpenBLAS (``OPENBLAS_CORETYPE``) to
run without it, so that this machine computes like one a tier below: an AVX-512 machine like an AVX2 one,
an AVX2 machine like an SSE4 one. The slow test re-runs every stored-vs-fresh comparison in a subprocess
with that environment, after checking that the libraries really dropped the tier; the fast tests check
how the tier is chosen.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from .conftest import ROOT

# The numeric comparisons between a stored artefact and a fresh run (each holds on any CPU):
COMPARISONS = [
    "tests/test_sweep.py::test_stored_table_reproduces",
    "tests/test_explorer.py::test_teacher_table_and_simulation_plan_are_current",
    "tests/test_explorer.py::test_teacher_table_rows_are_the_hermite_numbers",
    "tests/test_explorer.py::test_a_committed_simulated_run_is_reproduced",
    "tests/test_notebooks.py::test_execution_is_reproducible_byte_for_byte",
]
# One fast chapter under nbval: chapter 1 computes its printed numbers with the dispatched ufuncs
# (Hermite coefficients of tanh, erf, ReLU, ... by quadrature).
CHAPTER = "chapters/01_hermite.ipynb"

# x86 SIMD tiers (NumPy 2.4 names the groups X86_V2/V3/V4; older NumPy names the features).
_X86_TIER = {"X86_V4": 4, "X86_V3": 3, "AVX2": 3, "FMA3": 3, "FMA4": 3, "AVX": 3, "F16C": 3}
_X86_TIER |= {"X86_V2": 2, "SSE3": 2, "SSSE3": 2, "SSE41": 2, "SSE42": 2, "POPCNT": 2}
# torch's capability one step down, and OpenBLAS's kernel family one step down.
_TORCH_BELOW = {"AVX512": "avx2", "AVX2": "default", "SVE256": "default"}
_OPENBLAS_BELOW = {
    "SapphireRapids": "Haswell",
    "Cooperlake": "Haswell",
    "SkylakeX": "Haswell",
    "Haswell": "Sandybridge",
    "Zen": "Sandybridge",
}


def _tier(name: str, dispatch: list[str]) -> int:
    if name.startswith("AVX512"):
        return 4
    if name in _X86_TIER:
        return _X86_TIER[name]
    return 10 + dispatch.index(name)  # other architectures: NumPy lists its targets in rising order


def numpy_targets_to_disable(features: dict, dispatch: list[str]) -> list[str]:
    """The highest tier of NumPy's dispatch targets that this CPU runs (``[]`` when it runs none).

    ``features`` is ``numpy._core._multiarray_umath.__cpu_features__`` (name -> available) and
    ``dispatch`` its ``__cpu_dispatch__`` (the targets compiled beyond the baseline, in rising order).
    """
    available = [t for t in dispatch if features.get(t)]
    if not available:
        return []
    top = max(_tier(t, dispatch) for t in available)
    return [t for t in available if _tier(t, dispatch) == top]


def lower_tier_environment() -> tuple[dict[str, str], dict]:
    """``(variables, expected)``: the environment that drops this machine's highest SIMD tier, and what
    the libraries must then report (``{"numpy_off": [...], "torch": ..., "openblas": ...}``)."""
    import threadpoolctl
    import torch
    from numpy._core import _multiarray_umath as umath

    env, expected = {}, {}
    off = numpy_targets_to_disable(umath.__cpu_features__, list(umath.__cpu_dispatch__))
    if off:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(off)
        expected["numpy_off"] = off
    below = _TORCH_BELOW.get(torch.backends.cpu.get_cpu_capability())
    if below:
        env["ATEN_CPU_CAPABILITY"] = below  # lowercase: an uppercase value warns on stderr
        expected["torch"] = below.upper()
    for lib in threadpoolctl.threadpool_info():
        if lib.get("internal_api") == "openblas" and lib.get("architecture") in _OPENBLAS_BELOW:
            env["OPENBLAS_CORETYPE"] = _OPENBLAS_BELOW[lib["architecture"]]
            expected["openblas"] = env["OPENBLAS_CORETYPE"]
            break
    return env, expected


_REPORT = """
import json, numpy, threadpoolctl, torch
from numpy._core import _multiarray_umath as umath
print(json.dumps({
    "features": {k: bool(v) for k, v in umath.__cpu_features__.items()},
    "torch": torch.backends.cpu.get_cpu_capability(),
    "openblas": [i.get("architecture") for i in threadpoolctl.threadpool_info()
                 if i.get("internal_api") == "openblas"],
}))
"""


def test_the_highest_tier_is_chosen():
    dispatch = ["X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR"]
    avx512 = {"X86_V3": True, "X86_V4": True, "AVX512_ICL": True, "AVX512_SPR": False}
    assert numpy_targets_to_disable(avx512, dispatch) == ["X86_V4", "AVX512_ICL"]
    avx2 = {"X86_V3": True, "X86_V4": False, "AVX512_ICL": False}
    assert numpy_targets_to_disable(avx2, dispatch) == ["X86_V3"]
    assert numpy_targets_to_disable({}, dispatch) == []
    # NumPy < 2.4 names features, not groups
    old = ["SSE41", "AVX2", "FMA3", "AVX512F", "AVX512_SKX"]
    have = {"SSE41": True, "AVX2": True, "FMA3": True, "AVX512F": False, "AVX512_SKX": False}
    assert numpy_targets_to_disable(have, old) == ["AVX2", "FMA3"]
    arm = ["ASIMDHP", "ASIMDDP", "SVE"]
    assert numpy_targets_to_disable({"ASIMDHP": True, "ASIMDDP": True}, arm) == ["ASIMDDP"]


def test_the_environment_drops_the_tier_in_every_library():
    """Each variable takes effect (a misspelt target would leave the run on the same kernels)."""
    env, expected = lower_tier_environment()
    run = subprocess.run(
        [sys.executable, "-c", _REPORT],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stderr == "", run.stderr  # NumPy warns here about a target it cannot disable
    got = json.loads(run.stdout)
    assert not any(got["features"][t] for t in expected.get("numpy_off", []))
    if "torch" in expected:
        assert got["torch"] == expected["torch"]
    if "openblas" in expected:
        assert expected["openblas"] in got["openblas"]


@pytest.mark.slow  # about a minute: two retrainings, three table rows, a chapter
def test_stored_numbers_pass_one_simd_tier_lower():
    env, _ = lower_tier_environment()
    print(f"re-running with {env or 'nothing to lower: this CPU runs no dispatched kernels'}")
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:xdist"]
    cmd += ["--nbval", "--nbval-sanitize-with", "nbval_sanitize.cfg", *COMPARISONS, CHAPTER]
    run = subprocess.run(
        cmd, cwd=ROOT, env=dict(os.environ, **env), capture_output=True, text=True, timeout=1200
    )
    assert run.returncode == 0, f"with {env}:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    # every comparison ran, none skipped: the tables' test runs once per stored table (3), nbval once
    # per code cell of the chapter
    import nbformat

    cells = nbformat.read(ROOT / CHAPTER, as_version=4).cells
    expected_tests = len(COMPARISONS) + 2 + sum(c.cell_type == "code" for c in cells)
    summary = run.stdout.strip().splitlines()[-1]
    assert re.search(rf"\b{expected_tests} passed\b", summary), summary
    assert not re.search(r"failed|skipped|deselected|error", summary), summary
