"""The box one submission's kernel runs in (used by :mod:`booktools.grading.grader`).

:func:`start_kernel` launches an IPython kernel for one submission:

- a private directory (its working directory, ``HOME``, ``IPYTHONDIR``, ``MPLCONFIGDIR``, ``TMPDIR``)
  that holds only the copy of that one submission and the kernel's connection file; a minimal
  environment (none of the grader's variables);
- unprivileged Linux namespaces (``unshare --user --pid --mount --net``): its own PID namespace (it
  sees no other process, so neither the grader's command line nor other kernels), no network, every
  top-level folder but the system's (``/usr``, ``/etc``, ``/lib``, ...) hidden behind an empty tmpfs
  (``/tmp`` with the other kernels' folders, ``/home``, ``/root``, ``/var``, ``/run``, the clone with
  the instructor's solutions, the submissions' folders, wherever they are), the interpreter, the
  environment and the package put back read-only, a private ``/dev/shm``, and every file system
  read-only except its private directory (nothing it writes can reach the grader, the package or the
  next submission); the kernel talks to the grader over Unix sockets in the private directory. Where
  namespaces do not work, :func:`start_kernel` raises :class:`SandboxUnavailable` unless told
  ``no_sandbox`` (then only the limits and the private working directory remain);
- limits: address space (``RLIMIT_AS``), CPU time (``RLIMIT_CPU``), file size (``RLIMIT_FSIZE``), no
  core files, and a process count of its own: where the grader may create a ``pids`` cgroup (cgroup
  v1 ``/sys/fs/cgroup/pids`` or a delegated v2 subtree, e.g. when grading as root in a container),
  each kernel gets one with ``pids.max = nproc`` (a fork bomb fails with ``EAGAIN`` there and starves
  nothing else); otherwise ``RLIMIT_NPROC``, which Linux counts per user *within the kernel's user
  namespace* (so it limits that one submission) but does not enforce at all for the real root user;
- in its own session and process group; :meth:`Kernel.kill` kills the namespace (or, without
  namespaces, the process group and every process carrying the run's token), so nothing outlives it;
  a parent-death signal (``setpriv --pdeathsig``) kills the box even when the grader is killed first.

This is a box against a curious student, not a security boundary against a determined attacker (the
kernel runs as the grader's user): grade untrusted work in a container or VM without credentials.

Run as a script, this module is the launcher inside the box: ``python sandbox.py LIMITS.json
-- KERNEL ARGV...`` makes the mounts read-only, sets the limits, then ``exec``s the kernel.
"""

from __future__ import annotations

import json
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

__all__ = ["Limits", "SandboxUnavailable", "namespaces_available", "Kernel", "start_kernel"]


class SandboxUnavailable(RuntimeError):
    """The box cannot be built here (no unprivileged user namespaces, ``ICL_GRADER_NO_NAMESPACES``
    set, or no ``unshare``): the grader refuses to run unless told ``no_sandbox`` explicitly."""


