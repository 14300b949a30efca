"""Honest timing: warm-up, repeats, device synchronisation, medians and spreads, verdicts, plots.

A timing is only as good as what it waits for and what it leaves out. First calls trace, compile
and fill caches; GPUs may return before the work is done; a shared machine adds noise in bursts.
So every measurement here

- makes ``warmup`` untimed calls first (the first one's time is kept as ``first_call``: that is
  where tracing and compilation happen, and what :func:`break_even` weighs);
- waits for each call's result (``sync``): ``torch.cuda.synchronize()`` for CUDA tensors,
  ``tf.test.experimental.sync_devices()`` for TensorFlow tensors on a GPU, never a copy to the host;
- pauses Python's garbage collector while a sample is taken, so that a collection triggered by
  one candidate's garbage is not charged to another;
- takes samples of ``number`` calls each and reports the median and the interquartile range
  (IQR), which a few slow outliers do not move;
- times several candidates in interleaved rounds, so drift hits all of them alike, and compares
  them by the **per-round ratio**: round ``i`` timed every candidate once, close together, so the
  ratio of their ``i``-th samples compares like with like;
- decides, from a 95% interval of the typical per-round ratio, a :class:`Verdict` whose words
  say exactly what the interval shows, against a band of ``margin`` around 1:

  ========================================  =============================================
  the interval                              the words
  ========================================  =============================================
  wholly below ``1 / (1 + margin)``         *faster*
  wholly above ``1 + margin``               *slower*
  inside the band, and it holds 1           *no measurable difference* (within ``margin``)
  inside the band, and it excludes 1        *within* ``margin``, with the ratio printed
  anything else, or too few rounds          *cannot tell from this run*
  ========================================  =============================================

  With ``max_time_s``, :func:`compare` keeps adding rounds until every verdict is decided or the
  time is up; on a busy machine it simply takes longer. Two things would make such intervals
  promise more than they hold, and both are corrected for (:func:`ratio_interval`):

  * **repeated looks**: stopping at the first look that decides gives every look its own chance
    to be wrong. Looks are taken only at a fixed schedule (:func:`look_schedule`: the rounds
    triple from ``repeats``), and each look's interval is at ``1 - (1 - confidence) / looks``
    (Bonferroni), so that all of them together are wrong at most ``1 - confidence`` of the time;
  * **correlated rounds**: consecutive rounds share the machine's state (its load, its clock
    frequency, what the caches hold), so their ratios are not independent draws, and an interval
    that treats them as such is too narrow. The interval is built from **batch means**:
    consecutive rounds in batches of about ``sqrt(rounds)``, each batch's mean log-ratio, and a
    Student t interval of their mean, whose batches are much closer to independent than rounds.
    Batches that are short beside how long the rounds stay correlated still understate the
    spread, so the interval's standard error is the larger of the batch means' and the one the
    rounds' own lag-1 autocorrelation gives (their **effective sample size**,
    :func:`effective_rounds`).

  ``benchmarks/verdicts.py`` runs :func:`compare` itself on a simulated machine with known true
  ratios and correlated rounds: the share of false decided words stays under 5% at every ratio.

NB: PyTorch's ``torch.utils.benchmark.Timer`` works the same way for one statement (warm-up,
CUDA synchronisation, median and IQR); timing several in interleaved rounds and deciding their
ratios is what this module adds, so that its conclusions hold up on a busy machine.

>>> t = timeit(sorted, list(range(100)), repeats=5)
>>> len(t.samples), t.number >= 1
(5, True)
>>> c = compare({"sorted": lambda: sorted(range(100)), "list": lambda: list(range(100))},
...             repeats=5, progress=False)
>>> c.baseline, sorted(c.ratios)
('sorted', ['list', 'sorted'])
"""

from __future__ import annotations

import contextlib
import gc
import html
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

Clock = Callable[[], float]

#: A sample lasts at least this long when ``number`` is calibrated, so that the clock's resolution
#: and the timing loop's own overhead are small next to it.
MIN_SAMPLE_S = 2e-3

#: Calibration never asks for more calls per sample than this (a function that takes no time on
#: the clock would otherwise never reach ``MIN_SAMPLE_S``).
MAX_NUMBER = 1_000_000

#: Differences smaller than this share of the baseline's time count as "no measurable
#: difference": a verdict needs the ratio's interval inside [1 / (1 + MARGIN), 1 + MARGIN].
#: On a shared machine, effects of a few percent come and go with the neighbours' jobs (cache
#: and frequency), so the course claims nothing smaller than 10%.
MARGIN = 0.10

#: How sure an interval must be: the chance that it holds the true median ratio.
CONFIDENCE = 0.95

#: Sampling until decided never takes more rounds than this, whatever the time cap says.
MAX_ROUNDS = 1000

#: Sampling until decided looks at the rounds when their count has tripled since the last look
#: (``repeats``, 3 ``repeats``, 9 ``repeats``, ... up to :data:`MAX_ROUNDS`): few looks, each paid
#: for in the interval's confidence (:func:`look_schedule`). Doubling (more looks, each paid more)
#: let strongly correlated rounds (lag-1 autocorrelation 0.8) through 6% of the time in
#: ``benchmarks/verdicts.py``; tripling, 5.0-5.3%, until the interval also paid for the rounds'
#: autocorrelation (:func:`effective_rounds`).
LOOK_GROWTH = 3

#: The five verdicts (:attr:`Verdict.outcome`): SAME is "no measurable difference" (the interval
#: holds 1 and lies inside the margin's band), WITHIN is "within the margin" (inside the band but
#: measurably off 1, e.g. [0.93, 0.97]), UNDECIDED is "cannot tell from this run".
FASTER, SLOWER, SAME, WITHIN, UNDECIDED = "faster", "slower", "same", "within", "undecided"

# ----------------------------------------------------------------------------- units

_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def pick_unit(seconds: float) -> tuple[str, float]:
    """The unit that shows ``seconds`` with 1 to 3 digits before the point, as (name, scale).

    >>> pick_unit(1.23e-5)
    ('µs', 1e-06)
    """
    seconds = abs(float(f"{seconds:.3g}"))  # 999.96 µs rounds to 1.00 ms, not "1000 µs"
    for name, scale in _UNITS:
        if seconds >= scale:
            return name, scale
    return _UNITS[-1]


def format_time(seconds: float, spread: float | None = None) -> str:
    """Three significant digits in a unit picked for ``seconds``; ``spread`` uses the same unit.

    >>> format_time(1.234e-5), format_time(1.234e-5, 4e-7), format_time(2.5)
    ('12.3 µs', '12.3 µs ± 0.4 µs', '2.50 s')
    """
    name, scale = pick_unit(seconds)
    value = float(f"{seconds / scale:.3g}")
    decimals = max(0, 2 - math.floor(math.log10(abs(value)))) if value else 0
    text = f"{value:.{decimals}f} {name}"
    if spread is not None:
        text += f" ± {spread / scale:.{decimals}f} {name}"
    return text


# ----------------------------------------------------------------------------- results


