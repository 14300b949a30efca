"""The op table: every primitive is one ``Op`` record in ``OPS``.

An op says three things: how to compute it on numpy arrays (``impl``), what shape and dtype come
out (``shape_rule``, run before any number exists, so graph mode finds shape errors when a node is
built), and how to push a gradient back through it (``vjp``). Each ``vjp`` is written with ``mg``
functions, so the same rule runs eagerly on tensors during ``backward()`` and builds backward
nodes for ``mg.gradients``. Adding an op is adding one record:

>>> import numpy as np, course_utils.minigraph as mg
>>> softplus = mg.register_op(mg.Op(
...     "softplus", impl=lambda x: np.logaddexp(0, x), shape_rule=mg.same_shape_rule,
...     vjp=lambda g, out, x: (g * mg.sigmoid(x),), elementwise=True, doc="log(1 + exp(x))"))
>>> x = mg.tensor([0.0, 1.0], requires_grad=True)
>>> softplus(x).sum().backward()
>>> x.grad
tensor([0.5   , 0.7311], dtype=float32)

NB: TensorFlow keeps the same three things apart: the kernel (impl), the shape function
registered with ``REGISTER_OP`` (shape_rule) and ``@ops.RegisterGradient`` (vjp).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Rules call the public API (mg.mul, mg.sum, ...) exactly as a learner's rule would. The name is
# looked up when a rule runs, long after the package has finished importing.
import course_utils.minigraph as mg

from . import attrs as A
from . import conv
from . import shapes as S
from .errors import ArgumentError, GraphError, ShapeError, UnknownOpError


@dataclass(frozen=True)
class Op:
    """One primitive. Calling it, ``op(x, y, axis=1)``, is ``mg.apply(op, [x, y], axis=1)``.

    Args:
        name: the name nodes print (``%y = name(%x)``); a Python identifier.
        impl: ``impl(*arrays, **attrs) -> array``, the numpy computation. ``None`` for the special
            graph ops (placeholder, variable, ...) that the Interpreter runs itself.
        shape_rule: ``shape_rule(*inputs, **attrs) -> (shape, dtype)``; inputs are anything with
            ``.shape`` and ``.dtype`` (arrays, tensors, nodes); raises ``ShapeError`` or
            ``DTypeError``.
        vjp: ``vjp(g, out, *inputs, **attrs) -> one gradient (or None) per input``, written with
            ``mg`` functions. ``None``: not differentiable (comparisons, casts to int).
        elementwise: output element i depends only on input elements i (fusion may merge it).
        stateful: reads or writes Session state; passes must not fold, merge or drop it.
        doc: one line saying what it computes.
        attrs: what each attr may hold (attr name -> a kind from ``mg.attrs``): graphs check
            their nodes' attrs against it, and ``mg.load`` refuses anything else. ``None``:
            not declared (plain numbers, strings and tuples of them are accepted).
    """

    name: str
    impl: Callable[..., Any] | None
    shape_rule: Callable[..., tuple[S.Shape, np.dtype | None]]
    vjp: Callable[..., tuple] | None = None
    elementwise: bool = False
    stateful: bool = False
    doc: str = ""
    attrs: Mapping[str, Callable[[Any], Any]] | None = field(default=None, compare=False)

    def __call__(self, *inputs: Any, name: str | None = None, **attrs: Any) -> Any:
        return mg.apply(self, inputs, name=name, **attrs)

    @property
    def builtin(self) -> bool:
        """One of minigraph's own ops (its vjp may run on raw arrays), as it was defined: not an
        op registered under a built-in's name, nor a built-in whose impl or vjp was changed in
        place (``object.__setattr__`` gets past ``frozen``)."""
        return _AS_DEFINED.get(id(self)) == (self.impl, self.vjp)


OPS: dict[str, Op] = {}
_BUILTIN: set[str] = set()
BUILTIN_IDS: set[int] = set()  # id() of each built-in Op object (they live as long as OPS)
_AS_DEFINED: dict[int, tuple] = {}  # id() of each built-in Op -> (impl, vjp) it was made with


def register_op(op: Op, *, replace: bool = False) -> Op:
    """Add ``op`` to ``OPS`` (re-running a notebook cell replaces your own op) and return it."""
    if not isinstance(op, Op):
        raise ArgumentError(f"register_op takes an mg.Op, got {type(op).__name__}")
    if not op.name.isidentifier():
        raise GraphError(f"op name {op.name!r} must be a Python identifier (letters, digits, _)")
    if op.name in _BUILTIN and not replace:
        raise GraphError(f"{op.name!r} is a built-in op; pass replace=True to really redefine it")
    OPS[op.name] = op
    return op


def get_op(op: str | Op) -> Op:
    """The registered ``Op`` for a name (or check that an ``Op`` object is the registered one)."""
    if type(op) is str:  # the usual case, in one dictionary lookup
        found = OPS.get(op)
        if found is not None:
            return found
    if isinstance(op, Op):
        if OPS.get(op.name) is not op:
            raise UnknownOpError(
                f"op {op.name!r} is not registered: call mg.register_op(op) first (graphs store "
                f"op names, so every op they run must be in mg.OPS)"
            )
        return op
    if op not in OPS:
        close = difflib.get_close_matches(str(op), OPS, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UnknownOpError(f"no op named {op!r} in mg.OPS: register it with "
                             f"mg.register_op.{hint}")
    return OPS[op]


def conform(value: Any, shape: S.Shape, dtype: np.dtype | None) -> Any:
    """An impl's result as an array of the promised dtype; ``ValueError`` if its shape differs.

    The shape rule is the op's contract: this check catches an impl that breaks it (a common
    slip when you write a new op) at the op, not three ops later.
    """
    if dtype is None:  # no array: group gives nothing, cond and while_loop a tuple of results
        return value if isinstance(value, tuple) else None
    out = value if type(value) is np.ndarray else np.asarray(value)
    out = out if out.dtype == dtype else out.astype(dtype)
    if out.shape != shape and not S.compatible(tuple(shape), out.shape):  # fast path first
        raise ValueError(f"the impl returned shape {out.shape} but the shape rule promised "
                         f"{S.format_shape(shape)}; fix one of them")
    return out


def _builtin(name: str, impl: Callable | None, rule: Callable, vjp: Callable | None = None,
             doc: str = "", elementwise: bool = False, stateful: bool = False,
             attrs: Mapping[str, Callable] | None = None) -> None:
    _BUILTIN.add(name)
    OPS[name] = Op(name, impl, rule, vjp, elementwise, stateful, doc, dict(attrs or {}))
    BUILTIN_IDS.add(id(OPS[name]))
    _AS_DEFINED[id(OPS[name])] = (impl, vjp)


# --- impls that need more than one numpy call -------------------------------------------------


def _log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    z = x - x.max(axis=axis, keepdims=True)  # shift so exp cannot overflow
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _check_labels(labels: np.ndarray, depth: int) -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= depth):
        raise IndexError(f"labels must lie in [0, {depth}), got values from {labels.min()} "
                         f"to {labels.max()}")


def _cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    _check_labels(labels, logits.shape[-1])
    return -np.take_along_axis(_log_softmax(logits), labels[..., None], axis=-1)[..., 0]


def _one_hot(labels: np.ndarray, depth: int, dtype: str = "float32") -> np.ndarray:
    _check_labels(labels, depth)
    out = np.zeros((*labels.shape, depth), dtype=dtype)  # not np.eye(depth): depth**2 numbers
    np.put_along_axis(out, labels[..., None], 1, axis=-1)
    return out


def sum_to_shape(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``g`` down to ``shape``, undoing numpy broadcasting (the impl of ``unbroadcast``)."""
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def _getitem_grad(g: np.ndarray, like: np.ndarray, index: tuple) -> np.ndarray:
    out = np.zeros(like.shape, dtype=g.dtype)
    out[index] = g
    return out


