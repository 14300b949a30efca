"""Saving graphs: ``mg.save`` and ``mg.load``, JSON for the graph and ``.npz`` for the arrays.

The file is one ``.npz`` archive (a zip of ``.npy`` arrays): ``graph.json`` holds the graph as
UTF-8 JSON in a uint8 array, and ``array_0``, ``array_1``, ... the constants, variable initial
values and captured tensors, and nothing else (no other member names, no member twice). Nothing
is pickled and ``mg.load`` reads with ``allow_pickle=False``, so loading a file cannot run code;
it needs no Python but minigraph's:

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
captures them. Loading checks everything and raises ``SerializationError`` saying what is wrong:
the zip's members, the JSON (no NaN, no key given twice), every node's name (a Python identifier
as Python reads it, no look-alike of another node's), op and attrs, each array's header before
its data, and what the values its graph makes add up to when it runs; a loaded function checks
that again when called, and its loops stop after ``max_iterations``.

NB: a TensorFlow SavedModel is a GraphDef protobuf plus variable checkpoints; TorchScript's
``.pt`` is a zip of code, a pickle of the module's structure, and tensors.
"""

from __future__ import annotations

import json
import math
import os
import re
import unicodedata
import zipfile
import zlib
from collections.abc import Callable
from struct import error as struct_error
from typing import Any

import numpy as np

from . import attrs as A
from . import shapes as S
from .eager import Tensor, tensor
from .errors import ArgumentError, MinigraphError, SerializationError
from .graph import Graph, Node, name_problem
from .interpreter import MemoryLimit
from .ops import OPS
from .session import Session
from .tracing import ConcreteFunction, Function, pack

FORMAT = "minigraph"
VERSION = 1
GRAPH_MEMBER = "graph.json"


class LoadedFunction:
    """A graph read back by ``mg.load``: print it, call it, or run ``graph`` in a Session.

    Calling it feeds the placeholders in order (or by name, as keywords) and returns the outputs
    as numpy arrays, in the structure the saved function returned them; Variables start at the
    initial values saved with them. With ``max_bytes`` (``mg.load`` passes its own), a call holds
    at most that many bytes of values at once (an ``ExecutionError`` names the node that would go
    over): sizes known only at run time are checked when the inputs are there.
    NB: what ``torch.jit.load`` and ``tf.saved_model.load`` give back.
    """

    def __init__(self, graph: Graph, name: str, structure: Any,
                 max_bytes: int | None = None) -> None:
        self.graph, self.__name__, self.structure = graph, name, structure
        self.max_bytes = max_bytes
        self._session: Session | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        params = self.graph.placeholders()
        if not self.graph.outputs:
            raise MinigraphError(f"{self.__name__} has no outputs to compute; run its graph in "
                                 f"mg.Session(loaded.graph) and fetch nodes by name")
        if len(args) > len(params):
            raise ArgumentError(f"{self.__name__} takes {len(params)} inputs "
                                f"({', '.join(p.name for p in params)}), got {len(args)}")
        feeds = dict(zip(params, args, strict=False))
        for key, value in kwargs.items():
            feeds[self.graph.node(key)] = value
        if self._session is None:  # Variables start at their saved initial values
            self._session = Session(self.graph)
            self._session.state.update({v.name: v.attrs["value"] for v in self.graph.variables()})
        if self.max_bytes is None:
            values = self._session.run(list(self.graph.outputs), feeds)
        else:
            with MemoryLimit(self.max_bytes, " (mg.load's limit for this function): call it "
                             "on fewer rows, or, if you trust the file, load it with a larger "
                             "mg.load(path, max_bytes=...)"):
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


