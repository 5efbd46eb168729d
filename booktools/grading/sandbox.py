"""The box one submission's kernel runs in (used by :mod:`booktools.grading.grader`).

:func:`start_kernel` launches an IPython kernel for one submission:

- a private directory (its working directory, ``HOME``, ``IPYTHONDIR``, ``MPLCONFIGDIR``, ``TMPDIR``)
  that holds only the copy of that one submission and the kernel's connection file; a minimal
  environment (none of the grader's variables);
- a box built by bubblewrap (``bwrap``, Debian's ``bubblewrap``, the sandbox Flatpak uses), which
  makes the mounts and then drops every capability (``--unshare-all --unshare-user --disable-userns
  --cap-drop ALL``): the mounts are locked, so no cell can unmount, remount or bind anything, create
  a user namespace of its own, ``chroot``, ``pivot_root`` or join another namespace. Its own PID
  namespace with the kernel as process 1 (it sees no other process: neither the grader's command
  line nor other kernels, and it can ptrace none), no network, its own IPC and hostname. Its file
  system is an empty read-only root holding only read-only binds of what the kernel needs: ``/usr``
  (and the ``/bin``, ``/lib`` links), a few files of ``/etc`` (:data:`ETC`), ``/sys``, the
  interpreter, the environment, the package and the course's own modules; ``/proc`` of its own
  with ``/proc/sys`` read-only, a minimal ``/dev``, a private ``/dev/shm``, and the private
  directory, the only writable folder. Nothing else exists in it: not ``/tmp`` with the other
  kernels' folders, not the clone with the instructor's solutions, not the submissions' folders,
  not the grader's home. The kernel talks to the grader over Unix sockets in the private
  directory. Where ``bwrap`` is missing or cannot build the box, :func:`start_kernel` raises
  :class:`SandboxUnavailable` unless told ``no_sandbox`` (then only the limits and the private
  working directory remain);
- limits (``prlimit``, inherited by the box): address space (``RLIMIT_AS``), CPU time
  (``RLIMIT_CPU``), file size (``RLIMIT_FSIZE``), no core files, and a process count of its own:
  where the grader may create a ``pids`` cgroup (cgroup v1 ``/sys/fs/cgroup/pids`` or a delegated
  v2 subtree, e.g. when grading as root in a container), each kernel gets one with ``pids.max =
  nproc`` (a fork bomb fails with ``EAGAIN`` there and starves nothing else); otherwise
  ``RLIMIT_NPROC``, which Linux counts per user *within the box's user namespace* (so it limits
  that one submission) but does not enforce at all for the real root user;
- its CPU time (:meth:`Kernel.cpu_seconds`, every process under its launcher, read from ``/proc``),
  which the grader's timeouts count;
- in its own session; :meth:`Kernel.kill` kills bubblewrap, whose ``--die-with-parent`` takes the
  PID namespace and everything in it along (without the box: the process group and every process
  carrying the run's token); a parent-death signal (``setpriv --pdeathsig``) and
  ``--die-with-parent`` kill the box even when the grader is killed first.

The kernel keeps the grader's user id (with no capability): as root it could still write a file
owned by root where one is writable, which is why nothing but its private directory and
``/dev/shm`` is, and why ``/proc/sys`` is bound read-only (bubblewrap 0.8 leaves it writable, and
root may write a sysctl without any capability). Grade untrusted work in a container or VM without
credentials all the same: a kernel exploit leaves any box.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Limits", "SandboxUnavailable", "box_available", "Kernel", "start_kernel"]


class SandboxUnavailable(RuntimeError):
    """The box cannot be built here (``bwrap`` missing or refused, or ``ICL_GRADER_NO_BOX`` set):
    the grader refuses to run unless told ``no_sandbox`` explicitly."""


SANDBOX_MISSING = (
    "the grader's sandbox cannot be built here (bubblewrap 0.8 or later is missing, cannot create "
    "its namespaces, or ICL_GRADER_NO_BOX is set): refusing to grade. Install it (Debian and "
    "Ubuntu: `sudo apt-get install bubblewrap`) and check that `bwrap --unshare-all --unshare-user "
    "--disable-userns --ro-bind / / --proc /proc --dev /dev true` exits 0 (in Docker, the default "
    "seccomp profile blocks it: `docker run --security-opt seccomp=unconfined`), or pass "
    "--no-sandbox to grade without the box"
)
NO_SANDBOX_WARNING = (
    "WARNING: grading WITHOUT the sandbox (--no-sandbox): each kernel runs with your user id, can "
    "read and write every file you can (other students' submissions, your credentials), sees your "
    "processes and has the network. Only the resource limits apply."
)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one submission's kernel (``None``: no limit)."""

    memory_mb: int | None = 4096  # address space; torch needs ~2 GB of it to import
    cpu_s: int | None = 3600  # CPU seconds of each process
    nproc: int | None = 256  # processes and threads (torch and BLAS threads count)
    file_mb: int | None = 512  # largest file it can write
    threads: int | None = None  # BLAS/OpenMP threads (None: the grader's setting, if any)


