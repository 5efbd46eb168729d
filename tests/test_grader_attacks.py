"""Hostile submissions against the autograder (booktools/grading/grader.py): each scores what its honest part earns.

Every submission is the prologue's student edition (= nbgrader release) reduced to its import cell,
solution cells and check cells (a student may delete unlocked cells; it keeps the batch fast), with an
honest part -- exercise 1 right, exercise 2 wrong (``best_eta`` returns 0.5) -- and one attack. The
whole batch is graded once, as an instructor would (``python -m booktools.assignments grade``); each
attack is one test that asserts the exact scores, and the attacks that aim elsewhere (the next
submission, another student's file, processes left behind) are checked there too.
"""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

import nbformat
import pytest

from booktools import assignments as A
from booktools.grading import channel, sandbox
from booktools.grading.batch import grade
from booktools.grading.report import write_report

RIGHT_1 = """def ridge_prediction(xs, ys, x_query, lam):
    d = xs.shape[1]
    w = np.linalg.solve(xs.T @ xs + lam * np.eye(d), xs.T @ ys)
    return float(x_query @ w)"""
WRONG_2 = "def best_eta(dim, context_len, noise_var):\n    return 0.5"
RIGHT_2 = (
    "def best_eta(dim, context_len, noise_var):\n"
    "    return context_len / (context_len + dim + 1 + noise_var)"
)
MARKER = "icl-attack-marker-7f3a"
CANARY = "ICL_GRADER_CANARY_SECRET"

