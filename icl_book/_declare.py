"""Declared constraints: each public callable states its arguments' constraints once.

In the style of scikit-learn's ``validate_params``: a decorator names, for each argument, what it
accepts (an :class:`Interval` with open or closed ends, an :class:`Integer` range, a strict
:class:`Flag`, :class:`Options`, a real :class:`Array` with a dtype policy, a :class:`Callable`,
:class:`Text`, an ``rng``, ``None`` or an instance of a class) and, where the work grows with an
argument, a :class:`Cost`. The checks run from the declaration *before* the body converts anything,
and a cost beyond the budget is refused before any work starts, with the estimate and the way to
raise it (:func:`icl_book.limits.budget`). The declaration is kept on the function (``__declaration__``), so the
probe suite (``tests/test_declarations.py``) generates its bad inputs from it.

A maintained library was considered: scikit-learn's ``validate_params`` is private API
(``sklearn.utils._param_validation``) and would make scikit-learn a dependency of every
student's install; ``pydantic.validate_call`` coerces (``"1.5"`` → 1.5) unless made strict
everywhere, and knows neither open intervals nor costs. This module is small and says exactly what
the book needs.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import re
from dataclasses import dataclass

import numpy as np

from ._validate import ArgumentTypeError, _describe, _raw_array, finite_values, generator
from .limits import CostRefused, current_budget


# --- constraints ---------------------------------------------------------------------------------
class Constraint:
    """One argument's constraint: ``check(name, value)`` raises a clear error or returns."""

    def check(self, name: str, value) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def invalid(self) -> list:
        """Values this constraint refuses (the generated probe suite tries each)."""
        return [None, "1", True, object()]

    def valid(self):
        """A value this constraint accepts (the probe suite fills the other arguments with it)."""
        raise NotImplementedError


def _real_scalar(name: str, value, what: str) -> float:
    """A real number as a float, refused by name when it is not one (or cannot be a float64)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(
            f"{name} must be {what}, got {_describe(value)} ({type(value).__name__})"
        )
    try:
        return float(value)
    except OverflowError:  # 10**400, Fraction(10**400): beyond float64
        raise ValueError(
            f"{name} must be {what}, got {_describe(value)} (beyond float64)"
        ) from None


@dataclass(frozen=True)
class Interval(Constraint):
    """A real number in ``[low, high]`` with each end open or closed (``closed`` as in scikit-learn:
    ``"both"``, ``"left"``, ``"right"`` or ``"neither"``); ``inf`` only where an end is ``inf`` and
    closed and ``allow_inf``. Python, NumPy and :class:`fractions.Fraction` numbers are accepted,
    never ``bool``/``str``."""

    low: float = -math.inf
    high: float = math.inf
    closed: str = "both"
    allow_inf: bool = False

    def _ends(self):
        if self.closed not in ("both", "left", "right", "neither"):
            raise ValueError(
                f"closed must be 'both', 'left', 'right' or 'neither', got {self.closed!r}"
            )
        lo = self.closed in ("both", "left") and (math.isfinite(self.low) or self.allow_inf)
        hi = self.closed in ("both", "right") and (math.isfinite(self.high) or self.allow_inf)
        return lo, hi

    def bounds(self) -> str:
        """The bounds in the package's words: ``">= 0"``, ``"> 0 and <= 1"`` (empty when none)."""
        lo_closed, hi_closed = self._ends()
        if self.low == self.high:
            return f"{self.low:g}"
        parts = []
        if math.isfinite(self.low):
            parts.append(f"{'>=' if lo_closed else '>'} {self.low:g}")
        if math.isfinite(self.high):
            parts.append(f"{'<=' if hi_closed else '<'} {self.high:g}")
        return " and ".join(parts)

    def brackets(self) -> str:
        """The interval as ``[a, b)``."""
        lo_closed, hi_closed = self._ends()
        return f"{'[' if lo_closed else '('}{self.low:g}, {self.high:g}{']' if hi_closed else ')'}"

    def describe(self) -> str:
        return self.bounds() or ("a real number" if self.allow_inf else "a finite real number")

    def check(self, name, value):
        kind = "a real number" if self.allow_inf else "a finite real number"
        x = _real_scalar(name, value, f"{kind} {self.bounds()}".strip())
        lo_closed, hi_closed = self._ends()
        inside = (x > self.low or (lo_closed and x == self.low)) and (
            x < self.high or (hi_closed and x == self.high)
        )
        if math.isnan(x) or (math.isinf(x) and not self.allow_inf):
            raise ValueError(
                f"{name} must be finite{' and ' + self.bounds() if self.bounds() else ''}, got {x}"
            )
        if not inside:  # NaN is never inside
            raise ValueError(f"{name} must be {self.describe()}, got {x:g}")

    def valid(self):
        for v in (1.0, 0.5, 0.0, self.low, self.high, self.low + 1.0, self.high - 1.0):
            try:
                self.check("x", v)
                return v
            except (TypeError, ValueError):
                continue
        return (self.low + self.high) / 2

    def invalid(self):
        out = [*super().invalid(), math.nan, 1 + 1j, 10**400]
        out += [] if self.allow_inf else [math.inf, -math.inf]
        lo_closed, hi_closed = self._ends()
        out += [self.low] if not lo_closed else []
        out += [self.high] if not hi_closed else []
        out += [np.nextafter(self.low, -math.inf)] if math.isfinite(self.low) else []
        out += [np.nextafter(self.high, math.inf)] if math.isfinite(self.high) else []
        return out


