"""Elementwise fusion: a chain of elementwise ops becomes one ``fused`` node, run in one call.

Each op of a chain like ``relu(x @ w + b)`` reads a whole array and writes a whole new one; on
small arrays the time goes to the calls themselves, on large ones to memory traffic. A fused node
holds the chain as a small ``Program`` and runs it as one generated kernel, which calls numpy
once per step and writes each step into the buffer of a value that just died (``out=``), so a
chain of any length allocates about one array.

NB: XLA calls this loop fusion and TorchInductor pointwise fusion; both generate the kernel too,
in C++ or Triton rather than Python.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from ...withheld import AnswerWithheld
from .. import shapes as S
from ..attrs import instance_of
from ..codegen import compile_program
from ..errors import DTypeError
from ..graph import Graph, Node, _format_attr
from ..memory import Spec
from ..ops import OPS, Op, register_op
from .cse import freeze
from .dce import eliminate_dead_code
from .rewrite import copy_node, users

#: Ops around elementwise ones that cost nothing inside a fusion (views and broadcasts) or only
#: read a shape, so a fusion may take them in. NB: XLA's loop fusion takes the same kind of ops.
SHAPE_OPS = {"broadcast_like", "broadcast_to", "expand_dims", "squeeze", "reshape", "size"}

#: Constants with at most this many elements are copied into each program that uses them.
MAX_INLINED_ELEMENTS = 1


class Step(NamedTuple):
    """``op(*slots[args], **attrs)``: slots are the program's inputs, then one per step.

    ``name`` is the node the step came from; generated code uses it, nothing else does.
    """

    op: str
    args: tuple[int, ...]
    attrs: dict[str, Any]
    name: str = ""


@dataclass(frozen=True, eq=False)
class Program:
    """The steps a fused node runs, and the specs of its inputs (the kernel is built for them).

    ``str(program)`` reads as a function of the inputs a, b, ...; ``source`` is the kernel.
    """

    input_specs: tuple[Spec, ...]
    steps: tuple[Step, ...]

    def step_specs(self, inputs: list[Any] | None = None) -> list[Spec]:
        """Each step's shape and dtype, from the shape rules, for ``inputs`` (default: the
        specs it was built for)."""
        slots = [Spec(tuple(x.shape), x.dtype) for x in (inputs or self.input_specs)]
        for step in self.steps:
            shape, dtype = OPS[step.op].shape_rule(*(slots[i] for i in step.args), **step.attrs)
            slots.append(Spec(tuple(shape), dtype))
        return slots[len(self.input_specs):]

    def freeze(self) -> tuple:
        """A hashable stand-in, so that common-subexpression elimination can compare programs."""
        steps = tuple((s.op, s.args, freeze(s.attrs)) for s in self.steps)
        return ("program", tuple((s.shape, s.dtype.str) for s in self.input_specs), steps)

    @cached_property
    def _compiled(self) -> tuple[Any, str]:
        return compile_program(self)  # once, on first use

    @property
    def kernel(self) -> Any:
        """The generated function: ``kernel(*input_arrays) -> result``."""
        return self._compiled[0]

    @property
    def source(self) -> str:
        """The kernel's Python source."""
        return self._compiled[1]

    def __str__(self) -> str:
        names = [_letter(i) for i in range(len(self.input_specs))]
        uses = collections.Counter(a for s in self.steps for a in s.args)
        shared = []
        for j, step in enumerate(self.steps):
            slot = len(names)
            if step.op == "constant":
                names.append(_format_attr("value", step.attrs["value"]))
                continue
            attrs = [f"{k}={_format_attr(k, v)}" for k, v in step.attrs.items()
                     if v is not None and v is not False]
            expr = f"{step.op}({', '.join([names[a] for a in step.args] + attrs)})"
            if uses[slot] > 1:  # used twice: name it, so the text says it is computed once
                shared.append(f"t{j} = {expr}")
                expr = f"t{j}"
            names.append(expr)
        body = names[-1] if not shared else f"[{'; '.join(shared)}; {names[-1]}]"
        full = f"lambda {', '.join(names[:len(self.input_specs)])}: {body}"
        if len(full) <= 100:
            return full
        counts = collections.Counter(s.op for s in self.steps if s.op != "constant")
        ops = ", ".join(f"{c} {op}" for op, c in counts.most_common())
        return f"<{sum(counts.values())} steps: {ops}>"


