"""Graph optimization passes: each a function ``Graph -> Graph`` that keeps results equal.

``optimize`` runs them all, as a Session does before it runs a plan:

>>> import course_utils.minigraph as mg
>>> with mg.Graph().as_default() as g:
...     x = mg.placeholder((None, 3), name="x")
...     y = mg.exp(x * mg.constant(1.0) + mg.exp(mg.constant(0.0)), name="y")
...     (dx,) = mg.gradients(mg.sum(y), [x])
>>> len(g.nodes), len(optimize(g, [y, dx]).nodes)
(13, 3)
>>> print(optimize(g, [y, dx]))  # exp(0) folded to 1, x*1 dropped, the rest fused
%x = placeholder()  # (None, 3) float32
%y = fused(%x, program=lambda a: exp(add(a, 1.0)))  # (None, 3) float32
%mul_2 = fused(%y, program=lambda a: mul(broadcast_like([[1.]], a), a))  # (None, 3) float32
return %y, %mul_2

Every pass keeps the names of the outputs, placeholders and Variables, never drops or merges a
stateful node (Variables, assigns), and never adds nodes. ``optimize`` runs the rewrites (folding,
simplification, CSE, dead code) until nothing changes, then fuses what is left.

NB: TensorFlow's Grappler runs its optimizers (constant folding, arithmetic, dependency,
remapper...) the same way, several rounds until the graph stops changing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...withheld import AnswerWithheld
from .. import session
from ..graph import Graph, Node, expect_graph
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .fold import fold_constants
from .fuse import FUSED, Program, fuse_elementwise
from .rewrite import rebuild, structure, users
from .simplify import RULES, simplify

#: The rewrites, in the order each round runs them.
REWRITES: list[Callable[[Graph], Graph]] = [
    fold_constants, simplify, eliminate_common_subexpressions, eliminate_dead_code]

#: A safety net: real graphs reach their fixed point in two or three rounds.
MAX_ROUNDS = 20


def optimize(graph: Graph, fetches: Sequence[Node | str] | Node | str | None = None) -> Graph:
    """The graph, pruned to ``fetches`` (default: ``graph.outputs``) and optimized.

    The result's outputs are the fetches, with their names; every other node may be gone.
    """
    graph = expect_graph(graph, "mg.optimize")
    if fetches is not None:
        fetches = fetches if isinstance(fetches, (list, tuple)) else [fetches]
        nodes = [graph.node(f if isinstance(f, str) else getattr(f, "name", f))
                 for f in fetches]
        graph = session.prune(graph, list(dict.fromkeys(nodes)))
    for _ in range(MAX_ROUNDS):
        before = structure(graph)
        for rewrite in REWRITES:
            try:
                graph = rewrite(graph)
            except AnswerWithheld:  # a learner's release before lesson 03's solutions: the
                continue  # pass is exercise 03.1's or 03.2's answer; results stay equal without it
        if structure(graph) == before:
            break
    return fuse_elementwise(graph)


session.OPTIMIZER = optimize  # Session(graph) optimizes every plan; optimize=False turns it off

__all__ = ["optimize", "fold_constants", "simplify", "eliminate_common_subexpressions",
           "eliminate_dead_code", "fuse_elementwise", "rebuild", "users", "RULES", "REWRITES",
           "Program", "FUSED"]
