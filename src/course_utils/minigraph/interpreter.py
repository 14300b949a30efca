"""The Interpreter: run a graph one node at a time, freeing each value after its last use.

>>> import course_utils.minigraph as mg
>>> g = mg.Graph()
>>> with g.as_default():
...     x = mg.placeholder((2,), name="x")
...     y = mg.exp(x, name="y")
>>> g.outputs = [y]
>>> mg.Interpreter(g).run({"x": np.zeros(2, np.float32)}, state={})
[array([1., 1.], dtype=float32)]

To watch a run, subclass it: ``run_node`` sees every node (time it there) and ``on_alloc`` /
``on_free`` see every value appear and disappear (add up live bytes there). While a
``MemoryLimit`` is set (``with MemoryLimit(max_bytes):``; a function from ``mg.load`` sets one
when called) each run, sub-graphs of cond and while_loop included, works out the bytes of each
node's value before computing it and refuses to hold more than ``max_bytes`` at once.
NB: ``torch.fx.Interpreter`` has the same shape: ``run`` -> ``run_node`` -> one method per opcode.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

import numpy as np

from .errors import (
    ExecutionError,
    GraphError,
    MinigraphError,
    MissingFeedError,
    UninitializedVariableError,
    UnknownOpError,
)
from .graph import Graph, Node
from .ops import OPS, conform


class _Uninitialized:
    """What a variable holds in a Session before the initializer has run there."""

    def __repr__(self) -> str:
        return "<uninitialized>"


UNINITIALIZED = _Uninitialized()


class Interpreter:
    """Evaluate ``graph.outputs`` from ``feeds`` (placeholder name -> array) and ``state``
    (variable name -> array, the Session's; assign ops write to it)."""

    # Ops that touch feeds or state have their own method; every other op calls its impl.
    SPECIAL = {"placeholder": "run_placeholder", "variable": "run_variable",
               "assign": "run_assign", "assign_sub": "run_assign_sub", "group": "run_group",
               "initializer": "run_initializer"}

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        for node in graph.nodes:
            if node.op not in OPS:
                raise UnknownOpError(f"%{node.name} = {node.op}(...) defined at {node.source}: "
                                     f"no op {node.op!r} in mg.OPS; register it before running")
        self.free_after = self._free_schedule()

    def _free_schedule(self) -> list[list[Node]]:
        """``free_after[i]``: the values no node after node i needs (outputs are never freed)."""
        position = {n.name: i for i, n in enumerate(self.graph.nodes)}
        last = dict(position)  # a value nothing reads is freed at once
        for i, n in enumerate(self.graph.nodes):
            for x in n.inputs:
                if position.get(x.name, i) >= i:  # an input must be computed before its user
                    raise GraphError(
                        f"%{n.name} = {n.op}(...) defined at {n.source} reads %{x.name}, which "
                        f"is not computed before it: the graph has a cycle or nodes out of "
                        f"order; graph.validate() names the first bad node")
                last[x.name] = i
        kept = {n.name for n in self.graph.outputs}
        schedule: list[list[Node]] = [[] for _ in self.graph.nodes]
        for n in self.graph.nodes:
            if n.name not in kept:
                schedule[last[n.name]].append(n)
        return schedule

    def run(self, feeds: Mapping[str, np.ndarray], state: dict[str, np.ndarray]) -> list[Any]:
        """The values of ``graph.outputs``, in order (``None`` for ops without a value)."""
        self.feeds, self.state = feeds, state
        limit = _LIMIT.get()
        if limit is not None:
            return self._run_limited(limit)
        env: dict[str, Any] = {}
        for i, node in enumerate(self.graph.nodes):
            value = self.run_node(node, [env[x.name] for x in node.inputs])
            env[node.name] = value
            self.on_alloc(node, value)
            for done in self.free_after[i]:
                self.on_free(done, env.pop(done.name))
        return self._outputs(env)

    def _run_limited(self, limit: MemoryLimit) -> list[Any]:
        """``run`` under a memory limit: each value's bytes are held from before it is computed
        until it is freed (outputs: until the run ends, when its caller takes them over)."""
        env: dict[str, Any] = {}
        held: dict[str, int] = {}
        try:
            for i, node in enumerate(self.graph.nodes):
                args = [env[x.name] for x in node.inputs]
                size = _value_bytes(node, args)
                held[node.name] = _take(limit, node, size or 0)
                value = self.run_node(node, args)
                if size is None:  # not known before: counted once made (cond, loop results)
                    held[node.name] += _take(limit, node, _nbytes(value))
                env[node.name] = value
                self.on_alloc(node, value)
                for done in self.free_after[i]:
                    self.on_free(done, env.pop(done.name))
                    limit.live -= held.pop(done.name)
            return self._outputs(env)
        finally:
            limit.live -= sum(held.values())

    def _outputs(self, env: dict[str, Any]) -> list[Any]:
        outputs = [env[n.name] for n in self.graph.outputs]
        for node, value in zip(self.graph.outputs, outputs, strict=True):
            if value is UNINITIALIZED:
                raise _uninitialized(node, None)
        return outputs

    def run_node(self, node: Node, args: list[Any]) -> Any:
        """Compute one node from its input values."""
        special = self.SPECIAL.get(node.op)
        return getattr(self, special)(node, args) if special else self.call_op(node, args)

    def on_alloc(self, node: Node, value: Any) -> None:
        """Called when ``node``'s value has been computed. Override to observe memory.

        For placeholders and variables the value is the fed or stored array, not a new one.
        """

    def on_free(self, node: Node, value: Any) -> None:
        """Called when ``node``'s value is dropped after its last use."""

    # --- one method per kind of node --------------------------------------------------------

    def call_op(self, node: Node, args: list[Any]) -> Any:
        for x, a in zip(node.inputs, args, strict=True):
            if a is UNINITIALIZED:
                raise _uninitialized(x, node)
        try:
            return conform(OPS[node.op].impl(*args, **node.attrs), node.shape, node.dtype)
        except MinigraphError:
            raise
        except Exception as e:
            raise ExecutionError(f"while executing {node.describe()} defined at {node.source}: "
                                 f"{type(e).__name__}: {e}") from e

    def run_placeholder(self, node: Node, args: list[Any]) -> Any:
        if node.name not in self.feeds:
            raise MissingFeedError(f"placeholder %{node.name} ({node.type_str()}, defined at "
                                   f"{node.source}) has no value: feed it")
        return self.feeds[node.name]

    def run_variable(self, node: Node, args: list[Any]) -> Any:
        # A read is a snapshot: assigns store new (read-only) arrays, never write into this one.
        return self.state.get(node.name, UNINITIALIZED)

    def run_assign(self, node: Node, args: list[Any]) -> Any:
        return self._store(node, self._operand(node, args))

    def run_assign_sub(self, node: Node, args: list[Any]) -> Any:
        var = node.inputs[0]
        current = self.state.get(var.name, UNINITIALIZED)
        if current is UNINITIALIZED:
            raise _uninitialized(var, node)
        return self._store(node, current - self._operand(node, args))

    def run_group(self, node: Node, args: list[Any]) -> None:
        return None

    def run_initializer(self, node: Node, args: list[Any]) -> None:
        for var in node.inputs:
            self.state[var.name] = var.attrs["value"]  # read-only, so sharing it is safe
        return None

    def _operand(self, node: Node, args: list[Any]) -> Any:
        if args[1] is UNINITIALIZED:
            raise _uninitialized(node.inputs[1], node)
        return args[1]

    def _store(self, node: Node, value: Any) -> np.ndarray:
        var = node.inputs[0]
        value = np.array(value, dtype=var.dtype)  # a copy, so the caller's array stays theirs
        if value.shape != var.shape:
            raise ExecutionError(f"while executing {node.describe()} defined at {node.source}: "
                                 f"a value of shape {value.shape} cannot go in %{var.name} of "
                                 f"shape {var.shape}")
        value.flags.writeable = False
        self.state[var.name] = value
        return value


class MemoryLimit:
    """At most ``max_bytes`` of values held at once by the runs inside ``with`` (``what`` says who
    set the limit and how to raise it, for the error message).

    A run counts each value it makes: before computing a node, the bytes of its value (from its
    shape, or, where a size is known only at run time, from its shape rule applied to the actual
    inputs), until the value is freed. Fed inputs, Variables and constants are arrays that exist
    already and count nothing. A run that would go over raises ``ExecutionError`` naming the
    node, before computing it. NB: the bytes an op uses inside its impl are not seen.
    """

    def __init__(self, max_bytes: int, what: str = "") -> None:
        self.max_bytes, self.what, self.live = max_bytes, what, 0
        self._token: Any = None

    def take(self, size: int, what: str) -> int:
        """Hold ``size`` more bytes (``what``: which value), or raise ``MemoryLimitExceeded``."""
        if self.live + size > self.max_bytes:
            raise MemoryLimitExceeded(
                f"it would make {what} of {size:,} bytes while values of {self.live:,} bytes "
                f"are held, more than max_bytes={self.max_bytes:,} in all{self.what}")
        self.live += size
        return size

    def __enter__(self) -> MemoryLimit:
        self._token = _LIMIT.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _LIMIT.reset(self._token)


class MemoryLimitExceeded(RuntimeError):
    """A value would take a run past its MemoryLimit (the executor names the node)."""


def memory_limit() -> MemoryLimit | None:
    """The MemoryLimit in force here, if any (a while_loop charges its saved iterations to it)."""
    return _LIMIT.get()


def _take(limit: MemoryLimit, node: Node, size: int) -> int:
    what = f"a {node.type_str()} value" if node.dtype is not None else "results"
    try:
        return limit.take(size, what)
    except MemoryLimitExceeded as e:
        raise ExecutionError(f"while executing {node.describe()} defined at {node.source}: "
                             f"{e}") from e


#: The MemoryLimit of the runs in this context (None: no limit).
_LIMIT: ContextVar[MemoryLimit | None] = ContextVar("minigraph_memory_limit", default=None)

#: Ops whose value is an array that exists before the run (fed, stored, or read from a file).
_EXISTING = frozenset({"placeholder", "variable", "constant", "capture", "tuple_get"})


def _value_bytes(node: Node, args: list[Any]) -> int | None:
    """The bytes of the value ``node`` is about to make from ``args``: 0 if it exists already
    (``tuple_get`` reads a result its cond or loop made and counted), ``None`` if only the
    value itself will tell (the results of a cond or loop, a shape rule that fails here)."""
    if node.op in _EXISTING:
        return 0
    if node.dtype is None:
        return None
    shape = node.shape
    if None in shape:  # known only now: the shape rule on the actual inputs says
        try:
            shape, _ = OPS[node.op].shape_rule(*args, **node.attrs)
        except Exception:  # the impl will report what is wrong with these inputs
            return None
        if None in shape:
            return None
    return math.prod(shape) * node.dtype.itemsize


def _nbytes(value: Any) -> int:
    """The bytes of an array, or of the arrays in a (nested) tuple of results."""
    if isinstance(value, tuple):
        return sum(_nbytes(v) for v in value)
    return value.nbytes if isinstance(value, np.ndarray | np.generic) else 0


def _uninitialized(var: Node, reader: Node | None) -> UninitializedVariableError:
    used = "" if reader is None else f", read by {reader.describe()} (defined at {reader.source})"
    return UninitializedVariableError(
        f"variable %{var.name} (defined at {var.source}) has no value in this Session{used}. "
        f"Create init = mg.global_variables_initializer() after all the Variables and run it in "
        f"this Session first: sess.run(init)"
    )