@dataclass(frozen=True)
class Integer(Constraint):
    """An integer in ``[low, high]`` (Python or NumPy; ``2.0``, ``bool`` and ``str`` refused)."""

    low: int | None = None
    high: int | None = None

    def describe(self) -> str:
        parts = [f">= {self.low}"] * (self.low is not None) + [f"<= {self.high}"] * (
            self.high is not None
        )
        return "an integer" + (" " + " and ".join(parts) if parts else "")

    def check(self, name, value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise ArgumentTypeError(
                f"{name} must be {self.describe()}, got {_describe(value)} ({type(value).__name__})"
            )
        v = int(value)
        if (self.low is not None and v < self.low) or (self.high is not None and v > self.high):
            raise ValueError(f"{name} must be {self.describe()}, got {v}")

    def valid(self):
        return self.low if self.low is not None else 0

    def invalid(self):
        out = [*super().invalid(), 2.5, 2.0, math.nan]
        out += [self.low - 1] if self.low is not None else []
        out += [self.high + 1] if self.high is not None else []
        return out


@dataclass(frozen=True)
class Flag(Constraint):
    """``True`` or ``False`` (NumPy booleans too): ``"False"``, ``0``, ``None`` and ``[v]`` refused."""

    def describe(self):
        return "True or False"

    def check(self, name, value):
        if not isinstance(value, (bool, np.bool_)):
            raise ArgumentTypeError(f"{name} must be True or False, got {_describe(value)}")

    def invalid(self):
        return [None, "False", "True", 0, 1, 1.0, [True]]

    def valid(self):
        return False


@dataclass(frozen=True)
class Options(Constraint):
    """One of a set of values (strings, typically). ``values`` is read at every call, so a registry
    (a dict whose keys are the names, such as :data:`icl_book.studies.STUDIES`) can be given as it is."""

    values: tuple

    def describe(self):
        return f"one of {tuple(self.values)}"

    def check(self, name, value):
        if isinstance(value, (bool, np.bool_)) or not any(
            type(value) is type(v) and value == v for v in self.values
        ):
            raise ValueError(f"{name} must be {self.describe()}, got {_describe(value)}")

    def invalid(self):
        return [None, True, "not an option", 3.0]

    def valid(self):
        return next(iter(self.values))


@dataclass(frozen=True)
class Text(Constraint):
    """A string with at least one non-blank character."""

    def describe(self):
        return "a non-blank string"

    def check(self, name, value):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} must be {self.describe()}, got {_describe(value)}")

    def invalid(self):
        return [None, 3, "", "   \t"]

    def valid(self):
        return "probe"


