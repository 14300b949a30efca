"""ONNX: a minigraph graph written as an ONNX model, and an ONNX model read as a minigraph graph.

A graph is data, so any runtime that reads the data can run it. ``export`` writes a graph (or a
traced function) with the ``onnx`` package's helpers, one or a few standard ONNX operators per
node, at opset :data:`OPSET`; ``load`` reads an ONNX model back as a graph that minigraph's
Interpreter, Session and codegen run:

>>> import os, tempfile
>>> import numpy as np, course_utils.minigraph as mg
>>> w = mg.tensor([[1.0], [-1.0]])
>>> @mg.function
... def predict(x):
...     return mg.relu(x @ w)
>>> path = os.path.join(tempfile.mkdtemp(), "predict.onnx")
>>> mg.onnx.export(predict, path, (np.zeros((1, 2), np.float32),))
>>> loaded = mg.onnx.load(path)
>>> print(loaded)
%x = placeholder()  # (None, 2) float32
%w = variable()  # (2, 1) float32
%matmul = matmul(%x, %w)  # (None, 1) float32
%relu = relu(%matmul)  # (None, 1) float32
return %relu
>>> loaded(np.array([[3.0, 1.0], [1.0, 3.0]], np.float32))
array([[2.],
       [0.]], dtype=float32)

What maps to what is two tables, one per direction: :data:`EXPORTERS` (minigraph op name ->
a function that writes ONNX nodes) and :data:`IMPORTERS` (ONNX operator -> a function that
builds minigraph nodes). Adding an op is one entry in each; ``export(..., exporters={...})``
and ``load(..., importers={...})`` add entries for one call.

- **Export.** Placeholders become graph inputs; a ``None`` dimension, and with
  ``dynamic_batch=True`` (the default) the first axis of every input, becomes the symbolic
  dimension ``batch``. Variables (their initial values, or ``state=``'s) and captured tensors
  become *initializers*; ``mg.constant`` values become ``Constant`` nodes. Every model passes
  ``onnx.checker`` (full check) before it is written. An op with no mapping raises
  ``SerializationError`` naming the node, its op and the line that built it.
- **Load.** Only operators of the default domain in :data:`IMPORTERS`, and only the attributes
  each importer knows: anything else is refused, naming the ONNX node. Shape arithmetic
  (``Shape`` -> ``Gather`` -> ``Concat`` -> ``Reshape``, what PyTorch's exporters write for
  ``x.reshape(x.shape[0], -1)``) is worked out while loading, so ``reshape`` gets a static target.

Safety, as ``mg.load``: the file is a protobuf (no pickle) and nothing in it is run: no custom
operators, no functions, no ``eval``. Sizes are checked before memory is taken (the file, every
tensor from its dims, what every node will allocate, the node count), and tensor data stored
outside the file (ONNX's *external data*) is read only from files inside the model's folder.

NB: ``torch.onnx.export`` works the same way: one translation function per ATen op
(``custom_translation_table`` adds your own), and ``onnx2torch`` goes the other way, one
converter per ONNX operator.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import attrs as A
from . import shapes as S
from .errors import ArgumentError, MinigraphError, SerializationError, user_source
from .graph import Graph, Node, _frozen
from .serialize import _PATCH_ELEMENTS, LoadedFunction
from .session import prune
from .tracing import ConcreteFunction, Function, function

#: The ONNX opset ``export`` writes (the default domain, ``ai.onnx``), and the IR version that
#: goes with it (onnx 1.13's pair; every runtime since 2023 reads it).
OPSET = 18
IR_VERSION = 8
#: The opsets ``load`` reads: from 13 (Softmax over one axis, Squeeze/Unsqueeze axes as inputs)
#: to 23 (the operators read here have kept their meaning up to it).
MIN_OPSET, MAX_OPSET = 13, 23
#: The symbolic name of a dynamic batch dimension.
BATCH = "batch"

#: What ``load`` may allocate, all tensors together, and the largest file it parses. Pass
#: ``max_bytes=`` to load a bigger model.
MAX_BYTES = 1 << 30
#: The most nodes (and the most initializers) a model may hold, in all its graphs and functions.
MAX_NODES = 100_000
#: The most protobuf entries (messages, strings, repeated numbers) a model may hold. Each costs
#: protobuf about 150 bytes once parsed, whatever it took in the file (an empty node is 2
#: bytes): 20 MB of empty nodes took 1.6 GB to parse (issue 37). They are counted on the file's
#: bytes before it is parsed (``_scan``).
MAX_ENTRIES = 20 * MAX_NODES
#: Names are cut to this length (they only label values).
MAX_NAME = 256

# The onnx package takes seconds to import, so it is imported on first use (by _need), not
# with minigraph.
onnx: Any = None
helper: Any = None
numpy_helper: Any = None
TensorProto: Any = None
#: ONNX element type -> numpy dtype, for the types minigraph computes with.
_DTYPE_OF: dict[int, np.dtype] = {}


def _need() -> None:
    global onnx, helper, numpy_helper, TensorProto
    if onnx is None:
        import onnx as lib
        from onnx import helper as lib_helper
        from onnx import numpy_helper as lib_numpy_helper

        onnx, helper, numpy_helper, TensorProto = lib, lib_helper, lib_numpy_helper, \
            lib.TensorProto
        _DTYPE_OF.update({getattr(TensorProto, k.upper()): np.dtype(k) for k in (
            "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16")})
        _DTYPE_OF.update({TensorProto.FLOAT: np.dtype("float32"),
                          TensorProto.DOUBLE: np.dtype("float64")})


def _elem_type(dtype: np.dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


# ================================================================================================
# export
# ================================================================================================


class ExportContext:
    """What an exporter writes with: ``value(node)`` names a node's ONNX value, ``emit`` adds
    an ONNX node, ``constant`` a fixed tensor. Each minigraph node's result must end up in
    the ONNX value named ``value(node)``."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._used = {n.name for n in graph.nodes}

    def value(self, node: Node, dtype: Any = None) -> str:
        """The ONNX value holding ``node``'s result, cast to ``dtype`` first if it differs."""
        if dtype is None or np.dtype(dtype) == node.dtype:
            return node.name
        out = self.fresh(f"{node.name}_{np.dtype(dtype).name}")
        self.nodes.append(helper.make_node("Cast", [node.name], [out], name=out,
                                           to=_elem_type(dtype)))
        return out

    def fresh(self, base: str) -> str:
        """A value name no other value has."""
        name, i = base, 0
        while name in self._used:
            i += 1
            name = f"{base}_{i}"
        self._used.add(name)
        return name

    def emit(self, op_type: str, inputs: Sequence[str], node: Node, output: str | None = None,
             **attributes: Any) -> str:
        """Add ``op_type(*inputs, **attributes)``, writing ``output`` (default: ``node``'s
        value); its ONNX node is named after it and remembers ``node``'s source line."""
        output = node.name if output is None else output
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], name=output,
                                           doc_string=f"%{node.name} = {node.op}(...) at "
                                                      f"{node.source}", **attributes))
        return output

    def constant(self, value: Any, base: str, dtype: Any = None) -> str:
        """A ``Constant`` node holding ``value`` (e.g. the axes of a reduction)."""
        array = np.asarray(value, dtype=dtype)
        name = self.fresh(base)
        self.nodes.append(helper.make_node("Constant", [], [name], name=name,
                                           value=numpy_helper.from_array(array, name)))
        return name

    def initializer(self, array: np.ndarray, name: str) -> None:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))


Exporter = Callable[[ExportContext, Node], Any]


def _unary(op_type: str) -> Exporter:
    def write(ctx: ExportContext, node: Node) -> None:
        ctx.emit(op_type, [ctx.value(node.inputs[0], node.dtype)], node)
    return write


def _binary(op_type: str) -> Exporter:
    """Same-type inputs (ONNX does not promote): each is cast to the result's dtype."""
    def write(ctx: ExportContext, node: Node) -> None:
        ctx.emit(op_type, [ctx.value(x, node.dtype) for x in node.inputs], node)
    return write


def _compare(op_type: str, negate: bool = False) -> Exporter:
    def write(ctx: ExportContext, node: Node) -> None:
        common = S.result_dtype(*(x.dtype for x in node.inputs))
        args = [ctx.value(x, common) for x in node.inputs]
        if negate:  # not_equal is Not(Equal(x, y)): ONNX has no NotEqual
            args = [ctx.emit(op_type, args, node, output=ctx.fresh(f"{node.name}_equal"))]
        ctx.emit("Not" if negate else op_type, args, node)
    return write


