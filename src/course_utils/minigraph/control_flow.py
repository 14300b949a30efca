"""Control flow as graph ops: ``mg.cond`` and ``mg.while_loop`` hold their bodies as sub-graphs.

A trace records the one path Python took, so a Python ``if`` on a traced value cannot work
(``bool()`` of a symbol raises ``TracingError``). These ops put both branches, or the loop's test
and body, into the graph, and decide when the graph runs. In eager mode they are plain Python.

>>> import course_utils.minigraph as mg
>>> @mg.function
... def f(x):
...     return mg.cond(mg.sum(x) > 0, lambda: x * 2.0, lambda: -x)
>>> f(mg.tensor([1.0, 2.0])), f(mg.tensor([-1.0, -2.0]))   # one trace, two branches
(tensor([2., 4.], dtype=float32), tensor([1., 2.], dtype=float32))
>>> print(f.get_graph(mg.tensor([0.0, 0.0])))
%x = placeholder()  # (2,) float32
%sum = sum(%x)  # () float32
%const = constant(value=0.0)  # () float32
%greater = greater(%sum, %const)  # () bool
%cond = cond(%greater, %x)
  true_fn(%x):
    %const = constant(value=2.0)  # () float32
    %mul = mul(%x, %const)  # (2,) float32
    return %mul
  false_fn(%x):
    %neg = neg(%x)  # (2,) float32
    return %neg
%cond_out = tuple_get(%cond, index=0)  # (2,) float32
return %cond_out

A branch reads outer values (here ``x``) by capture: they become the cond's operands and the
sub-graphs' inputs. A cond or while_loop node's value is the tuple of its results, which
``tuple_get`` nodes read.

NB: TensorFlow's ``If``/``While`` ops (``tf.cond``, ``tf.while_loop``) hold their branches as
functions the same way; JAX's ``lax.cond``/``lax.while_loop`` hold jaxprs.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

import course_utils.minigraph as mg

from . import attrs as A
from . import shapes as S
from .eager import Tensor
from .errors import (
    ArgumentError,
    DTypeError,
    GradientError,
    GraphError,
    ShapeError,
    TracingError,
    user_source,
)
from .graph import Graph, Node, get_default_graph
from .interpreter import Interpreter, memory_limit
from .ops import Op, register_op
from .tracing import inline, leaves, pack, structure

# --- tracing a body into a sub-graph -------------------------------------------------------------


class BranchGraph(Graph):
    """A sub-graph being traced: a cond branch, a loop's test or body.

    Its inputs are its placeholders, in order. A value it reads from an enclosing graph (or an
    eager tensor) is captured: the enclosing graph lifts it, and it becomes one more input here.
    NB: TensorFlow traces the branches of ``tf.cond`` into FuncGraphs the same way.
    """

    captures_outer = True

    def __init__(self, parent: Graph) -> None:
        super().__init__()
        self.parent = parent
        # id(value) -> (value, its node in the parent, its placeholder here)
        self.captured: dict[int, tuple[Any, Node, Node]] = {}

    def lift(self, value: Any, weak: np.dtype | None = None) -> Node:
        if isinstance(value, Node) and value.graph is self:
            return value
        if not isinstance(value, (Node, Tensor)):
            return super().lift(value, weak)  # numbers and arrays: constants
        if id(value) not in self.captured:
            outer = self.parent.lift(value)
            inner = _placeholder_like(self, outer, outer.name)
            self.captured[id(value)] = (value, outer, inner)
        return self.captured[id(value)][2]


def _placeholder_like(graph: Graph, node: Node, name: str) -> Node:
    if node.dtype is None:
        raise TracingError(f"%{node.name} ({node.op}) has no single value to use here; read "
                           f"one of its results with tuple_get")
    attrs = {"shape": node.shape, "dtype": node.dtype.name}
    return graph.add_node("placeholder", (), attrs, name=name, source=node.source)


def _trace(fn: Callable, parent: Graph, params: list[Node], names: list[str]) -> tuple:
    """Run ``fn`` on placeholders like ``params`` in a new BranchGraph: ``(graph, result)``."""
    graph = BranchGraph(parent)
    with graph.as_default():
        result = fn(*[_placeholder_like(graph, p, n) for p, n in zip(params, names, strict=True)])
        graph.outputs = [graph.lift(v) for _, v in leaves(result)]
    return graph, result


def _finish(graphs: list[BranchGraph], n_params: int) -> tuple[list[Graph], list[Node]]:
    """Give traced bodies one input list: their params, then everything any of them captured.

    Returns the rebuilt graphs (placeholders first, in that order) and the captured outer nodes,
    which become the op's extra operands.
    """
    captured: dict[int, Node] = {}
    for g in graphs:
        for _, outer, _ in g.captured.values():
            captured.setdefault(id(outer), outer)
    finished = []
    for g in graphs:
        new = Graph()
        params = [_placeholder_like(new, p, p.name) for p in g.placeholders()[:n_params]]
        inner = {id(outer): p for _, outer, p in g.captured.values()}
        extra = {key: _placeholder_like(new, outer, inner[key].name if key in inner else outer.name)
                 for key, outer in captured.items()}
        args = params + [extra[id(outer)] for _, outer, _ in g.captured.values()]
        new.outputs = inline(g, args, new)
        finished.append(new)
    return finished, list(captured.values())


def _results(node: Node, n: int, names: list[str] | None) -> list[Node]:
    """One ``tuple_get`` per result; it records the result's type, as a placeholder does."""
    return [node.graph.add_node("tuple_get", (node,), {"index": i, "shape": shape,
                                                       "dtype": dtype.name},
                                source=node.source, name=names[i] if names else f"{node.name}_out")
            for i, (shape, dtype) in enumerate(result_types(node)[:n])]


