"""mg.compile_c: the C it writes computes what numpy computes, lays its values out as the memory
plan says, keeps the graph's strings out of the C, and runs with no Python.

Each compile takes about half a second on two cores, so the models are compiled once per module
and the random graphs compile a few outputs each.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import course_utils.minigraph as mg
from course_utils import data, models
from course_utils.minigraph.compile_c import lowering as L
from course_utils.minigraph.compile_c import toolchain


def _has_compiler() -> bool:
    try:
        toolchain.find_compiler()
    except mg.CompileError:
        return False
    return True


# Without a compiler only the tests that need none run (the error, the refusals).
needs_cc = pytest.mark.skipif(not _has_compiler(), reason="no C compiler (cc, gcc, clang or "
                                                          "the ziglang package)")


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


# --- the models of the lessons, compiled once -------------------------------------------------


@pytest.fixture(scope="module")
def cnn():
    """The digits CNN (its initial weights, float32), traced on 3 images and compiled."""
    params = {k: mg.tensor(v) for k, v in models.init_cnn(dtype=np.float32).items()}
    fn = mg.function(lambda x: models.minigraph_logits(x, params))
    images = data.load_digits().X_test
    return fn, mg.compile_c(fn, images[:3]), images


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """The spiral MLP of lessons 02-05 (2-32-32-2, relu), weights He-uniform, compiled with small
    tiles so that a run crosses tiles, into a folder of its own."""
    layers = [(mg.tensor(w.astype(np.float32)), mg.tensor(rng_bias(b.shape)))
              for w, b in data.init_mlp()]

    def forward(x):
        h = x
        for i, (w, b) in enumerate(layers):
            h = h @ w + b
            h = mg.relu(h) if i < len(layers) - 1 else h
        return h

    fn = mg.function(forward)
    X, _ = data.spiral()
    folder = tmp_path_factory.mktemp("mlp")
    return fn, mg.compile_c(fn, X[:2].astype(np.float32), folder=folder, tile=16), \
        X.astype(np.float32), layers


def rng_bias(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(1).normal(0, 0.1, shape).astype(np.float32)


@needs_cc
def test_cnn_logits_equal_minigraphs(cnn) -> None:
    fn, compiled, images = cnn
    want = fn(mg.tensor(images)).numpy()
    got = compiled(images)
    assert got.shape == (len(images), 10) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.array_equal(got.argmax(1), want.argmax(1))
    assert compiled.dynamic_batch  # traced on 3 images, run on 450


@needs_cc
def test_cnn_arena_is_the_memory_plans_peak(cnn) -> None:
    _, compiled, _ = cnn
    # the plan worked out again, from minigraph's own memory planner, at the tile's batch
    plan = mg.memory_plan(compiled.graph, {"x": (compiled.rows, 1, 8, 8)})
    assert compiled.arena_bytes == plan.peak_bytes == compiled.plan.peak_bytes
    assert plan.peak_bytes < plan.kept_bytes  # buffers really are reused
    # every buffer of the plan is an offset into the arena, and the C uses exactly those
    offsets = compiled.lowered.offsets
    assert set(offsets) == {v.buffer for v in plan.values if v.buffer.startswith("b")}
    used = {int(m) for m in re.findall(r"arena \+ (\d+)\)", compiled.source)}
    assert used == set(offsets.values())
    assert f"mg_arena_bytes = {plan.peak_bytes};" in compiled.source


@needs_cc
def test_cnn_source_reads_like_the_graph(cnn) -> None:
    _, compiled, _ = cnn
    source = compiled.source
    assert source.count("int mg_forward(") == 1  # one function per graph
    assert source.count("scipy_cblas_sgemm(") == 3  # two convolutions and the linear layer
    fused = [n for n in compiled.graph.nodes if n.op == "fused"]
    assert len(fused) == 2  # bias + relu after each convolution, one loop each
    for node in compiled.graph.nodes:
        if node.op not in L.SOURCES and node.op not in L.VIEWS:
            assert f"/* %{node.name} = {node.op}(" in source  # comments name the nodes
    assert "restrict o" in source


@needs_cc
def test_mlp_logits_equal_minigraphs_across_tiles(mlp) -> None:
    fn, compiled, X, _ = mlp
    assert compiled.rows == 16 and len(X) % 16 != 0  # the last tile is partial
    np.testing.assert_allclose(compiled(X), fn(mg.tensor(X)).numpy(), rtol=1e-5, atol=1e-5)
    for n in (1, 17):
        np.testing.assert_allclose(compiled(X[:n]), fn(mg.tensor(X[:n])).numpy(), rtol=1e-5,
                                   atol=1e-5)


@needs_cc
def test_mlp_equals_numpy_and_its_arena_is_the_peak(mlp) -> None:
    _, compiled, X, layers = mlp
    h = X
    for i, (w, b) in enumerate(layers):
        h = h @ w.numpy() + b.numpy()
        h = relu(h) if i < len(layers) - 1 else h
    np.testing.assert_allclose(compiled(X), h, rtol=1e-5, atol=1e-5)
    assert compiled.arena_bytes == compiled.plan.peak_bytes
    assert compiled.folder.is_dir() and compiled.library.parent == compiled.folder


@needs_cc
def test_the_standalone_program_runs_without_python(cnn, mlp, tmp_path) -> None:
    for fn, compiled, X in (cnn, mlp[:3]):
        inputs, outputs = tmp_path / "in.bin", tmp_path / "out.bin"
        compiled.write_inputs(inputs, X)
        # an empty environment: no PYTHONPATH, no virtual environment, nothing of Python's
        result = subprocess.run([str(compiled.executable), str(inputs), str(outputs)], env={},
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert outputs.stat().st_size == X.shape[0] * compiled.outputs[0].row_count * 4
        got = compiled.read_outputs(outputs, len(X))
        np.testing.assert_allclose(got, fn(mg.tensor(X)).numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got, compiled(X))  # the same code as the library
    # a file of the wrong size is refused, naming the file
    inputs.write_bytes(np.int64(5).tobytes() + b"\0" * 7)
    result = subprocess.run([str(compiled.executable), str(inputs), str(outputs)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "too few bytes" in result.stderr


# --- random graphs against numpy ----------------------------------------------------------------
# Each draw is a chain of ops on a (rows, 4) input, written twice: with mg functions (traced and
# compiled) and with numpy (the reference). Values stay finite: exp and log see bounded inputs.

UNARY = {
    "tanh": (mg.tanh, np.tanh),
    "sigmoid": (mg.sigmoid, lambda a: 1 / (1 + np.exp(-a))),
    "relu": (mg.relu, relu),
    "neg": (mg.neg, np.negative),
    "abs": (mg.abs, np.abs),
    "square": (mg.square, np.square),
    "exp(tanh)": (lambda a: mg.exp(mg.tanh(a)), lambda a: np.exp(np.tanh(a))),
    "sqrt(|a|+1)": (lambda a: mg.sqrt(mg.abs(a) + 1.0), lambda a: np.sqrt(np.abs(a) + 1)),
    "log(a*a+1)": (lambda a: mg.log(a * a + 1.0), lambda a: np.log(a * a + 1)),
    "clip": (lambda a: mg.clip(a, -0.5, 0.7), lambda a: np.clip(a, -0.5, 0.7)),
    "softmax": (mg.softmax, lambda a: np.exp(a - a.max(-1, keepdims=True))
                / np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True)),
    "log_softmax": (mg.log_softmax, lambda a: a - a.max(-1, keepdims=True) - np.log(
        np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True))),
    "a - mean(a)": (lambda a: a - mg.mean(a, axis=1, keepdims=True),
                    lambda a: a - a.mean(1, keepdims=True)),
    "a * max(a)": (lambda a: a * mg.max(a, axis=-1, keepdims=True),
                   lambda a: a * a.max(-1, keepdims=True)),
    "sum(a) + a": (lambda a: mg.sum(a, axis=1, keepdims=True) + a,
                   lambda a: a.sum(1, keepdims=True) + a),
    "transpose 2x2": (lambda a: mg.reshape(mg.transpose(mg.reshape(a, (-1, 2, 2)), (0, 2, 1))
                                           * 2.0, (-1, 4)),
                      lambda a: a.reshape(-1, 2, 2).transpose(0, 2, 1).reshape(-1, 4) * 2),
    "slices": (lambda a: a[:, ::-1] * a + mg.expand_dims(a[:, 1], 1)
               + mg.sum(a[:, 1:3], axis=1, keepdims=True),
               lambda a: a[:, ::-1] * a + a[:, 1:2] + a[:, 1:3].sum(1, keepdims=True)),
    "logsumexp": (lambda a: a - mg.logsumexp(a, axis=1, keepdims=True),
                  lambda a: a - np.log(np.exp(a).sum(1, keepdims=True))),
    "concat": (lambda a: mg.concat([a[:, 3:], mg.tanh(a[:, :2]), a[:, 2:3] * 2.0], axis=1),
               lambda a: np.concatenate([a[:, 3:], np.tanh(a[:, :2]), a[:, 2:3] * 2], 1)),
    "where": (lambda a: mg.where(a > 0.25, a, a * -0.5) + mg.cast(a < 0, "float32"),
              lambda a: np.where(a > 0.25, a, a * -0.5) + (a < 0)),
}
BINARY = {
    "add": (mg.add, np.add),
    "sub": (mg.sub, np.subtract),
    "mul": (mg.mul, np.multiply),
    "maximum": (mg.maximum, np.maximum),
    "minimum": (mg.minimum, np.minimum),
    "div": (lambda a, b: a / (mg.abs(b) + 1.0), lambda a, b: a / (np.abs(b) + 1)),
}


@st.composite
def chains(draw, dtype):
    """``(mg_fn, np_fn)`` of one input: a few ops, some against constants (a row, a column, a
    matrix), the values of the chain combined by binary ops."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    width = 4
    steps = draw(st.lists(st.tuples(st.sampled_from(sorted(UNARY) + sorted(BINARY) + ["@"]),
                                    st.integers(0, 3), st.sampled_from(["row", "col", "x"])),
                          min_size=1, max_size=6))
    plan = []
    for op, pick, other in steps:
        const = {"row": rng.normal(size=(width,)), "col": rng.normal(size=(1, 1)),
                 "@": rng.normal(size=(width, width)) / 2}["@" if op == "@" else other
                                                           if other != "x" else "row"]
        plan.append((op, pick, other, const.astype(dtype)))

    def build(x, lib):
        values = [x]
        for op, pick, other, const in plan:
            a = values[pick % len(values)]
            c = mg.tensor(const) if lib == "mg" else const
            if op == "@":
                out = a @ c
            elif op in UNARY:
                out = UNARY[op][0 if lib == "mg" else 1](a)
            else:
                b = values[0] if other == "x" else c
                out = BINARY[op][0 if lib == "mg" else 1](a, b)
            values.append(out)
        return values[-1], values[len(values) // 2]

    return (lambda x: build(x, "mg")), (lambda x: build(x, "np")), plan


@needs_cc
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64]))
def test_random_graphs_compute_what_numpy_computes(data, dtype, tmp_path_factory) -> None:
    mg_fn, np_fn, plan = data.draw(chains(dtype), label="chain")
    fn = mg.function(mg_fn)
    x = np.random.default_rng(0).normal(size=(13, 4)).astype(dtype)
    compiled = mg.compile_c(fn, x[:3], tile=data.draw(st.sampled_from([2, 5, 16])),
                            executable=False, folder=tmp_path_factory.mktemp("random"))
    assert compiled.dynamic_batch
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for n in (13, 1):
        got = compiled(x[:n])
        want = np_fn(x[:n].astype(np.float64))
        for g, w in zip(got, want, strict=True):
            assert g.dtype == dtype
            np.testing.assert_allclose(g, w, rtol=tol * 10, atol=tol * 10,
                                       err_msg=f"{[p[:3] for p in plan]}")
        interpreted = fn(mg.tensor(x[:n]))  # and what minigraph itself computes
        for g, w in zip(got, interpreted, strict=True):
            np.testing.assert_allclose(g, w.numpy(), rtol=tol, atol=tol)
    check_layout(compiled)


