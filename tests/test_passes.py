"""Graph optimization passes: each keeps results equal, never adds nodes, and does its job."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from minigraph_helpers import mlp_training_graph as course_training_graph

import course_utils.minigraph as mg
from course_utils.minigraph import passes
from course_utils.minigraph.session import prune

PASSES = [passes.fold_constants, passes.simplify, passes.eliminate_common_subexpressions,
          passes.eliminate_dead_code, passes.fuse_elementwise, passes.optimize]
MODULES = ["passes", "passes.rewrite", "passes.fold", "passes.cse", "passes.dce",
           "passes.simplify", "passes.fuse", "codegen", "memory", "profile"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(f"course_utils.minigraph.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


# --- random graphs ------------------------------------------------------------------------------
# Values of shape (N, 3), (3,) and () mixed by broadcasting; constants 0 and 1 on purpose, so that
# the simplifier's rules fire; optionally the gradients, which bring unbroadcast, broadcast_like,
# ones_like and where.

UNARY = ["neg", "tanh", "sigmoid", "relu", "identity", "exp"]
BINARY = ["add", "sub", "mul", "maximum"]
CONSTANTS = [0.0, 1.0, -1.0, 0.5, 2.0]


@st.composite
def random_graphs(draw: st.DrawFn, max_ops: int = 10) -> mg.Graph:
    """A graph with placeholders x (None, 3) and y (3,) and a few outputs."""
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 3), "float64", name="x")
        y = mg.placeholder((3,), "float64", name="y")
        pool = [x, y]

        def operand() -> mg.Node:
            kind = draw(st.sampled_from(["node", "node", "node", "scalar", "vector"]))
            if kind == "scalar":
                return mg.constant(np.float64(draw(st.sampled_from(CONSTANTS))))
            if kind == "vector":
                return mg.constant(np.array([draw(st.sampled_from(CONSTANTS)) for _ in range(3)]))
            return draw(st.sampled_from(pool))

        for _ in range(draw(st.integers(1, max_ops))):
            kind = draw(st.sampled_from(["unary", "binary", "binary", "where", "reduce", "shape"]))
            a = draw(st.sampled_from(pool))
            if kind == "unary":
                node = mg.apply(draw(st.sampled_from(UNARY)), [a])
            elif kind == "binary":
                node = mg.apply(draw(st.sampled_from(BINARY)), [operand(), operand()])
            elif kind == "where":
                node = mg.where(mg.greater(operand(), operand()), operand(), operand())
            elif kind == "reduce" and a.shape:
                # every value keeps a shape that broadcasts with (N, 3): (N|1, 3|1), (3|1,), ()
                axis = draw(st.sampled_from([None, 0, -1]))
                keep = axis == -1 and len(a.shape) == 2 or draw(st.booleans())
                node = mg.apply(draw(st.sampled_from(["sum", "mean", "max"])), [a], axis=axis,
                                keepdims=keep)
            else:
                shape_op = draw(st.sampled_from(["expand", "slice", "transpose", "cast"]))
                if shape_op == "slice" and a.shape:
                    node = a[:, 0:1] if len(a.shape) == 2 else a[0:1]
                elif shape_op == "transpose":
                    node = mg.transpose(mg.exp(mg.transpose(a)))
                elif shape_op == "cast":
                    node = mg.cast(a, draw(st.sampled_from(["float32", "float64"])))
                else:
                    node = mg.squeeze(mg.expand_dims(a, 0), 0)
            pool.append(node)
        outputs = list(dict.fromkeys(draw(st.lists(st.sampled_from(pool[2:]), min_size=1,
                                                   max_size=3))))
        if draw(st.booleans()):
            total = mg.add(mg.sum(outputs[0]), mg.sum(pool[-1]))
            outputs += [d for d in mg.gradients(total, [x, y]) if d is not None]
    g.outputs = list(dict.fromkeys(outputs))
    return g


def feeds(data: st.DataObject) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    n = data.draw(st.integers(1, 4), label="batch")
    return {"x": rng.uniform(-1.5, 1.5, (n, 3)), "y": rng.uniform(-1.5, 1.5, 3)}


def run(graph: mg.Graph, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    return mg.Interpreter(graph).run(feed, state={})


def all_values_finite(graph: mg.Graph, feed: dict[str, np.ndarray]) -> bool:
    """x*0 -> 0 and x-x -> 0 hold for finite x only (inf*0 is nan), as in every compiler."""
    everything = prune(graph, [n for n in graph.nodes if n.dtype is not None])
    return all(np.all(np.isfinite(v)) for v in run(everything, feed))


def assert_same_outputs(before: mg.Graph, after: mg.Graph, feed: dict) -> None:
    assert [n.name for n in after.outputs] == [n.name for n in before.outputs]
    for name, a, b in zip([n.name for n in before.outputs], run(before, feed), run(after, feed),
                          strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(b, a, err_msg=f"output %{name} changed")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.parametrize("a_pass", PASSES, ids=lambda p: p.__name__)
def test_every_pass_keeps_outputs_never_adds_nodes_and_leaves_a_valid_graph(a_pass,
                                                                            data) -> None:
    graph = data.draw(random_graphs(), label="graph")
    feed = feeds(data)
    assume(all_values_finite(graph, feed))
    after = a_pass(graph)
    after.validate()
    assert len(after.nodes) <= len(graph.nodes)
    assert [p.name for p in after.placeholders()] == ["x", "y"]
    assert_same_outputs(graph, after, feed)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_optimize_reaches_a_fixed_point(data) -> None:
    once = passes.optimize(data.draw(random_graphs(), label="graph"))
    twice = passes.optimize(once)
    assert str(twice) == str(once)


# --- each pass does its job ---------------------------------------------------------------------


def test_fold_constants_computes_constant_subgraphs_and_known_shapes() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((2, 3), name="x")
        c = mg.exp(mg.constant(np.array([0.0, 1.0])), name="c")
        ones = mg.ones_like(x, name="ones")  # reads only x's shape, which is known
        size = mg.size(x, axis=1, name="n")
        g.outputs = [c, mg.mul(ones, size, name="y")]
    folded = passes.fold_constants(g)
    assert {n.name: n.op for n in folded.nodes if n.name in ("c", "ones", "n", "y")} == {
        "c": "constant", "ones": "constant", "n": "constant", "y": "constant"}
    np.testing.assert_array_equal(folded.node("c").attrs["value"], np.exp([0.0, 1.0]))
    np.testing.assert_array_equal(folded.node("y").attrs["value"], np.full((2, 3), 3.0))
    assert folded.node("c").source == c.source  # a folded node still says where it came from


def test_fold_constants_leaves_unknown_shapes_state_and_failing_ops_alone() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 3), name="x")
        v = mg.Variable(np.ones(3), name="v")
        bad = mg.one_hot(mg.constant(np.array([5])), depth=2, name="bad")  # label out of range
        g.outputs = [mg.ones_like(x, name="ones"), mg.exp(v, name="ev"), bad]
    folded = passes.fold_constants(g)
    assert [folded.node(n).op for n in ("ones", "ev", "bad")] == ["ones_like", "exp", "one_hot"]
    with pytest.raises(mg.ExecutionError, match=r"while executing %bad = one_hot"):
        mg.Session(g).run(bad)  # the error is still reported when the node runs


def test_cse_merges_duplicates_commutative_pairs_and_equal_constants_only() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((3,), name="x")
        x2 = mg.placeholder((3,), name="x2")  # same attrs as x: still a different input
        v, w = mg.Variable(1.0, name="v"), mg.Variable(1.0, name="w")
        a, b = mg.exp(x, name="a"), mg.exp(x, name="b")
        s, t = mg.add(a, x2, name="s"), mg.add(x2, b, name="t")
        pos, neg = mg.constant(0.0, name="pos"), mg.constant(-0.0, name="neg")  # not equal bits
        g.outputs = [mg.add(mg.add(s, t), mg.add(mg.add(pos, neg), mg.add(v, w)), name="out")]
    merged = passes.eliminate_common_subexpressions(g)
    names = {n.name for n in merged.nodes}
    assert {"a", "s", "x", "x2", "v", "w", "pos", "neg"} <= names
    assert not {"b", "t"} & names
    assert merged.node("add").inputs == (merged.node("s"), merged.node("s"))


def test_dce_removes_unused_nodes_but_keeps_state_and_placeholders() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((3,), name="x")
        mg.placeholder((3,), name="unused_input")
        v = mg.Variable(np.zeros(3), name="v")
        mg.exp(x, name="dead")
        step = mg.assign_sub(v, mg.tanh(x, name="update"), name="step")  # a side effect
        g.outputs = [mg.neg(x, name="y")]
    kept = [n.name for n in passes.eliminate_dead_code(g).nodes]
    assert kept == ["x", "unused_input", "v", "update", "step", "y"]
    assert step.name in kept


@pytest.mark.parametrize("expr, expected", [
    (lambda x, v: x * 1.0, "x"),
    (lambda x, v: 1.0 * x, "x"),
    (lambda x, v: x + 0.0, "x"),
    (lambda x, v: 0.0 + x, "x"),
    (lambda x, v: x - 0.0, "x"),
    (lambda x, v: x / 1.0, "x"),
    (lambda x, v: x ** 1.0, "x"),
    (lambda x, v: mg.neg(mg.neg(x)), "x"),
    (lambda x, v: mg.identity(x), "x"),
    (lambda x, v: mg.cast(x, "float32"), "x"),
    (lambda x, v: mg.where(x > 0, x, x), "x"),
    (lambda x, v: mg.transpose(mg.transpose(x, (1, 0)), (1, 0)), "x"),
    (lambda x, v: mg.unbroadcast(mg.exp(v), v), "exp"),  # static shapes equal: a no-op
    (lambda x, v: mg.broadcast_like(v, v), "v"),
    (lambda x, v: mg.reshape(v, (2, 3)), "v"),
    (lambda x, v: x * 0.0, "zeros"),
    (lambda x, v: v - v, "zeros"),
])
def test_simplify_rule_fires_where_types_prove_it(expr, expected) -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((2, 3), name="x")
        v = mg.placeholder((2, 3), name="v")
        g.outputs = [mg.identity(expr(x, v), name="out")]
    out = passes.simplify(g).node("out")
    if expected == "zeros":
        assert out.inputs[0].op == "constant"
        np.testing.assert_array_equal(out.inputs[0].attrs["value"], np.zeros((2, 3)))
    else:
        assert out.inputs[0].name == expected


@pytest.mark.parametrize("expr", [
    lambda x, i: x * mg.constant(np.ones((4, 1, 3))),  # the 1s broadcast x to a larger shape
    lambda x, i: i * 1.0,  # int * float is float: x itself would be an int
    lambda x, i: x * 0.0,  # zeros of shape (None, 3) cannot be a constant
    lambda x, i: mg.unbroadcast(x, x),  # (None, 3) vs (None, 3): equal at run time? unknown
    lambda x, i: x * mg.constant(np.array([1.0, 2.0, 1.0])),  # not all ones
])
def test_simplify_leaves_what_it_cannot_prove(expr) -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 3), name="x")
        i = mg.placeholder((None, 3), "int64", name="i")
        g.outputs = [mg.identity(expr(x, i), name="out")]
    assert passes.simplify(g).node("out").inputs[0].op not in ("placeholder", "constant")


def test_fusion_turns_a_chain_into_one_node_with_an_inplace_kernel() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 4), "float64", name="x")
        w = mg.placeholder((4, 4), "float64", name="w")
        h = mg.matmul(x, w, name="h")
        a = mg.tanh(h * 2.0 + 1.0, name="a")
        g.outputs = [mg.relu(a, name="y"), mg.sum(h, name="s")]  # h is also used outside
    fused = passes.fuse_elementwise(g)
    assert [n.op for n in fused.nodes] == ["placeholder", "placeholder", "matmul", "fused", "sum"]
    y = fused.node("y")
    assert y.inputs == (fused.node("h"),) and y.source == g.node("y").source
    assert str(y.attrs["program"]) == "lambda a: relu(tanh(add(mul(a, 2.0), 1.0)))"
    assert y.attrs["program"].source.count("out=") == 3  # one array for four steps
    feed = {"x": np.random.default_rng(0).normal(size=(5, 4)), "w": np.eye(4)}
    assert_same_outputs(g, fused, feed)


def test_fusion_stops_at_values_needed_outside_and_at_outputs() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((3,), name="x")
        a = mg.exp(x, name="a")
        b = mg.neg(a, name="b")  # an output: must keep its own value
        c = mg.tanh(b, name="c")
        d = mg.sum(a, name="d")  # a is needed outside the chain
        g.outputs = [b, mg.sigmoid(c, name="e"), d]
    fused = passes.fuse_elementwise(g)
    assert [(n.name, n.op) for n in fused.nodes] == [
        ("x", "placeholder"), ("a", "exp"), ("b", "neg"), ("d", "sum"), ("e", "fused")]



def test_fusion_leaves_a_chain_of_identities_alone() -> None:
    """identity(identity(x)) names x twice and computes nothing: no kernel to build (a fused
    node with no steps would have no result; hypothesis found it)."""
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 3), "float64", name="x")
        g.outputs = [mg.identity(mg.identity(x, name="i1"), name="i2")]
    fused = passes.fuse_elementwise(g)
    assert [(n.name, n.op) for n in fused.nodes] == [
        ("x", "placeholder"), ("i1", "identity"), ("i2", "identity")]
    value = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(mg.Session(fused, optimize=False).run(fused.outputs[0],
                                                                         {"x": value}), value)

# --- the whole optimizer on gradient graphs and in Sessions -------------------------------------


def mlp_training_graph() -> tuple[mg.Graph, list[mg.Node], mg.Node]:
    """The course MLP's training step: the graph, its fetches (loss, train) and its initializer."""
    g, n = course_training_graph(lr=0.5)
    return g, [n["loss"], n["train"]], n["init"]


