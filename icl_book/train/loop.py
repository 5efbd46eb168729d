"""The single-model training loop: :func:`~icl_book.train.train_in_context`, and evaluating a model on prompts.

Every trainable model in the book follows one interface (Garg et al.'s, with an explicit query):

``model(xs, ys, x_query) -> y_hat`` with torch tensors ``xs (B, N, d)``, ``ys (B, N)``, ``x_query (B, d)``
and output ``y_hat (B,)``.

Prompts come from a *sampler* ``sample_prompts(rng, batch_size) -> icl_book.tasks.Prompts`` (NumPy arrays),
for instance::

    from functools import partial
    from icl_book.tasks import sample_linear_prompts

    def sample_prompts(rng, batch_size):
        return sample_linear_prompts(batch_size, 20, 5, rng=rng, noise_var=0.1)

:func:`~icl_book.train.train_in_context` minimises the mean squared error of ``model``'s prediction at the query against
``y_query`` with Adam on fresh prompts every step (the "infinite task" regime; pass a sampler that draws
from a finite ``task_pool`` for the other one). Runs are reproducible: ``seed`` seeds the NumPy generator
that draws the data and, inside a :func:`torch.random.fork_rng` block (the global torch state is left
untouched), torch itself. Two calls with the same arguments on the same machine and thread count give
bitwise identical losses and weights.

Note that the model's *initial* weights are drawn when the model is built, before training: build it with
its own seeded generator (e.g. ``LinearSelfAttention(dim, generator=torch.Generator().manual_seed(0))``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from .._declare import Callable as CallableArg
from .._declare import Cost, Flag, Free, Instance, Integer, Interval, Options, OrNone, declare
from .._validate import ArgumentTypeError
from ..attention._params import inputs_checked
from .schedules import SCHEDULES, learning_rate

__all__ = [
    "TrainResult",
    "TrainingDiverged",
    "train_in_context",
    "evaluate_in_context",
    "predict_in_context",
    "prompts_to_torch",
]


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite (lower ``lr`` or set ``clip_grad``)."""