def _size(x: np.ndarray, axis: S.Axis = None, dtype: str = "float32") -> np.ndarray:
    return np.asarray(math.prod(x.shape[a] for a in S.normalize_axes(axis, x.ndim)), dtype=dtype)


# --- vjp helpers ------------------------------------------------------------------------------


def _sum_to(g: Any, x: Any, *others: Any) -> Any:
    """``g`` summed back to ``x``'s shape, skipped when broadcasting provably left ``x`` alone."""
    for o in others:
        if not S.broadcast_keeps(x.shape, o.shape):
            return mg.unbroadcast(g, x)
    return g


def _kept(v: Any, x: Any, axis: S.Axis, keepdims: bool) -> Any:
    """A reduction's output (or gradient) with the reduced axes of ``x`` put back as size 1."""
    axes = S.normalize_axes(axis, x.ndim)
    return v if keepdims or not axes else mg.expand_dims(v, axes)


def _mT(x: Any) -> Any:
    """Swap the last two axes (a matrix transpose, batched)."""
    if x.ndim == 2:
        return mg.transpose(x)
    return mg.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def _static(shape: S.Shape, what: str) -> tuple[int, ...]:
    if list(shape).count(None) > 1:
        raise ShapeError(f"the gradient of {what} needs at most one unknown dimension, got {shape}")
    return tuple(-1 if d is None else d for d in shape)


