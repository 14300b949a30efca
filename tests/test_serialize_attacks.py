"""mg.load, red-teamed again: zip tricks, JSON that parsers disagree on, names, sub-graphs, arrays.

``test_serialize_safety.py`` holds the first round (code in attrs, huge headers, pickles). These
are the inputs a second reviewer would try: each file is built by hand in a temporary folder, and
``mg.load`` must refuse it with a ``SerializationError`` that names what is wrong, before anything
runs or anything large is allocated. Inputs that are odd but harmless (a node named ``np`` or
``lambda``, a Fortran-ordered array) must load and give the same numbers in every executor.
"""

from __future__ import annotations

import builtins
import copy
import io
import json
import re
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_serialize_safety import (
    PAYLOAD,
    Spoil,
    build_graph,
    first,
    node,
    npy,
    read,
    registry,
    write,
)

import course_utils.minigraph as mg
from course_utils.minigraph import serialize

X = np.arange(8, dtype=np.float32).reshape(2, 4)
EXPECTED = [1.0 + 2.0, 5.0 + 6.0]  # build_graph's y for X: x[:, 1] + x[:, 2]


@pytest.fixture(autouse=True)
def nothing_ran():
    yield
    assert not hasattr(builtins, "MG_PWNED"), "code from a crafted file ran"


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "model.npz"
    mg.save(build_graph(), path)
    return path


def refused(path: Path, *fragments: str) -> str:
    with pytest.raises(mg.SerializationError) as info:
        mg.load(path)
    message = str(info.value)
    assert message.startswith(f"{path.name}"), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from:\n{message}"
    return message


def array_member(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, array)
    return out.getvalue()


def spec(name: str, op: str, inputs: list[str], attrs: dict, shape: list,
         dtype: str | None) -> dict:
    """One node of a graph.json, written by hand."""
    return {"name": name, "op": op, "inputs": inputs, "attrs": attrs, "shape": shape,
            "dtype": dtype, "source": "crafted.py:1"}


def scalar(name: str, dtype: str = "float32") -> dict:
    return spec(name, "placeholder", [], {"shape": {"$tuple": []}, "dtype": dtype}, [], dtype)


# --- the zip: member names, counts, sizes --------------------------------------------------------


def append_member(path: Path, name: str, data: bytes) -> None:
    with warnings.catch_warnings():  # zipfile warns about the duplicate, and writes it anyway
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(path, "a") as z:
            z.writestr(name, data)


def test_a_member_given_twice_is_refused(saved: Path) -> None:
    # The last copy would win in zipfile, the first in other readers: which weights are meant?
    append_member(saved, "array_0.npy", array_member(np.full((4, 2), 7, np.float32)))
    refused(saved, "holds two members named 'array_0.npy'")


def test_graph_json_given_twice_is_refused(saved: Path) -> None:
    doc, _ = read(saved)
    doc["graph"]["outputs"] = []
    append_member(saved, "graph.json.npy",
                  array_member(np.frombuffer(json.dumps(doc).encode(), np.uint8)))
    refused(saved, "holds two members named 'graph.json.npy'")


@pytest.mark.parametrize("name", ["../../etc/passwd.npy", "/etc/passwd.npy", "array_0",
                                  "array_007.npy", "ＡRRAY_0.npy", "array_0.npy/"])
def test_a_member_name_mg_save_never_writes_is_refused(saved: Path, name: str) -> None:
    doc, members = read(saved)
    key = node(doc, "v")["attrs"]["value"]["$array"]
    node(doc, "v")["attrs"]["value"]["$array"] = name.removesuffix(".npy")
    members[name] = members.pop(f"{key}.npy")
    write(saved, doc, members)
    refused(saved, "holds a member named", "mg.save writes only graph.json.npy and array_<n>.npy")


def test_too_many_members_are_refused_before_zipfile_reads_them(saved: Path,
                                                                monkeypatch) -> None:
    doc, members = read(saved)
    for i in range(1, 12):
        members[f"array_{i}.npy"] = members["array_0.npy"]
    write(saved, doc, members)
    assert serialize._declared_members(saved) == 13  # read from the zip's end record
    monkeypatch.setattr(serialize, "MAX_MEMBERS", 10)
    refused(saved, "holds 13 members, more than the 10")