SANDBOX_MISSING = (
    "the grader's sandbox cannot be built here (unprivileged user namespaces do not work, "
    "ICL_GRADER_NO_NAMESPACES is set, or unshare is missing): refusing to grade. Grade in a "
    "container or VM where `unshare --user --map-root-user --pid --fork --mount --net true` works "
    "(Docker's default seccomp profile blocks it: e.g. `docker run --security-opt seccomp=unconfined`), "
    "or pass --no-sandbox to grade without the box"
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


_UNSHARE = [
    "unshare",
    "--user",
    "--map-root-user",
    "--pid",
    "--fork",
    "--mount",
    "--mount-proc",
    "--net",
    "--kill-child",
]
_NS_OK: bool | None = None


def namespaces_available() -> bool:
    """Whether unprivileged user, PID, mount and network namespaces work here (cached; the
    environment variable ``ICL_GRADER_NO_NAMESPACES`` set to anything non-empty says no)."""
    global _NS_OK
    if _NS_OK is None:
        if shutil.which("unshare") is None or os.environ.get("ICL_GRADER_NO_NAMESPACES"):
            _NS_OK = False
        else:
            try:
                r = subprocess.run(
                    [*_UNSHARE, "--", "true"], capture_output=True, timeout=20, check=False
                )
                _NS_OK = r.returncode == 0
            except (OSError, subprocess.SubprocessError):
                _NS_OK = False
    return _NS_OK


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
        "ICL_GRADER_RUN": token,  # lets the grader find stray processes without namespaces
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
    namespaced: bool
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
        if not self.namespaced:
            _kill_by_token(self.token)
        try:
            self.manager.cleanup_resources()
        except Exception:  # noqa: BLE001
            pass


def _kill_by_token(token: str) -> None:
    """Without namespaces: kill every process whose environment carries the run's token."""
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


# Top-level folders the kernel sees (read-only): the system's programs, libraries and configuration
# (fonts, certificates, the loader's cache). Every other top-level folder (/home, /root, /tmp, /var,
# /run, /opt, /srv, /mnt, a /work holding the clone, ...) is hidden; the interpreter, the environment
# and the package are put back wherever they live.
SYSTEM_DIRS = frozenset(
    {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "sys"}
)


def _top_level() -> list[Path]:
    try:
        return [e for e in Path("/").iterdir() if e.is_dir() and not e.is_symlink()]
    except OSError:
        return []


def _package_dir() -> Path | None:
    """The ``icl_book`` package's folder (what the kernel imports), without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("icl_book")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).resolve().parent


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

    Raises :class:`SandboxUnavailable` where namespaces do not work, unless ``no_sandbox`` (then the
    kernel runs with the limits only: the caller must say so loudly).

    ``pythonpath``: folders the kernel may import from besides the installed packages (e.g. a course's
    own helper modules); read-only inside the box. ``hide_dirs``: folders the kernel must not see
    (the submissions' folders; the temporary directory is always hidden), each replaced by an empty
    file system inside the box unless it holds the interpreter or the package."""
    from jupyter_client import KernelManager

    limits = limits or Limits()
    private = Path(private)
    for sub in ("home", "ipython", "mpl", "jupyter", "tmp", "work"):
        (private / sub).mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    namespaced = namespaces_available()
    if not namespaced and not no_sandbox:
        raise SandboxUnavailable(SANDBOX_MISSING)
    env = _minimal_env(private, token)
    if limits.threads is not None:  # kernels graded side by side must not oversubscribe the cores
        for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[key] = str(limits.threads)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    limits_file = private / "limits.json"
    private_real = private.resolve()
    # What the kernel may read (read-only): the interpreter, the environment, the package and the
    # course's own modules. Everything else the kernel could use to reach another student or the
    # instructor is hidden behind an empty tmpfs, whatever contains what (the clone or the venv may
    # live under /tmp): the temporary directory (the other kernels' private folders), the clone (the
    # instructor's solutions), the grader's home, the submissions' folders; /dev/shm is a private
    # tmpfs of its own.
    keep = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), _package_dir()]
    keep += [Path(p).resolve() for p in pythonpath]
    keep = [k for k in dict.fromkeys(keep) if k is not None and k.is_dir()]
    candidates = [
        *(e for e in _top_level() if e.name not in SYSTEM_DIRS),
        Path(tempfile.gettempdir()),
        Path(__file__).resolve().parents[2],  # the clone booktools runs from
        Path.home(),
        *(Path(h) for h in hide_dirs),
    ]
    hide = []
    for folder in dict.fromkeys(c.resolve() for c in candidates if c.is_dir()):
        # a kept folder inside a hidden one is put back, a hidden one inside a kept one hidden again
        if folder.is_dir() and folder not in (Path("/"), private_real, *keep):
            hide.append(str(folder))
    limits_file.write_text(
        json.dumps(
            {
                **limits.__dict__,
                "private": str(private_real),
                "namespaced": namespaced,
                "hide": hide,
                "restore": [str(k) for k in keep],
            }
        )
    )
    launcher = [sys.executable, "-I", str(Path(__file__).resolve()), str(limits_file), "--"]
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]

    cgroup = _pids_cgroup(token, limits.nproc)
    # the first process joins the cgroup before anything else runs, so all it starts counts there
    join = (
        ["/bin/sh", "-c", f'echo $$ > "{cgroup}/cgroup.procs" && exec "$@"', "icl-grader-join"]
        if cgroup is not None
        else []
    )

    # If the grader itself dies (SIGKILL, a closed terminal), its kernels die with it: the parent-death
    # signal survives exec, and unshare's --kill-child passes it on to the namespace's first process.
    orphan_guard = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []

    class _BoxedKernelManager(KernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            box = [*join, *(_UNSHARE + ["--"] if namespaced else []), *launcher, *kernel]
            cmd = [*orphan_guard, *box]
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
    box = Kernel(km, kc, private, token, namespaced, cgroup)
    try:
        kc.wait_for_ready(timeout=startup_timeout)
    except BaseException:
        box.kill()
        raise
    return box


# --------------------------------------------------------------------------------------------------
# Inside the box
# --------------------------------------------------------------------------------------------------
def _bind(source: str, target: str) -> None:
    """``mount --bind`` through the system call (mount(8) would resolve a /proc/self/fd link to the
    path it once had)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    ms_bind, ms_rec = 4096, 16384
    if libc.mount(source.encode(), target.encode(), None, ms_bind | ms_rec, None) != 0:
        raise OSError(ctypes.get_errno(), f"bind mount of {target} failed")


def _inside(limits_file: str, argv: list[str]) -> None:
    import ctypes  # noqa: F401 - imported now: the standard library may be hidden while it mounts
    import resource

    cfg = json.loads(Path(limits_file).read_text())
    private = cfg["private"]
    if cfg.get("namespaced"):
        # Hide the temporary directory, the clone, the grader's home and the folders the
        # submissions came from behind empty tmpfs mounts; put back what the kernel needs (the
        # interpreter, the environment, the package: through descriptors opened before), hide again
        # what lies inside those, put the private directory back last, give /dev/shm a private
        # tmpfs, then make every mount read-only but the private directory and /dev/shm; /proc and
        # /sys are the namespace's own.
        keep = [k for k in cfg.get("restore", []) if os.path.isdir(k)]
        fds = {d: os.open(d, os.O_RDONLY | os.O_DIRECTORY) for d in [private, *keep]}
        hide = cfg.get("hide", [])

        def tmpfs(folder: str, options: str = "size=1m,mode=755") -> None:
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", options, "tmpfs", folder],
                check=False, capture_output=True,
            )  # fmt: skip

        def inside(path: str, folder: str) -> bool:
            return path != folder and path.startswith(folder.rstrip("/") + "/")

        for folder in hide:
            tmpfs(folder)
        restored = []
        for folder in keep:
            if not os.path.isdir(folder) or any(inside(folder, h) for h in hide):
                os.makedirs(folder, exist_ok=True)
                _bind(f"/proc/self/fd/{fds[folder]}", folder)  # the descriptor, not the path
                restored.append(folder)
        for (
            folder
        ) in hide:  # e.g. the submissions' folder inside the clone, under the venv's parent
            if any(inside(folder, k) for k in restored) and os.path.isdir(folder):
                tmpfs(folder)
        os.makedirs(private, exist_ok=True)
        _bind(f"/proc/self/fd/{fds[private]}", private)
        for fd in fds.values():
            os.close(fd)
        if os.path.isdir("/dev/shm"):
            tmpfs("/dev/shm", "size=64m,mode=1777,nosuid,nodev")
        os.chdir(os.path.join(private, "work"))
        mounts = sorted(
            {line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()}
        )
        for mp in mounts:
            if mp == private or mp == "/dev/shm" or mp.startswith(("/proc", "/dev", "/sys")):
                continue
            subprocess.run(["mount", "-o", "remount,bind,ro", mp], check=False, capture_output=True)
    elif os.getsid(0) != os.getpid():
        # own session and process group, killed with killpg (jupyter_client usually starts the
        # launcher in a new session already: setsid() would then fail with EPERM)
        os.setsid()
    os.unlink(limits_file)

    def cap(which, value):
        if value is not None:
            resource.setrlimit(which, (int(value), int(value)))

    mb = 1024 * 1024
    cap(resource.RLIMIT_AS, cfg["memory_mb"] and cfg["memory_mb"] * mb)
    cap(resource.RLIMIT_CPU, cfg["cpu_s"])
    cap(resource.RLIMIT_NPROC, cfg["nproc"])
    cap(resource.RLIMIT_FSIZE, cfg["file_mb"] and cfg["file_mb"] * mb)
    cap(resource.RLIMIT_CORE, 0)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    sep = sys.argv.index("--")
    _inside(sys.argv[1], sys.argv[sep + 1 :])
