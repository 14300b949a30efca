"""Step through one forward and one backward pass, a frame per step: ``viz.step_through``.

::

    st = viz.step_through(loss)                      # an eager tensor: its tape
    st = viz.step_through(g, feed_dict={"x": x0})    # a minigraph Graph: one Session run
    st                                               # a slider in JupyterLab
    st.frames[3].svg                                 # any frame on its own

Forward: one frame per node, in the order it runs, each showing the values computed so far
with the running node highlighted. Backward: one frame for the seed (d out/d out = 1), then
one per node whose vjp runs, in reverse topological order, showing the gradients known so far:
a value used twice receives two contributions, and the frames show its running sum grow. The
backward pass is computed again for the picture (no ``.grad`` changes); for a ``Graph`` its
vjps build backward nodes on a copy, which one run of that copy evaluates.

One object shows everywhere: in JupyterLab an ipywidgets slider with a play button; where
widgets do not render (nbval, exported HTML, GitHub) the same frames as a filmstrip (one
contact-sheet image); and a short text listing of the steps. All three are deterministic.
Every frame shares one layout, so the built-in renderer draws the bare graph once and each
frame as an overlay of what it adds: a saved notebook holds the graph once, not once a frame.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from .adapters import as_mg_graph, is_mg_tensor, to_drawgraph
from .dot import clean_graphviz_svg, node_sizes, run_dot, to_dot
from .layout import EDGE_SIZE, MARGIN, prepare, text_width
from .model import GRAD_COLOR, HIGHLIGHT, VALUE_COLOR, DrawGraph
from .values import GraphRun, backward_steps, eager_backward, eager_order, format_value

SHEET_WIDTH, SHEET_GAP = 1000.0, 8.0  # points: how wide a contact sheet may grow, the gutter
MAX_NODES = 30  # two frames per node or so: past this a step-through is too long to watch
TEXT_WIDTH = 110  # characters per line of the text listing


@dataclass
class Frame:
    """One step: ``active`` (a node id of ``StepThrough.graph``) is highlighted; ``values`` and
    ``grads`` (node id -> the text drawn) are what is known after this step."""

    index: int
    kind: str  # "forward" or "backward"
    active: str
    caption: str
    values: dict[str, str] = field(default_factory=dict)
    grads: dict[str, str] = field(default_factory=dict)
    svg: str = ""
    overlay: str = ""  # built-in renderer: what this frame adds to StepThrough.base

    def _repr_svg_(self) -> str:
        return self.svg


class StepThrough:
    """The frames of one forward and one backward pass, shown as a slider or a filmstrip.

    Attributes:
        frames: the `Frame` list, forward steps first.
        graph: the `DrawGraph` every frame draws (final values and gradients on it).
        renderer: ``"builtin"`` or ``"graphviz"``.
    """

    def __init__(self, frames: list[Frame], graph: DrawGraph, renderer: str, title: str,
                 widget: bool | None, base: str = "") -> None:
        self.frames, self.graph, self.renderer, self.title = frames, graph, renderer, title
        self.base = base  # the bare graph every frame's overlay is drawn on (built-in renderer)
        self._use_widget = widget
        self._widget: Any = None

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, i: int) -> Frame:
        return self.frames[i]

    @property
    def n_forward(self) -> int:
        return sum(f.kind == "forward" for f in self.frames)

    @property
    def n_backward(self) -> int:
        return len(self.frames) - self.n_forward

    def summary(self) -> str:
        """One line: how many frames of what."""
        back = f", then {self.n_backward} backward steps" if self.n_backward else ""
        return (f"step_through: {len(self.frames)} frames of {self.title}: "
                f"{self.n_forward} forward steps{back}")

    def __repr__(self) -> str:
        return self.text()

    def text(self) -> str:
        """The summary, the notes and one line per frame (what a text-only viewer and nbval
        see)."""
        lines = [self.summary(), *self.graph.notes]
        for f in self.frames:
            line = f"{f.index + 1:>4}  {f.caption}"
            lines.append(line if len(line) <= TEXT_WIDTH else line[: TEXT_WIDTH - 1] + "…")
        return "\n".join(lines)

    def html(self) -> str:
        """Every frame, in reading order: the view where widgets don't run.

        With the built-in renderer, one contact sheet (`sheet`); with Graphviz, one image per
        frame, wrapping. Images (``data:`` URIs), not inline SVG, so that JupyterLab shows them
        in a notebook that is not trusted; only CSS that its sanitizer keeps.
        """
        if self.base:
            frames = _img(self.sheet(), self.summary())
        else:
            frames = "".join(
                '<div style="display: inline-block; vertical-align: top; margin: 0 6px 6px 0; '
                f'padding: 4px; border: 1px solid #cfd8dc; border-radius: 4px">'
                f"{_img(f.svg, f.caption)}</div>" for f in self.frames)
        head = (f'<div style="font-size: 13px; margin: 2px 0 6px 0">{escape(self.summary())}. '
                "Run the cell in JupyterLab to step through them with a slider.</div>")
        return f'<div class="course-viz-steps">{head}{self._notes_html()}{frames}</div>'

    def sheet(self) -> str:
        """All frames in one SVG, left to right and then down: the bare graph is defined once
        and each frame draws its overlay on a copy of it (``<use>``), so the sheet costs about
        one picture plus the numbers. Built-in renderer only."""
        if not self.base:
            raise ValueError("a contact sheet needs the built-in renderer's frames")
        w, h = (float(v) for v in _SIZE.search(self.base).groups())
        cell_w, cell_h = w + SHEET_GAP, h + SHEET_GAP
        cols = max(1, min(len(self.frames), int(SHEET_WIDTH // cell_w)))
        rows = -(-len(self.frames) // cols)
        width, height = cols * cell_w + SHEET_GAP, rows * cell_h + SHEET_GAP
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.1f}pt" '
               f'height="{height:.1f}pt" viewBox="0 0 {width:.1f} {height:.1f}" '
               f'font-family="Helvetica,Arial,sans-serif">',
               "<!-- drawn by course_utils.viz with its built-in layered layout -->",
               f'<rect x="0" y="0" width="{width:.1f}" height="{height:.1f}" fill="white"/>',
               f'<defs><g id="bare-graph">{_inside(self.base)}</g></defs>']
        for k, f in enumerate(self.frames):
            x, y = SHEET_GAP + (k % cols) * cell_w, SHEET_GAP + (k // cols) * cell_h
            overlay = _inside(f.overlay)
            out.append(f'<g transform="translate({x:.1f},{y:.1f})"><rect x="0" y="0" '
                       f'width="{w:.1f}" height="{h:.1f}" fill="none" stroke="#cfd8dc"/>'
                       f'<use href="#bare-graph"/>{overlay}</g>')
        return "\n".join(out) + "\n</svg>\n"

    def _notes_html(self) -> str:
        """The drawing's notes (what the numbers are), in the colours the frames use."""
        lines = [escape(n) for n in self.graph.notes]
        lines.append(f'<span style="color: {VALUE_COLOR}">= value</span>, '
                     f'<span style="color: {GRAD_COLOR}">grad</span>, '
                     f'<span style="color: {HIGHLIGHT.stroke}">red</span>: the node of this step '
                     f"(renderer: {self.renderer})")
        return ('<div style="font-size: 12px; color: #616161; margin: 0 0 6px 0">'
                + "<br/>".join(lines) + "</div>")

    def widget(self) -> Any:
        """An ipywidgets view: a play button and a slider that pick the frame shown.

        The frames live in the browser (a ``Stack`` linked to the slider in JavaScript), so it
        keeps working from saved widget state, without a kernel. With the built-in renderer
        each page holds only what its frame adds (values, gradients, the red node), laid over
        one picture of the bare graph: the saved state stays small.
        """
        if self._widget is None:
            import ipywidgets as w

            last = len(self.frames) - 1
            if self.base:
                pages = [w.HTML(_img(f.overlay, f.caption)) for f in self.frames]
                stack = w.Stack(pages, selected_index=0, layout=w.Layout(grid_area="frame"))
                bare = w.HTML(_img(self.base, "the graph"), layout=w.Layout(grid_area="frame"))
                view: Any = w.GridBox([bare, stack], layout=w.Layout(
                    grid_template_areas='"frame"', justify_items="flex-start",
                    align_items="flex-start"))
            else:
                stack = view = w.Stack([w.HTML(_img(f.svg, f.caption)) for f in self.frames],
                                       selected_index=0)
            slider = w.IntSlider(value=0, min=0, max=last, description="step",
                                 layout=w.Layout(width="420px"))
            play = w.Play(value=0, min=0, max=last, interval=900, description="play")
            w.jslink((play, "value"), (slider, "value"))
            w.jslink((slider, "value"), (stack, "selected_index"))
            head = w.HTML(f'<div style="font-size: 13px">{escape(self.summary())}</div>'
                          + self._notes_html())
            self._widget = w.VBox([head, w.HBox([play, slider]), view])
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle: dict[str, Any] = {"text/plain": self.text(), "text/html": self.html()}
        if self._use_widget is not False and _in_kernel():
            try:
                view = self.widget()._repr_mimebundle_()
            except ImportError:  # no ipywidgets: the filmstrip is the view
                return bundle
            key = "application/vnd.jupyter.widget-view+json"
            if view and key in view:
                bundle[key] = view[key]
        return bundle

    def save(self, path: str | os.PathLike) -> Path:
        """Write the filmstrip as a standalone ``.html`` page; returns the path."""
        path = Path(path)
        if path.suffix.lower() not in (".html", ".htm"):
            raise ValueError(f"cannot save {path}: a step-through saves as .html (each frame's "
                             f".svg is in frames[i].svg)")
        page = (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>"
                f"{escape(self.title)}</title></head><body style='font-family: sans-serif'>\n"
                f"{self.html()}\n</body></html>\n")
        path.write_text(page, encoding="utf-8")
        return path


