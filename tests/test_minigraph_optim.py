"""mg.optim against torch.optim, step for step in float64, and Tensor.data."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import course_utils.minigraph as mg

RNG = np.random.default_rng(0)
X, Y = RNG.normal(size=(16, 3)), RNG.normal(size=(16, 2))
W0, B0 = RNG.normal(size=(3, 2)), RNG.normal(size=2)


def mg_loss(w: Any, b: Any) -> Any:
    return mg.mean(mg.square(mg.tanh(X @ w + b) - Y))


def torch_loss(w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mean(torch.square(torch.tanh(torch.tensor(X) @ w + b) - torch.tensor(Y)))


@pytest.mark.parametrize("name, kwargs", [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.05, betas=(0.5, 0.9), eps=1e-6, weight_decay=0.1)),
    ("Adam", dict(lr=0.02, betas=(0.3, 0.99))),  # 1 - beta1 >= 0.5: torch.lerp's other formula
])
def test_the_parameters_equal_torch_optim_step_for_step(name: str, kwargs: dict) -> None:
    w, b = mg.tensor(W0, requires_grad=True), mg.tensor(B0, requires_grad=True)
    tw, tb = torch.tensor(W0, requires_grad=True), torch.tensor(B0, requires_grad=True)
    ours, theirs = getattr(mg.optim, name)([w, b], **kwargs), getattr(torch.optim, name)(
        [tw, tb], **kwargs)
    for step in range(20):
        ours.zero_grad()
        theirs.zero_grad()
        loss, tloss = mg_loss(w, b), torch_loss(tw, tb)
        loss.backward()
        tloss.backward()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-13, err_msg=f"step {step}")
        ours.step()
        theirs.step()
        for p, t in ((w, tw), (b, tb)):
            np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-13, atol=1e-15,
                                       err_msg=f"{name} {kwargs} step {step}")
    assert loss.item() < mg_loss(mg.tensor(W0), mg.tensor(B0)).item()  # it did train


def test_zero_grad_clears_and_a_missing_grad_is_skipped() -> None:
    w, unused = mg.tensor([1.0], requires_grad=True), mg.tensor([5.0], requires_grad=True)
    opt = mg.optim.SGD([w, unused], lr=0.5)
    mg.sum(w * w).backward()
    opt.step()
    assert w.item() == 0.0 and unused.item() == 5.0  # no grad: not touched
    opt.zero_grad()
    assert w.grad is None
    mg.sum(w * 3.0).backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(w.grad.numpy(), [0.0])


def test_a_traced_function_reads_the_updated_parameter() -> None:
    w = mg.tensor([2.0], requires_grad=True)
    f = mg.function(lambda x: x * w)
    opt = mg.optim.SGD([w], lr=1.0)
    f(mg.tensor([1.0])).sum().backward()
    opt.step()
    assert f(mg.tensor([1.0])).item() == 1.0 and f.trace_count == 1


def test_a_tape_that_used_the_old_value_refuses_backward() -> None:
    w = mg.tensor([2.0], requires_grad=True)
    y = mg.sum(w * w)
    opt = mg.optim.SGD([w], lr=0.1)
    w.grad = mg.tensor([1.0])
    opt.step()
    with pytest.raises(mg.GradientError, match="changed in place"):
        y.backward()


def test_bad_parameters_and_hyperparameters_are_named() -> None:
    with pytest.raises(mg.GradientError, match="parameter 1 .*requires_grad=True"):
        mg.optim.SGD([mg.tensor([1.0], requires_grad=True), mg.tensor([1.0])])
    with pytest.raises(mg.GradientError, match="lr must be a finite number >= 0"):
        mg.optim.Adam([mg.tensor([1.0], requires_grad=True)], lr=-1)
    with pytest.raises(mg.GradientError, match="no parameters"):
        mg.optim.SGD([])


def test_data_is_the_shared_array_and_assigning_it_replaces_the_values() -> None:
    t = mg.tensor([1.0, 2.0], requires_grad=True)
    assert t.data is t.numpy()
    t.data[1] = 7.0  # around the tape, as PyTorch's .data
    np.testing.assert_array_equal(t.numpy(), [1.0, 7.0])
    y = mg.sum(t * t)
    t.data = [3.0, 4.0]  # a new array; a list takes the parameter's dtype
    assert t.dtype == np.float32 and t.requires_grad
    with pytest.raises(mg.GradientError, match="changed in place"):
        y.backward()
    with pytest.raises(mg.ShapeError, match="tensor.data = ... at .*ragged"):
        t.data = [[1.0], [2.0, 3.0]]
    plain = mg.tensor([1.0, 2.0])  # a tensor that needs no grad takes any shape and dtype
    plain.data = np.array([3.0, 4.0, 5.0])
    assert plain.shape == (3,) and plain.dtype == np.float64


@pytest.mark.parametrize("value, error, fragment", [
    (np.array([3.0, 4.0, 5.0], np.float32), mg.ShapeError,
     "keeps its shape and dtype ((2,) float32), got (3,) float32"),
    (np.array([3.0, 4.0]), mg.DTypeError, "got (2,) float64"),
    (np.array([3, 4]), mg.DTypeError, "got (2,) int64"),
    (["a", "b"], mg.DTypeError, "cannot make a float32 array"),
])
def test_a_parameter_keeps_its_shape_and_dtype_through_data(value: Any, error: type,
                                                            fragment: str) -> None:
    # Its .grad, the optimizer's momentum and a traced graph are built for them: a new shape
    # would broadcast silently against the old .grad (PyTorch refuses a non-float .data too).
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    opt = mg.optim.SGD([w], lr=0.1, momentum=0.9)
    mg.sum(w * w).backward()
    opt.step()
    with pytest.raises(error) as info:
        w.data = value
    assert fragment in str(info.value) and "test_minigraph_optim.py" in str(info.value)
    np.testing.assert_allclose(w.numpy(), [0.8, 1.6], rtol=1e-6)  # unchanged
