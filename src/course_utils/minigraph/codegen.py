"""Codegen: a graph as the source of one plain Python function over numpy.

The Interpreter looks up every node's op at run time; generated code has done that once, ahead of
time: each node is one line that calls numpy directly, a value is deleted after its last use, and
an elementwise op whose input dies with it writes its result into that input's buffer (``out=``).

>>> import course_utils.minigraph as mg
>>> with mg.Graph().as_default() as g:
...     x = mg.placeholder((None, 2), name="x")
...     w = mg.Variable(np.ones((2, 3)), name="w")
...     h = mg.relu(x @ w + 1.0, name="h")
...     g.outputs = [mg.sum(h, axis=1, name="s")]
>>> f = mg.codegen(g)
>>> print(f.source)
def forward(x, state):
    w = state['w']
    matmul = np.matmul(x, w)
    add = np.add(matmul, const, out=matmul); del matmul
    h = np.maximum(add, 0, out=add); del add
    s = np.sum(h, axis=1); del h
    return [s]
>>> f(np.array([[1.0, 2.0]], np.float32))   # Variables start at their initial values
array([12.])

NB: the minigraph counterpart of ``torch.fx.GraphModule.code`` and TorchScript's ``.code``;
TorchInductor and XLA go one step further and generate the kernels themselves.
"""

from __future__ import annotations

import itertools
import keyword
import linecache
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from . import attrs as A
from . import session
from . import shapes as S
from .errors import (
    ArgumentError,
    ExecutionError,
    GraphError,
    MinigraphError,
    MissingFeedError,
    user_source,
)
from .graph import Graph, Node, expect_graph
from .interpreter import _uninitialized
from .memory import Spec
from .ops import _BUILTIN as _BUILTIN_NAMES
from .ops import OPS, conform

# --- how each op is written -------------------------------------------------------------------
# An op whose impl is a numpy ufunc needs no entry: it is written ``np.<ufunc>(args)`` and may
# write into an input's buffer. The ops below have a template; any other op calls its impl.

#: ops that are a ufunc with an extra literal operand: (ufunc, the operand)
UFUNC_FORMS: dict[str, tuple[np.ufunc, str]] = {"relu": (np.maximum, "0")}


def _axis_kw(k: dict) -> str:
    axis = "" if k.get("axis") is None else f", axis={k['axis']!r}"
    return axis + (", keepdims=True" if k.get("keepdims") else "")


def _axes_arg(k: dict) -> str:
    return "" if k.get("axes") is None else f", {k['axes']!r}"


def _index(index: tuple) -> str:
    return S.format_index(index) if index else "[()]"


# fmt: off
TEMPLATES: dict[str, Callable[[list[str], dict], str]] = {
    "identity":       lambda a, k: a[0],
    "where":          lambda a, k: f"np.where({a[0]}, {a[1]}, {a[2]})",
    "cast":           lambda a, k: f"{a[0]}.astype({k['dtype']!r})",
    "sum":            lambda a, k: f"np.sum({a[0]}{_axis_kw(k)})",
    "mean":           lambda a, k: f"np.mean({a[0]}{_axis_kw(k)})",
    "max":            lambda a, k: f"np.max({a[0]}{_axis_kw(k)})",
    "transpose":      lambda a, k: f"np.transpose({a[0]}{_axes_arg(k)})",
    "reshape":        lambda a, k: f"np.reshape({a[0]}, {k['shape']!r})",
    "getitem":        lambda a, k: f"{a[0]}{_index(k['index'])}",
    "expand_dims":    lambda a, k: f"np.expand_dims({a[0]}, {k['axis']!r})",
    "squeeze":        lambda a, k: f"np.squeeze({a[0]}, {k['axis']!r})",
    "broadcast_to":   lambda a, k: f"np.broadcast_to({a[0]}, {k['shape']!r}).copy()",
    "broadcast_like": lambda a, k: f"np.broadcast_to({a[0]}, {a[1]}.shape).copy()",
    "ones_like":      lambda a, k: f"np.ones_like({a[0]})",
    "concat":         lambda a, k: f"np.concatenate(({', '.join(a)},), axis={k.get('axis', 0)})",
}
# fmt: on

#: numpy returns exactly the shape rule's dtype for these ops, whatever the input dtypes...
EXACT_DTYPE = {"identity", "transpose", "reshape", "getitem", "expand_dims", "squeeze",
               "broadcast_to", "broadcast_like", "ones_like", "getitem_grad", "cast", "one_hot",
               "size", "softmax", "log_softmax", "cross_entropy", "mean"}