@dataclass(repr=False)
class Timing:
    """What :func:`timeit` measured: seconds per call, one value per sample, and their summary.

    >>> t = Timing("f", samples=[1e-6, 2e-6, 3e-6, 4e-6, 100e-6], number=1000)
    >>> print(t)  # the 100 µs outlier moves neither the median nor the IQR
    3.00 µs ± 1.00 µs (median ± IQR/2 of 5 samples, 1000 calls each)
    """

    name: str
    samples: list[float]
    number: int
    #: seconds the very first call took (tracing, compiling, caches); None without warm-up
    first_call: float | None = None

    def __post_init__(self) -> None:
        if len(self.samples) == 0:
            raise ValueError(f"Timing {self.name!r} has no samples: use repeats >= 1")
        self.samples = [float(s) for s in self.samples]

    @property
    def median(self) -> float:
        return float(np.median(self.samples))

    @property
    def q1(self) -> float:
        """First quartile: a quarter of the samples are faster."""
        return float(np.percentile(self.samples, 25))

    @property
    def q3(self) -> float:
        """Third quartile: a quarter of the samples are slower."""
        return float(np.percentile(self.samples, 75))

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def min(self) -> float:
        return float(np.min(self.samples))

    @property
    def mean(self) -> float:
        return float(np.mean(self.samples))

    def __str__(self) -> str:
        calls = "1 call" if self.number == 1 else f"{self.number} calls"
        return (
            f"{format_time(self.median, self.iqr / 2)} (median ± IQR/2 of "
            f"{len(self.samples)} samples, {calls} each)"
        )

    def __repr__(self) -> str:
        return f"<Timing {self.name!r}: {self}>"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON: the raw samples and, for readers, their summary."""
        summary = {k: getattr(self, k) for k in ("median", "q1", "q3", "iqr", "min", "mean")}
        return {"kind": "timing", "name": self.name, "number": self.number,
                "first_call": self.first_call, **summary, "samples": list(self.samples)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Timing:
        """Inverse of :meth:`to_dict` (the summary is recomputed from the samples)."""
        return cls(data["name"], list(data["samples"]), int(data["number"]),
                   data.get("first_call"))


def median_interval(values: Sequence[float],
                    confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """An interval that holds the median of what ``values`` were drawn from: ``(low, high, p)``.

    Distribution-free: sorted, ``values[k-1] <= median <= values[n-k]`` fails only if fewer than
    ``k`` of the ``n`` values fall on one side of the median, which for independent draws has
    probability ``P(B < k)`` per side, ``B ~ Binomial(n, 1/2)``. The narrowest such interval
    whose coverage ``p = 1 - 2 P(B < k)`` reaches ``confidence`` is returned; with too few values
    for that (fewer than 6 at 95%), the whole range and its smaller coverage ``p``.

    >>> median_interval([5, 1, 4, 2, 3, 9, 7, 8, 6])   # 9 values: the 2nd and 8th smallest
    (2.0, 8.0, 0.9609375)
    >>> median_interval([1, 2, 3])[2]  # min..max of 3 values holds the median 3 times in 4
    0.75
    """
    xs = sorted(float(v) for v in values)
    n = len(xs)
    if n == 0:
        raise ValueError("median_interval() needs at least one value")
    k, coverage = _median_rank(n, confidence)
    return xs[k - 1], xs[n - k], coverage


def _median_rank(n: int, confidence: float) -> tuple[int, float]:
    """The largest ``k`` whose ``[k-th smallest, k-th largest]`` of ``n`` values covers the
    median with ``confidence``, and that coverage (``k = 1`` and its coverage if none does).

    A module-level helper of its own so that exercise 10.4's checks can forbid it: an answer that
    reaches :func:`median_interval` through any alias still calls this by its module name.
    """
    ### ALSO ANSWERS 10.4: bench's intervals of a median need it (ratios, break-even, lesson 03 on)
    total, below, k = 2 ** n, 0, 0  # exact integer counts: below = #{ways B < k}
    while k < (n + 1) // 2:  # try k + 1, which misses when B <= k on either side
        below_next = below + math.comb(n, k)
        if 1 - 2 * below_next / total < confidence:
            break
        below, k = below_next, k + 1
    if k == 0:  # too few values to reach `confidence`: the whole range, and what it does reach
        k, below = 1, 1
    return k, 1 - 2 * below / total


def look_schedule(repeats: int, max_rounds: int = MAX_ROUNDS) -> list[int]:
    """The round counts at which :func:`compare` looks when sampling until decided.

    The count triples from ``repeats`` (:data:`LOOK_GROWTH`) and ends at ``max_rounds``; its
    length is the number of looks an interval pays for.

    >>> look_schedule(6)
    [6, 18, 54, 162, 486, 1000]
    """
    looks, n = [], max(1, repeats)
    while n < max_rounds:
        looks.append(n)
        n = max(n + 1, math.ceil(n * LOOK_GROWTH))
    return [*looks, max_rounds]


def batch_size(rounds: int) -> int:
    """How many consecutive rounds :func:`ratio_interval` puts in a batch: ``floor(sqrt(n))``,
    so that batches and rounds per batch both grow with ``n`` (the batch-means rule)."""
    return max(1, math.isqrt(rounds))


def lag1_autocorrelation(values: Sequence[float]) -> float:
    """How alike consecutive ``values`` are, from 0 (independent) up to 0.95.

    The sample lag-1 autocorrelation ``r`` of a short series is biased low: for an AR(1) series
    of ``n`` values with autocorrelation ``rho``, by about ``(1 + 3 rho) / n`` (Kendall's
    approximation; 0.57 for rho 0.8 and 6 values). That bias is added back, and the result is
    kept in ``[0, 0.95]``: a negative estimate would shrink an interval below what independent
    rounds give, and one near 1 would make it unbounded.

    >>> round(lag1_autocorrelation([1, 2, 3, 4, 5, 6, 7, 8]), 3)   # a trend: highly alike
    0.95
    >>> lag1_autocorrelation([1, -1] * 6)   # alternating: taken as independent
    0.0
    """
    x = np.asarray(values, dtype=float)
    d = x - x.mean()
    spread = float(d @ d)
    if x.size < 2 or spread == 0:
        return 0.0
    r = float(d[1:] @ d[:-1]) / spread
    return min(max(r + (1 + 3 * r) / x.size, 0.0), 0.95)


def effective_rounds(values: Sequence[float]) -> float:
    """How many independent rounds ``values`` are worth: ``n (1 - r) / (1 + r)``, with ``r``
    their :func:`lag1_autocorrelation` (the AR(1) model's effective sample size: the mean of
    ``n`` rounds varies as much as the mean of that many independent ones).

    >>> effective_rounds([0.5, 0.7, 0.4, 0.6] * 4)   # no autocorrelation left: all 16
    16.0
    """
    r = lag1_autocorrelation(values)
    return len(values) * (1 - r) / (1 + r)


def ratio_interval(ratios: Sequence[float], confidence: float = CONFIDENCE,
                   looks: int = 1) -> tuple[float, float, float]:
    """An interval of the typical per-round ratio, from batch means: ``(low, high, p)``.

    Consecutive rounds are correlated (they share the machine's load, frequency and caches), so
    the ratios are taken in batches of ``b = floor(sqrt(n))`` consecutive rounds (the earliest
    ``n mod b`` rounds left out), each batch summarised by the mean of its log-ratios, and the
    interval is Student's t interval of the batch means' mean, exponentiated (the batch-means
    method): batches of several rounds are far less correlated than rounds. A slow outlier
    widens the interval rather than narrowing it. ``looks`` is the number of looks a sequential
    procedure may take (:func:`look_schedule`): each look's interval is at
    ``p = 1 - (1 - confidence) / looks``, so that all looks together hold ``confidence``
    (Bonferroni). With fewer than two batches (one round) there is no interval:
    ``(median, median, 0.0)``.

    Batches of ``sqrt(n)`` rounds narrow the gap, not close it, where the rounds stay correlated
    for about as long as a batch (6 rounds a batch at 36 rounds, 2 at the lessons' first look of
    6): the batch means are then alike too, and their spread understates how far their mean can
    be off. So the standard error is the larger of two estimates: the batch means', and that of
    the same rounds' mean over their :func:`effective_rounds` (the AR(1) model's). On
    log-ratios that drift with lag-1 autocorrelation 0.5, one 95% interval of 48 rounds held the
    true ratio 92% of the time with batch means alone (the median of rounds taken as
    independent, 85%), and 97% with both (``tests/test_bench.py``). ``benchmarks/verdicts.py``
    runs the sequential procedure itself on correlated rounds.

    >>> low, high, p = ratio_interval([0.50, 0.52, 0.49, 0.51, 0.50, 0.48, 0.52, 0.53, 0.51])
    >>> round(low, 3), round(high, 3), p   # 3 batches of 3
    (0.477, 0.537, 0.95)
    """
    logs = np.log(np.asarray(ratios, dtype=float))
    n = logs.size
    if n == 0:
        raise ValueError("ratio_interval() needs at least one ratio")
    b = batch_size(n)
    used = logs[n % b:]
    batches = used.reshape(-1, b).mean(axis=1)
    if batches.size < 2:
        median = float(np.exp(np.median(logs)))
        return median, median, 0.0
    p = 1 - (1 - confidence) / max(1, looks)
    error = max(batches.std(ddof=1) / math.sqrt(batches.size),
                used.std(ddof=1) / math.sqrt(effective_rounds(used)))
    half = _t_quantile(1 - (1 - p) / 2, batches.size - 1) * error
    centre = batches.mean()
    return float(np.exp(centre - half)), float(np.exp(centre + half)), p


def ratio_centre(ratios: Sequence[float]) -> float:
    """The centre of :func:`ratio_interval`: the geometric mean of the batch means (batches as
    there; fewer than two batches: the median ratio, where that interval collapses).

    >>> round(ratio_centre([0.5, 0.5, 0.5, 2.0]), 3)   # 2 batches of 2: exp(mean of logs)
    0.707
    """
    logs = np.log(np.asarray(ratios, dtype=float))
    n = logs.size
    b = batch_size(n)
    batches = logs[n % b:].reshape(-1, b).mean(axis=1)
    return float(np.exp(np.median(logs) if batches.size < 2 else batches.mean()))


def _t_quantile(q: float, df: int) -> float:
    """Student's t quantile. scipy comes with scikit-learn, a dependency of the course; it is
    imported on first use (:func:`compare` calls this before its clock starts, so that the
    import's second or so is never charged to a time cap)."""
    from scipy.stats import t

    return float(t.ppf(q, df))


def format_bound(value: float, marks: Sequence[float] = ()) -> str:
    """``value`` with 3 significant digits, or as many more as it takes to keep it on the same
    side of each of ``marks`` (a verdict's bounds) as the exact value, so that a reader can check
    the word against the printed interval.

    >>> format_bound(1.0996, [1 / 1.1, 1.0, 1.1]), format_bound(1.1004, [1.1]), format_bound(0.3)
    ('1.0996', '1.1004', '0.3')
    """
    for digits in range(3, 10):
        text = f"{value:.{digits}g}"
        shown = float(text)
        if all((shown < m) == (value < m) and (shown > m) == (value > m) for m in marks):
            return text
    return repr(value)


@dataclass(frozen=True)
class Ratio:
    """Per-round time ratios to a baseline (below 1: faster): median, quartiles, interval.

    ``low`` and ``high`` bound the typical ratio with probability ``coverage``
    (:func:`ratio_interval`, or :func:`ratio_of_medians` for modes timed apart); they are what a
    :class:`Verdict` is decided from.
    """

    median: float
    q1: float
    q3: float
    low: float | None = None
    high: float | None = None
    coverage: float | None = None
    rounds: int = 0
    #: The estimate the interval is built around (the geometric mean of the batch means, or the
    #: ratio of medians); None: the median stands for it.
    centre: float | None = None

    @property
    def estimate(self) -> float:
        """The typical ratio shown next to the interval: its centre, so the figure printed lies
        inside the interval printed (a skewed run's median per-round ratio need not)."""
        return self.median if self.centre is None else self.centre

    def __str__(self) -> str:
        return f"{self.median:.3g}× [{self.q1:.3g}, {self.q3:.3g}]"

    def show(self, margin: float = MARGIN) -> str:
        """The estimate and its interval, with the digits a verdict needs: ``1.02× [0.970,
        1.07]``; a bound near one of the margin's edges gets more (``[1.04, 1.0996]``)."""
        marks = (1 / (1 + margin), 1.0, 1 + margin)
        if self.low is None:
            return f"{self.estimate:.3g}×"
        return (f"{self.estimate:.3g}× [{format_bound(self.low, marks)}, "
                f"{format_bound(self.high, marks)}]")

    def to_dict(self) -> dict[str, float]:
        return {"median": self.median, "q1": self.q1, "q3": self.q3, "low": self.low,
                "high": self.high, "coverage": self.coverage, "rounds": self.rounds,
                "centre": self.centre}

    @classmethod
    def of(cls, ratios: Sequence[float], confidence: float = CONFIDENCE,
           looks: int = 1) -> Ratio:
        """Summarise per-round ratios: quartiles, and the interval of :func:`ratio_interval`
        (``looks``: how many looks the procedure that took them could make)."""
        q1, median, q3 = np.percentile(np.asarray(ratios, dtype=float), [25, 50, 75])
        low, high, coverage = ratio_interval(ratios, confidence, looks)
        return cls(float(median), float(q1), float(q3), low, high, coverage, len(ratios),
                   ratio_centre(ratios))


def ratio_of_medians(candidate: Timing, baseline: Timing,
                     confidence: float = CONFIDENCE) -> Ratio:
    """The ratio of two medians timed in separate runs (``candidate / baseline``), as a Ratio.

    For two modes that must not share rounds (two frameworks, each slowing the other's caches),
    there are no per-round ratios. The interval then comes from each median's own interval, each
    at ``(1 + confidence) / 2``, so that both hold together with at least ``confidence``:
    ``[low_c / high_b, high_c / low_b]``. It is wider than a per-round interval, and it does not
    cancel drift between the two runs: time them close together, on a quiet machine. (The
    quartiles of a ratio of separate runs are not defined; ``q1`` and ``q3`` repeat the median.)

    >>> a = Timing("a", [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0, 1.02, 0.98, 1.01, 0.99, 1.0], 1)
    >>> b = Timing("b", [2 * t for t in a.samples], 1)
    >>> r = ratio_of_medians(a, b)
    >>> r.median, r.low <= 0.5 <= r.high, r.coverage >= 0.95
    (0.5, True, True)
    """
    each = (1 + confidence) / 2
    c_low, c_high, c_cov = median_interval(candidate.samples, each)
    b_low, b_high, b_cov = median_interval(baseline.samples, each)
    median = candidate.median / baseline.median
    return Ratio(median, median, median, c_low / b_high, c_high / b_low,
                 1 - (1 - c_cov) - (1 - b_cov), min(len(candidate.samples), len(baseline.samples)),
                 median)


def decide(ratio: Ratio, margin: float = MARGIN, confidence: float = CONFIDENCE) -> str:
    """The outcome a ratio's interval supports: FASTER, SLOWER, SAME, WITHIN or UNDECIDED.

    ``faster``: the whole interval lies below ``1 / (1 + margin)``; ``slower``: above
    ``1 + margin``; inside both bounds, ``same`` (no measurable difference) when the interval
    holds 1 and ``within`` (within the margin, but measurably off 1) when it does not; anything
    else, or an interval less sure than ``confidence``, is ``undecided`` ("cannot tell from this
    run"): more rounds may decide it.

    >>> decide(Ratio(0.5, 0.45, 0.55, low=0.4, high=0.6, coverage=0.96))
    'faster'
    >>> decide(Ratio(1.0, 0.98, 1.02, low=0.97, high=1.03, coverage=0.96))
    'same'
    >>> decide(Ratio(0.95, 0.94, 0.96, low=0.93, high=0.97, coverage=0.96))  # off 1, inside 10%
    'within'
    >>> decide(Ratio(0.9, 0.85, 0.97, low=0.8, high=0.99, coverage=0.96))  # maybe over 10%
    'undecided'
    """
    if margin < 0:
        raise ValueError(f"margin={margin}: use a share of the baseline's time, e.g. 0.1")
    if ratio.low is None or ratio.coverage is None or ratio.coverage < confidence - 1e-12:
        return UNDECIDED
    return _outcome(ratio.low, ratio.high, margin)


def against_target(ratio: Ratio, target: float) -> str:
    """``met``, ``MISSED`` or ``undecided``: a ratio against a target such as "at most 1.5x".

    Met when the whole 95% interval of the median ratio is at or under ``target``, missed when it
    is wholly above, undecided when it straddles it (what the benchmarks print for their targets).

    >>> against_target(Ratio(1.3, 1.2, 1.4, low=1.25, high=1.4, coverage=0.96), 1.5)
    'met'
    >>> against_target(Ratio(1.6, 1.5, 1.7, low=1.55, high=1.7, coverage=0.96), 1.5)
    'MISSED'
    """
    low = ratio.median if ratio.low is None else ratio.low
    high = ratio.median if ratio.high is None else ratio.high
    if high <= target:
        return "met"
    if low > target:
        return "MISSED"
    return f"undecided (the interval straddles {target}x; median {ratio.median:.2f}x)"


def _outcome(low: float, high: float, margin: float) -> str:
    """Where an interval ``[low, high]`` of a time ratio lies against the margin's two bounds.

    Its own helper for the same reason as :func:`_median_rank` (exercise 10.4 forbids it).
    """
    up, down = 1 + margin, 1 / (1 + margin)
    if high < down:
        return FASTER
    if low > up:
        return SLOWER
    if down <= low and high <= up:
        return SAME if low <= 1 <= high else WITHIN
    return UNDECIDED


@dataclass(frozen=True)
class Verdict:
    """Is ``name`` faster than ``baseline``, slower, within the margin, or can't this run tell?

    ``str(verdict)`` reads ``"tf.function vs tf eager: faster (time ratio 0.09, 95% interval
    [0.085, 0.095], 12 rounds)"``; :attr:`words` is the conclusion as a phrase. The words say
    only what the interval shows: "no measurable difference" needs an interval that holds 1,
    "within 10%" (which prints the ratio) one inside the band, and a verdict another machine
    (or another run on a busy one) decides differently is a fact about that run, not an error.
    """

    name: str
    baseline: str
    outcome: str  # FASTER, SLOWER, SAME, WITHIN or UNDECIDED
    ratio: Ratio
    margin: float = MARGIN
    confidence: float = CONFIDENCE

    @property
    def words(self) -> str:
        """The verdict as a phrase: ``"faster than tf eager"``; only "within" carries a number."""
        return {
            FASTER: f"faster than {self.baseline}",
            SLOWER: f"slower than {self.baseline}",
            SAME: f"no measurable difference from {self.baseline} (within {self.margin:.0%})",
            WITHIN: f"within {self.margin:.0%} of {self.baseline} ({self.ratio.estimate:.2f}×)",
            UNDECIDED: f"cannot tell from this run how it compares with {self.baseline}",
        }[self.outcome]

    def __str__(self) -> str:
        r = self.ratio
        marks = (1 / (1 + self.margin), 1.0, 1 + self.margin)
        interval = ("" if r.low is None else f", {self._sure()} interval "
                    f"[{format_bound(r.low, marks)}, {format_bound(r.high, marks)}]")
        return (f"{self.name} vs {self.baseline}: {self.outcome_text} (time ratio "
                f"{r.estimate:.3g}{interval}, {r.rounds} rounds)")

    @property
    def outcome_text(self) -> str:
        """The outcome as a phrase: ``"faster"``, ``"no measurable difference (within 5%)"``."""
        return {SAME: f"no measurable difference (within {self.margin:.0%})",
                WITHIN: f"within {self.margin:.0%} ({self.ratio.estimate:.2f}×)",
                UNDECIDED: "cannot tell from this run"}.get(self.outcome, self.outcome)

    def _sure(self) -> str:
        """The interval's confidence: the one asked for, or less when too few rounds gave less."""
        coverage = self.ratio.coverage or 0.0
        return f"{100 * min(coverage, self.confidence):.0f}%"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "baseline": self.baseline, "outcome": self.outcome,
                "ratio": self.ratio.to_dict(), "margin": self.margin,
                "confidence": self.confidence}


