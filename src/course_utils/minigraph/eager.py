"""Eager mode: tensors that compute at once and remember how they were made (the tape).

Define-by-run: the graph is whatever Python happened to execute, so ``if``, ``for`` and
``print`` just work. Each op whose inputs require grad records a ``TapeEntry`` on its output
(``output.grad_fn``); ``backward()`` walks those entries in reverse and applies each op's vjp.

>>> import course_utils.minigraph as mg
>>> w = mg.tensor([1.0, -2.0], requires_grad=True)
>>> loss = (w * w).sum() if w.numpy()[0] > 0 else w.sum()   # Python control flow
>>> loss.backward()
>>> w.grad
tensor([ 2., -4.], dtype=float32)

NB: PyTorch keeps the same record under the same name, ``tensor.grad_fn``; TensorFlow 2 records on a
``tf.GradientTape`` you open explicitly.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import attrs as A
from . import shapes as S
from .autodiff import backprop
from .errors import (
    ArgumentError,
    DTypeError,
    ExecutionError,
    GradientError,
    GraphError,
    MinigraphError,
    ShapeError,
    user_source,
)
from .operators import Operators
from .ops import BUILTIN_IDS, Op, conform

_grad_enabled = True


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Inside ``with mg.no_grad():`` ops record nothing: for updates and evaluation."""
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, False
    try:
        yield
    finally:
        _grad_enabled = previous


def is_grad_enabled() -> bool:
    return _grad_enabled


@contextlib.contextmanager
def enable_grad() -> Iterator[None]:
    """Record on the tape again inside ``no_grad()`` (``torch.enable_grad``)."""
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, True
    try:
        yield
    finally:
        _grad_enabled = previous


# --- raw arrays: how backward() runs the vjp rules when nothing records them ---------------------

#: While true, ``mg.apply`` runs ``op.impl`` on numpy arrays and returns an array: no shape rule,
#: no tensor, no tape. Only ``backward()`` turns it on, around the built-in vjp rules.
RAW = False


@contextlib.contextmanager
def raw_arrays() -> Iterator[None]:
    global RAW
    previous, RAW = RAW, True
    try:
        yield
    finally:
        RAW = previous


def run_raw(op: Op | str, inputs: Any, attrs: dict[str, Any]) -> np.ndarray:
    """``op.impl`` on the inputs' arrays (what ``mg.apply`` does in raw mode)."""
    from .ops import OPS

    op = OPS[op] if type(op) is str else op
    out = op.impl(*[x._data if type(x) is Tensor else x for x in inputs], **attrs)
    return out if type(out) is np.ndarray else np.asarray(out)


def _raw_vjp(op: Op, g: np.ndarray, out: Tensor, inputs: tuple[Tensor, ...],
             attrs: dict[str, Any]) -> tuple:
    """One vjp of ``backward()`` on raw arrays; each gradient comes back in its input's dtype.

    A built-in rule gets arrays (its ``mg`` calls then run raw). A rule of your own, or a
    traced function's, gets tensors, as it always has, and runs with raw mode off.
    """
    if id(op) in BUILTIN_IDS:
        grads = op.vjp(g, out._data, *[x._data for x in inputs], **attrs)
        if len(grads) == len(inputs):  # each gradient in its input's dtype, as on the tape
            for i, r in enumerate(grads):
                if r is not None and r.dtype != inputs[i]._data.dtype:
                    return _cast_grads(grads, inputs)
        return grads
    else:
        global RAW
        RAW = False
        try:
            grads = op.vjp(Tensor(g), out, *inputs, **attrs)
        finally:
            RAW = True
        if isinstance(grads, (tuple, list)):
            grads = tuple(r._data if isinstance(r, Tensor) else r for r in grads)
    if isinstance(grads, (tuple, list)) and len(grads) == len(inputs):
        return _cast_grads(grads, inputs)
    return grads


