"""The IR: ``Node`` and ``Graph``, the default graph, and the builders of static mode.

A graph is a list of nodes in topological order (every input comes before its user), so running
it is one loop and printing it is one line per node:

>>> import course_utils.minigraph as mg
>>> g = mg.Graph()
>>> with g.as_default():
...     x = mg.placeholder((None, 2), name="x")
...     w = mg.Variable(np.ones((2, 4)), name="w")
...     h = mg.sum(mg.relu(x @ w), axis=1, name="h")
>>> print(g)
%x = placeholder()  # (None, 2) float32
%w = variable()  # (2, 4) float64
%matmul = matmul(%x, %w)  # (None, 4) float64
%relu = relu(%matmul)  # (None, 4) float64
%h = sum(%relu, axis=1)  # (None,) float64

NB: a Node is both the graph's record and the symbolic value you compute with, as a TF1
``tf.Tensor`` is (one output per op here) and as a ``torch.fx.Node`` is.
"""

from __future__ import annotations

import contextlib
import itertools
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import attrs as A
from . import shapes as S
from .errors import DTypeError, GraphError, MinigraphError, ShapeError, TracingError, user_source
from .operators import Operators
from .ops import OPS, Op, get_op


@dataclass(eq=False, repr=False)
class Node(Operators):
    """One op application in a graph, and the symbolic value it produces.

    ``shape`` has ``None`` for dimensions known only at run time; ``dtype`` is ``None`` for ops
    that produce no array: nothing (``group``, ``initializer``) or a tuple of results (``cond``,
    ``while_loop``, read with ``tuple_get``); ``source`` is ``"file.py:LINE"`` of the user code
    that created it. ``node.graph`` (set by ``Graph.add_node``) is its graph.
    """

    name: str
    op: str
    inputs: tuple[Node, ...]
    attrs: dict[str, Any]
    shape: S.Shape
    dtype: np.dtype | None
    source: str

    def describe(self) -> str:
        """``%h = matmul(%x, %w)``: the node as its graph prints it, without the type comment."""
        args = [f"%{x.name}" for x in self.inputs]
        hidden = _HIDDEN_ATTRS.get(self.op, ())
        args += [f"{k}={_format_attr(k, v)}" for k, v in self.attrs.items()
                 if k not in hidden and v is not None and v is not False
                 and not isinstance(v, Graph)]  # sub-graphs print indented below the node
        return f"%{self.name} = {self.op}({', '.join(args)})"

    def type_str(self) -> str:
        return "" if self.dtype is None else f"{S.format_shape(self.shape)} {self.dtype}"

    def __repr__(self) -> str:
        comment = f"  # {self.type_str()}" if self.dtype is not None else ""
        return f"<Node {self.describe()}{comment}>"

    # Python asking for a concrete value: the control-flow trap of tracing.
    def _no_value(self, what: str) -> TracingError:
        return TracingError(
            f"{what} at {user_source()} needs the value of %{self.name} = {self.op}(...) (defined "
            f"at {self.source}), which is not known until the graph runs: while a graph is built, "
            f"a value has a shape {self.type_str()} but no numbers. To branch or loop on it use "
            f"mg.cond(pred, true_fn, false_fn) or mg.while_loop(cond_fn, body_fn, loop_vars), "
            f"mg.where to pick between two values, or mg.function(..., autograph=True) to convert "
            f"`if`/`while` statements; for its size, read .shape"
        )

    def __bool__(self) -> bool:
        raise self._no_value("`if`, `while`, `and`/`or` or bool()")

    def __len__(self) -> int:
        raise self._no_value("len()")

    def numpy(self) -> np.ndarray:
        raise self._no_value(".numpy()")

    def item(self) -> Any:
        raise self._no_value(".item()")

    def __float__(self) -> float:
        raise self._no_value("float()")

    def __int__(self) -> int:
        raise self._no_value("int()")

    # Eager habits that mean nothing for a symbol: say what to do instead of failing obscurely.
    def backward(self, *args: Any, **kwargs: Any) -> None:
        raise TracingError(
            f"backward() at {user_source()} of %{self.name} = {self.op}(...) (defined at "
            f"{self.source}): it is a symbolic value of a graph, with no tape behind it. Inside "
            f"a graph or a traced function, build gradient nodes with mg.gradients(y, [x]); or "
            f"call backward() on the eager result the traced function returns")

    def __setattr__(self, key: str, value: Any) -> None:
        if key in ("requires_grad", "grad", "data"):
            raise TracingError(
                f"setting .{key} at {user_source()} on %{self.name} = {self.op}(...) (defined at "
                f"{self.source}): a symbol has no {key} of its own. Whether a traced function is "
                f"differentiated depends on the tensors you call it with; gradients in a graph "
                f"come from mg.gradients")
        object.__setattr__(self, key, value)

    def __iter__(self) -> Iterator[Node]:
        if not self.shape or self.shape[0] is None:
            raise TracingError(f"cannot iterate over %{self.name} of shape {self.shape}: its "
                               f"length is not known while the graph is built")
        return (self[i] for i in range(self.shape[0]))


