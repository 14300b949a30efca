"""Tracing: turn a Python function into a graph by running it once on symbolic inputs.

``@mg.function`` runs the function on placeholders the first time it meets an input signature
(the shapes and dtypes of its tensors, the values of its other arguments), keeps the graph, and
from then on runs the graph instead of the Python:

>>> import course_utils.minigraph as mg
>>> w = mg.tensor([[1.0], [-1.0]])
>>> @mg.function
... def predict(x):
...     print("tracing")            # a Python side effect: it runs only while tracing
...     return mg.relu(x @ w)
>>> predict(mg.tensor([[3.0, 1.0]]))
tracing
tensor([[2.]], dtype=float32)
>>> predict(mg.tensor([[1.0, 3.0]]))  # same signature: the graph runs, the print does not
tensor([[0.]], dtype=float32)
>>> print(predict.get_graph(mg.tensor([[0.0, 0.0]])))
%x = placeholder()  # (1, 2) float32
%w = capture()  # (2, 1) float32
%matmul = matmul(%x, %w)  # (1, 1) float32
%relu = relu(%matmul)  # (1, 1) float32
return %relu

``w`` is captured by reference: update it in place and the next call sees the new value,
without retracing. A new shape retraces, and ``f.explain_retraces()`` says why:

>>> with mg.no_grad():
...     w *= 2.0
>>> predict(mg.tensor([[3.0, 1.0], [1.0, 3.0]]))
tracing
tensor([[4.],
        [0.]], dtype=float32)
>>> print(predict.explain_retraces())
trace 1: first call (x: (1, 2) float32)
trace 2: argument x shape (1, 2) -> (2, 2)

NB: ``tf.function`` works the same way: each trace is a ``ConcreteFunction`` whose graph is a
``FuncGraph`` holding the captures. ``torch.jit.trace`` records one trace for one example and
never retraces; ``torch.compile`` guards on shapes and recompiles, as this does.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

import course_utils.minigraph as mg

from . import attrs as A
from . import shapes as S
from .eager import TapeEntry, Tensor, is_grad_enabled
from .errors import ArgumentError, TracingError, user_source
from .graph import Graph, Node, get_default_graph
from .interpreter import Interpreter
from .ops import Op, register_op

# A capture reads an eager tensor when the graph runs. It is ``stateful`` so that passes never
# fold it into a constant: its value changes whenever the tensor is updated in place.
register_op(Op("capture", lambda ref: ref.numpy(), lambda ref: (tuple(ref.shape), ref.dtype),
               doc="an eager tensor, read by reference when the graph runs (attrs['ref'])",
               stateful=True,
               attrs={"ref": A.instance_of(Tensor, "an mg.Tensor", lambda t: A.array(t.numpy()))}))


# --- signatures: what a trace depends on ----------------------------------------------------------


class TensorSpec(NamedTuple):
    """The shape and dtype of a tensor argument: all a trace knows of it. NB: ``tf.TensorSpec``."""

    shape: S.Shape
    dtype: str

    def __str__(self) -> str:
        return f"{S.format_shape(self.shape)} {self.dtype}"


class PyArg(NamedTuple):
    """Any other argument: its value is baked into the graph, so it is part of the signature."""

    type: str
    value: Any

    def __str__(self) -> str:
        return repr(self.value)


class Signature(tuple):
    """One call's input signature: ``(path, TensorSpec | PyArg)`` for each argument leaf."""

    def __repr__(self) -> str:
        return "(" + ", ".join(f"{p}: {s}" if isinstance(s, TensorSpec) else f"{p}={s}"
                               for p, s in self) + ")"


def _is_tensor(value: Any) -> bool:
    return isinstance(value, (Tensor, Node, np.ndarray))


def _spec(path: str, value: Any) -> TensorSpec | PyArg:
    if _is_tensor(value):
        return TensorSpec(tuple(value.shape), np.dtype(value.dtype).name)
    try:
        hash(value)
    except TypeError:
        raise ArgumentError(f"argument {path} is a {type(value).__name__}, which is neither a "
                            f"tensor nor hashable: mg.function keys its traces on the values of "
                            f"non-tensor arguments, so pass a tensor, a tuple, or a hashable "
                            f"value") from None
    return PyArg(type(value).__name__, value)


