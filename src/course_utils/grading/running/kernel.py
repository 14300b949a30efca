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
kernel started when grading is done. With ``sandbox=True`` the kernel also runs under bubblewrap
(``sandbox.py``). The kernel never holds one of the grader's pipes: its stdout and stderr go to a
log file, its stdin is ``/dev/null``. Its output reaches the grader only as Jupyter messages,
capped per cell (``Limits.output_bytes``); the rest is dropped with a note.

    with Kernel(sandbox=False) as k:
        reply = k.execute("1 + 1", timeout=10)
        reply.status, reply.data   # ('ok', '2')
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import zmq
from jupyter_client.session import Session

from course_utils.grading.running import sandbox as bwrap

Status = Literal["ok", "error", "timeout", "dead"]

#: A kernel gets this long to answer an interrupt before it is killed.
INTERRUPT_GRACE_S = 5.0
#: Largest single message taken from the kernel's output channel (larger ones are dropped).
MAX_MESSAGE_BYTES = 8 * 2**20
GiB = 2**30
#: Longest error message kept from a reply (a check's message is a few lines; a submission's
#: exception could carry megabytes into every report). The traceback is capped at four times it.
MAX_ERROR_CHARS = 64 * 1024
#: The environment variable that marks a kernel's processes, to find any that escaped.
RUN_MARK = "COURSE_GRADE_RUN"
#: The only variables a kernel gets from the grader's environment (besides ``LC_*``): where
#: programs are, the language, the thread counts, the GPUs to use and the course's own settings.
#: Everything else (tokens, keys, the grader's paths) stays out of the learner's reach.
ENVIRONMENT = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH",
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS", "XLA_FLAGS", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
    "COURSE_DEVICE", "COURSE_VIZ_RENDERER",
})

#: Thread-pool sizes each library reads from the environment when it starts.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                    "TF_NUM_INTEROP_THREADS")