def test_optimize_shrinks_the_mlp_training_step_by_a_quarter_and_keeps_its_state() -> None:
    g, fetches, _ = mlp_training_graph()
    before = prune(g, fetches, ["x", "labels"])
    after = passes.optimize(before)
    after.validate()
    assert len(after.nodes) <= 0.75 * len(before.nodes), (len(before.nodes), len(after.nodes))
    assert [n.name for n in after.outputs] == ["loss", "train"]
    for op in ("placeholder", "variable", "assign_sub", "group"):
        assert ([n.name for n in after.nodes if n.op == op]
                == [n.name for n in before.nodes if n.op == op])
    assert sum(n.op == "fused" for n in after.nodes) >= 3


def test_optimize_with_fetches_prunes_to_them() -> None:
    g, (loss, _), _ = mlp_training_graph()
    after = passes.optimize(g, loss)
    assert [n.name for n in after.outputs] == ["loss"]
    assert not any(n.op in ("assign_sub", "group", "initializer") for n in after.nodes)


def test_sessions_optimize_by_default_and_can_be_told_not_to() -> None:
    g, fetches, init = mlp_training_graph()
    feed = {"x": np.zeros((4, 2)), "labels": np.zeros(4, np.int64)}
    with mg.Session(g) as fast, mg.Session(g, optimize=False) as plain:
        assert any(n.op == "fused" for n in fast.plan(fetches, feed).nodes)
        assert not any(n.op == "fused" for n in plain.plan(fetches, feed).nodes)
