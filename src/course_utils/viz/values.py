"""Values and gradients on the nodes of a drawing: ``draw(obj, values=True, grads=True)``.

Three sources, each drawn micrograd-style (the value and the gradient under the op):

- a minigraph ``Graph`` (or traced function) given ``feed_dict=``: run once in a Session on a
  copy of the graph, so nothing of yours changes; gradients of a scalar node (``grads_of=``, or
  the graph's one scalar result) come from ``mg.gradients`` built on that copy;
- a minigraph eager tensor: every tensor on its tape keeps its value; leaves show their
  ``.grad``; gradients of the tensors in between are computed by walking the tape backward
  once more, applying each op's vjp (nothing is stored in them);
- a torch tensor: the leaves' values and ``.grad``, the result's value, and, while the graph is
  still alive, the gradient reaching every ``grad_fn`` node (each node's backward function
  called once more, in reverse order, which leaves every ``.grad`` alone).

Arrays are printed in full when small and summarised when large, always the same way:

>>> format_value(np.array([1.5, -2.0, 0.25]))
'[1.5, -2, 0.25]'
>>> format_value(np.arange(64.0).reshape(2, 32))
'(2, 32) mean 31.5 in [0, 63]'
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .model import DrawGraph, format_shape

FULL_SIZE = 6  # arrays with at most this many elements are printed in full ...
FULL_CHARS = 36  # ... when that fits in this many characters


def format_value(value: Any) -> str:
    """Short, deterministic text for a node's value: in full when small, else a summary.

    >>> format_value(3.0), format_value(np.float32(-0.0)), format_value(np.array([[1, 2], [3, 4]]))
    ('3', '0', '[[1, 2], [3, 4]]')
    >>> format_value(np.array([True, False, True, True, False, False, True]))
    '(7,) bool, 4 True'
    """
    if value is None:
        return ""
    if isinstance(value, (tuple, list)):  # a cond's or while_loop's results
        return f"{len(value)} result" + ("" if len(value) == 1 else "s")
    arr = _as_numpy(value)
    if arr is None or arr.dtype == object:
        text = str(value)
        return text if len(text) <= FULL_CHARS else text[: FULL_CHARS - 1] + "…"
    if arr.size == 0:
        return f"{format_shape(arr.shape)} empty"
    if arr.size <= FULL_SIZE:
        text = _nested(arr)
        if len(text) <= FULL_CHARS:
            return text
    shape = format_shape(arr.shape)
    if arr.dtype == np.bool_:
        return f"{shape} bool, {int(arr.sum())} True"
    if arr.dtype.kind not in "biuf":
        return f"{shape} {arr.dtype}"
    finite = arr[np.isfinite(arr)] if arr.dtype.kind == "f" else arr
    if finite.size == 0:
        return f"{shape} all nan/inf"
    text = (f"{shape} mean {_num(finite.mean(dtype=np.float64))} "
            f"in [{_num(finite.min())}, {_num(finite.max())}]")
    bad = arr.size - finite.size
    return text + (f", {bad} nan/inf" if bad else "")


def _as_numpy(value: Any) -> np.ndarray | None:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bool, int, float, np.generic)):
        return np.asarray(value)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    numpy = getattr(value, "numpy", None)  # a minigraph eager tensor
    if callable(numpy):
        try:
            return np.asarray(numpy())
        except Exception:  # a symbolic value has no numbers: show it as text
            return None
    return None


def _nested(arr: np.ndarray) -> str:
    if arr.ndim == 0:
        return _num(arr[()])
    return "[" + ", ".join(_nested(a) for a in arr) + "]"


def _num(x: Any) -> str:
    """4 significant digits; never ``-0``, so rounding noise cannot change the text."""
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if np.isnan(x):
        return "nan"
    text = f"{x:.4g}"
    return "0" if text == "-0" else text


# ---------------------------------------------------------------------------------------------
# One backward walk that records every step: used for the gradients in between of an eager
# tensor here, and frame by frame by step_through. It is the walk of minigraph's autodiff,
# written out so that each step can be seen.


class Step:
    """One backward step: ``active`` applied its vjp; ``totals`` are the running gradient sums
    of the inputs it sent gradients to (keyed like ``active``), after this step."""

    __slots__ = ("active", "totals")

    def __init__(self, active: Any, totals: dict[Any, Any]) -> None:
        self.active, self.totals = active, totals


def backward_steps(root: Any, seed: Any, order: list[Any],
                   record_of: Callable[[Any], tuple | None],
                   wants: Callable[[Any], bool], key: Callable[[Any], Any] = id) -> list[Step]:
    """Walk ``order`` (values in topological order, ``root`` last) backward from ``seed``.

    The first step is the seed itself (``active`` is ``root``). Each value with a record
    (``(op, inputs, attrs)``) that has received a gradient then applies ``op.vjp``; the
    gradients it sends are added to the running sums of its inputs that ``wants`` one.
    Works on eager tensors (numbers) and on graph nodes (the vjps build backward nodes).
    """
    grads: dict[Any, Any] = {key(root): seed}
    steps = [Step(key(root), {key(root): seed})]
    for v in reversed(order):
        record = record_of(v)
        if record is None or key(v) not in grads:
            continue
        op, inputs, attrs = record
        sent = op.vjp(grads[key(v)], v, *inputs, **attrs)
        if not isinstance(sent, (tuple, list)) or len(sent) != len(inputs):
            raise ValueError(f"the vjp of op {op.name!r} returned {sent!r}, not one gradient "
                             f"(or None) per input ({len(inputs)})")
        totals = {}
        for x, g in zip(inputs, sent, strict=True):
            if g is None or not wants(x):
                continue
            k = key(x)
            grads[k] = g if k not in grads else grads[k] + g
            totals[k] = grads[k]
        steps.append(Step(key(v), totals))
    return steps


def final_grads(steps: list[Step]) -> dict[Any, Any]:
    """The gradient each value ends with: the last running sum any step gave it."""
    out: dict[Any, Any] = {}
    for step in steps:
        out.update(step.totals)
    return out


# ---------------------------------------------------------------------------------------------
# minigraph eager tensors


def eager_order(root: Any) -> list[Any]:
    """The tape's tensors, each after its inputs: the order (and so the ids n1, n2, ...) that
    the eager adapter draws them in."""
    from .adapters import _tape_post_order

    return _tape_post_order(root)


def eager_backward(root: Any, order: list[Any]) -> list[Step]:
    """Every backward step from ``root`` (a one-element tensor), computed again under
    ``mg.no_grad()``: no ``.grad`` changes, the tape stays as it is."""
    import course_utils.minigraph as mg

    def record_of(v: Any) -> tuple | None:
        entry = v.grad_fn
        return None if entry is None else (entry.op, entry.inputs, entry.attrs)

    with mg.no_grad():
        seed = mg.tensor(np.ones(root.shape, root.dtype))
        return backward_steps(root, seed, order, record_of, lambda v: v.requires_grad)


def annotate_eager(g: DrawGraph, root: Any, *, values: bool, grads: bool) -> None:
    """Write values and gradients on the nodes of ``g``, the drawing of ``root``'s tape."""
    order = eager_order(root)
    ids = {id(v): f"n{i + 1}" for i, v in enumerate(order)}
    nodes = {n.id: n for n in g.nodes}
    if values:
        for v in order:
            node = nodes[ids[id(v)]]
            node.value = "= " + format_value(v.numpy())
            node.details = tuple(d for d in node.details if not d.startswith("= "))
    if not grads:
        return
    computed: dict[int, Any] = {}
    if root.size == 1:
        computed = final_grads(eager_backward(root, order))
    else:
        g.notes.append(f"gradients in between need a one-element tensor; this one has shape "
                       f"{format_shape(root.shape)}: draw y.sum() (leaves show their .grad)")
    differs = False
    for v in order:
        node = nodes[ids[id(v)]]
        if v.grad_fn is None:  # a leaf: what backward() stored in .grad
            if not v.requires_grad:
                continue
            node.details = tuple(d for d in node.details if not d.startswith("grad "))
            node.grad = "grad " + (format_value(v.grad.numpy()) if v.grad is not None
                                   else "None (call backward())")
            mine = computed.get(id(v))
            if v.grad is not None and mine is not None and not np.allclose(
                    v.grad.numpy(), mine.numpy(), rtol=1e-5, atol=1e-8):
                differs = True
        elif id(v) in computed:
            node.grad = "grad " + format_value(computed[id(v)].numpy())
    what = "d(the drawn tensor)/d(node)"
    if root.size == 1:
        g.notes.append(f"grad = {what}; leaves show their .grad")
    if differs:
        g.notes.append("some leaf .grad differs from " + what + ": backward() ran more than "
                       "once (.grad accumulates) or from another tensor")


