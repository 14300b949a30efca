"""The JAX adapter: draw a jaxpr, ``viz.draw(jax.make_jaxpr(f)(x))``.

A jaxpr is JAX's graph: a list of equations ``c:f64[2] = mul a b`` over typed variables, with the
function's arguments as ``invars``, arrays it closed over as ``constvars``, and its results as
``outvars``. It maps onto the course's drawing vocabulary one to one:

- ``input``: each invar, labelled with its jaxpr name (``a``) and, under it, the argument it
  stands for (``params[0][0]``, from the jaxpr's debug info) and its type;
- ``const``: each constvar (an array the function read from outside, baked into the trace);
- ``op``: one box per equation, labelled with its primitive (``dot_general``, ``tanh``), with
  the equation as ``print(jaxpr)`` writes it (``c = add a 1.0``) and its short parameters under it;
- ``output``: the jaxpr's results.

Literals (``1.0`` in ``add a 1.0``) are not nodes in a jaxpr, so they stay in the equation text.
Edges carry the jaxpr's own types (``f64[200,32]``), and variable names are the ones
``print(jaxpr)`` shows, so the drawing and the printout can be read side by side. An equation that
holds sub-jaxprs (the branches of ``cond``, the test and body of ``while``, the body of ``scan``,
the callee of ``jit`` or ``custom_jvp_call``) is drawn after a cluster per sub-jaxpr, labelled
``cond: branches[1]``: its operands flow into the sub-jaxprs' inputs, and their results into it.
Each equation's ``name_stack`` (``jvp()``, ``transpose(jvp())`` after ``jax.grad``;
``jax.named_scope`` names) is its scope, and a sub-jaxpr's equations are scoped under their
equation, so a large jaxpr collapses into the forward and the backward pass, and each loop body into
one box.

jax is never imported here: an object can only be a jaxpr if the program already imported jax.

NB: the adapter reads ``jax.extend.core`` (public) and, for the printed variable names, the
pretty-printer's naming context in ``jax._src.core``; if that ever moves, names fall back to
``a, b, c, ...`` in order of definition, still consistent within the drawing.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import adapters
from .model import DrawGraph

#: How the supported-types list names this adapter (`viz.SUPPORTED`, and draw()'s TypeError).
DESCRIPTION = ("a JAX jaxpr: jax.make_jaxpr(f)(*args) (a ClosedJaxpr), or its .jaxpr, or "
               "jax.jit(f).trace(*args)")

#: A detail line longer than this is cut with an ellipsis: boxes stay readable.
MAX_DETAIL = 40


def is_jaxpr(obj: Any) -> bool:
    """A ClosedJaxpr, a Jaxpr, or a traced jit function (``jax.jit(f).trace(x)``)."""
    if "jax" not in sys.modules:
        return False
    core = _core()
    return isinstance(obj, core.ClosedJaxpr | core.Jaxpr) or _is_traced(obj)


def from_jaxpr(obj: Any) -> DrawGraph:
    """A `DrawGraph` of a jaxpr: one node per variable binder and equation, sub-jaxprs boxed."""
    core = _core()
    if _is_traced(obj):
        obj = obj.jaxpr
    closed = obj if isinstance(obj, core.ClosedJaxpr) else None
    jaxpr = obj.jaxpr if closed is not None else obj
    consts = list(closed.consts) if closed is not None else [None] * len(jaxpr.constvars)
    names = _printed_names(jaxpr)

    def name(v: Any) -> str:
        return names.get(v) or _fallback_name(v, names)

    g = DrawGraph(title=_title(jaxpr), scope_sep="/")
    producer = _add_jaxpr(g, jaxpr, consts, name, arg_names=_arg_names(jaxpr))
    results = []
    for v in jaxpr.outvars:
        if isinstance(v, core.Literal):  # f returned a constant: draw it, or the edge dangles
            nid = f"literal:{len(results)}"
            g.add_node(nid, _literal_text(v), kind="const", details=("literal", _type(v)))
            results.append((nid, _type(v)))
        else:
            results.append((producer[v], _type(v)))
    if results:
        g.add_node("output", "output", kind="output",
                   details=(_cut(", ".join(name(v) if not isinstance(v, core.Literal)
                                           else _literal_text(v) for v in jaxpr.outvars)),))
        for src, t in dict.fromkeys(results):  # one edge per producer and type
            g.add_edge(src, "output", t)
    return g


def _add_jaxpr(g: DrawGraph, jaxpr: Any, consts: list[Any], name: Any, *, prefix: str = "",
               cluster: Any = None, scope: tuple[str, ...] | None = None,
               arg_names: tuple[str, ...] = ()) -> dict[Any, str]:
    """Draw ``jaxpr``'s binders and equations with ids ``prefix + ...``; return Var -> node id.

    Inside a sub-jaxpr (``cluster`` is its box) every node joins the box and has ``scope``. An
    equation that holds sub-jaxprs gets one box per sub-jaxpr, drawn just before it: its operands
    flow into the sub-jaxprs' inputs, and their results flow into it (as lesson 05's minigraph
    cond and while_loop nodes are drawn).
    """
    core = _core()
    producer: dict[Any, str] = {}

    def add(nid: str, label: str, **kw: Any) -> None:
        g.add_node(nid, label, **kw)
        if cluster is not None:
            cluster.members.append(nid)

    for v, value in zip(jaxpr.constvars, consts, strict=True):
        nid = f"{prefix}const:{name(v)}"
        add(nid, name(v), kind="const", name=name(v), scope=scope or (),
            details=("constant", _type(v), _small_value(value)))
        producer[v] = nid
    for i, v in enumerate(jaxpr.invars):
        nid = f"{prefix}in:{name(v)}"
        arg = arg_names[i] if i < len(arg_names) else ""
        add(nid, name(v), kind="input", name=name(v), scope=scope or (),
            details=(arg if arg != name(v) else "", _type(v)))
        producer[v] = nid
    for k, eqn in enumerate(jaxpr.eqns):
        nid = f"{prefix}eqn:{k}"
        label = eqn.primitive.name
        eqn_scope = scope if scope is not None else _scope(eqn)
        subs = _sub_jaxprs(eqn.params)
        routed: set[Any] = set()  # operands that flow into a sub-jaxpr instead of the equation
        for role, sub, sub_consts in subs:
            box = g.add_cluster(f"{nid}/{role}", f"{label}: {role}",
                                parent=cluster.id if cluster is not None else None)
            inner = _add_jaxpr(g, sub, sub_consts, name, prefix=f"{nid}/{role}/", cluster=box,
                               scope=(*eqn_scope, f"{label} {role}"))
            for outer, param in _operands_of(eqn, role, sub):
                if not isinstance(outer, core.Literal) and outer in producer:
                    g.add_edge(producer[outer], inner[param], _type(outer))
                    routed.add(outer)
            for v in dict.fromkeys(v for v in sub.outvars if not isinstance(v, core.Literal)):
                if v in inner:
                    g.add_edge(inner[v], nid, _type(v))
        outs = [v for v in eqn.outvars if not isinstance(v, core.DropVar)]
        add(nid, label, name=next((name(v) for v in outs if name(v) != "_"), f"{label}_{k}"),
            details=[_cut(_equation(eqn, name)), *_param_lines(eqn.params)], scope=eqn_scope)
        seen: set[str] = set()  # `mul a a` reads a twice: one edge
        for x in eqn.invars:
            if isinstance(x, core.Literal) or x in routed or x not in producer:
                continue
            if producer[x] not in seen:
                g.add_edge(producer[x], nid, _type(x))
                seen.add(producer[x])
        for v in outs:
            producer[v] = nid
    return producer


def _operands_of(eqn: Any, role: str, sub: Any) -> list[tuple[Any, Any]]:
    """(operand of ``eqn``, input of its sub-jaxpr ``role``) pairs: which value flows where.

    The operands a sub-jaxpr reads come last, in order (cond: index, then the branches'
    operands; scan and jit: one to one), except for ``while``, whose operands are the test's
    constants, the body's constants, then the loop carry.
    """
    ops = list(eqn.invars)
    if eqn.primitive.name == "while":
        m, k = eqn.params.get("cond_nconsts", 0), eqn.params.get("body_nconsts", 0)
        ops = (ops[:m] if role == "cond_jaxpr" else ops[m:m + k]) + ops[m + k:]
    n = len(sub.invars)
    if n == 0 or n > len(ops):
        return []
    return list(zip(ops[len(ops) - n:], sub.invars, strict=True))


# ---------------------------------------------------------------------------------------------
# Reading a jaxpr


def _core() -> Any:
    import jax.extend.core  # jax is already imported: see is_jaxpr

    return jax.extend.core


def _is_traced(obj: Any) -> bool:
    stages = getattr(sys.modules.get("jax"), "stages", None)
    return stages is not None and isinstance(obj, getattr(stages, "Traced", ()))


def _title(jaxpr: Any) -> str:
    info = getattr(jaxpr, "debug_info", None)
    where = getattr(info, "func_src_info", "") or ""
    fn = where.split(" at ")[0] if where else ""
    what = f"jaxpr of {fn}" if fn else "jaxpr"
    return f"{what} ({len(jaxpr.eqns)} equations)"


def _arg_names(jaxpr: Any) -> tuple[str, ...]:
    info = getattr(jaxpr, "debug_info", None)
    names = tuple(getattr(info, "arg_names", None) or ())
    return names if len(names) == len(jaxpr.invars) else ()


def _type(v: Any) -> str:
    """``f64[200,32]``: the type as the jaxpr prints it."""
    aval = getattr(v, "aval", None)
    try:
        return aval.str_short(short_dtypes=True)
    except (AttributeError, TypeError):
        return str(aval) if aval is not None else ""


def _literal_text(v: Any) -> str:
    val = np.asarray(v.val)
    if val.ndim == 0 and val.dtype.kind in "biuf":
        return repr(float(val)) if val.dtype.kind == "f" else str(val.item())
    return f"literal {_type(v)}"


def _small_value(value: Any) -> str:
    """``= 2`` for a scalar constant; arrays are described by their type."""
    if value is None:
        return ""
    try:
        arr = np.asarray(value)
    except Exception:  # a token or an opaque value: nothing to show
        return ""
    if arr.ndim != 0 or arr.dtype.kind not in "biuf":
        return ""
    return f"= {arr.item():.4g}" if arr.dtype.kind == "f" else f"= {arr.item()}"


def _equation(eqn: Any, name: Any) -> str:
    """``c = add a 1.0``: the equation without its parameters, as print(jaxpr) writes it."""
    core = _core()
    lhs = " ".join("_" if isinstance(v, core.DropVar) else name(v) for v in eqn.outvars)
    rhs = " ".join(_literal_text(x) if isinstance(x, core.Literal) else name(x)
                   for x in eqn.invars)
    text = f"{eqn.primitive.name} {rhs}".rstrip()
    return f"{lhs} = {text}" if lhs else text


#: Parameters that only restate what the types already say, or that no reader needs.
_QUIET_PARAMS = {"out_sharding", "sharding", "preferred_element_type", "weak_type",
                 "accumulation_type", "precision", "algorithm", "transpose_algorithm",
                 "symbolic_zeros", "jvp", "bwd", "fwd", "out_trees", "jvp_jaxpr_fun",
                 "jvp_jaxpr_thunk", "num_consts", "ctx_mesh", "compiler_options_kvs",
                 "donated_invars", "inline", "keep_unused", "in_shardings", "out_shardings",
                 "in_layouts", "out_layouts", "resource_env", "linear", "unroll",
                 "_split_transpose", "cond_nconsts", "body_nconsts", "num_carry", "jaxpr_unknown"}


def _param_lines(params: dict[str, Any]) -> list[str]:
    """Short ``key=value`` lines for the parameters worth reading (``axes=(0, 1)``)."""
    lines = []
    for key in sorted(params):
        value = params[key]
        # A custom rule's forward/backward functions are Python callables (a WrappedFun's == even
        # raises on a tuple): only plain values are worth a line.
        if key in _QUIET_PARAMS or value is None or callable(value) or _jaxprs_in(value) \
                or (isinstance(value, tuple) and not value):
            continue
        text = f"{key}={value}"
        if len(text) <= MAX_DETAIL:
            lines.append(text)
    return lines[:3]


def _jaxprs_in(value: Any) -> list[tuple[Any, list[Any]]]:
    """(jaxpr, its constants) per jaxpr a parameter holds: one, or a tuple (cond's branches)."""
    core = _core()
    items = value if isinstance(value, tuple) else (value,)
    found = []
    for item in items:
        if isinstance(item, core.ClosedJaxpr):
            found.append((item.jaxpr, list(item.consts)))
        elif isinstance(item, core.Jaxpr):
            found.append((item, [None] * len(item.constvars)))
    return found if len(found) == len(items) else []


def _sub_jaxprs(params: dict[str, Any]) -> list[tuple[str, Any, list[Any]]]:
    """(role, jaxpr, constants) per sub-jaxpr of an equation: ``branches[0]``, ``body_jaxpr``."""
    subs = []
    for key in sorted(params):
        found = _jaxprs_in(params[key])
        if len(found) == 1 and not isinstance(params[key], tuple):
            subs.append((key, *found[0]))
        else:
            subs.extend((f"{key}[{i}]", j, c) for i, (j, c) in enumerate(found))
    return subs


def _scope(eqn: Any) -> tuple[str, ...]:
    stack = str(getattr(eqn.source_info, "name_stack", "") or "")
    return tuple(part for part in stack.split("/") if part)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DETAIL else text[:MAX_DETAIL - 1] + "…"


# ---------------------------------------------------------------------------------------------
# Variable names as print(jaxpr) shows them


def _printed_names(jaxpr: Any) -> dict[Any, str]:
    """Var -> the name ``print(jaxpr)`` gives it; {} if JAX's printer cannot be asked.

    JAX names variables while printing (``a``, ``b``, ..., ``z``, ``ba``, ...), in the order the
    printer meets them, hoisted shared sub-jaxprs first. Rather than copy that order, we print
    once and keep the printer's own naming context.
    """
    try:
        from jax._src import core as src_core
    except ImportError:
        return {}
    base = getattr(src_core, "JaxprPpContext", None)
    if base is None:
        return {}
    contexts: list[Any] = []

    class Recording(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            contexts.append(self)

    with _swapped(src_core, "JaxprPpContext", Recording):
        try:
            jaxpr.pretty_print(use_color=False)
        except Exception:  # printing is best effort here: fall back to our own names
            return {}
    if not contexts:
        return {}
    return dict(contexts[0].var_names)  # unused results are named "_", as printed


@contextlib.contextmanager
def _swapped(module: Any, attr: str, value: Any) -> Iterator[None]:
    old = getattr(module, attr)
    setattr(module, attr, value)
    try:
        yield
    finally:
        setattr(module, attr, old)


def _fallback_name(v: Any, names: dict[Any, str]) -> str:
    """A fresh ``v0``, ``v1``, ... for a variable the printer did not name."""
    for i in itertools.count(len(names)):
        candidate = f"v{i}"
        if candidate not in names.values():
            names[v] = candidate
            return candidate
    raise AssertionError("unreachable")


# ---------------------------------------------------------------------------------------------
# Registration: adapters.py imports this module at its end (one line); we add ourselves to its
# table and to the list of what viz.draw accepts.

adapters._ADAPTERS.append((is_jaxpr, from_jaxpr))
if DESCRIPTION not in adapters.SUPPORTED:
    adapters.SUPPORTED = (*adapters.SUPPORTED[:-1], DESCRIPTION, adapters.SUPPORTED[-1])
