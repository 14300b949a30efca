"""How much slower this machine runs Python now than the machine the grading tests' time limits
were set on, for tests that start kernels with a time limit (issue 24: a cell that takes 1 s on
an idle machine took over 20 s at load 10 on two cores, and a test read the timeout as a
failure).

``slowness()`` times a fixed piece of pure-Python work (the median of five runs: the load, not
the best moment) and divides by what it
took on an idle two-core machine; at least 1, at most 10. Time limits in those tests are
multiplied by it, and the tests assert what happened (no marks, the kernel replaced), not how
long it took.
"""

from __future__ import annotations

import functools
import time

#: Seconds the work below took on an idle two-core machine (median of five).
REFERENCE_S = 0.1


def _work() -> float:
    t0 = time.perf_counter()
    sum(i * i for i in range(1_000_000))
    return time.perf_counter() - t0


@functools.cache
def slowness() -> float:
    """The factor to stretch time limits by (1.0 on an idle machine, at most 10)."""
    median = sorted(_work() for _ in range(5))[2]
    return min(10.0, max(1.0, median / REFERENCE_S))