# --- vjp rules: g is the gradient of the output, out the output, then the inputs ----------------


def _pow_vjp(g, out, x, y):
    # d(x**y)/dx = y x**(y-1), which is 0 where y == 0: x**0 is 1 everywhere, also at x = 0,
    # where y x**(y-1) would be 0 * inf = nan. So where y == 0 use any finite power: x**1.
    # d(x**y)/dy = x**y log x, taken as 0 where x <= 0.
    dx = g * y * x ** mg.where(mg.equal(y, 0), 1, y - 1)
    log_x = mg.log(mg.where(x > 0, x, 1))
    return _sum_to(dx, x, y), _sum_to(g * out * log_x, y, x)


def _maximum_vjp(g, out, x, y):
    mask = x >= y  # ties send the whole gradient to x, as TensorFlow does
    return _sum_to(mg.where(mask, g, 0), x, y), _sum_to(mg.where(mask, 0, g), y, x)


def _minimum_vjp(g, out, x, y):
    mask = x <= y  # ties send the whole gradient to x, as in maximum
    return _sum_to(mg.where(mask, g, 0), x, y), _sum_to(mg.where(mask, 0, g), y, x)


def _abs_vjp(g, out, x):
    return (mg.where(x > 0, g, mg.where(x < 0, -g, 0)),)  # 0 at x = 0, as PyTorch's sign(0)


def _clip_vjp(g, out, x, min=None, max=None):  # noqa: A002 (np.clip's and torch.clamp's names)
    # The gradient passes where min <= x <= max, bounds included (PyTorch's clamp does the same).
    if max is not None:
        g = mg.where(x > max, 0, g)
    if min is not None:
        g = mg.where(x < min, 0, g)
    return (g,)


def _logsumexp(x: np.ndarray, axis: S.Axis = None, keepdims: bool = False) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)  # (-inf over no numbers)
    m = np.where(np.isfinite(m), m, 0)  # shift by the max so exp cannot overflow
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=S.normalize_axes(axis, x.ndim))


def _logsumexp_vjp(g, out, x, axis=None, keepdims=False):
    return (_kept(g, x, axis, keepdims) * mg.exp(x - _kept(out, x, axis, keepdims)),)  # softmax


def _var_vjp(g, out, x, axis=None, keepdims=False, ddof=0):
    centered = x - mg.mean(x, axis=axis, keepdims=True)
    n = mg.size(x, axis=axis, dtype=g.dtype.name) - ddof
    return (centered * (_kept(g, x, axis, keepdims) * 2) / n,)


def _conv2d_vjp(g, out, x, w, stride, padding):
    return (mg.apply("conv2d_input_grad", (g, w, x), stride=stride, padding=padding),
            mg.apply("conv2d_weight_grad", (g, x, w), stride=stride, padding=padding))


