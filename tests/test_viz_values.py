"""viz.draw(values=True, grads=True): the numbers on the nodes, checked against references.

Values are checked against numpy evaluating the same formula; gradients against PyTorch's
autograd (``retain_grad()`` on the tensors in between) and against minigraph's own
``backward()`` / ``mg.gradients``. Everything runs in float64, so the 4-digit labels of the
drawing and of the reference agree exactly.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import course_utils.minigraph as mg
from course_utils import viz
from course_utils.viz import format_value

torch = pytest.importorskip("torch")

SVG_NS = "{http://www.w3.org/2000/svg}"
needs_dot = pytest.mark.skipif(not shutil.which("dot"), reason="Graphviz `dot` is not on PATH")
RENDERERS = ["builtin", pytest.param("graphviz", marks=needs_dot)]


def svg_texts(svg: str) -> list[str]:
    """Every piece of text in the drawing, parsed as XML."""
    root = ET.fromstring(svg)
    assert root.tag == SVG_NS + "svg"
    return [t.strip() for el in root.iter() for t in [el.text or ""] if t.strip()]


def test_format_value_small_in_full_large_as_summary():
    assert format_value(np.array([1.5, -2.0, 0.25])) == "[1.5, -2, 0.25]"
    assert format_value(np.array([[1, 2], [3, 4]])) == "[[1, 2], [3, 4]]"
    assert format_value(np.float32(-0.0)) == "0"  # rounding noise never prints as -0
    assert format_value(np.float64(1 / 3)) == "0.3333"
    assert format_value(2.5) == "2.5" and format_value(True) == "True"
    big = np.arange(64.0).reshape(2, 32)
    assert format_value(big) == "(2, 32) mean 31.5 in [0, 63]"
    assert format_value(np.array([1.0, np.nan] * 4)) == "(8,) mean 1 in [1, 1], 4 nan/inf"
    assert format_value(np.ones(7, bool)) == "(7,) bool, 7 True"
    assert format_value(np.zeros((0, 3))) == "(0, 3) empty"
    # six elements fit; a long six-element row is summarised rather than overflowing the box
    assert format_value(np.arange(6)) == "[0, 1, 2, 3, 4, 5]"
    assert format_value(np.full(6, 123456.789)).startswith("(6,) mean")
    assert format_value(None) == "" and format_value((1, 2)) == "2 results"


def _texts(d: viz.Drawing) -> dict[str, tuple[str, str]]:
    """node name -> (value line, grad line)"""
    return {n.name: (n.value, n.grad) for n in d.graph.nodes}


def _mlp_graph(rng):
    """loss = mean(tanh(x @ w + b) * c * tanh(...)) in float64; x fed, w and b variables."""
    g = mg.Graph()
    w0, b0 = rng.normal(size=(3, 2)), rng.normal(size=2)
    with g.as_default():
        x = mg.placeholder((None, 3), "float64", name="x")
        w = mg.Variable(w0, name="w")
        b = mg.Variable(b0, name="b")
        h = mg.add(mg.matmul(x, w, name="h"), b, name="z")
        a = mg.tanh(h, name="a")
        s = mg.mul(a, mg.constant(np.float64(1.5), name="c"), name="s")
        mg.mean(s * a, name="loss")
    return g, w0, b0


def test_graph_values_match_numpy_and_grads_match_torch():
    rng = np.random.default_rng(0)
    g, w0, b0 = _mlp_graph(rng)
    x0 = rng.normal(size=(4, 3))
    d = viz.draw(g, values=True, grads=True, feed_dict={"x": x0}, renderer="builtin")
    got = _texts(d)

    z = x0 @ w0 + b0
    a = np.tanh(z)
    s = a * 1.5
    expect_values = {"x": x0, "w": w0, "b": b0, "h": x0 @ w0, "z": z, "a": a, "c": 1.5, "s": s,
                     "loss": np.mean(s * a)}
    for name, value in expect_values.items():
        assert got[name][0] == "= " + format_value(value), name

    tx = torch.tensor(x0, requires_grad=True)
    tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    tc = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    th = tx @ tw
    tz = th + tb
    ta = torch.tanh(tz)
    ts = ta * tc
    for t in (th, tz, ta, ts):
        t.retain_grad()
    (ts * ta).mean().backward()
    for name, t in {"x": tx, "w": tw, "b": tb, "c": tc, "h": th, "z": tz, "a": ta,
                    "s": ts}.items():
        assert got[name][1] == "grad " + format_value(t.grad.numpy()), name
    assert got["loss"][1] == "grad 1"
    assert any("d(%loss)/d(node)" in note for note in d.graph.notes)


def test_graph_grads_agree_with_a_session_run_of_mg_gradients():
    rng = np.random.default_rng(1)
    g, _, _ = _mlp_graph(rng)
    x0 = rng.normal(size=(5, 3))
    with g.as_default():
        dw, db = mg.gradients(g.node("loss"), [g.node("w"), g.node("b")])
        init = mg.global_variables_initializer()
    sess = mg.Session(g)
    sess.run(init)
    # the graph now holds gradient nodes: grads_of is found from the seed of mg.gradients
    d = viz.draw(g, grads=True, feed_dict={"x": x0}, session=sess, renderer="builtin")
    ref_w, ref_b = sess.run([dw, db], feed_dict={"x": x0})
    got = _texts(d)
    assert got["w"][1] == "grad " + format_value(ref_w)
    assert got["b"][1] == "grad " + format_value(ref_b)
    assert got["w"][0] == ""  # values=False: no values drawn


def test_graph_session_values_and_unfed_placeholders():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder((2,), "float64", name="x")
        y = mg.placeholder((2,), "float64", name="y")
        v = mg.Variable(np.array([1.0, 2.0]), name="v")
        mg.sum(x * v, name="xv")
        mg.sum(y * v, name="yv")
        step = mg.assign(v, v * 10.0, name="step")
        init = mg.global_variables_initializer()
    sess = mg.Session(g)
    sess.run(init)
    sess.run(step)
    d = viz.draw(g, values=True, feed_dict={x: [1.0, 1.0]}, session=sess, renderer="builtin")
    got = _texts(d)
    assert got["v"][0] == "= [10, 20]" and got["xv"][0] == "= 30"  # the Session's value
    assert got["yv"][0] == "" and got["y"][0] == ""  # not fed: no value, and the caption says
    assert any("%y" in note for note in d.graph.notes)
    assert sess.run(v).tolist() == [10.0, 20.0]  # drawing ran nothing in the Session
    with pytest.raises(ValueError, match="grads_of="):  # two scalar results: which one?
        viz.draw(g, grads=True, feed_dict={x: [1.0, 1.0], y: [0.0, 0.0]})
    d = viz.draw(g, grads=True, grads_of="xv", feed_dict={x: [1.0, 1.0]}, renderer="builtin")
    assert _texts(d)["v"][1] == "grad [1, 1]"


@pytest.mark.parametrize("renderer", RENDERERS)
def test_eager_tape_values_and_grads_match_torch(renderer):
    rng = np.random.default_rng(2)
    x0, w0 = rng.normal(size=(2, 3)), rng.normal(size=3)
    x, w = mg.tensor(x0), mg.tensor(w0, requires_grad=True)
    h = x * w
    a = mg.tanh(h)
    loss = mg.sum(a * h)
    loss.backward()
    d = viz.draw(loss, values=True, grads=True, params={"x": x, "w": w, "h": h, "a": a},
                 renderer=renderer)

    tx, tw = torch.tensor(x0), torch.tensor(w0, requires_grad=True)
    th = tx * tw
    ta = torch.tanh(th)
    tloss = (ta * th).sum()
    for t in (th, ta):
        t.retain_grad()
    tloss.backward()
    by_name = {n.details[0]: n for n in d.graph.nodes if n.details}
    assert by_name["x"].value == "= " + format_value(x0) and by_name["x"].grad == ""
    assert by_name["w"].grad == "grad " + format_value(tw.grad.numpy())
    assert by_name["h"].value == "= " + format_value(th.detach().numpy())
    assert by_name["h"].grad == "grad " + format_value(th.grad.numpy())
    assert by_name["a"].grad == "grad " + format_value(ta.grad.numpy())
    assert by_name["w"].details == ("w", "(3,)")  # the grad line replaces "grad (3,)"
    texts = svg_texts(d.svg)
    assert by_name["h"].grad in texts and by_name["h"].value in texts
    assert w.grad is not None and np.allclose(w.grad.numpy(), tw.grad.numpy())


def test_eager_grads_before_backward_and_after_accumulation():
    w = mg.tensor([1.0, -2.0], requires_grad=True)
    y = mg.sum(w * w)
    d = viz.draw(y, grads=True, renderer="builtin")
    leaf, mul = d.graph.nodes[0], d.graph.nodes[1]
    assert leaf.grad == "grad None (call backward())" and mul.grad == "grad [1, 1]"
    y.backward()
    y2 = mg.sum(w * w)
    y2.backward()  # .grad now holds twice d(y2)/dw
    d = viz.draw(y2, grads=True, renderer="builtin")
    assert d.graph.nodes[0].grad == "grad [4, -8]"
    assert any("accumulates" in note for note in d.graph.notes)


def test_torch_values_and_grads_of_leaves_and_ops():
    rng = np.random.default_rng(3)
    tw = torch.tensor(rng.normal(size=3), requires_grad=True)
    tb = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    h = torch.exp(tw) + tb
    loss = (h * h).sum()
    h.retain_grad()
    loss.backward(retain_graph=True)
    before = (tw.grad.clone(), tb.grad.clone(), h.grad.clone())
    d = viz.draw(loss, params={"w": tw, "b": tb}, values=True, grads=True, renderer="builtin")
    # drawing changed no .grad, not even of a tensor that retains its grad
    assert all(torch.equal(a, b) for a, b in zip(before, (tw.grad, tb.grad, h.grad), strict=True))
    nodes = {n.label: n for n in d.graph.nodes if n.kind == "op"}
    assert nodes["AddBackward0"].grad == "grad " + format_value(h.grad.numpy())
    assert nodes["SumBackward0"].value == "= " + format_value(loss.detach().numpy())
    (w_node,) = [n for n in d.graph.nodes if n.name == "w"]
    assert w_node.value == "= " + format_value(tw.detach().numpy())
    assert w_node.grad == "grad " + format_value(tw.grad.numpy())
    # once backward() has freed the graph, only the leaves' gradients can be shown
    loss2 = (torch.exp(tw) * 2).sum()
    loss2.backward()
    d = viz.draw(loss2, grads=True, renderer="builtin")
    assert not [n for n in d.graph.nodes if n.kind == "op" and n.grad]
    assert any("retain_graph=True" in note for note in d.graph.notes)


def test_values_need_something_that_has_values():
    g = mg.Graph()
    with g.as_default():
        mg.placeholder((2,), name="x")
    with pytest.raises(ValueError, match="values=True"):
        viz.draw(g, feed_dict={"x": [1.0, 2.0]})
    with pytest.raises(ValueError, match="not a node of this graph"):
        viz.draw(g, values=True, feed_dict={"nope": [1.0, 2.0]})
    with pytest.raises(ValueError, match="applies to a minigraph Graph"):
        viz.draw(torch.ones(2, requires_grad=True) * 2, values=True, feed_dict={})
    with pytest.raises(ValueError, match="values=/grads="):
        viz.draw(viz.DrawGraph(), values=True)


@pytest.mark.parametrize("renderer", RENDERERS)
def test_values_are_drawn_in_their_colours(renderer):
    w = mg.tensor([3.0], requires_grad=True)
    y = mg.sum(w * w * 2.0)
    y.backward()
    d = viz.draw(y, values=True, grads=True, renderer=renderer)
    (two,) = [n for n in d.graph.nodes if n.kind == "const"]
    assert two.value == "= 2" and "= 2" not in two.details  # said once, as the value
    root = ET.fromstring(d.svg)
    fills = {el.text.strip(): el.get("fill") for el in root.iter()
             if el.tag.endswith("text") and el.text and el.text.strip()}
    assert fills["grad [12]"].lower() == "#6a1b9a" and fills["= 18"].lower() == "#212121"


def test_traced_function_values_and_grads_match_its_eager_run():
    w = mg.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)

    @mg.function
    def f(x):
        return mg.sum(mg.tanh(x * w) * x)

    x0 = np.array([1.0, 2.0, -0.5])
    loss = f(mg.tensor(x0))  # traced, and differentiable through its graph
    loss.backward()
    d = viz.draw(f, values=True, grads=True, feed_dict={"x": x0}, renderer="builtin")
    got = _texts(d)
    assert got["w"] == ("= " + format_value(w.numpy()), "grad " + format_value(w.grad.numpy()))
    (root,) = [n for n in d.graph.nodes if n.value == "= " + format_value(loss.numpy())]
    assert root.grad == "grad 1"


class _Value:  # the smallest engine a lesson writes: value, grad, inputs, op
    def __init__(self, data, inputs=(), op=""):
        self.data, self.grad, self.inputs, self.op = data, 0.0, inputs, op

    def __mul__(self, other):
        return _Value(self.data * other.data, (self, other), "*")

    def __add__(self, other):
        return _Value(self.data + other.data, (self, other), "+")


@pytest.mark.parametrize("renderer", RENDERERS)
def test_graph_of_draws_your_own_nodes(renderer):
    x, w = _Value(2.0), _Value(-3.0)
    y = x * w + x * x  # x is used three times: one node, three edges out
    y.grad, x.grad, w.grad = 1.0, w.data + 2 * x.data, x.data  # by hand: dy/dx, dy/dw
    g = viz.graph_of(y, label="op", value="data", grad="grad",
                     name=lambda v: {id(x): "x", id(w): "w"}.get(id(v), ""))
    d = viz.draw(g, renderer=renderer)
    by_name = {n.details[0] if n.details else n.id: n for n in d.graph.nodes}
    assert len(d.graph.nodes) == 6  # x, w, x*w, x*x, +, and the result marker
    assert (by_name["x"].value, by_name["x"].grad) == ("= 2", "grad 1")
    assert (by_name["w"].kind, by_name["w"].grad) == ("input", "grad 2")
    assert sum(e.src == by_name["x"].id for e in d.graph.edges) == 3
    assert [n.label for n in d.graph.nodes if n.kind == "op"] == ["*", "*", "+"]
    assert "= -2" in svg_texts(d.svg)  # y = -6 + 4
    with pytest.raises(TypeError, match="attribute name or a function"):
        viz.graph_of(y, inputs=3)
