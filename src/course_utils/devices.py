"""What this machine offers the course: versions, CPU threads, the GPUs torch and TensorFlow see.

Every notebook that times or runs a framework starts with::

    from course_utils import devices
    device = devices.torch_device()   # cuda, then mps, then cpu
    devices.report()                  # a table of versions and devices

Set ``COURSE_DEVICE=cpu`` to keep everything on the CPU even where a GPU is present (useful to
make a GPU machine reproduce a CPU run).
"""

from __future__ import annotations

import html
import importlib.metadata
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: The packages whose versions the report lists, by import name -> distribution names to try.
_PACKAGES = {
    "numpy": ("numpy",),
    "torch": ("torch",),
    "tensorflow": ("tensorflow-cpu", "tensorflow"),
    "jax": ("jax",),
    "matplotlib": ("matplotlib",),
    "nbval": ("nbval",),
}


def package_version(import_name: str) -> str | None:
    """The installed version of a package, or ``None`` when it is not installed.

    Reads package metadata, so it does not import (and start) heavy frameworks.
    """
    for dist in _PACKAGES.get(import_name, (import_name,)):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def versions() -> dict[str, str]:
    """Python and the course's main packages, ``"not installed"`` where missing."""
    found = {"python": platform.python_version()}
    for name in _PACKAGES:
        found[name] = package_version(name) or "not installed"
    return found


def cpu_threads() -> dict[str, int]:
    """Logical CPUs on the machine, those this process may use, and torch's intra-op threads."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = {"logical_cpus": os.cpu_count() or 1, "usable_cpus": usable or 1}
    if package_version("torch"):
        import torch

        threads["torch_threads"] = torch.get_num_threads()
    return threads


def torch_gpu() -> str | None:
    """The GPU torch would use (``"cuda:0 (NVIDIA ...)"``, ``"mps"``), or ``None``."""
    if not package_version("torch"):
        return None
    import torch

    if torch.cuda.is_available():
        return f"cuda:0 ({torch.cuda.get_device_name(0)})"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return None


def tf_gpus() -> list[str]:
    """The GPUs TensorFlow sees, by name (empty on a CPU-only build or machine)."""
    if not package_version("tensorflow"):
        return []
    # TensorFlow logs its start-up to stderr; below WARNING is noise for a learner.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    return [gpu.name for gpu in tf.config.list_physical_devices("GPU")]


def jax_devices() -> list[str]:
    """The devices JAX computes on (``["cpu:0"]`` on the CPU build), empty if JAX is missing."""
    if not package_version("jax"):
        return []
    import jax

    return [f"{d.platform}:{d.id}" for d in jax.devices()]


def cuda_details() -> dict[str, str] | None:
    """What torch knows of the CUDA GPU it would use, or ``None`` without one.

    Name, compute capability, memory, the CUDA runtime torch was built with, and cuDNN: the
    facts a GPU timing needs next to it.
    """
    if not package_version("torch"):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return {
        "name": props.name,
        "compute capability": f"{props.major}.{props.minor}",
        "memory": f"{props.total_memory / 2**30:.0f} GiB",
        "CUDA runtime (torch build)": str(torch.version.cuda),
        "cuDNN": str(torch.backends.cudnn.version()),
        "GPUs visible": str(torch.cuda.device_count()),
    }


def synchronize(device=None) -> None:
    """Wait until ``device`` has finished all queued work; a no-op on the CPU.

    CUDA and MPS run asynchronously: an op *queues* a kernel and returns. A timer must wait
    for the queue before it starts (so that earlier work is not counted) and before it stops
    (so that this work is). ``device`` is a ``torch.device``, a string, or ``None`` for
    :func:`torch_device`.
    """
    import torch

    device = torch.device(device) if device is not None else torch_device()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def torch_device():
    """The ``torch.device`` lessons run on: CUDA, then MPS, then the CPU.

    ``COURSE_DEVICE`` (e.g. ``cpu`` or ``cuda:1``) overrides the choice.
    """
    import torch

    forced = os.environ.get("COURSE_DEVICE")
    if forced:
        return torch.device(forced)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


@dataclass
class EnvReport:
    """Rows of (what, value) that show as a table in a notebook and as text in a terminal."""

    rows: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, str]:
        return dict(self.rows)

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self.rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in self.rows)

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in self.rows
        )
        return f"<table class='course-env-report'>{body}</table>"

    def _repr_pretty_(self, p, cycle) -> None:  # IPython's plain-text display
        p.text(str(self))


#: CPU flags (as /proc/cpuinfo names them) that change which kernels a framework can use, and
#: so which verdicts a timing lesson reaches: the names a reader looks for.
_VECTOR_FLAGS = (("avx2", "AVX2"), ("avx512f", "AVX-512"), ("avx512_vnni", "AVX512-VNNI"),
                 ("avx512_bf16", "AVX512-BF16"), ("amx_tile", "AMX"), ("amx_bf16", "AMX-BF16"))


def cpu_model_and_flags(cpuinfo: str | None = None) -> tuple[str, list[str]]:
    """The CPU's model name and which of :data:`_VECTOR_FLAGS` it has (Linux's /proc/cpuinfo;
    elsewhere ``platform.processor()`` and no flags). ``cpuinfo``: that file's text, for tests.
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            return platform.processor() or platform.machine(), []
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    flags = set(fields.get("flags", "").split())
    model = fields.get("model name") or platform.processor() or platform.machine()
    return model, [name for flag, name in _VECTOR_FLAGS if flag in flags]


