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

import contextlib
from typing import Any

import numpy as np

from . import attrs as A
from . import eager
from . import shapes as S
from .eager import run_op
from .errors import ArgumentError, GraphError, ShapeError, UnknownOpError, user_source
from .graph import Node, get_default_graph
from .ops import Op, get_op


def apply(op: str | Op, inputs: Any, *, name: str | None = None, **attrs: Any) -> Any:
    """Apply ``op`` to ``inputs``: a new node if any input is symbolic, else an eager tensor.

    Python numbers and numpy arrays mixed with nodes become constants; a bare number takes the
    dtype of the values it meets (``x * 2`` keeps x's float32). ``name`` names the node (graph
    mode only).
    """
    if eager.RAW:  # backward() running a built-in vjp rule: arrays in, arrays out
        return eager.run_raw(op, inputs, attrs)
    try:
        op = get_op(op)
    except UnknownOpError as e:
        raise UnknownOpError(f"mg.apply at {user_source()}: {e}") from None
    inputs = tuple(inputs)
    default = get_default_graph()
    if not default.captures_outer:
        for x in inputs:
            if isinstance(x, Node):
                break
        else:  # no symbolic input: eager, the common case, decided without building anything
            return run_op(op, inputs, attrs)
    graphs = {id(x.graph): x for x in inputs if isinstance(x, Node)}
    if default.captures_outer:  # tracing a function body: every op is recorded there
        graph = default
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


def minimum(x: Any, y: Any, name: str | None = None) -> Any:
    """The smaller of ``x`` and ``y``, elementwise (a tie sends the gradient to ``x``)."""
    return apply("minimum", (x, y), name=name)


def clip(x: Any, min: float | None = None, max: float | None = None,  # noqa: A002
         name: str | None = None) -> Any:
    """``x`` limited to ``[min, max]``; a ``None`` bound is no bound. The gradient passes
    where ``min <= x <= max``. NB: ``np.clip``; PyTorch calls it ``torch.clamp`` (alias
    ``torch.clip``). The bounds are numbers; for tensor bounds use ``mg.maximum``/``mg.minimum``.
    """
    bounds = {key: _checked(A.number_or_none, value, "clip", key)
              for key, value in (("min", min), ("max", max))}
    return apply("clip", (x,), name=name, **bounds)


def neg(x: Any, name: str | None = None) -> Any:
    """``-x``."""
    return apply("neg", (x,), name=name)


def square(x: Any, name: str | None = None) -> Any:
    """``x * x``."""
    return apply("square", (x,), name=name)


def abs(x: Any, name: str | None = None) -> Any:  # noqa: A001 (mg.abs, like np.abs)
    """``|x|``; its gradient at 0 is 0, as PyTorch's."""
    return apply("abs", (x,), name=name)


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
    return apply("cast", (x,), name=name, dtype=_dtype_name(dtype, "cast"))


# --- reductions and losses ----------------------------------------------------------------------


def sum(x: Any, axis: S.Axis = None, keepdims: bool = False, name: str | None = None) -> Any:  # noqa: A001
    """Sum over ``axis`` (all axes by default)."""
    return _reduce("sum", x, axis, keepdims, name)


def mean(x: Any, axis: S.Axis = None, keepdims: bool = False, name: str | None = None) -> Any:
    """Mean over ``axis`` (all axes by default)."""
    return _reduce("mean", x, axis, keepdims, name)


def max(x: Any, axis: S.Axis = None, keepdims: bool = False, name: str | None = None) -> Any:  # noqa: A001
    """Maximum over ``axis``; ties share the gradient equally."""
    return _reduce("max", x, axis, keepdims, name)


def logsumexp(x: Any, axis: S.Axis = None, keepdims: bool = False,
              name: str | None = None) -> Any:
    """``log(sum(exp(x)))`` over ``axis``, without overflow; its gradient is the softmax.

    NB: ``torch.logsumexp`` (which needs ``dim``); ``scipy.special.logsumexp``.
    """
    return _reduce("logsumexp", x, axis, keepdims, name)


def var(x: Any, axis: S.Axis = None, keepdims: bool = False, ddof: int = 0,
        name: str | None = None) -> Any:
    """Variance over ``axis``: the mean squared deviation, divided by ``n - ddof``.

    NB: ``ddof=0`` is numpy's default; ``torch.var`` defaults to the unbiased estimate
    (``correction=1``), which is ``ddof=1`` here.
    """
    return apply("var", (x,), name=name, axis=_axis(axis, "var"),
                 keepdims=_checked(A.boolean, keepdims, "var", "keepdims"),
                 ddof=_checked(A.integer, ddof, "var", "ddof"))


