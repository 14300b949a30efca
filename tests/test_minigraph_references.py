"""minigraph against references on inputs the op tests do not draw (the red team's round 2).

``test_minigraph_ops.py`` checks every op on tame values (|x| in [0.2, 1.5], small kernels). Here:
convolutions whose padding exceeds the kernel or whose stride skips cells, 1x1 kernels, one
channel, non-contiguous and Fortran-ordered inputs; pools whose stride leaves gaps; logsumexp
at -inf and at 1e4; clip exactly at its bounds; var with ddof up to n; third derivatives; loop
gradients whose trip count moves with the input; optimizers with every option; NaN, read-only
and strided arrays through every executor. References: PyTorch, numpy, central differences.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from minigraph_helpers import central_difference

import course_utils.minigraph as mg

FEW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def layout(data: st.DataObject, array: np.ndarray) -> np.ndarray:
    """The same values, as a C array, a Fortran array, or a strided view of a bigger one."""
    kind = data.draw(st.sampled_from(["C", "F", "strided"]), label="layout")
    if kind == "F":
        return np.asfortranarray(array)
    if kind == "strided":
        big = np.zeros((*array.shape[:-1], 2 * array.shape[-1]), array.dtype)
        big[..., ::2] = array
        return big[..., ::2]
    return array


def against_torch(mg_fn: Callable, torch_fn: Callable, arrays: list[np.ndarray],
                  wrt: tuple[int, ...], tol: float = 1e-10) -> None:
    """Forward and gradients of ``sum(f * c)`` in minigraph eager and graph equal PyTorch's."""
    ts = [torch.tensor(np.ascontiguousarray(a), requires_grad=i in wrt)
          for i, a in enumerate(arrays)]
    out = torch_fn(*ts)
    c = np.random.default_rng(0).uniform(-1, 1, tuple(out.shape))
    (out * torch.tensor(c)).sum().backward()
    expected = [out.detach().numpy()] + [ts[i].grad.numpy() for i in wrt]

    eager = [mg.tensor(a, requires_grad=i in wrt) for i, a in enumerate(arrays)]
    y = mg_fn(*eager)
    mg.sum(y * c).backward()
    got = {"eager": [y.numpy()] + [eager[i].grad.numpy() for i in wrt]}
    with mg.Graph().as_default() as g:
        phs = [mg.placeholder(a.shape, a.dtype.name, name=f"in{i}") for i, a in enumerate(arrays)]
        y = mg_fn(*phs)
        grads = mg.gradients(mg.sum(y * c), [phs[i] for i in wrt])
    feeds = dict(zip(phs, arrays, strict=True))
    for executor in ("interpreter", "codegen"):
        with mg.Session(g, executor=executor) as sess:
            got[executor] = sess.run([y, *grads], feeds)
    for mode, values in got.items():
        for k, (a, b) in enumerate(zip(values, expected, strict=True)):
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True,
                                       err_msg=f"{mode}: {'forward' if k == 0 else k}")


# --- convolution and pooling on geometry the op tests do not reach -------------------------------


@FEW
@given(data=st.data())
def test_conv2d_with_any_stride_and_padding_matches_torch(data: st.DataObject) -> None:
    kh, kw = (data.draw(st.integers(1, 4), label="kernel") for _ in range(2))
    sh, sw = (data.draw(st.integers(1, 4), label="stride") for _ in range(2))
    ph, pw = (data.draw(st.integers(0, 4), label="padding") for _ in range(2))  # may exceed k
    n, c, o = (data.draw(st.integers(1, 3), label=what) for what in ("n", "c", "o"))
    h = data.draw(st.integers(max(1, kh - 2 * ph), 7), label="h")
    w = data.draw(st.integers(max(1, kw - 2 * pw), 7), label="w")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x, k, b = rng.normal(size=(n, c, h, w)), rng.normal(size=(o, c, kh, kw)), rng.normal(size=o)
    kw_ = dict(stride=(sh, sw), padding=(ph, pw))
    against_torch(lambda x, k, b: mg.conv2d(x, k, mg.reshape(b, (-1, 1, 1)), **kw_),
                  lambda x, k, b: F.conv2d(x, k, b, **kw_),
                  [layout(data, x), layout(data, k), b], wrt=(0, 1, 2))


