"""Lowering: an optimized minigraph graph becomes the source of one C function.

The C is written from tables, never from the graph's strings: every identifier in it is made
here (``in0``, ``c3``, ``v12``), every number is written by :func:`literal` (hex floats, exact),
and a node's name reaches the C only inside a comment, through :func:`comment`, which keeps
letters, digits and a little punctuation and drops everything else (so no ``*/``, no newline,
no ``#include``). Three tables decide what each op becomes:

- :data:`EXPRESSIONS`: an elementwise op as a C expression of its operands, for the fused loops;
- :data:`VIEWS`: ops that only re-index their input (no code; the memory plan calls them views);
- :data:`KERNELS`: the rest (matmul and convolution through BLAS, pooling, reductions, softmax).

NB: the same split as tinygrad's C renderer (a dict of op -> expression template) and
TorchInductor's C++ backend (pointwise kernels plus calls into external kernels for GEMM).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import shapes as S
from ..errors import CompileError
from ..graph import Graph, Node
from ..memory import MemoryPlan, Spec

#: numpy dtype name -> the C type that stores it
CTYPES = {"float32": "float", "float64": "double", "bool": "unsigned char", "int8": "int8_t",
          "int16": "int16_t", "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t",
          "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t"}

#: the two BLAS types: dtype name -> the prefix of its cblas routines
BLAS = {"float32": "scipy_cblas_s", "float64": "scipy_cblas_d"}


# --- escaping: what may reach the C text ------------------------------------------------------

_COMMENT_SAFE = re.compile(r"[^A-Za-z0-9_ .,:%=()\[\]<>+-]")


def comment(text: Any, limit: int = 110) -> str:
    """``text`` made safe inside ``/* ... */``: only letters, digits and ``_ .,:%=()[]<>+-``
    survive (anything else becomes ``?``), so it can neither close the comment nor start a
    line of its own."""
    text = _COMMENT_SAFE.sub("?", str(text))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def literal(value: Any, dtype: np.dtype) -> str:
    """A C literal of type ``dtype`` for ``value``: hex for floats (exact), decimal for ints."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        v = float(value)
        suffix = "f" if dtype == np.float32 else ""
        if math.isnan(v):
            return f"(({CTYPES[dtype.name]})NAN)"
        if math.isinf(v):
            return f"(({CTYPES[dtype.name]}){'-' if v < 0 else ''}INFINITY)"
        v = float(np.asarray(v, dtype))
        if v.is_integer() and abs(v) < 2**24:  # small whole numbers read as themselves
            return f"{v:.1f}{suffix}"
        return f"{v.hex()}{suffix}"  # exact: hexadecimal digits of the binary value
    if dtype.kind == "b":
        return "1" if bool(value) else "0"
    if dtype.kind in "iu":
        v = int(value)
        if dtype.kind == "u":
            return f"{v}ULL"
        if v == -2**63:
            return "(-9223372036854775807LL - 1)"
        return f"{v}LL" if v >= 0 else f"({v}LL)"
    raise CompileError(f"no C literal for a {dtype} value")


def ctype(dtype: Any) -> str:
    name = np.dtype(dtype).name
    if name not in CTYPES:
        raise CompileError(f"no C type for dtype {name}")
    return CTYPES[name]


def describe(node: Node) -> str:
    """``%h = matmul(%x, %w) defined at f.py:3``, as minigraph's errors name a node."""
    return f"%{node.name} = {node.op}(...) defined at {node.source}"


# --- where each value lives -------------------------------------------------------------------


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


@dataclass
class Loc:
    """A value in memory: a C pointer expression, its shape and element strides (numpy's, in
    elements). ``batched``: dim 0 is the batch, ``nb`` rows at run time."""

    ptr: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype
    batched: bool

    @property
    def contiguous(self) -> bool:
        want = contiguous_strides(self.shape)
        return all(s == w for s, w, d in zip(self.strides, want, self.shape, strict=True)
                   if d != 1)

    def dim(self, k: int) -> str:
        """Dim ``k`` as C: ``nb`` for the batch."""
        return "nb" if (k == 0 and self.batched) else str(self.shape[k])

    def count(self, start: int = 0, stop: int | None = None) -> str:
        """The product of dims ``start:stop`` as C (``nb * 64``)."""
        stop = len(self.shape) if stop is None else stop
        static = math.prod(self.shape[max(start, 1 if self.batched else 0):stop])
        if self.batched and start == 0 and stop > 0:
            return "nb" if static == 1 else f"nb * {static}"
        return str(static)


def product(dims: list[str]) -> str:
    """``["nb", "8", "64"]`` -> ``"nb * 512"``."""
    static = math.prod(int(d) for d in dims if d != "nb")
    if "nb" in dims:
        return "nb" if static == 1 else f"nb * {static}"
    return str(static)


# --- elementwise ops: C expressions ---------------------------------------------------------
# Each entry takes the operands (C expressions, already of the compute type) and a function
# that names a <math.h> routine for that type (expf for float, exp for double).

Expr = Callable[[list[str], Callable[[str], str], dict], str]


def _nan_max(a: list[str], *_: Any) -> str:  # NaN wins, as numpy's maximum
    return f"((({a[0]} > {a[1]}) | ({a[0]} != {a[0]})) ? {a[0]} : {a[1]})"


def _nan_min(a: list[str], *_: Any) -> str:
    return f"((({a[0]} < {a[1]}) | ({a[0]} != {a[0]})) ? {a[0]} : {a[1]})"


# fmt: off
EXPRESSIONS: dict[str, Expr] = {
    "add":           lambda a, f, k: f"{a[0]} + {a[1]}",
    "sub":           lambda a, f, k: f"{a[0]} - {a[1]}",
    "mul":           lambda a, f, k: f"{a[0]} * {a[1]}",
    "div":           lambda a, f, k: f"{a[0]} / {a[1]}",
    "neg":           lambda a, f, k: f"-{a[0]}",
    "square":        lambda a, f, k: f"{a[0]} * {a[0]}",
    "pow":           lambda a, f, k: f"{f('pow')}({a[0]}, {a[1]})",
    "exp":           lambda a, f, k: f"{f('exp')}({a[0]})",
    "log":           lambda a, f, k: f"{f('log')}({a[0]})",
    "sqrt":          lambda a, f, k: f"{f('sqrt')}({a[0]})",
    "tanh":          lambda a, f, k: f"{f('tanh')}({a[0]})",
    "abs":           lambda a, f, k: f"{f('fabs')}({a[0]})",
    # minigraph's sigmoid is 0.5 (tanh(x / 2) + 1): no overflow for large |x|
    "sigmoid":       lambda a, f, k: f"{k['half']} * ({f('tanh')}({k['half']} * {a[0]}) + "
                                     f"{k['one']})",
    "relu":          lambda a, f, k: f"({a[0]} < 0 ? 0 : {a[0]})",  # NaN stays NaN
    "maximum":       _nan_max,
    "minimum":       _nan_min,
    "identity":      lambda a, f, k: a[0],
    "ones_like":     lambda a, f, k: k["one"],
    "equal":         lambda a, f, k: f"{a[0]} == {a[1]}",
    "not_equal":     lambda a, f, k: f"{a[0]} != {a[1]}",
    "less":          lambda a, f, k: f"{a[0]} < {a[1]}",
    "less_equal":    lambda a, f, k: f"{a[0]} <= {a[1]}",
    "greater":       lambda a, f, k: f"{a[0]} > {a[1]}",
    "greater_equal": lambda a, f, k: f"{a[0]} >= {a[1]}",
    "where":         lambda a, f, k: f"{a[0]} ? {a[1]} : {a[2]}",
}
# fmt: on

