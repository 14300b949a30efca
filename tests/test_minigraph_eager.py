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