def _enclosing_graph(*values: Any) -> Graph | None:
    """Where a control-flow op goes: the graph being traced, else a symbolic input's graph;
    ``None`` in eager mode."""
    default = get_default_graph()
    if default.captures_outer:
        return default
    return next((v.graph for v in values if isinstance(v, Node)), None)


def _function(fn: Any, what: str, n_args: int, where: str) -> None:
    """Check that ``fn`` can be called with ``n_args`` positional values, before calling it."""
    takes = "no arguments" if n_args == 0 else f"{n_args} argument{'s' * (n_args != 1)}"
    if not callable(fn):
        raise ArgumentError(f"{where}: {what} must be a function of {takes} (e.g. a lambda), "
                            f"got {type(fn).__name__}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: let the call decide
        return
    try:
        signature.bind(*range(n_args))
    except TypeError as e:
        raise ArgumentError(f"{where}: {what} must take {takes} (one per loop variable for "
                            f"while_loop), but {getattr(fn, '__name__', 'it')}{signature} "
                            f"cannot: {e}") from None


#: Ops that read or write a Session's state, which a sub-graph does not have.
_STATE_OPS = ("variable", "assign", "assign_sub", "initializer")


def _stateless(body: Graph, what: str) -> None:
    for n in body.nodes:
        if n.op in _STATE_OPS:
            raise GraphError(f"{what} holds %{n.name} ({n.op}, defined at {n.source}), but a "
                             f"sub-graph runs without Session state: create Variables and "
                             f"assign to them outside cond and while_loop, and pass values in")


# --- cond -----------------------------------------------------------------------------------------


def cond(pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any],
         name: str | None = None) -> Any:
    """``true_fn()`` if ``pred`` else ``false_fn()``, decided when the graph runs.

    ``pred`` is a scalar bool. In a graph both functions are traced, must return the same
    structure of values with the same dtypes, and the result has that structure. In eager mode,
    or when ``pred`` is a Python bool, only the chosen function runs. NB: ``tf.cond``.
    """
    return _cond(pred, true_fn, false_fn, name=name)


