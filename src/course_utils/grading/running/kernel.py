"""A small Jupyter kernel driver for grading: start, execute, interrupt, and kill everything.

Why not nbval, as the grader used to: nbval (through pytest) reports a cell's outcome inside the
pytest process, and getting it out meant a log file in a folder the kernel could write; the
kernel could forge it. Here the grading process itself talks to the kernel over the Jupyter
protocol (the same messages nbval and JupyterLab use, via ``jupyter_client.session``) and takes
each cell's verdict from the ``execute_reply`` that answers the request it sent: the reply's
``status``, ``ename``, ``evalue`` and ``traceback``, matched to a fresh random ``msg_id``. Nothing
the verdict depends on is ever read from a file.

Every kernel runs below a supervisor process (``supervise.py``) that owns the kernel's whole
process tree: it applies the resource limits, watches memory, and kills every process the
kernel started when grading is done. What the kernel is started with (limits, environment,
connection) is decided in ``launch.py``; the supervisor is heard and stopped through
``supervisor_link.py``; the messages travel through ``channels.py``. With ``sandbox=True`` the
kernel also runs under bubblewrap (``sandbox.py``). The kernel never holds one of the grader's
pipes: its stdout and stderr go to a log file, its stdin is ``/dev/null``. Its output reaches
the grader only as Jupyter messages, capped per cell (``Limits.output_bytes``); the rest is
dropped with a note.

    with Kernel(sandbox=False) as k:
        reply = k.execute("1 + 1", timeout=10)
        reply.status, reply.data   # ('ok', '2')
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from course_utils.grading.running import sandbox as bwrap
from course_utils.grading.running.answers_view import PACKAGE
from course_utils.grading.running.channels import MAX_MESSAGE_BYTES, Channels
from course_utils.grading.running.launch import (  # noqa: F401 (kernel.X as before)
    ENVIRONMENT,
    RUN_MARK,
    THREAD_VARIABLES,
    GiB,
    Limits,
    connection_info,
    environment,
    fair_share,
    font_cache,
    kernel_environment,
    supervisor_config,
)
from course_utils.grading.running.supervisor_link import (  # noqa: F401 (kernel.X as before)
    SupervisorLink,
    kill_marked,
)

Status = Literal["ok", "error", "timeout", "dead"]

#: A kernel gets this long to answer an interrupt before it is killed.
INTERRUPT_GRACE_S = 5.0
#: Longest error message kept from a reply (a check's message is a few lines; a submission's
#: exception could carry megabytes into every report). The traceback is capped at four times it.
MAX_ERROR_CHARS = 64 * 1024


@dataclass
class Reply:
    """What the kernel did with one execute request, as the grader observed it."""

    status: Status  # ok; error (an exception); timeout (interrupted); dead (kernel gone)
    ename: str = ""
    evalue: str = ""
    traceback: list[str] = field(default_factory=list)
    execution_count: int | None = None
    stdout: str = ""  # stream text (stdout and stderr), at most Limits.output_bytes
    data: str = ""  # the text/plain of the cell's result, if any
    user_expressions: dict[str, Any] = field(default_factory=dict)
    dropped_bytes: int = 0  # output over the cap, not kept
    seconds: float = 0.0
    kernel_lost: bool = False  # the kernel is gone after this request
    why_lost: str = ""  # e.g. "exited with code 1", "used more than 6 GiB of memory"
    msg_id: str = ""  # the request's id (``Kernel.forged`` holds those answered twice)


class KernelError(RuntimeError):
    """The kernel could not be started."""


class Kernel:
    """One IPython kernel below its own supervisor, in a private temporary folder.

    ``hidden``: paths the sandboxed kernel must not see (the solutions, other submissions).
    ``env``: extra environment variables. ``package``: the copy of ``course_utils`` the kernel
    imports instead of the grader's (``answers_view.package_view``; None: the grader's own).
    Use as a context manager, or call ``close()``.
    """

    def __init__(self, *, sandbox: bool = False, limits: Limits | None = None,
                 hidden: list[Path] | None = None, env: dict[str, str] | None = None,
                 startup_timeout: float = 120.0, package: Path | None = None) -> None:
        self.sandbox = sandbox
        self.package = package
        self.limits = limits or Limits()
        self.hidden = list(hidden or [])
        self.extra_env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.folder: Path | None = None
        self.token = secrets.token_hex(12)  # marks every process of this kernel (environment)
        self.supervisor = SupervisorLink(self.limits, self.token)
        self.channels: Channels | None = None
        self.started_s = 0.0
        #: Requests answered more than once: the first answer was forged by code in the kernel
        #: (a learner's function can send an execute_reply for the check that calls it).
        self.forged: set[str] = set()
        self._answered: set[str] = set()

    @property
    def lost(self) -> str:
        """Why the kernel is gone ("" while it runs)."""
        return self.supervisor.lost

    @lost.setter
    def lost(self, why: str) -> None:
        self.supervisor.lost = why

    # -- start -----------------------------------------------------------------------------

    def __enter__(self) -> Kernel:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the kernel and wait until it answers; KernelError if it does not."""
        t0 = time.monotonic()
        # A short path: unix socket paths are limited to about 100 characters.
        self.folder = Path(tempfile.mkdtemp(prefix="cg-", dir="/tmp" if os.path.isdir("/tmp")
                                            else None))
        ipc, work = self.folder / "ipc", self.folder / "work"
        for folder in (ipc, work):
            folder.mkdir()
        # In the sandbox the kernel's folders are made in its own tmpfs (sized, in memory), at
        # /tmp/<the folder's name>; the grader reaches its sockets through /proc/<pid>/root.
        inside = Path("/tmp") / self.folder.name if self.sandbox else self.folder
        ipc_in, work_in = inside / "ipc", inside / "work"
        connection = connection_info(ipc_in / "k")
        connection_file = ipc / "kernel.json"
        connection_file.write_text(json.dumps(connection))
        env = environment(work_in, sandbox=self.sandbox, extra=self.extra_env, token=self.token)
        if self.package is not None and not self.sandbox:
            env["PYTHONPATH"] = str(self.package.parent)
        command = [sys.executable, "-m", "ipykernel_launcher", "-f",
                   str(ipc_in / connection_file.name), "--HistoryManager.enabled=False",
                   "--IPKernelApp.quiet=True"]
        program = bwrap.ipc_filter()
        if self.sandbox:
            files = {ipc_in / connection_file.name: connection_file}
            if self.package is not None:  # over the grader's package: no path reaches it
                files[PACKAGE] = self.package
            cache = font_cache()
            if cache is not None:
                files[work_in / ".matplotlib" / cache.name] = cache
            command = bwrap.wrap(command, hidden=self.hidden, cwd=work_in,
                                 private=[ipc_in, work_in, work_in / ".matplotlib"],
                                 files=files, tmp_bytes=self.limits.disk_bytes,
                                 seccomp=program is not None)
        self.supervisor.start(supervisor_config(command, folder=self.folder, env=env,
                                                limits=self.limits, sandbox=self.sandbox,
                                                seccomp=program))
        if self.sandbox:
            self._wait_for_root()
            connection = {**connection,
                          "ip": f"/proc/{self.supervisor.root}/root{connection['ip']}"}
        self.channels = Channels(connection)
        try:
            self._wait_until_ready()
        except KernelError:
            self.close()
            raise
        connection_file.unlink()  # read at start-up; the key is no one else's business
        self.started_s = time.monotonic() - t0

    def _wait_for_root(self) -> None:
        """Wait for the supervisor to name the sandbox's first process."""
        deadline = time.monotonic() + self.startup_timeout
        while self.supervisor.root is None and time.monotonic() < deadline:
            self.supervisor.poll()
            if self.lost:
                break
            time.sleep(0.01)
        if self.supervisor.root is None:
            self.close()
            raise KernelError(f"the sandbox did not start: {self.lost or 'no process'}"
                              f"{self._log_tail()}")

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        msg_id, sent_at, seen_iopub, replied = None, 0.0, False, False
        while time.monotonic() < deadline:
            self.supervisor.poll()
            if self.lost:
                raise KernelError(f"{self.lost}{self._log_tail()}")
            if not replied and time.monotonic() - sent_at > 2.0:
                msg_id, sent_at = self.channels.send("shell", "kernel_info_request", {}), \
                    time.monotonic()
            for name, msg in self.channels.receive(0.1):
                if name == "shell" and msg["parent_header"].get("msg_id") == msg_id:
                    replied = True
                if name == "iopub":
                    seen_iopub = True
            if replied and seen_iopub:
                return
            if replied and time.monotonic() - sent_at > 0.5:  # iopub not yet subscribed
                msg_id, sent_at, replied = self.channels.send("shell", "kernel_info_request", {}), \
                    time.monotonic(), False
        raise KernelError(f"the kernel did not start within {self.startup_timeout:g} s"
                          f"{self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            text = (self.folder / "kernel.log").read_bytes()[-1500:].decode(errors="replace")
        except (OSError, TypeError):
            return ""
        return f"; its log ends:\n{text.strip()}" if text.strip() else ""

    def interrupt(self) -> None:
        """Ask the kernel to interrupt the running cell (SIGINT, sent by the kernel itself)."""
        if not self.lost:
            self.channels.send("control", "interrupt_request", {})

    def alive(self) -> bool:
        self.supervisor.poll()
        return not self.lost

    def execute(self, code: str, timeout: float, *, silent: bool = False,
                store_history: bool = True, user_expressions: dict[str, str] | None = None
                ) -> Reply:
        """Run ``code``; wait at most ``timeout`` s, then interrupt, then kill the kernel."""
        t0 = time.monotonic()
        self.supervisor.poll()
        if self.lost:
            return Reply("dead", kernel_lost=True, why_lost=self.lost)
        msg_id = self.channels.send("shell", "execute_request", {
            "code": code, "silent": silent, "store_history": store_history,
            "user_expressions": user_expressions or {}, "allow_stdin": False,
            "stop_on_error": False})
        reply = Reply("ok", msg_id=msg_id)
        out: list[str] = []
        kept = 0
        deadline, interrupted_at, result, result_at = t0 + timeout, None, None, 0.0
        idle = dropped_one = False
        while result is None or not idle:
            now = time.monotonic()
            if result is not None and now > result_at + 2.0:
                break  # the reply came; its trailing output is not worth waiting for
            for name, msg in self.channels.receive(0.05):
                if name == "monitor":  # an output message over the limit was dropped, or
                    dropped_one = True  # the kernel died (then _lost says so)
                    idle = True  # its idle status may have been lost with the connection
                    continue
                parent = msg.get("parent_header", {}).get("msg_id")
                kind, content = msg["msg_type"], msg.get("content", {})
                if name == "shell" and kind == "execute_reply":
                    if parent in self._answered or parent == msg_id and result is not None:
                        self.forged.add(parent)
                    elif parent == msg_id:
                        result, result_at = content, time.monotonic()
                        self._answered.add(msg_id)
                    continue
                if parent != msg_id:
                    continue
                elif name == "iopub" and kind == "status":
                    idle = content.get("execution_state") == "idle"
                elif name == "iopub":
                    text = _text_of(kind, content)
                    if kind == "execute_result":
                        reply.data = content.get("data", {}).get("text/plain", "")[:4096]
                    if text:
                        room = max(0, self.limits.output_bytes - kept)
                        out.append(text[:room])
                        kept += min(len(text), room)
                        reply.dropped_bytes += max(0, len(text) - room)
            if result is not None:
                continue
            self.supervisor.poll()
            if self.lost:
                return self._lost(reply, out, t0)
            now = time.monotonic()
            if interrupted_at is None and now > deadline:
                self.interrupt()
                interrupted_at = now
            elif interrupted_at is not None and now > interrupted_at + INTERRUPT_GRACE_S:
                self.kill(f"the cell ignored the interrupt after its {timeout:g} s time "
                          "limit; its kernel was stopped")
                reply = self._lost(reply, out, t0)
                reply.status = "timeout"
                return reply
        _fill(reply, result, "".join(out), time.monotonic() - t0, dropped_one)
        if interrupted_at is not None:
            reply.status = "timeout"
        return reply

    def _lost(self, reply: Reply, out: list[str], t0: float) -> Reply:
        reply.status, reply.kernel_lost, reply.why_lost = "dead", True, self.lost
        reply.stdout, reply.seconds = "".join(out), time.monotonic() - t0
        return reply

    # -- stop -------------------------------------------------------------------------------

    def kill(self, why: str) -> None:
        """Stop the kernel and every process it started, now."""
        self.supervisor.kill(why)

    def close(self) -> None:
        """Kill the kernel and its processes, close the sockets, delete the private folder."""
        self.supervisor.kill("the kernel was shut down")
        if self.channels is not None:
            self.channels.close()
            self.channels = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def descendants() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True)}


