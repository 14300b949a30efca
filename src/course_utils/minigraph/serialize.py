"""Saving graphs: ``mg.save`` and ``mg.load``, JSON for the graph and ``.npz`` for the arrays.

The file is one ``.npz`` archive (a zip of ``.npy`` arrays): ``graph.json`` holds the graph as
UTF-8 JSON in a uint8 array, and ``array_0``, ``array_1``, ... the constants, variable initial
values and captured tensors. Nothing is pickled and ``mg.load`` reads with
``allow_pickle=False``, so loading a file cannot run code; it needs no Python but minigraph's:

>>> import os, tempfile
>>> import course_utils.minigraph as mg
>>> w = mg.tensor([[1.0], [-1.0]])
>>> @mg.function
... def predict(x):
...     return mg.relu(x @ w)
>>> path = os.path.join(tempfile.mkdtemp(), "predict.npz")
>>> mg.save(predict.get_graph(mg.tensor([[0.0, 0.0]])), path)
>>> loaded = mg.load(path)
>>> print(loaded)
%x = placeholder()  # (1, 2) float32
%w = capture()  # (2, 1) float32
%matmul = matmul(%x, %w)  # (1, 1) float32
%relu = relu(%matmul)  # (1, 1) float32
return %relu
>>> loaded([[3.0, 1.0]])
array([[2.]], dtype=float32)

Each node is ``{"name", "op", "inputs", "attrs", "shape", "dtype", "source"}``; attrs that JSON
cannot hold are tagged: ``{"$array": "array_0"}``, ``{"$tensor": ...}`` (a capture's tensor, saved
with its current value), ``{"$tuple": [...]}``, ``{"$slice": [start, stop, step]}``,
``{"$ellipsis": true}`` and ``{"$graph": {...}}`` (a cond's or while_loop's sub-graph). A
Variable is saved with its initial value: to ship trained weights, trace a function that
captures them. Loading checks everything and raises ``SerializationError`` saying what is wrong.

NB: a TensorFlow SavedModel is a GraphDef protobuf plus variable checkpoints; TorchScript's
``.pt`` is a zip of code, a pickle of the module's structure, and tensors.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable
from typing import Any

import numpy as np

from .eager import Tensor, tensor
from .errors import MinigraphError, SerializationError
from .graph import Graph, Node
from .ops import OPS
from .session import Session
from .tracing import ConcreteFunction, Function, pack

FORMAT = "minigraph"
VERSION = 1
GRAPH_MEMBER = "graph.json"


class LoadedFunction:
    """A graph read back by ``mg.load``: print it, call it, or run ``graph`` in a Session.

    Calling it feeds the placeholders in order (or by name, as keywords) and returns the outputs
    as numpy arrays, in the structure the saved function returned them.
    NB: what ``torch.jit.load`` and ``tf.saved_model.load`` give back.
    """

    def __init__(self, graph: Graph, name: str, structure: Any) -> None:
        self.graph, self.__name__, self.structure = graph, name, structure
        self._session: Session | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        params = self.graph.placeholders()
        if not self.graph.outputs:
            raise MinigraphError(f"{self.__name__} has no outputs to compute; run its graph in "
                                 f"mg.Session(loaded.graph) and fetch nodes by name")
        if len(args) > len(params):
            raise TypeError(f"{self.__name__} takes {len(params)} inputs "
                            f"({', '.join(p.name for p in params)}), got {len(args)}")
        feeds = dict(zip(params, args, strict=False))
        for key, value in kwargs.items():
            feeds[self.graph.node(key)] = value
        self._session = self._session or Session(self.graph)
        values = self._session.run(list(self.graph.outputs), feeds)
        return pack(self.structure, iter(values))

    def __str__(self) -> str:
        return str(self.graph)

    def __repr__(self) -> str:
        inputs = ", ".join(p.name for p in self.graph.placeholders())
        return f"<LoadedFunction {self.__name__}({inputs}): {len(self.graph.nodes)} nodes>"


# --- save -----------------------------------------------------------------------------------------


def save(obj: Graph | Function | LoadedFunction, path: str | os.PathLike) -> None:
    """Write a graph, or a traced function's most recent trace, to ``path`` (one ``.npz`` file).

    Save another trace with ``mg.save(f.get_concrete_function(x), path)``.
    """
    graph, name, template = _what_to_save(obj)
    try:
        graph.validate()
    except MinigraphError as e:
        raise SerializationError(f"cannot save an invalid graph: {e}") from e
    arrays: list[np.ndarray] = []
    positions = pack(template, iter(range(len(graph.outputs))))  # outputs are its leaves, in order
    doc = {"format": FORMAT, "version": VERSION, "name": name,
           "structure": _encode_structure(positions), "graph": _encode_graph(graph, arrays)}
    members = {f"array_{i}": a for i, a in enumerate(arrays)}
    members[GRAPH_MEMBER] = np.frombuffer(json.dumps(doc).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as file:  # a file object: numpy would append ".npz" to a name
        np.savez_compressed(file, **members)


def _what_to_save(obj: Any) -> tuple[Graph, str, Any]:
    """``(graph, name, output template)``; the template's leaves are the outputs, in order."""
    if isinstance(obj, Function):
        if not obj.trace_count:
            raise SerializationError(f"mg.function {obj.__name__!r} has no trace yet: call it "
                                     f"once, or save {obj.__name__}.get_graph(example_input)")
        obj = list(obj._concrete.values())[-1]
    if isinstance(obj, ConcreteFunction):
        return obj.graph, obj.name, obj.template
    if isinstance(obj, LoadedFunction):
        return obj.graph, obj.__name__, pack(obj.structure, iter(obj.graph.outputs))
    if isinstance(obj, Graph):
        outs = obj.outputs
        return obj, "graph", (outs[0] if len(outs) == 1 else tuple(outs)) if outs else None
    raise SerializationError(f"mg.save takes a Graph or an mg.function, got "
                             f"{type(obj).__name__}")