@dataclass(frozen=True)
class Array(Constraint):
    """An array of real numbers (NumPy, nested lists, torch tensors, fractions), checked before
    any conversion.

    ``ndim`` (``None``: any), ``finite`` (NaN is always refused; ``±inf`` only when ``False``),
    ``min_size``, and ``within``: an :class:`Interval` (or a tuple of them, their union) every entry
    must lie in (a scalar is a 0-d array, so vectorised theory functions declare their numbers this
    way). Dtype policy: booleans,
    strings, objects and complex numbers are refused; integers and low-precision floats
    (float16/float32) are computed in float64 by the function, never in the precision they came in.
    """

    ndim: int | None = None
    finite: bool = True
    min_size: int = 0
    within: Interval | tuple | None = None

    def _intervals(self) -> tuple:
        return (
            () if self.within is None else tuple(np.atleast_1d(np.array(self.within, dtype=object)))
        )

    def _within_text(self) -> str:
        parts = self._intervals()
        if len(parts) == 1:
            return parts[0].describe()
        return " or ".join(i.describe() if i.low == i.high else "in " + i.brackets() for i in parts)

    def describe(self):
        dims = "" if self.ndim is None else f"{self.ndim}-d "
        what = f"a {dims}array of {'finite ' if self.finite else ''}real numbers"
        return what + (f", each {self._within_text()}" if self.within else "")

    def check(self, name, value):
        raw = _raw_array(name, value)
        if self.ndim is not None and raw.ndim != self.ndim:
            raise ValueError(f"{name} must be {self.describe()}, got shape {raw.shape}")
        if raw.size < self.min_size:
            raise ValueError(
                f"{name} must have at least {self.min_size} entries, got shape {raw.shape}"
            )
        if self.finite:
            finite_values(name, raw)
        elif raw.dtype.kind == "f" and np.isnan(raw).any():
            raise ValueError(f"{name} must not be NaN")
        if self.within is not None and raw.size:
            arr = raw.astype(np.float64, copy=False)
            ok = np.zeros(arr.shape, dtype=bool)
            for interval in self._intervals():
                lo_closed, hi_closed = interval._ends()
                low, high = interval.low, interval.high
                ok |= ((arr > low) | (lo_closed & (arr == low))) & (
                    (arr < high) | (hi_closed & (arr == high))
                )
            if not np.all(ok):
                first = arr.ravel()[np.flatnonzero(~ok.ravel())[0]]
                raise ValueError(f"{name} must be {self._within_text()}, got {first:g}")

    def _accepts(self, value) -> bool:
        try:
            self.check("x", np.full((1,) * (self.ndim or 0), value))
        except (TypeError, ValueError):
            return False
        return True

    def valid(self):
        inside = 0.5
        for interval in self._intervals():
            inside = interval.valid()
            break
        return np.full((2,) * (self.ndim if self.ndim is not None else 1), inside)

    def invalid(self):
        shape = (1,) * (self.ndim or 0)
        out = [
            None,
            "1",
            True,
            [[1.0], [1.0, 2.0]],
            np.full(shape, True),
            np.full(shape, 1 + 1j),
            np.full(shape, "1.0"),
            np.full(shape, np.nan),
        ]
        for interval in self._intervals():
            out += [
                np.full(shape, v)
                for v in interval.invalid()
                if isinstance(v, float) and not math.isnan(v) and not self._accepts(v)
            ]
        return out


@dataclass(frozen=True)
class Callable(Constraint):
    """A callable (a function, a :class:`~icl_book.hermite.Link`, a kernel)."""

    names: tuple = ()  # strings that name a registered callable (e.g. the links' names)
    what: str = "a callable"

    def describe(self):
        return self.what + (f" or one of {self.names}" if self.names else "")

    def check(self, name, value):
        if isinstance(value, str) and value in self.names:
            return
        if not callable(value):
            raise ArgumentTypeError(f"{name} must be {self.describe()}, got {_describe(value)}")

    def invalid(self):
        return [3.0, "no such name"]

    def valid(self):
        return self.names[0] if self.names else np.tanh


@dataclass(frozen=True)
class Rng(Constraint):
    """A :class:`numpy.random.Generator` or an integer seed ``>= 0`` (never ``None``)."""

    def describe(self):
        return "a numpy.random.Generator or an integer seed >= 0"

    def check(self, name, value):
        try:
            generator(value)
        except (TypeError, ValueError) as err:
            raise ArgumentTypeError(f"{name}: {err}") from None

    def invalid(self):
        return [None, True, -1, np.random.RandomState(0), 2.0]

    def valid(self):
        return 0


@dataclass(frozen=True)
class Instance(Constraint):
    """An instance of one of ``types`` (e.g. a result the package built)."""

    types: tuple
    example: object = None  # a valid value for the probe suite (None: the suite supplies one)
    what: str = ""  # the kind in the package's words ("a torch.nn.Module"), when the name is not

    def describe(self):
        return self.what or "an instance of " + " or ".join(t.__name__ for t in self.types)

    def valid(self):
        return self.example

    def check(self, name, value):
        if not isinstance(value, self.types):
            raise ArgumentTypeError(f"{name} must be {self.describe()}, got {_describe(value)}")

    def invalid(self):
        return [v for v in (None, "1", 3.0) if not isinstance(v, self.types)]


