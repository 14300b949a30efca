"""Tests of course_utils.bench on a fake clock: every duration is known, so every statistic is too.

The fake clock only moves when a timed function (or a sync hook) advances it, so the tests check
exact medians, quartiles, calibration, call order and ratios without depending on the machine.
The references are hand-computed values, the standard library's ``statistics`` module, and a
brute-force count for break-even.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time

import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils import bench

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the non-interactive backend)
from matplotlib.axes import Axes  # noqa: E402

MS = 1e-3


class FakeClock:
    """A clock that stands still until someone calls ``advance``."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def takes(clock: FakeClock, *durations: float, log: list | None = None, tag: str = ""):
    """A function whose successive calls take ``durations`` (cycled) on ``clock``."""
    cycle = itertools.cycle(durations)

    def fn(*args):
        clock.advance(next(cycle))
        if log is not None:
            log.append(tag)

    return fn


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# ----------------------------------------------------------------------------- statistics


def test_median_quartiles_of_known_samples(clock):
    fn = takes(clock, 1 * MS, 2 * MS, 3 * MS, 4 * MS, 100 * MS)
    t = bench.timeit(fn, warmup=0, repeats=5, number=1, clock=clock)
    assert t.samples == pytest.approx([1 * MS, 2 * MS, 3 * MS, 4 * MS, 100 * MS])
    # Hand-computed: the 100 ms outlier moves the mean but neither the median nor the quartiles.
    assert t.median == pytest.approx(3 * MS)
    assert (t.q1, t.q3, t.iqr) == pytest.approx((2 * MS, 4 * MS, 2 * MS))
    assert (t.min, t.mean) == pytest.approx((1 * MS, 22 * MS))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(1e-7, 1.0), min_size=2, max_size=30))
def test_summary_matches_statistics_module(samples):
    t = bench.Timing("f", samples, number=1)
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    assert t.median == pytest.approx(statistics.median(samples))
    assert (t.q1, t.q3) == pytest.approx((q1, q3))
    assert t.min <= t.q1 <= t.median <= t.q3 <= max(samples)


def test_per_call_time_is_sample_over_number(clock):
    t = bench.timeit(takes(clock, 0.5 * MS), warmup=0, repeats=4, number=7, clock=clock)
    assert t.number == 7
    assert t.samples == pytest.approx([0.5 * MS] * 4)


@pytest.mark.parametrize(
    ("per_call", "expected"),
    # (away from the 2 ms threshold itself, where float rounding on the fake clock could tip it)
    [(0.3 * MS, 10), (0.5 * MS, 5), (1.5 * MS, 2), (2.5 * MS, 1), (50 * MS, 1), (3e-6, 1000)],
)
def test_calibration_reaches_the_minimum_sample_time(clock, per_call, expected):
    # Tries 1, 2, 5, 10, 20, ... calls: the first count whose sample lasts >= 2 ms wins.
    t = bench.timeit(takes(clock, per_call), warmup=0, repeats=3, clock=clock)
    assert t.number == expected
    assert t.number * per_call >= bench.MIN_SAMPLE_S * (1 - 1e-9)
    assert t.median == pytest.approx(per_call)


def test_calibration_stops_for_a_function_that_takes_no_time(clock, monkeypatch):
    monkeypatch.setattr(bench, "MAX_NUMBER", 100)
    t = bench.timeit(lambda: None, warmup=0, repeats=2, clock=clock)
    assert t.number == 100


def test_warmup_is_untimed_and_first_call_is_kept(clock):
    calls = []
    # First call 1 s (a compile), then 1 ms each.
    durations = iter([1.0] + [1 * MS] * 1000)

    def fn():
        calls.append(1)
        clock.advance(next(durations))

    t = bench.timeit(fn, warmup=3, repeats=5, number=2, clock=clock)
    assert t.first_call == pytest.approx(1.0)
    assert t.median == pytest.approx(1 * MS) and t.iqr == pytest.approx(0)
    assert len(calls) == 3 + 5 * 2
    assert bench.timeit(fn, warmup=0, repeats=1, number=1, clock=clock).first_call is None


def test_arguments_are_passed(clock):
    seen = []
    bench.timeit(lambda a, b: seen.append((a, b)), 1, "x", warmup=1, repeats=1, number=1)
    assert seen == [(1, "x"), (1, "x")]


# ----------------------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (2.5, "2.50 s"),
        (0.5, "500 ms"),
        (1.234e-5, "12.3 µs"),
        (3e-9, "3.00 ns"),
        (999.96e-6, "1.00 ms"),  # rounds up into the next unit rather than "1000 µs"
        (42.0, "42.0 s"),
    ],
)
def test_format_time_picks_the_unit(seconds, text):
    assert bench.format_time(seconds) == text


def test_timing_str_reads_median_iqr_and_counts():
    t = bench.Timing("f", [12.1e-6, 12.2e-6, 12.3e-6, 12.6e-6, 12.9e-6], number=500)
    assert str(t) == "12.3 µs ± 0.2 µs (median ± IQR/2 of 5 samples, 500 calls each)"
    assert "1 call each" in str(bench.Timing("g", [1.0], number=1))
    assert "12.3 µs" in repr(t) and "'f'" in repr(t)


# ----------------------------------------------------------------------------- sync hooks


class FakeCudaTensor:
    """Looks like a torch CUDA tensor to sync_result: ``is_cuda`` and a ``device``."""

    is_cuda = True
    device = "cuda:0"


@pytest.fixture
def cuda_spy(monkeypatch, clock):
    torch = pytest.importorskip("torch")
    calls = []

    def synchronize(device=None):
        calls.append(device)
        clock.advance(1 * MS)  # waiting for the GPU takes time, and must be inside the timing

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    return calls