def _cast_grads(grads: Any, inputs: tuple[Tensor, ...]) -> tuple:
    return tuple(r if r is None or r.dtype == x._data.dtype or not S.is_float(x.dtype)
                 else r.astype(x._data.dtype) for r, x in zip(grads, inputs, strict=True))


class TapeEntry:
    """How a tensor was made: its op, input tensors and attrs. ``tensor.grad_fn`` returns it.

    ``backward()`` applies ``op.vjp`` to exactly these; ``inputs`` and ``next_functions`` let
    you walk the tape yourself, from a result back to the leaves:

    >>> import course_utils.minigraph as mg
    >>> w = mg.tensor([1.0, 2.0], requires_grad=True)
    >>> y = mg.sum(w * 3.0)
    >>> y.grad_fn
    <TapeEntry sum((2,))>
    >>> y.grad_fn.next_functions                  # the entry that made each input
    (<TapeEntry mul((2,), ())>,)
    >>> y.grad_fn.next_functions[0].inputs[0] is w
    True

    An entry prints as its op's name and compares equal to it (``y.grad_fn == "sum"``), as a
    numpy dtype does with its name. NB: PyTorch calls this grad_fn / next_functions (there each
    next function comes with an output index, and a leaf is reached through an
    ``AccumulateGrad`` node).
    """

    __slots__ = ("op", "inputs", "attrs", "versions")

    def __init__(self, op: Op, inputs: tuple[Tensor, ...], attrs: dict[str, Any],
                 versions: tuple[int, ...]) -> None:
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.versions = versions  # of the inputs when recorded, to catch later in-place changes

    @property
    def next_functions(self) -> tuple[TapeEntry | None, ...]:
        """The entry that made each input: ``None`` for a leaf or a value that needs no grad."""
        return tuple(x._ctx for x in self.inputs)

    def __repr__(self) -> str:
        args = [S.format_shape(x.shape) for x in self.inputs]
        args += [f"{k}={v}" for k, v in self.attrs.items() if v is not None and v is not False]
        return f"<TapeEntry {self.op.name}({', '.join(args)})>"

    def __str__(self) -> str:
        return self.op.name

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return self.op.name == other
        return NotImplemented  # entries themselves are equal only when identical

    __hash__ = object.__hash__