#: ... and for these when every float input already has the result's dtype (int sums widen).
FLOAT_EXACT = {"sum", "max", "unbroadcast", "where", "concat", "sigmoid", "logsumexp", "var",
               "conv2d", "conv2d_input_grad", "conv2d_weight_grad", "max_pool2d", "avg_pool2d",
               "max_pool2d_grad", "max_pool2d_select", "avg_pool2d_grad"}
#: Ops whose result never shares memory with an input (so a dead input's buffer may be reused).
NON_ALIASING = {"where", "cast", "sum", "mean", "max", "softmax", "log_softmax", "cross_entropy",
                "unbroadcast", "broadcast_like", "broadcast_to", "concat", "getitem_grad",
                "ones_like", "size", "one_hot", "sigmoid", "assign", "assign_sub", "logsumexp",
                "var", "conv2d", "conv2d_input_grad", "conv2d_weight_grad", "max_pool2d",
                "avg_pool2d", "max_pool2d_grad", "max_pool2d_select", "avg_pool2d_grad"}
#: Ops whose array result is new and writable (a later op may write into it once it is dead).
FRESH = NON_ALIASING - {"assign", "assign_sub", "size"}

# The tables above describe the built-in ops. An op redefined with register_op(replace=True) is
# just an impl to call, like any op registered later.
_BUILTINS = {name: OPS[name] for name in _BUILTIN_NAMES}


def _builtin(op: str, table: Mapping[str, Any] | set[str]) -> bool:
    """Is ``op`` in ``table`` and still the built-in op the table was written for?"""
    return op in table and OPS[op] is _BUILTINS.get(op)


class Stmt(NamedTuple):
    """One line of generated code: ``var = op(*args, **attrs)``."""

    var: str
    op: str
    args: tuple[str, ...]  # names of values
    attrs: dict[str, Any]
    shape: S.Shape
    dtype: np.dtype | None
    node: Node | None  # the graph node it computes (part of), for error messages


def _ufunc_form(stmt: Stmt) -> tuple[np.ufunc, list[str]] | None:
    impl = OPS[stmt.op].impl
    if isinstance(impl, np.ufunc) and impl.nout == 1 and getattr(np, impl.__name__, None) is impl:
        return impl, list(stmt.args)
    if _builtin(stmt.op, UFUNC_FORMS):
        ufunc, extra = UFUNC_FORMS[stmt.op]
        return ufunc, [*stmt.args, extra]
    return None


class _Namespace:
    """Python names for values and globals: node names where possible, never a keyword."""

    def __init__(self, reserved: Sequence[str] = ()) -> None:
        self.globals: dict[str, Any] = {"np": np, "conform": conform}
        self.taken = set(keyword.kwlist) | set(self.globals) | set(reserved) | {"forward",
                                                                               "kernel"}

    def name(self, base: str) -> str:
        # Python reads identifiers in NFKC form (``ｘ`` is ``x``): compare names as Python will.
        base = unicodedata.normalize("NFKC", base)
        if not base.isidentifier() or (base.startswith("__") and base.endswith("__")):
            base = f"v_{base.strip('_')}" if base.strip("_").isidentifier() else "v"
        for candidate in itertools.chain([base], (f"{base}_{i}" for i in itertools.count(1))):
            if candidate not in self.taken:
                self.taken.add(candidate)
                return candidate
        raise AssertionError("unreachable")

    def bind(self, base: str, value: Any) -> str:
        """A new global holding ``value``; returns its name."""
        name = self.name(base)
        self.globals[name] = value
        return name

    def bind_once(self, base: str, value: Any) -> str:
        """The global holding ``value`` (a function), bound on first use."""
        for name, bound in self.globals.items():
            if bound is value:
                return name
        return self.bind(base, value)


def _literal(value: Any) -> str | None:
    """Source text that evaluates to ``value``, for plain Python values; ``None`` otherwise.

    This is the only way a value gets into generated source: ``repr`` of a bool, int, finite
    float, str (a quoted literal, whatever it holds), ``...``, a slice of ints, or a tuple of
    those. Anything else is passed by reference (a global of the generated module), so no value
    can ever become code, whatever a loaded file holds.
    """
    if value is None or type(value) in (bool, int, str):  # exact types: no repr() overrides
        return repr(value)
    if type(value) is float and np.isfinite(value):  # repr(inf) is not valid Python
        return repr(value)
    if value is Ellipsis:
        return "..."
    if type(value) is slice:
        parts = (value.start, value.stop, value.step)
        if all(p is None or type(p) is int for p in parts):
            return repr(value)
        return None
    if type(value) is tuple:
        parts = [_literal(v) for v in value]
        if None not in parts:
            return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
    return None