def check_layout(compiled) -> None:
    """No two buffers that live at the same step share a byte, and the arena holds them all."""
    plan, offsets = compiled.plan, compiled.lowered.offsets
    spans = {}
    for v in plan.values:
        if v.buffer.startswith("b"):
            spans.setdefault(v.buffer, []).append((v.defined, v.last_use, v.nbytes))
    for a in spans:
        for b in spans:
            if a < b and any(s <= e2 and s2 <= e for s, e, _ in spans[a] for s2, e2, _ in spans[b]):
                size_a, size_b = spans[a][0][2], spans[b][0][2]
                assert (offsets[a] + size_a <= offsets[b]
                        or offsets[b] + size_b <= offsets[a]), (a, b)
    assert plan.peak_bytes <= compiled.arena_bytes
    assert all(offsets[b] + spans[b][0][2] <= compiled.arena_bytes for b in spans)


@needs_cc
def test_a_graph_that_mixes_rows_is_compiled_for_its_batch(tmp_path) -> None:
    fn = mg.function(lambda x: x - mg.mean(x, axis=0))  # the batch's mean: rows depend on rows
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    compiled = mg.compile_c(fn, x, folder=tmp_path)
    assert not compiled.dynamic_batch and compiled.rows == 5
    np.testing.assert_allclose(compiled(x), x - x.mean(0), rtol=1e-6, atol=1e-6)
    with pytest.raises(mg.FeedError, match="compiled for exactly 5 rows"):
        compiled(x[:4])
    inputs = tmp_path / "four.bin"
    compiled.write_inputs(inputs, x)
    inputs.write_bytes(np.int64(4).tobytes() + x[:4].tobytes())
    result = subprocess.run([str(compiled.executable), str(inputs), str(tmp_path / "o.bin")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 3 and "exactly 5 rows, got 4" in result.stderr


@needs_cc
def test_literals_are_exact() -> None:
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4e38, 0.1, 1 / 3], np.float32)
    fn = mg.function(lambda x: (x + 1.0, mg.tensor(special)))
    compiled = mg.compile_c(fn, np.zeros((2, 2), np.float32), executable=False)
    _, got = compiled(np.zeros((2, 2), np.float32))
    np.testing.assert_array_equal(got, special)
    assert np.signbit(got[3])
    for value in (0.1, 1 / 3, -2.5e-30, 7.0):
        for dtype in (np.float32, np.float64):
            text = L.literal(value, dtype)
            assert re.fullmatch(r"-?(0x[0-9a-f.]+p[+-]\d+|\d+\.\d)f?", text), text
            assert float.fromhex(text.rstrip("f")) == float(dtype(value))
    assert L.literal(-2**63, np.int64) == "(-9223372036854775807LL - 1)"