class Tensor(Operators):
    """A numpy array plus what autodiff needs: ``requires_grad``, ``grad`` and the tape entry."""

    def __init__(self, data: np.ndarray, requires_grad: bool = False) -> None:
        self._data = data
        self.requires_grad = requires_grad
        self._grad: Tensor | None = None
        self._ctx: TapeEntry | None = None
        self._version = 0  # bumped by in-place updates

    @property
    def grad(self) -> Tensor | None:
        """d(output)/d(self), set by ``backward()`` on a leaf that requires grad; ``None`` until
        then. You may set it (to ``None``, or to a tensor of this tensor's shape), as in PyTorch.
        """
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | np.ndarray | None) -> None:
        if value is not None:
            value = value if isinstance(value, Tensor) else _grad_tensor(value)
            if value.shape != self.shape or not S.is_float(value.dtype):
                raise GradientError(
                    f".grad = ... at {user_source()}: a gradient has its tensor's shape and a "
                    f"float dtype, {S.format_shape(self.shape)} here, got "
                    f"{S.format_shape(value.shape)} {value.dtype}; set .grad = None to clear it")
        self._grad = value

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def size(self) -> int:
        return self._data.size

    @property
    def is_leaf(self) -> bool:
        """Made by you, not by an op: ``backward()`` stores ``.grad`` only on leaves."""
        return self._ctx is None

    @property
    def grad_fn(self) -> TapeEntry | None:
        """The tape entry that made this tensor; ``None`` for a leaf or a result that was not
        recorded (no input required grad, or it ran under ``mg.no_grad()``).

        >>> import course_utils.minigraph as mg
        >>> x = mg.tensor([1.0, 2.0], requires_grad=True)
        >>> (x * x).grad_fn, x.grad_fn
        (<TapeEntry mul((2,), (2,))>, None)

        NB: PyTorch calls this grad_fn, and its ``next_functions`` lead on down the tape.
        """
        return self._ctx

    def numpy(self) -> np.ndarray:
        """The underlying array (shared, not copied: do not write to it)."""
        return self._data

    @property
    def data(self) -> np.ndarray:
        """The underlying numpy array, shared: writing into it changes the tensor.

        Like PyTorch's ``.data``, this goes around the tape: the gradient never sees such a
        change (and a tape that saved this tensor would then compute a stale gradient), so use
        it for what the gradient must not see, such as an optimizer's update. Assigning
        ``t.data = array`` replaces the array (a copy of it, with its own dtype and shape).

        >>> import course_utils.minigraph as mg
        >>> t = mg.tensor([1.0, 2.0])
        >>> t.data[0] = 5.0
        >>> t
        tensor([5., 2.], dtype=float32)
        """
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        where = f"tensor.data = ... at {user_source()}"
        raw = value.numpy() if isinstance(value, Tensor) else value
        # A parameter (requires_grad) keeps its shape and dtype: its .grad, an optimizer's state
        # and traced graphs are all built for them. Lists and numbers take its dtype.
        keep = self.requires_grad and not isinstance(raw, np.ndarray)
        try:
            data = np.array(S.as_array(raw, dtype=self.dtype if keep else None))
        except (ShapeError, DTypeError) as e:
            raise type(e)(f"{where}: {e}") from None
        except (TypeError, ValueError, OverflowError) as e:
            raise DTypeError(f"{where}: cannot make a {self.dtype} array of this value "
                             f"({e})") from None
        if self.requires_grad and (data.shape, data.dtype) != (self.shape, self.dtype):
            raise (ShapeError if data.shape != self.shape else DTypeError)(
                f"{where}: this tensor requires grad, so it keeps its shape and dtype "
                f"({S.format_shape(self.shape)} {self.dtype}), got "
                f"{S.format_shape(data.shape)} {data.dtype}: its .grad, an optimizer's state "
                f"and traced graphs are built for them. Convert the value "
                f"(value.astype('{self.dtype}')), or make a new tensor with "
                f"mg.tensor(value, requires_grad=True)")
        self._data = data
        self._version += 1

    def item(self) -> float | int | bool:
        """The one number this tensor holds, as a Python number."""
        return self._one("item()").item()

    def _one(self, what: str) -> np.ndarray:
        """The array, if it holds exactly one number (what ``item()``, ``float()``, ``if``
        need); else a ``ShapeError`` saying how to get one number from it."""
        if self._data.size != 1:
            raise ShapeError(f"{what} at {user_source()} needs a tensor of one number, but this "
                             f"one has shape {self.shape} ({self._data.size} numbers): reduce it "
                             f"first, e.g. .sum(), .max(), (t > 0).numpy().all(), or index one "
                             f"element")
        return self._data

    def detach(self) -> Tensor:
        """The same values, cut off from the tape."""
        return Tensor(self._data)

    def backward(self, gradient: Any = None, create_graph: bool = False) -> None:
        """Add d(self)/d(leaf) to every leaf's ``.grad`` that requires grad (accumulating, as
        PyTorch does). A tensor of more than one element needs ``gradient``, the vector that
        multiplies the Jacobian.

        ``create_graph=True`` records the backward pass on the tape too, so each ``.grad`` has a
        ``grad_fn`` and can itself be differentiated: Hessian-vector products, gradient
        penalties. Otherwise the vjp rules run on raw numpy arrays, with no shape rules and no
        tape entries: the same rules, without the bookkeeping that only a second derivative
        needs.

        >>> import course_utils.minigraph as mg
        >>> x = mg.tensor([1.0, 2.0], requires_grad=True)
        >>> mg.sum(x ** 3).backward(create_graph=True)    # x.grad = 3 x**2, with a tape
        >>> g = x.grad
        >>> x.grad = None
        >>> mg.sum(g).backward()                           # d(sum 3 x**2)/dx = 6 x
        >>> x.grad
        tensor([ 6., 12.], dtype=float32)
        """
        where = f"backward() at {user_source()}"
        if not isinstance(create_graph, (bool, np.bool_)):
            raise ArgumentError(f"{where}: create_graph is True or False, got "
                                f"{type(create_graph).__name__} {create_graph!r:.40}")
        if not self.requires_grad:
            raise GradientError(f"{where}: this tensor does not require grad; create the inputs "
                                f"with mg.tensor(..., requires_grad=True), outside mg.no_grad()")
        if gradient is None:
            if self.size != 1:
                raise GradientError(f"{where}: the output has shape {self.shape}, and a gradient "
                                    f"is implied only for one number; call .sum().backward() or "
                                    f"pass gradient= of shape {self.shape}")
            gradient = np.ones(self.shape, self.dtype)
        try:
            seed = tensor(gradient, dtype=self.dtype)
        except (ShapeError, DTypeError) as e:
            raise type(e)(f"{where}: gradient= {str(e).split(': ', 1)[-1]}") from None
        if seed.shape != self.shape:
            raise GradientError(f"{where}: gradient has shape {seed.shape}, but the output has "
                                f"shape {self.shape}; pass one of the output's shape")
        if create_graph:
            with enable_grad():  # every vjp's ops go on the tape
                for leaf, g in backprop([self], [seed], _record_of, _requires_grad):
                    if leaf._ctx is None:
                        g = g if g.dtype == leaf.dtype else g.cast(leaf.dtype)
                        leaf.grad = g if leaf.grad is None else leaf.grad + g
            return
        with no_grad(), raw_arrays():
            pairs = backprop([self], [seed._data], _record_of, _requires_grad, _raw_vjp)
        for leaf, g in pairs:
            if leaf._ctx is None:  # a fresh array of the leaf's dtype: .grad shares with nothing
                g = np.array(g, dtype=leaf.dtype)
                leaf.grad = Tensor(g) if leaf.grad is None else Tensor(leaf.grad._data + g)

    def cast(self, dtype: Any) -> Tensor:
        """``mg.cast(self, dtype)``."""
        import course_utils.minigraph as mg  # the op functions build on this module

        return mg.cast(self, dtype)

    # --- Python protocols -------------------------------------------------------------------

    def __repr__(self) -> str:
        body = np.array2string(self._data, separator=", ", prefix="tensor(", precision=4)
        extra = "requires_grad=True" if self._ctx is None else f"grad_fn={self._ctx.op.name}"
        return f"tensor({body}, dtype={self.dtype}" + (
            f", {extra})" if self.requires_grad else ")")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._data if dtype is None else self._data.astype(dtype)

    def __len__(self) -> int:
        if not self._data.ndim:
            raise ShapeError(f"len() at {user_source()} of a 0-d tensor: it has no first axis "
                             f"to count; .item() is its one number")
        return len(self._data)

    def __iter__(self) -> Iterator[Tensor]:
        return (self[i] for i in range(len(self)))

    def __bool__(self) -> bool:
        return bool(self._one("`if`, `while`, `and`/`or` or bool()"))

    def __float__(self) -> float:
        return float(self._one("float()").item())

    def __int__(self) -> int:
        return int(self._one("int()").item())

    def __format__(self, spec: str) -> str:
        return format(self.item(), spec) if spec and self.size == 1 else repr(self)

    def _inplace(self, fn: Any, other: Any) -> Tensor:
        if _grad_enabled and self.requires_grad:
            raise GradientError(
                f"in-place update at {user_source()} of a tensor that requires grad would corrupt "
                f"the tape; do it inside `with mg.no_grad():`, as PyTorch asks"
            )
        result = fn(self, other)
        if result.shape != self.shape:
            raise ShapeError(f"in-place update at {user_source()} would change shape "
                             f"{self.shape} to {result.shape}")
        self._data = result._data.astype(self.dtype, copy=False)  # a new array: saved ones stay
        self._version += 1
        return self

    def __iadd__(self, other: Any) -> Tensor:
        return self._inplace(Operators.__add__, other)

    def __isub__(self, other: Any) -> Tensor:
        return self._inplace(Operators.__sub__, other)

    def __imul__(self, other: Any) -> Tensor:
        return self._inplace(Operators.__mul__, other)

    def __itruediv__(self, other: Any) -> Tensor:
        return self._inplace(Operators.__truediv__, other)


