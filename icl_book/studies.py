"""The converged training studies of chapters 5 and 6: what is trained, and loading the results.

A *study* is a list of cohorts; a cohort is a set of runs of one architecture trained together by
:class:`icl_book.train.BatchedTrainer` under the book's convergence protocol
(:func:`icl_book.train.train_to_convergence`: the validation error is measured at 1,000, 2,000,
4,000, … steps, and a run stops once, past the cohort's ``min_steps``, each of two consecutive
doublings changed it by at most one paired standard error, or at the bound, flagged not converged).
Every run has its own initial weights, its own data generator and its own learning rate. A run trained
on a mix of context lengths is validated at every length of the mix.

- ``"glu"`` (chapter 5): LSA+GLU blocks of width 16 + 16 and 10 + 10 (scratch + hidden units) on
  random quadratic prompts (d = 4, σ² = 0.1), trained at each fixed context length
  N ∈ {25, 50, 100, 200, 400} and on a mix of N ∈ {25, 50, 100, 200} (drawn afresh for every batch),
  five seeds each; two more learning rates at N = 100 (width 16 + 16); and 10 + 10 blocks started at the
  exact construction (one whitened kernel-GD step) instead of random weights.
  Also trained LSA layers (quadratic and mixed linear-plus-quadratic targets) and 16 + 16 blocks on the
  mixed targets, five seeds each, at N = 100.
- ``"depth"`` (chapter 6): free deep stacks (d = 3, width 9, 18 hidden units per block, label
  normalisation and a saturating readout) of depth 1, 2, 4 and 8 on quadratic and cubic Legendre
  targets (N = 50, σ² = 0.01), five seeds each; at d = 5 (width 11) depths 1, 2 and 4 on
  quadratics; and learned block-coordinate descent (:class:`~icl_book.attention.LearnedBCD`, the
  construction's feature writers frozen, each block's preconditioner learned) at depths up to two
  cycles, three data seeds each.

Training a study takes hours of CPU (``python -m booktools.train_study NAME``, resumable: it saves a
checkpoint as it goes); the results ship as package data (``icl_book/data/study_<name>.npz``) and
:func:`load_study` reads them.

One job: a study from its definition to its shipped file: the fields of a cohort and its runs are
what training writes and loading reads back, so they change together.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as fields_of
from os import PathLike
from pathlib import Path

import numpy as np
import torch

from ._declare import Callable as CallableArg
from ._declare import Cost, Free, Instance, Integer, Options, OrNone, Text, declare
from ._validate import (
    ArgumentTypeError,
    choice,
    nonnegative_int,
    positive_float,
    positive_int,
)
from .attention.deep import DeepTransformer, LearnedBCD
from .attention.glu import TransformerBlock, glu_lsa_block_weights
from .attention.lsa import LinearSelfAttention
from .tasks import (
    Prompts,
    sample_mixed_prompts,
    sample_polynomial_prompts,
    sample_quadratic_prompts,
)
from .train import BatchedTrainer, ConvergenceRecord, Member, check_steps, train_to_convergence
from .train.loop import DEVICE

__all__ = [
    "RunSpec",
    "Cohort",
    "STUDIES",
    "cohorts",
    "validation_prompts",
    "build_model",
    "make_sampler",
    "members",
    "StudyRun",
    "load_study",
    "select_runs",
    "train_study",
    "train_cohort",
    "study_trainer",
    "study_path",
    "study_arrays",
]

DATA_DIR = Path(__file__).resolve().parent / "data"

#: Chapter 5's setting.
GLU_DIM, GLU_NOISE_VAR = 4, 0.1
GLU_CONTEXTS = (25, 50, 100, 200, 400)
GLU_MIX = (25, 50, 100, 200)
#: Chapter 6's setting.
DEPTH_DIM, DEPTH_NOISE_VAR, DEPTH_CONTEXT, DEPTH_WIDTH = 3, 0.01, 50, 9
DEPTH_DEGREES = {"quadratic": 2, "cubic": 3}
_MODELS = ("block", "lsa", "lbcd", "deep")
_TASKS = ("quadratic", "cubic", "mixed")


@dataclass(frozen=True)
class RunSpec:
    """One run: its model, task, seeds and learning rate.

    ``model`` is ``"block"`` (a :class:`~icl_book.attention.TransformerBlock` with ``n_scratch`` scratch
    rows and ``hidden`` GLU units) or ``"deep"`` (a :class:`~icl_book.attention.DeepTransformer` of
    ``depth`` blocks). ``task`` is ``"quadratic"``, ``"cubic"`` or ``"mix"``; ``context_len`` is the
    training N (0 for the mix). ``init`` is ``"random"`` (weights drawn from ``seed``) or
    ``"construction"`` (the exact one-step construction). ``batch_size`` (0: the cohort's) is the
    prompts per step.
    """

    model: str
    task: str
    context_len: int
    seed: int
    lr: float
    n_scratch: int = 0
    hidden: int = 0
    depth: int = 1
    init: str = "random"
    dim: int = 0
    width: int = 0
    batch_size: int = 0

    def __post_init__(self):
        # validation only: the fields (and so the run's name and data seed) are kept as given
        choice("model", self.model, _MODELS)
        choice("task", self.task, _TASKS)
        choice("init", self.init, ("random", "construction"))
        for name in ("context_len", "seed", "n_scratch", "hidden", "dim", "width", "batch_size"):
            nonnegative_int(name, getattr(self, name))
        positive_int("depth", self.depth)
        positive_float("lr", self.lr)

    @property
    def input_dim(self) -> int:
        """``d`` (``dim``, or else the chapter's default, 4 for chapter 5's models and 3 for chapter 6's)."""
        return self.dim or (DEPTH_DIM if self.model in ("deep", "lbcd") else GLU_DIM)

    @property
    def name(self) -> str:
        if self.model == "block":
            arch = f"block{self.n_scratch}+{self.hidden}"
        elif self.model == "lsa":
            arch = "lsa"
        elif self.model == "lbcd":
            arch = f"lbcd{self.depth}"
        else:
            arch = f"deep{self.depth}"
            if self.input_dim != DEPTH_DIM:
                arch += f"-d{self.input_dim}"
        n = "mix" if self.context_len == 0 else f"N{self.context_len}"
        return f"{arch}/{self.task}/{n}/lr{self.lr:g}/{self.init}/seed{self.seed}"

    @property
    def data_seed(self) -> int:
        """The seed of the run's training data, a hash of its name (every run draws its own)."""
        return zlib.crc32(self.name.encode())


@dataclass(frozen=True)
class Cohort:
    """Runs of one architecture, trained together; with the trainer's and protocol's settings."""

    name: str
    runs: tuple[RunSpec, ...]
    batch_size: int
    warmup: int
    clip_grad: float | None
    decay_start: int = 0
    first_check: int = 1000
    max_steps: int = 32_000
    min_steps: int = 8000
    val_size: int = 5000
    val_seed: int = 777
    dtype: str = field(default="float64", kw_only=True)  # keyword-only, as everywhere
    #: Steps trained in float64 before the cohort continues in ``dtype`` (zero for ``dtype`` throughout).
    float64_until: int = field(default=0, kw_only=True)

    def __post_init__(self):
        # validation only: the fields are kept as given
        if not isinstance(self.name, str) or not self.name:
            raise ArgumentTypeError(f"name must be a non-empty string, got {self.name!r}")
        if (
            not isinstance(self.runs, (tuple, list))
            or not self.runs
            or not all(isinstance(r, RunSpec) for r in self.runs)
        ):
            raise ArgumentTypeError(
                f"runs must be a non-empty tuple of RunSpec, got {type(self.runs).__name__}"
            )
        positive_int("batch_size", self.batch_size)
        nonnegative_int("warmup", self.warmup)
        if self.clip_grad is not None:
            positive_float("clip_grad", self.clip_grad)
        nonnegative_int("decay_start", self.decay_start)
        positive_int("first_check", self.first_check)
        positive_int("max_steps", self.max_steps)
        nonnegative_int("min_steps", self.min_steps)
        if self.min_steps < 4 * max(self.warmup, self.decay_start):
            raise ValueError(
                f"min_steps must be at least four times the warm-up and hold "
                f"(4 * {max(self.warmup, self.decay_start)}), got {self.min_steps}"
            )
        positive_int("val_size", self.val_size)
        nonnegative_int("val_seed", self.val_seed)
        choice("dtype", self.dtype, ("float32", "float64"))
        nonnegative_int("float64_until", self.float64_until)
        if self.float64_until and self.float64_until not in check_steps(
            self.first_check, self.max_steps
        ):
            raise ValueError(
                f"float64_until must be one of the checkpoints {self.first_check}·2^j, "
                f"got {self.float64_until}"
            )

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)


def _glu_batch(n: int) -> int:
    """Prompts per step at context length ``n``: 256, fewer above N = 100 (25,600 tokens per step)."""
    return 256 if n == 0 or n <= 100 else 256 * 100 // n


def _glu_cohorts() -> list[Cohort]:
    runs = []
    for width in (16, 10):
        for n in (*GLU_CONTEXTS, 0):
            for seed in range(5):
                runs.append(
                    RunSpec(
                        "block",
                        "quadratic",
                        n,
                        seed,
                        0.01,
                        n_scratch=width,
                        hidden=width,
                        batch_size=_glu_batch(n),
                    )
                )
    for lr in (0.003, 0.03):
        for seed in range(5):
            runs.append(RunSpec("block", "quadratic", 100, seed, lr, n_scratch=16, hidden=16))
    blocks16 = [r for r in runs if r.n_scratch == 16]
    blocks10 = [r for r in runs if r.n_scratch == 10]
    blocks10 += [
        RunSpec(
            "block",
            "quadratic",
            n,
            0,
            0.01,
            n_scratch=10,
            hidden=10,
            init="construction",
            batch_size=_glu_batch(n),
        )
        for n in (*GLU_CONTEXTS, 0)
    ]
    # float32: the models are tiny and the validation error's standard error is ~1e-2 relative,
    # far above float32 rounding; it trains twice as fast as float64
    # the bound is far beyond what most runs need: the protocol stops each run once two doublings
    # past 8,000 steps changed its validation error by at most one paired standard error
    common = dict(batch_size=256, warmup=250, clip_grad=1.0, dtype="float32", max_steps=128_000)
    lsa = tuple(
        RunSpec("lsa", task, 100, seed, 0.01)
        for task in ("quadratic", "mixed")
        for seed in range(5)
    )
    mixed = tuple(
        RunSpec("block", "mixed", 100, seed, 0.01, n_scratch=16, hidden=16) for seed in range(5)
    )
    return [
        Cohort("block16", tuple(blocks16), **common),
        Cohort("block10", tuple(blocks10), **common),
        Cohort("lsa", lsa, **common),
        Cohort("mixed", mixed, **common),
    ]


def _depth_cohorts() -> list[Cohort]:
    out = []
    # the peak learning rate is held for 2,000 steps before the 1/√t decay: with the decay starting
    # at the 100-step warm-up, depth-1 stacks were still improving at 32,000 steps (0.53 -> 0.44 from
    # 16k to 32k, d = 3 quadratics), where holding it reached 0.33-0.36 by 16,000 (a pilot of two seeds)
    deep = dict(
        batch_size=128,
        warmup=100,
        decay_start=2000,
        clip_grad=1.0,
        dtype="float32",
        max_steps=256_000,
    )
    for depth in (1, 2, 4, 8):
        # depth 8 at 2.5e-3 diverged (cubic seed 2, step ~335, in float32 and float64 alike);
        # at 1.25e-3 the same run stays finite (checked to 1,500 steps)
        lr = 5e-3 * min(1.0, (4 / depth) ** 2)
        runs = tuple(
            RunSpec("deep", task, DEPTH_CONTEXT, seed, lr, depth=depth)
            for task in DEPTH_DEGREES
            for seed in range(5)
        )
        # float32 overflows at depth 8 early in training: eight GLU layers square their tokens'
        # scale eight times (after 331 steps of cubic seed 2, 18 of 20,000 fresh prompts gave
        # non-finite predictions in float32, none in float64). Trained on, the stacks are tame:
        # at 32,000 steps every run's predictions on 20,000 fresh prompts were finite in float32
        # and within 1.1e-6 (relative) of float64's. So depth 8 trains its first 4,000 steps in
        # float64 and continues in float32, at about half the cost per step.
        early = 4000 if depth == 8 else 0
        out.append(Cohort(f"deep{depth}", runs, **deep, float64_until=early))
    for depth in (1, 2, 4):
        lr = 5e-3 * min(1.0, 4 / depth)
        runs = tuple(
            RunSpec("deep", "quadratic", DEPTH_CONTEXT, seed, lr, depth=depth, dim=5, width=11)
            for seed in range(5)
        )
        out.append(Cohort(f"deep{depth}-d5", runs, **deep))
    # learned block-coordinate descent: the construction's writers frozen, each block's Γ learned;
    # every run starts at the construction (Γ = 0.5 I), so the seeds are the data's
    for task, depths in (("quadratic", (1, 2, 3, 6)), ("cubic", (1, 2, 3, 5, 10))):
        for depth in depths:
            runs = tuple(
                RunSpec("lbcd", task, DEPTH_CONTEXT, seed, 0.02, depth=depth, init="construction")
                for seed in range(3)
            )
            out.append(
                Cohort(
                    f"lbcd{depth}-{task}",
                    runs,
                    batch_size=128,
                    warmup=20,
                    clip_grad=1.0,
                    first_check=250,
                    # flat runs reached the old 8,000 bound one doubling short of a decision
                    max_steps=64_000,
                    # started at the construction, with only the step sizes free: the minimum is
                    # four times the warm-up, not the free models' 8,000 steps
                    min_steps=80,
                )
            )
    return out


#: Every study, by name — its cohorts.
STUDIES = {"glu": _glu_cohorts(), "depth": _depth_cohorts()}

# The declared constraints (:mod:`icl_book._declare`) of the functions below.
_STUDY = Options(STUDIES)  # read at every call: a study added to STUDIES is one
_RUN = Instance((RunSpec,), what="a RunSpec")
_COHORT = Instance((Cohort,), what="a Cohort")
_PATH = Instance((str, PathLike), what="a str or os.PathLike")
_CHUNK = OrNone(Integer(1, None))
_LOG = OrNone(CallableArg(what="a callable taking one line of text (e.g. print)"))
#: Bytes each training step of each run keeps until its cohort ends: its loss, a Python float in
#: a list (8 bytes of pointer, 24 of float, and the list's growth of about 1/8).
_STEP_BYTES = 36


def _history_bytes(cohort: Cohort, max_steps: int | None) -> float:
    return float(_STEP_BYTES * len(cohort.runs) * (max_steps or cohort.max_steps))


def _cohort_cost(a) -> tuple[float, float]:
    """:func:`train_cohort`: the loss history of its runs (``_STEP_BYTES`` per step and run). Its
    time is the study's, hours by design and stated by the chapters, checkpointed every few minutes
    and resumed, so it is not held to one call's budget; the budget's operations bound a
    trainer's single step (:class:`~icl_book.train.BatchedTrainer`)."""
    return 0.0, _history_bytes(a["cohort"], None)


def _study_cost(a) -> tuple[float, float]:
    """:func:`train_study`: the loss history of its largest cohort (one cohort trains at a time in a
    process), over the cohorts of ``names`` when it is a list of names; see :func:`_cohort_cost`."""
    names = a["names"]
    chosen = [
        c
        for c in STUDIES[a["study"]]
        if not isinstance(names, (list, tuple, set)) or c.name in names
    ]
    return 0.0, max((_history_bytes(c, a["max_steps"]) for c in chosen), default=0.0)


@declare(study=_STUDY)
def cohorts(study: str) -> list[Cohort]:
    """The cohorts of ``study`` (a key of :data:`STUDIES`)."""
    return STUDIES[study]


@declare(run=_RUN, context_len=OrNone(Integer(0, None)))
def make_sampler(run: RunSpec, context_len: int | None = None):
    """``sample_prompts(rng, batch_size)`` of ``run``'s task (at ``context_len`` if given)."""
    n = run.context_len if context_len is None else int(context_len)
    if run.task == "mixed":
        return lambda rng, b: sample_mixed_prompts(b, n, GLU_DIM, rng=rng, noise_var=GLU_NOISE_VAR)
    if run.model in ("block", "lsa"):
        if n == 0:
            return lambda rng, b: sample_quadratic_prompts(
                b, int(rng.choice(GLU_MIX)), GLU_DIM, rng=rng, noise_var=GLU_NOISE_VAR
            )
        return lambda rng, b: sample_quadratic_prompts(
            b, n, GLU_DIM, rng=rng, noise_var=GLU_NOISE_VAR
        )
    degree = DEPTH_DEGREES[run.task]
    dim = run.input_dim
    return lambda rng, b: sample_polynomial_prompts(
        b, n, dim, degree, rng=rng, noise_var=DEPTH_NOISE_VAR, kind="legendre"
    )


@declare(run=_RUN)
def build_model(run: RunSpec) -> torch.nn.Module:
    """The untrained model of ``run``."""
    if run.model == "lsa":
        gen = torch.Generator().manual_seed(run.seed)
        return LinearSelfAttention(GLU_DIM, init_scale=0.1, generator=gen)
    if run.model == "block":
        gen = torch.Generator().manual_seed(run.seed)
        block = TransformerBlock(GLU_DIM, run.n_scratch, run.hidden, init_scale=0.25, generator=gen)
        if run.init == "construction":
            _load_construction(block)
        return block
    if run.model == "lbcd":
        degree = DEPTH_DEGREES[run.task]
        return LearnedBCD(DEPTH_DIM, degree, DEPTH_WIDTH, run.depth, eta0=0.5, kind="legendre")
    gen = torch.Generator().manual_seed(1000 * run.depth + run.seed)
    width = run.width or DEPTH_WIDTH
    return DeepTransformer(
        run.input_dim,
        width,
        run.depth,
        hidden_dim=2 * width,
        label_norm=True,
        output_bound=5.0,
        generator=gen,
    )


@torch.no_grad()
def _load_construction(block: TransformerBlock) -> None:
    """Overwrite ``block``'s weights with the whitened one-step construction (η = 1), zero-padded."""
    w = glu_lsa_block_weights(GLU_DIM, 1.0, features="hermite")
    h, big_d = w.w1.shape
    if block.n_scratch < big_d - GLU_DIM - 2 or block.glu.hidden_dim < h:
        raise ValueError("the block is too narrow for the construction")
    # the construction's token is [x; 1; scratch (10); y]: its y slot moves to the block's last slot
    cols = [*range(big_d - 1), block.embed_dim - 1]
    for p in block.parameters():
        p.zero_()
    idx = torch.tensor(cols)
    block.glu.w1[:h, idx] = torch.from_numpy(w.w1)
    block.glu.w2[:h, idx] = torch.from_numpy(w.w2)
    block.glu.w3[idx, :h] = torch.from_numpy(w.w3)
    block.w_kq[idx[:, None], idx] = torch.from_numpy(w.w_kq)
    block.w_pv[idx[:, None], idx] = torch.from_numpy(w.w_pv)


@declare(cohort=_COHORT, run=_RUN)
def validation_prompts(cohort: Cohort, run: RunSpec) -> dict[int, Prompts]:
    """The fixed validation set of ``run``'s task, ``{N: Prompts}`` (shared by the runs of one task and N).

    One context length ``N`` for a run trained at one; every length of the mix (``GLU_MIX``) for a
    run trained on the mix, ``cohort.val_size`` prompts each: its validation error is the mean over
    the lengths, and the record keeps each length's error.
    """
    if run.context_len == 0:
        return {n: _validation_set(cohort, run, n) for n in GLU_MIX}
    return {run.context_len: _validation_set(cohort, run, run.context_len)}


def _validation_set(cohort: Cohort, run: RunSpec, n: int) -> Prompts:
    # the key of a fixed-N run is the one its set always had, so earlier curves stay comparable
    key = zlib.crc32(f"{run.model}/{run.task}/{run.context_len}".encode())
    seed = [cohort.val_seed, key] if run.context_len else [cohort.val_seed, key, n]
    return make_sampler(run, n)(np.random.default_rng(seed), cohort.val_size)


@declare(cohort=_COHORT)
def members(cohort: Cohort) -> list[Member]:
    """The :class:`~icl_book.train.Member` of every run of ``cohort``."""
    return [
        Member(
            r.name,
            build_model(r),
            make_sampler(r),
            r.data_seed,
            r.lr,
            cohort.warmup,
            r.batch_size or None,
            cohort.decay_start,
        )
        for r in cohort.runs
    ]


@dataclass
class StudyRun:
    """One trained run of a shipped study: its spec, weights (a model), protocol record and CPU time."""

    spec: RunSpec
    model: torch.nn.Module
    record: ConvergenceRecord
    cpu_seconds: float
    losses: np.ndarray

    @property
    def status(self) -> str:
        """``"converged"``, ``"at the bound"`` (stopped without converging), ``"diverged"`` (stopped
        when its loss became non-finite, at ``record.diverged_at``) or ``"unfinished"``."""
        if self.record.converged:
            return "converged"
        if self.record.diverged_at:
            return "diverged"
        return "at the bound" if self.record.finished else "unfinished"

    @property
    def steps(self) -> int:
        """The steps of the run's last validation checkpoint (its weights' steps once finished)."""
        return int(self.record.eval_steps[-1]) if self.record.eval_steps else 0


@declare(study=_STUDY)
def study_path(study: str) -> Path:
    """The shipped file of ``study``."""
    return DATA_DIR / f"study_{study}.npz"


@declare(
    cohort=_COHORT,
    trainer=Instance((BatchedTrainer,), what="a BatchedTrainer"),
    records=Instance((dict,), what="a dict {run name: ConvergenceRecord}"),
)
def study_arrays(cohort: Cohort, trainer, records) -> dict[str, np.ndarray]:
    """The arrays a trained cohort contributes to its study's file."""
    out = {}
    for i, run in enumerate(cohort.runs):
        key = run.name
        for name, value in trainer.model(i).state_dict().items():
            out[f"{key}/param/{name}"] = value.detach().cpu().numpy()
        out[f"{key}/record"] = np.array(json.dumps(vars(records[key])))
        out[f"{key}/spec"] = np.array(json.dumps(asdict(run)))
        out[f"{key}/cpu_seconds"] = np.array(trainer.cpu_seconds[i])
        # the training loss, averaged over blocks of 50 steps (the curve a reader looks at)
        loss = np.asarray(trainer.losses[i])
        k = len(loss) // 50
        out[f"{key}/losses"] = loss[: 50 * k].reshape(k, 50).mean(1)
        out[f"{key}/dtype"] = np.array(cohort.dtype)
    return out


@declare(
    cohort=_COHORT,
    device=DEVICE,
    chunk_size=_CHUNK,
    dtype=Free("None (the cohort's) or a floating torch.dtype, checked by BatchedTrainer"),
)
def study_trainer(
    cohort: Cohort,
    *,
    device: str | torch.device = "cpu",
    chunk_size: int | None = None,
    dtype: torch.dtype | None = None,
) -> BatchedTrainer:
    """The untrained :class:`~icl_book.train.BatchedTrainer` of ``cohort`` (its runs' initial models).

    ``chunk_size`` members run through one vectorised call (default: all of them, one fused step);
    ``dtype`` overrides the cohort's (its early float64 phase).
    """
    return BatchedTrainer(
        members(cohort),
        batch_size=cohort.batch_size,
        schedule="rsqrt",
        clip_grad=cohort.clip_grad,
        chunk_size=len(cohort.runs) if chunk_size is None else chunk_size,
        dtype=cohort.torch_dtype if dtype is None else dtype,
        device=device,
    )


@declare(
    # the study's name names the checkpoint file; the cohort is given (a worker process knows only
    # the studies of icl_book.studies, not one its caller added)
    study=Text(),
    cohort=_COHORT,
    checkpoints=_PATH,
    device=DEVICE,
    chunk_size=_CHUNK,
    log=_LOG,
    cost=Cost(_cohort_cost, "36 bytes × len(cohort.runs) × cohort.max_steps (the loss history)"),
)
def train_cohort(
    study: str,
    cohort: Cohort,
    *,
    checkpoints: str | Path = ".studies",
    device: str | torch.device = "cpu",
    chunk_size: int | None = None,
    log=print,
) -> dict[str, np.ndarray]:
    """Train one cohort under the convergence protocol, resuming ``<checkpoints>/<study>_<name>.pt``.

    Returns the arrays the cohort contributes to its study's file (:func:`study_arrays`). One torch
    thread: the models are small, and a cohort gives the same checkpoint wherever it runs (a worker
    process, a dask worker) as in the calling process.
    """
    torch.set_num_threads(1)
    val = {r.name: validation_prompts(cohort, r) for r in cohort.runs}
    path = str(Path(checkpoints) / f"{study}_{cohort.name}.pt")
    # (early phase) the steps up to float64_until in float64, then the rest in the cohort's dtype:
    # two calls of the protocol on one checkpoint, the second re-deciding and continuing the first
    phases = [(torch.float64, cohort.float64_until)] if cohort.float64_until else []
    for dtype, bound in [*phases, (cohort.torch_dtype, cohort.max_steps)]:
        trainer = study_trainer(cohort, device=device, chunk_size=chunk_size, dtype=dtype)
        records = train_to_convergence(
            trainer,
            val,
            first_check=cohort.first_check,
            max_steps=min(bound, cohort.max_steps),
            min_steps=cohort.min_steps,
            checkpoint=path,
            log=None if log is None else (lambda line: log(f"[{cohort.name}] {line}")),
        )
    if log is not None:
        n_conv = sum(r.converged for r in records.values())
        cpu_h = float(np.sum(trainer.cpu_seconds)) / 3600
        log(f"{cohort.name}: {n_conv}/{len(records)} converged, {cpu_h:.2f} CPU-hours")
    return study_arrays(cohort, trainer, records)


@declare(
    study=_STUDY,
    checkpoints=_PATH,
    names=Free("None or names of the study's cohorts: checked against the study in the body"),
    max_steps=OrNone(Integer(1, None)),
    device=Free("a torch.device or its name, checked in the body (it is sent to the workers)"),
    executor=Free(
        "None, 'processes' or an object with a submit method (a concurrent.futures.Executor, a "
        "dask Client): checked in the body"
    ),
    chunk_size=_CHUNK,
    log=_LOG,
    cost=Cost(
        _study_cost,
        "36 bytes × runs × steps of the largest cohort, steps = max_steps or the cohort's own "
        "bound (the loss history)",
    ),
)
def train_study(
    study: str,
    *,
    checkpoints: str | Path = ".studies",
    names=None,
    max_steps: int | None = None,
    device: str | torch.device = "cpu",
    executor=None,
    chunk_size: int | None = None,
    log=print,
) -> dict[str, StudyRun]:
    """Train the cohorts of ``study`` under the convergence protocol; return their runs.

    What the chapters' ``RETRAIN = True`` and ``python -m booktools.train_study train`` run. Each cohort
    saves a checkpoint ``<checkpoints>/<study>_<cohort>.pt`` as it trains and resumes from it, so a
    study (CPU-hours: the chapters say how many) can be trained across several sittings. ``names``
    restricts training to some cohorts; ``max_steps`` overrides the bound (a larger bound continues
    the runs that stopped unconverged). The runs are returned as :func:`load_study` returns them.
    A bound whose loss history (36 bytes per step and run of the largest cohort) exceeds the memory
    budget is refused before any cohort starts (:mod:`icl_book.limits`).

    ``device`` is where every cohort trains (``"cuda"`` on a GPU); ``chunk_size`` how many of a
    cohort's members one vectorised call runs (default: all). ``executor`` runs the cohorts in
    parallel, one task each: ``None`` trains them one after another here; ``"processes"`` in a pool of
    local processes (one per core); or any object with ``submit(fn, *args, **kwargs)`` returning a
    future with ``result()`` — a :class:`concurrent.futures.Executor`, or a ``dask.distributed``
    ``Client`` (a cluster; the workers must see ``checkpoints``). Cohorts are independent, so every
    checkpoint is the one a serial run writes.
    """
    known = [c.name for c in cohorts(study)]
    unknown = sorted(set(names or ()) - set(known))
    if unknown:  # a misspelt cohort would otherwise train nothing, quietly
        raise ValueError(f"names must be cohorts of {study} ({', '.join(known)}), got {unknown}")
    if not (
        executor is None or executor == "processes" or callable(getattr(executor, "submit", None))
    ):
        raise ArgumentTypeError(
            "executor must be None, 'processes' or an object with a submit method "
            f"(a concurrent.futures.Executor or a dask Client), got {executor!r}"
        )
    device = str(torch.device(device)) if isinstance(device, (str, torch.device)) else device
    if not isinstance(device, str):
        raise ArgumentTypeError(f"device must be a torch device or its name, got {device!r}")
    folder = Path(checkpoints)
    folder.mkdir(parents=True, exist_ok=True)
    todo = []
    for cohort in cohorts(study):
        if names is not None and cohort.name not in names:
            continue
        todo.append(cohort if max_steps is None else replace(cohort, max_steps=max_steps))
    kwargs = dict(checkpoints=str(folder), device=device, chunk_size=chunk_size)
    arrays = {}
    if executor is None:
        for cohort in todo:
            arrays.update(train_cohort(study, cohort, log=log, **kwargs))
        return _runs(arrays)
    pool = None
    if executor == "processes":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn: a forked child would inherit this process's torch thread pools
        pool = executor = ProcessPoolExecutor(
            min(len(todo), os.cpu_count() or 1), mp_context=multiprocessing.get_context("spawn")
        )
    try:
        # a worker's log lines go to its own output; the caller logs each cohort as it ends
        futures = [executor.submit(train_cohort, study, c, log=None, **kwargs) for c in todo]
        for cohort, future in zip(todo, futures, strict=True):
            arrays.update(future.result())
            if log is not None:
                log(f"{cohort.name}: done")
    finally:
        if pool is not None:
            pool.shutdown()
    return _runs(arrays)


@declare(study=_STUDY, path=OrNone(_PATH))
def load_study(study: str, *, path: str | Path | None = None) -> dict[str, StudyRun]:
    """The trained runs of a shipped study, by run name (models in float64, eval mode)."""
    path = study_path(study) if path is None else Path(path)
    if not path.exists():
        raise ValueError(
            f"path must be an existing .npz written by booktools.train_study, got {path}"
        )
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    return _runs(arrays)


@declare(runs=Instance((dict,), what="a dict {run name: StudyRun} (load_study's)"))
def select_runs(runs: dict[str, StudyRun], **fields) -> list[StudyRun]:
    """The runs whose :class:`RunSpec` matches every given field, ordered by seed.

    E.g. ``select_runs(runs, model="block", n_scratch=16, context_len=100, lr=0.01, init="random")``:
    the five seeds of one configuration. A field :class:`RunSpec` does not have, or a selection that
    matches no run, is an error (a typo would otherwise select nothing and plot an empty curve).
    """
    names = {f.name for f in fields_of(RunSpec)}
    unknown = sorted(set(fields) - names)
    if unknown:
        raise ValueError(
            f"fields must be RunSpec fields ({', '.join(sorted(names))}), got {unknown}"
        )
    out = [r for r in runs.values() if all(getattr(r.spec, k) == v for k, v in fields.items())]
    if not out:
        raise ValueError(f"no run matches {fields}")
    return sorted(out, key=lambda r: r.spec.seed)


def _runs(arrays: dict[str, np.ndarray]) -> dict[str, StudyRun]:
    out = {}
    for key in sorted(k[: -len("/spec")] for k in arrays if k.endswith("/spec")):
        spec = RunSpec(**json.loads(str(arrays[f"{key}/spec"])))
        model = build_model(spec)
        prefix = f"{key}/param/"
        model.load_state_dict(
            {
                k[len(prefix) :]: torch.from_numpy(v)
                for k, v in arrays.items()
                if k.startswith(prefix)
            }
        )
        model.eval()
        record = ConvergenceRecord(**json.loads(str(arrays[f"{key}/record"])))
        out[key] = StudyRun(
            spec, model, record, float(arrays[f"{key}/cpu_seconds"]), arrays[f"{key}/losses"]
        )
    return out
