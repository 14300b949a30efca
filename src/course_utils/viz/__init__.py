"""Draw any framework's computation graph in one visual style.

::

    import course_utils.viz as viz
    d = viz.draw(loss, params=dict(model.named_parameters()))  # a torch autograd graph
    d                      # a notebook shows it as SVG
    d.save("loss.svg")     # or .png with Graphviz; d.source is the DOT text

`draw` accepts a minigraph ``Graph`` or traced function, a ``tf.Graph``, a ``GraphDef``, a
tf.function or its ``ConcreteFunction``, a ``torch.fx.GraphModule``, an ``ExportedProgram``, a
TorchScript module, function or ``torch._C.Graph``, a torch tensor (its autograd graph), and a
minigraph eager tensor (its tape).

Every drawing speaks the same language: ops are blue rounded boxes labelled with the
framework's own op name; inputs are green ellipses; parameters and variables orange boxes;
constants grey dashed boxes; the output a yellow double ellipse; edges carry tensor shapes;
the bodies of control flow (minigraph's ``cond``/``while_loop``, TF's ``If``/``While``) are
dashed boxes around their nodes.

Numbers, micrograd-style::

    viz.draw(loss, values=True, grads=True)                  # after loss.backward()
    viz.draw(graph, values=True, grads=True, feed_dict={x: x0})
    viz.step_through(loss)     # a frame per forward and backward step: a slider in JupyterLab
    viz.graph_of(root, inputs="inputs", value="data", grad="grad")   # your own node objects

Rendering uses Graphviz's ``dot`` when it is on PATH, else a built-in layered layout, so the
course runs without Graphviz. ``renderer="builtin"`` or ``COURSE_VIZ_RENDERER=builtin`` forces
the built-in one; notebooks that nbval compares should use it, since Graphviz's output varies
from one Graphviz version to the next.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .adapters import SUPPORTED, as_mg_graph, is_mg_tensor, is_torch_tensor, to_drawgraph
from .dot import clean_graphviz_svg, have_dot, run_dot, to_dot
from .generic import graph_of
from .layout import render_svg
from .model import DrawCluster, DrawEdge, DrawGraph, DrawNode, apply_highlight, collapse
from .values import annotate_eager, annotate_graph, annotate_torch, format_value

__all__ = ["SUPPORTED", "DrawCluster", "DrawEdge", "DrawGraph", "DrawNode", "Drawing",
           "StepThrough", "draw", "format_value", "graph_of", "step_through"]

RENDERERS = ("graphviz", "builtin")
DEFAULT_MAX_NODES = 60


class Drawing:
    """A rendered graph: shows itself as SVG in Jupyter, and saves to ``.svg``, ``.png``, ``.dot``.

    Attributes:
        svg: the SVG text.
        source: the DOT text (feed it to Graphviz yourself, or read it).
        renderer: ``"graphviz"`` or ``"builtin"``, whichever made ``svg``.
        graph: the `DrawGraph` that was drawn (after any collapsing).
    """

    def __init__(self, svg: str, source: str, renderer: str, graph: DrawGraph):
        self.svg, self.source, self.renderer, self.graph = svg, source, renderer, graph

    def _repr_svg_(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        return (f"<Drawing {self.graph.title!r}: {len(self.graph.nodes)} nodes, "
                f"{len(self.graph.edges)} edges, renderer={self.renderer!r}>")

    def save(self, path: str | os.PathLike) -> Path:
        """Write the drawing; the suffix picks the format (``.svg``, ``.png``, ``.dot``/``.gv``).

        ``.png`` needs Graphviz's ``dot`` on PATH (the built-in renderer only makes SVG).
        Returns the path written.
        """
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".svg":
            path.write_text(self.svg, encoding="utf-8")
        elif suffix in (".dot", ".gv"):
            path.write_text(self.source, encoding="utf-8")
        elif suffix == ".png":
            if not have_dot():
                raise RuntimeError(
                    f"cannot save {path}: PNG output needs Graphviz's `dot` on PATH (apt install "
                    "graphviz / brew install graphviz / conda install graphviz). Save as .svg "
                    "instead; the built-in renderer only writes SVG."
                )
            path.write_bytes(run_dot(self.source, "png"))
        else:
            raise ValueError(f"cannot save {path}: use a .svg, .png, .dot or .gv file name")
        return path


def draw(
    obj: Any,
    *,
    rankdir: str = "TB",
    show_shapes: bool = True,
    highlight: Iterable[str] | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
    renderer: str | None = None,
    title: str | None = None,
    params: Mapping[str, Any] | None = None,
    values: bool = False,
    grads: bool = False,
    feed_dict: Mapping[Any, Any] | None = None,
    grads_of: Any = None,
    session: Any = None,
) -> Drawing:
    """Draw a computation graph from any framework the course uses.

    Args:
        obj: the graph (see the module docstring; `SUPPORTED` lists every accepted type). A
            traced minigraph function or a tf.function draws its most recent trace.
        rankdir: ``"TB"`` (inputs at the top) or ``"LR"`` (inputs on the left).
        show_shapes: label edges with tensor shapes where the framework knows them.
        highlight: node names to draw in red, e.g. what a pass removed or the hot spots;
            a name matches a node's name or its op label (``"MulBackward0"``).
        max_nodes: past this many nodes, fold name scopes / module paths into summary boxes.
        renderer: ``"graphviz"``, ``"builtin"``, or None for ``$COURSE_VIZ_RENDERER``, else
            Graphviz when ``dot`` is installed, else the built-in layout.
        title: the caption under the drawing; defaults to a description of ``obj``.
        params: for a torch or minigraph eager tensor: names for its leaves, e.g.
            ``dict(model.named_parameters())``.
        values: write each node's value under it, micrograd-style (small arrays in full,
            large ones as shape, mean and range). For a minigraph eager tensor every tensor on
            the tape; for a torch tensor the leaves and the result; for a minigraph ``Graph``
            one run with ``feed_dict`` (variables hold their initial values, or ``session``'s).
        grads: write each node's gradient under it: the leaves' ``.grad`` (call
            ``backward()`` first) and d(drawn tensor)/d(node) for the tensors in between; for a
            ``Graph``, d(``grads_of``)/d(node) from ``mg.gradients`` on a copy of the graph.
        feed_dict: for a minigraph ``Graph`` with ``values``/``grads``: placeholder (node or
            name) -> array, as ``Session.run`` takes it.
        grads_of: for a ``Graph`` with ``grads=True``: the scalar node to differentiate
            (default: the graph's only scalar result, or the one ``mg.gradients`` seeded).
        session: for a ``Graph``: the ``mg.Session`` whose variable values to use.

    >>> g = DrawGraph(title="negate")
    >>> g.add_node("x", "placeholder", kind="input"); g.add_node("y", "neg")
    >>> g.add_edge("x", "y", "(3,)")
    >>> d = draw(g, renderer="builtin")
    >>> d
    <Drawing 'negate': 2 nodes, 1 edges, renderer='builtin'>
    >>> d.svg.startswith("<svg")
    True
    """
    if rankdir not in ("TB", "LR"):
        raise ValueError(f"rankdir must be 'TB' or 'LR', got {rankdir!r}")
    chosen = _choose_renderer(renderer)
    graph = to_drawgraph(obj, params=params)
    _annotate(obj, graph, values=values, grads=grads, feed_dict=feed_dict, grads_of=grads_of,
              session=session)
    _check(graph)
    apply_highlight(graph, highlight)
    graph = collapse(graph, max_nodes)
    if title is not None:
        graph.title = title
    note = ("drawn by course_utils.viz with Graphviz dot" if chosen == "graphviz"
            else "drawn by course_utils.viz with its built-in layered layout")
    caption = [line for line in (graph.title, *graph.notes) if line] + [f"renderer: {chosen}"]
    source = to_dot(graph, rankdir=rankdir, show_shapes=show_shapes, caption=caption)
    if chosen == "graphviz":
        svg = clean_graphviz_svg(run_dot(source, "svg").decode("utf-8"), note)
    else:
        svg = render_svg(graph, rankdir=rankdir, show_shapes=show_shapes, caption=caption,
                         note=note)
    return Drawing(svg, source, chosen, graph)


def _annotate(obj: Any, graph: DrawGraph, *, values: bool, grads: bool, feed_dict: Any,
              grads_of: Any, session: Any) -> None:
    """Write values and gradients on ``graph``'s nodes, if asked; say so when they cannot be."""
    graph_only = {"feed_dict": feed_dict, "grads_of": grads_of, "session": session}
    given = [k for k, v in graph_only.items() if v is not None]
    if not (values or grads):
        if given:
            raise ValueError(f"{given[0]}= is for computing values or gradients: pass "
                             "values=True and/or grads=True as well")
        return
    if is_mg_tensor(obj) or is_torch_tensor(obj):
        if given:
            raise ValueError(f"{given[0]}= applies to a minigraph Graph; a tensor already "
                             "holds its values (and its leaves their .grad)")
        annotate = annotate_eager if is_mg_tensor(obj) else annotate_torch
        annotate(graph, obj, values=values, grads=grads)
        return
    mg_graph = as_mg_graph(obj)
    if mg_graph is None:
        raise ValueError(
            "values=/grads= draw numbers for a minigraph Graph or traced function (with "
            f"feed_dict=), a minigraph eager tensor or a torch tensor, not a "
            f"{type(obj).__name__}. To see another framework's numbers, run it and print them."
        )
    annotate_graph(graph, mg_graph, values=values, grads=grads, feed_dict=feed_dict,
                   session=session, grads_of=grads_of)


def _choose_renderer(renderer: str | None) -> str:
    where = "renderer="
    if renderer is None:
        renderer, where = os.environ.get("COURSE_VIZ_RENDERER") or None, "COURSE_VIZ_RENDERER="
    if renderer is None:
        return "graphviz" if have_dot() else "builtin"
    if renderer not in RENDERERS:
        raise ValueError(f"{where}{renderer!r} is not a renderer; use one of {RENDERERS}")
    if renderer == "graphviz" and not have_dot():
        raise RuntimeError(
            f"{where}'graphviz' but Graphviz's `dot` is not on PATH: install Graphviz, or use "
            "renderer='builtin'"
        )
    return renderer


def _check(graph: DrawGraph) -> None:
    """Every edge must join two nodes of the graph: say which one does not."""
    ids = [n.id for n in graph.nodes]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"the graph has several nodes named {dupes}; node names must be unique")
    known = set(ids)
    clusters = {c.id for c in graph.clusters}
    placed: set[str] = set()
    for c in graph.clusters:
        if c.parent is not None and c.parent not in clusters:
            raise ValueError(f"cluster {c.id!r} names parent {c.parent!r}, which is not a cluster")
        for m in c.members:
            if m not in known or m in placed:
                why = "is not in the graph" if m not in known else "is in another cluster too"
                raise ValueError(f"cluster {c.id!r}: node {m!r} {why}")
            placed.add(m)
    for e in graph.edges:
        for end in (e.src, e.dst):
            if end not in known:
                raise ValueError(
                    f"edge {e.src!r} -> {e.dst!r} names node {end!r}, which is not in the graph "
                    "(is it from another graph?)"
                )


from .steps import StepThrough, step_through  # noqa: E402  (it uses draw's helpers)