def _reduce(op_type: str) -> Exporter:
    def write(ctx: ExportContext, node: Node) -> None:
        (x,) = node.inputs
        axis, keepdims = node.attrs.get("axis"), bool(node.attrs.get("keepdims", False))
        source = ctx.value(x, node.dtype if x.dtype.kind in "biu" else None)
        if axis is not None and not S.normalize_axes(axis, len(x.shape)):  # axis=(): nothing
            ctx.emit("Identity", [source], node)
            return
        inputs = [source]
        if axis is not None:
            axes = S.normalize_axes(axis, len(x.shape))
            inputs.append(ctx.constant(axes, f"{node.name}_axes", np.int64))
        ctx.emit(op_type, inputs, node, keepdims=int(keepdims))
    return write


def _softmax(op_type: str) -> Exporter:
    def write(ctx: ExportContext, node: Node) -> None:
        ctx.emit(op_type, [ctx.value(node.inputs[0])], node, axis=node.attrs.get("axis", -1))
    return write


def _square(ctx: ExportContext, node: Node) -> None:
    x = ctx.value(node.inputs[0], node.dtype)
    ctx.emit("Mul", [x, x], node)


def _where(ctx: ExportContext, node: Node) -> None:
    c, x, y = node.inputs
    ctx.emit("Where", [ctx.value(c, "bool"), ctx.value(x, node.dtype), ctx.value(y, node.dtype)],
             node)


def _cast(ctx: ExportContext, node: Node) -> None:
    ctx.emit("Cast", [ctx.value(node.inputs[0])], node, to=_elem_type(node.dtype))


def _cross_entropy(ctx: ExportContext, node: Node) -> None:
    logits, labels = node.inputs
    if len(logits.shape) != 2:
        raise _no_mapping(node, "ONNX's SoftmaxCrossEntropyLoss takes the classes on axis 1, "
                                "minigraph's on the last axis: only 2-d logits map")
    ctx.emit("SoftmaxCrossEntropyLoss", [ctx.value(logits), ctx.value(labels, "int64")], node,
             reduction="none")


def _reshape(ctx: ExportContext, node: Node) -> None:
    target = tuple(node.attrs["shape"])
    shape = ctx.constant(target, f"{node.name}_shape", np.int64)
    # ONNX reads a 0 in the target as "keep that input dimension" unless allowzero=1.
    ctx.emit("Reshape", [ctx.value(node.inputs[0]), shape], node, allowzero=int(0 in target))


def _transpose(ctx: ExportContext, node: Node) -> None:
    (x,) = node.inputs
    perm = S.transpose_axes(len(x.shape), node.attrs.get("axes"))
    ctx.emit("Transpose", [ctx.value(x)], node, perm=list(perm))


def _broadcast_to(ctx: ExportContext, node: Node) -> None:
    shape = ctx.constant(node.attrs["shape"], f"{node.name}_shape", np.int64)
    ctx.emit("Expand", [ctx.value(node.inputs[0]), shape], node)


def _concat(ctx: ExportContext, node: Node) -> None:
    ctx.emit("Concat", [ctx.value(x, node.dtype) for x in node.inputs], node,
             axis=node.attrs.get("axis", 0))


def _axes_op(op_type: str, rank_of: Callable[[Node], int]) -> Exporter:
    def write(ctx: ExportContext, node: Node) -> None:
        axes = S.normalize_axes(node.attrs["axis"], rank_of(node))
        ctx.emit(op_type, [ctx.value(node.inputs[0]),
                           ctx.constant(axes, f"{node.name}_axes", np.int64)], node)
    return write


def _conv2d(ctx: ExportContext, node: Node) -> None:
    x, w = node.inputs
    (ph, pw), kernel = node.attrs["padding"], list(w.shape[2:])
    if None in kernel:
        raise _no_mapping(node, "its kernel size is not known while exporting")
    ctx.emit("Conv", [ctx.value(x), ctx.value(w, x.dtype)], node, kernel_shape=kernel,
             strides=list(node.attrs["stride"]), pads=[ph, pw, ph, pw])


def _max_pool2d(ctx: ExportContext, node: Node) -> None:
    # Exercise 14.1's answer but for one name (AveragePool): withheld by a release until
    # lesson 14's solutions (CONTRIBUTING.md, "Answers in the package").
    ### BEGIN SOLUTION 14.1
    ctx.emit("MaxPool", [ctx.value(node.inputs[0])], node,
             kernel_shape=list(node.attrs["kernel_size"]), strides=list(node.attrs["stride"]))
    ### END SOLUTION


def _clip(ctx: ExportContext, node: Node) -> None:
    args = [ctx.value(node.inputs[0])]
    for bound in ("min", "max"):
        value = node.attrs.get(bound)
        args.append("" if value is None else
                    ctx.constant(value, f"{node.name}_{bound}", node.dtype))
    while args[-1] == "":
        args.pop()
    ctx.emit("Clip", args, node)


def _constant(ctx: ExportContext, node: Node) -> None:
    value = np.asarray(node.attrs["value"])
    ctx.nodes.append(helper.make_node("Constant", [], [node.name], name=node.name,
                                      value=numpy_helper.from_array(value, node.name)))


# fmt: off
#: minigraph op -> how it is written in ONNX (opset :data:`OPSET`).
EXPORTERS: dict[str, Exporter] = {
    # elementwise arithmetic and math: numpy's broadcasting is ONNX's multidirectional one
    "add": _binary("Add"), "sub": _binary("Sub"), "mul": _binary("Mul"), "div": _binary("Div"),
    "pow": _binary("Pow"), "maximum": _binary("Max"), "minimum": _binary("Min"),
    "neg": _unary("Neg"), "abs": _unary("Abs"), "exp": _unary("Exp"), "log": _unary("Log"),
    "sqrt": _unary("Sqrt"), "tanh": _unary("Tanh"), "sigmoid": _unary("Sigmoid"),
    "relu": _unary("Relu"), "identity": _unary("Identity"), "square": _square, "clip": _clip,
    # comparisons and selection
    "equal": _compare("Equal"), "not_equal": _compare("Equal", negate=True),
    "less": _compare("Less"), "less_equal": _compare("LessOrEqual"),
    "greater": _compare("Greater"), "greater_equal": _compare("GreaterOrEqual"),
    "where": _where, "cast": _cast,
    # reductions and losses (axes are an input since opset 18)
    "sum": _reduce("ReduceSum"), "mean": _reduce("ReduceMean"), "max": _reduce("ReduceMax"),
    "logsumexp": _reduce("ReduceLogSumExp"), "softmax": _softmax("Softmax"),
    "log_softmax": _softmax("LogSoftmax"), "cross_entropy": _cross_entropy,
    # linear algebra and shapes
    "matmul": _binary("MatMul"), "reshape": _reshape, "transpose": _transpose,
    "broadcast_to": _broadcast_to, "concat": _concat,
    "expand_dims": _axes_op("Unsqueeze", lambda n: len(n.shape)),
    "squeeze": _axes_op("Squeeze", lambda n: len(n.inputs[0].shape)),
    # images (NCHW, weights OIHW: ONNX's layouts too)
    "conv2d": _conv2d, "max_pool2d": _max_pool2d,
    # values: inputs, initializers and constants are written by export itself
    "constant": _constant,
}
# fmt: on
_SOURCES = {"placeholder", "variable", "capture"}


def _no_mapping(node: Node, why: str | None = None) -> SerializationError:
    if why is None:
        why = (f"minigraph has no ONNX mapping for op {node.op!r}. Build the graph from ops "
               f"that have one (mg.onnx.EXPORTERS lists them), or write the mapping yourself "
               f"and pass it: mg.onnx.export(..., exporters={{{node.op!r}: fn}}), where "
               f"fn(ctx, node) writes ONNX nodes with ctx.emit (lesson 14 shows how)")
    return SerializationError(f"cannot export %{node.name} = {node.op}(...) defined at "
                              f"{node.source}: {why}")