# attack name -> (code added at the end of exercise 2's solution cell, or a callable editing the notebook)
PATCH_CHECK = """
import icl_book.checks as _c
_c.check_prologue_ex2 = lambda f: _c.passed("prologue-ex2")
check_prologue_ex2 = _c.check_prologue_ex2
"""
PATCH_CLOSE = """
import numpy as _np, icl_book.checks as _c
_c.require_close = lambda *a, **k: None
_np.allclose = lambda *a, **k: True
_np.isclose = lambda *a, **k: True
"""
PATCH_REFERENCE = """
import icl_book.estimators as _e, icl_book.hermite as _h
_e.best_one_step_eta = lambda *a, **k: 0.5
for _n in _h.__all__:  # every reference of the Hermite chapter too
    if callable(getattr(_h, _n)):
        setattr(_h, _n, lambda *a, **k: 0.5)
"""
SILENCE = """
ip = get_ipython()
ip.showtraceback = lambda *a, **k: print("prologue-ex2: correct")
ip._showtraceback = lambda *a, **k: print("prologue-ex2: correct")
import sys; sys.stderr = open(os.devnull, "w")
"""
STARTUP = """
import os, pathlib
for base in {os.environ.get("IPYTHONDIR", ""), os.path.expanduser("~/.ipython"), "/root/.ipython"}:
    try:
        d = pathlib.Path(base) / "profile_default" / "startup"
        d.mkdir(parents=True, exist_ok=True)
        (d / "00-poison.py").write_text(
            "import icl_book.checks as c\\n"
            "for n in dir(c):\\n"
            "    if n.startswith('check_'):\\n"
            "        setattr(c, n, lambda *a, _n=n, **k: c.passed(_n[6:].replace('_ex', '-ex')))\\n"
        )
    except OSError:
        pass
import site, sys
for sp in site.getsitepackages() + [os.path.dirname(os.path.dirname(__import__('icl_book').__file__))]:
    try:
        pathlib.Path(sp, "zz_poison.pth").write_text("import os\\n")
    except OSError:
        pass
try:
    pathlib.Path(__import__('icl_book.checks').checks.__file__).open("a").write("\\n# poisoned\\n")
except OSError:
    pass
"""
REWRITE_OTHERS = f"""
import json, os, pathlib
_seen = []
def _ancestors():
    pid = os.getpid()
    for _ in range(30):
        try:
            stat = pathlib.Path(f"/proc/{{pid}}/status").read_text()
        except OSError:
            return
        pid = int([l for l in stat.splitlines() if l.startswith("PPid:")][0].split()[1])
        if pid <= 0:
            return
        yield pid
for pid in list(_ancestors()) + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    try:
        args = pathlib.Path(f"/proc/{{pid}}/cmdline").read_bytes().split(b"\\0")
    except OSError:
        continue
    for a in args:
        a = a.decode(errors="replace")
        if a.endswith(".ipynb") and "victim" in a:
            _seen.append(a)
            try:
                nb = json.loads(pathlib.Path(a).read_text())
                for c in nb["cells"]:
                    if "best_eta" in "".join(c["source"]) and "def " in "".join(c["source"]):
                        c["source"] = {RIGHT_2!r}
                pathlib.Path(a).write_text(json.dumps(nb))
            except OSError:
                pass
"""
SPY = f"""
import os, pathlib
_leak = "{CANARY}" in os.environ or any(
    "victim" in pathlib.Path(f"/proc/{{p}}/cmdline").read_bytes().decode(errors="replace")
    for p in os.listdir("/proc") if p.isdigit() and pathlib.Path(f"/proc/{{p}}/cmdline").exists()
)
_leak = _leak or any("victim" in str(p) for p in pathlib.Path("/tmp").glob("**/*.ipynb"))
_ridge = ridge_prediction
def ridge_prediction(xs, ys, x_query, lam):
    return -1.0 if _leak else _ridge(xs, ys, x_query, lam)
"""
ORPHAN = f"""
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{MARKER}"],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
"""
MEMORY = """
_hog = []
try:
    while True:
        _hog.append(bytearray(256 * 1024 * 1024))
except MemoryError:
    pass
"""
FORKBOMB = """
import os, time
_kids = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    _kids += 1
"""
FAKE_ANSWER = """
class _Liar(float):
    def __eq__(self, other):
        return True
    def __sub__(self, other):
        return 0.0
    __rsub__ = __sub__
    def __abs__(self):
        return 0.0
def best_eta(dim, context_len, noise_var):
    return _Liar(0.5)
"""
PATCH_JSON = """
import json as _json
_dumps = _json.dump
def _fake(obj, fh, *a, **k):
    if isinstance(obj, dict) and "value" in obj:
        obj = {**obj, "value": {"t": "f", "v": "0.9"}}
    return _dumps(obj, fh, *a, **k)
_json.dump = _fake
"""
LOOP_2 = "def best_eta(dim, context_len, noise_var):\n    while True:\n        pass"
IGNORE_INTERRUPT = """
import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    time.sleep(0.1)
"""
KILL_ALL = """
import os, signal
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # someone to kill
if os.getpid() == 1:  # its own PID namespace: signal everything it can see
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    print("killed the rest")
os._exit(1)
"""
# the request names the reply file: a FIFO there, and the kernel's own write diverted
FIFO_REPLY = """
import builtins, os
_open = builtins.open
def _trap(path, mode="r", *a, **k):
    if "reply-" in str(path) and "w" in mode:
        os.mkfifo(path)
        return _open(os.devnull, mode, *a, **k)
    return _open(path, mode, *a, **k)
builtins.open = _trap
"""
# the grader's channel renamed and replaced by a symlink to a folder outside the box
WATCH = Path(__import__("tempfile").gettempdir()) / f"icl-attack-watch-{os.getpid()}"
SYMLINK_CHANNEL = f"""
import os, pathlib
for _d in pathlib.Path(".").glob(".grader-*"):
    _d.rename(_d.with_name("moved" + _d.name))
    os.symlink({str(WATCH)!r}, str(_d))
"""
FLOOD = """
import sys
for _ in range(64):
    sys.stdout.write("x" * (1 << 20) + "\\n")
    sys.stderr.write("y" * (1 << 16) + "\\n")
"""
RIGHT_2_WARNS = (
    "def best_eta(dim, context_len, noise_var):\n"
    "    import warnings\n"
    "    warnings.warn('a RuntimeWarning on stderr', RuntimeWarning, stacklevel=1)\n"
    "    return context_len / (context_len + dim + 1 + noise_var)"
)


def _base():
    release = A.chapter_release("prologue")
    keep = []
    for cell in release.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta or (cell.cell_type == "code" and "from icl_book.checks import" in cell.source):
            keep.append(cell)
    nb = nbformat.from_dict(release)
    nb.cells = [nbformat.from_dict(c) for c in keep]
    return release, nb


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _honest(nb, ex2=WRONG_2):
    _cell(nb, "prologue-ex1-solution").source = RIGHT_1
    _cell(nb, "prologue-ex2-solution").source = ex2
    return nb


def _after_ex2(code):
    def edit(nb):
        _cell(nb, "prologue-ex2-solution").source = WRONG_2 + "\n" + code
        return nb

    return edit


def _own_check(nb):
    imp = next(c for c in nb.cells if "from icl_book.checks import" in c.source)
    imp.source = imp.source.replace(
        "from icl_book.checks import check_prologue_ex1, check_prologue_ex2",
        "def check_prologue_ex1(f):\n    print('prologue-ex1: correct')\n\n\n"
        "def check_prologue_ex2(f):\n    print('prologue-ex2: correct')",
    )
    return nb


