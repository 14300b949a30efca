"""The supervisor: one small process per graded kernel that owns every process the kernel starts.

The grader never starts a learner's kernel itself. It starts ``python -m
course_utils.grading.supervise`` and writes one line of JSON to its stdin (the command, folder,
environment, limits); the supervisor then

1. makes itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): a process the kernel starts
   that detaches itself (double fork, ``setsid``, ``start_new_session=True``) is re-parented to
   the supervisor instead of to init, so it stays in the supervisor's process tree and cannot
   outlive the grade;
2. makes itself non-dumpable (``PR_SET_DUMPABLE`` 0), so that a process of the same user cannot
   open ``/proc/<supervisor>/fd/1`` and write fake status lines to the grader;
3. starts the kernel in a new session, with resource limits (CPU seconds, open files, file size,
   no core files, a process count), stdin from ``/dev/null`` and stdout/stderr to a pipe of its
   own that the supervisor drains into a log file of at most ``LOG_BYTES`` (``Log``; the kernel
   never holds a pipe of the grader's), and with every other descriptor closed;
4. watches the memory of the whole tree (resident set size, summed, plus the memory-backed
   files it holds open: memfd, ``/dev/shm``, plus what the sandbox's tmpfs holds: its ``/tmp``,
   working folder and sockets) and the disk used by the kernel's folder on the grader's side
   (its log; without the sandbox also its working folder and ``/tmp``), and kills the tree past
   either limit; and reports on its stdout, one line each: ``started <pid>``, ``root <pid>``
   (a process in the sandbox, whose ``/proc/<pid>/root`` reaches the kernel's sockets),
   ``cgroup <folder>``, ``exited <code>``, ``memory <bytes>``, ``cpu <seconds>``, ``hidden``,
   ``disk <bytes>``, ``cleaned <n>``;
5. holds the tree to its share of the processors (``cpus``): a cgroup's ``cpu.max`` (v2) or
   CFS quota (v1) where one can be made, else ``Throttle``, which stops the whole tree
   (``SIGSTOP``) while it is over its share and lets it go on (``SIGCONT``) once it is back
   under. Either holds however many processes, sessions or threads the kernel starts, so a
   kernel that starts 12 busy processes slows only itself, not the kernel graded beside it.

The process limit (``RLIMIT_NPROC``) does not bind root. Run as root, the supervisor puts the
kernel in cgroups of its own (v1 or v2, where the controllers are writable): ``pids.max``, so
that a fork bomb meets the limit before it meets the machine's, and a memory limit, which also
counts memory in no process's resident set (memfd, shared memory, tmpfs pages). Without a
memory cgroup (a normal user), the watchdog counts the memory-backed files the tree holds open;
memory hidden further (a file mapped and closed) is not seen, and the sandbox's private ``/tmp``
lives on the grader's disk, under ``--disk``.

It stops when its stdin closes (the grader is done, or died: ``PR_SET_PDEATHSIG`` also sends it
SIGTERM), or when the kernel exits; either way it first kills every process in its tree (stop
them all, then kill, until none is left) and only then exits, so that when the grader sees the
supervisor gone, nothing the submission started is still running.

Run only by ``supervisor_link.py``; it imports nothing but the standard library and psutil, to
start fast.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import psutil

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.1
#: The most the kernel's log (what it and its processes write to stdout and stderr outside
#: Jupyter's messages) holds on the grader's disk; past it the log keeps a note and its last
#: ``LOG_TAIL`` bytes (the grader reads only the end, when a kernel dies).
LOG_BYTES = 2**20
LOG_TAIL = 2**16


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux: the tree is still killed, less reliably
        return False


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


#: The period of a cgroup's CPU quota (microseconds), and how far (in ticks of the tree's share)
#: the throttle lets the tree run ahead before it stops it.
CPU_PERIOD_US = 100_000
THROTTLE_BURST = 2


def _settings(controller: str, v2: bool, limit: int) -> list[tuple[str, str, bool]]:
    """(file, value, required) to write into a kernel's cgroup for one controller (for ``cpu``,
    ``limit`` is the quota in microseconds per ``CPU_PERIOD_US``)."""
    if controller == "cpu":
        if v2:
            return [("cpu.max", f"{limit} {CPU_PERIOD_US}", True)]
        return [("cpu.cfs_period_us", str(CPU_PERIOD_US), True),
                ("cpu.cfs_quota_us", str(limit), True)]
    if controller == "pids":
        return [("pids.max", str(limit), True)]
    if v2:  # no swap either: memory pushed to swap would be memory no limit sees
        return [("memory.max", str(limit), True), ("memory.swap.max", "0", False)]
    return [("memory.limit_in_bytes", str(limit), True),
            ("memory.memsw.limit_in_bytes", str(limit), False)]


def make_cgroups(name: str, processes: int | None, memory: int | None,
                 cpus: float | None = None) -> list[str]:
    """New cgroups for a kernel, with ``pids.max = processes`` (root only: RLIMIT_NPROC does not
    bind root), a memory limit of ``memory`` bytes and a CPU quota of ``cpus`` processors,
    where a writable controller exists (cgroup v1 or v2; in practice, for root). The memory
    controller counts what no process's resident set shows: memfd files, shared memory, tmpfs
    pages; past the limit the kernel of Linux kills a process of the cgroup. Returns the
    cgroups' folders (one per hierarchy)."""
    wanted = {"pids": processes if os.geteuid() == 0 else None, "memory": memory,
              "cpu": round(cpus * CPU_PERIOD_US) if cpus else None}
    wanted = {c: int(v) for c, v in wanted.items() if v}
    if not wanted or os.geteuid() != 0:
        return []
    try:
        with open("/proc/self/cgroup") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return []
    made: list[str] = []
    done: set[str] = set()
    for hierarchy, controllers, path in lines:
        for m in mounts:
            sep = m.index("-") if "-" in m else -1
            fstype, options = m[sep + 1], m[-1].split(",")
            v2 = fstype == "cgroup2" and hierarchy == "0" and not controllers
            if v2:
                todo = [c for c in wanted if c not in done]
            elif fstype == "cgroup":
                todo = [c for c in wanted if c not in done and c in controllers.split(",")
                        and c in options]
            else:
                continue
            if not todo:
                continue
            root = m[3].rstrip("/")  # the mount's root within the hierarchy (containers)
            relative = path[len(root):] if root and path.startswith(root) else path
            base = os.path.join(m[4], relative.lstrip("/"))
            folder = os.path.join(base, name)
            if v2:
                try:
                    with open(os.path.join(base, "cgroup.controllers")) as f:
                        offered = f.read().split()
                except OSError:
                    continue
                todo = [c for c in todo if c in offered]
                for c in list(todo):
                    try:
                        _write(os.path.join(base, "cgroup.subtree_control"), f"+{c}")
                    except OSError:
                        todo.remove(c)
            if not todo:
                continue
            try:
                os.mkdir(folder)
            except OSError:
                continue
            applied = []
            for c in todo:
                try:
                    for file, value, required in _settings(c, v2, wanted[c]):
                        try:
                            _write(os.path.join(folder, file), value)
                        except OSError:
                            if required:
                                raise
                    applied.append(c)
                except OSError:
                    continue
            if applied:
                done.update(applied)
                made.append(folder)
            else:
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
    return made


