"""course_utils.serving against independent facts: replies equal direct model calls, the batcher
never mixes up requests or overfills a batch, percentiles equal numpy's, and the load test counts
what it ran. Where the behaviour is about time (queueing past capacity, Little's law), the bounds
allow for a busy machine: they follow the window's own length, or tests/machine_speed.py."""

import asyncio
import socket
import threading
import time

import numpy as np
import pytest
from machine_speed import slowness

from course_utils import serving

RNG = np.random.default_rng(0)
W = RNG.standard_normal((6, 3)).astype(np.float32)


def model(x: np.ndarray) -> np.ndarray:
    """A row-wise model: each output row depends on its own input row only."""
    return np.tanh(x @ W) + x[:, :1]


def slow_model(x: np.ndarray) -> np.ndarray:
    """The same model, slow enough per call that concurrent requests pile up into batches."""
    time.sleep(0.003)
    return model(x)


# ----------------------------------------------------------------------------- wire format


def test_encode_decode_round_trip_is_float32_and_exact():
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    back = serving.decode(serving.encode(x))
    assert back.dtype == np.float32 and np.array_equal(back, x)


def test_encode_refuses_a_1d_array_and_says_how_to_send_one_sample():
    with pytest.raises(ValueError, match=r"reshape\(1, -1\)"):
        serving.encode(np.zeros(3))


def test_split_rows_cuts_in_order_and_checks_the_row_count():
    parts = serving.split_rows(np.arange(10).reshape(5, 2), [1, 3, 1])
    assert [p[:, 0].tolist() for p in parts] == [[0], [2, 4, 6], [8]]
    with pytest.raises(ValueError, match="one output row per input row"):
        serving.split_rows(np.zeros((4, 2)), [2, 3])


# ----------------------------------------------------------------------------- percentiles


@pytest.mark.parametrize("n", [1, 2, 7, 100, 1001])
def test_percentile_equals_numpys_linear_method(n):
    samples = RNG.exponential(size=n)
    for q in (0, 1, 25, 50, 90, 95, 99, 99.9, 100):
        assert serving.percentile(samples, q) == pytest.approx(np.percentile(samples, q),
                                                               rel=1e-12, abs=1e-12)


def test_percentile_on_samples_worked_by_hand():
    assert serving.percentile([3, 1, 2], 50) == 2  # order does not matter
    assert serving.percentile([1, 2, 3, 4], 50) == 2.5  # between the two middle ones
    assert serving.percentile(range(1, 101), 99) == pytest.approx(99.01)
    with pytest.raises(ValueError, match="no samples"):
        serving.percentile([], 50)
    with pytest.raises(ValueError, match="0 to 100"):
        serving.percentile([1.0], 101)


# ----------------------------------------------------------------------------- server


def test_replies_equal_direct_model_calls_for_one_client():
    x = RNG.standard_normal((20, 6)).astype(np.float32)
    with serving.Server(model, max_batch=8) as server, serving.Client(server.address) as client:
        for n in (1, 3, 8, 11):  # 11 rows: more than max_batch, served alone
            np.testing.assert_allclose(client.predict(x[:n]), model(x[:n]), rtol=1e-6)
        np.testing.assert_allclose(client.predict(x[0]), model(x[:1]), rtol=1e-6)  # a 1-D row
    assert max(server.batch_sizes) == 11


