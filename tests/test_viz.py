"""Tests of course_utils.viz: every framework's graph drawn in one style, by both renderers.

Each framework test builds a tiny graph whose ops we know from the framework's own semantics
(``x * w + b`` in TF is ``Mul``/``AddV2``; autograd of it is ``MulBackward0``/``AddBackward0``)
and checks that the SVG parses as XML and names those ops, kinds and shapes.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import pytest

from course_utils import viz
from course_utils.viz import DrawGraph, draw

SVG_NS = "{http://www.w3.org/2000/svg}"
HAVE_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAVE_DOT, reason="Graphviz `dot` is not on PATH (CI has it)")
RENDERERS = ["builtin", pytest.param("graphviz", marks=needs_dot)]


def svg_texts(svg: str) -> list[str]:
    """Every piece of text in the drawing (labels, captions, tooltips), parsed as XML."""
    root = ET.fromstring(svg)
    assert root.tag == SVG_NS + "svg"
    return [t.strip() for el in root.iter() for t in [el.text or ""] if t.strip()]


def kinds(d: viz.Drawing) -> dict[str, str]:
    """op label or name -> kind, for both (so tests can ask either way)."""
    out = {}
    for n in d.graph.nodes:
        out[n.label] = n.kind
        out[n.name] = n.kind
    return out


def detailed(d: viz.Drawing, text: str) -> viz.DrawNode:
    """The one node that shows ``text`` under its label (a variable or parameter name)."""
    (node,) = [n for n in d.graph.nodes if text in n.details]
    return node


def edge_labels(d: viz.Drawing) -> set[str]:
    return {e.label for e in d.graph.edges}


# ---------------------------------------------------------------------------------------------
# minigraph: a stand-in written against the IR spec (graph.nodes in topological order; Node with
# name, op, inputs, attrs, shape, dtype, source), and the real package when it exists.


@dataclass(eq=False)
class FakeNode:
    name: str
    op: str
    inputs: tuple = ()
    attrs: dict = field(default_factory=dict)
    shape: tuple | None = None
    dtype: np.dtype = np.dtype("float32")
    source: str = "test:1"


@dataclass
class FakeGraph:
    nodes: list = field(default_factory=list)

    def add(self, name, op, inputs=(), shape=None, **attrs):
        node = FakeNode(name, op, tuple(inputs), attrs, shape)
        self.nodes.append(node)
        return node


def fake_mlp_graph() -> FakeGraph:
    g = FakeGraph()
    x = g.add("x", "placeholder", shape=(None, 2))
    w = g.add("dense_w", "variable", shape=(2, 4))
    b = g.add("dense_b", "variable", shape=(4,))
    h = g.add("dense_matmul", "matmul", [x, w], shape=(None, 4))
    a = g.add("dense_add", "add", [h, b], shape=(None, 4))
    two = g.add("two", "constant", shape=(), value=np.float32(2.0))
    g.add("relu", "relu", [a], shape=(None, 4))
    g.add("scaled", "mul", [g.nodes[-1], two], shape=(None, 4))
    return g


@pytest.mark.parametrize("renderer", RENDERERS)
def test_minigraph_graph_by_spec(renderer):
    d = draw(fake_mlp_graph(), renderer=renderer)
    texts = svg_texts(d.svg)
    for op in ("placeholder", "variable", "constant", "matmul", "add", "relu", "mul", "output"):
        assert op in texts, f"op {op!r} missing from the drawing; got {texts}"
    k = kinds(d)
    assert (k["x"], k["dense_w"], k["two"], k["dense_matmul"]) == ("input", "param", "const", "op")
    assert "= 2" in texts  # a scalar constant shows its value
    assert {"(None, 2)", "(2, 4)", "(None, 4)"} <= edge_labels(d)
    out = d.graph.node("output")
    assert [e.src for e in d.graph.edges if e.dst == out.id] == ["scaled"]  # the only sink


def test_minigraph_name_prefixes_collapse():
    # minigraph names are identifiers: `dense_w`, `dense_matmul` share the prefix `dense`
    d = draw(fake_mlp_graph(), renderer="builtin", max_nodes=6)
    labels = [n.label for n in d.graph.nodes]
    assert labels == ["placeholder", "dense (4 nodes)", "constant", "relu", "mul", "output"]
    assert d.graph.nodes[1].details == ("variable ×2, add, matmul",)  # most common first


def test_minigraph_traced_function_draws_latest_trace():
    class Traced:  # duck type of mg.function: get_graph, and graphs keyed by signature
        __name__ = "f"

        def __init__(self):
            self.graphs = {}

        def get_graph(self, *args):
            return self.graphs[args]

    f = Traced()
    with pytest.raises(ValueError, match=r"no traced graph yet.*get_graph"):
        draw(f)
    first = FakeGraph()
    first.add("x", "placeholder", shape=(3,))
    f.graphs[(3,)] = first
    f.graphs[(None, 2)] = fake_mlp_graph()
    d = draw(f, renderer="builtin")
    assert "relu" in svg_texts(d.svg) and "most recent trace" in d.graph.title


def test_real_minigraph():
    mg = pytest.importorskip("course_utils.minigraph")
    if not hasattr(mg, "Graph"):
        pytest.skip("course_utils.minigraph is still being written (no mg.Graph yet)")
    graph = mg.Graph()
    with graph.as_default():
        x = mg.placeholder((None, 2), name="x")
        w = mg.Variable(np.ones((2, 3), np.float32), name="w")
        b = mg.constant(np.zeros(3, np.float32), name="b")
        mg.relu(mg.matmul(x, w) + b)
    d = draw(graph, renderer="builtin")
    texts = svg_texts(d.svg)
    assert {"placeholder", "matmul", "relu", "output"} <= set(texts)
    assert kinds(d)["x"] == "input" and kinds(d)["w"] == "param"
    assert "(None, 3)" in edge_labels(d)


# ---------------------------------------------------------------------------------------------
# TensorFlow


@pytest.fixture(scope="module")
def tf():
    tf = pytest.importorskip("tensorflow")
    return tf


@pytest.fixture(scope="module")
def tf1_graph(tf):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (None, 3), name="x")
        w = tf.compat.v1.Variable(tf.ones((3, 2)), name="w")
        b = tf.compat.v1.Variable(tf.zeros((2,)), name="b")
        with tf.name_scope("layer"):
            tf.add(tf.matmul(x, w) * 2.0, b, name="y")
        tf.compat.v1.global_variables_initializer()
    return g


@pytest.mark.parametrize("renderer", RENDERERS)
def test_tf_graph(tf1_graph, renderer):
    d = draw(tf1_graph, renderer=renderer)
    texts = svg_texts(d.svg)
    for op in ("Placeholder", "VarHandleOp", "MatMul", "Mul", "AddV2", "Const", "output"):
        assert op in texts, f"TF op {op!r} missing; got {texts}"
    k = kinds(d)
    assert (k["x"], k["w"], k["Const"], k["layer/MatMul"]) == ("input", "param", "const", "op")
    assert {"(None, 3)", "(3, 2)", "(None, 2)"} <= edge_labels(d)
    # the output is the result y, not the initializer (NoOp) or variable bookkeeping
    assert [e.src for e in d.graph.edges if e.dst == "output"] == ["layer/y"]
    # the initializer depends on the assigns by control edges only
    init_in = [e for e in d.graph.edges if e.dst == "init"]
    assert init_in and all(e.control and not e.label for e in init_in)


def test_tf_graphdef_same_ops_as_graph(tf, tf1_graph):
    from_graph = draw(tf1_graph, renderer="builtin").graph
    from_def = draw(tf1_graph.as_graph_def(), renderer="builtin").graph
    assert [(n.id, n.label, n.kind) for n in from_def.nodes] == [
        (n.id, n.label, n.kind) for n in from_graph.nodes
    ]
    assert "(None, 3)" in edge_labels(draw(tf1_graph.as_graph_def(), renderer="builtin"))


def test_tf_function_and_concrete_function(tf):
    v = tf.Variable(2.0, name="scale")

    @tf.function
    def f(x):
        return tf.nn.relu(x * v + 1.0)

    with pytest.raises(ValueError, match="get_concrete_function"):
        draw(f)
    f(tf.ones((2,)))
    f(tf.ones((5,)))  # a second trace: draw(f) shows this newest one
    d = draw(f, renderer="builtin")
    texts = svg_texts(d.svg)
    assert {"Mul", "AddV2", "Relu", "output"} <= set(texts)
    assert detailed(d, "scale").kind == "param"  # the captured variable, by its own name
    assert "(5,)" in edge_labels(d) and "(2,)" not in edge_labels(d)
    concrete = f.get_concrete_function(tf.TensorSpec((None, 4), tf.float32))
    assert "(None, 4)" in edge_labels(draw(concrete, renderer="builtin"))


def test_tf_function_with_input_signature_needs_no_call(tf):
    @tf.function(input_signature=[tf.TensorSpec((None, 3), tf.float32)])
    def g(x):
        return tf.reduce_sum(x * x)

    d = draw(g, renderer="builtin")
    assert {"Mul", "Sum"} <= set(svg_texts(d.svg))


# ---------------------------------------------------------------------------------------------
# PyTorch: fx, export, TorchScript, autograd


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def mlp(torch):
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(2, 4)
            self.fc2 = torch.nn.Linear(4, 2)
            self.register_buffer("scale", torch.ones(2))

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x))) * self.scale

    torch.manual_seed(0)
    return MLP()


@pytest.mark.parametrize("renderer", RENDERERS)
def test_fx_function(torch, renderer):
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    gm = torch.fx.symbolic_trace(lambda x, y: x * y + x)
    ShapeProp(gm).propagate(torch.ones(2, 3), torch.ones(2, 3))
    d = draw(gm, renderer=renderer)
    assert {"placeholder", "mul", "add", "output"} <= set(svg_texts(d.svg))
    assert edge_labels(d) == {"(2, 3)"}
    assert kinds(d)["x"] == "input"


def test_fx_module_kinds(torch, mlp):
    d = draw(torch.fx.symbolic_trace(mlp), renderer="builtin")
    texts = set(svg_texts(d.svg))
    assert {"Linear", "relu", "mul", "get_attr"} <= texts
    assert kinds(d)["scale"] == "const"  # a buffer is state, not a trainable parameter


def test_exported_program(torch, mlp):
    ep = torch.export.export(mlp, (torch.ones(3, 2),))
    d = draw(ep, renderer="builtin")
    texts = set(svg_texts(d.svg))
    assert {"aten.linear", "aten.relu", "output"} <= texts
    k = kinds(d)
    # parameters are drawn as parameters and named by their fully qualified names
    assert detailed(d, "fc1.weight").kind == k["p_fc1_weight"] == "param"
    assert k["x"] == "input" and k["b_scale"] == "const"
    assert {"(4, 2)", "(3, 4)", "(3, 2)"} <= edge_labels(d)


def test_torch_compile_captured_graph(torch, mlp):
    captured = []

    def keep_graph(gm, example_inputs):  # a torch.compile backend that keeps the fx graph
        captured.append(gm)
        return gm.forward

    torch.compile(mlp, backend=keep_graph)(torch.ones(3, 2))
    d = draw(captured[0], renderer="builtin")
    assert {"linear", "relu", "mul", "output"} <= set(svg_texts(d.svg))
    params = [n for n in d.graph.nodes if n.kind == "param"]
    assert len(params) == 4  # Dynamo lifted fc1/fc2 weight and bias to graph inputs
    assert kinds(d)["l_self_buffers_scale_"] == "const"  # and the buffer
    assert {"(4, 2)", "(3, 4)", "(3, 2)"} <= edge_labels(d)


# torch.jit warns that TorchScript is deprecated; drawing it is still what lesson 08 does.
torchscript_warns = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")


@torchscript_warns
@pytest.mark.parametrize("renderer", RENDERERS)
def test_torchscript_traced_module(torch, mlp, renderer):
    traced = torch.jit.trace(mlp, torch.ones(3, 2))
    d = draw(traced, renderer=renderer)
    texts = set(svg_texts(d.svg))
    assert {"aten::linear", "aten::relu", "aten::mul", "GetAttr", "output"} <= texts
    k = kinds(d)
    assert k["fc1.weight"] == "param" and k["scale"] == "const"
    assert "(3, 4)" in edge_labels(d)  # traced graphs record shapes


@torchscript_warns
def test_torchscript_function_and_raw_graph(torch):
    @torch.jit.script
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > 0):
            z = x * y
        else:
            z = x + y
        return z

    for obj in (f, f.graph):
        d = draw(obj, renderer="builtin")
        texts = set(svg_texts(d.svg))
        assert {"aten::mul", "aten::add", "prim::If", "output"} <= texts
        # both branches' results flow into the If, which flows into the output
        branches = [e.src for e in d.graph.edges if d.graph.node(e.dst).label == "prim::If"]
        labels = {d.graph.node(s).label for s in branches}
        assert {"aten::mul", "aten::add", "aten::Bool"} <= labels


@pytest.mark.parametrize("renderer", RENDERERS)
def test_tensor_autograd_graph(torch, renderer):
    x = torch.ones(2, 3)  # does not require grad: not part of the autograd graph
    w = torch.ones(2, 3, requires_grad=True)
    b = torch.zeros(3, requires_grad=True)
    y = (x * w + b).sum()
    d = draw(y, params={"w": w, "b": b}, renderer=renderer)
    texts = svg_texts(d.svg)
    for name in ("MulBackward0", "AddBackward0", "SumBackward0", "AccumulateGrad", "w", "b"):
        assert name in texts, f"{name!r} missing; got {texts}"
    assert texts.count("AccumulateGrad") == 2  # one per leaf that requires grad
    k = kinds(d)
    assert k["w"] == "param" and k["b"] == "param"
    # drawn forward: each leaf feeds the op that used it
    by_name = {n.name: n for n in d.graph.nodes}
    mul = next(n for n in d.graph.nodes if n.label == "MulBackward0")
    assert any(e.src == by_name["w"].id and e.dst == mul.id for e in d.graph.edges)
    assert {"(2, 3)", "(3,)", "()"} <= edge_labels(d)


def test_tensor_autograd_mlp_loss_names_parameters_and_grads(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x, y = torch.randn(5, 2), torch.tensor([0, 1, 0, 1, 1])
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward(retain_graph=True)
    params = dict(model.named_parameters())
    d = draw(loss, params=params, renderer="builtin")
    texts = svg_texts(d.svg)
    assert "AddmmBackward0" in texts and "ReluBackward0" in texts
    for name, p in params.items():  # every parameter, with its shape and its grad's shape
        node = d.graph.node(next(n.id for n in d.graph.nodes if n.name == name))
        assert node.kind == "param" and node.label == "AccumulateGrad"
        shape = str(tuple(p.shape))  # Python's tuple repr is the reference format
        assert shape in node.details and f"grad {shape}" in node.details


def test_tensor_without_graph_is_explained(torch):
    with pytest.raises(ValueError, match="requires_grad=True"):
        draw(torch.ones(3) * 2)
    with pytest.raises(ValueError, match="params="):
        draw(DrawGraph(), params={})


# ---------------------------------------------------------------------------------------------
# Renderers, options and the Drawing object


def chain(n: int = 4) -> DrawGraph:
    g = DrawGraph(title="chain")
    g.add_node("x", "placeholder", kind="input")
    for i in range(n):
        g.add_node(f"op{i}", "neg")
        g.add_edge("x" if i == 0 else f"op{i - 1}", f"op{i}", "(3,)")
    return g


def test_env_var_forces_builtin(monkeypatch):
    monkeypatch.setenv("COURSE_VIZ_RENDERER", "builtin")
    d = draw(chain())
    assert d.renderer == "builtin"
    assert "renderer: builtin" in svg_texts(d.svg)
    assert "built-in layered layout" in d.svg  # the SVG comment names the renderer too
    monkeypatch.setenv("COURSE_VIZ_RENDERER", "fancy")
    with pytest.raises(ValueError, match="COURSE_VIZ_RENDERER"):
        draw(chain())


def test_without_dot_falls_back_and_explains(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no dot anywhere
    monkeypatch.delenv("COURSE_VIZ_RENDERER", raising=False)
    d = draw(chain())
    assert d.renderer == "builtin"
    with pytest.raises(RuntimeError, match="not on PATH"):
        draw(chain(), renderer="graphviz")
    with pytest.raises(RuntimeError, match="PNG output needs Graphviz"):
        d.save(tmp_path / "g.png")


def test_graphviz_output_is_cleaned(monkeypatch, tmp_path):
    # A stand-in `dot` that answers like Graphviz does, version comment and all.
    fake = tmp_path / "dot"
    fake.write_text(
        "#!/bin/sh\nwhile read -r line; do :; done\n"
        "printf '<?xml version=\"1.0\"?>\\n<!DOCTYPE svg>\\n"
        "<!-- Generated by graphviz version 9.9.9 (20990101.0000) -->\\n"
        "<svg width=\"8pt\"><g><text>neg</text></g></svg>\\n'\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    d = draw(chain(), renderer="graphviz")
    assert d.renderer == "graphviz"
    assert d.svg.startswith("<svg") and "9.9.9" not in d.svg and "DOCTYPE" not in d.svg
    assert "<!-- drawn by course_utils.viz with Graphviz dot -->" in d.svg


@needs_dot
def test_graphviz_accepts_our_dot_source():
    d = draw(chain(), renderer="graphviz", highlight={"op1"})
    texts = svg_texts(d.svg)
    assert "renderer: graphviz" in texts and "highlighted" in texts
    assert "Generated by graphviz" not in d.svg


@pytest.mark.parametrize("renderer", RENDERERS)
def test_same_graph_same_bytes(torch, renderer):
    def loss():  # rebuilt from scratch: new tensors at new addresses, same graph
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
        return model(torch.ones(4, 2)).mean(), dict(model.named_parameters())

    drawings = [draw(out, params=p, renderer=renderer) for out, p in (loss(), loss())]
    assert drawings[0].svg == drawings[1].svg
    assert drawings[0].source == drawings[1].source
    g = fake_mlp_graph()
    assert draw(g, renderer=renderer).svg == draw(g, renderer=renderer).svg


def big_graph(n_layers: int = 10, per_layer: int = 30) -> DrawGraph:
    g = DrawGraph(title="deep")
    g.add_node("x", "placeholder", kind="input")
    prev = "x"
    for i in range(n_layers):
        for j in range(per_layer):
            name = f"layer{i}/op{j}"
            g.add_node(name, "mul" if j % 2 else "add", scope=(f"layer{i}",))
            g.add_edge(prev, name, "(8,)")
            prev = name
    g.add_node("output", "output", kind="output")
    g.add_edge(prev, "output", "(8,)")
    return g


@pytest.mark.parametrize("renderer", RENDERERS)
def test_large_graph_collapses_by_scope(renderer):
    big = big_graph()
    assert len(big.nodes) == 302
    d = draw(big, renderer=renderer, max_nodes=40)
    assert len(d.graph.nodes) <= 40
    texts = svg_texts(d.svg)
    assert "layer3 (30 nodes)" in texts
    assert any(t.startswith("collapsed 302 nodes into 12 boxes") for t in texts)
    # nothing is lost: the boxes account for every node, and the chain is still a chain
    assert sum(n.members for n in d.graph.nodes) == 302
    ids = [n.id for n in d.graph.nodes]
    assert [(e.src, e.dst) for e in d.graph.edges] == list(pairwise(ids))


def test_flat_large_graph_collapses_in_topological_order():
    g = DrawGraph(title="flat")
    for i in range(300):
        g.add_node(f"n{i}", "add")
        if i:
            g.add_edge(f"n{i - 1}", f"n{i}")
    d = draw(g, renderer="builtin", max_nodes=25)
    assert len(d.graph.nodes) <= 25
    assert sum(n.members for n in d.graph.nodes) == 300
    assert "in topological order" in d.graph.notes[-1]
    assert d.graph.nodes[0].details[0] == "n0 … n11"


def test_highlight_marks_nodes_and_groups():
    d = draw(chain(), renderer="builtin", highlight={"op2"})
    assert [n.id for n in d.graph.nodes if n.highlight] == ["op2"]
    assert "#ffcdd2" in d.svg and "highlighted" in svg_texts(d.svg)
    collapsed = draw(big_graph(), renderer="builtin", highlight={"layer4/op7"})
    assert [n.label for n in collapsed.graph.nodes if n.highlight] == ["layer4 (30 nodes)"]
    with pytest.raises(ValueError, match=r"not in the graph: \['nope'\]"):
        draw(chain(), highlight={"nope"})


def test_rankdir_and_show_shapes():
    tall = draw(chain(), renderer="builtin")
    wide = draw(chain(), renderer="builtin", rankdir="LR")
    (tw, th), (ww, wh) = [
        [float(v) for v in ET.fromstring(d.svg).get("viewBox").split()[2:]] for d in (tall, wide)
    ]
    assert th > tw and ww > wh  # a chain runs down, or across
    assert "rankdir=LR" in wide.source
    assert "(3,)" in svg_texts(tall.svg)
    assert "(3,)" not in svg_texts(draw(chain(), renderer="builtin", show_shapes=False).svg)
    with pytest.raises(ValueError, match="rankdir"):
        draw(chain(), rankdir="BT")


def node_boxes(svg: str) -> dict[str, tuple[float, float, float, float]]:
    """title -> (x0, y0, x1, y1) of each node's outer shape in a built-in drawing."""
    boxes = {}
    for g in ET.fromstring(svg).iter(SVG_NS + "g"):
        if g.get("class") != "node":
            continue
        title = g.find(SVG_NS + "title").text
        shape = next(el for el in g if el.tag in (SVG_NS + "rect", SVG_NS + "ellipse"))
        a = {k: float(v) for k, v in shape.attrib.items() if re.fullmatch(r"[-\d.]+", v)}
        if shape.tag.endswith("rect"):
            boxes[title] = (a["x"], a["y"], a["x"] + a["width"], a["y"] + a["height"])
        else:
            cx, cy, rx, ry = a["cx"], a["cy"], a["rx"], a["ry"]
            boxes[title] = (cx - rx, cy - ry, cx + rx, cy + ry)
    return boxes


