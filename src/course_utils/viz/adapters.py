"""One adapter per framework: each turns a framework's graph into a neutral `DrawGraph`.

The adapters agree on one vocabulary, so every drawing reads the same way:

- ``input``: what the caller feeds (TF ``Placeholder``, fx/export ``placeholder``, a TorchScript
  graph input, a minigraph ``placeholder``);
- ``param``: state the graph reads (TF variables, ``nn.Parameter``, autograd leaves);
- ``const``: constants and buffers;
- ``op``: everything else, labelled with the framework's own op name (``MatMul``,
  ``aten::linear``, ``AddmmBackward0``) so the drawing matches what the framework prints;
- ``output``: one terminal node that the graph's results flow into.

Edges run in the direction data flows in the forward computation, and carry the shape of the
tensor when the framework knows it.

Frameworks are imported lazily: an object can only be a torch tensor if torch is already
imported, so drawing a minigraph never pays for importing torch or TensorFlow.
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .model import DrawCluster, DrawGraph, format_shape, name_detail

SUPPORTED = (
    "a minigraph Graph, or a traced minigraph function (an object with get_graph: its most "
    "recently traced graph)",
    "a tf.Graph (also a FuncGraph) or a GraphDef",
    "a tf.function's ConcreteFunction, or a tf.function that has been traced",
    "a torch.fx.GraphModule (or torch.fx.Graph)",
    "a torch.export.ExportedProgram",
    "a TorchScript module or function (torch.jit.trace/script), or a raw torch._C.Graph",
    "a torch.Tensor with a grad_fn (its autograd graph)",
    "a minigraph eager Tensor with a grad_fn (its tape)",
    "a course_utils.viz DrawGraph",
)


def to_drawgraph(obj: Any, *, params: Mapping[str, Any] | None = None) -> DrawGraph:
    """Pick the adapter for ``obj`` and run it; a `TypeError` lists what is supported."""
    if params is not None and not (_is_torch_tensor(obj) or _is_mg_tensor(obj)):
        raise ValueError("params= names the leaves of a tensor's autograd graph (torch) or tape "
                         f"(minigraph); it does not apply to {type(obj).__name__}")
    if isinstance(obj, DrawGraph):
        return copy.deepcopy(obj)  # draw() highlights and retitles: never touch the caller's
    if _is_torch_tensor(obj):
        return _from_tensor(obj, params)
    if _is_mg_tensor(obj):
        return _from_mg_tensor(obj, params)
    for matches, adapter in _ADAPTERS:
        if matches(obj):
            return adapter(obj)
    raise TypeError(
        f"viz.draw cannot draw a {type(obj).__module__}.{type(obj).__qualname__}. "
        "It draws:\n  - " + "\n  - ".join(SUPPORTED)
    )


def is_mg_tensor(obj: Any) -> bool:
    """A minigraph eager tensor (False without importing minigraph when it is not loaded)."""
    return _is_mg_tensor(obj)


def is_torch_tensor(obj: Any) -> bool:
    """A torch tensor (False without importing torch when it is not loaded)."""
    return _is_torch_tensor(obj)


def as_mg_graph(obj: Any) -> Any:
    """The minigraph Graph that `draw` would draw for ``obj`` (a traced function's latest
    trace), or None when ``obj`` is not a minigraph graph."""
    if isinstance(obj, DrawGraph):
        return None
    for matches, _ in _ADAPTERS:  # the objects of other frameworks come first, as in draw
        if matches(obj):
            if _is_mg_graph(obj):
                return obj
            return _latest_mg_graph(obj) if _is_mg_function(obj) else None
    return None


def _module(name: str) -> Any:
    """The framework module if the user's program already imported it, else None."""
    return sys.modules.get(name)


# ---------------------------------------------------------------------------------------------
# minigraph. Duck-typed against the IR spec: graph.nodes is a list of Node in topological order,
# each with name, op, inputs (Nodes), attrs, shape, dtype.

# A traced function's captured tensors are its parameters (TF draws captured variables alike).
_MG_KIND = {"placeholder": "input", "variable": "param", "capture": "param", "constant": "const"}
# Ops that act by side effect: never what anyone means by "the output" of a TF1-style graph.
_MG_EFFECTS = {"assign", "assign_add", "assign_sub", "group", "initializer"}


def _is_mg_graph(obj: Any) -> bool:
    nodes = getattr(obj, "nodes", None)
    if not isinstance(nodes, (list, tuple)):
        return False
    return all(hasattr(n, "op") and hasattr(n, "inputs") and hasattr(n, "name") for n in nodes)


