"""How long each lesson takes on its first run, and which cells take over 10 seconds.

    python benchmarks/lesson_times.py                    # every lesson, English edition
    python benchmarks/lesson_times.py notebooks/10_*.ipynb --runs 2

Each lesson runs top to bottom in a fresh kernel, as a learner's first run does: the compiler
caches (TorchInductor's, Triton's, XLA's persistent cache) start empty in a temporary folder, so
the first call of every ``torch.compile`` or ``jax.jit`` pays its full cost. The frameworks'
bytecode is the one pip wrote at install, as on a learner's machine; the operating system's file
cache is whatever the machine has (a lesson run right after a reboot imports more slowly). Nothing
is written back to the notebooks.

It prints a Markdown table (the README's per-lesson times come from it): the lesson's wall time,
its slowest cell, and every cell over 10 s, with whether the prose or comment just before it says
roughly how long it takes (the course's rule: a learner is told before a long cell runs). The
figures depend on the machine and on what else it is doing: quote them with the machine and the
load (``os.getloadavg()`` is printed before and after).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from pathlib import Path

from _notebook_run import run_notebook  # benchmarks/, on the path when run as a script

ROOT = Path(__file__).resolve().parents[1]
LONG_S = 10.0
# "about 20 s", "30 seconds", "a minute", "2 minutes", "1-2 min", "秒", "分钟": a stated duration.
SAYS_HOW_LONG = re.compile(
    r"(\d+(\.\d+)?\s*(-|to|–)?\s*\d*\s*(s|seconds?|min|minutes?)\b)|\b(a|one|two|half a) minutes?\b"
    r"|\d+\s*(秒|分钟)|(一|两|半)分钟", re.IGNORECASE)


def warns_before(cells: list, index: int) -> bool:
    """Whether the markdown cell before code cell ``index``, or its own leading comment, states
    how long it takes."""
    source = cells[index].source
    comment = "\n".join(line for line in source.splitlines()[:4] if line.lstrip().startswith("#"))
    before = next((c.source for c in reversed(cells[:index]) if c.cell_type == "markdown"), "")
    return bool(SAYS_HOW_LONG.search(comment) or SAYS_HOW_LONG.search(before))


def run_once(path: Path, timeout: int) -> tuple[float, list[tuple[int, float, bool]]]:
    """Run the notebook in a fresh kernel, compiler caches empty: (wall s, [(cell, s, warned)])."""
    times: dict[int, float] = {}
    nb, wall = run_notebook(path, timeout, empty_caches=True, cell_times=times)
    return wall, [(i, s, warns_before(nb.cells, i)) for i, s in sorted(times.items())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="lesson notebooks (default: notebooks/*.ipynb)")
    parser.add_argument("--runs", type=int, default=1, help="runs per lesson (median reported)")
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout (s)")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    print(f"{os.cpu_count()} CPUs; load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rows, unwarned = [], []
    for path in paths:
        walls, slowest = [], (0, 0.0)
        long_cells: dict[int, tuple[float, bool]] = {}
        for _ in range(args.runs):
            wall, cells = run_once(path, args.timeout)
            walls.append(wall)
            for i, s, warned in cells:
                if s > slowest[1]:
                    slowest = (i, s)
                if s > LONG_S:
                    long_cells[i] = (max(s, long_cells.get(i, (0.0, warned))[0]), warned)
        median = statistics.median(walls)
        shown = ", ".join(f"{i} ({s:.0f} s{'' if w else ', not announced'})"
                          for i, (s, w) in sorted(long_cells.items())) or "none"
        rows.append((path.stem, median, slowest, shown))
        unwarned += [f"{path.name} cell {i} ({s:.0f} s)"
                     for i, (s, w) in long_cells.items() if not w]
        print(f"{path.stem}: {median:.0f} s", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| lesson | first run | slowest cell | cells over 10 s |")
    print("|---|---|---|---|")
    for stem, median, (i, s), shown in rows:
        print(f"| {stem} | {median:.0f} s | cell {i}, {s:.0f} s | {shown} |")
    print(f"\nall lessons: {sum(r[1] for r in rows) / 60:.1f} min")
    if unwarned:
        print("\ncells over 10 s whose prose does not say how long they take:")
        print("\n".join(f"  {u}" for u in unwarned))
    return 1 if unwarned else 0


if __name__ == "__main__":
    sys.exit(main())
