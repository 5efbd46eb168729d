"""Initial weights of the torch modules: the one place where they draw random numbers.

Randomness comes only from an explicit ``torch.Generator`` (never torch's global RNG, so two models
built alike are identical); an ``init_scale`` of 0 gives all-zero weights and needs no generator
(``from_weights`` builds its modules that way, then copies the given weights in).
"""

from __future__ import annotations

import contextlib
import contextvars

import torch
from torch import nn

from .._validate import ArgumentTypeError, as_tensor, nonnegative_float

# True inside inputs_checked(): the forward passes then skip their input checks. A context variable,
# not a process-wide switch: another thread (or asyncio task) keeps validating while one trains.
_CHECKED = contextvars.ContextVar("icl_book_inputs_checked", default=False)


@contextlib.contextmanager
def inputs_checked():
    """Inputs already validated: the modules' forward passes skip their checks inside this block.

    :mod:`icl_book.train` validates every batch once (``prompts_to_torch``: real, finite, shapes) and
    runs the models inside it, so a training step pays for no second check, and the models run under
    :func:`torch.func.vmap`, where a data-dependent check (``isfinite(...).all()``) cannot run. A
    module whose forward pass has validated its inputs runs its layers inside it too.
    """
    token = _CHECKED.set(True)
    try:
        yield
    finally:
        _CHECKED.reset(token)


def prompt_tensors(xs, ys, x_query, *, dim: int, dtype, device):
    """``xs (B, N, dim)``, ``ys (B, N)``, ``x_query (B, dim)`` as tensors of ``dtype`` on ``device``.

    Validated as :func:`~icl_book._validate.as_tensor` does (real, finite; NumPy arrays or tensors),
    except inside :func:`inputs_checked`, where they are only converted (as ``torch.as_tensor``, the
    same numbers); their shapes are always checked.
    """
    if _CHECKED.get():
        xs, ys, x_query = (
            torch.as_tensor(a, dtype=dtype, device=device) for a in (xs, ys, x_query)
        )
    else:
        xs = as_tensor("xs", xs, dtype=dtype, device=device, ndim=3)
        ys = as_tensor("ys", ys, dtype=dtype, device=device, ndim=2)
        x_query = as_tensor("x_query", x_query, dtype=dtype, device=device, ndim=2)
    if xs.ndim != 3:
        raise ValueError(f"xs must have shape (B, N, {dim}), got {tuple(xs.shape)}")
    b, n, d = xs.shape
    if d != dim or min(b, n) < 1:
        raise ValueError(f"xs must have shape (B, N, {dim}) with B, N >= 1, got {tuple(xs.shape)}")
    if tuple(ys.shape) != (b, n):
        raise ValueError(f"ys must have shape (B, N) = {(b, n)} to match xs, got {tuple(ys.shape)}")
    if tuple(x_query.shape) != (b, d):
        raise ValueError(
            f"x_query must have shape (B, d) = {(b, d)} to match xs, got {tuple(x_query.shape)}"
        )
    return xs, ys, x_query


def check_generator(generator, init_scale: float) -> torch.Generator | None:
    """The generator for random initial weights: required when ``init_scale > 0``."""
    if generator is None:
        if init_scale > 0:
            raise ArgumentTypeError(
                "generator must be a torch.Generator (e.g. torch.Generator().manual_seed(0)) "
                "for random initial weights (init_scale > 0); the package never draws from "
                "torch's global random state"
            )
        return None
    if not isinstance(generator, torch.Generator):
        raise ArgumentTypeError(
            f"generator must be a torch.Generator, got {type(generator).__name__}"
        )
    return generator


def check_device(device) -> torch.device:
    """A ``torch.device`` from a device or its name (``None`` is the CPU)."""
    try:
        return torch.device("cpu" if device is None else device)
    except (TypeError, RuntimeError) as err:
        raise ArgumentTypeError(
            f"device must be a torch.device or its name, got {device!r}"
        ) from err


def check_dtype(dtype) -> torch.dtype:
    """A floating-point ``torch.dtype``."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ArgumentTypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    return dtype


def initial_parameter(shape, init_scale, generator, dtype, device) -> nn.Parameter:
    """``init_scale`` × standard normal entries drawn from ``generator`` (zeros when the scale is 0).

    Drawn on the CPU (where the generator lives) and then moved, so the weights do not depend on
    the device.
    """
    init_scale = nonnegative_float("init_scale", init_scale)
    generator = check_generator(generator, init_scale)
    dtype = check_dtype(dtype)
    device = check_device(device)
    if init_scale == 0:
        w = torch.zeros(shape, dtype=dtype)
    else:
        w = init_scale * torch.randn(shape, generator=generator, dtype=dtype)
    return nn.Parameter(w.to(device))
