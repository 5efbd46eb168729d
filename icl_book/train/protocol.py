"""The book's convergence protocol: train a :class:`~icl_book.train.BatchedTrainer` until each run converges.

The validation error (mean squared error at the query on a fixed held-out set) is measured at
``first_check``, ``2·first_check``, ``4·first_check``, … steps. A run is **converged** at the first
checkpoint that is at least ``min_steps`` and where each of the **last two doublings** changed the
validation error by at most one standard error of that change, measured on the same validation prompts
(a *paired* standard error). A run that reaches ``max_steps`` first stops there, flagged "at the bound"
with its last changes; a run whose loss becomes non-finite stops, flagged "diverged". No run is ever
relabelled by hand: :func:`~icl_book.train.train_to_convergence` re-decides every run of a
checkpoint it resumes.

Why two doublings past a minimum: with one test, a run still improving by one standard error per
doubling passes half of the time (``Φ(0) − Φ(−2) = 0.48``), and a run that has not left its warm-up and
the hold of its peak learning rate can sit on a plateau.
:func:`~icl_book.train.false_convergence_rate` simulates how often each rule calls a run converged
that is in fact still falling (``tests/test_train_protocol.py`` checks it against closed forms).

A validation set can have several parts (e.g. one per context length of a run trained on a mix of
lengths): the error is the mean of the parts' mean errors, its standard errors are the stratified ones,
and the record keeps each part's error.
"""

from __future__ import annotations

import math
import os
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from .._declare import (
    Array,
    Cost,
    Free,
    Instance,
    Integer,
    Interval,
    Options,
    OrNone,
    Rng,
    Text,
    declare,
)
from .._declare import Callable as CallableArg
from .._validate import (
    ArgumentTypeError,
    _raw_array,
    as_array,
    finite_values,
    nonnegative_int,
    positive_int,
)
from .batched import BatchedTrainer

__all__ = [
    "ConvergenceRecord",
    "converged_at",
    "decide",
    "check_steps",
    "false_convergence_rate",
    "train_to_convergence",
]

#: How many consecutive doublings must each change the validation error by at most one paired SE.
FLAT_DOUBLINGS = 2


@dataclass
class ConvergenceRecord:
    """One member's run under the convergence protocol of :func:`train_to_convergence`.

    Attributes
    ----------
    name
        The member's name.
    eval_steps
        ``(k,)`` the checkpoints reached (``first_check · 2^j``).
    val_mse, val_se
        ``(k,)`` validation mean squared error at those checkpoints and its standard error.
    change_se
        ``(k,)`` the standard error of the change since the previous checkpoint, on the same validation
        prompts (``nan`` where the previous checkpoint's per-prompt errors are not known).
    val_mse_parts
        ``(k, P)`` the mean squared error of each part of the validation set (one part: ``P = 1``;
        a run trained on a mix of context lengths: one part per length, in the order of ``val_parts``).
    val_parts
        ``(P,)`` the parts' labels (e.g. ``"N25"``).
    val_key
        A fingerprint of the validation set the curve was measured on. Resumed with another set, the
        record restarts its curve at the run's current step (a change between two sets means nothing).
    min_steps
        The minimum number of steps before the run can be called converged.
    converged
        ``True`` once :func:`converged_at` holds; ``False`` when the run stopped at ``max_steps``
        without that (or has not finished).
    finished
        Whether the run has stopped (converged, at ``max_steps``, or diverged).
    diverged_at
        The step at which the run's training loss or validation error became NaN or infinite (0: it
        never did). A diverged run stops there, with the weights of its last finite step, flagged.
    """

    name: str
    eval_steps: list = field(default_factory=list)
    val_mse: list = field(default_factory=list)
    val_se: list = field(default_factory=list)
    change_se: list = field(default_factory=list)
    val_mse_parts: list = field(default_factory=list)
    val_parts: list = field(default_factory=list)
    val_key: int = 0
    min_steps: int = 0
    converged: bool = False
    finished: bool = False
    diverged_at: int = 0

    @property
    def steps(self) -> int:
        """Steps trained (the last checkpoint reached)."""
        return self.eval_steps[-1] if self.eval_steps else 0

    @property
    def changes(self) -> list[float]:
        """Every doubling's change of the validation error in paired standard errors
        (``(mse(2s) − mse(s)) / se``; negative: it fell; ``nan`` where unknown)."""
        out = []
        for k in range(1, len(self.val_mse)):
            se = self.change_se[k] if k < len(self.change_se) else math.nan
            delta = self.val_mse[k] - self.val_mse[k - 1]
            if not math.isfinite(se):
                out.append(math.nan)
            elif se == 0:
                out.append(0.0 if delta == 0 else math.copysign(math.inf, delta))
            else:
                out.append(delta / se)
        return out

    @property
    def trend(self) -> str:
        """How the last doubling changed the error, in words.

        ``"falling"`` (by more than one paired SE), ``"rising"`` (by more than one, reported as such,
        never as still falling), ``"flat"``, or ``"unknown"``."""
        z = self.changes[-1] if self.changes else math.nan
        if not math.isfinite(z) and not math.isinf(z):
            return "unknown"
        return "falling" if z < -1 else "rising" if z > 1 else "flat"