def _is_mg_function(obj: Any) -> bool:
    return callable(getattr(obj, "get_graph", None)) and not _is_mg_graph(obj)


def _from_mg_function(fn: Any) -> DrawGraph:
    graph = _latest_mg_graph(fn)
    name = getattr(fn, "__name__", type(fn).__name__)
    g = _from_mg_graph(graph)
    g.title = f"minigraph function {name}: most recent trace ({len(graph.nodes)} nodes)"
    return g


def _latest_mg_graph(fn: Any) -> Any:
    # A traced function keeps its graphs keyed by input signature; the newest is the last one
    # inserted (dicts keep insertion order).
    for attr in ("graphs", "concrete_graphs", "_graphs", "_cache"):
        store = getattr(fn, attr, None)
        if isinstance(store, Mapping) and store:
            last = list(store.values())[-1]
        elif isinstance(store, (list, tuple)) and store:
            last = store[-1]
        else:
            continue
        last = getattr(last, "graph", last)  # a cache entry may wrap the graph
        if _is_mg_graph(last):
            return last
    name = getattr(fn, "__name__", "f")
    raise ValueError(
        f"minigraph function {name!r} has no traced graph yet: call it once, or draw "
        f"{name}.get_graph(*example_args)"
    )


def _from_mg_graph(graph: Any) -> DrawGraph:
    g = DrawGraph(title=f"minigraph Graph ({len(graph.nodes)} nodes)", scope_sep="_")
    used: set[str] = set()
    _add_mg_nodes(g, graph, "", None, None)
    for n in graph.nodes:
        used.update(x.name for x in n.inputs)
    # A traced graph lists its results; a TF1-style graph has none, so take its sinks that
    # produce a value.
    outputs = list(getattr(graph, "outputs", None) or []) or [
        n for n in graph.nodes
        if n.name not in used and n.op not in _MG_EFFECTS and getattr(n, "dtype", 0) is not None
    ]
    _add_output(g, [(o.name, format_shape(o.shape)) for o in outputs])
    return g


def _add_mg_nodes(g: DrawGraph, graph: Any, prefix: str, cluster: DrawCluster | None,
                  scope: tuple[str, ...] | None) -> None:
    """Draw ``graph``'s nodes with ids ``prefix + name``; inside a sub-graph (``cluster``),
    every node joins that cluster. A node whose attrs hold graphs (``cond``'s branches,
    ``while_loop``'s test and body) gets one cluster per graph, drawn just before it: its
    operands flow into the sub-graphs' inputs, and their results flow into it."""
    for n in graph.nodes:
        nid = prefix + n.name
        kind = _MG_KIND.get(n.op, "op")
        details = [name_detail(n.name, n.op), format_shape(n.shape) if kind != "op" else ""]
        if kind == "const":
            details.append(_small_value(getattr(n, "attrs", {}).get("value")))
        subs = [(key, sub) for key, sub in getattr(n, "attrs", {}).items() if _is_mg_graph(sub)]
        routed: set[int] = set()  # operands that flow into the sub-graphs instead of the node
        for key, sub in subs:
            c = g.add_cluster(f"{nid}/{key}", f"{n.name}: {key}",
                              parent=cluster.id if cluster else None)
            _add_mg_nodes(g, sub, f"{nid}/{key}/", c, scope or (n.name, key))
            params = [p for p in sub.nodes if p.op == "placeholder"]
            if 0 < len(params) <= len(n.inputs):
                first = len(n.inputs) - len(params)  # the operands come last, in order
                for j, p in enumerate(params, start=first):
                    x = n.inputs[j]
                    g.add_edge(prefix + x.name, f"{nid}/{key}/{p.name}", format_shape(x.shape))
                    routed.add(j)
            for o in getattr(sub, "outputs", None) or []:
                g.add_edge(f"{nid}/{key}/{o.name}", nid, format_shape(o.shape))
        g.add_node(nid, n.op, kind=kind, details=details,
                   name=nid if prefix else None,
                   scope=scope if scope is not None else _mg_scope(n))
        if cluster is not None:
            cluster.members.append(nid)
        for j, x in enumerate(n.inputs):
            if j not in routed:
                g.add_edge(prefix + x.name, nid, format_shape(x.shape))


def _mg_scope(node: Any) -> tuple[str, ...]:
    """minigraph names are identifiers, so a name prefix is the scope: ``layer1_w`` is in
    ``layer1``. Default names (``matmul_2``, ``log_softmax``) are no scope."""
    base = re.sub(r"_\d+$", "", node.name)
    if base == node.op or "_" not in base:
        return ()
    return (base.split("_")[0],)