def _encode_graph(graph: Graph, arrays: list[np.ndarray]) -> dict:
    nodes = [{"name": n.name, "op": n.op, "inputs": [x.name for x in n.inputs],
              "attrs": {k: _encode(v, arrays, f"%{n.name} ({n.op}) attr {k!r}")
                        for k, v in n.attrs.items()},
              "shape": list(n.shape), "dtype": None if n.dtype is None else n.dtype.name,
              "source": n.source} for n in graph.nodes]
    return {"nodes": nodes, "outputs": [n.name for n in graph.outputs]}


def _encode(value: Any, arrays: list[np.ndarray], where: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Tensor):
        return {"$tensor": _store(value.numpy(), arrays, where)}
    if isinstance(value, np.ndarray):
        return {"$array": _store(value, arrays, where)}
    if isinstance(value, (tuple, list)):
        items = [_encode(v, arrays, where) for v in value]
        return {"$tuple": items} if isinstance(value, tuple) else items
    if isinstance(value, slice):
        return {"$slice": [_encode(v, arrays, where) for v in (value.start, value.stop,
                                                               value.step)]}
    if value is Ellipsis:
        return {"$ellipsis": True}
    if isinstance(value, Graph):
        return {"$graph": _encode_graph(value, arrays)}
    raise SerializationError(f"cannot save {where}: its value is a {type(value).__name__}, but "
                             f"saved attrs are numbers, strings, tuples, slices, arrays, tensors "
                             f"and graphs")


def _store(array: np.ndarray, arrays: list[np.ndarray], where: str) -> str:
    if array.dtype.kind not in "biuf":
        raise SerializationError(f"cannot save {where}: a {array.dtype} array (only numbers, "
                                 f"never pickled objects)")
    arrays.append(array)
    return f"array_{len(arrays) - 1}"