def test_a_compressed_member_far_larger_than_its_header_is_never_inflated(saved: Path) -> None:
    # 16 MB of zeros deflate to a few KB; the header says 32 bytes. The sizes are compared
    # before a byte of data is read, so nothing is decompressed.
    doc, members = read(saved)
    header = npy({"descr": "<f4", "fortran_order": False, "shape": (4, 2)}, b"")
    with zipfile.ZipFile(saved, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("graph.json.npy", array_member(
            np.frombuffer(json.dumps(doc).encode(), np.uint8)))
        z.writestr("array_0.npy", header + bytes(16 << 20))
    assert saved.stat().st_size < 1 << 20
    refused(saved, "member 'array_0' holds 16,777,216 bytes of data", "needs 32")


def test_graph_json_larger_than_its_limit_is_refused(saved: Path, monkeypatch) -> None:
    monkeypatch.setattr(serialize, "MAX_JSON_BYTES", 100)
    refused(saved, "member 'graph.json' claims a", "more than the 100 bytes")


# --- the JSON -------------------------------------------------------------------------------------

JSON_ATTACKS: dict[str, tuple[Spoil, str]] = {}
attack = registry(JSON_ATTACKS)


@attack("graph.json is not UTF-8 text")
def latin1_json(doc, members):
    return json.dumps(doc).replace('"graph"', '"gr\u00e4ph"', 1).encode("latin-1")


@attack("graph.json holds NaN")
def nan_in_a_source_line(doc, members):
    node(doc, "x")["source"] = float("nan")  # an ignored field still may not hold NaN


@attack("graph.json gives the key 'op' twice in one object")
def a_key_given_twice(doc, members):
    # Python's json keeps the last "op", other parsers the first: a reviewer and the loader
    # could see two different graphs.
    return json.dumps(doc).replace('"op": "sum"', '"op": "max", "op": "sum"')


@attack("graph.json is not valid JSON: Exceeds the limit (4300 digits)")
def an_int_of_5000_digits(doc, members):
    return json.dumps(doc).replace('"axis": 1', '"axis": 1' + "0" * 5000)


@attack("format version 1.0 is not supported")
def version_as_a_float(doc, members):
    doc["version"] = 1.0


@attack("format version True is not supported")
def version_as_a_bool(doc, members):
    doc["version"] = True  # True == 1 in Python


def rename(doc: dict, old: str, new: str) -> None:
    for n in doc["graph"]["nodes"]:
        n["name"] = new if n["name"] == old else n["name"]
        n["inputs"] = [new if i == old else i for i in n["inputs"]]
    doc["graph"]["outputs"] = [new if o == old else o for o in doc["graph"]["outputs"]]


@attack("node %\u0445 looks like node %x but is another name (\u0445 is U+0445 CYRILLIC SMALL")
def a_cyrillic_name_that_looks_like_x(doc, members):
    doc["graph"]["nodes"].append(spec("\u0445", "identity", ["h"], {}, [None, 2], "float64"))
    doc["graph"]["outputs"] = ["\u0445"]


@attack("is read by Python as 'y' (NFKC normal form)")
def a_fullwidth_name_python_reads_as_another(doc, members):
    rename(doc, "h", "\uff59")  # fullwidth y: in generated code, the same variable as %y


@attack("is a __dunder__ name")
def a_node_named_builtins(doc, members):
    rename(doc, "h", "__builtins__")


@attack("is longer than 256 characters")
def a_name_of_a_thousand_letters(doc, members):
    rename(doc, "h", "h" * 1000)


@attack("output 1 where output 0 comes next")
def outputs_in_another_order(doc, members):
    doc["graph"]["outputs"] = ["y", "h"]
    doc["structure"] = {"$tuple": [1, 0]}  # LoadedFunction fills leaves in order: swapped


@attack("output 0 where output (none: all are used) comes next")
def more_leaves_than_outputs(doc, members):
    doc["structure"] = {"$tuple": [0, 0, 0]}


@attack("does not hold each of the graph's 1 outputs once, in order")
def a_structure_that_drops_the_output(doc, members):
    doc["structure"] = {"$list": []}


@attack("a $dict names one key twice")
def a_dict_structure_with_one_key_twice(doc, members):
    doc["graph"]["outputs"] = ["y", "h"]
    doc["structure"] = {"$dict": [["a", 0], ["a", 1]]}


@attack("reads graph.json as its data")
def an_array_that_is_the_graph_itself(doc, members):
    node(doc, "v")["attrs"]["value"] = {"$array": "graph.json"}


@attack("node %y (sum) reads %y, which is not defined before it")
def a_node_that_reads_itself(doc, members):
    node(doc, "y")["inputs"][0] = "y"  # a cycle: topological order makes it a dangling input


@attack("only a Variable can be assigned to, not %x (placeholder)")
def an_assign_to_a_placeholder(doc, members):
    doc["graph"]["nodes"].append(spec("a", "assign", ["x", "x"], {}, [None, 4], "float32"))


@attack("an initializer sets Variables, and %x is a placeholder")
def an_initializer_of_a_placeholder(doc, members):
    doc["graph"]["nodes"].append(spec("init", "initializer", ["x"], {}, [], None))


def cond_node(doc: dict, members: dict, true_nodes: list[dict]) -> None:
    """Append ``cond(True, x)`` whose true branch is ``true_nodes`` (its output is %o)."""
    members["array_9.npy"] = array_member(np.array(True))
    param = spec("p", "placeholder", [], {"shape": {"$tuple": [None, 4]}, "dtype": "float32"},
                 [None, 4], "float32")
    branch = {"nodes": [param, *true_nodes], "outputs": ["o"]}
    other = {"nodes": [param, spec("o", "identity", ["p"], {}, [None, 4], "float32")],
             "outputs": ["o"]}
    doc["graph"]["nodes"] += [
        spec("t", "constant", [], {"value": {"$array": "array_9"}}, [], "bool"),
        spec("c", "cond", ["t", "x"], {"true_fn": {"$graph": branch},
                                       "false_fn": {"$graph": other}}, [], None)]


@attack("node %o in the sub-graph in node %c (cond) attr 'true_fn' (identity) reads %h, "
        "which is not defined before it")
def a_branch_that_reads_an_outer_node(doc, members):
    cond_node(doc, members, [spec("o", "identity", ["h"], {}, [None, 2], "float64")])


@attack("true_fn holds %w (variable, defined at crafted.py:1), but a sub-graph runs without "
        "Session state")
def a_branch_that_holds_a_variable(doc, members):
    value = {"$array": node(doc, "v")["attrs"]["value"]["$array"]}
    cond_node(doc, members, [spec("w", "variable", [], {"value": value}, [4, 2], "float32"),
                             spec("o", "identity", ["p"], {}, [None, 4], "float32")])


@attack("would copy 1,000,000,000,000 window values")
def a_convolution_whose_patches_fill_the_memory(doc, members):
    # 4 MB of kernel (zeros deflate to a few KB in a file) on a 1x1 image padded by 999: the
    # output is only 1000 x 1000, but its im2col patches would be 10**6 * 10**6 numbers.
    members["array_9.npy"] = array_member(np.zeros((1, 1, 1000, 1000), np.float32))
    doc["graph"]["nodes"] += [
        spec("img", "placeholder", [], {"shape": {"$tuple": [1, 1, 1, 1]}, "dtype": "float32"},
             [1, 1, 1, 1], "float32"),
        spec("k", "constant", [], {"value": {"$array": "array_9"}}, [1, 1, 1000, 1000],
             "float32"),
        spec("conv", "conv2d", ["img", "k"], {"stride": {"$tuple": [1, 1]},
                                             "padding": {"$tuple": [999, 999]}},
             [1, 1, 1000, 1000], "float32")]


def header_member(doc: dict, members: dict, header: dict, data: bytes) -> None:
    members[f"{node(doc, 'v')['attrs']['value']['$array']}.npy"] = npy(header, data)


@attack("member 'array_0' has a malformed shape (True, True)")
def an_array_header_with_bool_dimensions(doc, members):
    header_member(doc, members, {"descr": "<f4", "fortran_order": False, "shape": (True, True)},
                  bytes(4))


@attack("its header is malformed (Header info length")
def an_array_header_of_20_kb(doc, members):
    text = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }" + " " * 20000 + "\n"
    key = node(doc, "v")["attrs"]["value"]["$array"]
    members[f"{key}.npy"] = b"\x93NUMPY\x02\x00" + len(text).to_bytes(4, "little") + \
        text.encode() + bytes(32)


