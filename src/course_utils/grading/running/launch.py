"""What one kernel is started with: its limits, its environment, its connection and the
supervisor's orders.

Everything here is decided before the kernel runs, from the grader's settings alone; the
driver (``kernel.Kernel``) hands the result to the supervisor (``supervise.py``), which applies
it. The kernel's environment is built from scratch (``environment``): only the variables named
in ``ENVIRONMENT`` come from the grader's shell, so tokens, keys and the grader's paths stay out
of the learner's reach.

    >>> kernel_environment(2)["OMP_NUM_THREADS"], Limits().memory_bytes // GiB
    ('2', 6)
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GiB = 2**30
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


def font_cache() -> Path | None:
    """matplotlib's font list cache, copied into each kernel so it is not rebuilt (seconds)."""
    for folder in [os.environ.get("MPLCONFIGDIR"), os.path.expanduser("~/.cache/matplotlib"),
                   os.path.expanduser("~/.config/matplotlib")]:
        if folder and Path(folder).is_dir():
            found = sorted(Path(folder).glob("fontlist-*.json"))
            if found:
                return found[-1]
    return None




def connection_info(sockets: Path) -> dict[str, Any]:
    """A kernel's connection file, for ZeroMQ sockets named ``<sockets>-<port>`` (transport
    ``ipc``) and a fresh signing key."""
    ports = {f"{name}_port": i for i, name in
             enumerate(("shell", "iopub", "stdin", "control", "hb"), start=1)}
    return {**ports, "ip": str(sockets), "transport": "ipc", "key": secrets.token_hex(32),
            "signature_scheme": "hmac-sha256", "kernel_name": "course-grade"}


def environment(work: Path, *, sandbox: bool, extra: dict[str, str], token: str
                ) -> dict[str, str]:
    """The kernel's environment, built from scratch: the grader's values of the names in
    ``ENVIRONMENT`` (and ``LC_*``), a private home folder and temporary folder in ``work`` (the
    kernel's working folder, as the kernel sees it), the ``extra`` settings and ``token``, the
    mark of this kernel's processes; nothing else of the grader's shell (tokens, keys, paths).
    Without the sandbox the folders are made here; in it, the supervisor makes them."""
    env = {k: v for k, v in os.environ.items() if k in ENVIRONMENT or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    venv_bin = str(Path(sys.executable).parent)  # the course's tools (jupyter, course-grade)
    if venv_bin not in env["PATH"].split(os.pathsep):
        env["PATH"] = venv_bin + os.pathsep + env["PATH"]
    # The kernel imports the grader's own course_utils (the probes and checks talk to it),
    # however the grader found it (an editable install, or PYTHONPATH).
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[3])  # src/
    mpl = work / ".matplotlib"
    cache = font_cache()
    if not sandbox:  # in the sandbox, made there (the cache bound in, read-only)
        mpl.mkdir()
        if cache is not None:
            shutil.copy(cache, mpl / cache.name)
    env.update({
        "MPLCONFIGDIR": str(mpl), "IPYTHONDIR": str(work / ".ipython"),
        "PYTHONDONTWRITEBYTECODE": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
    })
    if sandbox:
        env.update({"HOME": "/tmp/home", "TMPDIR": "/tmp"})
    else:
        tmp, home = work / ".tmp", work / ".home"
        tmp.mkdir()
        home.mkdir()
        env.update({"HOME": str(home), "TMPDIR": str(tmp)})
    env.update(extra)
    env[RUN_MARK] = token
    return env


def supervisor_config(command: list[str], *, folder: Path, env: dict[str, str],
                      limits: Limits, sandbox: bool, seccomp: bytes | None) -> dict[str, Any]:
    """The one line of orders the supervisor reads: the kernel's ``command``, started in
    ``folder``/work with ``env``, under ``limits``; ``seccomp``: the socket filter, if any."""
    rlimits = {"cpu": limits.cpu_seconds, "fsize": limits.file_bytes,
               "nofile": limits.open_files, "core": 0}
    if limits.processes:
        rlimits["nproc"] = _user_tasks() + limits.processes
    return {"command": command, "cwd": str(folder / "work"), "env": env, "limits": rlimits,
            "log": str(folder / "kernel.log"), "folder": str(folder),
            "memory_bytes": limits.memory_bytes, "disk_bytes": limits.disk_bytes,
            "processes": limits.processes, "cgroups": limits.cgroups, "cpus": limits.cpus,
            "seccomp": seccomp.hex() if seccomp else None,
            "sandbox_tmp": "/tmp" if sandbox else None}
