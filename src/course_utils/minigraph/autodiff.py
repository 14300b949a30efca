"""Reverse-mode autodiff: one backward walk, used by eager ``backward()`` and by ``mg.gradients``.

The walk does not care what a value is. Give it the outputs, their seed gradients and a function
that says how a value was made (``(op, inputs, attrs)``, or ``None`` for a leaf); it visits values
in reverse topological order and calls each ``op.vjp``. With eager tensors the vjps compute
numbers; with graph nodes the very same vjps add backward nodes to the graph.

>>> import course_utils.minigraph as mg
>>> g = mg.Graph()
>>> with g.as_default():
...     x = mg.placeholder((), name="x")
...     y = mg.mul(x, x, name="y")
...     (dx,) = mg.gradients(y, [x])
>>> print(g)
%x = placeholder()  # () float32
%y = mul(%x, %x)  # () float32
%ones_like = ones_like(%y)  # () float32
%mul = mul(%ones_like, %x)  # () float32
%mul_1 = mul(%ones_like, %x)  # () float32
%add = add(%mul, %mul_1)  # () float32
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import course_utils.minigraph as mg

from . import shapes as S
from .errors import DTypeError, GradientError, GraphError, user_source

Record = tuple[Any, tuple, dict]  # (op, inputs, attrs)


def call_vjp(op: Any, g: Any, out: Any, inputs: tuple, attrs: dict) -> Any:
    """``op.vjp(g, out, *inputs, **attrs)``: how the walk applies a rule, unless told otherwise."""
    return op.vjp(g, out, *inputs, **attrs)


def backprop(ys: list, seeds: list, record_of: Callable[[Any], Record | None],
             wants: Callable[[Any], bool],
             vjp: Callable[..., Any] = call_vjp) -> list[tuple[Any, Any]]:
    """Push ``seeds`` (the gradients of ``ys``) back to every value that ``wants`` a gradient.

    Returns ``(value, gradient)`` pairs for every value reached, leaves included. Gradients that
    meet at a value are added: that is the multivariable chain rule. ``vjp(op, g, out, inputs,
    attrs)`` applies one rule; eager ``backward()`` passes one that runs the rules on raw arrays.
    """
    grads: dict[int, tuple[Any, Any]] = {}

    def accumulate(v: Any, g: Any) -> None:
        seen = grads.get(id(v))
        grads[id(v)] = (v, g if seen is None else seen[1] + g)

    for y, seed in zip(ys, seeds, strict=True):
        accumulate(y, seed)
    order, records = _toposort(ys, record_of)
    for v in reversed(order):
        record = records[id(v)]
        if record is None or id(v) not in grads:
            continue
        op, inputs, attrs = record
        input_grads = vjp(op, grads[id(v)][1], v, inputs, attrs)
        if not isinstance(input_grads, (tuple, list)) or len(input_grads) != len(inputs):
            _check_vjp(op, inputs, input_grads)  # raises, saying what the vjp got wrong
        for i, gx in enumerate(input_grads):
            if gx is not None and wants(x := inputs[i]):
                if gx.shape != x.shape:  # the cheap test first; then what may differ
                    _check_vjp(op, inputs, input_grads)
                accumulate(x, gx)
    return list(grads.values())


def _toposort(roots: list, record_of: Callable[[Any], Record | None]) -> tuple[list, dict]:
    """Values reachable from ``roots``, each after all of its inputs (an iterative DFS, so a
    long chain such as an unrolled loop cannot hit Python's recursion limit), and the record
    of each (by ``id``), asked for once."""
    order, records = [], {}
    stack = [(r, False) for r in roots]
    while stack:
        v, expanded = stack.pop()
        if expanded:
            order.append(v)
        elif id(v) not in records:
            record = records[id(v)] = record_of(v)
            stack.append((v, True))
            if record is not None:
                stack.extend([(x, False) for x in record[1] if id(x) not in records])
    return order, records


def _check_vjp(op: Any, inputs: tuple, grads: Any) -> None:
    """Catch a wrong vjp at the op that has it (most useful for ops you register yourself)."""
    if not isinstance(grads, (tuple, list)) or len(grads) != len(inputs):
        raise GradientError(f"the vjp of op {op.name!r} must return a tuple with one gradient "
                            f"(or None) per input ({len(inputs)}), got {grads!r}")
    for i, x in enumerate(inputs):
        g = grads[i]
        if g is None or g.shape == x.shape:  # the usual case, and the cheap test first
            continue
        if not S.compatible(tuple(g.shape), tuple(x.shape)):
            raise GradientError(
                f"the vjp of op {op.name!r} returned a gradient of shape "
                f"{S.format_shape(g.shape)} for input {i} of shape {S.format_shape(x.shape)}; a "
                f"gradient has its input's shape (sum a broadcast one back: mg.unbroadcast(g, x))"
            )


# --- symbolic gradients -------------------------------------------------------------------------


def gradients(ys: Any, xs: Any, grad_ys: Any = None) -> list[Any]:
    """Add the backward nodes to the graph; return one node per x: d(sum of ys)/dx.

    An x that the ys do not depend on gets ``None``. ``grad_ys`` (default: ones) are the seed
    gradients, one per y. NB: this is ``tf.compat.v1.gradients``, with the same conventions.
    """
    ys, xs = _as_nodes(ys, "ys"), _as_nodes(xs, "xs")
    graph = ys[0].graph
    for n in ys + xs:
        if n.graph is not graph:
            raise GraphError(f"mg.gradients at {user_source()}: %{n.name} (defined at {n.source}) "
                             f"is in another graph than %{ys[0].name}; use one graph")
    seeds_in = [None] * len(ys) if grad_ys is None else list(_as_list(grad_ys))
    if len(seeds_in) != len(ys):
        raise GradientError(f"mg.gradients at {user_source()}: {len(seeds_in)} grad_ys for "
                            f"{len(ys)} ys; give one seed gradient per y")
    between = _between(graph, xs, ys)
    start = len(graph.nodes)
    seeds = [mg.ones_like(y) if s is None else graph.lift(s, y.dtype)
             for y, s in zip(ys, seeds_in, strict=True)]
    for i, (y, s) in enumerate(zip(ys, seeds, strict=True)):
        if seeds_in[i] is None:
            continue
        if not S.compatible(tuple(y.shape), tuple(s.shape)) or not S.is_float(s.dtype):
            raise (GradientError if S.is_float(s.dtype) else DTypeError)(
                f"mg.gradients at {user_source()}: grad_ys[{i}] is {s.type_str()} but "
                f"%{y.name} (defined at {y.source}) is {y.type_str()}; a seed gradient has its "
                f"y's shape and a float dtype (the default, ones, is mg.ones_like(y))")

    def record_of(n: Any) -> Record | None:
        op = mg.OPS[n.op]
        return (op, n.inputs, n.attrs) if id(n) in between and op.vjp is not None else None

    found = {id(v): g for v, g in backprop(ys, seeds, record_of, lambda n: id(n) in between)}
    result = [found.get(id(x)) for x in xs]
    graph._drop_unused(start, result)  # vjps also built gradients nobody asked for
    return result


def _as_list(v: Any) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _as_nodes(v: Any, what: str) -> list:
    nodes = _as_list(v)
    bad = [n for n in nodes if not isinstance(n, mg.Node)]
    if bad or not nodes:
        raise GraphError(f"mg.gradients at {user_source()}: {what} must be graph nodes, got "
                         f"{bad[0]!r} (for eager tensors call .backward())" if bad else
                         f"mg.gradients at {user_source()}: {what} is empty")
    return nodes


def _between(graph: Any, xs: list, ys: list) -> set[int]:
    """Ids of the nodes on some path from an x to a y: the only ones gradients flow through."""
    ancestors, stack = set(), list(ys)
    while stack:
        n = stack.pop()
        if id(n) not in ancestors:
            ancestors.add(id(n))
            stack.extend(n.inputs)
    reached = {id(x) for x in xs}
    for n in graph.nodes:  # topological order: inputs are decided before their users
        if id(n) in ancestors and any(id(i) in reached for i in n.inputs):
            reached.add(id(n))
    return reached & ancestors
