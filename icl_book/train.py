"""Seeded torch training loops for in-context learners.

Every trainable model in the book follows one interface (Garg et al.'s, with an explicit query):

``model(xs, ys, x_query) -> y_hat`` with torch tensors ``xs (B, N, d)``, ``ys (B, N)``, ``x_query (B, d)``
and output ``y_hat (B,)``.

Prompts come from a *sampler* ``sample_prompts(rng, batch_size) -> icl_book.tasks.Prompts`` (NumPy arrays),
for instance::

    from functools import partial
    from icl_book.tasks import sample_linear_prompts

    def sample_prompts(rng, batch_size):
        return sample_linear_prompts(batch_size, 20, 5, rng=rng, noise_var=0.1)

:func:`train_in_context` minimises the mean squared error of ``model``'s prediction at the query against
``y_query`` with Adam on fresh prompts every step (the "infinite task" regime; pass a sampler that draws
from a finite ``task_pool`` for the other one). Runs are reproducible: ``seed`` seeds the NumPy generator
that draws the data and, inside a :func:`torch.random.fork_rng` block (the global torch state is left
untouched), torch itself. Two calls with the same arguments on the same machine and thread count give
bitwise identical losses and weights.

Many small models at once: :class:`BatchedTrainer` trains a list of :class:`Member` runs of one
architecture together (each with its own weights, data, learning rate and Adam state; identical to
training each alone up to float rounding), and :func:`train_to_convergence` runs the book's convergence
protocol on it: the validation error is measured at ``s, 2s, 4s, …`` steps, and a run is *converged* once
doubling its steps changed that error by less than one standard error; a run that reaches its bound
first is flagged, never silently kept. Checkpoints make a long study resumable across sittings.

Note that the model's *initial* weights are drawn when the model is built, before training: build it with
its own seeded generator (e.g. ``LinearSelfAttention(dim, generator=torch.Generator().manual_seed(0))``).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from ._validate import (
    ArgumentTypeError,
    _raw_array,
    as_array,
    finite_values,
    flag,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    size_limit,
)
from .attention._params import inputs_checked

__all__ = [
    "Member",
    "BatchedTrainer",
    "ConvergenceRecord",
    "train_to_convergence",
    "converged_at",
    "check_steps",
    "TrainResult",
    "TrainingDiverged",
    "train_in_context",
    "evaluate_in_context",
    "predict_in_context",
    "prompts_to_torch",
]

_SCHEDULES = ("constant", "cosine", "rsqrt")


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite (lower ``lr`` or set ``clip_grad``)."""


@dataclass
class TrainResult:
    """What :func:`train_in_context` returns.

    Attributes
    ----------
    model
        The trained model (the same object that was passed in, trained in place, on ``device``/``dtype``).
    losses
        ``(steps_run,)`` float64: the training loss (batch MSE) at every step, before that step's update.
    lrs
        ``(steps_run,)`` float64: the learning rate used at every step.
    eval_steps
        ``(n_evals,)`` int: steps at which ``eval_prompts`` was evaluated (after that many updates).
    eval_losses
        ``(n_evals,)`` float64: the MSE on ``eval_prompts`` at those steps (empty without ``eval_prompts``).
    steps_run
        Number of updates actually made (``< steps`` after an early stop).
    stopped_early
        ``True`` when early stopping ended the run.
    """

    model: torch.nn.Module
    losses: np.ndarray
    lrs: np.ndarray
    eval_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    eval_losses: np.ndarray = field(default_factory=lambda: np.zeros(0))
    steps_run: int = 0
    stopped_early: bool = False

    @property
    def final_loss(self) -> float:
        """Mean training loss over the last ``min(100, steps_run)`` steps (a low-noise summary)."""
        if self.losses.size == 0:
            return float("nan")
        return float(np.mean(self.losses[-100:]))


def _device(device) -> torch.device:
    """``device`` as a :class:`torch.device`; a name torch does not know is a ``ValueError`` naming it."""
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str):
        raise ArgumentTypeError(
            f"device must be a torch.device or a name such as 'cpu', got {type(device).__name__}"
        )
    try:
        return torch.device(device)
    except RuntimeError:
        raise ValueError(
            f"device must be a torch device name such as 'cpu', got {device!r}"
        ) from None


def _batch_size(name: str, value) -> int:
    """A number of prompts per step: an integer >= 1, refused beyond ``_validate.MAX_ENTRIES`` at once."""
    return size_limit(name, positive_int(name, value), what="prompts per step")


def prompts_to_torch(prompts, *, device="cpu", dtype=torch.float64):
    """Convert a NumPy :class:`~icl_book.tasks.Prompts` batch to four torch tensors.

    Returns
    -------
    xs, ys, x_query, y_query
        ``(B, N, d)``, ``(B, N)``, ``(B, d)``, ``(B,)`` tensors on ``device`` with ``dtype``.
    """
    return _prompts_to_torch(prompts, _device(device), dtype, "prompts")


