"""The MLP training step as a graph: nodes before and after ``mg.optimize``, and time per step.

    python benchmarks/training_step.py       # about 40 s on 2 CPU cores

The course's spiral MLP (2-32-32-2, relu, mean softmax cross-entropy, float64) as one TF1-style
training step: forward, ``mg.gradients``, and SGD ``assign_sub`` updates, fetched as
``[loss, train]``. Prints the node count of the plan before and after optimization, then the time
per step, timed side by side in interleaved rounds through ``Session.run``:

    unoptimized, interpreter   Session(graph, optimize=False)
    optimized, interpreter     Session(graph)                  (the default)
    optimized, codegen         Session(graph, executor="codegen")

Targets (issue 6): at least 25% fewer nodes after optimize.
"""

from __future__ import annotations

import argparse
from collections import Counter

import course_utils.minigraph as mg
from course_utils import bench
from course_utils.data import MLP_SIZES, init_mlp, spiral

LR = 0.5


def build() -> tuple[mg.Graph, list[mg.Node], mg.Node]:
    """The training step: returns the graph, the fetches [loss, train] and the initializer."""
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 2), "float64", name="x")
        labels = mg.placeholder((None,), "int64", name="labels")
        params = [(mg.Variable(w, name=f"w{i}"), mg.Variable(b, name=f"b{i}"))
                  for i, (w, b) in enumerate(init_mlp(MLP_SIZES, seed=0))]
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            h = mg.relu(h) if i < len(params) - 1 else h
        loss = mg.mean(mg.cross_entropy(h, labels), name="loss")
        flat = [p for pair in params for p in pair]
        grads = mg.gradients(loss, flat)
        train = mg.group(*[mg.assign_sub(p, LR * gp) for p, gp in zip(flat, grads, strict=True)],
                         name="train")
        init = mg.global_variables_initializer()
    return g, [loss, train], init


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=25)
    args = parser.parse_args()

    X, y = spiral(n_per_class=args.batch // 2, seed=0)
    g, fetches, init = build()
    feed = {"x": X, "labels": y}
    with mg.Session(g, optimize=False) as plain, mg.Session(g) as fast:
        before, after = plain.plan(fetches, feed), fast.plan(fetches, feed)
    cut = 1 - len(after.nodes) / len(before.nodes)
    print(f"training step plan: {len(before.nodes)} nodes -> {len(after.nodes)} after "
          f"mg.optimize ({cut:.0%} fewer; target >= 25%: {'met' if cut >= 0.25 else 'MISSED'})")
    gone = Counter(n.op for n in before.nodes) - Counter(n.op for n in after.nodes)
    print("  removed:", ", ".join(f"{c} {op}" for op, c in gone.most_common()),
          f"| added: {sum(n.op == 'fused' for n in after.nodes)} fused")

    sessions = {"unoptimized, interpreter": mg.Session(g, optimize=False),
                "optimized, interpreter": mg.Session(g),
                "optimized, codegen": mg.Session(g, executor="codegen")}
    curves = {}
    for name, sess in sessions.items():  # same start, same curve: checked, then timed
        sess.run(init)
        curves[name] = [float(sess.run(fetches, feed)[0]) for _ in range(3)]
    assert all(c == curves["unoptimized, interpreter"] for c in curves.values()), curves
    fns = {name: (lambda s=sess: s.run(fetches, feed)) for name, sess in sessions.items()}
    result = bench.compare(fns, repeats=args.repeats, progress=False)
    print(f"\ntime per training step, batch {args.batch}:\n")
    print(result)


if __name__ == "__main__":
    main()
