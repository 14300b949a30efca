"""Start JupyterLab the way `make lab` does, on a free loopback port, and always stop it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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

    def get_json(self, api_path: str, patience: float = 30.0):
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
def running_lab(startup_timeout: float = 90.0):
    """Run `make lab PORT=<free port>` in its own process group; yield a `Lab`; stop it."""
    port = free_port()
    env = {**os.environ, "BROWSER": "true"}  # never let the server open a browser itself
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"PORT={port}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )
    try:
        log: list[str] = []
        token = None
        deadline = time.monotonic() + startup_timeout
        while token is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            log.append(line)
            found = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=(\w+)", line)
            token = found and found.group(1)
        if token is None:
            raise RuntimeError("make lab printed no URL with a token:\n" + "".join(log[-30:]))
        lab = Lab(port, token, log)
        lab.get_json("api/status")  # wait until it answers
        yield lab
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