def _small_value(value: Any) -> str:
    """``= 2`` for a scalar constant; arrays are described by the shapes on their edges."""
    try:
        arr = np.asarray(value)
    except Exception:  # any odd value just isn't shown
        return ""
    if value is None or arr.ndim != 0 or arr.dtype == object:
        return ""
    return f"= {arr.reshape(()).item():.4g}" if arr.dtype.kind == "f" else f"= {arr.item()}"


def _add_output(g: DrawGraph, sources: list[tuple[str, str]], label: str = "output",
                details: tuple[str, ...] = ()) -> None:
    """One terminal node that every result flows into, so the output is always marked."""
    if not sources:
        return
    g.add_node("output", label, kind="output", details=details)
    for src, shape in sources:
        g.add_edge(src, "output", shape)


# ---------------------------------------------------------------------------------------------
# TensorFlow. Every TF graph becomes a GraphDef (plain protos: node name, op, inputs "x:1" and
# "^ctrl"), so one adapter serves tf.Graph, FuncGraph, ConcreteFunction and tf.function.

_TF_INPUT = {"Placeholder", "PlaceholderWithDefault"}
_TF_PARAM = {"VarHandleOp", "VariableV2", "Variable"}
_TF_CONST = {"Const", "HostConst"}
# Bookkeeping a TF1 graph grows around every variable (is it initialized? its value as a
# tensor); left unused, they are not what anyone means by "the output".
_TF_NOT_OUTPUT = {"VarIsInitializedOp", "IsVariableInitialized", "ReadVariableOp"}
_DT_RESOURCE = 20  # types.proto: DT_RESOURCE; a variable handle, not a tensor of numbers
_DT_VARIANT = 21


def _is_tf_graph(obj: Any) -> bool:
    tf = _module("tensorflow")
    return tf is not None and isinstance(obj, tf.Graph)


def _is_graphdef(obj: Any) -> bool:
    return type(obj).__name__ == "GraphDef" and hasattr(obj, "node")


def _is_tf_concrete(obj: Any) -> bool:
    tf = _module("tensorflow")
    return tf is not None and isinstance(obj, tf.types.experimental.ConcreteFunction)


def _is_tf_function(obj: Any) -> bool:
    tf = _module("tensorflow")
    return tf is not None and isinstance(obj, tf.types.experimental.PolymorphicFunction)


def _from_tf_graph(graph: Any) -> DrawGraph:
    # A FuncGraph knows its outputs and which placeholders stand for captured variables.
    outputs = [t.op.name for t in getattr(graph, "outputs", [])] or None
    names = _captured_variable_names(graph)
    title = f"tf.function graph {graph.name}" if outputs else "tf.Graph"
    return _from_graphdef(graph.as_graph_def(add_shapes=True), outputs, names, title)


def _captured_variable_names(graph: Any) -> dict[str, str]:
    """Map each placeholder that carries a captured tf.Variable's handle to the variable name."""
    by_handle = {id(v.handle): v.name.removesuffix(":0") for v in getattr(graph, "variables", [])}
    names = {}
    for external, internal in getattr(graph, "captures", []):
        if id(external) in by_handle:
            names[internal.op.name] = by_handle[id(external)]
    return names


def _from_tf_concrete(fn: Any) -> DrawGraph:
    g = _from_tf_graph(fn.graph)
    g.title = f"tf.function {fn.graph.name}: concrete function"
    return g


def _from_tf_function(fn: Any) -> DrawGraph:
    if getattr(fn, "input_signature", None) is not None:
        concrete = fn.get_concrete_function()
    else:
        # NB: TF keeps one ConcreteFunction per traced signature; the last listed is the newest.
        lister = getattr(fn, "_list_all_concrete_functions", None)
        traced = list(lister()) if lister is not None else []
        if not traced:
            name = getattr(fn, "__name__", "f")
            raise ValueError(
                f"tf.function {name!r} has not been traced yet: call it once, or draw "
                f"{name}.get_concrete_function(example_input)"
            )
        concrete = traced[-1]
    return _from_tf_concrete(concrete)


def _from_graphdef_proto(gd: Any) -> DrawGraph:
    """A GraphDef: import it into a fresh tf.Graph so TF infers the shapes the proto lacks."""
    tf = _module("tensorflow")
    if tf is not None:
        graph = tf.Graph()
        try:
            with graph.as_default():
                tf.graph_util.import_graph_def(gd, name="")
        except Exception:  # e.g. an op this TF build lacks: draw the bare proto
            pass
        else:
            g = _from_tf_graph(graph)
            g.title = "GraphDef"
            return g
    return _from_graphdef(gd)


