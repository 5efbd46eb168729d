"""The checks of ``depth-ex<N>``, the exercises of ``chapters/06_depth_block_coordinate_descent.md``."""

from __future__ import annotations

from math import ceil, comb

import numpy as np

from ..estimators import (
    block_coordinate_gd_predict,
)
from ..features import partition_features
from ._core import (
    CheckFailed,
    Parts,
    Passed,
    _graded_in_parts,
    _inputs_rng,
    _reports_unanswered_in,
    call_answer,
    passed,
    require_close,
)

__all__ = ["check_depth_ex2", "check_depth_ex3"]


@_graded_in_parts
def check_depth_ex2(bcd_predict) -> Passed:
    """``bcd_predict(xs, ys, x_query, feature_blocks, eta, n_cycles) -> (B,)``: cyclic block-coordinate GD."""

    label = "depth-ex2"
    rng = _inputs_rng(label, 606)  # graded: the prompts and steps drawn afresh
    graded = rng is not None
    if rng is None:
        rng = np.random.default_rng(606)
    cases = [(1, 3, 1, 6, 0.3, 1), (2, 2, 2, 15, 0.5, 3), (3, 3, 4, 25, 0.2, 2)]
    if graded:
        cases = [
            (d, p, size, int(rng.integers(4, 30)), round(float(rng.uniform(0.1, 0.6)), 3), c)
            for d, p, size, _, _, c in cases
        ]
    parts = Parts(label)
    for d, p, size, n, eta, cycles in cases:
        with parts.case(f"d = {d}, p = {p}, N = {n}, η = {eta}, {cycles} cycles"):
            blocks = partition_features(d, p, size, kind="legendre")
            xs = rng.uniform(-1, 1, (5, n, d))
            ys = rng.standard_normal((5, n))
            xq = rng.uniform(-1, 1, (5, d))
            got = call_answer(label, bcd_predict, xs, ys, xq, blocks, eta, cycles)
            expected = block_coordinate_gd_predict(xs, ys, xq, blocks, eta, cycles)
            require_close(
                label,
                got,
                expected,
                rtol=1e-9,
                atol=1e-12,
                hint="start from r = y and ŷ = 0; visit the blocks in order, n_cycles times; each step uses the "
                "current residuals, the factor η/N, and updates both the residuals and the query's prediction.",
            )
    return parts.passed()


# All or nothing, no parts: one layer per cycle is the answer of many (d, p, width), so a
# constant 1 would pass two or three of the seven cases.
def check_depth_ex3(min_layers) -> Passed:
    """``min_layers(dim, degree, width) -> int``: ``⌈(C(d+p, p) − 1) / (width − d − 2)⌉`` layers per cycle."""

    label = "depth-ex3"
    cases = [(1, 1, 4), (2, 3, 6), (3, 3, 9), (3, 2, 14), (5, 3, 10), (10, 2, 20), (4, 4, 7)]
    drawn = _inputs_rng(label, 0)
    if (
        drawn is not None
    ):  # graded: fresh (d, p, width), every width leaving at least one scratch slot
        cases = [(1, 1, 4)]
        for _ in range(6):
            d, p = int(drawn.integers(1, 11)), int(drawn.integers(1, 5))
            cases.append((d, p, d + 2 + int(drawn.integers(1, 20))))
    for d, p, width in cases:
        got = call_answer(label, min_layers, d, p, width)
        if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
            raise CheckFailed(f"{label}: return an integer, got {type(got).__name__}")
        if int(got) != ceil((comb(d + p, p) - 1) / (width - d - 2)):
            raise CheckFailed(
                f"{label}: not quite for d = {d}, p = {p}, width = {width}. Hint: how many scratch slots does a "
                "token of this width have, and how many features of degree 1..p must be written in one cycle?"
            )
    return passed(label)


_reports_unanswered_in(globals())  # keep last: wraps every check defined above
