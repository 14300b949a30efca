"""Eager mode: the tape, backward(), no_grad, define-by-run control flow, dtypes and printing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import course_utils.minigraph as mg


def test_an_expression_matches_pytorch_forward_and_backward() -> None:
    # The micrograd check: the same expression in both libraries, values and gradients equal.
    a0, b0 = np.array([-4.0, 1.5]), np.array([2.0, -0.5])
    a, b = mg.tensor(a0, requires_grad=True), mg.tensor(b0, requires_grad=True)
    ta, tb = torch.tensor(a0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    results = []
    for x, y, lib in [(a, b, mg), (ta, tb, torch)]:
        c = x + y
        d = x * y + y ** 3
        c = c + c + 1
        c = c + 1 + c + (-x)
        d = d + d * 2 + lib.relu(y + x)
        d = d + 3 * d + lib.relu(y - x)
        e = c - d
        f = e ** 2
        g = f / 2.0 + 10.0 / f
        lib.sum(g).backward()
        results.append((g, x.grad, y.grad))
    for mine, theirs in zip(results[0], results[1], strict=True):
        np.testing.assert_allclose(mine.numpy(), theirs.detach().numpy(), rtol=1e-12)


def test_backward_accumulates_into_grad_like_pytorch() -> None:
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    loss = mg.sum(w * w)
    loss.backward()
    loss.backward()  # the tape is kept, and gradients add up
    np.testing.assert_array_equal(w.grad.numpy(), [4.0, 8.0])
    w.grad = None
    mg.sum(w * 3.0).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])


def test_a_value_used_twice_gets_both_gradients() -> None:
    x = mg.tensor(3.0, requires_grad=True)
    y = x * x + x  # x reaches y along three edges
    y.backward()
    assert x.grad.item() == 7.0
    assert x.is_leaf and not y.is_leaf and y.grad is None and y.grad_fn == "add"


def test_backward_takes_a_gradient_for_non_scalar_outputs() -> None:
    x = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).backward(gradient=[1.0, 0.0, -1.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, -6.0])


def test_no_grad_records_nothing_and_restores_the_mode() -> None:
    w = mg.tensor([1.0], requires_grad=True)
    with mg.no_grad():
        assert not mg.is_grad_enabled()
        y = w * 2.0
        with mg.no_grad():
            pass
        assert not mg.is_grad_enabled()
    assert mg.is_grad_enabled() and not y.requires_grad and y.grad_fn is None

    @mg.no_grad()
    def evaluate(t):
        return t * 2.0

    assert not evaluate(w).requires_grad


def test_python_control_flow_decides_the_graph() -> None:
    # Define-by-run: the number of steps depends on the data, and backward follows what ran.
    x = mg.tensor(0.5, requires_grad=True)
    y, steps = x, 0
    while y.item() < 10.0:
        y = y * 3.0
        steps += 1
    y.backward()
    assert steps == 3 and x.grad.item() == 27.0


def test_long_chains_do_not_hit_the_recursion_limit() -> None:
    x = mg.tensor(1.0, requires_grad=True, dtype="float64")
    y = x
    for _ in range(3000):
        y = y * 1.0001
    y.backward()
    assert x.grad.item() == pytest.approx(1.0001**3000)


def test_in_place_updates_need_no_grad_and_are_caught_if_they_spoil_the_tape() -> None:
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    with mg.no_grad():
        w -= 0.5
    np.testing.assert_array_equal(w.numpy(), [0.5, 1.5])
    b = mg.tensor([1.0])
    y = mg.sum(w * b)
    b += 1.0  # b does not require grad, but mul saved it for w's gradient
    with pytest.raises(mg.GradientError, match="input 1 of mul .* changed in place"):
        y.backward()


def test_dtype_rules() -> None:
    assert mg.tensor(1.5).dtype == np.float32 and mg.tensor([1.0, 2.0]).dtype == np.float32
    assert mg.tensor(np.ones(2)).dtype == np.float64 and mg.tensor([1, 2]).dtype == np.int64
    x32, x64 = mg.tensor([1.0]), mg.tensor(np.ones(1))
    assert (x32 * 2).dtype == np.float32 and (x32 / 3.0).dtype == np.float32
    assert (x32 + x64).dtype == np.float64
    assert (x32 + mg.tensor([1])).dtype == np.float32
    assert mg.tensor([1.0], dtype="float64").dtype == np.float64
    assert (x32 > 0).dtype == np.bool_


def test_numpy_arrays_on_the_left_still_give_tensors() -> None:
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    y = np.array([3.0, 4.0], dtype=np.float32) * w  # numpy defers to Tensor.__rmul__
    assert isinstance(y, mg.Tensor) and y.requires_grad
    assert np.asarray(y).tolist() == [3.0, 8.0]


def test_repr_and_conversions() -> None:
    w = mg.tensor([[1.0, 2.0]], requires_grad=True)
    assert repr(w) == "tensor([[1., 2.]], dtype=float32, requires_grad=True)"
    assert repr(w * 2) == "tensor([[2., 4.]], dtype=float32, grad_fn=mul)"
    assert repr(mg.tensor(3)) == "tensor(3, dtype=int64)"
    loss = mg.sum(w)
    assert float(loss) == 3.0 and loss.item() == 3.0 and f"{loss:.2f}" == "3.00"
    assert [t.item() for t in mg.tensor([4.0, 5.0])] == [4.0, 5.0]
    assert w.detach().requires_grad is False and w.shape == (1, 2) and w.ndim == 2
    np.testing.assert_array_equal(w.T.numpy(), [[1.0], [2.0]])


def test_int_results_do_not_require_grad() -> None:
    x = mg.tensor([0.4, 1.6], requires_grad=True)
    assert not mg.cast(x, "int64").requires_grad
    assert not (x > 1).requires_grad
    assert mg.cast(x, "float64").requires_grad


def test_a_wrong_vjp_is_reported_at_its_op() -> None:
    mg.register_op(mg.Op("double_test", impl=lambda x: 2 * x, shape_rule=mg.same_shape_rule,
                         vjp=lambda g, out, x: (mg.sum(g),)))  # forgot: same shape as x
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(mg.GradientError, match="'double_test' returned a gradient of shape"):
        mg.sum(mg.apply("double_test", [x])).backward()


def test_tensors_used_in_a_graph_become_constants() -> None:
    t = mg.tensor([1.0, 2.0])
    with mg.Graph().as_default() as g:
        x = mg.placeholder((2,), name="x")
        y = x + t
    assert y.inputs[1].op == "constant"
    np.testing.assert_array_equal(mg.Session(g).run(y, {x: [1.0, 1.0]}), [2.0, 3.0])


# --- raw arrays on the tape, and walking it through grad_fn -------------------------------------


def test_changing_an_array_after_the_op_used_it_does_not_change_the_gradient() -> None:
    # A regression test: the tape used to keep the caller's numpy array itself, so changing it
    # between forward and backward() silently changed the gradient (here [1, 1] instead of [3, 3]).
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    mask, scale = np.array([True, True]), np.array([5.0, 7.0], dtype=np.float32)
    y = mg.sum(mg.where(mask, w * 3.0, w)) + mg.sum(w * scale)
    mask[:] = False
    scale *= 0.0
    y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0 + 5.0, 3.0 + 7.0])


def test_a_mask_view_changed_in_place_each_step_still_gives_pytorchs_gradient() -> None:
    # The pattern of lesson 04's exercise 04.3: rows stop updating once they settle, and the
    # mask of running rows shrinks in place (a view of it went to mg.where).
    w0 = np.array([[0.5, -1.0], [2.0, 0.25]])
    rows = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, 0.3]])
    w, tw = mg.tensor(w0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    h, th = mg.tensor(rows), torch.tensor(rows)
    running = np.array([True, True, True])
    for stop in ([False, False, True], [True, False, True]):
        h = mg.where(running[:, None], mg.tanh(h @ w), h)
        th = torch.where(torch.tensor(running[:, None]), torch.tanh(th @ tw), th)
        running &= np.array(stop)  # in place: the tape must not see this
    mg.sum(h).backward()
    th.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)


def test_grad_fn_is_the_tape_entry_and_leads_to_the_leaves() -> None:
    x = mg.tensor(np.ones((2, 3)))
    w = mg.tensor(np.full((2, 3), 0.5), requires_grad=True)
    b = mg.tensor(np.zeros(3), requires_grad=True)
    y = mg.sum(mg.tanh(x * w + b), axis=1)
    entry = y.grad_fn
    assert entry.op is mg.OPS["sum"] and entry.attrs == {"axis": 1, "keepdims": False}
    assert repr(entry) == "<TapeEntry sum((2, 3), axis=1)>"
    (tanh,) = entry.next_functions
    (add,) = tanh.next_functions
    assert add is entry.inputs[0].grad_fn.inputs[0].grad_fn
    mul, from_b = add.next_functions
    assert from_b is None and add.inputs[1] is b  # b is a leaf: no entry made it
    assert mul.inputs[0] is x and mul.inputs[1] is w and mul.next_functions == (None, None)
    assert repr(mul) == "<TapeEntry mul((2, 3), (2, 3))>"
    assert x.grad_fn is None and w.grad_fn is None  # leaves
    with mg.no_grad():
        assert (w * 2.0).grad_fn is None  # not recorded
    assert (x * 2.0).grad_fn is None  # nothing required grad


def test_grad_fn_chain_names_the_ops_pytorch_names() -> None:
    # Walk both tapes from the loss down through the first input of each op.
    a0, b0 = np.array([0.5, -1.5]), np.array([2.0, 1.0])
    a, b = mg.tensor(a0, requires_grad=True), mg.tensor(b0, requires_grad=True)
    ta, tb = torch.tensor(a0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    loss, tloss = mg.mean(mg.exp(mg.relu(a * b - 1.0))), torch.exp(torch.relu(ta * tb - 1.0)).mean()
    ours, theirs = [], []
    entry, node = loss.grad_fn, tloss.grad_fn
    while entry is not None:
        ours.append(entry.op.name)
        entry = entry.next_functions[0]
    while node is not None and node.name() != "torch::autograd::AccumulateGrad":
        theirs.append(node.name())
        node = node.next_functions[0][0]
    assert ours == ["mean", "exp", "relu", "sub", "mul"]
    assert theirs == [f"{name.capitalize()}Backward0" for name in ours]


def test_grad_fn_prints_and_compares_as_its_op_name() -> None:
    # Code from when grad_fn was the op's name keeps working: str(), f-strings and ==.
    y = mg.tensor([1.0], requires_grad=True) * 2.0
    assert str(y.grad_fn) == "mul" and f"{y.grad_fn}" == "mul"
    assert y.grad_fn == "mul" and y.grad_fn != "add" and y.grad_fn == "mul"
    z = mg.tensor([1.0], requires_grad=True) * 2.0
    assert z.grad_fn != y.grad_fn and len({y.grad_fn, z.grad_fn}) == 2  # entries: by identity


@pytest.mark.parametrize("exponent", [0.0, 1.0, 2.0, 3.0])
def test_pow_gradient_at_zero_base_matches_pytorch_in_eager_and_graph(exponent: float) -> None:
    base = np.array([0.0, 0.5, 2.0])
    t = torch.tensor(base, requires_grad=True)
    (t ** exponent).sum().backward()
    c = mg.tensor(base, requires_grad=True)
    mg.sum(c ** exponent).backward()
    np.testing.assert_array_equal(c.grad.numpy(), t.grad.numpy())  # x ** 0: 0, not nan
    with mg.Graph().as_default() as g:
        x = mg.placeholder((3,), "float64", name="x")
        (dx,) = mg.gradients(mg.sum(x ** exponent), [x])
    np.testing.assert_array_equal(mg.Session(g).run(dx, {x: base}), t.grad.numpy())


def test_pow_gradient_with_a_zero_exponent_tensor_broadcasts() -> None:
    base, exponent = np.array([[0.0], [3.0]]), np.array([0.0, 2.0])
    tb, te = (torch.tensor(a, requires_grad=True) for a in (base, exponent))
    (tb ** te).sum().backward()
    mb, me = (mg.tensor(a, requires_grad=True) for a in (base, exponent))
    mg.sum(mb ** me).backward()
    np.testing.assert_allclose(mb.grad.numpy(), tb.grad.numpy())
    np.testing.assert_allclose(me.grad.numpy(), te.grad.numpy())
