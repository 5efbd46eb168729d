"""The box one submission's kernel runs in (used by :mod:`booktools.grader`).

:func:`start_kernel` launches an IPython kernel for one submission:

- a private directory (its working directory, ``HOME``, ``IPYTHONDIR``, ``MPLCONFIGDIR``, ``TMPDIR``)
  that holds only the copy of that one submission and the kernel's connection file; a minimal
  environment (none of the grader's variables);
- where unprivileged Linux namespaces work (``unshare --user --pid --mount --net``): its own PID
  namespace (it sees no other process, so neither the grader's command line nor other kernels), no
  network, and every file system read-only except its private directory (nothing it writes can reach
  the grader, the package or the next submission); the kernel talks to the grader over Unix sockets
  in the private directory;
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

Run as a script, this module is the launcher inside the box: ``python grader_sandbox.py LIMITS.json
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

__all__ = ["Limits", "namespaces_available", "Kernel", "start_kernel"]


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
    """Whether unprivileged user, PID, mount and network namespaces work here (cached)."""
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


def start_kernel(
    private: str | os.PathLike,
    limits: Limits | None = None,
    startup_timeout: float = 120,
    pythonpath=(),
    hide_dirs=(),
):
    """Start a boxed IPython kernel whose private directory is ``private`` (created, must be empty).

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
    env = _minimal_env(private, token)
    if limits.threads is not None:  # kernels graded side by side must not oversubscribe the cores
        for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[key] = str(limits.threads)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    limits_file = private / "limits.json"
    keep = [Path(sys.prefix).resolve(), Path(__file__).resolve().parent.parent, private.resolve()]
    hide = []
    for folder in {Path(tempfile.gettempdir()).resolve(), *(Path(h).resolve() for h in hide_dirs)}:
        if (
            folder.is_dir()
            and folder != Path("/")
            and not any(k == folder or folder in k.parents for k in keep if k != private.resolve())
        ):
            hide.append(str(folder))
    limits_file.write_text(
        json.dumps(
            {
                **limits.__dict__,
                "private": str(private),
                "namespaced": namespaced,
                "hide": hide,
                "restore": [str(Path(p).resolve()) for p in pythonpath],
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
    import resource

    cfg = json.loads(Path(limits_file).read_text())
    private = cfg["private"]
    if cfg.get("namespaced"):
        # Hide the temporary directory and the folders the submissions came from behind empty
        # tmpfs mounts, put the private directory back in place (through a descriptor opened
        # before), then make every mount read-only but the private directory; /proc, /dev and /sys
        # are the namespace's own.
        restore = [private, *cfg.get("restore", [])]
        fds = [os.open(d, os.O_RDONLY | os.O_DIRECTORY) for d in restore]
        for folder in cfg.get("hide", []):
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=1m,mode=755", "tmpfs", folder],
                check=False, capture_output=True,
            )  # fmt: skip
        for folder, fd in zip(restore, fds, strict=True):
            if folder == private or not os.path.isdir(folder):
                os.makedirs(folder, exist_ok=True)
                _bind(f"/proc/self/fd/{fd}", folder)  # the descriptor, not the (now hidden) path
            os.close(fd)
        os.chdir(os.path.join(private, "work"))
        mounts = sorted(
            {line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()}
        )
        for mp in mounts:
            if mp == private or mp.startswith(("/proc", "/dev", "/sys")):
                continue
            subprocess.run(["mount", "-o", "remount,bind,ro", mp], check=False, capture_output=True)
    else:
        os.setsid()  # own session and process group, killed with killpg
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