@dataclass(frozen=True)
class AnyOf(Constraint):
    """What any of ``options`` accepts (e.g. a ratio in ``(0, 1e12]`` or ``inf``)."""

    options: tuple

    def describe(self):
        return " or ".join(c.describe() for c in self.options)

    def check(self, name, value):
        errors = []
        for option in self.options:
            try:
                option.check(name, value)
                return
            except (TypeError, ValueError) as err:
                errors.append(err)
        kind = TypeError if all(isinstance(e, TypeError) for e in errors) else ValueError
        raise (ArgumentTypeError if kind is TypeError else ValueError)(
            f"{name} must be {self.describe()}, got {_describe(value)}"
        )

    def invalid(self):
        out = []
        for option in self.options:
            for v in option.invalid():
                try:
                    self.check("x", v)
                except (TypeError, ValueError):
                    out.append(v)
        return out

    def valid(self):
        return self.options[0].valid()


@dataclass(frozen=True)
class OrNone(Constraint):
    """``None`` or what ``inner`` accepts."""

    inner: Constraint

    def describe(self):
        return f"None or {self.inner.describe()}"

    def check(self, name, value):
        if value is not None:
            self.inner.check(name, value)

    def invalid(self):
        return [v for v in self.inner.invalid() if v is not None]

    def valid(self):
        return None


@dataclass(frozen=True)
class Free(Constraint):
    """Any value: an argument the function checks itself, with the reason (a caller's own object, a
    structure the body unpacks and validates field by field)."""

    reason: str
    example: object = None

    def describe(self):
        return "anything"

    def check(self, name, value):
        return None

    def invalid(self):
        return []

    def valid(self):
        return self.example


@dataclass(frozen=True)
class Cost:
    """The cost of a call as a function of its (checked) arguments, refused beyond the budget.

    ``estimate(arguments) -> (operations, bytes)``; ``formula`` says how it was counted
    (``"n_test × (ℓ + d)"``), for the message.
    """

    estimate: object
    formula: str

    def check(self, func_name: str, arguments: dict) -> None:
        operations, nbytes = self.estimate(arguments)
        limit = current_budget()
        # the arguments the formula names, with their values: the message says what to lower
        given = ", ".join(
            f"{name} = {_describe(value)}"
            for name, value in arguments.items()
            if re.search(rf"\b{re.escape(name)}\b", self.formula)
        )
        for what, value in (("operations", operations), ("bytes", nbytes)):
            if value > limit[what]:
                raise CostRefused(
                    f"{func_name} would need about {value:.3g} {what} ({self.formula}; "
                    f"{given}), beyond "
                    f"the budget of {limit[what]:.3g}; if you mean it, run it inside "
                    f"`with icl_book.limits.budget({what}={value:.2g}):`"
                )


# --- the decorator ------------------------------------------------------------------------------
def declare(cost: Cost | None = None, **constraints: Constraint):
    """Declare a public callable's argument constraints (and cost); check them on every call.

    Every parameter gets a constraint (:class:`Free` with its reason for one the body checks
    itself); a missing or unknown name is a ``TypeError`` at import. The function's signature is
    kept (``inspect.signature``).
    """

    def decorate(func):
        signature = inspect.signature(func)
        unknown = set(constraints) - set(signature.parameters)
        if unknown:
            raise TypeError(
                f"{func.__qualname__}: constraints for unknown arguments {sorted(unknown)}"
            )
        # Every argument is declared (Free(reason) for one the body checks itself), so the probe
        # suite can fill every argument with a valid value and attack each in turn.
        missing = [
            name
            for name, p in signature.parameters.items()
            if name not in constraints
            and name != "self"
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if missing:
            raise TypeError(f"{func.__qualname__}: no constraint declared for {missing}")

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as err:
                raise TypeError(f"{func.__name__}(): {err}") from None
            bound.apply_defaults()
            arguments = bound.arguments
            for name, constraint in constraints.items():
                constraint.check(name, arguments[name])
            if cost is not None:
                cost.check(func.__qualname__, arguments)
            return func(*args, **kwargs)

        wrapper.__declaration__ = Declaration(constraints, cost)
        return wrapper

    return decorate


@dataclass(frozen=True)
class Declaration:
    """What :func:`declare` stored on a function: its constraints and its cost (or ``None``)."""

    constraints: dict
    cost: Cost | None
