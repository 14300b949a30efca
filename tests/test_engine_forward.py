"""course_utils.engine_forward: every jvp rule against central differences along the tangent and
against the engine's vjp rule (<v, J t> = <J^T v, t>), and the forward pass on a layer."""

import numpy as np
import pytest

from course_utils import engine as E
from course_utils.engine_forward import JVP, jvp

RNG = np.random.default_rng(0)
A = RNG.normal(size=(4, 3))
# op -> (inputs, attrs, which inputs are differentiable); log takes positive values
CASES = {
    "add": ((A, RNG.normal(size=(3,))), {}, (0, 1)),
    "sub": ((RNG.normal(size=(4, 1)), A), {}, (0, 1)),
    "mul": ((A, RNG.normal(size=(4, 1))), {}, (0, 1)),
    "div": ((A, RNG.uniform(1.0, 2.0, size=(3,))), {}, (0, 1)),
    "neg": ((A,), {}, (0,)),
    "exp": ((A,), {}, (0,)),
    "log": ((np.abs(A) + 0.5,), {}, (0,)),
    "tanh": ((A,), {}, (0,)),
    "relu": ((A,), {}, (0,)),
    "matmul": ((A, RNG.normal(size=(3, 2))), {}, (0, 1)),
    "transpose": ((A,), {}, (0,)),
    "sum": ((A,), {"axis": 1}, (0,)),
    "logsumexp": ((A,), {"axis": -1}, (0,)),
    "unbroadcast": ((A, np.zeros(3)), {}, (0,)),
    "broadcast_like": ((RNG.normal(size=(4,)), A), {"axis": 1}, (0,)),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_jvp_rule_against_central_differences_and_the_vjp(op):
    inputs, attrs, diff = CASES[op]
    rng = np.random.default_rng(1)
    t = [rng.normal(size=np.shape(x)) if i in diff else np.zeros(np.shape(x))
         for i, x in enumerate(inputs)]
    out = E.IMPL[op](*inputs, **attrs)
    got = JVP[op](t, out, *inputs, **attrs)
    assert np.shape(got) == np.shape(out)
    h = 1e-6
    plus = E.IMPL[op](*[x + h * ti for x, ti in zip(inputs, t, strict=True)], **attrs)
    minus = E.IMPL[op](*[x - h * ti for x, ti in zip(inputs, t, strict=True)], **attrs)
    np.testing.assert_allclose(got, (plus - minus) / (2 * h), rtol=1e-6, atol=1e-7)
    v = rng.normal(size=np.shape(out))
    pulled = E.VJP[op](v, out, *inputs, **attrs)
    back = sum(float(np.sum(p * ti)) for p, ti in zip(pulled, t, strict=True) if p is not None)
    assert abs(float(np.sum(v * got)) - back) < 1e-10 * (1 + abs(back))


def test_zero_derivative_ops_have_zero_tangents():
    for op in ("sign", "size", "ones_like", "zeros_like"):
        out = E.IMPL[op](A)
        assert not np.any(JVP[op]([np.ones_like(A)], out, A))


def test_jvp_on_a_layer_matches_backprop():
    X, W, B, T = (E.placeholder(n) for n in "XWBT")
    loss = E.reduce_mean((E.tanh(X @ W + B) - T) * (E.tanh(X @ W + B) - T))
    feed = {X: RNG.normal(size=(5, 3)), W: RNG.normal(size=(3, 2)), B: RNG.normal(size=(2,)),
            T: RNG.normal(size=(5, 2))}
    t = {W: RNG.normal(size=(3, 2)), B: RNG.normal(size=(2,))}
    (value,), (tangent,) = jvp([loss], feed, t)
    values = E.evaluate([loss], feed)
    grads = E.backprop(loss, values)
    assert value == pytest.approx(float(values[loss]))
    assert float(tangent) == pytest.approx(sum(float(np.sum(grads[p] * t[p])) for p in t),
                                           rel=1e-12)
    # only the placeholders given: X and T have zero tangents
    (_,), (none,) = jvp([loss], feed, {})
    assert float(none) == 0.0