def _checked_literals(stmt: Stmt) -> bool:
    """Are all of ``stmt``'s attrs of the kinds its op declares, and plain literals? Only then
    may a template write them into the source (an index of ints, never a string in a slice)."""
    try:
        checked = A.check(OPS[stmt.op], stmt.attrs, stmt.op)  # names too: identifiers only
    except MinigraphError:
        return False
    return all(_literal(v) is not None and type(checked[k]) is type(v) and checked[k] == v
               for k, v in stmt.attrs.items())


class _Writer:
    """Turns statements into the lines of one function; decides ``out=`` buffers and ``del``s."""

    def __init__(self, ns: _Namespace, specs: dict[str, Spec], locals_: set[str]) -> None:
        self.ns, self.specs, self.locals = ns, specs, locals_

    def function(self, name: str, params: list[str], stmts: list[Stmt],
                 results: list[str], ret: str) -> tuple[str, dict[int, Stmt]]:
        last_use: dict[str, int] = {}
        readers: dict[str, list[Stmt]] = {}
        for i, s in enumerate(stmts):
            for a in s.args:
                last_use[a] = i
                readers.setdefault(a, []).append(s)
        keep = set(results)
        owned: set[str] = set()  # values this function allocated, that nothing else can see
        lines, line_stmt = [f"def {name}({', '.join(params)}):"], {}
        for i, s in enumerate(stmts):
            out = self._out_buffer(s, i, owned, last_use, readers, keep)
            unused = s.var not in last_use and s.var not in keep
            line = f"    {'' if unused else s.var + ' = '}{self._expr(s, out)}"
            if (_ufunc_form(s) or _builtin(s.op, FRESH)) and len(s.shape) >= 1:
                owned.add(s.var)
            dead = [a for a in dict.fromkeys(s.args)
                    if last_use[a] == i and a in self.locals and a not in keep]
            lines.append(line + (f"; del {', '.join(dead)}" if dead else ""))
            line_stmt[len(lines)] = s
        lines.append(f"    return {ret}")
        return "\n".join(lines), line_stmt

    def _out_buffer(self, s: Stmt, i: int, owned: set[str], last_use: dict[str, int],
                    readers: dict[str, list[Stmt]], keep: set[str]) -> str | None:
        """An input whose buffer can take the result: allocated here, dead after this line,
        of the result's shape and dtype, and read only by ops that never keep a view of it."""
        form = _ufunc_form(s)
        if form is None or s.dtype is None or not s.shape or self._dtype(s, form) != s.dtype:
            return None
        values = [a for a in form[1] if a in self.specs]
        for a in dict.fromkeys(values):
            spec = self.specs[a]
            if (a not in owned or last_use[a] != i or a in keep or spec != (s.shape, s.dtype)
                    or not all(_reads_only(r) for r in readers[a])):
                continue
            if all(S.broadcast_keeps(spec.shape, self.specs[b].shape) for b in values if b != a):
                return a
        return None

    def _dtype(self, s: Stmt, form: tuple[np.ufunc, list[str]]) -> np.dtype | None:
        ufunc, args = form
        dtypes = tuple(self.specs[a].dtype if a in self.specs else int for a in args)
        try:
            return ufunc.resolve_dtypes((*dtypes, None))[-1]
        except (TypeError, ValueError):  # no loop for these dtypes: let the call report it
            return None

    def _expr(self, s: Stmt, out: str | None) -> str:
        """The right-hand side of ``s``, converted to its static dtype where numpy differs."""
        a = list(s.args)
        if s.op in _STATE_EXPR:
            return _STATE_EXPR[s.op](self, s)
        form = _ufunc_form(s)
        if form is not None:
            ufunc, args = form
            tail = f", out={out}" if out else ""
            expr = f"np.{ufunc.__name__}({', '.join(args)}{tail})"
            exact = self._dtype(s, form) == s.dtype
            return expr if exact or s.dtype is None else f"{expr}.astype({s.dtype.name!r})"
        checked = _checked_literals(s)  # only checked literals reach the source, as repr
        if _builtin(s.op, TEMPLATES) and checked:
            expr = TEMPLATES[s.op](a, s.attrs)
        else:
            impl = self.ns.bind_once(f"{s.op}_impl", OPS[s.op].impl)
            if checked:
                kwargs = [f"{k}={self._value(k, v)}" for k, v in s.attrs.items()]
            else:  # anything else is a global of the module, passed by reference
                kwargs = [f"**{self.ns.bind('attrs', dict(s.attrs))}"] if s.attrs else []
            expr = f"{impl}({', '.join(a + kwargs)})"
        floats = [self.specs[x].dtype for x in a if S.is_float(self.specs[x].dtype)]
        exact = _builtin(s.op, EXACT_DTYPE) or (_builtin(s.op, FLOAT_EXACT) and
                                                S.is_float(s.dtype) and
                                                all(d == s.dtype for d in floats))
        if exact or s.dtype is None:
            return expr
        return f"conform({expr}, {s.shape!r}, {s.dtype.name!r})"

    def _value(self, key: str, value: Any) -> str:
        literal = _literal(value)
        return literal if literal is not None else self.ns.bind(key, value)


