"""``apply``, the one dispatch point, and the public op functions built on it.

``apply(op, inputs, **attrs)`` looks at the inputs: if any is a graph ``Node`` it adds a node to
that node's graph (the shape rule runs now); otherwise it runs ``op.impl`` at once and returns an
eager ``Tensor``, recorded on the tape when some input requires grad. Every function below (and
every Python operator) is a thin wrapper over it.

>>> import course_utils.minigraph as mg
>>> mg.add(mg.tensor([1.0, 2.0]), 1.0)                 # eager: runs now
tensor([2., 3.], dtype=float32)
>>> with mg.Graph().as_default():
...     print(mg.add(mg.placeholder((2,), name="x"), 1.0))   # graph: adds a node
<Node %add = add(%x, %const)  # (2,) float32>

NB: JAX's ``bind`` plays the same role, choosing an interpreter from the inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import shapes as S
from .eager import run_op
from .errors import DTypeError, GraphError, ShapeError, UnknownOpError, user_source
from .graph import Node, get_default_graph
from .ops import Op, get_op


def apply(op: str | Op, inputs: Any, *, name: str | None = None, **attrs: Any) -> Any:
    """Apply ``op`` to ``inputs``: a new node if any input is symbolic, else an eager tensor.

    Python numbers and numpy arrays mixed with nodes become constants; a bare number takes the
    dtype of the values it meets (``x * 2`` keeps x's float32). ``name`` names the node (graph
    mode only).
    """
    try:
        op = get_op(op)
    except UnknownOpError as e:
        raise UnknownOpError(f"mg.apply at {user_source()}: {e}") from None
    inputs = tuple(inputs)
    graphs = {id(x.graph): x for x in inputs if isinstance(x, Node)}
    default = get_default_graph()
    if default.captures_outer:  # tracing a function body: every op is recorded there
        graph = default
    elif not graphs:
        return run_op(op, inputs, attrs)
    elif len(graphs) > 1:
        a, b = list(graphs.values())[:2]
        raise GraphError(f"{op.name} at {user_source()} mixes %{a.name} and %{b.name}, which "
                         f"belong to different graphs; build both in the same graph")
    else:
        graph = next(iter(graphs.values())).graph
    weak = S.weak_dtype(inputs)
    nodes = tuple(graph.lift(x, weak) for x in inputs)
    return graph.add_node(op, nodes, attrs, name=name)


# --- elementwise --------------------------------------------------------------------------------


def add(x: Any, y: Any, name: str | None = None) -> Any:
    """``x + y`` with numpy broadcasting."""
    return apply("add", (x, y), name=name)


def sub(x: Any, y: Any, name: str | None = None) -> Any:
    """``x - y``."""
    return apply("sub", (x, y), name=name)


def mul(x: Any, y: Any, name: str | None = None) -> Any:
    """``x * y``."""
    return apply("mul", (x, y), name=name)


def div(x: Any, y: Any, name: str | None = None) -> Any:
    """``x / y`` (floats only)."""
    return apply("div", (x, y), name=name)


def pow(x: Any, y: Any, name: str | None = None) -> Any:  # noqa: A001 (mg.pow, like np.pow)
    """``x ** y`` (floats only)."""
    return apply("pow", (x, y), name=name)


def maximum(x: Any, y: Any, name: str | None = None) -> Any:
    """The larger of ``x`` and ``y``, elementwise."""
    return apply("maximum", (x, y), name=name)


def neg(x: Any, name: str | None = None) -> Any:
    """``-x``."""
    return apply("neg", (x,), name=name)


def exp(x: Any, name: str | None = None) -> Any:
    """``e ** x``."""
    return apply("exp", (x,), name=name)


def log(x: Any, name: str | None = None) -> Any:
    """Natural logarithm."""
    return apply("log", (x,), name=name)


def sqrt(x: Any, name: str | None = None) -> Any:
    """Square root."""
    return apply("sqrt", (x,), name=name)


def tanh(x: Any, name: str | None = None) -> Any:
    """Hyperbolic tangent."""
    return apply("tanh", (x,), name=name)


def sigmoid(x: Any, name: str | None = None) -> Any:
    """``1 / (1 + exp(-x))``."""
    return apply("sigmoid", (x,), name=name)


def relu(x: Any, name: str | None = None) -> Any:
    """``max(x, 0)``."""
    return apply("relu", (x,), name=name)


def identity(x: Any, name: str | None = None) -> Any:
    """``x`` itself: a way to give a value a name in the graph."""
    return apply("identity", (x,), name=name)


def equal(x: Any, y: Any, name: str | None = None) -> Any:
    """``x == y`` elementwise, a bool value (``==`` on values compares identity)."""
    return apply("equal", (x, y), name=name)


def not_equal(x: Any, y: Any, name: str | None = None) -> Any:
    """``x != y`` elementwise, a bool value."""
    return apply("not_equal", (x, y), name=name)


def less(x: Any, y: Any, name: str | None = None) -> Any:
    """``x < y``."""
    return apply("less", (x, y), name=name)


def less_equal(x: Any, y: Any, name: str | None = None) -> Any:
    """``x <= y``."""
    return apply("less_equal", (x, y), name=name)


def greater(x: Any, y: Any, name: str | None = None) -> Any:
    """``x > y``."""
    return apply("greater", (x, y), name=name)


def greater_equal(x: Any, y: Any, name: str | None = None) -> Any:
    """``x >= y``."""
    return apply("greater_equal", (x, y), name=name)


def where(cond: Any, x: Any, y: Any, name: str | None = None) -> Any:
    """``x`` where ``cond`` is true, else ``y`` (all broadcast together)."""
    return apply("where", (cond, x, y), name=name)


def cast(x: Any, dtype: Any, name: str | None = None) -> Any:
    """``x`` converted to ``dtype`` (``"float32"``, ``"int64"``, ...)."""
    return apply("cast", (x,), name=name, dtype=_dtype_name(dtype))


# --- reductions and losses ----------------------------------------------------------------------


def sum(x: Any, axis: S.Axis = None, keepdims: bool = False, name: str | None = None) -> Any:  # noqa: A001
    """Sum over ``axis`` (all axes by default)."""
    return apply("sum", (x,), name=name, axis=_axis(axis), keepdims=keepdims)


def mean(x: Any, axis: S.Axis = None, keepdims: bool = False, name: str | None = None) -> Any:
    """Mean over ``axis`` (all axes by default)."""
    return apply("mean", (x,), name=name, axis=_axis(axis), keepdims=keepdims)


def max(x: Any, axis: S.Axis = None, keepdims: bool = False, name: str | None = None) -> Any:  # noqa: A001
    """Maximum over ``axis``; ties share the gradient equally."""
    return apply("max", (x,), name=name, axis=_axis(axis), keepdims=keepdims)


def softmax(x: Any, axis: int = -1, name: str | None = None) -> Any:
    """``exp(x) / sum(exp(x))`` along ``axis``."""
    return apply("softmax", (x,), name=name, axis=axis)


def log_softmax(x: Any, axis: int = -1, name: str | None = None) -> Any:
    """``log(softmax(x))``, computed without overflow."""
    return apply("log_softmax", (x,), name=name, axis=axis)


def cross_entropy(logits: Any, labels: Any, name: str | None = None) -> Any:
    """Per-row loss ``-log softmax(logits)[label]``; take ``mg.mean`` of it for the usual loss.

    NB: TensorFlow's ``sparse_softmax_cross_entropy_with_logits``; PyTorch's
    ``F.cross_entropy(..., reduction="none")``.
    """
    return apply("cross_entropy", (logits, labels), name=name)


def one_hot(labels: Any, depth: int, dtype: Any = "float32", name: str | None = None) -> Any:
    """Rows of the ``depth x depth`` identity picked by integer ``labels``."""
    return apply("one_hot", (labels,), name=name, depth=depth, dtype=_dtype_name(dtype))


# --- shapes -------------------------------------------------------------------------------------


def matmul(x: Any, y: Any, name: str | None = None) -> Any:
    """Matrix product ``x @ y``; leading axes are batch axes and broadcast."""
    return apply("matmul", (x, y), name=name)


def reshape(x: Any, shape: Any, name: str | None = None) -> Any:
    """The same elements in ``shape`` (one entry may be -1: inferred)."""
    shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
    return apply("reshape", (x,), name=name, shape=shape)


def transpose(x: Any, axes: Any = None, name: str | None = None) -> Any:
    """Axes permuted by ``axes`` (reversed by default)."""
    return apply("transpose", (x,), name=name, axes=None if axes is None else tuple(axes))


def broadcast_to(x: Any, shape: Any, name: str | None = None) -> Any:
    """``x`` repeated to the fully known ``shape``."""
    return apply("broadcast_to", (x,), name=name, shape=tuple(shape))


def getitem(x: Any, index: Any, name: str | None = None) -> Any:
    """``x[index]`` with basic slicing: ints, slices, ``None`` and ``...``."""
    return apply("getitem", (x,), name=name, index=_index(index))


def concat(xs: Any, axis: int = 0, name: str | None = None) -> Any:
    """The values in ``xs`` joined along ``axis``."""
    return apply("concat", tuple(xs), name=name, axis=axis)


def expand_dims(x: Any, axis: S.Axis, name: str | None = None) -> Any:
    """``x`` with size-1 axes inserted at ``axis``."""
    return apply("expand_dims", (x,), name=name, axis=_axis(axis))


def squeeze(x: Any, axis: S.Axis, name: str | None = None) -> Any:
    """``x`` with the size-1 axes ``axis`` removed."""
    return apply("squeeze", (x,), name=name, axis=_axis(axis))


def ones_like(x: Any, name: str | None = None) -> Any:
    """Ones with ``x``'s shape and dtype (also when that shape is known only at run time)."""
    return apply("ones_like", (x,), name=name)