def _from_graphdef(
    gd: Any,
    outputs: list[str] | None = None,
    var_names: Mapping[str, str] | None = None,
    title: str = "GraphDef",
) -> DrawGraph:
    g = DrawGraph(title=title, scope_sep="/")
    shapes = {n.name: _tf_output_shapes(n) for n in gd.node}
    library = {f.signature.name: f for f in gd.library.function}
    _add_tf_nodes(g, gd, shapes, var_names or {}, library, "", None)
    used = {ref.lstrip("^").partition(":")[0] for n in gd.node for ref in n.input}
    if outputs is None:
        outputs = [
            n.name
            for n in gd.node
            if n.name not in used and shapes[n.name] and n.op not in _TF_NOT_OUTPUT
        ]
    _add_output(g, [(o, _pick(shapes.get(o, []), 0)) for o in outputs])
    return g


# The function-valued attrs of TF's control flow, in the order they are drawn.
_TF_BODIES = ("then_branch", "else_branch", "cond", "body")


def _add_tf_nodes(g: DrawGraph, gd: Any, shapes: Mapping[str, list[str]],
                  var_names: Mapping[str, str], library: Mapping[str, Any], prefix: str,
                  cluster: DrawCluster | None) -> None:
    """Draw ``gd``'s nodes with ids ``prefix + name`` (in ``cluster`` if given). An ``If`` or
    ``While`` node's functions (``then_branch``/``else_branch``, ``cond``/``body``) are drawn
    as clusters just before it, as minigraph's cond and while_loop are."""
    for n in gd.node:
        nid = prefix + n.name
        dtype = n.attr["dtype"].type if "dtype" in n.attr else 0
        if n.op in _TF_PARAM or (n.op in _TF_INPUT and dtype == _DT_RESOURCE):
            kind = "param"  # in a FuncGraph a captured variable arrives as a resource placeholder
        elif n.op in _TF_INPUT:
            kind = "input"
        elif n.op in _TF_CONST:
            kind = "const"
        else:
            kind = "op"
        details = [var_names.get(n.name) or name_detail(n.name, n.op)]
        if kind == "const":
            details.append(_tf_const_value(n))
        data_inputs = [ref for ref in n.input if not ref.startswith("^")]
        routed: set[str] = set()  # inputs that flow into the functions instead of the node
        for key in sorted((k for k in n.attr if n.attr[k].func.name in library),
                          key=lambda k: (_TF_BODIES.index(k) if k in _TF_BODIES else 9, k)):
            fn = library[n.attr[key].func.name]
            sub, sub_outputs = _tf_function_graph(fn)
            c = g.add_cluster(f"{nid}/{key}", f"{n.name}: {key} ({fn.signature.name})",
                              parent=cluster.id if cluster else None)
            sub_shapes = {m.name: _tf_output_shapes(m) for m in sub.node}
            _add_tf_nodes(g, sub, sub_shapes, {}, library, f"{nid}/{key}/", c)
            params = [m.name for m in sub.node if m.op in _TF_INPUT]
            pairs = list(zip(data_inputs[len(data_inputs) - len(params):], params, strict=False))
            if len(params) <= len(data_inputs):
                for ref, param in pairs:
                    src, _, index = ref.partition(":")
                    g.add_edge(prefix + src, f"{nid}/{key}/{param}",
                               _pick(shapes.get(src, []), int(index or 0)))
                    routed.add(ref)
            for out in sub_outputs:
                g.add_edge(f"{nid}/{key}/{out}", nid, _pick(sub_shapes.get(out, []), 0))
        g.add_node(nid, n.op, kind=kind, details=details,
                   name=nid if prefix else None, scope=n.name.split("/")[:-1] if not prefix
                   else [s for s in prefix.split("/") if s][:2])
        if cluster is not None:
            cluster.members.append(nid)
        for ref in n.input:
            if ref in routed:
                continue
            control = ref.startswith("^")
            src, _, index = ref.lstrip("^").partition(":")
            label = "" if control else _pick(shapes.get(src, []), int(index or 0))
            g.add_edge(prefix + src, nid, label, control=control)


def _tf_function_graph(fn: Any) -> tuple[Any, list[str]]:
    """A library function (a FunctionDef) as a GraphDef, with shapes when TF can rebuild it,
    and the names of the nodes that make its results."""
    from tensorflow.python.framework import function_def_to_graph as fdg

    try:
        func_graph = fdg.function_def_to_graph(fn)
    except Exception:  # e.g. an op this TF build lacks: the bare body, without shapes
        sub, _ = fdg.function_def_to_graph_def(fn)
        return sub, [ref.partition(":")[0] for ref in fn.ret.values()]
    return func_graph.as_graph_def(add_shapes=True), [t.op.name for t in func_graph.outputs]