def _reduce(op: str, x: Any, axis: Any, keepdims: Any, name: str | None) -> Any:
    return apply(op, (x,), name=name, axis=_axis(axis, op),
                 keepdims=_checked(A.boolean, keepdims, op, "keepdims"))


def softmax(x: Any, axis: int = -1, name: str | None = None) -> Any:
    """``exp(x) / sum(exp(x))`` along ``axis``."""
    return apply("softmax", (x,), name=name, axis=_checked(A.integer, axis, "softmax", "axis"))


def log_softmax(x: Any, axis: int = -1, name: str | None = None) -> Any:
    """``log(softmax(x))``, computed without overflow."""
    return apply("log_softmax", (x,), name=name,
                 axis=_checked(A.integer, axis, "log_softmax", "axis"))


def cross_entropy(logits: Any, labels: Any, name: str | None = None) -> Any:
    """Per-row loss ``-log softmax(logits)[label]``; take ``mg.mean`` of it for the usual loss.

    NB: TensorFlow's ``sparse_softmax_cross_entropy_with_logits``; PyTorch's
    ``F.cross_entropy(..., reduction="none")``.
    """
    return apply("cross_entropy", (logits, labels), name=name)


def one_hot(labels: Any, depth: int, dtype: Any = "float32", name: str | None = None) -> Any:
    """Rows of the ``depth x depth`` identity picked by integer ``labels``."""
    return apply("one_hot", (labels,), name=name,
                 depth=_checked(A.positive_int, depth, "one_hot", "depth"),
                 dtype=_dtype_name(dtype, "one_hot"))


# --- shapes -------------------------------------------------------------------------------------


def matmul(x: Any, y: Any, name: str | None = None) -> Any:
    """Matrix product ``x @ y``; leading axes are batch axes and broadcast."""
    return apply("matmul", (x, y), name=name)


def reshape(x: Any, shape: Any, name: str | None = None) -> Any:
    """The same elements in ``shape`` (one entry may be -1: inferred)."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else shape
    return apply("reshape", (x,), name=name,
                 shape=_checked(A.target_shape, shape, "reshape", "shape"))


def transpose(x: Any, axes: Any = None, name: str | None = None) -> Any:
    """Axes permuted by ``axes`` (reversed by default)."""
    return apply("transpose", (x,), name=name,
                 axes=_checked(A.permutation, axes, "transpose", "axes"))


def broadcast_to(x: Any, shape: Any, name: str | None = None) -> Any:
    """``x`` repeated to the fully known ``shape``."""
    return apply("broadcast_to", (x,), name=name,
                 shape=_checked(A.shape, shape, "broadcast_to", "shape"))


def getitem(x: Any, index: Any, name: str | None = None) -> Any:
    """``x[index]`` with basic slicing: ints, slices, ``None`` and ``...``."""
    return apply("getitem", (x,), name=name, index=_index(index))


def concat(xs: Any, axis: int = 0, name: str | None = None) -> Any:
    """The values in ``xs`` joined along ``axis``."""
    return apply("concat", tuple(xs), name=name, axis=_checked(A.integer, axis, "concat", "axis"))


def expand_dims(x: Any, axis: S.Axis, name: str | None = None) -> Any:
    """``x`` with size-1 axes inserted at ``axis``."""
    return apply("expand_dims", (x,), name=name, axis=_axis(axis, "expand_dims"))


def squeeze(x: Any, axis: S.Axis, name: str | None = None) -> Any:
    """``x`` with the size-1 axes ``axis`` removed."""
    return apply("squeeze", (x,), name=name, axis=_axis(axis, "squeeze"))


# --- images: NCHW, conv weights OIHW (PyTorch's layouts) ----------------------------------------


def conv2d(x: Any, w: Any, b: Any = None, stride: Any = 1, padding: Any = 0,
           name: str | None = None) -> Any:
    """2-d convolution of images ``x`` (N, C, H, W) with weights ``w`` (O, C, kh, kw), plus an
    optional bias ``b`` (O,); ``stride`` and ``padding`` (zeros) are one int or (height, width).

    The output is (N, O, Ho, Wo) with ``Ho = (H + 2 * padding - kh) // stride + 1``. Computed by
    im2col (see ``course_utils.minigraph.conv``); a bias is one broadcast ``add`` after it.
    NB: ``torch.nn.functional.conv2d(x, w, b, stride, padding)``, and like it a
    cross-correlation (the kernel is not flipped).
    """
    out = apply("conv2d", (x, w), name=name if b is None else None,
                stride=_checked(A.pair, stride, "conv2d", "stride"),
                padding=_checked(A.padding, padding, "conv2d", "padding"))
    if b is None:
        return out
    return add(out, reshape(b, (-1, 1, 1)), name=name)


def max_pool2d(x: Any, kernel_size: Any, stride: Any = None, name: str | None = None) -> Any:
    """The max of each ``kernel_size`` window of images ``x`` (N, C, H, W); windows are
    ``stride`` apart (default: ``kernel_size``, so they do not overlap). NB: PyTorch's
    ``F.max_pool2d``; the gradient goes to the first maximum of a window, as there."""
    return _pool("max_pool2d", x, kernel_size, stride, name)


def avg_pool2d(x: Any, kernel_size: Any, stride: Any = None, name: str | None = None) -> Any:
    """The mean of each ``kernel_size`` window of images ``x`` (N, C, H, W), ``stride`` apart
    (default: ``kernel_size``). NB: PyTorch's ``F.avg_pool2d`` without padding."""
    return _pool("avg_pool2d", x, kernel_size, stride, name)


