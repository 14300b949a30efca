"""Start JupyterLab the way `make lab` does, on a port of its own choosing, and always stop it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from machine_speed import slowness

ROOT = Path(__file__).resolve().parents[1]
#: Locked while `make lab` (re)installs the course's kernel into .venv: its `kernel` step deletes
#: and copies the kernelspec's folder, and two at once (test_browser.py and test_make_lab.py in
#: two pytest workers, or two test runs) fail with FileExistsError, or show a server a
#: kernelspec that is half there. The lock is taken on the Makefile itself (flock): no file to
#: create, and every checkout has one.
KERNEL_LOCK = ROOT / "Makefile"


_GIVEN: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A free loopback port for a server that another process will bind later (the Hub and its
    proxy take fixed ports). It is chosen outside the range from which the system hands out
    ports to bind(port 0) and to outgoing connections, so that no kernel, browser or other test
    that asks the system for a port can take it between now and then; only a process that
    picks fixed ports itself could. Never the same port twice in one process."""
    low, high = _ephemeral_range()
    if low >= 16384:
        span = (low // 2, low)  # e.g. 16384-32767 below Linux's default range
    elif high <= 60000:
        span = (high + 1, 65536)
    else:  # the system hands out nearly every port: take one from it, as before
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    for _ in range(200):
        port = random.randrange(*span)
        if port in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            _GIVEN.add(port)
            return port
    raise RuntimeError(f"no free port in {span[0]}-{span[1] - 1}")


@contextlib.contextmanager
def kernel_install_lock():
    """Held by one `make lab` at a time, across processes, while it installs the kernel."""
    with open(KERNEL_LOCK, "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass
class Lab:
    port: int
    token: str
    log: list[str]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        """The address of `path` (e.g. "lab/tree/notebooks/00_setup.ipynb") with the token."""
        return f"{self.base}/{path}?token={self.token}"

    def get_json(self, api_path: str, patience: float = 30.0 * slowness()):
        """GET a JSON document, retrying while the server is still starting to listen."""
        deadline = time.monotonic() + patience
        while True:
            try:
                with urllib.request.urlopen(self.url(api_path), timeout=10) as response:
                    return json.load(response)
            except urllib.error.URLError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


@contextlib.contextmanager
def running_lab(startup_timeout: float = 90.0 * slowness(), hold_kernel_lock: bool = False):
    """Run `make lab PORT=0` in its own process group; yield a `Lab`; stop it.

    PORT=0: JupyterLab binds a port the system gives it and prints it in its URL, which is read
    from there (a port found free here could be taken by another process before the server
    binds it). The kernel install lock is held until the server answers, or, with
    ``hold_kernel_lock``, until it stops (for a test that reads the kernelspecs, which another
    `make lab` would otherwise reinstall under it)."""
    env = {**os.environ, "BROWSER": "true"}  # never let the server open a browser itself
    with contextlib.ExitStack() as locked:
        locked.enter_context(kernel_install_lock())
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "lab", "PORT=0"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
        try:
            log: list[str] = []
            found = None
            deadline = time.monotonic() + startup_timeout
            while found is None and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                log.append(line)
                found = re.search(r"http://127\.0\.0\.1:(\d+)/lab\?token=(\w+)", line)
            if found is None:
                raise RuntimeError("make lab printed no URL with a token:\n" + "".join(log[-30:]))
            lab = Lab(int(found.group(1)), found.group(2), log)
            # Keep reading what the server and its kernels print: a full pipe would block them.
            threading.Thread(target=log.extend, args=(proc.stdout,), daemon=True).start()
            lab.get_json("api/status")  # wait until it answers
            if not hold_kernel_lock:
                locked.close()
            yield lab
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
