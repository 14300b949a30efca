"""Eager against graph in every framework: the sweep lesson 10 plots and the README quotes.

    python benchmarks/frameworks.py --quick          # a few sizes, under 3 minutes on 2 CPU cores
    python benchmarks/frameworks.py                  # the full sweep, under 10 minutes
    python benchmarks/frameworks.py --only tiny,mlp  # some workloads

Four workloads, each at a few problem sizes:

    tiny    99 elementwise ops (33 times tanh(1.5 * x + 0.1)) on a short vector: pure overhead
    mlp     one training step of the course's spiral MLP: forward, backward, SGD update
    matmul  one n x n float32 matrix product: all the time in one kernel
    cnn     a ResNet-style stack of conv-bn-relu blocks with skips, 8 images of 32 x 32, inference

and every mode available here: PyTorch eager, TorchScript (``torch.jit.trace``), ``torch.compile``;
TensorFlow eager, ``tf.function``, ``tf.function(jit_compile=True)`` (XLA); minigraph eager,
Session and codegen (where ``course_utils.minigraph`` has them). PyTorch also runs on the GPU when
there is one; TensorFlow uses the device it picks itself.

Before a mode is timed, its first two results are checked against a numpy reference (for the MLP,
the losses of two training steps, so the backward pass and the update are checked too): a fast
wrong answer is not a result. Its "first call" is the time from the plain Python function to the
first result: building, tracing, compiling and one run. Prints a table per workload and size and
writes ``frameworks.json`` (every sample) and ``frameworks.png`` (time vs size, graph/eager ratio).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

if __name__ == "__main__":  # only when run as a script, and before numpy, torch and TF load
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up log
    # Three thread pools share this process and a few cores: OpenMP's (PyTorch, inductor's
    # kernels), TensorFlow's, and numpy's OpenBLAS (minigraph). Idle OpenMP and OpenBLAS threads
    # spin for a while before they sleep, taking the cores from whichever framework is timed
    # next. Sleeping at once costs microseconds per parallel op and keeps the rounds fair.
    # (On a machine shared with other jobs, multi-threaded timings stay noisy: try --threads 1.)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # spin 2**4 cycles, the least allowed
    # A fresh inductor cache, so torch.compile's first call is the cold compile a learner sees,
    # not a hit in the on-disk cache that an earlier run of this script left behind.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-bench-"))

import numpy as np  # noqa: E402

from course_utils import bench, devices  # noqa: E402
from course_utils.data import MLP_SIZES, init_mlp, one_hot, spiral  # noqa: E402

LR = 0.1  # SGD step size of the MLP workload
CHAIN = 33  # tanh(1.5 * x + 0.1) repeated: 3 elementwise ops each, 99 in all


class NotAvailable(Exception):
    """A mode that this machine, or this workload, does not have."""


# ----------------------------------------------------------------------------- numpy references


def chain_np(x: np.ndarray) -> np.ndarray:
    for _ in range(CHAIN):
        x = np.tanh(x * 1.5 + 0.1)
    return x


def mlp_losses_np(params, X: np.ndarray, Y: np.ndarray, steps: int = 2) -> list[float]:
    """Losses of ``steps`` SGD steps of the MLP, by hand-written backprop in float64."""
    params = [(W.astype(np.float64), b.astype(np.float64)) for W, b in params]
    losses = []
    for _ in range(steps):
        hs = [X]  # hs[i] is the input of layer i
        for W, b in params[:-1]:
            hs.append(np.maximum(hs[-1] @ W + b, 0.0))
        logits = hs[-1] @ params[-1][0] + params[-1][1]
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        losses.append(float(-np.mean(np.log((p * Y).sum(axis=1)))))
        g = (p - Y) / len(X)  # d loss / d logits
        grads = []
        for i in reversed(range(len(params))):
            grads.append((hs[i].T @ g, g.sum(axis=0)))
            g = (g @ params[i][0].T) * (hs[i] > 0)  # through layer i, then layer i-1's relu
        grads.reverse()
        params = [(W - LR * gW, b - LR * gb)
                  for (W, b), (gW, gb) in zip(params, grads, strict=True)]
    return losses


def conv_np(x: np.ndarray, w: np.ndarray, stride: int) -> np.ndarray:
    """NHWC convolution with HWIO weights and symmetric 'same' padding, as the frameworks below."""
    pad = w.shape[0] // 2
    x = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[:2], axis=(1, 2))
    windows = windows[:, ::stride, ::stride]  # (n, h, w, c, kh, kw)
    return np.tensordot(windows, w, axes=([3, 4, 5], [2, 0, 1]))


def bn_np(x: np.ndarray, bn: dict) -> np.ndarray:
    return (x - bn["mean"]) / np.sqrt(bn["var"] + 1e-5) * bn["gamma"] + bn["beta"]


def cnn_np(x: np.ndarray, net: dict) -> np.ndarray:
    h = np.maximum(bn_np(conv_np(x, net["stem"], 1), net["stem_bn"]), 0)
    for blk in net["blocks"]:
        out = np.maximum(bn_np(conv_np(h, blk["w1"], blk["stride"]), blk["bn1"]), 0)
        out = bn_np(conv_np(out, blk["w2"], 1), blk["bn2"])
        skip = bn_np(conv_np(h, blk["proj"], blk["stride"]), blk["proj_bn"]) if "proj" in blk else h
        h = np.maximum(out + skip, 0)
    return h.mean(axis=(1, 2)) @ net["fc_w"] + net["fc_b"]


def cnn_params(width: int, seed: int = 0) -> dict:
    """Weights of the ResNet-style stack: a stem, two blocks at ``width``, two at ``2 * width``."""
    rng = np.random.default_rng(seed)

    def conv(k, cin, cout):  # HWIO, He-normal
        return rng.normal(0, np.sqrt(2 / (k * k * cin)), (k, k, cin, cout)).astype(np.float32)

    def bn(c):
        stats = {"gamma": 1 + 0.1 * rng.normal(size=c), "beta": 0.1 * rng.normal(size=c),
                 "mean": 0.1 * rng.normal(size=c), "var": 1 + 0.1 * rng.random(c)}
        return {k: v.astype(np.float32) for k, v in stats.items()}

    blocks = []
    for cin, cout, stride in [(width, width, 1), (width, width, 1),
                              (width, 2 * width, 2), (2 * width, 2 * width, 1)]:
        blk = {"stride": stride, "w1": conv(3, cin, cout), "bn1": bn(cout),
               "w2": conv(3, cout, cout), "bn2": bn(cout)}
        if stride != 1 or cin != cout:  # the skip needs a 1x1 projection to the new shape
            blk.update(proj=conv(1, cin, cout), proj_bn=bn(cout))
        blocks.append(blk)
    return {"stem": conv(3, 3, width), "stem_bn": bn(width), "blocks": blocks,
            "fc_w": conv(1, 2 * width, 10)[0, 0], "fc_b": np.zeros(10, np.float32)}


# ----------------------------------------------------------------------------- workloads


@dataclass
class Workload:
    """What to compute at a size, its numpy reference, and how each framework computes it."""

    name: str
    title: str
    size_label: str
    sizes: tuple[int, ...]
    quick_sizes: tuple[int, ...]
    data: Callable[[int], dict]
    reference: Callable[[dict], list]  # the expected results of the first two calls
    torch: Callable | None = None  # (data, device, capture) -> zero-argument function
    tf: Callable | None = None  # (data, capture) -> zero-argument function
    minigraph: Callable | None = None  # (data, mode) -> zero-argument function


def tiny_data(n: int) -> dict:
    return {"x": np.random.default_rng(0).standard_normal(n).astype(np.float32)}


def mlp_data(batch: int) -> dict:
    X, y = spiral(n_per_class=batch // 2, seed=0)
    return {"X": X.astype(np.float32), "y": y, "Y": one_hot(y, 2).astype(np.float32),
            "params": init_mlp(MLP_SIZES, seed=0, dtype=np.float32)}


def matmul_data(n: int) -> dict:
    rng = np.random.default_rng(0)
    return {"a": rng.standard_normal((n, n), dtype=np.float32),
            "b": rng.standard_normal((n, n), dtype=np.float32)}


def cnn_data(width: int) -> dict:
    x = np.random.default_rng(1).standard_normal((8, 32, 32, 3)).astype(np.float32)
    return {"x": x, "net": cnn_params(width)}


def twice(ref: Callable[[dict], np.ndarray]) -> Callable[[dict], list]:
    """A pure function returns the same result on its first and its second call."""
    return lambda d: [ref(d)] * 2


# --- PyTorch: `capture(fn, example_args)` turns the pure part into eager, TorchScript or compiled.


def tiny_torch(d, device, capture):
    import torch

    def chain(x):
        for _ in range(CHAIN):
            x = torch.tanh(x * 1.5 + 0.1)
        return x

    x = torch.tensor(d["x"], device=device)
    f = capture(chain, (x,))
    return lambda: f(x)


def mlp_torch(d, device, capture):
    """The loss is captured; autograd runs its backward, and the update stays in Python.

    TorchScript and torch.compile capture a function's forward computation (torch.compile's
    AOTAutograd also compiles the backward); a whole training step with ``.backward()`` and the
    update does not fit in one TorchScript graph, so this is how they are used for training.
    """
    import torch
    import torch.nn.functional as F

    def loss_fn(X, y, *params):
        h = X
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            h = torch.relu(h) if i + 2 < len(params) else h
        return F.cross_entropy(h, y)

    X, y = torch.tensor(d["X"], device=device), torch.tensor(d["y"], device=device)
    params = [torch.tensor(a, device=device, requires_grad=True) for p in d["params"] for a in p]
    loss_fn = capture(loss_fn, (X, y, *params))

    def step():
        loss = loss_fn(X, y, *params)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p.sub_(LR * g)
        return loss.detach()

    return step


def matmul_torch(d, device, capture):
    import torch

    a, b = (torch.tensor(d[k], device=device) for k in "ab")
    f = capture(lambda a, b: a @ b, (a, b))
    return lambda: f(a, b)


def cnn_torch(d, device, capture):
    import torch
    import torch.nn.functional as F

    def t(a, conv=False):  # convolution weights: HWIO (TensorFlow, numpy) -> OIHW (PyTorch)
        return torch.tensor(a.transpose(3, 2, 0, 1) if conv else a, device=device)

    def bn(x, p):
        return F.batch_norm(x, p["mean"], p["var"], p["gamma"], p["beta"], False, 0.0, 1e-5)

    def tensors(p):
        return {k: t(v, conv=k in ("w1", "w2", "proj", "stem")) if isinstance(v, np.ndarray)
                else tensors(v) if isinstance(v, dict) else v for k, v in p.items()}

    net = tensors(d["net"])
    blocks = [tensors(b) for b in d["net"]["blocks"]]

    def conv(x, w, stride):
        return F.conv2d(x, w, stride=stride, padding=w.shape[-1] // 2)

    def forward(x):
        h = torch.relu(bn(conv(x, net["stem"], 1), net["stem_bn"]))
        for blk in blocks:
            out = torch.relu(bn(conv(h, blk["w1"], blk["stride"]), blk["bn1"]))
            out = bn(conv(out, blk["w2"], 1), blk["bn2"])
            skip = bn(conv(h, blk["proj"], blk["stride"]), blk["proj_bn"]) if "proj" in blk else h
            h = torch.relu(out + skip)
        return h.mean(dim=(2, 3)) @ net["fc_w"] + net["fc_b"]

    x = torch.tensor(d["x"].transpose(0, 3, 1, 2).copy(), device=device)  # NHWC -> NCHW
    f = capture(forward, (x,))
    return lambda: f(x)


# --- TensorFlow: `capture(fn)` is the identity, tf.function, or tf.function(jit_compile=True).


def tiny_tf(d, capture):
    import tensorflow as tf

    def chain(x):
        for _ in range(CHAIN):
            x = tf.tanh(x * 1.5 + 0.1)
        return x

    x = tf.constant(d["x"])
    f = capture(chain)
    return lambda: f(x)


def mlp_tf(d, capture):
    """The whole step, tape, gradients and ``assign_sub`` included, is one tf.function."""
    import tensorflow as tf

    X, y = tf.constant(d["X"]), tf.constant(d["y"])
    params = [tf.Variable(a) for p in d["params"] for a in p]

    def step():
        with tf.GradientTape() as tape:
            h = X
            for i in range(0, len(params), 2):
                h = h @ params[i] + params[i + 1]
                h = tf.nn.relu(h) if i + 2 < len(params) else h
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        for p, g in zip(params, tape.gradient(loss, params), strict=True):
            p.assign_sub(LR * g)
        return loss

    return capture(step)


def matmul_tf(d, capture):
    import tensorflow as tf

    a, b = tf.constant(d["a"]), tf.constant(d["b"])
    f = capture(lambda a, b: a @ b)
    return lambda: f(a, b)


def cnn_tf(d, capture):
    import tensorflow as tf

    def constants(p):  # convert once: TF eager would convert numpy arrays again on every call
        return {k: tf.constant(v) if isinstance(v, np.ndarray) else constants(v)
                if isinstance(v, dict) else v for k, v in p.items()}

    net = constants(d["net"])
    blocks = [constants(b) for b in d["net"]["blocks"]]

    def bn(x, p):
        return tf.nn.batch_normalization(x, p["mean"], p["var"], p["beta"], p["gamma"], 1e-5)

    def conv(x, w, stride):
        # Explicit symmetric padding: TensorFlow's "SAME" pads stride-2 inputs on one side only,
        # which would compute something different from PyTorch's padding=1.
        pad = int(w.shape[0]) // 2
        return tf.nn.conv2d(x, w, stride, padding=[[0, 0], [pad, pad], [pad, pad], [0, 0]])

    def forward(x):
        h = tf.nn.relu(bn(conv(x, net["stem"], 1), net["stem_bn"]))
        for blk in blocks:
            out = tf.nn.relu(bn(conv(h, blk["w1"], blk["stride"]), blk["bn1"]))
            out = bn(conv(out, blk["w2"], 1), blk["bn2"])
            skip = bn(conv(h, blk["proj"], blk["stride"]), blk["proj_bn"]) if "proj" in blk else h
            h = tf.nn.relu(out + skip)
        return tf.reduce_mean(h, axis=(1, 2)) @ net["fc_w"] + net["fc_b"]

    x = tf.constant(d["x"])
    f = capture(forward)
    return lambda: f(x)


# --- minigraph: "eager" runs numpy op by op; "session" and "codegen" build a graph once.


def _mg(*needs: str):
    """The minigraph module, if it has every name in ``needs`` (it is being written in stages)."""
    try:
        import course_utils.minigraph as mg
    except ImportError as err:
        raise NotAvailable("course_utils.minigraph is not written yet") from err
    missing = [name for name in needs if not hasattr(mg, name)]
    if missing:
        raise NotAvailable(f"minigraph has no {', '.join(missing)} yet")
    return mg


_MG_GRAPH = ("Graph", "placeholder", "Session", "global_variables_initializer")


def _mg_session(mg, graph, mode: str):
    """A Session for ``mode``: "session" interprets the graph, "codegen" runs generated Python."""
    if mode == "session":
        return mg.Session(graph)
    try:
        return mg.Session(graph, executor="codegen")
    except Exception as err:  # the codegen executor comes with the passes issue
        raise NotAvailable(f"minigraph has no codegen executor yet ({err})") from err


def _mg_run(mg, mode: str, build: Callable, feed_values: dict):
    """Run the graph ``build()`` makes: it returns (placeholders, output, ops to run too)."""
    graph = mg.Graph()
    with graph.as_default():
        placeholders, output, ops = build()
        init = mg.global_variables_initializer()
    sess = _mg_session(mg, graph, mode)
    sess.run(init)
    feed = {placeholders[k]: v for k, v in feed_values.items()}
    return lambda: sess.run([output, *ops], feed_dict=feed)[0]


def tiny_mg(d, mode):
    mg = _mg("tanh", *(("tensor",) if mode == "eager" else _MG_GRAPH))

    def chain(x):
        for _ in range(CHAIN):
            x = mg.tanh(x * 1.5 + 0.1)
        return x

    if mode == "eager":
        x = mg.tensor(d["x"])
        return lambda: chain(x)

    def build():
        x = mg.placeholder(d["x"].shape, name="x")
        return {"x": x}, chain(x), []

    return _mg_run(mg, mode, build, {"x": d["x"]})


def _mg_loss(mg, X, Y, params):
    h = X
    for i in range(0, len(params), 2):
        h = mg.matmul(h, params[i]) + params[i + 1]
        h = mg.relu(h) if i + 2 < len(params) else h
    return -mg.mean(mg.sum(Y * mg.log_softmax(h), axis=1))


def mlp_mg(d, mode):
    needs = ("tensor",) if mode == "eager" else (
        *_MG_GRAPH, "Variable", "gradients", "group", "assign_sub")
    mg = _mg("matmul", "relu", "mean", "sum", "log_softmax", *needs)
    arrays = [a.copy() for p in d["params"] for a in p]
    if mode == "eager":
        X, Y = mg.tensor(d["X"]), mg.tensor(d["Y"])

        def step():
            params = [mg.tensor(a, requires_grad=True) for a in arrays]
            loss = _mg_loss(mg, X, Y, params)
            loss.backward()
            for a, p in zip(arrays, params, strict=True):
                a -= LR * _numpy(p.grad).astype(a.dtype)
            return loss

        return step

    def build():
        X = mg.placeholder((None, 2), name="X")
        Y = mg.placeholder((None, 2), name="Y")
        params = [mg.Variable(a, name=f"p{i}") for i, a in enumerate(arrays)]
        loss = _mg_loss(mg, X, Y, params)
        grads = mg.gradients(loss, params)
        train = mg.group(*[mg.assign_sub(p, g * LR) for p, g in zip(params, grads, strict=True)])
        return {"X": X, "Y": Y}, loss, [train]

    return _mg_run(mg, mode, build, {"X": d["X"], "Y": d["Y"]})


def matmul_mg(d, mode):
    mg = _mg("matmul", *(("tensor",) if mode == "eager" else _MG_GRAPH))
    if mode == "eager":
        a, b = mg.tensor(d["a"]), mg.tensor(d["b"])
        return lambda: mg.matmul(a, b)

    def build():
        a = mg.placeholder(d["a"].shape, name="a")
        b = mg.placeholder(d["b"].shape, name="b")
        return {"a": a, "b": b}, mg.matmul(a, b), []

    return _mg_run(mg, mode, build, {"a": d["a"], "b": d["b"]})


def cnn_mg(d, mode):
    mg = _mg()
    if not hasattr(mg, "conv2d"):
        raise NotAvailable("minigraph has no conv2d op")
    raise NotAvailable("the CNN is not written for minigraph")


WORKLOADS = [
    Workload("tiny", "99 elementwise ops on a vector", "vector length",
             (16, 1024, 65536), (16, 4096), tiny_data, twice(lambda d: chain_np(d["x"])),
             tiny_torch, tiny_tf, tiny_mg),
    Workload("mlp", "MLP training step (spiral, 2-32-32-2)", "batch size",
             (200, 2000, 20000), (200,), mlp_data,
             lambda d: mlp_losses_np(d["params"], d["X"], d["Y"]),
             mlp_torch, mlp_tf, mlp_mg),
    Workload("matmul", "n x n matrix product", "n",
             (256, 512, 1024, 2048), (512, 1024), matmul_data,
             twice(lambda d: d["a"].astype(np.float64) @ d["b"]), matmul_torch, matmul_tf,
             matmul_mg),
    Workload("cnn", "ResNet-style CNN, 8 x 32 x 32 images", "width (channels)",
             (8, 16, 32), (16,), cnn_data, twice(lambda d: cnn_np(d["x"], d["net"])),
             cnn_torch, cnn_tf, cnn_mg),
]


# ----------------------------------------------------------------------------- modes


@dataclass
class Mode:
    name: str
    eager: str | None  # the eager mode this graph mode is compared with (None: it is eager)
    build: Callable[[Workload, dict], Callable]  # raises NotAvailable


def torch_modes(backend: str) -> list[Mode]:
    import torch

    def trace(fn, example):
        with warnings.catch_warnings():
            # TorchScript is deprecated and says so on every trace (lesson 08 covers that); we
            # time it on purpose, since the article's claims are about it.
            warnings.filterwarnings("ignore", r"`torch\.jit\.trace` is deprecated",
                                    DeprecationWarning)
            return torch.jit.trace(fn, example)

    def compile_(fn, example):
        # dynamic=False: one specialised graph per size, as the other graph modes get.
        return torch.compile(fn, backend=backend, dynamic=False)

    captures = {"torch eager": lambda fn, example: fn, "torchscript": trace,
                "torch.compile": compile_}
    targets = [torch.device("cpu")]
    if devices.torch_device().type != "cpu":
        targets.append(devices.torch_device())
    modes = []
    for device in targets:
        tag = "" if device.type == "cpu" else f" [{device.type}]"
        for name, capture in captures.items():
            def build(w, d, device=device, capture=capture):
                return w.torch(d, device, capture)

            eager = None if name == "torch eager" else f"torch eager{tag}"
            modes.append(Mode(name + tag, eager, build))
    return modes


def tf_modes() -> list[Mode]:
    import tensorflow as tf

    tag = " [GPU]" if tf.config.list_physical_devices("GPU") else ""
    captures = {"tf eager": lambda fn: fn, "tf.function": tf.function,
                "tf.function+xla": lambda fn: tf.function(fn, jit_compile=True)}
    return [Mode(name + tag, None if name == "tf eager" else f"tf eager{tag}",
                 lambda w, d, c=capture: w.tf(d, c))
            for name, capture in captures.items()]


def mg_modes() -> list[Mode]:
    return [Mode(f"mg {mode}", None if mode == "eager" else "mg eager",
                 lambda w, d, m=mode: w.minigraph(d, m))
            for mode in ("eager", "session", "codegen")]


# ----------------------------------------------------------------------------- running


def _numpy(value) -> np.ndarray:
    """A framework's result as a float64 numpy array (torch, TensorFlow, minigraph, numpy)."""
    if type(value).__module__.startswith("torch"):
        value = value.detach().cpu()
    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.asarray(value, dtype=np.float64)