def _cond(pred: Any, true_fn: Callable, false_fn: Callable, name: str | None = None,
          names: list[str] | None = None) -> Any:
    where = f"mg.cond at {user_source()}"
    _function(true_fn, "true_fn", 0, where)
    _function(false_fn, "false_fn", 0, where)
    graph = _enclosing_graph(pred)
    if graph is None or not isinstance(pred, (Node, Tensor)):  # eager, or fixed while tracing
        return true_fn() if pred else false_fn()
    where = user_source()
    pred = graph.lift(pred)
    true_graph, true_result = _trace(true_fn, graph, [], [])
    false_graph, false_result = _trace(false_fn, graph, [], [])
    if structure(true_result) != structure(false_result):
        raise TracingError(f"mg.cond at {where}: true_fn returns {structure(true_result)} but "
                           f"false_fn returns {structure(false_result)}; both branches must "
                           f"return the same structure of values")
    _check_same_types(true_graph, false_graph, where, names)
    (true_graph, false_graph), operands = _finish([true_graph, false_graph], 0)
    node = graph.add_node("cond", (pred, *operands), {"true_fn": true_graph,
                                                      "false_fn": false_graph}, name=name or "cond")
    return pack(true_result, iter(_results(node, len(true_graph.outputs), names)))


def _check_same_types(a: Graph, b: Graph, where: str, names: list[str] | None) -> None:
    for i, (x, y) in enumerate(zip(a.outputs, b.outputs, strict=True)):
        if x.dtype != y.dtype or len(x.shape) != len(y.shape):
            what = f"`{names[i]}`" if names else f"result {i}"
            raise TracingError(f"mg.cond at {where}: {what} is {x.type_str()} in the true branch "
                               f"but {y.type_str()} in the false branch; a cond's result has one "
                               f"dtype and rank, so cast or reshape one of them")


def _merged_results(true_fn: Graph, false_fn: Graph) -> list[tuple[S.Shape, np.dtype]]:
    """A cond's result types: equal dtype and rank in both branches; a size they disagree on
    is known only at run time (``None``)."""
    if len(true_fn.outputs) != len(false_fn.outputs):
        raise ShapeError(f"true_fn returns {len(true_fn.outputs)} values but false_fn returns "
                         f"{len(false_fn.outputs)}")
    types = []
    for i, (x, y) in enumerate(zip(true_fn.outputs, false_fn.outputs, strict=True)):
        if x.dtype != y.dtype or len(x.shape) != len(y.shape):
            raise DTypeError(f"result {i} is {x.type_str()} in true_fn but {y.type_str()} in "
                             f"false_fn")
        types.append((tuple(a if a == b else None for a, b in zip(x.shape, y.shape, strict=True)),
                       x.dtype))
    return types


def _check_inputs(body: Graph, operands: tuple, what: str) -> None:
    params = body.placeholders()
    if len(params) != len(operands):
        raise ShapeError(f"{what} takes {len(params)} inputs but the node gives it "
                         f"{len(operands)} operands")
    for i, (p, x) in enumerate(zip(params, operands, strict=True)):
        if p.dtype != x.dtype or not S.compatible(p.shape, tuple(x.shape)):
            raise ShapeError(f"{what} input {i} (%{p.name}) is {p.type_str()} but operand {i} is "
                             f"{S.format_shape(x.shape)} {x.dtype}")


def _cond_rule(pred: Any, *operands: Any, true_fn: Graph, false_fn: Graph) -> tuple:
    if tuple(pred.shape) != () or pred.dtype != np.dtype(bool):
        raise DTypeError(f"cond needs a scalar bool pred, got {S.format_shape(pred.shape)} "
                         f"{pred.dtype}; compare to make one, e.g. mg.sum(x) > 0")
    _check_inputs(true_fn, operands, "true_fn")
    _check_inputs(false_fn, operands, "false_fn")
    _stateless(true_fn, "true_fn")
    _stateless(false_fn, "false_fn")
    _merged_results(true_fn, false_fn)
    return (), None  # no single array: a tuple of results, read with tuple_get