def _prompts_to_torch(prompts, device, dtype, what: str):
    """:func:`prompts_to_torch`; ``what`` names the source in errors (``"sample_prompts"``: its output)."""
    names = ("xs", "ys", "x_query", "y_query")
    where = "prompts" if what == "prompts" else f"the prompts of {what}"  # e.g. its return value
    if not all(hasattr(prompts, name) for name in names):
        raise TypeError(
            f"{where} must be an icl_book.tasks.Prompts (with xs, ys, x_query, y_query), "
            f"got {type(prompts).__name__}"
        )
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        # an integer dtype would truncate every input and label
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    out = [
        torch.as_tensor(np.asarray(getattr(prompts, n)), dtype=dtype, device=device) for n in names
    ]
    for name, t in zip(names, out, strict=True):
        if not torch.isfinite(t).all():  # a sampler's fault, not a training step's
            raise ValueError(f"{where}.{name} must be finite, got NaN or infinite values")
    xs, ys, xq, yq = out
    if xs.ndim != 3:
        raise ValueError(f"{where}.xs must have shape (B, N, d), got {tuple(xs.shape)}")
    b, n, d = xs.shape
    for name, t, shape in (("ys", ys, (b, n)), ("x_query", xq, (b, d)), ("y_query", yq, (b,))):
        if tuple(t.shape) != shape:
            raise ValueError(
                f"{where}.{name} must have shape {shape} to match xs {tuple(xs.shape)}, got {tuple(t.shape)}"
            )
    return xs, ys, xq, yq


def _mse(model, xs, ys, xq, yq) -> torch.Tensor:
    with inputs_checked():  # the batch was validated by prompts_to_torch
        pred = model(xs, ys, xq)
    if not isinstance(pred, torch.Tensor) or tuple(pred.shape) != tuple(yq.shape):
        shape = tuple(pred.shape) if isinstance(pred, torch.Tensor) else type(pred).__name__
        raise ValueError(
            f"model(xs, ys, x_query) must return a tensor of shape (B,) = {tuple(yq.shape)}, got {shape}"
        )
    return torch.mean((pred - yq) ** 2)


def _model_device_dtype(model):
    for p in model.parameters():
        return p.device, p.dtype
    return torch.device("cpu"), torch.float64


def evaluate_in_context(model: torch.nn.Module, prompts, *, chunk_size: int = 65536) -> float:
    """Mean squared error of ``model`` at the queries of a fixed NumPy prompt batch.

    Parameters
    ----------
    model
        A torch module with the interface ``model(xs, ys, x_query) -> (B,)``. It is evaluated in
        ``eval()`` mode without gradients, on the device and dtype of its parameters (float64 CPU for a
        model without parameters); its training mode is restored afterwards.
    prompts
        An :class:`icl_book.tasks.Prompts` batch (NumPy), e.g. a fixed test set.
    chunk_size
        Prompts evaluated at a time (bounds memory for large test sets).

    Returns
    -------
    float
        ``mean_b (model(prompt_b) − y_query_b)²``.
    """
    chunk_size = positive_int("chunk_size", chunk_size)
    total = 0.0
    with _evaluating(model, prompts) as (xs, ys, xq, yq):
        for start in range(0, xs.shape[0], chunk_size):
            sl = slice(start, start + chunk_size)
            total += float(_mse(model, xs[sl], ys[sl], xq[sl], yq[sl])) * yq[sl].shape[0]
    return total / xs.shape[0]


def predict_in_context(model: torch.nn.Module, prompts, *, chunk_size: int = 512) -> np.ndarray:
    """The predictions ``(B,)`` (NumPy float64) of ``model`` at the queries of a NumPy prompt batch.

    Evaluated as :func:`evaluate_in_context` is (eval mode, no gradients, the parameters' device and
    dtype). ``chunk_size`` prompts at a time: a few hundred keeps the tokens in cache (three times
    faster than one batch of 10,000 for chapter 6's stacks) and bounds memory.
    """
    chunk_size = positive_int("chunk_size", chunk_size)
    out = []
    with _evaluating(model, prompts) as (xs, ys, xq, yq):
        for start in range(0, xs.shape[0], chunk_size):
            sl = slice(start, start + chunk_size)
            with inputs_checked():  # validated by prompts_to_torch
                pred = model(xs[sl], ys[sl], xq[sl])
            if not isinstance(pred, torch.Tensor) or tuple(pred.shape) != tuple(yq[sl].shape):
                raise ValueError(
                    f"model(xs, ys, x_query) must return a tensor of shape (B,), got {pred!r:.80}"
                )
            out.append(pred.detach().cpu().to(torch.float64).numpy())
    return np.concatenate(out)


