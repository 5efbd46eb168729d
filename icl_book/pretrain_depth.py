"""Train chapter 6's unconstrained deep transformers and save their weights (experiment (b)).

``python -m icl_book.pretrain_depth --out icl_book/data/depth_unconstrained.npz`` trains one
:class:`~icl_book.attention.DeepTransformer` per task (quadratic and cubic Legendre targets) and depth
(1, 2, 4) at a fixed width, every weight free and randomly initialised, and writes all weights plus their
training curves to one small ``.npz`` file that the chapter loads with :func:`load_pretrained`. The run takes
several minutes on two cores, longer than a chapter may; a test runs it with ``--steps 20`` to prove it still
works.

What makes training work here (chapter 6 reports the measurements):

- float64 throughout;
- residual branches initialised at zero (``W_3 = 0``, ``W^{PV} = 0``): the untrained stack predicts 0 and its
  output cannot explode at initialisation, whatever the depth;
- Adam with a linear warm-up and a cosine decay of the learning rate, and gradient-norm clipping;
- bounded inputs (uniform on ``[−1, 1]^d``, Legendre targets): Gaussian cubic features are heavy-tailed.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from .attention.deep import DeepTransformer
from .tasks import sample_polynomial_prompts
from .train import evaluate_in_context, train_in_context

__all__ = ["CONFIG", "DEFAULT_PATH", "make_sampler", "train_all", "load_pretrained"]

#: Where the shipped weights live (package data).
DEFAULT_PATH = Path(__file__).resolve().parent / "data" / "depth_unconstrained.npz"

#: The experiment's fixed settings (the chapter prints them from the file).
CONFIG = {
    "dim": 3,
    "width": 9,
    "context_len": 50,
    "noise_var": 0.01,
    "basis": "legendre",
    "tasks": {"quadratic": 2, "cubic": 3},
    "depths": [1, 2, 4],
    "hidden_dim": 18,
    "steps": 1500,
    "batch_size": 128,
    "lr": 5e-3,
    "warmup": 100,
    "clip_grad": 1.0,
    "init_seed": 0,
    "train_seed": 1,
    "eval_size": 2000,
    "eval_seed": 12345,
}


def make_sampler(degree: int, config: dict = CONFIG):
    """``sample_prompts(rng, batch_size)`` for :func:`~icl_book.train.train_in_context` on the experiment's task."""

    def sample_prompts(rng, batch_size):
        return sample_polynomial_prompts(
            batch_size,
            config["context_len"],
            config["dim"],
            degree,
            rng=rng,
            noise_var=config["noise_var"],
            basis=config["basis"],
        )

    return sample_prompts


def _build(depth: int, config: dict) -> DeepTransformer:
    gen = torch.Generator().manual_seed(config["init_seed"] + 1000 * depth)
    return DeepTransformer(
        config["dim"], config["width"], depth, hidden_dim=config["hidden_dim"], generator=gen
    )


def train_all(config: dict = CONFIG, *, progress: bool = False) -> dict[str, np.ndarray]:
    """Train every (task, depth) model of ``config``; return the arrays to save (weights, curves, config)."""
    out: dict[str, np.ndarray] = {}
    for task, degree in config["tasks"].items():
        sampler = make_sampler(degree, config)
        eval_prompts = sampler(np.random.default_rng(config["eval_seed"]), config["eval_size"])
        for depth in config["depths"]:
            model = _build(depth, config)
            start = time.process_time()
            res = train_in_context(
                model,
                sampler,
                steps=config["steps"],
                lr=config["lr"],
                seed=config["train_seed"],
                batch_size=config["batch_size"],
                clip_grad=config["clip_grad"],
                schedule="cosine",
                warmup=config["warmup"],
                eval_prompts=eval_prompts,
                eval_every=max(1, config["steps"] // 20),
                progress=progress,
            )
            key = f"{task}/depth{depth}"
            for name, value in model.state_dict().items():
                out[f"{key}/param/{name}"] = value.detach().cpu().numpy()
            out[f"{key}/losses"] = res.losses
            out[f"{key}/eval_steps"] = res.eval_steps
            out[f"{key}/eval_losses"] = res.eval_losses
            out[f"{key}/cpu_seconds"] = np.array(time.process_time() - start)
            final = evaluate_in_context(model, eval_prompts)
            print(
                f"{key}: validation MSE {final:.4f} ({time.process_time() - start:.0f} s CPU)",
                flush=True,
            )
    out["config"] = np.array(json.dumps(config))
    return out


def load_pretrained(path: str | Path | None = None) -> tuple[dict, dict]:
    """Load a file written by this script.

    Returns
    -------
    models
        ``{(task, depth): DeepTransformer}`` with the trained weights (float64, CPU, eval mode).
    curves
        ``{(task, depth): {"losses", "eval_steps", "eval_losses", "cpu_seconds"}}`` and ``curves["config"]``.
    """
    path = DEFAULT_PATH if path is None else Path(path)
    if not path.exists():
        raise ValueError(
            f"path must be an existing .npz written by icl_book.pretrain_depth, got {path}"
        )
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    config = json.loads(str(arrays["config"]))
    models, curves = {}, {"config": config}
    for task in config["tasks"]:
        for depth in config["depths"]:
            key = f"{task}/depth{depth}"
            model = _build(depth, config)
            prefix = f"{key}/param/"
            state = {
                k[len(prefix) :]: torch.from_numpy(v)
                for k, v in arrays.items()
                if k.startswith(prefix)
            }
            model.load_state_dict(state)
            model.eval()
            models[(task, depth)] = model
            curves[(task, depth)] = {
                name: arrays[f"{key}/{name}"]
                for name in ("losses", "eval_steps", "eval_losses", "cpu_seconds")
            }
    return models, curves


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output .npz file")
    parser.add_argument("--steps", type=int, default=CONFIG["steps"], help="Adam steps per model")
    parser.add_argument("--depths", type=int, nargs="+", default=CONFIG["depths"])
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    parser.add_argument(
        "--eval-size", type=int, default=CONFIG["eval_size"], help="validation prompts"
    )
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    if args.eval_size < 1:
        parser.error(f"--eval-size must be >= 1, got {args.eval_size}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    config = dict(
        CONFIG,
        steps=args.steps,
        depths=list(args.depths),
        warmup=min(CONFIG["warmup"], args.steps // 10),
        eval_size=args.eval_size,
    )
    arrays = train_all(config, progress=args.progress)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **arrays)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