#: comparisons compute in their inputs' common type; where's condition stays as it is
COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}
#: the float-only functions: no <math.h> routine for ints
FLOAT_ONLY = {"exp", "log", "sqrt", "tanh", "sigmoid", "pow"}

#: ops that re-index inside a fused loop (their value is their input's, looked at differently)
SHAPE_STEPS = {"reshape", "expand_dims", "squeeze", "broadcast_to", "broadcast_like", "size"}


# --- fused loops ----------------------------------------------------------------------------
# A loop computes one node's value at every index of its shape. Inside the body a value is read
# "through a map": for each of its dims, the loop dim it follows, or None (always index 0, a
# broadcast). Elementwise ops pass the map on to their operands (aligned on the right, as numpy
# broadcasts); shape ops change it; a node's input (a "leaf") turns it into strides.


@dataclass
class _Slot:
    kind: str  # "leaf", "const", "step", "view"
    shape: tuple[int, ...]
    dtype: np.dtype
    loc: Loc | None = None  # leaf
    text: str = ""  # const: its C literal
    op: str = ""  # step / view
    args: tuple[int, ...] = ()
    attrs: dict = field(default_factory=dict)
    name: str = ""
    #: a leaf whose elements were regrouped in a way no strides describe (a reshape of a
    #: transpose): ``loc.strides`` then walk a contiguous stand-in, and this says how its flat
    #: index f reaches memory: the sum of (f / step) % size * stride over the real dims
    regroup: tuple[tuple[int, int, int], ...] | None = None


@dataclass
class _Load:
    leaf: int
    strides: tuple[int, ...]  # per loop dim
    regroup: tuple[tuple[int, int, int], ...] | None = None


class LoopBuilder:
    """The body of one fused loop: statements, and the loads whose index it needs."""

    def __init__(self, slots: list[_Slot], out_shape: tuple[int, ...], where: str) -> None:
        self.slots, self.out_shape, self.where = slots, out_shape, where
        self.body: list[tuple[str, str, Any]] = []  # (ctype, var, expr or _Load)
        self.memo: dict[tuple, str] = {}

    def value(self, slot: int, amap: tuple[int | None, ...]) -> str:
        key = (slot, amap)
        if key in self.memo:
            return self.memo[key]
        s = self.slots[slot]
        if s.kind == "const":
            return s.text
        if s.kind == "view":
            return self.value(s.args[0], self._view_map(s, amap))
        if s.kind == "leaf":
            strides = [0] * len(self.out_shape)
            for d, m in enumerate(amap):
                if m is not None:
                    strides[m] += s.loc.strides[d]
            expr: Any = _Load(slot, tuple(strides), s.regroup)
        else:
            expr = self._expr(s, amap)  # its operands first: they take the lower numbers
        var = f"v{len(self.body)}"
        self.body.append((ctype(s.dtype), var, expr))
        self.memo[key] = var
        return var

    def _expr(self, s: _Slot, amap: tuple) -> str:
        operands = []
        compute = s.dtype
        if s.op in COMPARISONS:
            compute = np.result_type(*(self.slots[a].dtype for a in s.args))
        elif s.op == "cast":
            compute = self.slots[s.args[0]].dtype
        for i, a in enumerate(s.args):
            text = self.value(a, _broadcast_map(self.slots[a].shape, s.shape, amap))
            want = compute if not (s.op == "where" and i == 0) else self.slots[a].dtype
            if self.slots[a].dtype != want:
                text = f"({ctype(want)}){text}"
            operands.append(text)
        if s.op == "cast":
            return f"({operands[0]} != 0)" if s.dtype.kind == "b" else \
                f"({ctype(s.dtype)})({operands[0]})"
        if s.op == "clip":
            x = operands[0]
            if s.attrs.get("min") is not None:
                x = _nan_max([x, literal(s.attrs["min"], s.dtype)])
            if s.attrs.get("max") is not None:
                x = _nan_min([x, literal(s.attrs["max"], s.dtype)])
            return x
        if s.op in FLOAT_ONLY and compute.kind != "f":
            raise CompileError(f"{self.where}: {s.op} of {compute} has no C template")
        suffix = "f" if compute == np.float32 else ""
        consts = {"half": literal(0.5, s.dtype) if s.dtype.kind == "f" else "0",
                  "one": literal(1, s.dtype)}
        return EXPRESSIONS[s.op](operands, lambda name: name + suffix, consts)

    def _view_map(self, s: _Slot, amap: tuple) -> tuple:
        x = self.slots[s.args[0]]
        if s.op in ("broadcast_to", "broadcast_like"):
            return _broadcast_map(x.shape, s.shape, amap)
        if s.op == "expand_dims":
            axes = S.normalize_axes(s.attrs["axis"], len(s.shape))
            return tuple(m for d, m in enumerate(amap) if d not in axes)
        if s.op == "squeeze":
            axes = S.normalize_axes(s.attrs["axis"], len(x.shape))
            it = iter(amap)
            return tuple(None if d in axes else next(it) for d in range(len(x.shape)))
        raise AssertionError(s.op)


def _broadcast_map(shape: tuple[int, ...], out: tuple[int, ...], amap: tuple) -> tuple:
    """The map of an operand of ``shape`` broadcast to ``out`` (numpy's right alignment)."""
    lead = len(out) - len(shape)
    return tuple(amap[d + lead] if shape[d] == out[d + lead] and shape[d] != 1 else None
                 for d in range(len(shape)))


def program_slots(node: Node, locs: list[Loc], specs: list[Spec]) -> list[_Slot]:
    """The slots of a fused node's program (or of one elementwise node, as a one-step
    program), leaves first, its result last; ``specs`` are the steps' shapes at this
    compile's batch."""
    slots = [_Slot("leaf", loc.shape, loc.dtype, loc=loc) for loc in locs]
    ref = list(range(len(locs)))  # the program's slot numbers -> ours
    if node.op == "fused":
        steps = [(s.op, s.args, s.attrs, s.name) for s in node.attrs["program"].steps]
    else:
        steps = [(node.op, tuple(range(len(locs))), node.attrs, node.name)]
    for (op, args, attrs, name), spec in zip(steps, specs, strict=True):
        shape, dtype = tuple(spec.shape), np.dtype(spec.dtype)
        args = tuple(ref[a] for a in args)
        where = f"{describe(node)} (its step {op} from %{name})"
        if op == "constant":
            value = np.asarray(attrs["value"])
            slots.append(_Slot("const", shape, dtype, text=literal(value.reshape(-1)[0], dtype)))
        elif op == "size":
            axes = S.normalize_axes(attrs.get("axis"), len(slots[args[0]].shape))
            if slots[args[0]].shape and 0 in axes and _batched_slot(slots, args[0]):
                raise CompileError(f"{where}: the size of the batch axis is not known to a "
                                   f"compiled tile; compile with dynamic_batch=False")
            count = math.prod(slots[args[0]].shape[a] for a in axes)
            slots.append(_Slot("const", shape, dtype, text=literal(count, dtype)))
        elif op == "reshape":  # regroups elements: pushed down to the leaves' strides
            _push(slots, args[0], lambda v, shape=shape: v.reshape(shape, copy=False), where)
        elif op in SHAPE_STEPS:
            slots.append(_Slot("view", shape, dtype, op=op, args=(args[0],), attrs=attrs,
                               name=name))
        elif op in EXPRESSIONS or op in ("cast", "clip"):
            slots.append(_Slot("step", shape, dtype, op=op, args=args, attrs=attrs, name=name))
        else:
            raise CompileError(f"{where}: no C template for {op!r} inside a fused loop")
        ref.append(len(slots) - 1)
    if ref[-1] != len(slots) - 1:  # the result is an earlier slot (a program of views)
        last = slots[ref[-1]]
        slots.append(_Slot("step", last.shape, last.dtype, op="identity", args=(ref[-1],)))
    return slots