def export(obj: Graph | Function | ConcreteFunction | LoadedFunction | Callable,
           path: str | os.PathLike, example_inputs: Sequence[Any] | None = None, *,
           outputs: Sequence[Node | str] | None = None,
           state: Mapping[str, Any] | None = None, dynamic_batch: bool = True,
           exporters: Mapping[str, Exporter] | None = None) -> None:
    """Write a graph, or a function traced on ``example_inputs``, as an ONNX model at ``path``.

    Args:
        obj: an ``mg.Graph`` (its ``outputs``, or ``outputs=``), an ``mg.function`` (traced on
            ``example_inputs``, else its latest trace), a plain Python function of tensors
            (traced on ``example_inputs``), or what ``mg.load`` / ``mg.onnx.load`` return.
        state: values for Variables by name (a Session's ``sess.state`` after training);
            default: their initial values.
        dynamic_batch: make the first axis of every input the symbolic dimension ``batch``.
        exporters: mappings for this call, by minigraph op name, on top of :data:`EXPORTERS`.
    """
    _need()
    graph, name = _graph_to_export(obj, example_inputs, outputs, dynamic_batch)
    table = {**EXPORTERS, **(exporters or {})}
    ctx = ExportContext(graph)
    inputs = []
    for node in graph.nodes:
        if node.op == "placeholder":
            shape = [BATCH if d is None and i == 0 else
                     (f"{node.name}_{i}" if d is None else d) for i, d in enumerate(node.shape)]
            inputs.append(helper.make_tensor_value_info(node.name, _elem_type(node.dtype), shape))
        elif node.op == "variable":
            value = node.attrs["value"] if state is None or node.name not in state \
                else np.asarray(state[node.name], dtype=node.dtype)
            ctx.initializer(value, node.name)
        elif node.op == "capture":
            ctx.initializer(node.attrs["ref"].numpy(), node.name)
        elif node.op in table:
            try:
                table[node.op](ctx, node)
            except MinigraphError:
                raise
            except Exception as e:
                raise _no_mapping(node, f"its exporter raised {type(e).__name__}: {e}") from e
        else:
            raise _no_mapping(node)
    outputs_info = []
    for i, out in enumerate(graph.outputs):
        value = out.name
        if out.op in _SOURCES or value in [o.name for o in outputs_info]:  # needs its own name
            value = ctx.emit("Identity", [out.name], out, output=ctx.fresh(f"{out.name}_out{i}"))
        outputs_info.append(helper.make_tensor_value_info(value, _elem_type(out.dtype),
                                                          list(out.shape)))
    onnx_graph = helper.make_graph(ctx.nodes, name, inputs, outputs_info, ctx.initializers)
    model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              ir_version=IR_VERSION, producer_name="course_utils.minigraph",
                              doc_string=f"exported by mg.onnx.export at {user_source()}")
    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as e:  # a mapping wrote something ONNX does not allow
        raise SerializationError(f"the ONNX model for {name!r} fails onnx.checker, so it was "
                                 f"not written: {str(e).splitlines()[0]}") from e
    onnx.save(model, os.fspath(path))


def _graph_to_export(obj: Any, example_inputs: Sequence[Any] | None,
                     outputs: Sequence[Node | str] | None,
                     dynamic_batch: bool) -> tuple[Graph, str]:
    if isinstance(obj, LoadedFunction):
        graph, name = obj.graph, obj.__name__
    elif isinstance(obj, ConcreteFunction):
        graph, name = obj.graph, obj.name
    elif isinstance(obj, Graph):
        graph, name = obj, "graph"
    elif isinstance(obj, Function) or callable(obj):
        fn = obj if isinstance(obj, Function) else function(obj)
        if example_inputs is not None:
            from .eager import tensor
            args = [a if hasattr(a, "shape") and not isinstance(a, np.ndarray) else tensor(a)
                    for a in example_inputs]
            graph = fn.get_graph(*args)
        elif isinstance(obj, Function) and obj.trace_count:
            graph = list(obj.graphs.values())[-1]
        else:
            raise SerializationError(f"mg.onnx.export at {user_source()}: to export a function, "
                                     f"pass example_inputs to trace it on, e.g. "
                                     f"(np.zeros((1, 2), np.float32),)")
        name = fn.__name__
    else:
        raise SerializationError(f"mg.onnx.export takes a Graph or a function, got "
                                 f"{type(obj).__name__}")
    if outputs is not None:
        wanted = [graph.node(o.name if isinstance(o, Node) else o) for o in outputs]
    else:
        wanted = list(graph.outputs)
    if not wanted:
        raise SerializationError(f"mg.onnx.export at {user_source()}: the graph has no outputs; "
                                 f"set graph.outputs or pass outputs=[...]")
    graph = prune(graph, wanted)
    if dynamic_batch:
        graph = _with_dynamic_batch(graph)
    name = name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name or "") else "graph"
    return graph, name


def _with_dynamic_batch(graph: Graph) -> Graph:
    """The same graph with the first axis of every input unknown (``None``), every shape rule
    run again: an op that fixed the batch size fails here, naming the node."""
    out, copies = Graph(), {}
    for n in graph.nodes:
        attrs = dict(n.attrs)
        if n.op == "placeholder" and n.shape:
            attrs["shape"] = (None, *n.shape[1:])
        inputs = tuple(copies[x.name] for x in n.inputs)
        if n.op == "reshape" and None in inputs[0].shape and None not in n.inputs[0].shape \
                and -1 not in attrs["shape"] and n.inputs[0].shape and n.shape:
            raise SerializationError(
                f"cannot export %{n.name} = reshape(...) defined at {n.source} with a dynamic "
                f"batch: its target {attrs['shape']} fixes the batch size; write -1 for the "
                f"batch axis, or pass dynamic_batch=False")
        try:
            copies[n.name] = out.add_node(n.op, inputs, attrs, name=n.name, source=n.source)
        except MinigraphError as e:
            raise SerializationError(f"cannot make the batch size dynamic: {e}; pass "
                                     f"dynamic_batch=False to export fixed shapes") from None
    out.outputs = [copies[n.name] for n in graph.outputs]
    return out


# ================================================================================================
# load
# ================================================================================================


@dataclass(frozen=True)
class Static:
    """A value known while loading: a constant (an array); or a shape whose unknown entries are
    ``None`` (a tuple: what ``Shape`` of a value with a dynamic batch gives), or one unknown
    entry of it (``None``)."""

    value: tuple | np.ndarray | None

    @property
    def known(self) -> bool:
        return isinstance(self.value, np.ndarray)


#: An attribute with no default: the ONNX node must give it.
REQUIRED = object()


