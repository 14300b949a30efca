"""How ``mg.load``'s time grows with the file: linear now, quadratic before issue 25's fix.

    python benchmarks/load_scaling.py          # about a minute on 2 CPU cores
    python benchmarks/load_scaling.py --big    # adds a file of 300 000 nodes: 2 more minutes

The file is one ``while_loop`` over ``k`` loop variables, each read back by its own ``tuple_get``
node: about ``5 k`` nodes in the graph and its two sub-graphs. Before the fix, each tuple_get's
shape rule listed all of the loop body's placeholders to find its result's type: ``k`` nodes
times ``k`` placeholders. The fix works the result types out once per loop node
(``control_flow.result_types``). This script times both side by side in one run: "before" puts
the old step back for the duration of its loads (``result_types`` without its memo).

Printed per size: the median load time of each, its time per node, and the ratio before/after.
Linear means the time per node stays level as ``k`` doubles; quadratic, that it doubles too.
``--big`` adds one file of 300 000 nodes (a loop of 12 000 variables, then a chain of ``neg``
nodes on its first result), the size of issue 25's report, loaded once each way.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

import course_utils.minigraph as mg
from course_utils.minigraph import control_flow


def loop_file(k: int, path: Path, chain: int = 0) -> int:
    """Save a graph of one loop over ``k`` float32 scalars (then ``chain`` more nodes) to
    ``path``; its number of nodes.

    Built node by node (``Graph.add_node``), as a file's reader would, not traced: tracing a
    loop of many variables is slow in its own right, and it is loading that is measured here.
    """
    def params(graph: mg.Graph) -> list:
        return [graph.add_node("placeholder", (), {"shape": (), "dtype": "float32"},
                               name=f"v{i}") for i in range(k)]

    test, body, top = mg.Graph(), mg.Graph(), mg.Graph()
    v = params(test)
    zero = test.add_node("constant", (), {"value": mg.tensor(0.0).numpy()}, name="zero")
    test.outputs = [test.add_node("less", (v[0], zero), name="again")]
    v = params(body)
    one = body.add_node("constant", (), {"value": mg.tensor(1.0).numpy()}, name="one")
    body.outputs = [body.add_node("add", (x, one), name=f"n{i}") for i, x in enumerate(v)]
    loop = top.add_node("while_loop", tuple(params(top)), {"cond_fn": test, "body_fn": body},
                        name="loop")
    top.outputs = [top.add_node("tuple_get", (loop,), {"index": i, "shape": (),
                                                       "dtype": "float32"}, name=f"r{i}")
                   for i in range(k)]
    last = top.outputs[0]
    for i in range(chain):
        last = top.add_node("neg", (last,), name=f"c{i}")
    top.outputs.append(last)
    mg.save(top, path)
    return len(test.nodes) + len(body.nodes) + len(top.nodes)


@contextlib.contextmanager
def old_step():
    """``result_types`` as it was: worked out again for every tuple_get that asks."""
    memo = control_flow.result_types
    control_flow.result_types = control_flow._result_types
    try:
        yield
    finally:
        control_flow.result_types = memo


def load_time(path: Path) -> float:
    start = time.process_time()
    mg.load(path)
    return time.process_time() - start


def side_by_side(path: Path, repeats: int) -> tuple[float, float]:
    """Median load times before and after, their loads interleaved (so a busy spell on the
    machine hits both alike)."""
    before, after = [], []
    for _ in range(repeats):
        with old_step():
            before.append(load_time(path))
        after.append(load_time(path))
    return statistics.median(before), statistics.median(after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,1000,2000,4000",
                        help="loop variables k, comma-separated (both versions)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--big", action="store_true",
                        help="also load a file of 300 000 nodes with the new code")
    args = parser.parse_args()
    sizes = [int(k) for k in args.sizes.split(",")]

    print(f"{'k':>7} {'nodes':>8} {'file':>9} {'before':>9} {'after':>9} "
          f"{'before/node':>12} {'after/node':>11} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        loop_file(50, Path(tmp) / "warm.npz")
        side_by_side(Path(tmp) / "warm.npz", 1)  # imports and first-call caches, untimed
        runs = [(k, 0, args.repeats) for k in sizes] + ([(12_000, 240_000, 1)] if args.big else [])
        for k, chain, repeats in runs:
            path = Path(tmp) / f"loop_{k}_{chain}.npz"
            nodes = loop_file(k, path, chain)
            before, after = side_by_side(path, repeats)
            print(f"{k:>7} {nodes:>8,} {path.stat().st_size / 1e6:>7.2f}MB {before:>8.2f}s "
                  f"{after:>8.2f}s {1e6 * before / nodes:>10.0f}us {1e6 * after / nodes:>9.0f}us "
                  f"{before / after:>6.1f}x")
    print(f"CPU time of this process (time.process_time), median of {args.repeats} loads "
          f"(1 for the file of 300 000 nodes).")


if __name__ == "__main__":
    main()
