"""The grader's wire format: tagged JSON between the grader and a student's kernel, both halves.

The grader imports this module; the student's kernel runs its source text, sent by the grader on
every request (:func:`source`), so both ends read and write one vocabulary from one file. Its code
therefore depends on the standard library only; NumPy and torch are used when already imported
(the grader's NumPy, the kernel's NumPy or torch), never installed or required.

A value is ``None``, a bool or a string as itself, else ``{"t": TAG, ...}``:

==========  ==================================================  =====================
tag         value                                               sent by
==========  ==================================================  =====================
``i``       an integer, as decimal text (``"v"``)               both
``f``       a float, as its ``repr`` (``"v"``)                  both
``c``       a complex, as two float reprs (``"v"``)             both
``nd``      a numeric array: ``dtype``, ``shape``, base64 ``b``  both
``tu``      a tuple (``"v"``: its encoded items)                both
``li``      a list; also a non-numeric array's ``tolist()``     both
``di``      a dict (``"k"``: encoded keys, ``"v"``: values)     both
``nt``      a named tuple: ``cls``, ``fields``, ``v``             both
``dc``      an ``icl_book`` dataclass: ``cls``, ``fields``, ``v``  the grader
``fn``      a kernel callable, kept there as ``ref``            the kernel
``obj``     any other kernel object, by ``type`` name           the kernel
==========  ==================================================  =====================

The two halves differ where trust does:

- **The grader** encodes strictly (:func:`encode`: a value it cannot send is a ``TypeError``) and
  decodes replies as untrusted data (:func:`decode`): sizes, dtypes and shapes checked, a named
  tuple rebuilt as an ``icl_book`` class only through :func:`_allowed_named_tuple` (else a generic
  one), ``fn`` only as a proxy made by ``remote``, ``obj`` as :class:`Opaque`. Nothing a submission
  names is imported, unpickled or executed.
- **The kernel** encodes whatever an answer is (:func:`encode_reply`: callables registered as refs,
  other objects as ``obj``), rebuilds the types the grader sends by importing them
  (:func:`decode_argument`), and answers a request file (:func:`serve`).
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import functools
import importlib
import json
import keyword
import math
import sys

INT, FLOAT, COMPLEX, ARRAY = "i", "f", "c", "nd"
TUPLE, LIST, DICT = "tu", "li", "di"
NAMED_TUPLE, DATACLASS, FUNCTION, OPAQUE = "nt", "dc", "fn", "obj"
_COMMON = frozenset({INT, FLOAT, COMPLEX, ARRAY, TUPLE, LIST, DICT, NAMED_TUPLE})
GRADER_SENDS = _COMMON | {DATACLASS}  # what the kernel's decoder accepts
KERNEL_SENDS = _COMMON | {FUNCTION, OPAQUE}  # what the grader's decoder accepts

ARRAY_KINDS = "biufc"  # bool, ints, floats, complex: the dtypes an array travels as raw bytes
MAX_ENCODE_DEPTH = 32
MAX_DECODE_DEPTH = 40
MAX_INT_DIGITS = 400


# --------------------------------------------------------------------------------------------------
# Encoding (one encoder: ``refs`` is the kernel's registry of callables, ``None`` in the grader)
# --------------------------------------------------------------------------------------------------
def encode(value):
    """The grader's tagged JSON of ``value`` (numbers, arrays, tensors, containers, and the
    package's own named tuples and dataclasses, rebuilt in the kernel from ``icl_book``); any other
    object is a ``TypeError``."""
    return _encode(value, None, 0)


def encode_reply(value, refs: list):
    """The kernel's tagged JSON of an answer: callables are appended to ``refs`` and sent as their
    index (``fn``), objects the format has no tag for by their type name (``obj``)."""
    return _encode(value, refs, 0)


def _own(cls) -> bool:
    return cls.__module__ == "icl_book" or cls.__module__.startswith("icl_book.")


def _encode(value, refs, depth):
    if depth > MAX_ENCODE_DEPTH:
        raise ValueError("value nested too deeply")
    np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    if np is not None and isinstance(value, np.generic):  # NumPy scalars as Python numbers
        if isinstance(value, np.bool_):
            value = bool(value)
        elif isinstance(value, np.integer):
            value = int(value)
        elif isinstance(value, np.floating):
            value = float(value)  # np.float64 is a float whose repr is "np.float64(0.9)" (NumPy 2)
        elif isinstance(value, np.complexfloating):
            value = complex(value)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return {"t": INT, "v": str(int(value))}
    if isinstance(value, float):
        return {"t": FLOAT, "v": repr(float(value))}
    if isinstance(value, complex):
        return {"t": COMPLEX, "v": [repr(float(value.real)), repr(float(value.imag))]}
    tensor = torch is not None and isinstance(value, torch.Tensor)
    if tensor:
        value = value.detach().cpu().numpy()
    sub = lambda x: _encode(x, refs, depth + 1)  # noqa: E731
    if np is not None and isinstance(value, np.ndarray):
        if value.dtype.kind not in ARRAY_KINDS:
            return {"t": LIST, "v": [sub(x) for x in value.tolist()]}
        a = np.ascontiguousarray(value)
        out = {"t": ARRAY, "dtype": a.dtype.str, "shape": list(a.shape)}
        out["b"] = base64.b64encode(a.tobytes()).decode("ascii")
        if tensor:
            out["torch"] = True
        return out
    cls = type(value)
    name = f"{cls.__module__}:{cls.__qualname__}"
    if isinstance(value, tuple) and hasattr(cls, "_fields") and (refs is not None or _own(cls)):
        fields = [str(f) for f in cls._fields]
        return {"t": NAMED_TUPLE, "cls": name, "fields": fields, "v": [sub(x) for x in value]}
    if (
        refs is None
        and dataclasses.is_dataclass(value)
        and not isinstance(value, type)
        and _own(cls)
    ):
        fields = [f.name for f in dataclasses.fields(value) if f.init]
        values = [sub(getattr(value, f)) for f in fields]
        return {"t": DATACLASS, "cls": name, "fields": fields, "v": values}
    if isinstance(value, tuple):
        return {"t": TUPLE, "v": [sub(x) for x in value]}
    if isinstance(value, list):
        return {"t": LIST, "v": [sub(x) for x in value]}
    if isinstance(value, dict):
        return {"t": DICT, "k": [sub(k) for k in value], "v": [sub(x) for x in value.values()]}
    if refs is None:
        raise TypeError(f"the grader cannot send a {cls.__name__} to a submission")
    if callable(value):
        refs.append(value)
        return {"t": FUNCTION, "ref": len(refs) - 1}
    return {"t": OPAQUE, "type": cls.__name__}


# --------------------------------------------------------------------------------------------------
# Decoding (one decoder; what each side accepts and how it rebuilds a named type are its arguments)
# --------------------------------------------------------------------------------------------------
class Opaque:
    """A kernel object the grader cannot receive (a check rejects it like any wrong type)."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} from the submission>"


