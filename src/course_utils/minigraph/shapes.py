"""Shapes and dtypes: the part of an op that is known before any number is.

Every op's shape rule lives here too (``ops.py`` refers to them), so building a graph can check
shapes without running anything.

A shape is a tuple of ints with ``None`` for a dimension not known until run time, such as a
placeholder's batch size. NB: TensorFlow calls this a partially known ``TensorShape`` and prints
``None`` as ``?``. Every rule here raises ``ShapeError`` or ``DTypeError`` with the shapes involved
and a hint; the graph and the eager layer add which node or op it was and where it was defined.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import DTypeError, GraphError, ShapeError

Shape = tuple[int | None, ...]
Axis = int | tuple[int, ...] | None

DEFAULT_FLOAT = np.dtype("float32")
DEFAULT_INT = np.dtype("int64")


# --- dtypes -----------------------------------------------------------------------------------


def is_float(dtype: np.dtype | None) -> bool:
    return dtype is not None and dtype.kind == "f"


def result_dtype(*dtypes: np.dtype) -> np.dtype:
    """numpy promotion, except that int and bool operands never widen a float one.

    >>> result_dtype(np.dtype("float32"), np.dtype("int64"))   # numpy would say float64
    dtype('float32')
    >>> result_dtype(np.dtype("float32"), np.dtype("float64"))
    dtype('float64')
    """
    if dtypes and dtypes.count(dtypes[0]) == len(dtypes):  # all the same: nothing to promote
        return dtypes[0]
    floats = [d for d in dtypes if d.kind == "f"]
    return np.result_type(*(floats or dtypes))


def require_float(*inputs: Any) -> None:
    for i, x in enumerate(inputs):
        if not is_float(x.dtype):
            raise DTypeError(f"this op needs floating-point input, but input {i} is {x.dtype}; "
                             f"convert it first with mg.cast(x, 'float32')")


def weak_dtype(values: Any) -> np.dtype | None:
    """The dtype a bare Python number takes when it meets these operands (``x * 2`` keeps x's).

    NB: JAX calls such numbers "weakly typed"; numpy 2 treats Python scalars the same way.
    """
    dtypes = [getattr(v, "dtype", None) for v in values if not isinstance(v, (bool, int, float))]
    numeric = [d for d in dtypes if d is not None and d.kind != "b"]
    return result_dtype(*numeric) if numeric else None


def as_array(value: Any, weak: np.dtype | None = None, dtype: Any = None) -> np.ndarray:
    """A numpy array for ``value`` with the course's dtype defaults.

    Python floats and lists of them become float32; numpy arrays and lone numpy scalars keep their
    dtype (float64 stays float64); a bare number takes the ``weak`` dtype of the operands it meets.

    >>> as_array(0.5).dtype, as_array([1, 2]).dtype, as_array(np.ones(2)).dtype
    (dtype('float32'), dtype('int64'), dtype('float64'))
    >>> as_array(np.float64(0.5)).dtype  # a numpy scalar is a float too, but it knows its dtype
    dtype('float64')
    >>> as_array(2, weak=np.dtype("float64")).dtype
    dtype('float64')
    """
    if isinstance(value, int) and not isinstance(value, (bool, np.integer)) and \
            not -(2**63) <= value < 2**64:
        raise DTypeError(f"the int {value:.3e} does not fit in 64 bits; write it as a float "
                         f"({float(value):.3e})")
    if dtype is not None:
        try:
            arr = np.asarray(value, dtype=np.dtype(dtype))
        except ValueError:
            if isinstance(value, (list, tuple)) and _ragged(value) != "rows of different lengths":
                raise ShapeError(f"the nested lists are ragged ({_ragged(value)}); every row "
                                 f"must have the same length") from None
            raise
    elif isinstance(value, bool):
        arr = np.asarray(value)
    elif isinstance(value, (int, float)) and not (isinstance(value, np.generic) and weak is None):
        # (A numpy scalar on its own keeps its dtype; next to other operands it is a Python number.)
        own = DEFAULT_FLOAT if isinstance(value, float) else DEFAULT_INT
        fits = weak is not None and (weak.kind == "f" or (own.kind == "i" and weak.kind in "iu"))
        arr = np.asarray(value, dtype=weak if fits else own)
    else:
        try:
            arr = np.asarray(value)
        except ValueError:  # numpy's "inhomogeneous shape": nested lists of different lengths
            raise ShapeError(f"the nested lists are ragged ({_ragged(value)}); every row must "
                             f"have the same length: pad the short ones, or make one tensor "
                             f"per row") from None
        if isinstance(value, (list, tuple)) and arr.dtype == np.float64:
            arr = arr.astype(DEFAULT_FLOAT)
    if arr.dtype.kind not in "biuf":
        raise DTypeError(
            f"cannot use a value of type {type(value).__name__} (numpy dtype {arr.dtype}) as a "
            f"minigraph value; pass numbers, numpy arrays, mg tensors or graph nodes"
        )
    return arr


def _ragged(value: Any, path: str = "") -> str:
    """Where nested lists first differ in length: ``"value[1] has 1 item, value[0] has 2"``."""
    if not isinstance(value, (list, tuple)):
        return "items that are not all lists"
    lengths = [len(v) if isinstance(v, (list, tuple)) else None for v in value]
    if len(set(lengths)) > 1:
        first = lengths[0]
        i = next(i for i, n in enumerate(lengths) if n != first)
        def say(n: int | None) -> str:
            return "a number" if n is None else f"{n} item{'s' * (n != 1)}"
        return f"value{path}[{i}] has {say(lengths[i])} but value{path}[0] has {say(first)}"
    for i, v in enumerate(value):
        if isinstance(v, (list, tuple)):
            try:
                np.asarray(v)
            except ValueError:
                return _ragged(v, f"{path}[{i}]")
    return "rows of different lengths"


# --- shapes -----------------------------------------------------------------------------------


def format_shape(shape: Shape) -> str:
    return str(tuple(shape))


def check_shape(shape: Any) -> Shape:
    """Validate a user-given shape: a tuple of non-negative ints, ``None`` for unknown."""
    if shape is None:
        raise ShapeError("the shape is None, but minigraph needs at least the rank: pass a tuple "
                         "such as (None, 3) (None marks a size known only at run time), or () "
                         "for a scalar")
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise ShapeError(f"a shape is a tuple of non-negative ints or None, got "
                         f"{type(shape).__name__} {shape!r}")
    shape = tuple(shape)
    for d in shape:
        if d is not None and (not isinstance(d, (int, np.integer)) or isinstance(d, bool)
                              or d < 0):
            raise ShapeError(f"a shape holds non-negative ints or None, got {shape}")
    return tuple(None if d is None else int(d) for d in shape)


def broadcast_shapes(*shapes: Shape) -> Shape:
    """numpy broadcasting where ``None`` means "some size, known at run time".

    >>> broadcast_shapes((None, 3), (3,))
    (None, 3)
    >>> broadcast_shapes((None, 1), (1, 4))
    (None, 4)
    """
    if shapes and shapes.count(shapes[0]) == len(shapes):  # all the same: nothing to broadcast
        return tuple(shapes[0])
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out: list[int | None] = []
    for dims in zip(*padded, strict=True):
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ShapeError(
                f"cannot broadcast shapes {' and '.join(map(format_shape, shapes))}: aligned "
                f"from the right, sizes {sorted(known)} meet in one dimension. Sizes must be equal "
                f"or 1; reshape one operand (e.g. x[:, None]) or fix the one that is wrong"
            )
        out.append(known.pop() if known else None if None in dims else 1)
    return tuple(out)


def broadcast_keeps(shape: Shape, other: Shape) -> bool:
    """True when broadcasting ``shape`` against ``other`` provably leaves it unchanged.

    Then a gradient for ``shape`` needs no summing back (see ``ops._sum_to``).

    >>> broadcast_keeps((None, 32), (32,)), broadcast_keeps((32,), (None, 32))
    (True, False)
    """
    if shape == other:  # the usual case
        return None not in shape
    if len(other) > len(shape):
        return False
    aligned = zip(shape[len(shape) - len(other) :], other, strict=True)
    return all(o == 1 or (o == s and s is not None) for s, o in aligned)


def compatible(shape: Shape, other: Shape) -> bool:
    """Same rank, and equal sizes wherever both are known.

    >>> compatible((None, 3), (5, 3)), compatible((None, 3), (5, 4))
    (True, False)
    """
    return len(shape) == len(other) and all(
        a is None or b is None or a == b for a, b in zip(shape, other, strict=True))


def normalize_axes(axis: Axis, ndim: int) -> tuple[int, ...]:
    """Sorted non-negative axes; ``None`` means all of them."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f"axis {a} is out of range for a value of rank {ndim}" + (
                f" (its axes are {-ndim} to {ndim - 1})" if ndim else
                " (a scalar has no axes: axis=None)"))
    out = tuple(sorted(int(a) % ndim for a in axes))
    if len(set(out)) != len(out):
        raise ShapeError(f"axis {axis} repeats an axis")
    return out