class _ShowsTable:
    """Shows a result as its table: text for print and the terminal, HTML in a notebook.

    Subclasses give ``_rows() -> (header, rows)``.
    """

    def _rows(self) -> tuple[list[str], list[list[str]]]:
        raise NotImplementedError

    def table(self) -> str:
        """The result as a text table."""
        return _text_table(*self._rows())

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        return _html_table(*self._rows())

    def _repr_pretty_(self, p, cycle) -> None:  # IPython's plain-text display: the table
        p.text(self.table())


@dataclass(repr=False)
class Comparison(_ShowsTable):
    """Candidates timed side by side by :func:`compare`, their ratios and verdicts.

    ``pairs`` says which baseline each candidate's verdict is against (by default every
    candidate against ``baseline``); ``margin`` and ``confidence`` are those of :func:`decide`.
    ``capped`` is True when :func:`compare` stopped at its time cap with a verdict undecided;
    ``looks`` is how many looks the procedure that took the rounds could make (1 for a fixed
    number of rounds), which every interval pays for (:func:`ratio_interval`).
    """

    timings: dict[str, Timing]
    baseline: str
    pairs: dict[str, str] | None = None
    margin: float = MARGIN
    confidence: float = CONFIDENCE
    capped: bool = False
    looks: int = 1

    def __post_init__(self) -> None:
        if self.baseline not in self.timings:
            raise KeyError(
                f"baseline {self.baseline!r} is not among the candidates {list(self.timings)}; "
                "pass one of those names"
            )
        for name, base in (self.pairs or {}).items():
            for role, who in (("candidate", name), ("baseline", base)):
                if who not in self.timings:
                    raise KeyError(f"pairs: {role} {who!r} is not among the candidates "
                                   f"{list(self.timings)}")

    @property
    def ratios(self) -> dict[str, Ratio]:
        """Each candidate's time divided by the baseline's (see :meth:`ratios_to`)."""
        return self.ratios_to(self.baseline)

    def ratios_to(self, baseline: str) -> dict[str, Ratio]:
        """Time ratios to ``baseline``: the median, quartiles and interval of per-round ratios.

        Round ``i`` timed every candidate once, close together in time, so the ratio of their
        ``i``-th samples compares like with like, and drift common to both cancels out. That is
        why the median ratio can differ a little from the ratio of the two medians on a noisy
        machine: the two medians may come from different rounds.
        """
        if baseline not in self.timings:
            raise KeyError(f"no candidate named {baseline!r}; have {list(self.timings)}")
        base = np.asarray(self.timings[baseline].samples)
        ratios = {}
        for name, timing in self.timings.items():
            samples = np.asarray(timing.samples)
            if samples.shape != base.shape:
                raise ValueError(
                    f"{name!r} has {samples.size} samples and {baseline!r} {base.size}: "
                    "ratios need candidates timed in the same rounds (use compare())"
                )
            ratios[name] = Ratio.of(samples / base, self.confidence, self.looks)
        return ratios

    def baseline_of(self, name: str) -> str:
        """The candidate ``name``'s verdict is against: its entry in ``pairs``, or ``baseline``."""
        return (self.pairs or {}).get(name, self.baseline)

    def verdict(self, name: str, baseline: str | None = None) -> Verdict:
        """Is ``name`` faster than ``baseline`` (default :meth:`baseline_of`), slower, the same?"""
        if name not in self.timings:
            raise KeyError(f"no candidate named {name!r}; have {list(self.timings)}")
        baseline = baseline or self.baseline_of(name)
        ratio = self.ratios_to(baseline)[name]
        return Verdict(name, baseline, decide(ratio, self.margin, self.confidence), ratio,
                       self.margin, self.confidence)

    def verdicts(self) -> dict[str, Verdict]:
        """The verdict of every pair: ``pairs``, or each candidate against the baseline."""
        pairs = self.pairs if self.pairs is not None else {
            name: self.baseline for name in self.timings if name != self.baseline}
        return {name: self.verdict(name, base) for name, base in pairs.items()}

    @property
    def decided(self) -> bool:
        """True when every pair's verdict is decided (anything but "cannot tell")."""
        return all(v.outcome != UNDECIDED for v in self.verdicts().values())

    def _rows(self) -> tuple[list[str], list[list[str]]]:
        verdicts = self.verdicts()
        bases = {v.baseline for v in verdicts.values()} or {self.baseline}
        one = next(iter(bases)) if len(bases) == 1 else None
        header = ["", "median", "± IQR/2", f"time / {one}" if one else "time / its baseline",
                  f"{100 * self.confidence:.0f}% interval", "verdict", "rounds × calls"]
        rows = []
        for name, t in self.timings.items():
            median, spread = format_time(t.median, t.iqr / 2).split(" ± ")
            if name in verdicts:
                v = verdicts[name]
                interval = v.ratio.show(self.margin).split("× ", 1)[1]
                cells = [f"{v.ratio.estimate:.3g}×", interval, v.outcome_text if one else v.words]
            elif name in bases:
                cells = ["1×" if one else "", "", "(baseline)"]
            else:
                cells = ["", "", ""]
            rows.append([name, median, f"± {spread}", *cells, f"{len(t.samples)} × {t.number}"])
        return header, rows

    def table(self) -> str:
        """A text table: median ± IQR/2; the ratio to the baseline (its interval's centre,
        :attr:`Ratio.estimate`) and that interval; the verdict; rounds × calls per sample."""
        return super().table()

    def __repr__(self) -> str:
        return f"<Comparison of {list(self.timings)}, baseline {self.baseline!r}>"

    def plot(self, ax=None, *, log: bool = False):
        """Bars of the medians with IQR error bars, labelled with the ratio to the baseline.

        Returns the matplotlib ``Axes``; ``log=True`` uses a log scale for very unequal times.
        """
        ax = _axes(ax)
        names = list(self.timings)
        med = np.array([self.timings[n].median for n in names])
        q1 = np.array([self.timings[n].q1 for n in names])
        q3 = np.array([self.timings[n].q3 for n in names])
        unit, scale = pick_unit(med.min())
        bars = ax.bar(names, med / scale, yerr=[(med - q1) / scale, (q3 - med) / scale],
                      capsize=4, color="tab:blue", alpha=0.8)
        ax.bar_label(bars, labels=[f"{r.median:.2g}×" for r in self.ratios.values()])
        ax.set_ylabel(f"time per call ({unit})")
        ax.set_title(f"median and IQR; labels: time / {self.baseline}")
        if log:
            ax.set_yscale("log")
        ax.tick_params(axis="x", labelrotation=30)
        return ax

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "comparison",
            "baseline": self.baseline,
            "pairs": self.pairs,
            "margin": self.margin,
            "confidence": self.confidence,
            "capped": self.capped,
            "looks": self.looks,
            "timings": {name: t.to_dict() for name, t in self.timings.items()},
            "ratios": {name: r.to_dict() for name, r in self.ratios.items()},
            "verdicts": {name: v.to_dict() for name, v in self.verdicts().items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        """Inverse of :meth:`to_dict` (ratios and verdicts are recomputed from the samples)."""
        timings = {name: Timing.from_dict(t) for name, t in data["timings"].items()}
        return cls(timings, data["baseline"], data.get("pairs"), data.get("margin", MARGIN),
                   data.get("confidence", CONFIDENCE), data.get("capped", False),
                   data.get("looks", 1))

    def save_json(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` as JSON (read it back with :func:`load_json`)."""
        return _write_json(self.to_dict(), path)


@dataclass(repr=False)
class Sweep(_ShowsTable):
    """One :class:`Comparison` per problem size, from :func:`sweep`."""

    sizes: list[Any]
    comparisons: list[Comparison] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        """Every candidate that appears at some size, in order of first appearance."""
        return list(dict.fromkeys(n for c in self.comparisons for n in c.timings))

    def _points(self, stat: Callable[[Comparison], Any]) -> list[tuple[Any, Any]]:
        """(size, stat) pairs at the sizes where ``stat`` is not None."""
        pairs = [(s, stat(c)) for s, c in zip(self.sizes, self.comparisons, strict=True)]
        return [(s, v) for s, v in pairs if v is not None]

    def verdicts(self) -> list[dict[str, Verdict]]:
        """Each size's :meth:`Comparison.verdicts`, in the order of ``sizes``."""
        return [c.verdicts() for c in self.comparisons]

    def medians(self, name: str) -> list[float | None]:
        """``name``'s median at each size (None where it was not timed)."""
        return [c.timings[name].median if name in c.timings else None for c in self.comparisons]

    def _rows(self) -> tuple[list[str], list[list[str]]]:
        columns = [self.medians(n) for n in self.names]
        rows = [[str(size)] + [_fmt_or_dash(col[i]) for col in columns]
                for i, size in enumerate(self.sizes)]
        return ["size", *self.names], rows

    def table(self) -> str:
        """Medians per size (rows) and candidate (columns)."""
        return super().table()

    def __repr__(self) -> str:
        return f"<Sweep of {self.names} over sizes {self.sizes}>"

    def plot(self, ax=None, *, xlabel: str = "problem size",
             colors: Mapping[str, str] | None = None):
        """Log-log time per call against size, one line per candidate, IQR shaded.

        ``colors`` maps names to matplotlib colours, to keep them equal across several sweeps.
        """
        ax = _axes(ax)
        for name in self.names:
            points = self._points(lambda c, n=name: c.timings.get(n))
            self._line(ax, name, name, points, colors)
        self._finish(ax, xlabel, "time per call (s)")
        return ax

    def plot_ratio(self, baseline: str | Mapping[str, str] | None = None, ax=None, *,
                   xlabel: str = "problem size", colors: Mapping[str, str] | None = None):
        """Time / baseline against size, one line per candidate; below the line at 1 is faster.

        ``baseline`` is one candidate's name, or a mapping from candidate to its own baseline
        (``{"tf.function": "tf eager", "torch.compile": "torch eager"}``) to plot each framework's
        graph mode against that framework's eager mode; by default each size's baseline.
        """
        ax = _axes(ax)
        per_name = isinstance(baseline, Mapping)
        pairs = dict(baseline) if per_name else {n: baseline for n in self.names}
        for name, base in pairs.items():
            def ratio(c: Comparison, n=name, b=base) -> Ratio | None:
                b = b or c.baseline
                ok = n in c.timings and b in c.timings and n != b
                return c.ratios_to(b)[n] if ok else None

            label = f"{name} / {base}" if per_name else name
            self._line(ax, name, label, self._points(ratio), colors)
        ax.axhline(1.0, color="gray", linewidth=1, linestyle="--")
        ylabel = f"time / {'baseline' if per_name or baseline is None else baseline}"
        self._finish(ax, xlabel, ylabel)
        return ax

    def _line(self, ax, name: str, label: str, points: list[tuple[Any, Any]],
              colors: Mapping[str, str] | None) -> None:
        """Medians joined by a line, the IQR shaded; a candidate keeps its colour in every plot."""
        if not points:
            return
        if colors and name in colors:
            color = colors[name]
        else:
            color = f"C{self.names.index(name) % 10}" if name in self.names else None
        x = [s for s, _ in points]
        ax.plot(x, [p.median for _, p in points], marker="o", label=label, color=color)
        ax.fill_between(x, [p.q1 for _, p in points], [p.q3 for _, p in points], alpha=0.2,
                        color=color)

    def _finish(self, ax, xlabel: str, ylabel: str) -> None:
        from matplotlib.ticker import NullLocator

        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel)
        ax.set_xticks(self.sizes, [str(s) for s in self.sizes])  # the sizes measured, no more
        ax.xaxis.set_minor_locator(NullLocator())
        ax.legend(fontsize="small")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "sweep", "sizes": list(self.sizes),
                "comparisons": [c.to_dict() for c in self.comparisons]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Sweep:
        return cls(list(data["sizes"]), [Comparison.from_dict(c) for c in data["comparisons"]])

    def save_json(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` as JSON (read it back with :func:`load_json`)."""
        return _write_json(self.to_dict(), path)


def load_json(path: str | Path) -> Timing | Comparison | Sweep:
    """Read back what ``save_json`` wrote (or a ``to_dict()`` saved as JSON)."""
    data = json.loads(Path(path).read_text())
    kinds = {"timing": Timing, "comparison": Comparison, "sweep": Sweep}
    kind = data.get("kind", "timing")
    if kind not in kinds:
        raise ValueError(f"{path}: unknown kind {kind!r}; expected one of {list(kinds)}")
    return kinds[kind].from_dict(data)


# ----------------------------------------------------------------------------- synchronisation


def sync_result(result: Any) -> None:
    """Wait until ``result`` is really computed; lists, tuples and dict values are searched.

    Frameworks may return before the work is done: CUDA kernels are queued, and TensorFlow runs
    GPU ops asynchronously. A CUDA tensor (anything with ``is_cuda`` True) waits for
    ``torch.cuda.synchronize(device)``; an MPS tensor for ``torch.mps.synchronize()``; a
    TensorFlow tensor on a GPU (or another non-CPU device) for
    ``tf.test.experimental.sync_devices()``; a JAX array (JAX dispatches asynchronously on every
    device, the CPU included) for its ``block_until_ready()``. Nothing is copied to the host:
    waiting is the same work for every framework. Anything else is already done: numpy arrays,
    Python numbers, and CPU tensors of PyTorch and TensorFlow, whose eager ops and graph calls
    return when their results are ready (unless TensorFlow was switched to asynchronous
    execution).
    """
    if isinstance(result, list | tuple):
        for item in result:
            sync_result(item)
    elif isinstance(result, dict):
        for item in result.values():
            sync_result(item)
    elif getattr(result, "is_cuda", False) is True:
        import torch

        torch.cuda.synchronize(result.device)
    elif getattr(result, "is_mps", False) is True:
        import torch

        torch.mps.synchronize()
    elif type(result).__module__.startswith("tensorflow") and not _on_cpu(result):
        import tensorflow as tf

        tf.test.experimental.sync_devices()
    elif type(result).__module__.startswith("jax") and hasattr(result, "block_until_ready"):
        result.block_until_ready()


def _on_cpu(tf_value: Any) -> bool:
    """True for a TensorFlow value on the CPU (or with no device, such as a symbolic tensor)."""
    device = getattr(tf_value, "device", "") or ""
    return not device or "CPU" in device.upper()


def _cuda_synchronize(_result: Any) -> None:
    import torch

    torch.cuda.synchronize()


def _resolve_sync(sync: str | Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    if sync == "auto":
        return sync_result
    if sync == "cuda":
        return _cuda_synchronize
    if sync is None:
        return lambda _result: None
    if callable(sync):
        return sync
    raise ValueError(f"sync={sync!r}: use 'auto', 'cuda', None, or a function of the result")


# ----------------------------------------------------------------------------- timing


@dataclass
class _Candidate:
    """One function being timed: a call that includes the sync, and what was measured so far."""

    name: str
    call: Callable[[], None]
    number: int = 1
    first_call: float | None = None
    samples: list[float] = field(default_factory=list)

    def timing(self) -> Timing:
        return Timing(self.name, self.samples, self.number, self.first_call)


def _one_two_five() -> Iterator[int]:
    """1, 2, 5, 10, 20, 50, ...: the calls-per-sample tried by calibration (as stdlib timeit)."""
    scale = 1
    while True:
        for step in (1, 2, 5):
            yield step * scale
        scale *= 10


def _time_calls(call: Callable[[], None], number: int, clock: Clock) -> float:
    """Seconds for ``number`` back-to-back calls (a sample; divide by ``number`` per call).

    The garbage collector is paused meanwhile (as the standard library's ``timeit`` does): a
    collection is triggered by how much was allocated since the last one, so it would land on
    whichever candidate happened to cross the threshold, not on the one that made the garbage.
    """
    with _gc_paused():
        start = clock()
        for _ in range(number):
            call()
        return clock() - start


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's garbage collector off for the block, and back as it was after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _prepare(name: str, fn: Callable, args: tuple, *, warmup: int, number: int | None,
             sync: Callable[[Any], Any], clock: Clock, min_sample_s: float) -> _Candidate:
    """Warm ``fn`` up and settle its calls per sample; no samples are taken yet."""
    cand = _Candidate(name, lambda: sync(fn(*args)))
    if warmup > 0:
        cand.first_call = _time_calls(cand.call, 1, clock)
        for _ in range(warmup - 1):
            cand.call()
    cand.number = number or _calibrate(cand.call, clock, min_sample_s)
    return cand


def _calibrate(call: Callable[[], None], clock: Clock, min_sample_s: float) -> int:
    """Calls per sample: the first of 1, 2, 5, 10, ... whose samples last ``min_sample_s``.

    Two samples in a row must be long enough, so that one call slowed down by a busy machine
    does not end the search early and leave every repeat too short.
    """
    for n in _one_two_five():
        if n >= MAX_NUMBER or min(_time_calls(call, n, clock) for _ in range(2)) >= min_sample_s:
            return n
    raise AssertionError("unreachable: _one_two_five() never ends")


def _check_counts(warmup: int, repeats: int, number: int | None) -> None:
    if warmup < 0:
        raise ValueError(f"warmup={warmup}: use 0 or more warm-up calls")
    if repeats < 1:
        raise ValueError(f"repeats={repeats}: use at least one sample")
    if number is not None and number < 1:
        raise ValueError(f"number={number}: use None (calibrate) or at least 1 call per sample")


def _bar(total: int, progress: bool, desc: str | None):
    # tqdm.auto shows a widget in Jupyter (ipywidgets is installed) and text in a terminal.
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not progress, desc=desc, unit="sample")


def timeit(
    fn: Callable,
    *args: Any,
    warmup: int = 3,
    repeats: int = 20,
    number: int | None = None,
    sync: str | Callable[[Any], Any] | None = "auto",
    clock: Clock = time.perf_counter,
    progress: bool = False,
    name: str | None = None,
    min_sample_s: float = MIN_SAMPLE_S,
) -> Timing:
    """Time ``fn(*args)``: ``warmup`` untimed calls, then ``repeats`` samples of ``number`` calls.

    Each sample reads ``clock`` before and after ``number`` back-to-back calls; the per-call time
    is the sample divided by ``number``. ``number=None`` calibrates it (1, 2, 5, 10, 20, ...) so
    that a sample lasts at least ``min_sample_s`` (2 ms), long enough for the clock's resolution
    and the loop's own overhead not to matter.

    ``sync`` runs after every call, inside the timed region: ``"auto"`` waits for CUDA tensors
    and TensorFlow tensors in the result (:func:`sync_result`), ``"cuda"`` always calls
    ``torch.cuda.synchronize()`` (use it when ``fn`` returns nothing), a function is called with
    the result, ``None`` does nothing.

    >>> t = timeit(sum, range(1000), repeats=5, name="sum")
    >>> t.name, len(t.samples), t.q1 <= t.median <= t.q3
    ('sum', 5, True)
    """
    _check_counts(warmup, repeats, number)
    cand = _prepare(name or getattr(fn, "__name__", "fn"), fn, args, warmup=warmup,
                    number=number, sync=_resolve_sync(sync), clock=clock,
                    min_sample_s=min_sample_s)
    with _bar(repeats, progress, cand.name) as bar:
        for _ in range(repeats):
            cand.samples.append(_time_calls(cand.call, cand.number, clock) / cand.number)
            bar.update()
    return cand.timing()


def compare(
    fns: Mapping[str, Callable],
    *,
    baseline: str | None = None,
    args: tuple = (),
    warmup: int = 3,
    repeats: int = 20,
    number: int | None = None,
    sync: str | Callable[[Any], Any] | None = "auto",
    clock: Clock = time.perf_counter,
    progress: bool = True,
    min_sample_s: float = MIN_SAMPLE_S,
    desc: str | None = None,
    max_time_s: float | None = None,
    pairs: Mapping[str, str] | None = None,
    margin: float = MARGIN,
    confidence: float = CONFIDENCE,
) -> Comparison:
    """Time several functions of the same ``args`` side by side, in interleaved rounds.

    Each candidate is warmed up and gets its own calls per sample (as in :func:`timeit`); then
    every round takes one sample of each candidate in turn. Ratios and verdicts are to
    ``baseline`` (default: the first candidate), or per candidate as ``pairs`` says
    (``{"tf.function": "tf eager", "torchscript": "torch eager"}``).

    **Sampling until decided.** With ``max_time_s``, ``repeats`` is the least number of rounds:
    the verdicts are looked at after ``repeats`` rounds, and again each time the rounds have
    tripled (:func:`look_schedule`), until every pair's :class:`Verdict` is decided (anything but
    "cannot tell from this run"), or until sampling has taken ``max_time_s`` seconds (on
    ``clock``; warm-up not counted), which brings the next look forward and makes it the last:
    the undecided ones stay ``undecided`` and ``Comparison.capped`` is True. Every look's
    interval pays for all the looks the schedule allows (``Comparison.looks``), so that the
    verdicts hold ``confidence`` however many looks it took. A quiet machine decides in a few
    rounds; a busy one takes more rounds, and usually, not always, reaches the same verdicts:
    noise that comes and goes with the neighbours' jobs (shared caches, the CPU's frequency)
    moves the ratios themselves, which no number of rounds averages away. The cap holds on the
    wall clock too: with ``clock=time.process_time`` on a machine so busy that this process gets
    a fraction of a core, sampling still stops once ``max_time_s`` wall-clock seconds have passed
    (a cell never waits much longer than its cap; the verdicts it could not decide by then say
    ``undecided``). Without ``max_time_s``, exactly ``repeats`` rounds are taken.

    **Which clock.** Each measures something else, and each is inflated by something else:

    - The wall clock (``time.perf_counter``, the default) measures what the caller waits for:
      every thread, a GPU (with ``sync``), another process, I/O. A busy machine inflates it with
      the slices of time the operating system gives to other jobs, in bursts that the intervals
      cannot always absorb. Use it for anything threaded, anything that waits, and on GPUs.
    - ``clock=time.process_time`` measures the CPU time of this process: the sum over all its
      threads, and none of its waiting. Other jobs cannot add their own time slices to it, but
      they still slow it (shared caches and memory bandwidth, a lower clock frequency: two runs
      on a busy machine can differ by well over 10%), and a candidate that computes on four
      threads is charged four threads' time, so parallelism can only look like a cost. Use it
      only for work that runs on one thread of this process, and say so.

    Where the two disagree (a threaded runtime, a wait), report both, or time with the wall clock
    on a quiet machine.

    >>> c = compare({"list": lambda: list(range(1000)), "tuple": lambda: tuple(range(1000))},
    ...             repeats=5, progress=False)
    >>> c.ratios["list"].median
    1.0
    >>> c = compare({"slow": lambda: sorted(range(3000), key=str), "fast": lambda: None},
    ...             repeats=6, max_time_s=5, progress=False)
    >>> c.verdict("fast").outcome
    'faster'
    """
    if not fns:
        raise ValueError("compare() needs at least one function, e.g. {'eager': f}")
    _check_counts(warmup, repeats, number)
    if max_time_s is not None and max_time_s < 0:
        raise ValueError(f"max_time_s={max_time_s}: use None (fixed rounds) or seconds >= 0")
    baseline = next(iter(fns)) if baseline is None else baseline
    if baseline not in fns:
        raise KeyError(f"baseline {baseline!r} is not among {list(fns)}; pass one of those names")
    for name, base in (pairs or {}).items():
        for role, who in (("candidate", name), ("baseline", base)):
            if who not in fns:
                raise KeyError(f"pairs: {role} {who!r} is not among {list(fns)}")
    sync_fn = _resolve_sync(sync)
    candidates = []

    schedule = look_schedule(repeats) if max_time_s is not None else [repeats]

    def result(capped: bool = False) -> Comparison:
        return Comparison({c.name: c.timing() for c in candidates}, baseline,
                          dict(pairs) if pairs is not None else None, margin, confidence, capped,
                          len(schedule))

    with _bar(len(fns) * repeats, progress, desc) as bar:
        for name, fn in fns.items():
            bar.set_postfix_str(f"warming up {name}")
            candidates.append(_prepare(name, fn, args, warmup=warmup, number=number, sync=sync_fn,
                                       clock=clock, min_sample_s=min_sample_s))
        bar.set_postfix_str("")
        _t_quantile(0.975, 1)  # import scipy now, not while the time cap runs
        started, wall_started, rounds = clock(), time.perf_counter(), 0
        for look in schedule:
            # Round robin: each round samples every candidate once. Slow drift (clock boost and
            # throttling, a neighbour's job, a warming cache) then lands on all candidates alike
            # instead of on whichever ran last, and the i-th samples of two candidates were taken
            # close together, which is what makes the per-round ratios fair. Each round also
            # starts one candidate later (a b c, b c a, c a b, ...), so that no candidate always
            # follows the same one, whose lingering threads or evicted caches would otherwise
            # slow it down every time.
            bar.total = len(candidates) * look
            bar.refresh()
            while rounds < look:
                shift = rounds % len(candidates)
                for cand in candidates[shift:] + candidates[:shift]:
                    cand.samples.append(_time_calls(cand.call, cand.number, clock) / cand.number)
                    bar.update()
                rounds += 1
                if max_time_s is not None and (clock() - started >= max_time_s or
                                               time.perf_counter() - wall_started >= max_time_s):
                    break  # the time is up: this look is the last
            if max_time_s is None:
                return result()
            done = result()
            if done.decided:
                return done
            if rounds < look:  # cut short by the cap
                return result(capped=True)
        return result(capped=True)


def sweep(
    make_fns: Callable[[Any], Mapping[str, Callable]],
    sizes: Sequence[Any],
    *,
    baseline: str | None = None,
    **options: Any,
) -> Sweep:
    """Run :func:`compare` on ``make_fns(size)`` for each size: time against problem size.

    ``make_fns(size)`` returns ``{name: zero-argument function}`` with the inputs of that size
    already built (so building them is not timed). ``options`` go to :func:`compare`; of
    ``pairs``, each size keeps those whose candidate and baseline it has (a mode may exist at
    some sizes only).

    >>> s = sweep(lambda n: {"sum": lambda: sum(range(n))}, [10, 1000], repeats=3,
    ...           progress=False)
    >>> s.sizes, s.names
    ([10, 1000], ['sum'])
    """
    comparisons = []
    pairs = options.pop("pairs", None)
    for size in sizes:
        fns = make_fns(size)
        if pairs is not None:
            options["pairs"] = {c: b for c, b in pairs.items() if c in fns and b in fns}
        comparisons.append(compare(fns, baseline=baseline, desc=f"size {size}", **options))
    return Sweep(list(sizes), comparisons)


def break_even(first_call_s: float, per_call_s_graph: float,
               per_call_s_eager: float) -> int | None:
    """How many calls it takes for a compiled function to pay for its compilation.

    The compiled function's first call costs ``first_call_s`` (tracing and compiling included),
    each later one ``per_call_s_graph``; eager costs ``per_call_s_eager`` every call. After ``n``
    calls the graph has spent ``first + (n - 1) * graph`` and eager ``n * eager``: the answer is
    the smallest ``n >= 1`` at which the graph has spent no more, or ``None`` if it never catches
    up (it is not faster per call).

    >>> break_even(1.0, 0.001, 0.002)   # 1 s to compile, then 1 ms saved per call
    999
    >>> break_even(1.0, 0.002, 0.001) is None
    True
    """
    if min(first_call_s, per_call_s_graph, per_call_s_eager) < 0:
        raise ValueError("break_even() takes times in seconds, which cannot be negative")
    return _calls_to_repay(first_call_s, per_call_s_graph, per_call_s_eager)


def _calls_to_repay(first_call_s: float, per_call_s_graph: float,
                    per_call_s_eager: float) -> int | None:
    """:func:`break_even`'s count; its own helper so that exercise 10.1's checks can forbid it
    (an answer that reaches ``break_even`` through an alias still calls this by its name)."""
    ### BEGIN SOLUTION 10.1
    if first_call_s <= per_call_s_eager:
        return 1
    saved_per_call = per_call_s_eager - per_call_s_graph
    if saved_per_call <= 0:
        return None
    calls = (first_call_s - per_call_s_graph) / saved_per_call
    return max(1, math.ceil(calls - 1e-9))  # 1e-9: 998.9999999 from rounding is still 999
    ### END SOLUTION


def first_calls(build: Callable[[], Callable], *args: Any, repeats: int = 5,
                sync: str | Callable[[Any], Any] | None = "auto", clock: Clock = time.perf_counter,
                name: str | None = None) -> Timing:
    """Time ``build()`` and the first call of what it returns, ``repeats`` times.

    The first call is where a graph mode traces, optimizes and compiles, so one sample of it is
    as noisy as any other; this takes several. ``build`` must return a *fresh* function each
    time (a new ``tf.function``, a new ``torch.compile`` after ``torch._dynamo.reset()``),
    otherwise later samples time a cache hit. ``args`` go to the built function.

    >>> t = first_calls(lambda: (lambda: sum(range(100))), repeats=3, name="sum")
    >>> len(t.samples), t.number
    (3, 1)
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats}: use at least one sample")
    sync_fn = _resolve_sync(sync)
    samples = []
    for _ in range(repeats):
        with _gc_paused():
            start = clock()
            sync_fn(build()(*args))
            samples.append(clock() - start)
    return Timing(name or getattr(build, "__name__", "build"), samples, 1, samples[0])


