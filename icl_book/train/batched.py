"""Many small in-context models of one architecture trained at once, each exactly as if alone.

:class:`BatchedTrainer` trains a list of :class:`Member` runs together (each with its own weights, data,
learning rate and Adam state; identical to training each alone with
:func:`~icl_book.train.train_in_context` up to float rounding); :mod:`icl_book.train.protocol` runs the
book's convergence protocol on it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .._declare import Cost, Free, Integer, Options, OrNone, declare
from .._validate import ArgumentTypeError, nonnegative_int, positive_float, positive_int
from ..attention._params import inputs_checked
from .loop import (
    DEVICE,
    DTYPE,
    POSITIVE,
    PROMPT_BYTES,
    PROMPT_OPERATIONS,
    STEP_OPERATIONS,
    TrainingDiverged,
    _device,
    _prompts_to_torch,
    predict_in_context,
)
from .schedules import learning_rate

__all__ = ["Member", "BatchedTrainer"]

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
        # validation only, every field: the fields are kept as given (the name keys results and
        # checkpoints). A huge batch_size is the trainer's cost to refuse (a step's work), not a
        # wrong field.
        if not isinstance(self.name, str) or not self.name:
            raise ArgumentTypeError(f"name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.model, torch.nn.Module):
            raise ArgumentTypeError(
                f"model must be a torch.nn.Module, got {type(self.model).__name__}"
            )
        if not callable(self.sample_prompts):
            raise ArgumentTypeError(
                "sample_prompts must be a callable (rng, batch_size) -> Prompts, "
                f"got {type(self.sample_prompts).__name__}"
            )
        nonnegative_int("seed", self.seed)
        positive_float("lr", self.lr)
        nonnegative_int("warmup", self.warmup)
        if self.batch_size is not None:
            positive_int("batch_size", self.batch_size)
        nonnegative_int("decay_start", self.decay_start)


def _step_cost(a) -> tuple[float, float]:
    """One step of a :class:`BatchedTrainer`: each member draws its batch and takes its forward,
    backward and Adam step (the lower bounds of :data:`~icl_book.train.loop.STEP_OPERATIONS`). The
    budget bounds one step, the work that cannot be interrupted: a training run is a sequence of
    steps, checkpointed between them (:func:`~icl_book.train.train_to_convergence`). Members that
    are not a list or tuple count as one (a trainer has at least one; the body refuses them)."""
    members = a["members"] if isinstance(a["members"], (list, tuple)) else []
    sizes = [m.batch_size for m in members if isinstance(m, Member) and m.batch_size]
    batch = max([int(a["batch_size"]), *sizes])
    n = max(1, len(members))
    return n * (STEP_OPERATIONS + PROMPT_OPERATIONS * batch), PROMPT_BYTES * n * batch


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

    @declare(
        members=Free(
            "a non-empty sequence of Member: checked in the body, member by member (distinct names, "
            "models of one architecture)"
        ),
        batch_size=Integer(1, None),
        schedule=Options(("constant", "rsqrt")),
        clip_grad=OrNone(POSITIVE),
        chunk_size=Integer(1, None),
        device=DEVICE,
        dtype=DTYPE,
        cost=Cost(
            _step_cost,
            "len(members) × (10⁵ + 10³ batch_size) operations and 32 len(members) batch_size "
            "bytes per step at the least, batch_size the largest of the trainer's and the members'",
        ),
    )
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
        self.members = members
        self.batch_size = int(batch_size)
        self.schedule = schedule
        self.clip_grad = None if clip_grad is None else float(clip_grad)
        self.chunk_size = int(chunk_size)
        self.device = _device(device)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        self.dtype = dtype
        shapes = {k: v.shape for k, v in members[0].model.state_dict().items()}
        for m in members:  # each Member validated its own fields
            if {k: v.shape for k, v in m.model.state_dict().items()} != shapes:
                raise ValueError(
                    f"member {m.name!r}: every model must have the parameter shapes of "
                    f"{members[0].name!r}"
                )
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
        return learning_rate(step, m.lr, self.schedule, warmup=m.warmup, decay_start=m.decay_start)

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
        # in this trainer's dtype and on its device (a checkpoint can move between them: e.g. a run
        # trained in float64 through its early phase continues in float32)
        for attr in ("params", "exp_avg", "exp_avg_sq"):
            setattr(
                self,
                attr,
                {
                    k: v.to(device=self.device, dtype=self.dtype, copy=True)
                    for k, v in state[attr].items()
                },
            )
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