def test_auto_sync_waits_for_cuda_results_inside_the_timing(clock, cuda_spy):
    def fn():
        clock.advance(1 * MS)
        return FakeCudaTensor()

    t = bench.timeit(fn, warmup=2, repeats=3, number=1, clock=clock)
    assert cuda_spy == ["cuda:0"] * (2 + 3)
    assert t.median == pytest.approx(2 * MS)  # 1 ms of work + 1 ms of waiting


def test_auto_sync_searches_nested_results(clock, cuda_spy):
    result = {"loss": FakeCudaTensor(), "extra": [1.0, (None, FakeCudaTensor())]}
    bench.timeit(lambda: result, warmup=0, repeats=2, number=1, clock=clock)
    assert len(cuda_spy) == 2 * 2


def test_sync_cuda_none_and_callable(clock, cuda_spy):
    bench.timeit(lambda: None, warmup=0, repeats=2, number=1, sync="cuda", clock=clock)
    assert cuda_spy == [None, None]  # synchronised although nothing was returned
    bench.timeit(FakeCudaTensor, warmup=0, repeats=2, number=1, sync=None, clock=clock)
    assert len(cuda_spy) == 2  # sync=None waits for nothing
    seen = []
    bench.timeit(lambda: 7, warmup=1, repeats=2, number=1, sync=seen.append, clock=clock)
    assert seen == [7, 7, 7]  # called with each call's result, warm-up included


def test_cpu_results_are_not_synced(clock, cuda_spy):
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    bench.sync_result([np.ones(3), torch.ones(3), 1.5, "text", None])
    assert cuda_spy == []


def test_tensorflow_cpu_results_are_neither_copied_nor_synced(monkeypatch, clock):
    # Equal work for every framework: a CPU tensor is ready when the call returns, so waiting
    # costs nothing, and no .numpy() copy to the host is made inside the timed region.
    tf = pytest.importorskip("tensorflow")
    x = tf.constant([1.0, 2.0])
    cls = next(c for c in type(x).__mro__ if "numpy" in vars(c))
    real_numpy, pulls, syncs = cls.numpy, [], []

    def spy(self):
        pulls.append(self)
        return real_numpy(self)

    monkeypatch.setattr(cls, "numpy", spy)
    monkeypatch.setattr(tf.test.experimental, "sync_devices", lambda: syncs.append(1))
    bench.timeit(lambda: (x, {"y": x * 2}), warmup=1, repeats=2, number=1, clock=clock)
    assert pulls == [] and syncs == []


class FakeTFGpuTensor:
    """Looks like a TensorFlow tensor on a GPU to sync_result."""

    __module__ = "tensorflow.python.framework.ops"
    device = "/job:localhost/replica:0/task:0/device:GPU:0"

    def numpy(self):
        raise AssertionError("a device-to-host copy inside the timed region")


def test_tensorflow_gpu_results_wait_for_the_device_without_a_copy(monkeypatch, clock):
    tf = pytest.importorskip("tensorflow")
    syncs = []

    def sync_devices():
        syncs.append(1)
        clock.advance(1 * MS)  # waiting is part of the timing

    monkeypatch.setattr(tf.test.experimental, "sync_devices", sync_devices)
    t = bench.timeit(lambda: [FakeTFGpuTensor()], warmup=1, repeats=3, number=1, clock=clock)
    assert len(syncs) == 1 + 3
    assert t.median == pytest.approx(1 * MS)


def test_jax_results_are_waited_for(clock):
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.ones(3)
    waits = []

    class Spy:  # looks like a jax.Array to sync_result: a jax module and block_until_ready
        __module__ = "jaxlib.xla_extension"

        def block_until_ready(self):
            waits.append(1)
            clock.advance(1 * MS)
            return self

    t = bench.timeit(lambda: (x, [Spy()]), warmup=1, repeats=2, number=1, clock=clock)
    assert len(waits) == 3 and t.median == pytest.approx(1 * MS)
    bench.sync_result(x * 2)  # a real jax.Array: waits without error


def test_bad_sync_is_rejected():
    with pytest.raises(ValueError, match="sync='gpu'"):
        bench.timeit(lambda: None, sync="gpu")


# ----------------------------------------------------------------------------- compare


def test_compare_interleaves_rounds(clock):
    log: list[str] = []
    fns = {name: takes(clock, 1 * MS, log=log, tag=name) for name in "abc"}
    bench.compare(fns, warmup=1, repeats=4, number=1, clock=clock, progress=False)
    warmups, rounds = log[:3], log[3:]
    assert warmups == ["a", "b", "c"]
    # Round robin (not a a a a b b b b ...), each round starting one candidate later.
    assert rounds == [*"abc", *"bca", *"cab", *"abc"]


def test_ratios_pair_samples_by_round(clock):
    # The machine slows down round by round (x1, x2, ... x8): medians spread widely, but within
    # a round b always takes half of a's time, so the paired ratio is exactly 0.5 with no spread.
    slow = iter(f for f in range(1, 9) for _ in range(2))
    durations = {"a": 2 * MS, "b": 1 * MS}

    def make(name):
        return lambda: clock.advance(durations[name] * next(slow))

    c = bench.compare({n: make(n) for n in "ab"}, warmup=0, repeats=8, number=1, clock=clock,
                      progress=False)
    assert c.baseline == "a"
    assert c.timings["a"].iqr > 5 * MS
    assert c.ratios["b"].median == pytest.approx(0.5)
    assert c.ratios["b"].q3 - c.ratios["b"].q1 == pytest.approx(0)
    assert c.ratios["a"].median == pytest.approx(1.0)
    assert c.ratios_to("b")["a"].median == pytest.approx(2.0)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.floats(1e-6, 1.0), st.floats(1e-6, 1.0)), min_size=1, max_size=20))
