"""mg.save / mg.load: one .npz file (graph.json + arrays), no pickle, precise errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import course_utils.minigraph as mg

RNG = np.random.default_rng(0)
W = mg.tensor(RNG.normal(size=(3, 2)).astype(np.float32))
B = mg.tensor(np.array([0.5, -0.5], np.float32))


@mg.function
def classify(x):
    logits = mg.relu(x @ W) + B
    scale = mg.cond(mg.sum(logits) > 0, lambda: mg.max(logits), lambda: mg.sum(x * x) + 1.0)
    return mg.softmax(logits / scale), scale


X_POS = np.array([[1.0, 2.0, 3.0], [0.5, 0.1, -0.2]], np.float32)
X_NEG = -X_POS


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    classify(mg.tensor(X_POS))
    path = tmp_path / "classify.npz"
    mg.save(classify, path)
    return path


def test_round_trip_prints_the_same_graph_and_computes_the_same_outputs(saved: Path) -> None:
    loaded = mg.load(saved)
    assert str(loaded) == str(classify.get_graph(mg.tensor(X_POS)))
    assert loaded.__name__ == "classify" and "tuple_get" in str(loaded)
    for x in (X_POS, X_NEG):  # both branches of the cond
        want = classify(mg.tensor(x))
        got = loaded(x)
        assert isinstance(got, tuple) and len(got) == 2
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w.numpy())
    loaded.graph.validate()
    mg.save(loaded, saved.with_name("again.npz"))  # a loaded graph saves to the same bytes' worth
    assert str(mg.load(saved.with_name("again.npz"))) == str(loaded)


def test_captures_are_saved_with_their_current_value(saved: Path, tmp_path: Path) -> None:
    b = B  # the same tensor object, updated in place
    with mg.no_grad():
        b += 1.0
    try:
        mg.save(classify, tmp_path / "later.npz")
        before, after = mg.load(saved), mg.load(tmp_path / "later.npz")
        assert not np.array_equal(before(X_POS)[1], after(X_POS)[1])
        np.testing.assert_array_equal(after(X_POS)[1], classify(mg.tensor(X_POS))[1].numpy())
    finally:
        with mg.no_grad():
            b -= 1.0


def test_a_static_graph_with_variables_runs_in_a_session_after_loading(tmp_path: Path) -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 2), name="x")
        v = mg.Variable(np.array([[1.0], [2.0]], np.float32), name="v")
        mg.sum(x[:, 0:1] @ mg.transpose(v), axis=-1, name="y")
        mg.assign_sub(v, v * 0.5, name="step")
        mg.global_variables_initializer()
    mg.save(g, tmp_path / "static.npz")
    loaded = mg.load(tmp_path / "static.npz").graph
    assert str(loaded) == str(g)
    with mg.Session(loaded) as sess:
        sess.run("init")
        sess.run("step")
        np.testing.assert_array_equal(sess.run("y", {"x": [[2.0, 0.0]]}), [3.0])


def test_the_loaded_file_runs_without_the_code_that_built_it(saved: Path) -> None:
    script = (
        "import json, sys, numpy as np\n"
        "import course_utils.minigraph as mg\n"
        "f = mg.load(sys.argv[1])\n"
        "probs, scale = f(np.array(json.loads(sys.argv[2]), np.float32))\n"
        "assert not any(m.startswith('test') for m in sys.modules)\n"
        "print(json.dumps([probs.tolist(), float(scale)]))\n"
    )
    for x in (X_POS, X_NEG):
        out = subprocess.run([sys.executable, "-c", script, str(saved), json.dumps(x.tolist())],
                             capture_output=True, text=True, check=True, cwd=saved.parent)
        probs, scale = json.loads(out.stdout)
        want = classify(mg.tensor(x))
        np.testing.assert_array_equal(np.array(probs, np.float32), want[0].numpy())
        assert np.float32(scale) == want[1].numpy()


def test_the_file_holds_json_and_plain_arrays_and_no_pickle(saved: Path) -> None:
    with zipfile.ZipFile(saved) as archive:
        names = archive.namelist()
        assert "graph.json.npy" in names and all(n.endswith(".npy") for n in names)
        for name in names:
            array = np.lib.format.read_array(io.BytesIO(archive.read(name)), allow_pickle=False)
            assert array.dtype.kind in "biuf" and not array.dtype.hasobject
    with np.load(saved, allow_pickle=False) as npz:
        doc = json.loads(npz["graph.json"].tobytes().decode("utf-8"))
        arrays = {k: npz[k] for k in npz.files if k != "graph.json"}
    assert (doc["format"], doc["version"], doc["name"]) == ("minigraph", 1, "classify")
    assert doc["structure"] == {"$tuple": [0, 1]}
    cond = next(n for n in doc["graph"]["nodes"] if n["op"] == "cond")
    assert set(cond["attrs"]) == {"true_fn", "false_fn"} and "$graph" in cond["attrs"]["true_fn"]
    assert any(np.array_equal(a, W.numpy()) for a in arrays.values())


def test_what_cannot_be_saved_is_refused(tmp_path: Path) -> None:
    with pytest.raises(mg.SerializationError, match="no trace yet"):
        mg.save(mg.function(lambda x: x), tmp_path / "f.npz")
    with pytest.raises(mg.SerializationError, match="takes a Graph or an mg.function"):
        mg.save(lambda x: x, tmp_path / "f.npz")
    with mg.Graph().as_default() as g:
        mg.apply("identity", [mg.placeholder((2,), name="x")], name="y")
    g.nodes[-1].attrs["note"] = object()
    with pytest.raises(mg.SerializationError, match="%y .identity. attr 'note': its value is"):
        mg.save(g, tmp_path / "g.npz")


# --- malformed files ------------------------------------------------------------------------------


def members(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    with np.load(path, allow_pickle=False) as npz:
        doc = json.loads(npz["graph.json"].tobytes().decode("utf-8"))
        return doc, {k: npz[k] for k in npz.files if k != "graph.json"}


def rewrite(path: Path, doc: dict | bytes, arrays: dict[str, np.ndarray], **extra) -> None:
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode("utf-8")
    with open(path, "wb") as file:
        np.savez(file, **{"graph.json": np.frombuffer(raw, np.uint8)}, **arrays, **extra)


def node(doc: dict, op: str) -> dict:
    return next(n for n in doc["graph"]["nodes"] if n["op"] == op)


def edit_json(change):
    def apply(path: Path) -> None:
        doc, arrays = members(path)
        change(doc)
        rewrite(path, doc, arrays)
    return apply


def edit_arrays(change):
    def apply(path: Path) -> None:
        doc, arrays = members(path)
        rewrite(path, doc, change(doc, arrays))
    return apply


def first_capture_array(doc: dict) -> str:
    return node(doc, "capture")["attrs"]["ref"]["$tensor"]


def not_a_zip(path: Path) -> None:
    path.write_text("just some text")


def truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:200])


def bad_json(path: Path) -> None:
    doc, arrays = members(path)
    rewrite(path, json.dumps(doc).encode()[:-5], arrays)


def pickled_member(path: Path) -> None:
    doc, arrays = members(path)
    with open(path, "wb") as file:
        np.savez(file, **{"graph.json": np.frombuffer(json.dumps(doc).encode(), np.uint8)},
                 **{**arrays, first_capture_array(doc): np.array([{"evil": 1}], dtype=object)})


def renamed_graph_member(path: Path) -> None:
    doc, arrays = members(path)
    with open(path, "wb") as file:
        np.savez(file, **{"model.json": np.frombuffer(json.dumps(doc).encode(), np.uint8)},
                 **arrays)


MALFORMED = {
    "not a zip": (not_a_zip, "not a minigraph file"),
    "truncated": (truncated, "truncated or corrupt"),
    "bad json": (bad_json, "graph.json is not valid JSON"),
    "no graph.json": (renamed_graph_member, "holds a member named 'model.json.npy'"),
    "pickled member": (pickled_member, "unpickling Python objects"),
    "wrong version": (edit_json(lambda d: d.update(version=99)),
                      "format version 99 is not supported; this minigraph reads version 1"),
    "wrong format": (edit_json(lambda d: d.update(format="tensorflow")), "format 'tensorflow'"),
    "unknown op": (edit_json(lambda d: node(d, "relu").update(op="gelu")),
                   "node %relu uses op 'gelu', which is not in mg.OPS"),
    "dangling input": (edit_json(lambda d: node(d, "relu").update(inputs=["ghost"])),
                       "node %relu (relu) reads %ghost, which is not defined before it"),
    "duplicate name": (edit_json(lambda d: node(d, "relu").update(name="x")),
                       "node %x appears twice"),
    "missing array": (edit_arrays(lambda d, a: {k: v for k, v in a.items()
                                                if k != first_capture_array(d)}),
                      "node %W (capture) attr 'ref' needs the member"),
    "wrong array shape": (edit_arrays(lambda d, a: {**a, first_capture_array(d): np.ones(
        (4, 2), np.float32)}), "node %W (capture) records shape [3, 2] dtype float32 but its "
                               "inputs and attrs give shape [4, 2]"),
    "wrong recorded dtype": (edit_json(lambda d: node(d, "relu").update(dtype="float64")),
                             "node %relu (relu) records shape [2, 2] dtype float64"),
    "bad sub-graph": (edit_json(lambda d: node(d, "cond")["attrs"]["true_fn"]["$graph"].update(
        outputs=["nowhere"])), "returns %nowhere, which is not one of its nodes"),
    "missing field": (edit_json(lambda d: node(d, "matmul").pop("inputs")),
                      "node %matmul has no 'inputs' field"),
    "bad structure": (edit_json(lambda d: d.update(structure={"$tuple": [0, 7]})),
                      "output structure"),
    "unknown tag": (edit_json(lambda d: node(d, "capture")["attrs"].update(ref={"$pickle": 0})),
                    "unknown tag '$pickle'"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_file_raises_a_serialization_error_saying_what_is_wrong(
        saved: Path, case: str) -> None:
    spoil, message = MALFORMED[case]
    spoil(saved)
    with pytest.raises(mg.SerializationError) as info:
        mg.load(saved)
    assert message in str(info.value) and "classify.npz" in str(info.value)
