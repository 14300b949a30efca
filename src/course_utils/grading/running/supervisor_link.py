"""The grader's side of one kernel's supervisor (``supervise.py``): start it, hear it, stop it.

The supervisor reports on its stdout, one line each (``exited <code>``, ``memory <bytes>``,
``root <pid>``, ``cleaned <n>``, ...); a thread reads the lines as they come and ``poll`` turns
them into what the grader needs: the sandbox's first process (``root``), the kernel's cgroups,
and, once the kernel is gone, a sentence saying why (``lost``), e.g. "the kernel used more than
6 GiB of memory ... and was stopped". ``stop`` closes the supervisor's stdin (it then kills the
kernel's whole tree) and sweeps what escaped it: processes that carry the kernel's mark
(``kill_marked``) and its cgroups.

    link = SupervisorLink(Limits(), token)
    link.start(config)        # supervisor_config(...) from launch.py
    link.poll(); link.lost    # "" while the kernel runs
    link.stop()
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from course_utils.grading.running.launch import RUN_MARK, GiB, Limits


def _reason(word: str, rest: str, limits: Limits) -> str | None:
    """Why the kernel is gone, from one of the supervisor's lines; None for a line that does
    not end it (or that adds to an earlier reason only when there is none: see ``poll``)."""
    if word == "exited":
        code = int(rest) if rest.lstrip("-").isdigit() else None
        return f"the kernel was killed by signal {-code}" if code and code < 0 \
            else f"the kernel died (exit code {code})"
    if word == "memory":
        limit = (limits.memory_bytes or 0) / GiB
        return (f"the kernel used more than {limit:g} GiB of memory (its processes, "
                "and files held in memory: in the sandbox, its /tmp and working "
                "folder) and was stopped")
    if word == "disk":
        limit = (limits.disk_bytes or 0) / GiB
        return (f"the kernel wrote more than {limit:g} GiB of files (or 100,000 "
                "files) and was stopped")
    if word == "failed":
        return f"the kernel could not be started: {rest}"
    if word == "cpu":
        limit = limits.cpu_seconds or 0
        return (f"the kernel used more than {limit:g} s of CPU time (all its threads "
                "together) and was stopped")
    if word == "hidden":
        return ("a process of the kernel hid its open files from the grader's "
                "memory watch (it made itself non-dumpable) and was stopped")
    return None


class SupervisorLink:
    """One kernel's supervisor process, as the grader sees it.

    ``token``: the mark in the environment of every process of the kernel (``RUN_MARK``).
    """

    def __init__(self, limits: Limits, token: str) -> None:
        self.limits = limits
        self.token = token
        self.process: subprocess.Popen | None = None
        self.lost = ""  # why the kernel is gone ("" while it runs)
        self.cleaned: int | None = None  # processes the supervisor killed at the end
        self.cgroups: list[str] = []  # the kernel's cgroups (root), which its supervisor made
        self.root: int | None = None  # a process in the sandbox: /proc/<root>/root reaches it
        self._lines: queue.Queue[str] = queue.Queue()
        self._next_state_check = 0.0

    def start(self, config: dict) -> None:
        """Start the supervisor and give it its orders (``launch.supervisor_config``)."""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "course_utils.grading.running.supervise"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            bufsize=1, start_new_session=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        self.process.stdin.write(json.dumps(config) + "\n")
        self.process.stdin.flush()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.strip())
        self._lines.put("gone")

    def poll(self) -> None:
        """Read what the supervisor said; set ``self.lost`` when the kernel is gone. A stopped
        supervisor (the kernel sent it SIGSTOP, where it can see it: without the sandbox) no
        longer watches memory: the kernel is stopped for good."""
        if self.process is not None and not self.lost \
                and time.monotonic() >= self._next_state_check:
            self._next_state_check = time.monotonic() + 0.5
            if _stopped(self.process.pid):
                self.kill("the kernel stopped its supervisor (SIGSTOP); it was stopped")
                return
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return
            word, _, rest = line.partition(" ")
            if word == "exited" and self.lost:
                continue
            reason = _reason(word, rest, self.limits)
            if reason is not None:
                self.lost = reason
            elif word == "cgroup":
                self.cgroups.append(rest)
            elif word == "root":
                self.root = int(rest) if rest.isdigit() else None
                if self.root is None:
                    self.lost = "the sandbox did not start"
            elif word == "cleaned":
                self.cleaned = int(rest) if rest.isdigit() else None
                self.lost = self.lost or "the kernel stopped"
            elif word == "gone":
                self.lost = self.lost or "the kernel's supervisor stopped"

    def kill(self, why: str) -> None:
        """Stop the kernel and every process it started, now, for the reason ``why`` (unless
        it is gone already, for its own)."""
        self.lost = self.lost or why
        self.stop()

    def stop(self) -> None:
        """End the supervisor (it kills the kernel's tree first), then sweep what escaped."""
        sup = self.process
        if sup is None:
            return
        try:
            if sup.stdin and not sup.stdin.closed:
                sup.stdin.close()  # EOF: the supervisor kills the tree, then exits
            if sup.poll() is None:
                os.kill(sup.pid, signal.SIGCONT)  # in case the kernel stopped it
        except OSError:
            pass
        try:
            sup.wait(timeout=20)
        except subprocess.TimeoutExpired:
            sup.kill()
            sup.wait()
        self.poll()
        # The supervisor kills its whole tree; a process that escaped it (the kernel killed its
        # supervisor first) still carries this kernel's mark in its environment, and is still in
        # the kernel's cgroup (root), which goes once it is empty.
        kill_marked(self.token)
        for folder in self.cgroups:
            _empty_cgroup(folder)


def _empty_cgroup(folder: str, deadline_s: float = 5.0) -> None:
    """Kill every process left in a kernel's cgroup, then remove it (it was made for that kernel
    and nothing else)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with open(os.path.join(folder, "cgroup.procs")) as f:
                pids = [int(line) for line in f if line.strip()]
        except OSError:
            return  # gone already
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.rmdir(folder)
            return
        except OSError:
            time.sleep(0.05)


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (state T in /proc/<pid>/stat; False elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


def kill_marked(token: str, rounds: int = 5) -> int:
    """Kill every process of this user whose environment holds ``RUN_MARK=token``."""
    mark = f"{RUN_MARK}={token}".encode()
    uid, killed = os.getuid(), 0
    if not os.path.isdir("/proc"):  # not Linux: the supervisor's tree kill is all there is
        return 0
    for _ in range(rounds):
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if entry.stat().st_uid != uid:
                    continue
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if mark in f.read().split(b"\0"):
                        found.append(int(entry.name))
            except OSError:
                continue
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, 9)
                killed += 1
            except OSError:
                pass
        time.sleep(0.05)
    return killed