def _encode_structure(tree: Any) -> Any:
    """Output structure as JSON: an int is output i; lists, tuples and dicts are tagged."""
    if isinstance(tree, (list, tuple)):
        tag = "$tuple" if isinstance(tree, tuple) else "$list"
        return {tag: [_encode_structure(t) for t in tree]}
    if isinstance(tree, dict):
        return {"$dict": [[k, _encode_structure(t)] for k, t in tree.items()]}
    return tree


# --- load -----------------------------------------------------------------------------------------


def load(path: str | os.PathLike) -> LoadedFunction:
    """Read a file written by ``mg.save``; a bad file raises ``SerializationError`` saying why."""
    where = os.path.basename(os.fspath(path))
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as file:
            zipped = file.read(4) == b"PK\x03\x04"
        raise SerializationError(f"{where} is " + (
            "a truncated or corrupt zip archive" if zipped else
            "not a minigraph file: mg.save writes an .npz (zip) archive"))
    try:
        with np.load(path, allow_pickle=False) as npz:
            return _Reader(where, npz).load()
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise SerializationError(f"{where} is corrupt: {e}") from e


class _Reader:
    def __init__(self, where: str, npz: Any) -> None:
        self.where, self.npz = where, npz

    def error(self, message: str) -> SerializationError:
        return SerializationError(f"{self.where}: {message}")

    def load(self) -> LoadedFunction:
        doc = self.document()
        if doc.get("format") != FORMAT:
            raise self.error(f"not a minigraph graph: graph.json has format "
                             f"{doc.get('format')!r}, not {FORMAT!r}")
        if doc.get("version") != VERSION:
            raise self.error(f"format version {doc.get('version')!r} is not supported; this "
                             f"minigraph reads version {VERSION}")
        graph = self.graph(self.field(doc, "graph", dict, "the file"), "the graph")
        name = doc.get("name") if isinstance(doc.get("name"), str) else "loaded"
        try:
            structure = self.structure(doc.get("structure"), graph.outputs)
        except (TypeError, IndexError, KeyError, ValueError):
            raise self.error(f"its output structure {doc.get('structure')!r} does not match "
                             f"the graph's {len(graph.outputs)} outputs") from None
        return LoadedFunction(graph, name, structure)

    def document(self) -> dict:
        raw = self.array(GRAPH_MEMBER, "the graph")
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise self.error(f"{GRAPH_MEMBER} must be a 1-d uint8 array, got {raw.ndim}-d "
                             f"{raw.dtype}")
        try:
            doc = json.loads(raw.tobytes().decode("utf-8"))
        except UnicodeDecodeError as e:
            raise self.error(f"{GRAPH_MEMBER} is not UTF-8 text: {e}") from None
        except json.JSONDecodeError as e:
            raise self.error(f"{GRAPH_MEMBER} is not valid JSON: {e}") from None
        if not isinstance(doc, dict):
            raise self.error(f"{GRAPH_MEMBER} must hold a JSON object, got "
                             f"{type(doc).__name__}")
        return doc

    def array(self, key: str, user: str) -> np.ndarray:
        if key not in self.npz.files:
            raise self.error(f"{user} needs the member {key!r}, which the file does not hold "
                             f"(it has {', '.join(self.npz.files) or 'none'})")
        try:
            value = self.npz[key]
        except ValueError as e:  # numpy refuses object arrays when allow_pickle is False
            raise self.error(f"member {key!r} cannot be read without unpickling Python "
                             f"objects, which minigraph never writes and never loads ({e})") from e
        if not isinstance(value, np.ndarray):  # numpy hands back raw bytes for non-.npy members
            raise self.error(f"member {key!r} is not a .npy array")
        return value

    def field(self, obj: dict, key: str, kind: type, what: str) -> Any:
        if not isinstance(obj, dict) or key not in obj:
            raise self.error(f"{what} has no {key!r} field")
        if not isinstance(obj[key], kind):
            raise self.error(f"{what}'s {key!r} must be a {kind.__name__}, got "
                             f"{type(obj[key]).__name__}")
        return obj[key]

    def graph(self, obj: dict, what: str) -> Graph:
        graph = Graph()
        for i, spec in enumerate(self.field(obj, "nodes", list, what)):
            self.node(graph, spec, f"node #{i} of {what}")
        outputs = self.field(obj, "outputs", list, what)
        for name in outputs:
            if not isinstance(name, str) or graph._by_name.get(name) is None:
                raise self.error(f"{what} returns %{name}, which is not one of its nodes")
        graph.outputs = [graph.node(name) for name in outputs]
        return graph

    def node(self, graph: Graph, spec: dict, what: str) -> Node:
        name = self.field(spec, "name", str, what)
        what = f"node %{name}"
        op = self.field(spec, "op", str, what)
        if name in graph._by_name:
            raise self.error(f"{what} appears twice; node names are unique")
        if op not in OPS:
            raise self.error(f"{what} uses op {op!r}, which is not in mg.OPS; register it with "
                             f"mg.register_op before loading")
        inputs = []
        for x in self.field(spec, "inputs", list, what):
            if not isinstance(x, str) or x not in graph._by_name:
                raise self.error(f"{what} ({op}) reads %{x}, which is not defined before it "
                                 f"(a dangling input, or nodes out of order)")
            inputs.append(graph._by_name[x])
        attrs = {k: self.decode(v, f"{what} ({op}) attr {k!r}")
                 for k, v in self.field(spec, "attrs", dict, what).items()}
        source = spec.get("source") if isinstance(spec.get("source"), str) else "<loaded>"
        try:
            node = graph.add_node(op, tuple(inputs), attrs, name=name, source=source)
        except MinigraphError as e:
            raise self.error(f"{what} ({op}) cannot be rebuilt: {e}") from None
        recorded = (spec.get("shape"), spec.get("dtype"))
        rebuilt = (list(node.shape), None if node.dtype is None else node.dtype.name)
        if recorded != rebuilt:
            raise self.error(f"{what} ({op}) records shape {recorded[0]} dtype {recorded[1]} but "
                             f"its inputs and attrs give shape {rebuilt[0]} dtype {rebuilt[1]}: "
                             f"an array or the JSON was changed")
        return node

    def decode(self, value: Any, what: str) -> Any:
        if isinstance(value, list):
            return [self.decode(v, what) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1:
            raise self.error(f"{what}: {value!r} is not a tagged value like {{'$tuple': [...]}}")
        (tag, body), = value.items()
        decoders: dict[str, Callable[[], Any]] = {
            "$array": lambda: self.array(body, what),
            "$tensor": lambda: tensor(self.array(body, what)),
            "$tuple": lambda: tuple(self.decode(v, what) for v in body),
            "$slice": lambda: slice(*(self.decode(v, what) for v in body)),
            "$ellipsis": lambda: Ellipsis,
            "$graph": lambda: self.graph(body, f"the sub-graph in {what}"),
        }
        if tag not in decoders:
            raise self.error(f"{what}: unknown tag {tag!r}")
        try:
            return decoders[tag]()
        except SerializationError:
            raise
        except (TypeError, ValueError) as e:
            raise self.error(f"{what}: malformed {tag} value {body!r} ({e})") from None

    def structure(self, tree: Any, outputs: list[Node]) -> Any:
        if tree is None:
            return None
        if isinstance(tree, int) and not isinstance(tree, bool):
            if not 0 <= tree < len(outputs):
                raise IndexError(tree)
            return tree
        (tag, body), = tree.items()
        items = [self.structure(t, outputs) for t in (body if tag != "$dict" else [])]
        if tag == "$tuple":
            return tuple(items)
        if tag == "$list":
            return items
        if tag == "$dict":
            return {k: self.structure(t, outputs) for k, t in body}
        raise ValueError(tag)