# The box's namespaces and privileges: every namespace, a user namespace the kernel cannot nest
# another in, no capability, the kernel as process 1 (no bubblewrap process inside it could
# ptrace), killed with bubblewrap, in a session of its own (no TIOCSTI into a terminal).
BWRAP_FLAGS = (
    "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
    "--as-pid-1", "--die-with-parent", "--new-session",
)  # fmt: skip
# What the kernel reads of /etc: users and groups, the loader's cache, time zone, fonts,
# certificates, Debian's links of alternatives and its Python's site configuration; not the rest
# (/etc/shadow, host keys: a root kernel without capabilities still reads what root owns).
ETC = (
    "passwd", "group", "nsswitch.conf", "hosts", "localtime", "timezone", "ld.so.cache",
    "ld.so.conf", "ld.so.conf.d", "fonts", "ssl", "ca-certificates", "alternatives", "mime.types",
    "os-release", "matplotlibrc", f"python{sys.version_info.major}.{sys.version_info.minor}",
)  # fmt: skip
DEV_SHM_BYTES = 64 * 1024 * 1024
_BOX_OK: bool | None = None


def box_available() -> bool:
    """Whether bubblewrap builds the box here (cached; the environment variable
    ``ICL_GRADER_NO_BOX`` set to anything non-empty says no)."""
    global _BOX_OK
    if _BOX_OK is None:
        if shutil.which("bwrap") is None or os.environ.get("ICL_GRADER_NO_BOX"):
            _BOX_OK = False
        else:
            probe = ["bwrap", *BWRAP_FLAGS, "--ro-bind", "/", "/", "--proc", "/proc", "--dev",
                     "/dev", "--", "true"]  # fmt: skip
            try:
                r = subprocess.run(probe, capture_output=True, timeout=20, check=False)
                _BOX_OK = r.returncode == 0
            except (OSError, subprocess.SubprocessError):
                _BOX_OK = False
    return _BOX_OK


def _minimal_env(private: Path, token: str) -> dict[str, str]:
    """The kernel's whole environment: nothing of the grader's but the interpreter's location."""
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "HOME": str(private / "home"),
        "IPYTHONDIR": str(private / "ipython"),
        "MPLCONFIGDIR": str(private / "mpl"),
        "JUPYTER_CONFIG_DIR": str(private / "jupyter"),
        "JUPYTER_DATA_DIR": str(private / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(private / "jupyter"),
        "TMPDIR": str(private / "tmp"),
        "LANG": "C.UTF-8",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "ICL_GRADER_RUN": token,  # lets the grader find stray processes without the box
    }
    for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


