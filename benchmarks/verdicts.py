"""How often does ``bench``'s verdict say something false? A simulation with known true ratios.

The verdict words (``bench.decide``) are read from the 95% interval of the median per-round time
ratio. Each word makes a claim about the true ratio ``r`` of the two modes' typical times, against
the margin ``m``:

- *faster* claims ``r < 1 / (1 + m)``; *slower* claims ``r > 1 + m``;
- *no measurable difference* and *within m* both claim ``1 / (1 + m) <= r <= 1 + m``;
- *cannot tell from this run* claims nothing, so it is never wrong (it is counted separately).

This script draws rounds whose true ratio is known and counts how often the decided word is
false, for several true ratios, numbers of rounds and two kinds of noise:

- **independent**: each sample is the true time times a log-normal factor, drawn afresh;
- **correlated**: a machine load that drifts from round to round (an AR(1) process with lag-1
  autocorrelation ``--rho``) multiplies both modes' samples of a round, and each mode also has a
  drift of its own with the same autocorrelation. Per-round ratios cancel the shared load but not
  the modes' own drifts, whose correlation makes the median interval too narrow: this is where the
  interval's 95% is optimistic.

Run ``python benchmarks/verdicts.py`` (about 20 s on one core; ``--quick`` for a smoke test). It
prints one table per noise model: for each true ratio and number of rounds, the share of runs
whose verdict is false and the share that could not tell. A true ratio exactly at the margin's
edge is the hardest case: any decided word about it is right only by the width of a hair, so it
is left out of the grid (1.10 is inside, 1.12 outside a 10% margin).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from course_utils import bench  # noqa: E402

TRUE_RATIOS = (0.5, 0.85, 0.95, 1.0, 1.05, 1.12, 2.0)
ROUNDS = (6, 12, 24)


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


def ar1(rng: np.random.Generator, n: int, rho: float, sigma: float) -> np.ndarray:
    """A stationary AR(1) series of log-factors with lag-1 autocorrelation ``rho``."""
    out = np.empty(n)
    out[0] = rng.normal(0, sigma)
    innovation = sigma * np.sqrt(1 - rho**2)
    for i in range(1, n):
        out[i] = rho * out[i - 1] + rng.normal(0, innovation)
    return out


def ratios(rng: np.random.Generator, r: float, n: int, kind: str, sigma: float,
           rho: float) -> np.ndarray:
    """``n`` per-round ratios graph/eager whose true (median) ratio is ``r``."""
    if kind == "independent":
        eager = np.exp(rng.normal(0, sigma, n))
        graph = r * np.exp(rng.normal(0, sigma, n))
    else:
        load = np.exp(ar1(rng, n, rho, 3 * sigma))  # shared by both modes of a round: cancels
        eager = load * np.exp(ar1(rng, n, rho, sigma))
        graph = load * r * np.exp(ar1(rng, n, rho, sigma))
    return graph / eager


def simulate(kind: str, runs: int, margin: float, sigma: float, rho: float,
             seed: int = 0) -> dict[tuple[float, int], tuple[float, float]]:
    """(true ratio, rounds) -> (share of false verdicts, share of "cannot tell")."""
    rng = np.random.default_rng(seed)
    table = {}
    for r in TRUE_RATIOS:
        for n in ROUNDS:
            wrong = undecided = 0
            for _ in range(runs):
                outcome = bench.decide(bench.Ratio.of(ratios(rng, r, n, kind, sigma, rho)),
                                       margin)
                wrong += false_claim(outcome, r, margin)
                undecided += outcome == bench.UNDECIDED
            table[r, n] = (wrong / runs, undecided / runs)
    return table


def show(kind: str, table: dict, margin: float) -> None:
    print(f"\n{kind} rounds (margin {margin:.0%}): false verdicts / cannot tell, per true ratio")
    print(f"{'true ratio':>10}" + "".join(f"{f'{n} rounds':>20}" for n in ROUNDS))
    for r in TRUE_RATIOS:
        cells = [f"{100 * table[r, n][0]:5.1f}% / {100 * table[r, n][1]:5.1f}%" for n in ROUNDS]
        print(f"{r:>10}" + "".join(f"{c:>20}" for c in cells))
    worst = max(w for w, _ in table.values())
    print(f"worst false-verdict rate: {100 * worst:.1f}% (the interval promises at most 5% "
          "for a decided word, per comparison)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="simulated runs per cell")
    parser.add_argument("--margin", type=float, default=bench.MARGIN)
    parser.add_argument("--sigma", type=float, default=0.08,
                        help="spread of a sample's log-time (0.08: about 8%%)")
    parser.add_argument("--rho", type=float, default=0.3,
                        help="lag-1 autocorrelation of the correlated model's drifts")
    parser.add_argument("--quick", action="store_true", help="50 runs per cell: a smoke test")
    args = parser.parse_args(argv)
    runs = 50 if args.quick else args.runs
    print(f"{runs} simulated runs per cell; sample spread {args.sigma:.0%}, "
          f"autocorrelation {args.rho} (correlated model)")
    for kind in ("independent", "correlated"):
        show(kind, simulate(kind, runs, args.margin, args.sigma, args.rho), args.margin)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
