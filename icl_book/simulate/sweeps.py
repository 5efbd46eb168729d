"""The sweep engine: many ``(point, seed)`` pretraining runs through any :class:`concurrent.futures.Executor`.

:func:`~icl_book.simulate.sweep` validates the points, sends one task per ``(point, seed)`` to the executor and
tabulates the exact errors with their mean and standard error over seeds (:func:`icl_book.stats.mean_sem`, the
package's one mean ± standard-error helper): the same table, bit for bit, on every executor (chapters 3 and 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from .._blas import OneBlasThread
from .._declare import Free, declare
from .._validate import choice, nonnegative_float, nonnegative_int, positive_float, positive_int
from ..hermite import get_link
from ..stats import mean_sem
from ..theory import _teacher, nonlinear_error_of_gamma
from .pretrain import gamma_errors, pretrain_reduced_lsa
from .sizes import problem_sizes
from .solver import _route

#: Keys a sweep point may carry — the arguments of :func:`pretrain_reduced_lsa` (``dim``, ``alpha`` and ``tau``
#: are required).
SWEEP_KEYS = (
    *("dim", "alpha", "tau", "kappa", "noise_var", "ridge", "link"),
    *("tol", "max_iter", "solver", "sampler"),
)
_SWEEP_REQUIRED = ("dim", "alpha", "tau")


class SweepResult(NamedTuple):
    """One row of :func:`sweep`'s table: a parameter point, its per-seed errors and their mean and SE.

    ``link`` is the teacher's name (``None`` for the linear teacher; ``repr`` of an unnamed callable);
    ``icl``/``idg`` hold one exact error per seed, in the order of ``seeds``; ``*_sem`` is the standard error of
    the mean over seeds (``s/√S``, ``nan`` for one seed); every ``idg*`` is ``nan`` when ``κ = ∞``.
    ``solver`` is the route every seed's solve took (``"pcg"`` or ``"dense"``: the point's ``solver``, or
    the one the cost model of :func:`solve_reduced_ridge` picked for ``"auto"`` from the sizes alone).
    """

    dim: int
    alpha: float
    tau: float
    kappa: float
    noise_var: float
    ridge: float
    link: str | None
    seeds: tuple[int | tuple[int, ...], ...]
    icl: tuple[float, ...]
    idg: tuple[float, ...]
    icl_mean: float
    icl_sem: float
    idg_mean: float
    idg_sem: float
    solver: str


def _sweep_point(index: int, point) -> dict:
    """Validate one point of :func:`sweep` (a mapping of :data:`SWEEP_KEYS`); return a plain, picklable dict."""
    where = f"points[{index}]"
    if not isinstance(point, Mapping):
        raise TypeError(f"{where} must be a mapping of {SWEEP_KEYS}, got {type(point).__name__}")
    unknown = sorted(set(point) - set(SWEEP_KEYS), key=str)
    if unknown:
        raise ValueError(f"{where} has unknown keys {unknown}; accepted keys are {SWEEP_KEYS}")
    missing = [k for k in _SWEEP_REQUIRED if k not in point]
    if missing:
        raise ValueError(f"{where} lacks the required keys {missing}")
    p = {
        "dim": positive_int(f"{where}['dim']", point["dim"]),
        "alpha": positive_float(f"{where}['alpha']", point["alpha"]),
        "tau": positive_float(f"{where}['tau']", point["tau"]),
        "noise_var": nonnegative_float(f"{where}['noise_var']", point.get("noise_var", 0.0)),
        "ridge": nonnegative_float(f"{where}['ridge']", point.get("ridge", 0.0)),
        "tol": positive_float(f"{where}['tol']", point.get("tol", 1e-10)),
        "max_iter": None
        if point.get("max_iter") is None
        else positive_int(f"{where}['max_iter']", point["max_iter"]),
    }
    p["solver"] = choice(
        f"{where}['solver']", point.get("solver", "auto"), ("auto", "pcg", "dense")
    )
    p["sampler"] = choice(
        f"{where}['sampler']", point.get("sampler", "labels"), ("labels", "wishart")
    )
    kappa = point.get("kappa", np.inf)
    if isinstance(kappa, (bool, np.bool_, str)) or not isinstance(kappa, (int, float, np.number)):
        raise TypeError(f"{where}['kappa'] must be a number > 0 or np.inf, got {kappa!r}")
    kappa = float(kappa)
    if not kappa > 0:
        raise ValueError(f"{where}['kappa'] must be > 0 (np.inf allowed), got {kappa!r}")
    p["kappa"] = kappa
    link = point.get("link")
    if isinstance(link, str):
        try:
            get_link(link)
        except ValueError as err:
            raise ValueError(f"{where}['link']: {err}") from None
    elif link is not None and not callable(link):
        raise TypeError(
            f"{where}['link'] must be None, a registered link name or a callable, got {type(link).__name__}"
        )
    p["link"] = link
    if p["sampler"] == "wishart" and link is not None:
        raise ValueError(
            f"{where}['sampler'] = 'wishart' is for the linear teacher; drop 'link' or use 'labels'"
        )
    problem_sizes(p["dim"], p["alpha"], p["tau"], kappa)  # sizes that round to 0 raise here
    return p


def _seed(where: str, seed) -> int | tuple[int, ...]:
    """A seed of :func:`sweep`: a non-negative integer, or a non-empty tuple of them (the entropy of a
    :class:`numpy.random.SeedSequence`, as :func:`numpy.random.default_rng` takes it)."""
    if isinstance(seed, (tuple, list)):
        if not seed:
            raise ValueError(
                f"{where} must be an integer >= 0 or a non-empty tuple of them, got {seed!r}"
            )
        return tuple(nonnegative_int(f"{where}[{j}]", s) for j, s in enumerate(seed))
    return nonnegative_int(where, seed)


def _sweep_task(point: dict, seed: int | tuple[int, ...]) -> tuple[float, float]:
    """One simulation of :func:`sweep`: pretrain with ``default_rng(seed)``, return the exact ``(e_ICL, e_IDG)``."""
    link = _teacher(point["link"], allow_none=True)
    # One BLAS thread inside each sweep task (:mod:`icl_book._blas`, threadpoolctl). Multi-threaded BLAS
    # splits sums differently, so the same simulation run with 1 or 2 BLAS threads differs in its last bits
    # (measured: ~1e-9 relative in ``e_ICL`` at d = 80); one thread makes a task's numbers independent of the
    # caller's and the worker's thread settings, on one machine. The limit is reference-counted across
    # threads (a thread-pool sweep shares the process's BLAS).
    with OneBlasThread():
        gamma, pool = pretrain_reduced_lsa(
            point["dim"],
            point["alpha"],
            point["tau"],
            point["kappa"],
            point["noise_var"],
            point["ridge"],
            link=link,
            rng=np.random.default_rng(seed),
            tol=point["tol"],
            max_iter=point["max_iter"],
            solver=point["solver"],
            sampler=point["sampler"],
        )
        ell, _, _ = problem_sizes(point["dim"], point["alpha"], point["tau"], point["kappa"])
        if link is None:
            errors = gamma_errors(gamma, ell / point["dim"], point["noise_var"], pool)
            return float(errors.icl), float(errors.idg)
        alpha = ell / point["dim"]
        icl = nonlinear_error_of_gamma(gamma, link, alpha, point["noise_var"])
        idg = (
            float("nan")
            if pool is None
            else nonlinear_error_of_gamma(gamma, link, alpha, point["noise_var"], pool)
        )
        return float(icl), float(idg)


def _link_name(link) -> str | None:
    if link is None or isinstance(link, str):
        return link
    return getattr(link, "name", None) or getattr(link, "__name__", None) or repr(link)


@declare(
    points=Free(
        "each point is checked by its keys here, then by pretrain_reduced_lsa's declaration"
    ),
    seeds=Free("a list of distinct seeds or seed tuples, checked one by one in the body"),
    executor=Free("any object with submit(); None runs the points in this process"),
)
def sweep(points, *, seeds, executor=None) -> list[SweepResult]:
    """Pretrain and evaluate the reduced linear attention at many parameter points and seeds.

    Every ``(point, seed)`` pair is one task: :func:`pretrain_reduced_lsa` with ``rng=np.random.default_rng(seed)``,
    then the exact errors of the learned ``Γ`` (:func:`gamma_errors` for the linear teacher,
    :func:`icl_book.theory.nonlinear_error_of_gamma` for a link). Tasks go to ``executor.submit`` — any
    :class:`concurrent.futures.Executor`: a ``ProcessPoolExecutor`` on one machine, or a dask cluster's
    ``distributed.Client(...).get_executor()`` unchanged. The table is the same, bit for bit, whatever the
    executor: each task seeds its own generator, runs its BLAS on one thread (``icl_book._blas.OneBlasThread``), and
    results are ordered by ``(point, seed)``, never by completion.

    Parameters
    ----------
    points
        A list of mappings with keys from :data:`SWEEP_KEYS`: ``dim``, ``alpha``, ``tau`` (required), ``kappa``
        (default ``np.inf``), ``noise_var``, ``ridge`` (default 0), ``link`` (``None`` = linear teacher, a name in
        :data:`icl_book.hermite.LINKS`, or a callable; process and cluster executors need it picklable, so prefer
        names), ``tol``, ``max_iter``, ``solver`` (default ``"auto"``) and ``sampler`` (default ``"labels"``),
        passed to :func:`pretrain_reduced_lsa`.
    seeds
        A non-empty list of distinct seeds: non-negative integers, or tuples of them (the entropy of a
        :class:`numpy.random.SeedSequence`, e.g. ``(2026, point, seed)`` for streams keyed by more than one
        index, as ``booktools.explorer_data`` uses).
    executor
        ``None`` (serial, in this process) or an object with ``submit(fn, *args) -> Future``.

    Returns
    -------
    list of SweepResult
        One row per point, in the order of ``points``.

    Examples
    --------
    >>> rows = sweep([{"dim": 10, "alpha": 1.0, "tau": 2.0, "noise_var": 0.1}], seeds=[0, 1])
    >>> len(rows), len(rows[0].icl)
    (1, 2)
    """
    if isinstance(points, (str, bytes)) or not hasattr(points, "__iter__"):
        raise TypeError(f"points must be a list of mappings, got {type(points).__name__}")
    points = [_sweep_point(i, p) for i, p in enumerate(points)]
    if not points:
        raise ValueError("points must contain at least one parameter mapping")
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be a list of integers, got {type(seeds).__name__}")
    seeds = tuple(_seed(f"seeds[{i}]", s) for i, s in enumerate(seeds))
    if not seeds:
        raise ValueError("seeds must contain at least one integer")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {list(seeds)}")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise TypeError(
            f"executor must be None or a concurrent.futures.Executor (with submit), got {type(executor).__name__}"
        )
    if executor is None:
        results = [[_sweep_task(p, s) for s in seeds] for p in points]
    else:
        futures = [[executor.submit(_sweep_task, p, s) for s in seeds] for p in points]
        results = [[f.result() for f in row] for row in futures]
    table = []
    for p, row in zip(points, results, strict=True):
        _, n, _ = problem_sizes(p["dim"], p["alpha"], p["tau"], p["kappa"])
        icl = tuple(r[0] for r in row)
        idg = tuple(r[1] for r in row)
        summary = []  # icl_mean, icl_sem, idg_mean, idg_sem, as SweepResult documents them
        for column in (icl, idg):
            if np.all(np.isnan(column)):  # idg when κ = ∞: no in-distribution error to average
                summary += [float("nan"), float("nan")]
            elif len(column) == 1:  # one seed: its error, and no spread to estimate an SE from
                summary += [column[0], float("nan")]
            else:
                summary += mean_sem(column)[:2]
        table.append(
            SweepResult(
                p["dim"],
                p["alpha"],
                p["tau"],
                p["kappa"],
                p["noise_var"],
                p["ridge"],
                _link_name(p["link"]),
                seeds,
                icl,
                idg,
                *summary,
                _route(p["solver"], n, p["dim"], p["tol"]),
            )
        )
    return table
