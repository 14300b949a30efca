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
constants grey dashed boxes; the output a yellow double ellipse; edges carry tensor shapes.

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

from .adapters import SUPPORTED, to_drawgraph
from .dot import clean_graphviz_svg, have_dot, run_dot, to_dot
from .layout import render_svg
from .model import DrawEdge, DrawGraph, DrawNode, apply_highlight, collapse

__all__ = ["SUPPORTED", "DrawEdge", "DrawGraph", "DrawNode", "Drawing", "draw"]

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
    for e in graph.edges:
        for end in (e.src, e.dst):
            if end not in known:
                raise ValueError(
                    f"edge {e.src!r} -> {e.dst!r} names node {end!r}, which is not in the graph "
                    "(is it from another graph?)"
                )
