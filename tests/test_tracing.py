"""Tracing: mg.function keeps one graph per signature, captures by reference, and differentiates.

References: the same Python function run eagerly (forward and tape gradients), and central
differences in float64.
"""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from minigraph_helpers import central_difference, values

import course_utils.minigraph as mg
from course_utils.minigraph.tracing import FuncGraph, TensorSpec

# --- traced == eager, on a family of functions ----------------------------------------------------

UNARY = {"tanh": mg.tanh, "sigmoid": mg.sigmoid, "relu": mg.relu, "neg": mg.neg,
         "square": lambda a: a * a, "exp": lambda a: mg.exp(a * 0.5)}
BINARY = {"add": mg.add, "sub": mg.sub, "mul": mg.mul, "maximum": mg.maximum,
          "matmul": lambda a, b: a @ mg.transpose(b) @ a}


def program(data: st.DataObject) -> list[tuple[str, tuple[int, ...]]]:
    """A random straight-line program over values 0 (the input x) and 1 (the captured w)."""
    steps = []
    for k in range(data.draw(st.integers(1, 6), label="length")):
        if data.draw(st.booleans(), label="unary"):
            steps.append((data.draw(st.sampled_from(sorted(UNARY))), (data.draw(
                st.integers(0, k + 1)),)))
        else:
            steps.append((data.draw(st.sampled_from(sorted(BINARY))),
                          tuple(data.draw(st.integers(0, k + 1)) for _ in range(2))))
    return steps


def run_program(steps: list, x: object, w: object) -> object:
    vals = [x, w]
    for name, args in steps:
        fn = UNARY.get(name) or BINARY[name]
        vals.append(fn(*(vals[i] for i in args)))
    return mg.sum(vals[-1] * vals[-2])


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_traced_equals_eager_forward_and_gradient(data: st.DataObject) -> None:
    steps = program(data)
    n = data.draw(st.integers(1, 3), label="n")
    x0, w0 = values(data, (n, n)), values(data, (n, n))

    x, w = mg.tensor(x0, requires_grad=True), mg.tensor(w0, requires_grad=True)
    eager = run_program(steps, x, w)
    eager.backward()

    traced = mg.function(lambda x: run_program(steps, x, w_traced))
    w_traced = mg.tensor(w0, requires_grad=True)
    xt = mg.tensor(x0, requires_grad=True)
    out = traced(xt)
    out.backward()

    np.testing.assert_allclose(out.numpy(), eager.numpy(), rtol=1e-12)
    for got, want in [(xt.grad, x.grad), (w_traced.grad, w.grad)]:
        assert (got is None) == (want is None)  # an unused input gets no gradient in both
        if want is not None:
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
    assert out.grad_fn == "call_<lambda>" and traced.trace_count == 1
    traced.get_graph(xt).validate()


def test_gradient_of_a_traced_function_equals_central_differences() -> None:
    rng = np.random.default_rng(0)
    w = mg.tensor(rng.normal(size=(3, 2)), requires_grad=True)
    b = mg.tensor(rng.normal(size=2), requires_grad=True)

    @mg.function
    def loss(x, labels):
        return mg.mean(mg.cross_entropy(mg.tanh(x @ w + b), labels))

    x0, labels = rng.normal(size=(4, 3)), mg.tensor([0, 1, 1, 0])
    x = mg.tensor(x0, requires_grad=True)
    loss(x, labels).backward()

    def numeric(arrays: list[np.ndarray]) -> float:
        with mg.no_grad():
            w_, b_ = mg.tensor(arrays[1]), mg.tensor(arrays[2])
            return float(mg.mean(mg.cross_entropy(mg.tanh(mg.tensor(arrays[0]) @ w_ + b_),
                                                  labels)).numpy())

    arrays = [x0, w.numpy().copy(), b.numpy().copy()]
    for i, got in enumerate([x.grad, w.grad, b.grad]):
        np.testing.assert_allclose(got.numpy(), central_difference(numeric, arrays, i),
                                   rtol=1e-6, atol=1e-8)


def test_one_tape_entry_whose_backward_graph_is_built_once() -> None:
    w = mg.tensor(np.ones(3), requires_grad=True)
    f = mg.function(lambda x: mg.sum(mg.exp(x * w)))
    x = mg.tensor(np.array([0.5, 1.0, -1.0]))
    y = f(x)
    assert y.grad_fn == "call_<lambda>" and y.is_leaf is False
    concrete = f.get_concrete_function(x)
    y.backward()
    first = concrete.backward_graph(0)
    f(x).backward()  # a second tape entry, the same cached backward graph
    assert concrete.backward_graph(0) is first
    np.testing.assert_allclose(w.grad.numpy(), 2 * x.numpy() * np.exp(x.numpy()))  # accumulated
    with mg.no_grad():
        assert not f(x).requires_grad


