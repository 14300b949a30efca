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
4. watches the memory of the whole tree (resident set size, summed) and kills the tree past the
   limit; and reports on its stdout, one line each: ``started <pid>``, ``exited <code>``,
   ``memory <bytes>``, ``cleaned <n>``.

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


def _limits(config: dict) -> Callable[[], None]:
    """The function the child runs before exec: its own session and the resource limits."""
    limits = config.get("limits", {})

    def apply() -> None:
        os.setsid()
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
    try:
        child = subprocess.Popen(
            config["command"], cwd=config["cwd"], env=config["env"], stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, close_fds=True, preexec_fn=_limits(config))
    except OSError as e:
        say(f"failed {type(e).__name__}: {e}")
        return 1
    say(f"started {child.pid} subreaper={int(subreaper)}")
    memory = config.get("memory_bytes")
    next_memory_check = 0.0
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
    n = kill_tree()
    say(f"cleaned {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
