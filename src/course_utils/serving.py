"""Serve a model on loopback and measure it the way its clients see it.

Timing ``model(x)`` in a loop measures the model. A server's clients see more: their request waits
while the model serves others, crosses a socket twice, and may share one model call with other
requests. This module has the three pieces lesson 11 needs to measure that, each short enough to
read in one go:

- a **wire format**: a request is a float32 matrix sent as ``(rows, columns)`` and its bytes; the
  reply is the model's output rows, sent the same way (or an error message);
- :class:`Server`: an asyncio TCP server on 127.0.0.1 that answers each request with
  ``predict(rows)``, run by one worker thread (one model replica). With ``max_batch > 1`` it
  **batches dynamically** (:class:`Batcher`): requests that arrived while the model was busy, or
  within ``max_wait_ms`` of the first, go into one model call, and each client gets back exactly
  its own rows. It serves loopback only unless told otherwise, refuses a request larger than
  ``max_request_bytes``, drops a connection whose request is not complete within
  ``request_timeout_s`` of its first byte or that waits ``idle_timeout_s`` for one, keeps at
  most ``max_connections`` open (a new client takes the place of the longest idle one) and
  buffers at most ``max_buffered_bytes`` of requests at once;
- :func:`load_test`: **closed-loop** clients, each sending a request, waiting for the reply and
  sending the next, as callers who wait for their answer do. It reports the latency percentiles the
  requests saw and the throughput (completed requests per second);
- :func:`open_loop_test`: **open-loop** load, requests arriving at random (Poisson) times at a
  set rate whether or not earlier ones were answered, as independent users' requests do. Latency
  against offered load shows what a closed loop hides: past the server's capacity the queue, and
  every request's wait, grows for as long as the load lasts.

Little's law ties the two numbers: ``c`` closed-loop clients keep ``c`` requests in flight, so
throughput = c / mean latency. Throughput can grow many times while latency falls a little (or
even rises) when more requests are in flight and the server serves them together.

NB: TensorFlow Serving (``max_batch_size``, ``batch_timeout_micros``), Triton Inference Server
(``max_queue_delay_microseconds``) and TorchServe (``batch_size``, ``max_batch_delay``) batch the
same way: a largest batch and a longest wait.

>>> with Server(lambda x: 2 * x, max_batch=8) as server, Client(server.address) as client:
...     client.predict(np.array([[1.0, 2.0]], dtype=np.float32)).tolist()
[[2.0, 4.0]]
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import itertools
import json
import math
import numbers
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Batcher", "Client", "LoadReport", "LoadResult", "OpenLoopReport", "OpenLoopResult",
           "Server", "ServerError", "decode", "encode", "load_test", "open_loop_test",
           "percentile", "split_rows"]

Predict = Callable[[np.ndarray], Any]

# ----------------------------------------------------------------------------- wire format

#: Every message starts with two unsigned 32-bit integers in network byte order: rows, columns.
HEADER = struct.Struct("!II")
#: ``rows`` takes this value in an error reply; ``columns`` is then the message's length in bytes.
ERROR_ROWS = 0xFFFFFFFF
#: A load-test window gives up on a server that has not answered this long after it should end.
STALL_S = 30.0
#: The largest request body a :class:`Server` reads by default: 4 MiB, a million float32 values
#: (lesson 11 sends rows of 64 pixels: its largest request, the whole test set, is about 100 KB).
MAX_REQUEST_BYTES = 4 << 20
#: How long a :class:`Server` waits for the rest of a request once its first byte has arrived.
REQUEST_TIMEOUT_S = 10.0
#: How long a :class:`Server` keeps a connection that sends nothing between requests.
IDLE_TIMEOUT_S = 60.0
#: The most request bytes a :class:`Server` holds at once, all connections together (16
#: requests of the largest size): 200 unfinished 4 MiB requests held 836 MB (issue 37).
MAX_BUFFERED_BYTES = 64 << 20
#: The most connections a :class:`Server` keeps open by default: 256, or a quarter of the
#: process's open-file limit if that is fewer (343 idle connections used up the descriptors and
#: locked every other client out; the server's loop then logged 62,295 failed accepts).
MAX_CONNECTIONS = 256
#: A closed-loop window lasts at least this many mean latencies (up to ten times its
#: ``duration_s``): the requests still in flight when it closes, which it does not count, are then
#: a small share of those it counts, and in flight = throughput x mean latency reads close to the
#: number of clients (about 1 / WINDOW_LATENCIES low).
WINDOW_LATENCIES = 20


class ServerError(RuntimeError):
    """The server could not answer a request (its message says why)."""


def encode(array: Any) -> bytes:
    """A 2-D array as one message: the header, then its values as little-endian float32.

    >>> decode(encode([[1, 2, 3]])).tolist()
    [[1.0, 2.0, 3.0]]
    """
    a = np.ascontiguousarray(np.asarray(array), dtype="<f4")
    if a.ndim != 2:
        raise ValueError(f"a request or reply is a 2-D array (rows, columns); got shape {a.shape}: "
                         "send one sample as x.reshape(1, -1)")
    return HEADER.pack(*a.shape) + a.tobytes()


def encode_error(message: str) -> bytes:
    """An error reply: the header with ``rows = ERROR_ROWS``, then the UTF-8 message."""
    data = message.encode()
    return HEADER.pack(ERROR_ROWS, len(data)) + data


def decode(message: bytes) -> np.ndarray:
    """The array in one complete message (the inverse of :func:`encode`).

    A message that is not exactly one header and the bytes it announces raises ``ValueError``
    saying what is wrong (``decode(encode(x)[:-1])``: "the header announces ... 11 bytes follow
    it"); an error reply raises :class:`ServerError` with its message.
    """
    message = bytes(message)
    if len(message) < HEADER.size:
        raise ValueError(f"a message starts with a header of {HEADER.size} bytes (rows, columns "
                         f"as two unsigned 32-bit integers); got {len(message)} bytes in all: "
                         f"pass one whole message, as encode() returns it")
    rows, cols = HEADER.unpack_from(message)
    body, size = message[HEADER.size:], _body_size(rows, cols)
    if len(body) != size:
        what = (f"an error message of {cols:,} bytes" if rows == ERROR_ROWS else
                f"{rows:,} x {cols:,} float32 values ({size:,} bytes)")
        raise ValueError(f"the header announces {what} but {len(body):,} bytes follow it: the "
                         f"message is truncated, has bytes added, or is not in this wire format")
    return _array(rows, cols, body)


def _array(rows: int, cols: int, body: bytes) -> np.ndarray:
    if rows == ERROR_ROWS:
        raise ServerError(body.decode(errors="replace"))
    return np.frombuffer(bytearray(body), dtype="<f4").reshape(rows, cols)  # writable, for torch


def _body_size(rows: int, cols: int) -> int:
    return cols if rows == ERROR_ROWS else rows * cols * 4


async def read_message(reader: asyncio.StreamReader) -> tuple[int, int, bytes]:
    """Read one message from a stream: (rows, columns, body)."""
    rows, cols = HEADER.unpack(await reader.readexactly(HEADER.size))
    return rows, cols, await reader.readexactly(_body_size(rows, cols))


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise ConnectionError("the server closed the connection before it replied")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# ----------------------------------------------------------------------------- batching


def split_rows(outputs: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """Cut a batch's output back into one block of rows per request, in order.

    ``sizes`` are the requests' row counts: ints >= 0 that add up to ``len(outputs)``.

    >>> [part.tolist() for part in split_rows(np.arange(5), [2, 3])]
    [[0, 1], [2, 3, 4]]
    """
    sizes = list(sizes)
    for i, n in enumerate(sizes):
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 0:
            more = " ..." if len(sizes) > 8 else ""
            raise ValueError(f"sizes are the row counts of the requests, each an int >= 0; "
                             f"sizes[{i}] is {n!r} (in {sizes[:8]}{more})")
    if len(outputs) != sum(sizes):
        raise ValueError(f"the model returned {len(outputs)} rows for a batch of {sum(sizes)}: "
                         "predict must return one output row per input row")
    return np.split(outputs, np.cumsum(sizes)[:-1])


class Batcher:
    """Turns requests from many connections into model calls of at most ``max_batch`` rows.

    ``submit(x)`` queues one request and waits for its rows of the answer. ``run()`` takes the
    first waiting request, adds the requests already waiting (and, with ``max_wait_ms``, those
    that arrive that long after the first) up to ``max_batch`` rows, calls ``predict`` once on
    their rows stacked, and hands each request its own rows. ``max_batch=1`` is a server without
    batching: one model call per request, in arrival order.

    ``predict`` runs on the event loop's thread: while it runs, new requests wait in their
    sockets, and they make up the next batch. ``batch_sizes`` lists the rows of every call;
    ``cpu_s`` is the CPU time that thread had used when the last call returned (reading,
    batching, the model and writing replies: all the server's work), which a busy machine
    inflates far less than wall time.
    """

    def __init__(self, predict: Predict, max_batch: int = 1, max_wait_ms: float = 0.0):
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1 (1 means no batching); got {max_batch}")
        if max_wait_ms < 0:
            raise ValueError(f"max_wait_ms cannot be negative; got {max_wait_ms}")
        self.predict, self.max_batch, self.max_wait_s = predict, max_batch, max_wait_ms / 1000
        self.batch_sizes: list[int] = []
        self.cpu_s = 0.0
        self._queue: asyncio.Queue | None = None
        self._held: tuple[np.ndarray, asyncio.Future] | None = None  # didn't fit the last batch

    def _pending(self) -> asyncio.Queue:
        if self._queue is None:  # made on first use, inside the loop that serves it
            self._queue = asyncio.Queue()
        return self._queue

    async def submit(self, x: np.ndarray) -> np.ndarray:
        """Queue one request (a 2-D array) and wait for the model's rows for it."""
        future = asyncio.get_running_loop().create_future()
        self._pending().put_nowait((x, future))
        return await future

    async def run(self) -> None:
        """Serve batches until cancelled."""
        while True:
            batch = await self._next_batch()
            inputs = [x for x, _ in batch]
            self.batch_sizes.append(sum(len(x) for x in inputs))
            try:
                stacked = inputs[0] if len(inputs) == 1 else np.concatenate(inputs)
                outputs = _call(self.predict, stacked)
                parts = split_rows(outputs, [len(x) for x in inputs])
            except Exception as err:  # every request of the batch gets the error
                parts = [err] * len(batch)
            self.cpu_s = time.thread_time()
            for (_, future), part in zip(batch, parts, strict=True):
                if future.done():  # its client hung up
                    continue
                if isinstance(part, Exception):
                    future.set_exception(part)
                else:
                    future.set_result(part)

    async def _next_batch(self) -> list[tuple[np.ndarray, asyncio.Future]]:
        queue, loop = self._pending(), asyncio.get_running_loop()
        first = self._held or await queue.get()
        self._held = None
        batch, rows = [first], len(first[0])
        deadline = loop.time() + self.max_wait_s
        while rows < self.max_batch:
            if not queue.empty():
                item = queue.get_nowait()
            elif (left := deadline - loop.time()) > 0:
                try:
                    item = await asyncio.wait_for(queue.get(), left)
                except TimeoutError:
                    break
            else:
                break
            # Only requests of one width stack, and a batch never grows past max_batch rows.
            if item[0].shape[1] != first[0].shape[1] or rows + len(item[0]) > self.max_batch:
                self._held = item
                break
            batch.append(item)
            rows += len(item[0])
        return batch


def _call(predict: Predict, x: np.ndarray) -> np.ndarray:
    """Run the model; its output as a 2-D float32 numpy array (torch and TF tensors welcome)."""
    y = predict(x)
    if hasattr(y, "detach"):  # a torch tensor
        y = y.detach().cpu().numpy()
    y = np.asarray(y)
    return y.reshape(len(y), -1) if y.ndim != 2 else y


# ----------------------------------------------------------------------------- server


class Server:
    """A TCP server on loopback that answers each request with ``predict(rows)``.

    It runs an asyncio event loop in a background thread of this process, with one connection per
    client and one worker thread for the model (:class:`Batcher`). Use it as a context manager,
    or call :meth:`start` and :meth:`stop`. ``address`` is ``(host, port)``; port 0 picks a free
    one. ``batch_sizes`` lists the rows of every model call so far.

    It runs ``predict`` for anyone who can connect, with no authentication: so ``host`` must be a
    loopback address (127.x.x.x, ::1, localhost) unless ``allow_remote=True`` says you mean it.
    A request whose body is larger than ``max_request_bytes`` gets an error reply (HTTP would say
    413, "content too large") and its connection is closed, before its body is read; so is one
    not complete ``request_timeout_s`` seconds after its first byte (a client that sends half a
    request and waits holds nothing for long). A connection that sends nothing for
    ``idle_timeout_s`` between requests is closed. At most ``max_connections`` are open at once:
    past that a new client takes the place of the connection idle the longest, or, if every one
    is in the middle of a request, gets a "server busy" error reply. The bodies being read, all
    connections together, hold at most ``max_buffered_bytes``: a request that would go over gets
    a "server busy" reply (HTTP's 503) before its body is read.
    """

    def __init__(self, predict: Predict, *, max_batch: int = 1, max_wait_ms: float = 0.0,
                 host: str = "127.0.0.1", port: int = 0,
                 max_request_bytes: int = MAX_REQUEST_BYTES,
                 request_timeout_s: float = REQUEST_TIMEOUT_S,
                 idle_timeout_s: float = IDLE_TIMEOUT_S,
                 max_connections: int | None = None,
                 max_buffered_bytes: int = MAX_BUFFERED_BYTES, allow_remote: bool = False):
        if not allow_remote and not _is_loopback(host):
            raise ValueError(
                f"Server(host={host!r}) would take requests from other machines, and it runs "
                f"predict for anyone who connects, with no authentication or encryption. Serve "
                f"on host='127.0.0.1' (the default) and put a real server in front of it; pass "
                f"allow_remote=True only on a network you trust")
        if not isinstance(max_request_bytes, int) or max_request_bytes < HEADER.size:
            raise ValueError(f"max_request_bytes is the largest request body in bytes, an int "
                             f"of at least {HEADER.size}; got {max_request_bytes!r}")
        for name, seconds in (("request_timeout_s", request_timeout_s),
                              ("idle_timeout_s", idle_timeout_s)):
            if not (isinstance(seconds, numbers.Real) and seconds > 0):
                raise ValueError(f"{name} is a number of seconds > 0; got {seconds!r}")
        max_connections = _default_connections() if max_connections is None else max_connections
        if not isinstance(max_connections, int) or max_connections < 1:
            raise ValueError(f"max_connections is the most connections open at once, an int "
                             f">= 1; got {max_connections!r}")
        if not isinstance(max_buffered_bytes, int) or max_buffered_bytes < max_request_bytes:
            raise ValueError(f"max_buffered_bytes is the most request bytes held at once, an "
                             f"int of at least max_request_bytes ({max_request_bytes:,}); got "
                             f"{max_buffered_bytes!r}")
        self.batcher = Batcher(predict, max_batch, max_wait_ms)
        self.host, self.port = host, port
        self.max_request_bytes, self.request_timeout_s = max_request_bytes, request_timeout_s
        self.idle_timeout_s, self.max_connections = idle_timeout_s, max_connections
        self.max_buffered_bytes = max_buffered_bytes
        self.buffered = 0  # request bytes being read now, all connections together
        # connection -> when it last went idle (None: in the middle of a request); oldest first
        self._connections: dict[asyncio.StreamWriter, float | None] = {}
        self.address: tuple[str, int] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None

    @property
    def batch_sizes(self) -> list[int]:
        """The rows of every model call so far."""
        return list(self.batcher.batch_sizes)

    @property
    def cpu_s(self) -> float:
        """The CPU time the server's thread had used when its last model call returned."""
        return self.batcher.cpu_s

    def start(self) -> Server:
        if self._thread is not None:
            raise RuntimeError("this server is already started; make a new Server to serve again")
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True,
                                        name=f"serving {self.host}:{self.port}")
        self._thread.start()
        self._started.wait()
        if self._failure is not None:
            raise RuntimeError(f"the server could not start: {self._failure}") from self._failure
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=10)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = "not started" if self.address is None else f"{self.address[0]}:{self.address[1]}"
        return (f"<Server {where}, max_batch={self.batcher.max_batch}, "
                f"max_wait_ms={self.batcher.max_wait_s * 1000:g}>")

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        try:
            # backlog also caps how many connections the loop accepts at once, before any
            # handler could make room: kept under max_connections, they cannot run the
            # process out of descriptors together.
            server = await asyncio.start_server(self._handle, self.host, self.port,
                                                backlog=min(100, self.max_connections))
        except OSError as err:
            self._failure = err
            self._started.set()
            return
        self.address = server.sockets[0].getsockname()[:2]
        batching = asyncio.create_task(self.batcher.run())
        self._started.set()
        async with server:
            await self._stop.wait()
        batching.cancel()
        # Let the connection handlers see their cancellation before the loop closes.
        await asyncio.gather(batching, return_exceptions=True)

    def _admit(self, writer: asyncio.StreamWriter) -> bool:
        """Make room for a new connection: close the one idle the longest if all places are
        taken; False if every open connection is in the middle of a request."""
        if len(self._connections) >= self.max_connections:
            idle = [(since, w) for w, since in self._connections.items() if since is not None]
            if not idle:
                return False
            oldest = min(idle, key=lambda pair: pair[0])[1]
            self._connections.pop(oldest)
            oldest.transport.abort()  # its handler's read ends; it sent nothing to answer
        self._connections[writer] = time.monotonic()
        return True

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not self._admit(writer):
            writer.write(encode_error(f"server busy: {self.max_connections} connections are in "
                                      f"the middle of a request (Server(..., max_connections="
                                      f"...)); try again"))
            writer.close()  # at once: a refused connection holds nothing
            return
        try:
            while True:
                try:
                    request = await self._read_request(reader, writer)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return  # the client hung up
                except _Refused as refused:  # its body is never read: answer, then hang up
                    writer.write(encode_error(str(refused)))
                    await writer.drain()
                    await self._drain_and_close(reader, writer)
                    return
                if request is None:
                    return  # the client hung up between requests
                rows, cols, body = request
                if rows == ERROR_ROWS or rows == 0:
                    writer.write(encode_error("a request must hold at least one row"))
                elif cols == 0:
                    writer.write(encode_error("a request's rows must hold at least one value"))
                else:
                    try:
                        writer.write(encode(await self.batcher.submit(_array(rows, cols, body))))
                    except Exception as err:  # the model failed: tell this client why
                        writer.write(encode_error(f"predict failed: {type(err).__name__}: {err}"))
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            self._connections.pop(writer, None)
            writer.close()

    async def _read_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                            ) -> tuple[int, int, bytes] | None:
        """The next request, or ``None`` if the client hung up (or was idle too long, or made
        room for another) before sending one.

        The connection waits at most ``idle_timeout_s`` for a request's first byte; from there
        the whole request must arrive within ``request_timeout_s``, and its body is read only if
        its header announces at most ``max_request_bytes`` and the server holds room for it
        under ``max_buffered_bytes``.
        """
        self._connections[writer] = time.monotonic()  # idle: the first to make room
        try:
            async with asyncio.timeout(self.idle_timeout_s):
                first = await reader.read(1)
        except (TimeoutError, ConnectionError):
            return None
        if not first or writer not in self._connections:
            return None
        self._connections[writer] = None  # busy until the reply is sent
        try:
            async with asyncio.timeout(self.request_timeout_s):
                rows, cols = HEADER.unpack(first + await reader.readexactly(HEADER.size - 1))
                size = _body_size(rows, cols)
                if size > self.max_request_bytes:
                    what = ("an error message" if rows == ERROR_ROWS
                            else f"a request of {rows:,} x {cols:,} float32 values")
                    raise _Refused(
                        f"request too large: {what} is {size:,} bytes, more than this server's "
                        f"max_request_bytes={self.max_request_bytes:,}; send fewer rows per "
                        f"request, or start the server with a larger Server(..., "
                        f"max_request_bytes=...)")
                if self.buffered + size > self.max_buffered_bytes:
                    raise _Refused(
                        f"server busy: it holds {self.buffered:,} bytes of requests being read, "
                        f"and this one's {size:,} would pass its max_buffered_bytes="
                        f"{self.max_buffered_bytes:,}; try again")
                self.buffered += size
                try:
                    return rows, cols, await reader.readexactly(size)
                finally:
                    self.buffered -= size
        except TimeoutError:
            raise _Refused(f"request timed out: it was not complete {self.request_timeout_s:g} s "
                           f"after its first byte (Server(..., request_timeout_s=...))") from None

    async def _drain_and_close(self, reader: asyncio.StreamReader,
                               writer: asyncio.StreamWriter) -> None:
        """Close after a refused request without losing the error reply: read (and drop) what
        the client still sends, a chunk at a time, until it hangs up or ``request_timeout_s``
        has passed (closing a socket with unread data would reset it, reply and all)."""
        try:
            writer.write_eof()
            async with asyncio.timeout(self.request_timeout_s):
                while await reader.read(1 << 16):
                    pass
        except (TimeoutError, ConnectionError, OSError):
            pass