def check(results: list, expected: list, rtol: float) -> str | None:
    """None if every result matches its reference, else what differs."""
    for got, want in zip(results, expected, strict=True):
        got, want = _numpy(got), np.asarray(want, dtype=np.float64)
        if got.shape != want.shape:
            return f"shape {got.shape}, expected {want.shape}"
        err = float(np.max(np.abs(got - want)))
        if err > rtol * (1.0 + float(np.max(np.abs(want)))):
            return f"differs from the numpy reference by up to {err:.2g}"
    return None


@dataclass
class SizeResult:
    comparison: bench.Comparison | None
    first_call: dict[str, float] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # mode -> why it was not timed


def run_size(w: Workload, size: int, modes: list[Mode], opts) -> SizeResult:
    data = w.data(size)
    expected = w.reference(data)
    if any(m.name.startswith("torch.compile") for m in modes):
        import torch

        torch._dynamo.reset()  # every size compiles from scratch, as the first size does
    fns, result = {}, SizeResult(None)
    for mode in modes:
        try:
            start = time.perf_counter()
            fn = mode.build(w, data)
            first = fn()
            bench.sync_result(first)
            result.first_call[mode.name] = time.perf_counter() - start
            # TF32 matrix units on GPUs round to about 1e-3; CPUs compute in full float32.
            gpu = "[" in mode.name
            problem = check([first, fn()], expected, rtol=3e-2 if gpu else 2e-3)
        except NotAvailable as err:
            problem = f"not available: {err}"
        except Exception as err:  # report and go on: one broken mode must not stop the sweep
            problem = f"failed: {type(err).__name__}: {str(err).splitlines()[0][:200]}"
        if problem:
            result.problems[mode.name] = problem
        else:
            fns[mode.name] = fn
    if fns:
        result.comparison = bench.compare(
            fns, warmup=opts.warmup, repeats=opts.repeats, progress=opts.progress,
            desc=f"{w.name} {size}")
    return result