def _reads_only(stmt: Stmt) -> bool:
    return _ufunc_form(stmt) is not None or _builtin(stmt.op, NON_ALIASING)


# State ops read and write the ``state`` dict (a Session's Variables); helpers below do the work.
_STATE_EXPR: dict[str, Callable[[_Writer, Stmt], str]] = {
    "variable": lambda w, s: f"state[{s.node.name!r}]",
    "assign": lambda w, s: f"_assign(state, {s.node.inputs[0].name!r}, {s.args[0]})",
    "assign_sub": lambda w, s: f"_assign_sub(state, {s.node.inputs[0].name!r}, {s.args[0]})",
    "initializer": lambda w, s: f"_initialize(state, {w._value('initial_values', s.attrs)})",
    "group": lambda w, s: "None",
}
_STATE_HELPERS = ("_assign", "_assign_sub", "_initialize")


def _state_helpers(graph: Graph) -> dict[str, Callable]:
    """``_assign``, ``_assign_sub`` and ``_initialize``, knowing the graph's Variables."""
    variables = {v.name: v for v in graph.variables()}

    def store(state: dict, name: str, value: np.ndarray) -> np.ndarray:
        var = variables[name]
        if value.shape != var.shape:
            raise ValueError(f"a value of shape {value.shape} cannot go in %{name} of shape "
                             f"{var.shape}")
        value.flags.writeable = False
        state[name] = value
        return value

    def assign(state: dict, name: str, value: Any) -> np.ndarray:
        return store(state, name, np.array(value, dtype=variables[name].dtype))  # a copy

    def assign_sub(state: dict, name: str, value: Any) -> np.ndarray:
        # state[name] raises KeyError when uninitialized; CompiledGraph explains it.
        return store(state, name, np.asarray(state[name] - value, dtype=variables[name].dtype))

    def initialize(state: dict, values: Mapping[str, np.ndarray]) -> None:
        state.update(values)

    return {"_assign": assign, "_assign_sub": assign_sub, "_initialize": initialize}


# --- from a graph to statements -----------------------------------------------------------------


def _program_stmts(program: Any, args: list[str], base: str, result: str, node: Node | None,
                   ns: _Namespace, specs: dict[str, Spec]) -> list[Stmt]:
    """The steps of a fused node's program as statements over the values named ``args``."""
    slots, stmts = list(args), []
    step_specs = program.step_specs([specs[a] for a in args])
    for j, (step, spec) in enumerate(zip(program.steps, step_specs, strict=True)):
        if step.op == "constant":
            var = ns.bind(step.name or f"{base}_c{j}", step.attrs["value"])
        else:
            last = j == len(program.steps) - 1
            var = result if result and last else ns.name(step.name or f"{base}_t{j}")
            stmts.append(Stmt(var, step.op, tuple(slots[i] for i in step.args), step.attrs,
                              spec.shape, spec.dtype, node))
        specs[var] = spec
        slots.append(var)
    return stmts


def _reads_value(var: Node, user: Node) -> bool:
    """Does ``user`` need the variable's value? (The initializer and assign targets do not.)"""
    if user.op in ("initializer", "group"):
        return False
    return not (user.op in ("assign", "assign_sub") and user.inputs[0] is var and
                var not in user.inputs[1:])