def test_ratio_is_the_median_of_per_round_ratios(pairs):
    a, b = zip(*pairs, strict=True)
    c = bench.Comparison({"a": bench.Timing("a", a, 1), "b": bench.Timing("b", b, 1)}, "a")
    per_round = [y / x for x, y in pairs]
    r = c.ratios["b"]
    assert r.median == pytest.approx(statistics.median(per_round))
    assert r.q1 <= r.median <= r.q3
    assert c.ratios["a"].median == pytest.approx(1.0)


def test_each_candidate_gets_its_own_calibration(clock):
    fns = {"slow": takes(clock, 5 * MS), "fast": takes(clock, 0.03 * MS)}
    c = bench.compare(fns, baseline="slow", warmup=0, repeats=3, clock=clock, progress=False)
    assert c.timings["slow"].number == 1
    assert c.timings["fast"].number == 100
    assert c.ratios["fast"].median == pytest.approx(0.006)


def test_compare_rejects_bad_input(clock):
    with pytest.raises(KeyError, match="'nope' is not among \\['a'\\]"):
        bench.compare({"a": lambda: None}, baseline="nope", progress=False)
    with pytest.raises(ValueError, match="at least one function"):
        bench.compare({}, progress=False)
    with pytest.raises(ValueError, match="repeats=0"):
        bench.compare({"a": lambda: None}, repeats=0, progress=False)
    with pytest.raises(ValueError, match="warmup=-1"):
        bench.timeit(lambda: None, warmup=-1)
    with pytest.raises(ValueError, match="no samples"):
        bench.Timing("f", [], number=1)


def test_table_and_html_show_every_candidate(clock):
    fns = {"eager": takes(clock, 2 * MS), "<graph>": takes(clock, 0.5 * MS)}
    c = bench.compare(fns, warmup=0, repeats=3, number=1, clock=clock, progress=False)
    lines = c.table().splitlines()
    assert len(lines) == 3
    assert lines[1].startswith("eager") and "2.00 ms" in lines[1] and "1×" in lines[1]
    assert lines[2].startswith("<graph>") and "500 µs" in lines[2] and "0.25×" in lines[2]
    page = c._repr_html_()
    assert page.count("<tr>") == 3 and "&lt;graph&gt;" in page and "<graph>" not in page


def test_progress_bar_can_be_switched_off(clock, capsys):
    bench.compare({"a": takes(clock, 1 * MS)}, repeats=2, number=1, clock=clock, progress=False)
    assert capsys.readouterr().err == ""
    bench.compare({"a": takes(clock, 1 * MS)}, repeats=2, number=1, clock=clock, progress=True,
                  desc="demo")
    assert "demo" in capsys.readouterr().err


def test_real_clock_never_undercounts_a_sleep():
    # time.sleep(d) lasts at least d, so an honest timer can only report more, never less.
    t = bench.timeit(time.sleep, 2e-3, warmup=0, repeats=3, number=1)
    assert t.min >= 2e-3


# ----------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize("n", [1, 2, 5, 6, 9, 15, 40, 101])
def test_median_interval_is_the_narrowest_with_enough_coverage(n):
    # Reference: scipy's binomial distribution. [x_(k), x_(n+1-k)] misses the median when fewer
    # than k of the n values fall on one side: P = 2 * binom.cdf(k - 1, n, 1/2).
    binom = pytest.importorskip("scipy.stats").binom
    values = list(range(n, 0, -1))  # given unsorted
    low, high, coverage = bench.median_interval(values, 0.95)
    k = int(low)  # the values are 1..n, so x_(k) == k
    assert high == n + 1 - k
    assert coverage == pytest.approx(1 - 2 * binom.cdf(k - 1, n, 0.5))
    if n >= 6:  # enough values for 95%: k is the largest that keeps it
        assert coverage >= 0.95
        assert k == (n + 1) // 2 or 1 - 2 * binom.cdf(k, n, 0.5) < 0.95
    else:  # too few: the whole range, and the coverage it really has
        assert (low, high) == (1, n) and coverage < 0.95


def test_median_interval_covers_as_often_as_it_says():
    # 4000 samples of 9 draws from a skewed distribution whose median is 1 (lognormal).
    rng = np.random.default_rng(0)
    hits = [lo <= 1.0 <= hi for lo, hi, _ in
            (bench.median_interval(rng.lognormal(size=9)) for _ in range(4000))]
    assert np.mean(hits) == pytest.approx(bench.median_interval(range(9))[2], abs=0.015)


@pytest.mark.parametrize(
    ("low", "high", "outcome"),
    [(0.40, 0.60, "faster"), (0.90, 0.95, "faster"), (1.06, 2.0, "slower"),
     (0.96, 1.04, "same"), (0.96, 0.99, "within"), (1.01, 1.04, "within"),
     (0.90, 0.99, "undecided"), (0.90, 1.10, "undecided"), (1.02, 1.20, "undecided")],
)
def test_decide_needs_the_whole_interval_on_one_side(low, high, outcome):
    ratio = bench.Ratio((low + high) / 2, low, high, low=low, high=high, coverage=0.96, rounds=9)
    assert bench.decide(ratio, margin=0.05) == outcome
    unsure = bench.Ratio((low + high) / 2, low, high, low=low, high=high, coverage=0.9)
    assert bench.decide(unsure) == "undecided"  # less sure than asked: never decided


