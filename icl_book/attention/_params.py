"""Initial weights of the torch modules: the one place where they draw random numbers.

Randomness comes only from an explicit ``torch.Generator`` (never torch's global RNG, so two models
built alike are identical); an ``init_scale`` of 0 gives all-zero weights and needs no generator
(``from_weights`` builds its modules that way, then copies the given weights in).
"""

from __future__ import annotations

import torch
from torch import nn

from .._validate import ArgumentTypeError, nonnegative_float


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