def _default_connections() -> int:
    """``MAX_CONNECTIONS``, or a quarter of the open-file limit where that is lower."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(1, min(MAX_CONNECTIONS, soft // 4))


class _Refused(Exception):
    """A request the server will not read: its message is the error reply the client gets."""


def _is_loopback(host: Any) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # "" or None (every interface), or a host name
        return False


class Client:
    """One blocking connection to a :class:`Server`: ``client.predict(x)`` sends x, returns rows.

    A 1-D ``x`` is sent as one row (and one row comes back, as a 2-D array).
    """

    def __init__(self, address: tuple[str, int], timeout: float = 30.0):
        self.sock = socket.create_connection(tuple(address), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def predict(self, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        self.sock.sendall(encode(x.reshape(1, -1) if x.ndim == 1 else x))
        rows, cols = HEADER.unpack(_recv_exactly(self.sock, HEADER.size))
        return _array(rows, cols, _recv_exactly(self.sock, _body_size(rows, cols)))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ----------------------------------------------------------------------------- load test


def percentile(samples: Sequence[float] | np.ndarray, q: float) -> float:
    """The ``q``-th percentile (0 to 100) of ``samples``, interpolating linearly between ranks.

    The sorted samples sit at positions 0 .. n-1; the percentile is read at position
    ``(n - 1) * q / 100``, between its two neighbours (numpy's default method, "linear").

    >>> percentile([1, 2, 3, 4], 50), percentile(range(1, 101), 99)
    (2.5, 99.01)
    """
    if not 0 <= q <= 100:
        raise ValueError(f"q is a percentage from 0 to 100; got {q}")
    xs = sorted(float(s) for s in samples)
    if not xs:
        raise ValueError("the percentile of no samples is undefined: the load test completed "
                         "no request (raise duration_s?)")
    position = (len(xs) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(xs) - 1)
    return round(xs[low] + (xs[high] - xs[low]) * (position - low), 12)


@dataclass
class LoadResult:
    """What ``concurrency`` closed-loop clients of server ``label`` measured in one window.

    ``latencies_s`` holds one value per request completed in the window of ``duration_s``
    seconds (from sending it to reading the whole reply, as the client saw it); ``round`` says
    which round of :func:`load_test` took it. When the server was a :class:`Server`,
    ``mean_batch`` is its mean rows per model call in the window and ``cpu_per_request`` its CPU
    time per request (seconds). ``in_flight`` is Little's law read backwards,
    throughput x mean latency: the average number of requests in flight, which a closed loop
    keeps near ``concurrency``.
    """

    label: str
    concurrency: int
    duration_s: float
    latencies_s: np.ndarray = field(repr=False)
    round: int = 0
    mean_batch: float | None = None
    cpu_per_request: float | None = None

    @property
    def completed(self) -> int:
        return len(self.latencies_s)

    @property
    def throughput(self) -> float:
        """Completed requests per second."""
        return self.completed / self.duration_s

    def latency(self, q: float) -> float:
        """The q-th percentile of the latency, in seconds."""
        return percentile(self.latencies_s, q)

    @property
    def mean_latency(self) -> float:
        return float(np.mean(self.latencies_s))

    @property
    def in_flight(self) -> float:
        return self.throughput * self.mean_latency

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "concurrency": self.concurrency, "round": self.round,
                "duration_s": self.duration_s, "mean_batch": self.mean_batch,
                "cpu_per_request": self.cpu_per_request,
                "latencies_s": [float(v) for v in self.latencies_s]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadResult:
        return cls(data["label"], data["concurrency"], data["duration_s"],
                   np.asarray(data["latencies_s"], dtype=float), data.get("round", 0),
                   data.get("mean_batch"), data.get("cpu_per_request"))


@dataclass(repr=False)
class LoadReport:
    """Every window of a :func:`load_test`: per server and concurrency, one result per round.

    Throughput is summarised by its median over rounds; latency percentiles pool the requests of
    all rounds. :meth:`ratios` pairs two servers round by round (their windows ran back to back),
    which is what a verdict should be decided from on a busy machine.
    """

    results: list[LoadResult]

    @property
    def labels(self) -> list[str]:
        return list(dict.fromkeys(r.label for r in self.results))

    @property
    def levels(self) -> list[int]:
        return sorted({r.concurrency for r in self.results})

    def windows(self, label: str, concurrency: int) -> list[LoadResult]:
        """The results of one server at one concurrency, in round order."""
        found = sorted((r for r in self.results
                        if r.label == label and r.concurrency == concurrency),
                       key=lambda r: r.round)
        if not found:
            raise KeyError(f"no results for server {label!r} with {concurrency} clients; "
                           f"servers: {self.labels}, clients: {self.levels}")
        return found

    def throughput(self, label: str, concurrency: int) -> float:
        """The median over rounds of the requests per second."""
        return float(np.median([r.throughput for r in self.windows(label, concurrency)]))

    def latencies(self, label: str, concurrency: int) -> np.ndarray:
        """Every request's latency, all rounds pooled, in seconds."""
        return np.concatenate([r.latencies_s for r in self.windows(label, concurrency)])

    def latency(self, label: str, concurrency: int, q: float) -> float:
        """The q-th percentile of the pooled latencies, in seconds."""
        return percentile(self.latencies(label, concurrency), q)

    def in_flight(self, label: str, concurrency: int) -> float:
        """Little's law, throughput x mean latency: the median over rounds of the requests in
        flight on average."""
        return float(np.median([r.in_flight for r in self.windows(label, concurrency)]))

    def mean_batch(self, label: str, concurrency: int) -> float | None:
        """Rows per model call, over all rounds (None if the server's calls were not seen)."""
        sizes = [r.mean_batch for r in self.windows(label, concurrency)]
        return None if None in sizes else float(np.mean(sizes))

    def cpu_per_request(self, label: str, concurrency: int) -> float | None:
        """The server's CPU time per request, median over rounds (None if not seen)."""
        cpu = [r.cpu_per_request for r in self.windows(label, concurrency)]
        return None if None in cpu else float(np.median(cpu))

    def ratios(self, label: str, baseline: str, concurrency: int, *,
               baseline_concurrency: int | None = None, stat: str = "time") -> list[float]:
        """Round-by-round ratios of ``label`` to ``baseline``; below 1, ``label`` does better.

        ``stat="time"``: time per request, i.e. the baseline's throughput over this one's;
        ``"cpu"``: the server's CPU time per request; ``"p50"``, ``"p95"`` or ``"p99"``: that
        latency percentile. ``baseline_concurrency`` compares with another number of clients.
        """
        ours = self.windows(label, concurrency)
        theirs = self.windows(baseline, baseline_concurrency or concurrency)
        if len(ours) != len(theirs):
            raise ValueError(f"{label!r} and {baseline!r} ran a different number of rounds")
        pairs = list(zip(ours, theirs, strict=True))
        if stat == "time":
            return [b.throughput / a.throughput if a.throughput else math.inf for a, b in pairs]
        if stat == "cpu":
            if any(r.cpu_per_request is None for pair in pairs for r in pair):
                raise ValueError("CPU time per request is known only for course Servers")
            return [a.cpu_per_request / b.cpu_per_request for a, b in pairs]
        if stat in ("p50", "p95", "p99"):
            q = float(stat[1:])
            return [a.latency(q) / b.latency(q) for a, b in pairs]
        raise ValueError(f"stat is 'time', 'cpu', 'p50', 'p95' or 'p99'; got {stat!r}")

    def verdict(self, label: str, baseline: str, concurrency: int, *,
                baseline_concurrency: int | None = None, stat: str = "time",
                margin: float | None = None):
        """Is ``label`` better than ``baseline`` on ``stat``, worse, no different, or undecided?

        A :class:`course_utils.bench.Verdict` decided from the round-by-round :meth:`ratios`,
        exactly as :func:`course_utils.bench.compare` decides timings ("faster": lower time per
        request, CPU time or latency).
        """
        from course_utils import bench

        margin = bench.MARGIN if margin is None else margin
        other = baseline_concurrency or concurrency
        ratio = bench.Ratio.of(self.ratios(label, baseline, concurrency,
                                           baseline_concurrency=other, stat=stat))
        return bench.Verdict(f"{label} ({_clients(concurrency)})",
                             f"{baseline} ({_clients(other)})",
                             bench.decide(ratio, margin), ratio, margin)

    def _rows(self) -> tuple[list[str], list[list[str]]]:
        from course_utils.bench import format_time

        header = ["server", "clients", "requests/s", "[min, max]", "p50", "p95", "p99",
                  "in flight", "rows/call", "CPU/request"]
        rows = []
        for label in self.labels:
            for c in self.levels:
                if not any(r.label == label and r.concurrency == c for r in self.results):
                    continue
                per_round = [r.throughput for r in self.windows(label, c)]
                rows.append([label, str(c), f"{self.throughput(label, c):,.0f}",
                             f"[{min(per_round):,.0f}, {max(per_round):,.0f}]",
                             *(format_time(self.latency(label, c, q)) for q in (50, 95, 99)),
                             f"{self.in_flight(label, c):.1f}",
                             _fmt_batch(self.mean_batch(label, c)),
                             _fmt_cpu(self.cpu_per_request(label, c))])
        return header, rows

    def table(self) -> str:
        """Per server and clients: median requests/s and its range over rounds, pooled latency
        percentiles, requests in flight."""
        header, rows = self._rows()
        return _text_table(header, rows)

    def __str__(self) -> str:
        return self.table()

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(self.table())

    def plot(self, axes=None):
        """Two panels against the number of clients: throughput, and p50 / p99 latency."""
        if axes is None:
            import matplotlib.pyplot as plt

            _, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
        left, right = axes
        for label in self.labels:
            levels = [c for c in self.levels
                      if any(r.label == label and r.concurrency == c for r in self.results)]
            line, = left.plot(levels, [self.throughput(label, c) for c in levels], "o-",
                              label=label)
            for q, style in ((50, "o-"), (99, "x--")):
                right.plot(levels, [1e3 * self.latency(label, c, q) for c in levels], style,
                           color=line.get_color())
        left.set(xlabel="clients (requests in flight)", ylabel="requests / s", xscale="log",
                 title="throughput")
        right.set(xlabel="clients (requests in flight)", ylabel="latency (ms)", xscale="log",
                  yscale="log", title="latency: p50 (solid), p99 (dashed)")
        for ax in axes:
            ax.set_xticks(self.levels, [str(c) for c in self.levels])
            ax.minorticks_off()
            ax.grid(alpha=0.3)
        left.legend(fontsize="small")
        return axes

    def to_dict(self) -> dict[str, Any]:
        return {"results": [r.to_dict() for r in self.results]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadReport:
        return cls([LoadResult.from_dict(r) for r in data["results"]])


def _text_table(header: list[str], rows: list[list[str]]) -> str:
    """Columns padded to width: the first left-aligned (names), the others right (numbers)."""
    widths = [max(len(c) for c in column) for column in zip(header, *rows, strict=True)]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(line, widths, strict=True)))
                     .rstrip() for line in [header, *rows])


