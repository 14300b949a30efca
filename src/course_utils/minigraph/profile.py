"""Profiling: where one run of a graph spends its time, node by node.

>>> import course_utils.minigraph as mg
>>> with mg.Graph().as_default() as g:
...     x = mg.placeholder((None, 256), name="x")
...     w = mg.Variable(np.ones((256, 256), np.float32), name="w")
...     y = mg.sum(mg.tanh(x @ w), name="y")
>>> p = mg.profile(g, y, {x: np.ones((512, 256), np.float32)})
>>> [row.op for row in p.top(2)]  # doctest: +SKIP
['matmul', 'tanh']
>>> print(p)  # doctest: +SKIP
node    op           time      %  output bytes  shape
matmul  matmul    1.13 ms  72.6%        524 KB  (512, 256)
tanh    tanh       361 µs  23.2%        524 KB  (512, 256)
...

NB: TensorFlow's ``RunMetadata`` step stats and ``torch.profiler`` report the same table.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .graph import Graph, Node
from .interpreter import Interpreter
from .memory import _table, format_bytes
from .session import Session


@dataclass(frozen=True)
class ProfileRow:
    """One node of the profiled run: its time (median over the runs) and output size."""

    name: str
    op: str
    seconds: float
    nbytes: int
    shape: tuple[int, ...] | None  # None for ops without a value
    source: str


@dataclass
class Profile:
    """Per-node times of one run, slowest first; ``total`` is their sum.

    ``wall`` is the whole run as the caller saw it (median): the gap to ``total`` is the
    interpreter's own bookkeeping between nodes.
    """

    rows: list[ProfileRow]
    total: float
    wall: float
    runs: int

    def top(self, n: int = 5) -> list[ProfileRow]:
        """The ``n`` slowest nodes."""
        return self.rows[:n]

    def by_op(self) -> dict[str, float]:
        """Seconds per op name, summed over its nodes, slowest op first."""
        times: dict[str, float] = {}
        for row in self.rows:
            times[row.op] = times.get(row.op, 0.0) + row.seconds
        return dict(sorted(times.items(), key=lambda kv: -kv[1]))

    def __iter__(self) -> Iterator[ProfileRow]:
        return iter(self.rows)

    def __str__(self) -> str:
        share = self.total or 1.0
        rows = [[r.name, r.op, _fmt_time(r.seconds), f"{100 * r.seconds / share:.1f}%",
                 format_bytes(r.nbytes) if r.shape is not None else "",
                 str(r.shape) if r.shape is not None else ""] for r in self.rows]
        table = _table(["node", "op", "time", "%", "output bytes", "shape"], rows,
                       right={2, 3, 4})
        runs = "1 run" if self.runs == 1 else f"medians of {self.runs} runs"
        return (f"{table}\ntotal {_fmt_time(self.total)} in {len(self.rows)} nodes, "
                f"{_fmt_time(self.wall)} wall ({runs})")


class ProfilingInterpreter(Interpreter):
    """An Interpreter that times every node and records the bytes of every value."""

    def __init__(self, graph: Graph) -> None:
        super().__init__(graph)
        self.times: dict[str, list[float]] = {n.name: [] for n in graph.nodes}
        self.nbytes: dict[str, int] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}

    def run_node(self, node: Node, args: list[Any]) -> Any:
        start = time.perf_counter()
        value = super().run_node(node, args)
        self.times[node.name].append(time.perf_counter() - start)
        return value

    def on_alloc(self, node: Node, value: Any) -> None:
        self.nbytes[node.name] = getattr(value, "nbytes", 0)
        self.shapes[node.name] = getattr(value, "shape", None)


def profile(session_or_graph: Session | Graph, fetches: Any, feed_dict: dict | None = None,
            runs: int = 1) -> Profile:
    """Run ``fetches`` ``runs`` times with the Interpreter, timing each node.

    With a Session, it runs that Session's plan (pruned and optimized as ``sess.run`` would) on
    its Variables; every run is a real run, so assign ops in the fetches do update them. With a
    graph, it uses a new Session whose Variables hold their initial values.
    """
    if isinstance(session_or_graph, Session):
        sess = session_or_graph
    else:
        sess = Session(session_or_graph)
        sess.state.update({v.name: v.attrs["value"] for v in sess.graph.variables()})
    plan = sess.plan(fetches, feed_dict)
    feeds = sess._feeds(feed_dict or {})
    interpreter = ProfilingInterpreter(plan)
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        interpreter.run(feeds, sess.state)
        walls.append(time.perf_counter() - start)
    rows = [ProfileRow(n.name, n.op, float(np.median(interpreter.times[n.name])),
                       interpreter.nbytes[n.name], interpreter.shapes[n.name], n.source)
            for n in plan.nodes]
    rows.sort(key=lambda r: -r.seconds)
    return Profile(rows, sum(r.seconds for r in rows), float(np.median(walls)), runs)


def _fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"