def _img(svg: str, alt: str) -> str:
    """An ``<img>`` whose source is the SVG itself (a ``data:`` URI)."""
    return f'<img src="{data_uri(compact_svg(svg))}" alt="{escape(alt)}"/>'


# What a frame shown as an image never uses (tooltips, comments), and the attributes every node
# and edge repeats, said once in a style sheet: a filmstrip holds every frame, so it adds up.
_UNSEEN = re.compile(r"<title>[^<]*</title>|<!--.*?-->\n?", re.S)
_REPEATED = [  # (attributes as the built-in renderer writes them, class, CSS)
    (r'fill="none" stroke="#546e7a" stroke-width="1\.1" marker-end="url\(#([\w-]+)\)"', "e",
     "fill:none;stroke:#546e7a;stroke-width:1.1px;marker-end:url(#\\1)"),
    (r'font-size="9" fill="#546e7a" text-anchor="start" stroke="white" stroke-width="3" '
     r'paint-order="stroke"', "l",
     "font-size:9px;fill:#546e7a;text-anchor:start;stroke:white;stroke-width:3px;"
     "paint-order:stroke"),
    (r'font-size="12" font-weight="bold" text-anchor="middle"', "b",
     "font-size:12px;font-weight:bold;text-anchor:middle"),
    (r'font-size="10" fill="#424242" text-anchor="middle"', "d",
     "font-size:10px;fill:#424242;text-anchor:middle"),
    (r'font-size="10" fill="#212121" text-anchor="middle" class="value"', "v",
     "font-size:10px;fill:#212121;text-anchor:middle"),
    (r'font-size="10" fill="#6a1b9a" text-anchor="middle" class="grad"', "g",
     "font-size:10px;fill:#6a1b9a;text-anchor:middle"),
]


