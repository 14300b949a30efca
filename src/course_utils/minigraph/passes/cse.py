"""Common-subexpression elimination: compute each distinct value once."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Graph, Node
from ..ops import OPS
from .rewrite import copy_node, rebuild

#: Ops whose result does not depend on the order of their two inputs, bit for bit.
COMMUTATIVE = {"add", "mul", "equal", "not_equal"}


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    """Merge nodes that apply the same op, with the same attrs, to the same inputs.

    The first one stays; later ones become it. Constants with equal values merge too. Stateful
    nodes and placeholders never merge: two Variables with equal values are still two Variables.

    >>> import course_utils.minigraph as mg
    >>> with mg.Graph().as_default() as g:
    ...     x = mg.placeholder((3,), name="x")
    ...     g.outputs = [mg.add(mg.exp(x, name="a"), mg.exp(x, name="b"), name="z")]
    >>> print(g)
    %x = placeholder()  # (3,) float32
    %a = exp(%x)  # (3,) float32
    %b = exp(%x)  # (3,) float32
    %z = add(%a, %b)  # (3,) float32
    return %z
    >>> print(eliminate_common_subexpressions(g))
    %x = placeholder()  # (3,) float32
    %a = exp(%x)  # (3,) float32
    %z = add(%a, %a)  # (3,) float32
    return %z

    NB: torch.fx's CSE pass and TensorFlow Grappler's ``dependency_optimizer`` key nodes the
    same way: (op, inputs, attrs).
    """
    seen: dict[tuple, Node] = {}

    def rewrite(new: Graph, node: Node, inputs: tuple[Node, ...]) -> Node | None:
        if OPS[node.op].stateful or node.op == "placeholder":
            return None
        names = tuple(x.name for x in inputs)
        key = (node.op, tuple(sorted(names)) if node.op in COMMUTATIVE else names,
               freeze(node.attrs))
        if key not in seen:
            seen[key] = copy_node(new, node, inputs)
        return seen[key]

    return rebuild(graph, rewrite)


def freeze(value: Any) -> Any:
    """A hashable stand-in for an attr value: equal stand-ins mean equal values.

    Arrays compare by dtype, shape and bytes (so ``-0.0`` and ``0.0`` stay apart, as they must).
    """
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, dict):
        return tuple((k, freeze(v)) for k, v in sorted(value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *map(freeze, value))
    if isinstance(value, slice):
        return ("slice", value.start, value.stop, value.step)
    if hasattr(value, "freeze"):  # a fused node's Program
        return value.freeze()
    return value
