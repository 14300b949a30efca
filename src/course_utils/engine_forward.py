"""Forward mode for lesson 01's engine: a jvp rule per op and one pass that carries tangents.

Lesson 01 has you write this yourself (exercise 01.4); this module is the course's answer, kept
apart from :mod:`course_utils.engine` so that the lesson's later cells (counting the work of the
two modes) can import it instead of printing it.

A **jvp rule** (Jacobian-vector product) takes the tangents of an op's inputs (arrays shaped like
the inputs' values), the op's output value, the input values and the attrs, and returns the
output's tangent, ``J @ t``, shaped like the output. :func:`jvp` runs the graph once, computing
each node's value and tangent together: placeholders take their tangents from ``tangents``
(zeros when absent), constants have zero tangents.

>>> from course_utils.engine import placeholder, tanh
>>> x, w = placeholder("x"), placeholder("w")
>>> y = tanh(x * w)
>>> (value,), (tangent,) = jvp([y], {x: 0.5, w: 2.0}, {w: 1.0})
>>> round(float(tangent), 4)  # d y / d w = (1 - tanh(1)^2) * x
0.21
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from course_utils.engine import IMPL, broadcast_like_impl, sum_to, topo_order


def _zero(tangents, out, *inputs, **attrs):
    """The tangent of an op whose derivative is zero (sign, size, ones_like, zeros_like)."""
    return np.zeros_like(np.asarray(out, dtype=float))


# One named function per rule (not lambdas), so that a check can refer to each by its dotted name.
# The seven rules of exercise 01.4 are its answer: a learner's release withholds their bodies
# until lesson 01's solutions are out (CONTRIBUTING.md, "Answers in the package").
def add_jvp(t, out, x, y):
    ### BEGIN SOLUTION 01.4
    return t[0] + t[1]
    ### END SOLUTION


def mul_jvp(t, out, x, y):
    ### BEGIN SOLUTION 01.4
    return t[0] * y + x * t[1]
    ### END SOLUTION


def exp_jvp(t, out, x):
    ### BEGIN SOLUTION 01.4
    return t[0] * out
    ### END SOLUTION


def log_jvp(t, out, x):
    ### BEGIN SOLUTION 01.4
    return t[0] / x
    ### END SOLUTION


def tanh_jvp(t, out, x):
    ### BEGIN SOLUTION 01.4
    return t[0] * (1.0 - out * out)
    ### END SOLUTION


def matmul_jvp(t, out, x, y):
    ### BEGIN SOLUTION 01.4
    return t[0] @ y + x @ t[1]
    ### END SOLUTION


def sum_jvp(t, out, x, axis=None):
    ### BEGIN SOLUTION 01.4
    return np.sum(t[0], axis=axis)
    ### END SOLUTION


def sub_jvp(t, out, x, y): return t[0] - t[1]
def div_jvp(t, out, x, y): return (t[0] - out * t[1]) / y
def neg_jvp(t, out, x): return -t[0]
def relu_jvp(t, out, x): return t[0] * (out > 0)
def transpose_jvp(t, out, x): return np.swapaxes(t[0], -1, -2)


def logsumexp_jvp(t, out, x, axis=-1):
    """softmax(x) . t along the axis."""
    return np.sum(np.exp(x - out) * t[0], axis=axis, keepdims=True)


def unbroadcast_jvp(t, out, g, x): return sum_to(t[0], np.shape(x))  # linear in g
def broadcast_like_jvp(t, out, g, x, axis=None): return broadcast_like_impl(t[0], x, axis=axis)


JVP: dict[str, Callable] = {  # op -> (tangents, out, *inputs, **attrs) -> tangent of the output
    "add": add_jvp, "sub": sub_jvp, "mul": mul_jvp, "div": div_jvp, "neg": neg_jvp,
    "exp": exp_jvp, "log": log_jvp, "tanh": tanh_jvp, "relu": relu_jvp, "sign": _zero,
    "matmul": matmul_jvp, "transpose": transpose_jvp, "sum": sum_jvp, "size": _zero,
    "logsumexp": logsumexp_jvp, "ones_like": _zero, "zeros_like": _zero,
    "unbroadcast": unbroadcast_jvp, "broadcast_like": broadcast_like_jvp,
}


def jvp(outputs: Iterable, feed: Mapping, tangents: Mapping,
        rules: Mapping[str, Callable] | None = None) -> tuple[list, list]:
    """(values of `outputs`, their tangents `J @ t`) from one forward pass.

    `tangents` maps some placeholders to arrays shaped like their values in `feed` (the direction
    t); the others, and constants, have zero tangents. `rules` defaults to :data:`JVP`. Works on
    any nodes with ``op``, ``inputs`` and ``attrs`` (lesson 01's own nodes too).
    """
    ### BEGIN SOLUTION 01.4
    rules = JVP if rules is None else rules
    outputs = list(outputs)
    values, tangent = {}, {}
    for node in topo_order(outputs):
        if node.op == "placeholder":
            values[node] = np.asarray(feed[node], dtype=float)
            tangent[node] = (np.asarray(tangents[node], dtype=float) if node in tangents
                             else np.zeros_like(values[node]))
        else:
            inputs = [values[x] for x in node.inputs]
            values[node] = IMPL[node.op](*inputs, **node.attrs)
            if not node.inputs:  # a constant
                tangent[node] = np.zeros_like(np.asarray(values[node], dtype=float))
            else:
                tangent[node] = rules[node.op]([tangent[x] for x in node.inputs], values[node],
                                               *inputs, **node.attrs)
    return [values[y] for y in outputs], [tangent[y] for y in outputs]
    ### END SOLUTION


__all__ = ["JVP", "jvp"]
