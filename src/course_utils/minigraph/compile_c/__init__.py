"""``mg.compile_c``: a graph becomes C, a shared library called from Python, and a program.

codegen (lesson 03) writes Python that calls numpy; this goes one step further, as XLA,
TorchInductor and TVM do: the graph, after minigraph's passes, is lowered to C.

- one C function per graph, ``mg_forward``;
- one loop per fused elementwise group of the fusion pass (a value inside a group never
  reaches memory);
- one arena for every value the run allocates, each at the byte offset the memory plan of
  lesson 03 gives its buffer (buffers the plan reuses share an offset), so the arena is the
  plan's peak;
- matmul and convolution (im2col) through BLAS (OpenBLAS from the ``scipy-openblas32``
  wheel), pooling, reductions and softmax as plain loops;
- shapes fixed when compiled, except the batch: rows are independent in most inference
  graphs, so the function runs any number of rows, a tile at a time, in an arena laid out for
  one tile. A graph that mixes rows (a sum over the batch) is compiled for its own batch.

>>> import numpy as np, course_utils.minigraph as mg
>>> w = mg.tensor(np.ones((3, 2), np.float32))
>>> f = mg.function(lambda x: mg.relu(x @ w + 1.0))
>>> c = mg.compile_c(f, np.zeros((4, 3), np.float32))       # doctest: +SKIP
>>> c(np.ones((5, 3), np.float32))                           # doctest: +SKIP
array([[4., 4.], ...
>>> print(c.source)                                          # doctest: +SKIP

``c.executable`` is the same graph as a program that runs with no Python (its ``main`` reads
the inputs from a file and writes the outputs to one: ``c.write_inputs``, ``c.read_outputs``).

NB: AOTInductor (``torch._inductor.aoti_compile_and_package``) does this for PyTorch: a graph
captured by torch.export becomes C++ with calls into kernels, in one shared library.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CompileError, FeedError, MinigraphError, user_source
from ..graph import Graph, Node, name_problem
from ..memory import concrete_specs, memory_plan
from . import lowering as L
from . import toolchain
from .lowering import SUPPORTED, Lowered, Port, comment, describe
from .toolchain import find_compiler

#: Rows per tile are chosen so that one tile's arena is about this many bytes (it stays in the
#: CPU's cache from one op to the next).
TILE_BYTES = 256 * 1024
#: Two batch sizes at which the graph's shapes are worked out to see which dims are the batch.
PROBE_ROWS = (7919, 7920)


def compile_c(obj: Any, *example_inputs: Any, folder: str | Path | None = None,
              dynamic_batch: bool = True, tile: int | None = None, threads: int = 1,
              executable: bool = True) -> CompiledC:
    """Compile a graph (or a traced function) to C and load it.

    Args:
        obj: an ``mg.Graph`` with ``outputs``, an ``mg.function`` (traced on
            ``example_inputs``, or its last trace), a concrete or loaded function.
        example_inputs: arrays to trace ``obj`` on (shapes and dtypes matter, not values).
        folder: where the C files, the library and the program go (made if missing); default
            a new temporary folder, removed with the returned object. The course writes
            nothing anywhere else (Zig's compiler, where it is the one used, keeps its own
            cache of the C runtime it builds once per machine, in ``~/.cache/zig``).
        dynamic_batch: run any number of rows (dim 0 of every input), a tile at a time.
        tile: rows per tile (default: as many as fit in about 256 KB of arena).
        threads: OpenBLAS threads (one by default, as the course's benchmarks run).
        executable: also build the standalone program.

    Raises ``CompileError`` naming the first node it cannot compile, or saying what to install.
    """
    start = time.perf_counter()
    graph = _graph_of(obj, example_inputs)
    lowered = lower(graph, dynamic_batch=dynamic_batch, tile=tile)
    compiler = find_compiler()
    main = L.main_source(lowered) if executable else None
    return CompiledC(lowered, main, compiler, folder, threads, start)


def lower(graph: Graph, *, dynamic_batch: bool = True, tile: int | None = None) -> Lowered:
    """The C source for ``graph`` and what the Python side needs to call it (no compiler)."""
    from ..passes import optimize

    if not graph.outputs:
        raise CompileError(f"mg.compile_c at {user_source()}: the graph has no outputs; set "
                           f"graph.outputs = [...] to the values the C function should return")
    _check_supported(graph)
    placeholders = graph.placeholders()
    why_fixed = "dynamic_batch=False"
    if dynamic_batch:
        why_fixed = "it has an input with no batch dimension (a scalar)"
        if placeholders and all(p.shape for p in placeholders):
            opt = optimize(_relax(graph))
            batched, why_fixed = _batch_dims(opt)
            if batched is not None:
                return _lower_at(opt, placeholders, batched, tile or _tile(opt), True)
    opt = optimize(graph)
    for p in opt.placeholders():
        if None in p.shape:
            raise CompileError(f"mg.compile_c: placeholder %{p.name} (defined at {p.source}) "
                               f"has shape {p.shape} and the graph cannot run a variable batch "
                               f"({why_fixed}); trace the function on example inputs, or give "
                               f"the placeholder a concrete shape")
    rows = placeholders[0].shape[0] if placeholders and placeholders[0].shape else 1
    lowered = _lower_at(opt, placeholders, {n.name: False for n in opt.nodes}, rows, False)
    lowered.why_fixed = why_fixed
    return lowered


def _lower_at(opt: Graph, placeholders: list[Node], batched: dict[str, bool], rows: int,
              dynamic: bool) -> Lowered:
    feeds = {p.name: (rows, *p.shape[1:]) if batched.get(p.name) else p.shape
             for p in opt.placeholders()}
    specs = concrete_specs(opt, feeds)
    plan = memory_plan(opt, feeds)
    ports = [Port(p.name, (None, *p.shape[1:]) if dynamic and p.shape else tuple(p.shape),
                  p.dtype) for p in placeholders]
    return L.emit(opt, ports, specs, batched, plan, rows, dynamic)


def _graph_of(obj: Any, example_inputs: Sequence[Any]) -> Graph:
    from ..eager import tensor
    from ..serialize import LoadedFunction
    from ..tracing import ConcreteFunction, Function

    if isinstance(obj, Graph):
        return obj
    if isinstance(obj, (LoadedFunction, ConcreteFunction)):
        return obj.graph
    if isinstance(obj, Function):
        if example_inputs:
            return obj.get_graph(*(tensor(a) if isinstance(a, np.ndarray) else a
                                   for a in example_inputs))
        if obj.trace_count:
            return list(obj.graphs.values())[-1]
        raise CompileError(f"mg.compile_c at {user_source()}: pass example inputs to trace the "
                           f"function on, e.g. mg.compile_c(f, np.zeros((1, 2), np.float32))")
    raise CompileError(f"mg.compile_c at {user_source()} takes an mg.Graph or an mg.function, "
                       f"got {type(obj).__name__}")


def _needed(graph: Graph) -> list[Node]:
    """The nodes the outputs need, in graph order."""
    live, stack = set(), list(graph.outputs)
    while stack:
        n = stack.pop()
        if id(n) not in live:
            live.add(id(n))
            stack.extend(n.inputs)
    return [n for n in graph.nodes if id(n) in live]


def _check_supported(graph: Graph) -> None:
    for n in _needed(graph):
        problem = name_problem(n.name)
        if problem:  # minigraph's builders refuse such names: the graph was changed afterwards
            raise CompileError(f"mg.compile_c: node name {n.name!r} (op {n.op!r}, defined at "
                               f"{n.source}) {problem}; rename the node")
        if n.op not in SUPPORTED:
            ops = ", ".join(sorted(SUPPORTED - L.SOURCES - {"fused"}))
            raise CompileError(f"mg.compile_c: {describe(n)} has no C template for op "
                               f"{n.op!r}; the C backend compiles {ops}. Compute %{n.name} "
                               f"outside the compiled graph, or run this graph with mg.codegen")


def _relax(graph: Graph) -> Graph:
    """The graph rebuilt with dim 0 of every input unknown (``None``): the batch."""
    new, env = Graph(), {}
    for n in _needed(graph):
        attrs = dict(n.attrs)
        if n.op == "placeholder":
            attrs["shape"] = (None, *attrs["shape"][1:])
        env[n.name] = new.add_node(n.op, tuple(env[x.name] for x in n.inputs), attrs,
                                   name=n.name, source=n.source)
    new.outputs = [env[n.name] for n in graph.outputs]
    return new


def _batch_dims(opt: Graph) -> tuple[dict[str, bool] | None, str]:
    """Which values have the batch as dim 0, or None and why the rows cannot run apart."""
    b1, b2 = PROBE_ROWS
    try:
        s1 = concrete_specs(opt, {p.name: (b1, *p.shape[1:]) for p in opt.placeholders()})
        s2 = concrete_specs(opt, {p.name: (b2, *p.shape[1:]) for p in opt.placeholders()})
    except MinigraphError as e:
        return None, f"its shapes hold only at the traced batch: {str(e).splitlines()[0]}"

    def follows(a: tuple, b: tuple) -> bool | None:
        """True: batched; False: static; None: the batch is somewhere other than dim 0."""
        if len(a) != len(b) or a[1:] != b[1:]:
            return None
        return None if a and a[0] != b[0] and (a[0], b[0]) != (b1, b2) else bool(a and a[0] != b[0])

    batched: dict[str, bool] = {}
    for n in opt.nodes:
        state = follows(tuple(s1[n.name].shape), tuple(s2[n.name].shape))
        if state is None:
            return None, f"{describe(n)} does not keep the batch as its dim 0"
        batched[n.name] = state
        if n.op in L.SOURCES:
            continue
        if any(batched[x.name] for x in n.inputs) and not state:
            return None, f"{describe(n)} combines the rows of the batch"
        if n.op in ("softmax", "log_softmax") and state and \
                n.attrs.get("axis", -1) in (0, -len(s1[n.name].shape)):
            return None, f"{describe(n)} normalizes along the batch"
        if n.op == "fused":
            prog = n.attrs["program"]
            steps1 = prog.step_specs([s1[x.name] for x in n.inputs])
            steps2 = prog.step_specs([s2[x.name] for x in n.inputs])
            for a, b in zip(steps1, steps2, strict=True):
                if follows(tuple(a.shape), tuple(b.shape)) is None:
                    return None, f"a step of {describe(n)} does not keep the batch as dim 0"
    return batched, ""


def _tile(opt: Graph) -> int:
    probe = 64
    feeds = {p.name: (probe, *p.shape[1:]) for p in opt.placeholders()}
    per_row = max(memory_plan(opt, feeds).peak_bytes / probe, 1.0)
    return int(min(max(2 ** math.floor(math.log2(max(TILE_BYTES / per_row, 2))), 2), 1024))


def _address(a: np.ndarray) -> int:
    """Where ``a``'s data starts (ctypes' buffer view is quicker than ``a.ctypes.data``, but
    takes only writable arrays)."""
    if a.flags.writeable and a.nbytes:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    return a.ctypes.data


class CompiledC:
    """A graph compiled to C and loaded: call it with numpy arrays, one per input.

    One call at a time: the calls share the arena (as one thread of a server would).
    ``source`` is the C; ``library`` the shared library; ``executable`` the standalone
    program; ``arena_bytes`` the one block all values live in (``plan.peak_bytes`` is the
    memory plan's peak at ``rows`` rows); ``compile_seconds`` what lowering and building took.
    """

    def __init__(self, lowered: Lowered, main: str | None, compiler: list[str],
                 folder: str | Path | None, threads: int, start: float) -> None:
        self._tmp = None
        if folder is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="minigraph_c_")
            folder = self._tmp.name
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lowered, self.source, self.main_source = lowered, lowered.source, main
        self.inputs, self.outputs = lowered.inputs, lowered.outputs
        self.arena_bytes, self.workspace_bytes = lowered.arena_bytes, lowered.workspace_bytes
        self.plan, self.rows, self.dynamic_batch = lowered.plan, lowered.rows, lowered.dynamic
        self.graph = lowered.graph
        key = "\0".join([lowered.source, main or "", *compiler, *toolchain.CFLAGS])
        stem = "mg_" + hashlib.sha256(key.encode()).hexdigest()[:16]
        lib = self.folder / f"{stem}{toolchain.library_suffix()}"
        exe = self.folder / stem
        if lib.exists() and (main is None or exe.exists()):  # built before, same source
            self.library, self.executable = lib, (exe if main is not None else None)
        else:
            self.library, self.executable = toolchain.build(self.folder, stem, lowered.source,
                                                            main, compiler)
        self._lib = ctypes.CDLL(str(self.library))
        self._lib.mg_forward.restype = ctypes.c_int
        self._lib.mg_forward.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p),
                                         ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                         ctypes.c_void_p]
        self._lib.mg_set_threads(int(threads))
        self._arena = np.zeros(max(self.arena_bytes, 1), np.uint8)
        self._workspace = np.zeros(max(self.workspace_bytes, 1), np.uint8)
        # What a call needs, worked out once: the pointer tables it fills in, and each input's
        # (dtype, rank, shape after the batch) for the check that lets an array through as is.
        self._in_ptrs = (ctypes.c_void_p * max(len(self.inputs), 1))()
        self._out_ptrs = (ctypes.c_void_p * max(len(self.outputs), 1))()
        self._fixed = (self._arena.ctypes.data, self._workspace.ctypes.data)
        self._ready = [(p.dtype, len(p.shape), tuple(p.shape[1:]) if p.batched else None)
                       for p in self.inputs]
        self.compile_seconds = time.perf_counter() - start

    def _rows_of(self, arrays: Sequence[Any]) -> tuple[list[np.ndarray], int]:
        if len(arrays) != len(self.inputs):
            raise FeedError(f"this compiled graph takes {len(self.inputs)} inputs "
                            f"({', '.join('%' + p.name for p in self.inputs)}), got {len(arrays)}")
        out, n = [], None
        for port, a in zip(self.inputs, arrays, strict=True):
            a = np.asarray(a)
            if not np.can_cast(a.dtype, port.dtype, "same_kind"):
                raise FeedError(f"input %{port.name} is {port.dtype}, got a {a.dtype} array")
            want = port.shape
            if (not self.dynamic_batch and a.shape[1:] == want[1:] and a.shape
                    and a.shape[0] != want[0]):
                raise FeedError(f"this graph was compiled for exactly {self.rows} rows "
                                f"({self.lowered.why_fixed}); input %{port.name} has "
                                f"{a.shape[0]}")
            if len(a.shape) != len(want) or any(d is not None and d != s
                                                for d, s in zip(want, a.shape, strict=True)):
                raise FeedError(f"input %{port.name} takes shape "
                                f"{tuple('n' if d is None else d for d in want)}, got {a.shape}")
            if port.batched:
                if n is not None and a.shape[0] != n:
                    raise FeedError(f"input %{port.name} has {a.shape[0]} rows, an earlier "
                                    f"input {n}: every input has the same batch")
                n = a.shape[0]
            out.append(np.ascontiguousarray(a, port.dtype))
        return out, self.rows if n is None else n

    def _as_is(self, arrays: tuple) -> int | None:
        """The row count if every array can be handed to C as it is (the right dtype, shape
        and layout), else None (then ``_rows_of`` converts, or says what is wrong)."""
        if not self.dynamic_batch or len(arrays) != len(self._ready):
            return None
        n = None
        for a, (dtype, ndim, tail) in zip(arrays, self._ready, strict=True):
            if (type(a) is not np.ndarray or a.dtype != dtype or a.ndim != ndim
                    or tail is None or a.shape[1:] != tail or not a.flags.c_contiguous
                    or (n is not None and a.shape[0] != n)):
                return None
            n = a.shape[0]
        return n

    def __call__(self, *arrays: Any) -> np.ndarray | list[np.ndarray]:
        n = self._as_is(arrays)
        ins = arrays
        if n is None:
            ins, n = self._rows_of(arrays)
        outs = [np.empty(tuple(n if d is None else d for d in p.shape), p.dtype)
                for p in self.outputs]
        for i, a in enumerate(ins):
            self._in_ptrs[i] = _address(a)
        for i, a in enumerate(outs):
            self._out_ptrs[i] = _address(a)
        rc = self._lib.mg_forward(n, self._in_ptrs, self._out_ptrs, *self._fixed)
        if rc != 0:
            raise FeedError(f"the compiled function refused {n} rows (it was compiled for "
                            f"{self.rows})")
        return outs[0] if len(outs) == 1 else outs

    # --- the standalone program -------------------------------------------------------------

    def write_inputs(self, path: str | Path, *arrays: Any) -> None:
        """Write ``arrays`` as the program's input file: int64 rows, then each input's bytes."""
        ins, n = self._rows_of(arrays)
        with open(path, "wb") as f:
            f.write(np.int64(n).tobytes())
            for a in ins:
                f.write(a.tobytes())

    def read_outputs(self, path: str | Path, n: int) -> np.ndarray | list[np.ndarray]:
        """The outputs the program wrote to ``path`` for ``n`` rows."""
        data, at, outs = Path(path).read_bytes(), 0, []
        for p in self.outputs:
            shape = tuple(n if d is None else d for d in p.shape)
            size = math.prod(shape) * p.dtype.itemsize
            outs.append(np.frombuffer(data[at:at + size], p.dtype).reshape(shape).copy())
            at += size
        if at != len(data):
            raise CompileError(f"{path} holds {len(data)} bytes, the outputs of {n} rows take {at}")
        return outs[0] if len(outs) == 1 else outs

    def run_executable(self, *arrays: Any, timeout: float = 60) -> np.ndarray | list[np.ndarray]:
        """Run the standalone program on ``arrays`` in a fresh process (files in ``folder``)."""
        if self.executable is None:
            raise CompileError("this graph was compiled with executable=False")
        _, n = self._rows_of(arrays)
        inputs, outputs = self.folder / "inputs.bin", self.folder / "outputs.bin"
        self.write_inputs(inputs, *arrays)
        result = subprocess.run([str(self.executable), str(inputs), str(outputs)],
                                capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise CompileError(f"{self.executable.name} exited with {result.returncode}: "
                               f"{result.stderr.strip()}")
        return self.read_outputs(outputs, n)

    def __repr__(self) -> str:
        batch = f"any rows, {self.rows} at a time" if self.dynamic_batch else f"{self.rows} rows"
        return (f"<CompiledC {comment(self.library.name)}: {len(self.inputs)} inputs, "
                f"{len(self.outputs)} outputs, {batch}, arena {self.arena_bytes} bytes>")


__all__ = ["compile_c", "lower", "CompiledC", "CompileError", "find_compiler"]