# The two gradient helpers are linear in g: each one's vjp is conv2d or the other helper.
def _conv2d_input_grad_vjp(gg, out, g, w, like, stride, padding):
    return (mg.conv2d(gg, w, stride=stride, padding=padding),
            mg.apply("conv2d_weight_grad", (g, gg, w), stride=stride, padding=padding), None)


def _conv2d_weight_grad_vjp(gg, out, g, x, like, stride, padding):
    return (mg.conv2d(x, gg, stride=stride, padding=padding),
            mg.apply("conv2d_input_grad", (g, gg, x), stride=stride, padding=padding), None)


def _pool(name: str) -> Callable:
    """The vjp of a pooling op ``name``: apply its gradient helper ``name``_grad."""
    def vjp(g, out, x, kernel_size, stride):
        return (mg.apply(f"{name}_grad", (g, x), kernel_size=kernel_size, stride=stride),)
    return vjp


def _max_pool2d_grad_vjp(gg, out, g, x, kernel_size, stride):
    return (mg.apply("max_pool2d_select", (gg, x), kernel_size=kernel_size, stride=stride), None)


def _max_pool2d_select_vjp(gg, out, u, x, kernel_size, stride):
    return (mg.apply("max_pool2d_grad", (gg, x), kernel_size=kernel_size, stride=stride), None)


def _avg_pool2d_grad_vjp(gg, out, g, like, kernel_size, stride):
    return (mg.avg_pool2d(gg, kernel_size, stride=stride), None)


def _matmul_vjp(g, out, x, y):
    gx, gy = g @ _mT(y), _mT(x) @ g
    bx, by = tuple(x.shape[:-2]), tuple(y.shape[:-2])
    return (gx if S.broadcast_keeps(bx, by) else mg.unbroadcast(gx, x),
            gy if S.broadcast_keeps(by, bx) else mg.unbroadcast(gy, y))


def _max_vjp(g, out, x, axis=None, keepdims=False):
    mask = mg.cast(mg.equal(x, _kept(out, x, axis, keepdims)), g.dtype.name)  # ties share
    return (_kept(g, x, axis, keepdims) * mask / mg.sum(mask, axis=axis, keepdims=True),)


def _transpose_vjp(g, out, x, axes=None):
    if axes is None:
        return (mg.transpose(g),)  # reversing twice is the identity
    return (mg.transpose(g, tuple(int(i) for i in np.argsort(S.transpose_axes(x.ndim, axes)))),)


def _concat_vjp(g, out, *xs, axis=0):
    (ax,) = S.normalize_axes(axis, g.ndim)
    sizes = [x.shape[ax] for x in xs]
    if None in sizes:
        raise ShapeError(f"the gradient of concat needs every input's size along axis {ax} known")
    starts = np.cumsum([0, *sizes]).tolist()
    pieces = zip(starts[:-1], starts[1:], strict=True)
    return tuple(mg.getitem(g, (slice(None),) * ax + (slice(a, b),)) for a, b in pieces)


def _cast_vjp(g, out, x, dtype):
    return (mg.cast(g, x.dtype.name) if S.is_float(x.dtype) and S.is_float(out.dtype) else None,)


def _cross_entropy_vjp(g, out, logits, labels):
    hot = mg.one_hot(labels, depth=logits.shape[-1], dtype=logits.dtype.name)
    return mg.expand_dims(g, -1) * (mg.softmax(logits) - hot), None


# --- the table --------------------------------------------------------------------------------
# fmt: off
unary, binary = S.same_shape_rule, S.broadcast_rule
float_unary, float_binary = S.float_only(unary), S.float_only(binary)
REDUCE = {"axis": A.axis, "keepdims": A.boolean}
CONV = {"stride": A.pair, "padding": A.padding}
POOL = {"kernel_size": A.pair, "stride": A.pair}

# elementwise arithmetic: numpy broadcasting; gradients summed back to each input's shape
_builtin("add", np.add, binary, lambda g, out, x, y: (_sum_to(g, x, y), _sum_to(g, y, x)),
         "x + y", elementwise=True)
_builtin("sub", np.subtract, S.no_bool_rule(binary),
         lambda g, out, x, y: (_sum_to(g, x, y), _sum_to(-g, y, x)), "x - y", elementwise=True)