@attack("its header is malformed (malformed node or string")
def an_array_header_that_calls_a_function(doc, members):
    text = f"{{'descr': {PAYLOAD}, 'fortran_order': False, 'shape': (4, 2), }}\n"
    key = node(doc, "v")["attrs"]["value"]["$array"]
    members[f"{key}.npy"] = b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + \
        text.encode() + bytes(32)


@pytest.mark.parametrize("case", JSON_ATTACKS)
def test_a_crafted_graph_json_is_refused(saved: Path, case: str) -> None:
    spoil, message = JSON_ATTACKS[case]
    doc, members = read(saved)
    result = spoil(doc, members)
    if isinstance(result, bytes):  # graph.json's raw bytes
        with zipfile.ZipFile(saved, "w") as z:
            z.writestr("graph.json.npy", array_member(np.frombuffer(result, np.uint8)))
            for name, data in members.items():
                z.writestr(name, data)
    else:
        write(saved, result if result is not None else doc, members)
    refused(saved, message)


@pytest.mark.parametrize("descr", ["|V8", "<M8[s]", "<m8[s]", [("a", "<f4"), ("b", "<f4")],
                                   "<c8", "|S4", "<U1"])
def test_an_array_of_anything_but_numbers_is_refused(saved: Path, descr: object) -> None:
    doc, members = read(saved)
    size = np.dtype(descr).itemsize * 8
    header_member(doc, members, {"descr": descr, "fortran_order": False, "shape": (4, 2)},
                  bytes(size))
    write(saved, doc, members)
    refused(saved, "member 'array_0' holds", "a minigraph file holds only numbers")