def kill_descendants(keep: set[int] = frozenset()) -> int:
    """Kill every process below this one but ``keep`` (those that were there before grading):
    the grader's last sweep, see ``grade.main``."""
    import psutil

    killed = 0
    for _ in range(5):
        procs = [p for p in psutil.Process().children(recursive=True) if p.pid not in keep]
        if not procs:
            break
        for p in procs:
            try:
                p.kill()
                killed += 1
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=1)
    return killed


def _fill(reply: Reply, result: dict[str, Any], stdout: str, seconds: float,
          dropped_one: bool) -> None:
    """``reply`` filled in from the kernel's execute reply (``result``), capped, with the
    output kept (``stdout``); ``dropped_one``: a message over the size limit was dropped."""
    reply.stdout = stdout
    reply.seconds = seconds
    if dropped_one:
        reply.dropped_bytes += MAX_MESSAGE_BYTES
    reply.execution_count = result.get("execution_count")
    reply.user_expressions = result.get("user_expressions", {}) or {}
    if result.get("status") == "ok":
        reply.status = "ok"
        return
    reply.status = "error"
    reply.ename = _cut(str(result.get("ename", "")), 200) or "Error"
    reply.evalue = _cut(str(result.get("evalue", "")), MAX_ERROR_CHARS)
    room, reply.traceback = 4 * MAX_ERROR_CHARS, []
    for entry in (result.get("traceback", []) or [])[:200]:
        entry = _cut(str(entry), room)
        reply.traceback.append(entry)
        room -= len(entry)
        if room <= 0:
            break


def _cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and a note of how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n... ({len(text) - limit} more characters not shown)"


def _text_of(kind: str, content: dict[str, Any]) -> str:
    """The text a learner would see for one output message."""
    if kind == "stream":
        return str(content.get("text", ""))
    if kind in ("execute_result", "display_data"):
        data = content.get("data", {}) or {}
        return str(data.get("text/plain", "")) + "\n"
    if kind == "error":
        return ""
    return ""