def _tf_output_shapes(node: Any) -> list[str]:
    """Shape text of each output (from ``add_shapes=True``); resource/variant outputs get ''."""
    if "_output_shapes" not in node.attr:
        return []
    texts = []
    for s in node.attr["_output_shapes"].list.shape:
        if s.unknown_rank:
            texts.append("")
        else:
            texts.append(format_shape([d.size if d.size >= 0 else None for d in s.dim]))
    dtype = node.attr["dtype"].type if "dtype" in node.attr else 0
    if node.op in _TF_PARAM or dtype in (_DT_RESOURCE, _DT_VARIANT):
        return [""] * len(texts)  # a handle's shape () would read as a scalar tensor
    return texts


def _pick(texts: list[str], i: int) -> str:
    return texts[i] if i < len(texts) else ""


def _tf_const_value(node: Any) -> str:
    tf = _module("tensorflow")
    if tf is None:
        return ""
    try:
        return _small_value(tf.make_ndarray(node.attr["value"].tensor))
    except Exception:  # a constant we cannot decode is drawn without its value
        return ""


# ---------------------------------------------------------------------------------------------
# torch.fx and torch.export. An fx graph already speaks our vocabulary: placeholder, get_attr,
# call_function / call_method / call_module, output.


def _is_fx(obj: Any) -> bool:
    fx = _module("torch.fx")
    return fx is not None and isinstance(obj, (fx.GraphModule, fx.Graph))


def _is_exported(obj: Any) -> bool:
    export = _module("torch.export")
    return export is not None and isinstance(obj, export.ExportedProgram)


def _from_fx(obj: Any) -> DrawGraph:
    fx = _module("torch.fx")
    module = obj if isinstance(obj, fx.GraphModule) else None
    graph = obj.graph if module is not None else obj
    name = type(module).__name__ if module is not None else "Graph"
    return _fx_nodes(graph, module, {}, f"torch.fx {name}")


def _from_exported(ep: Any) -> DrawGraph:
    from torch.export.graph_signature import InputKind

    kinds = {
        InputKind.PARAMETER: "param",
        InputKind.BUFFER: "const",
        InputKind.CONSTANT_TENSOR: "const",
    }
    roles = {}  # placeholder name -> (kind, fully qualified name of the state it carries)
    for spec in ep.graph_signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if name is not None:
            roles[name] = (kinds.get(spec.kind, "input"), spec.target or "")
    return _fx_nodes(ep.graph_module.graph, None, roles, "torch.export ExportedProgram")


def _fx_nodes(
    graph: Any, module: Any, roles: Mapping[str, tuple[str, str]], title: str
) -> DrawGraph:
    g = DrawGraph(title=title, scope_sep=".")
    shapes = {n.name: _fx_shape(n) for n in graph.nodes}
    for n in graph.nodes:
        if n.op == "output":
            srcs = [(a.name, shapes[a.name]) for a in n.all_input_nodes]
            _add_output(g, srcs)
            continue
        kind, label, detail, path = _fx_describe(n, module, roles)
        details = [detail, shapes[n.name] if kind != "op" else ""]
        g.add_node(n.name, label, kind=kind, details=details, scope=_fx_scope(n, path))
        for a in n.all_input_nodes:
            g.add_edge(a.name, n.name, shapes[a.name])
    return g


def _fx_describe(n: Any, module: Any, roles: Mapping) -> tuple[str, str, str, str]:
    """(kind, label, detail, module path) of one fx node."""
    if n.op == "placeholder":
        kind, target = roles.get(n.name, ("input", ""))
        # NB: torch.compile (Dynamo) lifts the module's parameters and buffers to graph inputs,
        # marks them as static inputs, and names them L_self_modules_fc1_parameters_weight_
        # or L_self_buffers_scale_.
        if n.meta.get("tensor_dict", {}).get("_dynamo_static_input_type"):
            kind = "const" if "_buffers_" in n.name else "param"
        return kind, "placeholder", target or n.name, target
    if n.op == "get_attr":
        kind = "const"
        if module is not None:
            torch = _module("torch")
            try:
                attr = module.get_parameter(n.target)
                kind = "param" if isinstance(attr, torch.nn.Parameter) else "const"
            except AttributeError:
                pass
        return kind, "get_attr", n.target, n.target
    if n.op == "call_module":
        sub = type(module.get_submodule(n.target)).__name__ if module is not None else "module"
        return "op", sub, n.target, n.target
    label = _fx_target_name(n.target)
    base = label.split(".")[1] if label.startswith("aten.") else label  # aten.mul.Tensor -> mul
    return "op", label, name_detail(n.name, base), ""


