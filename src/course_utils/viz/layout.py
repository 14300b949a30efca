"""The built-in renderer: a small layered (Sugiyama-style) layout drawn straight to SVG.

It exists so that the course draws graphs on a machine without Graphviz. Four classic steps:

1. **layering**: each node goes one layer below its deepest input (longest path), then every
   node that feeds others moves down to sit just above its first consumer (so parameters and
   constants appear next to the op that reads them, not all at the top), and sinks go right
   below their deepest input;
2. **dummies**: an edge that spans several layers gets one invisible node per layer it
   crosses, so it can bend around the boxes in between;
3. **ordering**: sweeps down and up the layers sort each layer by the barycentre (the mean
   position) of its neighbours, keeping the order with the fewest edge crossings;
4. **coordinates**: each node moves towards the mean position of its neighbours, while the
   layer keeps its order and its boxes do not overlap.

Edges that point backwards (cycles, e.g. TF1 while loops) are laid out reversed and drawn with
their arrow pointing up. Every number is printed with one decimal and every tie is broken by
position, so the same graph always gives the same bytes.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right, insort
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from xml.sax.saxutils import escape, quoteattr

from .dot import FONT, LINE_COLORS, legend_entries, style_of
from .model import CLUSTER_FILL, CLUSTER_STROKE, EDGE_COLOR, DrawEdge, DrawGraph, DrawNode

LABEL_SIZE, DETAIL_SIZE, EDGE_SIZE = 12, 10, 9
NODE_SEP, DUMMY_SEP, RANK_SEP, MARGIN = 18.0, 8.0, 34.0, 12.0
CLUSTER_TITLE = 16.0  # the band at the top of a cluster box that holds its label
SWEEPS = 6


def render_svg(
    graph: DrawGraph,
    *,
    rankdir: str = "TB",
    show_shapes: bool = True,
    caption: Sequence[str] = (),
    note: str = "",
) -> str:
    """Lay out ``graph`` and return standalone SVG text.

    >>> from course_utils.viz.model import DrawGraph
    >>> g = DrawGraph()
    >>> g.add_node("x", "placeholder", kind="input"); g.add_node("y", "neg"); g.add_edge("x", "y")
    >>> render_svg(g).startswith("<svg")
    True
    """
    return prepare(graph, rankdir=rankdir, show_shapes=show_shapes).svg(caption, note)


def prepare(graph: DrawGraph, *, rankdir: str = "TB", show_shapes: bool = True) -> _Layout:
    """Lay ``graph`` out once; its ``svg(caption, note, min_width)`` draws the nodes as they
    are at that moment. Frames of a step-through change values, gradients and highlights on
    the same `DrawNode` objects and call ``svg`` again: every frame keeps one layout."""
    return _Layout(graph, rankdir == "LR", show_shapes)


def text_width(text: str, size: float, bold: bool = False) -> float:
    """A font-free estimate of how wide ``text`` renders in a Helvetica-like font."""
    narrow, wide = "fijlrtI.,:;|!'()[] ", "mwMW@%"
    em = sum(0.3 if c in narrow else 0.85 if c in wide else 0.56 for c in text)
    return em * size * (1.08 if bold else 1.0)


@dataclass
class _Box:
    breadth: float  # size along a layer (width when drawn top to bottom)
    depth: float  # size across layers
    layer: int = 0
    pos: float = 0.0  # centre along the layer
    dummy: bool = False


class _Layout:
    def __init__(self, graph: DrawGraph, sideways: bool, show_shapes: bool,
                 numbers: dict[str, int] | None = None):
        self.full, self.sideways, self.show_shapes = graph, sideways, show_shapes
        # SVG ids number the nodes of the whole drawing, also inside clusters
        self.numbers = numbers or {n.id: i for i, n in enumerate(graph.nodes)}
        # A cluster is laid out on its own and then placed as one big box (a compound node).
        self.inner: dict[str, _Layout] = {}
        self.g = self._fold_clusters(graph)
        self.index = {n.id: i for i, n in enumerate(self.g.nodes)}
        self.boxes = [self._measure(n) for n in self.g.nodes]
        self.edges = self._layout_edges()
        self._assign_layers()
        self.chains = self._add_dummies()
        self.layers = self._order()
        self._coordinates()

    # -- clusters ------------------------------------------------------------------------------
    def _fold_clusters(self, graph: DrawGraph) -> DrawGraph:
        """The graph with each top-level cluster replaced by one box, whose inside is laid out
        by its own `_Layout` (nested clusters recurse). Edges to or from a cluster's nodes
        attach to its box; edges inside it belong to its own layout."""
        if not graph.clusters:
            return graph
        by_id = {c.id: c for c in graph.clusters}
        top = [c for c in graph.clusters if c.parent not in by_id]
        box_of: dict[str, str] = {}
        for c in top:
            family = self._family(c, graph.clusters)
            members = {m for f in family for m in f.members}
            inner = DrawGraph(
                nodes=[n for n in graph.nodes if n.id in members],
                edges=[e for e in graph.edges if e.src in members and e.dst in members],
                clusters=[replace(f, parent=None if f.parent == c.id else f.parent)
                          for f in family if f is not c],
                title=c.label, scope_sep=graph.scope_sep)
            box = f"cluster:{c.id}"
            self.inner[box] = _Layout(inner, self.sideways, self.show_shapes, self.numbers)
            box_of.update(dict.fromkeys(members, box))
        nodes: list[DrawNode] = []
        for n in graph.nodes:
            box = box_of.get(n.id)
            if box is None:
                nodes.append(n)
            elif box not in {m.id for m in nodes}:
                nodes.append(DrawNode(box, by_id[box.removeprefix("cluster:")].label, "group"))
        edges = [DrawEdge(box_of.get(e.src, e.src), box_of.get(e.dst, e.dst), e.label, e.control)
                 for e in graph.edges if box_of.get(e.src, e.src) != box_of.get(e.dst, e.dst)]
        return DrawGraph(nodes=_topological(nodes, edges), edges=edges, title=graph.title,
                         notes=graph.notes, scope_sep=graph.scope_sep)

    @staticmethod
    def _family(root: object, clusters: list) -> list:
        """``root`` and every cluster nested in it."""
        family, frontier = [root], [root]
        while frontier:
            ids = {c.id for c in frontier}
            frontier = [c for c in clusters if c.parent in ids]
            family += frontier
        return family

    # -- sizes ---------------------------------------------------------------------------------
    def _measure(self, n: DrawNode) -> _Box:
        inner = self.inner.get(n.id)
        if inner is not None:
            w, h = inner._xy(inner.extent_breadth, inner.extent_depth)
            w = max(w, text_width(n.label, DETAIL_SIZE) + 2 * MARGIN)
            h += CLUSTER_TITLE
            return _Box(h, w) if self.sideways else _Box(w, h)
        style = style_of(n)
        lines = n.text_lines()
        w = max([text_width(n.label, LABEL_SIZE, True)]
                + [text_width(text, DETAIL_SIZE) for _, text in lines]) + 20
        h = 10 + LABEL_SIZE + 3 + (DETAIL_SIZE + 2) * len(lines)
        if style.shape == "ellipse":  # the text must fit inside the curve
            w, h = w * 1.2 + 6, h + 8
        if style.double:
            w, h = w + 8, h + 8
        w = max(w, 44.0)
        return _Box(h, w) if self.sideways else _Box(w, h)

    # -- 1. layering ---------------------------------------------------------------------------
    def _layout_edges(self) -> list[tuple[int, int, bool]]:
        """Unique (upper, lower, reversed) pairs; backward edges are flipped to keep a DAG."""
        seen, out = set(), []
        for e in self.g.edges:
            a, b = self.index[e.src], self.index[e.dst]
            if a == b or (min(a, b), max(a, b)) in seen:
                continue
            seen.add((min(a, b), max(a, b)))
            out.append((a, b, False) if a < b else (b, a, True))
        return out

    def _assign_layers(self) -> None:
        n = len(self.boxes)
        preds: list[list[int]] = [[] for _ in range(n)]
        succs: list[list[int]] = [[] for _ in range(n)]
        for a, b, _ in self.edges:
            preds[b].append(a)
            succs[a].append(b)
        layer = [0] * n
        for i in range(n):  # index order is topological once backward edges are flipped
            layer[i] = max((layer[p] + 1 for p in preds[i]), default=0)
        # Then move each node down to just above its first consumer, so a parameter sits next
        # to the op that reads it, not at the top. Consumers that are sinks (an initializer,
        # the output) do not hold a node up; they are placed last, below their deepest input.
        sinks = {i for i in range(n) if not succs[i]}
        for i in reversed(range(n)):
            below = [layer[s] for s in succs[i] if s not in sinks] or [layer[s] for s in succs[i]]
            if below:
                layer[i] = min(below) - 1
        for i in sorted(sinks):
            layer[i] = max((layer[p] + 1 for p in preds[i]), default=0)
        for box, lay in zip(self.boxes, layer, strict=True):
            box.layer = lay

    # -- 2. dummies ----------------------------------------------------------------------------
    def _add_dummies(self) -> dict[tuple[int, int], list[int]]:
        """Replace each edge by a chain of boxes, one per layer; returns the chain of each edge."""
        chains = {}
        self.up: dict[int, list[int]] = {}
        self.down: dict[int, list[int]] = {}
        for a, b, _ in self.edges:
            chain = [a]
            for lay in range(self.boxes[a].layer + 1, self.boxes[b].layer):
                self.boxes.append(_Box(DUMMY_SEP, 0.0, lay, dummy=True))
                chain.append(len(self.boxes) - 1)
            chain.append(b)
            for u, v in pairwise(chain):
                self.down.setdefault(u, []).append(v)
                self.up.setdefault(v, []).append(u)
            chains[(a, b)] = chain
        return chains

    # -- 3. ordering ---------------------------------------------------------------------------
    def _order(self) -> list[list[int]]:
        depth = max((b.layer for b in self.boxes), default=-1) + 1
        layers: list[list[int]] = [[] for _ in range(depth)]
        for i, box in enumerate(self.boxes):
            layers[box.layer].append(i)
        best, best_crossings = [list(lay) for lay in layers], self._crossings(layers)
        for sweep in range(SWEEPS):
            downward = sweep % 2 == 0
            rng = range(1, depth) if downward else range(depth - 2, -1, -1)
            for lay in rng:
                ref = self.up if downward else self.down
                layers[lay] = self._by_barycentre(layers[lay], ref, layers)
            crossings = self._crossings(layers)
            if crossings < best_crossings:
                best, best_crossings = [list(lay) for lay in layers], crossings
        return best

    def _by_barycentre(self, layer: list[int], ref: dict, layers: list[list[int]]) -> list[int]:
        where = {x: i for lay in layers for i, x in enumerate(lay)}

        def key(item: tuple[int, int]) -> tuple[float, int]:
            i, x = item
            nbrs = ref.get(x, [])
            bary = sum(where[y] for y in nbrs) / len(nbrs) if nbrs else float(i)
            return bary, i

        return [x for _, x in sorted(enumerate(layer), key=key)]

    def _crossings(self, layers: list[list[int]]) -> int:
        where = {x: i for lay in layers for i, x in enumerate(lay)}
        total = 0
        for lay in layers[:-1]:
            # sorted by upper position, two edges cross when their lower positions invert:
            # count, for each edge, the earlier edges that land further right
            pairs = sorted((where[u], where[v]) for u in lay for v in self.down.get(u, []))
            seen: list[int] = []
            for _, b in pairs:
                total += len(seen) - bisect_right(seen, b)
                insort(seen, b)
        return total

    # -- 4. coordinates ------------------------------------------------------------------------
    def _coordinates(self) -> None:
        for lay in self.layers:
            x = 0.0
            for i, node in enumerate(lay):
                if i:
                    x += self._gap(lay[i - 1], node)
                self.boxes[node].pos = x
        for sweep in range(2 * SWEEPS):
            # align with the layer above, then below, and finish with both at once
            both = sweep >= 2 * SWEEPS - 2
            for lay in self.layers:
                wanted = []
                for node in lay:
                    if both:
                        nbrs = self.up.get(node, []) + self.down.get(node, [])
                    else:
                        nbrs = (self.up if sweep % 2 == 0 else self.down).get(node, [])
                    mean = sum(self.boxes[y].pos for y in nbrs) / len(nbrs) if nbrs else None
                    wanted.append(self.boxes[node].pos if mean is None else mean)
                self._place(lay, wanted)
        left = min((b.pos - b.breadth / 2 for b in self.boxes), default=0.0)
        for b in self.boxes:
            b.pos += MARGIN - left
        # Across layers: each layer is as deep as its deepest box.
        self.layer_mid, d = [], MARGIN
        gap = RANK_SEP + (10 if self.show_shapes and any(e.label for e in self.g.edges) else 0)
        for lay in self.layers:
            size = max((self.boxes[x].depth for x in lay), default=0.0)
            self.layer_mid.append(d + size / 2)
            d += size + gap
        self.extent_depth = d - gap + MARGIN
        self.extent_breadth = max((b.pos + b.breadth / 2 for b in self.boxes), default=0) + MARGIN

    def _gap(self, a: int, b: int) -> float:
        sep = DUMMY_SEP if self.boxes[a].dummy or self.boxes[b].dummy else NODE_SEP
        return (self.boxes[a].breadth + self.boxes[b].breadth) / 2 + sep

    def _place(self, lay: list[int], wanted: list[float]) -> None:
        """Put each node as near its wanted spot as the order and no-overlap rule allow."""
        xs: list[float] = []
        for i, node in enumerate(lay):
            x = wanted[i] if not i else max(wanted[i], xs[-1] + self._gap(lay[i - 1], node))
            xs.append(x)
        shift = sum(w - x for w, x in zip(wanted, xs, strict=True)) / len(xs) if xs else 0.0
        for node, x in zip(lay, xs, strict=True):
            self.boxes[node].pos = x + shift

    # -- drawing -------------------------------------------------------------------------------
    def _xy(self, breadth: float, depth: float) -> tuple[float, float]:
        return (depth, breadth) if self.sideways else (breadth, depth)

    def _center(self, i: int) -> tuple[float, float]:
        b = self.boxes[i]
        return b.pos, self.layer_mid[b.layer]

    def svg(self, caption: Sequence[str], note: str, min_width: float = 0.0,
            legend: bool = True, overlay: bool = False) -> str:
        """The drawing; with ``overlay``, only what a step-through frame adds to the bare graph
        (values, gradients, the highlighted node, the caption) on a transparent background."""
        entries = legend_entries(self.full) if legend else []
        width, height = self._xy(self.extent_breadth, self.extent_depth)
        legend_w = sum(text_width(s.legend, EDGE_SIZE) + 30 for _, s in entries)
        text_w = max((text_width(c, EDGE_SIZE) for c in caption), default=0.0)
        width = max(width, legend_w + 2 * MARGIN, text_w + 2 * MARGIN, min_width)
        foot = (24 if entries else 8) + 13 * len(caption)
        total_h = height + foot
        # The marker id is derived from the drawing, so two drawings in one page never clash
        # and the same drawing always has the same id.
        digest = hashlib.sha1(repr((self.g.title, [n.id for n in self.g.nodes])).encode())
        arrow = f"arrow-{digest.hexdigest()[:10]}"
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(width)}pt" '
            f'height="{_f(total_h)}pt" viewBox="0 0 {_f(width)} {_f(total_h)}" '
            f"font-family={quoteattr(FONT)}>",
            f"<!-- {escape(note)} -->" if note else "",
            f"<title>{escape(self.g.title)}</title>",
            f'<defs><marker id="{arrow}" viewBox="0 0 10 10" refX="10" refY="5" '
            f'markerWidth="6" markerHeight="6" orient="auto">'
            f'<path d="M0,0 L10,5 L0,10 z" fill="{EDGE_COLOR}"/></marker></defs>',
            "" if overlay else
            f'<rect x="0" y="0" width="{_f(width)}" height="{_f(total_h)}" fill="white"/>',
        ]
        out += self._overlay() if overlay else self._body(arrow)
        out += self._footer_svg(entries, caption, height)
        out.append("</svg>")
        return "\n".join(line for line in out if line) + "\n"

    def _body(self, arrow: str) -> list[str]:
        """Cluster boxes (each with its own body), then the edges, then the other nodes: an
        edge that passes over a cluster stays visible."""
        boxes = [self._node_svg(i, n, arrow) for i, n in enumerate(self.g.nodes)
                 if n.id in self.inner]
        return boxes + self._edges_svg(arrow) + [self._node_svg(i, n, arrow)
                                                 for i, n in enumerate(self.g.nodes)
                                                 if n.id not in self.inner]

    def _overlay(self) -> list[str]:
        """The highlighted nodes whole, and the value and gradient lines of the others."""
        out = []
        for i, n in enumerate(self.g.nodes):
            if n.id in self.inner:
                continue
            drawn = self._node_svg(i, n)
            out += [drawn] if n.highlight else _VALUE_LINES.findall(drawn)
        return out

    def _edges_svg(self, arrow: str) -> list[str]:
        out, drawn = [], set()
        for e in self.g.edges:
            a, b = self.index[e.src], self.index[e.dst]
            if a == b or (a, b) in drawn:
                continue
            drawn.add((a, b))
            upper, lower = (a, b) if a < b else (b, a)
            chain = self.chains[(upper, lower)]
            pts = [self._center(i) for i in chain]
            # leave the upper box at its far side and enter the lower one at its near side
            pts[0] = (pts[0][0], pts[0][1] + self.boxes[upper].depth / 2)
            pts[-1] = (pts[-1][0], pts[-1][1] - self.boxes[lower].depth / 2)
            if a > b:  # a backward edge: same curve, arrow at the other end
                pts.reverse()
            d = self._smooth_path(pts)
            dash = ' stroke-dasharray="4,3"' if e.control else ""
            title = escape(f"{self.g.nodes[a].name} -> {self.g.nodes[b].name}")
            out.append(
                f'<g class="edge"><title>{title}</title><path d="{d}" fill="none" '
                f'stroke="{EDGE_COLOR}" stroke-width="1.1"{dash} marker-end="url(#{arrow})"/>'
            )
            if self.show_shapes and e.label:
                (b0, d0), (b1, d1) = pts[0], pts[1]
                x, y = self._xy((b0 + b1) / 2, (d0 + d1) / 2)
                if self.sideways:  # above the edge; beside it when drawn top to bottom
                    x, y, anchor = x, y - 4, "middle"
                else:
                    x, y, anchor = x + 4, y + 3, "start"
                out.append(
                    f'<text x="{_f(x)}" y="{_f(y)}" font-size="{EDGE_SIZE}" fill="{EDGE_COLOR}" '
                    f'text-anchor="{anchor}" stroke="white" stroke-width="3" '
                    f'paint-order="stroke">{escape(e.label)}</text>'
                )
            out.append("</g>")
        return out

    def _smooth_path(self, pts: list[tuple[float, float]]) -> str:
        """A Catmull-Rom spline through the points, as cubic Béziers: one smooth stroke through
        the dummies, leaving and entering the boxes straight along the layer axis."""
        first, last = pts[1][1] - pts[0][1], pts[-1][1] - pts[-2][1]
        ext = [(pts[0][0], pts[0][1] - first), *pts, (pts[-1][0], pts[-1][1] + last)]
        d = f"M{self._pt(*pts[0])}"
        for i in range(1, len(ext) - 2):
            (b0, d0), (b1, d1), (b2, d2), (b3, d3) = ext[i - 1 : i + 3]
            c1 = (b1 + (b2 - b0) / 6, d1 + (d2 - d0) / 6)
            c2 = (b2 - (b3 - b1) / 6, d2 - (d3 - d1) / 6)
            d += f" C{self._pt(*c1)} {self._pt(*c2)} {self._pt(b2, d2)}"
        return d

    def _pt(self, breadth: float, depth: float) -> str:
        x, y = self._xy(breadth, depth)
        return f"{_f(x)},{_f(y)}"

    def _cluster_svg(self, i: int, n: DrawNode, arrow: str) -> str:
        inner = self.inner[n.id]
        box = self.boxes[i]
        cx, cy = self._xy(*self._center(i))
        w, h = self._xy(box.breadth, box.depth)
        x0, y0 = cx - w / 2, cy - h / 2
        iw, _ = inner._xy(inner.extent_breadth, inner.extent_depth)
        return "\n".join([
            f'<g class="cluster"><title>{escape(n.label)}</title>'
            f'<rect x="{_f(x0)}" y="{_f(y0)}" width="{_f(w)}" height="{_f(h)}" rx="8" '
            f'fill="{CLUSTER_FILL}" stroke="{CLUSTER_STROKE}" stroke-dasharray="5,3"/>'
            f'<text x="{_f(x0 + 8)}" y="{_f(y0 + 12)}" font-size="{DETAIL_SIZE}" '
            f'font-style="italic" fill="{CLUSTER_STROKE}">{escape(n.label)}</text>',
            f'<g transform="translate({_f(x0 + (w - iw) / 2)},{_f(y0 + CLUSTER_TITLE)})">',
            *inner._body(arrow),
            "</g></g>",
        ])

    def _node_svg(self, i: int, n: DrawNode, arrow: str = "") -> str:
        if n.id in self.inner:
            return self._cluster_svg(i, n, arrow)
        s = style_of(n)
        box = self.boxes[i]
        cx, cy = self._xy(*self._center(i))
        w, h = self._xy(box.breadth, box.depth)
        paint = f'fill="{s.fill}" stroke="{s.stroke}" stroke-width="{2 if n.highlight else 1}"'
        if s.dashed:
            paint += ' stroke-dasharray="4,3"'
        shapes = []
        insets = (0.0, 4.0) if s.double else (0.0,)
        for k, inset in enumerate(insets):
            last = k == len(insets) - 1  # only the inner outline is filled
            fill = paint if last else paint.replace(f'fill="{s.fill}"', 'fill="none"')
            if s.shape == "ellipse":
                shapes.append(f'<ellipse cx="{_f(cx)}" cy="{_f(cy)}" rx="{_f(w / 2 - inset)}" '
                              f'ry="{_f(h / 2 - inset)}" {fill}/>')
            else:
                rx = 6 if s.rounded else 0
                shapes.append(f'<rect x="{_f(cx - w / 2 + inset)}" y="{_f(cy - h / 2 + inset)}" '
                              f'width="{_f(w - 2 * inset)}" height="{_f(h - 2 * inset)}" '
                              f'rx="{rx}" {fill}/>')
        lines = n.text_lines()
        text_h = LABEL_SIZE + (DETAIL_SIZE + 2) * len(lines)
        y = cy - text_h / 2 + LABEL_SIZE - 2
        texts = [f'<text x="{_f(cx)}" y="{_f(y)}" font-size="{LABEL_SIZE}" font-weight="bold" '
                 f'text-anchor="middle">{escape(n.label)}</text>']
        for kind, text in lines:
            y += DETAIL_SIZE + 2
            if text.strip():  # a blank line keeps a slot for a value not known yet
                tag = "" if kind == "detail" else f' class="{kind}"'
                texts.append(f'<text x="{_f(cx)}" y="{_f(y)}" font-size="{DETAIL_SIZE}" '
                             f'fill="{LINE_COLORS[kind]}" text-anchor="middle"{tag}>'
                             f'{escape(text)}</text>')
        number = self.numbers[n.id]
        return (f'<g class="node" id="node{number}"><title>{escape(n.name)}</title>'
                + "".join(shapes) + "".join(texts) + "</g>")

    def _footer_svg(self, entries: list, caption: Sequence[str], top: float) -> list[str]:
        out, x, y = ['<g class="legend">'], MARGIN, top + 4
        for _, s in entries:
            if s.shape == "ellipse":
                out.append(f'<ellipse cx="{_f(x + 7)}" cy="{_f(y + 6)}" rx="7" ry="5" '
                           f'fill="{s.fill}" stroke="{s.stroke}"/>')
            else:
                out.append(f'<rect x="{_f(x)}" y="{_f(y + 1)}" width="14" height="10" '
                           f'rx="{3 if s.rounded else 0}" fill="{s.fill}" stroke="{s.stroke}"/>')
            out.append(f'<text x="{_f(x + 18)}" y="{_f(y + 10)}" font-size="{EDGE_SIZE}" '
                       f'fill="#424242">{escape(s.legend)}</text>')
            x += text_width(s.legend, EDGE_SIZE) + 30
        first = top + (30 if entries else 14)  # the caption's first line, under the legend
        for k, line in enumerate(caption):
            out.append(f'<text x="{_f(MARGIN)}" y="{_f(first + 13 * k)}" '
                       f'font-size="{EDGE_SIZE}" fill="#616161">{escape(line)}</text>')
        out.append("</g>")
        return out


_VALUE_LINES = re.compile(r'<text [^>]*class="(?:value|grad)"[^>]*>[^<]*</text>')


def _topological(nodes: list[DrawNode], edges: list[DrawEdge]) -> list[DrawNode]:
    """``nodes`` reordered so that every edge points forward, keeping their order where it
    can (Kahn's algorithm, earliest first); on a cycle the order is left as it is."""
    index = {n.id: i for i, n in enumerate(nodes)}
    preds: dict[int, set[int]] = {i: set() for i in range(len(nodes))}
    for e in edges:
        a, b = index[e.src], index[e.dst]
        if a != b:
            preds[b].add(a)
    done: list[int] = []
    placed: set[int] = set()
    while len(done) < len(nodes):
        ready = [i for i in range(len(nodes)) if i not in placed and preds[i] <= placed]
        if not ready:
            return nodes
        done.append(ready[0])
        placed.add(ready[0])
    return [nodes[i] for i in done]


def _f(v: float) -> str:
    """One decimal, and never ``-0.0``: the bytes must not depend on rounding noise."""
    text = f"{v:.1f}"
    return "0.0" if text == "-0.0" else text
