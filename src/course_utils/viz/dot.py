"""DOT text for a `DrawGraph`, and running Graphviz's ``dot`` on it when it is installed.

>>> from course_utils.viz.model import DrawGraph
>>> g = DrawGraph()
>>> g.add_node("x", "placeholder", kind="input")
>>> print(to_dot(g, caption=["demo"]).splitlines()[0])
digraph G {
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from html import escape

from .model import (
    CLUSTER_FILL,
    CLUSTER_STROKE,
    EDGE_COLOR,
    GRAD_COLOR,
    HIGHLIGHT,
    KINDS,
    STYLES,
    VALUE_COLOR,
    DrawGraph,
    DrawNode,
    Style,
)

FONT = "Helvetica,Arial,sans-serif"
LINE_COLORS = {"detail": "#424242", "value": VALUE_COLOR, "grad": GRAD_COLOR}


def to_dot(
    graph: DrawGraph,
    *,
    rankdir: str = "TB",
    show_shapes: bool = True,
    caption: Sequence[str] = (),
    sizes: Mapping[str, tuple[float, float]] | None = None,
    legend: bool = True,
    caption_width: float = 0.0,
) -> str:
    """The graph in Graphviz's DOT language, with a legend and ``caption`` lines under it.

    ``sizes`` (node id -> width, height in inches) fixes node sizes, and ``caption_width``
    (points) the caption's, so that frames whose labels differ still get one layout (see
    `node_sizes`).
    """
    ids = {n.id: f"n{i}" for i, n in enumerate(graph.nodes)}  # short, safe, deterministic
    lines = [
        "digraph G {",
        f'  graph [rankdir={rankdir}, fontname="{FONT}", fontsize=10, labelloc=b, '
        f"labeljust=l, nodesep=0.25, ranksep=0.4, bgcolor=white, "
        f"label=<{_caption_html(graph, caption, legend, caption_width)}>];",
        f'  node [fontname="{FONT}", fontsize=11, margin="0.12,0.05", height=0.3];',
        f'  edge [fontname="{FONT}", fontsize=9, color="{EDGE_COLOR}", '
        f'fontcolor="{EDGE_COLOR}", arrowsize=0.6];',
    ]
    placed = {m for c in graph.clusters for m in c.members}
    for n in graph.nodes:
        if n.id not in placed:
            lines.append(f"  {ids[n.id]} [{_node_attrs(n, sizes)}];")
    lines += _clusters(graph, ids, sizes)
    for e in graph.edges:
        attrs = []
        if show_shapes and e.label:
            attrs.append(f'label="{_quote(e.label)}"')
        if e.control:
            attrs.append("style=dashed")
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"  {ids[e.src]} -> {ids[e.dst]}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def style_of(node: DrawNode) -> Style:
    """The node's kind style, with the highlight colours when it is highlighted."""
    style = STYLES[node.kind]
    if node.highlight:
        return Style(style.shape, HIGHLIGHT.fill, HIGHLIGHT.stroke, style.legend, style.rounded,
                     style.dashed, style.double)
    return style


def _clusters(graph: DrawGraph, ids: Mapping[str, str],
              sizes: Mapping[str, tuple[float, float]] | None) -> list[str]:
    """``subgraph cluster_k { ... }`` blocks, nested as the clusters are."""
    children: dict[str | None, list[int]] = {}
    for k, c in enumerate(graph.clusters):
        children.setdefault(c.parent, []).append(k)
    by_id = {n.id: n for n in graph.nodes}

    def block(k: int, indent: str) -> list[str]:
        c = graph.clusters[k]
        out = [f"{indent}subgraph cluster_{k} {{",
               f'{indent}  label=<<I>{escape(c.label, quote=False)}</I>>; labeljust=l; '
               f'labelloc=t; fontsize=10; style="rounded,dashed"; color="{CLUSTER_STROKE}"; '
               f'bgcolor="{CLUSTER_FILL}"; fontcolor="{CLUSTER_STROKE}";']
        out += [f"{indent}  {ids[m]} [{_node_attrs(by_id[m], sizes)}];" for m in c.members]
        for child in children.get(c.id, []):
            out += block(child, indent + "  ")
        return out + [f"{indent}}}"]

    return [line for k in children.get(None, []) for line in block(k, "  ")]