@dataclass(frozen=True)
class BreakEven:
    """When does a graph mode repay its first call? From :func:`break_even_of`.

    ``outcome`` is ``"pays back"`` (faster per call: ``calls`` from the medians, ``low`` to
    ``high`` from the intervals of the first call and of the per-call ratio), ``"never"`` (slower
    per call), ``"no gain shown"`` (the per-call verdict is no measurable difference, or within
    the margin: this run shows no gain large enough to repay anything) or ``"undecided"`` (the
    per-call verdict cannot tell).
    """

    name: str
    baseline: str
    outcome: str
    calls: int | None
    low: int | None
    high: int | None
    first_call: float
    per_call: Verdict

    @property
    def words(self) -> str:
        """The conclusion as a phrase, from the per-call verdict's words."""
        return {"pays back": f"repays its first call (faster per call than {self.baseline})",
                "never": f"never repays its first call ({self.per_call.words})",
                "no gain shown": f"no per-call gain shown to repay its first call "
                                 f"({self.per_call.words})",
                "undecided": f"cannot tell from this run ({self.per_call.words})"}[self.outcome]

    def __str__(self) -> str:
        first = format_time(self.first_call)
        if self.outcome == "pays back":
            return (f"{self.name}: first call {first}, repaid after {_calls(self.calls)} "
                    f"(between {_calls(self.low)} and {_calls(self.high)})")
        return f"{self.name}: first call {first}, {self.words}"