def size(x: Any, axis: S.Axis = None, dtype: Any = "float32", name: str | None = None) -> Any:
    """The number of elements of ``x`` along ``axis`` (all by default), as a scalar."""
    return apply("size", (x,), name=name, axis=_axis(axis), dtype=_dtype_name(dtype))


# --- the helpers gradients are made of ----------------------------------------------------------


def unbroadcast(g: Any, like: Any, name: str | None = None) -> Any:
    """Sum ``g`` down to ``like``'s shape: the gradient of broadcasting ``like`` up to ``g``.

    Returns ``g`` itself when both shapes are known and equal; otherwise adds an ``unbroadcast``
    op, which reads ``like``'s shape at run time and so also works with ``None`` dimensions.
    """
    if tuple(g.shape) == tuple(like.shape) and None not in g.shape:
        return g
    return apply("unbroadcast", (g, like), name=name)


def broadcast_like(x: Any, like: Any, name: str | None = None) -> Any:
    """``x`` repeated to ``like``'s run-time shape (the gradient of ``sum``)."""
    return apply("broadcast_like", (x, like), name=name)


def getitem_grad(g: Any, like: Any, index: Any, name: str | None = None) -> Any:
    """Zeros shaped like ``like`` with ``g`` written at ``index`` (the gradient of ``getitem``)."""
    return apply("getitem_grad", (g, like), name=name, index=_index(index))


def _axis(axis: Any) -> S.Axis:
    """Axis attrs as plain ints or tuples, so graphs print and compare cleanly."""
    if axis is None or isinstance(axis, int):
        return axis
    if isinstance(axis, (list, tuple)):
        return tuple(int(a) for a in axis)
    return int(axis)


def _index(index: Any) -> tuple:
    try:
        return S.normalize_index(index)
    except ShapeError as e:
        raise ShapeError(f"while building getitem at {user_source()}: {e}") from None


def _dtype_name(dtype: Any) -> str:
    try:
        return np.dtype(dtype).name
    except TypeError:
        raise DTypeError(f"{dtype!r} (at {user_source()}) is not a numpy dtype name such as "
                         f"'float32' or 'int64'") from None