class ImportContext:
    """What an importer builds with: ``input(node, i)`` is the minigraph node of an ONNX input,
    ``constant(node, i)`` the numpy value of one fixed while loading, ``attributes`` reads the
    node's attributes (refusing unknown ones), ``add`` builds a minigraph node, ``refuse``
    raises the error that names the ONNX node."""

    def __init__(self, where: str, max_bytes: int) -> None:
        self.where, self.max_bytes = where, max_bytes
        self.graph = Graph()
        self.values: dict[str, Node | Static] = {}
        self.initializers: dict[str, onnx.TensorProto] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self.unavailable: dict[str, str] = {}
        self.folder = "."
        self.budget = max_bytes
        self.opset = OPSET
        self._node: onnx.NodeProto | None = None
        self._label = ""

    # --- for importers ------------------------------------------------------------------------

    def label(self, node: onnx.NodeProto) -> str:
        return f"ONNX node {_quote(node.name) if node.name else self._label} ({node.op_type})"

    def refuse(self, node: onnx.NodeProto, why: str) -> SerializationError:
        """The error for ``node``: raise what this returns."""
        return SerializationError(f"{self.where}: {self.label(node)}: {why}; nothing from this "
                                  f"file was run")

    def attributes(self, node: onnx.NodeProto, **defaults: Any) -> dict[str, Any]:
        """``node``'s attributes, each of the kind its default has (int, float, str, list of
        ints or floats, or ``REQUIRED``: then an int list or an int), defaults filled in. An
        attribute not named here is refused."""
        out = dict(defaults)
        for attr in node.attribute:
            if attr.name not in defaults:
                known = ", ".join(defaults) or "none"
                raise self.refuse(node, f"attribute {_quote(attr.name)} is not supported "
                                        f"(this importer reads: {known})")
            out[attr.name] = self._attribute(node, attr, defaults[attr.name])
        missing = [k for k, v in out.items() if v is REQUIRED]
        if missing:
            raise self.refuse(node, f"needs the attribute {missing[0]!r}")
        return out

    def input(self, node: onnx.NodeProto, i: int) -> Node:
        """The minigraph node for input ``i`` of ``node`` (an initializer: a Variable)."""
        name = node.input[i] if i < len(node.input) else ""
        if name in self.initializers and name not in self.values:
            return self.variable(name)
        value = self._value(node, i)
        if isinstance(value, Node):
            return value
        if not value.known:
            raise self.refuse(node, f"input {i} ({_quote(node.input[i])}) is a shape "
                                    f"{_shape_text(value.value)} that depends on the input's "
                                    f"size, which minigraph only uses as a reshape target")
        key = f"$const:{node.input[i]}"
        if key not in self.values:
            self.values[key] = self.add("constant", [], name=_identifier(node.input[i]),
                                        value=_frozen(value.value))
        return self.values[key]

    def constant(self, node: onnx.NodeProto, i: int, *, partial: bool = False) -> Any:
        """The value of input ``i``, which must be fixed while loading (an initializer, a
        ``Constant``, shape arithmetic); ``partial=True`` also takes a shape with unknown
        entries (a tuple holding ``None``). ``None`` if the input is absent."""
        if i >= len(node.input) or node.input[i] == "":
            return None
        value = self._value(node, i)
        if isinstance(value, Node):
            raise self.refuse(node, f"input {i} ({_quote(node.input[i])}) must be known while "
                                    f"loading (an initializer or a Constant), but it is computed "
                                    f"by the graph")
        if not value.known and not partial:
            raise self.refuse(node, f"input {i} ({_quote(node.input[i])}) is a shape "
                                    f"{_shape_text(value.value)} with entries unknown until the "
                                    f"graph runs")
        return value.value

    def is_static(self, node: onnx.NodeProto, i: int) -> bool:
        """Is input ``i`` known while loading (a constant or a shape)?"""
        return not isinstance(self._value(node, i), Node)

    def add(self, op: str, inputs: Sequence[Node], name: str | None = None, **attrs: Any) -> Node:
        """Build ``op(*inputs, **attrs)`` in the graph, named after the ONNX node's output
        (or ``name``), its source the ONNX node."""
        node = self._node
        base = name or _identifier(node.output[0] if node is not None and node.output else op)
        source = f"{self.where} {self.label(node)}" if node is not None else self.where
        try:
            built = self.graph.add_node(op, tuple(inputs), attrs, name=base, source=source)
        except MinigraphError as e:
            if node is None:
                raise SerializationError(f"{self.where}: {e}") from None
            raise self.refuse(node, f"cannot be built as {op}: {e}") from None
        self._check_size(built, node)
        return built

    # --- internals ----------------------------------------------------------------------------

    def _value(self, node: onnx.NodeProto, i: int) -> Node | Static:
        if i >= len(node.input) or node.input[i] == "":
            raise self.refuse(node, f"needs input {i}")
        name = node.input[i]
        if name in self.values:
            return self.values[name]
        if name in self.initializers:
            array = self.arrays.get(name)
            if array is None:
                array = self.arrays[name] = self.tensor(self.initializers[name], f"initializer "
                                                        f"{_quote(name)}")
            return Static(array)
        if name in self.unavailable:
            raise self.refuse(node, f"reads {_quote(name)}, an output of "
                                    f"{self.unavailable[name]} that minigraph does not compute")
        raise self.refuse(node, f"reads {_quote(name)}, which no earlier node, input or "
                                f"initializer defines (nodes must be in topological order)")

    def variable(self, name: str) -> Node:
        """An initializer used as data: a Variable holding it (read once)."""
        key = f"$var:{name}"
        if key not in self.values:
            array = self.arrays.get(name)
            if array is None:
                array = self.arrays[name] = self.tensor(self.initializers[name],
                                                        f"initializer {_quote(name)}")
            saved, self._node = self._node, None
            self.values[key] = self.add("variable", [], name=_identifier(name),
                                        value=_frozen(array))
            self._node = saved
        return self.values[key]

    def _attribute(self, node: onnx.NodeProto, attr: onnx.AttributeProto, default: Any) -> Any:
        kinds = {onnx.AttributeProto.INT: ("i", int), onnx.AttributeProto.FLOAT: ("f", float),
                 onnx.AttributeProto.STRING: ("s", str), onnx.AttributeProto.INTS: ("ints", list),
                 onnx.AttributeProto.FLOATS: ("floats", list),
                 onnx.AttributeProto.TENSOR: ("t", onnx.TensorProto)}
        if attr.type not in kinds or attr.ref_attr_name:
            raise self.refuse(node, f"attribute {_quote(attr.name)} has a kind minigraph does "
                                    f"not read")
        field, kind = kinds[attr.type]
        want = (kind if default is None else int if default is REQUIRED else
                list if isinstance(default, (list, tuple)) else type(default))
        if default is REQUIRED and kind is list:
            want = list
        if want is bool:
            want = int
        if kind is not want and not (want is float and kind is int):
            raise self.refuse(node, f"attribute {_quote(attr.name)} is a "
                                    f"{onnx.AttributeProto.AttributeType.Name(attr.type)}, "
                                    f"not what {node.op_type} takes")
        value = getattr(attr, field)
        if kind is str:
            try:
                return value.decode("ascii")
            except UnicodeDecodeError:
                raise self.refuse(node, f"attribute {_quote(attr.name)} is not ASCII") from None
        if kind is list:
            if len(value) > A.MAX_RANK:
                raise self.refuse(node, f"attribute {_quote(attr.name)} holds {len(value)} "
                                        f"values, more than any array's rank")
            return [int(v) for v in value] if field == "ints" else [float(v) for v in value]
        if kind is onnx.TensorProto:
            return self.tensor(value, f"attribute {_quote(attr.name)} of {self.label(node)}")
        return kind(value)

    def tensor(self, proto: onnx.TensorProto, what: str) -> np.ndarray:
        """A TensorProto as numpy, its size checked against the budget before it is read."""
        dtype = _DTYPE_OF.get(proto.data_type)
        if dtype is None:
            raise SerializationError(f"{self.where}: {what} holds "
                                     f"{_type_name(proto.data_type)} values; minigraph reads "
                                     f"only numbers ({', '.join(sorted(A.DTYPES))})")
        dims = list(proto.dims)
        if len(dims) > A.MAX_RANK or any(d < 0 for d in dims):
            raise SerializationError(f"{self.where}: {what} has a malformed shape "
                                     f"{_short(dims)}")
        size = math.prod(dims) * dtype.itemsize
        if size > self.budget:
            raise SerializationError(f"{self.where}: {what} is a {tuple(dims)} {dtype} tensor "
                                     f"({size:,} bytes), more than the "
                                     f"{self.budget:,} bytes left of max_bytes="
                                     f"{self.max_bytes:,}; if you trust the file, pass a larger "
                                     f"mg.onnx.load(path, max_bytes=...)")
        self.budget -= size
        if proto.HasField("segment"):
            raise SerializationError(f"{self.where}: {what} is a segment of a tensor, which "
                                     f"minigraph does not read")
        if proto.data_location == TensorProto.EXTERNAL:
            return self._external(proto, dims, dtype, size, what)
        try:
            array = numpy_helper.to_array(proto)
        except Exception as e:
            raise SerializationError(f"{self.where}: {what} cannot be read: "
                                     f"{_cut(str(e))}") from None
        if array.shape != tuple(dims) or array.dtype != dtype:
            raise SerializationError(f"{self.where}: {what} holds data that does not match "
                                     f"its shape {tuple(dims)}")
        return np.array(array)

    def _external(self, proto: onnx.TensorProto, dims: list[int], dtype: np.dtype, size: int,
                  what: str) -> np.ndarray:
        """Data in another file: only a plain relative path inside the model's folder."""
        info = {}
        for entry in proto.external_data:
            if entry.key in info:
                raise SerializationError(f"{self.where}: {what} names its external "
                                         f"{entry.key!r} twice")
            info[entry.key] = entry.value
        location = info.get("location", "")
        parts = re.split(r"[\\/]", location)
        if (not location or os.path.isabs(location) or location.startswith(("/", "\\"))
                or re.match(r"^[A-Za-z]:", location) or ".." in parts or "\0" in location):
            raise SerializationError(f"{self.where}: {what} keeps its data at {_quote(location)}"
                                     f", which is not a plain relative path inside the model's "
                                     f"folder (absolute paths and '..' are refused)")
        folder = os.path.realpath(self.folder)
        target = os.path.realpath(os.path.join(folder, location))
        if os.path.commonpath([folder, target]) != folder:
            raise SerializationError(f"{self.where}: {what} keeps its data at {_quote(location)}"
                                     f", which leads outside the model's folder (a link?); "
                                     f"refused")
        try:
            offset, length = int(info.get("offset", 0)), int(info.get("length", size))
        except ValueError:
            raise SerializationError(f"{self.where}: {what} has a malformed external offset "
                                     f"or length") from None
        if length != size or offset < 0:
            raise SerializationError(f"{self.where}: {what} says its external data is {length} "
                                     f"bytes at offset {offset}, but a {tuple(dims)} {dtype} "
                                     f"tensor is {size} bytes")
        if not os.path.isfile(target) or os.path.getsize(target) < offset + length:
            raise SerializationError(f"{self.where}: {what} keeps its data in "
                                     f"{_quote(location)}, which is missing or too short")
        with open(target, "rb") as file:
            file.seek(offset)
            data = file.read(length)
        return np.frombuffer(data, dtype=dtype.newbyteorder("<")).reshape(dims).astype(dtype)

    def _check_size(self, node: Node, onnx_node: onnx.NodeProto | None) -> None:
        what = self.label(onnx_node) if onnx_node is not None else f"%{node.name}"
        if node.dtype is not None and None not in node.shape:
            size = math.prod(node.shape) * node.dtype.itemsize
            if size > self.max_bytes:
                raise SerializationError(
                    f"{self.where}: {what} would make a {S.format_shape(node.shape)} "
                    f"{node.dtype} array ({size:,} bytes) when it runs, more than "
                    f"max_bytes={self.max_bytes:,}; if you trust the file, pass a larger "
                    f"mg.onnx.load(path, max_bytes=...)")
        patches = _PATCH_ELEMENTS[node.op](node) if node.op in _PATCH_ELEMENTS else None
        if patches is not None and node.dtype is not None and \
                patches * node.dtype.itemsize > self.max_bytes:
            raise SerializationError(
                f"{self.where}: {what} would copy {patches:,} window values when it runs, "
                f"more than max_bytes={self.max_bytes:,}")