# --- every op's attrs, each given a value of the wrong kind ---------------------------------------

DECLARED = [(name, attr) for name, op in sorted(mg.OPS.items()) if op.attrs
            for attr in op.attrs]
WRONG = {"a string of code": PAYLOAD, "a tuple of code": {"$tuple": [PAYLOAD]},
         "a slice of code": {"$slice": [PAYLOAD, None, None]}, "a nested list": [[1]]}


def test_every_declared_attr_is_attacked() -> None:
    assert len(DECLARED) >= 40  # the op table has that many; a test of none would pass


@pytest.mark.parametrize("op, attr", DECLARED)
def test_an_attr_of_the_wrong_kind_is_refused_for_every_op(saved: Path, op: str,
                                                           attr: str) -> None:
    for what, value in WRONG.items():
        doc, members = read(saved)
        h = node(doc, "h")
        h["op"], h["attrs"] = op, {attr: value}
        write(saved, doc, members)
        message = refused(saved, f"node %h ({op})", f"attr {attr}=")
        assert "nothing from this file was run" in message, f"{what}: {message}"


# --- odd but harmless: loads, and every executor gives the right numbers -------------------------


def run_everywhere(path: Path) -> None:
    loaded = mg.load(path)
    np.testing.assert_array_equal(loaded(X), EXPECTED)
    state = {v.name: v.attrs["value"] for v in loaded.graph.variables()}
    np.testing.assert_array_equal(mg.codegen(loaded.graph)(X, state=state), EXPECTED)
    for executor in ("interpreter", "codegen"):
        with mg.Session(loaded.graph, executor=executor) as sess:
            sess.state.update(state)
            np.testing.assert_array_equal(sess.run(loaded.graph.outputs[0],
                                                   {loaded.graph.placeholders()[0]: X}),
                                          EXPECTED)


@pytest.mark.parametrize("name", ["np", "conform", "state", "forward", "_assign", "_", "print",
                                  "const", "sum_impl", "lambda", "None", "x_1", "損失"])
def test_names_generated_code_uses_are_renamed_there_not_refused(saved: Path,
                                                                  name: str) -> None:
    doc, members = read(saved)
    rename(doc, "h", name)
    write(saved, doc, members)
    run_everywhere(saved)
    source = mg.codegen(mg.load(saved).graph).source
    assert f"\n    {name} = np." not in source or name not in ("np", "conform", "state")
    compile(source, "<check>", "exec")  # valid Python whatever the names


