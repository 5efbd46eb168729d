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

Note that the model's *initial* weights are drawn when the model is built, before training: build it with
its own seeded generator (e.g. ``LinearSelfAttention(dim, generator=torch.Generator().manual_seed(0))``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from ._validate import nonnegative_float, nonnegative_int, positive_float, positive_int

__all__ = [
    "TrainResult",
    "TrainingDiverged",
    "train_in_context",
    "evaluate_in_context",
    "prompts_to_torch",
]

_SCHEDULES = ("constant", "cosine")


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


def prompts_to_torch(prompts, *, device="cpu", dtype=torch.float64):
    """Convert a NumPy :class:`~icl_book.tasks.Prompts` batch to four torch tensors.

    Returns
    -------
    xs, ys, x_query, y_query
        ``(B, N, d)``, ``(B, N)``, ``(B, d)``, ``(B,)`` tensors on ``device`` with ``dtype``.
    """
    names = ("xs", "ys", "x_query", "y_query")
    if not all(hasattr(prompts, name) for name in names):
        raise TypeError(
            "prompts must be an icl_book.tasks.Prompts (with xs, ys, x_query, y_query), "
            f"got {type(prompts).__name__}"
        )
    out = [
        torch.as_tensor(np.asarray(getattr(prompts, n)), dtype=dtype, device=device) for n in names
    ]
    xs, ys, xq, yq = out
    if xs.ndim != 3:
        raise ValueError(f"prompts.xs must have shape (B, N, d), got {tuple(xs.shape)}")
    b, n, d = xs.shape
    for name, t, shape in (("ys", ys, (b, n)), ("x_query", xq, (b, d)), ("y_query", yq, (b,))):
        if tuple(t.shape) != shape:
            raise ValueError(
                f"prompts.{name} must have shape {shape} to match xs {tuple(xs.shape)}, got {tuple(t.shape)}"
            )
    return xs, ys, xq, yq


def _mse(model, xs, ys, xq, yq) -> torch.Tensor:
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
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    chunk_size = positive_int("chunk_size", chunk_size)
    device, dtype = _model_device_dtype(model)
    xs, ys, xq, yq = prompts_to_torch(prompts, device=device, dtype=dtype)
    was_training = model.training
    model.eval()
    total = 0.0
    try:
        with torch.no_grad():
            for start in range(0, xs.shape[0], chunk_size):
                sl = slice(start, start + chunk_size)
                total += float(_mse(model, xs[sl], ys[sl], xq[sl], yq[sl])) * yq[sl].shape[0]
    finally:
        model.train(was_training)
    return total / xs.shape[0]


def _lr_at(step: int, steps: int, lr: float, schedule: str, warmup: int) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "constant":
        return lr
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
    progress: bool = True,
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
        ``"constant"`` or ``"cosine"`` (decays to 0 at the last step). Applied after the warm-up.
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
        Show a tqdm progress bar (on stderr). Chapters pass ``progress=False``: nbval compares stderr.
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
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(sample_prompts):
        raise TypeError(
            f"sample_prompts must be a callable (rng, batch_size) -> Prompts, got {type(sample_prompts).__name__}"
        )
    steps = positive_int("steps", steps)
    lr = positive_float("lr", lr)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    seed = int(seed)
    batch_size = positive_int("batch_size", batch_size)
    weight_decay = nonnegative_float("weight_decay", weight_decay)
    if clip_grad is not None:
        clip_grad = positive_float("clip_grad", clip_grad)
    if schedule not in _SCHEDULES:
        raise ValueError(f"schedule must be one of {_SCHEDULES}, got {schedule!r}")
    warmup = nonnegative_int("warmup", warmup)
    if warmup >= steps and warmup > 0:
        raise ValueError(f"warmup must be < steps = {steps}, got {warmup}")
    if eval_every is not None:
        eval_every = positive_int("eval_every", eval_every)
    if eval_prompts is not None and eval_every is None:
        eval_every = max(1, steps // 20)
    if early_stop_patience is not None:
        early_stop_patience = positive_int("early_stop_patience", early_stop_patience)
        if eval_prompts is None:
            raise ValueError("early_stop_patience needs eval_prompts (a fixed validation set)")
    early_stop_min_delta = nonnegative_float("early_stop_min_delta", early_stop_min_delta)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    device = torch.device(device)
    if num_threads is not None:
        num_threads = positive_int("num_threads", num_threads)

    model.to(device=device, dtype=dtype)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no trainable parameters")
    rng = np.random.default_rng(seed)

    losses = np.empty(steps)
    lrs = np.empty(steps)
    eval_steps: list[int] = []
    eval_losses: list[float] = []
    best, bad_evals, stopped_early, done = math.inf, 0, False, 0

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=steps, desc="training", unit="step", leave=True)

    devices = [device] if device.type == "cuda" else []
    old_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
        try:
            for step in range(steps):
                step_lr = _lr_at(step, steps, lr, schedule, warmup)
                for group in opt.param_groups:
                    group["lr"] = step_lr
                batch = prompts_to_torch(
                    sample_prompts(rng, batch_size), device=device, dtype=dtype
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
                if clip_grad is not None:
                    torch.nn.utils.clip_grad_norm_(params, clip_grad)
                opt.step()
                losses[step], lrs[step] = value, step_lr
                done = step + 1
                if bar is not None:
                    bar.update(1)
                    if step % 50 == 0:
                        bar.set_postfix(loss=f"{value:.4g}")
                last = done == steps
                if eval_prompts is not None and (done % eval_every == 0 or last):
                    ev = evaluate_in_context(model, eval_prompts)
                    eval_steps.append(done)
                    eval_losses.append(ev)
                    if not math.isfinite(ev):
                        raise TrainingDiverged(f"validation loss became {ev} after {done} steps")
                    if early_stop_patience is not None:
                        if ev < best * (1.0 - early_stop_min_delta):
                            best, bad_evals = ev, 0
                        else:
                            bad_evals += 1
                            if bad_evals >= early_stop_patience and not last:
                                stopped_early = True
                                break
        finally:
            if bar is not None:
                bar.close()
            torch.set_num_threads(old_threads)

    return TrainResult(
        model=model,
        losses=losses[:done].copy(),
        lrs=lrs[:done].copy(),
        eval_steps=np.asarray(eval_steps, dtype=int),
        eval_losses=np.asarray(eval_losses, dtype=np.float64),
        steps_run=done,
        stopped_early=stopped_early,
    )
