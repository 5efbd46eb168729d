"""Chapter 6's shipped deep transformers: how they were trained, and loading them with their curves.

The unconstrained :class:`~icl_book.attention.DeepTransformer` stacks of chapter 6 (every weight free and
randomly initialised) take longer to train than a chapter may run, so their weights and training curves ship as
package data (``icl_book/data/depth_*.npz``, one file per :data:`EXPERIMENTS` entry). The training command
belongs to the repository, not to the installed package: ``python -m booktools.pretrain_depth`` (run from a
clone, one torch thread) regenerates the files bitwise from the settings below, with :func:`train_one`.

What makes training work here (chapter 6 reports the measurements):

- float64 throughout; residual branches initialised at zero, so the untrained stack predicts 0;
- Adam with a linear warm-up, a cosine decay and gradient-norm clipping; a smaller peak learning rate for the
  depth-8 stacks (:meth:`DepthConfig.lr_for`);
- bounded inputs (uniform on ``[−1, 1]^d``, Legendre targets): Gaussian cubic features are heavy-tailed;
- label normalisation (``DeepTransformer(label_norm=True)``): the stack sees ``y / s`` with ``s`` the prompt's
  root-mean-square label and its prediction is scaled back, so no rare prompt with large labels can drive the
  high-degree polynomial that a deep stack is into a catastrophic prediction;
- a saturating readout (``output_bound``): the normalised prediction passes through ``5 tanh(u/5)``, so no
  prediction leaves five times the prompt's label scale (without it, a cubic model made one catastrophic
  prediction on 10,000 fresh prompts).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from . import _validate as v
from .attention.deep import DeepTransformer
from .tasks import Prompts, sample_polynomial_prompts
from .train import train_in_context

__all__ = [
    "DepthConfig",
    "EXPERIMENTS",
    "DATA_DIR",
    "TASK_DEGREES",
    "TrainedDepthModel",
    "PretrainedDepth",
    "make_sampler",
    "build_model",
    "train_one",
    "model_arrays",
    "data_path",
    "load_pretrained",
]

#: Where the shipped weights live (package data).
DATA_DIR = Path(__file__).resolve().parent / "data"

#: Polynomial degree of each target family.
TASK_DEGREES = {"quadratic": 2, "cubic": 3}


@dataclass(frozen=True)
class DepthConfig:
    """The fixed settings of one training study (one shipped file).

    ``seeds`` index independent runs: run ``s`` of depth ``L`` initialises from
    ``torch.Generator().manual_seed(1000 L + s)`` and draws its training prompts from
    ``np.random.default_rng(100 + s)``; the validation prompts come from ``eval_seed``. The peak learning rate
    of depth ``L`` is ``lr · min(1, lr_depth_ref / L)`` (:meth:`lr_for`).
    """

    def lr_for(self, depth: int) -> float:
        """Peak learning rate of a stack of ``depth`` blocks (smaller for the deepest stacks)."""
        return self.lr * min(1.0, self.lr_depth_ref / depth)

    name: str
    dim: int
    width: int
    hidden_dim: int
    tasks: tuple[str, ...]
    depths: tuple[int, ...]
    seeds: tuple[int, ...] = (0, 1, 2)
    context_len: int = 50
    noise_var: float = 0.01
    basis: str = "legendre"
    steps: int = 1200
    batch_size: int = 128
    lr: float = 5e-3
    lr_depth_ref: int = 4
    warmup: int = 100
    clip_grad: float = 1.0
    label_norm: bool = True
    output_bound: float | None = 5.0
    eval_size: int = 1000
    eval_seed: int = 12345
    eval_every: int = 60

    def __post_init__(self):
        """Refuse, by field name, a setting no run could use (a string count, a NaN rate, ...)."""
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        dim = v.positive_int("dim", self.dim)
        width = v.positive_int("width", self.width)
        if width < dim + 2:
            raise ValueError(
                f"width must be >= dim + 2 = {dim + 2} (x, the constant and y), got width={width} "
                f"with dim={dim}"
            )
        v.positive_int("hidden_dim", self.hidden_dim)
        for key in ("tasks", "depths", "seeds"):
            value = getattr(self, key)
            if not isinstance(value, tuple) or not value:
                raise v.ArgumentTypeError(f"{key} must be a non-empty tuple, got {value!r}")
        for task in self.tasks:
            v.choice("tasks", task, TASK_DEGREES)
        for depth in self.depths:
            v.positive_int("depths", depth)
        for seed in self.seeds:
            v.nonnegative_int("seeds", seed)
        v.positive_int("context_len", self.context_len)
        v.nonnegative_float("noise_var", self.noise_var)
        v.choice("basis", self.basis, ("hermite", "legendre", "monomial"))
        v.positive_int("steps", self.steps)
        v.positive_int("batch_size", self.batch_size)
        v.positive_float("lr", self.lr)
        v.positive_int("lr_depth_ref", self.lr_depth_ref)
        v.nonnegative_int("warmup", self.warmup)
        v.positive_float("clip_grad", self.clip_grad)
        v.flag("label_norm", self.label_norm)
        if self.output_bound is not None:
            v.positive_float("output_bound", self.output_bound)
        v.positive_int("eval_size", self.eval_size)
        v.nonnegative_int("eval_seed", self.eval_seed)
        v.positive_int("eval_every", self.eval_every)
        # sizes checked before anything is built: the weights of the deepest stack, a training batch
        # and the validation set (float64 entries)
        block = 2 * width * width + 3 * width * self.hidden_dim
        v.size_limit("depths, width and hidden_dim", block * max(self.depths), what="weights")
        tokens = (self.context_len + 1) * width
        v.size_limit("batch_size * (context_len + 1) * width", self.batch_size * tokens)
        v.size_limit("eval_size * (context_len + 1) * width", self.eval_size * tokens)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> DepthConfig:
        raw = json.loads(text)
        for key in ("tasks", "depths", "seeds"):
            raw[key] = tuple(raw[key])
        return cls(**raw)


#: The shipped studies: ``d = 3`` (quadratic and cubic, depths 1–8) and ``d = 5`` (quadratic, depths 1–4).
EXPERIMENTS = {
    "d3": DepthConfig(
        name="d3", dim=3, width=9, hidden_dim=18, tasks=("quadratic", "cubic"), depths=(1, 2, 4, 8)
    ),
    "d5": DepthConfig(
        name="d5", dim=5, width=11, hidden_dim=22, tasks=("quadratic",), depths=(1, 2, 4)
    ),
}


@dataclass
class TrainedDepthModel:
    """One trained stack with its training record."""

    task: str
    dim: int
    depth: int
    seed: int
    model: DeepTransformer
    losses: np.ndarray
    eval_steps: np.ndarray
    eval_losses: np.ndarray
    cpu_seconds: float


@dataclass
class PretrainedDepth:
    """Everything a shipped file holds: its settings and its models."""

    config: DepthConfig
    models: list[TrainedDepthModel] = field(default_factory=list)

    def select(self, task: str, depth: int) -> list[TrainedDepthModel]:
        """The runs (one per seed, in seed order) of one task and depth."""
        out = [m for m in self.models if m.task == task and m.depth == depth]
        if not out:
            raise ValueError(f"no model with task={task!r}, depth={depth} in {self.config.name}")
        return sorted(out, key=lambda m: m.seed)


#: Deepest stack :func:`build_model` makes (the shipped studies go to 8; each block is a few kB).
MAX_DEPTH = 1024


def _config(config) -> DepthConfig:
    if not isinstance(config, DepthConfig):
        raise v.ArgumentTypeError(
            f"config must be a DepthConfig (e.g. EXPERIMENTS['d3']), got {type(config).__name__}"
        )
    return config


def make_sampler(degree: int, config: DepthConfig):
    """``sample_prompts(rng, batch_size)`` for :func:`~icl_book.train.train_in_context` on the study's task."""
    _config(config)
    degree = v.positive_int("degree", degree)

    def sample_prompts(rng, batch_size, context_len: int | None = None) -> Prompts:
        return sample_polynomial_prompts(
            batch_size,
            config.context_len if context_len is None else context_len,
            config.dim,
            degree,
            rng=rng,
            noise_var=config.noise_var,
            basis=config.basis,
        )

    return sample_prompts