# ---------------------------------------------------------------------------------------------
# torch tensors


def annotate_torch(g: DrawGraph, t: Any, *, values: bool, grads: bool) -> None:
    """Values of the leaves and the result; ``.grad`` of the leaves and, when the graph is
    still alive, the gradient that reaches every ``grad_fn`` node."""
    from .adapters import _post_order

    nodes = {n.id: n for n in g.nodes}
    if t.grad_fn is None:  # a leaf alone
        leaf = nodes["n1"]
        if values:
            leaf.value = "= " + format_value(t)
        if grads:
            leaf.grad = "grad " + (format_value(t.grad) if t.grad is not None else "None")
        return
    order = _post_order(t.grad_fn)
    ids = {fn: f"n{i + 1}" for i, fn in enumerate(order)}
    if values:
        nodes[ids[t.grad_fn]].value = "= " + format_value(t)
    for fn in order:
        leaf = getattr(fn, "variable", None)
        if leaf is None:
            continue
        node = nodes[ids[fn]]
        if values:
            node.value = "= " + format_value(leaf)
        if grads:
            node.details = tuple(d for d in node.details if not d.startswith("grad "))
            node.grad = "grad " + (format_value(leaf.grad) if leaf.grad is not None
                                   else "None (call backward())")
    if not grads:
        return
    reached, why = _torch_node_grads(t, order)
    for fn, grad in reached.items():
        if getattr(fn, "variable", None) is None:
            nodes[ids[fn]].grad = "grad " + format_value(grad)
    g.notes.append("grad on an op: d(the drawn tensor)/d(its result); leaves show their .grad"
                   if not why else f"leaves show their .grad; {why}")
    if values:
        g.notes.append("values: the leaves and the result (autograd keeps no other results)")