def test_builtin_layout_invariants(torch):
    """No two boxes overlap, and every edge of a DAG points down the page."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    loss = torch.nn.functional.cross_entropy(model(torch.randn(4, 2)), torch.tensor([0, 1, 1, 0]))
    for obj, kw in [(loss, {"params": dict(model.named_parameters())}), (fake_mlp_graph(), {})]:
        d = draw(obj, renderer="builtin", **kw)
        boxes = node_boxes(d.svg)
        names = {n.id: n.name for n in d.graph.nodes}
        assert len(boxes) == len(d.graph.nodes)
        items = list(boxes.items())
        for i, (a, (ax0, ay0, ax1, ay1)) in enumerate(items):
            for b, (bx0, by0, bx1, by1) in items[i + 1:]:
                assert ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 or by1 <= ay0, f"{a} overlaps {b}"
        for e in d.graph.edges:
            assert boxes[names[e.src]][3] < boxes[names[e.dst]][1], f"{e} does not point down"


def test_drawing_object_and_save(tmp_path):
    d = draw(chain(), renderer="builtin", title="four negations")
    assert d._repr_svg_() == d.svg
    assert repr(d) == "<Drawing 'four negations': 5 nodes, 4 edges, renderer='builtin'>"
    assert d.source.startswith("digraph G {") and "four negations" in d.source
    assert d.save(tmp_path / "g.svg").read_text() == d.svg
    assert d.save(tmp_path / "g.dot").read_text() == d.source
    with pytest.raises(ValueError, match=r"\.svg, \.png"):
        d.save(tmp_path / "g.txt")
    if HAVE_DOT:
        assert d.save(tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unsupported_object_lists_what_is_supported():
    with pytest.raises(TypeError) as info:
        draw(42)
    message = str(info.value)
    for kind in ("minigraph", "tf.Graph", "GraphDef", "torch.fx", "ExportedProgram",
                 "TorchScript", "grad_fn"):
        assert kind in message


def test_bad_graph_is_named():
    g = chain()
    g.add_edge("op3", "ghost")
    with pytest.raises(ValueError, match="'ghost'"):
        draw(g)


def test_drawing_minigraph_imports_no_framework():
    code = (
        "import sys; from course_utils.viz import draw, DrawGraph\n"
        "g = DrawGraph(); g.add_node('x', 'placeholder', kind='input')\n"
        "draw(g, renderer='builtin')\n"
        "print(sorted(m for m in ('torch', 'tensorflow') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "COURSE_VIZ_RENDERER": ""})
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# A minigraph eager tensor's tape, checked against PyTorch's autograd drawing of the same lines


@pytest.mark.parametrize("renderer", RENDERERS)
def test_minigraph_eager_tape_matches_the_torch_autograd_drawing(torch, renderer):
    mg = pytest.importorskip("course_utils.minigraph")
    x0, w0, b0 = np.ones((2, 3)), np.full((2, 3), 0.5), np.zeros(3)
    x, w, b = mg.tensor(x0), mg.tensor(w0, requires_grad=True), mg.tensor(b0, requires_grad=True)
    tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    loss = mg.sum(mg.tanh(x * w + b) * 2.0)
    tloss = (torch.tanh(torch.tensor(x0) * tw + tb) * 2).sum()
    loss.backward()
    tloss.backward()
    d = draw(loss, params={"w": w, "b": b, "x": x}, renderer=renderer)
    ref = draw(tloss, params={"w": tw, "b": tb}, renderer="builtin")

    texts = svg_texts(d.svg)
    assert {"mul", "add", "tanh", "sum", "leaf", "constant", "tensor"} <= set(texts)
    ops = [n.label for n in d.graph.nodes if n.kind == "op"]
    ref_ops = [n.label for n in ref.graph.nodes if n.kind == "op"]
    assert [f"{op.capitalize()}Backward0" for op in ops] == ref_ops  # same ops, same order
    for name, leaf in (("w", w), ("b", b)):  # parameters: shape and grad shape, as torch shows
        node = detailed(d, name)
        assert node.kind == "param" and node.label == "leaf"
        assert node.details == detailed(ref, name).details == (name, str(leaf.shape),
                                                               f"grad {leaf.shape}")
    assert detailed(d, "x").kind == "const"  # needs no gradient: torch leaves it out
    (two,) = [n for n in d.graph.nodes if "= 2" in n.details]
    assert two.kind == "const"
    # drawn forward: each leaf feeds the op that used it; the shapes ride on the edges
    by_id = {n.id: n for n in d.graph.nodes}
    into_mul = {by_id[e.src].name for e in d.graph.edges if by_id[e.dst].label == "mul"}
    assert {"w", "x"} <= into_mul
    # torch's edges, and two more: from x and from the constant 2 (torch draws neither)
    labels = sorted(e.label for e in d.graph.edges)
    assert labels == sorted([e.label for e in ref.graph.edges] + ["(2, 3)", "()"])


def test_minigraph_eager_leaf_alone_and_tensor_without_tape():
    mg = pytest.importorskip("course_utils.minigraph")
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    d = draw(w, renderer="builtin")
    assert [n.kind for n in d.graph.nodes] == ["param", "output"]
    with pytest.raises(ValueError, match="requires_grad=True"):
        draw(mg.tensor([1.0]) * 2.0)
    with mg.no_grad():
        y = w * 2.0
    with pytest.raises(ValueError, match="no_grad"):
        draw(y)


# ---------------------------------------------------------------------------------------------
# Control flow: the bodies of cond / while_loop (minigraph) and If / While (TF) as clusters


def cluster_nodes_in_svg(svg: str) -> list[set[str]]:
    """For each cluster box the built-in renderer drew, the node numbers drawn directly in it
    (nested clusters' nodes belong to the nested box), in document order."""
    root = ET.fromstring(svg)
    found = []

    def direct_nodes(el: ET.Element) -> set[str]:
        out = set()
        for child in el:
            if child.get("class") == "cluster":
                continue
            if child.get("class") == "node":
                out.add(child.get("id"))
            else:
                out |= direct_nodes(child)
        return out

    for el in root.iter(SVG_NS + "g"):
        if el.get("class") == "cluster":
            found.append(direct_nodes(el))
    return found


def control_flow_function():
    mg = pytest.importorskip("course_utils.minigraph")

    @mg.function
    def f(x, n):
        def body(i, v):  # a cond inside the loop body: a cluster inside a cluster
            return i + 1, mg.cond(mg.sum(v) > 1.0, lambda: v * 0.5, lambda: v + 1.0)

        y = mg.cond(mg.sum(x) > 0, lambda: x * 2.0, lambda: -x)
        return mg.while_loop(lambda i, v: i < n, body, (mg.constant(0), y))[1]

    f(mg.tensor([1.0, 2.0]), mg.tensor(3))
    return mg, f, f.get_graph(mg.tensor([1.0, 2.0]), mg.tensor(3))


@pytest.mark.parametrize("renderer", RENDERERS)
def test_cond_and_while_loop_bodies_are_clusters(renderer):
    mg, f, graph = control_flow_function()
    d = draw(f, renderer=renderer)
    clusters = {c.id: c for c in d.graph.clusters}
    expected = {}  # cluster id -> the ids its sub-graph's nodes must have, from the graph itself
    for owner in graph.nodes:
        for key, sub in owner.attrs.items():
            if isinstance(sub, mg.Graph):
                cid = f"{owner.name}/{key}"
                expected[cid] = [f"{cid}/{n.name}" for n in sub.nodes]
                for inner in sub.nodes:  # the cond inside the loop body
                    for key2, sub2 in inner.attrs.items():
                        if isinstance(sub2, mg.Graph):
                            cid = f"{owner.name}/{key}/{inner.name}/{key2}"
                            expected[cid] = [f"{cid}/{n.name}" for n in sub2.nodes]
    assert {k: c.members for k, c in clusters.items()} == expected
    assert len(expected) == 6  # cond: 2 branches; while_loop: test and body; body's cond: 2
    nested = [c for c in clusters.values() if c.parent]
    assert {c.parent for c in nested} == {"while_loop/body_fn"} and len(nested) == 2
    assert [c.label for c in d.graph.clusters[:2]] == ["cond: true_fn", "cond: false_fn"]
    # a branch's results flow into its cond node; the operand x flows into both branches
    into_cond = {e.src for e in d.graph.edges if e.dst == "cond"}
    assert into_cond == {"greater", "cond/true_fn/mul", "cond/false_fn/neg"}
    assert {e.dst for e in d.graph.edges if e.src == "x"} >= {"cond/true_fn/x", "cond/false_fn/x"}

    number = {n.id: f"node{i}" for i, n in enumerate(d.graph.nodes)}
    if renderer == "builtin":  # each box holds exactly its members
        drawn = cluster_nodes_in_svg(d.svg)
        assert sorted(map(sorted, drawn)) == sorted(
            sorted(number[m] for m in c.members) for c in d.graph.clusters)
    else:  # Graphviz puts a cluster's nodes, and only those, inside its box
        root = ET.fromstring(d.svg)
        boxes, centres = {}, {}
        for el in root.iter(SVG_NS + "g"):
            title = el.find(SVG_NS + "title").text if el.find(SVG_NS + "title") is not None else ""
            if el.get("class") == "cluster":  # a rounded box is a path: all its points
                outline = next(e for e in el if e.tag in (SVG_NS + "path", SVG_NS + "polygon"))
                coords = re.findall(r"(-?[\d.]+),(-?[\d.]+)",
                                    outline.get("d") or outline.get("points"))
                boxes[int(title.removeprefix("cluster_"))] = [tuple(map(float, c))
                                                              for c in coords]
            elif el.get("class") == "node":
                text = next(el.iter(SVG_NS + "text"))
                centres[title] = (float(text.get("x")), float(text.get("y")))
        ids = {n.id: f"n{i}" for i, n in enumerate(d.graph.nodes)}
        assert len(boxes) == 6
        for k, c in enumerate(d.graph.clusters):
            inside = set(c.members) | {m for sub in d.graph.clusters if sub.parent == c.id
                                       for m in sub.members}
            xs, ys = [p[0] for p in boxes[k]], [p[1] for p in boxes[k]]
            for nid, dot_id in ids.items():
                x, y = centres[dot_id]
                within = min(xs) < x < max(xs) and min(ys) < y < max(ys)
                assert within == (nid in inside), (c.id, nid)


def test_clusters_survive_collapse_only_whole():
    _, f, graph = control_flow_function()
    d = draw(f, renderer="builtin", max_nodes=12)
    assert len(d.graph.nodes) <= 12
    members = {m for c in d.graph.clusters for m in c.members}
    assert members <= {n.id for n in d.graph.nodes}  # no cluster names a merged node
    with pytest.raises(ValueError, match="not in the graph"):
        g = DrawGraph()
        g.add_node("x", "placeholder", kind="input")
        g.add_cluster("c", "body", ["x", "y"])
        draw(g, renderer="builtin")


def test_tf_if_and_while_functions_are_clusters(tf):
    @tf.function
    def f(x):
        y = tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: -x)
        return tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 0.5),
                             (tf.constant(0), y))[1]

    concrete = f.get_concrete_function(tf.TensorSpec((2,), tf.float32))
    d = draw(concrete, renderer="builtin")
    gd = concrete.graph.as_graph_def()
    library = {fn.signature.name: fn for fn in gd.library.function}
    (if_node,) = [n for n in gd.node if n.op in ("If", "StatelessIf")]
    for key in ("then_branch", "else_branch"):
        fn = library[if_node.attr[key].func.name]
        (cluster,) = [c for c in d.graph.clusters if c.id == f"{if_node.name}/{key}"]
        body = {n.split("/")[-1] for n in cluster.members}
        # the function's inputs (placeholders) and its ops, by TF's own names
        assert {a.name for a in fn.signature.input_arg} <= body
        assert {nd.name.split("/")[-1] for nd in fn.node_def} <= body
    labels = {n.label for n in d.graph.nodes}
    assert {"Mul", "Neg"} <= labels  # the branches' ops are drawn, not only one If box
    assert len(d.graph.clusters) == 4 and "then_branch" in d.graph.clusters[0].label