@dataclass
class TrainResult:
    """What :func:`~icl_book.train.train_in_context` returns.

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


# The declared constraints (:mod:`icl_book._declare`) the training functions share.
MODEL = Instance((torch.nn.Module,), what="a torch.nn.Module")
SAMPLER = CallableArg(what="a callable (rng, batch_size) -> Prompts")
PROMPTS = Free(
    "a Prompts batch: its four arrays are checked where they are converted, each finite, "
    "their shapes against each other"
)
DEVICE = Free(
    "a torch.device or its name: torch parses it where it is used (a name it does not "
    "know is a ValueError naming device)"
)
DTYPE = Free("a floating torch.dtype, checked where it is used")
POSITIVE = Interval(0.0, math.inf, closed="neither")
#: Seeds torch accepts (``torch.manual_seed`` refuses 2**64 and beyond).
SEED = Integer(0, 2**64 - 1)
#: Lower bounds, in operations of about 1 ns, of one training step and of one prompt in it: measured
#: 1.8 ms per step and 1.3 µs per prompt (d = 2, N = 5), 8.5 µs per prompt at d = 5, N = 20, on the
#: book's 2-core machine; the bounds are ten times smaller, so a run they refuse surely exceeds the
#: budget on a faster machine too.
STEP_OPERATIONS, PROMPT_OPERATIONS = 1e5, 1e3
#: Bytes a training step keeps: its loss and learning rate (Python floats in lists, then float64).
STEP_BYTES = 80
#: Bytes of one prompt at the least (its query, its label and one context token and label, float64).
PROMPT_BYTES = 32


@declare(prompts=PROMPTS, device=DEVICE, dtype=DTYPE)
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


@declare(model=MODEL, prompts=PROMPTS, chunk_size=Integer(1, None))
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
    chunk_size = int(chunk_size)
    total = 0.0
    with _evaluating(model, prompts) as (xs, ys, xq, yq):
        for start in range(0, xs.shape[0], chunk_size):
            sl = slice(start, start + chunk_size)
            total += float(_mse(model, xs[sl], ys[sl], xq[sl], yq[sl])) * yq[sl].shape[0]
    return total / xs.shape[0]


@declare(model=MODEL, prompts=PROMPTS, chunk_size=Integer(1, None))
def predict_in_context(model: torch.nn.Module, prompts, *, chunk_size: int = 512) -> np.ndarray:
    """The predictions ``(B,)`` (NumPy float64) of ``model`` at the queries of a NumPy prompt batch.

    Evaluated as :func:`evaluate_in_context` is (eval mode, no gradients, the parameters' device and
    dtype). ``chunk_size`` prompts at a time: a few hundred keeps the tokens in cache (three times
    faster than one batch of 10,000 for chapter 6's stacks) and bounds memory.
    """
    chunk_size = int(chunk_size)
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
    device, dtype = _model_device_dtype(model)
    tensors = prompts_to_torch(prompts, device=device, dtype=dtype)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield tensors
    finally:
        model.train(was_training)


def _training_cost(a) -> tuple[float, float]:
    """:func:`train_in_context`: every step draws a batch, runs the model forward and backward and
    takes an Adam step (lower bounds, :data:`STEP_OPERATIONS`); it keeps each step's loss and
    learning rate, and holds one batch at a time."""
    steps, batch = float(a["steps"]), float(a["batch_size"])
    operations = steps * (STEP_OPERATIONS + PROMPT_OPERATIONS * batch)
    return operations, STEP_BYTES * steps + PROMPT_BYTES * batch


@declare(
    model=MODEL,
    sample_prompts=SAMPLER,
    steps=Integer(1, None),
    lr=POSITIVE,
    seed=SEED,
    batch_size=Integer(1, None),
    weight_decay=Interval(0.0, math.inf),
    clip_grad=OrNone(POSITIVE),
    schedule=Options(SCHEDULES),
    warmup=Integer(0, None),
    eval_prompts=OrNone(PROMPTS),
    eval_every=OrNone(Integer(1, None)),
    early_stop_patience=OrNone(Integer(1, None)),
    early_stop_min_delta=Interval(0.0, math.inf),
    progress=Flag(),
    device=DEVICE,
    dtype=DTYPE,
    num_threads=OrNone(Integer(1, None)),
    cost=Cost(
        _training_cost,
        "steps × (10⁵ + 10³ batch_size) operations at the least; 80 steps + 32 batch_size bytes",
    ),
)
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
        Number of Adam updates (``>= 1``). A run whose declared cost (at least ``steps × (10⁵ +
        10³ batch_size)`` operations of about 1 ns) exceeds the budget is refused before its first
        step; ``with icl_book.limits.budget(operations=...)`` raises it.
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
    bar = _progress_bar(config.steps) if progress else None
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
    """The validated arguments of :func:`~icl_book.train.train_in_context`."""

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
    """:func:`~icl_book.train.train_in_context`'s arguments, each checked by its declaration, with
    what a declaration cannot state: the relations between them and the torch device and dtype."""
    steps, warmup = int(kw["steps"]), int(kw["warmup"])
    if warmup >= steps and warmup > 0:
        raise ValueError(f"warmup must be < steps = {steps}, got {warmup}")
    eval_prompts, eval_every = kw["eval_prompts"], kw["eval_every"]
    if eval_every is not None:
        eval_every = int(eval_every)
    if eval_prompts is not None and eval_every is None:
        eval_every = max(1, steps // 20)
    patience = kw["early_stop_patience"]
    if patience is not None:
        patience = int(patience)
        if eval_prompts is None:
            raise ValueError("early_stop_patience needs eval_prompts (a fixed validation set)")
    dtype = kw["dtype"]
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    clip_grad, num_threads = kw["clip_grad"], kw["num_threads"]
    return _TrainingConfig(
        steps=steps,
        lr=float(kw["lr"]),
        seed=int(kw["seed"]),
        batch_size=int(kw["batch_size"]),
        weight_decay=float(kw["weight_decay"]),
        clip_grad=None if clip_grad is None else float(clip_grad),
        schedule=kw["schedule"],
        warmup=warmup,
        eval_prompts=eval_prompts,
        eval_every=eval_every,
        early_stop_patience=patience,
        early_stop_min_delta=float(kw["early_stop_min_delta"]),
        device=_device(kw["device"]),
        dtype=dtype,
        num_threads=None if num_threads is None else int(num_threads),
    )


def _train_step(model, opt, params, sample_prompts, rng, step: int, config) -> tuple[float, float]:
    """One Adam update on a fresh batch; returns the batch loss (before the update) and the step's lr."""
    step_lr = learning_rate(
        step, config.lr, config.schedule, warmup=config.warmup, steps=config.steps
    )
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
        # grown as the run trains: nothing is allocated for steps that are never taken
        # (steps = 10**9 would otherwise take 16 GB before the first step)
        self.losses: list[float] = []
        self.lrs: list[float] = []
        self.eval_steps: list[int] = []
        self.eval_losses: list[float] = []
        self.done, self.stopped_early = 0, False

    def record(self, step: int, value: float, step_lr: float) -> None:
        self.losses.append(value)
        self.lrs.append(step_lr)
        self.done = step + 1

    def record_eval(self, value: float) -> None:
        self.eval_steps.append(self.done)
        self.eval_losses.append(value)

    def result(self, model) -> TrainResult:
        return TrainResult(
            model=model,
            losses=np.asarray(self.losses, dtype=np.float64),
            lrs=np.asarray(self.lrs, dtype=np.float64),
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