def test_changing_a_captured_tensor_between_call_and_backward_is_caught() -> None:
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    f = mg.function(lambda x: mg.sum(x * w))
    y = f(mg.tensor([3.0, 4.0]))
    with mg.no_grad():
        w -= 1.0
    with pytest.raises(mg.GradientError, match="changed in place"):
        y.backward()


def test_results_keep_the_structure_the_function_returns() -> None:
    f = mg.function(lambda x: {"double": x * 2.0, "pair": (x, mg.sum(x))})
    out = f(mg.tensor([1.0, 2.0]))
    assert set(out) == {"double", "pair"} and isinstance(out["pair"], tuple)
    np.testing.assert_array_equal(out["double"].numpy(), [2.0, 4.0])
    assert out["pair"][1].item() == 3.0


# --- signatures and retracing ---------------------------------------------------------------------


def test_same_signature_reuses_the_graph_and_new_ones_retrace_with_a_reason() -> None:
    @mg.function
    def scale(x, by):
        return x * by

    np.testing.assert_array_equal(scale(mg.tensor([1.0, 2.0]), 2.0).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(scale(mg.tensor([3.0, 4.0]), 2.0).numpy(), [6.0, 8.0])
    scale(np.array([3.0, 4.0], np.float32), by=2.0)  # an array of the same spec: same graph
    assert scale.trace_count == 1
    scale(mg.tensor([1.0, 2.0, 3.0]), 2.0)  # shape
    scale(mg.tensor(np.array([1.0, 2.0, 3.0])), 2.0)  # dtype
    scale(mg.tensor(np.array([1.0, 2.0, 3.0])), 3.0)  # Python value
    scale(mg.tensor(np.array([1.0, 2.0, 3.0])), 3)  # Python type
    scale(mg.tensor([1.0, 2.0]), 2.0)  # seen before: no trace
    assert scale.trace_count == 5
    assert scale.retrace_log == [
        "trace 1: first call (x: (2,) float32, by=2.0)",
        "trace 2: argument x shape (2,) -> (3,)",
        "trace 3: argument x dtype float32 -> float64",
        "trace 4: argument by value 2.0 -> 3.0",
        "trace 5: argument by float 3.0 -> int 3",
    ]
    assert scale.explain_retraces() == "\n".join(scale.retrace_log)
    keys = list(scale.graphs)
    assert repr(keys[0]) == "(x: (2,) float32, by=2.0)" and len(keys) == 5
    assert all(isinstance(g, FuncGraph) for g in scale.graphs.values())
    assert dict(keys[1])["x"] == TensorSpec((3,), "float32")


def test_nested_arguments_and_defaults_are_part_of_the_signature() -> None:
    @mg.function
    def affine(x, params, relu=True):
        w, b = params
        h = x @ w + b
        return mg.relu(h) if relu else h

    params = (mg.tensor(np.eye(2)), mg.tensor([-1.0, 1.0]))
    x = mg.tensor([[0.5, 0.5]])
    np.testing.assert_array_equal(affine(x, params).numpy(), [[0.0, 1.5]])
    np.testing.assert_array_equal(affine(x, params, relu=False).numpy(), [[-0.5, 1.5]])
    assert affine.trace_count == 2
    assert "argument relu value True -> False" in affine.retrace_log[1]
    graph = affine.get_graph(x, params)
    assert [p.name for p in graph.placeholders()] == ["x", "params_0", "params_1"]


def test_unhashable_python_arguments_are_refused() -> None:
    f = mg.function(lambda x, options: x)
    with pytest.raises(TypeError, match="argument options is a set"):
        f(mg.tensor([1.0]), {1, 2})


# --- captures and side effects --------------------------------------------------------------------


def test_a_python_side_effect_runs_only_while_tracing(capsys: pytest.CaptureFixture) -> None:
    seen = []

    @mg.function
    def f(x):
        seen.append(type(x).__name__)
        print("tracing f")
        return x + 1.0

    for _ in range(3):
        f(mg.tensor([1.0, 2.0]))
    assert seen == ["Node"] and capsys.readouterr().out == "tracing f\n"
    f(mg.tensor([1.0, 2.0, 3.0]))
    assert seen == ["Node", "Node"] and capsys.readouterr().out == "tracing f\n"


def test_captured_tensors_are_read_by_reference_without_retracing() -> None:
    w = mg.tensor(np.ones((2, 3), np.float32))

    @mg.function
    def f(x):
        return x @ w

    x = mg.tensor([[1.0, 2.0]])
    np.testing.assert_array_equal(f(x).numpy(), [[3.0, 3.0, 3.0]])
    with mg.no_grad():
        w *= 2.0  # in place: the graph's capture sees it
    np.testing.assert_array_equal(f(x).numpy(), [[6.0, 6.0, 6.0]])
    assert f.trace_count == 1
    assert str(f.get_graph(x)).splitlines()[:3] == [
        "%x = placeholder()  # (1, 2) float32",
        "%w = capture()  # (2, 3) float32",
        "%matmul = matmul(%x, %w)  # (1, 3) float32",
    ]
    w = mg.tensor(np.zeros((2, 3), np.float32))  # noqa: F841 (a new object: the trace keeps the old)
    np.testing.assert_array_equal(f(x).numpy(), [[6.0, 6.0, 6.0]])


def test_numpy_arrays_in_closures_are_constants() -> None:
    table = np.array([1.0, 2.0], np.float32)
    f = mg.function(lambda x: x * table)
    f(mg.tensor([1.0, 1.0]))
    table[:] = 0.0  # a snapshot was taken while tracing, as TensorFlow does
    np.testing.assert_array_equal(f(mg.tensor([1.0, 1.0])).numpy(), [1.0, 2.0])
    assert [n.op for n in f.get_graph(mg.tensor([1.0, 1.0]))] == ["placeholder", "constant", "mul"]


# --- the control-flow trap ------------------------------------------------------------------------


def branch_on_tensor(x):
    if mg.sum(x) > 0:
        return x
    return -x


def loop_on_tensor(x):
    while mg.sum(x) < 10.0:
        x = x * 2.0
    return x


def length_of(x):
    return x * len(x)


def to_numpy(x):
    return x + x.numpy().max()


def to_float(x):
    return x * float(mg.sum(x))


@pytest.mark.parametrize("fn", [branch_on_tensor, loop_on_tensor, length_of, to_numpy, to_float])
def test_asking_python_for_a_traced_value_names_the_line_and_the_fix(fn) -> None:
    with pytest.raises(mg.TracingError) as info:
        mg.function(fn)(mg.tensor([1.0, 2.0]))
    message = str(info.value)
    assert f"test_tracing.py:{fn.__code__.co_firstlineno + 1}" in message
    for hint in ("mg.cond", "mg.while_loop", "autograph=True", "%"):
        assert hint in message


def test_a_trace_that_fails_leaves_no_graph_behind() -> None:
    f = mg.function(branch_on_tensor)
    with pytest.raises(mg.TracingError):
        f(mg.tensor([1.0]))
    assert f.trace_count == 0 and f.retrace_log == []


def test_reading_a_node_of_another_graph_is_refused() -> None:
    with mg.Graph().as_default():
        other = mg.placeholder((2,), name="other")
    f = mg.function(lambda x: x + other)
    with pytest.raises(mg.TracingError, match="reads %other.*pass it as an argument"):
        f(mg.tensor([1.0, 2.0]))


# --- calling a traced function while building another graph -------------------------------------


def test_a_traced_function_called_inside_another_is_inlined() -> None:
    w = mg.tensor([2.0, 3.0])
    inner = mg.function(lambda x: x * w)

    @mg.function
    def outer(x):
        return mg.sum(inner(x) + inner(x + 1.0))

    assert outer(mg.tensor([1.0, 1.0])).item() == 2 + 3 + 4 + 6
    graph = outer.get_graph(mg.tensor([1.0, 1.0]))
    assert [n.op for n in graph].count("capture") == 1  # both copies read one capture of w
    assert inner.trace_count == 1


def test_a_traced_function_called_on_placeholders_runs_in_a_session() -> None:
    f = mg.function(lambda x: mg.relu(x) * 2.0)
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 2), name="x")
        y = f(x)
    assert isinstance(y, mg.Node) and y.graph is g
    with mg.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: [[-1.0, 2.0]]}), [[0.0, 4.0]])
    assert dict(next(iter(f.graphs)))["x"] == TensorSpec((None, 2), "float32")


