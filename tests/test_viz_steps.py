"""viz.step_through: one frame per forward step and per backward step, checked against facts
that do not come from the step-through itself.

- how many frames: the nodes a run computes, plus the seed and one vjp per node that receives
  a gradient (counted here from the graph / the tape);
- what the last frame shows: the values of a numpy evaluation and the gradients of PyTorch and
  of minigraph's own ``mg.gradients`` / ``backward()``;
- a value used twice shows a running sum whose parts add up to PyTorch's gradient;
- every frame has the same layout (nothing moves), and the same call gives the same bytes;
- the notebook view: text/plain and text/html always, a widget in a kernel.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import course_utils.minigraph as mg
from course_utils import viz
from course_utils.viz import format_value
from course_utils.viz import steps as steps_module

torch = pytest.importorskip("torch")
needs_dot = pytest.mark.skipif(not shutil.which("dot"), reason="Graphviz `dot` is not on PATH")
RENDERERS = ["builtin", pytest.param("graphviz", marks=needs_dot)]


def _graph(rng):
    """loss = sum(tanh(h) * h), h = x * w: h is used twice (two gradient contributions)."""
    g = mg.Graph()
    w0 = rng.normal(size=3)
    with g.as_default():
        x = mg.placeholder((3,), "float64", name="x")
        w = mg.Variable(w0, name="w")
        h = mg.mul(x, w, name="h")
        a = mg.tanh(h, name="a")
        mg.sum(mg.mul(a, h, name="ah"), name="loss")
    return g, w0


def _torch_reference(x0, w0):
    tx, tw = torch.tensor(x0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    th = tx * tw
    ta = torch.tanh(th)
    tah = ta * th
    for t in (th, ta, tah):
        t.retain_grad()
    tah.sum().backward()
    return {"x": tx, "w": tw, "h": th, "a": ta, "ah": tah}


@pytest.mark.parametrize("renderer", RENDERERS)
def test_graph_frames_count_values_and_grads(renderer):
    rng = np.random.default_rng(0)
    g, w0 = _graph(rng)
    x0 = rng.normal(size=3)
    st = viz.step_through(g, feed_dict={"x": x0}, renderer=renderer)

    # frames: every node once forward; the seed; one vjp per op node between x/w and the loss
    n = len(g.nodes)
    ops_with_grads = [node for node in g.nodes if node.op not in ("placeholder", "variable")]
    assert len(st) == n + 1 + len(ops_with_grads)
    assert [f.kind for f in st.frames] == ["forward"] * n + ["backward"] * (len(st) - n)
    assert [f.active for f in st.frames[:n]] == [node.name for node in g.nodes]  # graph order
    assert [f.active for f in st.frames[n:]] == ["loss", "loss", "ah", "a", "h"]

    # forward frame k knows exactly the first k+1 values (the graph's order: inputs first)
    for k, f in enumerate(st.frames[:n]):
        assert list(f.values) == [n.name for n in g.nodes[: k + 1]] and not f.grads
    last = st.frames[-1]
    ref = _torch_reference(x0, w0)
    for name, t in ref.items():
        assert last.values[name] == "= " + format_value(t.detach().numpy()), name
        assert last.grads[name] == "grad " + format_value(t.grad.numpy()), name
    assert last.grads["loss"] == "grad 1"
    # the same numbers as draw(), whose gradients come from mg.gradients
    d = viz.draw(g, values=True, grads=True, feed_dict={"x": x0}, renderer="builtin")
    assert {n.id: n.grad for n in d.graph.nodes if n.grad} == last.grads
    assert all("<svg" in f.svg[:400] for f in st.frames)


def test_a_value_used_twice_shows_a_running_sum():
    rng = np.random.default_rng(1)
    g, w0 = _graph(rng)
    x0 = rng.normal(size=3)
    st = viz.step_through(g, feed_dict={"x": x0}, renderer="builtin")
    ref = _torch_reference(x0, w0)
    h, a = ref["h"].detach().numpy(), ref["a"].detach().numpy()
    seen = [f.grads["h"] for f in st.frames if "h" in f.grads]
    # first the direct term of d(a*h)/dh = a, then plus the path through tanh: (1 - a^2) * h
    assert seen[0] == "grad " + format_value(a)
    assert seen[-1] == "grad " + format_value(a + (1 - a ** 2) * h)
    assert seen[-1] == "grad " + format_value(ref["h"].grad.numpy())


def test_eager_tape_frames_against_torch_and_backward():
    rng = np.random.default_rng(2)
    x0, w0 = rng.normal(size=(2, 3)), rng.normal(size=3)
    x, w = mg.tensor(x0), mg.tensor(w0, requires_grad=True)
    h = x * w
    loss = mg.sum(mg.tanh(h) * h)
    st = viz.step_through(loss, params={"x": x, "w": w}, renderer="builtin")
    tape = viz.draw(loss, params={"x": x, "w": w}, renderer="builtin").graph
    n_nodes = len(tape.nodes) - 1  # less the "tensor" output marker
    n_ops = sum(n.kind == "op" for n in tape.nodes)
    assert (len(st), st.n_forward, st.n_backward) == (n_nodes + 1 + n_ops, n_nodes, 1 + n_ops)
    assert st.frames[0].caption == "forward 1/6: x → " + format_value(x0)
    assert "vjp of mul → grads of x, w" not in st.text()  # x needs no gradient: not sent one
    assert "vjp of mul → grads of w" in st.text()
    loss.backward()  # minigraph's own backward agrees with the walk, and ran after it
    (w_id,) = [n.id for n in tape.nodes if n.details[:1] == ("w",)]
    assert st.frames[-1].grads[w_id] == "grad " + format_value(w.grad.numpy())
    assert st.frames[0].grads == {}


@pytest.mark.parametrize("renderer", RENDERERS)
def test_every_frame_has_one_layout_and_the_same_bytes_twice(renderer):
    x = mg.tensor([1.0, -2.0], requires_grad=True)
    loss = mg.sum(mg.tanh(x * 3.0) * x)
    st = viz.step_through(loss, renderer=renderer)
    again = viz.step_through(loss, renderer=renderer)
    (three,) = [n for n in st.graph.nodes if n.kind == "const"]
    assert three.value == "= 3" and "= 3" not in three.details  # said once, as its value
    assert [f.svg for f in st.frames] == [f.svg for f in again.frames]
    assert st.text() == again.text() and st.html() == again.html()

    def geometry(svg: str) -> list[str]:  # every box and ellipse, and the picture's size
        shapes = re.findall(r"<(?:rect|ellipse|polygon)[^>]*?(?:x|cx|points)=\"[^\"]+\"[^>]*>",
                            svg)
        size = re.search(r'<svg[^>]*width="([^"]+)"[^>]*height="([^"]+)"', svg).groups()
        keep = r"(?<![-\w])(?:x|y|cx|cy|rx|ry|width|height|points)=\"[^\"]+\""
        return [size] + [" ".join(re.findall(keep, s)) for s in shapes]

    first = geometry(st.frames[0].svg)
    assert all(geometry(f.svg) == first for f in st.frames[1:])
    if renderer == "graphviz":  # no overlays: the filmstrip holds one image per frame
        assert st.html().count("<img ") == len(st) and not st.base
    # the highlighted node is the active one, in every frame
    for f in st.frames:
        assert f.svg.count('stroke-width="2"') == 1 or renderer == "graphviz"


def test_notebook_views(monkeypatch):
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    loss = mg.sum(x * x)
    st = viz.step_through(loss)
    bundle = st._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}  # no kernel here: no widget
    assert bundle["text/plain"].splitlines()[0] == (
        "step_through: 6 frames of minigraph eager tape (grad_fn): 3 forward steps, "
        "then 3 backward steps")  # x, mul(x, x), sum; the seed, the vjps of sum and mul
    html = bundle["text/html"]
    assert html.count("<img ") == 1 and "<svg" not in html  # one contact sheet, as an image
    sheet = st.sheet()
    assert sheet.count('<use href="#bare-graph"/>') == len(st)  # the graph once, N overlays
    assert all(f.caption.split(":")[0] in sheet for f in st.frames)
    pytest.importorskip("ipywidgets")
    monkeypatch.setattr(steps_module, "_in_kernel", lambda: True)
    bundle = st._repr_mimebundle_()
    view = bundle["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == st.widget().model_id
    head, controls, view = st.widget().children
    play, slider = controls.children
    assert (slider.min, slider.max, play.max) == (0, len(st) - 1, len(st) - 1)
    bare, stack = view.children  # each frame's overlay laid over one picture of the graph
    assert len(stack.children) == len(st) and stack.selected_index == 0
    from ipywidgets.widgets import widget, widget_link

    links = [w for w in widget._instances.values() if isinstance(w, widget_link.Link)]
    linked = {(lk.source[0].model_id, lk.source[1], lk.target[0].model_id, lk.target[1])
              for lk in links}
    assert (play.model_id, "value", slider.model_id, "value") in linked
    assert (slider.model_id, "value", stack.model_id, "selected_index") in linked
    # an overlay holds what its frame adds; the bare graph none of it
    last = st.frames[-1]
    assert all(text in last.overlay for text in last.grads.values())
    assert not any(text in st.base for text in last.grads.values())
    assert len(last.overlay) < len(last.svg) / 2
    assert "text/html" in bundle and "text/plain" in bundle  # nbval compares these
    assert viz.step_through(loss, widget=False)._repr_mimebundle_().keys() == {
        "text/plain", "text/html"}


def test_backward_false_save_and_errors(tmp_path):
    g, _ = _graph(np.random.default_rng(3))
    st = viz.step_through(g, feed_dict={"x": np.ones(3)}, backward=False)
    assert st.n_backward == 0 and len(st) == len(g.nodes)
    page = st.save(tmp_path / "steps.html").read_text()
    assert page.count("<img ") == 1 and page.startswith("<!DOCTYPE html>")
    with pytest.raises(ValueError, match=r"\.html"):
        st.save(tmp_path / "steps.svg")
    with pytest.raises(TypeError, match="minigraph"):
        viz.step_through(torch.ones(2, requires_grad=True) * 2)
    with pytest.raises(ValueError, match=r"y\.sum\(\)"):
        viz.step_through(mg.tensor([1.0, 2.0], requires_grad=True) * 2.0)
    with pytest.raises(ValueError, match="feed_dict"):
        viz.step_through(g)  # the loss needs x
    with pytest.raises(ValueError, match="rankdir"):
        viz.step_through(g, feed_dict={"x": np.ones(3)}, rankdir="BT")
    long = mg.tensor([1.0], requires_grad=True)
    for _ in range(steps_module.MAX_NODES):
        long = long * 1.0
    with pytest.raises(ValueError, match="smaller piece"):
        viz.step_through(mg.sum(long))


def test_through_a_cond_the_branch_that_ran_is_differentiated():
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder((2,), "float64", name="x")
        w = mg.Variable(np.array([0.5, -1.0]), name="w")
        h = mg.mul(x, w, name="h")
        y = mg.cond(mg.sum(h) > 0, lambda: h * 2.0, lambda: mg.tanh(h))
        loss = mg.sum(y * h, name="loss")
    frames = {}
    for x0 in ([1.0, 2.0], [3.0, 0.5]):  # sum(h) < 0: the tanh branch; > 0: the doubling one
        frames[tuple(x0)] = viz.step_through(g, feed_dict={"x": x0}).frames[-1]
    with g.as_default():  # after the step-throughs: they must not have needed these nodes
        (dw,) = mg.gradients(loss, [w])
        init = mg.global_variables_initializer()
    sess = mg.Session(g)
    sess.run(init)
    for x0, last in frames.items():
        assert last.grads["w"] == "grad " + format_value(sess.run(dw, feed_dict={x: x0}))
    assert frames[(1.0, 2.0)].grads["w"] != frames[(3.0, 0.5)].grads["w"]


# ---------------------------------------------------------------------------------------------
# A graph of the caller's own: any objects with op, inputs and value (or values=)


class _Plain:
    """A node of a hand-built graph: nothing but attributes."""

    def __init__(self, op, inputs=(), value=None, name=None):
        self.op, self.inputs, self.value, self.name = op, list(inputs), value, name


_PLAIN_VJP = {  # lesson 01's convention: (g, out, *inputs) -> one gradient per input
    "mul": lambda g, out, x, y: (g * y, g * x),
    "tanh": lambda g, out, x: (g * (1.0 - out * out),),
    "sum": lambda g, out, x: (np.broadcast_to(g, np.shape(x)).copy(),),
}


def _plain_graph(x0):
    """loss = sum(tanh(x) * x): x used twice, values computed here with numpy."""
    x = _Plain("placeholder", value=x0, name="x")
    a = _Plain("tanh", [x], np.tanh(x0), "a")
    ax = _Plain("mul", [a, x], np.tanh(x0) * x0, "ax")
    return x, a, ax, _Plain("sum", [ax], np.sum(np.tanh(x0) * x0), "loss")


def test_own_graph_forward_and_vjp_walk_against_numpy():
    x0 = np.array([0.3, -1.2, 2.0])
    x, a, ax, loss = _plain_graph(x0)
    st = viz.step_through(loss, vjp=_PLAIN_VJP)
    # forward: one frame per node, inputs first, values as numpy computes them
    assert st.n_forward == 4
    ids = {n.id: n.name for n in st.graph.nodes}
    forward = [f for f in st.frames if f.kind == "forward"]
    assert [ids[f.active] for f in forward] == ["x", "a", "ax", "loss"]
    last = forward[-1].values
    by_name = {ids[k]: v for k, v in last.items()}
    assert by_name["loss"] == "= " + format_value(np.sum(np.tanh(x0) * x0))
    assert by_name["a"] == "= " + format_value(np.tanh(x0))
    # backward: seed, then one vjp per non-leaf node the loss reaches (loss, ax, a)
    assert st.n_backward == 4
    final = {ids[k]: v for k, v in st.frames[-1].grads.items()}
    dx = np.tanh(x0) + x0 * (1 - np.tanh(x0) ** 2)  # analytic d loss / d x
    assert final["x"] == "grad " + format_value(dx)
    assert final["a"] == "grad " + format_value(x0)
    # x gets two contributions: after the mul's rule only g * a, then the sum with tanh's
    after_mul = {ids[k]: v for k, v in st.frames[6].grads.items()}
    assert after_mul["x"] == "grad " + format_value(np.tanh(x0))
    assert "vjp of ax → grads of a, x" in st.frames[6].caption


def test_own_graph_final_gradients_and_values_mapping():
    x0 = np.array([0.5, 1.5])
    x, a, ax, loss = _plain_graph(x0)
    for n in (x, a, ax, loss):
        n.value = None  # values= wins over the attribute
    values = {x: x0, a: np.tanh(x0), ax: np.tanh(x0) * x0, loss: np.sum(np.tanh(x0) * x0)}
    dx = np.tanh(x0) + x0 * (1 - np.tanh(x0) ** 2)
    grads = {loss: 1.0, ax: np.ones(2), a: x0, x: dx}
    st = viz.step_through(loss, values=values, grads=grads)
    back = [f for f in st.frames if f.kind == "backward"]
    names = {n.id: n.name for n in st.graph.nodes}
    assert [names[f.active] for f in back] == ["loss", "ax", "a", "x"]
    assert back[-1].grads[back[-1].active] == "grad " + format_value(dx)
    with pytest.raises(ValueError, match="vjp= .* or grads="):
        viz.step_through(loss, values=values, grads=grads, vjp=_PLAIN_VJP)
    with pytest.raises(ValueError, match="no value for node 'a'"):
        viz.step_through(loss, values={x: x0})
    with pytest.raises(ValueError, match="no rule for op 'tanh'"):
        viz.step_through(loss, values=values, vjp={"sum": _PLAIN_VJP["sum"],
                                                   "mul": _PLAIN_VJP["mul"]})
    with pytest.raises(ValueError, match="one number"):
        viz.step_through(ax, values=values, vjp=_PLAIN_VJP)


def _lesson01_engine():
    """Lesson 01's own Node, apply, IMPL, VJP, evaluate and backprop, run from the notebook."""
    import contextlib
    import io
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).parents[1] / "notebooks" / "01_computation_graphs.ipynb")
                    .read_text(encoding="utf-8"))
    wanted = ["l01-node", "l01-byhand", "l01-topo", "l01-impl", "l01-impl2", "l01-operators",
              "l01-apply", "l01-opfns", "l01-rebuild", "l01-vjp", "l01-vjp-course", "l01-apply2",
              "l01-backprop"]
    cells = {c.get("id"): "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"}
    env: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for cell_id in wanted:
            exec(compile(cells[cell_id], cell_id, "exec"), env)  # noqa: S102 (our own notebook)
    return env


