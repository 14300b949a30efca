"""Memory planning: how long each value lives, and how many bytes a run holds at its peak.

Values are freed after their last use (the Interpreter does this), so the bytes alive at once can
be far below the sum of all values. ``memory_plan`` works it out before anything runs, from shapes
alone, as a compiler's memory planner does:

>>> import course_utils.minigraph as mg
>>> with mg.Graph().as_default() as g:
...     x = mg.placeholder((None, 1000), name="x")
...     g.outputs = [mg.sum(mg.exp(mg.tanh(mg.exp(x))), name="s")]
>>> plan = mg.memory_plan(g, {"x": (100, 1000)})
>>> plan.peak_bytes, plan.kept_bytes      # 800 KB at once, instead of all 1.2 MB
(800000, 1200004)
>>> print(plan)  # doctest: +NORMALIZE_WHITESPACE
step  value   op           shape        dtype    bytes  live   buffer
   0  x       placeholder  (100, 1000)  float32  400 KB  0-1   input
   1  exp     exp          (100, 1000)  float32  400 KB  1-2   b0
   2  tanh    tanh         (100, 1000)  float32  400 KB  2-3   b1
   3  exp_1   exp          (100, 1000)  float32  400 KB  3-4   b0
   4  s       sum          ()           float32     4 B  4-4   b2
peak live bytes, freed after last use:  800 KB
peak live bytes, kept to the end:       1.2 MB   (freeing: 0.67x)
buffers, reused when shape and dtype match: 3 for 4 values, 800 KB
inputs (placeholders, variables, constants): 400 KB

NB: XLA's buffer assignment and TensorFlow's memory optimizer solve the same problem (and also
reuse buffers across shapes, which this plan leaves out).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from . import shapes as S
from .errors import FeedError, GraphError
from .graph import Graph, Node, expect_graph
from .ops import OPS


class Spec(NamedTuple):
    """A value's shape and dtype without the value: what shape rules read.

    NB: TensorFlow's ``tf.TensorSpec``, JAX's ``ShapedArray``, PyTorch's meta tensors.
    """

    shape: S.Shape
    dtype: np.dtype | None

    @property
    def ndim(self) -> int:
        return len(self.shape)


#: Ops whose result is a view of their first input (numpy shares the memory), so they allocate
#: nothing and keep that input's buffer alive for as long as they are.
VIEW_OPS = {"identity", "reshape", "transpose", "getitem", "expand_dims", "squeeze"}

#: Values a run does not allocate: the caller's feeds, the Session's state, the graph's constants
#: and the eager tensors a traced function captured.
INPUT_OPS = {"placeholder", "variable", "constant", "capture"}


@dataclass
class ValueLife:
    """One value of a run: where it is made, when it is last used, and the bytes it takes."""

    name: str
    op: str
    shape: tuple[int, ...]
    dtype: np.dtype | None
    nbytes: int  # 0 for views and for ops without a value
    defined: int  # step (index in graph order)
    last_use: int  # step after which it is freed (the last step for outputs and stored state)
    buffer: str  # "b3": its buffer in the reuse plan; "input", "view of %x" or "" (no value)


@dataclass
class MemoryPlan:
    """What ``memory_plan`` found: one ``ValueLife`` per node and the totals.

    ``live_bytes[i]`` is what is allocated while step i runs (its inputs and its result), with
    values freed after their last use; ``peak_bytes`` is its maximum and ``kept_bytes`` the peak
    if nothing were freed before the end. ``buffers`` and ``buffer_bytes`` count the buffers a
    run needs when a freed buffer is reused for a later value of the same shape and dtype.
    """

    values: list[ValueLife]
    live_bytes: list[int]
    peak_bytes: int
    kept_bytes: int
    buffers: int
    buffer_bytes: int
    input_bytes: int

    @property
    def ratio(self) -> float:
        """``peak_bytes / kept_bytes``: what freeing after the last use saves."""
        return self.peak_bytes / self.kept_bytes if self.kept_bytes else 1.0

    def __str__(self) -> str:
        header = ["step", "value", "op", "shape", "dtype", "bytes", "live", "buffer"]
        rows = [[str(v.defined), v.name, v.op, str(v.shape) if v.dtype is not None else "",
                 str(v.dtype or ""), format_bytes(v.nbytes) if v.dtype is not None else "",
                 f"{v.defined}-{v.last_use}", v.buffer] for v in self.values]
        allocated = sum(1 for v in self.values if v.buffer.startswith("b"))
        return "\n".join([
            _table(header, rows, right={0, 5}),
            f"peak live bytes, freed after last use:  {format_bytes(self.peak_bytes)}",
            f"peak live bytes, kept to the end:       {format_bytes(self.kept_bytes)}   "
            f"(freeing: {self.ratio:.2f}x)",
            f"buffers, reused when shape and dtype match: {self.buffers} for {allocated} values, "
            f"{format_bytes(self.buffer_bytes)}",
            f"inputs (placeholders, variables, constants): {format_bytes(self.input_bytes)}",
        ])


def memory_plan(graph: Graph, feeds: Mapping[Any, Any] | None = None) -> MemoryPlan:
    """Liveness, peak live bytes and a buffer-reuse plan for one run of ``graph``.

    ``feeds`` gives each placeholder with unknown sizes its concrete shape: a tuple is a shape,
    anything else an array (only its shape is used). Nothing runs; shapes come from the ops'
    shape rules. Outputs and values stored in Variables live to the end of the run.
    """
    graph = expect_graph(graph, "mg.memory_plan")
    specs = concrete_specs(graph, feeds or {})
    n = len(graph.nodes)
    kept = {x.name for x in graph.outputs} | {
        x.name for x in graph.nodes if x.op in ("assign", "assign_sub")}
    last = {x.name: (n - 1 if x.name in kept else i) for i, x in enumerate(graph.nodes)}
    for i, x in enumerate(graph.nodes):
        for y in x.inputs:
            last[y.name] = max(last[y.name], i)
    # A view shares its base's memory: the base lives as long as its longest-lived view.
    base = {}
    for x in graph.nodes:
        base[x.name] = base[x.inputs[0].name] if x.op in VIEW_OPS else x.name
    for x in reversed(graph.nodes):
        last[base[x.name]] = max(last[base[x.name]], last[x.name])

    values, input_bytes = [], 0
    for i, x in enumerate(graph.nodes):
        spec = specs[x.name]
        nbytes = _nbytes(spec)
        if x.op in INPUT_OPS:
            buffer, input_bytes = "input", input_bytes + nbytes
        elif spec.dtype is None:
            buffer, nbytes = "", 0
        elif None in spec.shape:  # a loop or cond result whose size only the run decides
            buffer, nbytes = "size known at run time", 0
        elif base[x.name] != x.name:
            buffer, nbytes = f"view of %{base[x.name]}", 0
        else:
            buffer = "new"
        values.append(ValueLife(x.name, x.op, tuple(spec.shape), spec.dtype, nbytes, i,
                                last[x.name], buffer))

    run = [v for v in values if v.buffer == "new"]
    live = [sum(v.nbytes for v in run if v.defined <= i <= v.last_use) for i in range(n)]
    buffers, buffer_bytes = _assign_buffers(run)
    return MemoryPlan(values, live, max(live, default=0), sum(v.nbytes for v in run), buffers,
                      buffer_bytes, input_bytes)


def _assign_buffers(run: list[ValueLife]) -> tuple[int, int]:
    """Give each value a buffer, reusing one freed at an earlier step if shape and dtype match."""
    free: dict[tuple, list[str]] = {}
    releases: list[tuple[int, tuple, str]] = []  # (step it is free after, key, buffer)
    count, total = 0, 0
    for v in run:  # in step order
        for step, key, buf in [r for r in releases if r[0] < v.defined]:
            free.setdefault(key, []).append(buf)
            releases.remove((step, key, buf))
        key = (v.shape, v.dtype)
        if free.get(key):
            v.buffer = free[key].pop()
        else:
            v.buffer, count, total = f"b{count}", count + 1, total + v.nbytes
        releases.append((v.last_use, key, v.buffer))
    return count, total


def concrete_specs(graph: Graph, feeds: Mapping[Any, Any]) -> dict[str, Spec]:
    """Every node's concrete ``Spec``: placeholders from ``feeds``, the rest from shape rules."""
    given = {}
    for key, value in feeds.items():
        name = key.name if isinstance(key, Node) else str(key)
        given[name] = tuple(value) if isinstance(value, tuple) else np.shape(value)
    specs: dict[str, Spec] = {}
    for x in graph.nodes:
        if x.op == "placeholder":
            shape = given.get(x.name, x.shape)
            if None in shape or not S.compatible(x.shape, shape):
                raise FeedError(f"memory_plan needs a concrete shape for placeholder %{x.name} "
                                f"({x.type_str()}, defined at {x.source}); got {shape}: pass "
                                f"feeds={{'{x.name}': <array or shape tuple>}}")
            specs[x.name] = Spec(tuple(shape), x.dtype)
            continue
        try:
            shape, dtype = OPS[x.op].shape_rule(*(specs[y.name] for y in x.inputs), **x.attrs)
        except Exception as e:
            raise GraphError(f"memory_plan: the shape rule of %{x.name} = {x.op}(...) (defined at "
                             f"{x.source}) fails on the fed shapes: {e}") from e
        specs[x.name] = Spec(tuple(shape), dtype)
    return specs


def _nbytes(spec: Spec) -> int:
    if spec.dtype is None or None in spec.shape:  # no array, or a size known only at run time
        return 0
    return math.prod(spec.shape) * spec.dtype.itemsize


def format_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KB'`` (powers of 1000, as disk and memory tools print)."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" or n >= 100 else f"{n:.3g} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def _table(header: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join(line(r) for r in [header, *rows])
