"""How often does ``bench``'s verdict say something false? The lessons' procedure, simulated.

The verdict words (``bench.decide``) make a claim about the true ratio ``r`` of the two modes'
typical times, against the margin ``m``:

- *faster* claims ``r < 1 / (1 + m)``; *slower* claims ``r > 1 + m``;
- *no measurable difference* and *within m* both claim ``1 / (1 + m) <= r <= 1 + m``;
- *cannot tell from this run* claims nothing, so it is never wrong (it is counted separately).

This script runs the procedure the lessons run, ``bench.compare`` itself with lesson 10's
settings (``repeats=6``, ``max_time_s=2``, sampling until decided), on a simulated machine: the
clock is the simulation's, and each call of a candidate advances it by a time drawn from a model
whose true ratio is known. So the sequential looks, the time cap and the interval are exactly
bench's; only the machine is made up. Two models of that machine:

- **independent**: each sample is the true time times a log-normal factor, drawn afresh;
- **correlated**: a machine load that drifts from round to round (an AR(1) process with lag-1
  autocorrelation ``--rho``) multiplies both modes' samples of a round, and each mode also has a
  drift of its own with the same autocorrelation, plus a little independent noise per sample.
  Per-round ratios cancel the shared load but not the modes' own drifts, so consecutive rounds'
  ratios are correlated: an interval that treats them as independent is too narrow.

For each true ratio it prints the share of runs whose decided verdict is false, with a 95%
binomial interval (Clopper-Pearson: the simulation's own sampling error), the share that could
not tell, and the mean number of rounds taken. The worst false-decision rate must stay at or below
5%, the interval's promise (``tests/test_bench.py`` checks a smaller version of this with a fixed
seed). Run ``python benchmarks/verdicts.py`` (about 90 s of CPU at 400 runs a ratio and two
rhos; ``--quick`` for a smoke test). A true ratio exactly at the margin's edge is left out: any
decided word about it is right only by the width of a hair (1.10 is inside, 1.12 outside a 10%
margin).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from course_utils import bench  # noqa: E402

#: the true ratios tried: far from the margin, just inside it, just outside it, and equal
TRUE_RATIOS = (0.5, 0.85, 0.88, 0.92, 0.95, 1.0, 1.05, 1.08, 1.12, 1.2, 2.0)
#: lesson 10's settings (TIMING), which lessons 12 and 13 share; the others differ in repeats
#: and cap only
LESSON = {"warmup": 0, "repeats": 6, "max_time_s": 2.0, "number": 1, "progress": False}


def false_claim(outcome: str, r: float, margin: float) -> bool:
    """Does the verdict ``outcome`` claim something the true ratio ``r`` contradicts?"""
    down, up = 1 / (1 + margin), 1 + margin
    if outcome == bench.FASTER:
        return not r < down
    if outcome == bench.SLOWER:
        return not r > up
    if outcome in (bench.SAME, bench.WITHIN):
        return not down <= r <= up
    return False  # UNDECIDED claims nothing


class Machine:
    """A simulated machine: ``clock()`` reads its time, and calling a mode's function advances
    it by that mode's next sample, drawn from the noise model with a known true ratio.

    Both modes take ``base_s`` seconds on a quiet machine, the candidate ``r`` times that. A mode's
    ``k``-th call is its ``k``-th round (``compare`` samples each candidate once per round, with
    ``warmup=0`` and ``number=1``), so the drifts are indexed by round.
    """

    def __init__(self, rng: np.random.Generator, r: float, kind: str, sigma: float, rho: float,
                 base_s: float = 2e-3):
        self.rng, self.r, self.kind, self.sigma, self.rho = rng, r, kind, sigma, rho
        self.base_s, self.now = base_s, 0.0
        self.state = {"load": rng.normal(0, 3 * sigma), "eager": rng.normal(0, sigma),
                      "graph": rng.normal(0, sigma)}
        self.calls = {"eager": 0, "graph": 0}

    def clock(self) -> float:
        return self.now

    def _step(self, key: str, sigma: float) -> float:
        innovation = sigma * np.sqrt(1 - self.rho**2)
        self.state[key] = self.rho * self.state[key] + self.rng.normal(0, innovation)
        return self.state[key]

    def call(self, mode: str) -> None:
        scale = self.base_s * (self.r if mode == "graph" else 1.0)
        if self.kind == "independent":
            log_factor = self.rng.normal(0, self.sigma)
        else:
            # the shared load moves once per round, when the first mode of the round runs
            if self.calls[mode] >= max(self.calls.values()):
                self._step("load", 3 * self.sigma)
            log_factor = (self.state["load"] + self._step(mode, self.sigma)
                          + self.rng.normal(0, self.sigma / 3))
        self.calls[mode] += 1
        self.now += scale * float(np.exp(log_factor))


def one_run(rng: np.random.Generator, r: float, kind: str, sigma: float, rho: float,
            margin: float) -> tuple[str, int]:
    """One ``bench.compare`` of eager and graph on a simulated machine: (outcome, rounds)."""
    machine = Machine(rng, r, kind, sigma, rho)
    comparison = bench.compare({"eager": lambda: machine.call("eager"),
                                "graph": lambda: machine.call("graph")},
                               baseline="eager", clock=machine.clock, margin=margin, **LESSON)
    verdict = comparison.verdict("graph")
    return verdict.outcome, verdict.ratio.rounds


def rate_interval(count: int, runs: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a rate seen ``count`` times in ``runs``: how far the
    simulation's own sampling can move it.

    >>> [round(x, 4) for x in rate_interval(20, 400)]
    [0.0308, 0.0762]
    """
    from scipy.stats import beta

    tail = (1 - confidence) / 2
    low = beta.ppf(tail, count, runs - count + 1) if count > 0 else 0.0
    high = beta.ppf(1 - tail, count + 1, runs - count) if count < runs else 1.0
    return float(low), float(high)