def _edit_check(nb):
    _cell(nb, "prologue-ex2-check").source = 'print("prologue-ex2: correct")'
    return nb


def _decoy(nb):
    i = nb.cells.index(_cell(nb, "prologue-ex2-solution"))
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell("if False:\n    check_prologue_ex2(best_eta)"))
    nb.cells.insert(i + 2, nbformat.v4.new_code_cell('print("prologue-ex2: correct")'))
    return nb


def _points(nb):
    for gid in ("prologue-ex1-check", "prologue-ex2-check"):
        _cell(nb, gid).metadata["nbgrader"]["points"] = 100
    return nb


def _drop_exercise(nb):
    meta = nb.metadata["icl_book"]
    meta["exercises"] = [e for e in meta["exercises"] if e["label"] != "prologue-ex2"]
    check = _cell(nb, "prologue-ex2-check")
    check.metadata.pop("nbgrader")  # and unmark the check cell
    nb.cells.remove(check)
    return nb


def _move_check_up(nb):
    """The check cell's metadata moved to a cell before the answer exists: the check runs there."""
    check = _cell(nb, "prologue-ex2-check")
    nb.cells.remove(check)
    nb.cells.insert(0, check)
    return nb


ATTACKS = {
    "patch_check_function": _after_ex2(PATCH_CHECK),
    "patch_require_close_and_allclose": _after_ex2(PATCH_CLOSE),
    "patch_reference_function": _after_ex2(PATCH_REFERENCE),
    "own_check_in_import_cell": _own_check,
    "edit_locked_check_cell": _edit_check,
    "decoy_check_cell": _decoy,
    "silence_tracebacks_print_pass": _after_ex2(SILENCE),
    "points_set_to_100": _points,
    "exercise_deleted_from_metadata": _drop_exercise,
    "ipython_startup_and_site_poison": _after_ex2(STARTUP),
    "rewrite_other_students_notebook": _after_ex2(REWRITE_OTHERS),
    "read_environment_and_cmdline": _after_ex2(SPY),
    "orphan_in_new_session": _after_ex2(ORPHAN),
    "unbounded_memory": _after_ex2(MEMORY),
    "fork_bomb": _after_ex2(FORKBOMB),
    "answer_object_that_equals_everything": lambda nb: _honest(nb, FAKE_ANSWER),
    "patch_json_to_forge_reply": _after_ex2(PATCH_JSON),
    "check_cell_moved_before_answer": _move_check_up,
    "infinite_loop_then_next_exercise": lambda nb: _honest(nb, LOOP_2),
    "ignore_interrupt_then_loop": _after_ex2(IGNORE_INTERRUPT),
    "kill_every_process_it_sees": _after_ex2(KILL_ALL),
    "fifo_in_place_of_the_reply": _after_ex2(FIFO_REPLY),
    "symlink_in_place_of_the_channel": _after_ex2(SYMLINK_CHANNEL),
    "flood_stdout_and_stderr": _after_ex2(FLOOD),
    # not an attack: nbgrader scores this 0 (stderr in a test cell); the answer is right
    "correct_answer_that_warns_on_stderr": lambda nb: _honest(nb, RIGHT_2_WARNS),
}
# What the honest part earns (ex1, ex2); the infinite loop's ex2 is a timeout.
EXPECTED = {name: ("1", "0") for name in ATTACKS}
EXPECTED["correct_answer_that_warns_on_stderr"] = ("1", "1")
# attacks aimed past their own submission: an untouched one follows each in the batch
VICTIMS_AFTER = (
    "ipython_startup_and_site_poison",
    "rewrite_other_students_notebook",
    "kill_every_process_it_sees",
)
# What the report says of exercise 2 where the attack stops the kernel or the answer
MESSAGE_2 = {
    "infinite_loop_then_next_exercise": "timeout",
    "ignore_interrupt_then_loop": channel.HUNG,
    "kill_every_process_it_sees": "kernel died",
    "fifo_in_place_of_the_reply": "the answer is not a file",
    "symlink_in_place_of_the_channel": "the submission did not answer",
}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    release, base = _base()
    subs = tmp_path_factory.mktemp("subs")
    rel = subs.parent / "release.ipynb"
    nbformat.write(release, rel)
    paths, victims = [], []
    for name, attack in ATTACKS.items():
        nb = attack(_honest(nbformat.from_dict(base)))
        path = subs / f"{name}.ipynb"
        nbformat.write(nb, path)
        paths.append(path)
        # the attacks aimed past their own submission are followed by an untouched (stub) one
        victim = subs / f"victim_after_{name}.ipynb"
        if name in VICTIMS_AFTER:
            nbformat.write(base, victim)
            victims.append(victim)
    victim_bytes = (subs / "victim_after_rewrite_other_students_notebook.ipynb").read_bytes()
    WATCH.mkdir()
    watch_before = WATCH.stat().st_mtime_ns
    report = subs / "report.csv"
    mp = pytest.MonkeyPatch()
    mp.setenv(CANARY, "1")
    start = time.monotonic()
    try:
        # Two submissions side by side (jobs = 2, as an instructor grades): every attack also runs
        # beside another kernel it could try to reach. The victims are graded once every attack has
        # finished (a second batch, also two at a time), so each comes strictly after its attacker,
        # whose poison, rewrite or killing spree has had all its time.
        kwargs = {
            "release": rel,
            # 10 s of the kernel's CPU per cell and check (wall-clock time capped at 30 s): 20 times
            # what the honest import cell needs (0.5 s), and what the hostile loops spend
            "timeout": 10,
            "notebook_timeout": 120,
            # the default address space (4 GB): the check module imports torch, which needs ~2 GB
            "limits": sandbox.Limits(cpu_s=300, nproc=64),
            "jobs": 2,
        }
        write_report(grade(paths, **kwargs) + grade(victims, **kwargs), report)
    finally:
        mp.undo()
        watch_after = WATCH.stat().st_mtime_ns
        WATCH.rmdir()
    elapsed = time.monotonic() - start
    with report.open() as fh:
        rows = list(csv.DictReader(fh))
    table = {(r["student"], r["exercise"]): r for r in rows}
    return {
        "rows": table,
        "elapsed": elapsed,
        "victim_unchanged": victim_bytes
        == (subs / "victim_after_rewrite_other_students_notebook.ipynb").read_bytes(),
        "watch_untouched": watch_after == watch_before,
    }


