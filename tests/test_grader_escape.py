"""A solution cell must not leave the grading box (booktools/grading/sandbox.py).

One cell tries every way out we know of, each recorded as it goes: unmount or remount what the box
mounted, bind-mount, a user namespace of its own, join the grader's namespaces through
``/proc/<pid>/ns``, ptrace or ``/proc/<pid>/mem`` of a process it did not start, ``chroot`` and
``pivot_root``, writing a sysctl, writing into the package, the environment or the clone, reading
another kernel's private directory or the instructor's solutions, and a process that outlives the
kernel. The cell is a submission with no work of its own, graded by ``grade``: an escape would be
rewarded with the instructor's solutions (read from a folder the box hides), and the answer's error
message brings back which attacks achieved anything (a channel every student has). Each attack must
fail, the submission score nothing, and the instructor's files hash the same before and after.
Both as root and as an ordinary user (created here when the test runs as root).
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from booktools import assignments as A
from booktools.grading import sandbox as S
from booktools.grading.batch import grade

ROOT = Path(__file__).resolve().parent.parent
RIGHT_1 = """def ridge_prediction(xs, ys, x_query, lam):
    d = xs.shape[1]
    w = np.linalg.solve(xs.T @ xs + lam * np.eye(d), xs.T @ ys)
    return float(x_query @ w)"""
RIGHT_2 = (
    "def best_eta(dim, context_len, noise_var):\n"
    "    return context_len / (context_len + dim + 1 + noise_var)"
)
USER = "icl-grade-escape"  # the ordinary user the attacks run as when the test runs as root

# The attacks. ``T`` (the targets) is prepended by the test; ``ESCAPED`` maps each attack to what it
# achieved ("" when nothing). Actions that would wreck the kernel if they worked run in a child process.
ATTACKS = r'''
import ctypes, glob, json, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
ESCAPED = {}
PROBE = "icl-escape-probe-" + T["token"]

def sh(*cmd, **kw):
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30, **kw)
    return r.returncode, (r.stdout + r.stderr).strip()

def mounts():
    return [l.split()[1] for l in open("/proc/self/mounts").read().splitlines()][::-1]

def attack(name):
    def run(fn):
        try:
            ESCAPED[name] = str(fn() or "")
        except Exception as exc:  # an attack that crashes achieved nothing
            ESCAPED[name] = ""
    return run

@attack("umount")
def _():
    done = []
    for mp in mounts():
        for flags in ([], ["-l"]):
            if sh("umount", *flags, mp)[0] == 0:
                done.append(" ".join(["umount", *flags, mp]))
        if libc.umount2(mp.encode(), 2) == 0:  # MNT_DETACH
            done.append("umount2 " + mp)
    return "; ".join(done)

@attack("remount_rw")
def _():
    done = [" ".join(c) for c in (["mount", "-o", "remount,rw", "/"],
                                  ["mount", "-o", "remount,bind,rw", "/"])
            if sh(*c)[0] == 0]
    done += [mp for mp in mounts() if sh("mount", "-o", "remount,bind,rw", mp)[0] == 0]
    return "; ".join(done)

@attack("bind_mount")
def _():
    os.makedirs("bind-target", exist_ok=True)
    return "mount --bind / worked" if sh("mount", "--bind", "/", "bind-target")[0] == 0 else ""

@attack("nested_unshare")
def _():
    inner = ('for m in $(cut -d" " -f2 /proc/self/mounts | tac); do '
             'umount -l "$m" 2>/dev/null && echo "UNMOUNTED $m"; done; '
             'mount -o remount,bind,rw / 2>/dev/null && echo REMOUNTED; true')
    rc, out = sh("unshare", "--user", "--map-root-user", "--mount", "sh", "-c", inner)
    return out if rc == 0 and ("UNMOUNTED" in out or "REMOUNTED" in out) else ""

def others():
    """The pids this kernel can name that it did not start, and the grader's (from outside)."""
    mine, me = set(), os.getpid()
    for p in filter(str.isdigit, os.listdir("/proc")):
        q = int(p)
        for _ in range(64):
            if q in (me, 0):
                break
            try:
                q = int(open(f"/proc/{q}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                q = 0
        if q == me:
            mine.add(int(p))
    seen = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    return sorted((seen - mine) | {T["grader_pid"]} - {me})

@attack("setns")
def _():
    done = []
    for pid in others():
        for ns in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup"):
            try:
                fd = os.open(f"/proc/{pid}/ns/{ns}", os.O_RDONLY)
            except OSError:
                continue
            if os.fstat(fd).st_ino != os.stat(f"/proc/self/ns/{ns}").st_ino:
                if libc.setns(fd, 0) == 0:
                    done.append(f"{ns} of {pid}")
            os.close(fd)
    return "; ".join(done)

@attack("ptrace_and_proc_mem")
def _():
    done = []
    for pid in others():
        try:
            with open(f"/proc/{pid}/mem", "rb"):
                done.append(f"/proc/{pid}/mem")
        except OSError:
            pass
        if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
            done.append(f"ptrace {pid}")
            libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
            os.kill(pid, 18)  # SIGCONT
    return "; ".join(done)

@attack("chroot_and_pivot_root")
def _():
    os.makedirs("newroot/old", exist_ok=True)
    done = []
    if sh("chroot", "/", "true")[0] == 0:
        done.append("chroot")
    child = ("import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
             "raise SystemExit(libc.syscall(155, b'.', b'.'))")  # pivot_root(".", ".")
    if sh(sys.executable, "-c", child, cwd="/")[0] == 0:
        done.append("pivot_root")
    return "; ".join(done)

@attack("write_sysctl")
def _():
    path = "/proc/sys/vm/swappiness"  # its current value written back: harmless if it works
    value = open(path).read()
    with open(path, "w") as fh:
        fh.write(value)
    return "wrote " + path

@attack("write_instructors_files")
def _():
    done = []
    for folder in T["write_into"]:
        try:
            with open(os.path.join(folder, PROBE), "w") as fh:
                fh.write("import os\n")
            done.append(folder)
        except OSError:
            pass
    for path in T["append_to"]:
        try:
            with open(path, "a") as fh:
                fh.write("")
            done.append(path)
        except OSError:
            pass
    return "; ".join(done)

@attack("read_neighbour")
def _():
    found = [f for f in [T["neighbour"], *glob.glob("/tmp/icl-grade-*/work/*.ipynb")]
             if os.path.isfile(f) and os.path.realpath(f) != os.path.realpath("submission.ipynb")]
    return "; ".join(f for f in found if open(f).read())

@attack("read_solutions")
def _():
    return "; ".join(f for f in T["solutions"] if os.path.isfile(f) and open(f).read())

@attack("outlive_the_kernel")
def _():
    code = "import os, signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(90)"
    if os.fork() == 0:  # a daemon: new session, parent gone
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", code, T["marker"]])
        os._exit(0)
    os.wait()
    return ""  # the test looks for it once the kernel is gone

'''
VERDICT = """
_verdict = "ESCAPE-VERDICT ran %d, escaped: %s END" % (
    len(ESCAPED), ",".join(k for k, v in ESCAPED.items() if v) or "none")
def ridge_prediction(xs, ys, x_query, lam):
    raise RuntimeError(_verdict)
"""
# The reward: the instructor's solutions, if any attack reached them (after each answer cell).
REWARD = """
try:
    exec(open(T["solutions"][0]).read())
except OSError:
    pass
"""


def _targets(token: str, marker: str, course: Path, neighbour: Path) -> dict:
    """What the attacks aim at: the instructor's files and folders, another kernel's notebook."""
    import icl_book

    package = Path(icl_book.__file__).resolve().parent
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    return {
        "token": token,
        "marker": marker,
        "grader_pid": os.getpid(),
        "neighbour": str(neighbour),
        "solutions": [str(course / "key" / "solutions.py"), str(ROOT / "chapters/00_prologue.md")],
        "write_into": [str(p) for p in (package, site, ROOT, course, course / "key", Path.home())],
        "append_to": [str(course / "release.ipynb"), str(course / "key" / "solutions.py")],
    }


def _fingerprint(paths) -> str:
    """One hash of the instructor's files: each file's bytes, each folder's names (no new file)."""
    h = hashlib.sha256()
    for path in map(Path, paths):
        h.update(str(path).encode())
        if path.is_dir():
            for entry in sorted(os.listdir(path)):
                h.update(entry.encode())
        elif path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()


def _processes_with(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def run_escape(work: str, pythonpath: list[str] | tuple = ()) -> dict:
    """Every attack from a graded submission's cell: which escaped, the scores, and whether the
    instructor's files and the process table are as before. ``work``: an empty folder of the user
    running the attacks."""
    work = Path(work)
    token = secrets.token_hex(6)
    marker = f"icl-escape-survivor-{token}"
    course = work / "course"
    (course / "key").mkdir(parents=True)
    (course / "key" / "solutions.py").write_text(RIGHT_1 + "\n" + RIGHT_2 + "\n")
    release = A.chapter_release("prologue")
    nbformat.write(release, course / "release.ipynb")
    # another kernel's private folder, as the grader makes them
    neighbour_dir = Path(tempfile.mkdtemp(prefix="icl-grade-"))
    neighbour = neighbour_dir / "work" / "submission.ipynb"
    neighbour.parent.mkdir()
    neighbour.write_text("another student's answers")
    targets = _targets(token, marker, course, neighbour)
    # hashed: the instructor's files and the folders no one else writes to while the test runs
    # (the clone, the environment and the home are checked for the attack's own file instead)
    package = Path(targets["write_into"][0])
    watched = [
        package,
        *sorted(package.glob("*.py")),
        course,
        course / "key",
        *targets["append_to"],
        *targets["solutions"],
        neighbour,
    ]
    before = _fingerprint(watched)
    given = f"T = {json.dumps(targets)!r}\nT = __import__('json').loads(T)\n"
    # A submission with no work of its own: the attacks in the first answer cell, whose function
    # then reports what they achieved (its error message reaches the report), and after each answer
    # the reward an escape would reach.
    nb = nbformat.from_dict(release)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid == "prologue-ex1-solution":
            cell.source += "\n" + given + ATTACKS + VERDICT + REWARD
        elif gid == "prologue-ex2-solution":
            cell.source += "\n" + given + REWARD
    subs = work / "submitted"
    subs.mkdir()
    nbformat.write(nb, subs / "mallory.ipynb")
    result = {}
    try:
        rows = grade(
            [subs / "mallory.ipynb"],
            work / "grades.csv",
            release=course / "release.ipynb",
            timeout=60,
            jobs=1,
            pythonpath=pythonpath,
            limits=S.Limits(cpu_s=300, nproc=64),
        )
        said = next(r.message for r in rows if r.exercise == "prologue-ex1")
        result["verdict"] = said.split("ESCAPE-VERDICT ", 1)[-1].split(" END", 1)[0]
        result["scores"] = {r.exercise: r.score for r in rows}
        time.sleep(0.5)
        result["survivors"] = _processes_with(marker)
        probes = [Path(f, f"icl-escape-probe-{token}") for f in targets["write_into"]]
        result["unchanged"] = _fingerprint(watched) == before and not any(
            p.exists() for p in probes
        )
    finally:
        for folder in targets["write_into"]:  # what an escape left behind, so a rerun starts clean
            Path(folder, f"icl-escape-probe-{token}").unlink(missing_ok=True)
        shutil.rmtree(neighbour_dir, ignore_errors=True)
        for pid in _processes_with(marker):
            os.kill(int(pid), 9)
    return result


def _assert_held(result: dict) -> None:
    assert result["verdict"] == "ran 12, escaped: none", result  # every attack ran, none escaped
    assert result["survivors"] == [], "a process outlived its kernel"
    assert result["scores"] == {"prologue-ex1": 0, "prologue-ex2": 0, "prologue-ex3": "manual"}
    assert result["unchanged"], "the instructor's files changed"


@pytest.mark.slow  # one kernel: ~15 s
def test_no_attack_leaves_the_box_as_the_graders_user(tmp_path):
    _assert_held(run_escape(str(tmp_path)))


@pytest.mark.slow  # one kernel under another user: ~20 s
def test_no_attack_leaves_the_box_as_an_ordinary_user(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("already an ordinary user: the test above is this one")
    if shutil.which("useradd") is None or shutil.which("setpriv") is None:
        pytest.skip("needs useradd and setpriv to run the attacks as an ordinary user")
    try:
        pwd.getpwnam(USER)
        created = False
    except KeyError:
        subprocess.run(["useradd", "--create-home", USER], check=True)
        created = True
    try:
        _attacks_as(pwd.getpwnam(USER))
    finally:
        if created:
            subprocess.run(["userdel", "--remove", USER], capture_output=True)


def _attacks_as(user) -> None:
    """The attacks, graded by a grader running as ``user``."""
    # The user must be able to run an interpreter with the book's environment: this one if its
    # installation is readable by others, else the system's of the same version with this
    # environment's packages on its path.
    python, path = sys.executable, []
    probe = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups"]
    # (setpriv may start an interpreter its user cannot read: the probe reads the installation)
    readable = (
        "import os, sys, numpy; os.listdir(os.path.dirname(os.path.realpath(sys.executable)))"
    )
    if subprocess.run([*probe, python, "-c", readable], capture_output=True).returncode:
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        python = shutil.which(version, path="/usr/local/bin:/usr/bin:/bin")
        path = [sysconfig.get_paths()["purelib"]]
        if python is None or str(Path(python).resolve()).startswith(sys.base_prefix):
            pytest.skip("no interpreter with the book's environment the ordinary user can run")
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": user.pw_dir,
        "PYTHONPATH": os.pathsep.join([*path, str(ROOT)]),
        "OMP_NUM_THREADS": "1",
        "LANG": "C.UTF-8",
    }
    reads = subprocess.run(
        [*probe, python, "-c", "import booktools.grading.batch, nbformat, icl_book"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    if reads.returncode:
        pytest.skip(
            f"the clone or its environment is not readable by an ordinary user: {reads.stderr}"
        )
    work = Path(tempfile.mkdtemp(prefix="icl-escape-user-"))
    os.chown(work, user.pw_uid, user.pw_gid)
    code = (
        "import json, sys\n"
        "from tests.test_grader_escape import run_escape\n"
        "print('RESULT=' + json.dumps(run_escape(sys.argv[1], sys.argv[2:])))"
    )
    try:
        run = subprocess.run(
            [*probe, python, "-c", code, str(work), *path],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert "RESULT=" in run.stdout, run.stderr[-3000:]
    _assert_held(json.loads(run.stdout.split("RESULT=", 1)[1].splitlines()[0]))