@FEW
@given(data=st.data())
def test_pooling_with_stride_unlike_the_kernel_matches_torch(data: st.DataObject) -> None:
    kh, kw = (data.draw(st.integers(1, 3), label="kernel") for _ in range(2))
    sh, sw = (data.draw(st.integers(1, 4), label="stride") for _ in range(2))  # gaps or overlap
    h, w = data.draw(st.integers(kh, 8), label="h"), data.draw(st.integers(kw, 8), label="w")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x = rng.permutation(2 * 3 * h * w).reshape(2, 3, h, w) * 0.1  # distinct: no max ties
    name = data.draw(st.sampled_from(["max_pool2d", "avg_pool2d"]), label="pool")
    against_torch(lambda x: getattr(mg, name)(x, (kh, kw), stride=(sh, sw)),
                  lambda x: getattr(F, name)(x, (kh, kw), stride=(sh, sw)),
                  [layout(data, x)], wrt=(0,))


def test_max_pool_ties_and_minus_infinity_route_the_gradient_like_torch() -> None:
    x = np.array([[[[1.0, 1.0, -np.inf], [0.0, 1.0, -np.inf], [-np.inf, -np.inf, -np.inf]]]])
    against_torch(lambda x: mg.max_pool2d(x, 2, stride=1), lambda x: F.max_pool2d(x, 2, 1),
                  [x], wrt=(0,))


# --- reductions at the edges of floating point ---------------------------------------------------

EDGES = [-np.inf, -1e4, -30.0, -1.0, 0.0, 0.5, 30.0, 1e4]


@FEW
@given(data=st.data())
def test_logsumexp_at_minus_infinity_and_huge_values_matches_torch(data: st.DataObject) -> None:
    rows, cols = data.draw(st.integers(1, 3), label="rows"), data.draw(st.integers(1, 4))
    x = np.array(data.draw(st.lists(st.sampled_from(EDGES), min_size=rows * cols,
                                    max_size=rows * cols), label="x")).reshape(rows, cols)
    axis = data.draw(st.sampled_from([0, 1, -1, (0, 1), None]), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    dims = (0, 1) if axis is None else axis
    with np.errstate(all="ignore"):  # -inf - -inf: numpy warns where torch is silent
        against_torch(lambda x: mg.logsumexp(x, axis=axis, keepdims=keepdims),
                      lambda x: torch.logsumexp(x, dim=dims, keepdim=keepdims), [x], wrt=(0,))


def test_logsumexp_over_no_numbers_is_minus_infinity_as_in_torch() -> None:
    with np.errstate(divide="ignore"):
        got = mg.logsumexp(mg.tensor(np.zeros((0, 3))), axis=0).numpy()
    np.testing.assert_array_equal(got, torch.logsumexp(torch.zeros(0, 3), 0).numpy())


@pytest.mark.parametrize("low, high", [(-1.0, 1.0), (0.5, 0.5), (None, 0.0), (0.0, None)])
def test_clip_exactly_at_its_bounds_passes_the_gradient_like_torch(low: Any, high: Any) -> None:
    x = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])  # every bound is hit exactly
    against_torch(lambda x: mg.clip(x, low, high), lambda x: torch.clamp(x, low, high), [x],
                  wrt=(0,))


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (-1, -3)])
@pytest.mark.parametrize("ddof", [0, 1, 2, 4])
def test_var_with_any_ddof_and_axes_matches_torch(axis: Any, ddof: int) -> None:
    x = np.random.default_rng(ddof).normal(size=(2, 3, 2))
    dims = tuple(range(3)) if axis is None else axis
    with warnings.catch_warnings():  # n - ddof <= 0: numpy and torch warn, and give inf/nan
        warnings.simplefilter("ignore")
        against_torch(lambda x: mg.var(x, axis=axis, ddof=ddof),
                      lambda x: torch.var(x, dim=dims, correction=ddof), [x], wrt=(0,))