@dataclass
class Kernel:
    """A started kernel: its manager, a blocking client, its private directory and launcher process."""

    manager: object
    client: object
    private: Path
    token: str
    boxed: bool
    cgroup: Path | None = None
    _killed: bool = field(default=False, repr=False)

    def interrupt(self) -> None:
        """Interrupt the running cell (an ``interrupt_request`` on the control channel)."""
        km = self.manager
        msg = km.session.msg("interrupt_request", content={})
        km._connect_control_socket()
        km.session.send(km._control_socket, msg)

    def alive(self) -> bool:
        return bool(self.manager.is_alive())

    def _launcher_pid(self) -> int | None:
        proc = getattr(getattr(self.manager, "provisioner", None), "process", None)
        return getattr(proc, "pid", None)

    def processes(self) -> list[int]:
        """The host's ids of the box's processes: the launcher and everything under it (in the box
        the kernel is the PID namespace's init, so an orphan stays under it)."""
        pid = self._launcher_pid()
        return [] if pid is None else sorted(_process_tree(pid))

    def cpu_seconds(self) -> float | None:
        """The CPU time (user and system, every thread) the box's processes have used so far, the
        children they waited for included; ``None`` where ``/proc`` does not tell it."""
        pid = self._launcher_pid()
        if pid is None:
            return None
        tree = _process_tree(pid)
        return None if not tree else sum(tree.values()) / _CLOCK_TICKS

    def kill(self) -> None:
        """Kill the kernel and everything it started; remove nothing (the caller owns ``private``)."""
        if self._killed:
            return
        self._killed = True
        try:
            self.client.stop_channels()
        except Exception:  # noqa: BLE001 - best effort
            pass
        proc = getattr(getattr(self.manager, "provisioner", None), "process", None)
        pid = getattr(proc, "pid", None)
        if pid is not None:
            for target in (
                lambda: os.killpg(pid, signal.SIGKILL),
                lambda: os.kill(pid, signal.SIGKILL),
            ):
                try:
                    target()
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                proc.wait(timeout=10)
            except Exception:  # noqa: BLE001
                pass
        if self.cgroup is not None:
            _kill_cgroup(self.cgroup)
        if not self.boxed:
            _kill_by_token(self.token)
        try:
            self.manager.cleanup_resources()
        except Exception:  # noqa: BLE001
            pass


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _process_tree(root: int) -> dict[int, int]:
    """``{pid: CPU clock ticks}`` of ``root`` and its descendants, from ``/proc/<pid>/stat``: user
    and system time of the process and of its children it has waited for (empty without /proc or
    when ``root`` is gone)."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                # the command name may hold spaces and parentheses: the fields start after the last ")"
                fields = fh.read().rsplit(b")", 1)[1].split()
            ppid, used = int(fields[1]), sum(int(f) for f in fields[11:15])
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
        children.setdefault(ppid, []).append(int(name))
        ticks[int(name)] = used
    if root not in ticks:
        return {}
    tree, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in ticks and pid not in tree:
            tree[pid] = ticks[pid]
            todo += children.get(pid, [])
    return tree


def _kill_by_token(token: str) -> None:
    """Without the box: kill every process whose environment carries the run's token."""
    needle = f"ICL_GRADER_RUN={token}".encode()
    for _ in range(3):
        found = False
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    os.kill(int(entry.name), signal.SIGKILL)
                    found = True
            except (OSError, ValueError):
                continue
        if not found:
            return
        time.sleep(0.1)


def _pids_cgroup(token: str, nproc: int | None) -> Path | None:
    """A fresh ``pids`` cgroup limited to ``nproc`` tasks, or ``None`` where the grader cannot make one."""
    if nproc is None or os.environ.get("ICL_GRADER_NO_CGROUP"):
        return None
    bases = [Path("/sys/fs/cgroup/pids")]  # cgroup v1
    try:  # cgroup v2: a child of our own cgroup, if the pids controller is delegated there
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                bases.append(Path("/sys/fs/cgroup") / line[3:].lstrip("/"))
    except OSError:
        pass
    for base in bases:
        group = base / f"icl-grader-{token}"
        try:
            if not (base / "cgroup.procs").exists():
                continue
            group.mkdir()
        except OSError:
            continue
        try:
            (group / "pids.max").write_text(f"{int(nproc)}\n")
            return group
        except OSError:
            try:
                group.rmdir()
            except OSError:
                pass
    return None


def _kill_cgroup(group: Path) -> None:
    """Kill every task of ``group`` (until none is left, so a forking one cannot escape) and remove it."""
    for _ in range(200):
        try:
            if (group / "cgroup.kill").exists():
                (group / "cgroup.kill").write_text("1\n")
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except OSError:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.05)


def _package_dir() -> Path | None:
    """The ``icl_book`` package's folder (what the kernel imports), without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("icl_book")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).resolve().parent


def _inside(path: Path, folder: Path) -> bool:
    return path != folder and folder in path.parents


def box_command(private: Path, keep, hidden) -> list[str]:
    """bubblewrap's command line for a kernel whose private directory is ``private``: the
    namespaces, then its file system, built on an empty root. ``keep``: folders bound read-only
    where they are (the interpreter, the environment, the package); ``hidden``: folders the kernel
    must not see, which matters only for one lying inside a kept folder (it is covered there by an
    empty read-only file system); everything else is simply not bound."""
    args = ["bwrap", *BWRAP_FLAGS]
    for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/", name)
        if path.is_symlink():  # merged /usr: /bin -> usr/bin
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += [
        "--ro-bind", "/sys", "/sys",
        "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys",
        "--dev", "/dev", "--perms", "1777", "--size", str(DEV_SHM_BYTES), "--tmpfs", "/dev/shm",
    ]  # fmt: skip
    for folder in keep:
        args += ["--ro-bind", str(folder), str(folder)]
    covered = [h for h in hidden if any(_inside(h, k) for k in keep)]
    for folder in covered:
        args += ["--tmpfs", str(folder)]
    args += ["--bind", str(private), str(private)]
    for folder in ("/", "/dev", *map(str, covered)):
        args += ["--remount-ro", folder]
    return [*args, "--chdir", str(private / "work"), "--"]


def _prlimit(limits: Limits) -> list[str]:
    """``prlimit``'s command line setting ``limits`` (soft and hard) on the kernel it starts."""
    mb = 1024 * 1024
    values = {
        "as": limits.memory_mb and limits.memory_mb * mb,
        "cpu": limits.cpu_s,
        "nproc": limits.nproc,
        "fsize": limits.file_mb and limits.file_mb * mb,
        "core": 0,
    }
    return ["prlimit", *(f"--{k}={int(v)}" for k, v in values.items() if v is not None), "--"]


