"""One student's code in a bubblewrap sandbox, driven from outside. Trusted side.

The sandbox (``bwrap``) has its own user, PID, network, IPC, UTS and mount namespaces. It sees the
system (``/usr``), the Python installation and the virtual environment read-only, a fresh ``/proc``,
a small private ``/tmp`` and one writable folder, ``/sandbox``, that holds only this student's cells
and the worker (``worker.py``, ``wire.py``). Nothing of the repository, the assignments, the grader's
output, the other submissions or the network. ``--die-with-parent`` and the PID namespace end every
process the submission started (daemons included) when the worker ends or is killed. Resource limits
(``setrlimit``) cap memory, CPU time, file size and open files, and a pids cgroup (or RLIMIT_NPROC,
see :func:`process_limit`) the number of processes; the harness enforces the wall-clock limits and
keeps only the first bytes of the output.

:class:`Worker` starts one sandboxed worker and exchanges frames with it over two pipes, every read
bounded by a deadline. Without user namespaces there is no sandbox: :func:`sandbox_problem` says why,
and the grader refuses untrusted submissions unless the teacher passes ``--unsafe``.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import wire

HERE = Path(__file__).resolve().parent
INSIDE = "/sandbox"  # the private folder's path inside the sandbox


@dataclass(frozen=True)
class Limits:
    """What one submission may use. Times in seconds, sizes in bytes."""

    cell_seconds: float = 60.0  # one cell of the student's, or one call of a test
    total_seconds: float = 600.0  # everything, restarts included
    memory_bytes: int = 6 * 2**30  # address space (PyTorch alone maps about 1.5 GiB)
    processes: int = 64  # threads count too
    file_bytes: int = 64 * 2**20  # the largest file it may write
    tmp_bytes: int = 128 * 2**20  # its private /tmp (kept in memory)
    output_bytes: int = 64 * 2**10  # printed output kept for the feedback (the rest is counted, dropped)
    open_files: int = 256


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _system_binds() -> list[str]:
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
                "/etc/localtime"):
        if os.path.exists(etc):
            args += ["--ro-bind", etc, etc]
    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent.parent}
    for prefix in sorted(prefixes):
        if not str(prefix).startswith("/usr"):
            args += ["--ro-bind", str(prefix), str(prefix)]
    if Path(sys.prefix) != Path(sys.prefix).resolve():  # a venv reached through a symbolic link
        args += ["--ro-bind", sys.prefix, sys.prefix]
    return args


def bwrap_argv(workdir: Path, limits: Limits) -> list[str]:
    """The bubblewrap command line that runs a program with ``workdir`` as ``/sandbox``."""
    return [bwrap_path() or "bwrap",
            "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
            # /tmp first: the Python environment may live under /tmp, and its bind must sit on top
            "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev",
            *_system_binds(),
            "--bind", str(workdir), INSIDE, "--remount-ro", "/", "--chdir", INSIDE,
            "--clearenv", "--setenv", "HOME", INSIDE, "--setenv", "PATH", "/usr/bin:/bin",
            "--setenv", "OMP_NUM_THREADS", "1", "--setenv", "MKL_NUM_THREADS", "1",
            "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--setenv", "MPLCONFIGDIR", "/tmp",
            "--setenv", "TMPDIR", "/tmp", "--"]


PIDS_V1 = Path("/sys/fs/cgroup/pids")  # the cgroup-v1 pids hierarchy, where the grader may write it (root)


def process_limit() -> str:
    """How the number of processes is capped here: ``"cgroup"`` (a pids cgroup per sandbox, exact),
    ``"rlimit"`` (RLIMIT_NPROC over this user's current tasks; the kernel ignores it for root) or
    ``"none"`` (root without a writable pids cgroup: only the memory and time limits bound a fork bomb)."""
    if PIDS_V1.is_dir() and os.access(PIDS_V1, os.W_OK) and (PIDS_V1 / "cgroup.procs").exists():
        return "cgroup"
    return "none" if os.geteuid() == 0 else "rlimit"


def _user_tasks() -> int:
    """Threads and processes of this user now (RLIMIT_NPROC counts them all)."""
    uid, count = os.getuid(), 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(entry / "task"))
            except OSError:
                pass
    return count


def _set_limits(limits: Limits, cgroup: Path | None):
    nproc = _user_tasks() + limits.processes if process_limit() == "rlimit" else None

    def apply() -> None:
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text("0")  # this process, then bwrap and all it starts
        cpu = int(limits.total_seconds) + 5
        for name, value in ((resource.RLIMIT_AS, limits.memory_bytes), (resource.RLIMIT_CPU, cpu),
                            (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_NOFILE, limits.open_files),
                            (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(name, (value, value))
        if nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    return apply


def _new_cgroup(limits: Limits) -> Path | None:
    if process_limit() != "cgroup":
        return None
    import uuid  # noqa: PLC0415

    cgroup = PIDS_V1 / f"attn-grade-{uuid.uuid4().hex[:12]}"
    cgroup.mkdir()
    (cgroup / "pids.max").write_text(str(limits.processes))
    return cgroup


_PROBE: dict[str, str | None] = {}


def sandbox_problem() -> str | None:
    """Why submissions cannot be sandboxed here (None: they can). Runs ``bwrap`` once."""
    if "answer" in _PROBE:
        return _PROBE["answer"]
    answer = None
    if bwrap_path() is None:
        answer = ("bubblewrap (`bwrap`) is not installed: install the Debian/Ubuntu package `bubblewrap` "
                  "(apt-get install bubblewrap) or your distribution's")
    else:
        probe = Path(os.environ.get("TMPDIR", "/tmp"))
        run = subprocess.run([*bwrap_argv(probe, Limits()), sys.executable, "-I", "-c", "print('ok')"],
                             capture_output=True, text=True, timeout=60)
        if run.returncode != 0 or run.stdout.strip() != "ok":
            answer = ("bubblewrap cannot create its namespaces here "
                      f"({(run.stderr or run.stdout).strip()[:300] or 'exit code ' + str(run.returncode)}): "
                      "unprivileged user namespaces must be enabled (sysctl kernel.unprivileged_userns_clone=1, "
                      "and on Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0), or, inside a "
                      "container, the container must allow them")
    _PROBE["answer"] = answer
    return answer


def peak_memory_mib() -> float:
    """This process's peak resident memory (VmHWM; ``ru_maxrss`` would count the parent's memory too
    when this process was forked from a large one before its exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class WorkerDied(RuntimeError):
    """The sandboxed process ended (or broke the protocol) while the harness waited for it."""


class Timeout(RuntimeError):
    """The sandboxed process did not answer within its time."""


class Output:
    """Drains a pipe in a thread, keeping the first ``keep`` bytes and counting the rest."""

    def __init__(self, fd: int, keep: int):
        self.fd, self.keep = fd, keep
        self.kept = bytearray()
        self.total = 0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 2**16)
            except OSError:
                break
            if not chunk:
                break
            self.total += len(chunk)
            if len(self.kept) < self.keep:
                self.kept += chunk[: self.keep - len(self.kept)]
        os.close(self.fd)

    def text(self) -> str:
        text = self.kept.decode("utf-8", "replace")
        if self.total > len(self.kept):
            text += f"\n[... {self.total - len(self.kept):,} more bytes of output dropped]"
        return text