def _letter(i: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[i] if i < 26 else f"x{i}"


def _fused_rule(*inputs: Any, program: Program) -> tuple[S.Shape, np.dtype]:
    if len(inputs) != len(program.input_specs):
        raise DTypeError(f"this fused program takes {len(program.input_specs)} inputs, "
                         f"got {len(inputs)}")
    for i, (x, spec) in enumerate(zip(inputs, program.input_specs, strict=True)):
        if x.dtype != spec.dtype or not S.compatible(tuple(x.shape), spec.shape):
            raise DTypeError(f"fused input {i} is {S.format_shape(x.shape)} {x.dtype}; its "
                             f"kernel was built for {S.format_shape(spec.shape)} {spec.dtype}")
    last = program.step_specs(list(inputs))[-1]
    return last.shape, last.dtype


FUSED = register_op(Op("fused", lambda *arrays, program: program.kernel(*arrays), _fused_rule,
                       doc="a chain of elementwise ops run as one generated kernel",
                       attrs={"program": instance_of(Program, "a fused Program (made by "
                                                              "fuse_elementwise, never loaded)")}),
                    replace=True)


def fusable(node: Node) -> bool:
    """May ``node`` be part of a fusion? Elementwise and shape ops, never state."""
    op = OPS[node.op]
    if op.stateful or op.impl is None or node.dtype is None:
        return False
    return op.elementwise or node.op in SHAPE_OPS or node.op == "fused"


def _inlined(node: Node) -> bool:
    return node.op == "constant" and node.attrs["value"].size <= MAX_INLINED_ELEMENTS


def fuse_elementwise(graph: Graph) -> Graph:
    """Replace each group of connected elementwise ops by one ``fused`` node.

    Walking the graph backwards, an op joins the group of its users when all of them are in the
    same group (so no value inside a group is needed outside it) and it is not an output; any
    other op starts a group of its own. A group of two or more ops becomes a ``fused`` node with
    the name of its last op; small constants are copied into its program.

    >>> import course_utils.minigraph as mg
    >>> with mg.Graph().as_default() as g:
    ...     x = mg.placeholder((None, 3), name="x")
    ...     w = mg.placeholder((3, 3), name="w")
    ...     h = mg.matmul(x, w, name="h")
    ...     g.outputs = [mg.relu(mg.tanh(h, name="t") * 2.0, name="y")]
    >>> print(g)
    %x = placeholder()  # (None, 3) float32
    %w = placeholder()  # (3, 3) float32
    %h = matmul(%x, %w)  # (None, 3) float32
    %t = tanh(%h)  # (None, 3) float32
    %const = constant(value=2.0)  # () float32
    %mul = mul(%t, %const)  # (None, 3) float32
    %y = relu(%mul)  # (None, 3) float32
    return %y
    >>> fused = fuse_elementwise(g)
    >>> print(fused)
    %x = placeholder()  # (None, 3) float32
    %w = placeholder()  # (3, 3) float32
    %h = matmul(%x, %w)  # (None, 3) float32
    %y = fused(%h, program=lambda a: relu(mul(tanh(a), 2.0)))  # (None, 3) float32
    return %y
    >>> print(fused.node("y").attrs["program"].source)
    def kernel(x0):
        t = np.tanh(x0)
        mul = np.multiply(t, const, out=t); del t
        y = np.maximum(mul, 0, out=mul); del mul
        return y
    """
    uses = users(graph)
    outputs = {n.name for n in graph.outputs}
    root: dict[str, str] = {}  # node -> the last node of its group
    for n in reversed(graph.nodes):
        if not fusable(n):
            continue
        roots = {root.get(u.name) for u in uses[n.name]}
        joins = n.name not in outputs and len(roots) == 1 and None not in roots
        root[n.name] = roots.pop() if joins else n.name
    groups: dict[str, list[Node]] = collections.defaultdict(list)
    for n in graph.nodes:
        if n.name in root:
            groups[root[n.name]].append(n)

    new, env = Graph(), {}
    for n in graph.nodes:
        if n.name in root and root[n.name] != n.name:
            continue  # inside a group: its root computes it
        group = groups.get(n.name, [n])
        if len(group) < 2:
            env[n.name] = copy_node(new, n, tuple(env[x.name] for x in n.inputs))
            continue
        inputs, program = _program(group)
        if not program.steps:  # identities only: names for an input, nothing to compute
            for m in group:
                env[m.name] = copy_node(new, m, tuple(env[x.name] for x in m.inputs))
            continue
        env[n.name] = new.add_node("fused", tuple(env[x.name] for x in inputs),
                                   {"program": program}, name=n.name, source=n.source)
    new.outputs = [env[n.name] for n in graph.outputs]
    try:
        return eliminate_dead_code(new)  # constants copied into programs may be unused now
    except AnswerWithheld:  # a release before lesson 03's solutions withholds exercise 03.2
        return new


def _program(group: list[Node]) -> tuple[list[Node], Program]:
    """The group's outside inputs (in order of first use) and the program that computes it."""
    members = {n.name for n in group}
    inputs = list(dict.fromkeys(x for n in group for x in n.inputs
                                if x.name not in members and not _inlined(x)))
    slot = {x.name: i for i, x in enumerate(inputs)}
    steps: list[Step] = []

    def add(step: Step) -> int:
        steps.append(step)
        return len(inputs) + len(steps) - 1

    def arg(x: Node) -> int:
        if x.name not in slot:  # a small constant, copied in at its first use
            slot[x.name] = add(Step("constant", (), {"value": x.attrs["value"]}, x.name))
        return slot[x.name]

    for n in group:
        args = [arg(x) for x in n.inputs]
        if n.op == "identity":  # only a name: nothing to compute inside a program
            slot[n.name] = args[0]
        elif n.op == "fused":  # fusing a fused node again: splice its steps in
            inner = n.attrs["program"]
            for step in inner.steps:
                args.append(add(step._replace(args=tuple(args[i] for i in step.args))))
            slot[n.name] = args[-1]
        else:
            slot[n.name] = add(Step(n.op, tuple(args), dict(n.attrs), n.name))
    specs = tuple(Spec(x.shape, x.dtype) for x in inputs)
    return inputs, Program(specs, tuple(steps))