def run_clients(address, requests_per_client):
    """Each thread sends its own requests on its own connection; returns {client: replies}."""
    replies, errors = {}, []

    def client(k, requests):
        try:
            with serving.Client(address) as c:
                replies[k] = [c.predict(x) for x in requests]
        except Exception as err:  # reported by the test, not lost in the thread
            errors.append(err)

    threads = [threading.Thread(target=client, args=(k, reqs))
               for k, reqs in requests_per_client.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    return replies


@pytest.mark.parametrize("max_batch,max_wait_ms", [(1, 0), (6, 0), (6, 2.0)])
def test_concurrent_clients_each_get_exactly_their_own_rows(max_batch, max_wait_ms):
    # Requests of 1 to 4 rows, all different, from 8 clients at once: every reply must equal the
    # model applied to that request alone, whatever batch it shared.
    requests = {k: [RNG.standard_normal((int(RNG.integers(1, 5)), 6)).astype(np.float32)
                    for _ in range(12)] for k in range(8)}
    with serving.Server(slow_model, max_batch=max_batch, max_wait_ms=max_wait_ms) as server:
        replies = run_clients(server.address, requests)
    for k, reqs in requests.items():
        for x, y in zip(reqs, replies[k], strict=True):
            np.testing.assert_allclose(y, model(x), rtol=1e-5, atol=1e-6)
    sizes = server.batch_sizes
    assert sum(sizes) == sum(len(x) for reqs in requests.values() for x in reqs)
    assert max(sizes) <= max(max_batch, 4)  # a batch never grows past max_batch rows
    if max_batch == 1:
        assert len(sizes) == 8 * 12  # one call per request
    else:
        assert max(sizes) > 4  # requests from several clients shared a call


def test_requests_of_different_widths_are_never_stacked():
    calls = []

    def width_model(x):
        calls.append(x.shape)
        time.sleep(0.002)
        return x.sum(axis=1, keepdims=True)

    requests = {k: [np.full((1, 2 + k % 2), k, dtype=np.float32)] * 10 for k in range(6)}
    with serving.Server(width_model, max_batch=16) as server:
        replies = run_clients(server.address, requests)
    for k, reqs in requests.items():
        for x, y in zip(reqs, replies[k], strict=True):
            assert y.tolist() == [[float(x.sum())]]
    assert all(len({shape[1]}) == 1 for shape in calls)
    assert sum(server.batch_sizes) == 60


def test_a_failing_model_answers_with_its_error_and_keeps_serving():
    def picky(x):
        if (x < 0).any():
            raise ValueError("negative inputs are not allowed")
        return x

    with serving.Server(picky, max_batch=4) as server, serving.Client(server.address) as client:
        with pytest.raises(serving.ServerError, match="ValueError: negative inputs"):
            client.predict(-np.ones((1, 3)))
        assert client.predict(np.ones((1, 3))).tolist() == [[1.0, 1.0, 1.0]]


def test_a_model_with_the_wrong_number_of_rows_is_reported():
    with (serving.Server(lambda x: x[:1], max_batch=4) as server,
          serving.Client(server.address) as client,
          pytest.raises(serving.ServerError, match="one output row per input row")):
        client.predict(np.ones((3, 2)))


def test_an_empty_request_is_refused():
    with (serving.Server(model) as server, serving.Client(server.address) as client,
          pytest.raises(serving.ServerError, match="at least one row")):
        client.predict(np.zeros((0, 6)))


def test_batcher_rejects_bad_settings():
    with pytest.raises(ValueError, match="at least 1"):
        serving.Batcher(model, max_batch=0)
    with pytest.raises(ValueError, match="negative"):
        serving.Batcher(model, max_wait_ms=-1)


def test_batcher_waits_up_to_max_wait_for_a_fuller_batch():
    # Without a server: requests submitted 1 ms apart join one batch when the batcher may wait
    # (up to 2 s, but the 4th request fills the batch), and go one by one when it may not.
    async def scenario(max_wait_ms):
        batcher = serving.Batcher(model, max_batch=4, max_wait_ms=max_wait_ms)
        runner = asyncio.create_task(batcher.run())
        xs = [RNG.standard_normal((1, 6)).astype(np.float32) for _ in range(4)]
        tasks = []
        for x in xs:
            tasks.append(asyncio.create_task(batcher.submit(x)))
            await asyncio.sleep(0.001)
        ys = await asyncio.gather(*tasks)
        runner.cancel()
        for x, y in zip(xs, ys, strict=True):
            np.testing.assert_allclose(y, model(x), rtol=1e-5, atol=1e-6)
        return batcher.batch_sizes

    assert asyncio.run(scenario(2000.0)) == [4]
    assert asyncio.run(scenario(0.0)) == [1, 1, 1, 1]


# ----------------------------------------------------------------------------- load test


def test_load_test_runs_every_window_in_rotating_rounds_from_a_client_process():
    inputs = RNG.standard_normal((32, 6)).astype(np.float32)
    with serving.Server(model) as plain, serving.Server(slow_model, max_batch=8) as batched:
        report = serving.load_test({"plain": plain, "batched": batched}, inputs, [1, 4],
                                   rounds=2, duration_s=0.05, warmup_s=0.01)
    assert len(report.results) == 2 * 2 * 2
    assert report.labels == ["plain", "batched"] and report.levels == [1, 4]
    order = [(r.round, r.concurrency, r.label) for r in report.results]
    assert order[:2] == [(0, 1, "plain"), (0, 1, "batched")]
    assert order[4:6] == [(1, 1, "batched"), (1, 1, "plain")]  # round 1 starts one later
    for r in report.results:
        assert r.completed >= 2 * r.concurrency  # the window stays open until it has samples
        assert r.cpu_per_request is not None and r.cpu_per_request > 0
    assert report.mean_batch("plain", 4) == 1.0  # no batching: one request per call
    assert "rows/call" in report.table() and "batched" in str(report)


def test_a_window_with_too_few_samples_stays_open_past_a_stall():
    # A race with a loaded machine: one client's request, sent before the window's end, came
    # back two durations later. It went unrecorded (it finished after the end), and the window
    # grew by one duration only, which was already past, so it closed with 1 sample of 2.
    window = serving._Window(start=0.0, duration_s=0.05, min_requests=2)
    assert window.open(0.0)
    window.record(0.0, 0.12)  # stalled past the end and one more duration
    assert window.latencies == [0.12] and window.open(0.12)
    window.record(0.12, 0.13)
    assert len(window.latencies) == 2
    late = serving._Window(start=0.0, duration_s=0.05, min_requests=2)
    late.record(0.0, 9.0)  # never past ten durations
    assert late.end == late.last_end == 0.5 and late.latencies == [] and not late.open(9.0)


def test_load_test_in_process_stops_when_until_says_so():
    inputs = RNG.standard_normal((8, 6)).astype(np.float32)
    seen = []

    def until(report):
        seen.append(len(report.results))
        return len(report.results) >= 3

    with serving.Server(model) as server:
        report = serving.load_test({"m": server.address}, inputs, 1, rounds=1, duration_s=0.02,
                                   warmup_s=0.0, until=until, max_time_s=30,
                                   in_subprocess=False)
    assert seen == [1, 2, 3] and len(report.results) == 3
    assert report.results[0].mean_batch is None  # an address only: the server's calls unseen


def test_load_test_explains_bad_arguments():
    inputs = np.zeros((4, 6), dtype=np.float32)
    with pytest.raises(ValueError, match="at least 1"):
        serving.load_test({"m": ("127.0.0.1", 1)}, inputs, [0])
    with pytest.raises(ValueError, match="one request per row"):
        serving.load_test({"m": ("127.0.0.1", 1)}, np.zeros(6), 1)
    with pytest.raises(ValueError, match="not started"):
        serving.load_test({"m": serving.Server(model)}, inputs, 1)
    with pytest.raises(ValueError, match="max_time_s"):  # until= alone would add no round
        serving.load_test({"m": ("127.0.0.1", 1)}, inputs, 1, until=lambda report: True)


def result(label, concurrency, throughput, latencies, rnd, cpu=None):
    latencies = np.asarray(latencies, dtype=float)
    return serving.LoadResult(label, concurrency, len(latencies) / throughput, latencies, rnd,
                              1.0, cpu)


def test_report_ratios_pair_rounds_and_percentiles_pool_them():
    report = serving.LoadReport([
        result("a", 1, 100.0, [0.010] * 4, 0, cpu=2e-3), result("b", 1, 400.0, [0.005] * 4, 0,
                                                                 cpu=1e-3),
        result("a", 1, 50.0, [0.020] * 4, 1, cpu=2e-3), result("b", 1, 100.0, [0.030] * 4, 1,
                                                                cpu=5e-4),
    ])
    assert report.ratios("b", "a", 1) == pytest.approx([0.25, 0.5])  # time per request
    assert report.ratios("b", "a", 1, stat="p50") == pytest.approx([0.5, 1.5])
    assert report.ratios("b", "a", 1, stat="cpu") == pytest.approx([0.5, 0.25])
    assert report.throughput("a", 1) == pytest.approx(75.0)  # median over rounds
    pooled = np.r_[[0.005] * 4, [0.030] * 4]
    assert report.latency("b", 1, 95) == pytest.approx(np.percentile(pooled, 95))
    assert report.in_flight("a", 1) == pytest.approx(1.0)  # 100/s x 10 ms, 50/s x 20 ms
    back = serving.LoadReport.from_dict(report.to_dict())
    assert back.ratios("b", "a", 1) == report.ratios("b", "a", 1)
    with pytest.raises(KeyError, match="servers: \\['a', 'b'\\]"):
        report.windows("c", 1)


def test_report_verdict_decides_from_the_rounds_like_bench():
    from course_utils import bench

    fast = [result("fast", 16, 400.0, [0.004] * 8, r, cpu=1e-3) for r in range(6)]
    slow = [result("slow", 16, 100.0, [0.016] * 8, r, cpu=2e-3) for r in range(6)]
    report = serving.LoadReport(fast + slow)
    verdict = report.verdict("fast", "slow", 16)
    assert verdict.outcome == bench.FASTER and verdict.ratio.median == pytest.approx(0.25)
    assert str(verdict).startswith("fast (16 clients) vs slow (16 clients): faster")
    assert report.verdict("fast", "slow", 16, stat="cpu").ratio.median == pytest.approx(0.5)
    assert report.verdict("slow", "fast", 16, stat="p50").outcome == bench.SLOWER
    # Three rounds whose ratios spread from 0.25 to 1 (the interval of their batch means, with
    # 2 degrees of freedom, reaches past both margins): undecided.
    uneven = [result("fast", 16, q, [0.004] * 8, r, cpu=1e-3)
              for r, q in enumerate((400.0, 150.0, 100.0))]
    few = serving.LoadReport(uneven + slow[:3])
    assert few.verdict("fast", "slow", 16).outcome == bench.UNDECIDED


def test_a_decoded_request_is_writable_so_torch_can_take_it_without_a_warning():
    assert serving.decode(serving.encode(np.ones((2, 3)))).flags.writeable


def test_a_server_that_stops_answering_ends_the_window_with_an_error(monkeypatch):
    monkeypatch.setattr(serving, "STALL_S", 0.2)
    stuck = threading.Event()

    def hangs(x):
        stuck.wait(5)  # far longer than the window and its grace period
        return x

    with serving.Server(hangs) as server:
        with pytest.raises(TimeoutError, match="stopped answering"):
            serving.load_test({"stuck": server}, np.ones((2, 3), np.float32), 1,
                              duration_s=0.05, warmup_s=0.0, in_subprocess=False)
        stuck.set()


# ----------------------------------------------------------------------------- bad input (issue 25)


@pytest.mark.parametrize("message, fragment", [
    (b"", "header of 8 bytes"),
    (b"\x00\x00\x00", "got 3 bytes in all"),
    (serving.encode(np.ones((2, 2)))[:-3], "2 x 2 float32 values (16 bytes) but 13 bytes follow"),
    (serving.encode(np.ones((2, 2))) + b"!", "but 17 bytes follow"),
    (serving.HEADER.pack(2**31, 2**31) + bytes(8), "18,446,744,073,709,551,616 bytes"),
    (serving.HEADER.pack(serving.ERROR_ROWS, 50) + b"short", "an error message of 50 bytes"),
], ids=["empty", "short-header", "truncated", "extra-byte", "absurd-size", "short-error"])
def test_decode_of_a_short_or_garbled_message_says_what_is_wrong(message, fragment):
    with pytest.raises(ValueError, match="header") as info:
        serving.decode(message)
    assert fragment in str(info.value)


def test_decode_of_an_error_reply_raises_its_message():
    with pytest.raises(serving.ServerError, match="^predict failed$"):
        serving.decode(serving.encode_error("predict failed"))


@pytest.mark.parametrize("sizes", [[2, -1, 4], [2.0, 3], [True, 4], ["2", 3]])
def test_split_rows_refuses_sizes_that_are_not_row_counts(sizes):
    # [2, -1, 4] adds up to the 5 rows, yet np.split would cut blocks of 2, 0 and 4 rows.
    with pytest.raises(ValueError, match=r"each an int >= 0; sizes\[\d\] is"):
        serving.split_rows(np.arange(5), sizes)
    assert [len(p) for p in serving.split_rows(np.arange(5), [np.int64(2), 0, 3])] == [2, 0, 3]


@pytest.mark.parametrize("host", ["0.0.0.0", "", "::", "192.168.1.10", "example.org"])
def test_a_server_on_anything_but_loopback_is_refused_unless_allowed(host):
    with pytest.raises(ValueError, match="other machines.*allow_remote=True"):
        serving.Server(model, host=host)
    serving.Server(model, host=host, allow_remote=True)  # said explicitly: accepted (not started)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
def test_loopback_hosts_need_no_permission(host):
    assert serving.Server(model, host=host).host == host


def read_reply(sock):
    """One whole reply from a raw socket: (rows, columns, body)."""
    data = b""
    while len(data) < serving.HEADER.size or len(data) < serving.HEADER.size + serving._body_size(
            *serving.HEADER.unpack_from(data)):
        chunk = sock.recv(1 << 16)
        assert chunk, f"the server closed the connection after {len(data)} bytes, no reply"
        data += chunk
    rows, cols = serving.HEADER.unpack_from(data)
    return rows, cols, data[serving.HEADER.size:]


def test_a_request_larger_than_the_cap_is_answered_before_its_body_is_read():
    # The header announces 405 MiB and only 1 KB follows: the server answers at once, by default,
    # instead of waiting to buffer the rest (it used to hold every byte sent, and wait forever).
    with serving.Server(model) as server, socket.create_connection(server.address) as sock:
        sock.settimeout(10)
        sock.sendall(serving.HEADER.pack(405 * 2**20 // 256, 64) + bytes(1024))
        rows, _, body = read_reply(sock)
        assert rows == serving.ERROR_ROWS and sock.recv(1) == b""  # an error, then it hangs up
        assert "request too large" in body.decode() and "max_request_bytes=4,194,304" in \
            body.decode()
    assert server.batch_sizes == []  # predict never ran


def test_a_client_sending_too_many_rows_gets_the_reason_and_the_server_keeps_serving():
    with serving.Server(model, max_request_bytes=6 * 4 * 10) as server:
        with serving.Client(server.address) as client:
            np.testing.assert_allclose(client.predict(np.ones((10, 6))), model(np.ones((10, 6),
                                                                                   np.float32)))
            with pytest.raises(serving.ServerError, match="11 x 6 float32 values is 264 bytes"):
                client.predict(np.ones((11, 6)))
        with serving.Client(server.address) as client:
            assert client.predict(np.ones((1, 6))).shape == (1, 3)


def test_a_half_sent_request_is_dropped_after_the_timeout():
    with (serving.Server(model, request_timeout_s=0.2) as server,
          socket.create_connection(server.address) as idle,
          socket.create_connection(server.address) as half):
        half.settimeout(10)
        half.sendall(serving.HEADER.pack(3, 6) + bytes(20))  # 72 bytes announced, 20 sent
        rows, _, body = read_reply(half)
        assert rows == serving.ERROR_ROWS and "timed out" in body.decode()
        assert half.recv(1) == b""
        time.sleep(0.3)  # an idle connection (no byte of a request yet) is left alone
        idle.sendall(serving.encode(np.ones((1, 6))))
        idle.settimeout(10)
        assert read_reply(idle)[:2] == (1, 3)


def test_server_limits_are_checked():
    with pytest.raises(ValueError, match="max_request_bytes"):
        serving.Server(model, max_request_bytes=0)
    with pytest.raises(ValueError, match="request_timeout_s"):
        serving.Server(model, request_timeout_s=0)


# ------------------------------------------------------------------ window length, open loop


def sleepy_model(x: np.ndarray) -> np.ndarray:
    """A model whose call takes 4 ms whatever the machine's load: latency is mostly waiting."""
    time.sleep(0.004)
    return model(x)


def test_a_window_lasts_many_latencies_so_littles_law_reads_the_clients():
    # Lesson 11's prose says requests in flight (throughput x mean latency) is about the number of
    # clients. With 8 clients queueing on a 4 ms model, a request takes about 32 ms; a 20 ms
    # window would count too few of them (the ones still in flight at its end are left out) and
    # read far below 8. The window stays open for many latencies instead (up to ten times its
    # duration_s, which a busy machine may reach).
    # A window of n latencies miscounts each client by at most about one request at each end,
    # so the reading is within about 1/n of 8 (n = 20 when the window could reach it; fewer when
    # a starved machine made latencies so long that the window hit its cap of 10 x duration_s).
    inputs = RNG.standard_normal((16, 6)).astype(np.float32)
    with serving.Server(sleepy_model) as server:
        report = serving.load_test({"m": server}, inputs, 8, rounds=1, duration_s=0.3,
                                   warmup_s=0.05)
    (window,) = report.results
    assert window.duration_s >= min(3.0, serving.WINDOW_LATENCIES * window.mean_latency) * 0.9
    latencies = window.duration_s / window.mean_latency  # how many latencies the window lasted
    slack = max(0.15, 2 / latencies)
    assert 8 * (1 - slack) <= report.in_flight("m", 8) <= 8 * (1 + slack)


def test_open_loop_arrivals_are_poisson_at_the_offered_rate():
    inputs = RNG.standard_normal((16, 6)).astype(np.float32)
    with serving.Server(model) as server:
        report = serving.open_loop_test({"m": server}, inputs, [200], duration_s=1.0,
                                        warmup_s=0.05)
    r = report.result("m", 200)
    # A Poisson count with mean 200: within 4 standard deviations (sqrt(200) = 14).
    assert abs(r.arrived - 200) < 4 * 200**0.5
    assert r.mean_batch == 1.0 and "offered/s" in report.table()


def test_open_loop_latency_explodes_past_capacity_and_counts_the_queue():
    # One 4 ms model thread serves at most 250 requests per second. At 50 per second a request
    # rarely waits; at 500 per second for half a second the queue grows by about 125 requests,
    # and the requests that arrive last wait for all of them: their latency, counted from their
    # arrival, is hundreds of milliseconds, not the 4 ms of one call.
    inputs = RNG.standard_normal((16, 6)).astype(np.float32)
    with serving.Server(sleepy_model) as server:
        report = serving.open_loop_test({"m": server}, inputs, [50, 500], duration_s=0.5,
                                        warmup_s=0.0)
    light, heavy = report.result("m", 50), report.result("m", 500)
    # 4 ms of model and a little of the server's own work; a busy machine stretches both.
    assert light.latency(50) < 0.05 * slowness()
    # Against the light load's median, not its p99: of some 25 requests, p99 is the slowest one,
    # which a single stall of a busy machine (100 ms) puts level with the queue's.
    assert heavy.latency(99) > 0.1 and heavy.latency(99) > 5 * light.latency(50)
    # Little's law: in flight = arrival rate x mean latency, many requests past capacity.
    assert heavy.in_flight > 10 > light.in_flight


def test_open_loop_explains_bad_arguments():
    with pytest.raises(ValueError, match="requests per second"):
        serving.open_loop_test({"m": ("127.0.0.1", 1)}, np.ones((2, 2)), [0])
    with pytest.raises(ValueError, match="one request per row"):
        serving.open_loop_test({"m": ("127.0.0.1", 1)}, np.ones(3), [10])


# --- issue 37: what a client can hold of the server ------------------------------------------

#: A server in its own process (argv[1]: its open-file limit, or 0 to keep it), which prints its
#: port and serves ``2 * x`` until it is stopped.
SERVE = """
import resource, sys, time
if int(sys.argv[1]):
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[1])))
from course_utils import serving
with serving.Server(lambda x: 2 * x) as server:
    print(server.address[1], flush=True)
    time.sleep(120)
"""


@pytest.fixture
def server_process():
    """Start ``SERVE`` in a child process; yields (process, address); stops it after."""
    import subprocess
    import sys

    started = []

    def start(open_files: int = 0):
        process = subprocess.Popen([sys.executable, "-c", SERVE, str(open_files)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(process)
        return process, ("127.0.0.1", int(process.stdout.readline()))

    yield start
    for process in started:
        process.kill()
        process.communicate(timeout=30)


def test_idle_connections_cannot_lock_honest_clients_out(server_process):
    # The 343 idle connections used up the server's descriptors: every later client
    # waited forever, and the server's loop logged 62,295 failed accepts (25 MB) in 17 s. Here
    # the server may open 64 files: 80 idle connections would do the same. Now a new client
    # takes the place of the connection idle the longest.
    process, address = server_process(open_files=64)
    idle = [socket.create_connection(address, timeout=10) for _ in range(80)]
    try:
        x = RNG.standard_normal((3, 5)).astype(np.float32)
        with serving.Client(address, timeout=10 * slowness()) as client:
            np.testing.assert_array_equal(client.predict(x), 2 * x)
    finally:
        for sock in idle:
            sock.close()
    process.kill()
    _, log = process.communicate(timeout=30)
    assert len(log) < 10_000, f"the server logged {len(log):,} characters: {log[:500]}"


def test_a_connection_idle_past_its_timeout_is_closed():
    with serving.Server(model, idle_timeout_s=0.3) as server, \
            socket.create_connection(server.address, timeout=30) as sock:
        t0 = time.monotonic()
        assert sock.recv(1) == b""  # closed by the server, with nothing to say
        assert time.monotonic() - t0 < 30


def test_unfinished_large_requests_hold_at_most_the_servers_buffer(server_process):
    # 40 requests of 4 MB each, all but their last byte sent: before, the server held all
    # 160 MB (the 200 held 836 MB). Now the bodies it reads add up to at most
    # max_buffered_bytes (64 MiB, plus the loop's own buffers); the others are answered
    # "server busy" before their body is read, and a small request is still served.
    import psutil

    process, address = server_process()
    rows, cols = 1024, 1023
    request = serving.encode(np.zeros((rows, cols), np.float32))[:-1]
    before = psutil.Process(process.pid).memory_info().rss
    senders = []
    try:
        for _ in range(40):
            sock = socket.create_connection(address, timeout=30 * slowness())
            sock.sendall(request)
            senders.append(sock)
        time.sleep(0.5)
        grown = psutil.Process(process.pid).memory_info().rss - before
        assert grown < 96 * 2**20, \
            f"40 unfinished 4 MB requests grew the server by {grown / 2**20:.0f} MB"
        x = RNG.standard_normal((2, 4)).astype(np.float32)
        with serving.Client(address, timeout=10 * slowness()) as client:
            np.testing.assert_array_equal(client.predict(x), 2 * x)
        busy = senders[-1]
        busy.settimeout(10 * slowness())
        reply = serving._recv_exactly(busy, serving.HEADER.size)
        rows_, size = serving.HEADER.unpack(reply)
        assert rows_ == serving.ERROR_ROWS
        assert b"server busy" in serving._recv_exactly(busy, size)
    finally:
        for sock in senders:
            sock.close()


def test_the_new_limits_explain_bad_values():
    with pytest.raises(ValueError, match="idle_timeout_s"):
        serving.Server(model, idle_timeout_s=0)
    with pytest.raises(ValueError, match="max_connections"):
        serving.Server(model, max_connections=0)
    with pytest.raises(ValueError, match="max_buffered_bytes"):
        serving.Server(model, max_buffered_bytes=10)
