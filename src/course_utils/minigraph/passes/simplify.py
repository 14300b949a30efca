"""Algebraic simplification: rewrite ``x*1``, ``x+0``, ``--x``, ``x-x``... by a table of rules."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import shapes as S
from ..graph import Graph, Node, _frozen
from .rewrite import is_constant, rebuild

#: ``rule(new_graph, node, *inputs)`` -> the node's replacement, or ``None`` if it does not apply.
Rule = Callable[..., "Node | None"]


def _same(node: Node, x: Node) -> Node | None:
    """``x``, if it has exactly ``node``'s static type.

    Used where the other operand is a constant: a constant's shape is fully known, so when
    broadcasting it leaves ``x``'s static shape as it was, it leaves the run-time shape too.
    """
    return x if (x.shape, x.dtype) == (node.shape, node.dtype) else None


def _same_known(node: Node, x: Node) -> Node | None:
    """``x``, if it has ``node``'s type and that type is fully known (no ``None`` sizes)."""
    return _same(node, x) if None not in node.shape else None


def _zeros(new: Graph, node: Node) -> Node | None:
    """A constant of zeros in ``node``'s place, when its shape is fully known."""
    if None in node.shape:
        return None
    value = _frozen(np.zeros(node.shape, node.dtype))
    return new.add_node("constant", (), {"value": value}, name=node.name, source=node.source)


def _transposes_cancel(node: Node, x: Node) -> bool:
    if x.op != "transpose":
        return False
    inner = S.transpose_axes(len(x.inputs[0].shape), x.attrs.get("axes"))
    outer = S.transpose_axes(len(node.shape), node.attrs.get("axes"))
    return all(inner[a] == i for i, a in enumerate(outer))


# (op, rule): the rules for an op are tried in order; the first that applies wins.
# x*0 and x-x assume finite x (inf*0 is nan), as -ffast-math and TensorFlow's Grappler do.
# fmt: off
RULES: list[tuple[str, Rule]] = [
    ("add",      lambda new, n, x, y: _same(n, x) if is_constant(y, 0) else None),  # x+0 -> x
    ("add",      lambda new, n, x, y: _same(n, y) if is_constant(x, 0) else None),  # 0+x -> x
    ("sub",      lambda new, n, x, y: _same(n, x) if is_constant(y, 0) else None),  # x-0 -> x
    ("sub",      lambda new, n, x, y: _zeros(new, n) if x is y else None),           # x-x -> 0
    ("mul",      lambda new, n, x, y: _same(n, x) if is_constant(y, 1) else None),  # x*1 -> x
    ("mul",      lambda new, n, x, y: _same(n, y) if is_constant(x, 1) else None),  # 1*x -> x
    ("mul",      lambda new, n, x, y:                                                # x*0 -> 0
                 _zeros(new, n) if is_constant(x, 0) or is_constant(y, 0) else None),
    ("div",      lambda new, n, x, y: _same(n, x) if is_constant(y, 1) else None),  # x/1 -> x
    ("pow",      lambda new, n, x, y: _same(n, x) if is_constant(y, 1) else None),  # x**1 -> x
    ("neg",      lambda new, n, x: _same(n, x.inputs[0]) if x.op == "neg" else None),  # --x -> x
    ("where",    lambda new, n, c, x, y: _same(n, x) if x is y else None),     # where(c, x, x) -> x
    ("identity", lambda new, n, x: x),                                         # identity(x) -> x
    ("cast",     lambda new, n, x: _same(n, x)),                       # cast to x's dtype -> x
    ("reshape",  lambda new, n, x: _same_known(n, x)),                 # reshape to x's shape -> x
    ("broadcast_to",   lambda new, n, x: _same_known(n, x)),           # to x's own shape -> x
    ("broadcast_like", lambda new, n, x, like: _same_known(n, x)),     # to x's own shape -> x
    ("unbroadcast",    lambda new, n, g, like: _same_known(n, g)),     # to g's own shape -> g
    ("transpose", lambda new, n, x:                                    # x.T.T -> x
                  x.inputs[0] if _transposes_cancel(n, x) else None),
]
# fmt: on


def simplify(graph: Graph) -> Graph:
    """Apply the first matching rule of ``RULES`` to every node (one sweep, in graph order).

    A rule fires only where static shapes and dtypes prove it changes nothing: ``x * 1`` stays
    when the 1 broadcasts ``x`` to a larger shape or turns ints into floats. Gradient graphs are
    full of these: seeds of ones, broadcasts to the shape a value already has.

    >>> import course_utils.minigraph as mg
    >>> with mg.Graph().as_default() as g:
    ...     x = mg.placeholder((None, 3), name="x")
    ...     a = mg.mul(x, 1.0, name="a")
    ...     b = mg.add(a, 0.0, name="b")
    ...     g.outputs = [mg.neg(mg.neg(b, name="c"), name="y")]
    >>> print(g)
    %x = placeholder()  # (None, 3) float32
    %const = constant(value=1.0)  # () float32
    %a = mul(%x, %const)  # (None, 3) float32
    %const_1 = constant(value=0.0)  # () float32
    %b = add(%a, %const_1)  # (None, 3) float32
    %c = neg(%b)  # (None, 3) float32
    %y = neg(%c)  # (None, 3) float32
    return %y
    >>> print(simplify(g))  # the output keeps its name, as an identity
    %x = placeholder()  # (None, 3) float32
    %const = constant(value=1.0)  # () float32
    %const_1 = constant(value=0.0)  # () float32
    %c = neg(%x)  # (None, 3) float32
    %y = identity(%x)  # (None, 3) float32
    return %y

    NB: tinygrad keeps its rewrite rules in the same kind of table (``PatternMatcher``).
    """
    outputs = {n.name for n in graph.outputs}

    def rewrite(new: Graph, node: Node, inputs: tuple[Node, ...]) -> Node | None:
        if node.op == "identity" and node.name in outputs:
            return None  # it is already the cheapest way to keep the output's name
        for op, rule in RULES:
            if op == node.op:
                replacement = rule(new, node, *inputs)
                if replacement is not None:
                    return replacement
        return None

    return rebuild(graph, rewrite)