def _torch_node_grads(t: Any, order: list[Any]) -> tuple[dict[Any, Any], str]:
    """The gradient arriving at each grad_fn node: the graph walked backward once more by
    calling each node's backward function ourselves, so no hook fires and no ``.grad``
    changes (an extra ``torch.autograd.grad`` would add to tensors that ``retain_grad()``)."""
    import torch

    if t.numel() != 1:
        return {}, "gradients of the ops need a one-element tensor (draw y.sum())"
    received: dict[Any, dict[int, Any]] = {t.grad_fn: {t.output_nr: torch.ones_like(t)}}
    reached: dict[Any, Any] = {}
    try:
        with torch.no_grad():
            for fn in reversed(order):  # every consumer of a node comes before it
                outs = received.get(fn)
                if getattr(fn, "variable", None) is not None or not outs:
                    continue  # AccumulateGrad would add to the leaf's .grad: never call it
                args = [outs.get(i) for i in range(max(outs) + 1)]
                if any(a is None for a in args):
                    return {}, "the gradients of ops with several results are not shown"
                reached[fn] = args[0]
                sent = fn(*args)
                sent = sent if isinstance(sent, tuple) else (sent,)
                for (nxt, index), g in zip(fn.next_functions, sent, strict=False):
                    if nxt is not None and g is not None:
                        into = received.setdefault(nxt, {})
                        into[index] = g if index not in into else into[index] + g
    except RuntimeError:  # backward() already freed the graph's saved tensors
        return {}, ("the ops' gradients need the graph: call backward(retain_graph=True) "
                    "before drawing")
    return reached, ""