#: What a file may make ``mg.load`` allocate, all arrays together (each use of an array counts):
#: the sizes are read from the arrays' headers and checked before any memory is taken. The same
#: bound holds for the values its graph makes when it runs: all of them together, from their
#: shapes, at load time (a size known only at run time counts as 1), and the values held at once,
#: at run time. Pass ``max_bytes=`` to load a bigger model.
MAX_BYTES = 1 << 30
#: The largest graph.json read (a graph of about 100 000 nodes), and the most values it may
#: hold: each JSON value becomes a Python object of 30 to 60 bytes, so 64 KB of deflated
#: ``[],[],...`` (20 million empty lists) took 1.6 GB to parse before it was refused (issue 37).
#: The values are counted on the bytes, before parsing.
MAX_JSON_BYTES = 32 << 20
MAX_JSON_VALUES = 2_500_000
#: How deep values may nest in a file: sub-graphs in sub-graphs, tuples in tuples, outputs.
MAX_DEPTH = 32
#: Node names and source lines longer than this are refused or cut (they only label nodes).
MAX_NAME, MAX_SOURCE = 256, 512
#: The most members a file may hold: graph.json and one array per constant, Variable or capture.
MAX_MEMBERS = 100_000
#: How many iterations each while_loop of a loaded graph may run (its ``max_iterations`` attr):
#: a file's loop test can be always true. Pass ``max_iterations=`` to mg.load to change it.
MAX_ITERATIONS = 10_000
#: The only member names mg.save writes (a zip may hold any name: ``../x``, ``/etc/x``, twins).
MEMBER_NAME = re.compile(r"(graph\.json|array_(?:0|[1-9][0-9]{0,8}))\.npy")


def load(path: str | os.PathLike, *, max_bytes: int = MAX_BYTES,
         max_iterations: int | None = MAX_ITERATIONS) -> LoadedFunction:
    """Read a file written by ``mg.save``; a bad file raises ``SerializationError`` saying why.

    Nothing in the file is run or trusted while loading: every node's op must be in ``mg.OPS``
    and every attr must be of the kind its op declares (an index holds ints and slices, a dtype
    is a dtype name, ...; see ``mg.attrs``), array sizes are checked against ``max_bytes`` before
    they are allocated, and nothing may nest deeper than ``MAX_DEPTH``. The values the graph
    makes when it runs must add up to at most ``max_bytes`` too, counting every node once (in
    sub-graphs as well) and one row for each size known only at run time; the function checks
    the values it holds at once against ``max_bytes`` again when called. Every while_loop gets
    ``max_iterations`` (``MAX_ITERATIONS`` by default; ``None``: no cap): a loop still running
    after that many iterations stops with an ``ExecutionError`` naming it.
    """
    where = os.path.basename(os.fspath(path))
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
        raise ArgumentError(f"mg.load: max_bytes is a number of bytes (an int >= 0), got "
                            f"{max_bytes!r:.40}")
    if max_iterations is not None and (not isinstance(max_iterations, int) or
                                       isinstance(max_iterations, bool) or max_iterations < 0):
        raise ArgumentError(f"mg.load: max_iterations is the most iterations a loop may run (an "
                            f"int >= 0, or None for no cap), got {max_iterations!r:.40}")
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as file:
            zipped = file.read(4) == b"PK\x03\x04"
        raise SerializationError(f"{where} is " + (
            "a truncated or corrupt zip archive" if zipped else
            "not a minigraph file: mg.save writes an .npz (zip) archive"))
    declared = _declared_members(path)
    if declared is not None and declared > MAX_MEMBERS:
        raise SerializationError(_too_many(where, declared))
    try:
        with zipfile.ZipFile(path) as archive:
            return _Reader(where, archive, max_bytes, max_iterations).load()
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
        raise SerializationError(f"{where} is corrupt: {e}") from e
    except RecursionError:  # a safety net: the reader itself bounds every nesting
        raise SerializationError(f"{where}: its values nest too deeply to read") from None


def _declared_members(path: str | os.PathLike) -> int | None:
    """How many members the zip's end record declares, read before ``zipfile`` builds an object
    for each of them (a few MB of file can declare a million). ``None`` if it cannot be read."""
    end_record = getattr(zipfile, "_EndRecData", None)  # private, but in every CPython since 2.x
    if end_record is None:
        return None
    try:
        with open(path, "rb") as file:
            record = end_record(file)
    except (OSError, ValueError, struct_error):
        return None
    return None if not record else record[4]  # _ECD_ENTRIES_TOTAL


def _too_many(where: str, count: int) -> str:
    return (f"{where} holds {count:,} members, more than the {MAX_MEMBERS:,} a minigraph file "
            f"may hold (graph.json and one array per constant, Variable or captured tensor); "
            f"it was not written by mg.save")