def kernel_environment(threads: int | None = 1, device: str = "cpu") -> dict[str, str]:
    """The variables that give a kernel ``threads`` threads per library and a device.

    OpenMP (PyTorch's CPU ops, oneDNN), MKL, OpenBLAS (numpy), TensorFlow's two pools and XLA
    (JAX, ``jit_compile``) each start a thread per core by default; four kernels on four cores
    would run sixteen. ``threads=None`` leaves them alone. ``device="cpu"`` hides GPUs from every
    framework and tells ``course_utils.devices`` to pick the CPU (``COURSE_DEVICE``); ``"auto"``
    lets each framework pick.

    >>> kernel_environment(2)["OMP_NUM_THREADS"], kernel_environment(2)["COURSE_DEVICE"]
    ('2', 'cpu')
    """
    env: dict[str, str] = {}
    if threads is not None:
        if threads < 1:
            raise ValueError(f"--threads must be at least 1, got {threads}")
        env.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
        flags = f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'} " \
            f"intra_op_parallelism_threads={threads}"
        env["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()
    if device == "cpu":
        env.update({"COURSE_DEVICE": "cpu", "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"})
    elif device != "auto":
        raise ValueError(f"--device must be cpu or auto, got {device!r}")
    return env


@dataclass
class Limits:
    """Resource limits for one kernel and everything it starts."""

    memory_bytes: int | None = 6 * GiB  # the tree's resident memory and memory-backed files
    # CPU time per process (RLIMIT_CPU); None: no limit (course-grade sets the notebook's budget)
    cpu_seconds: int | None = None
    processes: int | None = 2048  # more tasks (processes + threads) than the user has now
    file_bytes: int | None = GiB  # largest file the kernel may write (RLIMIT_FSIZE)
    # all files in the kernel's folders; in the sandbox, the size of its tmpfs (/tmp, /dev/shm,
    # its working folder), which also counts as memory
    disk_bytes: int | None = 4 * GiB
    open_files: int | None = 4096
    output_bytes: int = 2**20  # output kept per cell; the rest is dropped with a note
    cgroups: bool = True  # cgroups for the process, memory and CPU limits, where they can be made
    # processors the kernel's whole tree may keep busy (a cgroup's cpu.max, or the supervisor's
    # throttle); None: no share. course-grade gives each kernel the machine's CPUs / --jobs.
    cpus: float | None = None


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


def fair_share(jobs: int) -> float:
    """Processors each of ``jobs`` kernels graded at once may keep busy: the machine's (those
    this process may run on) divided among them, at least one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1.0, cores / max(1, jobs))


def _user_tasks() -> int:
    """How many processes and threads this user runs now (RLIMIT_NPROC counts those)."""
    uid, n = os.getuid(), 0
    try:
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid == uid:
                        n += len(os.listdir(f"/proc/{entry.name}/task"))
                except OSError:
                    continue
    except OSError:
        return 0
    return n


def _font_cache() -> Path | None:
    """matplotlib's font list cache, copied into each kernel so it is not rebuilt (seconds)."""
    for folder in [os.environ.get("MPLCONFIGDIR"), os.path.expanduser("~/.cache/matplotlib"),
                   os.path.expanduser("~/.config/matplotlib")]:
        if folder and Path(folder).is_dir():
            found = sorted(Path(folder).glob("fontlist-*.json"))
            if found:
                return found[-1]
    return None


class Kernel:
    """One IPython kernel below its own supervisor, in a private temporary folder.

    ``hidden``: paths the sandboxed kernel must not see (the solutions, other submissions).
    ``env``: extra environment variables. Use as a context manager, or call ``close()``.
    """

    def __init__(self, *, sandbox: bool = False, limits: Limits | None = None,
                 hidden: list[Path] | None = None, env: dict[str, str] | None = None,
                 startup_timeout: float = 120.0) -> None:
        self.sandbox = sandbox
        self.limits = limits or Limits()
        self.hidden = list(hidden or [])
        self.extra_env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.folder: Path | None = None
        self.supervisor: subprocess.Popen | None = None
        self.lost = ""  # why the kernel is gone ("" while it runs)
        self.cleaned: int | None = None  # processes the supervisor killed at the end
        self._lines: queue.Queue[str] = queue.Queue()
        self._context: zmq.Context | None = None
        self._sockets: dict[str, zmq.Socket] = {}
        self._session: Session | None = None
        self.started_s = 0.0
        self.token = secrets.token_hex(12)  # marks every process of this kernel (environment)
        self._next_state_check = 0.0
        self.cgroups: list[str] = []  # the kernel's cgroups (root), which its supervisor made
        self.root: int | None = None  # a process in the sandbox: /proc/<root>/root reaches it
        #: Requests answered more than once: the first answer was forged by code in the kernel
        #: (a learner's function can send an execute_reply for the check that calls it).
        self.forged: set[str] = set()
        self._answered: set[str] = set()

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
        key = secrets.token_hex(32)
        ports = {f"{name}_port": i for i, name in
                 enumerate(("shell", "iopub", "stdin", "control", "hb"), start=1)}
        connection = {**ports, "ip": str(ipc_in / "k"), "transport": "ipc", "key": key,
                      "signature_scheme": "hmac-sha256", "kernel_name": "course-grade"}
        connection_file = ipc / "kernel.json"
        connection_file.write_text(json.dumps(connection))
        env = self._environment(work_in)
        command = [sys.executable, "-m", "ipykernel_launcher", "-f",
                   str(ipc_in / connection_file.name), "--HistoryManager.enabled=False",
                   "--IPKernelApp.quiet=True"]
        program = bwrap.ipc_filter()
        if self.sandbox:
            files = {ipc_in / connection_file.name: connection_file}
            cache = _font_cache()
            if cache is not None:
                files[work_in / ".matplotlib" / cache.name] = cache
            command = bwrap.wrap(command, hidden=self.hidden, cwd=work_in,
                                 private=[ipc_in, work_in, work_in / ".matplotlib"],
                                 files=files, tmp_bytes=self.limits.disk_bytes,
                                 seccomp=program is not None)
        limits = {"cpu": self.limits.cpu_seconds, "fsize": self.limits.file_bytes,
                  "nofile": self.limits.open_files, "core": 0}
        if self.limits.processes:
            limits["nproc"] = _user_tasks() + self.limits.processes
        config = {"command": command, "cwd": str(work), "env": env, "limits": limits,
                  "log": str(self.folder / "kernel.log"), "folder": str(self.folder),
                  "memory_bytes": self.limits.memory_bytes,
                  "disk_bytes": self.limits.disk_bytes, "processes": self.limits.processes,
                  "cgroups": self.limits.cgroups, "cpus": self.limits.cpus,
                  "seccomp": program.hex() if program else None,
                  "sandbox_tmp": "/tmp" if self.sandbox else None}
        self.supervisor = subprocess.Popen(
            [sys.executable, "-m", "course_utils.grading.running.supervise"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
            start_new_session=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        self.supervisor.stdin.write(json.dumps(config) + "\n")
        self.supervisor.stdin.flush()
        threading.Thread(target=self._read_supervisor, daemon=True).start()
        if self.sandbox:
            self._wait_for_root()
            connection = {**connection, "ip": f"/proc/{self.root}/root{connection['ip']}"}
        self._connect(connection)
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
        while self.root is None and time.monotonic() < deadline:
            self._poll_supervisor()
            if self.lost:
                break
            time.sleep(0.01)
        if self.root is None:
            self.close()
            raise KernelError(f"the sandbox did not start: {self.lost or 'no process'}"
                              f"{self._log_tail()}")

    def _environment(self, work: Path) -> dict[str, str]:
        """The kernel's environment, built from scratch: the grader's values of the names in
        ``ENVIRONMENT`` (and ``LC_*``), a private home folder and temporary folder, and the
        kernel's own settings; nothing else of the grader's shell (tokens, keys, paths)."""
        env = {k: v for k, v in os.environ.items() if k in ENVIRONMENT or k.startswith("LC_")}
        env.setdefault("PATH", os.defpath)
        venv_bin = str(Path(sys.executable).parent)  # the course's tools (jupyter, course-grade)
        if venv_bin not in env["PATH"].split(os.pathsep):
            env["PATH"] = venv_bin + os.pathsep + env["PATH"]
        # The kernel imports the grader's own course_utils (the probes and checks talk to it),
        # however the grader found it (an editable install, or PYTHONPATH).
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[3])  # src/
        mpl = work / ".matplotlib"
        cache = _font_cache()
        if not self.sandbox:  # in the sandbox, made there (the cache bound in, read-only)
            mpl.mkdir()
            if cache is not None:
                shutil.copy(cache, mpl / cache.name)
        env.update({
            "MPLCONFIGDIR": str(mpl), "IPYTHONDIR": str(work / ".ipython"),
            "PYTHONDONTWRITEBYTECODE": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
            "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
        })
        if self.sandbox:
            env.update({"HOME": "/tmp/home", "TMPDIR": "/tmp"})
        else:
            tmp, home = work / ".tmp", work / ".home"
            tmp.mkdir()
            home.mkdir()
            env.update({"HOME": str(home), "TMPDIR": str(tmp)})
        env.update(self.extra_env)
        env[RUN_MARK] = self.token
        return env

    def _read_supervisor(self) -> None:
        assert self.supervisor is not None and self.supervisor.stdout is not None
        for line in self.supervisor.stdout:
            self._lines.put(line.strip())
        self._lines.put("gone")

    def _connect(self, info: dict[str, Any]) -> None:
        self._context = zmq.Context()
        self._session = Session(key=info["key"].encode(), signature_scheme="hmac-sha256",
                                username="course-grade")
        self._base = f"ipc://{info['ip']}"
        self._ports = {name: info[name + "_port"] for name in ("shell", "control", "iopub")}
        for name in ("shell", "control"):
            sock = self._context.socket(zmq.DEALER)
            sock.linger = 0
            sock.setsockopt(zmq.MAXMSGSIZE, 8 * MAX_MESSAGE_BYTES)
            sock.connect(f"{self._base}-{self._ports[name]}")
            self._sockets[name] = sock
        self._connect_iopub()

    def _connect_iopub(self) -> None:
        """(Re)connect the output channel. A message over MAX_MESSAGE_BYTES makes ZeroMQ drop
        the connection (the grader never holds it in memory); the monitor tells us, and we
        connect again."""
        for name in ("iopub", "monitor"):
            if name in self._sockets:
                if name == "iopub":
                    self._sockets[name].disable_monitor()
                self._sockets.pop(name).close(linger=0)
        sock = self._context.socket(zmq.SUB)
        sock.linger = 0
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        self._sockets["monitor"] = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        sock.connect(f"{self._base}-{self._ports['iopub']}")
        self._sockets["iopub"] = sock

    def _poll_supervisor(self) -> None:
        """Read what the supervisor said; set ``self.lost`` when the kernel is gone. A stopped
        supervisor (the kernel sent it SIGSTOP, where it can see it: without the sandbox) no
        longer watches memory: the kernel is stopped for good."""
        if self.supervisor is not None and not self.lost \
                and time.monotonic() >= self._next_state_check:
            self._next_state_check = time.monotonic() + 0.5
            if _stopped(self.supervisor.pid):
                self.kill("the kernel stopped its supervisor (SIGSTOP); it was stopped")
                return
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return
            word, _, rest = line.partition(" ")
            if word == "exited" and not self.lost:
                code = int(rest) if rest.lstrip("-").isdigit() else None
                self.lost = f"the kernel was killed by signal {-code}" if code and code < 0 \
                    else f"the kernel died (exit code {code})"
            elif word == "memory":
                limit = (self.limits.memory_bytes or 0) / GiB
                self.lost = (f"the kernel used more than {limit:g} GiB of memory (its processes, "
                             "and files held in memory: in the sandbox, its /tmp and working "
                             "folder) and was stopped")
            elif word == "disk":
                limit = (self.limits.disk_bytes or 0) / GiB
                self.lost = (f"the kernel wrote more than {limit:g} GiB of files (or 100,000 "
                             "files) and was stopped")
            elif word == "failed":
                self.lost = f"the kernel could not be started: {rest}"
            elif word == "cgroup":
                self.cgroups.append(rest)
            elif word == "root":
                self.root = int(rest) if rest.isdigit() else None
                if self.root is None:
                    self.lost = "the sandbox did not start"
            elif word == "cpu":
                limit = self.limits.cpu_seconds or 0
                self.lost = (f"the kernel used more than {limit:g} s of CPU time (all its threads "
                             "together) and was stopped")
            elif word == "hidden":
                self.lost = ("a process of the kernel hid its open files from the grader's "
                             "memory watch (it made itself non-dumpable) and was stopped")
            elif word == "cleaned":
                self.cleaned = int(rest) if rest.isdigit() else None
                self.lost = self.lost or "the kernel stopped"
            elif word == "gone":
                self.lost = self.lost or "the kernel's supervisor stopped"

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        msg_id, sent_at, seen_iopub, replied = None, 0.0, False, False
        while time.monotonic() < deadline:
            self._poll_supervisor()
            if self.lost:
                raise KernelError(f"{self.lost}{self._log_tail()}")
            if not replied and time.monotonic() - sent_at > 2.0:
                msg_id, sent_at = self._send("shell", "kernel_info_request", {}), \
                    time.monotonic()
            for name, msg in self._receive(0.1):
                if name == "shell" and msg["parent_header"].get("msg_id") == msg_id:
                    replied = True
                if name == "iopub":
                    seen_iopub = True
            if replied and seen_iopub:
                return
            if replied and time.monotonic() - sent_at > 0.5:  # iopub not yet subscribed
                msg_id, sent_at, replied = self._send("shell", "kernel_info_request", {}), \
                    time.monotonic(), False
        raise KernelError(f"the kernel did not start within {self.startup_timeout:g} s"
                          f"{self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            text = (self.folder / "kernel.log").read_bytes()[-1500:].decode(errors="replace")
        except (OSError, TypeError):
            return ""
        return f"; its log ends:\n{text.strip()}" if text.strip() else ""

    # -- messages ---------------------------------------------------------------------------

    def _send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        msg = self._session.msg(msg_type, content)
        self._session.send(self._sockets[channel], msg)
        return msg["header"]["msg_id"]

    def _receive(self, timeout: float) -> list[tuple[str, dict[str, Any]]]:
        """Messages that arrive within ``timeout`` seconds (at least one wait); signed ones only.
        A dropped output connection shows as ("monitor", {}) and is reconnected."""
        poller = zmq.Poller()
        for sock in self._sockets.values():
            poller.register(sock, zmq.POLLIN)
        out: list[tuple[str, dict[str, Any]]] = []
        ready = dict(poller.poll(max(0, int(timeout * 1000))))
        if self._sockets["monitor"] in ready:
            with contextlib.suppress(zmq.Again):
                while self._sockets["monitor"].recv_multipart(zmq.NOBLOCK):
                    pass
            self._connect_iopub()
            out.append(("monitor", {}))
            ready.pop(self._sockets["monitor"], None)
        for name, sock in list(self._sockets.items()):
            if sock not in ready or name == "monitor":
                continue
            while True:
                try:
                    _, msg = self._session.recv(sock, mode=zmq.NOBLOCK)
                except zmq.Again:
                    break
                except Exception:  # a message that fails its signature or does not parse
                    continue
                if msg is None:
                    break
                out.append((name, msg))
        return out

    def interrupt(self) -> None:
        """Ask the kernel to interrupt the running cell (SIGINT, sent by the kernel itself)."""
        if not self.lost:
            self._send("control", "interrupt_request", {})

    def alive(self) -> bool:
        self._poll_supervisor()
        return not self.lost

    def execute(self, code: str, timeout: float, *, silent: bool = False,
                store_history: bool = True, user_expressions: dict[str, str] | None = None
                ) -> Reply:
        """Run ``code``; wait at most ``timeout`` s, then interrupt, then kill the kernel."""
        t0 = time.monotonic()
        self._poll_supervisor()
        if self.lost:
            return Reply("dead", kernel_lost=True, why_lost=self.lost)
        msg_id = self._send("shell", "execute_request", {
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
            for name, msg in self._receive(0.05):
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
            self._poll_supervisor()
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
        self.lost = self.lost or why
        self._stop_supervisor()

    def _stop_supervisor(self) -> None:
        sup = self.supervisor
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
        self._poll_supervisor()
        # The supervisor kills its whole tree; a process that escaped it (the kernel killed its
        # supervisor first) still carries this kernel's mark in its environment, and is still in
        # the kernel's cgroup (root), which goes once it is empty.
        kill_marked(self.token)
        for folder in self.cgroups:
            _empty_cgroup(folder)

    def close(self) -> None:
        """Kill the kernel and its processes, close the sockets, delete the private folder."""
        self.lost = self.lost or "the kernel was shut down"
        self._stop_supervisor()
        for sock in self._sockets.values():
            sock.close(linger=0)
        self._sockets.clear()
        if self._context is not None:
            self._context.term()
            self._context = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


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