# Each verdict, decided by the same code the lessons print from, on synthetic timings whose true
# ratio is known: the lessons' timing cells are not compared by nbval (their words depend on the
# machine), so this is where what those words mean is tested.
@pytest.mark.parametrize(
    ("graph_ms", "outcome", "words"),
    [((0.5,), "faster", "faster than eager"),
     ((1.6,), "slower", "slower than eager"),
     ((0.99, 1.01), "same", "no measurable difference from eager (within 10%)"),
     ((0.95,), "within", "within 10% of eager (0.95×)"),
     ((0.85, 1.15), "undecided", "cannot tell from this run how it compares with eager")],
)
def test_each_verdict_on_synthetic_timings(clock, graph_ms, outcome, words):
    # The graph's rounds alternate between the given times (one time: always that time), so
    # the per-round ratios, their median interval and the verdict are known exactly.
    c = bench.compare({"eager": takes(clock, 1 * MS),
                       "graph": takes(clock, *(t * MS for t in graph_ms))},
                      warmup=0, repeats=12, number=1, clock=clock, progress=False)
    v = c.verdict("graph")
    assert (v.outcome, v.words) == (outcome, words)
    assert c.decided == (outcome != "undecided")
    row = next(line for line in c.table().splitlines() if line.startswith("graph"))
    assert v.outcome_text in row


def test_within_is_only_said_of_an_interval_that_excludes_1():
    # 0.85x [0.807, 0.867] (the interval the old words called "no measurable difference"):
    # inside a 25% band, measurably faster; and outside a 10% one.
    r = bench.Ratio(0.85, 0.82, 0.86, low=0.807, high=0.867, coverage=0.96, rounds=12)
    assert bench.decide(r, margin=0.25) == "within"
    assert bench.decide(r, margin=0.10) == "faster"
    v = bench.Verdict("graph", "eager", bench.decide(r, 0.25), r, margin=0.25)
    assert v.words == "within 25% of eager (0.85×)"
    holds_one = bench.Ratio(0.97, 0.95, 1.0, low=0.93, high=1.02, coverage=0.96, rounds=12)
    assert bench.decide(holds_one, margin=0.25) == "same"


def noisy(clock, rng, seconds, spread=0.2):
    """A function taking ``seconds`` times a random factor in [1 - spread, 1 + spread]."""
    return lambda: clock.advance(seconds * (1 + spread * (2 * rng.random() - 1)))


def test_compare_samples_until_every_verdict_is_decided(clock):
    rng = np.random.default_rng(1)
    fns = {"eager": noisy(clock, rng, 1 * MS), "graph": noisy(clock, rng, 0.5 * MS),
           "twin": noisy(clock, rng, 1 * MS, spread=0.01)}
    c = bench.compare(fns, warmup=0, repeats=6, number=1, clock=clock, progress=False,
                      max_time_s=10.0)
    assert not c.capped and c.decided
    verdicts = c.verdicts()
    assert verdicts["graph"].outcome == "faster"
    assert verdicts["twin"].outcome == "same"  # ±1% noise against ±20%: within 10% only after
    rounds = len(c.timings["eager"].samples)  # more rounds than "graph" alone would need
    assert 6 < rounds < 200
    alone = bench.compare({k: fns[k] for k in ("eager", "graph")}, warmup=0, repeats=6, number=1,
                          clock=clock, progress=False, max_time_s=10.0)
    assert len(alone.timings["eager"].samples) < rounds


def on_the_edge(seed: int = 0, n: int = 4000) -> list[float]:
    """Times (ms) whose typical ratio to 1 ms is exactly the 10% margin's edge, 1.1, with a 5%
    spread: an interval of their ratio keeps straddling 1.1, so no number of rounds decides."""
    return list(1.1 * MS * np.exp(np.random.default_rng(seed).normal(0, 0.05, n)))


def test_compare_stops_at_the_time_cap_and_says_undecided(clock):
    fns = {"a": takes(clock, 1 * MS), "b": takes(clock, *on_the_edge())}
    c = bench.compare(fns, warmup=0, repeats=6, number=1, clock=clock, progress=False,
                      max_time_s=0.2)
    assert c.capped and not c.decided
    assert c.verdict("b").outcome == "undecided"
    assert str(c.verdict("b")).startswith("b vs a: cannot tell from this run (time ratio")
    rounds = len(c.timings["a"].samples)
    assert 0.19 <= rounds * 2.1 * MS < 0.2 + 3 * MS  # the cap cuts the round it falls in short


def test_compare_time_cap_holds_on_the_wall_clock_too(clock):
    # The CPU-time clock barely moves (a machine so busy that this process gets little CPU), but
    # each call sleeps: sampling must stop after max_time_s seconds of wall-clock time anyway.
    def sleeps(*seconds):
        turn = iter(np.resize(seconds, 10_000))
        return lambda: (time.sleep(0.002), clock.advance(next(turn) * 1e-6))

    fns = {"a": sleeps(1.0), "b": sleeps(*np.array(on_the_edge()) / MS)}  # as above
    c = bench.compare(fns, warmup=0, repeats=6, number=1, clock=clock, progress=False,
                      max_time_s=0.2)
    assert c.capped and c.verdict("b").outcome == "undecided"
    # A round (a call of each) sleeps 4 ms or more, so rounds that started before 0.2 s had
    # passed number at most 50, and the one that crossed it is the last; a busy machine only
    # makes rounds longer and fewer. (Not the seconds it took: a loaded machine stretches those
    # past any bound.) Without the wall-clock cap, sampling would go on to MAX_ROUNDS.
    rounds = len(c.timings["a"].samples)
    assert rounds <= 0.2 / (2 * 0.002) + 1 < bench.MAX_ROUNDS
    assert clock() < 0.01  # the CPU-time clock never came near the cap


def test_fixed_rounds_without_a_time_cap(clock):
    fns = {"a": takes(clock, 1 * MS), "b": takes(clock, 1.05 * MS)}
    c = bench.compare(fns, warmup=0, repeats=7, number=1, clock=clock, progress=False)
    assert len(c.timings["b"].samples) == 7 and not c.capped