def build_model(config: DepthConfig, depth: int, seed: int) -> DeepTransformer:
    """The untrained stack of run ``seed`` at ``depth`` (its initial weights are the seed's)."""
    _config(config)
    depth = v.integer("depth", depth, minimum=1, maximum=MAX_DEPTH)
    seed = v.nonnegative_int("seed", seed)
    block = 2 * config.width**2 + 3 * config.width * config.hidden_dim
    v.size_limit("depth", depth * block, what="weights")
    gen = torch.Generator().manual_seed(1000 * depth + seed)
    return DeepTransformer(
        config.dim,
        config.width,
        depth,
        hidden_dim=config.hidden_dim,
        label_norm=config.label_norm,
        output_bound=config.output_bound,
        generator=gen,
    )


def _key(task: str, depth: int, seed: int) -> str:
    return f"{task}/depth{depth}/seed{seed}"


def train_one(config: DepthConfig, task: str, depth: int, seed: int) -> TrainedDepthModel:
    """Train one run (call with ``torch.set_num_threads(1)`` for the shipped, bitwise-reproducible result)."""
    _config(config)
    task = v.choice("task", task, TASK_DEGREES)
    depth = v.integer("depth", depth, minimum=1, maximum=MAX_DEPTH)
    seed = v.nonnegative_int("seed", seed)
    sampler = make_sampler(TASK_DEGREES[task], config)
    eval_prompts = sampler(np.random.default_rng(config.eval_seed), config.eval_size)
    model = build_model(config, depth, seed)
    start = time.process_time()
    res = train_in_context(
        model,
        sampler,
        steps=config.steps,
        lr=config.lr_for(depth),
        seed=100 + seed,
        batch_size=config.batch_size,
        clip_grad=config.clip_grad,
        schedule="cosine",
        warmup=config.warmup,
        eval_prompts=eval_prompts,
        eval_every=config.eval_every,
        progress=False,
    )
    model.eval()
    return TrainedDepthModel(
        task,
        config.dim,
        depth,
        seed,
        model,
        np.asarray(res.losses),
        np.asarray(res.eval_steps),
        np.asarray(res.eval_losses),
        time.process_time() - start,
    )


