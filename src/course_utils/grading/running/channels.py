"""The grader's end of one kernel's Jupyter channels: signed messages over ZeroMQ sockets.

The shell and control channels carry requests (``send``) and replies; the output channel
(iopub) carries what a cell prints. ``receive`` returns only messages whose signature checks
out with the kernel's key. A single output message larger than ``MAX_MESSAGE_BYTES`` is never
held in memory: ZeroMQ drops the connection instead, a monitor socket says so, and the output
channel is connected again (``receive`` reports it as ``("monitor", {})``).

    channels = Channels({"ip": "/tmp/cg-x/ipc/k", "key": "...", "shell_port": 1, ...})
    msg_id = channels.send("shell", "kernel_info_request", {})
    channels.receive(0.1)   # [("shell", {...the kernel_info_reply...}), ("iopub", {...})]
    channels.close()
"""

from __future__ import annotations

import contextlib
from typing import Any

import zmq
from jupyter_client.session import Session

#: Largest single message taken from the kernel's output channel (larger ones are dropped).
MAX_MESSAGE_BYTES = 8 * 2**20


class Channels:
    """The shell, control and output (iopub) sockets of one kernel, from its connection info
    (transport ``ipc``: ``info["ip"]`` is the sockets' path prefix)."""

    def __init__(self, info: dict[str, Any]) -> None:
        self._context = zmq.Context()
        self._session = Session(key=info["key"].encode(), signature_scheme="hmac-sha256",
                                username="course-grade")
        self._base = f"ipc://{info['ip']}"
        self._ports = {name: info[name + "_port"] for name in ("shell", "control", "iopub")}
        self._sockets: dict[str, zmq.Socket] = {}
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

    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        """Send a request on ``channel`` (shell or control); its fresh ``msg_id``."""
        msg = self._session.msg(msg_type, content)
        self._session.send(self._sockets[channel], msg)
        return msg["header"]["msg_id"]

    def receive(self, timeout: float) -> list[tuple[str, dict[str, Any]]]:
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

    def close(self) -> None:
        """Close every socket and the ZeroMQ context."""
        for sock in self._sockets.values():
            sock.close(linger=0)
        self._sockets.clear()
        if self._context is not None:
            self._context.term()
            self._context = None