def decode(value, remote=None):
    """The grader's reading of a kernel reply: data only, a ``ValueError`` for anything malformed.

    Arrays come back as NumPy arrays of the dtypes in ``ARRAY_KINDS`` (a tensor's too); a named tuple
    as its ``icl_book`` class when the class exists with those fields (:func:`_allowed_named_tuple`),
    else a generic named tuple; a function as ``remote(ref)`` (without ``remote``, an error)."""
    try:
        return _decode(value, KERNEL_SENDS, _allowed_named_tuple, remote, False, 0)
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed reply: {type(exc).__name__}") from None


def decode_argument(value):
    """The kernel's reading of the grader's argument (trusted: the named types it sends are
    imported here; an ``nd`` flagged ``torch`` becomes a tensor)."""
    return _decode(value, GRADER_SENDS, _imported_type, None, True, 0)


def _allowed_named_tuple(tag: str, cls_name: str, fields: list, values: list):
    """An allowed ``icl_book`` NamedTuple class, else a generic named tuple with those fields (the
    grader's only way from a name in a reply to a class: nothing outside ``icl_book`` is imported)."""
    module, _, qual = str(cls_name).partition(":")
    if module == "icl_book" or module.startswith("icl_book."):
        try:
            cls = importlib.import_module(module)
            for part in qual.split("."):
                cls = getattr(cls, part)
            if isinstance(cls, type) and issubclass(cls, tuple) and list(cls._fields) == fields:
                return cls(*values)
        except (ImportError, AttributeError, TypeError):
            pass
    names = [
        f if isinstance(f, str) and f.isidentifier() and not keyword.iskeyword(f) else "_"
        for f in fields
    ]
    return collections.namedtuple("Answer", names, rename=True)(*values)


def _imported_type(tag: str, cls_name: str, fields: list, values: list):
    """The kernel's rebuilding of the grader's named tuples and dataclasses, by import."""
    module, _, qual = cls_name.partition(":")
    cls = importlib.import_module(module)
    for part in qual.split("."):
        cls = getattr(cls, part)
    if tag == NAMED_TUPLE:
        return cls(*values)
    return cls(**dict(zip(fields, values, strict=True)))