def _explain(old: Signature | None, new: Signature) -> str:
    """Why ``new`` needed a trace of its own: how it differs from the previous call's."""
    if old is None:
        return f"first call {new!r}"
    before, after = dict(old), dict(new)
    reasons = []
    for path in dict.fromkeys([*before, *after]):
        a, b = before.get(path), after.get(path)
        if a == b and type(a) is type(b):
            continue
        if a is None or b is None:
            reasons.append(f"argument {path} {'added' if a is None else 'removed'}")
        elif isinstance(a, TensorSpec) and isinstance(b, TensorSpec):
            reasons += [f"argument {path} {what} {x} -> {y}"
                        for what, x, y in [("shape", S.format_shape(a.shape),
                                            S.format_shape(b.shape)), ("dtype", a.dtype, b.dtype)]
                        if x != y]
        elif isinstance(a, PyArg) and isinstance(b, PyArg) and a.type == b.type:
            reasons.append(f"argument {path} value {a.value!r} -> {b.value!r}")
        else:
            reasons.append(f"argument {path} {_kind(a)} -> {_kind(b)}")
    return "; ".join(reasons)


def _kind(spec: TensorSpec | PyArg) -> str:
    return f"tensor {spec}" if isinstance(spec, TensorSpec) else f"{spec.type} {spec.value!r}"


# --- nested arguments and results: lists, tuples and dicts of leaves -----------------------------


def leaves(tree: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, leaf)`` for each leaf of nested lists, tuples and dicts; ``None`` has none."""
    if tree is None:
        return
    if isinstance(tree, (list, tuple)):
        for i, item in enumerate(tree):
            yield from leaves(item, f"{path}[{i}]")
    elif isinstance(tree, dict):
        for key, item in tree.items():
            yield from leaves(item, f"{path}[{key!r}]")
    else:
        yield path, tree


def pack(template: Any, values: Iterator[Any]) -> Any:
    """``template``'s structure with its leaves replaced, in order, by ``values``."""
    if template is None:
        return None
    if isinstance(template, (list, tuple)):
        items = [pack(t, values) for t in template]
        return type(template)(*items) if hasattr(template, "_fields") else type(template)(items)
    if isinstance(template, dict):
        return {key: pack(t, values) for key, t in template.items()}
    return next(values)


def structure(tree: Any) -> Any:
    """The shape of a nest without its leaves, to compare two (``"*"`` marks a leaf)."""
    return pack(tree, iter(lambda: "*", None))


def _identifier(path: str) -> str:
    """``params[0][1]`` -> ``params_0_1``: a node name for an argument leaf (dict keys may be
    any text: ``ｘ`` is written ``x``, as Python would read it)."""
    return re.sub(r"\W+", "_", unicodedata.normalize("NFKC", path)).strip("_") or "arg"


# --- the graph of a function ---------------------------------------------------------------------


class FuncGraph(Graph):
    """The graph of one traced function.

    While it is the default graph, every op is recorded in it (``captures_outer``), and an eager
    tensor the function reads becomes a ``capture`` node that holds the tensor itself, so each
    run reads the tensor's value at that time. Numbers and numpy arrays become constants. (A
    tensor made while tracing, ``mg.tensor(0)`` in the body, is captured too; ``mg.constant``
    makes a graph constant.)

    NB: TensorFlow's FuncGraph; ``graph.captures`` here maps tensors to capture nodes as its
    ``captures`` maps external to internal tensors.
    """

    captures_outer = True

    def __init__(self, name: str, capture_names: dict[int, str] | None = None) -> None:
        super().__init__()
        self.name = name
        self.captures: dict[int, Node] = {}  # id(tensor) -> its capture node
        self._capture_names = capture_names or {}

    def lift(self, value: Any, weak: np.dtype | None = None) -> Node:
        if isinstance(value, Tensor):
            if id(value) not in self.captures:  # the node keeps the tensor alive, so ids hold
                name = self._capture_names.get(id(value), "capture")
                self.captures[id(value)] = self.add_node("capture", (), {"ref": value}, name=name)
            return self.captures[id(value)]
        if isinstance(value, Node) and value.graph is not self:
            raise TracingError(
                f"the function {self.name!r} reads %{value.name} (defined at {value.source}) at "
                f"{user_source()}, a value of another graph; pass it as an argument instead")
        return super().lift(value, weak)