def run_graph(graph: Graph, args: tuple) -> tuple:
    """Run a sub-graph on ``args`` (one per placeholder, in order); its outputs as a tuple."""
    return tuple(_run(Interpreter(graph), args))


def _run(interpreter: Interpreter, args: tuple) -> list:
    names = (p.name for p in interpreter.graph.placeholders())
    return interpreter.run(dict(zip(names, args, strict=True)), {})


def _cond_impl(pred: np.ndarray, *operands: np.ndarray, true_fn: Graph, false_fn: Graph) -> tuple:
    return run_graph(true_fn if pred else false_fn, operands)


class _ResultGrads:
    """Gradients that reach some results of a cond or while_loop (``None`` for the others).

    ``tuple_get``'s vjp sends one back to the node; the backward walk adds them with ``+``.
    """

    shape = ()  # the node's own (tuple) value has no array shape

    def __init__(self, grads: list[Any]) -> None:
        self.grads = grads

    def __add__(self, other: _ResultGrads) -> _ResultGrads:
        return _ResultGrads([a if b is None else b if a is None else a + b
                             for a, b in zip(self.grads, other.grads, strict=True)])


def _cond_vjp(g: Any, out: Node, pred: Node, *operands: Node, true_fn: Graph,
              false_fn: Graph) -> tuple:
    """A cond of the branches' vjps: the branch that ran forward is the one differentiated."""
    if not isinstance(g, _ResultGrads):
        raise GradientError(f"differentiate the results of %{out.name} (its tuple_get nodes), "
                            f"not the cond node itself")
    wanted = [i for i, gi in enumerate(g.grads) if gi is not None]
    seeds = [g.grads[i] for i in wanted]
    floats = [j for j, x in enumerate(operands) if S.is_float(x.dtype)]
    if not floats:
        return (None,) * (1 + len(operands))
    attrs = {key: _vjp_graph(branch, wanted, seeds, floats)
             for key, branch in [("true_fn", true_fn), ("false_fn", false_fn)]}
    node = out.graph.add_node("cond", (pred, *operands, *seeds), attrs, name=f"{out.name}_grad")
    grads: list[Node | None] = [None] * len(operands)
    for j, result in zip(floats, _results(node, len(floats), None), strict=True):
        grads[j] = result
    return (None, *grads)


def _vjp_graph(branch: Graph, wanted: list[int], seeds: list[Node], floats: list[int]) -> Graph:
    """A graph from (the branch's inputs, the seeds of results ``wanted``) to the gradients of
    its float inputs ``floats``: the branch inlined, then ``mg.gradients`` of it."""
    g = Graph()
    with g.as_default():  # vjps must add their nodes here, even while tracing another graph
        params = [_placeholder_like(g, p, p.name) for p in branch.placeholders()]
        cotangents = [_placeholder_like(g, s, "grad") for s in seeds]
        outs = inline(branch, params, g)
        xs = [params[j] for j in floats]
        grads = mg.gradients([outs[i] for i in wanted], xs, grad_ys=cotangents)
        g.outputs = [mg.broadcast_like(np.zeros((), x.dtype), x) if d is None
                     else d if d.dtype == x.dtype else mg.cast(d, x.dtype)
                     for x, d in zip(xs, grads, strict=True)]
    return g


# --- while_loop -----------------------------------------------------------------------------------