# ---------------------------------------------------------------------------------------------
# minigraph Graphs


_EFFECTS = {"assign", "assign_add", "assign_sub", "group", "initializer"}


class GraphRun:
    """A copy of a minigraph Graph, run once with ``feed_dict``: nothing of the original (nor of
    ``session``) changes, and gradients may be built on the copy.

    ``nodes`` maps each name that one run can compute to its node in ``copy`` (side effects
    such as assign, group and the initializer are left out; so are nodes that need a
    placeholder not in ``feed_dict``, which ``notes`` names). Variables hold their initial
    values, or ``session``'s.
    """

    def __init__(self, graph: Any, feed_dict: Mapping | None, session: Any) -> None:
        self.graph = graph
        self.feeds = _feed_names(graph, feed_dict or {})
        runnable, self.missing = _computable(graph, self.feeds)
        self.notes = []
        if self.missing:
            self.notes.append("no value without a feed: " + ", ".join(
                f"%{m}" for m in self.missing) + " (add them to feed_dict)")
        self.copy, self.nodes = _copy(graph, runnable, self.feeds)
        self.state = _state(graph, session)
        if session is None and any(n.op == "variable" for n in graph.nodes):
            self.notes.append("variables hold their initial values (pass session= for a "
                              "Session's)")

    def target(self, grads_of: Any) -> Any:
        """The copy of the scalar to differentiate (see `resolve_grads_of`)."""
        y = resolve_grads_of(self.graph, grads_of)
        if y.name not in self.nodes:
            raise ValueError(f"gradients of %{y.name} need a value for it: add placeholders "
                             f"{', '.join('%' + m for m in self.missing)} to feed_dict")
        return self.nodes[y.name]

    def run(self, extra: Mapping[Any, Any] | None = None) -> tuple[dict[str, Any], dict]:
        """The value of every node (by name), and of the ``extra`` nodes of the copy (by key)."""
        import course_utils.minigraph as mg

        extra = extra or {}
        sess = mg.Session(self.copy, optimize=False)
        sess.state = dict(self.state)
        fetches = list(self.nodes.values()) + list(extra.values())
        fed = {self.nodes[k]: v for k, v in self.feeds.items() if k in self.nodes}
        values = sess.run(fetches, feed_dict=fed)
        n = len(self.nodes)
        return (dict(zip(self.nodes, values[:n], strict=True)),
                dict(zip(extra, values[n:], strict=True)))


def graph_run(graph: Any, feed_dict: Mapping | None, session: Any,
              grads_of: Any = None, grads: bool = False) -> tuple[dict, dict, list[str]]:
    """Run ``graph`` once on a copy: ``(values, grads, notes)``, dicts keyed by node name.

    ``grads`` come from ``mg.gradients(grads_of, every float node)`` built on the copy.
    """
    import course_utils.minigraph as mg

    run = GraphRun(graph, feed_dict, session)
    grad_nodes: dict[str, Any] = {}
    if grads:
        y = run.target(grads_of)
        xs = [n for n in run.nodes.values() if n.dtype is not None and n.dtype.kind == "f"]
        with run.copy.as_default():
            found = mg.gradients(y, xs)
        grad_nodes = {x.name: d for x, d in zip(xs, found, strict=True)
                      if isinstance(d, mg.Node)}
        run.notes.append(f"grad = d(%{y.name})/d(node), from mg.gradients")
    values, grad_values = run.run(grad_nodes)
    return values, grad_values, run.notes


def _feed_names(graph: Any, feed_dict: Mapping) -> dict[str, Any]:
    out = {}
    for key, value in feed_dict.items():
        name = key if isinstance(key, str) else getattr(key, "name", None)
        if name is None or not any(n.name == name for n in graph.nodes):
            raise ValueError(f"feed_dict key {key!r} is not a node of this graph; feed "
                             f"placeholders (the nodes or their names)")
        out[name] = value
    return out