def inline(graph: Graph, args: Sequence[Node], into: Graph) -> list[Node]:
    """Copy ``graph``'s nodes into ``into``, its placeholders replaced by ``args`` (in order);
    return its outputs there. A capture stays a read of the same tensor: a capturing ``into``
    (a traced function calling another) lifts the tensor, any other graph copies the node.
    """
    params = graph.placeholders()
    if len(params) != len(args):
        raise TracingError(f"inlining a graph of {len(params)} inputs with {len(args)} values")
    env = {p.name: a for p, a in zip(params, args, strict=True)}
    for n in graph.nodes:
        if n.op == "placeholder":
            continue
        if n.op == "capture" and into.captures_outer:
            env[n.name] = into.lift(n.attrs["ref"])
        else:
            inputs = tuple(env[x.name] for x in n.inputs)
            env[n.name] = into.add_node(n.op, inputs, n.attrs, name=n.name, source=n.source)
    return [env[n.name] for n in graph.outputs]


def _capture_names(fn: Callable) -> dict[int, str]:
    """Names of the eager tensors ``fn`` can read (globals and closure cells, nested lists
    included), so that its captures print as ``%w`` rather than ``%capture``."""
    code, names = getattr(fn, "__code__", None), {}
    if code is None:
        return names
    scope = {n: fn.__globals__[n] for n in _global_names(code) if n in fn.__globals__}
    for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=True):
        try:
            scope[name] = cell.cell_contents
        except ValueError:  # a cell not yet filled
            continue
    for name, value in scope.items():
        if isinstance(value, (Tensor, list, tuple, dict)):
            for path, leaf in leaves(value, name):
                if isinstance(leaf, Tensor):
                    names.setdefault(id(leaf), _identifier(path))
    return names