# --- third derivatives --------------------------------------------------------------------------

V = np.array([1.0, 2.0, 3.0])
THIRD: dict[str, tuple[Callable, Callable]] = {
    "tanh": (mg.tanh, torch.tanh),
    "sigmoid": (mg.sigmoid, torch.sigmoid),
    "log": (lambda v: mg.log(v * v + 1.0), lambda v: torch.log(v * v + 1.0)),
    "pow 3.5 of |x|": (lambda v: mg.abs(v) ** 3.5, lambda v: torch.abs(v) ** 3.5),
    "div": (lambda v: 1.0 / (v * v + 0.5), lambda v: 1.0 / (v * v + 0.5)),
    "sqrt": (lambda v: mg.sqrt(v * v + 1.0), lambda v: torch.sqrt(v * v + 1.0)),
    "softmax": (lambda v: mg.softmax(v * v) * V,
                lambda v: torch.softmax(v * v, -1) * torch.tensor(V)),
    "logsumexp": (lambda v: mg.logsumexp(v * v), lambda v: torch.logsumexp(v * v, 0)),
    "var": (lambda v: mg.var(v ** 3.0, ddof=1), lambda v: torch.var(v ** 3, correction=1)),
    "matmul": (lambda v: mg.reshape(v, (1, 3)) @ mg.reshape(mg.exp(v), (3, 1)),
               lambda v: v.reshape(1, 3) @ torch.exp(v).reshape(3, 1)),
    "cross_entropy": (lambda v: mg.cross_entropy(mg.reshape(v * v, (1, 3)), mg.tensor([1])),
                      lambda v: F.cross_entropy((v * v).reshape(1, 3), torch.tensor([1]),
                                                reduction="none")),
    "conv2d": (lambda v: mg.conv2d(mg.reshape(mg.tanh(v), (1, 1, 1, 3)),
                                   mg.reshape(v, (1, 1, 1, 3)), padding=(0, 1)),
               lambda v: F.conv2d(torch.tanh(v).reshape(1, 1, 1, 3), v.reshape(1, 1, 1, 3),
                                  padding=(0, 1))),
    "avg_pool2d": (lambda v: mg.avg_pool2d(mg.reshape(mg.exp(v), (1, 1, 1, 3)), (1, 2),
                                           stride=1) ** 2.0,
                   lambda v: F.avg_pool2d(torch.exp(v).reshape(1, 1, 1, 3), (1, 2), 1) ** 2),
    "max_pool2d": (lambda v: mg.max_pool2d(mg.reshape(mg.exp(v), (1, 1, 1, 3)), (1, 2),
                                           stride=1) ** 3.0,
                   lambda v: F.max_pool2d(torch.exp(v).reshape(1, 1, 1, 3), (1, 2), 1) ** 3),
    "clip": (lambda v: mg.clip(v, -0.5, 1.0) * v ** 3.0,
             lambda v: torch.clamp(v, -0.5, 1.0) * v ** 3),
    "getitem, concat": (lambda v: mg.concat([mg.exp(v)[1:], v[:2] ** 3.0]),
                        lambda v: torch.cat([torch.exp(v)[1:], v[:2] ** 3])),
    "minimum, where": (lambda v: mg.where(v > 0, mg.minimum(v ** 3.0, mg.exp(v)), mg.exp(v)),
                       lambda v: torch.where(v > 0, torch.minimum(v ** 3, torch.exp(v)),
                                             torch.exp(v))),
    "broadcast, transpose": (lambda v: mg.transpose(mg.reshape(v, (3, 1)) *
                                                    mg.reshape(mg.exp(v), (1, 3))),
                             lambda v: (v.reshape(3, 1) * torch.exp(v).reshape(1, 3)).T),
}


def _torch_third(fn: Callable, x: np.ndarray) -> np.ndarray:
    t = torch.tensor(x, requires_grad=True)
    g1, = torch.autograd.grad(fn(t).sum(), t, create_graph=True)
    g2, = torch.autograd.grad(g1.sum(), t, create_graph=True)
    g3, = torch.autograd.grad(g2.sum(), t)
    return g3.numpy()