def compact_svg(svg: str) -> str:
    """The same picture in fewer bytes: no tooltips, repeated attributes as CSS classes.

    Only for the built-in renderer's frames; anything else is returned unchanged.
    """
    if "built-in layered layout" not in svg[:400]:
        return svg
    rules = []
    for pattern, name, css in _REPEATED:
        found = re.search(pattern, svg)
        if found is None:
            continue
        rules.append("." + name + "{" + re.sub(r"\\1", found.group(found.lastindex or 0),
                                              css) + "}")
        svg = re.sub(pattern, f'class="{name}"', svg)
    svg = _UNSEEN.sub("", svg)
    head = svg.index(">") + 1
    return svg[:head] + "<style>" + "".join(rules) + "</style>" + svg[head:]


_SIZE = re.compile(r'<svg[^>]*?\swidth="([0-9.]+)pt" height="([0-9.]+)pt"')


def _inside(svg: str) -> str:
    """What is between ``<svg ...>`` and ``</svg>``."""
    return svg[svg.index(">", svg.index("<svg")) + 1: svg.rindex("</svg>")]


def data_uri(svg: str) -> str:
    """A ``data:`` URI of ``svg``: percent-encoded where it can be (a tenth longer), base64
    where single quotes would clash (a third longer)."""
    if "'" in svg:
        return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode("ascii")
    return "data:image/svg+xml," + quote(svg.replace('"', "'"), safe=" /=:;,.'()-_!*+@$?~")