def _clients(n: int) -> str:
    return f"{n} client" if n == 1 else f"{n} clients"


def _fmt_batch(size: float | None) -> str:
    return "?" if size is None else f"{size:.1f}"


def _fmt_cpu(seconds: float | None) -> str:
    from course_utils.bench import format_time

    return "?" if seconds is None else format_time(seconds)


async def _closed_loop(address: tuple[str, int], requests: list[bytes], offset: int,
                       window: _Window) -> None:
    """One client: send, wait for the reply, send the next, until the window closes."""
    reader, writer = await asyncio.open_connection(*address)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    i = offset
    try:
        while window.open(sent := time.perf_counter()):
            writer.write(requests[i % len(requests)])
            rows, _, body = await read_message(reader)
            if rows == ERROR_ROWS:
                raise ServerError(body.decode(errors="replace"))
            window.record(sent, time.perf_counter())
            i += 1
    finally:
        writer.close()


@dataclass
class _Window:
    """The measuring window the clients share: requests completed in [start, end] count.

    If fewer than ``min_requests`` have completed when it closes (a stalled machine), or it has
    lasted fewer than ``WINDOW_LATENCIES`` mean latencies, it stays open ``duration_s`` longer,
    up to ten times, so that every window has enough samples and is long next to a request.
    """

    start: float
    duration_s: float
    min_requests: int
    latencies: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.end = self.start + self.duration_s
        self.last_end = self.start + 10 * self.duration_s

    def open(self, now: float) -> bool:
        self._extend(now)
        return now < self.end

    def _extend(self, now: float) -> None:
        # As many durations as it takes to reach ``now``: a request that stalled past the end
        # (and past one more duration) still counts, and the window does not close early.
        while now >= self.end and self.end < self.last_end and self._too_short():
            self.end = min(self.end + self.duration_s, self.last_end)

    def _too_short(self) -> bool:
        n = len(self.latencies)
        return (n < self.min_requests
                or self.end - self.start < WINDOW_LATENCIES * sum(self.latencies) / n)

    def record(self, sent: float, done: float) -> None:
        self._extend(done)
        if self.start <= done <= self.end:
            self.latencies.append(done - sent)


