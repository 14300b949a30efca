"""course_utils.engine (lesson 01's engine, as the course wrote it) and course_utils.tape (lesson
04's eager mode) against numpy, central differences and PyTorch: every op's forward value, every
vjp rule (with broadcasting), topo_order on a graph far deeper than Python's recursion limit, run
and gradients (lesson 02), and the tape's backward."""

import doctest
import sys

import numpy as np
import pytest

from course_utils import engine as E

RNG = np.random.default_rng(26)


def central_difference(f, x, eps=1e-6):
    """d f / d x for a scalar function f of the array x, by central differences."""
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        up = f(x)
        x[i] = old - eps
        down = f(x)
        x[i] = old
        grad[i] = (up - down) / (2 * eps)
    return grad


def check_op(build, *arrays, rtol=1e-5, atol=1e-7):
    """Compare backprop's gradient of sum(build(*inputs) * r) with central differences.

    `r` is a fixed random weight of the output's shape, so every element of the output (not just
    their sum) enters the check. Inputs that get no gradient must have a zero numerical one.
    """
    xs = [E.placeholder(f"x{i}") for i in range(len(arrays))]
    out = build(*xs)
    out_value = E.evaluate([out], dict(zip(xs, arrays, strict=True)))[out]
    r = RNG.normal(size=np.shape(out_value))
    loss = E.reduce_sum(out * E.constant(r))
    values = E.evaluate([loss], dict(zip(xs, arrays, strict=True)))
    grads = E.backprop(loss, values)
    for i, (x, a) in enumerate(zip(xs, arrays, strict=True)):
        def f(v, i=i):
            feed = dict(zip(xs, arrays, strict=True))
            feed[xs[i]] = v
            return float(E.evaluate([loss], feed)[loss])
        expected = central_difference(f, a)
        got = np.asarray(grads.get(x, np.zeros_like(a)))
        assert got.shape == np.shape(a), f"input {i}: gradient shape {got.shape} != {np.shape(a)}"
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol,
                                   err_msg=f"input {i} of {out!r}")


def normal(*shape):
    return RNG.normal(size=shape)


def positive(*shape):
    return RNG.uniform(0.5, 2.0, size=shape)


def away_from_zero(*shape):
    return RNG.choice([-1.0, 1.0], size=shape) * RNG.uniform(0.2, 1.5, size=shape)


BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)),
                 ((), (3,))]


