"""Second derivatives: eager ``backward(create_graph=True)`` and ``mg.gradients`` of
``mg.gradients``, against PyTorch's double backward, for every differentiable op; a
Hessian-vector product and a gradient penalty through a small CNN; traced functions too.

Each op case (from ``test_minigraph_ops``) is differentiated twice: the gradient of
``sum(f(x) * c)``, dotted with a random ``v``, is differentiated again. That is a
Hessian-vector product for one input and a mixed second derivative for two.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_minigraph_ops import CASES, IMAGE_CASES, Drawn

import course_utils.minigraph as mg

#: The ops a user calls; gradient helpers (unbroadcast, conv2d_input_grad, ...) are covered as
#: the first derivatives of these.
HELPERS = {"unbroadcast", "broadcast_like", "getitem_grad", "conv2d_input_grad",
           "conv2d_weight_grad", "max_pool2d_grad", "max_pool2d_select", "avg_pool2d_grad"}
OPS = sorted(set(CASES) - HELPERS)


def _torch_second(d: Drawn, c: np.ndarray, vs: list[np.ndarray]) -> list[np.ndarray]:
    ts = [torch.tensor(a, requires_grad=i in d.wrt) for i, a in enumerate(d.arrays)]
    wrt = [ts[i] for i in d.wrt]
    grads = torch.autograd.grad((d.torch_fn(*ts) * torch.tensor(c)).sum(), wrt,
                                create_graph=True, allow_unused=True)
    s = sum((g * torch.tensor(v)).sum() for g, v in zip(grads, vs, strict=True) if g is not None)
    if not isinstance(s, torch.Tensor) or not s.requires_grad:
        return [np.zeros_like(d.arrays[i]) for i in d.wrt]
    second = torch.autograd.grad(s, wrt, allow_unused=True)
    return [np.zeros_like(d.arrays[i]) if g is None else g.numpy(force=True)
            for i, g in zip(d.wrt, second, strict=True)]


def _eager_second(d: Drawn, c: np.ndarray, vs: list[np.ndarray]) -> list[np.ndarray]:
    ts = [mg.tensor(a, requires_grad=i in d.wrt) for i, a in enumerate(d.arrays)]
    wrt = [ts[i] for i in d.wrt]
    mg.sum(d.mg_fn(*ts) * c).backward(create_graph=True)
    grads = [t.grad for t in wrt]
    for t in wrt:
        t.grad = None
    s = sum(mg.sum(g * v) for g, v in zip(grads, vs, strict=True))
    if s.requires_grad:
        s.backward()
    return [np.zeros_like(d.arrays[i]) if t.grad is None else t.grad.numpy()
            for i, t in zip(d.wrt, wrt, strict=True)]


def _graph_second(d: Drawn, c: np.ndarray, vs: list[np.ndarray]) -> list[np.ndarray]:
    with mg.Graph().as_default() as g:
        phs = [mg.placeholder(a.shape, a.dtype, name=f"in{i}") for i, a in enumerate(d.arrays)]
        wrt = [phs[i] for i in d.wrt]
        grads = mg.gradients(mg.sum(d.mg_fn(*phs) * c), wrt)
        terms = [mg.sum(gr * v) for gr, v in zip(grads, vs, strict=True) if gr is not None]
        s = terms[0] if len(terms) == 1 else mg.add(terms[0], terms[1]) if terms else None
        second = [None] * len(wrt) if s is None else mg.gradients(s, wrt)
    g.validate()
    fetch = [x for x in second if x is not None]
    values = iter(mg.Session(g).run(fetch, dict(zip(phs, d.arrays, strict=True))))
    return [np.zeros_like(d.arrays[i]) if x is None else next(values)
            for i, x in zip(d.wrt, second, strict=True)]


@pytest.mark.parametrize("name", OPS)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_second_derivatives_match_torch_eager_and_graph(name: str, data: st.DataObject) -> None:
    if name in IMAGE_CASES and data.draw(st.integers(0, 2), label="skip some") != 0:
        return  # image ops cost more: a third of the examples
    d = CASES[name](data)
    rng = np.random.default_rng(1)
    with torch.no_grad():
        out_shape = d.torch_fn(*map(torch.tensor, d.arrays)).shape
    c = rng.uniform(-1, 1, out_shape)
    vs = [rng.uniform(-1, 1, d.arrays[i].shape) for i in d.wrt]
    expected = _torch_second(d, c, vs)
    for mode, got in {"eager": _eager_second(d, c, vs), "graph": _graph_second(d, c, vs)}.items():
        for i, a, b in zip(d.wrt, got, expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9,
                                       err_msg=f"{mode}: second derivative for input {i}")


# --- the uses: a Hessian-vector product, a gradient penalty, a traced function -------------------

RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 1, 6, 6))
LABELS = np.array([0, 2, 1, 2])
W_CONV, W_FC = RNG.normal(size=(3, 1, 3, 3)) * 0.5, RNG.normal(size=(12, 3)) * 0.5


def cnn(x: Any, w: Any, v: Any, lib: Any) -> Any:
    if lib is torch:
        h = torch.nn.functional.max_pool2d(torch.tanh(torch.nn.functional.conv2d(x, w)), 2)
        return h.reshape(h.shape[0], -1) @ v
    h = mg.max_pool2d(mg.tanh(mg.conv2d(x, w)), 2)
    return mg.reshape(h, (h.shape[0], -1)) @ v


def test_hessian_vector_product_matches_torch() -> None:
    direction = RNG.normal(size=W_CONV.shape)
    tw, tv = torch.tensor(W_CONV, requires_grad=True), torch.tensor(W_FC)
    loss = torch.nn.functional.cross_entropy(cnn(torch.tensor(X), tw, tv, torch),
                                             torch.tensor(LABELS))
    (g,) = torch.autograd.grad(loss, tw, create_graph=True)
    (hvp,) = torch.autograd.grad((g * torch.tensor(direction)).sum(), tw)
    w = mg.tensor(W_CONV, requires_grad=True)
    mg.mean(mg.cross_entropy(cnn(mg.tensor(X), w, mg.tensor(W_FC), mg), LABELS)).backward(
        create_graph=True)
    grad, w.grad = w.grad, None
    assert grad.requires_grad and grad.grad_fn is not None
    mg.sum(grad * direction).backward()
    np.testing.assert_allclose(w.grad.numpy(), hvp.numpy(), rtol=1e-9, atol=1e-12)


def test_gradient_penalty_matches_torch() -> None:
    """loss + lambda * |d loss / d x|^2, differentiated with respect to the weights."""
    tx = torch.tensor(X, requires_grad=True)
    tw, tv = torch.tensor(W_CONV, requires_grad=True), torch.tensor(W_FC, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(cnn(tx, tw, tv, torch), torch.tensor(LABELS))
    (gx,) = torch.autograd.grad(loss, tx, create_graph=True)
    (loss + 0.5 * (gx ** 2).sum()).backward()
    x = mg.tensor(X, requires_grad=True)
    w, v = mg.tensor(W_CONV, requires_grad=True), mg.tensor(W_FC, requires_grad=True)
    loss = mg.mean(mg.cross_entropy(cnn(x, w, v, mg), LABELS))
    loss.backward(create_graph=True)
    gx = x.grad
    for t in (x, w, v):
        t.grad = None
    (loss + 0.5 * mg.sum(mg.square(gx))).backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_second_derivative_through_a_traced_function() -> None:
    f = mg.function(lambda x, w: mg.sum(mg.tanh(x @ w) ** 2))
    xs, ws = RNG.normal(size=(3, 2)), RNG.normal(size=(2, 2))
    tx, tw = torch.tensor(xs, requires_grad=True), torch.tensor(ws, requires_grad=True)
    (gw,) = torch.autograd.grad((torch.tanh(tx @ tw) ** 2).sum(), tw, create_graph=True)
    gw.sum().backward()
    x, w = mg.tensor(xs, requires_grad=True), mg.tensor(ws, requires_grad=True)
    f(x, w).backward(create_graph=True)
    grad_w = w.grad
    x.grad = w.grad = None
    mg.sum(grad_w).backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)


def test_create_graph_accumulates_like_torch() -> None:
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    mg.sum(x ** 3).backward(create_graph=True)
    mg.sum(x ** 2).backward(create_graph=True)  # adds 2x: 3x^2 + 2x, with a graph
    assert x.grad.requires_grad
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 16.0])
    g, x.grad = x.grad, None
    mg.sum(g).backward()
    np.testing.assert_allclose(x.grad.numpy(), [8.0, 14.0])  # 6x + 2


@pytest.mark.parametrize("name", OPS)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_raw_and_recorded_backward_give_the_same_gradients(name: str,
                                                           data: st.DataObject) -> None:
    """One set of vjp rules, two ways to run them: on raw arrays (no tape) and on the tape."""
    d = CASES[name](data)
    results = []
    for create_graph in (False, True):
        ts = [mg.tensor(a, requires_grad=i in d.wrt) for i, a in enumerate(d.arrays)]
        mg.sum(d.mg_fn(*ts) * 0.5).backward(create_graph=create_graph)
        results.append([ts[i].grad for i in d.wrt])
    for raw, recorded in zip(*results, strict=True):
        assert not raw.requires_grad and raw.dtype == recorded.dtype
        np.testing.assert_array_equal(raw.numpy(), recorded.numpy())


def test_a_vjp_of_your_own_still_gets_tensors_under_plain_backward() -> None:
    """Only built-in rules run on raw arrays; an op you register keeps the tensor API."""
    seen = []

    def vjp(g, out, x):
        seen.append((type(g).__name__, type(out).__name__, type(x).__name__))
        return (mg.tensor(g.numpy() * 3.0),)  # .numpy() and mg.tensor, as in lesson 01

    triple = mg.register_op(mg.Op("triple_test", lambda x: x * 3.0, mg.same_shape_rule, vjp,
                                  elementwise=True), replace=True)
    x = mg.tensor(np.array([1.0, 2.0]), requires_grad=True)  # float64: tanh' near 1 in float32
    mg.sum(mg.tanh(triple(x))).backward()                       # loses digits
    assert seen == [("Tensor", "Tensor", "Tensor")]
    np.testing.assert_allclose(x.grad.numpy(), 3.0 * (1 - np.tanh([3.0, 6.0]) ** 2), rtol=1e-9)
