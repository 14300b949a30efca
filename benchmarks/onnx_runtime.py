"""The digits CNN's inference batch: ONNX Runtime against minigraph's codegen and interpreter.

    python benchmarks/onnx_runtime.py                # about 30 s on 2 CPU cores
    python benchmarks/onnx_runtime.py --threads 0    # the libraries' own thread counts

The CNN of ``course_utils.models`` (two conv layers, max-pools, a linear layer), trained in
minigraph for ``--train-steps`` SGD steps (``--lr``), traced as an ``mg.function`` capturing its
weights and written with ``mg.onnx.export``. The same graph then runs four ways on the 450
held-out digits (one call, float32):

- ``ONNX Runtime``: the exported file in an ``InferenceSession`` (its graph optimizations on,
  its own kernels);
- ``minigraph codegen``: the graph as one generated Python function over numpy;
- ``minigraph interpreter``: the graph in an ``mg.Session`` (pruned, optimized, node by node);
- ``minigraph eager``: the Python function on ``mg.tensor``s, no graph.

Each output is checked against minigraph eager (to 1e-5) before anything is timed; then all four
are timed side by side in interleaved rounds (``course_utils.bench``: medians, and each ratio to
minigraph codegen with the 95% interval of its median). One thread per library by default: a
server runs one model per core, and one thread is steady on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
from threadpoolctl import threadpool_limits

import course_utils.minigraph as mg
from course_utils import bench, data, models


def main(description: str = __doc__, run: Callable[[argparse.Namespace], None] | None = None,
         ) -> None:
    """Parse the options both inference benchmarks take (this one and ``compile_c.py``), then
    ``run(args)`` with the thread limit in force."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--max-time", type=float, default=10.0,
                        help="seconds of sampling at most, until every verdict is decided")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads per library (0: the libraries' defaults)")
    parser.add_argument("--train-steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.3)
    args = parser.parse_args()
    limits = threadpool_limits(args.threads) if args.threads else contextlib.nullcontext()
    with limits:
        (run or globals()["run"])(args)


def trained_cnn(train_steps: int, lr: float) -> tuple[data.Digits, dict, mg.Function]:
    """The digits, the CNN's parameters after ``train_steps`` SGD steps in minigraph (as
    tensors), and its forward pass as an ``mg.function`` that captures them."""
    digits = data.load_digits()
    trainer, _ = models.train("minigraph codegen", digits, steps=train_steps, lr=lr)
    params = {k: mg.tensor(v) for k, v in trainer.params().items()}
    return digits, params, mg.function(lambda x: models.minigraph_logits(x, params))


def ort_session(fn: mg.Function, example: np.ndarray, threads: int) -> ort.InferenceSession:
    """``fn`` exported with ``mg.onnx.export`` (traced on ``example``, batch left free) and
    loaded in ONNX Runtime with ``threads`` threads (0: its default)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        mg.onnx.export(fn, path, (example,))
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def run(args: argparse.Namespace) -> None:
    digits, params, cnn = trained_cnn(args.train_steps, args.lr)
    x = digits.X_test
    session = ort_session(cnn, x[:1], args.threads)
    graph = cnn.get_graph(mg.tensor(x))
    compiled = mg.codegen(graph)
    with mg.Graph().as_default() as static:
        images = mg.placeholder((None, 1, 8, 8), name="x")
        logits = models.minigraph_logits(images, {k: mg.Variable(v.numpy(), name=k)
                                                  for k, v in params.items()})
        init = mg.global_variables_initializer()
    sess = mg.Session(static)
    sess.run(init)
    x_tensor = mg.tensor(x)

    def eager() -> np.ndarray:
        with mg.no_grad():
            return models.minigraph_logits(x_tensor, params).numpy()

    fns = {
        "minigraph codegen": lambda: compiled(x),
        "ONNX Runtime": lambda: session.run(None, {"x": x})[0],
        "minigraph interpreter": lambda: sess.run(logits, {images: x}),
        "minigraph eager": eager,
    }
    want = eager()
    for name, fn in fns.items():
        np.testing.assert_allclose(fn(), want, rtol=1e-5, atol=1e-5, err_msg=name)
    accuracy = models.accuracy(want, digits.y_test)
    print(f"digits CNN after {args.train_steps} SGD steps (lr {args.lr}) in minigraph: held-out "
          f"accuracy "
          f"{accuracy:.3f}; ONNX Runtime's predictions equal minigraph's: "
          f"{np.array_equal(np.argmax(fns['ONNX Runtime'](), 1), np.argmax(want, 1))}")
    print(f"inference on all {len(x)} held-out digits in one call, float32, threads per "
          f"library: {args.threads or 'library defaults'}\n")
    clock = time.process_time if args.threads == 1 else time.perf_counter
    result = bench.compare(fns, baseline="minigraph codegen", repeats=args.repeats,
                           max_time_s=args.max_time, clock=clock, progress=False)
    print(result)
    print()
    for name in ("ONNX Runtime", "minigraph interpreter", "minigraph eager"):
        ratio = result.ratios[name]
        print(f"{name}: {ratio.median:.3g}x minigraph codegen's time (95% interval of the "
              f"median {ratio.low:.3g}-{ratio.high:.3g}): {result.verdict(name).words}")
    speedup = 1 / result.ratios["ONNX Runtime"].median
    print(f"\nONNX Runtime runs the batch {speedup:.1f} times as fast as minigraph codegen "
          f"({bench.format_time(result.timings['ONNX Runtime'].median)} against "
          f"{bench.format_time(result.timings['minigraph codegen'].median)}).")


if __name__ == "__main__":
    main()