def _node_attrs(n: DrawNode, sizes: Mapping[str, tuple[float, float]] | None = None) -> str:
    s = style_of(n)
    style = ",".join(["filled"] + ["rounded"] * s.rounded + ["dashed"] * s.dashed)
    label = f"<B>{escape(n.label, quote=False)}</B>" + "".join(
        f'<BR/><FONT POINT-SIZE="9" COLOR="{LINE_COLORS[kind]}">{escape(d, quote=False)}</FONT>'
        for kind, d in n.text_lines()
    )
    attrs = [
        f"label=<{label}>",
        f"shape={s.shape}",
        f'style="{style}"',
        f'fillcolor="{s.fill}"',
        f'color="{s.stroke}"',
        f'tooltip="{_quote(n.name)}"',
    ]
    if s.double:
        attrs.append("peripheries=2")
    if n.highlight:
        attrs.append("penwidth=2")
    if sizes and n.id in sizes:
        w, h = sizes[n.id]
        attrs.append(f"width={w}, height={h}, fixedsize=true")
    return ", ".join(attrs)


def legend_entries(graph: DrawGraph) -> list[tuple[str, Style]]:
    """(kind, style) for each kind the graph uses, plus the highlight when any node has it."""
    present = {n.kind for n in graph.nodes}
    entries = [(k, STYLES[k]) for k in KINDS if k in present]
    if any(n.highlight for n in graph.nodes):
        entries.append(("highlight", HIGHLIGHT))
    return entries


def _caption_html(graph: DrawGraph, caption: Sequence[str], legend: bool = True,
                  width: float = 0.0) -> str:
    cells = "" if not legend else "".join(
        f'<TD BGCOLOR="{s.fill}" COLOR="{s.stroke}" BORDER="1">'
        f'<FONT POINT-SIZE="9">{escape(s.legend, quote=False)}</FONT></TD>'
        for _, s in legend_entries(graph)
    )
    text = "<BR ALIGN=\"LEFT\"/>".join(escape(line, quote=False) for line in caption)
    legend = (f'<TR><TD ALIGN="LEFT"><TABLE BORDER="0" CELLSPACING="3" CELLPADDING="2"><TR>{cells}'
              "</TR></TABLE></TD></TR>") if cells else ""  # Graphviz rejects an empty row
    size = f' WIDTH="{round(width)}"' if width else ""
    return (
        '<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2">'
        f"{legend}"
        f'<TR><TD ALIGN="LEFT"{size}>'
        f'<FONT POINT-SIZE="9" COLOR="#616161">{text}'
        '<BR ALIGN="LEFT"/></FONT></TD></TR></TABLE>'
    )


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# ---------------------------------------------------------------------------------------------
# Graphviz.


def have_dot() -> bool:
    """True when Graphviz's ``dot`` program is on PATH."""
    return shutil.which("dot") is not None


def run_dot(source: str, fmt: str = "svg", *, timeout: float = 60.0) -> bytes:
    """Run ``dot -T<fmt>`` on DOT ``source``; a missing ``dot`` or a failure raises RuntimeError."""
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError(
            "Graphviz's `dot` is not on PATH. Install Graphviz (apt install graphviz, "
            "brew install graphviz or conda install graphviz), or use renderer='builtin'."
        )
    done = subprocess.run(
        [exe, f"-T{fmt}"], input=source.encode(), capture_output=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"`dot -T{fmt}` failed (exit {done.returncode}): "
                           f"{done.stderr.decode(errors='replace').strip()}")
    return done.stdout


_PLAIN_NODE = re.compile(r"^node (\S+) \S+ \S+ (\S+) (\S+)", re.MULTILINE)


def node_sizes(graph: DrawGraph, source: str) -> dict[str, tuple[float, float]]:
    """Each node's width and height (inches) as ``dot`` lays out ``source`` (made by `to_dot`
    from ``graph``): pass them to `to_dot` to keep the same sizes for other labels."""
    ids = {f"n{i}": n.id for i, n in enumerate(graph.nodes)}
    plain = run_dot(source, "plain").decode("utf-8")
    return {ids[m[1]]: (float(m[2]), float(m[3])) for m in _PLAIN_NODE.finditer(plain)
            if m[1] in ids}


_PROLOGUE = re.compile(r"\A\s*(<\?xml[^>]*\?>\s*)?(<!DOCTYPE[^>]*>\s*)?")
_VERSION = re.compile(r"<!-- Generated by graphviz[^>]*-->\s*")


def clean_graphviz_svg(svg: str, note: str) -> str:
    """Drop what varies between machines (the Graphviz version) and the XML prologue.

    Whatever is left depends only on the DOT text, so the same graph gives the same bytes.
    ``note`` goes in a comment right after the opening ``<svg>`` tag.
    """
    svg = _VERSION.sub("", _PROLOGUE.sub("", svg))
    end = svg.index(">", svg.index("<svg")) + 1
    return svg[:end] + f"\n<!-- {note} -->" + svg[end:]