def _graph_stmts(graph: Graph, params: list[str], ns: _Namespace,
                 names: dict[str, str], specs: dict[str, Spec]) -> list[Stmt]:
    users: dict[str, list[Node]] = {n.name: [] for n in graph.nodes}
    for n in graph.nodes:
        for x in n.inputs:
            users[x.name].append(n)
    outputs = {n.name for n in graph.outputs}
    stmts = []
    for n in graph.nodes:
        var, spec = names[n.name], Spec(n.shape, n.dtype)
        args = tuple(names[x.name] for x in n.inputs)
        if n.op == "placeholder":
            specs[var] = spec
        elif n.op == "constant":
            ns.globals[var], specs[var] = n.attrs["value"], spec
        elif n.op == "variable":
            if n.name in outputs or any(_reads_value(n, u) for u in users[n.name]):
                stmts.append(Stmt(var, n.op, (), {}, n.shape, n.dtype, n))
                specs[var] = spec
        elif n.op == "fused":
            stmts += _program_stmts(n.attrs["program"], list(args), var, var, n, ns, specs)
        else:
            if n.op in ("assign", "assign_sub"):
                args = args[1:]  # the target is named, not read
            elif n.op in ("group", "initializer"):
                args = ()
            attrs = {x.name: x.attrs["value"] for x in n.inputs} if n.op == "initializer" \
                else n.attrs
            stmts.append(Stmt(var, n.op, args, attrs, n.shape, n.dtype, n))
            specs[var] = spec
    return stmts


# --- compiled graphs ----------------------------------------------------------------------------

_counter = itertools.count()


def _compile(source: str, ns: _Namespace, what: str) -> tuple[Callable, str]:
    """``exec`` the source; register it with linecache so tracebacks show the generated lines."""
    filename = f"<minigraph {what} {next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns.globals)  # noqa: S102 (our own generated code)
    return ns.globals[what], filename


class CompiledGraph:
    """A graph turned into one Python function over numpy; ``source`` is its code.

    Call it with one array per input (``inputs`` names them, in order); ``state`` holds the
    Variables (a Session's ``sess.state``; by default a fresh dict of their initial values).
    One output is returned as is, several as a tuple. ``run(feeds, state)`` is the Session's
    executor protocol: feeds by placeholder name, a list of outputs back.
    """

    def __init__(self, graph: Graph, inputs: list[str]) -> None:
        self.graph, self.inputs = graph, inputs
        self.outputs = [n.name for n in graph.outputs]
        self.has_state = any(OPS[n.op].stateful for n in graph.nodes)
        ns = _Namespace(reserved=("state", *_STATE_HELPERS))
        names = {n.name: ns.name(n.name) for n in graph.nodes}
        params = [names[i] for i in inputs]
        specs: dict[str, Spec] = {}
        stmts = _graph_stmts(graph, params, ns, names, specs)
        ns.globals.update(_state_helpers(graph))
        # Only what the function computes is deleted: feeds and state are held by the caller.
        locals_ = {s.var for s in stmts if s.op != "variable"}
        results = [names[n.name] for n in graph.outputs]
        ret = ", ".join(f"np.asarray({r})" if specs[r].shape == () and specs[r].dtype is not None
                        else r for r in results)
        writer = _Writer(ns, specs, locals_)
        self.source, line_stmt = writer.function(
            "forward", params + (["state"] if self.has_state else []), stmts, results,
            f"[{ret}]")
        self._line_node = {line: s.node for line, s in line_stmt.items()}
        self._fn, self._filename = _compile(self.source, ns, "forward")

    def __call__(self, *args: Any, state: dict | None = None) -> Any:
        if len(args) != len(self.inputs):
            raise ArgumentError(f"this compiled graph takes {len(self.inputs)} inputs "
                                f"({', '.join(self.inputs)}), got {len(args)} at "
                                f"{user_source()}")
        feeds = {name: session._check_feed(self.graph.node(name), a)
                 for name, a in zip(self.inputs, args, strict=True)}
        if state is None:
            state = {v.name: v.attrs["value"] for v in self.graph.variables()}
        elif not isinstance(state, dict):
            raise ArgumentError(f"state at {user_source()} is a {type(state).__name__}; it is a "
                                f"dict from Variable names to arrays (a Session's sess.state)")
        values = self.run(feeds, state)
        return values[0] if len(values) == 1 else tuple(values)

    def run(self, feeds: Mapping[str, np.ndarray], state: dict[str, np.ndarray]) -> list[Any]:
        """The values of the graph's outputs, in order (the executor protocol of Session)."""
        try:
            args = [feeds[name] for name in self.inputs]
        except KeyError as e:
            node = self.graph.node(e.args[0])
            raise MissingFeedError(f"placeholder %{node.name} ({node.type_str()}, defined at "
                                   f"{node.source}) has no value: feed it") from None
        try:
            return self._fn(*args, state) if self.has_state else self._fn(*args)
        except MinigraphError:
            raise
        except Exception as e:
            explained = self._explain(e)
            if explained is None:
                raise
            raise explained from e

    def _explain(self, error: Exception) -> MinigraphError | None:
        """The error again, naming the node whose line of generated code raised it."""
        line, tb = None, error.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self._filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        node = self._line_node.get(line)
        if node is None:
            return None
        if isinstance(error, KeyError) and node.op in ("variable", "assign_sub"):
            var = node if node.op == "variable" else node.inputs[0]
            readers = [n for n in self.graph.nodes if var in n.inputs and _reads_value(var, n)]
            return _uninitialized(var, node if node is not var else
                                  (readers[0] if readers else None))
        return ExecutionError(f"while executing {node.describe()} defined at {node.source}: "
                              f"{type(error).__name__}: {error}")

    def __repr__(self) -> str:
        return (f"<CompiledGraph ({', '.join(self.inputs)}) -> ({', '.join(self.outputs)}), "
                f"{len(self.source.splitlines())} lines: print(f.source)>")