# --- errors -------------------------------------------------------------------------------------


def test_an_unsupported_op_is_named_with_its_node_and_line() -> None:
    labels = mg.tensor(np.array([1, 0]))
    fn = mg.function(lambda x: mg.cross_entropy(x, labels, name="loss"))  # the line below + 0
    line = test_an_unsupported_op_is_named_with_its_node_and_line.__code__.co_firstlineno + 2
    with pytest.raises(mg.CompileError) as info:
        mg.compile_c(fn, np.zeros((2, 3), np.float32))
    message = str(info.value)
    assert "%loss = cross_entropy(...)" in message
    assert f"defined at test_compile_c.py:{line}" in message
    assert "no C template for op 'cross_entropy'" in message and "mg.codegen" in message


def test_no_compiler_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None)
    monkeypatch.setattr(toolchain.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(mg.CompileError, match="found none") as info:
        toolchain.find_compiler()
    assert "pip install ziglang" in str(info.value) and "apt install gcc" in str(info.value)
    with pytest.raises(mg.CompileError, match="pip install ziglang"):
        mg.compile_c(mg.function(mg.relu), np.zeros((2, 2), np.float32))


def test_ziglang_is_the_fallback(monkeypatch) -> None:
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None)
    monkeypatch.setattr(toolchain.importlib.util, "find_spec",
                        lambda name: object() if name == "ziglang" else None)
    assert toolchain.find_compiler()[1:] == ["-m", "ziglang", "cc"]


