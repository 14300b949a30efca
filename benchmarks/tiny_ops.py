"""200 tiny elementwise ops: what running a graph costs when the arithmetic costs nothing.

    python benchmarks/tiny_ops.py            # about 30 s on 2 CPU cores

The graph: 40 blocks of ``h = tanh(h * a + b) - h * 0.5`` on 16 float32 numbers (200 ops). Timed
side by side in interleaved rounds (``course_utils.bench.compare``), medians of the rounds:

    numpy by hand            the same 200 numpy calls written out (the baseline)
    minigraph codegen        the optimized graph as generated Python (``mg.codegen``)
    minigraph interpreter    the optimized graph run node by node (``mg.Interpreter``)
    interpreter, unoptimized the graph as built, 200 nodes, node by node
    Session.run (codegen)    the same through ``sess.run``: feeds checked, plan looked up
    PyTorch eager            the same ops on a torch tensor

Targets (issue 6): codegen <= 1.2x hand numpy, interpreter <= 2.0x.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import course_utils.minigraph as mg
from course_utils import bench

BLOCKS, SIZE = 40, 16


def build() -> tuple[mg.Graph, mg.Node, mg.Node]:
    rng = np.random.default_rng(0)
    with mg.Graph().as_default() as g:
        x = mg.placeholder((SIZE,), name="x")
        a = mg.constant(rng.uniform(0.5, 1.5, SIZE).astype(np.float32), name="a")
        b = mg.constant(rng.uniform(-0.5, 0.5, SIZE).astype(np.float32), name="b")
        h = x
        for _ in range(BLOCKS):
            h = mg.tanh(h * a + b) - h * 0.5
    g.outputs = [h]
    return g, x, h


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=25)
    args = parser.parse_args()

    g, x, y = build()
    ops = sum(n.op not in ("placeholder", "constant") for n in g.nodes)
    a, b = (g.node(n).attrs["value"] for n in ("a", "b"))
    xv = np.random.default_rng(1).normal(size=SIZE).astype(np.float32)

    def by_hand(h: np.ndarray = xv) -> np.ndarray:
        for _ in range(BLOCKS):
            h = np.tanh(h * a + b) - h * 0.5
        return h

    ta, tb, tx = (torch.from_numpy(v.copy()) for v in (a, b, xv))

    def torch_eager(h: torch.Tensor = tx) -> torch.Tensor:
        with torch.no_grad():
            for _ in range(BLOCKS):
                h = torch.tanh(h * ta + tb) - h * 0.5
        return h

    plan = mg.optimize(g)
    compiled = mg.codegen(plan)
    interpreter, plain = mg.Interpreter(plan), mg.Interpreter(g)
    sess = mg.Session(g, executor="codegen")
    feeds = {"x": xv}
    fns = {
        "numpy by hand": by_hand,
        "minigraph codegen": lambda: compiled(xv),
        "minigraph interpreter": lambda: interpreter.run(feeds, {}),
        "interpreter, unoptimized": lambda: plain.run(feeds, {}),
        "Session.run (codegen)": lambda: sess.run(y, {x: xv}),
        "PyTorch eager": torch_eager,
    }
    reference = by_hand()
    for name, fn in fns.items():  # a fast wrong answer is not a result
        out = fn()
        out = out[0] if isinstance(out, list) else out
        np.testing.assert_allclose(np.asarray(out), reference, rtol=1e-5, atol=1e-6,
                                   err_msg=name)

    print(f"{ops} ops on {SIZE} float32 numbers; optimized graph: {len(plan.nodes)} nodes "
          f"({sum(n.op == 'fused' for n in plan.nodes)} fused)\n")
    result = bench.compare(fns, repeats=args.repeats, progress=False)
    print(result)
    ratios = result.ratios
    print()
    for name, target in [("minigraph codegen", 1.2), ("minigraph interpreter", 2.0)]:
        r = ratios[name].median
        print(f"{name:24s} {r:5.2f}x hand numpy  (target <= {target}x: "
              f"{'met' if r <= target else 'MISSED'})")
    per_op = {name: t.median / ops for name, t in result.timings.items()}
    print("\nper op: " + ", ".join(f"{n} {bench.format_time(s)}" for n, s in per_op.items()))


if __name__ == "__main__":
    main()