def while_loop(cond_fn: Callable[..., Any], body_fn: Callable[..., Any], loop_vars: Any,
               name: str | None = None) -> Any:
    """``while cond_fn(*vars): vars = body_fn(*vars)``, run by the graph.

    ``loop_vars`` is a list or tuple of values (or one value); ``body_fn`` returns new values
    of the same dtypes and shapes; the result is the final values, in the same structure. In
    eager mode it is that Python loop.

    Differentiable in graphs: ``mg.gradients`` through a while_loop makes the loop keep each
    iteration's loop variables (its node then prints ``save_history=True``) and adds a
    ``while_loop_grad`` node that runs the body's vjp over them in reverse, last iteration
    first; values inside the body are recomputed from the saved variables. The trip count is
    whatever the forward run took. NB: ``tf.while_loop``, whose gradient also saves per-iteration
    values (in stacks the forward loop pushes to) and runs a backward loop.
    """
    where = f"mg.while_loop at {user_source()}"
    if isinstance(loop_vars, (dict, set, frozenset)) or loop_vars is None:
        raise ArgumentError(f"{where}: loop_vars is a list or tuple of values (or one value), "
                            f"got {type(loop_vars).__name__}")
    single = not isinstance(loop_vars, (list, tuple))
    init = [loop_vars] if single else list(loop_vars)
    if not init:
        raise ArgumentError(f"{where}: loop_vars is empty; a loop needs at least one value to "
                            f"change, or its test could never change either")
    _function(cond_fn, "cond_fn", len(init), where)
    _function(body_fn, "body_fn", len(init), where)
    graph = _enclosing_graph(*init)
    if graph is None:
        values = init
        while cond_fn(*values):
            values = [body_fn(*values)] if single else list(body_fn(*values))
            if len(values) != len(init):
                raise TracingError(f"{where}: body_fn returned {len(values)} values for "
                                   f"{len(init)} loop variables; return one new value per "
                                   f"loop variable, in order")
    else:
        values = _while(graph, cond_fn, body_fn, init, name=name)
    return values[0] if single else type(loop_vars)(values)


def _while(graph: Graph, cond_fn: Callable, body_fn: Callable, init: list[Any],
           name: str | None = None, names: list[str] | None = None) -> list[Node]:
    where = user_source()
    loop_vars = [graph.lift(v) for v in init]
    params = names or [f"var{i}" if v.op == "constant" else v.name for i, v in enumerate(loop_vars)]
    test, _ = _trace(cond_fn, graph, loop_vars, params)
    body, _ = _trace(body_fn, graph, loop_vars, params)
    if len(test.outputs) != 1 or test.outputs[0].shape != () or test.outputs[0].dtype != bool:
        got = ", ".join(o.type_str() for o in test.outputs) or "nothing"
        raise TracingError(f"mg.while_loop at {where}: cond_fn must return one scalar bool, "
                           f"got {got}")
    if len(body.outputs) != len(loop_vars):
        raise TracingError(f"mg.while_loop at {where}: body_fn returns {len(body.outputs)} values "
                           f"for {len(loop_vars)} loop variables ({', '.join(params)})")
    for var, new, var_name in zip(loop_vars, body.outputs, params, strict=True):
        if new.dtype != var.dtype or not S.compatible(var.shape, new.shape):
            raise TracingError(f"mg.while_loop at {where}: loop variable `{var_name}` is "
                               f"{var.type_str()} before the loop but {new.type_str()} after the "
                               f"body; a loop variable keeps its dtype and shape (cast it first)")
    (test, body), operands = _finish([test, body], len(loop_vars))
    node = graph.add_node("while_loop", (*loop_vars, *operands),
                          {"cond_fn": test, "body_fn": body}, name=name or "while_loop")
    return _results(node, len(loop_vars), names)


def _while_rule(*operands: Any, cond_fn: Graph, body_fn: Graph, save_history: bool = False,
                max_iterations: int | None = None) -> tuple:
    _check_inputs(cond_fn, operands, "cond_fn")
    _check_inputs(body_fn, operands, "body_fn")
    _stateless(cond_fn, "cond_fn")
    _stateless(body_fn, "body_fn")
    if len(body_fn.outputs) > len(operands):
        raise ShapeError(f"body_fn returns {len(body_fn.outputs)} values for "
                         f"{len(operands)} operands")
    if [(o.shape, o.dtype) for o in cond_fn.outputs] != [((), np.dtype(bool))]:
        raise DTypeError("cond_fn must return one scalar bool")
    for i, (x, new) in enumerate(zip(operands, body_fn.outputs, strict=False)):
        if new.dtype != x.dtype or not S.compatible(tuple(x.shape), new.shape):
            raise ShapeError(f"body_fn result {i} is {new.type_str()} but loop variable {i} is "
                             f"{S.format_shape(x.shape)} {x.dtype}")
    return (), None