async def _measure(address: tuple[str, int], requests: list[bytes], concurrency: int,
                   duration_s: float, warmup_s: float) -> tuple[list[float], float]:
    """Run ``concurrency`` clients through warm-up and one window: (latencies, window length)."""
    window = _Window(time.perf_counter() + warmup_s, duration_s, min_requests=2 * concurrency)
    spacing = max(1, len(requests) // concurrency)  # the clients start at different rows
    clients = asyncio.gather(*(_closed_loop(address, requests, k * spacing, window)
                               for k in range(concurrency)))
    try:  # a server that stops answering must not hang the load test
        await asyncio.wait_for(clients, warmup_s + 10 * duration_s + STALL_S)
    except TimeoutError:
        raise TimeoutError(f"the server at {address[0]}:{address[1]} stopped answering: no reply "
                           f"within {STALL_S:.0f} s of the window's end") from None
    return window.latencies, window.end - window.start


async def _open_loop(address: tuple[str, int], requests: list[bytes], rate: float,
                     duration_s: float, warmup_s: float, seed: int,
                     max_connections: int) -> list[float]:
    """Requests arriving at Poisson times, ``rate`` per second, for ``warmup_s + duration_s``.

    Each request's latency runs from its scheduled arrival to its whole reply: time spent waiting
    for a free connection, or because this loop fell behind its schedule, counts, as a user's wait
    would (a generator that measured from the moment it got round to sending would hide the
    queue). Every request that arrived in the window is waited for and counted, however long it
    takes, so an overloaded server's growing queue shows in full.
    """
    rng = np.random.default_rng(seed)
    slots = asyncio.Semaphore(max_connections)
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    opened: list[asyncio.StreamWriter] = []
    latencies: list[float] = []
    first = time.perf_counter()
    start, end = first + warmup_s, first + warmup_s + duration_s

    async def one(arrival: float, payload: bytes) -> None:
        async with slots:
            if idle:
                reader, writer = idle.pop()
            else:
                reader, writer = await asyncio.open_connection(*address)
                writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP,
                                                           socket.TCP_NODELAY, 1)
                opened.append(writer)
            writer.write(payload)
            rows, _, body = await read_message(reader)
            done = time.perf_counter()
            idle.append((reader, writer))
        if rows == ERROR_ROWS:
            raise ServerError(body.decode(errors="replace"))
        if start <= arrival < end:
            latencies.append(done - arrival)

    tasks, arrival, i = [], first, 0
    try:
        while (arrival := arrival + rng.exponential(1 / rate)) < end:
            delay = arrival - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(arrival, requests[i % len(requests)])))
            i += 1
        await asyncio.wait_for(asyncio.gather(*tasks), STALL_S + 10 * duration_s)
    except TimeoutError:
        raise TimeoutError(f"the server at {address[0]}:{address[1]} did not answer every "
                           f"request within {STALL_S:.0f} s of the load's end") from None
    finally:
        for task in tasks:
            task.cancel()
        for writer in opened:
            writer.close()
    return latencies


