"""Codegen: generated Python equals the Interpreter, reads as plain numpy, and reports errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_passes import all_values_finite, feeds, mlp_training_graph, random_graphs, run

import course_utils.minigraph as mg
from course_utils.data import spiral
from course_utils.minigraph import passes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.parametrize("optimized", [False, True], ids=["plain", "optimized"])
def test_generated_code_gives_the_interpreters_results_bit_for_bit(optimized, data) -> None:
    graph = data.draw(random_graphs(), label="graph")
    feed = feeds(data)
    assume(all_values_finite(graph, feed))
    if optimized:
        graph = passes.optimize(graph)
    expected = run(graph, feed)
    got = mg.codegen(graph).run(feed, state={})
    for e, g, node in zip(expected, got, graph.outputs, strict=True):
        assert isinstance(g, np.ndarray) and (g.dtype, g.shape) == (e.dtype, e.shape), node.name
        np.testing.assert_array_equal(g, e, err_msg=f"%{node.name}")


def test_source_is_deterministic_and_calls_numpy_directly() -> None:
    sources = []
    for _ in range(2):  # two separate builds of the same model
        g, fetches, _ = mlp_training_graph()
        plan = passes.optimize(g, fetches)
        sources.append(mg.codegen(plan).source)
    assert sources[0] == sources[1]
    source = sources[0]
    assert source.startswith("def forward(x, labels, state):\n")
    assert "    matmul = np.matmul(x, w0)\n" in source
    assert "    add = np.add(matmul, b0, out=matmul); del matmul\n" in source  # reuses a buffer
    assert "_assign_sub(state, 'w0', mul_1); del mul_1\n" in source
    assert "OPS" not in source and "run_node" not in source  # no per-node dispatch
    assert source.endswith("    return [np.asarray(loss), train]")
    # every line computes one value and deletes the ones it was the last to use
    body = source.splitlines()[1:-1]
    computed = [line.split(" = ")[0].strip() for line in body if " = " in line]
    deleted = [name for line in body if "; del " in line
               for name in line.split("; del ")[1].split(", ")]
    assert len(deleted) == len(set(deleted)) and set(deleted) <= set(computed)


def test_names_that_are_not_python_variables_are_renamed() -> None:
    with mg.Graph().as_default() as g:
        a = mg.placeholder((2,), name="lambda")
        b = mg.placeholder((2,), name="np")
        g.outputs = [mg.add(a, b, name="state"), mg.exp(a, name="conform")]
    f = mg.codegen(g)
    assert f.source.splitlines()[0] == "def forward(lambda_1, np_1):"
    out = f(np.ones(2), np.ones(2))
    np.testing.assert_array_equal(out[0], [2.0, 2.0])
    np.testing.assert_allclose(out[1], np.exp([1.0, 1.0]).astype(np.float32))


def test_codegen_takes_inputs_and_outputs_like_a_session_run() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None,), name="x")
        h = mg.exp(x, name="h")
        y = mg.add(h, 1.0, name="y")
    f = mg.codegen(g, inputs=[h], outputs=[y])  # feed h: x is not needed
    assert f.inputs == ["h"] and f.outputs == ["y"]
    np.testing.assert_array_equal(f(np.array([1.0, 2.0], np.float32)), [2.0, 3.0])
    with pytest.raises(mg.MissingFeedError, match="need placeholder %x"):
        mg.codegen(g, inputs=[], outputs=[y])
    with pytest.raises(mg.GraphError, match="pass outputs"):
        mg.codegen(g)


# --- errors name the node, in the interpreter and in generated code -----------------------------


def _boom(x):
    raise ValueError("the impl failed")


mg.register_op(mg.Op("boom", _boom, mg.same_shape_rule, doc="always fails"), replace=True)
mg.register_op(mg.Op("boom_elementwise", _boom, mg.same_shape_rule, elementwise=True,
                     doc="always fails, and may be fused"), replace=True)


@pytest.mark.parametrize("executor", ["interpreter", "codegen"])
@pytest.mark.parametrize("optimize", [False, True])
def test_a_failing_op_is_reported_as_the_node_and_the_line_that_defined_it(executor,
                                                                          optimize) -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((3,), name="x")
        bad = mg.apply("boom", [mg.exp(x)], name="bad")
        y = mg.neg(bad, name="y")
    line = bad.source
    assert line.startswith("test_codegen.py:")
    with (mg.Session(g, optimize=optimize, executor=executor) as sess,
          pytest.raises(mg.ExecutionError) as info):
        sess.run(y, {x: np.ones(3)})
    message = str(info.value)
    assert message.startswith(f"while executing %bad = boom(%exp) defined at {line}: ")
    assert message.endswith("ValueError: the impl failed")
    assert isinstance(info.value.__cause__, ValueError)


@pytest.mark.parametrize("executor", ["interpreter", "codegen"])
def test_a_failure_inside_a_fused_kernel_names_the_fused_node(executor) -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None,), name="x")
        y = mg.tanh(mg.apply("boom_elementwise", [mg.exp(x)]), name="y")
    with mg.Session(g, executor=executor) as sess:
        assert sess.plan(y, {x: [1.0]}).node("y").op == "fused"
        with pytest.raises(mg.ExecutionError) as info:
            sess.run(y, {x: [1.0]})
    assert str(info.value) == (f"while executing %y = fused(%x, program=lambda a: tanh("
                               f"boom_elementwise(exp(a)))) defined at {y.source}: ValueError: "
                               f"the impl failed")


@pytest.mark.parametrize("executor", ["interpreter", "codegen"])
def test_uninitialized_variables_give_the_same_message_in_both_executors(executor) -> None:
    with mg.Graph().as_default() as g:
        w = mg.Variable(np.ones(2), name="w")
        y = mg.exp(w, name="y")
        step = mg.assign_sub(w, np.ones(2), name="step")
    messages = []
    for fetch in (y, step, w):
        with (mg.Session(g, executor=executor) as sess,
              pytest.raises(mg.UninitializedVariableError) as info):
            sess.run(fetch)
        messages.append(str(info.value))
    assert "read by %y = exp(%w)" in messages[0]
    assert "read by %step = assign_sub(%w, %const)" in messages[1]
    assert messages[2].startswith("variable %w (defined at test_codegen.py:")
    assert "sess.run(init)" in messages[2]


# --- Sessions run generated code -----------------------------------------------------------------


def test_all_four_ways_to_run_a_session_train_the_same_curve_bit_for_bit() -> None:
    X, y = spiral(n_per_class=64, seed=1)
    curves = {}
    for optimize in (False, True):
        for executor in ("interpreter", "codegen"):
            g, (loss, train), init = mlp_training_graph()
            with mg.Session(g, optimize=optimize, executor=executor) as sess:
                sess.run(init)
                feed = {"x": X, "labels": y}
                curves[optimize, executor] = [float(sess.run([loss, train], feed)[0])
                                              for _ in range(40)]
                final = sess.run(["w0", "b2"])
            assert all(not a.flags.writeable for a in final)  # Variables hold read-only arrays
    reference = curves[False, "interpreter"]
    assert reference[-1] < 0.5 * reference[0]  # it learns
    assert all(curve == reference for curve in curves.values()), curves


def test_codegen_session_updates_state_and_caches_plans() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None,), name="x")
        w = mg.Variable(2.0, name="w")
        y = mg.mul(x, w, name="y")
        step = mg.assign_sub(w, 0.5)
        init = mg.global_variables_initializer()
    with mg.Session(g, executor="codegen") as sess:
        sess.run(init)
        assert float(sess.run(step)) == 1.5
        np.testing.assert_array_equal(sess.run(y, {x: [2.0]}), [3.0])
        sess.run(y, {x: [1.0]})
        assert sess.num_plans == 3
        with pytest.raises(mg.FeedError):
            sess.run(y, {x: [[1.0]]})