# How attrs print: hidden where the type comment already says it, arrays shortened.
_HIDDEN_ATTRS = {"placeholder": ("shape", "dtype"), "variable": ("value",), "capture": ("ref",),
                 "tuple_get": ("shape", "dtype")}


def _format_attr(key: str, value: Any) -> str:
    if key == "index" and isinstance(value, tuple):  # getitem's; tuple_get's is an int
        return S.format_index(value)
    if isinstance(value, np.ndarray):
        if value.size > 4:
            return f"<{S.format_shape(value.shape)} {value.dtype}>"
        return np.array2string(value, separator=", ") if value.ndim else _format_scalar(value)
    return str(value)


def _format_scalar(value: np.ndarray) -> str:
    if value.dtype.kind == "f":
        return np.format_float_positional(value[()], trim="0")  # shortest digits for its dtype
    return str(value[()])


class Graph:
    """Nodes in topological order, with unique names.

    ``outputs`` is empty for a TF1-style graph (you fetch from it in a Session); a traced or
    pruned graph lists its results there, and prints them as a final ``return`` line.
    """

    #: A graph that holds a function body (tracing's FuncGraph) sets this: while it is the
    #: default graph, ``apply`` records every op in it, even on eager tensors or nodes of other
    #: graphs, and its ``lift`` decides how to capture those. A plain graph refuses to mix graphs.
    captures_outer: bool = False

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.outputs: list[Node] = []
        self._by_name: dict[str, Node] = {}
        self._name_counts: dict[str, int] = {}

    # --- building ---------------------------------------------------------------------------

    def add_node(self, op: str | Op, inputs: tuple[Node, ...] = (), attrs: dict | None = None,
                 *, name: str | None = None, source: str | None = None) -> Node:
        """Append ``op(*inputs, **attrs)``; its shape rule runs now, so shape errors show here."""
        op, inputs, attrs = get_op(op), tuple(inputs), dict(attrs or {})
        source = source or user_source()
        name = self._unique_name(name or op.name, f"{op.name} at {source}")
        for x in inputs:
            if not isinstance(x, Node) or x.graph is not self:
                raise GraphError(_context(f"while building %{name} = {op.name}(...)", source,
                                          f"input {x!r} is not a node of this graph; build every "
                                          f"value of one computation in the same graph"))
        if op.attrs is not None:  # declared: check each attr's kind (mg.attrs)
            attrs = A.check(op, attrs, _context(f"while building %{name} = {op.name}(...)",
                                                source, "").rstrip(": "))
        try:
            shape, dtype = op.shape_rule(*inputs, **attrs)
        except (ShapeError, DTypeError, GraphError) as e:
            draft = Node(name, op.name, inputs, attrs, (), None, source)
            raise type(e)(_build_context(draft, str(e))) from None
        except Exception as e:  # a broken shape rule (or bad attrs): still say where
            draft = Node(name, op.name, inputs, attrs, (), None, source)
            raise GraphError(_build_context(draft, f"the shape rule of {op.name!r} raised "
                                                   f"{type(e).__name__}: {e}")) from e
        node = Node(name, op.name, inputs, attrs, tuple(shape), dtype, source)
        node.graph = self
        self.nodes.append(node)
        self._by_name[name] = node
        return node

    def lift(self, value: Any, weak: np.dtype | None = None) -> Node:
        """The node for an operand: a node of this graph as is, anything else as a constant.

        A tracing graph overrides this to capture eager tensors by reference.
        """
        if isinstance(value, Node):
            if value.graph is not self:
                raise GraphError(f"%{value.name} (defined at {value.source}) belongs to another "
                                 f"graph; build every value of one computation in the same graph")
            return value
        try:
            array = S.as_array(value, weak)
        except (ShapeError, DTypeError) as e:
            raise type(e)(f"an operand at {user_source()}: {e}") from None
        return self.add_node("constant", (), {"value": _frozen(array)}, name="const")

    def _unique_name(self, base: str, where: str = "") -> str:
        problem = name_problem(base)
        if problem:
            raise GraphError(f"node name {_short(base)}{f' ({where})' if where else ''} "
                             f"{problem}")
        if base not in self._by_name:
            return base
        for i in itertools.count(self._name_counts.get(base, 0) + 1):
            if f"{base}_{i}" not in self._by_name:
                self._name_counts[base] = i
                return f"{base}_{i}"
        raise AssertionError("unreachable")

    def _drop_unused(self, since: int, keep: list[Node]) -> None:
        """Remove nodes added after index ``since`` that no node in ``keep`` needs.

        ``mg.gradients`` uses it: a vjp builds every input's gradient, wanted or not.
        """
        live, stack = set(), [n for n in keep if n is not None]
        while stack:
            n = stack.pop()
            if id(n) not in live:
                live.add(id(n))
                stack.extend(n.inputs)
        dead = [n for n in self.nodes[since:] if id(n) not in live]
        for n in dead:
            del self._by_name[n.name]
        self.nodes[since:] = [n for n in self.nodes[since:] if id(n) in live]

    # --- looking ----------------------------------------------------------------------------

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        if name not in self._by_name:
            raise GraphError(f"this graph has no node named {name!r}")
        return self._by_name[name]

    def placeholders(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "placeholder"]

    def variables(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "variable"]

    def __contains__(self, node: object) -> bool:
        return isinstance(node, Node) and self._by_name.get(node.name) is node

    def __len__(self) -> int:
        return len(self.nodes)

    def __bool__(self) -> bool:
        return True  # an empty graph is still a graph: `graph or default` must not drop it

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __str__(self) -> str:
        return "\n".join(self._lines())

    def _lines(self, inputs_in_header: bool = False) -> list[str]:
        lines = []
        for n in self.nodes:
            if inputs_in_header and n.op == "placeholder":
                continue
            lines.append(n.describe() + (f"  # {n.type_str()}" if n.dtype is not None else ""))
            for key, sub in n.attrs.items():  # cond, while_loop: their sub-graphs, indented
                if isinstance(sub, Graph):
                    params = ", ".join(f"%{p.name}" for p in sub.placeholders())
                    lines.append(f"  {key}({params}):")
                    lines += ["    " + line for line in sub._lines(inputs_in_header=True)]
        if self.outputs:
            lines.append("return " + ", ".join(f"%{n.name}" for n in self.outputs))
        return lines

    def __repr__(self) -> str:
        return f"<Graph with {len(self.nodes)} nodes>"

    # --- checking ---------------------------------------------------------------------------

    def validate(self) -> None:
        """Check the graph is well formed; raise ``GraphError`` naming the first bad node.

        Checks: unique names, known ops, every input is an earlier node of this graph, and each
        node's shape and dtype are what its op's shape rule gives now.
        """
        seen: dict[str, Node] = {}
        for n in self.nodes:
            where = f"%{n.name} = {n.op}(...) defined at {n.source}"
            if n.name in seen:
                raise GraphError(f"{where}: the name {n.name!r} is used twice")
            if n.op not in OPS:
                raise GraphError(f"{where}: unknown op {n.op!r}; register it with mg.register_op")
            for x in n.inputs:
                if seen.get(x.name) is not x:
                    later = any(m is x for m in self.nodes)
                    problem = "comes later in the list" if later else "is not in this graph"
                    raise GraphError(f"{where}: input %{x.name} {problem}; "
                                     f"nodes must be in topological order")
            try:
                shape, dtype = OPS[n.op].shape_rule(*n.inputs, **n.attrs)
            except MinigraphError as e:
                raise GraphError(f"{where}: its shape rule now fails: {e}") from e
            if (tuple(shape), dtype) != (n.shape, n.dtype):
                raise GraphError(f"{where}: records {n.type_str()} but its shape rule gives "
                                 f"{S.format_shape(shape)} {dtype}")
            seen[n.name] = n
        for n in self.outputs:
            if seen.get(n.name) is not n:
                raise GraphError(f"output %{n.name} is not a node of this graph")

    # --- the default graph ------------------------------------------------------------------

    @contextlib.contextmanager
    def as_default(self) -> Iterator[Graph]:
        """Inside ``with g.as_default():`` builders like ``mg.placeholder`` add nodes to ``g``."""
        _stack.append(self)
        try:
            yield self
        finally:
            _stack.pop()