def _pool(op: str, x: Any, kernel_size: Any, stride: Any, name: str | None) -> Any:
    kernel = _checked(A.pair, kernel_size, op, "kernel_size")
    stride = kernel if stride is None else _checked(A.pair, stride, op, "stride")
    return apply(op, (x,), name=name, kernel_size=kernel, stride=stride)


def ones_like(x: Any, name: str | None = None) -> Any:
    """Ones with ``x``'s shape and dtype (also when that shape is known only at run time)."""
    return apply("ones_like", (x,), name=name)


def size(x: Any, axis: S.Axis = None, dtype: Any = "float32", name: str | None = None) -> Any:
    """The number of elements of ``x`` along ``axis`` (all by default), as a scalar."""
    return apply("size", (x,), name=name, axis=_axis(axis, "size"),
                 dtype=_dtype_name(dtype, "size"))


# --- the helpers gradients are made of ----------------------------------------------------------


def unbroadcast(g: Any, like: Any, name: str | None = None) -> Any:
    """Sum ``g`` down to ``like``'s shape: the gradient of broadcasting ``like`` up to ``g``.

    Returns ``g`` itself when both shapes are known and equal; otherwise adds an ``unbroadcast``
    op, which reads ``like``'s shape at run time and so also works with ``None`` dimensions.
    ``like`` is a value (tensor, array or node), not a shape: it is its shape that counts.
    """
    for arg, value, role in (("g", g, "the gradient to sum"),
                             ("like", like, "the value whose shape g is summed down to")):
        if not hasattr(value, "shape") or not hasattr(value, "dtype"):
            hint = (f"; to sum down to the shape {value!r}, pass a value of that shape, e.g. "
                    f"np.zeros({value!r})" if arg == "like" and isinstance(value, tuple) else "")
            raise ArgumentError(f"mg.unbroadcast(g, like) at {user_source()}: {arg} is {role} (a "
                                f"tensor, numpy array or graph node), got "
                                f"{type(value).__name__} {A._short(value)}{hint}")
    if tuple(g.shape) == tuple(like.shape) and None not in g.shape:
        return g
    return apply("unbroadcast", (g, like), name=name)


def broadcast_like(x: Any, like: Any, name: str | None = None) -> Any:
    """``x`` repeated to ``like``'s run-time shape (the gradient of ``sum``)."""
    return apply("broadcast_like", (x, like), name=name)


def getitem_grad(g: Any, like: Any, index: Any, name: str | None = None) -> Any:
    """Zeros shaped like ``like`` with ``g`` written at ``index`` (the gradient of ``getitem``)."""
    return apply("getitem_grad", (g, like), name=name, index=_index(index))


def _checked(kind: A.Kind, value: Any, fn: str, arg: str) -> Any:
    """``kind(value)``, or the minigraph error of that kind naming ``mg.fn``, the argument and
    your line."""
    try:
        return kind(value)
    except ValueError as e:
        raise A.ERRORS.get(kind, GraphError)(f"mg.{fn} at {user_source()}: {arg}="
                                             f"{A._short(value)}: {e}") from None


def _axis(axis: Any, fn: str = "sum") -> S.Axis:
    """Axis attrs as plain ints or tuples, so graphs print and compare cleanly."""
    return _checked(A.axis, axis, fn, "axis")


def _index(index: Any) -> tuple:
    try:
        return S.normalize_index(index)
    except ShapeError as e:
        raise ShapeError(f"while building getitem at {user_source()}: {e}") from None


def _dtype_name(dtype: Any, fn: str = "cast") -> str:
    with contextlib.suppress(TypeError, ValueError):  # if not, the check says what it wants
        dtype = np.dtype(dtype).name
    return _checked(A.dtype_name, dtype, fn, "dtype")
