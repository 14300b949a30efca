"""`make lab`, the README's "start the course" command, serves the course."""

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, patience: float = 30.0):
    """GET a JSON document, retrying while the server is still starting to listen."""
    deadline = time.monotonic() + patience
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.load(response)
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.slow
def test_make_lab_serves_the_course():
    port = free_port()
    env = {**os.environ, "BROWSER": "true"}  # never try to open a browser from a test
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"PORT={port}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )
    try:
        url, log = None, []
        deadline = time.monotonic() + 90
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            log.append(line)
            found = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=(\w+)", line)
            url = found and found.group(0)
        assert url, "make lab printed no URL with a token:\n" + "".join(log[-20:])
        token = url.rsplit("=", 1)[1]
        listing = get_json(f"http://127.0.0.1:{port}/api/contents/notebooks?token={token}")
        names = {item["name"] for item in listing["content"]}
        assert "00_setup.ipynb" in names, f"the server does not serve the lessons: {names}"
        specs = get_json(f"http://127.0.0.1:{port}/api/kernelspecs?token={token}")
        displays = {k: v["spec"]["display_name"] for k, v in specs["kernelspecs"].items()}
        assert displays.get("graph-course") == "Python 3 (graph course)", displays
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