def address_space(memory: int) -> int | None:
    """``RLIMIT_AS`` for each process where there is no memory cgroup: room for the frameworks'
    reservations (numpy, torch, TensorFlow, JAX and onnxruntime together reserve about 3 GiB of
    address space for 1 GiB resident), so that memory mapped past the limit still fails. None
    on a machine with NVIDIA GPUs, whose driver reserves far more address space than memory."""
    if glob.glob("/dev/nvidia[0-9]*"):
        return None
    return max(2 * memory, memory + 4 * 2**30)


def oom_kills(folders: list[str]) -> int:
    """How many processes the memory limit of these cgroups killed (v2 ``memory.events``, v1
    ``memory.oom_control``; 0 where neither is there)."""
    n = 0
    for folder in folders:
        for file in ("memory.events", "memory.oom_control"):
            try:
                with open(os.path.join(folder, file)) as f:
                    for line in f:
                        key, _, value = line.partition(" ")
                        if key == "oom_kill" and value.strip().isdigit():
                            n += int(value)
            except OSError:
                continue
    return n


def cgroup_peak(folders: list[str]) -> int:
    """The most memory these cgroups held (bytes), or 0."""
    for folder in folders:
        for file in ("memory.peak", "memory.max_usage_in_bytes"):
            try:
                with open(os.path.join(folder, file)) as f:
                    return int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return 0