def test_pairs_give_each_candidate_its_own_baseline(clock):
    fns = {"torch eager": takes(clock, 1 * MS), "torchscript": takes(clock, 0.5 * MS),
           "tf eager": takes(clock, 4 * MS), "tf.function": takes(clock, 1 * MS)}
    pairs = {"torchscript": "torch eager", "tf.function": "tf eager"}
    c = bench.compare(fns, warmup=0, repeats=6, number=1, clock=clock, progress=False,
                      pairs=pairs, max_time_s=1.0)
    assert set(c.verdicts()) == set(pairs)
    assert c.verdict("tf.function").baseline == "tf eager"
    assert c.verdict("tf.function").ratio.median == pytest.approx(0.25)
    assert c.verdict("tf.function", "torch eager").outcome == "same"  # another baseline asked
    table = c.table()
    assert "time / its baseline" in table and "faster than tf eager" in table
    with pytest.raises(KeyError, match="pairs: baseline 'jax'"):
        bench.compare(fns, pairs={"tf.function": "jax"}, progress=False)


def test_verdict_words_have_no_numbers(clock):
    c = bench.compare({"eager": takes(clock, 2 * MS), "graph": takes(clock, 1 * MS)},
                      warmup=0, repeats=6, number=1, clock=clock, progress=False)
    v = c.verdict("graph")
    assert v.words == "faster than eager"
    assert str(v) == ("graph vs eager: faster (time ratio 0.5, 95% interval [0.5, 0.5], "
                      "6 rounds)")
    same = bench.Verdict("a", "b", "same", v.ratio, margin=0.1)
    assert same.words == "no measurable difference from b (within 10%)"
    lines = c.table().splitlines()
    assert "95% interval" in lines[0] and "time / eager" in lines[0]
    assert "(baseline)" in lines[1] and "[0.5, 0.5]" in lines[2] and "faster" in lines[2]


def test_gc_is_paused_inside_samples_only(clock):
    import gc

    seen = []
    bench.compare({"a": lambda: seen.append(gc.isenabled())}, warmup=0, repeats=3, number=2,
                  clock=clock, progress=False)
    assert seen == [False] * 6
    assert gc.isenabled()


def test_first_calls_build_afresh_each_time(clock):
    builds = []

    def build():
        builds.append(1)
        clock.advance(0.1 * len(builds))  # tracing: 0.1 s, 0.2 s, 0.3 s, ...
        return lambda x: clock.advance(x)

    t = bench.first_calls(build, 0.01, repeats=4, clock=clock, name="graph")
    assert len(builds) == 4
    assert t.samples == pytest.approx([0.11, 0.21, 0.31, 0.41])
    assert (t.name, t.number, t.first_call) == ("graph", 1, pytest.approx(0.11))


def test_break_even_of_uses_medians_and_intervals(clock):
    rng = np.random.default_rng(3)
    c = bench.compare({"eager": noisy(clock, rng, 2 * MS), "graph": noisy(clock, rng, 1 * MS),
                       "same": noisy(clock, rng, 2 * MS, spread=0.001)},
                      warmup=0, repeats=8, number=1, clock=clock, progress=False, max_time_s=5)
    firsts = bench.Timing("graph", [0.09, 0.1, 0.1, 0.11, 0.1, 0.12, 0.1], 1)
    be = bench.break_even_of(firsts, c, "graph")
    eager = c.timings["eager"].median
    assert be.outcome == "pays back"
    assert be.calls == bench.break_even(0.1, eager * c.ratios["graph"].median, eager)
    assert be.low <= be.calls <= be.high
    assert be.low == bench.break_even(0.09, eager * c.ratios["graph"].low, eager)
    assert "repaid after" in str(be) and be.words.startswith("repays")
    same = bench.break_even_of(0.5, c, "same")
    assert same.outcome == "no gain shown" and "no measurable difference" in same.words
    assert "never" not in same.words  # a gain under the margin is not shown, not ruled out


def test_break_even_of_a_slower_mode_is_never(clock):
    c = bench.compare({"eager": takes(clock, 1 * MS), "graph": takes(clock, 2 * MS)},
                      warmup=0, repeats=6, number=1, clock=clock, progress=False)
    be = bench.break_even_of(0.1, c, "graph")
    assert be.outcome == "never" and be.words == (
        "never repays its first call (slower than eager)")


# ----------------------------------------------------------------------------- sweep


def fake_sweep(clock: FakeClock) -> bench.Sweep:
    """'linear' takes size µs, 'flat' 100 µs; 'big-only' exists from size 100 on."""

    def make_fns(size):
        fns = {"linear": takes(clock, size * 1e-6), "flat": takes(clock, 100e-6)}
        if size >= 100:
            fns["big-only"] = takes(clock, 1e-6)
        return fns

    return bench.sweep(make_fns, [10, 100, 1000], warmup=0, repeats=3, clock=clock,
                       progress=False)


def test_sweep_keeps_the_pairs_each_size_has(clock):
    s = bench.sweep(lambda n: {"eager": takes(clock, 1 * MS), "graph": takes(clock, 0.5 * MS),
                               **({"big": takes(clock, 2 * MS)} if n > 1 else {})},
                    [1, 2], warmup=0, repeats=6, clock=clock, progress=False,
                    pairs={"graph": "eager", "big": "eager"})
    assert [set(v) for v in s.verdicts()] == [{"graph"}, {"graph", "big"}]
    assert s.verdicts()[1]["big"].outcome == "slower"