@dataclass
class OpenLoopResult:
    """What Poisson arrivals at ``rate`` requests per second measured at server ``label``.

    ``latencies_s``: one value per request that arrived in the window of ``duration_s`` seconds,
    from its arrival to its reply. ``in_flight`` is Little's law, arrival rate x mean latency.
    """

    label: str
    rate: float
    duration_s: float
    latencies_s: np.ndarray = field(repr=False)
    mean_batch: float | None = None

    @property
    def arrived(self) -> int:
        return len(self.latencies_s)

    def latency(self, q: float) -> float:
        return percentile(self.latencies_s, q)

    @property
    def in_flight(self) -> float:
        return self.arrived / self.duration_s * float(np.mean(self.latencies_s))


@dataclass(repr=False)
class OpenLoopReport:
    """Every (server, offered rate) of an :func:`open_loop_test`, with a table and a plot."""

    results: list[OpenLoopResult]

    @property
    def labels(self) -> list[str]:
        return list(dict.fromkeys(r.label for r in self.results))

    def result(self, label: str, rate: float) -> OpenLoopResult:
        for r in self.results:
            if r.label == label and math.isclose(r.rate, rate):
                return r
        raise KeyError(f"no result for server {label!r} at {rate:g} requests/s; servers: "
                       f"{self.labels}, rates: {sorted({r.rate for r in self.results})}")

    def table(self) -> str:
        from course_utils.bench import format_time

        header = ["server", "offered/s", "arrived", "p50", "p95", "p99", "in flight", "rows/call"]
        rows = [[r.label, f"{r.rate:,.0f}", f"{r.arrived:,}",
                 *(format_time(r.latency(q)) for q in (50, 95, 99)), f"{r.in_flight:.1f}",
                 _fmt_batch(r.mean_batch)] for r in self.results]
        return _text_table(header, rows)

    def __str__(self) -> str:
        return self.table()

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(self.table())

    def plot(self, ax=None):
        """p50 (solid) and p99 (dashed) latency against the offered rate, one colour a server."""
        if ax is None:
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=(6, 3.6), layout="constrained")
        for label in self.labels:
            mine = sorted((r for r in self.results if r.label == label), key=lambda r: r.rate)
            rates = [r.rate for r in mine]
            line, = ax.plot(rates, [1e3 * r.latency(50) for r in mine], "o-", label=label)
            ax.plot(rates, [1e3 * r.latency(99) for r in mine], "x--", color=line.get_color())
        ax.set(xlabel="offered load (requests / s)", ylabel="latency (ms)", yscale="log",
               title="open loop: p50 (solid), p99 (dashed)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
        return ax


class _Clients:
    """Where the clients run: this process, or one client process driven through its stdin.

    Each :meth:`window` call runs one measuring window and returns (latencies, seconds).
    """

    def __init__(self, inputs: np.ndarray, in_subprocess: bool):
        self.requests = [encode(row.reshape(1, -1)) for row in inputs]
        self.process: subprocess.Popen | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        if in_subprocess:
            self._tmp = tempfile.TemporaryDirectory(prefix="load-test-")
            np.save(Path(self._tmp.name) / "inputs.npy", inputs)
            self.process = subprocess.Popen(
                [sys.executable, "-m", "course_utils.serving", "clients",
                 str(Path(self._tmp.name) / "inputs.npy")],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def window(self, address: tuple[str, int], concurrency: int, duration_s: float,
               warmup_s: float) -> tuple[list[float], float]:
        if self.process is None:
            return asyncio.run(_measure(address, self.requests, concurrency, duration_s, warmup_s))
        return self._order({"address": address, "concurrency": concurrency,
                            "duration_s": duration_s, "warmup_s": warmup_s})

    def open_loop(self, address: tuple[str, int], rate: float, duration_s: float,
                  warmup_s: float, seed: int, max_connections: int) -> list[float]:
        if self.process is None:
            return asyncio.run(_open_loop(address, self.requests, rate, duration_s, warmup_s,
                                          seed, max_connections))
        return self._order({"address": address, "rate": rate, "duration_s": duration_s,
                            "warmup_s": warmup_s, "seed": seed,
                            "max_connections": max_connections})[0]

    def _order(self, order: dict[str, Any]) -> tuple[list[float], float]:
        self.process.stdin.write(json.dumps(order) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the load-test client process failed:\n"
                               + self.process.stderr.read()[-3000:])
        reply = json.loads(line)
        return reply["latencies_s"], reply["duration_s"]

    def close(self) -> None:
        if self.process is not None:
            self.process.stdin.close()
            self.process.wait(timeout=30)
            self.process.stdout.close()
            self.process.stderr.close()
        if self._tmp is not None:
            self._tmp.cleanup()


def load_test(servers: dict[str, Any], inputs: np.ndarray, concurrency: int | Sequence[int], *,
              rounds: int = 1, duration_s: float = 0.3, warmup_s: float = 0.05,
              until: Callable[[LoadReport], bool] | None = None, max_time_s: float = 0.0,
              in_subprocess: bool = True) -> LoadReport:
    """Load servers with closed-loop clients: ``{name: Server or address}`` -> :class:`LoadReport`.

    A window runs ``c`` clients against one server: each opens a connection and, for
    ``warmup_s + duration_s`` seconds, sends one row of ``inputs`` per request (cycling through
    the rows), waits for the reply and sends the next; requests completed in the last
    ``duration_s`` seconds count. Each round runs one window per concurrency level and server,
    the servers in turn (starting one later each round), so that a burst of load from elsewhere
    hits them alike; :meth:`LoadReport.ratios` pairs them round by round. For a :class:`Server`,
    each result also records the server's rows per model call and CPU time per request.

    ``rounds`` rounds always run. With ``until``, more follow, one at a time, until
    ``until(report)`` is true (say, every verdict you want is decided) or ``max_time_s`` seconds
    (required with ``until``) have passed since the start: on a busy machine the test takes
    longer instead of deciding on too little.

    The clients run in one other Python process by default (it imports numpy and this module,
    nothing else), so that they do not compete with the servers for this process's interpreter
    lock, as real clients would not. ``in_subprocess=False`` runs them here.
    """
    levels = [concurrency] if isinstance(concurrency, int) else list(concurrency)
    if not levels or min(levels) < 1:
        raise ValueError(f"concurrency is a number of clients (at least 1) or a list of them; "
                         f"got {concurrency!r}")
    if rounds < 1 or duration_s <= 0 or warmup_s < 0:
        raise ValueError("rounds must be at least 1, duration_s positive, warmup_s not negative")
    if until is not None and max_time_s <= 0:
        raise ValueError("until= adds rounds only within a time cap: give max_time_s, the seconds "
                         "after which the test stops whether or not until() is satisfied")
    inputs = np.asarray(inputs, dtype=np.float32)
    if inputs.ndim != 2 or len(inputs) == 0:
        raise ValueError(f"inputs is a 2-D array, one request per row; got shape {inputs.shape}")
    if not servers:
        raise ValueError("load_test() needs at least one server: {'name': server}")
    for name, server in servers.items():
        if getattr(server, "address", server) is None:
            raise ValueError(f"server {name!r} is not started: use `with Server(...) as server`")
    names, results = list(servers), []
    clients = _Clients(inputs, in_subprocess)
    started = time.perf_counter()
    try:
        for r in itertools.count():
            if r >= rounds and (until is None or until(LoadReport(list(results)))
                                or time.perf_counter() - started > max_time_s):
                break
            for c in levels:
                for name in names[r % len(names):] + names[:r % len(names)]:
                    server = servers[name]
                    host, port = getattr(server, "address", server)
                    seen = isinstance(server, Server)
                    calls, cpu = (len(server.batch_sizes), server.cpu_s) if seen else (0, 0.0)
                    latencies, seconds = clients.window((str(host), int(port)), c, duration_s,
                                                        warmup_s)
                    sizes = server.batch_sizes[calls:] if seen else []
                    results.append(LoadResult(
                        str(name), c, seconds, np.asarray(latencies), r,
                        float(np.mean(sizes)) if sizes else None,
                        (server.cpu_s - cpu) / sum(sizes) if sizes else None))
    finally:
        clients.close()
    return LoadReport(results)


def open_loop_test(servers: dict[str, Any], inputs: np.ndarray, rates: Sequence[float], *,
                   duration_s: float = 0.5, warmup_s: float = 0.1, seed: int = 0,
                   max_connections: int = 256, in_subprocess: bool = True) -> OpenLoopReport:
    """Offer each server Poisson arrivals at each of ``rates`` (requests per second).

    For every rate, the servers take their turn, each with the same arrival times (``seed``): for
    ``warmup_s + duration_s`` seconds requests arrive at random, independent times, whether or not
    earlier ones have been answered, each sending one row of ``inputs``; every request that arrived
    in the last ``duration_s`` seconds is waited for, and its latency runs from its arrival
    (including any wait for one of ``max_connections`` connections). Below capacity, latency is
    about one call plus queueing when arrivals bunch; past it, the queue grows for as long as the
    load lasts, so latency depends on ``duration_s`` too: a sign of overload, not a property of the
    server. The clients run in another process, as in :func:`load_test`.
    """
    rates = [float(r) for r in rates]
    if not rates or min(rates) <= 0:
        raise ValueError(f"rates are requests per second, each above 0; got {rates!r}")
    if duration_s <= 0 or warmup_s < 0 or max_connections < 1:
        raise ValueError("duration_s must be positive, warmup_s not negative, "
                         "max_connections at least 1")
    inputs = np.asarray(inputs, dtype=np.float32)
    if inputs.ndim != 2 or len(inputs) == 0:
        raise ValueError(f"inputs is a 2-D array, one request per row; got shape {inputs.shape}")
    if not servers:
        raise ValueError("open_loop_test() needs at least one server: {'name': server}")
    results = []
    clients = _Clients(inputs, in_subprocess)
    try:
        for rate in rates:
            for name, server in servers.items():
                host, port = getattr(server, "address", server)
                seen = isinstance(server, Server)
                calls = len(server.batch_sizes) if seen else 0
                latencies = clients.open_loop((str(host), int(port)), rate, duration_s,
                                              warmup_s, seed, max_connections)
                sizes = server.batch_sizes[calls:] if seen else []
                results.append(OpenLoopResult(str(name), rate, duration_s, np.asarray(latencies),
                                              float(np.mean(sizes)) if sizes else None))
    finally:
        clients.close()
    return OpenLoopReport(results)


def _serve_clients(inputs_path: str) -> None:
    """The client process: one JSON order per stdin line, one JSON result per stdout line."""
    requests = [encode(row.reshape(1, -1)) for row in np.load(inputs_path)]
    for line in sys.stdin:
        order = json.loads(line)
        address = tuple(order["address"])
        if "rate" in order:  # an open-loop load
            latencies = asyncio.run(_open_loop(address, requests, order["rate"],
                                               order["duration_s"], order["warmup_s"],
                                               order["seed"], order["max_connections"]))
            seconds = order["duration_s"]
        else:
            latencies, seconds = asyncio.run(_measure(address, requests, order["concurrency"],
                                                      order["duration_s"], order["warmup_s"]))
        print(json.dumps({"latencies_s": latencies, "duration_s": seconds}), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m course_utils.serving clients INPUTS.npy``: the process :func:`load_test` drives.

    It reads orders from stdin, one JSON object per line (``address``, ``concurrency``,
    ``duration_s``, ``warmup_s``), runs that window's clients, and prints the latencies.
    """
    parser = argparse.ArgumentParser(prog="python -m course_utils.serving",
                                     description="closed-loop clients for course servers")
    commands = parser.add_subparsers(dest="command", required=True)
    clients = commands.add_parser("clients", help="run load-test windows ordered on stdin")
    clients.add_argument("inputs", help=".npy file, one request per row")
    args = parser.parse_args(argv)
    _serve_clients(args.inputs)


if __name__ == "__main__":
    main()