def _diverged(rec: ConvergenceRecord, step: int, log) -> None:
    rec.diverged_at, rec.finished, rec.converged = step, True, False
    if log is not None:
        log(f"{rec.name} diverged at step {step}: stopped with its last finite weights")


@declare(
    val_mse=Array(ndim=1),
    change_se=Free("1-d, nan where a change is unknown: checked in the body"),
    eval_steps=OrNone(Array(ndim=1)),
    min_steps=Integer(0, None),
)
def converged_at(val_mse, change_se, eval_steps=None, *, min_steps: int = 0) -> bool:
    """The protocol's test: past ``min_steps``, the last two doublings each changed the error by ≤ 1 SE.

    ``val_mse`` holds the validation errors at consecutive checkpoints ``s, 2s, 4s, …``, ``change_se``
    the standard errors of the changes between them, paired over the same validation prompts, and
    ``eval_steps`` the checkpoints' steps (needed when ``min_steps > 0``). Converged when the last
    checkpoint is at least ``min_steps`` and ``|mse(k) − mse(k − 1)| <= change_se(k)`` for each of the
    last ``FLAT_DOUBLINGS`` (two) checkpoints ``k``.

    The *paired* standard error is the yardstick because the prompts' own spread (squared errors on
    quadratic targets are heavy-tailed) makes the plain standard error of a mean two to eight times
    larger. Two doublings, not one: one test calls a run still falling by one SE per doubling converged
    about half of the time (:func:`false_convergence_rate`). No criterion tells a long plateau from the
    end of training; the records keep every curve.
    """
    val_mse = as_array("val_mse", val_mse, 1)
    # change_se is nan where the previous checkpoint's errors are not known (its first entry)
    change_se = _raw_array("change_se", change_se).astype(np.float64, copy=False)
    if change_se.ndim != 1:
        raise ValueError(f"change_se must have 1 dimension, got shape {change_se.shape}")
    finite_values("change_se (apart from its nan entries)", change_se[~np.isnan(change_se)])
    if len(change_se) != len(val_mse):
        raise ValueError(
            "val_mse and change_se must have one entry per checkpoint each, got "
            f"{len(val_mse)} and {len(change_se)}"
        )
    min_steps = nonnegative_int("min_steps", min_steps)
    if eval_steps is not None:
        eval_steps = as_array("eval_steps", eval_steps, 1)
        if len(eval_steps) != len(val_mse):
            raise ValueError(
                "val_mse and eval_steps must have one entry per checkpoint each, got "
                f"{len(val_mse)} and {len(eval_steps)}"
            )
    elif min_steps:
        raise ValueError("min_steps needs eval_steps (the checkpoints' steps)")
    if len(val_mse) < FLAT_DOUBLINGS + 1:
        return False
    if min_steps and eval_steps[-1] < min_steps:
        return False
    for k in range(len(val_mse) - FLAT_DOUBLINGS, len(val_mse)):
        if not math.isfinite(change_se[k]):
            return False
        if abs(val_mse[k] - val_mse[k - 1]) > change_se[k]:  # an unchanged run: 0 <= 0
            return False
    return True


def _rate_cost(a) -> tuple[float, float]:
    n = float(a["trials"]) * (float(a["checks"]) + 1)
    return 20 * n, 9 * n  # a normal draw and a comparison per entry; bytes of the draws and flags