def _fx_target_name(target: Any) -> str:
    if isinstance(target, str):  # call_method: the method name
        return target
    text = str(target)
    if text.startswith("aten."):  # an OpOverload: aten.linear.default -> aten.linear
        return text.removesuffix(".default")
    return getattr(target, "__name__", text)


def _fx_shape(n: Any) -> str:
    # export sets "val", ShapeProp "tensor_meta", Dynamo "example_value"
    val = n.meta.get("val", n.meta.get("tensor_meta", n.meta.get("example_value")))
    shape = getattr(val, "shape", None)
    return format_shape(tuple(shape)) if shape is not None else ""


def _fx_scope(n: Any, path: str) -> tuple[str, ...]:
    """The module path a node belongs to: its qualified name, else the innermost nn.Module."""
    if path:
        return tuple(path.split(".")[:-1])
    stack = n.meta.get("nn_module_stack")
    if stack:
        inner = list(stack.values())[-1][0]
        inner = re.sub(r"^L\[['\"]\w+['\"]\]\.?", "", inner)  # Dynamo's L['self'].layer1
        return tuple(p for p in inner.split(".") if p)
    return ()


# ---------------------------------------------------------------------------------------------
# TorchScript. A graph of nodes (``aten::mul``) over values; modules read their parameters with
# chains of ``prim::GetAttr`` from ``self``, which we fold into one param node per tensor.


def _is_torchscript(obj: Any) -> bool:
    torch = _module("torch")
    if torch is None:
        return False
    jit_types = (torch.jit.ScriptModule, torch.jit.ScriptFunction, torch._C.Graph)
    return isinstance(obj, jit_types)


def _from_torchscript(obj: Any) -> DrawGraph:
    torch = _module("torch")
    if isinstance(obj, torch._C.Graph):
        graph, title, param_names = obj, "TorchScript graph", None
    elif isinstance(obj, torch.jit.ScriptModule):
        # inlined_graph shows the ops of submodules instead of opaque prim::CallMethod calls
        graph = obj.inlined_graph
        title = f"TorchScript module {obj.original_name}"
        param_names = {name for name, _ in obj.named_parameters()}
    else:
        graph, title, param_names = obj.graph, f"TorchScript function {obj.name}", None
    return _TorchScriptAdapter(graph, title, param_names).run()


class _TorchScriptAdapter:
    # NB: torch._C.Value wrappers are fresh Python objects on every access, so values are keyed
    # by Value.unique(), their number inside the graph.
    def __init__(self, graph: Any, title: str, param_names: set[str] | None):
        self.graph, self.param_names = graph, param_names
        self.g = DrawGraph(title=title, scope_sep=".")
        self.producer: dict[int, str] = {}  # value -> id of the node that makes it
        self.attr_path: dict[int, str] = {}  # value holding a submodule -> its path ("" = self)
        self.n_control = 0

    def run(self) -> DrawGraph:
        for v in self.graph.inputs():
            if v.type().kind() == "ClassType":  # `self`: not data, the root of GetAttr chains
                self.attr_path[v.unique()] = ""
                continue
            nid = self._new_id()
            details = [v.debugName(), _ts_shape(v)]
            self.g.add_node(nid, "input", kind="input", name=v.debugName(), details=details)
            self.producer[v.unique()] = nid
        self._block(self.graph.nodes(), ())
        outs = [
            (self.producer[v.unique()], _ts_shape(v))
            for v in self.graph.outputs()
            if v.unique() in self.producer
        ]
        _add_output(self.g, outs)
        return self.g

    def _new_id(self) -> str:
        return f"n{len(self.g.nodes) + 1}"

    def _block(self, nodes: Any, scope: tuple[str, ...]) -> None:
        for node in nodes:
            kind = node.kind()
            if kind == "prim::GetAttr" and self._get_attr(node):
                continue
            node_scope = scope or _ts_scope(node)
            blocks = list(node.blocks())
            # Control flow (prim::If, prim::Loop) owns blocks of nodes. Draw the blocks first,
            # in a scope named after their owner, then the owner, which their results flow into.
            self.n_control += bool(blocks)
            for i, block in enumerate(blocks):
                self._block(block.nodes(), (*node_scope, f"{kind}_{self.n_control}", f"block{i}"))
            nid = self._new_id()
            outs = list(node.outputs())
            is_const = kind == "prim::Constant"
            self.g.add_node(nid, kind, kind="const" if is_const else "op",
                            name=outs[0].debugName() if outs else nid,
                            details=[_ts_constant(node)] if is_const else [], scope=node_scope)
            self._inputs(node.inputs(), nid)
            for block in blocks:
                self._inputs(block.outputs(), nid)
            for v in outs:
                self.producer[v.unique()] = nid

    def _get_attr(self, node: Any) -> bool:
        """Fold ``self.fc1.weight`` into one param node; True when the node needs no box."""
        owner = node.inputsAt(0).unique()
        if owner not in self.attr_path:
            return False
        out = node.output()
        path = ".".join(p for p in (self.attr_path[owner], node.s("name")) if p)
        if out.type().kind() == "ClassType":  # a submodule: remember the path, draw nothing
            self.attr_path[out.unique()] = path
            return True
        is_param = self.param_names is None or path in self.param_names
        nid = self._new_id()
        self.g.add_node(nid, "GetAttr", kind="param" if is_param else "const", name=path,
                        details=[path, _ts_shape(out)], scope=path.split(".")[:-1])
        self.producer[out.unique()] = nid
        return True

    def _inputs(self, values: Any, nid: str) -> None:
        for v in values:
            if v.unique() in self.producer:
                self.g.add_edge(self.producer[v.unique()], nid, _ts_shape(v))