def tensor(data: Any, requires_grad: bool = False, dtype: Any = None) -> Tensor:
    """A new eager tensor (a copy of ``data``). Python floats give float32, arrays keep dtype."""
    try:
        arr = np.array(S.as_array(data.numpy() if isinstance(data, Tensor) else data,
                                  dtype=dtype))
    except (ShapeError, DTypeError) as e:
        raise type(e)(f"mg.tensor at {user_source()}: {e}") from None
    except (TypeError, ValueError) as e:  # numpy could not convert to the dtype you asked for
        raise DTypeError(f"mg.tensor at {user_source()}: cannot make a {dtype} array of this "
                         f"value ({e})") from None
    if not isinstance(requires_grad, (bool, np.bool_)):
        raise ArgumentError(f"mg.tensor at {user_source()}: requires_grad is True or False, got "
                            f"{type(requires_grad).__name__} {requires_grad!r:.40}")
    if requires_grad and not S.is_float(arr.dtype):
        raise DTypeError(f"mg.tensor at {user_source()}: only floating-point tensors can require "
                         f"grad, got {arr.dtype}; pass floats or dtype='float32'")
    return Tensor(arr, requires_grad)


def _grad_tensor(value: Any) -> Tensor:
    try:
        return Tensor(np.array(S.as_array(value)))
    except (ShapeError, DTypeError) as e:
        raise GradientError(f".grad = ... at {user_source()}: {e}") from None