def expect_graph(obj: Any, what: str) -> Graph:
    """``obj`` if it is a Graph; else a ``GraphError`` saying what ``what`` takes instead."""
    if isinstance(obj, Graph):
        return obj
    hint = ("pass its graph: f.get_graph(example_input)" if hasattr(obj, "get_graph") else
            "pass loaded.graph" if hasattr(obj, "graph") and isinstance(obj.graph, Graph) else
            "build one with mg.Graph(), or trace a function with mg.function")
    raise GraphError(f"{what} at {user_source()} takes an mg.Graph, got {type(obj).__name__}; "
                     f"{hint}")


def name_problem(name: Any) -> str | None:
    """What is wrong with ``name`` as a node name, or ``None``: a node name is a Python
    identifier (codegen turns it into a variable, renaming keywords such as ``lambda``), not a
    ``__dunder__`` name (Python's own), and written the way Python reads it: Python folds
    ``ｘ`` (fullwidth) into ``x`` (NFKC), so two such nodes would be one variable in code.

    >>> name_problem("h1"), name_problem("__import__")
    (None, "is a __dunder__ name (Python's own): drop the underscores (import)")
    """
    if not isinstance(name, str):
        return f"must be a Python identifier (a str), not a {type(name).__name__}"
    if not name.isidentifier():
        return "must be a Python identifier (letters, digits, _)"
    if name.startswith("__") and name.endswith("__"):
        return f"is a __dunder__ name (Python's own): drop the underscores ({name.strip('_')})"
    normal = unicodedata.normalize("NFKC", name)
    if normal != name:
        return (f"is read by Python as {normal!r} (NFKC normal form), so it could stand for "
                f"another node in generated code: name it {normal!r}")
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _context(head: str, source: str, message: str) -> str:
    return f"{head} defined at {source}: {message}"


