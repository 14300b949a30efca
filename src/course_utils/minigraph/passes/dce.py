"""Dead-code elimination: drop the nodes that no result needs."""

from __future__ import annotations

from ..graph import Graph, Node
from ..ops import OPS
from .rewrite import copy_node


def eliminate_dead_code(graph: Graph) -> Graph:
    """Keep the outputs, every stateful node and every placeholder, and what they need.

    State ops (variables, assigns, groups) are side effects: a pass never drops them. A graph
    without outputs (TF1 style, where anything may be fetched later) treats every node that
    nothing uses as a result, so only an output list lets this pass remove anything.

    >>> import course_utils.minigraph as mg
    >>> with mg.Graph().as_default() as g:
    ...     x = mg.placeholder((3,), name="x")
    ...     unused = mg.exp(x, name="unused")
    ...     g.outputs = [mg.neg(x, name="y")]
    >>> print(eliminate_dead_code(g))
    %x = placeholder()  # (3,) float32
    %y = neg(%x)  # (3,) float32
    return %y

    NB: ``torch.fx.Graph.eliminate_dead_code`` has the same rule, with ``is_impure()`` nodes
    playing the part of stateful ones.
    """
    ### BEGIN SOLUTION 03.2
    roots = list(graph.outputs) or _sinks(graph)
    roots += [n for n in graph.nodes if OPS[n.op].stateful or n.op == "placeholder"]
    live, stack = set(), roots
    while stack:
        n = stack.pop()
        if n.name not in live:
            live.add(n.name)
            stack.extend(n.inputs)
    new, env = Graph(), {}
    for n in graph.nodes:
        if n.name in live:
            env[n.name] = copy_node(new, n, tuple(env[x.name] for x in n.inputs))
    new.outputs = [env[n.name] for n in graph.outputs]
    return new
    ### END SOLUTION


def _sinks(graph: Graph) -> list[Node]:
    used = {x.name for n in graph.nodes for x in n.inputs}
    return [n for n in graph.nodes if n.name not in used]