@pytest.mark.parametrize("a_shape,b_shape", BINARY_SHAPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_vjps_with_broadcasting(op, a_shape, b_shape):
    fn = getattr(E, op)
    a = normal(*a_shape)
    b = positive(*b_shape) if op == "div" else normal(*b_shape)
    check_op(fn, a, b)
    # and the other way round, so each side gets broadcast in turn
    check_op(fn, b, away_from_zero(*a_shape) if op == "div" else a)


@pytest.mark.parametrize("op,make", [
    ("neg", normal), ("exp", normal), ("log", positive), ("tanh", normal),
    ("relu", away_from_zero), ("sign", away_from_zero), ("transpose", normal),
    ("ones_like", normal), ("zeros_like", normal),
])
def test_unary_vjps(op, make):
    check_op(getattr(E, op), make(3, 4))


@pytest.mark.parametrize("a_shape,b_shape", [((3, 4), (4, 2)), ((5, 3, 4), (5, 4, 2))])
def test_matmul_vjp(a_shape, b_shape):
    """Matrices, and stacks of matrices with the same batch shape (the rule does not unbroadcast
    batch axes, as its docstring in the engine says)."""
    check_op(E.matmul, normal(*a_shape), normal(*b_shape))


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_sum_mean_size_logsumexp_vjps(axis):
    x = normal(3, 4)
    check_op(lambda v: E.reduce_sum(v, axis=axis), x)
    check_op(lambda v: E.reduce_mean(v, axis=axis), x)
    check_op(lambda v: E.size(v, axis=axis) * v, x)
    if axis is not None:
        check_op(lambda v: E.logsumexp(v, axis=axis), x)


def test_unbroadcast_and_broadcast_like_vjps():
    like_small, like_big = normal(3, 1), normal(2, 3, 4)
    check_op(E.unbroadcast, normal(2, 3, 4), like_small)
    check_op(E.broadcast_like, normal(3, 1), like_big)
    check_op(lambda g, x: E.broadcast_like(g, x, axis=1), normal(2, 4), like_big)


def test_forward_values_match_numpy():
    x, y = normal(3, 4), positive(3, 4)
    a, b = E.placeholder("a"), E.placeholder("b")
    cases = {
        a + b: x + y, a - b: x - y, a * b: x * y, a / b: x / y, -a: -x,
        E.exp(a): np.exp(x), E.log(b): np.log(y), E.tanh(a): np.tanh(x),
        E.relu(a): np.maximum(x, 0), E.sign(a): np.sign(x), a @ E.transpose(b): x @ y.T,
        E.reduce_sum(a, axis=0): x.sum(0), E.reduce_mean(a): x.mean(),
        E.logsumexp(a, axis=1): np.log(np.exp(x).sum(1, keepdims=True)),
        2.0 * a: 2.0 * x, x * b: x * y, 1.0 - a: 1.0 - x, 1.0 / b: 1.0 / y,
    }
    values = E.evaluate(list(cases), {a: x, b: y})
    for node, expected in cases.items():
        np.testing.assert_allclose(values[node], expected, rtol=1e-12, err_msg=repr(node))


def test_logsumexp_does_not_overflow():
    x = np.array([[1000.0, 1000.0]])
    assert np.isclose(E.logsumexp(x, axis=1)[0, 0], 1000.0 + np.log(2.0))


def test_apply_computes_at_once_on_arrays_and_builds_on_nodes():
    assert np.allclose(E.tanh(np.array([0.5])), np.tanh(0.5))
    x = E.placeholder("x")
    node = E.mul(x, 3.0)
    assert isinstance(node, E.Node) and node.op == "mul"
    assert node.inputs[0] is x and node.inputs[1].op == "const"
    assert repr(node).startswith(f"%{node.name} = mul(%x, %")


def test_vjp_rules_on_nodes_build_a_gradient_graph():
    """The rules call op functions: given Nodes they return Nodes, which evaluate to the numbers."""
    x, g = E.placeholder("x"), E.placeholder("g")
    out = E.tanh(x)
    (gx,) = E.VJP["tanh"](g, out, x)
    assert isinstance(gx, E.Node)
    xv, gv = normal(3), normal(3)
    np.testing.assert_allclose(E.evaluate([gx], {x: xv, g: gv})[gx], gv * (1 - np.tanh(xv) ** 2))


def test_every_op_has_a_forward_and_a_vjp():
    assert set(E.IMPL) - set(E.VJP) == {"const", "variable"}
    assert set(E.VJP) <= set(E.IMPL)


def test_topo_order_shared_nodes_once_inputs_first():
    x = E.placeholder("x")
    a = E.exp(x)
    b, c = a * 2.0, a + 1.0
    out = b * c
    order = E.topo_order([out, a])
    assert len(order) == len(set(order))
    position = {node: i for i, node in enumerate(order)}
    for node in order:
        for inp in node.inputs:
            assert position[inp] < position[node], f"{inp!r} after {node!r}"
    assert {x, a, b, c, out} <= set(order)


def test_topo_order_follows_the_links_it_is_given():
    """inputs_of replaces node.inputs: here a tiny graph of names, as lesson 04's tape uses it."""
    links = {"loss": ["h", "w"], "h": ["x", "w"], "x": [], "w": []}
    order = E.topo_order(["loss"], lambda name: links[name])
    assert order == ["x", "w", "h", "loss"]


def test_topo_order_and_backprop_on_a_20000_node_chain():
    depth = 20_000
    x = E.placeholder("x")
    node = x
    for _ in range(depth // 2):
        node = E.tanh(node * 0.9999)  # 2 nodes per step (and a constant)
    limit = sys.getrecursionlimit()
    assert depth > limit, "the chain must be deeper than Python's recursion limit"
    order = E.topo_order([node])
    assert order[0] is x and order[-1] is node
    assert len(order) == 1 + depth + depth // 2  # x, the tanh and mul nodes, the constants
    values = E.evaluate([node], {x: 0.3})
    v, d = 0.3, 1.0
    for _ in range(depth // 2):
        v = np.tanh(v * 0.9999)
        d *= 0.9999 * (1 - v * v)
    np.testing.assert_allclose(values[node], v, rtol=1e-12)
    np.testing.assert_allclose(E.backprop(node, values)[x], d, rtol=1e-9)


def test_doctests():
    failures, tried = doctest.testmod(E)
    assert tried > 0 and failures == 0


def test_run_prunes_and_names_a_missing_feed():
    x, y = E.placeholder("x"), E.placeholder("y")
    a = E.tanh(x) * 2.0
    b = a + y
    np.testing.assert_allclose(E.run(a, {x: 0.3}), 2 * np.tanh(0.3))  # y not needed
    assert E.run([a], {x: 0.3})[0] == E.run(a, {x: 0.3})
    with pytest.raises(E.MissingFeedError, match="%y"):
        E.run(b, {x: 0.3})
    np.testing.assert_allclose(E.run(b, {x: 0.3, y: 1.0}), 2 * np.tanh(0.3) + 1.0)


def test_gradients_build_nodes_that_equal_backprop_and_second_derivatives():
    x = E.placeholder("x")
    w = E.variable([[0.5, -1.0], [2.0, 0.3]])
    loss = E.reduce_sum(E.tanh(x @ w) * E.exp(x))
    gx, gw = E.gradients(loss, [x, w])
    assert isinstance(gx, E.Node) and isinstance(gw, E.Node)
    xv = normal(3, 2)
    values = E.evaluate([loss], {x: xv})
    grads = E.backprop(loss, values)
    got_x, got_w = E.run([gx, gw], {x: xv})
    np.testing.assert_allclose(got_x, grads[x], rtol=1e-12)
    np.testing.assert_allclose(got_w, grads[w], rtol=1e-12)
    # gradients of gradients: d/dx sum(d tanh(x)/dx) = -2 tanh(x) (1 - tanh(x)^2)
    s = E.placeholder("s")
    (g1,) = E.gradients(E.reduce_sum(E.tanh(s)), [s])
    (g2,) = E.gradients(E.reduce_sum(g1), [s])
    sv = normal(4)
    t = np.tanh(sv)
    np.testing.assert_allclose(E.run(g2, {s: sv}), -2 * t * (1 - t * t), rtol=1e-12)


def test_tape_backward_against_pytorch():
    torch = pytest.importorskip("torch")
    from course_utils import tape as T

    X, W0, b0, W1 = normal(5, 3), normal(3, 4), normal(4), normal(4, 2)
    Y = np.eye(2)[RNG.integers(0, 2, size=5)]
    params = [T.Tensor(a, requires_grad=True) for a in (W0, b0, W1)]
    h = E.relu(X @ params[0] + params[1]) @ params[2]
    loss = -E.reduce_mean(E.reduce_sum(Y * (h - E.logsumexp(h, axis=1)), axis=1))
    assert isinstance(loss, T.Tensor) and loss.grad_fn is not None
    loss.backward()
    tp = [torch.tensor(a, requires_grad=True) for a in (W0, b0, W1)]
    th = torch.relu(torch.tensor(X) @ tp[0] + tp[1]) @ tp[2]
    tl = -(torch.tensor(Y) * torch.log_softmax(th, dim=1)).sum(dim=1).mean()
    tl.backward()
    np.testing.assert_allclose(float(loss.data), tl.item(), rtol=1e-12)
    for p, t in zip(params, tp, strict=True):
        np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_tape_accumulates_no_grad_records_nothing_and_deep_tapes():
    from course_utils import tape as T

    w = T.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    loss = E.reduce_sum(w * w + w)
    loss.backward()
    loss.backward()
    np.testing.assert_allclose(w.grad, 2 * (2 * np.array([1.0, 2.0]) + 1))
    with T.no_grad():
        plain = w * 2.0
        with T.no_grad():
            pass
        still = w * 2.0
    assert plain.grad_fn is None and still.grad_fn is None and not plain.requires_grad
    assert T.GRAD_ENABLED and (w * 2.0).grad_fn[0] == "mul"
    deep = T.Tensor(np.array(0.5), requires_grad=True)
    v = deep
    for _ in range(20_000):
        v = v * 1.0001
    v.backward()
    np.testing.assert_allclose(deep.grad, 1.0001 ** 20_000, rtol=1e-9)


def test_mlp_loss_and_grad_in_both_modes_against_pytorch():
    """The capstone's given pieces: mlp_loss on tensors and on nodes is PyTorch's cross-entropy,
    and grad gives PyTorch's gradients as arrays (a Tensor, twice on the same leaves) and as
    nodes (a Node)."""
    torch = pytest.importorskip("torch")
    from course_utils import tape as T

    X, labels = normal(7, 2), RNG.integers(0, 3, size=7)
    Y = np.eye(3)[labels]
    init = [normal(2, 5), normal(5), normal(5, 4), normal(4), normal(4, 3), normal(3)]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    th = torch.tensor(X)
    for i in range(0, 6, 2):
        th = th @ tp[i] + tp[i + 1]
        th = torch.relu(th) if i < 4 else th
    want = torch.nn.functional.cross_entropy(th, torch.tensor(labels))
    want_grads = [g.numpy() for g in torch.autograd.grad(want, tp)]

    leaves = [T.Tensor(a, requires_grad=True) for a in init]
    for _ in range(2):  # the second call must not add in what the first left in .grad
        loss = E.mlp_loss(leaves, X, Y)
        np.testing.assert_allclose(float(loss.data), want.item(), rtol=1e-12)
        for g, w in zip(T.grad(loss, leaves), want_grads, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    variables = [E.variable(a) for a in init]
    Xp, Yp = E.placeholder("X"), E.placeholder("Y")
    node_loss = E.mlp_loss(variables, Xp, Yp)
    node_grads = T.grad(node_loss, variables)
    assert all(isinstance(g, E.Node) for g in node_grads)
    values = E.run([node_loss, *node_grads], {Xp: X, Yp: Y})
    np.testing.assert_allclose(values[0], want.item(), rtol=1e-12)
    for g, w in zip(values[1:], want_grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    unused = T.Tensor(normal(2), requires_grad=True)
    assert np.array_equal(T.grad(E.mlp_loss(leaves, X, Y), [unused])[0], np.zeros(2))


def test_tape_doctests():
    from course_utils import tape as T

    failures, tried = doctest.testmod(T)
    assert tried > 0 and failures == 0