class Log:
    """The kernel's stdout and stderr: a pipe the supervisor drains into the log file, which
    never holds more than ``limit`` bytes. Written to directly, the file grew as fast as the
    kernel printed from C or from a process it started, up to ``RLIMIT_FSIZE`` (1 GiB) before
    the once-a-second disk watch looked: a kernel could fill the disk the grader writes to."""

    def __init__(self, path: str, limit: int = LOG_BYTES, tail: int = LOG_TAIL) -> None:
        self.file = open(path, "w+b", buffering=0)  # noqa: SIM115 (open while the kernel runs)
        self.limit, self.tail, self.size, self.dropped = limit, tail, 0, 0
        self.read_fd, self.write_fd = os.pipe()  # the kernel's end is closed here once started
        os.set_blocking(self.read_fd, False)
        self.open = True

    def drain(self, most: int = 2**22) -> None:
        """Move what the pipe holds (at most ``most`` bytes at a time) into the file."""
        got = 0
        while self.open and got < most:
            try:
                chunk = os.read(self.read_fd, 2**16)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:  # every writer is gone
                self.open = False
                os.close(self.read_fd)
                return
            got += len(chunk)
            self._append(chunk)

    def _append(self, chunk: bytes) -> None:
        if self.size + len(chunk) <= self.limit:
            self.file.write(chunk)
            self.size += len(chunk)
            return
        self.file.seek(max(0, self.size - self.tail))
        kept = (self.file.read() + chunk)[-self.tail:]
        self.dropped += self.size + len(chunk) - len(kept)
        note = (f"[course-grade: {self.dropped} bytes of the kernel's output dropped here; its "
                f"log keeps at most {self.limit} bytes]\n").encode()
        self.file.seek(0)
        self.file.truncate()
        self.file.write(note + kept)
        self.size = len(note) + len(kept)

    def close(self) -> None:
        self.drain(most=self.limit)
        if self.open:
            os.close(self.read_fd)
            self.open = False
        self.file.close()


def _limits(config: dict, cgroups: list[str]) -> Callable[[], None]:
    """The function the child runs before exec: its own session, its cgroups and the resource
    limits."""
    limits = config.get("limits", {})

    def apply() -> None:
        os.setsid()
        for folder in cgroups:
            with contextlib.suppress(OSError), open(os.path.join(folder, "cgroup.procs"),
                                                    "w") as f:
                f.write(str(os.getpid()))
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the kernel dies if the supervisor is killed
        for name, value in limits.items():
            kind = getattr(resource, f"RLIMIT_{name.upper()}", None)
            if kind is None or value is None:
                continue
            _, hard = resource.getrlimit(kind)
            soft = int(value)
            # CPU: SIGXCPU at the soft limit (a clean death), SIGKILL 5 s later.
            wanted = soft + 5 if name == "cpu" else soft
            if hard != resource.RLIM_INFINITY:
                soft, wanted = min(soft, hard), min(wanted, hard)
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(kind, (soft, wanted))
        if config.get("seccomp") and not config.get("sandbox_tmp"):
            install_ipc_filter(bytes.fromhex(config["seccomp"]))

    return apply


def has_cpu_quota(folders: list[str]) -> bool:
    return any(os.path.exists(os.path.join(c, f)) for c in folders
               for f in ("cpu.max", "cpu.cfs_quota_us"))


