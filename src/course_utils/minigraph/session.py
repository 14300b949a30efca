"""``Session``: run parts of a graph, TF1 style, with state (Variables) held per Session.

``sess.run(fetches, feed_dict)`` prunes the graph to what the fetches need (stopping at fed
nodes), optimizes that piece once, and caches the resulting plan per (fetches, feed keys):

>>> import course_utils.minigraph as mg
>>> g = mg.Graph()
>>> with g.as_default():
...     x = mg.placeholder((None,), name="x")
...     w = mg.Variable(2.0, name="w")
...     y = mg.mul(x, w, name="y")
...     step = mg.assign_sub(w, 0.5)
...     init = mg.global_variables_initializer()
>>> with mg.Session(g) as sess:
...     _ = sess.run(init)
...     print(sess.run({"y": y, "w": w}, feed_dict={x: [1.0, 2.0]}))
...     _ = sess.run(step)
...     print(sess.run(w))
{'y': array([2., 4.], dtype=float32), 'w': array(2., dtype=float32)}
1.5
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from . import shapes as S
from .errors import FeedError, GraphError, MinigraphError, MissingFeedError, user_source
from .graph import Graph, Node, get_default_graph
from .interpreter import Interpreter
from .ops import OPS

#: The optimizer seam. ``course_utils.minigraph.passes`` sets this to its ``optimize``: a function
#: Graph -> Graph that keeps results equal and keeps the names and order of ``graph.outputs``, and
#: the names of placeholders and variables. ``None``: no passes installed, plans run as pruned.
OPTIMIZER: Callable[[Graph], Graph] | None = None

#: Ways to run a plan: name -> ``factory(graph)`` returning an object with
#: ``run(feeds, state) -> list of output values``. A code generator registers itself here.
EXECUTORS: dict[str, Callable[[Graph], Any]] = {"interpreter": Interpreter}


def optimize_graph(graph: Graph) -> Graph:
    """The pruned graph after the installed passes (unchanged when none are installed)."""
    return graph if OPTIMIZER is None else OPTIMIZER(graph)


def prune(graph: Graph, outputs: list[Node], fed: Iterable[str] = ()) -> Graph:
    """A new graph with only what ``outputs`` need; a fed node becomes a placeholder (its
    inputs are then not needed). Names, attrs and sources are kept; ``outputs`` are set.

    NB: TensorFlow's ``Session.run`` prunes the same way before Grappler optimizes the rest.
    """
    ### ALSO ANSWERS 03.2: every Session prunes with it, from lesson 01 on, so releases keep it
    fed = set(fed)
    needed, stack = set(), list(outputs)
    while stack:
        n = stack.pop()
        if n.name not in needed:
            needed.add(n.name)
            if n.name not in fed:
                stack.extend(n.inputs)
    pruned, copies = Graph(), {}
    for n in graph.nodes:
        if n.name not in needed:
            continue
        if n.name in fed and n.op != "placeholder":
            attrs: dict[str, Any] = {"shape": n.shape, "dtype": n.dtype.name}
            copies[n.name] = pruned.add_node("placeholder", (), attrs, name=n.name, source=n.source)
        else:
            for x in n.inputs:
                if x.name not in copies:
                    raise _out_of_order(n, x)
            inputs = tuple(copies[x.name] for x in n.inputs)
            copies[n.name] = pruned.add_node(n.op, inputs, n.attrs, name=n.name, source=n.source)
    pruned.outputs = [copies[n.name] for n in outputs]
    return pruned


def _out_of_order(node: Node, x: Node) -> GraphError:
    return GraphError(
        f"%{node.name} = {node.op}(...) defined at {node.source} reads %{x.name}, which does not "
        f"come before it in the graph: the graph has a cycle (a node that depends on itself, e.g. "
        f"through an edited node.inputs) or nodes out of order. graph.validate() names the first "
        f"bad node; build values only from values that already exist")


class _Plan(NamedTuple):
    graph: Graph  # pruned and optimized
    executor: Any


class Session:
    """Runs nodes of one graph; holds the values of its Variables (two Sessions: two values).

    NB: ``tf.compat.v1.Session``. ``optimize`` runs the installed passes on each plan;
    ``executor`` names an entry of ``EXECUTORS``.
    """

    def __init__(self, graph: Graph | None = None, *, optimize: bool = True,
                 executor: str = "interpreter") -> None:
        if executor not in EXECUTORS:
            raise MinigraphError(f"unknown executor {executor!r}; choose one of "
                                 f"{sorted(EXECUTORS)}")
        if graph is not None and not isinstance(graph, Graph):
            raise GraphError(f"mg.Session({graph!r}) at {user_source()}: a Session runs an "
                             f"mg.Graph, got {type(graph).__name__}; pass the graph you built "
                             f"(or nothing, for the default graph)")
        self.graph = graph if graph is not None else get_default_graph()
        self.optimize, self.executor = optimize, executor
        self.state: dict[str, np.ndarray] = {}  # variable name -> current value
        self._plans: dict[tuple, _Plan] = {}
        self._closed = False

    def run(self, fetches: Any, feed_dict: dict | None = None) -> Any:
        """Compute ``fetches`` (a node, its name, or a list/tuple/dict nesting them) and return
        numpy values in the same structure; ops without a value (``group``) give ``None``."""
        if self._closed:
            raise MinigraphError("this Session is closed; create a new one")
        nodes = [self._node(f, "fetch") for f in _leaves(fetches)]
        feeds = self._feeds(feed_dict or {})
        plan = self._plan(nodes, feeds)
        results = plan.executor.run(feeds, self.state)
        values = dict(zip((n.name for n in plan.graph.outputs), results, strict=True))
        return _rebuild(fetches, iter(values[n.name] for n in nodes))

    def plan(self, fetches: Any, feed_dict: dict | None = None) -> Graph:
        """The (pruned, optimized) graph that ``run`` would execute for these fetches and feeds."""
        return self._plan([self._node(f, "fetch") for f in _leaves(fetches)],
                          self._feeds(feed_dict or {})).graph

    @property
    def num_plans(self) -> int:
        """How many distinct (fetches, feed keys) plans are cached."""
        return len(self._plans)

    def close(self) -> None:
        self.state.clear()
        self._plans.clear()
        self._closed = True

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- helpers ----------------------------------------------------------------------------

    def _node(self, key: Any, what: str) -> Node:
        error = FeedError if what == "feed" else GraphError
        if isinstance(key, str):
            try:
                return self.graph.node(key)
            except GraphError:
                raise error(f"cannot {what} {key!r}: this Session's graph has no node of that "
                            f"name") from None
        if not isinstance(key, Node):
            raise error(f"cannot {what} a {type(key).__name__}: {what}{'e' * (what == 'fetch')}s "
                        f"are graph nodes or their names (an eager tensor already has its "
                        f"value: call .numpy())")
        if key not in self.graph:
            raise error(f"cannot {what} %{key.name} (defined at {key.source}): it belongs to "
                        f"another graph than this Session's; create the Session with "
                        f"mg.Session(graph) for the graph you built it in")
        return key

    def _feeds(self, feed_dict: dict) -> dict[str, np.ndarray]:
        if not isinstance(feed_dict, Mapping):
            raise FeedError(f"feed_dict at {user_source()} is a {type(feed_dict).__name__}; it "
                            f"maps placeholders (or their names) to values: {{x: array}}")
        feeds = {}
        for key, value in feed_dict.items():
            node = self._node(key, "feed")
            feeds[node.name] = _check_feed(node, value)
        return feeds

    def _plan(self, nodes: list[Node], feeds: dict[str, np.ndarray]) -> _Plan:
        outputs = list(dict.fromkeys(nodes))  # unique, in order
        key = (tuple(n.name for n in outputs), frozenset(feeds))
        if key not in self._plans:
            pruned = prune(self.graph, outputs, feeds)
            _check_complete(pruned, outputs, feeds)
            graph = optimize_graph(pruned) if self.optimize else pruned
            self._plans[key] = _Plan(graph, EXECUTORS[self.executor](graph))
        return self._plans[key]


def _check_feed(node: Node, value: Any) -> np.ndarray:
    where = f"%{node.name} = {node.op}(...) defined at {node.source}"
    if OPS[node.op].stateful or node.dtype is None:
        raise FeedError(f"cannot feed {where}: it is state (or an update), not a value; feed "
                        f"placeholders, and change a Variable with mg.assign")
    try:
        array = np.asarray(value)
    except ValueError:  # numpy's "inhomogeneous shape"
        raise FeedError(f"cannot feed {where}: the value is ragged ({S._ragged(value)}); every "
                        f"row must have the same length, so pad the short ones") from None
    if array.dtype.kind not in "biuf" or not np.can_cast(array.dtype, node.dtype, "same_kind"):
        raise FeedError(f"cannot feed {array.dtype} data to {where}, which is {node.dtype}; "
                        f"convert it, e.g. np.asarray(value, dtype='{node.dtype}')")
    if not S.compatible(node.shape, array.shape):
        raise FeedError(f"cannot feed an array of shape {array.shape} to {where}, whose shape is "
                        f"{node.shape} (None matches any size); reshape the value or the "
                        f"placeholder")
    return array.astype(node.dtype, copy=False)


def _check_complete(pruned: Graph, outputs: list[Node], feeds: dict) -> None:
    for p in pruned.placeholders():
        if p.name not in feeds:
            shape = S.format_shape(p.shape).replace("None", "N")
            fetches = ", ".join(f"%{n.name}" for n in outputs)
            raise MissingFeedError(
                f"fetching {fetches} needs placeholder %{p.name} ({p.type_str()}, defined at "
                f"{p.source}), but feed_dict has no value for it: add "
                f"{{{p.name}: <{p.dtype} array of shape {shape}>}} to feed_dict"
            )


def _leaves(fetches: Any) -> Iterator[Any]:
    if isinstance(fetches, dict):
        fetches = list(fetches.values())
    if isinstance(fetches, (list, tuple)):
        for f in fetches:
            yield from _leaves(f)
    else:
        yield fetches


def _rebuild(fetches: Any, values: Iterator[Any]) -> Any:
    """The fetched values in the structure of ``fetches`` (as TF1's ``Session.run`` returns)."""
    if isinstance(fetches, dict):
        return {k: _rebuild(v, values) for k, v in fetches.items()}
    if isinstance(fetches, (list, tuple)):
        items = [_rebuild(f, values) for f in fetches]
        if isinstance(fetches, list):
            return items
        return type(fetches)(*items) if hasattr(fetches, "_fields") else tuple(items)
    return next(values)