def test_sweep_times_each_size(clock):
    s = fake_sweep(clock)
    assert s.names == ["linear", "flat", "big-only"]
    assert s.medians("linear") == pytest.approx([10e-6, 100e-6, 1000e-6])
    assert s.medians("big-only")[0] is None
    assert s.comparisons[2].ratios["flat"].median == pytest.approx(0.1)
    rows = s.table().splitlines()
    assert len(rows) == 4 and "—" in rows[1] and "1.00 ms" in rows[3]


# ----------------------------------------------------------------------------- break-even


def test_break_even_examples():
    assert bench.break_even(1.0, 0.001, 0.002) == 999
    assert bench.break_even(0.001, 0.001, 0.002) == 1  # no compile cost: wins from the start
    assert bench.break_even(1.0, 0.002, 0.001) is None  # slower per call: never pays off
    assert bench.break_even(1.0, 0.001, 0.001) is None
    with pytest.raises(ValueError, match="negative"):
        bench.break_even(-1.0, 0.001, 0.002)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 5000), st.integers(1, 60), st.integers(1, 60))
def test_break_even_matches_counting_calls(first, graph, eager):
    """Compare with a brute-force count of the calls until graph's total <= eager's."""
    expected = None
    for n in range(1, 10_000):
        if first + (n - 1) * graph <= n * eager:
            expected = n
            break
    assert bench.break_even(float(first), float(graph), float(eager)) == expected


# ----------------------------------------------------------------------------- saving, plotting


def test_json_round_trip(clock, tmp_path):
    fns = {"a": takes(clock, 1 * MS, 3 * MS), "b": takes(clock, 2 * MS)}
    c = bench.compare(fns, warmup=1, repeats=4, number=1, clock=clock, progress=False)
    path = c.save_json(tmp_path / "out" / "c.json")
    data = json.loads(path.read_text())  # plain JSON: nothing but dicts, lists, str and numbers
    assert data["kind"] == "comparison" and data["timings"]["a"]["median"] == c.timings["a"].median
    back = bench.load_json(path)
    assert isinstance(back, bench.Comparison) and back.to_dict() == c.to_dict()
    assert back.timings["a"].first_call == c.timings["a"].first_call

    s = fake_sweep(clock)
    back = bench.load_json(s.save_json(tmp_path / "s.json"))
    assert isinstance(back, bench.Sweep) and back.to_dict() == s.to_dict()

    t = c.timings["b"]
    (tmp_path / "t.json").write_text(json.dumps(t.to_dict()))
    assert bench.load_json(tmp_path / "t.json").to_dict() == t.to_dict()


def test_plots_return_axes(clock):
    fns = {"eager": takes(clock, 2 * MS), "graph": takes(clock, 0.5 * MS)}
    c = bench.compare(fns, warmup=0, repeats=3, number=1, clock=clock, progress=False)
    ax = c.plot()
    assert isinstance(ax, Axes) and len(ax.patches) == 2
    assert isinstance(c.plot(log=True), Axes)

    s = fake_sweep(clock)
    ax = s.plot()
    assert isinstance(ax, Axes) and len(ax.get_lines()) == 3
    assert ax.get_xscale() == ax.get_yscale() == "log"
    ax = s.plot_ratio("flat")
    assert isinstance(ax, Axes)
    ax = s.plot_ratio({"linear": "flat", "big-only": "flat"})
    labels = [line.get_label() for line in ax.get_lines()]
    assert "linear / flat" in labels and "big-only / flat" in labels
    _, given_ax = plt.subplots()
    assert s.plot(ax=given_ax, colors={"flat": "black"}) is given_ax
    flat = next(line for line in given_ax.get_lines() if line.get_label() == "flat")
    assert flat.get_color() == "black"


# ----------------------------------------------------------------------------- frameworks.py
# The benchmark checks every mode against numpy references before timing it; here those
# references are checked in turn against PyTorch.


