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
   no core files, a process count), stdin from ``/dev/null`` and stdout/stderr to a log file (the
   kernel never holds a pipe of the grader's), and with every other descriptor closed;
4. watches the memory of the whole tree (resident set size, summed) and the disk used by the
   kernel's folder (its working folder, its ``/tmp`` in the sandbox, its log), and kills the
   tree past either limit; and reports on its stdout, one line each: ``started <pid>``,
   ``exited <code>``, ``memory <bytes>``, ``disk <bytes>``, ``cleaned <n>``.

The process limit (``RLIMIT_NPROC``) does not bind root. Run as root, the supervisor puts the
kernel in a cgroup of its own with a ``pids.max`` where the pids controller is writable (cgroup
v1 or v2), so that a fork bomb meets the limit before it meets the machine's.

It stops when its stdin closes (the grader is done, or died: ``PR_SET_PDEATHSIG`` also sends it
SIGTERM), or when the kernel exits; either way it first kills every process in its tree (stop
them all, then kill, until none is left) and only then exits, so that when the grader sees the
supervisor gone, nothing the submission started is still running.

Run only by ``kernel.py``; it imports nothing but the standard library and psutil, to start fast.
"""

from __future__ import annotations

import contextlib
import ctypes
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


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux: the tree is still killed, less reliably
        return False


def pids_cgroup(name: str, limit: int) -> str | None:
    """A new cgroup with ``pids.max = limit``, for root (whom RLIMIT_NPROC does not bind);
    its ``cgroup.procs`` path, or None where there is no writable pids controller."""
    if os.geteuid() != 0 or not limit:
        return None
    try:
        with open("/proc/self/cgroup") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    for hierarchy, controllers, path in lines:
        for m in mounts:
            sep = m.index("-") if "-" in m else -1
            fstype, options = m[sep + 1], m[-1].split(",")
            v1 = fstype == "cgroup" and "pids" in controllers.split(",") and "pids" in options
            v2 = fstype == "cgroup2" and hierarchy == "0" and not controllers
            if not (v1 or v2):
                continue
            root = m[3].rstrip("/")  # the mount's root within the hierarchy (containers)
            relative = path[len(root):] if root and path.startswith(root) else path
            base = os.path.join(m[4], relative.lstrip("/"))
            folder = os.path.join(base, name)
            try:
                if v2:
                    with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                        f.write("+pids")
                os.mkdir(folder)
                with open(os.path.join(folder, "pids.max"), "w") as f:
                    f.write(str(limit))
                return os.path.join(folder, "cgroup.procs")
            except OSError:
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
    return None


def _limits(config: dict, cgroup: str | None) -> Callable[[], None]:
    """The function the child runs before exec: its own session and the resource limits."""
    limits = config.get("limits", {})

    def apply() -> None:
        os.setsid()
        if cgroup is not None:
            with contextlib.suppress(OSError), open(cgroup, "w") as f:
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

    return apply


def tree() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def tree_rss() -> int:
    total = 0
    for p in tree():
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def disk_used(folder: str, max_entries: int = 100_000) -> int:
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


def say(line: str) -> None:
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        pass


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
    log = open(config["log"], "ab", buffering=0)  # noqa: SIM115 (kept open for the child)
    cgroup = pids_cgroup(f"course-grade-{os.getpid()}", config.get("processes") or 0)
    try:
        child = subprocess.Popen(
            config["command"], cwd=config["cwd"], env=config["env"], stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, close_fds=True, preexec_fn=_limits(config, cgroup))
    except OSError as e:
        say(f"failed {type(e).__name__}: {e}")
        return 1
    say(f"started {child.pid} subreaper={int(subreaper)}")
    if cgroup is not None:  # the grader removes it if we cannot (killed by the kernel)
        say(f"cgroup {os.path.dirname(cgroup)}")
    memory, disk = config.get("memory_bytes"), config.get("disk_bytes")
    next_memory_check = next_disk_check = 0.0
    code = None
    while not stop["now"]:
        ready, _, _ = select.select([sys.stdin], [], [], POLL_S)
        if ready and not sys.stdin.readline():  # EOF: the grader is done with this kernel
            break
        code = child.poll()
        if code is not None:
            say(f"exited {code}")
            break
        if memory and time.monotonic() >= next_memory_check:
            next_memory_check = time.monotonic() + 0.25
            used = tree_rss()
            if used > memory:
                kill_tree()
                say(f"memory {used}")
                break
        if disk and time.monotonic() >= next_disk_check:
            next_disk_check = time.monotonic() + 1.0
            used = disk_used(config["folder"])
            if used > disk:
                kill_tree()
                say(f"disk {used}")
                break
    n = kill_tree()
    for _ in range(50) if cgroup is not None else ():
        try:
            os.rmdir(os.path.dirname(cgroup))
            break
        except OSError:  # the last processes are still exiting
            time.sleep(0.05)
    say(f"cleaned {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