def run_op(op: Op, inputs: tuple, attrs: dict[str, Any]) -> Tensor:
    """The eager half of ``mg.apply``: check shapes, run ``op.impl`` now, record on the tape."""
    try:
        ts = _as_tensors(inputs)
    except (ShapeError, DTypeError) as e:
        raise type(e)(f"while running {op.name} at {user_source()}: an input: {e}") from None
    arrays = [t._data for t in ts]
    try:
        shape, dtype = _shape_rule(op, arrays, attrs)
    except (ShapeError, DTypeError) as e:
        raise type(e)(f"while running {_describe(op, ts, attrs)}: {e}") from None
    except Exception as e:  # a broken shape rule (or bad attrs): still say where
        if op.attrs is not None:  # attrs of the wrong name or kind: say which, as graphs do
            try:
                A.check(op, attrs, f"while running {_describe(op, ts, attrs)}")
            except MinigraphError as bad:
                raise bad from None
        raise GraphError(f"while running {_describe(op, ts, attrs)}: the shape rule of "
                         f"{op.name!r} raised {type(e).__name__}: {e}") from e
    if op.impl is None:
        raise GraphError(f"{_describe(op, ts, attrs)}: {op.name} exists only in graphs; "
                         f"build it inside a graph and run it with mg.Session")
    try:
        out = op.impl(*arrays, **attrs)
        if type(out) is not np.ndarray or out.dtype is not dtype or out.shape != shape:
            out = conform(out, shape, dtype)  # e.g. numpy gives a scalar, not a 0-d array
    except MinigraphError:
        raise
    except Exception as e:
        raise ExecutionError(f"while running {_describe(op, ts, attrs)}: "
                             f"{type(e).__name__}: {e}") from e
    result = Tensor(out)
    # Only floats carry gradients: comparisons and casts to int end the tape, as in PyTorch.
    if _grad_enabled and op.vjp and dtype is not None and dtype.kind == "f":
        for t in ts:
            if t.requires_grad:
                break
        else:
            return result
        if ts is not inputs:  # the tape outlives the caller's arrays, which may change later
            ts = tuple(_keep(x, t) for x, t in zip(inputs, ts, strict=True))
        result.requires_grad = True
        result._ctx = TapeEntry(op, ts, attrs, tuple([t._version for t in ts]))
    return result


