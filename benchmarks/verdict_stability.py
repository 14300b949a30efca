"""Which verdicts of the timing lessons stay the same from one run to the next, on this machine.

    python benchmarks/verdict_stability.py                      # lessons 10-13, two runs
    python benchmarks/verdict_stability.py notebooks/12_choosing.ipynb --runs 3

Each run executes the lessons top to bottom in a fresh kernel (nothing is written back). Every
output line that carries one of ``bench``'s verdicts (faster, slower, no measurable difference,
within m, cannot tell from this run) is read, with the numbers taken out, so that two runs are
compared on their words only. It prints, per lesson, each verdict line of the first run and what
the other runs said in its place, and counts the lines whose words differ.

A verdict that changes between runs is not a bug by itself: a difference near the margin, or a
ratio whose interval straddles the band's edge, can land on either side. What should not change
is a verdict far from the band (a 3x speed-up), nor a verdict word that its interval does not
support (``tests/test_bench.py`` checks the words against intervals; ``benchmarks/verdicts.py``
simulates how often the method is wrong).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from _notebook_run import run_notebook  # benchmarks/, on the path when run as a script

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ["10_performance", "11_deployment", "12_choosing", "13_jax"]
VERDICT = re.compile(r"faster|slower|no measurable difference|within \d+%|cannot tell"
                     r"|no per-call gain shown|pays off|break-even|\b(yes|no) \(")
NUMBER = re.compile(r"[-+]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?(e[-+]?\d+)?")  # 1,234.5e-3
UNIT = re.compile(r"#\s*(ns|µs|us|ms|s|×|x|%)(?=\W|$)")


def words_of(line: str) -> str:
    """The line with its numbers, units and alignment taken out: its label and its verdicts."""
    return " ".join(UNIT.sub("#", NUMBER.sub("#", line)).split())


def verdict_lines(path: Path, timeout: int) -> list[tuple[str, str]]:
    """Run the notebook; [(cell id, the words of each verdict line)]."""
    nb, _ = run_notebook(path, timeout)
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            for line in "".join(text).splitlines():
                if VERDICT.search(line):
                    found.append((cell.get("id") or f"cell {i}", words_of(line)))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="lesson notebooks (default: lessons 10-13)")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout (s)")
    args = parser.parse_args(argv)
    paths = args.notebooks or [ROOT / "notebooks" / f"{s}.ipynb" for s in LESSONS]
    print(f"{os.cpu_count()} CPUs; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    total = changed = 0
    for path in paths:
        runs = [verdict_lines(path, args.timeout) for _ in range(args.runs)]
        print(f"\n## {path.stem}: {len(runs[0])} verdict lines in run 1, "
              f"{', '.join(str(len(r)) for r in runs[1:])} in the others")
        for k, (cell, line) in enumerate(runs[0]):
            others = [r[k][1] if k < len(r) and r[k][0] == cell else "(no such line)"
                      for r in runs[1:]]
            differs = any(o != line for o in others)
            total += 1
            changed += differs
            print(f"{'≠' if differs else '='} [{cell}] {line}")
            for n, o in enumerate(others, start=2):
                if o != line:
                    print(f"    run {n}: {o}")
    print(f"\n{changed} of {total} verdict lines differ between runs "
          f"(load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
