"""Old argument names that still work for one release, with a ``DeprecationWarning``.

The package's vocabulary (CONTRIBUTING, "One name for one thing") renamed a few keyword
arguments; code written for the earlier names keeps running and is told the new name.
The public signature (``inspect.signature``, the API page) shows the new names only.
"""

from __future__ import annotations

import functools
import warnings


def renamed(**old_to_new: str):
    """Decorator: accept each ``old=`` keyword as ``new=``, warning once per call."""

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(
                            f"{func.__name__}() got both {old!r} and its new name {new!r}; "
                            f"pass {new!r} only"
                        )
                    warnings.warn(
                        f"{func.__name__}(): the argument {old!r} is now called {new!r}",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                    kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapper

    return decorate


#: How validation names the label-noise variance in the modules that called it ``rho``: the new name, and
#: the old one for code (and readers) that still use it.
NOISE_VAR = "noise_var (formerly rho)"