def _build_context(node: Node, message: str) -> str:
    inputs = "; ".join(f"%{x.name} is {x.type_str()} (defined at {x.source})" for x in node.inputs)
    return _context(f"while building {node.describe()}", node.source, message) + (
        f"\n  inputs: {inputs}" if inputs else "")


def _frozen(value: np.ndarray) -> np.ndarray:
    """A read-only copy: constants and variable values must not change behind the graph's back."""
    value = np.array(value)
    value.flags.writeable = False
    return value


_default = Graph()
_stack: list[Graph] = []


def get_default_graph() -> Graph:
    """The graph that builders add to: the innermost ``as_default()``, else a global one."""
    return _stack[-1] if _stack else _default


def reset_default_graph() -> None:
    """Start a fresh global default graph (TF1's ``tf.compat.v1.reset_default_graph``)."""
    global _default
    if _stack:
        raise GraphError("reset_default_graph() was called inside `with graph.as_default():`; "
                         "call it outside the block")
    _default = Graph()


# --- static-mode builders ---------------------------------------------------------------------


def placeholder(shape: Any, dtype: Any = "float32", name: str | None = None) -> Node:
    """A value fed at run time: ``mg.placeholder((None, 2))`` takes any number of rows."""
    label = f"placeholder {f'{name} ' if name else ''}at {user_source()}"
    try:
        shape = S.check_shape(shape)
    except ShapeError as e:
        raise ShapeError(f"{label}: {e}") from None
    try:
        name_of = np.dtype(dtype).name
    except (TypeError, ValueError):
        name_of = None
    if name_of not in A.DTYPES:
        raise DTypeError(f"{label}: dtype {dtype!r} is not a numeric numpy dtype name such as "
                         f"'float32' or 'int64'")
    attrs = {"shape": shape, "dtype": name_of}
    return get_default_graph().add_node("placeholder", (), attrs, name=name or "placeholder")