_builtin("mul", np.multiply, binary,
         lambda g, out, x, y: (_sum_to(g * y, x, y), _sum_to(g * x, y, x)),
         "x * y", elementwise=True)
_builtin("div", np.divide, float_binary,
         lambda g, out, x, y: (_sum_to(g / y, x, y), _sum_to(-g * out / y, y, x)),
         "x / y", elementwise=True)
_builtin("pow", np.power, float_binary, _pow_vjp, "x ** y", elementwise=True)
_builtin("maximum", np.maximum, binary, _maximum_vjp, "the larger of x and y", elementwise=True)
_builtin("minimum", np.minimum, binary, _minimum_vjp, "the smaller of x and y", elementwise=True)
_builtin("neg", np.negative, S.no_bool_rule(unary), lambda g, out, x: (-g,), "-x", elementwise=True)
_builtin("square", np.square, unary, lambda g, out, x: (g * (2 * x),), "x * x",
         elementwise=True)
_builtin("abs", np.absolute, unary, _abs_vjp, "|x|", elementwise=True)
_builtin("clip", np.clip, S.clip_rule, _clip_vjp, "x limited to [min, max] (a None bound: none)",
         elementwise=True, attrs={"min": A.number_or_none, "max": A.number_or_none})

# elementwise math on floats
_builtin("exp", np.exp, float_unary, lambda g, out, x: (g * out,), "e ** x", elementwise=True)
_builtin("log", np.log, float_unary, lambda g, out, x: (g / x,), "natural log", elementwise=True)
_builtin("sqrt", np.sqrt, float_unary, lambda g, out, x: (g / (2 * out),), "square root",
         elementwise=True)
_builtin("tanh", np.tanh, float_unary, lambda g, out, x: (g * (1 - out * out),),
         "hyperbolic tangent", elementwise=True)
_builtin("sigmoid", lambda x: 0.5 * (np.tanh(0.5 * x) + 1), float_unary,  # tanh: no overflow
         lambda g, out, x: (g * out * (1 - out),), "1 / (1 + exp(-x))", elementwise=True)
_builtin("relu", lambda x: np.maximum(x, 0), unary,
         lambda g, out, x: (mg.where(x > 0, g, 0),), "max(x, 0)", elementwise=True)
_builtin("identity", lambda x: x, unary, lambda g, out, x: (g,), "x itself (names a value)",
         elementwise=True)

