"""What every pass shares: rebuild a graph node by node, replacing some nodes on the way.

A pass never edits a graph in place. It walks the old nodes in order and, for each, either copies
it into a new graph (with its inputs mapped to their new nodes) or returns a replacement: a node
already in the new graph (``x * 1`` becomes ``x``) or a new node that takes the old one's name
(a folded constant). Names are kept, so a Session can find its fetches in the optimized graph.

>>> import course_utils.minigraph as mg
>>> with mg.Graph().as_default() as g:
...     x = mg.placeholder((2,), name="x")
...     y = mg.exp(mg.neg(x), name="y")
>>> g.outputs = [y]
>>> drop_neg = lambda new, node, inputs: inputs[0] if node.op == "neg" else None
>>> print(rebuild(g, drop_neg))
%x = placeholder()  # (2,) float32
%y = exp(%x)  # (2,) float32
return %y

NB: torch.fx passes do the same with ``Graph.node_copy(node, arg_transform)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..graph import Graph, Node

#: ``rewrite(new_graph, old_node, new_inputs)``: the node's replacement in ``new_graph``, or
#: ``None`` to copy it unchanged.
Rewrite = Callable[[Graph, Node, tuple[Node, ...]], "Node | None"]


def rebuild(graph: Graph, rewrite: Rewrite) -> Graph:
    """A new graph: the nodes of ``graph`` in order, each copied or replaced by ``rewrite``.

    An output replaced by a node of another name is kept under its own name as an ``identity``
    of that node, so the outputs keep their names and order.
    """
    new, env = Graph(), {}
    for node in graph.nodes:
        inputs = tuple(env[x.name] for x in node.inputs)
        replacement = rewrite(new, node, inputs)
        env[node.name] = copy_node(new, node, inputs) if replacement is None else replacement
    new.outputs = [_named(new, env[out.name], out) for out in graph.outputs]
    return new


def copy_node(graph: Graph, node: Node, inputs: tuple[Node, ...], **attrs: Any) -> Node:
    """``node`` added to ``graph`` on new ``inputs``, same name and source (attrs may change)."""
    return graph.add_node(node.op, inputs, {**node.attrs, **attrs}, name=node.name,
                          source=node.source)


def _named(graph: Graph, value: Node, old: Node) -> Node:
    if value.name == old.name:
        return value
    return graph.add_node("identity", (value,), name=old.name, source=old.source)


def users(graph: Graph) -> dict[str, list[Node]]:
    """Node name -> the nodes that take it as an input (once each, in graph order)."""
    out: dict[str, list[Node]] = {n.name: [] for n in graph.nodes}
    for n in graph.nodes:
        for x in dict.fromkeys(n.inputs):
            out[x.name].append(n)
    return out


def constant_value(node: Node) -> np.ndarray | None:
    """The array of a ``constant`` node; ``None`` for any other node."""
    return node.attrs["value"] if node.op == "constant" else None


def is_constant(node: Node, value: float) -> bool:
    """True when ``node`` is a constant whose every element equals ``value``."""
    array = constant_value(node)
    return array is not None and array.size > 0 and bool(np.all(array == value))


def structure(graph: Graph) -> tuple:
    """A summary that changes whenever a pass changes the graph (to detect a fixed point)."""
    return tuple((n.name, n.op, tuple(x.name for x in n.inputs)) for n in graph.nodes) + tuple(
        n.name for n in graph.outputs)
