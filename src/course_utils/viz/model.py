"""The neutral drawing model every framework adapter produces, and the collapse of large graphs.

A `DrawGraph` is what is left of a framework's graph once we keep only what a picture needs:
nodes (an op label, a kind that picks the shape and colour, a few detail lines, a scope path)
and edges (a shape label). Both renderers, Graphviz and the built-in layout, draw a `DrawGraph`.

>>> g = DrawGraph(title="x*w")
>>> g.add_node("x", "placeholder", kind="input")
>>> g.add_node("mul", "mul")
>>> g.add_edge("x", "mul", "(2, 3)")
>>> [n.id for n in g.nodes], g.edges[0].label
(['x', 'mul'], '(2, 3)')
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

Kind = Literal["input", "param", "const", "op", "output", "group"]
KINDS: tuple[str, ...] = ("input", "param", "const", "op", "group", "output")


@dataclass(frozen=True)
class Style:
    """How one kind of node looks, in both renderers."""

    shape: str  # "ellipse" or "box"
    fill: str
    stroke: str
    legend: str
    rounded: bool = False
    dashed: bool = False
    double: bool = False  # a second outline: the output, or a stack of nodes (group)


# One table for the whole visual language: what a node is decides how it looks, whatever the
# framework. Colours are light fills with a darker outline of the same hue, readable in print.
STYLES: dict[str, Style] = {
    "input": Style("ellipse", "#dcedc8", "#33691e", "input / placeholder"),
    "param": Style("box", "#ffe0b2", "#e65100", "parameter / variable"),
    "const": Style("box", "#eeeeee", "#616161", "constant", dashed=True),
    "op": Style("box", "#e3f2fd", "#1565c0", "op", rounded=True),
    "group": Style("box", "#ede7f6", "#4527a0", "collapsed group", double=True),
    "output": Style("ellipse", "#fff59d", "#f57f17", "output", double=True),
}
HIGHLIGHT = Style("box", "#ffcdd2", "#c62828", "highlighted")
EDGE_COLOR = "#546e7a"
# The value and gradient lines of ``draw(values=True, grads=True)``: dark text for what a node
# computed, purple for the gradient flowing back into it (red is taken by highlighting).
VALUE_COLOR = "#212121"
GRAD_COLOR = "#6a1b9a"
CLUSTER_FILL, CLUSTER_STROKE = "#fafafa", "#78909c"


@dataclass
class DrawNode:
    """One box in the drawing.

    ``id`` is unique in its graph; ``name`` is the framework's own name (what ``highlight=``
    matches); ``label`` is the op, shown in bold; ``details`` are smaller lines under it;
    ``value`` and ``grad`` (already formatted, see `format_value`) are the last two lines, drawn
    in their own colours, when ``draw(values=True, grads=True)`` asks for them.
    """

    id: str
    label: str
    kind: str = "op"
    name: str = ""
    details: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    highlight: bool = False
    members: int = 1  # how many original nodes this box stands for (> 1 for a group)
    value: str = ""
    grad: str = ""

    def text_lines(self) -> list[tuple[str, str]]:
        """(kind, text) of every line under the label: details, then the value and the grad."""
        lines = [("detail", d) for d in self.details]
        if self.value:
            lines.append(("value", self.value))
        if self.grad:
            lines.append(("grad", self.grad))
        return lines


@dataclass
class DrawCluster:
    """A box drawn around some nodes: the body of a ``cond`` branch or a loop.

    ``members`` are the ids of the nodes directly inside; a cluster nested in another names it
    as ``parent`` (its nodes are then inside both boxes).
    """

    id: str
    label: str
    members: list[str] = field(default_factory=list)
    parent: str | None = None


@dataclass(frozen=True)
class DrawEdge:
    """A tensor flowing from ``src`` to ``dst``; ``control`` edges carry no data (TF's ``^x``)."""

    src: str
    dst: str
    label: str = ""
    control: bool = False


@dataclass
class DrawGraph:
    """Nodes (in topological order where the framework has one) and edges, plus a caption."""

    nodes: list[DrawNode] = field(default_factory=list)
    edges: list[DrawEdge] = field(default_factory=list)
    clusters: list[DrawCluster] = field(default_factory=list)
    title: str = ""
    notes: list[str] = field(default_factory=list)
    scope_sep: str = "/"  # how this framework writes scopes: "a/b" (TF) or "a.b" (torch)

    def add_node(
        self,
        id: str,
        label: str,
        *,
        kind: str = "op",
        name: str | None = None,
        details: Iterable[str] = (),
        scope: Sequence[str] = (),
    ) -> None:
        """Append a node; ``name`` defaults to ``id``. Blank detail lines are dropped."""
        if kind not in STYLES:
            raise ValueError(f"node {id!r}: unknown kind {kind!r}; use one of {KINDS}")
        details = tuple(d for d in details if d)
        node = DrawNode(id, label, kind, id if name is None else name, details, tuple(scope))
        self.nodes.append(node)

    def add_edge(self, src: str, dst: str, label: str = "", *, control: bool = False) -> None:
        self.edges.append(DrawEdge(src, dst, label, control))

    def add_cluster(self, id: str, label: str, members: Iterable[str] = (),
                    parent: str | None = None) -> DrawCluster:
        """Draw a box labelled ``label`` around the nodes ``members`` (ids; more may be added to
        the returned cluster's ``members`` later), inside cluster ``parent`` if given."""
        cluster = DrawCluster(id, label, list(members), parent)
        self.clusters.append(cluster)
        return cluster

    def node(self, id: str) -> DrawNode:
        for n in self.nodes:
            if n.id == id:
                return n
        raise KeyError(f"no node {id!r} in this DrawGraph")


def format_shape(shape: Sequence[object] | None) -> str:
    """``(None, 3)``-style text for a shape; unknown dims print as ``None``, symbols as themselves.

    >>> format_shape((None, 3)), format_shape(()), format_shape([4]), format_shape(None)
    ('(None, 3)', '()', '(4,)', '')
    """
    if shape is None:
        return ""
    dims = [str(d) for d in shape]
    return "(" + dims[0] + ",)" if len(dims) == 1 else "(" + ", ".join(dims) + ")"


def name_detail(name: str, label: str) -> str:
    """The name, unless it only repeats the op label (``mul_2`` under ``Mul`` says nothing new)."""
    base = re.sub(r"_\d+$", "", name)
    return "" if base.lower() == label.lower() or not name else name


# ---------------------------------------------------------------------------------------------
# Highlighting and collapsing: both work on any DrawGraph, so every framework gets them for free.


def apply_highlight(graph: DrawGraph, names: Iterable[str] | None) -> None:
    """Mark nodes whose ``name``, ``id`` or ``label`` is in ``names``; unknown names raise."""
    if names is None:
        return
    if isinstance(names, str):
        names = [names]
    wanted = set(names)
    found: set[str] = set()
    for n in graph.nodes:
        hits = wanted & {n.name, n.id, n.label}
        if hits:
            n.highlight = True
            found |= hits
    missing = sorted(wanted - found)
    if missing:
        sample = ", ".join(repr(n.name) for n in graph.nodes[:8])
        raise ValueError(
            f"highlight names not in the graph: {missing}. Node names here look like: {sample}"
        )


def collapse(graph: DrawGraph, max_nodes: int) -> DrawGraph:
    """Fold a graph with more than ``max_nodes`` nodes into at most ``max_nodes`` boxes.

    Nodes are grouped by scope (``layer1/dense/MatMul`` in TF, ``layer1.conv`` in torch), at the
    deepest scope level that fits the budget, so the picture keeps as much detail as it can.
    When no level fits (a flat graph, or too many top-level nodes), runs of consecutive nodes in
    topological order become one box each. Outputs always stay visible.

    >>> g = DrawGraph()
    >>> for i in range(6):
    ...     g.add_node(f"n{i}", "add", scope=("a" if i < 3 else "b",))
    >>> [(n.label, n.details) for n in collapse(g, 4).nodes]
    [('a (3 nodes)', ('add ×3',)), ('b (3 nodes)', ('add ×3',))]
    """
    if max_nodes < 2:
        raise ValueError(f"max_nodes must be at least 2, got {max_nodes}")
    if len(graph.nodes) <= max_nodes:
        return graph
    depth = max((len(n.scope) for n in graph.nodes), default=0)
    for level in range(depth, 0, -1):
        keys = [_scope_key(n, level) for n in graph.nodes]
        if _count_boxes(keys) <= max_nodes:
            how = f"by scope (level {level})" if depth > 1 else "by scope"
            return _merge(graph, keys, how, max_nodes)
    # No scope level fits: cut the topological order into as many consecutive runs as the
    # budget allows, of nearly equal length (a run of one stays a plain node).
    n_out = sum(n.kind == "output" for n in graph.nodes)
    rest = len(graph.nodes) - n_out
    boxes = max(1, max_nodes - n_out)
    keys, i = [], 0
    for n in graph.nodes:
        if n.kind == "output":
            keys.append(None)
        else:
            keys.append(("#run", str(i * boxes // rest)))
            i += 1
    return _merge(graph, keys, "in topological order", max_nodes)


def _scope_key(node: DrawNode, level: int) -> tuple[str, ...] | None:
    if node.kind == "output" or not node.scope:
        return None
    return node.scope[:level]


def _count_boxes(keys: list[tuple[str, ...] | None]) -> int:
    singles = sum(k is None for k in keys)
    return singles + len({k for k in keys if k is not None})


def _merge(graph: DrawGraph, keys: list, how: str, max_nodes: int) -> DrawGraph:
    """One box per distinct key (None: the node stays itself); edges between boxes merge."""
    sep = graph.scope_sep
    members: dict[tuple, list[DrawNode]] = {}
    for n, k in zip(graph.nodes, keys, strict=True):
        if k is not None:
            members.setdefault(k, []).append(n)
    box_of: dict[str, str] = {}  # original node id -> id of the box that stands for it
    out = DrawGraph(title=graph.title, notes=list(graph.notes), scope_sep=sep)
    done: set[tuple] = set()
    for n, k in zip(graph.nodes, keys, strict=True):
        group = members.get(k) if k is not None else None
        if not group or len(group) == 1:  # a group of one is just that node
            out.nodes.append(replace(n))
            box_of[n.id] = n.id
            continue
        if k in done:
            continue
        done.add(k)
        gid = "group:" + "/".join(k)
        if k[0] == "#run":
            label = f"{len(group)} nodes"
            details = (f"{group[0].name} … {group[-1].name}", _op_mix(group))
        else:
            label = f"{sep.join(k)} ({len(group)} nodes)"
            details = (_op_mix(group),)
        out.nodes.append(DrawNode(
            gid, label, kind="group", name=sep.join(k), details=details, scope=k[:-1],
            highlight=any(m.highlight for m in group), members=len(group),
        ))
        for m in group:
            box_of[m.id] = gid
    seen: dict[tuple[str, str], DrawEdge] = {}
    for e in graph.edges:
        a, b = box_of[e.src], box_of[e.dst]
        if a == b:
            continue  # an edge inside one box disappears with the box
        old = seen.get((a, b))
        if old is None:
            seen[(a, b)] = DrawEdge(a, b, e.label, e.control)
        else:  # parallel edges merge; keep the label only when they all agree
            label = old.label if old.label == e.label else ""
            seen[(a, b)] = DrawEdge(a, b, label, old.control and e.control)
    out.edges = list(seen.values())
    out.clusters = _surviving_clusters(graph.clusters, box_of)
    out.notes.append(
        f"collapsed {len(graph.nodes)} nodes into {len(out.nodes)} boxes {how} "
        f"(max_nodes={max_nodes})"
    )
    return out


def _surviving_clusters(clusters: list[DrawCluster], box_of: dict[str, str]) -> list[DrawCluster]:
    """The clusters whose nodes all stayed themselves (a cluster cut up by grouping is dropped;
    a cluster inside a dropped one moves up to the nearest surviving ancestor)."""
    kept = {c.id for c in clusters if all(box_of[m] == m for m in c.members)}
    parent = {c.id: c.parent for c in clusters}
    out = []
    for c in clusters:
        if c.id in kept:
            up = c.parent
            while up is not None and up not in kept:
                up = parent.get(up)
            out.append(DrawCluster(c.id, c.label, list(c.members), up))
    return out


def _op_mix(group: list[DrawNode]) -> str:
    """What a box holds, most common ops first: ``MatMul ×2, AddV2, Relu``."""
    counts = Counter(n.label for n in group)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{label} ×{c}" if c > 1 else label for label, c in top[:3]]
    return ", ".join(parts) + (", …" if len(top) > 3 else "")