Importer = Callable[[ImportContext, Any], "Node | Static"]


def _import_unary(op: str) -> Importer:
    def build(ctx: ImportContext, node: onnx.NodeProto) -> Node:
        ctx.attributes(node)
        return ctx.add(op, [ctx.input(node, 0)])
    return build


def _import_binary(op: str) -> Importer:
    def build(ctx: ImportContext, node: onnx.NodeProto) -> Node:
        ctx.attributes(node)
        if len(node.input) != 2:
            raise ctx.refuse(node, f"takes 2 inputs, got {len(node.input)}")
        return ctx.add(op, [ctx.input(node, 0), ctx.input(node, 1)])
    return build


def _import_variadic(op: str) -> Importer:
    """Max and Min take any number of inputs: a chain of maximum (minimum) nodes."""
    def build(ctx: ImportContext, node: onnx.NodeProto) -> Node:
        ctx.attributes(node)
        out = ctx.input(node, 0)
        for i in range(1, len(node.input)):
            last = i == len(node.input) - 1
            out = ctx.add(op, [out, ctx.input(node, i)],
                          name=None if last else _identifier(f"{node.output[0]}_{i}"))
        return out if len(node.input) > 1 else ctx.add("identity", [out])
    return build


def _import_not(ctx: ImportContext, node: onnx.NodeProto) -> Node:
    ctx.attributes(node)
    x = ctx.input(node, 0)
    false = ctx.add("constant", [], name=_identifier(f"{node.output[0]}_false"),
                    value=_frozen(np.array(False)))
    return ctx.add("equal", [x, false])


def _import_where(ctx: ImportContext, node: onnx.NodeProto) -> Node:
    ctx.attributes(node)
    return ctx.add("where", [ctx.input(node, i) for i in range(3)])


def _import_cast(ctx: ImportContext, node: onnx.NodeProto) -> Node | Static:
    attrs = ctx.attributes(node, to=REQUIRED, saturate=1, round_mode="up")
    dtype = _DTYPE_OF.get(attrs["to"])
    if dtype is None:
        raise ctx.refuse(node, f"casts to {_type_name(attrs['to'])}, not a number type "
                               f"minigraph has")
    if ctx.is_static(node, 0):
        value = ctx.constant(node, 0, partial=True)
        if isinstance(value, tuple) and dtype.kind in "iu":
            return Static(value)
        if not isinstance(value, tuple):
            return Static(np.asarray(value).astype(dtype))
    return ctx.add("cast", [ctx.input(node, 0)], dtype=dtype.name)


def _import_reduce(op: str) -> Importer:
    def build(ctx: ImportContext, node: onnx.NodeProto) -> Node:
        as_input = ctx.opset >= 18 or op == "sum"  # ReduceSum took axes as an input from 13
        if as_input:
            attrs = ctx.attributes(node, keepdims=1, noop_with_empty_axes=0)
            axes = ctx.constant(node, 1)
        else:
            attrs = ctx.attributes(node, keepdims=1, axes=[])
            axes = attrs["axes"] or None
        x = ctx.input(node, 0)
        axes = None if axes is None else [int(a) for a in np.asarray(axes).ravel()]
        if not axes:
            if as_input and attrs["noop_with_empty_axes"]:
                return ctx.add("identity", [x])
            axes = None
        try:
            axis = None if axes is None else A.axis(tuple(axes))
        except ValueError as e:
            raise ctx.refuse(node, f"axes {axes}: {e}") from None
        return ctx.add(op, [x], axis=axis, keepdims=bool(attrs["keepdims"]))
    return build


def _import_softmax(op: str) -> Importer:
    def build(ctx: ImportContext, node: onnx.NodeProto) -> Node:
        attrs = ctx.attributes(node, axis=-1)
        return ctx.add(op, [ctx.input(node, 0)], axis=attrs["axis"])
    return build


def _import_cross_entropy(ctx: ImportContext, node: onnx.NodeProto) -> Node:
    attrs = ctx.attributes(node, reduction="mean")
    if attrs["reduction"] != "none" or len(node.input) > 2 or len(node.output) > 1:
        raise ctx.refuse(node, "only reduction='none', without weights or log_prob output, "
                               "maps to cross_entropy; take mg.mean of it yourself")
    logits, labels = ctx.input(node, 0), ctx.input(node, 1)
    if len(logits.shape) != 2:
        raise ctx.refuse(node, "only 2-d scores (rows, classes) map to cross_entropy")
    return ctx.add("cross_entropy", [logits, labels])


def _import_matmul(ctx: ImportContext, node: onnx.NodeProto) -> Node:
    ctx.attributes(node)
    return ctx.add("matmul", [ctx.input(node, 0), ctx.input(node, 1)])


def _import_gemm(ctx: ImportContext, node: onnx.NodeProto) -> Node:
    """``alpha * A' @ B' + beta * C``, A' and B' transposed as transA and transB say."""
    attrs = ctx.attributes(node, alpha=1.0, beta=1.0, transA=0, transB=0)
    out = _identifier(node.output[0])
    a, b = ctx.input(node, 0), ctx.input(node, 1)
    if attrs["transA"]:
        a = ctx.add("transpose", [a], name=f"{out}_a_t")
    if attrs["transB"]:
        b = ctx.add("transpose", [b], name=f"{out}_b_t")
    c = ctx.input(node, 2) if len(node.input) > 2 and node.input[2] else None
    y = ctx.add("matmul", [a, b], name=None if c is None and attrs["alpha"] == 1 else
                f"{out}_matmul")
    if attrs["alpha"] != 1:
        alpha = ctx.add("constant", [], name=f"{out}_alpha",
                        value=_frozen(np.asarray(attrs["alpha"], y.dtype)))
        y = ctx.add("mul", [y, alpha], name=None if c is None else f"{out}_scaled")
    if c is None:
        return y
    if attrs["beta"] != 1:
        beta = ctx.add("constant", [], name=f"{out}_beta",
                       value=_frozen(np.asarray(attrs["beta"], c.dtype)))
        c = ctx.add("mul", [c, beta], name=f"{out}_c")
    return ctx.add("add", [y, c])


def _import_reshape(ctx: ImportContext, node: onnx.NodeProto) -> Node:
    attrs = ctx.attributes(node, allowzero=0)
    x = ctx.input(node, 0)
    target = ctx.constant(node, 1, partial=True)
    target = [None if d is None else int(d) for d in
              (target if isinstance(target, tuple) else np.asarray(target).ravel())]
    if not attrs["allowzero"]:  # a 0 copies the input's dimension
        target = [x.shape[i] if d == 0 and i < len(x.shape) else d for i, d in enumerate(target)]
    unknown = [i for i, d in enumerate(target) if d is None or d == -1]
    if len(unknown) > 1:
        raise ctx.refuse(node, f"its target shape {_shape_text(target)} has "
                               f"{len(unknown)} sizes unknown until the graph runs; minigraph's "
                               f"reshape takes at most one (-1)")
    return ctx.add("reshape", [x], shape=tuple(-1 if d is None else d for d in target))


def _import_flatten(ctx: ImportContext, node: onnx.NodeProto) -> Node:
    attrs = ctx.attributes(node, axis=1)
    x = ctx.input(node, 0)
    axis = attrs["axis"] % (len(x.shape) + 1) if x.shape else 0
    left, right = x.shape[:axis], x.shape[axis:]
    if None in right and None in left:
        raise ctx.refuse(node, f"flattening {S.format_shape(x.shape)} at axis {axis} needs the "
                               f"sizes on one side known")
    shape = (-1, math.prod(right)) if None not in right else (math.prod(left), -1)
    return ctx.add("reshape", [x], shape=shape)


def _import_transpose(ctx: ImportContext, node: onnx.NodeProto) -> Node:
    attrs = ctx.attributes(node, perm=[])
    return ctx.add("transpose", [ctx.input(node, 0)], axes=tuple(attrs["perm"]) or None)


def _import_expand(ctx: ImportContext, node: onnx.NodeProto) -> Node:
    ctx.attributes(node)
    x = ctx.input(node, 0)
    shape = tuple(int(d) for d in np.asarray(ctx.constant(node, 1)).ravel())
    try:
        full = S.broadcast_shapes(tuple(x.shape), shape)
    except MinigraphError as e:
        raise ctx.refuse(node, str(e)) from None
    if None in full:
        raise ctx.refuse(node, "expands to a shape unknown until the graph runs")
    return ctx.add("broadcast_to", [x], shape=tuple(full))


