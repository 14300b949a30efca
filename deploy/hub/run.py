"""`make hub`: JupyterHub for a class in the foreground; Ctrl-C (or SIGTERM) stops it cleanly.

Starts `jupyterhub -f jupyterhub_config.py` with every setting from the environment (see that file)
and a mark, COURSE_HUB=<random>, that the Hub, its proxy and every learner's server and kernel
inherit. On Ctrl-C it asks the Hub to stop (which stops the learners' servers and the proxy),
waits, and then kills whatever process still carries the mark, so nothing is left running.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARK = "COURSE_HUB"


def marked(token: str) -> list[int]:
    """Processes whose environment holds COURSE_HUB=token (all of this Hub's)."""
    needle = f"{MARK}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def stop(hub: subprocess.Popen, token: str, grace: float = 60.0) -> int:
    """Stop the Hub (SIGTERM: it stops the servers and the proxy), then kill any process left
    with the mark; returns how many had to be killed."""
    if hub.poll() is None:
        hub.send_signal(signal.SIGTERM)
        try:
            hub.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            hub.kill()
            hub.wait()
    killed = 0
    for _ in range(5):
        left = marked(token)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    return killed


def main() -> int:
    token = secrets.token_hex(8)
    env = {**os.environ, MARK: token}
    runtime = Path(env.setdefault("HUB_RUNTIME", str(HERE / "run")))
    runtime.mkdir(parents=True, exist_ok=True)
    (runtime / "hub.mark").write_text(token)  # for a test that checks nothing is left running
    jupyterhub = Path(sys.executable).parent / "jupyterhub"
    command = [str(jupyterhub), "-f", str(HERE / "jupyterhub_config.py")]
    hub = subprocess.Popen(command, cwd=runtime, env=env, start_new_session=True)
    port = env.get("HUB_PORT", "8000")
    print(f"JupyterHub for the class: http://127.0.0.1:{port}/ (Ctrl-C stops it)", flush=True)
    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    while hub.poll() is None and not stopping:
        time.sleep(0.2)
    code = hub.returncode
    killed = stop(hub, token)
    print(f"JupyterHub stopped{f'; killed {killed} process(es) it left' if killed else ''}; "
          "nothing of it is running", flush=True)
    return 0 if stopping else (code or 0)


if __name__ == "__main__":
    sys.exit(main())