@contextlib.contextmanager
def _evaluating(model, prompts):
    """The prompts as tensors on the model's device and dtype, with the model in eval mode and no
    gradients; its training mode is restored afterwards."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    device, dtype = _model_device_dtype(model)
    tensors = prompts_to_torch(prompts, device=device, dtype=dtype)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield tensors
    finally:
        model.train(was_training)


def _lr_at(step: int, steps: int, lr: float, schedule: str, warmup: int) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "constant":
        return lr
    if schedule == "rsqrt":  # any-time decay: does not depend on the total number of steps
        return lr * math.sqrt(warmup / (step + 1)) if warmup else lr
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def train_in_context(
    model: torch.nn.Module,
    sample_prompts: Callable[[np.random.Generator, int], object],
    *,
    steps: int,
    lr: float,
    seed: int,
    batch_size: int,
    weight_decay: float = 0.0,
    clip_grad: float | None = None,
    schedule: str = "constant",
    warmup: int = 0,
    eval_prompts=None,
    eval_every: int | None = None,
    early_stop_patience: int | None = None,
    early_stop_min_delta: float = 0.0,
    progress: bool = False,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float64,
    num_threads: int | None = None,
) -> TrainResult:
    """Train ``model`` to predict ``y_query`` from a prompt, with Adam on fresh prompts every step.

    Parameters
    ----------
    model
        A torch module ``model(xs, ys, x_query) -> (B,)`` (shapes in the module docstring). It is moved to
        ``device``/``dtype`` and trained in place.
    sample_prompts
        ``sample_prompts(rng, batch_size) -> Prompts``: draws one training batch of NumPy prompts from the
        generator it is given (and no other source of randomness).
    steps
        Number of Adam updates (``>= 1``).
    lr
        Peak learning rate (``> 0``).
    seed
        Seeds the data generator ``np.random.default_rng(seed)`` and torch (inside ``fork_rng``, so the
        caller's global torch state is unchanged).
    batch_size
        Prompts per step (``>= 1``).
    weight_decay
        Adam's L2 penalty (``>= 0``).
    clip_grad
        If given (``> 0``), the gradient's global norm is clipped to it.
    schedule
        ``"constant"``, ``"cosine"`` (decays to 0 at the last step) or ``"rsqrt"`` (``lr · √(warmup/t)``
        at step ``t``: a decay that does not depend on ``steps``, so a run can be continued; the
        schedule of :class:`BatchedTrainer` and :func:`train_to_convergence`). Applied after the warm-up.
    warmup
        Steps of linear warm-up from ``lr / warmup`` to ``lr`` (``0``: none).
    eval_prompts
        Optional fixed NumPy :class:`~icl_book.tasks.Prompts` (a validation set) evaluated with
        :func:`evaluate_in_context` every ``eval_every`` steps and after the last step.
    eval_every
        Evaluation period in steps (default: ``max(1, steps // 20)`` when ``eval_prompts`` is given).
    early_stop_patience
        If given, stop once the validation loss has not improved by more than ``early_stop_min_delta``
        (relative) for this many consecutive evaluations. Needs ``eval_prompts``.
    early_stop_min_delta
        Relative improvement that counts as progress (``>= 0``).
    progress
        Show a tqdm progress bar (on stderr). Off by default: nbval compares stderr, and the chapters
        report progress through their own printed numbers.
    device, dtype
        Where and in what precision to train (default CPU float64).
    num_threads
        If given, torch's intra-op thread count during training (restored afterwards). ``1`` makes small
        models faster on a busy 2-core machine and the result independent of the caller's thread setting.

    Returns
    -------
    TrainResult
        The trained model and the loss history.

    Raises
    ------
    TrainingDiverged
        When the training loss becomes NaN or infinite (the message gives the step and suggests a
        smaller ``lr`` or ``clip_grad``), instead of returning a garbage model.
    """
    config = _training_config(
        model,
        sample_prompts,
        steps=steps,
        lr=lr,
        seed=seed,
        batch_size=batch_size,
        weight_decay=weight_decay,
        clip_grad=clip_grad,
        schedule=schedule,
        warmup=warmup,
        eval_prompts=eval_prompts,
        eval_every=eval_every,
        early_stop_patience=early_stop_patience,
        early_stop_min_delta=early_stop_min_delta,
        device=device,
        dtype=dtype,
        num_threads=num_threads,
    )
    model.to(device=config.device, dtype=config.dtype)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no trainable parameters")
    rng = np.random.default_rng(config.seed)
    history = _History(config.steps)
    stopper = _EarlyStopper(config.early_stop_patience, config.early_stop_min_delta)
    bar = _progress_bar(config.steps) if flag("progress", progress) else None
    devices = [config.device] if config.device.type == "cuda" else []
    old_threads = torch.get_num_threads()
    if config.num_threads is not None:
        torch.set_num_threads(config.num_threads)
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(config.seed)
        opt = torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
        try:
            for step in range(config.steps):
                value, step_lr = _train_step(model, opt, params, sample_prompts, rng, step, config)
                history.record(step, value, step_lr)
                if bar is not None:
                    bar.update(1)
                    if step % 50 == 0:
                        bar.set_postfix(loss=f"{value:.4g}")
                last = history.done == config.steps
                if config.eval_prompts is not None and (
                    history.done % config.eval_every == 0 or last
                ):
                    ev = evaluate_in_context(model, config.eval_prompts)
                    history.record_eval(ev)
                    if not math.isfinite(ev):
                        raise TrainingDiverged(
                            f"validation loss became {ev} after {history.done} steps"
                        )
                    if stopper.should_stop(ev) and not last:
                        history.stopped_early = True
                        break
        finally:
            if bar is not None:
                bar.close()
            torch.set_num_threads(old_threads)
    return history.result(model)


@dataclass(frozen=True)
class _TrainingConfig:
    """The validated arguments of :func:`train_in_context`."""

    steps: int
    lr: float
    seed: int
    batch_size: int
    weight_decay: float
    clip_grad: float | None
    schedule: str
    warmup: int
    eval_prompts: object
    eval_every: int | None
    early_stop_patience: int | None
    early_stop_min_delta: float
    device: torch.device
    dtype: torch.dtype
    num_threads: int | None


def _training_config(model, sample_prompts, **kw) -> _TrainingConfig:
    """Validate :func:`train_in_context`'s arguments (every message names the argument)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(sample_prompts):
        raise TypeError(
            "sample_prompts must be a callable (rng, batch_size) -> Prompts, "
            f"got {type(sample_prompts).__name__}"
        )
    steps = positive_int("steps", kw["steps"])
    warmup = nonnegative_int("warmup", kw["warmup"])
    if warmup >= steps and warmup > 0:
        raise ValueError(f"warmup must be < steps = {steps}, got {warmup}")
    schedule = kw["schedule"]
    if schedule not in _SCHEDULES:
        raise ValueError(f"schedule must be one of {_SCHEDULES}, got {schedule!r}")
    eval_prompts, eval_every = kw["eval_prompts"], kw["eval_every"]
    if eval_every is not None:
        eval_every = positive_int("eval_every", eval_every)
    if eval_prompts is not None and eval_every is None:
        eval_every = max(1, steps // 20)
    patience = kw["early_stop_patience"]
    if patience is not None:
        patience = positive_int("early_stop_patience", patience)
        if eval_prompts is None:
            raise ValueError("early_stop_patience needs eval_prompts (a fixed validation set)")
    dtype = kw["dtype"]
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    clip_grad, num_threads = kw["clip_grad"], kw["num_threads"]
    return _TrainingConfig(
        steps=steps,
        lr=positive_float("lr", kw["lr"]),
        seed=nonnegative_int("seed", kw["seed"]),
        batch_size=_batch_size("batch_size", kw["batch_size"]),
        weight_decay=nonnegative_float("weight_decay", kw["weight_decay"]),
        clip_grad=None if clip_grad is None else positive_float("clip_grad", clip_grad),
        schedule=schedule,
        warmup=warmup,
        eval_prompts=eval_prompts,
        eval_every=eval_every,
        early_stop_patience=patience,
        early_stop_min_delta=nonnegative_float("early_stop_min_delta", kw["early_stop_min_delta"]),
        device=_device(kw["device"]),
        dtype=dtype,
        num_threads=None if num_threads is None else positive_int("num_threads", num_threads),
    )


def _train_step(model, opt, params, sample_prompts, rng, step: int, config) -> tuple[float, float]:
    """One Adam update on a fresh batch; returns the batch loss (before the update) and the step's lr."""
    step_lr = _lr_at(step, config.steps, config.lr, config.schedule, config.warmup)
    for group in opt.param_groups:
        group["lr"] = step_lr
    batch = _prompts_to_torch(
        sample_prompts(rng, config.batch_size), config.device, config.dtype, "sample_prompts"
    )
    loss = _mse(model, *batch)
    value = float(loss.detach())
    if not math.isfinite(value):
        raise TrainingDiverged(
            f"training loss became {value} at step {step} (lr = {step_lr:.3g}); "
            "lower lr, add warmup or set clip_grad"
        )
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if config.clip_grad is not None:
        torch.nn.utils.clip_grad_norm_(params, config.clip_grad)
    opt.step()
    return value, step_lr


class _History:
    """Loss and learning-rate history of a run, and its validation curve."""

    def __init__(self, steps: int):
        self.losses, self.lrs = np.empty(steps), np.empty(steps)
        self.eval_steps: list[int] = []
        self.eval_losses: list[float] = []
        self.done, self.stopped_early = 0, False

    def record(self, step: int, value: float, step_lr: float) -> None:
        self.losses[step], self.lrs[step] = value, step_lr
        self.done = step + 1

    def record_eval(self, value: float) -> None:
        self.eval_steps.append(self.done)
        self.eval_losses.append(value)

    def result(self, model) -> TrainResult:
        return TrainResult(
            model=model,
            losses=self.losses[: self.done].copy(),
            lrs=self.lrs[: self.done].copy(),
            eval_steps=np.asarray(self.eval_steps, dtype=int),
            eval_losses=np.asarray(self.eval_losses, dtype=np.float64),
            steps_run=self.done,
            stopped_early=self.stopped_early,
        )


class _EarlyStopper:
    """Stop once the validation loss has not improved by ``min_delta`` (relative) for ``patience`` evals."""

    def __init__(self, patience: int | None, min_delta: float):
        self.patience, self.min_delta = patience, min_delta
        self.best, self.bad = math.inf, 0

    def should_stop(self, value: float) -> bool:
        if self.patience is None:
            return False
        if value < self.best * (1.0 - self.min_delta):
            self.best, self.bad = value, 0
            return False
        self.bad += 1
        return self.bad >= self.patience


def _progress_bar(steps: int):
    # tqdm only when asked for: it writes to stderr, which nbval compares.
    from tqdm import tqdm  # optional: only with progress=True

    return tqdm(total=steps, desc="training", unit="step", leave=True)


# ---------------------------------------------------------------------------------------------------
# Many small models at once, and training until converged
# ---------------------------------------------------------------------------------------------------

_ADAM_BETAS, _ADAM_EPS = (0.9, 0.999), 1e-8


@dataclass(frozen=True)
class Member:
    """One run of a :class:`BatchedTrainer`: an initial model, its data, its seed and its learning rate.

    ``model`` holds the initial weights (every member of one trainer has the same architecture);
    ``sample_prompts(rng, batch_size) -> Prompts`` draws its training batches from
    ``np.random.default_rng(seed)`` and nothing else; ``lr`` is its peak learning rate, ``warmup``
    its linear warm-up and ``decay_start`` the step at which the ``"rsqrt"`` decay begins (the peak is
    held until ``max(warmup, decay_start)``); ``batch_size`` its prompts per step (the trainer's when ``None``: e.g. fewer
    prompts for longer contexts, the same number of tokens). ``name`` identifies it in results and
    checkpoints.
    """

    name: str
    model: torch.nn.Module
    sample_prompts: Callable[[np.random.Generator, int], object]
    seed: int
    lr: float
    warmup: int = 0
    batch_size: int | None = None
    decay_start: int = 0

    def __post_init__(self):
        # the name keys results and checkpoints; the model is read at once by BatchedTrainer
        if not isinstance(self.name, str) or not self.name:
            raise ArgumentTypeError(f"name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.model, torch.nn.Module):
            raise ArgumentTypeError(
                f"model must be a torch.nn.Module, got {type(self.model).__name__}"
            )


class BatchedTrainer:
    """Train many small in-context models of one architecture at once, each as if alone.

    Every member keeps its own weights, Adam state, data generator, learning-rate schedule and gradient
    clipping; one step draws one batch per member, runs each member's model on its own batch (members
    whose batches have the same shape go through one :func:`torch.func.vmap` call, ``chunk_size`` at a
    time) and updates every active member. The loss is the sum of the members' mean squared errors, so
    each member's gradient is exactly its own: the result equals training each member alone with
    :func:`train_in_context` (Adam, the same schedule and clipping) up to float rounding
    (``tests/test_train.py``).

    The schedule must not depend on the total number of steps, so that a run can be continued:
    ``"constant"`` (after the warm-up) or ``"rsqrt"`` (``lr · √(τ / t)`` after ``τ = max(warmup,
    decay_start)`` steps, the usual "any-time" decay; a later ``decay_start`` keeps a larger step
    size for long runs, which a decay tied to a short warm-up starves). :meth:`state_dict` / :meth:`load_state_dict` hold everything a step
    depends on (:func:`train_to_convergence` saves them as checkpoints), so a run stopped and resumed
    is bitwise the uninterrupted run on the same machine and thread count.

    Parameters
    ----------
    members
        The runs, a non-empty sequence of :class:`Member` with models of identical parameter shapes.
    batch_size
        Prompts per step and member.
    schedule
        ``"constant"`` or ``"rsqrt"``.
    clip_grad
        If given (``> 0``), each member's gradient is clipped to this global norm (its own norm).
    chunk_size
        Members evaluated together in one ``vmap`` call (``1``: one after another). Larger chunks cut
        per-call overhead; too large ones leave the cache (``benchmarks/bench_train.py`` measures).
    device, dtype
        Where and in what precision to train (CPU float64 by default).
    """

    def __init__(
        self,
        members,
        *,
        batch_size: int,
        schedule: str = "rsqrt",
        clip_grad: float | None = None,
        chunk_size: int = 1,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float64,
    ):
        from torch.func import stack_module_state

        try:
            members = list(members)
        except TypeError:
            raise ArgumentTypeError(
                "members must be a non-empty sequence of icl_book.train.Member, "
                f"got {type(members).__name__}"
            ) from None
        if not members or not all(isinstance(m, Member) for m in members):
            raise TypeError("members must be a non-empty sequence of icl_book.train.Member")
        names = [m.name for m in members]
        if len(set(names)) != len(names):
            raise ValueError("members must have distinct names")
        if schedule not in ("constant", "rsqrt"):
            raise ValueError(f"schedule must be 'constant' or 'rsqrt', got {schedule!r}")
        self.members = members
        self.batch_size = _batch_size("batch_size", batch_size)
        self.schedule = schedule
        self.clip_grad = None if clip_grad is None else positive_float("clip_grad", clip_grad)
        self.chunk_size = positive_int("chunk_size", chunk_size)
        self.device = _device(device)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        self.dtype = dtype
        shapes = {k: v.shape for k, v in members[0].model.state_dict().items()}
        for m in members:
            if not isinstance(m.model, torch.nn.Module):
                raise TypeError(f"member {m.name!r}: model must be a torch.nn.Module")
            if {k: v.shape for k, v in m.model.state_dict().items()} != shapes:
                raise ValueError(
                    f"member {m.name!r}: every model must have the parameter shapes of "
                    f"{members[0].name!r}"
                )
            if not callable(m.sample_prompts):
                raise TypeError(f"member {m.name!r}: sample_prompts must be callable")
            positive_float(f"member {m.name!r}: lr", m.lr)
            nonnegative_int(f"member {m.name!r}: warmup", m.warmup)
            nonnegative_int(f"member {m.name!r}: decay_start", m.decay_start)
            nonnegative_int(f"member {m.name!r}: seed", m.seed)
            if m.batch_size is not None:
                _batch_size(f"member {m.name!r}: batch_size", m.batch_size)
        models = [m.model.to(device=self.device, dtype=dtype) for m in members]
        params, _ = stack_module_state(models)
        self.params = {k: v.detach().clone() for k, v in params.items()}
        # frozen parameters (requires_grad False, e.g. LearnedBCD's feature writers) stay as they are
        self.trainable = [k for k, p in models[0].named_parameters() if p.requires_grad]
        if not self.trainable:
            raise ValueError("members' models have no trainable parameters")
        self._base = _meta_copy(models[0])
        self.exp_avg = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.exp_avg_sq = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.steps = np.zeros(len(members), dtype=np.int64)
        self.rngs = [np.random.default_rng(m.seed) for m in members]
        self.losses: list[list[float]] = [[] for _ in members]
        self.cpu_seconds = np.zeros(len(members))

    # --- one step -----------------------------------------------------------------------------------

    def lr_at(self, index: int, step: int) -> float:
        """Learning rate of member ``index`` at (0-based) step ``step``."""
        m = self.members[index]
        if step < m.warmup:
            return m.lr * (step + 1) / m.warmup
        tau = max(m.warmup, m.decay_start)
        if self.schedule == "constant" or tau == 0 or step + 1 <= tau:
            return m.lr
        return m.lr * math.sqrt(tau / (step + 1))

    def step(self, active=None, *, on_nonfinite: str = "raise") -> np.ndarray:
        """One Adam update of the members in ``active`` (indices; all by default).

        Returns the training losses ``(len(active),)`` (batch MSE before the update). A member whose loss
        is NaN or infinite raises :class:`TrainingDiverged` (``on_nonfinite="raise"``), or, with
        ``"skip"``, is left un-updated while the others step (its loss is returned as it is).
        """
        if on_nonfinite not in ("raise", "skip"):
            raise ValueError(f"on_nonfinite must be 'raise' or 'skip', got {on_nonfinite!r}")
        active = list(range(len(self.members))) if active is None else [int(i) for i in active]
        start = time.process_time()
        batches = {}
        for i in active:
            m = self.members[i]
            b = _prompts_to_torch(
                m.sample_prompts(self.rngs[i], m.batch_size or self.batch_size),
                self.device,
                self.dtype,
                "sample_prompts",
            )
            batches.setdefault(tuple(b[0].shape), []).append((i, b))
        leaves = dict(self.params)
        for k in self.trainable:
            leaves[k] = self.params[k].requires_grad_(True)
        total, losses = 0.0, {}
        for group in batches.values():
            for c in range(0, len(group), self.chunk_size):
                chunk = group[c : c + self.chunk_size]
                idx = [i for i, _ in chunk]
                per = self._losses(leaves, idx, [b for _, b in chunk])
                total = total + per.sum()
                losses.update(zip(idx, per.detach().tolist(), strict=True))
        grads = torch.autograd.grad(total, [leaves[k] for k in self.trainable])
        for k in self.trainable:
            self.params[k].requires_grad_(False)
        values = np.array([losses[i] for i in active])
        bad = [
            self.members[i].name
            for i, v in zip(active, values, strict=True)
            if not math.isfinite(v)
        ]
        if bad and on_nonfinite == "raise":
            raise TrainingDiverged(f"training loss became non-finite for members {bad}")
        # a member's gradient reaches only its own slice of the stacked parameters, so the finite
        # members' update is the one they would take without the others
        good = [i for i, v in zip(active, values, strict=True) if math.isfinite(v)]
        if good:
            self._adam(good, dict(zip(self.trainable, grads, strict=True)))
        for i, v in zip(active, values, strict=True):
            if math.isfinite(v):
                self.losses[i].append(float(v))
        self.cpu_seconds[active] += (time.process_time() - start) / len(active)
        return values

    def _losses(self, params, idx, batches) -> torch.Tensor:
        """Mean squared errors ``(len(idx),)`` of members ``idx`` on their batches."""
        from torch.func import functional_call, vmap

        # the batches were validated once, by prompts_to_torch: the models skip their input checks
        # (which could not run under vmap either)
        with inputs_checked():
            if len(idx) == 1:
                p = {k: v[idx[0]] for k, v in params.items()}
                xs, ys, xq, yq = batches[0]
                pred = functional_call(self._base, p, (xs, ys, xq))
                return torch.mean((pred - yq) ** 2)[None]
            sel = torch.tensor(idx, device=self.device)
            p = {k: v.index_select(0, sel) for k, v in params.items()}
            xs, ys, xq, yq = (torch.stack(t) for t in zip(*batches, strict=True))
            pred = vmap(lambda pp, a, b, c: functional_call(self._base, pp, (a, b, c)))(
                p, xs, ys, xq
            )
            return torch.mean((pred - yq) ** 2, dim=1)

    @torch.no_grad()
    def _adam(self, active, grads) -> None:
        """torch.optim.Adam's update, per member (its own step count, lr and clipping)."""
        beta1, beta2 = _ADAM_BETAS
        sel = torch.tensor(active, device=self.device)
        g = {k: v.index_select(0, sel) for k, v in grads.items()}
        if self.clip_grad is not None:
            norms = torch.sqrt(sum((v.reshape(len(active), -1) ** 2).sum(1) for v in g.values()))
            coef = torch.clamp(self.clip_grad / (norms + 1e-6), max=1.0)
            g = {k: v * coef.reshape(-1, *[1] * (v.ndim - 1)) for k, v in g.items()}
        step = self.steps[active] + 1
        lrs = np.array([self.lr_at(i, s - 1) for i, s in zip(active, step, strict=True)])
        bc1 = 1 - beta1**step
        bc2_sqrt = np.sqrt(1 - beta2**step)
        step_size = torch.tensor(-lrs / bc1, dtype=self.dtype, device=self.device)
        bc2 = torch.tensor(bc2_sqrt, dtype=self.dtype, device=self.device)
        for k in self.trainable:
            p = self.params[k]
            shape = (-1, *[1] * (p.ndim - 1))
            m = self.exp_avg[k].index_select(0, sel).lerp_(g[k], 1 - beta1)
            v = (
                self.exp_avg_sq[k]
                .index_select(0, sel)
                .mul_(beta2)
                .addcmul_(g[k], g[k], value=1 - beta2)
            )
            denom = (v.sqrt() / bc2.reshape(shape)).add_(_ADAM_EPS)
            new = p.index_select(0, sel) + step_size.reshape(shape) * (m / denom)
            self.exp_avg[k].index_copy_(0, sel, m)
            self.exp_avg_sq[k].index_copy_(0, sel, v)
            p.index_copy_(0, sel, new)
        self.steps[active] = step

    # --- results and checkpoints ---------------------------------------------------------------------

    def model(self, index: int) -> torch.nn.Module:
        """A copy of member ``index``'s model holding its current weights (eval mode)."""
        model = _copy_module(self.members[index].model)
        model.load_state_dict({k: v[index].detach().clone() for k, v in self.params.items()})
        return model.eval()

    def predict(self, index: int, prompts, *, chunk_size: int = 512) -> np.ndarray:
        """Member ``index``'s predictions ``(B,)`` on a NumPy prompt batch (:func:`predict_in_context`)."""
        return predict_in_context(self.model(index), prompts, chunk_size=chunk_size)

    def state_dict(self) -> dict:
        """Everything the next step depends on (weights, Adam moments, step counts, data generators)."""
        return {
            "names": [m.name for m in self.members],
            "params": {k: v.clone() for k, v in self.params.items()},
            "exp_avg": {k: v.clone() for k, v in self.exp_avg.items()},
            "exp_avg_sq": {k: v.clone() for k, v in self.exp_avg_sq.items()},
            "steps": self.steps.copy(),
            "rngs": [r.bit_generator.state for r in self.rngs],
            "losses": [np.asarray(v, dtype=np.float32) for v in self.losses],
            "cpu_seconds": self.cpu_seconds.copy(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` (the members must be the same, in the same order)."""
        if list(state["names"]) != [m.name for m in self.members]:
            raise ValueError("state was saved for other members (names differ)")
        for attr in ("params", "exp_avg", "exp_avg_sq"):
            setattr(self, attr, {k: v.clone() for k, v in state[attr].items()})
        self.steps = np.asarray(state["steps"], dtype=np.int64).copy()
        for rng, s in zip(self.rngs, state["rngs"], strict=True):
            rng.bit_generator.state = s
        self.losses = [[float(x) for x in v] for v in state["losses"]]
        self.cpu_seconds = np.asarray(state["cpu_seconds"], dtype=np.float64).copy()


def _meta_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A parameter-free copy of ``model`` for :func:`torch.func.functional_call`."""
    return _copy_module(model).to("meta")


def _copy_module(model: torch.nn.Module) -> torch.nn.Module:
    import copy

    return copy.deepcopy(model)


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
        ``(k,)`` validation mean squared error at those checkpoints and its standard error
        (``std / √n`` over the validation prompts).
    change_se
        ``(k,)`` the standard error of the change since the previous checkpoint, on the same validation
        prompts (``std(e_i(2s) − e_i(s)) / √n``; ``nan`` where the previous checkpoint's per-prompt
        errors are not known).
    converged
        ``True`` when doubling the steps last changed the validation error by less than the standard
        error of that change; ``False`` when the run stopped at ``max_steps`` without that (or has not
        finished).
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
    converged: bool = False
    finished: bool = False
    diverged_at: int = 0

    @property
    def steps(self) -> int:
        """Steps trained (the last checkpoint reached)."""
        return self.eval_steps[-1] if self.eval_steps else 0


def _diverged(rec: ConvergenceRecord, step: int, log) -> None:
    rec.diverged_at, rec.finished, rec.converged = step, True, False
    if log is not None:
        log(f"{rec.name} diverged at step {step}: stopped with its last finite weights")


def converged_at(val_mse, change_se) -> bool:
    """The protocol's test: the last doubling changed the validation error by less than its SE.

    ``val_mse`` holds the validation errors at consecutive checkpoints ``s, 2s, 4s, …`` and
    ``change_se`` the standard errors of the changes between them, paired over the same validation
    prompts: converged when ``|mse(2s) − mse(s)| <= change_se(2s)``. The *paired* standard error is the
    yardstick because the prompts' own spread (squared errors on quadratic targets are heavy-tailed)
    makes the plain standard error of a mean two to eight times larger: with it, 12 of chapter 5's 40
    blocks passed for converged after 2,000 steps, and one of them then fell from 0.402 to 0.264 by
    4,000. No criterion tells a long plateau from the end of training; the records keep every curve.
    """
    val_mse = as_array("val_mse", val_mse, 1)
    # change_se is nan where the previous checkpoint's errors are not known (its first entry)
    change_se = _raw_array("change_se", change_se).astype(np.float64, copy=False)
    if change_se.ndim != 1:
        raise ValueError(f"change_se must have 1 dimension, got shape {change_se.shape}")
    finite_values("change_se (apart from its nan entries)", change_se[~np.isnan(change_se)])
    if len(val_mse) < 2 or len(change_se) == 0 or not math.isfinite(change_se[-1]):
        return False
    return bool(abs(val_mse[-1] - val_mse[-2]) <= change_se[-1])  # an unchanged run: 0 <= 0


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


def _val_errors(trainer, index, prompts) -> np.ndarray:
    """Member ``index``'s per-prompt squared errors on a validation set."""
    return (trainer.predict(index, prompts) - np.asarray(prompts.y_query)) ** 2


def train_to_convergence(
    trainer: BatchedTrainer,
    val_prompts: dict,
    *,
    first_check: int = 500,
    max_steps: int = 32_000,
    checkpoint: str | None = None,
    save_every_s: float = 300.0,
    log: Callable[[str], None] | None = None,
) -> dict[str, ConvergenceRecord]:
    """Train every member of ``trainer`` until it converges, or to ``max_steps``: the book's protocol.

    The validation error (mean squared error at the query on a fixed held-out set) is measured at
    ``first_check``, ``2·first_check``, ``4·first_check``, … A member is **converged** at the first
    checkpoint where doubling its steps changed the validation error by less than one standard error of
    that change, measured on the same validation prompts (:func:`converged_at`); it then stops (its
    weights are those of that checkpoint). A member that reaches ``max_steps`` without converging stops there, flagged
    ``converged = False``: never silently.

    Parameters
    ----------
    trainer
        A :class:`BatchedTrainer` (its schedule must not depend on the total steps).
    val_prompts
        ``{member name: Prompts}``: each member's validation set (members may share one).
    first_check, max_steps
        The first checkpoint and the bound (``first_check · 2^j``).
    checkpoint
        Optional path: the trainer's state and the records are saved there after every checkpoint and
        every ``save_every_s`` seconds, and loaded from there when it exists, so a study can be trained
        across several sittings; resumed is bitwise the uninterrupted run (same machine and threads).
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
    records = {n: ConvergenceRecord(n) for n in names}
    errors = {}  # per-prompt validation errors at each member's last checkpoint (paired changes)
    if checkpoint is not None and os.path.exists(checkpoint):
        saved = torch.load(checkpoint, weights_only=False)
        trainer.load_state_dict(saved["trainer"])
        records = {n: ConvergenceRecord(**r) for n, r in saved["records"].items()}
        errors = dict(saved.get("errors", {}))
        for rec in records.values():
            if len(rec.change_se) < len(rec.val_mse):  # decided by an older rule: decide again
                rec.change_se += [math.nan] * (len(rec.val_mse) - len(rec.change_se))
                rec.converged = False
            # a larger bound than last time continues the unconverged runs
            if not rec.converged and not rec.diverged_at and rec.steps < max_steps:
                rec.finished = False
    # a stopped run is at its checkpoint, so its per-prompt errors there can be recomputed
    for i, n in enumerate(names):
        rec = records[n]
        if n not in errors and rec.eval_steps and trainer.steps[i] == rec.steps:
            errors[n] = _val_errors(trainer, i, val_prompts[n])
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
            rec = records[names[i]]
            if rec.steps >= target:
                continue  # evaluated before an interruption (or in an earlier sitting)
            err = _val_errors(trainer, i, val_prompts[names[i]])
            if not np.all(np.isfinite(err)):
                _diverged(rec, target, log)
                continue
            prev = errors.get(names[i])
            change = math.nan if prev is None else float((err - prev).std() / math.sqrt(err.size))
            errors[names[i]] = err
            rec.eval_steps.append(target)
            rec.val_mse.append(float(err.mean()))
            rec.val_se.append(float(err.std() / math.sqrt(err.size)))
            rec.change_se.append(change)
            rec.converged = converged_at(rec.val_mse, rec.change_se)
            rec.finished = rec.converged or target >= max_steps
        if log is not None:
            done = sum(r.converged for r in records.values())
            log(f"step {target}: {done}/{len(names)} converged, {len(active)} were active")
        save()
        last_save = time.monotonic()
    return records