def _in_kernel() -> bool:
    """True inside a Jupyter kernel (where a widget can have a frontend)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


# ---------------------------------------------------------------------------------------------
# What happens, step by step


@dataclass
class _Plan:
    graph: DrawGraph
    forward: list[tuple[str, str, str]]  # (node id, value text, what runs)
    backward: list[tuple[str, dict[str, str], str]]  # (node id, grad texts, what it does)
    notes: list[str]


def step_through(
    obj: Any,
    feed_dict: Mapping[Any, Any] | None = None,
    backward: bool = True,
    *,
    grads_of: Any = None,
    session: Any = None,
    params: Mapping[str, Any] | None = None,
    rankdir: str = "TB",
    show_shapes: bool = True,
    renderer: str | None = None,
    title: str | None = None,
    widget: bool | None = None,
    values: Mapping[Any, Any] | None = None,
    vjp: Mapping[str, Any] | None = None,
    grads: Mapping[Any, Any] | bool | None = None,
) -> StepThrough:
    """One frame per step of a forward pass, then of a backward pass, the active node in red.

    Args:
        obj: a minigraph eager tensor (after the code that made it ran: its tape), or a
            minigraph ``Graph`` / traced function (run once on a copy with ``feed_dict``).
        feed_dict: for a ``Graph``: placeholder (node or name) -> value.
        backward: add the backward pass: the seed, then one frame per vjp.
        grads_of: for a ``Graph``: the scalar node to differentiate (default: its only scalar
            result, or the one an ``mg.gradients`` call in it seeded).
        session: for a ``Graph``: the ``mg.Session`` whose variable values to use.
        params: for an eager tensor: names for its leaves, e.g. ``{"w": w, "b": b}``.
        rankdir, show_shapes, title: as for `draw`.
        renderer: ``"builtin"`` (the default here, whatever is installed: its frames line up
            exactly and are the same bytes on every machine) or ``"graphviz"``.
        widget: False to show the filmstrip even in JupyterLab.
        values, vjp, grads: for a graph of your own (below).

    **Your own graph.** ``obj`` may also be a node of a graph you wrote, or a list of them:
    any objects with ``op`` (a name) and ``inputs`` (a list of the same kind of objects), and
    optionally ``name`` and ``attrs`` (keyword arguments of the op). Each node's value is
    ``values[node]`` when ``values=`` is given (the dict lesson 01's ``evaluate`` returns),
    else its ``value`` attribute. Forward: one frame per node, in a topological order (every
    input before its user), each showing its value. Backward, from one output whose value is
    one number, either

    - ``vjp=``: a table ``op -> rule``, called as ``rule(g, out, *input_values, **attrs)`` and
      returning one gradient per input (None: no gradient), as lesson 01's ``VJP``: the walk
      of lesson 01's ``backprop``, one frame for the seed and one per node whose rule runs,
      showing each input's running sum as contributions arrive; or
    - ``grads=``: the final gradients only, a mapping node -> gradient (what ``backprop``
      returns), else each node's ``grad`` attribute when ``grads=True``: one frame per node,
      from the output back, at the moment its gradient is complete.

    Without either, only the forward pass.

    Returns a `StepThrough`: a notebook shows it as a slider, or as a filmstrip.
    """
    if rankdir not in ("TB", "LR"):
        raise ValueError(f"rankdir must be 'TB' or 'LR', got {rankdir!r}")
    chosen = renderer or os.environ.get("COURSE_VIZ_RENDERER") or "builtin"
    from . import _choose_renderer  # one place that checks the name and Graphviz

    chosen = _choose_renderer(chosen)
    own = values is not None or vjp is not None or grads is not None
    if own or (not is_mg_tensor(obj) and as_mg_graph(obj) is None and _is_own_graph(obj)):
        if feed_dict is not None or grads_of is not None or session is not None or params:
            raise ValueError("feed_dict=, grads_of=, session= and params= are for minigraph; "
                             "a graph of your own takes values=, vjp= or grads=")
        plan = _own_plan(obj, values, vjp, grads, backward)
    elif is_mg_tensor(obj):
        if feed_dict is not None or grads_of is not None or session is not None:
            raise ValueError("feed_dict=, grads_of= and session= are for a minigraph Graph; "
                             "an eager tensor's tape already holds its values")
        plan = _eager_plan(obj, params, backward)
    else:
        graph = as_mg_graph(obj)
        if graph is None:
            raise TypeError(f"step_through steps through a minigraph eager tensor, a "
                            f"minigraph Graph (or traced function), or nodes of your own with "
                            f"op and inputs attributes, not a {type(obj).__name__}; viz.draw "
                            f"draws the others")
        if params is not None:
            raise ValueError("params= names an eager tensor's leaves; a Graph's nodes have names")
        plan = _graph_plan(obj, graph, feed_dict, session, grads_of, backward)
    if len(plan.forward) > MAX_NODES:
        raise ValueError(f"step_through draws one frame per node, and this graph has "
                         f"{len(plan.forward)}; step through a smaller piece of it (at most "
                         f"{MAX_NODES} nodes), or draw it whole with viz.draw(values=True)")
    if title is not None:
        plan.graph.title = title
    frames = _frames(plan)
    base = _render(frames, plan, chosen, rankdir, show_shapes)
    return StepThrough(frames, plan.graph, chosen, plan.graph.title, widget, base)


def _eager_plan(root: Any, params: Mapping[str, Any] | None, backward: bool) -> _Plan:
    graph = to_drawgraph(root, params=params)
    order = eager_order(root)
    ids = {id(v): f"n{i + 1}" for i, v in enumerate(order)}
    given = {id(p): name for name, p in (params or {}).items()}
    names: dict[int, str] = {}  # unnamed tensors are named as a Graph names nodes: mul, mul_1
    counts: dict[str, int] = {}
    for v in order:
        if id(v) in given:
            names[id(v)] = given[id(v)]
            continue
        base = v.grad_fn.op.name if v.grad_fn else "leaf" if v.requires_grad else "const"
        names[id(v)] = base if base not in counts else f"{base}_{counts[base]}"
        counts[base] = counts.get(base, 0) + 1

    def what(v: Any) -> str:
        if v.grad_fn is None:
            return names[id(v)]
        args = ", ".join(names[id(x)] for x in v.grad_fn.inputs)
        return f"{names[id(v)]} = {v.grad_fn.op.name}({args})"

    forward = [(ids[id(v)], "= " + format_value(v.numpy()), what(v)) for v in order]
    steps = []
    if backward:
        if not root.requires_grad:
            raise ValueError("this tensor has no tape to go back through: nothing it was "
                             "computed from requires grad; pass backward=False, or create the "
                             "inputs with requires_grad=True")
        if root.size != 1:
            raise ValueError(f"backward starts from one number, and this tensor has shape "
                             f"{root.shape}: step through y.sum(), or pass backward=False")
        tensors = {id(v): v for v in order}
        for k, step in enumerate(eager_backward(root, order)):
            grads = {ids[key]: "grad " + format_value(g.numpy()) for key, g in step.totals.items()}
            v = tensors[step.active]
            steps.append((ids[step.active], grads, _backward_text(
                k, names[id(v)], [names[key] for key in step.totals])))
    return _Plan(graph, forward, steps, [])


def _graph_plan(obj: Any, graph: Any, feed_dict: Mapping | None, session: Any,
                grads_of: Any, backward: bool) -> _Plan:
    import course_utils.minigraph as mg

    drawing = to_drawgraph(obj)
    run = GraphRun(graph, feed_dict, session)
    steps: list = []
    extra: dict[tuple[int, str], Any] = {}
    if backward:
        y = run.target(grads_of)

        def record_of(n: Any) -> tuple | None:
            op = mg.OPS[n.op]
            return (op, n.inputs, n.attrs) if op.vjp is not None else None

        def wants(n: Any) -> bool:  # floats, and the tuple of a cond's or loop's results
            return n.dtype is None or n.dtype.kind == "f"

        with run.copy.as_default():
            seed = mg.ones_like(y)
            steps = backward_steps(y, seed, list(run.copy.nodes), record_of, wants,
                                   key=lambda n: n.name)
        for k, step in enumerate(steps):
            for name, g in step.totals.items():
                if isinstance(g, mg.Node) and g.dtype is not None:  # not a cond's tuple
                    extra[(k, name)] = g
        run.notes.append(f"grad = d(%{y.name})/d(node); running sums while the walk adds "
                         f"contributions")
    values, grad_values = run.run(extra)
    forward = [(name, "= " + format_value(values[name]), _describe(node))
               for name, node in run.nodes.items()]
    plan_steps = []
    for k, step in enumerate(steps):
        grads = {name: "grad " + format_value(grad_values[(k, name)])
                 for name in step.totals if (k, name) in grad_values}
        targets = [f"%{name}" for name in step.totals]
        plan_steps.append((step.active, grads, _backward_text(k, f"%{step.active}", targets)))
    return _Plan(drawing, forward, plan_steps, run.notes)


def _is_own_graph(obj: Any) -> bool:
    """A node of a graph of the caller's own (``op`` and ``inputs``), or a list of them."""
    items = obj if isinstance(obj, (list, tuple)) else [obj]
    return bool(items) and all(hasattr(n, "op") and hasattr(n, "inputs") for n in items)


_OWN_KIND = {"placeholder": "input", "input": "input", "const": "const", "constant": "const",
             "variable": "param", "param": "param"}


def _own_order(outputs: list[Any]) -> list[Any]:
    """Every node the outputs depend on, once each, inputs first (no recursion)."""
    order, done, stack = [], set(), [(n, False) for n in reversed(outputs)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in done:
            continue
        if expanded:
            done.add(id(node))
            order.append(node)
            continue
        stack.append((node, True))
        inputs = getattr(node, "inputs", None)
        if inputs is None or not hasattr(node, "op"):
            raise TypeError(f"step_through: {node!r} is an input of the graph but has no op "
                            f"and inputs attributes; every node needs both")
        stack.extend((x, False) for x in reversed(list(inputs)) if id(x) not in done)
    return order


def _own_plan(obj: Any, values: Mapping[Any, Any] | None, vjp: Mapping[str, Any] | None,
              grads: Any, backward: bool) -> _Plan:
    if vjp is not None and grads is not None:
        raise ValueError("give vjp= (the walk, contribution by contribution) or grads= (the "
                         "final gradients), not both")
    outputs = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    order = _own_order(outputs)
    ids: dict[int, str] = {}
    names: dict[int, str] = {}
    counts: dict[str, int] = {}
    for i, n in enumerate(order):
        ids[id(n)] = f"n{i + 1}"
        name = getattr(n, "name", None)
        if not isinstance(name, str) or not name:
            op = str(n.op)
            name = op if op not in counts else f"{op}_{counts[op]}"
            counts[op] = counts.get(op, 0) + 1
        names[id(n)] = name

    def value_of(n: Any) -> Any:
        if values is not None:
            if n not in values:
                raise ValueError(f"step_through: values= has no value for node "
                                 f"{names[id(n)]!r} (op {n.op!r}); pass the dict that "
                                 f"evaluating the outputs returns, which holds every node")
            return values[n]
        if not hasattr(n, "value"):
            raise ValueError(f"step_through: node {names[id(n)]!r} (op {n.op!r}) has no value "
                             f"attribute; pass values={{node: value, ...}}")
        return n.value

    drawing = DrawGraph(title=f"step through {', '.join(names[id(n)] for n in outputs)}")
    for n in order:
        kind = _OWN_KIND.get(str(n.op), "op")
        label = names[id(n)] if kind == "input" else str(n.op)
        drawing.add_node(ids[id(n)], label, kind=kind, name=names[id(n)],
                         details=[] if kind == "input" else [names[id(n)]])
        for x in n.inputs:
            drawing.add_edge(ids[id(x)], ids[id(n)])

    def what(n: Any) -> str:
        if not n.inputs:
            return names[id(n)]
        return f"{names[id(n)]} = {n.op}({', '.join(names[id(x)] for x in n.inputs)})"

    vals = {id(n): value_of(n) for n in order}
    forward = [(ids[id(n)], "= " + format_value(vals[id(n)]), what(n)) for n in order]
    steps: list[tuple[str, dict[str, str], str]] = []
    notes: list[str] = []
    if backward and (vjp is not None or grads is not None):
        if len(outputs) != 1:
            raise ValueError(f"backward starts from one output, and {len(outputs)} were given: "
                             f"step through one, or pass backward=False")
        out = outputs[0]
        if np.size(vals[id(out)]) != 1:
            raise ValueError(f"backward starts from one number, and {names[id(out)]!r} has "
                             f"shape {np.shape(vals[id(out)])}: step through its sum")
        notes.append(f"grad = d({names[id(out)]})/d(node)"
                     + ("; running sums while the walk adds contributions" if vjp is not None
                        else "; each shown once it is complete"))
        if vjp is not None:
            steps = _own_vjp_steps(out, order, vals, vjp, ids, names)
        else:
            steps = _own_final_steps(out, order, grads, ids, names)
    return _Plan(drawing, forward, steps, notes)


def _own_vjp_steps(out: Any, order: list[Any], vals: dict[int, Any], vjp: Mapping[str, Any],
                   ids: dict[int, str], names: dict[int, str]) -> list:
    """Lesson 01's backprop, recording the running sums each rule updates."""
    totals: dict[int, Any] = {id(out): np.ones_like(vals[id(out)])}
    steps = [(ids[id(out)], {ids[id(out)]: "grad " + format_value(totals[id(out)])},
              _backward_text(0, names[id(out)], []))]
    for n in reversed(order):
        if id(n) not in totals or not n.inputs:
            continue
        if n.op not in vjp:
            raise ValueError(f"step_through: the vjp table has no rule for op {n.op!r} (node "
                             f"{names[id(n)]!r}); add one, or pass backward=False")
        attrs = dict(getattr(n, "attrs", None) or {})
        sent = vjp[n.op](totals[id(n)], vals[id(n)], *[vals[id(x)] for x in n.inputs], **attrs)
        sent = list(sent)
        if len(sent) != len(n.inputs):
            raise ValueError(f"step_through: the vjp rule for {n.op!r} returned {len(sent)} "
                             f"gradients for node {names[id(n)]!r}, which has "
                             f"{len(n.inputs)} inputs; return one per input (None for none)")
        texts: dict[str, str] = {}
        for x, gx in zip(n.inputs, sent, strict=True):
            if gx is None:
                continue
            if not isinstance(gx, (np.ndarray, np.generic, float, int)):
                raise TypeError(f"step_through: the vjp rule for {n.op!r} (node "
                                f"{names[id(n)]!r}) returned a {type(gx).__name__}, not a "
                                f"number or array: call it on values, not on nodes")
            totals[id(x)] = totals[id(x)] + gx if id(x) in totals else gx
            texts[ids[id(x)]] = "grad " + format_value(totals[id(x)])
        steps.append((ids[id(n)], texts, _backward_text(
            len(steps), names[id(n)], [names[id(x)] for x, gx in zip(n.inputs, sent,
                                                                     strict=True)
                                       if gx is not None])))
    return steps


def _own_final_steps(out: Any, order: list[Any], grads: Any, ids: dict[int, str],
                     names: dict[int, str]) -> list:
    """One frame per node with a gradient, from the output back: its final gradient."""

    def grad_of(n: Any) -> Any:
        if grads is True:
            return getattr(n, "grad", None)
        return grads.get(n)

    steps = []
    for n in reversed(order):
        g = grad_of(n)
        if g is None:
            continue
        what = (f"seed: grad of {names[id(n)]} = 1" if n is out
                else f"grad of {names[id(n)]} complete")
        steps.append((ids[id(n)], {ids[id(n)]: "grad " + format_value(g)}, what))
    if not steps or steps[0][0] != ids[id(out)]:
        raise ValueError(f"step_through: grads= has no gradient for the output "
                         f"{names[id(out)]!r}; pass what backprop returned for it")
    return steps


def _describe(node: Any) -> str:
    describe = getattr(node, "describe", None)
    return describe() if callable(describe) else f"%{node.name} = {node.op}(...)"


def _backward_text(k: int, active: str, targets: list[str]) -> str:
    if k == 0:
        return f"seed: grad of {active} = 1"
    if not targets:
        return f"vjp of {active}: no input needs a gradient"
    return f"vjp of {active} → grads of {', '.join(targets)}"


# ---------------------------------------------------------------------------------------------
# Frames, and one layout for all of them


def _frames(plan: _Plan) -> list[Frame]:
    frames: list[Frame] = []
    values: dict[str, str] = {}
    n_fwd, n_back = len(plan.forward), len(plan.backward)
    for i, (nid, value, what) in enumerate(plan.forward):
        values[nid] = value
        frames.append(Frame(i, "forward", nid, f"forward {i + 1}/{n_fwd}: {what} → {value[2:]}",
                            dict(values)))
    grads: dict[str, str] = {}
    for j, (nid, sent, what) in enumerate(plan.backward):
        grads.update(sent)
        frames.append(Frame(n_fwd + j, "backward", nid, f"backward {j + 1}/{n_back}: {what}",
                            dict(values), dict(grads)))
    return frames


def _render(frames: list[Frame], plan: _Plan, renderer: str, rankdir: str,
            show_shapes: bool) -> str:
    """Draw every frame with one layout: measured with the widest text each node will show,
    so no box grows and nothing moves from one frame to the next. Returns the bare graph the
    built-in renderer's overlays go on ("" for Graphviz)."""
    g = plan.graph
    g.notes.extend(plan.notes)
    valued = {nid for nid, _, _ in plan.forward}
    for n in g.nodes:  # a constant's "= 2" is its value: said once, on the value line
        if n.id in valued:
            n.details = tuple(d for d in n.details if not d.startswith("= "))
    widest = _widest(frames)
    for n in g.nodes:  # the final picture, and the sizes to lay out
        n.value, n.grad = widest.get((n.id, "value"), ""), widest.get((n.id, "grad"), "")
    captions = [_caption(g, f, len(frames), renderer) for f in frames]
    widest_caption = max(text_width(line, EDGE_SIZE) for c in captions for line in c)
    if renderer == "graphviz":
        sizes = node_sizes(g, to_dot(g, rankdir=rankdir, show_shapes=show_shapes,
                                     caption=captions[-1]))
        caption_width = widest_caption * 1.25 + 12  # room to spare: Graphviz's fonts differ
    else:
        layout = prepare(g, rankdir=rankdir, show_shapes=show_shapes)
        min_width = widest_caption + 2 * MARGIN
    final = {n.id: (n.value, n.grad) for n in g.nodes}
    for frame, caption in zip(frames, captions, strict=True):
        for n in g.nodes:
            value, grad = final[n.id]
            n.value = frame.values.get(n.id, " " if value else "")
            n.grad = frame.grads.get(n.id, " " if grad else "")
            n.highlight = n.id == frame.active
        if renderer == "graphviz":
            source = to_dot(g, rankdir=rankdir, show_shapes=show_shapes, caption=caption,
                            sizes=sizes, legend=False, caption_width=caption_width)
            frame.svg = clean_graphviz_svg(run_dot(source, "svg").decode("utf-8"),
                                           "drawn by course_utils.viz with Graphviz dot")
        else:
            frame.svg = layout.svg(caption, _NOTE, min_width, legend=False)
            frame.overlay = re.sub(r"<defs>.*?</defs>\n?", "", layout.svg(
                caption, _NOTE, min_width, legend=False, overlay=True), flags=re.S)
    base = ""
    if renderer == "builtin":
        for n in g.nodes:
            value, grad = final[n.id]
            n.value, n.grad, n.highlight = " " if value else "", " " if grad else "", False
        base = layout.svg([""], _NOTE, min_width, legend=False)
    for n in g.nodes:  # leave the graph showing the end of the walk
        n.value, n.grad, n.highlight = frames[-1].values.get(n.id, ""), frames[-1].grads.get(
            n.id, ""), False
    return base


_NOTE = "drawn by course_utils.viz with its built-in layered layout"


def _widest(frames: list[Frame]) -> dict[tuple[str, str], str]:
    widest: dict[tuple[str, str], str] = {}
    for f in frames:
        for kind, texts in (("value", f.values), ("grad", f.grads)):
            for nid, text in texts.items():
                old = widest.get((nid, kind), "")
                if text_width(text, 10) > text_width(old, 10):
                    widest[(nid, kind)] = text
    return widest


def _caption(g: DrawGraph, frame: Frame, total: int, renderer: str) -> list[str]:
    """Each frame says what it shows; the notes, said once, head the filmstrip and slider."""
    return [f"step {frame.index + 1}/{total}: {frame.caption}"]