@declare(
    drift=Interval(0.0, 1e6),
    rule=Options(("one doubling", "two doublings")),
    checks=Integer(1, None),
    trials=Integer(1, None),
    rng=Rng(),
    cost=Cost(_rate_cost, "trials × (checks + 1)"),
)
def false_convergence_rate(
    drift: float,
    *,
    rule: str = "two doublings",
    checks: int = 6,
    trials: int = 100_000,
    rng: np.random.Generator,
) -> float:
    """How often a rule calls a run converged that is still falling by ``drift`` SE per doubling.

    Each of ``checks`` consecutive decisions sees the change of one doubling in units of its paired
    standard error, ``z = −drift + ε`` with independent ``ε ~ N(0, 1)``; the run is called converged at
    the first decision where ``|z| <= 1`` (``rule="one doubling"``, the book's earlier rule) or where
    the last two changes both are (``"two doublings"``, :func:`converged_at`; its first decision also
    sees the doubling before it). Returns the fraction of ``trials`` runs called converged at some
    decision: a false "converged", since every run is still falling.
    """
    if rule not in ("one doubling", "two doublings"):
        raise ValueError(f"rule must be 'one doubling' or 'two doublings', got {rule!r}")
    drift = float(drift)
    if not math.isfinite(drift) or drift < 0:
        raise ValueError(f"drift must be a finite number >= 0, got {drift}")
    checks = positive_int("checks", checks)
    trials = positive_int("trials", trials)
    extra = 1 if rule == "two doublings" else 0
    flat = np.abs(rng.standard_normal((trials, checks + extra)) - drift) <= 1
    if extra:
        flat = flat[:, 1:] & flat[:, :-1]
    return float(flat.any(axis=1).mean())


@declare(first_check=Integer(1, None), max_steps=Integer(1, None))
def check_steps(first_check: int, max_steps: int) -> list[int]:
    """The protocol's checkpoints ``first_check · 2^j <= max_steps`` (``max_steps`` must be one)."""
    first_check = positive_int("first_check", first_check)
    max_steps = positive_int("max_steps", max_steps)
    out = [first_check]
    while out[-1] < max_steps:
        out.append(2 * out[-1])
    if out[-1] != max_steps:
        raise ValueError(
            f"max_steps must be first_check times a power of two, got {max_steps} "
            f"with first_check = {first_check}"
        )
    return out


def _parts(name: str, value) -> tuple:
    """A validation set as a tuple of ``(label, Prompts)`` parts."""
    if isinstance(value, dict):
        parts = tuple((str(k), v) for k, v in value.items())
    elif hasattr(value, "y_query"):
        parts = (("all", value),)
    else:
        raise ArgumentTypeError(
            f"val_prompts[{name!r}] must be a Prompts or a dict {{label: Prompts}}, "
            f"got {type(value).__name__}"
        )
    if not parts:
        raise ValueError(f"val_prompts[{name!r}] must hold at least one part")
    for label, p in parts:
        if np.asarray(p.y_query).size < 2:
            raise ValueError(f"val_prompts[{name!r}] part {label!r} must hold at least 2 prompts")
    return parts


def _fingerprint(parts) -> int:
    """A checksum of a validation set (labels and every array's bytes)."""
    key = 0
    for label, p in parts:
        key = zlib.crc32(label.encode(), key)
        for a in (p.xs, p.ys, p.x_query, p.y_query):
            key = zlib.crc32(np.ascontiguousarray(a, dtype=np.float64).tobytes(), key)
    return key


def _val_errors(trainer, index, parts) -> list[np.ndarray]:
    """Member ``index``'s per-prompt squared errors on each part of its validation set."""
    return [(trainer.predict(index, p) - np.asarray(p.y_query)) ** 2 for _, p in parts]


def _stratified(values: list[np.ndarray]) -> tuple[float, float]:
    """Mean of the parts' means and its standard error (``√(Σ s_p² / n_p) / P``, ``ddof = 1``)."""
    from ..stats import mean_sem

    stats = [mean_sem(v) for v in values]
    mean = float(np.mean([s.mean for s in stats]))
    se = math.sqrt(sum(s.sem**2 for s in stats)) / len(stats)
    return mean, se


def _restart(rec: ConvergenceRecord, step: int, err, parts, key: int) -> None:
    """Start ``rec``'s curve afresh at ``step`` on a new validation set."""
    mean, se = _stratified(err)
    rec.eval_steps, rec.val_mse, rec.val_se, rec.change_se = [step], [mean], [se], [math.nan]
    rec.val_mse_parts = [[float(e.mean()) for e in err]]
    rec.val_parts, rec.val_key = [label for label, _ in parts], key


