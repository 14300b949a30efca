"""Draw a graph of your own node objects: ``viz.graph_of``, for the engines written in a lesson.

Say how to read a node (attribute names, or functions of a node) and get a `DrawGraph` that
`draw` lays out in the course's style, with values and gradients micrograd-style:

>>> class Value:
...     def __init__(self, data, children=(), op=""):
...         self.data, self.grad, self._prev, self._op = data, 0.0, children, op
>>> a, b = Value(2.0), Value(-3.0)
>>> c = Value(a.data * b.data, (a, b), "*")
>>> g = graph_of(c, inputs="_prev", label="_op", value="data", grad="grad")
>>> [(n.label, n.kind, n.value) for n in g.nodes][:3]
[('value', 'input', '= 2'), ('value', 'input', '= -3'), ('*', 'op', '= -6')]
>>> from course_utils.viz import draw
>>> d = draw(g, renderer="builtin")   # then draw it like any other graph
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .model import DrawGraph
from .values import format_value

Reader = str | Callable[[Any], Any] | None


def graph_of(
    outputs: Any,
    inputs: Reader = "inputs",
    *,
    label: Reader = None,
    name: Reader = None,
    value: Reader = None,
    grad: Reader = None,
    kind: Reader = None,
    title: str = "",
) -> DrawGraph:
    """The graph behind ``outputs`` (one node or a list), read through your own node objects.

    Args:
        outputs: the node(s) to draw back from.
        inputs: how to get a node's inputs: an attribute name (``"inputs"``, micrograd's
            ``"_prev"``) or a function ``node -> iterable of nodes``.
        label: the op shown in bold (attribute name or function); a node without one (``""``
            or None) is drawn as a leaf labelled ``value``.
        name, value, grad: optional lines under the label; values and gradients are formatted
            like ``draw(values=True, grads=True)``'s (small arrays in full, large summarised).
        kind: ``"input"``, ``"param"``, ``"const"`` or ``"op"`` per node (attribute name or
            function); default: leaves are inputs, the rest ops.
        title: the caption.

    Each node is drawn once (objects are compared by identity), inputs before the nodes that
    use them, and a ``result`` marker follows each output.
    """
    outs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    read_inputs = _reader(inputs)
    order = _post_order(outs, lambda n: list(read_inputs(n) or ()))
    ids = {id(n): f"n{i + 1}" for i, n in enumerate(order)}
    g = DrawGraph(title=title or f"{len(order)} nodes")
    for n in order:
        op = _text(_reader(label)(n)) if label is not None else ""
        parents = list(read_inputs(n) or ())
        node_kind = _reader(kind)(n) if kind is not None else ("op" if parents else "input")
        g.add_node(ids[id(n)], op or ("value" if not parents else "op"), kind=node_kind,
                   details=[_text(_reader(name)(n)) if name is not None else ""])
        node = g.nodes[-1]
        if value is not None:
            node.value = "= " + format_value(_reader(value)(n))
        if grad is not None:
            node.grad = "grad " + format_value(_reader(grad)(n))
        for x in parents:
            g.add_edge(ids[id(x)], ids[id(n)])
    for k, out in enumerate(outs):
        rid = "result" if len(outs) == 1 else f"result{k + 1}"
        g.add_node(rid, "result", kind="output")
        g.add_edge(ids[id(out)], rid)
    return g


def _reader(how: Reader) -> Callable[[Any], Any]:
    if how is None:
        return lambda node: None
    if isinstance(how, str):
        return lambda node: getattr(node, how, None)
    if callable(how):
        return how
    raise TypeError(f"say how to read a node with an attribute name or a function, not {how!r}")


def _text(x: Any) -> str:
    return "" if x is None else str(x)


def _post_order(roots: list[Any], inputs: Callable[[Any], list[Any]]) -> list[Any]:
    """Every node reachable from ``roots``, each after all of its inputs (iterative DFS)."""
    order: list[Any] = []
    seen: set[int] = set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack: list[tuple[Any, Iterable[Any]]] = [(root, iter(inputs(root)))]
        while stack:
            node, children = stack[-1]
            for child in children:
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, iter(inputs(child))))
                    break
            else:
                stack.pop()
                order.append(node)
    return order