def _decode(value, accepted, rebuild, remote, tensors, depth):
    if depth > MAX_DECODE_DEPTH:
        raise ValueError("value nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, list):
        raise ValueError("untagged list")
    if not isinstance(value, dict) or "t" not in value:
        raise ValueError("malformed value")
    t = value["t"]
    if t not in accepted:
        raise ValueError(f"unknown tag {str(t)[:20]!r}")
    sub = lambda x: _decode(x, accepted, rebuild, remote, tensors, depth + 1)  # noqa: E731
    if t == INT:
        text = str(value["v"])
        if len(text) > MAX_INT_DIGITS:
            raise ValueError("integer too large")
        return int(text)
    if t == FLOAT:
        return float(str(value["v"]))
    if t == COMPLEX:
        return complex(float(str(value["v"][0])), float(str(value["v"][1])))
    if t == ARRAY:
        import numpy as np

        dtype = np.dtype(str(value["dtype"]))
        if dtype.kind not in ARRAY_KINDS or dtype.hasobject:
            raise ValueError(f"array dtype {dtype} not accepted")
        shape = tuple(int(s) for s in value["shape"])
        raw = base64.b64decode(str(value["b"]), validate=True)
        if any(s < 0 for s in shape) or math.prod(shape) * dtype.itemsize != len(raw):
            raise ValueError("array shape and data disagree")
        a = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
        if tensors and value.get("torch"):
            import torch

            return torch.from_numpy(a)
        return a
    if t == TUPLE:
        return tuple(sub(x) for x in value["v"])
    if t == LIST:
        return [sub(x) for x in value["v"]]
    if t == DICT:
        keys = [sub(k) for k in value["k"]]
        return {
            (k if isinstance(k, (str, int, float, bool, tuple)) or k is None else repr(k)): sub(x)
            for k, x in zip(keys, value["v"], strict=False)
        }
    if t in (NAMED_TUPLE, DATACLASS):
        fields = list(value["fields"])
        return rebuild(t, str(value["cls"]), fields, [sub(x) for x in value["v"]])
    if t == FUNCTION:
        if remote is None:
            raise ValueError("function in value")
        return remote(int(value["ref"]))
    return Opaque(str(value.get("type", "object"))[:80])  # OPAQUE


# --------------------------------------------------------------------------------------------------
# The kernel's end of a request
# --------------------------------------------------------------------------------------------------
def serve(request_path: str, user_ns: dict) -> None:
    """Answer the grader's request file: ``eval`` an expression in the notebook's namespace, or
    ``call`` a registered function on decoded arguments; write the encoded value (or the error) to
    the request's reply path."""
    # What writes the reply, taken before the student's function runs (what it changes meanwhile
    # does not reach the reply); the grader stops waiting soon when the request is never taken.
    write_reply, dump = open, json.dump
    registry = sys.modules.setdefault("_icl_grader_refs", type(sys)("_icl_grader_refs"))
    if not hasattr(registry, "refs"):
        registry.refs = []
    with open(request_path, encoding="utf-8") as fh:
        req = json.load(fh)
    with write_reply(req["taken"], "w", encoding="utf-8"):
        pass  # taken: from here the grader waits up to the check's timeout
    out = {"token": req["token"]}
    try:
        if req["op"] == "eval":
            value = eval(req["expr"], user_ns)
        else:
            args = [decode_argument(a) for a in req["args"]]
            kwargs = {k: decode_argument(a) for k, a in req["kwargs"].items()}
            value = registry.refs[req["ref"]](*args, **kwargs)
        out["value"] = encode_reply(value, registry.refs)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        out["error"] = [type(exc).__name__, str(exc)[:300], isinstance(exc, NotImplementedError)]
    with write_reply(req["reply"], "w", encoding="utf-8") as fh:
        dump(out, fh)


@functools.cache
def source() -> str:
    """This module's source text (read once): what the grader sends the kernel to run."""
    with open(__file__, encoding="utf-8") as fh:
        return fh.read()


def kernel_code(request_path: str) -> str:
    """The cell the grader runs in the kernel for one request: this module's source, executed in a
    namespace of its own, then :func:`serve` on ``request_path``."""
    return (
        f"exec({source()!r}, __icl_g := {{'__name__': '_icl_grader_codec'}})\n"
        f"__icl_g['serve']({request_path!r}, globals())\n"
        "del __icl_g"
    )