def report_size(w: Workload, size: int, res: SizeResult, eager_of: dict[str, str]) -> list[str]:
    """Rows of the printed table: time, graph/eager ratio, first call, break-even."""
    lines = [f"\n{w.name}: {w.title}, {w.size_label} = {size}"]
    lines.append(f"  {'mode':<22}{'median ± IQR/2':>22}  {'vs eager [IQR]':>26}"
                 f"{'first call':>12}{'break-even':>13}")
    c = res.comparison
    for name, timing in (c.timings.items() if c else []):
        base = eager_of.get(name)
        ratio = c.ratios_to(base)[name] if base in c.timings else None
        calls = (bench.break_even(res.first_call[name], timing.median, c.timings[base].median)
                 if ratio else None)
        lines.append(
            f"  {name:<22}{bench.format_time(timing.median, timing.iqr / 2):>22}  "
            f"{str(ratio) if ratio else '':>26}{bench.format_time(res.first_call[name]):>12}"
            f"{_calls(calls) if ratio else '':>13}")
    for name, problem in res.problems.items():
        lines.append(f"  {name:<22}{problem}")
    return lines


def _calls(n: int | None) -> str:
    return "never" if n is None else "1 call" if n == 1 else f"{n} calls"


def save_figure(results: dict, eager_of: dict[str, str], path: Path) -> None:
    """Time against size (top) and graph time / its own eager time (bottom), per workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(4 * len(results) + 1.5, 7),
                             layout="constrained", squeeze=False)
    legend = {}
    names = dict.fromkeys(n for _, sweep in results.values() for n in sweep.names)
    colors = {name: f"C{i % 10}" for i, name in enumerate(names)}  # one colour per mode
    for col, (w, sweep) in enumerate(results.values()):
        if not sweep.comparisons:
            continue
        top = sweep.plot(ax=axes[0, col], xlabel=w.size_label, colors=colors)
        top.set_title(w.title, fontsize="medium")
        pairs = {n: eager_of[n] for n in sweep.names if n in eager_of}
        bottom = sweep.plot_ratio(pairs, ax=axes[1, col], xlabel=w.size_label, colors=colors)
        bottom.set_ylabel("graph time / its eager time")
        # A mode has one colour in every panel, so one legend for the figure is enough.
        for ax in (top, bottom):
            legend.update(zip(*reversed(ax.get_legend_handles_labels()), strict=True))
            ax.get_legend().remove()
    modes = [name for name in legend if " / " not in name]
    fig.legend([legend[n] for n in modes], modes, loc="outside right upper", fontsize="small")
    fig.savefig(path, dpi=90)
    plt.close(fig)


def set_threads(n: int) -> None:
    """Give each framework ``n`` threads: useful on a shared machine, where fewer is steadier."""
    import tensorflow as tf
    import torch

    torch.set_num_threads(n)
    tf.config.threading.set_intra_op_parallelism_threads(n)
    tf.config.threading.set_inter_op_parallelism_threads(n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--only", default="", help="comma-separated workloads, e.g. tiny,mlp")
    parser.add_argument("--backend", default="inductor",
                        help="torch.compile backend (inductor, aot_eager, ...)")
    parser.add_argument("--threads", type=int, default=0,
                        help="CPU threads for each framework (default: theirs, usually all cores)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction,
                        default=sys.stderr.isatty(), help="progress bars (default: on a terminal)")
    opts = parser.parse_args(argv)
    opts.repeats, opts.warmup = (10, 2) if opts.quick else (20, 3)

    if opts.threads:
        set_threads(opts.threads)
    chosen = [w for w in WORKLOADS if not opts.only or w.name in opts.only.split(",")]
    modes = torch_modes(opts.backend) + tf_modes() + mg_modes()
    eager_of = {m.name: m.eager for m in modes if m.eager}
    env = devices.report().as_dict()
    print(f"torch {env['torch']} ({env['lessons run torch on']}, {env['torch threads']} threads), "
          f"TensorFlow {env['tensorflow']} ({env['TensorFlow GPU']}), {env['usable cpus']} CPUs, "
          f"torch.compile backend {opts.backend!r}, {'quick' if opts.quick else 'full'} run")

    started = time.perf_counter()
    results, extra = {}, {}
    for w in chosen:
        sizes, comparisons = [], []
        extra[w.name] = {"title": w.title, "size_label": w.size_label, "first_call": {},
                         "break_even": {}, "problems": {}}
        for size in w.quick_sizes if opts.quick else w.sizes:
            res = run_size(w, size, modes, opts)
            print("\n".join(report_size(w, size, res, eager_of)), flush=True)
            extra[w.name]["problems"][str(size)] = res.problems
            extra[w.name]["first_call"][str(size)] = res.first_call
            if res.comparison is None:
                continue
            sizes.append(size)
            comparisons.append(res.comparison)
            med = {n: t.median for n, t in res.comparison.timings.items()}
            extra[w.name]["break_even"][str(size)] = {
                n: bench.break_even(res.first_call[n], med[n], med[e])
                for n, e in eager_of.items() if n in med and e in med}
        results[w.name] = (w, bench.Sweep(sizes, comparisons))

    opts.out.mkdir(parents=True, exist_ok=True)
    data = {"kind": "frameworks", "environment": env, "platform": platform.platform(),
            "quick": opts.quick, "backend": opts.backend, "threads": opts.threads or None,
            "repeats": opts.repeats, "eager_of": eager_of,
            "seconds": time.perf_counter() - started,
            "workloads": {name: {**extra[name], "sweep": s.to_dict()}
                          for name, (_, s) in results.items()}}
    (opts.out / "frameworks.json").write_text(json.dumps(data, indent=1, ensure_ascii=False))
    save_figure(results, eager_of, opts.out / "frameworks.png")
    print(f"\nwrote {opts.out / 'frameworks.json'} and {opts.out / 'frameworks.png'} "
          f"in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