def reduce_shape(shape: Shape, axis: Axis, keepdims: bool) -> Shape:
    axes = normalize_axes(axis, len(shape))
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reshape_shape(shape: Shape, new: Any) -> Shape:
    """The shape after ``reshape(x, new)``; ``new`` may hold one -1 (inferred when possible)."""
    new = tuple(int(d) for d in ((new,) if isinstance(new, int) else new))
    if new.count(-1) > 1 or any(d < -1 for d in new):
        raise ShapeError(f"reshape target {new} may hold non-negative sizes and at most one -1")
    rest = math.prod(d for d in new if d != -1)
    if None in shape:
        return tuple(None if d == -1 else d for d in new)
    size = math.prod(shape)
    if (-1 not in new and rest != size) or (-1 in new and (rest == 0 or size % rest)):
        raise ShapeError(
            f"cannot reshape {format_shape(shape)} ({size} elements) to {new}: "
            f"the number of elements must stay the same"
        )
    return tuple(size // rest if d == -1 else d for d in new)


def transpose_axes(ndim: int, axes: Any) -> tuple[int, ...]:
    if axes is None:
        return tuple(reversed(range(ndim)))
    axes = tuple(int(a) % ndim if ndim else int(a) for a in axes)
    if sorted(axes) != list(range(ndim)):
        raise ShapeError(f"transpose axes {axes} are not a permutation of range({ndim})")
    return axes


def matmul_shape(a: Shape, b: Shape) -> Shape:
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(
            f"matmul needs operands of rank 2 or more, got {format_shape(a)} @ {format_shape(b)}; "
            f"turn a vector v into a matrix with mg.reshape(v, (1, -1)) or v[:, None]"
        )
    n, k = a[-2:]
    k2, m = b[-2:]
    if k is not None and k2 is not None and k != k2:
        raise ShapeError(
            f"matmul inner dimensions differ: {format_shape(a)} @ {format_shape(b)} multiplies "
            f"{k} columns by {k2} rows; the left operand's last size must equal the right "
            f"operand's second-to-last size (transpose one of them?)"
        )
    return broadcast_shapes(a[:-2], b[:-2]) + (n, m)


def concat_shape(shapes: list[Shape], axis: int) -> Shape:
    if not shapes:
        raise ShapeError("concat needs at least one input")
    ndim = len(shapes[0])
    (axis,) = normalize_axes(axis, ndim)
    if any(len(s) != ndim for s in shapes):
        raise ShapeError(f"concat inputs must have one rank, got {list(map(format_shape, shapes))}")
    out = []
    for i in range(ndim):
        dims = [s[i] for s in shapes]
        if i == axis:
            out.append(None if None in dims else sum(dims))
            continue
        known = {d for d in dims if d is not None}
        if len(known) > 1:
            raise ShapeError(
                f"concat along axis {axis} needs equal sizes on every other axis, but axis {i} "
                f"has sizes {sorted(known)} in {list(map(format_shape, shapes))}"
            )
        out.append(known.pop() if known else None)
    return tuple(out)


# --- basic indexing ---------------------------------------------------------------------------


def normalize_index(index: Any) -> tuple:
    """``x[index]`` as a tuple of ints, slices, ``None`` and ``...``: basic slicing only."""
    index = index if isinstance(index, tuple) else (index,)
    for item in index:
        ok = item is None or item is Ellipsis or isinstance(item, slice)
        ok = ok or (isinstance(item, (int, np.integer)) and not isinstance(item, bool))
        if not ok:
            raise ShapeError(
                f"getitem supports basic slicing only (ints, slices, None, ...), got "
                f"{type(item).__name__}; for per-row picks use mg.one_hot or mg.cross_entropy"
            )
    return tuple(int(i) if isinstance(i, np.integer) else i for i in index)


def index_shape(shape: Shape, index: tuple) -> Shape:
    """The shape of ``x[index]`` for basic slicing; a slice of an unknown dimension is unknown."""
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > len(shape) or list(index).count(Ellipsis) > 1:
        raise ShapeError(f"index {format_index(index)} has too many entries for a value of shape "
                         f"{format_shape(shape)}")
    pad = (slice(None),) * (len(shape) - used)
    if Ellipsis in index:  # `...` stands for the dimensions the index does not name
        at = index.index(Ellipsis)
        index = index[:at] + pad + index[at + 1 :]
    else:  # trailing dimensions not named are taken whole
        index = index + pad
    out, dims = [], iter(shape)
    for item in index:
        if item is None:
            out.append(1)
            continue
        d = next(dims)
        if isinstance(item, slice):
            if item.step == 0:
                raise ShapeError("slice step cannot be zero")
            out.append(None if d is None else len(range(*item.indices(d))))
        elif d is not None and not -d <= item < d:
            raise ShapeError(f"index {item} is out of range for a dimension of size {d}")
    return tuple(out)


def format_index(index: tuple) -> str:
    """``(slice(None), 0)`` as ``[:, 0]``, the way you typed it."""

    def one(i: Any) -> str:
        if isinstance(i, slice):
            parts = ["" if p is None else str(p) for p in (i.start, i.stop, i.step)]
            return ":".join(parts[:2] if i.step is None else parts)
        return "..." if i is Ellipsis else "None" if i is None else str(i)

    return "[" + ", ".join(map(one, index)) + "]"


# --- the shape rules of the ops: (inputs with .shape and .dtype, attrs) -> (shape, dtype) -----


def same_shape_rule(x: Any, **attrs: Any) -> tuple[Shape, np.dtype]:
    """Shape rule of a unary elementwise op: the output has the input's shape and dtype."""
    return tuple(x.shape), x.dtype


def broadcast_rule(*xs: Any, **attrs: Any) -> tuple[Shape, np.dtype]:
    """Shape rule of an n-ary elementwise op: numpy broadcasting, float dtypes win."""
    return broadcast_shapes(*[x.shape for x in xs]), result_dtype(*[x.dtype for x in xs])


def float_only(rule: Callable) -> Callable:
    """The same rule, refusing integer and bool inputs (exp of an int is almost always a bug)."""

    def checked(*xs: Any, **attrs: Any) -> tuple[Shape, np.dtype]:
        require_float(*xs)
        return rule(*xs, **attrs)

    return checked


def compare_rule(x: Any, y: Any) -> tuple[Shape, np.dtype]:
    return broadcast_shapes(x.shape, y.shape), np.dtype(bool)


def where_rule(cond: Any, x: Any, y: Any) -> tuple[Shape, np.dtype]:
    if cond.dtype != np.dtype(bool):
        raise DTypeError(f"where needs a bool condition, got {cond.dtype}; compare first (x > 0)")
    return broadcast_shapes(cond.shape, x.shape, y.shape), result_dtype(x.dtype, y.dtype)


def reduce_rule(x: Any, axis: Axis = None, keepdims: bool = False) -> tuple[Shape, np.dtype]:
    return reduce_shape(x.shape, axis, keepdims), x.dtype


def max_rule(x: Any, axis: Axis = None, keepdims: bool = False) -> tuple[Shape, np.dtype]:
    """A reduction with no identity: the max of no numbers is not defined (numpy refuses too)."""
    shape = reduce_shape(x.shape, axis, keepdims)
    empty = [a for a in normalize_axes(axis, len(x.shape)) if x.shape[a] == 0]
    if empty:
        raise ShapeError(f"max over axis {empty[0]} of {format_shape(x.shape)}, which has no "
                         f"elements: the max of nothing is not defined; reduce a non-empty "
                         f"axis, or use mg.logsumexp (-inf over nothing)")
    return shape, x.dtype


def softmax_rule(x: Any, axis: int = -1) -> tuple[Shape, np.dtype]:
    require_float(x)
    normalize_axes(axis, len(x.shape))
    return tuple(x.shape), x.dtype


def cross_entropy_rule(logits: Any, labels: Any) -> tuple[Shape, np.dtype]:
    require_float(logits)
    if labels.dtype.kind not in "iu":
        raise DTypeError(f"cross_entropy needs integer class labels, got {labels.dtype}")
    if len(logits.shape) != len(labels.shape) + 1:
        raise ShapeError(
            f"cross_entropy takes logits (batch, classes) and labels (batch,), got "
            f"{format_shape(logits.shape)} and {format_shape(labels.shape)}"
        )
    return broadcast_shapes(logits.shape[:-1], labels.shape), logits.dtype


def one_hot_rule(labels: Any, depth: int, dtype: str = "float32") -> tuple[Shape, np.dtype]:
    if labels.dtype.kind not in "iu":
        raise DTypeError(f"one_hot needs integer labels, got {labels.dtype}")
    if not isinstance(depth, int) or depth <= 0:
        raise ShapeError(f"one_hot depth must be a known positive int, got {depth}")
    return (*labels.shape, depth), np.dtype(dtype)


def broadcast_to_rule(x: Any, shape: Shape) -> tuple[Shape, np.dtype]:
    if None in shape or broadcast_shapes(x.shape, shape) != tuple(shape):
        raise ShapeError(f"cannot broadcast {format_shape(x.shape)} to {format_shape(shape)}")
    return tuple(shape), x.dtype


def unbroadcast_rule(g: Any, like: Any) -> tuple[Shape, np.dtype]:
    if len(like.shape) > len(g.shape):
        raise ShapeError(f"cannot sum {format_shape(g.shape)} down to "
                         f"{format_shape(like.shape)}")
    broadcast_shapes(g.shape, like.shape)
    return tuple(like.shape), g.dtype


def expand_dims_rule(x: Any, axis: Axis) -> tuple[Shape, np.dtype]:
    axes = normalize_axes(axis, len(x.shape) + (1 if isinstance(axis, int) else len(axis)))
    dims = iter(x.shape)
    return tuple(1 if i in axes else next(dims) for i in range(len(x.shape) + len(axes))), x.dtype


def squeeze_rule(x: Any, axis: Axis) -> tuple[Shape, np.dtype]:
    axes = normalize_axes(axis, len(x.shape))
    if any(x.shape[a] not in (1, None) for a in axes):
        raise ShapeError(f"squeeze axis {axis} of {format_shape(x.shape)} is not of size 1")
    return tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype


def size_rule(x: Any, axis: Axis = None, dtype: str = "float32") -> tuple[Shape, np.dtype]:
    normalize_axes(axis, len(x.shape))  # only to check the axes
    return (), np.dtype(dtype)


def state_rule(ref: Any, value: Any) -> tuple[Shape, np.dtype]:
    if getattr(ref, "op", "variable") != "variable":  # (in a graph, ref is a Node)
        raise GraphError(f"only a Variable can be assigned to, not %{ref.name} ({ref.op}); "
                         f"create the state with mg.Variable(initial_value)")
    if not compatible(tuple(ref.shape), tuple(value.shape)):
        raise ShapeError(f"cannot store a {format_shape(value.shape)} value in a "
                         f"{format_shape(ref.shape)} variable")
    if not np.can_cast(value.dtype, ref.dtype, "same_kind"):
        raise DTypeError(f"cannot store {value.dtype} in a {ref.dtype} variable")
    return tuple(ref.shape), ref.dtype


# --- convolution and pooling (NCHW images, OIHW weights) -----------------------------------------


def _image(x: Any, what: str) -> Shape:
    if len(x.shape) != 4:
        raise ShapeError(f"{what} takes images of shape (batch, channels, height, width), got "
                         f"{format_shape(x.shape)}; add the missing axes with mg.reshape")
    return tuple(x.shape)


def _pooled(shape: Shape, kernel: tuple[int, int], stride: tuple[int, int],
            padding: tuple[int, int], what: str) -> Shape:
    from .conv import out_size  # numpy-free arithmetic; conv.py holds the impls

    n, c, h, w = shape
    sizes = [out_size(d, k, s, p) for d, k, s, p in zip((h, w), kernel, stride, padding,
                                                        strict=True)]
    if any(s is not None and s < 1 for s in sizes):
        raise ShapeError(f"{what}: a {kernel[0]}x{kernel[1]} window does not fit in a "
                         f"{h}x{w} image padded by {padding}; use a smaller kernel or pad more")
    return (n, c, *sizes)


def conv2d_rule(x: Any, w: Any, stride: tuple[int, int],
                padding: tuple[int, int]) -> tuple[Shape, np.dtype]:
    require_float(x, w)
    _image(x, "conv2d")
    if len(w.shape) != 4:
        raise ShapeError(f"conv2d takes weights of shape (out_channels, in_channels, kernel "
                         f"height, kernel width), got {format_shape(w.shape)}")
    if None not in (x.shape[1], w.shape[1]) and x.shape[1] != w.shape[1]:
        raise ShapeError(f"conv2d: the images have {x.shape[1]} channels but the weights "
                         f"expect {w.shape[1]} (weights are OIHW: out, in, height, width)")
    n, _, ho, wo = _pooled(tuple(x.shape), tuple(w.shape[2:]), stride, padding, "conv2d")
    return (n, w.shape[0], ho, wo), result_dtype(x.dtype, w.dtype)


def conv2d_grad_rule(g: Any, other: Any, like: Any, stride: tuple[int, int],
                     padding: tuple[int, int]) -> tuple[Shape, np.dtype]:
    """The gradient helpers of conv2d: the result has the shape of ``like``."""
    require_float(g, other)
    _image(g, "a conv2d gradient")
    return tuple(like.shape), g.dtype


def pool_rule(x: Any, kernel_size: tuple[int, int],
              stride: tuple[int, int]) -> tuple[Shape, np.dtype]:
    _image(x, "pooling")
    return _pooled(tuple(x.shape), kernel_size, stride, (0, 0), "pooling"), x.dtype


def pool_grad_rule(g: Any, like: Any, kernel_size: tuple[int, int],
                   stride: tuple[int, int]) -> tuple[Shape, np.dtype]:
    """A pooling's gradient helpers: shaped like the image ``like``."""
    require_float(g)
    return _image(like, "a pooling gradient"), g.dtype


def pool_select_rule(u: Any, like: Any, kernel_size: tuple[int, int],
                     stride: tuple[int, int]) -> tuple[Shape, np.dtype]:
    return pool_rule(like, kernel_size, stride)[0], u.dtype


def initializer_rule(*variables: Any) -> tuple[Shape, None]:
    """An initializer's inputs are the Variables it sets."""
    for v in variables:
        if getattr(v, "op", "variable") != "variable":
            raise GraphError(f"an initializer sets Variables, and %{v.name} is a {v.op}; "
                             f"make it with mg.global_variables_initializer()")
    return (), None


def no_bool_rule(rule: Callable) -> Callable:
    """The same rule, refusing bool inputs: numpy has no ``-`` for booleans (use ``~``)."""

    def checked(*xs: Any, **attrs: Any) -> tuple[Shape, np.dtype]:
        for i, x in enumerate(xs):
            if x.dtype == np.dtype(bool):
                raise DTypeError(f"input {i} is bool, and negating or subtracting booleans is "
                                 f"not defined; cast it first with mg.cast(x, 'float32') (or "
                                 f"'int64')")
        return rule(*xs, **attrs)

    return checked


def clip_rule(x: Any, min: Any = None, max: Any = None) -> tuple[Shape, np.dtype]:  # noqa: A002
    """clip keeps x's dtype, so an integer x takes only integer bounds (0.5 would be rounded)."""
    if not is_float(x.dtype):
        bad = [b for b in (min, max) if isinstance(b, float)]
        if bad:
            raise DTypeError(f"clip of {x.dtype} values with the float bound {bad[0]}: the "
                             f"result keeps x's dtype, so the bound would be rounded; cast x "
                             f"first with mg.cast(x, 'float32'), or give integer bounds")
    return tuple(x.shape), x.dtype


def var_rule(x: Any, axis: Axis = None, keepdims: bool = False,
             ddof: int = 0) -> tuple[Shape, np.dtype]:
    require_float(x)
    return reduce_shape(x.shape, axis, keepdims), x.dtype