def _while_impl(*operands: np.ndarray, cond_fn: Graph, body_fn: Graph,
                save_history: bool = False, max_iterations: int | None = None) -> tuple:
    """The final loop variables; with ``save_history``, then one more entry: the variables each
    iteration started from, in order (what ``while_loop_grad`` needs).

    ``max_iterations`` (``mg.load`` sets it on the loops it reads) stops a loop whose test is
    still true after that many iterations with ``LoopLimitExceeded``, which the executor reports
    naming the node; ``None``, the default of loops you build, never stops one.
    """
    n = len(body_fn.outputs)
    values, extra = operands[:n], operands[n:]
    test, body = Interpreter(cond_fn), Interpreter(body_fn)
    history, done, limit, saved = [], 0, memory_limit(), 0
    try:
        while _run(test, (*values, *extra))[0]:
            if done == max_iterations:
                raise LoopLimitExceeded(
                    f"its cond_fn was still true after max_iterations={max_iterations:,} "
                    f"iterations, the cap mg.load puts on the loops of a file; if this loop is "
                    f"meant to run longer, load it with mg.load(path, max_iterations=...)")
            if save_history:
                history.append(values)
                if limit is not None:  # the saved iterations are held as the loop runs
                    saved += limit.take(sum(np.asarray(v).nbytes for v in values),
                                        f"saved iteration {done}")
            values = tuple(_run(body, (*values, *extra)))
            done += 1
    finally:
        if limit is not None:
            limit.live -= saved  # from here the interpreter counts the node's results
    return (*values, tuple(history)) if save_history else tuple(values)


class LoopLimitExceeded(RuntimeError):
    """A while_loop ran its ``max_iterations`` and its test was still true."""


def _iteration_cap(value: Any) -> int | None:
    """A while_loop's ``max_iterations`` attr: ``None`` (no cap) or an int >= 0."""
    if value is None:
        return None
    value = A.integer(value)
    if value < 0:
        raise ValueError(f"wants an int >= 0 or None, got {value}")
    return value


def _while_vjp(g: Any, out: Node, *operands: Node, cond_fn: Graph, body_fn: Graph,
               save_history: bool = False, max_iterations: int | None = None) -> tuple:
    """The loop's gradient: a ``while_loop_grad`` node that walks the saved iterations back.

    The forward node is told to keep its history (``save_history=True``): the loop variables
    at the start of each iteration. NB: TensorFlow's while gradient rewrites the forward loop
    the same way, to push the values its gradient needs onto stacks.
    """
    if not isinstance(g, _ResultGrads):
        raise GradientError(f"differentiate the results of %{out.name} (its tuple_get nodes), "
                            f"not the while_loop node itself")
    n = len(body_fn.outputs)
    loop_vars, extra = operands[:n], operands[n:]
    floats = [i for i, v in enumerate(loop_vars) if S.is_float(v.dtype)]
    float_extra = [j for j, x in enumerate(extra) if S.is_float(x.dtype)]
    if not floats or all(g.grads[i] is None for i in floats):
        return (None,) * len(operands)
    out.attrs["save_history"] = True  # what the backward loop walks
    params = body_fn.placeholders()
    body_vjp = _vjp_graph(body_fn, floats, [params[i] for i in floats],
                          floats + [n + j for j in float_extra])
    seeded = tuple(g.grads[i] is not None for i in floats)
    seeds = [g.grads[i] for i in floats if g.grads[i] is not None]
    node = out.graph.add_node("while_loop_grad", (out, *seeds, *extra),
                              {"body_vjp": body_vjp, "floats": tuple(floats), "seeded": seeded},
                              name=f"{out.name}_grad")
    results = _results(node, len(floats) + len(float_extra), None)
    grads: list[Node | None] = [None] * len(operands)
    for k, i in enumerate(floats + [n + j for j in float_extra]):
        grads[i] = results[k]
    return tuple(grads)