def _import_concat(ctx: ImportContext, node: onnx.NodeProto) -> Node | Static:
    attrs = ctx.attributes(node, axis=REQUIRED)
    if all(ctx.is_static(node, i) for i in range(len(node.input))):  # shape arithmetic
        parts = [ctx.constant(node, i, partial=True) for i in range(len(node.input))]
        if any(isinstance(p, tuple) for p in parts):
            if attrs["axis"] not in (0, -1):
                raise ctx.refuse(node, "joins shapes along an axis other than 0")
            return Static(tuple(d for p in parts for d in _entries(p)))
        return Static(np.concatenate([np.asarray(p) for p in parts], axis=attrs["axis"]))
    return ctx.add("concat", [ctx.input(node, i) for i in range(len(node.input))],
                   axis=attrs["axis"])


def _axes_of(ctx: ImportContext, node: onnx.NodeProto, attrs: dict) -> list[int] | None:
    axes = ctx.constant(node, 1)
    return None if axes is None else [int(a) for a in np.asarray(axes).ravel()]


def _import_unsqueeze(ctx: ImportContext, node: onnx.NodeProto) -> Node | Static:
    attrs = ctx.attributes(node)
    axes = _axes_of(ctx, node, attrs)
    if not axes:
        raise ctx.refuse(node, "needs its axes")
    if ctx.is_static(node, 0):
        value = ctx.constant(node, 0, partial=True)
        if value is None and axes in ([0], [-1]):  # an unknown size made a 1-entry shape
            return Static((None,))
        if value is None or isinstance(value, tuple):
            raise ctx.refuse(node, "unsqueezes a shape with unknown entries")
        return Static(np.expand_dims(np.asarray(value), tuple(axes)))
    return ctx.add("expand_dims", [ctx.input(node, 0)], axis=tuple(axes))


def _import_squeeze(ctx: ImportContext, node: onnx.NodeProto) -> Node | Static:
    attrs = ctx.attributes(node)
    axes = _axes_of(ctx, node, attrs)
    x = ctx.input(node, 0) if not ctx.is_static(node, 0) else None
    if x is None:
        value = np.asarray(ctx.constant(node, 0))
        return Static(np.squeeze(value, None if axes is None else tuple(axes)))
    if axes is None:
        if None in x.shape:
            raise ctx.refuse(node, "squeezes without axes a value of unknown shape")
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    return ctx.add("squeeze", [x], axis=tuple(axes))


def _import_identity(ctx: ImportContext, node: onnx.NodeProto) -> Node | Static:
    ctx.attributes(node)
    if ctx.is_static(node, 0):
        return Static(ctx.constant(node, 0, partial=True))
    return ctx.add("identity", [ctx.input(node, 0)])


def _import_constant(ctx: ImportContext, node: onnx.NodeProto) -> Static:
    attrs = ctx.attributes(node, value=None, value_float=None, value_floats=None,
                           value_int=None, value_ints=None)
    given = [k for k, v in attrs.items() if v is not None]
    if len(given) != 1:
        raise ctx.refuse(node, "needs exactly one of value, value_float(s), value_int(s)")
    (key,) = given
    value = attrs[key]
    if key != "value":
        value = np.asarray(value, np.float32 if "float" in key else np.int64)
    return Static(value)


def _import_shape(ctx: ImportContext, node: onnx.NodeProto) -> Static:
    attrs = ctx.attributes(node, start=0, end=A.MAX_RANK + 1)
    x = ctx.input(node, 0) if not ctx.is_static(node, 0) else None
    shape = tuple(x.shape) if x is not None else np.asarray(ctx.constant(node, 0)).shape
    dims = shape[slice(attrs["start"], attrs["end"])]
    if None in dims:
        return Static(tuple(dims))
    return Static(np.asarray(dims, np.int64))


def _import_gather(ctx: ImportContext, node: onnx.NodeProto) -> Static:
    """Only on values known while loading: picking entries of a shape."""
    attrs = ctx.attributes(node, axis=0)
    if not ctx.is_static(node, 0):
        raise ctx.refuse(node, "gathers from a value computed by the graph; minigraph's Gather "
                               "works only on shapes and constants while loading")
    data, indices = ctx.constant(node, 0, partial=True), np.asarray(ctx.constant(node, 1))
    if isinstance(data, tuple):
        if attrs["axis"] != 0 or indices.ndim > 1:
            raise ctx.refuse(node, "gathers from a shape along an axis other than 0")
        picked = tuple(data[int(i)] for i in indices.ravel())
        if indices.ndim == 0:  # one entry: a number, or None when unknown
            return Static(None if picked[0] is None else np.asarray(picked[0], np.int64))
        return Static(np.asarray(picked, np.int64)) if None not in picked else Static(picked)
    return Static(np.take(np.asarray(data), indices, axis=attrs["axis"]))