def _fake(shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """A numpy view with these shape and element strides (over one byte: never read), so that
    numpy's own rules say how a reshape or broadcast of it is strided."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape, strides)


def _push(slots: list[_Slot], j: int, view: Callable[[np.ndarray], np.ndarray],
          where: str) -> int:
    """Append a slot equal to ``view`` (a reshape, broadcast...) of slot ``j``, with the view
    moved down to the leaves: an elementwise op of reshaped operands is the reshape of the op
    (each operand first broadcast to the op's shape). Returns the new slot's index."""
    s = slots[j]
    shape = tuple(view(_fake(s.shape, (0,) * len(s.shape))).shape)
    if s.kind == "leaf":
        regroup = s.regroup
        try:
            v = view(_fake(s.shape, s.loc.strides))
        except ValueError:  # no strides say it: index a contiguous stand-in, then regroup
            if regroup is not None:
                raise CompileError(f"{where}: a value regrouped twice by reshapes has no C "
                                   f"template") from None
            steps = contiguous_strides(s.shape)
            regroup = tuple(zip(steps, s.shape, s.loc.strides, strict=True))
            v = view(_fake(s.shape, steps))
        slots.append(_Slot("leaf", shape, s.dtype, regroup=regroup,
                           loc=Loc(s.loc.ptr, shape, tuple(v.strides), s.dtype, s.loc.batched)))
    elif s.kind == "const":
        slots.append(_Slot("const", shape, s.dtype, text=s.text))
    elif s.kind == "view":
        inner = _VIEW_FNS[s.op](s)
        return _push(slots, s.args[0], lambda v: view(inner(v)), where)
    else:
        args = tuple(_push(slots, a, lambda v, out=s.shape: view(np.broadcast_to(v, out)), where)
                     for a in s.args)
        slots.append(_Slot("step", shape, s.dtype, op=s.op, args=args, attrs=s.attrs,
                           name=s.name))
    return len(slots) - 1


# What each view slot does to a numpy array (expand_dims and squeeze: a reshape to its shape).
_VIEW_FNS: dict[str, Callable[[_Slot], Callable[[np.ndarray], np.ndarray]]] = {
    "broadcast_to": lambda s: lambda v: np.broadcast_to(v, s.shape),
    "broadcast_like": lambda s: lambda v: np.broadcast_to(v, s.shape),
    "expand_dims": lambda s: lambda v: v.reshape(s.shape),
    "squeeze": lambda s: lambda v: v.reshape(s.shape),
}


def _batched_slot(slots: list[_Slot], i: int) -> bool:
    s = slots[i]
    if s.kind == "leaf":
        return s.loc.batched
    return any(_batched_slot(slots, a) for a in s.args)


def collapse(sizes: list[str], vectors: list[tuple[int, ...]]) -> tuple[list[str], list[list[int]]]:
    """Drop size-1 loop dims and merge neighbours that every access walks as one (the dims of a
    contiguous block), so the innermost loop is as long as it can be."""
    keep = [k for k, d in enumerate(sizes) if d != "1"]
    sizes = [sizes[k] for k in keep]
    vecs = [[v[k] for k in keep] for v in vectors]
    k = len(sizes) - 2
    while k >= 0:
        inner = int(sizes[k + 1])  # only dim 0 can be the batch, so this one is a number
        if all(v[k] == v[k + 1] * inner for v in vecs):
            sizes[k] = product([sizes[k], str(inner)])
            del sizes[k + 1]
            for v in vecs:
                v[k] = v[k + 1]
                del v[k + 1]
        k -= 1
    return sizes, vecs


def index(vec: list[int]) -> str:
    terms = [f"i{k}" if s == 1 else f"i{k} * {s}" for k, s in enumerate(vec) if s]
    return " + ".join(terms) or "0"


def emit_loop(node: Node, out: Loc, slots: list[_Slot], lines: list[str], indent: str) -> None:
    """A fused loop writing the last slot's value at every index of ``out`` (by its strides:
    contiguous, except concat's blocks)."""
    ### ALSO ANSWERS 15.1: every mg.compile_c call emits its fused loops with it (lesson 15 on)
    builder = LoopBuilder(slots, out.shape, describe(node))
    result = builder.value(len(slots) - 1, tuple(range(len(out.shape))))
    sizes = [out.dim(k) for k in range(len(out.shape))]
    loads = [expr for _, _, expr in builder.body if isinstance(expr, _Load)]
    sizes, vecs = collapse(sizes, [out.strides] + [ld.strides for ld in loads])
    out_vec, load_vecs = vecs[0], iter(vecs[1:])
    pointers = sorted({ld.leaf for ld in loads})
    lines.append(f"{indent}{{")
    inner = indent + "  "
    t = ctype(out.dtype)
    lines.append(f"{inner}{t} *restrict o = ({t} *)({out.ptr});")
    for leaf in pointers:
        lt = ctype(slots[leaf].dtype)
        lines.append(f"{inner}const {lt} *restrict p{leaf} = "
                     f"(const {lt} *)({slots[leaf].loc.ptr});")
    for k, size in enumerate(sizes):
        lines.append(f"{inner}{'  ' * k}for (int64_t i{k} = 0; i{k} < {size}; i{k}++)"
                     + (" {" if k == len(sizes) - 1 else ""))
    body = inner + "  " * len(sizes)
    if not sizes:
        lines.append(f"{inner}{{")
    for ct, var, expr in builder.body:
        if isinstance(expr, _Load):
            at = index(next(load_vecs))
            if expr.regroup is not None:
                flat = at
                at = " + ".join(f"(({flat}) / {step} % {size}) * {stride}"
                                for step, size, stride in expr.regroup if size > 1 and stride)
                at = at or "0"
            lines.append(f"{body}const {ct} {var} = p{expr.leaf}[{at}];")
        else:
            lines.append(f"{body}const {ct} {var} = {expr};")
    final = result if builder.slots[-1].dtype == out.dtype else f"({t}){result}"
    lines.append(f"{body}o[{index(out_vec)}] = {final};")
    lines.append(f"{inner}{'  ' * max(len(sizes) - 1, 0)}}}")
    lines.append(f"{indent}}}")


# --- views: no code, a new way of reading the same memory ------------------------------------


def _view_reshape(node: Node, x: Loc, shape: tuple[int, ...]) -> Loc:
    if not x.contiguous:
        raise CompileError(f"{describe(node)}: a reshape of a strided view (a transpose or a "
                           f"slice) would need a copy, which the memory plan does not give it; "
                           f"reshape before transposing, or compute it outside the graph")
    return Loc(x.ptr, shape, contiguous_strides(shape), x.dtype, x.batched)


def _view_transpose(node: Node, x: Loc, shape: tuple[int, ...]) -> Loc:
    axes = S.transpose_axes(len(x.shape), node.attrs.get("axes"))
    return Loc(x.ptr, shape, tuple(x.strides[a] for a in axes), x.dtype, x.batched and axes[0] == 0)


def _view_expand_dims(node: Node, x: Loc, shape: tuple[int, ...]) -> Loc:
    axes = S.normalize_axes(node.attrs["axis"], len(shape))
    it = iter(x.strides)
    return Loc(x.ptr, shape, tuple(0 if d in axes else next(it) for d in range(len(shape))),
               x.dtype, x.batched and 0 not in axes)


def _view_squeeze(node: Node, x: Loc, shape: tuple[int, ...]) -> Loc:
    axis = node.attrs.get("axis")
    axes = (tuple(d for d, n in enumerate(x.shape) if n == 1) if axis is None
            else S.normalize_axes(axis, len(x.shape)))
    strides = tuple(s for d, s in enumerate(x.strides) if d not in axes)
    return Loc(x.ptr, shape, strides, x.dtype, x.batched)


def _view_getitem(node: Node, x: Loc, shape: tuple[int, ...]) -> Loc:
    index = node.attrs["index"]
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    pad = (slice(None),) * (len(x.shape) - used)
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + pad + index[at + 1:]
    else:
        index = index + pad
    offset, strides, dims = 0, [], iter(zip(x.shape, x.strides, strict=True))
    for item in index:
        if item is None:
            strides.append(0)
            continue
        d, s = next(dims)
        if isinstance(item, slice):
            start, _, step = item.indices(d)
            offset += start * s
            strides.append(s * step)
        else:
            offset += (item + d if item < 0 else item) * s
    ptr = x.ptr if offset == 0 else f"({x.ptr} + {offset})"
    return Loc(ptr, shape, tuple(strides), x.dtype, x.batched)


VIEWS: dict[str, Callable[[Node, Loc, tuple[int, ...]], Loc]] = {
    "identity": lambda node, x, shape: x,
    "reshape": _view_reshape,
    "transpose": _view_transpose,
    "expand_dims": _view_expand_dims,
    "squeeze": _view_squeeze,
    "getitem": _view_getitem,
}


# --- kernels: the ops that are more than one loop over their output ----------------------------


def _need_contiguous(node: Node, *xs: Loc) -> None:
    for x, inp in zip(xs, node.inputs, strict=False):
        if not x.contiguous:
            raise CompileError(f"{describe(node)}: its input %{inp.name} is a strided view (a "
                               f"transpose or a slice), which this kernel cannot read; the C "
                               f"backend reads strided views only in elementwise loops")


def _need_blas(node: Node, dtype: np.dtype) -> str:
    if dtype.name not in BLAS:
        raise CompileError(f"{describe(node)}: {node.op} of {dtype} has no C template (BLAS "
                           f"multiplies float32 and float64)")
    return BLAS[dtype.name]


def _operand(x: Loc, ndim_as_matrix: int) -> tuple[str, str] | None:
    """``(transpose flag, leading dimension)`` of a 2-D operand, or None if BLAS cannot read it."""
    if x.contiguous:
        return "CblasNoTrans", str(x.shape[-1]) if ndim_as_matrix == 2 else "1"
    if len(x.shape) == 2 and x.strides[0] == 1 and x.strides[1] == x.shape[0]:
        return "CblasTrans", str(x.shape[0])  # the transpose of a contiguous matrix
    return None


def kernel_matmul(ctx: Emitter, node: Node, out: Loc, ins: list[Loc]) -> list[str]:
    x, y = ins
    blas = _need_blas(node, out.dtype)
    t = ctype(out.dtype)
    if len(y.shape) <= 2 and len(x.shape) <= 2 or (len(y.shape) <= 2 and x.contiguous):
        k = x.shape[-1]
        rows = x.count(0, len(x.shape) - 1) if len(x.shape) > 1 else "1"
        cols = str(y.shape[-1]) if len(y.shape) == 2 else "1"
        a, b = _operand(x, 2), _operand(y, len(y.shape))
        if a is None or b is None:
            _need_contiguous(node, x, y)
        one, zero = literal(1, out.dtype), literal(0, out.dtype)
        return [f"{blas}gemm(CblasRowMajor, {a[0]}, {b[0]}, {rows}, {cols}, {k}, {one}, "
                f"{x.ptr}, {a[1]}, {y.ptr}, {b[1]}, {zero}, {out.ptr}, {cols});"]
    # batched: one GEMM per matrix of the batch dims, broadcast as numpy does
    _need_contiguous(node, x, y)
    if len(x.shape) < 2 or len(y.shape) < 2:
        raise CompileError(f"{describe(node)}: a batched matmul with a 1-d operand has no C "
                           f"template; reshape the vector to a matrix first")
    batch = out.shape[:-2]
    m, k, n = x.shape[-2], x.shape[-1], y.shape[-1]
    lines = [f"for (int64_t j = 0; j < {product([out.dim(d) for d in range(len(batch))])}; j++) {{"]
    # the flat batch index j, split into one index per batch dim
    rest, offsets = "j", {"x": [], "y": []}
    for d in reversed(range(len(batch))):
        size = out.dim(d)
        idx = f"b{d}"
        lines.append(f"  const int64_t {idx} = {rest} % {size};")
        rest = f"({rest} / {size})"
        for name, v in (("x", x), ("y", y)):
            vd = d - (len(batch) - (len(v.shape) - 2))
            if vd >= 0 and v.shape[vd] != 1:
                offsets[name].append(f"{idx} * {v.strides[vd]}")
    xo = " + ".join(offsets["x"]) or "0"
    yo = " + ".join(offsets["y"]) or "0"
    lines.append(f"  {blas}gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, {m}, {n}, {k}, "
                 f"{literal(1, out.dtype)}, {x.ptr} + {xo}, {k}, {y.ptr} + {yo}, {n}, "
                 f"{literal(0, out.dtype)}, ({t} *)({out.ptr}) + j * {m * n}, {n});")
    lines.append("}")
    return lines


def kernel_conv2d(ctx: Emitter, node: Node, out: Loc, ins: list[Loc]) -> list[str]:
    """im2col + one GEMM per group of images: each image is copied once into a zero-padded
    plane (so no tap needs a bounds check), its taps are copied into the columns, and
    ``(O x C*kh*kw) @ (C*kh*kw x images*positions)`` gives every output channel at once."""
    x, w = ins
    _need_contiguous(node, x, w)
    if w.batched:
        raise CompileError(f"{describe(node)}: conv2d with weights that change per row has no C "
                           f"template")
    blas = _need_blas(node, out.dtype)
    t = ctype(out.dtype)
    _, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    ho, wo = out.shape[2], out.shape[3]
    (sh, sw), (ph, pw) = node.attrs["stride"], node.attrs["padding"]
    hp, wp = h + 2 * ph, wd + 2 * pw
    p, ckk = ho * wo, c * kh * kw
    group = max(1, min(ctx.rows, 2048 // max(p, 1)))  # images per GEMM: about 2048 columns
    ctx.workspace(node, (ckk * group * p + o * group * p + c * hp * wp) * out.dtype.itemsize)
    tap = f"for (int64_t ow = 0; ow < {wo}; ow++) dst[oh * {wo} + ow] = s[ow * {sw}];"
    return [
        "{",
        f"  {t} *cols = ({t} *)workspace, *tmp = cols + {ckk * group * p}, "
        f"*pad = tmp + {o * group * p};",
        f"  memset(pad, 0, {c * hp * wp} * sizeof({t}));  /* the border stays zero */",
        f"  for (int64_t g0 = 0; g0 < {x.dim(0)}; g0 += {group}) {{",
        f"    const int64_t g = {x.dim(0)} - g0 < {group} ? {x.dim(0)} - g0 : {group};",
        "    for (int64_t b = 0; b < g; b++) {",
        f"      const {t} *img = {x.ptr} + (g0 + b) * {c * h * wd};",
        f"      for (int64_t r = 0; r < {c * h}; r++)  /* the image inside its zero border */",
        f"        memcpy(pad + ((r / {h}) * {hp} + r % {h} + {ph}) * {wp} + {pw}, img + r * {wd}, "
        f"{wd} * sizeof({t}));",
        "      /* im2col: row (c, ki, kj) of cols holds that tap at every output position */",
        f"      for (int64_t ci = 0; ci < {c}; ci++)",
        f"        for (int64_t ki = 0; ki < {kh}; ki++)",
        f"          for (int64_t kj = 0; kj < {kw}; kj++) {{",
        f"            {t} *dst = cols + ((ci * {kh} + ki) * {kw} + kj) * (g * {p}) + b * {p};",
        f"            for (int64_t oh = 0; oh < {ho}; oh++) {{",
        f"              const {t} *s = pad + (ci * {hp} + oh * {sh} + ki) * {wp} + kj;",
        f"              {tap}",
        "            }",
        "          }",
        "    }",
        "    /* (O x C*kh*kw) @ (C*kh*kw x g*P): every output channel of the group in one GEMM */",
        f"    {blas}gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, {o}, g * {p}, {ckk}, "
        f"{literal(1, out.dtype)}, {w.ptr}, {ckk}, cols, g * {p}, {literal(0, out.dtype)}, tmp, "
        f"g * {p});",
        "    for (int64_t b = 0; b < g; b++)  /* channel-major columns back to NCHW */",
        f"      for (int64_t oc = 0; oc < {o}; oc++)",
        f"        memcpy({out.ptr} + ((g0 + b) * {o} + oc) * {p}, tmp + oc * (g * {p}) + b * {p}, "
        f"{p} * sizeof({t}));",
        "  }",
        "}",
    ]


def _pool(kind: str) -> Callable[..., list[str]]:
    def kernel(ctx: Emitter, node: Node, out: Loc, ins: list[Loc]) -> list[str]:
        (x,) = ins
        _need_contiguous(node, x)
        t = ctype(out.dtype)
        _, c, h, wd = x.shape
        ho, wo = out.shape[2], out.shape[3]
        (kh, kw), (sh, sw) = node.attrs["kernel_size"], node.attrs["stride"]
        at = f"(oh * {sh} + ki) * {wd} + ow * {sw} + kj"
        window = [f"  for (int64_t oh = 0; oh < {ho}; oh++)",
                  f"    for (int64_t ow = 0; ow < {wo}; ow++) {{"]
        taps = [f"      for (int64_t ki = 0; ki < {kh}; ki++)",
                f"        for (int64_t kj = 0; kj < {kw}; kj++)"]
        lines = [f"for (int64_t pl = 0; pl < {product([x.dim(0), str(c)])}; pl++) {{",
                 f"  const {t} *src = {x.ptr} + pl * {h * wd};",
                 f"  {t} *dst = {out.ptr} + pl * {ho * wo};"]
        if kind == "avg":
            count = literal(kh * kw, out.dtype)
            return lines + window + [f"      {t} m = 0;", *taps, f"          m += src[{at}];",
                                     f"      dst[oh * {wo} + ow] = m / {count};", "    }", "}"]
        return lines + [
            "  int nan = 0;  /* any NaN in this plane? (then numpy's max gives NaN) */",
            f"  for (int64_t i = 0; i < {h * wd}; i++) nan |= src[i] != src[i];",
            *window,
            f"      {t} m = src[(oh * {sh}) * {wd} + ow * {sw}];",
            *taps,
            f"          m = src[{at}] > m ? src[{at}] : m;",
            f"      dst[oh * {wo} + ow] = m;",
            "    }",
            "  if (nan)  /* rare: the windows that hold a NaN give NaN */",
            *window,
            *taps,
            f"          if (src[{at}] != src[{at}]) dst[oh * {wo} + ow] = src[{at}];",
            "    }",
            "}",
        ]
    return kernel


def _accumulator(dtype: np.dtype) -> str:
    return "double" if dtype.kind == "f" else "int64_t"


def _reduce(kind: str) -> Callable[..., list[str]]:
    def kernel(ctx: Emitter, node: Node, out: Loc, ins: list[Loc]) -> list[str]:
        (x,) = ins
        t, xt = ctype(out.dtype), ctype(x.dtype)
        axes = S.normalize_axes(node.attrs.get("axis"), len(x.shape))
        if kind == "max" and x.dtype.kind == "b":
            raise CompileError(f"{describe(node)}: max of bool has no C template")
        trailing = axes == tuple(range(len(x.shape) - len(axes), len(x.shape)))
        if trailing and x.contiguous:  # one run of memory per result: sum it in a register
            first = len(x.shape) - len(axes)
            outer, inner = x.count(0, first), x.count(first)
            if kind == "max":
                init, step, acc_t = "src[0]", "acc = ((v > acc) | (v != v)) ? v : acc;", xt
            else:
                init, step, acc_t = "0", "acc += v;", _accumulator(out.dtype)
            finish = f"acc / {inner}" if kind == "mean" else "acc"
            return [
                f"for (int64_t r = 0; r < {outer}; r++) {{",
                f"  const {xt} *src = {x.ptr} + r * {inner};",
                f"  {acc_t} acc = {init};",
                f"  for (int64_t j = 0; j < {inner}; j++) {{ const {acc_t} v = ({acc_t})src[j]; "
                f"{step} }}",
                f"  (({t} *)({out.ptr}))[r] = ({t})({finish});",
                "}",
            ]
        # any other axes: clear the output, then add every input element into its place
        count = product([out.dim(d) if out.batched else str(out.shape[d])
                         for d in range(len(out.shape))]) if out.shape else "1"
        reduced = math.prod(x.shape[a] for a in axes)
        init = (literal(-np.inf, out.dtype) if out.dtype.kind == "f"
                else literal(np.iinfo(out.dtype).min, out.dtype)) if kind == "max" else "0"
        out_strides, step = [], 1
        for d in reversed(range(len(x.shape))):
            out_strides.append(0 if d in axes else step)
            step *= 1 if d in axes else x.shape[d]
        out_strides.reverse()
        sizes = [x.dim(d) for d in range(len(x.shape))]
        lines = [f"for (int64_t r = 0; r < {count}; r++) (({t} *)({out.ptr}))[r] = {init};",
                 "{", f"  {t} *o = ({t} *)({out.ptr});", f"  const {xt} *src = {x.ptr};"]
        for k, size in enumerate(sizes):
            lines.append(f"  {'  ' * k}for (int64_t i{k} = 0; i{k} < {size}; i{k}++)")
        at, src = index(out_strides), index(list(x.strides))  # x may be a strided view
        pad = "  " * (len(sizes) + 1)
        if kind == "max":
            lines.append(f"{pad}{{ const {t} v = src[{src}]; o[{at}] = ((v > o[{at}]) | (v != v)) "
                         f"? v : o[{at}]; }}")
        else:
            lines.append(f"{pad}o[{at}] += ({t})src[{src}];")
        if kind == "mean":
            lines.append(f"  for (int64_t r = 0; r < {count}; r++) o[r] /= {reduced};")
        lines.append("}")
        return lines
    return kernel


def _softmax(log: bool) -> Callable[..., list[str]]:
    def kernel(ctx: Emitter, node: Node, out: Loc, ins: list[Loc]) -> list[str]:
        (x,) = ins
        _need_contiguous(node, x)
        t = ctype(out.dtype)
        f = (lambda name: name + "f") if out.dtype == np.float32 else (lambda name: name)
        (axis,) = S.normalize_axes(node.attrs.get("axis", -1), len(x.shape))
        outer, length, inner = x.count(0, axis), x.shape[axis], x.count(axis + 1)
        at = f"(r * {length} + l) * {inner} + i"
        write = (f"dst[{at}] = src[{at}] - m - ({t}){f('log')}(s);" if log
                 else f"dst[{at}] = {f('exp')}(src[{at}] - m) / ({t})s;")
        return [
            f"for (int64_t r = 0; r < {outer}; r++)",
            f"  for (int64_t i = 0; i < {inner}; i++) {{",
            f"    const {t} *src = {x.ptr};",
            f"    {t} *dst = {out.ptr};",
            f"    {t} m = src[(r * {length}) * {inner} + i];",
            f"    for (int64_t l = 1; l < {length}; l++) {{ const {t} v = src[{at}]; "
            f"m = ((v > m) | (v != v)) ? v : m; }}",
            "    double s = 0;",
            f"    for (int64_t l = 0; l < {length}; l++) s += {f('exp')}(src[{at}] - m);",
            f"    for (int64_t l = 0; l < {length}; l++) {write}",
            "  }",
        ]
    return kernel


def kernel_logsumexp(ctx: Emitter, node: Node, out: Loc, ins: list[Loc]) -> list[str]:
    """log(sum(exp(x))) over the trailing axes, shifted by their max as minigraph's impl is."""
    (x,) = ins
    axes = S.normalize_axes(node.attrs.get("axis"), len(x.shape))
    if not x.contiguous or axes != tuple(range(len(x.shape) - len(axes), len(x.shape))):
        raise CompileError(f"{describe(node)}: logsumexp has a C template for the last axes of "
                           f"a contiguous value only; transpose the axes to the end first")
    t = ctype(out.dtype)
    f = (lambda name: name + "f") if out.dtype == np.float32 else (lambda name: name)
    first = len(x.shape) - len(axes)
    outer, inner = x.count(0, first), x.count(first)
    return [
        f"for (int64_t r = 0; r < {outer}; r++) {{",
        f"  const {t} *src = {x.ptr} + r * {inner};",
        f"  {t} m = -INFINITY;",
        f"  for (int64_t j = 0; j < {inner}; j++) m = src[j] > m ? src[j] : m;",
        "  m = isfinite(m) ? m : 0;  /* as numpy: no shift by an infinite max */",
        "  double s = 0;",
        f"  for (int64_t j = 0; j < {inner}; j++) s += {f('exp')}(src[j] - m);",
        f"  (({t} *)({out.ptr}))[r] = ({t})log(s) + m;",
        "}",
    ]


def kernel_concat(ctx: Emitter, node: Node, out: Loc, ins: list[Loc]) -> list[str]:
    """One copy loop per input, into its block of the output (any strides, any dtype)."""
    (axis,) = S.normalize_axes(node.attrs.get("axis", 0), len(out.shape))
    lines, at = [], 0
    for x in ins:
        dst = Loc(f"({out.ptr} + {at * out.strides[axis]})", x.shape, out.strides, out.dtype,
                  out.batched)
        slots = [_Slot("leaf", x.shape, x.dtype, loc=x),
                 _Slot("step", x.shape, x.dtype, op="identity", args=(0,))]
        emit_loop(node, dst, slots, lines, "")
        at += x.shape[axis]
    return lines


Kernel = Callable[["Emitter", Node, Loc, list[Loc]], list[str]]

# fmt: off
KERNELS: dict[str, Kernel] = {
    "matmul":      kernel_matmul,
    "conv2d":      kernel_conv2d,
    "max_pool2d":  _pool("max"),
    "avg_pool2d":  _pool("avg"),
    "sum":         _reduce("sum"),
    "mean":        _reduce("mean"),
    "max":         _reduce("max"),
    "softmax":     _softmax(log=False),
    "log_softmax": _softmax(log=True),
    "logsumexp":   kernel_logsumexp,
    "concat":      kernel_concat,
}
# fmt: on

#: values that exist before the function runs: inputs, and arrays written into the C source
SOURCES = {"placeholder", "constant", "capture", "variable"}

#: every op the C backend takes
SUPPORTED = (set(EXPRESSIONS) | {"cast", "clip", "fused"} | SHAPE_STEPS | set(VIEWS)
             | set(KERNELS) | SOURCES)


class Emitter:
    """Emission state: where each value lives, the workspace the kernels need."""

    def __init__(self, rows: int) -> None:
        self.rows = rows  # the most rows one call of the body sees (the tile)
        self.workspace_bytes = 0

    def workspace(self, node: Node, nbytes: int) -> None:
        self.workspace_bytes = max(self.workspace_bytes, nbytes)


# --- the whole graph --------------------------------------------------------------------------


@dataclass
class Port:
    """An input or output of the compiled function: ``shape[0]`` is ``None`` when batched."""

    name: str
    shape: tuple[int | None, ...]
    dtype: np.dtype

    @property
    def row_count(self) -> int:
        """Elements per row when batched, else in all."""
        return math.prod(self.shape[1:] if self.batched else self.shape)

    @property
    def batched(self) -> bool:
        return bool(self.shape) and self.shape[0] is None


@dataclass
class Lowered:
    """What :func:`lower` made: the C source and the facts the Python side needs."""

    source: str
    inputs: list[Port]
    outputs: list[Port]
    rows: int  # the tile (dynamic batch) or the fixed batch
    dynamic: bool
    arena_bytes: int
    workspace_bytes: int
    plan: MemoryPlan
    offsets: dict[str, int]  # the plan's buffer -> its byte offset in the arena
    graph: Graph
    why_fixed: str = ""  # why the batch is fixed, when it is


def place(plan: MemoryPlan) -> tuple[dict[str, int], int]:
    """An offset in one arena for each buffer of ``plan``: two buffers live at the same time
    never overlap; each buffer starts at the lowest offset where it fits (buffers placed
    largest first, then again in order of first use; the smaller arena wins).

    The arena can be no smaller than the plan's peak (the bytes live at once); on the graphs of
    the lessons it is exactly the peak.
    """
    spans: dict[str, list[tuple[int, int]]] = {}
    size: dict[str, int] = {}
    align: dict[str, int] = {}
    first: dict[str, int] = {}
    for v in plan.values:
        if v.buffer.startswith("b"):
            spans.setdefault(v.buffer, []).append((v.defined, v.last_use))
            size[v.buffer], align[v.buffer] = v.nbytes, max(v.dtype.itemsize, 1)
            first.setdefault(v.buffer, v.defined)

    def meet(a: str, b: str) -> bool:
        return any(s <= e2 and s2 <= e for s, e in spans[a] for s2, e2 in spans[b])

    def pack(order: list[str]) -> tuple[dict[str, int], int]:
        offsets: dict[str, int] = {}
        for b in order:
            rivals = [r for r in offsets if meet(b, r)]
            for start in sorted({0, *(offsets[r] + size[r] for r in rivals)}):
                start = -(-start // align[b]) * align[b]
                if all(start + size[b] <= offsets[r] or start >= offsets[r] + size[r]
                       for r in rivals):
                    offsets[b] = start
                    break
        return offsets, max((offsets[b] + size[b] for b in offsets), default=0)

    by_size = sorted(spans, key=lambda b: (-size[b], first[b]))
    by_time = sorted(spans, key=lambda b: first[b])
    return min((pack(by_size), pack(by_time)), key=lambda r: r[1])


def emit(graph: Graph, inputs: list[Port], specs: dict[str, Spec], batched: dict[str, bool],
         plan: MemoryPlan, rows: int, dynamic: bool) -> Lowered:
    """The C source of ``graph`` (optimized, with concrete ``specs`` at ``rows`` rows)."""
    offsets, arena = place(plan)
    life = {v.name: v for v in plan.values}
    emitter = Emitter(rows)
    decls: list[str] = []
    body: list[str] = []
    locs: dict[str, Loc] = {}
    input_index = {p.name: i for i, p in enumerate(inputs)}

    for node in graph.nodes:
        spec = specs[node.name]
        shape, dtype = tuple(spec.shape), np.dtype(spec.dtype)
        t = ctype(dtype)
        head = f"%{node.name} = {node.op}: {S.format_shape(shape)} {dtype}"
        if node.op == "placeholder":
            i = input_index[node.name]
            row = "" if not batched[node.name] else f" + row * {math.prod(shape[1:])}"
            locs[node.name] = Loc(f"(({t} *)inputs[{i}]{row})", shape,
                                  contiguous_strides(shape), dtype, batched[node.name])
            continue
        if node.op in ("constant", "capture", "variable"):
            value = (node.attrs["ref"].numpy() if node.op == "capture"
                     else np.asarray(node.attrs["value"]))
            value = np.ascontiguousarray(value, dtype).reshape(-1)
            k = len(decls)
            name = f"c{k}"
            items = [literal(v, dtype) for v in value] or [literal(0, dtype)]
            rows_of = [", ".join(items[i:i + 6]) for i in range(0, len(items), 6)]
            what = "its initial value" if node.op == "variable" else "copied when compiled"
            decls.append(f"/* {comment(head)} ({what}) */\n"
                         f"static const {t} {name}[{len(items)}] = {{\n  "
                         + ",\n  ".join(rows_of) + "\n};")
            locs[node.name] = Loc(f"(({t} *)mg_constants[{k}])", shape,
                                  contiguous_strides(shape), dtype, False)
            continue
        ins = [locs[x.name] for x in node.inputs]
        if node.op in VIEWS:
            locs[node.name] = VIEWS[node.op](node, ins[0], shape)
            locs[node.name].batched = batched[node.name]
            continue
        buffer = life[node.name].buffer
        out = Loc(f"(({t} *)(arena + {offsets[buffer]}))", shape, contiguous_strides(shape),
                  dtype, batched[node.name])
        locs[node.name] = out
        body.append(f"/* {comment(node.describe())} */")
        body.append(f"/*   {comment(f'{S.format_shape(shape)} {dtype}, defined at {node.source}')}"
                    f"; in the arena at byte {offsets[buffer]} (buffer {comment(buffer)}) */")
        if node.op in KERNELS:
            body.extend(KERNELS[node.op](emitter, node, out, ins))
            continue
        if node.op == "fused":
            if len(node.attrs["program"].steps) < 8:
                body.append(f"/*   {comment(node.attrs['program'])} */")
            step_specs = node.attrs["program"].step_specs(
                [Spec(x.shape, x.dtype) for x in ins])
        else:
            step_specs = [Spec(shape, dtype)]
        slots = program_slots(node, ins, step_specs)
        emit_loop(node, out, slots, body, "")

    outputs = []
    copies = []
    for i, node in enumerate(graph.outputs):
        loc, spec = locs[node.name], specs[node.name]
        t = ctype(spec.dtype)
        shape = tuple(spec.shape)
        port = Port(node.name, ((None, *shape[1:]) if batched[node.name] else shape),
                    np.dtype(spec.dtype))
        outputs.append(port)
        row = f" + row * {math.prod(shape[1:])}" if batched[node.name] else ""
        dst = Loc(f"(({t} *)outputs[{i}]{row})", shape, contiguous_strides(shape), port.dtype,
                  batched[node.name])
        copies.append(f"/* output {i}: %{comment(node.name)} */")
        if loc.contiguous:
            copies.append(f"memcpy({dst.ptr}, {loc.ptr}, ({dst.count()}) * sizeof({t}));")
        else:
            slots = [_Slot("leaf", shape, port.dtype, loc=loc),
                     _Slot("step", shape, port.dtype, op="identity", args=(0,))]
            emit_loop(node, dst, slots, copies, "")

    source = _file(graph, inputs, outputs, decls, body + copies, rows, dynamic, arena,
                   emitter.workspace_bytes, plan)
    return Lowered(source, inputs, outputs, rows, dynamic, arena, emitter.workspace_bytes, plan,
                   offsets, graph)


def _file(graph: Graph, inputs: list[Port], outputs: list[Port], decls: list[str],
          body: list[str], rows: int, dynamic: bool, arena: int, workspace: int,
          plan: MemoryPlan) -> str:
    def port_line(kind: str, i: int, p: Port) -> str:
        shape = ", ".join("n" if d is None else str(d) for d in p.shape)
        return f" *   {kind}[{i}]: %{comment(p.name)}, ({shape}) {p.dtype}"

    batch = (f"dynamic: n rows, run {rows} at a time (the arena is laid out for {rows})"
             if dynamic else f"fixed: exactly {rows} rows (the graph mixes rows)")
    header = [
        "/* Generated by course_utils.minigraph.compile_c from a minigraph graph.",
        f" * {len(graph.nodes)} nodes after minigraph's passes; batch {batch}.",
        f" * arena: {arena} bytes, offsets from the memory plan (its peak: "
        f"{plan.peak_bytes} bytes at {rows} rows)",
        f" * workspace: {workspace} bytes (im2col columns of the convolutions)",
        *(port_line("inputs", i, p) for i, p in enumerate(inputs)),
        *(port_line("outputs", i, p) for i, p in enumerate(outputs)),
        " */",
        "#include <math.h>",
        "#include <stdint.h>",
        "#include <string.h>",
        "#include <cblas.h>",
        "",
        f"const int64_t mg_arena_bytes = {arena};",
        f"const int64_t mg_workspace_bytes = {workspace};",
        f"const int64_t mg_rows = {rows};",
        f"const int64_t mg_dynamic = {int(dynamic)};",
        "",
        "void mg_set_threads(int n) { scipy_openblas_set_num_threads(n); }",
        "",
        *decls,
        "",
        "/* The loops read the constants through this table, so that the C compiler compiles",
        " * them for any values instead of specialising each loop to the numbers it sees",
        " * (which stops it from vectorising them). */",
        f"const void *mg_constants[{max(len(decls), 1)}] = "
        f"{{{', '.join(f'c{k}' for k in range(len(decls))) or '0'}}};",
        "",
        "/* returns 0, or 1 when n is not the batch this function was compiled for */",
        "int mg_forward(int64_t n, void *const *inputs, void *const *outputs,",
        "               unsigned char *arena, unsigned char *workspace) {",
        "  (void)arena; (void)workspace; (void)inputs;",
    ]
    if dynamic:
        header += [f"  for (int64_t row = 0; row < n; row += {rows}) {{",
                   f"    const int64_t nb = n - row < {rows} ? n - row : {rows};",
                   "    (void)nb;"]
    else:
        header += [f"  if (n != {rows}) return 1;",
                   "  {", "    const int64_t row = 0; (void)row;"]
    return "\n".join(header + ["    " + line for line in "\n".join(body).split("\n")]
                     + ["  }", "  return 0;", "}", ""])


def main_source(lowered: Lowered) -> str:
    """A C ``main`` that runs the compiled function on inputs read from a file: no Python.

    Input file: the int64 row count n, then each input's values in order (C order, the
    compiled dtypes; a batched input has n rows). Output file: each output's values in order.
    """
    def sizes(ports: list[Port]) -> str:
        return ", ".join(f"{p.row_count * p.dtype.itemsize}LL" for p in ports) or "0"

    def flags(ports: list[Port]) -> str:
        return ", ".join(str(int(p.batched)) for p in ports) or "0"

    n_in, n_out = len(lowered.inputs), len(lowered.outputs)
    return "\n".join([
        "/* The compiled graph as a program: reads its inputs from a file, writes its outputs.",
        " *   usage: PROGRAM INPUTS.bin OUTPUTS.bin",
        " * INPUTS.bin: int64 n (rows), then each input's values (C order, as compiled);",
        " * OUTPUTS.bin: each output's values. Generated by course_utils.minigraph.compile_c. */",
        "#include <stdint.h>",
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "",
        "extern const int64_t mg_arena_bytes, mg_workspace_bytes, mg_rows, mg_dynamic;",
        "int mg_forward(int64_t n, void *const *inputs, void *const *outputs,",
        "               unsigned char *arena, unsigned char *workspace);",
        "",
        f"static const long long IN_BYTES[] = {{{sizes(lowered.inputs)}}};",
        f"static const int IN_BATCHED[] = {{{flags(lowered.inputs)}}};",
        f"static const long long OUT_BYTES[] = {{{sizes(lowered.outputs)}}};",
        f"static const int OUT_BATCHED[] = {{{flags(lowered.outputs)}}};",
        "",
        "static int fail(const char *what, const char *path) {",
        "  fprintf(stderr, \"%s: %s\\n\", what, path);",
        "  return 2;",
        "}",
        "",
        "int main(int argc, char **argv) {",
        "  if (argc != 3) {",
        "    fprintf(stderr, \"usage: %s INPUTS.bin OUTPUTS.bin\\n\", argv[0]);",
        "    return 2;",
        "  }",
        "  FILE *f = fopen(argv[1], \"rb\");",
        "  if (!f) return fail(\"cannot open the inputs\", argv[1]);",
        "  int64_t n = 0;",
        "  if (fread(&n, sizeof n, 1, f) != 1 || n < 0) return fail(\"no row count in\", argv[1]);",
        "  if (!mg_dynamic && n != mg_rows) {",
        "    fprintf(stderr, \"this program was compiled for exactly %lld rows, got %lld\\n\",",
        "            (long long)mg_rows, (long long)n);",
        "    return 3;",
        "  }",
        f"  void *ins[{max(n_in, 1)}], *outs[{max(n_out, 1)}];",
        f"  for (int i = 0; i < {n_in}; i++) {{",
        "    size_t bytes = (size_t)(IN_BATCHED[i] ? n * IN_BYTES[i] : IN_BYTES[i]);",
        "    ins[i] = malloc(bytes ? bytes : 1);",
        "    if (!ins[i] || fread(ins[i], 1, bytes, f) != bytes)",
        "      return fail(\"too few bytes for the inputs in\", argv[1]);",
        "  }",
        "  if (fgetc(f) != EOF) return fail(\"more bytes than the inputs take in\", argv[1]);",
        "  fclose(f);",
        f"  for (int i = 0; i < {n_out}; i++) {{",
        "    size_t bytes = (size_t)(OUT_BATCHED[i] ? n * OUT_BYTES[i] : OUT_BYTES[i]);",
        "    outs[i] = malloc(bytes ? bytes : 1);",
        "  }",
        "  unsigned char *arena = malloc(mg_arena_bytes ? mg_arena_bytes : 1);",
        "  unsigned char *workspace = malloc(mg_workspace_bytes ? mg_workspace_bytes : 1);",
        "  if (mg_forward(n, ins, outs, arena, workspace) != 0) {",
        "    fprintf(stderr, \"this program was compiled for exactly %lld rows, got %lld\\n\",",
        "            (long long)mg_rows, (long long)n);",
        "    return 3;",
        "  }",
        "  FILE *g = fopen(argv[2], \"wb\");",
        "  if (!g) return fail(\"cannot write the outputs to\", argv[2]);",
        f"  for (int i = 0; i < {n_out}; i++) {{",
        "    size_t bytes = (size_t)(OUT_BATCHED[i] ? n * OUT_BYTES[i] : OUT_BYTES[i]);",
        "    if (fwrite(outs[i], 1, bytes, g) != bytes) return fail(\"cannot write\", argv[2]);",
        "  }",
        "  return fclose(g) == 0 ? 0 : 2;",
        "}",
        "",
    ])