# comparisons and selection: bool results carry no gradient
for _name, _fn in [("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
                   ("less_equal", np.less_equal), ("greater", np.greater),
                   ("greater_equal", np.greater_equal)]:
    _builtin(_name, _fn, S.compare_rule, None, f"elementwise {_name}, a bool result",
             elementwise=True)
_builtin("where", np.where, S.where_rule,
         lambda g, out, c, x, y: (None, _sum_to(mg.where(c, g, 0), x, c, y),
                                  _sum_to(mg.where(c, 0, g), y, c, x)),
         "x where cond is true, else y", elementwise=True)
_builtin("cast", lambda x, dtype: x.astype(dtype),
         lambda x, dtype: (tuple(x.shape), np.dtype(dtype)), _cast_vjp, "x converted to dtype",
         elementwise=True, attrs={"dtype": A.dtype_name})

# reductions and losses
_builtin("sum", lambda x, axis=None, keepdims=False: np.sum(x, axis=axis, keepdims=keepdims),
         S.reduce_rule,
         lambda g, out, x, axis=None, keepdims=False:
             (mg.broadcast_like(_kept(g, x, axis, keepdims), x),),
         "sum over axis", attrs=REDUCE)
_builtin("mean", lambda x, axis=None, keepdims=False: np.mean(x, axis=axis, keepdims=keepdims),
         S.float_only(S.reduce_rule),
         lambda g, out, x, axis=None, keepdims=False:
             (mg.broadcast_like(_kept(g, x, axis, keepdims), x)
              / mg.size(x, axis=axis, dtype=g.dtype.name),),
         "mean over axis", attrs=REDUCE)
_builtin("max", lambda x, axis=None, keepdims=False: np.max(x, axis=axis, keepdims=keepdims),
         S.max_rule, _max_vjp, "max over axis", attrs=REDUCE)
_builtin("logsumexp", _logsumexp, S.float_only(S.reduce_rule), _logsumexp_vjp,
         "log(sum(exp(x))) over axis, computed stably", attrs=REDUCE)
_builtin("var", lambda x, axis=None, keepdims=False, ddof=0:
             np.var(x, axis=axis, keepdims=keepdims, ddof=ddof),
         S.var_rule, _var_vjp, "variance over axis (divided by n - ddof)",
         attrs={**REDUCE, "ddof": A.integer})
_builtin("softmax", lambda x, axis=-1: np.exp(_log_softmax(x, axis)), S.softmax_rule,
         lambda g, out, x, axis=-1: (out * (g - mg.sum(g * out, axis=axis, keepdims=True)),),
         "exp(x) / sum(exp(x)) along axis", attrs={"axis": A.integer})
_builtin("log_softmax", _log_softmax, S.softmax_rule,
         lambda g, out, x, axis=-1: (g - mg.exp(out) * mg.sum(g, axis=axis, keepdims=True),),
         "log(softmax(x)), computed stably", attrs={"axis": A.integer})
_builtin("cross_entropy", _cross_entropy, S.cross_entropy_rule, _cross_entropy_vjp,
         "-log softmax(logits)[label], one loss per row")

# linear algebra and shapes
_builtin("matmul", np.matmul,
         lambda x, y: (S.matmul_shape(x.shape, y.shape), S.result_dtype(x.dtype, y.dtype)),
         _matmul_vjp, "matrix product x @ y (batched over leading axes)")
_builtin("reshape", lambda x, shape: np.reshape(x, shape),
         lambda x, shape: (S.reshape_shape(x.shape, shape), x.dtype),
         lambda g, out, x, shape: (mg.reshape(g, _static(x.shape, "reshape")),),
         "the same elements in a new shape", attrs={"shape": A.target_shape})
_builtin("transpose", lambda x, axes=None: np.transpose(x, axes),
         lambda x, axes=None: (tuple(x.shape[a] for a in S.transpose_axes(len(x.shape), axes)),
                               x.dtype),
         _transpose_vjp, "axes permuted (reversed by default)", attrs={"axes": A.permutation})
_builtin("broadcast_to", lambda x, shape: np.broadcast_to(x, shape).copy(), S.broadcast_to_rule,
         lambda g, out, x, shape: (mg.unbroadcast(g, x),), "x repeated to shape",
         attrs={"shape": A.shape})
_builtin("getitem", lambda x, index: x[index],
         lambda x, index: (S.index_shape(tuple(x.shape), index), x.dtype),
         lambda g, out, x, index: (mg.getitem_grad(g, x, index),), "x[index], basic slicing",
         attrs={"index": A.index})
_builtin("concat", lambda *xs, axis=0: np.concatenate(xs, axis=axis),
         lambda *xs, axis=0: (S.concat_shape([tuple(x.shape) for x in xs], axis),
                              S.result_dtype(*(x.dtype for x in xs))),
         _concat_vjp, "inputs joined along axis", attrs={"axis": A.integer})
_builtin("expand_dims", lambda x, axis: np.expand_dims(x, axis), S.expand_dims_rule,
         lambda g, out, x, axis: (mg.squeeze(g, S.normalize_axes(axis, out.ndim)),),
         "x with size-1 axes inserted", attrs={"axis": A.axis})
_builtin("squeeze", lambda x, axis: np.squeeze(x, axis), S.squeeze_rule,
         lambda g, out, x, axis: (mg.expand_dims(g, S.normalize_axes(axis, x.ndim)),),
         "x with size-1 axes removed", attrs={"axis": A.axis})

# convolution and pooling on images (NCHW; conv weights OIHW), by im2col: see conv.py
_builtin("conv2d", conv.conv2d, S.conv2d_rule, _conv2d_vjp,
         "2-d convolution (cross-correlation) of NCHW images with OIHW weights", attrs=CONV)
_builtin("max_pool2d", conv.max_pool2d, S.pool_rule, _pool("max_pool2d"),
         "the max of each kernel_size window, stride apart", attrs=POOL)
_builtin("avg_pool2d", conv.avg_pool2d, S.float_only(S.pool_rule), _pool("avg_pool2d"),
         "the mean of each kernel_size window, stride apart", attrs=POOL)

# helpers that gradients are built from: they read another input's run-time shape, so they also
# work when the batch size is None. NB: TensorFlow does the same with Shape/BroadcastGradientArgs.
_builtin("unbroadcast", lambda g, like: sum_to_shape(g, like.shape), S.unbroadcast_rule,
         lambda gg, out, g, like: (mg.broadcast_like(gg, g), None), "g summed down to like's shape")
_builtin("broadcast_like", lambda x, like: np.broadcast_to(x, like.shape).copy(),
         lambda x, like: (S.broadcast_shapes(x.shape, like.shape), x.dtype),
         lambda g, out, x, like: (mg.unbroadcast(g, x), None), "x repeated to like's shape")
_builtin("getitem_grad", _getitem_grad, lambda g, like, index: (tuple(like.shape), g.dtype),
         lambda gg, out, g, like, index: (mg.getitem(gg, index), None),
         "zeros like `like`, with g written at index (NB: TF's StridedSliceGrad)",
         attrs={"index": A.index})
_builtin("conv2d_input_grad", conv.conv2d_input_grad, S.conv2d_grad_rule,
         _conv2d_input_grad_vjp, "d conv2d(x, w) / dx applied to g (x shaped like `like`)",
         attrs=CONV)
_builtin("conv2d_weight_grad", conv.conv2d_weight_grad, S.conv2d_grad_rule,
         _conv2d_weight_grad_vjp, "d conv2d(x, w) / dw applied to g (w shaped like `like`)",
         attrs=CONV)
_builtin("max_pool2d_grad", conv.max_pool2d_grad, S.pool_grad_rule, _max_pool2d_grad_vjp,
         "each window's g sent to where x has its max", attrs=POOL)
_builtin("max_pool2d_select", conv.max_pool2d_select, S.pool_select_rule,
         _max_pool2d_select_vjp, "u read where each window of x has its max", attrs=POOL)
_builtin("avg_pool2d_grad", conv.avg_pool2d_grad, S.pool_grad_rule, _avg_pool2d_grad_vjp,
         "each window's g shared by its cells", attrs=POOL)
_builtin("size", _size, S.size_rule, None, "number of elements along axis, as a scalar",
         attrs={"axis": A.axis, "dtype": A.dtype_name})
_builtin("ones_like", np.ones_like, unary, None, "ones of x's shape and dtype", elementwise=True)
_builtin("one_hot", _one_hot, S.one_hot_rule, None, "rows of the identity picked by labels",
         attrs={"depth": A.positive_int, "dtype": A.dtype_name})

# graph-only ops, run by the Interpreter itself (impl None): sources of values, and state.
# NB: TensorFlow's Placeholder, VariableV2, Const, Assign, AssignSub, NoOp (tf.group).
_builtin("placeholder", None, lambda shape, dtype: (tuple(shape), np.dtype(dtype)), None,
         "a value fed at run time (feed_dict)", attrs={"shape": A.shape, "dtype": A.dtype_name})
_builtin("constant", lambda value: value, lambda value: (value.shape, value.dtype), None,
         "a fixed array, kept in attrs['value']", attrs={"value": A.array})
_builtin("variable", None, lambda value: (value.shape, value.dtype), None,
         "state held by each Session; attrs['value'] is the initial value", stateful=True,
         attrs={"value": A.array})
_builtin("assign", None, S.state_rule, None, "store value in the variable", stateful=True)
_builtin("assign_sub", None, S.state_rule, None, "variable -= value", stateful=True)
_builtin("group", None, lambda *deps: ((), None), None, "run the inputs, produce nothing",
         stateful=True)
_builtin("initializer", None, S.initializer_rule, None,
         "set each input variable to its initial value", stateful=True)
# fmt: on