def _import_slice(ctx: ImportContext, node: onnx.NodeProto) -> Node | Static:
    ctx.attributes(node)
    starts, ends = ctx.constant(node, 1), ctx.constant(node, 2)
    axes, steps = ctx.constant(node, 3), ctx.constant(node, 4)
    if not ctx.is_static(node, 0):
        raise ctx.refuse(node, "slices a value computed by the graph; minigraph reads Slice "
                               "only on shapes and constants while loading")
    data = ctx.constant(node, 0, partial=True)
    items = list(data) if isinstance(data, tuple) else None
    array = np.asarray(data) if items is None else np.empty(len(items), object)
    if items is not None:
        array[:] = items
    index = [slice(None)] * array.ndim
    axes = range(len(np.ravel(starts))) if axes is None else np.ravel(axes)
    steps = np.ones(len(np.ravel(starts)), np.int64) if steps is None else np.ravel(steps)
    for a, s, e, st in zip(axes, np.ravel(starts), np.ravel(ends), steps, strict=True):
        big = np.iinfo(np.int64).max
        index[int(a)] = slice(int(s), None if int(e) >= big // 2 else int(e), int(st))
    out = array[tuple(index)]
    if items is not None:
        picked = tuple(out.tolist())
        return Static(picked) if None in picked else Static(np.asarray(picked, np.int64))
    return Static(out)


def _import_conv(ctx: ImportContext, node: onnx.NodeProto) -> Node:
    attrs = ctx.attributes(node, kernel_shape=[], strides=[1, 1], pads=[0, 0, 0, 0],
                           dilations=[1, 1], group=1, auto_pad="NOTSET")
    x, w = ctx.input(node, 0), ctx.input(node, 1)
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise ctx.refuse(node, "only 2-d convolutions of NCHW images map to conv2d")
    if attrs["group"] != 1 or any(d != 1 for d in attrs["dilations"]):
        raise ctx.refuse(node, f"group={attrs['group']}, dilations={attrs['dilations']}: "
                               f"minigraph's conv2d has no groups and no dilation")
    if attrs["auto_pad"] not in ("NOTSET", "VALID"):
        raise ctx.refuse(node, f"auto_pad={attrs['auto_pad']!r}: write the pads out instead")
    if attrs["kernel_shape"] and list(attrs["kernel_shape"]) != list(w.shape[2:]):
        raise ctx.refuse(node, f"kernel_shape {attrs['kernel_shape']} differs from its weights' "
                               f"{list(w.shape[2:])}")
    top, left, bottom, right = _pads(ctx, node, attrs["pads"])
    if (top, left) != (bottom, right):
        raise ctx.refuse(node, f"pads {attrs['pads']} are not the same on both sides; "
                               f"minigraph's conv2d pads symmetrically")
    out = _identifier(node.output[0])
    bias = len(node.input) > 2 and node.input[2] != ""
    y = ctx.add("conv2d", [x, w], name=f"{out}_conv" if bias else None,
                stride=_pair(ctx, node, attrs["strides"]), padding=(top, left))
    if not bias:
        return y
    b = ctx.add("reshape", [ctx.input(node, 2)], name=f"{out}_bias", shape=(-1, 1, 1))
    return ctx.add("add", [y, b])


def _pads(ctx: ImportContext, node: onnx.NodeProto, pads: list[int]) -> list[int]:
    if len(pads) != 4 or any(p < 0 for p in pads):
        raise ctx.refuse(node, f"pads {pads} are not four sizes >= 0 (top, left, bottom, right)")
    return pads


def _pair(ctx: ImportContext, node: onnx.NodeProto, values: list[int]) -> tuple[int, int]:
    try:
        return A.pair(values)
    except ValueError as e:
        raise ctx.refuse(node, str(e)) from None


def _import_max_pool(ctx: ImportContext, node: onnx.NodeProto) -> Node:
    ### BEGIN SOLUTION 14.1
    attrs = ctx.attributes(node, kernel_shape=REQUIRED, strides=[1, 1], pads=[0, 0, 0, 0],
                           dilations=[1, 1], ceil_mode=0, storage_order=0, auto_pad="NOTSET")
    if len(node.output) > 1 and node.output[1]:
        ctx.unavailable[node.output[1]] = ctx.label(node)  # the Indices output
    if any(attrs["pads"]) or attrs["ceil_mode"] or any(d != 1 for d in attrs["dilations"]) \
            or attrs["auto_pad"] not in ("NOTSET", "VALID"):
        raise ctx.refuse(node, f"pads={attrs['pads']}, ceil_mode={attrs['ceil_mode']}, "
                               f"dilations={attrs['dilations']}, auto_pad={attrs['auto_pad']!r}: "
                               f"minigraph's max_pool2d has no padding, no ceil mode and no "
                               f"dilation")
    return ctx.add("max_pool2d", [ctx.input(node, 0)],
                   kernel_size=_pair(ctx, node, attrs["kernel_shape"]),
                   stride=_pair(ctx, node, attrs["strides"]))
    ### END SOLUTION


def _import_clip(ctx: ImportContext, node: onnx.NodeProto) -> Node:
    ctx.attributes(node)
    bounds = {}
    for i, key in ((1, "min"), (2, "max")):
        value = ctx.constant(node, i)
        if value is not None:
            if np.asarray(value).size != 1:
                raise ctx.refuse(node, f"its {key} is not one number")
            bounds[key] = np.asarray(value).item()
    return ctx.add("clip", [ctx.input(node, 0)], **bounds)


# fmt: off
#: ONNX operator (default domain) -> how it is built in minigraph.
IMPORTERS: dict[str, Importer] = {
    "Add": _import_binary("add"), "Sub": _import_binary("sub"), "Mul": _import_binary("mul"),
    "Div": _import_binary("div"), "Pow": _import_binary("pow"),
    "Max": _import_variadic("maximum"), "Min": _import_variadic("minimum"),
    "Neg": _import_unary("neg"), "Abs": _import_unary("abs"), "Exp": _import_unary("exp"),
    "Log": _import_unary("log"), "Sqrt": _import_unary("sqrt"), "Tanh": _import_unary("tanh"),
    "Sigmoid": _import_unary("sigmoid"), "Relu": _import_unary("relu"),
    "Identity": _import_identity, "Clip": _import_clip,
    "Equal": _import_binary("equal"), "Less": _import_binary("less"),
    "LessOrEqual": _import_binary("less_equal"), "Greater": _import_binary("greater"),
    "GreaterOrEqual": _import_binary("greater_equal"), "Not": _import_not,
    "Where": _import_where, "Cast": _import_cast,
    "ReduceSum": _import_reduce("sum"), "ReduceMean": _import_reduce("mean"),
    "ReduceMax": _import_reduce("max"), "ReduceLogSumExp": _import_reduce("logsumexp"),
    "Softmax": _import_softmax("softmax"), "LogSoftmax": _import_softmax("log_softmax"),
    "SoftmaxCrossEntropyLoss": _import_cross_entropy,
    "MatMul": _import_matmul, "Gemm": _import_gemm, "Reshape": _import_reshape,
    "Flatten": _import_flatten, "Transpose": _import_transpose, "Expand": _import_expand,
    "Concat": _import_concat, "Unsqueeze": _import_unsqueeze, "Squeeze": _import_squeeze,
    "Conv": _import_conv, "MaxPool": _import_max_pool,
    # worked out while loading: constants and shape arithmetic
    "Constant": _import_constant, "Shape": _import_shape, "Gather": _import_gather,
    "Slice": _import_slice,
}
# fmt: on


def load(path: str | os.PathLike, *, max_bytes: int = MAX_BYTES,
         importers: Mapping[str, Importer] | None = None) -> LoadedFunction:
    """Read an ONNX model as a minigraph graph; call the result, or run its ``.graph``.

    Inputs become placeholders (a symbolic dimension is ``None``), initializers Variables,
    ``Constant`` nodes constants; each node is built by its importer (:data:`IMPORTERS`, plus
    ``importers`` for this call). A model minigraph cannot honour raises
    ``SerializationError`` naming the ONNX node and what to do; nothing in the file is run.
    """
    _need()
    where = os.path.basename(os.fspath(path))
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
        raise ArgumentError(f"mg.onnx.load: max_bytes is a number of bytes (an int >= 0), got "
                            f"{max_bytes!r:.40}")
    size = os.path.getsize(path)
    if size > max_bytes + (64 << 20):
        raise SerializationError(f"{where} is {size:,} bytes, more than max_bytes="
                                 f"{max_bytes:,}; if you trust the file, pass a larger "
                                 f"mg.onnx.load(path, max_bytes=...)")
    with open(path, "rb") as file:
        data = file.read()
    _check_before_parsing(data, where, max_bytes)
    try:
        model = onnx.ModelProto.FromString(data)
    except Exception as e:  # protobuf's DecodeError; a protobuf is data, nothing runs
        raise SerializationError(f"{where} is not an ONNX model: {_cut(str(e))}") from None
    if not model.HasField("graph"):
        raise SerializationError(f"{where} is not an ONNX model: it holds no graph")
    ctx = ImportContext(where, max_bytes)
    ctx.folder = os.path.dirname(os.path.abspath(path))
    ctx.opset = _opset(model, where)
    table = {**IMPORTERS, **(importers or {})}
    return _build(ctx, model.graph, table)


# The message types of onnx.proto whose entries can be many, by field number: a field named
# here holds a message of that type; every other field is a number or bytes, counted as one
# entry (a packed run of numbers counts by its bytes).
_MESSAGES: dict[str, dict[int, str]] = {
    "model": {7: "graph", 8: "opset", 14: "pair", 20: "training", 25: "function"},
    "graph": {1: "node", 5: "tensor", 11: "value", 12: "value", 13: "value", 14: "annotation",
              15: "sparse", 16: "pair"},
    "node": {5: "attribute", 9: "pair"},
    "attribute": {5: "tensor", 6: "graph", 10: "tensor", 11: "graph", 14: "type", 15: "type",
                  22: "sparse", 23: "sparse"},
    "function": {6: None, 7: "node", 9: "opset", 11: "attribute", 12: "value", 14: "pair"},
    "tensor": {13: "pair", 14: None},
    "sparse": {1: "tensor", 2: "tensor"},
    "value": {2: "type", 4: "pair"},
    "type": {1: "tensor_type", 4: "sequence_type", 5: "map_type", 8: "tensor_type",
             9: "sequence_type"},
    "tensor_type": {2: "shape"},
    "sequence_type": {1: "type"},
    "map_type": {2: "type"},
    "shape": {1: "dim"},
    "annotation": {2: "pair"},
    "training": {1: "graph", 2: "pair", 3: "graph", 4: "pair"},
    "opset": {}, "pair": {}, "dim": {},
}
#: Fields that hold runs of packed varints: a tensor's dims, int32_data, int64_data and
#: uint64_data, an attribute's ints.
_PACKED_VARINTS: dict[str, set[int]] = {"tensor": {1, 5, 7, 11}, "attribute": {8}}


class _Scan:
    """What a model holds, counted on the protobuf's bytes without building it: its IR version,
    the opsets it imports, its nodes and its entries. Stops as soon as a count is over."""

    def __init__(self, where: str) -> None:
        self.where, self.nodes, self.entries, self.numbers = where, 0, 0, 0
        self.ir_version, self.opsets = 0, {}

    def over(self) -> bool:
        return self.nodes > MAX_NODES or self.entries > MAX_ENTRIES

    def read(self, data: memoryview, kind: str = "model", pos: int = 0, end: int | None = None,
             depth: int = 0) -> None:
        end = len(data) if end is None else end
        if depth > 64:
            raise SerializationError(f"{self.where}: its messages nest more than 64 deep")
        fields, opset = _MESSAGES[kind], {}
        while pos < end and not self.over():
            key, pos = _varint(data, pos, end, self.where)
            number, wire = key >> 3, key & 7
            self.entries += 1
            if wire == 0:
                value, pos = _varint(data, pos, end, self.where)
                if kind == "model" and number == 1:
                    self.ir_version = value
                elif kind == "opset" and number == 2:
                    opset["version"] = value
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            elif wire == 2:
                size, pos = _varint(data, pos, end, self.where)
                if pos + size > end:
                    raise SerializationError(f"{self.where} is not an ONNX model: a field runs "
                                             f"past the end of its message")
                child = fields.get(number)
                if child is not None:
                    self.nodes += child == "node"
                    self.read(data, child, pos, pos + size, depth + 1)
                elif kind == "opset" and number == 1:
                    opset["domain"] = bytes(data[pos:pos + size]).decode("utf-8", "replace")
                elif number in _PACKED_VARINTS.get(kind, ()):
                    self.numbers += size  # each byte may be a number of 8 bytes once parsed
                pos += size
            else:
                raise SerializationError(f"{self.where} is not an ONNX model: field {number} "
                                         f"has wire type {wire}")
        if kind == "opset":
            self.opsets[opset.get("domain", "")] = opset.get("version", 0)


def _varint(data: memoryview, pos: int, end: int, where: str) -> tuple[int, int]:
    value = shift = 0
    while pos < end and shift < 70:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise SerializationError(f"{where} is not an ONNX model: a number is cut off or too long")


def _check_before_parsing(data: bytes, where: str, max_bytes: int) -> None:
    """Refuse, before protobuf builds anything, a model whose nodes or entries are over the
    limits, whose packed numbers would take more than ``max_bytes`` (8 bytes each, from one
    byte each in the file), or whose IR version or opset this loader (and ONNX Runtime) cannot
    read."""
    scan = _Scan(where)
    with memoryview(data) as view:
        scan.read(view)
    if scan.nodes > MAX_NODES:
        raise SerializationError(f"{where} holds {scan.nodes:,} nodes or more (counted before "
                                 f"parsing); minigraph loads at most {MAX_NODES:,}")
    if scan.entries > MAX_ENTRIES:
        raise SerializationError(f"{where} holds more than {MAX_ENTRIES:,} protobuf entries "
                                 f"(nodes, attributes, names, numbers), about "
                                 f"{150 * MAX_ENTRIES / 2**30:.1f} GB once parsed; minigraph "
                                 f"loads at most {MAX_ENTRIES:,}")
    if 8 * scan.numbers > max_bytes + len(data):
        raise SerializationError(f"{where} holds up to {scan.numbers:,} packed numbers, "
                                 f"{8 * scan.numbers:,} bytes once parsed, more than "
                                 f"max_bytes={max_bytes:,}; if you trust the file, pass a "
                                 f"larger mg.onnx.load(path, max_bytes=...)")
    if not 3 <= scan.ir_version <= onnx.IR_VERSION:
        raise SerializationError(f"{where} has IR version {scan.ir_version}; this onnx package "
                                 f"reads IR versions 3 to {onnx.IR_VERSION} (ONNX Runtime "
                                 f"refuses a newer one too): export it again, or convert it")
    _opset_version(scan.opsets, where)


def _opset(model: onnx.ModelProto, where: str) -> int:
    return _opset_version({o.domain: o.version for o in model.opset_import}, where)


def _opset_version(versions: dict[str, int], where: str) -> int:
    version = versions.get("", versions.get("ai.onnx"))
    if version is None:
        raise SerializationError(f"{where}: the model imports no version of the standard "
                                 f"operators (domain '')")
    if not MIN_OPSET <= version <= MAX_OPSET:
        raise SerializationError(f"{where}: opset {version} is not supported; minigraph reads "
                                 f"opsets {MIN_OPSET} to {MAX_OPSET} (onnx.version_converter "
                                 f"can convert a model to {OPSET})")
    return version


def _build(ctx: ImportContext, g: onnx.GraphProto, table: Mapping[str, Importer]) -> LoadedFunction:
    where = ctx.where
    if len(g.node) > MAX_NODES or len(g.initializer) > MAX_NODES or len(g.input) > MAX_NODES:
        raise SerializationError(f"{where} holds {len(g.node):,} nodes and "
                                 f"{len(g.initializer):,} initializers; minigraph loads at most "
                                 f"{MAX_NODES:,} of each")
    if len(g.sparse_initializer):
        raise SerializationError(f"{where}: sparse initializers are not supported")
    for init in g.initializer:
        if init.name in ctx.initializers:
            raise SerializationError(f"{where}: two initializers are named {_quote(init.name)}")
        ctx.initializers[init.name] = init
    declared = sum(math.prod(i.dims) * _DTYPE_OF.get(i.data_type, np.dtype("uint8")).itemsize
                   for i in g.initializer if all(d >= 0 for d in i.dims))
    if declared > ctx.max_bytes:
        raise SerializationError(f"{where}: its initializers hold {declared:,} bytes, more "
                                 f"than max_bytes={ctx.max_bytes:,}; if you trust the file, "
                                 f"pass a larger mg.onnx.load(path, max_bytes=...)")
    for value in g.input:
        if value.name in ctx.initializers:  # an input with a default: the initializer wins
            continue
        ctx.values[value.name] = _placeholder(ctx, value)
    for i, node in enumerate(g.node):
        ctx._node, ctx._label = node, f"#{i}"
        if node.domain not in ("", "ai.onnx"):
            raise ctx.refuse(node, f"is a custom operator of domain {_quote(node.domain)}; "
                                   f"minigraph runs only standard ONNX operators, never a file's "
                                   f"own")
        importer = table.get(node.op_type)
        if importer is None:
            raise ctx.refuse(node, f"operator {_quote(node.op_type)} has no minigraph mapping "
                                   f"(supported: {', '.join(sorted(table))}); pass "
                                   f"importers={{{node.op_type!r}: fn}} to mg.onnx.load to add "
                                   f"one")
        if not node.output or not node.output[0]:
            raise ctx.refuse(node, "has no output")
        for name in node.output:
            if name and (name in ctx.values or name in ctx.initializers):
                raise ctx.refuse(node, f"writes {_quote(name)}, which is already defined")
        for extra in node.output[1:]:
            if extra:
                ctx.unavailable.setdefault(extra, ctx.label(node))
        try:
            result = importer(ctx, node)
        except MinigraphError:
            raise
        except Exception as e:  # an importer's own bug: still name the node
            raise ctx.refuse(node, f"its importer raised {type(e).__name__}: {_cut(str(e))}") \
                from e
        if not isinstance(result, (Node, Static)):
            raise ctx.refuse(node, f"its importer returned {type(result).__name__}, not a node")
        ctx.values[node.output[0]] = result
    ctx._node = None
    outputs = []
    for value in g.output:
        found = ctx.values.get(value.name)
        if found is None and value.name in ctx.initializers:
            found = Static(ctx.tensor(ctx.initializers[value.name], _quote(value.name)))
        if found is None:
            raise SerializationError(f"{where}: output {_quote(value.name)} is not computed by "
                                     f"any node")
        if isinstance(found, Static):
            if not found.known:
                raise SerializationError(f"{where}: output {_quote(value.name)} is a shape "
                                         f"known only at run time")
            found = ctx.add("constant", [], name=_identifier(value.name),
                            value=_frozen(found.value))
        outputs.append(found)
    # Initializers read as data were made Variables lazily; put them first, as a graph prints.
    graph = ctx.graph
    graph.nodes.sort(key=lambda n: n.op not in ("placeholder", "variable"))
    graph.outputs = outputs
    name = _identifier(g.name) if g.name else "loaded"
    structure = 0 if len(outputs) == 1 else tuple(range(len(outputs)))
    return LoadedFunction(graph, name, structure)


def _placeholder(ctx: ImportContext, value: onnx.ValueInfoProto) -> Node:
    what = f"{ctx.where}: input {_quote(value.name)}"
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        raise SerializationError(f"{what} is a {kind or 'value of no type'}, not a tensor")
    tensor_type = value.type.tensor_type
    dtype = _DTYPE_OF.get(tensor_type.elem_type)
    if dtype is None:
        raise SerializationError(f"{what} holds {_type_name(tensor_type.elem_type)} values; "
                                 f"minigraph reads only numbers")
    if not tensor_type.HasField("shape"):
        raise SerializationError(f"{what} has no shape; minigraph's placeholders need at least "
                                 f"their rank")
    dims = tensor_type.shape.dim
    if len(dims) > A.MAX_RANK:
        raise SerializationError(f"{what} has {len(dims)} axes; at most {A.MAX_RANK}")
    shape = []
    for d in dims:
        if d.HasField("dim_value"):
            if d.dim_value < 0:
                raise SerializationError(f"{what} has a negative size {d.dim_value}")
            shape.append(int(d.dim_value))
        else:
            shape.append(None)
    node = ctx.add("placeholder", [], name=_identifier(value.name), shape=tuple(shape),
                   dtype=dtype.name)
    return node


def _entries(part: Any) -> tuple:
    return tuple(part) if isinstance(part, tuple) else tuple(
        int(d) for d in np.asarray(part).ravel())


def _identifier(name: str) -> str:
    """An ONNX value name as a minigraph node name: a Python identifier, ASCII, no dunder."""
    text = re.sub(r"[^0-9A-Za-z_]", "_", str(name))[:MAX_NAME].strip("_") or "v"
    if text[0].isdigit():
        text = f"v_{text}"
    return text


def _quote(name: str) -> str:
    text = repr(name)
    return text if len(text) <= 60 else text[:57] + "..."


def _short(value: Any) -> str:
    return _quote(value)


def _cut(text: str, limit: int = 160) -> str:
    text = text.splitlines()[0] if text else ""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _type_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"type {elem_type}"


def _shape_text(dims: Any) -> str:
    if dims is None:
        return "(?)"
    return "(" + ", ".join("?" if d is None else str(d) for d in dims) + ")"