def constant(value: Any, dtype: Any = None, name: str | None = None) -> Node:
    """A fixed array in the graph; Python floats become float32, numpy arrays keep their dtype."""
    attrs = {"value": _frozen(_array("mg.constant", value, dtype))}
    return get_default_graph().add_node("constant", (), attrs, name=name or "const")


def Variable(initial_value: Any, name: str | None = None, dtype: Any = None) -> Node:  # noqa: N802
    """State that lives in each Session: set by the initializer, changed by ``mg.assign*``.

    NB: like TF1's ``tf.Variable``, it has no value until ``global_variables_initializer()``
    runs in a Session, and two Sessions hold two independent values.
    """
    attrs = {"value": _frozen(_array("mg.Variable", initial_value, dtype))}
    return get_default_graph().add_node("variable", (), attrs, name=name or "variable")


def _array(what: str, value: Any, dtype: Any) -> np.ndarray:
    try:
        return S.as_array(value, dtype=dtype)
    except (ShapeError, DTypeError) as e:
        raise type(e)(f"{what} at {user_source()}: {e}") from None
    except (TypeError, ValueError) as e:  # numpy could not convert to the dtype you asked for
        raise DTypeError(f"{what} at {user_source()}: cannot make a {dtype} array of this "
                         f"value ({e})") from None


def _state_op(op: str, ref: Any, value: Any, name: str | None) -> Node:
    if not isinstance(ref, Node) or ref.op != "variable":
        raise GraphError(f"mg.{op} at {user_source()} needs a Variable as its first argument, "
                         f"got {ref!r}; create one with mg.Variable(initial_value)")
    graph = ref.graph
    return graph.add_node(op, (ref, graph.lift(value, ref.dtype)), name=name)


def assign(ref: Node, value: Any, name: str | None = None) -> Node:
    """A node that, when run, stores ``value`` in the variable ``ref`` (and returns it)."""
    return _state_op("assign", ref, value, name)


def assign_sub(ref: Node, value: Any, name: str | None = None) -> Node:
    """A node that, when run, does ``ref -= value`` (the update of gradient descent)."""
    return _state_op("assign_sub", ref, value, name)


def group(*inputs: Node, name: str | None = None) -> Node:
    """A node that runs all ``inputs`` and produces nothing: one fetch for many updates."""
    graph = inputs[0].graph if inputs and isinstance(inputs[0], Node) else get_default_graph()
    return graph.add_node("group", inputs, name=name)


def global_variables_initializer(name: str = "init") -> Node:
    """A node that sets each Variable created *so far* in the default graph to its initial value."""
    graph = get_default_graph()
    return graph.add_node("initializer", tuple(graph.variables()), name=name)