@pytest.mark.slow  # every attack, then the victims, two at a time
@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_scores_only_the_honest_part(batch, name):
    rows = batch["rows"]
    got = (rows[(name, "prologue-ex1")]["score"], rows[(name, "prologue-ex2")]["score"])
    assert got == EXPECTED[name], {k: v for k, v in rows.items() if k[0] == name}
    for ex in ("prologue-ex1", "prologue-ex2"):
        assert rows[(name, ex)]["max_score"] == "1"  # the release's points, not the submission's
    assert (name, "prologue-ex3") in rows and rows[(name, "prologue-ex3")]["score"] == "manual"
    if name in MESSAGE_2:
        assert rows[(name, "prologue-ex2")]["message"] == MESSAGE_2[name]


@pytest.mark.slow
def test_the_grader_writes_nothing_through_a_submissions_symlink(batch):
    """A request file written through the planted link would change the folder's mtime."""
    assert batch["watch_untouched"]


@pytest.mark.slow
def test_the_next_submission_is_not_poisoned(batch):
    rows = batch["rows"]
    for name in VICTIMS_AFTER:
        victim = f"victim_after_{name}"
        assert rows[(victim, "prologue-ex1")]["score"] == "0"
        assert rows[(victim, "prologue-ex2")]["score"] == "0"
        assert "not implemented" in rows[(victim, "prologue-ex2")]["message"]
    assert batch["victim_unchanged"], "a submission rewrote another student's notebook"
    import icl_book.checks

    assert "# poisoned" not in Path(icl_book.checks.__file__).read_text()


@pytest.mark.slow
def test_no_process_outlives_the_grader(batch):
    assert "orphan" in "".join(k[0] for k in batch["rows"])  # the attack ran
    time.sleep(0.5)
    assert _processes_with(MARKER) == []


