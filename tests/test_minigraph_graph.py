"""Static mode: the IR, the default graph, symbolic gradients, Sessions and the Interpreter."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import numpy as np
import pytest
from minigraph_helpers import central_difference

import course_utils.minigraph as mg
from course_utils.minigraph import session as session_module

# --- the IR -------------------------------------------------------------------------------------


def test_graph_prints_one_line_per_node_with_compact_attrs() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 3), name="x")
        w = mg.Variable(np.ones((3, 4), np.float32), name="w")
        h = mg.relu(x @ w, name="h")
        s = mg.sum(h, axis=1, name="s")
        mg.reshape(h[:, 0], (-1, 1), name="first")
        mg.mul(s, 2.0)
    assert str(g) == "\n".join([
        "%x = placeholder()  # (None, 3) float32",
        "%w = variable()  # (3, 4) float32",
        "%matmul = matmul(%x, %w)  # (None, 4) float32",
        "%h = relu(%matmul)  # (None, 4) float32",
        "%s = sum(%h, axis=1)  # (None,) float32",
        "%getitem = getitem(%h, index=[:, 0])  # (None,) float32",
        "%first = reshape(%getitem, shape=(-1, 1))  # (None, 1) float32",
        "%const = constant(value=2.0)  # () float32",
        "%mul = mul(%s, %const)  # (None,) float32",
    ])
    assert repr(s) == "<Node %s = sum(%h, axis=1)  # (None,) float32>"
    g.validate()


def test_nodes_have_exactly_the_ir_fields_and_their_source_line() -> None:
    fields = [f.name for f in dataclasses.fields(mg.Node)]
    assert fields == ["name", "op", "inputs", "attrs", "shape", "dtype", "source"]
    with mg.Graph().as_default() as g:
        x = mg.placeholder((2,), name="x")
        y = mg.exp(x)
    line = y.source.split(":")[1]
    assert y.source == f"test_minigraph_graph.py:{line}"
    assert int(line) == int(x.source.split(":")[1]) + 1
    assert (y.op, y.inputs, y.shape, y.dtype, y.graph) == ("exp", (x,), (2,), np.float32, g)


def test_names_are_unique_with_tf_style_suffixes() -> None:
    with mg.Graph().as_default() as g:
        a = mg.placeholder((), name="x")
        b = mg.placeholder((), name="x")
        c = mg.placeholder((), name="x_1")  # taken: the next free suffix
        sums = [mg.add(a, b) for _ in range(3)]
    assert [a.name, b.name, c.name] == ["x", "x_1", "x_1_1"]
    assert [s.name for s in sums] == ["add", "add_1", "add_2"]
    assert g.node("add_1") is sums[1] and len({n.name for n in g.nodes}) == len(g.nodes)
    with pytest.raises(mg.GraphError, match="no node named 'nope'"):
        g.node("nope")


def test_default_graph_stack_and_reset() -> None:
    mg.reset_default_graph()
    outer = mg.get_default_graph()
    x = mg.placeholder((), name="x")
    inner = mg.Graph()
    with inner.as_default():
        assert mg.get_default_graph() is inner
        y = mg.placeholder((), name="y")
        with pytest.raises(mg.GraphError, match="outside the block"):
            mg.reset_default_graph()
    assert x in outer and y in inner and y not in outer
    mg.reset_default_graph()
    assert mg.get_default_graph() is not outer and len(mg.get_default_graph()) == 0


@pytest.mark.parametrize("corrupt, message", [
    (lambda g: g.nodes.reverse(), "comes later"),
    (lambda g: g.nodes.append(g.nodes[0]), "used twice"),
    (lambda g: setattr(g.nodes[1], "shape", (3,)), "records"),
    (lambda g: setattr(g.nodes[1], "op", "no_such_op"), "unknown op"),
    (lambda g: g.nodes.pop(0), "not in this graph"),
])
def test_validate_rejects_each_kind_of_malformed_graph(corrupt, message) -> None:
    with mg.Graph().as_default() as g:
        mg.exp(mg.placeholder((2,), name="x"), name="y")
    g.validate()
    corrupt(g)
    with pytest.raises(mg.GraphError, match=message):
        g.validate()


def test_python_values_become_constants_with_the_dtype_they_meet() -> None:
    with mg.Graph().as_default():
        x32 = mg.placeholder((2,), "float32")
        x64 = mg.placeholder((2,), "float64")
        n = mg.placeholder((2,), "int64")
        assert (x32 * 2).dtype == np.float32 and (2.5 * x64).dtype == np.float64
        assert (n + 1).dtype == np.int64 and (n * 0.5).dtype == np.float32
        assert (x32 + np.ones(2)).dtype == np.float64  # arrays keep their dtype: numpy rules
        assert (x32 + n).dtype == np.float32  # an int operand never widens a float
        assert mg.constant([1.0, 2.0]).dtype == np.float32
        assert mg.Variable(np.zeros(2)).dtype == np.float64
        assert mg.constant(mg.tensor([1, 2])).dtype == np.int64


# --- symbolic gradients ---------------------------------------------------------------------------


def test_gradients_adds_only_needed_backward_nodes_and_none_for_unconnected() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 2), name="x")
        w = mg.Variable(np.ones((2, 1), np.float32), name="w")
        unused = mg.Variable(1.0, name="unused")
        loss = mg.mean((x @ w) ** 2, name="loss")
        before = len(g)
        dw, du = mg.gradients(loss, [w, unused])
    assert du is None
    new = g.nodes[before:]
    needed = set()
    stack = [dw]
    while stack:
        n = stack.pop()
        needed.add(n.name)
        stack.extend(n.inputs)
    assert {n.name for n in new} <= needed, "every new node feeds the gradient"
    assert all(n.source == new[0].source for n in new), "backward nodes point at mg.gradients"
    g.validate()


def test_only_a_broadcast_input_gets_its_gradient_summed_back() -> None:
    # x @ w keeps its (None, 4) shape when b is added, so only b's gradient needs a sum, even
    # though the batch size is unknown; that sum reads the run-time shape (an unbroadcast node).
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 3), name="x")
        w = mg.Variable(np.ones((3, 4), np.float32), name="w")
        b = mg.Variable(np.zeros(4, np.float32), name="b")
        dw, db = mg.gradients(mg.sum(x @ w + b), [w, b])
        init = mg.global_variables_initializer()
    assert [n.op for n in g.nodes].count("unbroadcast") == 1 and db.op == "unbroadcast"
    with mg.Session(g) as sess:
        sess.run(init)
        out_dw, out_db = sess.run([dw, db], {x: np.ones((5, 3))})
    np.testing.assert_array_equal(out_dw, np.full((3, 4), 5.0))
    np.testing.assert_array_equal(out_db, np.full(4, 5.0))


def test_gradients_sum_over_several_ys_take_grad_ys_and_pass_through_intermediates() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((3,), "float64", name="x")
        h = mg.tanh(x, name="h")
        y1, y2 = mg.sum(h * h), mg.sum(mg.exp(h))
        dh, dx = mg.gradients([y1, y2], [h, x], grad_ys=[2.0, 3.0])
    value = np.array([0.1, -0.4, 0.7])
    out_dh, out_dx = mg.Session(g).run([dh, dx], {x: value})

    def f(arrays):
        t = np.tanh(arrays[0])
        return 2.0 * np.sum(t * t) + 3.0 * np.sum(np.exp(t))

    np.testing.assert_allclose(out_dx, central_difference(f, [value], 0), rtol=1e-6)
    t = np.tanh(value)
    np.testing.assert_allclose(out_dh, 4.0 * t + 3.0 * np.exp(t))


def test_second_order_gradients_work_symbolically() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None,), "float64", name="x")
        y = mg.sum(x ** 3.0)
        (dx,) = mg.gradients(y, [x])
        (ddx,) = mg.gradients(mg.sum(dx), [x])
    np.testing.assert_allclose(mg.Session(g).run(ddx, {x: [1.0, 2.0]}), [6.0, 12.0])


# --- Sessions -----------------------------------------------------------------------------------


@pytest.fixture
def model():
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None,), name="x")
        z = mg.placeholder((None,), name="z")
        w = mg.Variable(2.0, name="w")
        h = mg.mul(x, w, name="h")
        y = mg.add(h, 1.0, name="y")
        other = mg.exp(z, name="other")
        step = mg.assign_sub(w, 0.5, name="step")
        init = mg.global_variables_initializer()
    return g, x, z, w, h, y, other, step, init


def test_run_returns_the_structure_of_the_fetches(model) -> None:
    g, x, z, w, h, y, other, step, init = model
    Pair = namedtuple("Pair", "h y")
    with mg.Session(g) as sess:
        assert sess.run(init) is None
        feed = {x: [1.0, 2.0]}
        out = sess.run({"a": [h, (y, w)], "b": Pair(h, y), "c": "y"}, feed)
    assert list(out) == ["a", "b", "c"]
    np.testing.assert_array_equal(out["a"][0], [2.0, 4.0])
    assert isinstance(out["a"][1], tuple) and float(out["a"][1][1]) == 2.0
    assert isinstance(out["b"], Pair)
    np.testing.assert_array_equal(out["b"].y, out["c"])


def test_run_prunes_to_what_the_fetches_need_and_fed_nodes_cut_the_graph(model) -> None:
    g, x, z, w, h, y, other, step, init = model
    with mg.Session(g, optimize=False) as sess:  # the optimizer would fuse h into y
        sess.run(init)
        plan = sess.plan(y, {x: [1.0]})
        assert [n.name for n in plan.nodes] == ["x", "w", "h", "const", "y"]
        assert [n.name for n in plan.outputs] == ["y"]
        # feeding an intermediate node: x and w are no longer needed, so x need not be fed
        np.testing.assert_array_equal(sess.run(y, {h: [10.0]}), [11.0])
        plan = sess.plan(y, {h: [10.0]})
        assert [n.op for n in plan.nodes] == ["placeholder", "constant", "add"]
        plan.validate()


def test_plans_are_cached_per_fetches_and_feed_keys(model) -> None:
    g, x, z, w, h, y, other, step, init = model
    with mg.Session(g) as sess:
        sess.run(init)
        for v in range(3):
            sess.run(y, {x: [float(v)]})
        assert sess.num_plans == 2  # init, y|x
        sess.run([y, h], {x: [1.0]})
        sess.run(y, {x: [1.0], z: [1.0]})
        sess.run("y", {"x": [1.0]})
        assert sess.num_plans == 4


def test_optimizer_seam_runs_once_per_plan(model, monkeypatch) -> None:
    g, x, z, w, h, y, other, step, init = model
    seen = []
    monkeypatch.setattr(session_module, "OPTIMIZER", lambda graph: seen.append(graph) or graph)
    with mg.Session(g) as sess:
        sess.run(init)
        for _ in range(3):
            sess.run(y, {x: [1.0]})
    assert len(seen) == 2
    with mg.Session(g, optimize=False) as sess:
        sess.run(init)
    assert len(seen) == 2
    with pytest.raises(mg.MinigraphError, match="unknown executor"):
        mg.Session(g, executor="tpu")


def test_variables_live_in_each_session_and_assign_ops_update_them(model) -> None:
    g, x, z, w, h, y, other, step, init = model
    a, b = mg.Session(g), mg.Session(g)
    a.run(init)
    b.run(init)
    assert float(a.run(step)) == 1.5
    a.run(step)
    assert (float(a.run(w)), float(b.run(w))) == (1.0, 2.0)
    with g.as_default():
        reset = mg.assign(w, 7.0)
        both = mg.group(step, reset)
    assert a.run(both) is None and float(a.run(w)) == 7.0  # group runs in graph order
    fetched = a.run(w)
    with pytest.raises(ValueError):
        fetched[...] = 0.0  # state comes back read-only, so it cannot be changed behind the graph
    a.close()
    with pytest.raises(mg.MinigraphError, match="closed"):
        a.run(w)


def test_initializer_covers_variables_created_before_it() -> None:
    with mg.Graph().as_default() as g:
        early = mg.Variable(1.0, name="early")
        init = mg.global_variables_initializer()
        late = mg.Variable(2.0, name="late")
    with mg.Session(g) as sess:
        sess.run(init)
        assert float(sess.run(early)) == 1.0
        with pytest.raises(mg.UninitializedVariableError, match="%late"):
            sess.run(late)


def test_feeds_are_converted_to_the_placeholder_dtype(model) -> None:
    g, x, z, w, h, y, other, step, init = model
    with mg.Session(g) as sess:
        out = sess.run(other, {z: np.zeros(2, np.float64)})  # float64 -> float32 is same kind
        assert out.dtype == np.float32
        assert sess.run(other, {"z": [0]}).dtype == np.float32  # ints may go to floats


# --- the Interpreter ----------------------------------------------------------------------------


class Recorder(mg.Interpreter):
    """An Interpreter that tracks which values are alive, as a memory profiler would."""

    def __init__(self, graph):
        super().__init__(graph)
        self.live, self.peak, self.events = set(), 0, []

    def on_alloc(self, node, value):
        self.live.add(node.name)
        self.peak = max(self.peak, len(self.live))
        self.events.append(("alloc", node.name))

    def on_free(self, node, value):
        self.live.remove(node.name)
        self.events.append(("free", node.name))


def test_interpreter_frees_each_value_after_its_last_use() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((4,), name="x")
        a = mg.exp(x, name="a")
        b = mg.tanh(a, name="b")
        c = mg.sigmoid(b, name="c")
        d = mg.add(c, x, name="d")
    g.outputs = [d]
    rec = Recorder(g)
    (out,) = rec.run({"x": np.zeros(4, np.float32)}, {})
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-np.tanh(1.0))) * np.ones(4), rtol=1e-6)
    assert rec.live == {"d"}, "only the output survives"
    assert rec.peak == 3, "a chain keeps x, the previous value and the new one alive"
    assert rec.events.index(("free", "a")) == rec.events.index(("alloc", "b")) + 1
    assert rec.events.index(("free", "x")) == rec.events.index(("alloc", "d")) + 1


def test_interpreter_rejects_unknown_ops_and_missing_feeds() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((1,), name="x")
    g.outputs = [x]
    with pytest.raises(mg.MissingFeedError, match="%x"):
        mg.Interpreter(g).run({}, {})
    x.op = "mystery"
    with pytest.raises(mg.UnknownOpError, match="mystery"):
        mg.Interpreter(g)


def test_an_impl_that_breaks_its_shape_rule_is_caught_at_that_node() -> None:
    mg.register_op(mg.Op("bad_shape_test", impl=lambda x: np.concatenate([x, x]),
                         shape_rule=mg.same_shape_rule))
    with mg.Graph().as_default() as g:
        x = mg.placeholder((2,), name="x")
        y = mg.apply("bad_shape_test", [x], name="y")
    with pytest.raises(mg.ExecutionError, match=r"%y = bad_shape_test\(%x\).*promised \(2,\)"):
        mg.Session(g).run(y, {x: [1.0, 2.0]})


def test_a_capturing_graph_records_every_op_and_lifts_outer_values() -> None:
    # The seam tracing builds on: a function body graph takes all ops and decides how to capture.
    class Body(mg.Graph):
        captures_outer = True

        def lift(self, value, weak=None):
            outer = isinstance(value, mg.Node) and value.graph is not self
            if outer or isinstance(value, mg.Tensor):
                shape, dtype = tuple(value.shape), value.dtype
                return self.add_node("placeholder", (), {"shape": shape, "dtype": dtype.name},
                                     name="captured")
            return super().lift(value, weak)

    with mg.Graph().as_default():
        outer = mg.placeholder((2,), name="outer")
    t = mg.tensor([1.0, 2.0])
    body = Body()
    with body.as_default():
        y = mg.add(outer, t, name="y")
        z = mg.exp(3.0, name="z")
    assert y.graph is body and z.graph is body
    assert [n.op for n in body.nodes] == ["placeholder", "placeholder", "add", "constant", "exp"]
    with pytest.raises(mg.GraphError, match="different graphs"):
        mg.add(outer, y)  # outside the body, mixing graphs is an error again


def test_ellipsis_indexing_matches_numpy_with_unknown_dims():
    value = np.arange(24.0).reshape(2, 3, 4)
    g = mg.Graph()
    with g.as_default():
        x = mg.placeholder((None, 3, 4), dtype="float64")
        picks = {"[..., 1:2]": x[..., 1:2], "[0, ...]": x[0, ...], "[:, ..., 2]": x[:, ..., 2]}
    expected = {"[..., 1:2]": value[..., 1:2], "[0, ...]": value[0, ...],
                "[:, ..., 2]": value[:, ..., 2]}
    with mg.Session(g) as sess:
        got = sess.run(picks, {x: value})
    for key, want in expected.items():
        np.testing.assert_array_equal(got[key], want, err_msg=key)