def _while_grad_rule(forward: Any, *rest: Any, body_vjp: Graph, floats: tuple[int, ...],
                     seeded: tuple[bool, ...]) -> tuple:
    """Inputs: the forward while_loop, one seed per True in ``seeded``, its captured values."""
    if len(floats) != len(seeded):
        raise ShapeError(f"while_loop_grad: {len(floats)} float loop variables but "
                         f"{len(seeded)} seeded flags")
    _stateless(body_vjp, "body_vjp")
    if isinstance(forward, Node):  # (a memory planner may pass bare shapes: nothing to check)
        if forward.op != "while_loop":
            raise ShapeError(f"while_loop_grad reads a while_loop node, not %{forward.name} "
                             f"({forward.op})")
        if not forward.attrs.get("save_history"):
            raise ShapeError(f"while_loop_grad reads the iterations %{forward.name} saved, but "
                             f"it saves none (save_history is off); build the gradient with "
                             f"mg.gradients, which turns it on")
        body = forward.attrs["body_fn"]
        params = body.placeholders()
        n_vars, n_extra = len(body.outputs), len(params) - len(body.outputs)
        float_vars = [i for i in range(n_vars) if S.is_float(params[i].dtype)]
        float_extra = [j for j in range(n_extra) if S.is_float(params[n_vars + j].dtype)]
        if list(floats) != float_vars:
            raise ShapeError(f"while_loop_grad: floats={tuple(floats)}, but the float loop "
                             f"variables of %{forward.name} are {tuple(float_vars)}")
        inputs = body_vjp.placeholders()
        if (len(inputs) != n_vars + n_extra + len(floats)
                or len(body_vjp.outputs) != len(floats) + len(float_extra)
                or len(rest) != sum(seeded) + n_extra
                or any(p.dtype != q.dtype for p, q in zip(inputs, params, strict=False))):
            raise ShapeError(f"while_loop_grad does not fit %{forward.name}: its body_vjp or "
                             f"its seeds and captured values are not the loop's")
    return (), None


def _while_grad_impl(forward: tuple, *rest: np.ndarray, body_vjp: Graph, floats: tuple[int, ...],
                     seeded: tuple[bool, ...]) -> tuple:
    """Run body_vjp over the saved iterations, last first; add up the captured values' parts."""
    history, n_seeds = forward[-1], sum(seeded)
    seeds, extra = iter(rest[:n_seeds]), rest[n_seeds:]
    cotangents = [next(seeds) if s else np.zeros_like(forward[i])
                  for i, s in zip(floats, seeded, strict=True)]
    run = Interpreter(body_vjp)
    n_extra_grads = len(body_vjp.outputs) - len(floats)
    extra_grads: list[Any] = [None] * n_extra_grads
    for values in reversed(history):
        outs = _run(run, (*values, *extra, *cotangents))
        cotangents = outs[:len(floats)]
        extra_grads = [o if e is None else e + o
                       for e, o in zip(extra_grads, outs[len(floats):], strict=True)]
    if not history:  # no iteration: the captured values had no effect
        extra_grads = [np.zeros(o.shape if None not in o.shape else (), o.dtype)
                       for o in body_vjp.outputs[len(floats):]]
    return (*cotangents, *extra_grads)


def _while_grad_vjp(g: Any, out: Node, *inputs: Node, **attrs: Any) -> tuple:
    raise GradientError(
        f"no second derivative through the while_loop gradient %{out.name} (defined at "
        f"{out.source}): minigraph differentiates a while_loop once. For a Hessian, unroll the "
        f"loop with a Python for loop when its trip count is known while tracing")