def model_arrays(run: TrainedDepthModel) -> dict[str, np.ndarray]:
    """The arrays one run contributes to its file (weights under ``…/param/``, curves, CPU time)."""
    if not isinstance(run, TrainedDepthModel):
        raise v.ArgumentTypeError(
            f"run must be a TrainedDepthModel (from train_one), got {type(run).__name__}"
        )
    key = _key(run.task, run.depth, run.seed)
    out = {
        f"{key}/param/{name}": value.detach().cpu().numpy()
        for name, value in run.model.state_dict().items()
    }
    out[f"{key}/losses"] = run.losses
    out[f"{key}/eval_steps"] = run.eval_steps
    out[f"{key}/eval_losses"] = run.eval_losses
    out[f"{key}/cpu_seconds"] = np.array(run.cpu_seconds)
    return out


def data_path(name: str) -> Path:
    """The shipped file of study ``name`` (a key of :data:`EXPERIMENTS`)."""
    if name not in EXPERIMENTS:
        raise ValueError(f"name must be one of {tuple(EXPERIMENTS)}, got {name!r}")
    return DATA_DIR / f"depth_{name}.npz"


def load_pretrained(name: str = "d3", *, path: str | Path | None = None) -> PretrainedDepth:
    """Load a shipped study (or a file written by ``python -m booktools.pretrain_depth``).

    Returns
    -------
    PretrainedDepth
        The study's :class:`DepthConfig` and one :class:`TrainedDepthModel` per (task, depth, seed), with
        the trained weights (float64, CPU, eval mode) and the training curves.
    """
    if path is not None and not isinstance(path, (str, Path)):
        raise v.ArgumentTypeError(f"path must be a str or Path, got {type(path).__name__}")
    path = data_path(name) if path is None else Path(path)
    if not path.exists():
        raise ValueError(
            f"path must be an existing .npz written by booktools.pretrain_depth, got {path}"
        )
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    config = DepthConfig.from_json(str(arrays["config"]))
    result = PretrainedDepth(config)
    for task in config.tasks:
        for depth in config.depths:
            for seed in config.seeds:
                key = _key(task, depth, seed)
                prefix = f"{key}/param/"
                model = build_model(config, depth, seed)
                state = {
                    k[len(prefix) :]: torch.from_numpy(v)
                    for k, v in arrays.items()
                    if k.startswith(prefix)
                }
                model.load_state_dict(state)
                model.eval()
                result.models.append(
                    TrainedDepthModel(
                        task,
                        config.dim,
                        depth,
                        seed,
                        model,
                        arrays[f"{key}/losses"],
                        arrays[f"{key}/eval_steps"],
                        arrays[f"{key}/eval_losses"],
                        float(arrays[f"{key}/cpu_seconds"]),
                    )
                )
    return result