def codegen(graph: Graph, inputs: Sequence[Node | str] | None = None,
            outputs: Sequence[Node | str] | None = None) -> CompiledGraph:
    """Generate, ``exec`` and return the Python function that computes ``graph``'s outputs.

    ``inputs`` are the function's parameters, in order: by default the graph's placeholders;
    any node may be fed instead (what it needs is then left out, as ``Session.run`` does).
    ``outputs`` default to ``graph.outputs``. The source depends only on the graph, so the same
    graph always gives the same code.
    """
    graph = expect_graph(graph, "mg.codegen")
    if inputs is not None or outputs is not None:
        outs = [_node(graph, o) for o in outputs] if outputs is not None else list(graph.outputs)
        fed = [_node(graph, i).name for i in inputs or ()]
        graph = session.prune(graph, outs, fed)
    if not graph.outputs:
        raise GraphError("codegen needs the values to return: pass outputs=[...] or set "
                         "graph.outputs")
    names = [_node(graph, i).name for i in inputs] if inputs is not None else \
        [p.name for p in graph.placeholders()]
    missing = [p for p in graph.placeholders() if p.name not in names]
    if missing:
        p = missing[0]
        raise MissingFeedError(f"codegen: the outputs need placeholder %{p.name} ({p.type_str()}, "
                               f"defined at {p.source}); add it to inputs")
    return CompiledGraph(graph, names)


def _node(graph: Graph, key: Node | str) -> Node:
    if isinstance(key, Node):  # by name: a pruned graph holds copies of the nodes
        key = key.name
    if not isinstance(key, str):
        raise GraphError(f"mg.codegen at {user_source()}: inputs and outputs are nodes of the "
                         f"graph or their names, got {key!r:.60}")
    if key not in graph._by_name:
        raise GraphError(f"mg.codegen at {user_source()}: this graph has no node named "
                         f"{key!r:.60}; print(graph) lists them")
    return graph.node(key)


# --- fused kernels ------------------------------------------------------------------------------


def compile_program(program: Any) -> tuple[Callable, str]:
    """One function for a fused node's program: ``kernel(*inputs) -> result``, and its source."""
    ns = _Namespace()
    params = [ns.name(f"x{i}") for i in range(len(program.input_specs))]
    specs = dict(zip(params, program.input_specs, strict=True))
    stmts = _program_stmts(program, params, "t", "", None, ns, specs)
    result = stmts[-1].var
    source, _ = _Writer(ns, specs, {s.var for s in stmts}).function(
        "kernel", params, stmts, [result], result)
    return _compile(source, ns, "kernel")[0], source


def _executor(graph: Graph) -> CompiledGraph:
    return codegen(graph)


session.EXECUTORS["codegen"] = _executor  # Session(graph, executor="codegen")
