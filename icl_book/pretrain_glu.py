"""Chapter 5's shipped trained layers: how they were trained, and loading them with their curves.

Chapter 5 uses twelve small trained models (LSA layers and LSA + GLU blocks, on quadratic, mixed and variable-length
quadratic prompts, three seeds where a claim is about training). Training them takes minutes; a chapter may run
90 s, so their weights and training losses ship as package data (``icl_book/data/glu_runs.npz``). The training
command belongs to the repository: ``python -m booktools.pretrain_glu`` (from a clone, one torch thread)
regenerates the file bitwise from :data:`RUNS` with :func:`train_run`; ``tests/test_shipped_weights.py``
retrains one run and compares.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from .attention.glu import TransformerBlock
from .attention.lsa import LinearSelfAttention
from .tasks import sample_mixed_prompts, sample_quadratic_prompts
from .train import train_in_context

__all__ = [
    "DIM",
    "NOISE_VAR",
    "CONTEXT_LEN",
    "CONTEXT_CHOICES",
    "GLURun",
    "RUNS",
    "TrainedRun",
    "make_sampler",
    "build_model",
    "train_run",
    "runs_arrays",
    "DATA_PATH",
    "load_runs",
]

#: Chapter 5's setting: input dimension, label-noise variance, training context length.
DIM, NOISE_VAR, CONTEXT_LEN = 4, 0.1, 100
#: The context lengths of the variable-length study (one drawn per training batch).
CONTEXT_CHOICES = (25, 50, 100, 200)
#: The shipped file.
DATA_PATH = Path(__file__).resolve().parent / "data" / "glu_runs.npz"
TASKS = ("quadratic", "mixed", "variable")


@dataclass(frozen=True)
class GLURun:
    """One training run: the model, its initial-weight seed, the task and Adam's settings.

    ``model`` is ``"lsa"`` (:class:`~icl_book.attention.LinearSelfAttention`) or ``"block"``
    (:class:`~icl_book.attention.TransformerBlock` with ``n_scratch`` scratch rows and ``hidden`` GLU units);
    ``task`` is ``"quadratic"`` (``N = 100``), ``"mixed"`` (:func:`~icl_book.tasks.sample_mixed_prompts`,
    ``N = 100``) or ``"variable"`` (quadratic, ``N`` drawn from :data:`CONTEXT_CHOICES` per batch).
    """

    model: str
    task: str
    model_seed: int
    train_seed: int
    steps: int
    lr: float
    batch_size: int = 256
    init_scale: float = 0.25
    n_scratch: int = 16
    hidden: int = 16
    schedule: str = "cosine"
    warmup: int = 100

    def describe(self) -> str:
        """One line for a reader: what was trained and how."""
        width = "" if self.model == "lsa" else f" {self.n_scratch}+{self.hidden}"
        return (
            f"{self.model}{width}, {self.task} prompts: {self.steps} Adam steps x "
            f"{self.batch_size}, lr {self.lr:g} {self.schedule}, seeds "
            f"{self.model_seed}/{self.train_seed}"
        )

    def __post_init__(self):
        if self.model not in ("lsa", "block"):
            raise ValueError(f"model must be 'lsa' or 'block', got {self.model!r}")
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")


_LSA = dict(model="lsa", steps=400, lr=0.01, init_scale=0.1, schedule="constant", warmup=0)
_BLOCK = dict(model="block", steps=600, lr=0.02)

#: Every shipped run, by name.
RUNS = {
    "lsa_quadratic": GLURun(task="quadratic", model_seed=0, train_seed=1, **_LSA),
    "block_quadratic": GLURun(task="quadratic", model_seed=0, train_seed=3, **_BLOCK),
    "narrow_quadratic": GLURun(
        task="quadratic", model_seed=0, train_seed=3, n_scratch=10, hidden=10, **_BLOCK
    ),
    **{
        f"lsa_mixed/seed{s}": GLURun(task="mixed", model_seed=s, train_seed=10 + s, **_LSA)
        for s in range(3)
    },
    **{
        f"block_mixed/seed{s}": GLURun(task="mixed", model_seed=s, train_seed=20 + s, **_BLOCK)
        for s in range(3)
    },
    **{
        f"block_variable/seed{s}": GLURun(
            task="variable", model_seed=100 + s, train_seed=30 + s, **_BLOCK
        )
        for s in range(3)
    },
}


@dataclass
class TrainedRun:
    """One trained model (float64, CPU, eval mode) with its per-step training loss and CPU time."""

    name: str
    run: GLURun
    model: torch.nn.Module
    losses: np.ndarray
    cpu_seconds: float


def make_sampler(task: str):
    """``sample_prompts(rng, batch_size)`` for :func:`~icl_book.train.train_in_context` on ``task``."""
    if task == "quadratic":
        return lambda rng, batch: sample_quadratic_prompts(
            batch, CONTEXT_LEN, DIM, rng=rng, noise_var=NOISE_VAR
        )
    if task == "mixed":
        return lambda rng, batch: sample_mixed_prompts(
            batch, CONTEXT_LEN, DIM, rng=rng, noise_var=NOISE_VAR
        )
    if task == "variable":
        return lambda rng, batch: sample_quadratic_prompts(
            batch, int(rng.choice(CONTEXT_CHOICES)), DIM, rng=rng, noise_var=NOISE_VAR
        )
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")


def build_model(run: GLURun) -> torch.nn.Module:
    """The untrained model of ``run`` (its initial weights drawn from ``run.model_seed``)."""
    gen = torch.Generator().manual_seed(run.model_seed)
    if run.model == "lsa":
        return LinearSelfAttention(DIM, init_scale=run.init_scale, generator=gen)
    return TransformerBlock(
        DIM, run.n_scratch, run.hidden, init_scale=run.init_scale, generator=gen
    )


def train_run(name: str, run: GLURun | None = None) -> TrainedRun:
    """Train run ``name`` of :data:`RUNS` (or ``run``); with one torch thread, the shipped result bitwise."""
    if run is None:
        if name not in RUNS:
            raise ValueError(f"name must be one of {tuple(RUNS)}, got {name!r}")
        run = RUNS[name]
    model = build_model(run)
    start = time.process_time()
    res = train_in_context(
        model,
        make_sampler(run.task),
        steps=run.steps,
        lr=run.lr,
        seed=run.train_seed,
        batch_size=run.batch_size,
        schedule=run.schedule,
        warmup=run.warmup,
    )
    model.eval()
    return TrainedRun(name, run, model, np.asarray(res.losses), time.process_time() - start)


def runs_arrays(runs: list[TrainedRun]) -> dict[str, np.ndarray]:
    """The arrays of a ``.npz`` holding ``runs``: settings as JSON, weights, losses and CPU times."""
    out = {"runs": np.array(json.dumps({r.name: asdict(r.run) for r in runs}))}
    for r in runs:
        for key, value in r.model.state_dict().items():
            out[f"{r.name}/param/{key}"] = value.detach().cpu().numpy()
        out[f"{r.name}/losses"] = r.losses
        out[f"{r.name}/cpu_seconds"] = np.array(r.cpu_seconds)
    return out


def load_runs(path: str | Path | None = None) -> dict[str, TrainedRun]:
    """Load the shipped runs (or a file written by ``python -m booktools.pretrain_glu``), by name."""
    path = DATA_PATH if path is None else Path(path)
    if not path.exists():
        raise ValueError(
            f"path must be an existing .npz written by booktools.pretrain_glu, got {path}"
        )
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    out = {}
    for name, settings in json.loads(str(arrays["runs"])).items():
        run = GLURun(**settings)
        model = build_model(run)
        prefix = f"{name}/param/"
        model.load_state_dict(
            {
                k[len(prefix) :]: torch.from_numpy(v)
                for k, v in arrays.items()
                if k.startswith(prefix)
            }
        )
        model.eval()
        out[name] = TrainedRun(
            name, run, model, arrays[f"{name}/losses"], float(arrays[f"{name}/cpu_seconds"])
        )
    return out