def test_viz_draws_the_most_recent_trace() -> None:
    from course_utils.viz import draw

    f = mg.function(lambda x: mg.tanh(x) + 1.0)
    f(mg.tensor([1.0]))
    f(mg.tensor([1.0, 2.0]))
    drawing = draw(f, renderer="builtin")
    assert "most recent trace" in drawing.graph.title


# --- the docstrings -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tracing", "control_flow", "autograph", "serialize"])
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(f"course_utils.minigraph.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_a_traced_call_keeps_its_own_copy_of_raw_array_arguments():
    """Changing an array after the call must not change the gradient (the tape keeps a copy)."""
    f = mg.function(lambda mask, w: mg.sum(mg.where(mask, w * 3.0, w)))
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    mask = np.array([True, True])
    y = f(mask, w)
    mask[:] = False
    y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])


def test_dict_keys_of_any_text_become_distinct_node_names() -> None:
    # A fullwidth key is read as "x" by Python: its placeholder must not clash with key "x".
    f = mg.function(lambda d: d["a b"] * 1.0 + d["\uff58"] * 2.0 + d["x"] * 4.0)
    t = {"a b": mg.tensor(1.0), "\uff58": mg.tensor(1.0), "x": mg.tensor(1.0)}
    assert f(t).item() == 7.0
    names = [p.name for p in f.get_graph(t).placeholders()]
    assert names == ["d_a_b", "d_x", "d_x_1"]
    assert mg.codegen(f.get_graph(t))(1.0, 1.0, 1.0) == 7.0