def _ts_shape(v: Any) -> str:
    t = v.type()
    if t.kind() != "TensorType":
        return ""
    sizes = t.sizes()  # None when tracing/scripting did not record the shape
    return format_shape(sizes) if sizes is not None else ""


def _ts_constant(node: Any) -> str:
    out = node.output()
    if out.type().kind() == "NoneType":
        return "= None"
    try:
        value = out.toIValue()
    except Exception:  # e.g. a constant of a type Python cannot hold
        return ""
    text = repr(value)
    return "= " + (text if len(text) <= 16 else text[:15] + "…")


def _ts_scope(node: Any) -> tuple[str, ...]:
    """``__module.layer1/__module.layer1.conv`` (jit.trace's scopes) -> ``('layer1', 'conv')``."""
    name = node.scopeName()
    if not name:
        return ()
    inner = name.split("/")[-1].removeprefix("__module")
    return tuple(p for p in inner.split(".") if p)


# ---------------------------------------------------------------------------------------------
# A torch tensor's autograd graph: grad_fn nodes linked by next_functions. We draw it forward
# (leaves at the top, the tensor at the bottom), the way the computation ran.


def _is_torch_tensor(obj: Any) -> bool:
    torch = _module("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _from_tensor(t: Any, params: Mapping[str, Any] | None) -> DrawGraph:
    leaf_names = {id(p): name for name, p in (params or {}).items()}
    g = DrawGraph(title="autograd graph (grad_fn)", scope_sep=".")
    root = t.grad_fn
    if root is None:
        if not t.requires_grad:
            raise ValueError(
                "this tensor has no autograd graph: nothing it was computed from requires grad "
                "(or it was computed under torch.no_grad()). Create the inputs with "
                "requires_grad=True and compute it again."
            )
        g.add_node("n1", "leaf", kind="param", details=_leaf_details(t, leaf_names))
        _add_output(g, [("n1", format_shape(tuple(t.shape)))], "tensor",
                    (format_shape(tuple(t.shape)),))
        return g
    ids: dict[Any, str] = {}
    for fn in _post_order(root):  # inputs before the nodes that use them: forward order
        nid = ids[fn] = f"n{len(ids) + 1}"
        label = fn.name().split("::")[-1]
        variable = getattr(fn, "variable", None)  # AccumulateGrad holds the leaf tensor
        if variable is not None:
            name = leaf_names.get(id(variable), "")
            scope = name.split(".")[:-1]
            g.add_node(nid, label, kind="param", name=name or label,
                       details=_leaf_details(variable, leaf_names), scope=scope)
        else:
            g.add_node(nid, label)
        for src, index in fn.next_functions:
            if src is not None:
                g.add_edge(ids[src], nid, _grad_fn_shape(src, index))
    out_shape = format_shape(tuple(t.shape))
    dtype = str(t.dtype).removeprefix("torch.")
    _add_output(g, [(ids[root], out_shape)], "tensor", (out_shape, dtype))
    return g


def _post_order(root: Any) -> list[Any]:
    """Every grad_fn reachable from ``root``, each after all of its inputs (iterative DFS)."""
    order, seen, stack = [], {root}, [(root, iter(root.next_functions))]
    while stack:
        fn, children = stack[-1]
        for child, _ in children:
            if child is not None and child not in seen:
                seen.add(child)
                stack.append((child, iter(child.next_functions)))
                break
        else:
            stack.pop()
            order.append(fn)
    return order


def _grad_fn_shape(fn: Any, index: int) -> str:
    """The shape of the forward tensor ``fn`` produced (= of the gradient it receives)."""
    variable = getattr(fn, "variable", None)
    if variable is not None:
        return format_shape(tuple(variable.shape))
    meta = getattr(fn, "_input_metadata", None)  # private but stable since torch 2.0
    try:
        return format_shape(tuple(meta[index].shape))
    except Exception:  # without metadata the edge just has no label
        return ""


def _leaf_details(t: Any, leaf_names: Mapping[int, str]) -> list[str]:
    details = [leaf_names.get(id(t), ""), format_shape(tuple(t.shape))]
    if t.grad is not None:
        details.append("grad " + format_shape(tuple(t.grad.shape)))
    return details


# ---------------------------------------------------------------------------------------------
# A minigraph eager tensor's tape: each result's grad_fn (a TapeEntry) holds its op and its input
# tensors. Drawn forward like the autograd graph above, but the tape keeps the tensors themselves,
# so every input appears: leaves that require grad as parameters, everything else that no op on
# the tape made (data, numbers an op turned into tensors) as constants.


def _is_mg_tensor(obj: Any) -> bool:
    eager = _module("course_utils.minigraph.eager")
    return eager is not None and isinstance(obj, eager.Tensor)


def _from_mg_tensor(t: Any, params: Mapping[str, Any] | None) -> DrawGraph:
    if t.grad_fn is None and not t.requires_grad:
        raise ValueError(
            "this tensor has no tape: nothing it was computed from requires grad (or it was "
            "computed under mg.no_grad()). Create the inputs with mg.tensor(..., "
            "requires_grad=True) and compute it again."
        )
    names = {id(p): name for name, p in (params or {}).items()}
    g = DrawGraph(title="minigraph eager tape (grad_fn)", scope_sep=".")
    ids: dict[int, str] = {}
    for v in _tape_post_order(t):  # inputs before the results made from them: forward order
        nid = ids[id(v)] = f"n{len(ids) + 1}"
        name = names.get(id(v), "")
        if v.grad_fn is not None:
            g.add_node(nid, v.grad_fn.op.name, details=[name])
            for x in v.grad_fn.inputs:
                g.add_edge(ids[id(x)], nid, format_shape(x.shape))
        elif v.requires_grad:
            g.add_node(nid, "leaf", kind="param", name=name or "leaf",
                       details=_leaf_details(v, names), scope=name.split(".")[:-1])
        else:
            details = [name, format_shape(v.shape), _small_value(v.numpy())]
            g.add_node(nid, "constant", kind="const", name=name or "constant", details=details)
    shape = format_shape(t.shape)
    _add_output(g, [(ids[id(t)], shape)], "tensor", (shape, str(t.dtype)))
    return g


def _tape_post_order(root: Any) -> list[Any]:
    """Every tensor on ``root``'s tape, leaves included, each after all of its inputs."""

    def inputs(v: Any) -> Any:
        return iter(v.grad_fn.inputs if v.grad_fn is not None else ())

    # An iterative DFS, as in _post_order: a long eager loop makes a deep tape.
    order, seen, stack = [], {id(root)}, [(root, inputs(root))]
    while stack:
        v, children = stack[-1]
        for child in children:
            if id(child) not in seen:
                seen.add(id(child))
                stack.append((child, inputs(child)))
                break
        else:
            stack.pop()
            order.append(v)
    return order


# The dispatch table: (is it one of these?, adapter). Order matters where types overlap: a
# FuncGraph is a tf.Graph; fx and torch objects come before the duck-typed minigraph checks.
# (Tensors, torch's and minigraph's, are dispatched before the table, as only they take params=.)
_ADAPTERS: list[tuple[Callable[[Any], bool], Callable[[Any], DrawGraph]]] = [
    (_is_exported, _from_exported),
    (_is_fx, _from_fx),
    (_is_torchscript, _from_torchscript),
    (_is_tf_concrete, _from_tf_concrete),
    (_is_tf_function, _from_tf_function),
    (_is_tf_graph, _from_tf_graph),
    (_is_graphdef, _from_graphdef_proto),
    (_is_mg_graph, _from_mg_graph),
    (_is_mg_function, _from_mg_function),
]
from . import jaxpr as _jaxpr  # noqa: E402, F401  (viz/jaxpr.py adds the JAX adapter to _ADAPTERS)
