"""mg.load's limits on what a loaded graph may do when it runs, and on the work of loading.

A file that passes every check of ``test_serialize_safety.py`` and ``test_serialize_attacks.py``
can still ask for trouble later: a loop whose test is always true, values far larger than the
file, or a graph shaped so that loading it takes quadratic time. These are the findings of
issue 25; each test here failed (or would have run forever) before the fix.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from peak_memory import peak_of

import course_utils.minigraph as mg
from course_utils.minigraph import control_flow, serialize


def saved_loop(path: Path, limit: float) -> Path:
    """A graph of one loop: ``while v < limit: v = v + 1``, saved to ``path``."""
    with mg.Graph().as_default() as g:
        x = mg.placeholder((), name="x")
        g.outputs = [mg.while_loop(lambda v: v < limit, lambda v: v + 1.0, x, name="count")]
    mg.save(g, path)
    return path


# --- loops: a loaded while_loop runs at most max_iterations --------------------------------------


def test_a_loaded_loop_that_never_ends_stops_at_the_cap_naming_the_loop(tmp_path: Path) -> None:
    loaded = mg.load(saved_loop(tmp_path / "forever.npz", np.inf), max_iterations=50)
    with pytest.raises(mg.ExecutionError) as info:
        loaded(np.float32(0.0))
    message = str(info.value)
    assert "%count = while_loop(%x, max_iterations=50)" in message, message
    assert "still true after max_iterations=50 iterations" in message
    assert "mg.load(path, max_iterations=...)" in message  # what to do about it
    assert isinstance(info.value.__cause__, control_flow.LoopLimitExceeded)


def test_the_default_cap_stops_a_loop_of_more_iterations(tmp_path: Path) -> None:
    # 20 000 iterations: a finite loop (the old code returned 20 000), but past the documented
    # default of 10 000.
    assert serialize.MAX_ITERATIONS == 10_000
    path = saved_loop(tmp_path / "long.npz", 19_999.5)
    with pytest.raises(mg.ExecutionError, match="max_iterations=10,000 iterations"):
        mg.load(path)(np.float32(0.0))
    assert mg.load(path, max_iterations=None)(np.float32(19_990.0)) == 20_000.0  # no cap


def test_a_loop_within_the_cap_gives_the_numbers_of_the_unloaded_graph(tmp_path: Path) -> None:
    path = saved_loop(tmp_path / "short.npz", 10.5)
    loaded = mg.load(path, max_iterations=11)
    assert loaded(np.float32(0.0)) == 11.0 == 0.0 + 11  # exactly 11 iterations: allowed
    with pytest.raises(mg.ExecutionError, match="max_iterations=10 iterations"):
        mg.load(path, max_iterations=10)(np.float32(0.0))


def test_every_executor_and_nested_loops_keep_the_cap(tmp_path: Path) -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((), name="x")
        inner = lambda v: mg.while_loop(lambda u: u > -1.0, lambda u: u + 1.0, v,  # noqa: E731
                                        name="inner")
        g.outputs = [mg.cond(x > 0.0, lambda: inner(x), lambda: x)]
    mg.save(g, tmp_path / "nested.npz")
    loaded = mg.load(tmp_path / "nested.npz", max_iterations=5)
    assert loaded(np.float32(-3.0)) == -3.0  # the branch without the loop
    for executor in ("interpreter", "codegen"):
        with mg.Session(loaded.graph, executor=executor) as sess, \
                pytest.raises(mg.ExecutionError, match="%inner = while_loop"):
            sess.run(loaded.graph.outputs, {"x": np.float32(1.0)})


def test_the_cap_is_the_callers_whatever_the_file_says(tmp_path: Path) -> None:
    first = mg.load(saved_loop(tmp_path / "a.npz", np.inf), max_iterations=3)
    mg.save(first, tmp_path / "b.npz")  # the file now holds max_iterations=3
    again = mg.load(tmp_path / "b.npz", max_iterations=7)
    loop = next(n for n in again.graph.nodes if n.op == "while_loop")
    assert loop.attrs["max_iterations"] == 7


def test_loops_built_in_python_have_no_cap() -> None:
    with mg.Graph().as_default() as g:
        mg.while_loop(lambda v: v < 3.0, lambda v: v + 1.0, mg.placeholder((), name="x"))
    loop = next(n for n in g.nodes if n.op == "while_loop")
    assert loop.attrs.get("max_iterations") is None and "max_iterations" not in str(g)


@pytest.mark.parametrize("bad", [-1, 2.5, True, "10"])
def test_a_bad_max_iterations_is_refused(tmp_path: Path, bad: object) -> None:
    path = saved_loop(tmp_path / "loop.npz", 3.0)
    with pytest.raises(mg.ArgumentError, match="max_iterations is the most iterations"):
        mg.load(path, max_iterations=bad)


# --- loading takes time linear in the size of the file -------------------------------------------


def saved_wide_loop(path: Path, n: int) -> Path:
    """One while_loop over ``n`` loop variables, each read back by its own tuple_get node."""
    with mg.Graph().as_default() as g:
        xs = [mg.placeholder((), name=f"x{i}") for i in range(n)]
        g.outputs = list(mg.while_loop(lambda *v: v[0] < 0.0,
                                       lambda *v: tuple(a + 1.0 for a in v), xs))
    mg.save(g, path)
    return path


def lines_run_by_minigraph(fn) -> int:
    """How many lines of minigraph's own source ``fn()`` executes: a count of steps that does not
    depend on the speed of the machine (comprehensions count once per item)."""
    package, count = os.path.dirname(mg.__file__), 0

    def count_lines(frame, event, arg):
        nonlocal count
        count += event == "line"
        return count_lines

    def enter(frame, event, arg):
        return count_lines if frame.f_code.co_filename.startswith(package) else None

    sys.settrace(enter)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def test_loading_a_loop_of_twice_the_variables_takes_twice_the_steps(tmp_path: Path) -> None:
    # Each tuple_get's shape rule used to list all of the loop body's placeholders: n tuple_gets
    # times n placeholders. Now doubling n doubles the steps (the old code: 2.5x, then 2.8x...).
    small, large = (saved_wide_loop(tmp_path / f"{n}.npz", n) for n in (100, 200))
    steps = [lines_run_by_minigraph(lambda p=p: mg.load(p)) for p in (small, large)]
    assert 1.8 < steps[1] / steps[0] < 2.2, steps


# --- memory: what the values of a loaded graph add up to ------------------------------------------


def saved(graph: mg.Graph, path: Path) -> Path:
    mg.save(graph, path)
    return path


def test_a_small_file_of_many_values_each_under_the_limit_is_refused(tmp_path: Path) -> None:
    # The file: 1.7 KB, six broadcasts of a scalar to just under 1 GiB each. Each node
    # passed the per-node check; together they would take 6 GiB when called.
    with mg.Graph().as_default() as g:
        x = mg.placeholder((), name="x")
        g.outputs = [mg.broadcast_to(x + float(i), (2**28 - 16,)) for i in range(6)]
    path = saved(g, tmp_path / "six.npz")
    assert path.stat().st_size < 4096 and 4 * (2**28 - 16) < serialize.MAX_BYTES  # noqa: SIM300
    with pytest.raises(mg.SerializationError, match=r"six.npz: the values its graph makes when "
                       r"it runs add up to 2,147,483,528 bytes by node %broadcast_to_1"):
        mg.load(path)


def test_the_total_counts_every_node_of_every_sub_graph_once(tmp_path: Path) -> None:
    # 100 float32 values made at the top and 100 in the loop body: 800 bytes in all.
    with mg.Graph().as_default() as g:
        x = mg.placeholder((), name="x")
        wide = mg.broadcast_to(x, (100,), name="wide")
        g.outputs = [mg.while_loop(lambda v: mg.sum(v) < 0.0,
                                   lambda v: mg.broadcast_to(mg.sum(v), (100,)), wide)]
    path = saved(g, tmp_path / "loop.npz")
    made = values_made(g)
    assert made > 2 * 400  # the wide value at the top, the body's broadcast, and more
    mg.load(path, max_bytes=made)  # exactly the total: loads
    with pytest.raises(mg.SerializationError, match=f"add up to {made:,} bytes"):
        mg.load(path, max_bytes=made - 1)


def values_made(graph: mg.Graph) -> int:
    """The bytes of every value ``graph`` and its sub-graphs make (not fed, not read from the
    file), each counted once, from the shapes of the graph as built."""
    total = 0
    for n in graph.nodes:
        total += sum(values_made(sub) for sub in n.attrs.values() if isinstance(sub, mg.Graph))
        if n.dtype is not None and n.op not in ("placeholder", "constant", "variable", "capture"):
            total += int(np.prod([1 if d is None else d for d in n.shape])) * n.dtype.itemsize
    return total


def test_a_size_known_only_at_run_time_counts_one_row_when_loading(tmp_path: Path) -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 1000), name="x")
        g.outputs = [mg.sum(mg.exp(x), axis=1, name="total")]  # a row: 4000 + 4 bytes
    path = saved(g, tmp_path / "rows.npz")
    mg.load(path, max_bytes=4004)
    with pytest.raises(mg.SerializationError, match=r"\(None, 1000\) float32 array \(4,000 "
                                                    r"bytes, for one row where a size is known"):
        mg.load(path, max_bytes=3999)


def outer_product_file(tmp_path: Path) -> Path:
    """``sum(x[:, None] * x[None, :])``: n values in, n * n made."""
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None,), name="x")
        g.outputs = [mg.sum(mg.reshape(x, (-1, 1)) * mg.reshape(x, (1, -1)), name="total")]
    return saved(g, tmp_path / "outer.npz")


def test_a_call_that_would_go_over_is_refused_before_it_allocates(tmp_path: Path) -> None:
    import tracemalloc  # numpy reports its allocations to tracemalloc

    loaded = mg.load(outer_product_file(tmp_path), max_bytes=10**6)
    x = np.linspace(0, 1, 400, dtype=np.float32)  # 400 x 400 x 4 = 640 KB: within the limit
    np.testing.assert_allclose(loaded(x), np.sum(np.outer(x, x)), rtol=1e-5)
    x = np.ones(2000, np.float32)  # 16 MB
    tracemalloc.start()
    try:
        with pytest.raises(mg.ExecutionError) as info:
            loaded(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "(None, None) float32 value of 16,000,000 bytes" in str(info.value)
    assert "more than max_bytes=1,000,000" in str(info.value) and "mg.load(path, max_bytes=" in \
        str(info.value)
    assert peak < 10**6, f"{peak:,} bytes were allocated before the refusal"


def test_a_loop_that_keeps_doubling_its_variable_is_stopped_at_the_limit(tmp_path: Path) -> None:
    # A (None,) loop variable is any length at run time: concat doubles it each iteration, up to
    # 2**18 values (1 MB) here; the limit of 100 KB stops it at the concat inside the body.
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None,), name="x")
        g.outputs = [mg.sum(mg.while_loop(lambda v: mg.sum(v) < 2.0**18,
                                          lambda v: mg.concat([v, v], axis=0, name="twice"), x))]
    path = saved(g, tmp_path / "double.npz")
    assert mg.load(path)(np.ones(1, np.float32)) == 2.0**18  # within the default limit: runs
    with pytest.raises(mg.ExecutionError, match=r"%twice = concat\(.*more than max_bytes="
                                                 r"100,000"):
        mg.load(path, max_bytes=100_000)(np.ones(1, np.float32))


def test_the_limit_is_per_call_and_released_after_an_error(tmp_path: Path) -> None:
    loaded = mg.load(outer_product_file(tmp_path), max_bytes=10**6)
    for _ in range(3):
        with pytest.raises(mg.ExecutionError):
            loaded(np.ones(1000, np.float32))
        assert loaded(np.ones(10, np.float32)) == 100.0
    assert interpreter_limit() is None  # nothing left behind for other graphs


def interpreter_limit():
    from course_utils.minigraph import interpreter

    return interpreter.memory_limit()


# --- memory: what loading itself takes, measured in a child process (issue 37) --------------------

#: Run in a fresh interpreter (``peak_of``): load argv[1] with max_bytes=argv[2], print what
#: came of it.
LOAD = """
import sys
import numpy as np
import course_utils.minigraph as mg
try:
    loaded = mg.load(sys.argv[1], max_bytes=int(sys.argv[2]))
    value = loaded.graph.nodes[0].attrs["value"]
    print("loaded", value.dtype.isnative, value.shape, value[[0, len(value) // 2, -1]].tolist(),
          float(value.sum()))
except mg.SerializationError as e:
    print("refused", e)
"""


def peak_of_loading(path: Path, max_bytes: int = serialize.MAX_BYTES) -> tuple[str, int]:
    """(what ``mg.load`` said, the peak resident bytes of the process that loaded it)."""
    return peak_of(LOAD, str(path), str(max_bytes))


def npz(path: Path, document: bytes, arrays: dict[str, np.ndarray]) -> Path:
    """A minigraph file written by hand (deflated, as a crafted one would be)."""
    import io
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for name, array in {"graph.json": np.frombuffer(document, np.uint8), **arrays}.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array)
            out.writestr(f"{name}.npy", buffer.getvalue())
    return path


def test_a_small_file_of_millions_of_json_values_is_refused_before_parsing(tmp_path: Path) -> None:
    # 40 KB deflated, 20 MB of "[]," (under the 32 MB limit on graph.json): 6.7 million empty
    # lists, about 600 MB of Python objects; the 64 KB file of them peaked at 1.7 GB.
    # The values are counted on the bytes first.
    head = b'{"format": "minigraph", "version": 1, "graph": {"nodes": [], "outputs": []}, '
    body = b'"structure": [' + b"[]," * (20 * 2**20 // 3) + b"[]]}"
    path = npz(tmp_path / "lists.npz", head + body, {})
    assert path.stat().st_size < 64 * 1024
    said, peak = peak_of_loading(path)
    assert said.startswith("refused lists.npz: graph.json holds up to 13,981,027 JSON values, "
                           "more than the 2,500,000"), said  # '[' and ',' each count one
    assert peak < 300 * 2**20, f"loading took {peak / 2**20:.0f} MB"


@pytest.mark.parametrize("order", ["<", ">"])
def test_a_constant_is_read_into_its_array_not_copied(tmp_path: Path, order: str) -> None:
    # A 200 MB constant from a 200 KB file (zeros deflate a thousandfold), max_bytes just above
    # it: before, the data was read as bytes and then copied into the array (twice its size,
    # the 1 MB file that peaked at 2.1 GB); now it is read into the array. Big-endian
    # data is swapped to this machine's order, with the values numpy reads.
    n = 25 * 2**20
    values = np.zeros(n, np.dtype(f"{order}f8"))
    values[[0, n // 2, n - 1]] = [1.5, -2.25, 3.0]
    document = json.dumps({"format": "minigraph", "version": 1, "graph": {"nodes": [
        {"name": "c", "op": "constant", "inputs": [], "attrs": {"value": {"$array": "array_0"}},
         "shape": [n], "dtype": "float64", "source": ""}], "outputs": ["c"]}, "structure": 0}
    ).encode()
    path = npz(tmp_path / "constant.npz", document, {"array_0": values})
    assert path.stat().st_size < 2**20
    said, peak = peak_of_loading(path, max_bytes=n * 8 + 2**20)
    assert said == f"loaded True {values.shape} [1.5, -2.25, 3.0] {float(values.sum())}", said
    assert peak < n * 8 + 120 * 2**20, f"loading a {n * 8 / 2**20:.0f} MB constant took " \
        f"{peak / 2**20:.0f} MB"