def timing_context() -> str:
    """One line for the top of a timing lesson: the CPU, its vector units, the cores this
    process may use and the load average, so that a reader can tell why their verdicts differ
    from the committed ones (another CPU, other kernels, a busier machine)."""
    model, flags = cpu_model_and_flags()
    usable = cpu_threads()["usable_cpus"]
    try:
        load = f"load average {os.getloadavg()[0]:.1f} (1 min)"
    except OSError:  # not on this platform
        load = "load average unknown"
    units = ", ".join(flags) if flags else "none of AVX2, AVX-512, AMX reported"
    return f"CPU: {model}; vector units: {units}; {usable} usable core(s); {load}"


def _thread_cpu_ticks() -> dict[str, int]:
    """CPU time of each thread of this process, in clock ticks (user + system, ``man 5 proc``)."""
    ticks = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # the name may hold spaces
        except OSError:  # the thread ended meanwhile
            continue
        ticks[tid] = int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15
    return ticks


def thread_shares(fn: Callable[[], object], seconds: float = 0.5,
                  least: float = 0.1) -> list[float] | None:
    """Which threads of this process do the work of ``fn``: each one's share of the CPU time
    used while ``fn`` is called again and again for about ``seconds`` of CPU time, largest
    first, leaving out threads under ``least``. ``[1.0]``: one thread did it all; a BLAS, XLA
    or thread pool that computes in parallel shows two shares or more. Threads that end before
    the last call returns are not counted (a pool's threads live on). Linux only (per-thread
    times from /proc); ``None`` elsewhere, or if the clock ticks saw no work.

    >>> thread_shares(lambda: sum(range(1000)), seconds=0.2)  # doctest: +SKIP
    [1.0]
    """
    if not os.path.isdir("/proc/self/task"):
        return None
    before, start = _thread_cpu_ticks(), time.process_time()
    while time.process_time() - start < seconds:
        fn()
    after = _thread_cpu_ticks()
    used = [after[tid] - before.get(tid, 0) for tid in after]
    total = sum(used)
    if total <= 0:
        return None
    return sorted((u / total for u in used if u >= least * total), reverse=True)


def report() -> EnvReport:
    """The report lesson 00 shows: versions, CPUs, and the devices each framework sees."""
    rows = [(name, version) for name, version in versions().items()]
    rows.append(("platform", f"{platform.system()} {platform.machine()}"))
    rows += [(name.replace("_", " "), str(n)) for name, n in cpu_threads().items()]
    rows.append(("torch GPU", torch_gpu() or "none (CPU only)"))
    gpus = tf_gpus()
    rows.append(("TensorFlow GPU", ", ".join(gpus) if gpus else "none (CPU only)"))
    if package_version("jax"):
        rows.append(("JAX devices", ", ".join(jax_devices())))
    if package_version("torch"):
        rows.append(("lessons run torch on", str(torch_device())))
    return EnvReport(rows)


def main(argv: list[str] | None = None) -> int:
    """``course-env``: print the environment report."""
    print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