def simulate(kind: str, runs: int, margin: float, sigma: float, rho: float, seed: int = 0,
             ratios: tuple[float, ...] = TRUE_RATIOS) -> dict[float, tuple[float, float, float]]:
    """true ratio -> (share of false verdicts, share of "cannot tell", mean rounds)."""
    rng = np.random.default_rng(seed)
    table = {}
    for r in ratios:
        wrong = undecided = rounds = 0
        for _ in range(runs):
            outcome, n = one_run(rng, r, kind, sigma, rho, margin)
            wrong += false_claim(outcome, r, margin)
            undecided += outcome == bench.UNDECIDED
            rounds += n
        table[r] = (wrong / runs, undecided / runs, rounds / runs)
    return table


def show(kind: str, table: dict, margin: float, rho: float, runs: int) -> float:
    detail = f", rho {rho}" if kind == "correlated" else ""
    print(f"\n{kind} rounds{detail} (margin {margin:.0%}), bench.compare sampling until decided")
    print(f"{'true ratio':>10} {'false verdicts [95% interval]':>30} {'cannot tell':>12} "
          f"{'mean rounds':>12}")
    for r, (wrong, undecided, rounds) in table.items():
        low, high = rate_interval(round(wrong * runs), runs)
        print(f"{r:>10} {100 * wrong:>13.2f}% [{100 * low:.2f}, {100 * high:.2f}]% "
              f"{100 * undecided:>11.1f}% {rounds:>12.1f}")
    worst = max(w for w, _, _ in table.values())
    low, high = rate_interval(round(worst * runs), runs)
    print(f"worst false-verdict rate: {100 * worst:.2f}% [{100 * low:.2f}, {100 * high:.2f}]% "
          f"(at most 5% is the promise)")
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400, help="simulated runs per true ratio")
    parser.add_argument("--margin", type=float, default=bench.MARGIN)
    parser.add_argument("--sigma", type=float, default=0.08,
                        help="spread of a sample's log-time (0.08: about 8%%)")
    parser.add_argument("--rho", type=float, nargs="+", default=[0.5, 0.8],
                        help="lag-1 autocorrelation(s) of the correlated model's drifts")
    parser.add_argument("--quick", action="store_true", help="40 runs per ratio: a smoke test")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    runs = 40 if args.quick else args.runs
    print(f"{runs} simulated runs per true ratio; sample spread {args.sigma:.0%}; "
          f"lesson 10's settings {LESSON}")
    worst = show("independent", simulate("independent", runs, args.margin, args.sigma, 0.0,
                                         args.seed), args.margin, 0.0, runs)
    for rho in args.rho:
        table = simulate("correlated", runs, args.margin, args.sigma, rho, args.seed)
        worst = max(worst, show("correlated", table, args.margin, rho, runs))
    print(f"\nworst over every model and ratio: {100 * worst:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