def _global_names(code: Any) -> set[str]:
    """Names a code object and the functions nested in it (lambdas, branches) look up."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


class ConcreteFunction:
    """One trace: the graph for one input signature, and the way to run it.

    Calling it on eager tensors runs the graph in an ``Interpreter``. When an input or a captured
    tensor requires grad, each float result gets one tape entry whose backward runs the symbolic
    gradient of this graph (built on first use, then cached).

    NB: tf.function's ``ConcreteFunction``; ``f.get_concrete_function(x)`` there.
    """

    def __init__(self, name: str, graph: FuncGraph, template: Any) -> None:
        self.name, self.graph, self.template = name, graph, template
        self.captured = [n.attrs["ref"] for n in graph.nodes if n.op == "capture"]
        self._run = Interpreter(graph).run
        self._backward: dict[int, tuple[Callable, str, list[int]]] = {}
        self._backward_graphs: dict[int, Graph] = {}
        self._backward_fns: dict[int, ConcreteFunction] = {}

    def __call__(self, args: Sequence[Any]) -> Any:
        """Run on ``args``, one eager tensor or array per placeholder; results as tensors."""
        # A copy of raw arrays: the tape keeps them for backward, and the caller may change theirs.
        tensors = [a if isinstance(a, Tensor) else Tensor(np.array(a)) for a in args]
        feeds = {p.name: t.numpy() for p, t in zip(self.graph.placeholders(), tensors, strict=True)}
        outputs = [Tensor(v) for v in self._run(feeds, {})]
        self._record(tensors, outputs)
        return pack(self.template, iter(outputs))

    def call_symbolic(self, args: Sequence[Any]) -> Any:
        """Called while building another graph: copy this one in (NB: TF adds a call op)."""
        default = get_default_graph()
        outer = default if default.captures_outer else next(a.graph for a in args
                                                             if isinstance(a, Node))
        nodes = inline(self.graph, [outer.lift(a) for a in args], outer)
        return pack(self.template, iter(nodes))

    def _record(self, args: list[Tensor], outputs: list[Tensor]) -> None:
        inputs = (*args, *self.captured)
        if not is_grad_enabled() or not any(t.requires_grad for t in inputs):
            return
        versions = tuple(t._version for t in inputs)
        for i, out in enumerate(outputs):
            if S.is_float(out.dtype):
                op = Op(f"call_{self.name}", None, _no_shape_rule,
                        functools.partial(self._vjp, i))
                out.requires_grad = True
                out._ctx = TapeEntry(op, inputs, {}, versions)

    def _vjp(self, i: int, g: Tensor, out: Tensor, *inputs: Tensor) -> tuple:
        """The tape's backward step for output ``i``: inputs are the args, then the captures.

        Under ``backward(create_graph=True)`` the backward graph is called like a traced function
        itself, so its results are on the tape too (and so on, for any order of derivative).
        """
        run, seed, wrt = self.backward_graph(i)
        params = self.graph.placeholders()
        if is_grad_enabled():
            results = self._backward_function(i)([*inputs[:len(params)], g])
        else:
            feeds = {p.name: t.numpy() for p, t in zip(params, inputs, strict=False)}
            feeds[seed] = g.numpy()
            results = [Tensor(value) for value in run(feeds, {})]
        grads: list[Tensor | None] = [None] * len(inputs)
        for j, value in zip(wrt, results, strict=True):
            grads[j] = value
        return tuple(grads)

    def _backward_function(self, i: int) -> ConcreteFunction:
        """The backward graph of output ``i`` as a function of (the args, the seed)."""
        if i not in self._backward_fns:
            self.backward_graph(i)
            graph = self._backward_graphs[i]
            self._backward_fns[i] = ConcreteFunction(f"{self.name}_grad{i}", graph,
                                                     list(graph.outputs))
        return self._backward_fns[i]

    def backward_graph(self, i: int) -> tuple[Callable, str, list[int]]:
        """The gradient of output ``i`` w.r.t. the inputs, then the captures: ``(run, name of
        the seed placeholder, index of each gradient it returns)``. Built once, then cached."""
        if i not in self._backward:
            g = Graph()
            with g.as_default():  # not the traced graph: vjps must add their nodes here
                params = [g.add_node("placeholder", (), p.attrs, name=p.name, source=p.source)
                          for p in self.graph.placeholders()]
                outs = inline(self.graph, params, g)
                seed = mg.placeholder(outs[i].shape, outs[i].dtype, name="grad_output")
                xs = params + [n for n in g.nodes if n.op == "capture"]
                grads = mg.gradients([outs[i]], xs, grad_ys=[seed])
            wrt = [j for j, d in enumerate(grads) if d is not None]
            g.outputs = [grads[j] for j in wrt]
            self._backward[i] = (Interpreter(g).run, seed.name, wrt)
            self._backward_graphs[i] = g
        return self._backward[i]


def _no_shape_rule(*args: Any, **attrs: Any) -> tuple:
    raise TracingError("a traced function's tape entry has no shape rule; it is never applied")


# --- mg.function ----------------------------------------------------------------------------------


def _no_autograph(fn: Callable) -> tuple[Callable, str]:
    raise TracingError("autograph=True needs course_utils.minigraph.autograph; import "
                       "course_utils.minigraph (the package), which loads it")


#: The AutoGraph seam: ``autograph.py`` builds on this module (and on control flow, which builds
#: on it too), so rather than import it here, it installs its ``convert`` here when imported:
#: ``fn -> (converted function, its source)``.
AUTOGRAPH: Callable[[Callable], tuple[Callable, str]] = _no_autograph


class Function:
    """A Python function traced into one graph per input signature. Made by ``mg.function``.

    ``graphs`` maps each ``Signature`` to its graph, oldest first; ``trace_count`` counts them;
    ``retrace_log`` says why each was needed. With ``autograph=True`` the function's ``if`` and
    ``while`` statements are first rewritten (see ``course_utils.minigraph.autograph``).
    """

    def __init__(self, fn: Callable, autograph: bool = False) -> None:
        functools.update_wrapper(self, fn)
        self.python_function = fn
        self.autograph_source: str | None = None
        self._fn = fn
        if autograph:
            self._fn, self.autograph_source = AUTOGRAPH(fn)
        self._signature = inspect.signature(fn)
        self._code = fn.__code__
        self._concrete: dict[Signature, ConcreteFunction] = {}
        self._last: Signature | None = None
        self.retrace_log: list[str] = []

    @property
    def graphs(self) -> dict[Signature, Graph]:
        return {key: c.graph for key, c in self._concrete.items()}

    @property
    def trace_count(self) -> int:
        return len(self._concrete)

    def explain_retraces(self) -> str:
        """One line per trace: why it happened (how its signature differs from the call before)."""
        return "\n".join(self.retrace_log)

    def get_concrete_function(self, *args: Any, **kwargs: Any) -> ConcreteFunction:
        """The trace for these arguments (tracing now if there is none yet)."""
        return self._lookup(args, kwargs)[0]

    def get_graph(self, *args: Any, **kwargs: Any) -> Graph:
        """The graph for these arguments (tracing now if there is none yet)."""
        return self.get_concrete_function(*args, **kwargs).graph

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        concrete, tensors = self._lookup(args, kwargs)
        if get_default_graph().captures_outer or any(isinstance(t, Node) for t in tensors):
            return concrete.call_symbolic(tensors)
        return concrete(tensors)

    def __repr__(self) -> str:
        return f"<mg.function {self.__name__}: {self.trace_count} traces>"

    def _lookup(self, args: tuple, kwargs: dict) -> tuple[ConcreteFunction, list[Any]]:
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{self.__name__}{self._signature} called at {user_source()}: "
                                f"{e}") from None
        bound.apply_defaults()
        flat = [(path, leaf) for name, value in bound.arguments.items()
                for path, leaf in leaves(value, name)]
        key = Signature((path, _spec(path, leaf)) for path, leaf in flat)
        if key not in self._concrete:
            self._concrete[key] = self._trace(bound, key)
            self.retrace_log.append(f"trace {len(self._concrete)}: {_explain(self._last, key)}")
        self._last = key
        return self._concrete[key], [leaf for _, leaf in flat if _is_tensor(leaf)]

    def _trace(self, bound: inspect.BoundArguments, key: Signature) -> ConcreteFunction:
        graph = FuncGraph(self.__name__, _capture_names(self.python_function))
        source = f"{os.path.basename(self._code.co_filename)}:{self._code.co_firstlineno}"
        specs = iter(key)
        with graph.as_default():
            for name, value in bound.arguments.items():
                symbolic = []
                for path, leaf in leaves(value, name):
                    spec = next(specs)[1]
                    symbolic.append(graph.add_node(
                        "placeholder", (), {"shape": spec.shape, "dtype": spec.dtype},
                        name=_identifier(path), source=source) if _is_tensor(leaf) else leaf)
                bound.arguments[name] = pack(value, iter(symbolic))
            result = self._fn(*bound.args, **bound.kwargs)
            graph.outputs = [graph.lift(v) for _, v in leaves(result)]
        return ConcreteFunction(self.__name__, graph, result)


def function(fn: Callable | None = None, *, autograph: bool = False) -> Any:
    """Trace ``fn`` into a graph per input signature: ``@mg.function`` or ``mg.function(fn)``.

    ``autograph=True`` first rewrites its ``if``/``while`` on tensors into ``mg.cond`` and
    ``mg.while_loop``. NB: ``tf.function(fn, autograph=True)``.
    """
    if fn is None:
        return lambda f: function(f, autograph=autograph)
    if not callable(fn) or not (autograph or hasattr(fn, "__code__")):
        raise ArgumentError(f"mg.function at {user_source()} traces a Python function (def or "
                            f"lambda), got {type(fn).__name__} {fn!r:.60}")
    return Function(fn, autograph=autograph)
