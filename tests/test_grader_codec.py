"""The grader's wire format is one module: the kernel runs that module's own source, and a
value written by either half reads back on the other as the same value."""

from __future__ import annotations

import ast
import collections
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from booktools.grading import channel, codec


class _Box:
    def alive(self) -> bool:
        return True


def _kernel_half() -> dict:
    """The kernel's half as the kernel has it: the sent source, executed in a namespace of its own."""
    space = {"__name__": "_icl_grader_codec"}
    exec(codec.source(), space)
    return space


def _wire(value):
    return json.loads(json.dumps(value))


def test_the_kernel_runs_this_modules_source(tmp_path):
    """The cell a request runs executes exactly ``codec.py``'s text (so the halves cannot
    drift), and that cell answers the grader's request when run as the kernel would run it."""
    session = object.__new__(channel.KernelSession)
    session.box, session.check_budget, session.channel = _Box(), None, tmp_path
    session.dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    sent, user_ns = [], {"answer": lambda x: 2 * x, "value": np.float64(0.5)}

    def run(code, timeout, taken=None):  # the kernel: runs the cell in the notebook's namespace
        sent.append(code)
        exec(code, user_ns)
        assert taken(), "the kernel's cell did not mark the request taken"

    session.run = run
    try:
        assert session.request({"op": "eval", "expr": "value"}, 5) == 0.5
        function = session.request({"op": "eval", "expr": "answer"}, 5)
        session.check_budget = channel.Budget(time.monotonic, math.inf, math.inf)
        got = function(np.arange(3.0))
        assert np.array_equal(got, [0.0, 2.0, 4.0]) and got.dtype == np.float64
    finally:
        session.close()
        sys.modules.pop("_icl_grader_refs", None)
    module_text = Path(codec.__file__).read_text(encoding="utf-8")
    for code in sent:
        execs = [
            node
            for node in ast.walk(ast.parse(code))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "exec"
        ]
        assert len(execs) == 1 and ast.literal_eval(execs[0].args[0]) == module_text


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (tuple, list)):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _tags(encoded) -> set:
    if isinstance(encoded, dict):
        return {encoded["t"]} | set().union(*(_tags(x) for x in encoded.values()))
    if isinstance(encoded, list):
        return set().union(*(_tags(x) for x in encoded))
    return set()


def test_each_half_reads_what_the_other_writes():
    """For every tag both halves accept, a value the grader encodes decodes in the kernel to the same
    value, and a value the kernel encodes decodes in the grader to the same value."""
    from icl_book.simulate import ProblemSizes

    kernel = _kernel_half()
    values = [
        None,
        True,
        "text",
        -(10**30),
        0.1,
        float("inf"),
        complex(1.5, -0.25),
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.array([True, False]),
        np.array([1 + 2j], dtype=np.complex64),
        np.zeros((0, 3), dtype=np.int16),
        (1, "a", (2.5,)),
        [1, [2, [3]]],
        {"a": 1, 2: [3.0], (1, 2): None},
        {None: "a None key stays None", 1.5: 2},
        ProblemSizes(3, 40, 5),
        [ProblemSizes(1, 2, 3), {"sizes": ProblemSizes(4, 5, 6)}],
    ]
    common = codec.GRADER_SENDS & codec.KERNEL_SENDS
    seen = set()
    for value in values:
        sent = _wire(codec.encode(value))
        replied = _wire(kernel["encode_reply"](value, []))
        assert sent == replied  # one encoder: the same bytes either way for the common tags
        seen |= _tags(sent)
        assert _same(value, kernel["decode_argument"](sent)), value
        assert _same(value, codec.decode(replied)), value
    assert seen == common