def _calls(n: int | None) -> str:
    return "never" if n is None else "1 call" if n == 1 else f"{n:,} calls"


def break_even_of(first: Timing | float, comparison: Comparison, name: str,
                  baseline: str | None = None) -> BreakEven:
    """How many calls ``name`` needs to repay its first call, against ``baseline``'s calls.

    ``first`` is the first-call time: a :class:`Timing` from :func:`first_calls` (its median
    and :func:`median_interval` are used) or seconds. Per-call times come from ``comparison``:
    the baseline's median, and the candidate's as baseline x the per-round ratio and its
    interval. The range ``low``..``high`` pairs the cheapest first call with the best ratio,
    and the dearest with the worst.
    """
    verdict = comparison.verdict(name, baseline)
    eager = comparison.timings[verdict.baseline].median
    if isinstance(first, Timing):
        first_s, (first_lo, first_hi, _) = first.median, median_interval(first.samples)
    else:
        first_s = first_lo = first_hi = float(first)
    r = verdict.ratio
    calls = break_even(first_s, eager * r.median, eager)
    low = break_even(first_lo, eager * min(r.low, r.median), eager)
    high = break_even(first_hi, eager * max(r.high, r.median), eager)
    outcome = {FASTER: "pays back", SLOWER: "never", UNDECIDED: "undecided"}.get(
        verdict.outcome, "no gain shown")
    return BreakEven(name, verdict.baseline, outcome, calls, low, high, first_s, verdict)


# ----------------------------------------------------------------------------- helpers


def _fmt_or_dash(seconds: float | None) -> str:
    return "—" if seconds is None else format_time(seconds)


def _text_table(header: list[str], rows: list[list[str]]) -> str:
    """Columns padded to width: the first left-aligned (names), the others right (numbers)."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        first, *rest = (c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        return "  ".join([first, *rest]).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    def cells(tag: str, row: list[str]) -> str:
        return "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in row)

    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return (f"<table class='course-bench'><thead><tr>{cells('th', header)}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
    return ax


def _write_json(data: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return path