def _as_tensors(inputs: tuple) -> tuple[Tensor, ...]:
    """``inputs`` itself when all are tensors; else numbers and arrays wrapped as tensors (a
    bare number takes the dtype of the values it meets, see ``S.weak_dtype``)."""
    for x in inputs:
        if not isinstance(x, Tensor):
            weak = S.weak_dtype(inputs)
            return tuple([x if isinstance(x, Tensor) else Tensor(S.as_array(x, weak))
                          for x in inputs])
    return inputs


def _keep(raw: Any, t: Tensor) -> Tensor:
    """The tensor the tape keeps for input ``raw``: a copy when it may share the caller's array.

    Without it, ``mask[:] = False`` after ``mg.where(mask, a, b)`` would change the gradients
    ``backward()`` computes. Copied only when recording, so the no-grad path stays cheap.
    """
    if isinstance(raw, (Tensor, int, float)):  # a tensor is tracked by version; a number is new
        return t
    return Tensor(t._data.copy())


# A shape rule depends only on shapes, dtypes and attrs, and an eager loop applies the same op to
# the same shapes again and again: remember each answer. Bounded, so that ever-changing shapes
# cannot grow it without end. NB: JAX caches abstract evaluation by signature in the same way.
_RULE_CACHE: dict[tuple, tuple] = {}
_RULE_CACHE_SIZE = 4096


_signature = operator.attrgetter("shape", "dtype")  # of an array: all a shape rule looks at


def _attr_type(value: Any) -> Any:
    return tuple(map(type, value)) if type(value) is tuple else type(value)


def _shape_rule(op: Op, arrays: list[np.ndarray], attrs: dict[str, Any]) -> tuple:
    """``op.shape_rule(*arrays, **attrs)``, remembered per (rule, shapes, dtypes, attrs)."""
    try:
        # Attr types are part of the key: 2 == 2.0 and hash alike, but one_hot(l, 2.0) must
        # still meet the rule that refuses a float depth.
        key = (op.shape_rule, *map(_signature, arrays), *attrs.items(),
               *map(_attr_type, attrs.values())) if attrs else (op.shape_rule,
                                                                *map(_signature, arrays))
        return _RULE_CACHE[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable attr (a slice, a list): nothing to remember it by
        return op.shape_rule(*arrays, **attrs)
    result = op.shape_rule(*arrays, **attrs)
    if len(_RULE_CACHE) >= _RULE_CACHE_SIZE:
        _RULE_CACHE.clear()
    _RULE_CACHE[key] = result
    return result


def _describe(op: Op, ts: tuple[Tensor, ...], attrs: dict[str, Any]) -> str:
    args = [f"<tensor {S.format_shape(t.shape)} {t.dtype}>" for t in ts]
    args += [f"{k}={v}" for k, v in attrs.items() if v is not None and v is not False]
    return f"{op.name}({', '.join(args)}) at {user_source()}"


def _requires_grad(t: Tensor) -> bool:
    return t.requires_grad


def _record_of(t: Tensor) -> tuple[Op, tuple[Tensor, ...], dict[str, Any]] | None:
    ctx = t._ctx
    if ctx is None:
        return None
    if tuple([x._version for x in ctx.inputs]) == ctx.versions:  # nothing changed in place
        return ctx.op, ctx.inputs, ctx.attrs
    for i, x in enumerate(ctx.inputs):
        if x._version != ctx.versions[i]:
            raise GradientError(
                f"input {i} of {ctx.op.name} (shape {x.shape}) was changed in place after the op "
                f"used it, so its gradient would be wrong; update tensors only after backward()"
            )
    return ctx.op, ctx.inputs, ctx.attrs