class Throttle:
    """A CPU quota for a process tree where no cgroup can hold one (a normal user): each tick,
    the CPU time the tree used since the last (every process, however detached) is taken from
    a credit that grows by ``cpus`` seconds per second; below zero the whole tree is stopped
    (``SIGSTOP``, which no process can catch) until the credit is back, then continued. Over a
    second the tree uses at most about ``cpus`` processors, whatever it starts; the kernel
    graded beside it gets the rest."""

    def __init__(self, cpus: float) -> None:
        self.cpus = cpus
        self.credit = cpus * THROTTLE_BURST * POLL_S
        self.seen: dict[int, float] = {}
        self.last = time.monotonic()
        self.stopped = False

    def tick(self, procs: list[psutil.Process]) -> None:
        now = time.monotonic()
        seen, used = {}, 0.0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                times = p.cpu_times()
                seen[p.pid] = times.user + times.system
                used += max(0.0, seen[p.pid] - self.seen.get(p.pid, 0.0))
        self.seen = seen
        self.credit = min(self.credit + self.cpus * (now - self.last) - used,
                          self.cpus * THROTTLE_BURST * POLL_S)
        self.last = now
        if self.credit < 0:
            self.stopped = True
            _signal_all(procs, signal.SIGSTOP)  # every tick: a process forked since is stopped
        elif self.stopped:
            self.stopped = False
            _signal_all(procs, signal.SIGCONT)


def _signal_all(procs: list[psutil.Process], sig: int) -> None:
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.send_signal(sig)


def sandbox_root(bwrap_pid: int, deadline_s: float = 10.0) -> int | None:
    """The sandbox's first process (bwrap's child, in the sandbox's namespaces), or None."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            children = psutil.Process(bwrap_pid).children()
        except psutil.Error:
            return None
        if children:
            return children[0].pid
        time.sleep(0.01)
    return None


#: Most files the kernel may keep (on the grader's disk, or in the sandbox's tmpfs, whose
#: files take memory its size does not count).
MAX_FILES = 100_000


def tmpfs_used(root: int | None, path: str) -> tuple[int, int]:
    """Bytes and files held by the sandbox's tmpfs at ``path`` (its pages are memory), seen
    through ``/proc/<root>/root``; (0, 0) before the sandbox has its own file system there."""
    if root is None:
        return 0, 0
    inside = f"/proc/{root}/root{path}"
    try:
        if os.stat(inside).st_dev == os.stat(path).st_dev:  # not yet the sandbox's own
            return 0, 0
        st = os.statvfs(inside)
    except OSError:
        return 0, 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_files - st.f_ffree


def install_ipc_filter(program: bytes) -> bool:
    """Load a seccomp program (``sandbox.ipc_filter``) into this process (without the sandbox;
    bwrap loads it there): ``PR_SET_NO_NEW_PRIVS``, then ``PR_SET_SECCOMP``."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    fprog = SockFprog(len(program) // 8, program)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return False
    return libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0  # PR_SET_SECCOMP, FILTER


def tree() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def tree_rss(procs: list[psutil.Process] | None = None) -> int:
    total = 0
    for p in tree() if procs is None else procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


#: Open files whose pages are memory, not disk, and count in no resident set until mapped.
IN_MEMORY = ("/memfd:", "/dev/shm/", "/run/shm/")


