"""Peak live bytes of the MLP training step at batch 256: freed after last use vs kept to the end.

    python benchmarks/memory.py              # a few seconds

``mg.memory_plan`` works the figures out from shapes alone; tracemalloc then measures what numpy
really allocates while the Interpreter runs the step, once as usual (each value freed after its
last use) and once keeping every value to the end, as a check on the plan. Graph inputs (the fed
batch, the Variables, constants) are not counted: they exist whether or not anything is freed.

Target (issue 6): freed / kept <= 0.6.
"""

from __future__ import annotations

import argparse
import tracemalloc

from training_step import build

import course_utils.minigraph as mg
from course_utils.data import spiral
from course_utils.minigraph.memory import format_bytes


class KeepEverything(mg.Interpreter):
    """An Interpreter that frees no value before the end of the run."""

    def _free_schedule(self) -> list[list[mg.Node]]:
        return [[] for _ in self.graph.nodes]


def measured_peak(interpreter: mg.Interpreter, feed: dict, state: dict) -> int:
    interpreter.run(feed, dict(state))  # warm-up: numpy's own caches are not the graph's
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        interpreter.run(feed, dict(state))
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--table", action="store_true", help="print the plan's table too")
    args = parser.parse_args()

    X, y = spiral(n_per_class=args.batch // 2, seed=0)
    feed = {"x": X, "labels": y}
    g, fetches, _ = build()
    state = {v.name: v.attrs["value"] for v in g.variables()}
    for optimize in (False, True):
        with mg.Session(g, optimize=optimize) as sess:
            plan_graph = sess.plan(fetches, feed)
        plan = mg.memory_plan(plan_graph, feed)
        freed = measured_peak(mg.Interpreter(plan_graph), feed, state)
        kept = measured_peak(KeepEverything(plan_graph), feed, state)
        label = "optimized" if optimize else "unoptimized"
        print(f"{label} plan ({len(plan_graph.nodes)} nodes), batch {args.batch}:")
        if args.table:
            print(plan)
        print(f"  planned  peak: freed after last use {format_bytes(plan.peak_bytes):>9}, "
              f"kept to the end {format_bytes(plan.kept_bytes):>9}  ->  {plan.ratio:.2f}x "
              f"(target <= 0.6x: {'met' if plan.ratio <= 0.6 else 'MISSED'})")
        print(f"  measured peak: freed after last use {format_bytes(freed):>9}, "
              f"kept to the end {format_bytes(kept):>9}  ->  {freed / kept:.2f}x  (tracemalloc; "
              f"includes temporaries inside ops)")
        print(f"  buffers reused by shape and dtype: {plan.buffers} buffers, "
              f"{format_bytes(plan.buffer_bytes)}\n")


if __name__ == "__main__":
    main()
