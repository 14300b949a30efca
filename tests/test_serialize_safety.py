"""mg.load of crafted files: each is refused with a SerializationError, and nothing in it runs.

An attacker controls every byte of a file. These tests build such files in a temporary folder
(from a real saved graph, edited) and check three things: ``mg.load`` raises
``SerializationError`` saying what is wrong; no code from the file ran (a payload that would set
an attribute on ``builtins`` did not); and no large allocation happened first (sizes are read from
the .npy headers and checked before any array is read). Codegen gets the same payloads put
straight into a graph's nodes, past the loader: it passes them by reference, never as code.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import course_utils.minigraph as mg

#: If this ever runs, builtins gets the attribute and the test sees it.
PAYLOAD = "__import__('builtins').__setattr__('MG_PWNED', 1) or 0"


@pytest.fixture(autouse=True)
def nothing_ran():
    yield
    assert not hasattr(builtins, "MG_PWNED"), "code from a crafted file ran"


def build_graph() -> mg.Graph:
    """A small graph with every attr kind a payload could hide in."""
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 4), name="x")
        v = mg.Variable(np.ones((4, 2), np.float32), name="v")
        h = mg.reshape(mg.cast(x[:, 1:3], "float64"), (-1, 2), name="h")
        y = mg.sum(h * mg.cast(v[0:1, :], "float64"), axis=1, name="y")
        g.outputs = [y]
    return g


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "model.npz"
    mg.save(build_graph(), path)
    return path


def read(path: Path) -> tuple[dict, dict[str, bytes]]:
    """The document and the raw bytes of every other member."""
    with zipfile.ZipFile(path) as z:
        doc = json.loads(np.lib.format.read_array(z.open("graph.json.npy")).tobytes())
        return doc, {n: z.read(n) for n in z.namelist() if n != "graph.json.npy"}


def write(path: Path, doc: dict | str, members: dict[str, bytes]) -> None:
    raw = doc if isinstance(doc, str) else json.dumps(doc)
    with zipfile.ZipFile(path, "w") as z:
        buffer = np.frombuffer(raw.encode(), np.uint8)
        with z.open("graph.json.npy", "w") as f:
            np.lib.format.write_array(f, buffer)
        for name, data in members.items():
            z.writestr(name, data)


def npy(header: dict, data: bytes) -> bytes:
    """A .npy member with any header at all (numpy's writer would refuse some)."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, header)
    return out.getvalue() + data


def node(doc: dict, name: str) -> dict:
    return next(n for n in doc["graph"]["nodes"] if n["name"] == name)


def first(doc: dict, op: str) -> dict:
    return next(n for n in doc["graph"]["nodes"] if n["op"] == op)


Spoil = Callable[[dict, dict[str, bytes]], "dict | str | bytes | None"]


def registry(table: dict[str, tuple[Spoil, str]]) -> Callable[[str], Callable[[Spoil], Spoil]]:
    """A decorator ``@name(message)`` that files a spoiling function in ``table``."""
    def entry(message: str) -> Callable[[Spoil], Spoil]:
        def register(spoil: Spoil) -> Spoil:
            table[spoil.__name__] = (spoil, message)
            return spoil

        return register

    return entry


CRAFTED: dict[str, tuple[Spoil, str]] = {}
crafted = registry(CRAFTED)


# --- the reproducers of issues 14 and 17 ---------------------------------------------------------


@crafted("attr index=(slice(\"__import__")
def code_in_a_getitem_slice(doc, members):
    first(doc, "getitem")["attrs"]["index"] = {"$tuple": [{"$slice": [PAYLOAD, None, None]}]}


@crafted("an index holds ints, slices of ints, None and ...")
def code_as_a_getitem_index(doc, members):
    first(doc, "getitem")["attrs"]["index"] = {"$tuple": [PAYLOAD]}


@crafted("claims a (1000000000000000,) float32 array")
def header_claims_a_huge_array(doc, members):
    key = node(doc, "v")["attrs"]["value"]["$array"]
    members[f"{key}.npy"] = npy({"descr": "<f4", "fortran_order": False,
                                 "shape": (10**15,)}, b"\0" * 32)


@crafted("the file is truncated or was changed")
def truncated_array_data(doc, members):
    key = node(doc, "v")["attrs"]["value"]["$array"]
    members[f"{key}.npy"] = members[f"{key}.npy"][:-8]


@crafted("nests its JSON too deeply")
def deeply_nested_json(doc, members):
    return '{"format": "minigraph", "version": 1, "structure": ' + "[" * 200_000 + "]" * 200_000 \
        + "}"


@crafted("nests more than 32 levels deep")
def deeply_nested_attr(doc, members):
    value: object = 1
    for _ in range(100):
        value = {"$tuple": [value]}
    first(doc, "sum")["attrs"]["axis"] = value


@crafted("output structure")
def structure_that_is_not_a_dict(doc, members):
    doc["structure"] = "everything"


@crafted("attr shape=(-3, 4): wants a tuple of non-negative ints")
def negative_placeholder_shape(doc, members):
    node(doc, "x")["attrs"]["shape"] = {"$tuple": [-3, 4]}


@crafted("holds <U5 values; a minigraph file holds only numbers")
def constant_of_strings(doc, members):
    key = node(doc, "v")["attrs"]["value"]["$array"]
    out = io.BytesIO()
    np.lib.format.write_array(out, np.array(["hello", "world"]))
    members[f"{key}.npy"] = out.getvalue()


# --- more of our own ----------------------------------------------------------------------------


@crafted("attr dtype='object': wants a numeric dtype name")
def cast_to_object(doc, members):
    first(doc, "cast")["attrs"]["dtype"] = "object"


@crafted("attr shape=['2); import os; (']: wants a tuple of non-negative ints")
def code_as_a_reshape_target(doc, members):
    node(doc, "h")["attrs"]["shape"] = ["2); import os; ("]


@crafted("takes no attr 'note'")
def an_attr_the_op_does_not_take(doc, members):
    first(doc, "sum")["attrs"]["note"] = PAYLOAD


@crafted("takes no attr 'program'")
def a_sub_graph_smuggled_into_an_add(doc, members):
    first(doc, "mul")["attrs"]["program"] = {"$graph": {"nodes": [], "outputs": []}}


@crafted("node names are Python identifiers")
def node_name_that_is_code(doc, members):
    node(doc, "y")["name"] = "y = __import__('os'); y"
    doc["graph"]["outputs"] = ["y = __import__('os'); y"]


@crafted("wants a fused Program")
def a_fused_node(doc, members):
    mul = first(doc, "mul")
    mul["op"] = "fused"
    mul["attrs"] = {"program": {"$tuple": [PAYLOAD]}}


@crafted("wants an mg.Tensor")
def capture_of_a_plain_array(doc, members):
    v = node(doc, "v")
    v["op"] = "capture"
    v["attrs"] = {"ref": v["attrs"].pop("value")}


@crafted("is nested 33 sub-graphs deep")
def sub_graphs_nested_too_deep(doc, members):
    graph: dict = {"nodes": [], "outputs": []}
    for _ in range(40):  # one branch holds the deeper graph, the other an empty one
        graph = {"nodes": [{"name": "c", "op": "cond", "inputs": [], "attrs": {
            "true_fn": {"$graph": graph}, "false_fn": {"$graph": {"nodes": [], "outputs": []}}},
            "shape": [], "dtype": None, "source": ""}], "outputs": []}
    doc["graph"] = graph


@crafted("member 'array_0' cannot be read without unpickling")
def pickled_array(doc, members):
    out = io.BytesIO()
    np.lib.format.write_array(out, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    members["array_0.npy"] = out.getvalue()


@crafted("would make a (1000000000, 2) float64 array (16,000,000,000 bytes) when it runs")
def a_broadcast_that_would_fill_the_memory(doc, members):
    h = node(doc, "h")  # h is (None, 2): a file of a few KB that asks for 16 GB
    h.update(op="broadcast_to", shape=[10**9, 2])
    h["attrs"] = {"shape": {"$tuple": [10**9, 2]}}


@crafted("graph.json holds NaN, which is no number an attr or shape may have")
def clip_bound_that_is_not_a_number(doc, members):
    relu_like = first(doc, "mul")
    relu_like.update(op="clip", inputs=relu_like["inputs"][:1])
    relu_like["attrs"] = {"min": float("nan"), "max": None}


@pytest.mark.parametrize("case", CRAFTED)
def test_a_crafted_file_is_refused_and_nothing_runs(saved: Path, case: str) -> None:
    spoil, message = CRAFTED[case]
    doc, members = read(saved)
    doc = spoil(doc, members) or doc
    write(saved, doc, members)
    with pytest.raises(mg.SerializationError) as info:
        mg.load(saved)
    assert message in str(info.value) and str(info.value).startswith("model.npz: ")


def test_the_unspoiled_file_loads_and_runs(saved: Path) -> None:
    loaded = mg.load(saved)
    assert str(loaded) == str(build_graph())
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(loaded(x), [1.0 + 2.0, 5.0 + 6.0])  # x[:, 1] + x[:, 2]


def test_the_same_array_used_many_times_counts_each_time(saved: Path) -> None:
    doc, members = read(saved)
    key = node(doc, "v")["attrs"]["value"]["$array"]
    nodes = doc["graph"]["nodes"]
    for i in range(50):  # 50 more constants, all reading one member
        nodes.insert(0, {"name": f"c{i}", "op": "constant", "inputs": [],
                         "attrs": {"value": {"$array": key}}, "shape": [4, 2],
                         "dtype": "float32", "source": ""})
    write(saved, doc, members)
    mg.load(saved)  # 51 * 32 bytes: well within the default
    with pytest.raises(mg.SerializationError, match="more than the 0 bytes this load may still"):
        mg.load(saved, max_bytes=32 * 50)


def test_a_loaded_graph_with_a_user_op_gets_its_attrs_only_as_literals(tmp_path: Path) -> None:
    scale = mg.register_op(mg.Op("scale_test", lambda x, factor: x * factor, mg.same_shape_rule,
                                 doc="x * factor"), replace=True)
    with mg.Graph().as_default() as g:
        x = mg.placeholder((2,), name="x")
        g.outputs = [scale(x, factor=3.0)]
    path = tmp_path / "user_op.npz"
    mg.save(g, path)
    np.testing.assert_array_equal(mg.load(path)(np.ones(2, np.float32)), [3.0, 3.0])
    doc, members = read(path)
    first(doc, "scale_test")["attrs"] = {"factor=__import__('os'),factor": 1.0}
    write(path, doc, members)
    with pytest.raises(mg.SerializationError, match="attr names are Python identifiers"):
        mg.load(path)
    first(doc, "scale_test")["attrs"] = {"factor": {"$graph": {"nodes": [], "outputs": []}}}
    write(path, doc, members)
    with pytest.raises(mg.SerializationError, match="takes plain numbers, strings"):
        mg.load(path)


# --- codegen: the same payloads, put past the loader into a graph's nodes ------------------------


def graph_with(op: str, attr: str, value: object) -> mg.Graph:
    g = build_graph()
    target = next(n for n in g.nodes if n.op == op)
    target.attrs[attr] = value  # behind add_node's back: only codegen stands in the way now
    return g


@pytest.mark.parametrize("op, attr, value", [
    ("getitem", "index", (slice(PAYLOAD, None),)),
    ("getitem", "index", (PAYLOAD,)),
    ("cast", "dtype", f"float64').__class__; {PAYLOAD}; ('"),
    ("reshape", "shape", (PAYLOAD,)),
    ("sum", "axis", type("Evil", (int,), {"__repr__": lambda self: PAYLOAD})(1)),
])
def test_codegen_never_writes_a_value_into_source_as_code(op: str, attr: str,
                                                          value: object) -> None:
    f = mg.codegen(graph_with(op, attr, value))
    assert "__import__" not in f.source, f.source
    with contextlib.suppress(Exception):  # numpy may refuse the value; it is only ever data
        f(np.ones((2, 4), np.float32), state={"v": np.ones((4, 2), np.float32)})


def test_attr_names_that_are_not_python_names_are_passed_by_reference() -> None:
    scale = mg.register_op(mg.Op("scale_test2", lambda x, **kw: x * 2, mg.same_shape_rule),
                           replace=True)
    with mg.Graph().as_default() as g:
        x = mg.placeholder((2,), name="x")
        y = scale(x)
        g.outputs = [y]
    y.attrs[f"a=({PAYLOAD}),b"] = 1
    f = mg.codegen(g)
    assert "__import__" not in f.source
    np.testing.assert_array_equal(f(np.ones(2, np.float32)), [2.0, 2.0])