def _exited(pid: int) -> bool:
    """True if ``pid`` is gone or a zombie (its files closed, ``/proc/<pid>/fd`` unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in (b"Z", b"X")


def _open_files(pid: int) -> list[str] | None:
    """The names in ``/proc/<pid>/fd``: [] for a process that has exited or is exiting, None
    for a live one that hides them. A process on its way out refuses the listing for a moment
    (its memory is gone before it is a zombie), so a refusal is looked at twice."""
    for attempt in range(2):
        try:
            return os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            return []
        except OSError:
            if _exited(pid):
                return []
            if attempt == 0:
                time.sleep(0.02)
    return None


def held_in_files(pids: list[int]) -> int | None:
    """Bytes in memory-backed files (memfd, ``/dev/shm``) that the processes ``pids`` hold
    open, each file once; None if a process's open files cannot be read (it made itself
    non-dumpable, which hides them from a supervisor that is not root). Where the kernel has a
    memory cgroup, that counts them anyway."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for pid in pids:
        folder = f"/proc/{pid}/fd"
        fds = _open_files(pid)
        if fds is None:
            return None
        for fd in fds:
            try:
                if not os.readlink(f"{folder}/{fd}").startswith(IN_MEMORY):
                    continue
                st = os.stat(f"{folder}/{fd}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def disk_used(folder: str, max_entries: int = MAX_FILES) -> int:
    """Bytes in the files under ``folder`` (a folder of more than ``max_entries`` entries
    counts as over any limit)."""
    total, seen, stack = 0, 0, [folder]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                seen += 1
                if seen > max_entries:
                    return 2**62
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue
    return total


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_tree(deadline_s: float = 10.0) -> int:
    """Kill every process below the supervisor; returns how many were killed.

    Stop them all first (a stopped process cannot fork), then kill; repeat until none is left,
    as orphans of killed processes are re-parented to us (the subreaper) in the meantime.
    """
    killed: set[int] = set()
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        procs = tree()
        if not procs:
            break
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for p in procs:
                try:
                    p.send_signal(sig)
                    killed.add(p.pid)
                except psutil.Error:
                    pass
        time.sleep(0.02)
        reap()
    reap()
    return len(killed)


def _children_cpu() -> float:
    """CPU seconds used by the children the supervisor has waited for (the kernel, or bwrap,
    which waits for the kernel)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tree_cpu(procs: list[psutil.Process] | None = None) -> float:
    """The most CPU time (seconds, all threads) any one process of the tree has used."""
    most = 0.0
    for p in tree() if procs is None else procs:
        with contextlib.suppress(psutil.Error):
            times = p.cpu_times()
            most = max(most, times.user + times.system)
    return most


def _out_of_cpu(code: int, config: dict, seen_cpu: float) -> bool:
    """Whether the kernel died of its CPU-time limit: SIGXCPU at the soft limit, SIGKILL at the
    hard one (bwrap reports a signal as 128 + its number), with a process of the tree last seen
    near the limit (``seen_cpu``; bwrap may exit before its children are waited for)."""
    cpu = config.get("limits", {}).get("cpu")
    signals = (signal.SIGXCPU, signal.SIGKILL)
    died = code in [-s for s in signals] + [128 + s for s in signals]
    return bool(cpu) and died and max(seen_cpu, _children_cpu()) >= float(cpu) - 1.5


def say(line: str) -> None:
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        pass


def _start(config: dict, log: Log, cgroups: list[str]) -> subprocess.Popen | None:
    """Start the kernel's command with its limits, in ``cgroups``, its stdout and stderr to
    ``log``; in the sandbox, bwrap reads the seccomp filter from a pipe. Without a memory cgroup
    the memory limit is also an address-space limit. None (and a ``failed`` line) when the
    command cannot start."""
    command, keep = list(config["command"]), []
    if config.get("seccomp") and config.get("sandbox_tmp"):  # bwrap reads the filter from a pipe
        read, write = os.pipe()
        os.write(write, bytes.fromhex(config["seccomp"]))
        os.close(write)
        command = [str(read) if a == "@seccomp-fd" else a for a in command]
        keep.append(read)
    memory = config.get("memory_bytes")
    if memory and not any(os.path.exists(os.path.join(c, f)) for c in cgroups
                          for f in ("memory.max", "memory.limit_in_bytes")):
        config.setdefault("limits", {})["as"] = address_space(memory)
    try:
        child = subprocess.Popen(
            command, cwd=config["cwd"], env=config["env"], stdin=subprocess.DEVNULL,
            stdout=log.write_fd, stderr=log.write_fd, close_fds=True, pass_fds=keep,
            preexec_fn=_limits(config, cgroups))
    except OSError as e:
        say(f"failed {type(e).__name__}: {e}")
        return None
    for fd in [*keep, log.write_fd]:
        os.close(fd)
    return child


def _exit_line(code: int, config: dict, cgroups: list[str], seen_cpu: float) -> str:
    """What to tell the grader when the kernel exited with ``code``: the memory cgroup killed
    it, it ran out of CPU time, or it exited."""
    if config.get("memory_bytes") and oom_kills(cgroups):  # the cgroup's limit killed it
        return f"memory {cgroup_peak(cgroups)}"
    if _out_of_cpu(code, config, seen_cpu):
        return f"cpu {max(seen_cpu, _children_cpu()):.0f}"
    return f"exited {code}"


def _over_memory(procs: list[psutil.Process], memory: int, cgroups: list[str],
                 root: int | None, sandbox_tmp: str | None) -> str | None:
    """What to tell the grader when the tree is over its memory (its processes, the files it
    holds in memory, its tmpfs), hid its open files, or made too many files; else None."""
    held = held_in_files([p.pid for p in procs])
    if held is None:
        return "hidden"
    in_tmpfs, files = tmpfs_used(root, sandbox_tmp or "/tmp")
    if files > MAX_FILES:
        return f"disk {in_tmpfs}"
    used = tree_rss(procs) + held + in_tmpfs
    if used > memory or oom_kills(cgroups):
        return f"memory {max(used, cgroup_peak(cgroups))}"
    return None


def _watch(child: subprocess.Popen, config: dict, log: Log, cgroups: list[str],
           root: int | None, stop: dict[str, bool]) -> None:
    """Drain the log and watch the kernel until it exits, goes over a limit (its tree is then
    killed), the grader closes stdin, or SIGTERM (``stop``); say why it ended, if it did."""
    memory, disk = config.get("memory_bytes"), config.get("disk_bytes")
    cpus = config.get("cpus")
    throttle = Throttle(float(cpus)) if cpus and not has_cpu_quota(cgroups) else None
    next_memory_check = next_disk_check = next_watch = 0.0
    seen_cpu, watch_cpu = 0.0, bool(config.get("limits", {}).get("cpu"))
    while not stop["now"]:
        ready, _, _ = select.select([sys.stdin, log.read_fd] if log.open else [sys.stdin], [],
                                    [], POLL_S)
        if sys.stdin in ready and not sys.stdin.readline():  # EOF: the grader is done
            return
        if log.open and log.read_fd in ready:
            log.drain()
            if sys.stdin not in ready and time.monotonic() < next_watch:
                continue  # a kernel that prints fast does not make the watches below run often
        next_watch = time.monotonic() + POLL_S
        code = child.poll()
        if code is not None:
            log.drain()  # the grader reads the log's end once it hears the kernel died
            say(_exit_line(code, config, cgroups, seen_cpu))
            return
        procs = tree() if throttle or time.monotonic() >= next_memory_check else []
        if throttle:
            throttle.tick(procs)
        if watch_cpu and time.monotonic() >= next_memory_check:
            seen_cpu = max(seen_cpu, tree_cpu(procs))
        if memory and time.monotonic() >= next_memory_check:
            next_memory_check = time.monotonic() + 0.25
            over = _over_memory(procs, memory, cgroups, root, config.get("sandbox_tmp"))
            if over:
                kill_tree()
                say(over)
                return
        if disk and time.monotonic() >= next_disk_check:
            next_disk_check = time.monotonic() + 1.0
            used = disk_used(config["folder"])
            if used > disk:
                kill_tree()
                say(f"disk {used}")
                return


def main() -> int:
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    subreaper = _prctl(PR_SET_CHILD_SUBREAPER, 1)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    if os.getppid() == 1:  # the grader died before we set PDEATHSIG
        return 0
    config = json.loads(sys.stdin.readline())
    log = Log(config["log"])
    cgroups = make_cgroups(f"course-grade-{os.getpid()}", config.get("processes"),
                           config.get("memory_bytes"), config.get("cpus")) \
        if config.get("cgroups", True) else []
    child = _start(config, log, cgroups)
    if child is None:
        return 1
    say(f"started {child.pid} subreaper={int(subreaper)}")
    sandbox_tmp = config.get("sandbox_tmp")
    root = sandbox_root(child.pid) if sandbox_tmp else None
    if sandbox_tmp:
        say(f"root {root}")
    for folder in cgroups:  # the grader removes them if we cannot (killed by the kernel)
        say(f"cgroup {folder}")
    _watch(child, config, log, cgroups, root, stop)
    n = kill_tree()
    log.close()
    for folder in cgroups:
        for _ in range(50):
            try:
                os.rmdir(folder)
                break
            except OSError:  # the last processes are still exiting
                time.sleep(0.05)
    say(f"cleaned {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