def test_the_halves_differ_where_trust_does():
    """Tags only one side sends are refused by the other; the grader rebuilds no class outside
    ``icl_book`` and imports nothing a reply names."""
    kernel = _kernel_half()
    refs: list = []
    assert _wire(kernel["encode_reply"](len, refs)) == {"t": "fn", "ref": 0} and refs == [len]
    opaque = codec.decode(_wire(kernel["encode_reply"](object(), [])))
    assert isinstance(opaque, codec.Opaque) and opaque.type_name == "object"
    assert codec.decode({"t": "fn", "ref": 3}, remote=lambda ref: ("proxy", ref)) == (
        "proxy",
        3,
    )
    for tag in codec.KERNEL_SENDS - codec.GRADER_SENDS:
        with pytest.raises(ValueError, match="unknown tag"):
            kernel["decode_argument"]({"t": tag, "ref": 0, "type": "x"})
    for tag in codec.GRADER_SENDS - codec.KERNEL_SENDS:
        with pytest.raises(ValueError, match="unknown tag"):
            codec.decode({"t": tag, "cls": "os:system", "fields": [], "v": []})
    assert "turtle" not in sys.modules
    forged = {"t": "nt", "cls": "turtle:Vec2D", "fields": ["x", "y"], "v": [1, 2]}
    got = codec.decode(forged)
    assert got == (1, 2) and type(got).__module__ != "turtle" and "turtle" not in sys.modules
    with pytest.raises(ValueError, match="malformed"):
        codec.decode({"t": "i"})
    with pytest.raises(TypeError, match="cannot send"):
        codec.encode(len)


def test_a_tensor_answer_reaches_the_grader_as_numpy():
    """The grader holds no torch object from a submission: a tensor a kernel returns is decoded as the
    NumPy array of its values (its dtype kept)."""
    import torch

    kernel = _kernel_half()
    got = codec.decode(_wire(kernel["encode_reply"](torch.arange(4, dtype=torch.float32), [])))
    assert type(got) is np.ndarray and got.dtype == np.float32
    assert np.array_equal(got, np.arange(4, dtype=np.float32))


@dataclasses.dataclass(frozen=True)
class _Foreign:
    a: int


def test_the_grader_names_only_the_books_own_classes():
    """The grader sends a class by name (for the kernel to import) only when it is ``icl_book``'s:
    the package's dataclass arrives as itself, another module's dataclass is refused, and another
    module's named tuple travels as the plain tuple it is."""
    from icl_book.features import partition_features

    kernel = _kernel_half()
    block = partition_features(2, 3, 4, kind="legendre")[0]
    sent = _wire(codec.encode(block))
    assert sent["t"] == codec.DATACLASS and kernel["decode_argument"](sent) == block
    with pytest.raises(TypeError, match="cannot send"):
        codec.encode(_Foreign(1))
    pair = collections.namedtuple("Pair", "a b")(1, 2)
    assert _wire(codec.encode(pair)) == _wire(codec.encode((1, 2)))


def test_a_reply_the_grader_cannot_read_fails_that_request_only(tmp_path):
    """A reply that decodes to nothing the grader accepts (here a forged unknown tag) is a
    RemoteError for that request, which fails that check, not an error that ends the submission."""
    session = object.__new__(channel.KernelSession)
    session.box, session.check_budget, session.channel = _Box(), None, tmp_path
    session.dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    user_ns = {"value": 1.5}

    def run(
        code, timeout, taken=None
    ):  # the kernel answers, then a forged value replaces its answer
        exec(code, user_ns)
        for reply in tmp_path.glob("reply-*.json"):
            data = json.loads(reply.read_text())
            if "token" in data and "value" in data:
                reply.write_text(json.dumps({**data, "value": {"t": "zz"}}))

    session.run = run
    try:
        with pytest.raises(channel.RemoteError, match="unreadable answer"):
            session.request({"op": "eval", "expr": "value"}, 5)
        session.run = lambda code, timeout, taken=None: exec(code, user_ns)
        assert session.request({"op": "eval", "expr": "value"}, 5) == 1.5  # the next one works
    finally:
        session.close()
        sys.modules.pop("_icl_grader_refs", None)