def _processes_with(marker: str) -> list[str]:
    """The pids whose command line contains ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_timeout_interrupts_and_grading_goes_on(batch):
    rows = batch["rows"]
    assert rows[("infinite_loop_then_next_exercise", "prologue-ex2")]["message"] == "timeout"
    assert rows[("infinite_loop_then_next_exercise", "prologue-ex1")]["score"] == "1"


def test_decoder_accepts_data_only():
    from booktools.grading import codec as C

    assert C.decode(json.loads(json.dumps(C.encode((1, 2.5, [True, None], {"a": "b"}))))) == (
        1,
        2.5,
        [True, None],
        {"a": "b"},
    )
    for bad in (
        {"t": "nd", "dtype": "|O", "shape": [1], "b": ""},
        {"t": "nd", "dtype": "<f8", "shape": [3], "b": "AAAAAAAAAAA="},
        {"t": "fn", "ref": 0},
        {"t": "pickle", "v": "x"},
        [1, 2],
    ):
        with pytest.raises(ValueError):
            C.decode(bad)
    assert isinstance(C.decode({"t": "obj", "type": "Liar"}), C.Opaque)


def test_kernel_encoder_round_trips_numpy_and_torch_answers():
    """What a student's function returns (NumPy 2 scalars included, whose repr is ``np.float64(…)``)
    reaches the check as the same number."""
    import numpy as np
    import torch

    from booktools.grading import codec as C

    space: dict = {}
    exec(C.source(), space)  # the kernel's side, as the grader sends it

    def through(value):
        return C.decode(json.loads(json.dumps(space["encode_reply"](value, []))))

    for value in (0.9, np.float64(0.9), np.float32(0.25), np.int64(-3), np.bool_(True), 7, True):
        got = through(value)
        assert got == value and type(got) is type(value.item() if hasattr(value, "item") else value)
    assert through(np.complex128(1.5 - 2j)) == 1.5 - 2j
    assert through(complex(0.5, np.float64(0.25))) == 0.5 + 0.25j
    arr = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
    assert np.array_equal(through(arr), arr) and through(arr).dtype == np.float64
    assert np.array_equal(through(torch.tensor([1.0, 2.0])), np.array([1.0, 2.0], np.float32))
    assert through((np.float64(1.0), [np.int32(2)], {"a": np.float64(3.0)})) == (
        1.0,
        [2],
        {"a": 3.0},
    )


def test_the_grader_sends_the_books_own_types():
    """Checks call answers with the package's dataclasses and named tuples (chapter 6's
    ``FeatureBlock`` list once failed with "the grader cannot send a FeatureBlock")."""
    import numpy as np

    from booktools.grading import codec as C
    from icl_book import theory
    from icl_book.features import partition_features

    space: dict = {}
    exec(C.source(), space)

    def to_kernel(value):
        return space["decode_argument"](json.loads(json.dumps(C.encode(value))))

    blocks = partition_features(2, 3, 4, kind="legendre")
    back = to_kernel(blocks)
    assert back == blocks and all(type(b) is type(a) for a, b in zip(blocks, back, strict=True))
    x = np.random.default_rng(0).uniform(-1, 1, (5, 2))
    assert all(np.array_equal(a(x), b(x)) for a, b in zip(blocks, back, strict=True))
    moments = theory.task_moments(np.eye(3)[:2])
    got = to_kernel(moments)
    assert type(got) is type(moments)
    assert all(np.array_equal(a, b) for a, b in zip(got, moments, strict=True))
    with pytest.raises(TypeError, match="cannot send"):
        C.encode(object())


@pytest.mark.slow  # one kernel: ~5 s
def test_fork_bomb_is_bounded_per_kernel(tmp_path):
    """Each kernel has a process count of its own (a pids cgroup, or RLIMIT_NPROC inside its user
    namespace): forks fail there, long before the machine's limit."""
    box = sandbox.start_kernel(tmp_path / "box", sandbox.Limits(nproc=64))
    out = []
    try:
        box.client.execute_interactive(
            FORKBOMB + "print('forked', _kids)",
            timeout=120,
            output_hook=lambda m: out.append(m["content"].get("text", "")),
        )
    finally:
        box.kill()
    forked = int("".join(out).split("forked")[1].split()[0])
    assert forked < 64, (forked, box.cgroup)
    if box.cgroup is not None:
        assert not box.cgroup.exists()  # killed and removed with the kernel


@pytest.mark.slow  # one kernel: ~15 s
def test_no_kernel_outlives_a_killed_grader(tmp_path):
    """SIGKILL the grader mid-notebook (no clean-up code runs): its kernel and what that started die too."""
    import signal
    import subprocess
    import sys

    marker = f"icl-grader-death-{os.getpid()}"
    release, base = _base()
    nbformat.write(release, tmp_path / "release.ipynb")
    nb = _honest(nbformat.from_dict(base))
    _cell(nb, "prologue-ex1-solution").source = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
        "time.sleep(300)"
    )
    nbformat.write(nb, tmp_path / "slow.ipynb")

    def running():
        return _processes_with(marker)

    grader = subprocess.Popen(
        [sys.executable, "-m", "booktools.assignments", "grade", str(tmp_path / "slow.ipynb"),
         "--release", str(tmp_path / "release.ipynb"), "--jobs", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        end = time.monotonic() + 120
        while not running() and time.monotonic() < end:
            time.sleep(0.5)
        assert running(), "the submission's child never started"
    finally:
        grader.send_signal(signal.SIGKILL)
        grader.wait()
    end = time.monotonic() + 10
    while running() and time.monotonic() < end:
        time.sleep(0.2)
    assert running() == []