class _Reader:
    def __init__(self, where: str, archive: zipfile.ZipFile, max_bytes: int,
                 max_iterations: int | None = MAX_ITERATIONS) -> None:
        self.where, self.archive, self.budget, self.max_bytes = where, archive, max_bytes, max_bytes
        self.max_iterations = max_iterations
        self.values = 0  # bytes of the values the graph makes when it runs, so far
        names = archive.namelist()
        if len(names) > MAX_MEMBERS:
            raise SerializationError(_too_many(where, len(names)))
        self.members: dict[str, str] = {}
        for name in names:
            if not MEMBER_NAME.fullmatch(name):
                raise self.error(f"holds a member named {_short(name)}; mg.save writes only "
                                 f"graph.json.npy and array_<n>.npy, so the file was made or "
                                 f"changed by something else")
            if name.removesuffix(".npy") in self.members:
                raise self.error(f"holds two members named {name!r}; a zip may, but then "
                                 f"which one is meant is anyone's guess, so minigraph reads "
                                 f"neither")
            self.members[name.removesuffix(".npy")] = name

    def error(self, message: str) -> SerializationError:
        return SerializationError(f"{self.where}: {message}")

    def load(self) -> LoadedFunction:
        doc = self.document()
        if doc.get("format") != FORMAT:
            raise self.error(f"not a minigraph graph: graph.json has format "
                             f"{_short(doc.get('format'))}, not {FORMAT!r}")
        if type(doc.get("version")) is not int or doc.get("version") != VERSION:
            raise self.error(f"format version {_short(doc.get('version'))} is not supported; "
                             f"this minigraph reads version {VERSION}")
        graph = self.graph(self.field(doc, "graph", dict, "the file"), "the graph", 0)
        name = doc.get("name")
        name = name[:MAX_NAME] if isinstance(name, str) and name.isprintable() else "loaded"
        structure = self.structure(doc.get("structure"), len(graph.outputs))
        return LoadedFunction(graph, name, structure, self.max_bytes)

    # --- the archive: .npy members, read by their headers first ---------------------------------

    def document(self) -> dict:
        data, shape, dtype, _ = self.read(GRAPH_MEMBER, "the graph", limit=MAX_JSON_BYTES)
        if dtype != np.uint8 or len(shape) != 1:
            raise self.error(f"{GRAPH_MEMBER} must be a 1-d uint8 array, got {len(shape)}-d "
                             f"{dtype}")
        # Every JSON value but the first follows a '[', ',' or ':' (strings' own count too:
        # more, never fewer).
        values = 1 + data.count(b"[") + data.count(b",") + data.count(b":")
        if values > MAX_JSON_VALUES:
            raise self.error(f"{GRAPH_MEMBER} holds up to {values:,} JSON values, more than the "
                             f"{MAX_JSON_VALUES:,} a minigraph file may (a graph of 100,000 "
                             f"nodes needs about 1,900,000); it was not written by mg.save")
        try:
            doc = json.loads(data.decode("utf-8"), parse_constant=_no_nan,
                             object_pairs_hook=_unique_keys)
        except UnicodeDecodeError as e:
            raise self.error(f"{GRAPH_MEMBER} is not UTF-8 text: {e}") from None
        except _BadJSON as e:
            raise self.error(f"{GRAPH_MEMBER} {e}") from None
        except ValueError as e:  # JSONDecodeError, or an int of more than 4300 digits
            raise self.error(f"{GRAPH_MEMBER} is not valid JSON: {_cut(str(e))}") from None
        except RecursionError:
            raise self.error(f"{GRAPH_MEMBER} nests its JSON too deeply to read (mg.save "
                             f"writes at most a few levels per sub-graph)") from None
        if not isinstance(doc, dict):
            raise self.error(f"{GRAPH_MEMBER} must hold a JSON object, got "
                             f"{type(doc).__name__}")
        return doc

    def data(self, key: Any, user: str) -> np.ndarray:
        """An ``array_<n>`` member (never graph.json) as an array: what ``$array`` refers to."""
        if key == GRAPH_MEMBER:
            raise self.error(f"{user} reads {GRAPH_MEMBER} as its data; arrays live in the "
                             f"array_<n> members")
        return self.array(key, user)

    def array(self, key: str, user: str) -> np.ndarray:
        """Member ``key`` as an array; its header's shape and dtype are checked before reading.
        Read into the array itself: the peak is the array, not twice it."""
        data, shape, dtype, order = self.read(key, user)
        array = np.frombuffer(data, dtype=dtype).reshape(shape, order=order)
        if not dtype.isnative:
            array = array.byteswap(inplace=True).view(dtype.newbyteorder("="))  # in place
        return array

    def read(self, key: str, user: str, limit: int | None = None
             ) -> tuple[bytearray, tuple[int, ...], np.dtype, str]:
        """Member ``key``'s data (a writable buffer), shape, dtype and order; its header's shape
        and dtype are checked before its data is read."""
        if not isinstance(key, str) or key not in self.members:
            have = ", ".join(sorted(self.members)) or "none"
            raise self.error(f"{user} needs the member {_short(key)}, which the file does not "
                             f"hold (it has {have[:200]})")
        info = self.archive.getinfo(self.members[key])
        with self.archive.open(info) as file:
            shape, dtype, order = self.header(file, key)
            count = math.prod(shape)
            size = count * dtype.itemsize
            budget = self.budget if limit is None else limit  # graph.json: its own limit
            if size > budget:
                raise self.error(f"member {key!r} claims a {S.format_shape(shape)} {dtype} array "
                                 f"({size:,} bytes), more than the {budget:,} bytes this load "
                                 f"may still allocate; if you trust the file, pass a larger "
                                 f"mg.load(path, max_bytes=...)")
            held = info.file_size - file.tell()
            if held != size:
                raise self.error(f"member {key!r} holds {held:,} bytes of data, but its header "
                                 f"says {S.format_shape(shape)} {dtype}, which needs {size:,}: "
                                 f"the file is truncated or was changed")
            data, got = bytearray(size), 0
            view = memoryview(data)
            while got < size:  # in pieces: ZipExtFile.readinto would read it all, then copy
                piece = file.read(min(size - got, 1 << 20))
                if not piece:
                    break
                view[got:got + len(piece)] = piece
                got += len(piece)
            view.release()
        if got != size:
            raise self.error(f"member {key!r} ends after {got:,} of its {size:,} bytes")
        if limit is None:
            self.budget -= size
        return data, shape, dtype, order

    def header(self, file: Any, key: str) -> tuple[tuple[int, ...], np.dtype, str]:
        """``(shape, dtype, order)`` from a .npy header; the data is not read yet."""
        try:
            version = np.lib.format.read_magic(file)
            read = {(1, 0): np.lib.format.read_array_header_1_0,
                    (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read is None:
                raise ValueError(f"npy format version {version} (minigraph reads 1.0 and 2.0)")
            shape, fortran, dtype = read(file)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as e:
            # numpy reads the header with ast.literal_eval, which runs nothing, and refuses
            # headers over 10 000 bytes; what it says of a crafted one is its first line.
            raise self.error(f"member {key!r} is not a .npy array: its header is malformed "
                             f"({_cut(str(e).splitlines()[0] if str(e) else type(e).__name__)})"
                             ) from None
        if dtype.hasobject:
            raise self._pickled(key)
        if dtype.name not in A.DTYPES:
            raise self.error(f"member {key!r} holds {dtype} values; a minigraph file holds "
                             f"only numbers ({', '.join(sorted(A.DTYPES))})")
        if not all(type(d) is int and d >= 0 for d in shape):  # (True is an int to Python)
            raise self.error(f"member {key!r} has a malformed shape {_short(shape)}")
        return tuple(shape), dtype, "F" if fortran else "C"

    def _pickled(self, key: str) -> SerializationError:
        return self.error(f"member {key!r} cannot be read without unpickling Python objects, "
                          f"which minigraph never writes and never loads (Object arrays cannot "
                          f"be loaded when allow_pickle=False)")

    # --- the JSON: fields, graphs, nodes, tagged attrs --------------------------------------------

    def field(self, obj: dict, key: str, kind: type, what: str) -> Any:
        if not isinstance(obj, dict) or key not in obj:
            raise self.error(f"{what} has no {key!r} field")
        if not isinstance(obj[key], kind):
            raise self.error(f"{what}'s {key!r} must be a {kind.__name__}, got "
                             f"{type(obj[key]).__name__}")
        return obj[key]

    def graph(self, obj: dict, what: str, depth: int) -> Graph:
        if depth > MAX_DEPTH:
            raise self.error(f"{what} is nested {depth} sub-graphs deep; the most a file may "
                             f"hold is {MAX_DEPTH}")
        graph = Graph()
        skeletons: dict[str, str] = {}  # what each name looks like -> the name
        for i, spec in enumerate(self.field(obj, "nodes", list, what)):
            node = self.node(graph, spec, f"node #{i} of {what}", depth,
                             "" if depth == 0 else f" in {what}")
            twin = skeletons.setdefault(_skeleton(node.name), node.name)
            if twin != node.name:
                raise self.error(f"node %{node.name} looks like node %{twin} but is another "
                                 f"name ({_spelled(node.name, twin)}): look-alike names can "
                                 f"pass one node off as another in a printed graph; rename one")
        outputs = self.field(obj, "outputs", list, what)
        for name in outputs:
            if not isinstance(name, str) or graph._by_name.get(name) is None:
                raise self.error(f"{what} returns %{_name(name)}, which is not one of its "
                                 f"nodes")
        graph.outputs = [graph.node(name) for name in outputs]
        return graph

    def node(self, graph: Graph, spec: dict, what: str, depth: int, inside: str) -> Node:
        name = self.field(spec, "name", str, what)
        problem = name_problem(name) or (f"is longer than {MAX_NAME} characters"
                                         if len(name) > MAX_NAME else None)
        if problem:
            raise self.error(f"{what} is named {_short(name)}, which {problem}; node names are "
                             f"Python identifiers of at most {MAX_NAME} characters")
        what = f"node %{name}{inside}"
        op = self.field(spec, "op", str, what)
        if name in graph._by_name:
            raise self.error(f"{what} appears twice; node names are unique")
        if op not in OPS:
            raise self.error(f"{what} uses op {_short(op)}, which is not in mg.OPS; register it "
                             f"with mg.register_op before loading")
        inputs = []
        for x in self.field(spec, "inputs", list, what):
            if not isinstance(x, str) or x not in graph._by_name:
                raise self.error(f"{what} ({op}) reads %{_name(x)}, which is not defined before "
                                 f"it (a dangling input, or nodes out of order)")
            inputs.append(graph._by_name[x])
        attrs = {k: self.decode(v, f"{what} ({op}) attr {k!r}", depth)
                 for k, v in self.field(spec, "attrs", dict, what).items()}
        try:
            attrs = A.check(OPS[op], attrs, f"{what} ({op})")
        except MinigraphError as e:
            raise self.error(f"{e}; nothing from this file was run") from None
        if op == "while_loop":  # the caller's cap, whatever the file says
            attrs["max_iterations"] = self.max_iterations
        source = spec.get("source")
        source = source[:MAX_SOURCE] if isinstance(source, str) and source.isprintable() \
            else "<loaded>"
        try:
            node = graph.add_node(op, tuple(inputs), attrs, name=name, source=source)
        except MinigraphError as e:
            raise self.error(f"{what} ({op}) cannot be rebuilt: {e}") from None
        if node.dtype is not None and op not in _READ_FROM_THE_FILE:
            self.count_value(node, what)
        patches = _PATCH_ELEMENTS[op](node) if op in _PATCH_ELEMENTS else None
        if patches is not None and node.dtype is not None and \
                patches * node.dtype.itemsize > self.max_bytes:
            raise self.error(f"{what} ({op}) would copy {patches:,} window values "
                             f"({patches * node.dtype.itemsize:,} bytes) when it runs, more "
                             f"than max_bytes={self.max_bytes:,}; if you trust the file, pass "
                             f"a larger mg.load(path, max_bytes=...)")
        recorded = (spec.get("shape"), spec.get("dtype"))
        rebuilt = (list(node.shape), None if node.dtype is None else node.dtype.name)
        if recorded != rebuilt:
            raise self.error(f"{what} ({op}) records shape {_short(recorded[0])} dtype "
                             f"{_name(recorded[1])} but its inputs and attrs give shape "
                             f"{rebuilt[0]} dtype {rebuilt[1]}: an array or the JSON was changed")
        return node

    def count_value(self, node: Node, what: str) -> None:
        """Add the bytes of ``node``'s value to the graph's total; refuse a file whose total is
        over ``max_bytes`` (a size known only at run time counts as 1: one row of a batch)."""
        size = math.prod(1 if d is None else d for d in node.shape) * node.dtype.itemsize
        self.values += size
        if self.values <= self.max_bytes:
            return
        rows = ", for one row where a size is known only at run time" if None in node.shape else ""
        if size > self.max_bytes:  # e.g. a broadcast_to or one_hot far larger than the file
            raise self.error(f"{what} ({node.op}) would make a {S.format_shape(node.shape)} "
                             f"{node.dtype} array ({size:,} bytes{rows}) when it runs, more than "
                             f"max_bytes={self.max_bytes:,}; if you trust the file, pass a "
                             f"larger mg.load(path, max_bytes=...)")
        raise self.error(f"the values its graph makes when it runs add up to {self.values:,} "
                         f"bytes by {what} ({node.op}, {S.format_shape(node.shape)} "
                         f"{node.dtype}{rows}), more than max_bytes={self.max_bytes:,} (every "
                         f"node counts, however small each is); if you trust the file, pass a "
                         f"larger mg.load(path, max_bytes=...)")

    def decode(self, value: Any, what: str, depth: int, level: int = 0) -> Any:
        """A JSON attr value as Python: tagged dicts become tuples, slices, arrays, graphs."""
        if level > MAX_DEPTH:
            raise self.error(f"{what} nests more than {MAX_DEPTH} levels deep")
        if isinstance(value, list):
            return [self.decode(v, what, depth, level + 1) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1:
            raise self.error(f"{what}: {_short(value)} is not a tagged value like "
                             f"{{'$tuple': [...]}}")
        (tag, body), = value.items()
        decoders: dict[str, Callable[[], Any]] = {
            "$array": lambda: self.data(body, what),
            "$tensor": lambda: tensor(self.data(body, what)),
            "$tuple": lambda: tuple(self.items(body, what, depth, level)),
            "$slice": lambda: slice(*self.items(body, what, depth, level, length=3)),
            "$ellipsis": lambda: Ellipsis,
            "$graph": lambda: self.graph(body, f"the sub-graph in {what}", depth + 1),
        }
        if tag not in decoders:
            raise self.error(f"{what}: unknown tag {_short(tag)}")
        return decoders[tag]()

    def items(self, body: Any, what: str, depth: int, level: int,
              length: int | None = None) -> list:
        if not isinstance(body, list) or (length is not None and len(body) != length):
            want = "a list" if length is None else f"a list of {length}"
            raise self.error(f"{what}: malformed value {_short(body)} (wants {want})")
        return [self.decode(v, what, depth, level + 1) for v in body]

    def structure(self, tree: Any, n_outputs: int) -> Any:
        """The saved output structure: output indices in tagged tuples, lists and dicts.

        mg.save numbers the outputs 0, 1, 2, ... in the order the structure lists them, and a
        LoadedFunction fills the structure in that order: so the leaves must be exactly that.
        """
        leaves = iter(range(n_outputs))
        self._whole = tree  # (messages quote the whole structure)
        out = self._structure(tree, leaves, 0)
        if next(leaves, None) is not None or (tree is None and n_outputs):
            raise self.error(f"its output structure {_short(tree)} does not hold each of the "
                             f"graph's {n_outputs} outputs once, in order")
        return out

    def _structure(self, tree: Any, leaves: Any, level: int) -> Any:
        def bad(why: str) -> SerializationError:
            return self.error(f"its output structure {_short(self._whole)} is malformed: {why}")

        if level > MAX_DEPTH:
            raise self.error(f"its output structure nests more than {MAX_DEPTH} levels deep")
        if tree is None:
            return None
        if type(tree) is int:
            expected = next(leaves, None)
            if tree != expected:
                raise bad(f"output {tree} where output "
                          f"{'(none: all are used)' if expected is None else expected} "
                          f"comes next")
            return tree
        if not isinstance(tree, dict) or len(tree) != 1:
            raise bad("a leaf is an output's index, a container {'$tuple'|'$list'|'$dict': "
                      "[...]}")
        (tag, body), = tree.items()
        if tag not in ("$tuple", "$list", "$dict") or not isinstance(body, list):
            raise bad(f"unknown tag {_short(tag)}")
        if tag == "$dict":
            if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                       for p in body):
                raise bad("a $dict holds [key, value] pairs with string keys")
            if len({k for k, _ in body}) != len(body):
                raise bad("a $dict names one key twice")
            return {k: self._structure(t, leaves, level + 1) for k, t in body}
        items = [self._structure(t, leaves, level + 1) for t in body]
        return tuple(items) if tag == "$tuple" else items


def _name(value: Any) -> str:
    """A name from a file as it would print (``%x``), or its cut-short ``repr`` if odd."""
    if isinstance(value, str) and value.isprintable() and len(value) <= 60:
        return value
    return _short(value)


def _short(value: Any) -> str:
    """``repr`` of a value from a file, cut short: messages quote files, never dump them."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _cut(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


class _BadJSON(ValueError):
    """What graph.json holds that JSON parsers disagree on (minigraph refuses it)."""


def _no_nan(constant: str) -> float:
    """``Infinity`` may stand in a file (``mg.clip(x, max=inf)`` writes it); ``NaN`` may not."""
    if constant == "NaN":
        raise _BadJSON("holds NaN, which is no number an attr or shape may have")
    return float(constant)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object, refusing a key given twice (parsers differ on which one wins)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        twice = next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i]))
        raise _BadJSON(f"gives the key {_short(twice)} twice in one object; which one is meant "
                       f"is anyone's guess")
    return out


#: Letters of other scripts that look like Latin ones: a few of Unicode's confusables, enough to
#: catch ``х`` (Cyrillic) passed off as ``x``. NFKD then strips accents (``é`` looks like ``e``).
_LOOKALIKES = str.maketrans(dict(zip(
    "аеорсухіјѕԁԛԝһӏıАВЕКМНОРСТХІЈЅУΑΒΕΖΗΙΚΜΝΟΡΤΥΧοαικνρτυχ",
    "aeopcyxijsdqwhliABEKMHOPCTXIJSYABEZHIKMNOPTYXoaikvptux", strict=True)))


def _skeleton(name: str) -> str:
    """What a name looks like: accents stripped, look-alike letters made Latin."""
    bare = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c))
    return bare.translate(_LOOKALIKES)


def _spelled(name: str, twin: str) -> str:
    """The characters where two look-alike names differ, by their Unicode names."""
    odd = [c for c in dict.fromkeys(name + twin) if not c.isascii()]
    return ", ".join(f"{c} is U+{ord(c):04X} {unicodedata.name(c, '?')}" for c in odd[:3])


#: Ops whose value is an array read from the file (counted against ``max_bytes`` as it is read)
#: or fed by the caller: the values a graph makes are the others'.
_READ_FROM_THE_FILE = frozenset({"constant", "variable", "capture", "placeholder"})


def _elements(*sizes: int | None) -> int | None:
    return None if None in sizes else math.prod(sizes)


#: How many window values each convolution or pooling node copies when it runs (its im2col
#: patches, ``(N, C, Ho, Wo, kh, kw)``): a small file can ask for a huge kernel on a big padding.
_PATCH_ELEMENTS: dict[str, Callable[[Node], int | None]] = {
    "conv2d": lambda n: _elements(n.shape[0], *n.shape[2:], *n.inputs[1].shape[1:]),
    "conv2d_input_grad": lambda n: _elements(n.inputs[0].shape[0], *n.inputs[0].shape[2:],
                                             *n.inputs[1].shape[1:]),
    "conv2d_weight_grad": lambda n: _elements(n.inputs[0].shape[0], *n.inputs[0].shape[2:],
                                              *n.shape[1:]),
    **{op: lambda n: _elements(*n.shape, *n.attrs["kernel_size"])
       for op in ("max_pool2d", "avg_pool2d", "max_pool2d_select")},
    **{op: lambda n: _elements(*n.inputs[0].shape, *n.attrs["kernel_size"])
       for op in ("max_pool2d_grad", "avg_pool2d_grad")},
}