@declare(rec=Instance((ConvergenceRecord,)), max_steps=Integer(1, None))
def decide(rec: ConvergenceRecord, *, max_steps: int) -> ConvergenceRecord:
    """Decide ``rec`` by the current rule from its curve, in place (and return it).

    Converged by :func:`converged_at` (past ``rec.min_steps``); finished when converged, at
    ``max_steps`` or diverged. What a resumed checkpoint and an export go through: a verdict is
    never carried over from an older rule.
    """
    if not isinstance(rec, ConvergenceRecord):
        raise ArgumentTypeError(f"rec must be a ConvergenceRecord, got {type(rec).__name__}")
    max_steps = positive_int("max_steps", max_steps)
    if rec.diverged_at:
        rec.converged, rec.finished = False, True
        return rec
    rec.converged = bool(rec.eval_steps) and converged_at(
        rec.val_mse, rec.change_se, rec.eval_steps, min_steps=rec.min_steps
    )
    rec.finished = rec.converged or rec.steps >= max_steps
    return rec


@declare(
    trainer=Instance((BatchedTrainer,)),
    val_prompts=Free("{member name: Prompts or {label: Prompts}}: each set checked in the body"),
    first_check=Integer(1, None),
    max_steps=Integer(1, None),
    min_steps=Integer(0, None),
    checkpoint=OrNone(Text()),
    save_every_s=Interval(0.0, 1e9),
    log=OrNone(CallableArg()),
)
def train_to_convergence(
    trainer: BatchedTrainer,
    val_prompts: dict,
    *,
    first_check: int = 500,
    max_steps: int = 32_000,
    min_steps: int = 0,
    checkpoint: str | None = None,
    save_every_s: float = 300.0,
    log: Callable[[str], None] | None = None,
) -> dict[str, ConvergenceRecord]:
    """Train every member of ``trainer`` until it converges, or to ``max_steps``: the book's protocol.

    The validation error is measured at ``first_check``, ``2·first_check``, ``4·first_check``, … A member
    is **converged** at the first checkpoint of at least ``min_steps`` steps where each of the last two
    doublings changed its validation error by at most one paired standard error
    (:func:`converged_at`); it then stops (its weights are those of that checkpoint). A member that
    reaches ``max_steps`` without converging stops there, flagged ``converged = False``: never silently.

    Parameters
    ----------
    trainer
        A :class:`BatchedTrainer` (its schedule must not depend on the total steps).
    val_prompts
        ``{member name: validation set}`` (members may share one): a
        :class:`~icl_book.tasks.Prompts`, or a dict ``{label: Prompts}`` of parts (e.g. one per context
        length), whose error is the mean of the parts' errors.
    first_check, max_steps
        The first checkpoint and the bound (``first_check · 2^j``).
    min_steps
        No member is called converged before this many steps (e.g. four times its warm-up and hold).
    checkpoint
        Optional path: the trainer's state and the records are saved there after every checkpoint and
        every ``save_every_s`` seconds, and loaded from there when it exists, so a study can be trained
        across several sittings; resumed is bitwise the uninterrupted run (same machine and threads).
        Every resumed record is decided again by the current rule (a larger bound continues the runs
        it does not call converged; a changed validation set restarts the record's curve at the run's
        current step).
    log
        Called with one line per checkpoint (e.g. ``print``).

    Returns
    -------
    dict
        ``{member name: ConvergenceRecord}``; the weights are in ``trainer`` (:meth:`BatchedTrainer.model`).
    """
    if not isinstance(trainer, BatchedTrainer):
        raise TypeError(f"trainer must be a BatchedTrainer, got {type(trainer).__name__}")
    if not isinstance(val_prompts, dict):
        raise ArgumentTypeError(
            f"val_prompts must be a dict {{member name: Prompts}}, got {type(val_prompts).__name__}"
        )
    names = [m.name for m in trainer.members]
    missing = [n for n in names if n not in val_prompts]
    if missing:
        raise ValueError(f"val_prompts has no validation set for members {missing}")
    checks = check_steps(first_check, max_steps)
    min_steps = nonnegative_int("min_steps", min_steps)
    parts = {n: _parts(n, val_prompts[n]) for n in names}
    keys = {n: _fingerprint(parts[n]) for n in names}
    records = {n: ConvergenceRecord(n, min_steps=min_steps) for n in names}
    errors = {}  # per-prompt validation errors at each member's last checkpoint (paired changes)
    if checkpoint is not None and os.path.exists(checkpoint):
        saved = torch.load(checkpoint, weights_only=False)
        trainer.load_state_dict(saved["trainer"])
        records = {n: ConvergenceRecord(**r) for n, r in saved["records"].items()}
        errors = {n: e if isinstance(e, list) else [e] for n, e in saved.get("errors", {}).items()}
    for i, n in enumerate(names):
        rec = records[n]
        rec.min_steps = min_steps
        if rec.eval_steps and rec.val_key != keys[n]:
            # measured on another validation set (or by a version that kept no fingerprint): the
            # saved per-prompt errors tell whether it is the same set; if not, restart the curve
            at_checkpoint = trainer.steps[i] == rec.steps and not rec.diverged_at
            err = _val_errors(trainer, i, parts[n]) if at_checkpoint else None
            same = (
                err is not None
                and n in errors
                and [e.shape for e in errors[n]] == [e.shape for e in err]
                and all(
                    np.allclose(a, b, rtol=1e-6, atol=1e-12)
                    for a, b in zip(errors[n], err, strict=True)
                )
            )
            if same:
                rec.val_key, rec.val_parts = keys[n], [label for label, _ in parts[n]]
                if len(rec.val_mse_parts) < len(rec.val_mse):
                    rec.val_mse_parts = [[v] for v in rec.val_mse]
            elif err is not None:
                _restart(rec, rec.steps, err, parts[n], keys[n])
                errors[n] = err
            else:  # stopped between checkpoints, or diverged: the old curve is all there is
                rec.val_key = keys[n]
        if len(rec.change_se) < len(rec.val_mse):  # an older format kept no paired errors
            rec.change_se += [math.nan] * (len(rec.val_mse) - len(rec.change_se))
        if rec.eval_steps:
            decide(rec, max_steps=max_steps)  # re-decided by the current rule, never by hand
    # a stopped run is at its checkpoint, so its per-prompt errors there can be recomputed
    for i, n in enumerate(names):
        rec = records[n]
        if n not in errors and rec.eval_steps and trainer.steps[i] == rec.steps:
            errors[n] = _val_errors(trainer, i, parts[n])
    last_save = time.monotonic()

    def save():
        if checkpoint is None:
            return
        tmp = f"{checkpoint}.tmp"
        state = {
            "trainer": trainer.state_dict(),
            "records": {n: vars(r) for n, r in records.items()},
            "errors": errors,
        }
        torch.save(state, tmp)
        os.replace(tmp, checkpoint)

    for target in checks:
        active = [i for i, n in enumerate(names) if not records[n].finished]
        if not active:
            break
        while True:
            todo = [i for i in active if trainer.steps[i] < target]
            if not todo:
                break
            losses = trainer.step(todo, on_nonfinite="skip")
            for i, v in zip(todo, losses, strict=True):
                if not math.isfinite(v):  # stopped and flagged, never silently dropped
                    _diverged(records[names[i]], int(trainer.steps[i]) + 1, log)
                    active.remove(i)
            if checkpoint is not None and time.monotonic() - last_save > save_every_s:
                save()
                last_save = time.monotonic()
        for i in active:
            n = names[i]
            rec = records[n]
            if rec.steps >= target:
                continue  # evaluated before an interruption (or in an earlier sitting)
            err = _val_errors(trainer, i, parts[n])
            if not all(np.all(np.isfinite(e)) for e in err):
                _diverged(rec, target, log)
                continue
            prev = errors.get(n)
            mean, se = _stratified(err)
            change = (
                math.nan
                if prev is None
                else _stratified([a - b for a, b in zip(err, prev, strict=True)])[1]
            )
            errors[n] = err
            rec.eval_steps.append(target)
            rec.val_mse.append(mean)
            rec.val_se.append(se)
            rec.change_se.append(change)
            rec.val_mse_parts.append([float(e.mean()) for e in err])
            rec.val_parts, rec.val_key = [label for label, _ in parts[n]], keys[n]
            decide(rec, max_steps=max_steps)
        if log is not None:
            done = sum(r.converged for r in records.values())
            log(f"step {target}: {done}/{len(names)} converged, {len(active)} were active")
        save()
        last_save = time.monotonic()
    return records
