"""mg.cond and mg.while_loop: graph ops with sub-graphs, decided at run time.

References: the same control flow written in Python and run eagerly, and central differences.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from minigraph_helpers import central_difference

import course_utils.minigraph as mg


def here_line() -> int:
    return sys._getframe(1).f_lineno


# --- cond -----------------------------------------------------------------------------------------


def test_in_eager_mode_cond_runs_only_the_chosen_python_function() -> None:
    ran = []
    pick = mg.cond(mg.tensor(True), lambda: ran.append("true") or 1, lambda: ran.append("false"))
    assert (pick, ran) == (1, ["true"])
    assert mg.cond(False, lambda: 1, lambda: 2) == 2


def python_version(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    h = x @ w
    return h * h if h.sum() > 0 else np.tanh(h) * 3.0


@mg.function
def graph_version(x, w):
    h = x @ w
    return mg.cond(mg.sum(h) > 0, lambda: h * h, lambda: mg.tanh(h) * 3.0)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_one_trace_picks_the_branch_on_every_call(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, w = rng.normal(size=(2, 3)), rng.normal(size=(3, 2))
    got = graph_version(mg.tensor(x), mg.tensor(w)).numpy()
    np.testing.assert_allclose(got, python_version(x, w), rtol=1e-12)
    assert graph_version.trace_count == 1


def test_the_graph_holds_both_branches_indented_under_the_cond() -> None:
    w = mg.tensor(np.ones(2))

    @mg.function
    def f(x):
        inner = lambda: mg.cond(mg.sum(x) > 1.0, lambda: x * w, lambda: x)  # noqa: E731
        return mg.cond(mg.sum(x) > 0, inner, lambda: -x, name="outer")

    assert str(f.get_graph(mg.tensor(np.zeros(2)))) == "\n".join([
        "%x = placeholder()  # (2,) float64",
        "%sum = sum(%x)  # () float64",
        "%const = constant(value=0.0)  # () float64",
        "%greater = greater(%sum, %const)  # () bool",
        "%w = capture()  # (2,) float64",
        "%outer = cond(%greater, %x, %w)",
        "  true_fn(%x, %w):",
        "    %sum = sum(%x)  # () float64",
        "    %const = constant(value=1.0)  # () float64",
        "    %greater = greater(%sum, %const)  # () bool",
        "    %cond = cond(%greater, %x, %w)",
        "      true_fn(%x, %w):",
        "        %mul = mul(%x, %w)  # (2,) float64",
        "        return %mul",
        "      false_fn(%x, %w):",
        "        return %x",
        "    %cond_out = tuple_get(%cond, index=0)  # (2,) float64",
        "    return %cond_out",
        "  false_fn(%x, %w):",
        "    %neg = neg(%x)  # (2,) float64",
        "    return %neg",
        "%outer_out = tuple_get(%outer, index=0)  # (2,) float64",
        "return %outer_out",
    ])
    for x, want in [([2.0, 3.0], [2.0, 3.0]), ([0.2, 0.3], [0.2, 0.3]), ([-1.0, 0.5], [1.0, -0.5])]:
        np.testing.assert_allclose(f(mg.tensor(np.array(x))).numpy(), want)
    with mg.no_grad():
        w *= 10.0  # a capture inside a nested branch is still read by reference
    np.testing.assert_allclose(f(mg.tensor(np.array([2.0, 3.0]))).numpy(), [20.0, 30.0])
    f.get_graph(mg.tensor(np.zeros(2))).validate()


def test_results_have_the_branches_structure_and_merged_shapes() -> None:
    @mg.function
    def f(x):
        return mg.cond(mg.sum(x) > 0, lambda: {"a": x, "b": (mg.sum(x), x[:1])},
                       lambda: {"a": -x, "b": (mg.max(x), x[1:])})

    out = f(mg.tensor([1.0, 2.0, 3.0]))
    assert set(out) == {"a", "b"} and out["b"][1].numpy().tolist() == [1.0]
    graph = f.get_graph(mg.tensor([1.0, 2.0, 3.0]))
    assert [n.shape for n in graph.outputs] == [(3,), (), (None,)]  # 1 vs 2 rows: known later
    assert f(mg.tensor([-1.0, -2.0, 0.5]))["b"][1].numpy().tolist() == [-2.0, 0.5]


def test_cond_in_a_static_graph_runs_in_a_session() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((), name="x")
        y = mg.cond(x > 0.0, lambda: mg.sqrt(x), lambda: x * x)
    with mg.Session(g) as sess:
        assert sess.run(y, {x: 4.0}) == 2.0 and sess.run(y, {x: -3.0}) == 9.0


def test_branch_mistakes_are_found_when_the_cond_is_built() -> None:
    with mg.Graph().as_default():
        x = mg.placeholder((2,), name="x")
        with pytest.raises(mg.TracingError) as info:
            line = here_line() + 1
            mg.cond(mg.sum(x) > 0, lambda: (x, x), lambda: x)
        assert f"test_control_flow.py:{line}" in str(info.value)
        assert "same structure" in str(info.value)
        with pytest.raises(mg.TracingError, match="int64 in the false branch; .*cast"):
            mg.cond(mg.sum(x) > 0, lambda: mg.sum(x), lambda: 0)
        with pytest.raises(mg.DTypeError, match="scalar bool pred.*mg.sum"):
            mg.cond(x > 0, lambda: x, lambda: -x)


# --- gradients through cond -----------------------------------------------------------------------


@pytest.mark.parametrize("x0", [[0.3, -0.2, 0.9], [-0.3, -0.2, 0.1]], ids=["true", "false"])
def test_symbolic_gradient_through_cond_equals_central_differences(x0: list[float]) -> None:
    w0 = np.array([0.5, -1.5, 2.0])
    with mg.Graph().as_default() as g:
        x = mg.placeholder((3,), "float64", name="x")
        w = mg.placeholder((3,), "float64", name="w")
        y, z = mg.cond(mg.sum(x) > 0, lambda: (mg.sum(mg.exp(x * w)), x),
                       lambda: (mg.sum(mg.tanh(x) * x), w * 2.0))
        loss = y + mg.sum(z * z)
        dx, dw = mg.gradients(loss, [x, w])
    with mg.Session(g) as sess:
        got = sess.run([dx, dw], {x: x0, w: w0})

    def numeric(arrays: list[np.ndarray]) -> float:
        with mg.Session(g) as s:
            return float(s.run(loss, {x: arrays[0], w: arrays[1]}))

    arrays = [np.array(x0), w0]
    for i in range(2):
        np.testing.assert_allclose(got[i], central_difference(numeric, arrays, i), rtol=1e-6,
                                   atol=1e-8)
    ops = [n.op for n in g]
    assert ops.count("cond") == 2  # the forward cond, and the cond of the branches' vjps


def test_eager_backward_through_a_traced_cond_equals_central_differences() -> None:
    rng = np.random.default_rng(1)
    w = mg.tensor(rng.normal(size=(3, 2)), requires_grad=True)
    for x0 in (np.abs(rng.normal(size=(1, 3))), -np.abs(rng.normal(size=(1, 3)))):
        w.grad = None
        x = mg.tensor(x0, requires_grad=True)
        mg.sum(graph_version(x, w)).backward()

        def numeric(arrays: list[np.ndarray]) -> float:
            return float(python_version(arrays[0], arrays[1]).sum())

        arrays = [x0, w.numpy().copy()]
        for i, got in enumerate([x.grad, w.grad]):
            np.testing.assert_allclose(got.numpy(), central_difference(numeric, arrays, i),
                                       rtol=1e-6, atol=1e-8)


def test_an_operand_one_branch_ignores_gets_a_zero_gradient_there() -> None:
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    w = mg.tensor([3.0, 4.0], requires_grad=True)
    f = mg.function(lambda x: mg.cond(mg.sum(x) > 0, lambda: mg.sum(x), lambda: mg.sum(w)))
    f(x).backward()
    assert x.grad.numpy().tolist() == [1.0, 1.0] and w.grad.numpy().tolist() == [0.0, 0.0]


# --- while_loop -----------------------------------------------------------------------------------


def collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@mg.function
def graph_collatz(n):
    def body(n, steps):
        half = mg.cast(mg.cast(n, "float64") / 2.0, "int64")  # n // 2 for n > 0
        return mg.where(mg.equal(half * 2, n), half, n * 3 + 1), steps + 1

    return mg.while_loop(lambda n, steps: mg.not_equal(n, 1), body, (n, 0))[1]


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 200))
def test_while_loop_matches_a_python_loop(n: int) -> None:
    got = graph_collatz(mg.tensor(np.array(n)))
    assert got.item() == collatz_steps(n) and graph_collatz.trace_count == 1


def test_while_loop_with_a_captured_limit_and_a_single_variable() -> None:
    limit = mg.tensor(100.0)

    @mg.function
    def grow(x):
        return mg.while_loop(lambda v: mg.sum(v) < limit, lambda v: v * 2.0, x)

    np.testing.assert_array_equal(grow(mg.tensor([1.0, 2.0])).numpy(), [64.0, 128.0])
    with mg.no_grad():
        limit -= 90.0
    np.testing.assert_array_equal(grow(mg.tensor([1.0, 2.0])).numpy(), [4.0, 8.0])
    assert mg.while_loop(lambda v: v < 10, lambda v: v * 3, 1) == 27  # eager: a Python loop
    graph = grow.get_graph(mg.tensor([1.0, 2.0]))
    assert [n.op for n in graph] == ["placeholder", "capture", "while_loop", "tuple_get"]
    graph.validate()


def test_loop_mistakes_are_found_when_the_loop_is_built() -> None:
    with mg.Graph().as_default():
        x = mg.placeholder((2,), name="x")
        with pytest.raises(mg.TracingError, match=re.escape(
                "`var0` is () int64 before the loop but () float32 after the body")):
            mg.while_loop(lambda i, x: i < 3, lambda i, x: (i * 0.5, x), (0, x))
        with pytest.raises(mg.TracingError, match=re.escape("one scalar bool, got (2,) bool")):
            mg.while_loop(lambda x: x > 0, lambda x: x, [x])
        with pytest.raises(mg.TracingError, match="returns 1 values for 2 loop variables"):
            mg.while_loop(lambda i, x: i < 3, lambda i, x: x, (0, x))


# --- gradients through while_loop: against the unrolled loop and central differences ----------

RNG = np.random.default_rng(3)
X0, W0, B0 = RNG.normal(size=3), RNG.normal(size=3), RNG.normal(size=3) * 0.1


def rnn_loop(x, w, b, n):
    """``n`` steps of ``h = tanh(h * w + b)``, with a counter: the trip count is data."""
    zero = mg.constant(np.int64(0)) if isinstance(x, mg.Node) else 0
    _, h = mg.while_loop(lambda i, h: i < n, lambda i, h: (i + 1, mg.tanh(h * w + b)), (zero, x))
    return mg.sum(h * h)


def rnn_unrolled(x, w, b, n: int):
    h = x
    for _ in range(n):
        h = np.tanh(h * w + b)
    return float(np.sum(h * h))


@pytest.mark.parametrize("n", [0, 1, 5])
@pytest.mark.parametrize("executor", ["interpreter", "codegen"])
def test_gradient_through_a_counted_loop_equals_central_differences(n: int,
                                                                     executor: str) -> None:
    with mg.Graph().as_default() as g:
        x, w, b = (mg.placeholder((3,), "float64", name=k) for k in "xwb")
        steps = mg.placeholder((), "int64", name="n")
        loss = rnn_loop(x, w, b, steps)
        grads = mg.gradients(loss, [x, w, b])
    g.validate()
    assert "save_history=True" in str(g) and "while_loop_grad" in str(g)
    arrays = [X0, W0, B0]
    with mg.Session(g, executor=executor) as sess:
        value, *got = sess.run([loss, *grads], {x: X0, w: W0, b: B0, steps: n})
    assert value == pytest.approx(rnn_unrolled(X0, W0, B0, n), rel=1e-12)
    for i, grad in enumerate(got):
        expected = central_difference(lambda a: rnn_unrolled(*a, n), arrays, i)
        np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-9, err_msg=f"input {i}")


def test_gradient_equals_the_unrolled_loops_gradient_in_the_same_graph() -> None:
    with mg.Graph().as_default() as g:
        x, w, b = (mg.placeholder((None,), "float64", name=k) for k in "xwb")
        looped = mg.gradients(rnn_loop(x, w, b, mg.constant(np.int64(4))), [x, w, b])
        h = x
        for _ in range(4):
            h = mg.tanh(h * w + b)
        unrolled = mg.gradients(mg.sum(h * h), [x, w, b])
    feed = {x: X0, w: W0, b: B0}
    with mg.Session(g) as sess:
        for a, u in zip(sess.run(looped, feed), sess.run(unrolled, feed), strict=True):
            np.testing.assert_allclose(a, u, rtol=1e-13)


def test_gradient_through_a_loop_whose_trip_count_depends_on_the_values() -> None:
    """``while sum(v) < 10: v = v * w``: the count changes with x, the gradient is piecewise."""
    w = mg.tensor([1.3, 1.6], requires_grad=True)
    f = mg.function(lambda x: mg.sum(mg.while_loop(lambda v: mg.sum(v) < 10.0,
                                                     lambda v: v * w, x) ** 2))

    def reference(a: list[np.ndarray]) -> float:
        v, wv = a
        while v.sum() < 10.0:
            v = v * wv
        return float(np.sum(v ** 2))

    x = mg.tensor([1.0, 0.5], requires_grad=True)
    f(x).backward()
    arrays = [x.numpy().copy(), w.numpy().copy().astype(np.float64)]
    for i, t in enumerate((x, w)):
        expected = central_difference(reference, [a.astype(np.float64) for a in arrays], i,
                                      eps=1e-4)
        np.testing.assert_allclose(t.grad.numpy(), expected, rtol=2e-3)


def test_only_the_results_asked_for_are_seeded_and_an_int_variable_gets_none() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((2,), "float64", name="x")
        y = mg.placeholder((2,), "float64", name="y")
        n = mg.placeholder((), "int64", name="n")
        i, a, c = mg.while_loop(lambda i, a, c: i < n,
                                lambda i, a, c: (i + 1, a * c, c + 1.0), (n * 0, x, y))
        dx, dy, dn = mg.gradients(mg.sum(a), [x, y, n])  # c's result is not used
    assert dn is None
    with mg.Session(g) as sess:
        got_x, got_y = sess.run([dx, dy], {x: [1.0, 2.0], y: [0.5, 1.5], n: 3})
    # a_3 = x * c0 * (c0 + 1) * (c0 + 2): d/dx = the product, d/dc0 = x * (3 c0^2 + 6 c0 + 2)
    c0 = np.array([0.5, 1.5])
    np.testing.assert_allclose(got_x, c0 * (c0 + 1) * (c0 + 2))
    np.testing.assert_allclose(got_y, np.array([1.0, 2.0]) * (3 * c0 ** 2 + 6 * c0 + 2))


def test_nested_loops_and_autograph_differentiate() -> None:
    @mg.function(autograph=True)
    def f(x, n, m):
        i = 0
        while i < n:
            j = 0
            while j < m:
                x = x * 0.9 + 0.1 * mg.tanh(x)
                j += 1
            i += 1
        return mg.sum(x * x)

    def reference(a: list[np.ndarray], n: int = 3) -> float:
        (x,) = a
        for _ in range(n * 2):
            x = x * 0.9 + 0.1 * np.tanh(x)
        return float(np.sum(x * x))

    x = mg.tensor(X0, requires_grad=True)
    n, m = mg.tensor(np.int64(3)), mg.tensor(np.int64(2))
    f(x, n, m).backward()
    np.testing.assert_allclose(x.grad.numpy(), central_difference(reference, [X0], 0),
                               rtol=1e-6)
    assert str(f.get_graph(x, n, m)).count("while_loop(") == 2  # a loop in a loop


def test_a_graph_with_a_loop_gradient_saves_and_loads(tmp_path) -> None:
    with mg.Graph().as_default() as g:
        x, w, b = (mg.placeholder((3,), "float64", name=k) for k in "xwb")
        g.outputs = mg.gradients(rnn_loop(x, w, b, mg.constant(np.int64(3))), [x, w])
    mg.save(g, tmp_path / "loop_grad.npz")
    loaded = mg.load(tmp_path / "loop_grad.npz")
    cap = f"max_iterations={mg.serialize.MAX_ITERATIONS}"  # mg.load caps every loop it reads
    assert str(loaded) == str(g).replace("save_history=True)", f"save_history=True, {cap})")
    for a, e in zip(loaded(X0, W0, B0), mg.Session(g).run(g.outputs, {x: X0, w: W0, b: B0}),
                    strict=True):
        np.testing.assert_array_equal(a, e)


def test_no_second_derivative_through_a_loop_says_so() -> None:
    with mg.Graph().as_default():
        x = mg.placeholder((3,), "float64", name="x")
        (dx,) = mg.gradients(rnn_loop(x, W0, B0, mg.constant(np.int64(2))), [x])
        with pytest.raises(mg.GradientError, match="no second derivative through the "
                                                   "while_loop gradient.*unroll"):
            mg.gradients(mg.sum(dx), [x])