class Worker:
    """One sandboxed worker process running a student's cells, then answering calls."""

    def __init__(self, workdir: Path, limits: Limits, unsafe: bool, skip: set[str], deadline: float):
        (workdir / "skip.json").write_text(json.dumps(sorted(skip)))
        req_r, self.req_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        out_r, out_w = os.pipe()
        base = workdir if unsafe else Path(INSIDE)
        program = [sys.executable, "-I", "-B", str(base / "worker.py"), str(base / "cells.json"),
                   str(req_r), str(resp_w), str(base / "skip.json")]
        argv = program if unsafe else [*bwrap_argv(workdir, limits), *program]
        self.cgroup = _new_cgroup(limits)
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w,
                                        pass_fds=(req_r, resp_w), preexec_fn=_set_limits(limits, self.cgroup),
                                        start_new_session=True, cwd=workdir,
                                        env=None if not unsafe else {"PATH": "/usr/bin:/bin", "HOME": str(workdir),
                                                                     "OMP_NUM_THREADS": "1"})
        for fd in (req_r, resp_w, out_w):
            os.close(fd)
        self.output = Output(out_r, limits.output_bytes)
        self.deadline = deadline
        self.alive = True

    # -- reading with a deadline -----------------------------------------------------------------
    def _read(self, size: int, until: float) -> bytes:
        chunks, left = [], size
        while left:
            wait = min(until, self.deadline) - time.monotonic()
            if wait <= 0:
                raise Timeout()
            ready, _, _ = select.select([self.resp_r], [], [], wait)
            if not ready:
                continue
            chunk = os.read(self.resp_r, min(left, 2**20))
            if not chunk:
                raise WorkerDied(self._exit_reason())
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def receive(self, until: float) -> tuple[dict, object]:
        try:
            (size,) = struct.unpack(">Q", self._read(8, until))
            if size > wire.MAX_FRAME + 2**16:
                raise WorkerDied(f"the submission sent a message of {size / 2**20:.0f} MiB, more than the "
                                 f"{wire.MAX_FRAME / 2**20:.0f} MiB accepted")
            return wire.parse(self._read(size, until))
        except wire.WireError as error:
            raise WorkerDied(f"the submission broke the grader's protocol: {error}") from None

    def send(self, message: bytes) -> None:
        try:
            wire.send(self.req_w, message)
        except OSError:
            raise WorkerDied(self._exit_reason()) from None

    def _exit_reason(self) -> str:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the submission's process stopped answering"
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            why = {"SIGXCPU": " (its CPU time limit)", "SIGKILL": " (killed: memory or a time limit)",
                   "SIGXFSZ": " (it wrote a file larger than the limit)"}.get(name, "")
            return f"the submission's process was ended by {name}{why}"
        return f"the submission's process exited with code {code}"

    def kill(self) -> None:
        if self.alive:
            self.alive = False
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for fd in (self.req_w, self.resp_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.output.thread.join(timeout=2)
            if self.cgroup is not None:
                for _ in range(50):  # the PID namespace is ending: wait for its last processes
                    try:
                        self.cgroup.rmdir()
                        break
                    except OSError:
                        time.sleep(0.1)