def test_lessons_own_engine_steps_like_its_backprop():
    e = _lesson01_engine()
    rng = np.random.default_rng(3)
    X, W, B = (e["placeholder"](n) for n in "XWB")
    H = e["tanh"](X @ W + B)
    loss = e["reduce_sum"](H * H)
    feed = {X: rng.normal(size=(4, 3)), W: rng.normal(size=(3, 2)), B: rng.normal(size=(2,))}
    values = e["evaluate"]([loss], feed)
    st = viz.step_through(loss, values=values, vjp=e["VJP"])
    nodes = e["topo_order"]([loss])
    assert st.n_forward == len(nodes)
    # the last frame's gradients are numpy's, for the placeholders
    Hv = np.tanh(feed[X] @ feed[W] + feed[B])
    dpre = 2 * Hv * (1 - Hv ** 2)
    expect = {"X": dpre @ feed[W].T, "W": feed[X].T @ dpre, "B": dpre.sum(axis=0)}
    final = st.frames[-1].grads
    ids = {n.name: n.id for n in st.graph.nodes}
    for name, g in expect.items():
        assert final[ids[name]] == "grad " + format_value(g), name
    # and the same texts as the learner's own backprop, node by node
    grads = e["backprop"](loss, values)
    for n in nodes:
        if n in grads:
            assert final[ids[n.name]] == "grad " + format_value(grads[n]), n.name
    # one backward frame for the seed and one per node whose rule backprop runs
    assert st.n_backward == 1 + sum(1 for n in nodes if n.inputs and n in grads)
    # a final-gradients view of backprop's result shows the same numbers
    st2 = viz.step_through(loss, values=values, grads=grads)
    assert {k: v for k, v in st2.frames[-1].grads.items()} == final