# --- results --------------------------------------------------------------------------------------


def result_types(node: Any) -> list[tuple[S.Shape, np.dtype]]:
    """The shape and dtype of each result of a cond or while_loop node.

    Worked out once per node (each ``tuple_get`` reading it asks): listing a body's placeholders
    for each of its results made loading a loop of many variables quadratic.
    """
    if not isinstance(node, Node):
        return _result_types(node)
    key = tuple((id(g), len(g.nodes), len(g.outputs)) for g in node.attrs.values()
                if isinstance(g, Graph))  # the sub-graphs they come from, as they are now
    cached = _RESULT_TYPES.get(node)
    if cached is None or cached[0] != key:
        cached = _RESULT_TYPES[node] = (key, _result_types(node))
    return cached[1]


#: node -> (its sub-graphs' identities and sizes, its result types): result_types's memo.
_RESULT_TYPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _result_types(node: Any) -> list[tuple[S.Shape, np.dtype]]:
    op = getattr(node, "op", None)
    if op == "cond":
        return _merged_results(node.attrs["true_fn"], node.attrs["false_fn"])
    if op == "while_loop":
        body = node.attrs["body_fn"]
        return [(p.shape, p.dtype) for p in body.placeholders()[:len(body.outputs)]]
    if op == "while_loop_grad":
        return [(o.shape, o.dtype) for o in node.attrs["body_vjp"].outputs]
    raise ShapeError(f"tuple_get reads a result of a cond or while_loop node (or a "
                     f"while_loop_grad), not of {op!r}")


def _tuple_get_rule(t: Any, index: int, shape: S.Shape, dtype: str) -> tuple:
    """The recorded type; checked against the cond or while_loop node when that is at hand (a
    shape rule may also be given bare shapes and dtypes, as a memory planner does)."""
    if isinstance(t, Node):
        types = result_types(t)
        if not 0 <= index < len(types):
            raise ShapeError(f"tuple_get index {index} is out of range: %{t.name} has "
                             f"{len(types)} results")
        if types[index] != (tuple(shape), np.dtype(dtype)):
            raise ShapeError(f"tuple_get records {S.format_shape(shape)} {dtype} but result "
                             f"{index} of %{t.name} is {S.format_shape(types[index][0])} "
                             f"{types[index][1]}")
    return tuple(shape), np.dtype(dtype)


def _tuple_get_vjp(g: Any, out: Node, t: Node, index: int, **types: Any) -> tuple:
    grads: list[Any] = [None] * len(result_types(t))
    grads[index] = g
    return (_ResultGrads(grads),)


# Registered like any op of your own (the op tests compare the built-in numeric ops to PyTorch).
_GRAPH = A.instance_of(Graph, "an mg.Graph")
register_op(Op("cond", _cond_impl, _cond_rule, _cond_vjp,
               doc="run sub-graph true_fn or false_fn on the operands, as the scalar pred says",
               attrs={"true_fn": _GRAPH, "false_fn": _GRAPH}))
register_op(Op("while_loop", _while_impl, _while_rule, _while_vjp,
               doc="while cond_fn(vars, ...): vars = body_fn(vars, ...); the final vars",
               attrs={"cond_fn": _GRAPH, "body_fn": _GRAPH, "save_history": A.boolean,
                      "max_iterations": _iteration_cap}))
register_op(Op("while_loop_grad", _while_grad_impl, _while_grad_rule, _while_grad_vjp,
               doc="a while_loop's gradient: body_vjp over its saved iterations, last first",
               attrs={"body_vjp": _GRAPH, "floats": A.tuple_of(A.integer, "ints"),
                      "seeded": A.tuple_of(A.boolean, "bools")}))
register_op(Op("tuple_get", lambda t, index, shape, dtype: t[index], _tuple_get_rule,
               _tuple_get_vjp, doc="result `index` of a cond or while_loop node",
               attrs={"index": A.integer, "shape": A.shape, "dtype": A.dtype_name}))