def _eager_third(fn: Callable, x: np.ndarray) -> np.ndarray:
    t = mg.tensor(x, requires_grad=True)
    for create_graph in (True, True, False):
        y = mg.sum(fn(t)) if t.grad is None else mg.sum(t.grad)
        t.grad = None
        y.backward(create_graph=create_graph)
    return t.grad.numpy()


def _graph_third(fn: Callable, x: np.ndarray) -> np.ndarray:
    with mg.Graph().as_default() as g:
        p = mg.placeholder(x.shape, "float64", name="x")
        d = mg.sum(fn(p))
        for _ in range(3):
            (d,) = mg.gradients(mg.sum(d), [p])
    g.validate()
    return mg.Session(g).run(d, {p: x})


@pytest.mark.parametrize("name", THIRD)
def test_third_derivatives_match_torch_in_eager_and_graph(name: str) -> None:
    mg_fn, torch_fn = THIRD[name]
    x = np.array([0.3, -0.7, 1.2])
    expected = _torch_third(torch_fn, x)
    for mode, got in {"eager": _eager_third(mg_fn, x), "graph": _graph_third(mg_fn, x)}.items():
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9, err_msg=mode)


# --- a loop whose trip count depends on the values -----------------------------------------------


def _grow(v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, int]:
    """``while sum(v*v) < 20: v = tanh(v) * w + v``: numpy, with the trip count."""
    n = 0
    while float(np.sum(v * v)) < 20.0 and n < 50:
        v, n = np.tanh(v) * w + v, n + 1
    return v, n


def _grow_mg(v: Any, w: Any) -> Any:
    (out, _) = mg.while_loop(lambda v, n: (mg.sum(v * v) < 20.0) & (n < 50),
                             lambda v, n: (mg.tanh(v) * w + v, n + 1), [v, mg.constant(0)])
    return out


@FEW
@given(st.lists(st.floats(0.2, 2.0), min_size=3, max_size=3),
       st.lists(st.floats(0.3, 1.5), min_size=3, max_size=3))
def test_loop_gradient_with_a_value_dependent_trip_count_equals_central_differences(
        v0: list[float], w0: list[float]) -> None:
    v0, w0 = np.array(v0), np.array(w0)
    eps = 1e-6
    n = _grow(v0, w0)[1]
    for a in (v0, w0):  # skip inputs where a step of eps would change the trip count
        for i in range(3):
            for s in (-eps, eps):
                a[i] += s
                moved = _grow(v0, w0)[1] != n
                a[i] -= s
                if moved:
                    return

    def loss(arrays: list[np.ndarray]) -> float:
        return float(np.sum(_grow(*arrays)[0] ** 3))

    expected = [central_difference(loss, [v0, w0], i, eps) for i in range(2)]
    with mg.Graph().as_default() as g:
        v, w = mg.placeholder((3,), "float64", name="v"), mg.placeholder((3,), "float64", name="w")
        grads = mg.gradients(mg.sum(_grow_mg(v, w) ** 3.0), [v, w])
    graph_grads = mg.Session(g).run(grads, {v: v0, w: w0})
    tv, tw = mg.tensor(v0, requires_grad=True), mg.tensor(w0, requires_grad=True)
    mg.function(lambda v, w: mg.sum(_grow_mg(v, w) ** 3.0))(tv, tw).backward()
    for mode, got in {"graph": graph_grads, "eager through mg.function": [tv.grad.numpy(),
                                                                          tw.grad.numpy()]}.items():
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"{mode} input {i}")


# --- optimizers with every option -----------------------------------------------------------------

RNG = np.random.default_rng(7)
XS, YS, W0 = RNG.normal(size=(8, 3)), RNG.normal(size=(8, 2)), RNG.normal(size=(3, 2))


@FEW
@given(name=st.sampled_from(["SGD", "Adam"]), lr=st.sampled_from([1e-3, 0.05, 0.3]),
       weight_decay=st.sampled_from([0.0, 0.01, 0.5]), momentum=st.sampled_from([0.0, 0.5, 0.99]),
       dampening=st.sampled_from([0.0, 0.3]), nesterov=st.booleans(),
       betas=st.sampled_from([(0.9, 0.999), (0.0, 0.5), (0.6, 0.0)]),
       eps=st.sampled_from([1e-8, 1e-3]))
