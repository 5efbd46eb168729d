"""Monte Carlo summaries: the sample mean and its standard error, written once.

Every simulation of the book reports a mean with its standard error: the chapters' error bars and
agreement checks (chapters 0 and 2) and the sweep tables' columns over seeds
(:func:`icl_book.simulate.sweep`). They all call :func:`mean_sem`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._declare import Array, Integer, OrNone, declare
from ._validate import as_array, integer

__all__ = ["MeanSEM", "mean_sem"]


class MeanSEM(NamedTuple):
    """What :func:`mean_sem` returns: a sample mean, its standard error and the sample size.

    Unpacks as ``mean, sem, n = mean_sem(values)``; ``mean_sem(values)[:2]`` is the pair ``(mean, sem)``.
    """

    #: The sample mean (a float, or an array over the axes that remain when ``axis`` is given).
    mean: float | np.ndarray
    #: Its standard error ``s/√n`` (``s`` with ``ddof=1``), of the same shape as ``mean``.
    sem: float | np.ndarray
    #: The number of values each mean averages (the length along ``axis``).
    n: int


@declare(
    values=Array(ndim=None),
    axis=OrNone(Integer()),
)
def mean_sem(values, *, axis: int | None = None) -> MeanSEM:
    """The sample mean of ``values`` and its standard error ``s/√n``.

    ``s`` is the sample standard deviation (``ddof=1``, the unbiased variance's square root) and ``n``
    the number of values averaged. A 95 % confidence half-width is ``1.96 * mean_sem(values).sem``.

    Parameters
    ----------
    values : array_like of real numbers
        Independent draws (e.g. squared errors of ``(B,)`` prompts, or the errors of ``S`` seeds). Every
        entry must be finite: a NaN or infinite draw has no mean to report (summarise the finite ones, or
        say why there are none, where it is called).
    axis : int or None, keyword-only
        ``None`` (default): summarise all entries. An integer (negative counts from the end):
        summarise along that axis only.

    Returns
    -------
    MeanSEM
        ``(mean, sem, n)``. With ``axis=None``, ``mean`` and ``sem`` are floats and ``n = values.size``;
        with ``axis``, they are arrays of ``values``' shape without that axis and ``n =
        values.shape[axis]``.

    Raises
    ------
    ValueError or TypeError
        Naming ``values`` when it is not an array of finite real numbers (NaN, inf, bool, str and complex
        are refused) or holds fewer than two values along ``axis`` (a standard error needs two); naming
        ``axis`` when it is not ``None`` or an integer in range.

    Examples
    --------
    >>> mean_sem([1.0, 2.0, 3.0, 6.0])
    MeanSEM(mean=3.0, sem=1.0801234497346435, n=4)
    >>> table = np.array([[1.0, 10.0], [3.0, 14.0]])  # two seeds (rows) of two columns
    >>> summary = mean_sem(table, axis=0)
    >>> summary.mean, summary.sem, summary.n
    (array([ 2., 12.]), array([1., 2.]), 2)
    """
    arr = as_array("values", values)
    if axis is None:
        n = arr.size
        where = ""
    else:
        if arr.ndim == 0:
            raise ValueError(
                f"axis must be None for a single number (values has no axes), got {axis!r}"
            )
        axis = integer("axis", axis, minimum=-arr.ndim, maximum=arr.ndim - 1)
        n = arr.shape[axis]
        where = f" along axis {axis}"
    if n < 2:
        raise ValueError(
            f"values must hold at least 2 values{where} (a standard error needs two), "
            f"got {n} of shape {arr.shape}"
        )
    # Scaled by a power of two (exact) so that squares neither overflow (1e300) nor underflow (1e-300):
    # the same bits as unscaled wherever the unscaled sums stay in range.
    peak = float(np.max(np.abs(arr))) if arr.size else 0.0
    scale = 2.0 ** -np.frexp(peak)[1] if peak > 0 else 1.0
    unit = arr * scale
    mean = unit.mean(axis=axis) / scale
    sem = unit.std(axis=axis, ddof=1) / np.sqrt(n) / scale
    if axis is None:
        return MeanSEM(float(mean), float(sem), n)
    return MeanSEM(mean, sem, n)