def start_kernel(
    private: str | os.PathLike,
    limits: Limits | None = None,
    startup_timeout: float = 120,
    pythonpath=(),
    hide_dirs=(),
    *,
    no_sandbox: bool = False,
):
    """Start a boxed IPython kernel whose private directory is ``private`` (created, must be empty).

    Raises :class:`SandboxUnavailable` where the box cannot be built, unless ``no_sandbox`` (then
    the kernel runs with the limits only: the caller must say so loudly).

    ``pythonpath``: folders the kernel may import from besides the installed packages (e.g. a course's
    own helper modules); read-only inside the box. ``hide_dirs``: folders the kernel must not see
    (the submissions' folders): absent from the box like everything not bound, and covered where
    they lie inside a folder the kernel reads (the temporary directory, the clone and the grader's
    home are always treated so)."""
    from jupyter_client import KernelManager

    limits = limits or Limits()
    private = Path(private)
    for sub in ("home", "ipython", "mpl", "jupyter", "tmp", "work"):
        (private / sub).mkdir(parents=True, exist_ok=True)
    private = private.resolve()  # the box binds it where it really is
    token = secrets.token_hex(16)
    boxed = box_available()
    if not boxed and not no_sandbox:
        raise SandboxUnavailable(SANDBOX_MISSING)
    env = _minimal_env(private, token)
    if limits.threads is not None:  # kernels graded side by side must not oversubscribe the cores
        for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[key] = str(limits.threads)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    # What the kernel may read: the interpreter, the environment, the package and the course's own
    # modules. What it must not, even where one of those contains it: the temporary directory (the
    # other kernels' private folders), the clone (the instructor's solutions), the grader's home,
    # the submissions' folders.
    keep = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), _package_dir()]
    keep += [Path(p).resolve() for p in pythonpath]
    keep = [k for k in dict.fromkeys(keep) if k is not None and k.is_dir()]
    hidden = [
        Path(tempfile.gettempdir()),
        Path(__file__).resolve().parents[2],  # the clone booktools runs from
        Path.home(),
        *(Path(h) for h in hide_dirs),
    ]
    hidden = [h for h in dict.fromkeys(h.resolve() for h in hidden) if h not in keep]
    box = box_command(private, keep, hidden) if boxed else []
    kernel = [
        *_prlimit(limits),
        sys.executable,
        "-m",
        "ipykernel_launcher",
        "-f",
        "{connection_file}",
    ]

    cgroup = _pids_cgroup(token, limits.nproc)
    # the first process joins the cgroup before anything else runs, so all it starts counts there
    join = (
        ["/bin/sh", "-c", f'echo $$ > "{cgroup}/cgroup.procs" && exec "$@"', "icl-grader-join"]
        if cgroup is not None
        else []
    )
    # If the grader itself dies (SIGKILL, a closed terminal), its kernels die with it: the parent-death
    # signal survives exec, and bubblewrap's --die-with-parent passes it on to the box.
    orphan_guard = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []

    class _BoxedKernelManager(KernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            cmd = [*orphan_guard, *join, *box, *kernel]
            return [c.replace("{connection_file}", self.connection_file) for c in cmd]

    km = _BoxedKernelManager(
        transport="ipc", ip=str(private / "k"), connection_file=str(private / "kernel.json")
    )
    try:
        km.start_kernel(env=env, cwd=str(private / "work"))
    except BaseException:
        if cgroup is not None:
            _kill_cgroup(cgroup)
        raise
    kc = km.client()
    kc.start_channels()
    started = Kernel(km, kc, private, token, boxed, cgroup)
    try:
        kc.wait_for_ready(timeout=startup_timeout)
    except BaseException:
        started.kill()
        raise
    return started