def test_optimizers_with_every_option_equal_torch_optim(name: str, lr: float, weight_decay: float,
                                                        momentum: float, dampening: float,
                                                        nesterov: bool, betas: tuple,
                                                        eps: float) -> None:
    if name == "SGD":
        nesterov = nesterov and momentum > 0 and dampening == 0
        kwargs = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                      nesterov=nesterov)
    else:
        kwargs = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    w, tw = mg.tensor(W0, requires_grad=True), torch.tensor(W0, requires_grad=True)
    ours, theirs = getattr(mg.optim, name)([w], **kwargs), getattr(torch.optim, name)([tw],
                                                                                       **kwargs)
    for step in range(6):
        ours.zero_grad()
        theirs.zero_grad()
        mg.mean(mg.square(mg.tanh(XS @ w) - YS)).backward()
        torch.mean(torch.square(torch.tanh(torch.tensor(XS) @ tw) - torch.tensor(YS))).backward()
        ours.step()
        theirs.step()
        np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-12, atol=1e-14,
                                   err_msg=f"{name} {kwargs} step {step}")


# --- & | ~ on comparisons -------------------------------------------------------------------------


def test_and_or_not_of_comparisons_equal_numpys_in_eager_graph_and_codegen() -> None:
    x = np.array([-2.0, -0.5, 0.0, 0.5, 2.0])

    def mask(v: Any) -> tuple:
        return ((v > -1) & (v < 1), (v < -1) | (v > 1) | False, ~(v > 0), True & (v >= 0))

    expected = mask(x)
    with mg.Graph().as_default() as g:
        p = mg.placeholder((5,), "float64", name="x")
        g.outputs = list(mask(p))
    for mode, got in {"eager": [m.numpy() for m in mask(mg.tensor(x))],
                      "graph": mg.Session(g).run(g.outputs, {p: x}),
                      "codegen": mg.codegen(g)(x)}.items():
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=mode)


# --- odd arrays through every executor ----------------------------------------------------------


def _model(x: Any, w: Any) -> Any:
    return mg.logsumexp(mg.relu(x @ w) - mg.abs(x[:, :2]), axis=1)


def _model_np(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    z = np.maximum(x @ w, 0) - np.abs(x[:, :2])
    return np.log(np.sum(np.exp(z), axis=1))


@pytest.mark.parametrize("kind", ["strided", "fortran", "read-only", "nan", "inf"])
def test_odd_arrays_give_numpys_values_in_every_executor(kind: str) -> None:
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(5, 3)), rng.normal(size=(3, 2))
    if kind == "strided":
        x = np.repeat(x, 2, axis=0)[::2]
    elif kind == "fortran":
        x = np.asfortranarray(x)
    elif kind == "read-only":
        x.flags.writeable = False
    else:
        x = x.copy()
        x[1, 0] = np.nan if kind == "nan" else np.inf
    with np.errstate(invalid="ignore"):
        expected = _model_np(x, w)
        eager = _model(mg.tensor(x), mg.tensor(w)).numpy()
        with mg.Graph().as_default() as g:
            px, pw = mg.placeholder((None, 3), "float64", name="x"), mg.Variable(w, name="w")
            g.outputs = [_model(px, pw)]
        results = {"eager": eager, "codegen": mg.codegen(g)(x),
                   "traced": mg.function(_model)(mg.tensor(x), mg.tensor(w)).numpy()}
        for executor in ("interpreter", "codegen"):
            with mg.Session(g, executor=executor) as sess:
                sess.state["w"] = w
                results[executor] = sess.run(g.outputs[0], {px: x})
    for mode, got in results.items():
        np.testing.assert_allclose(got, expected, rtol=1e-12, equal_nan=True, err_msg=mode)
    if kind == "read-only":
        assert not x.flags.writeable and np.isfinite(x).all()  # nothing wrote into it
    assert math.isfinite(float(np.sum(w)))