@pytest.fixture(scope="module")
def frameworks():
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "frameworks.py"
    spec = importlib.util.spec_from_file_location("bench_frameworks", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.mark.parametrize(("k", "stride"), [(3, 1), (3, 2), (1, 2)])
def test_numpy_conv_matches_torch(frameworks, k, stride):
    torch = pytest.importorskip("torch")
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8, 8, 3))
    w = rng.standard_normal((k, k, 3, 4))
    want = torch.nn.functional.conv2d(torch.tensor(x).permute(0, 3, 1, 2),
                                      torch.tensor(w).permute(3, 2, 0, 1), stride=stride,
                                      padding=k // 2).permute(0, 2, 3, 1).numpy()
    np.testing.assert_allclose(frameworks.conv_np(x, w, stride), want, rtol=1e-10, atol=1e-12)


def test_numpy_mlp_steps_match_torch_autograd(frameworks):
    torch = pytest.importorskip("torch")
    data = frameworks.mlp_data(40)
    params = [torch.tensor(a, dtype=torch.float64, requires_grad=True)
              for p in data["params"] for a in p]
    X, y = torch.tensor(data["X"], dtype=torch.float64), torch.tensor(data["y"])
    losses = []
    for _ in range(2):
        h = X
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            h = torch.relu(h) if i + 2 < len(params) else h
        loss = torch.nn.functional.cross_entropy(h, y)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p -= frameworks.LR * g
        losses.append(loss.item())
    want = frameworks.mlp_losses_np(data["params"], data["X"], data["Y"])
    assert want == pytest.approx(losses, rel=1e-10)
    assert want[1] < want[0]  # the update is a descent step


def test_torch_cnn_matches_numpy_reference(frameworks):
    torch = pytest.importorskip("torch")
    data = frameworks.cnn_data(4)
    fn = frameworks.cnn_torch(data, torch.device("cpu"), lambda f, example: f)
    want = frameworks.cnn_np(data["x"], data["net"])
    assert want.shape == (8, 10)
    assert frameworks.check([fn()], [want], rtol=1e-4) is None


def test_check_rejects_a_wrong_answer(frameworks):
    import numpy as np

    want = np.linspace(-1, 1, 10)
    assert frameworks.check([want + 1e-6], [want], rtol=2e-3) is None
    assert "differs" in frameworks.check([want * 1.01], [want], rtol=2e-3)
    assert "shape" in frameworks.check([want[:5]], [want], rtol=2e-3)


@pytest.mark.parametrize("mode", ["eager", "graph", "fused"])
def test_minigraph_cnn_matches_numpy_reference(frameworks, mode):
    data = frameworks.cnn_data(4)
    fn = frameworks.cnn_mg(data, mode)
    want = frameworks.cnn_np(data["x"], data["net"])
    assert frameworks.check([fn(), fn()], [want, want], rtol=1e-4) is None


def test_against_target_reads_the_whole_interval():
    """A target is met only when the interval is wholly under it; straddling it says so."""
    under = bench.Ratio(1.3, 1.2, 1.4, low=1.25, high=1.5, coverage=0.96)
    over = bench.Ratio(1.6, 1.55, 1.7, low=1.51, high=1.8, coverage=0.96)
    straddle = bench.Ratio(1.45, 1.4, 1.55, low=1.4, high=1.6, coverage=0.96)
    assert bench.against_target(under, 1.5) == "met"
    assert bench.against_target(over, 1.5) == "MISSED"
    assert bench.against_target(straddle, 1.5).startswith("undecided")
    assert bench.against_target(bench.Ratio(1.2, 1.2, 1.2), 1.5) == "met"  # no interval: the median


# ----------------------------------------------------------------- benchmarks/verdicts.py


def _verdicts_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "verdicts.py"
    spec = importlib.util.spec_from_file_location("bench_verdicts", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_verdict_simulation_counts_false_claims():
    sim = _verdicts_script()
    assert sim.false_claim("faster", 0.95, 0.1) and not sim.false_claim("faster", 0.85, 0.1)
    assert sim.false_claim("slower", 1.05, 0.1) and not sim.false_claim("slower", 1.2, 0.1)
    assert sim.false_claim("within", 1.2, 0.1) and not sim.false_claim("within", 0.95, 0.1)
    assert sim.false_claim("same", 0.8, 0.1) and not sim.false_claim("same", 1.0, 0.1)
    assert not sim.false_claim("undecided", 5.0, 0.1)


SIMULATED = (0.5, 0.92, 1.0, 1.08, 2.0)  # far, just inside and just outside the margin, equal


def test_the_lessons_procedure_keeps_its_promise_on_correlated_rounds():
    # bench.compare itself, sampling until decided with lesson 10's settings, on a simulated
    # machine whose rounds are correlated (rho 0.5) and whose true ratios are known: at most 5%
    # of decided words are false at every ratio, and clear effects are always decided.
    sim = _verdicts_script()
    table = sim.simulate("correlated", runs=60, margin=0.1, sigma=0.08, rho=0.5, seed=3,
                         ratios=SIMULATED)
    assert max(wrong for wrong, _, _ in table.values()) <= 0.05
    assert table[0.5][:2] == (0.0, 0.0) and table[2.0][:2] == (0.0, 0.0)
    assert table[0.5][2] <= 18  # decided by the second look


def test_the_simulation_catches_the_uncorrected_procedure(monkeypatch):
    # The same simulation, with the procedure bench had before issue 39 (a look each time the
    # rounds grew by a quarter, each at a plain 95%, from the median of rounds treated as
    # independent): it says "faster" for a true ratio of 0.92 far more often than 5%.
    sim = _verdicts_script()
    monkeypatch.setattr(bench, "LOOK_GROWTH", 1.25)
    monkeypatch.setattr(bench, "ratio_interval",
                        lambda ratios, confidence=0.95, looks=1: bench.median_interval(ratios))
    table = sim.simulate("correlated", runs=60, margin=0.1, sigma=0.08, rho=0.5, seed=3,
                         ratios=(0.92,))
    assert table[0.92][0] > 0.05


def test_look_schedule_grows_and_ends_at_the_cap():
    assert bench.look_schedule(6) == [6, 18, 54, 162, 486, 1000]
    assert bench.look_schedule(1, 10) == [1, 3, 9, 10]
    assert bench.look_schedule(20, 20) == [20]


def test_compare_pays_for_its_looks(clock):
    fns = {"a": takes(clock, 1 * MS), "b": takes(clock, 0.5 * MS, 0.52 * MS)}
    fixed = bench.compare(fns, warmup=0, repeats=9, number=1, clock=clock, progress=False)
    assert fixed.looks == 1 and fixed.ratios["b"].coverage == pytest.approx(0.95)
    until = bench.compare(fns, warmup=0, repeats=6, number=1, clock=clock, progress=False,
                          max_time_s=1)
    looks = len(bench.look_schedule(6))
    assert until.looks == looks
    assert until.ratios["b"].coverage == pytest.approx(1 - 0.05 / looks)
    assert until.verdict("b").outcome == "faster"
    assert "95% interval" in str(until.verdict("b"))  # all looks together: 95%
    again = bench.Comparison.from_dict(until.to_dict())
    assert again.looks == looks and again.verdict("b") == until.verdict("b")


def ar1_logs(rng, n: int, rho: float, sigma: float) -> np.ndarray:
    out = np.empty(n)
    out[0] = rng.normal(0, sigma)
    for i in range(1, n):
        out[i] = rho * out[i - 1] + rng.normal(0, sigma * np.sqrt(1 - rho**2))
    return out


def test_ratio_interval_covers_the_true_ratio_when_rounds_are_correlated():
    # Log-ratios drifting as an AR(1) process (lag-1 autocorrelation 0.5) around log 0.8, 48
    # rounds: the median interval of rounds taken as independent holds 0.8 only about 85% of the
    # time, batch means alone (8 batches of 6) 92%; with the effective sample size's standard
    # error as a floor, the interval keeps its 95% (97% here).
    rng = np.random.default_rng(11)
    batched = plain = 0
    for _ in range(1000):
        ratios = 0.8 * np.exp(ar1_logs(rng, 48, 0.5, 0.08))
        low, high, _ = bench.ratio_interval(ratios)
        batched += low <= 0.8 <= high
        low, high, _ = bench.median_interval(ratios)
        plain += low <= 0.8 <= high
    assert batched / 1000 >= 0.95
    assert plain / 1000 < 0.88


def test_lag1_autocorrelation_and_effective_rounds_against_the_ar1_model():
    # A long AR(1) series: the estimate is the model's rho (the small-sample term is tiny at this
    # length), and the rounds are worth n (1 - rho) / (1 + rho) independent ones; independent
    # draws are worth all of theirs, and an estimate below 0 counts as 0.
    rng = np.random.default_rng(5)
    x = ar1_logs(rng, 20_000, 0.7, 1.0)
    assert bench.lag1_autocorrelation(x) == pytest.approx(0.7, abs=0.02)
    assert bench.effective_rounds(x) == pytest.approx(20_000 * 0.3 / 1.7, rel=0.1)
    assert bench.effective_rounds(rng.normal(size=20_000)) > 19_000
    assert bench.lag1_autocorrelation(np.diff(rng.normal(size=1000))) == 0.0  # about -0.5


def test_ratio_interval_batches_and_its_edge_cases():
    assert bench.batch_size(6) == 2 and bench.batch_size(48) == 6 and bench.batch_size(1) == 1
    assert bench.ratio_interval([0.7]) == (0.7, 0.7, 0.0)  # one round: no interval
    assert bench.decide(bench.Ratio.of([0.7])) == "undecided"
    low, high, p = bench.ratio_interval([0.5] * 8, looks=4)
    assert low == pytest.approx(0.5) and high == pytest.approx(0.5) and p == 1 - 0.05 / 4
    # the earliest rounds that do not fill a batch are left out: 10 rounds, 3 batches of 3
    low, high, _ = bench.ratio_interval([100.0] + [0.5] * 9)
    assert high == pytest.approx(0.5)
    with pytest.raises(ValueError, match="at least one"):
        bench.ratio_interval([])


@pytest.mark.parametrize("value, marks, text", [
    (1.0996, (1 / 1.1, 1.0, 1.1), "1.0996"), (1.1004, (1.1,), "1.1004"),
    (0.9092, (1 / 1.1,), "0.9092"), (0.9089, (1 / 1.1,), "0.909"), (0.305, (1.0,), "0.305"),
    (1.2, (1.1,), "1.2")])
def test_bounds_print_with_the_digits_a_verdict_needs(value, marks, text):
    assert bench.format_bound(value, marks) == text
    assert (float(text) < max(marks)) == (value < max(marks))


def test_a_verdict_prints_bounds_a_reader_can_check():
    r = bench.Ratio(1.05, 1.0, 1.1, low=1.0003, high=1.0996, coverage=0.99, rounds=24)
    v = bench.Verdict("b", "a", bench.decide(r), r)
    assert v.outcome == "within"
    assert "[1.0003, 1.0996]" in str(v) and r.show() == "1.05× [1.0003, 1.0996]"


def test_ratio_of_medians_covers_the_true_ratio():
    # Two modes timed in separate runs (no shared rounds): the interval of the ratio of their
    # medians, built from each median's interval, holds the true ratio at least 95% of the time.
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(1000):
        a = bench.Timing("a", list(0.5 * rng.lognormal(0, 0.1, 12)), 1)
        b = bench.Timing("b", list(rng.lognormal(0, 0.1, 12)), 1)
        r = bench.ratio_of_medians(a, b)
        assert r.coverage >= 0.95 and r.low <= r.median <= r.high
        hits += r.low <= 0.5 <= r.high
    assert hits / 1000 >= 0.95
    # The verdict machinery reads it like any other ratio.
    fast = bench.ratio_of_medians(bench.Timing("a", [1.0] * 12, 1),
                                  bench.Timing("b", [3.0] * 12, 1))
    assert bench.decide(fast) == "faster"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-3.0, max_value=3.0), min_size=4, max_size=60))
def test_the_ratio_shown_lies_in_the_interval_shown(logs):
    """The figure printed next to an interval is the interval's own centre (the geometric mean
    of its batch means), never a statistic it need not contain: a skewed run printed
    ``0.0139× [0.00718, 0.0133]``, a median per-round ratio beside a batch-means interval."""
    ratio = bench.Ratio.of(np.exp(logs))
    assert ratio.low <= ratio.estimate <= ratio.high
    shown = ratio.show()
    assert shown.startswith(f"{ratio.estimate:.3g}×"), shown
    # by hand: batches of floor(sqrt(n)) consecutive rounds, the earliest n mod b left out
    b = int(np.sqrt(len(logs)))
    batches = np.asarray(logs[len(logs) % b:]).reshape(-1, b).mean(axis=1)
    assert ratio.estimate == pytest.approx(np.exp(batches.mean()), rel=1e-12)


def test_a_skewed_run_shows_a_ratio_inside_its_interval():
    ratios = [0.004, 0.0139, 0.0139, 0.0139] * 25  # ten batches of ten; a fast round in four
    ratio = bench.Ratio.of(ratios)
    assert ratio.median == pytest.approx(0.0139)
    assert ratio.low <= ratio.estimate <= ratio.high < ratio.median