def _computable(graph: Any, feeds: Mapping[str, Any]) -> tuple[set[str], list[str]]:
    """Names of the nodes a run can compute, and the unfed placeholders that stop the rest."""
    ok: set[str] = set()
    missing: list[str] = []
    for n in graph.nodes:
        if n.op in _EFFECTS:
            continue
        if n.name in feeds:
            ok.add(n.name)
        elif n.op == "placeholder":
            missing.append(n.name)
        elif all(x.name in ok for x in n.inputs):
            ok.add(n.name)
    return ok, missing


def _copy(graph: Any, keep: set[str], fed: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A new graph with the nodes ``keep`` (same names), pruned as ``Session.run`` prunes: a
    fed node becomes a placeholder. Gradients built on it leave ``graph`` as it was."""
    from course_utils.minigraph.session import prune

    copy = prune(graph, [n for n in graph.nodes if n.name in keep], fed)
    return copy, {n.name: n for n in copy.nodes}


def _state(graph: Any, session: Any) -> dict[str, np.ndarray]:
    """Each variable's value: the Session's when one is given, else its initial value."""
    state = {v.name: v.attrs["value"] for v in graph.nodes if v.op == "variable"}
    if session is not None:
        state.update({k: v for k, v in session.state.items() if k in state})
    return state


def resolve_grads_of(graph: Any, grads_of: Any) -> Any:
    """The scalar node to differentiate: ``grads_of`` (a node or its name), else the graph's one
    scalar float result, else the one scalar that an ``mg.gradients`` call in it seeded."""
    if grads_of is not None:
        name = grads_of if isinstance(grads_of, str) else getattr(grads_of, "name", None)
        match = [n for n in graph.nodes if n.name == name]
        if not match:
            raise ValueError(f"grads_of={grads_of!r} is not a node of this graph")
        y = match[0]
        if y.dtype is None or y.dtype.kind != "f" or any(d != 1 for d in y.shape):
            raise ValueError(f"grads_of=%{y.name} is {format_shape(y.shape)} {y.dtype}; "
                             f"gradients are of one float number (a loss): reduce it first, "
                             f"e.g. mg.sum")
        return y

    def scalar(n: Any) -> bool:
        return n.dtype is not None and n.dtype.kind == "f" and n.shape == ()

    outputs = [n for n in getattr(graph, "outputs", []) or [] if scalar(n)]
    if len(outputs) == 1:
        return outputs[0]
    used = {x.name for n in graph.nodes for x in n.inputs}
    sinks = [n for n in graph.nodes if n.name not in used and scalar(n) and n.op not in _EFFECTS]
    if len(sinks) == 1:
        return sinks[0]
    seeded = list({x.name: x for n in graph.nodes if n.op == "ones_like"
                   for x in n.inputs if scalar(x)}.values())
    if len(seeded) == 1:
        return seeded[0]
    candidates = [n.name for n in graph.nodes if scalar(n) and n.op not in ("constant",)]
    raise ValueError("grads=True needs the one number to differentiate; pass grads_of=<node or "
                     "its name>" + (f", e.g. one of {candidates[:6]}" if candidates else ""))


def annotate_graph(g: DrawGraph, graph: Any, *, values: bool, grads: bool,
                   feed_dict: Mapping | None, session: Any, grads_of: Any) -> None:
    """Write one run's values (and gradients) on the nodes of ``g``, the drawing of ``graph``."""
    vals, grad_vals, notes = graph_run(graph, feed_dict, session, grads_of, grads)
    nodes = {n.id: n for n in g.nodes}
    for name, value in vals.items():
        node = nodes.get(name)
        if node is None:
            continue
        if values:
            node.value = "= " + format_value(value)
            node.details = tuple(d for d in node.details if not d.startswith("= "))
        if name in grad_vals:
            node.grad = "grad " + format_value(grad_vals[name])
    g.notes.extend(note for note in notes if values or not note.startswith("variables"))
    if values and g.clusters:
        g.notes.append("values inside the clusters are not recorded: a run sees each cond or "
                       "while_loop as one op")