@pytest.mark.skipif(importlib.util.find_spec("ziglang") is None,
                    reason="the ziglang package is not installed (pip install -e '.[c]'), so "
                           "the build with Zig's compiler, the fallback where no cc exists, is "
                           "not tried here")
def test_ziglang_builds_a_graph_and_its_program(mlp, tmp_path, monkeypatch) -> None:
    """With no cc on PATH, ``python -m ziglang cc`` builds the MLP's library and program, which
    compute numpy's values. (Zig's first build on a machine also builds its C runtime into its
    own cache, about half a minute of CPU.)"""
    fn, _, X, layers = mlp
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None)
    assert toolchain.find_compiler()[1:] == ["-m", "ziglang", "cc"]
    compiled = mg.compile_c(fn, X[:2], folder=tmp_path / "zig", tile=16)
    h = X
    for i, (w, b) in enumerate(layers):
        h = h @ w.numpy() + b.numpy()
        h = relu(h) if i < len(layers) - 1 else h
    np.testing.assert_allclose(compiled(X), h, rtol=1e-5, atol=1e-5)
    inputs, outputs = tmp_path / "in.bin", tmp_path / "out.bin"
    compiled.write_inputs(inputs, X)
    result = subprocess.run([str(compiled.executable), str(inputs), str(outputs)], env={},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    np.testing.assert_allclose(compiled.read_outputs(outputs, len(X)), h, rtol=1e-5, atol=1e-5)


def _python_without_compilers(tmp_path: Path, hide_ziglang: bool) -> subprocess.CompletedProcess:
    """This Python with a PATH of one empty folder (no cc, gcc or clang). ``hide_ziglang``: as if
    the ziglang package were not installed either, it compiles a graph (exit 3 on CompileError,
    printed); else it prints the compiler command it would use (the build itself is
    test_ziglang_builds_a_graph_and_its_program's)."""
    call = ("mg.compile_c(mg.function(mg.relu), np.zeros((2, 2), np.float32))" if hide_ziglang
            else "print(toolchain.find_compiler()[1:])")
    script = ("import sys\n"
              + ("sys.modules['ziglang'] = None  # importlib finds no spec for it\n"
                 if hide_ziglang else "")
              + "import numpy as np\n"
                "import course_utils.minigraph as mg\n"
                "from course_utils.minigraph.compile_c import toolchain\n"
                "try:\n"
                f"    {call}\n"
                "except mg.CompileError as e:\n"
                "    print(e)\n"
                "    sys.exit(3)\n")
    empty = tmp_path / "bin"
    empty.mkdir(parents=True)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PATH": str(empty)})


def test_without_a_compiler_on_path_for_real(tmp_path) -> None:
    # Not monkeypatched: a process whose PATH holds no compiler falls back to Zig's where the
    # ziglang package is installed, and otherwise mg.compile_c says what to install.
    hidden = _python_without_compilers(tmp_path, hide_ziglang=True)
    assert hidden.returncode == 3, hidden.stdout + hidden.stderr
    assert "found none" in hidden.stdout and "pip install ziglang" in hidden.stdout
    assert "apt install gcc" in hidden.stdout
    if importlib.util.find_spec("ziglang") is not None:
        found = _python_without_compilers(tmp_path / "zig", hide_ziglang=False)
        assert found.returncode == 0, found.stdout + found.stderr
        assert found.stdout.strip() == "['-m', 'ziglang', 'cc']"


# --- hostile graphs -----------------------------------------------------------------------------

HOSTILE = [
    'x"; system("touch pwned"); /*',
    "*/ #include </etc/passwd>\n#define relu evil",
    "../../escaped",
    "/tmp/absolute_file",
    "a\\b\r\n\t\0end",
]


def traced_graph():
    w = mg.tensor(np.array([[1.0, -2.0], [0.5, 3.0]], np.float32))
    fn = mg.function(lambda x: mg.relu(x @ w + 1.0) * 2.0)
    graph = fn.get_graph(mg.tensor(np.zeros((3, 2), np.float32)))
    return graph, lambda x: relu(x @ w.numpy() + 1) * 2


@needs_cc
def test_hostile_text_stays_inside_comments_and_the_folder(tmp_path, monkeypatch) -> None:
    """A node's source line reaches the C only in comments; so do names in any script. Both
    are changed after building (the builder would refuse a bad name)."""
    graph, reference = traced_graph()
    for i, node in enumerate(graph.nodes):
        node.source = HOSTILE[i % len(HOSTILE)]
        node.name = f"名字_{i}" if i % 2 else f"é{node.name}"  # identifiers, not ASCII
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    folder = tmp_path / "out"
    before = set(tmp_path.rglob("*"))
    compiled = mg.compile_c(graph, folder=folder)
    x = np.array([[1.0, 2.0], [-1.0, 0.5]], np.float32)
    np.testing.assert_allclose(compiled(x), reference(x), rtol=1e-6)
    created = set(tmp_path.rglob("*")) - before
    assert created and all(folder in p.parents or p == folder for p in created), created
    assert not any(workdir.iterdir()) and "pwned" not in os.listdir(tmp_path)
    for text in (compiled.source, compiled.main_source):
        directives = [line for line in text.splitlines() if line.lstrip().startswith("#")]
        assert all(re.fullmatch(r"#include <(math|stdint|string|cblas|stdio|stdlib)\.h>", line)
                   for line in directives), directives
        assert text.isascii() and "名字" not in text and "é" not in text
        code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # the C outside comments
        assert not any(word in code for word in ("evil", "system", "passwd", "pwned", "escaped"))
        for comment in re.findall(r"/\*(.*?)\*/", text, flags=re.S):
            assert not any(c in comment for c in ('"', "#", "\\", "\0", "\r")), comment
            assert "/*" not in comment
            assert all(line.startswith(" *") or not line.strip()
                       for line in comment.split("\n")[1:]), comment


@pytest.mark.parametrize("name", HOSTILE)
def test_a_name_that_is_no_identifier_is_refused_before_anything_is_written(
        name, tmp_path, monkeypatch) -> None:
    graph, _ = traced_graph()
    graph.nodes[2].name = name
    monkeypatch.chdir(tmp_path)
    with pytest.raises(mg.CompileError, match="must be a Python identifier"):
        mg.compile_c(graph, folder=tmp_path / "out")
    assert not any(tmp_path.iterdir())


def test_an_unknown_op_name_is_reported_not_pasted(tmp_path) -> None:
    fn = mg.function(lambda x: mg.exp(x))
    graph = fn.get_graph(mg.tensor(np.zeros((2, 2), np.float32)))
    graph.outputs[0].op = 'exp); system("x'
    with pytest.raises(mg.CompileError, match="no C template for op"):
        mg.compile_c(graph, folder=tmp_path)
    assert not any(Path(tmp_path).iterdir())