def test_a_fortran_ordered_array_loads_with_its_values(saved: Path) -> None:
    doc, members = read(saved)
    key = node(doc, "v")["attrs"]["value"]["$array"]
    members[f"{key}.npy"] = array_member(np.asfortranarray(np.ones((4, 2), np.float32)))
    write(saved, doc, members)
    run_everywhere(saved)


def test_codegen_keeps_apart_names_that_python_would_fold_together() -> None:
    # A graph built by hand can still hold a fullwidth name: Python reads `ｘ = ...` as
    # `x = ...`, which would overwrite the input x (it gave [20, 40] here, not [11, 22]).
    with mg.Graph().as_default() as g:
        x = mg.placeholder((2,), name="x")
        v = mg.Variable(np.array([10.0, 20.0], np.float32), name="v")
        g.outputs = [x + v]
    v.name = "\uff58"  # past Graph's check of names
    g._by_name = {n.name: n for n in g.nodes}
    f = mg.codegen(g)
    assert "x_1 = state['\uff58']" in f.source, f.source
    np.testing.assert_array_equal(f(np.array([1.0, 2.0], np.float32)), [11.0, 22.0])


def test_graph_builders_refuse_the_names_the_loader_refuses() -> None:
    with mg.Graph().as_default():
        for name, problem in [("__builtins__", "__dunder__"), ("\uff59", "NFKC"),
                              (3, "(a str), not a int"), ("a b", "Python identifier")]:
            with pytest.raises(mg.GraphError, match=re.escape(problem)):
                mg.placeholder((2,), name=name)
        assert mg.placeholder((2,), name="lambda").name == "lambda"  # codegen renames it


def test_a_graph_with_odd_names_round_trips(tmp_path: Path) -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((2,), name="lambda")
        g.outputs = [mg.exp(x, name="np") * mg.constant(2.0, name="損失")]
    path = tmp_path / "odd.npz"
    mg.save(g, path)
    assert str(mg.load(path)) == str(g)
    np.testing.assert_allclose(mg.load(path)(np.zeros(2, np.float32)), [2.0, 2.0])


def test_a_loop_gradient_with_its_attrs_spoiled_is_refused(tmp_path: Path) -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((), "float64", name="x")
        (v,) = mg.while_loop(lambda v: v < 10.0, lambda v: v * x, [x])
        g.outputs = [v, *mg.gradients(v, [x])]
    path = tmp_path / "loop.npz"
    mg.save(g, path)
    np.testing.assert_allclose(mg.load(path)(np.float64(3.0)), [27.0, 27.0])  # d(x**3)/dx
    original = read(path)
    for spoil, message in [
            (lambda n: n["attrs"].update(floats={"$tuple": [7]}),
             "floats=(7,), but the float loop variables of %while_loop are (0,)"),
            (lambda n: n["attrs"].update(seeded={"$tuple": [True, True]}),
             "1 float loop variables but 2 seeded flags"),
            (lambda n: n["attrs"].update(body_vjp={"$graph": {"nodes": [], "outputs": []}}),
             "its body_vjp or its seeds and captured values are not the loop's")]:
        doc, members = copy.deepcopy(original)
        spoil(first(doc, "while_loop_grad"))
        write(path, doc, members)
        refused(path, message)
    doc, members = copy.deepcopy(original)
    first(doc, "while_loop")["attrs"]["save_history"] = False
    write(path, doc, members)
    refused(path, "it saves none (save_history is off)")


def test_infinity_loads_where_a_number_may_be_infinite_and_nowhere_else(tmp_path: Path) -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((3,), name="x")
        g.outputs = [mg.clip(x, -np.inf, 1.0)]  # JSON has no Infinity; Python's json writes it
    path = tmp_path / "clip.npz"
    mg.save(g, path)
    loaded = mg.load(path)
    np.testing.assert_array_equal(loaded(np.array([-5.0, 0.5, 5.0], np.float32)), [-5, 0.5, 1])
    assert "inf" not in mg.codegen(loaded.graph).source  # passed by reference, never as text
    doc, members = read(path)
    first(doc, "placeholder")["attrs"]["shape"] = {"$tuple": [float("inf")]}
    write(path, doc, members)
    refused(path, "attr shape=(inf,): wants a tuple of non-negative ints")
