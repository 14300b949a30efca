"""Eager against graph against compiled graph in every framework: lesson 10's sweep, at full length.

    python benchmarks/frameworks.py --quick          # fewer sizes, a minute or two on 2 CPU cores
    python benchmarks/frameworks.py                  # every size of lesson 10, ~10 minutes
    python benchmarks/frameworks.py --only tiny,mlp  # some workloads

Its defaults are lesson 10's: one thread per framework, the same four workloads at the lesson's
sizes (and one larger size where the lesson stops early to stay within its time),
the MLP in float64, verdicts decided from per-round ratios timed on the process's CPU time, each
framework's modes in rounds of their own. It adds what the lesson leaves out to stay within two
minutes: ``torch.compile`` (inductor by default) on every workload and size, repeated first calls
and break-even counts for every graph mode.

Four workloads, each at a few problem sizes:

    tiny    x <- 0.9 * x + 0.1, 33 times: 66 elementwise ops on a vector (overhead, then fusion)
    mlp     one training step of the course's spiral MLP in float64: forward, backward, SGD update
    matmul  one n x n float32 matrix product: all the time in one kernel
    cnn     a ResNet-style stack of conv-bn-relu blocks with skips, 8 images of 32 x 32, inference

and every mode: PyTorch eager, TorchScript (``torch.jit.trace``), ``torch.compile``; TensorFlow
eager, ``tf.function``, ``tf.function(jit_compile=True)`` (XLA); minigraph eager, its graph as
written (``Session(optimize=False)``) and optimized (``Session()``, which fuses). PyTorch also runs
on the GPU when there is one (then every timing uses the wall clock); TensorFlow uses the device it
picks itself.

Before a mode is timed, its first two results are checked against a numpy reference (for the MLP,
the losses of two training steps, so the backward pass and the update are checked too): a fast
wrong answer is not a result. "First call" is the time from the plain Python function to the
first result: building, tracing, compiling and one run; the first one ("cold") in a fresh inductor
cache, then the median of ``--first-calls`` more, built afresh. Prints a table per workload and
size, and writes ``frameworks.json`` (every sample) and ``frameworks.png`` (time vs size, graph /
eager ratio) to ``--out``, by default a directory in the system's temporary directory, never the
repository.
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
    _pre = argparse.ArgumentParser(add_help=False)
    _pre.add_argument("--threads", type=int, default=1)
    if _pre.parse_known_args()[0].threads == 1:
        # One thread, as lesson 10: numpy's BLAS (minigraph) and OpenMP (PyTorch) size their
        # thread pools from these when they load.
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
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
CHAIN = 33  # 0.9 * x + 0.1 repeated: 2 elementwise ops each, 66 in all

#: How every comparison is timed and decided (as lesson 10's TIMING); the clock is chosen in main.
TIMING = {"warmup": 2, "repeats": 6, "max_time_s": 2.0}


class NotAvailable(Exception):
    """A mode that this machine, or this workload, does not have."""


# ----------------------------------------------------------------------------- numpy references


def chain_np(x: np.ndarray) -> np.ndarray:
    for _ in range(CHAIN):
        x = x * 0.9 + 0.1
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


def mlp_data(batch: int, dtype=np.float64) -> dict:
    """The spiral batch and the MLP's initial weights; float64 as in lesson 10."""
    X, y = spiral(n_per_class=batch // 2, seed=0)
    return {"X": X.astype(dtype), "y": y, "Y": one_hot(y, 2).astype(dtype),
            "params": init_mlp(MLP_SIZES, seed=0, dtype=dtype)}


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
            x = x * 0.9 + 0.1
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
            x = x * 0.9 + 0.1
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


def _mg_run(mg, mode: str, build: Callable, feed_values: dict):
    """Run the graph ``build()`` makes (placeholders, output, ops to run too) in a Session:
    "graph" runs the ops as written (``optimize=False``), "fused" the optimized plan."""
    graph = mg.Graph()
    with graph.as_default():
        placeholders, output, ops = build()
        init = mg.global_variables_initializer()
    sess = mg.Session(graph, optimize=mode == "fused")
    sess.run(init)
    feed = {placeholders[k]: v for k, v in feed_values.items()}
    return lambda: sess.run([output, *ops], feed_dict=feed)[0]


def tiny_mg(d, mode):
    mg = _mg(*(("tensor",) if mode == "eager" else _MG_GRAPH))

    def chain(x):
        for _ in range(CHAIN):
            x = x * 0.9 + 0.1
        return x

    if mode == "eager":
        x = mg.tensor(d["x"])
        return lambda: chain(x)

    def build():
        x = mg.placeholder(d["x"].shape, d["x"].dtype, name="x")
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
        X = mg.placeholder((None, 2), d["X"].dtype, name="X")
        Y = mg.placeholder((None, 2), d["Y"].dtype, name="Y")
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
    """The CNN in minigraph: NCHW images, OIHW kernels, batch-norm statistics shaped (C, 1, 1)."""
    mg = _mg("conv2d", *(("tensor",) if mode == "eager" else _MG_GRAPH))

    def nchw(p):
        if isinstance(p, dict):
            return {k: (v.reshape(-1, 1, 1) if k in ("mean", "var", "gamma", "beta") else nchw(v))
                    for k, v in p.items()}
        if isinstance(p, np.ndarray) and p.ndim == 4:
            return np.ascontiguousarray(p.transpose(3, 2, 0, 1))
        return p

    net = nchw(d["net"])
    blocks = [nchw(b) for b in d["net"]["blocks"]]

    def conv(x, w, stride):
        return mg.conv2d(x, w, stride=stride, padding=w.shape[-1] // 2)

    def bn(x, p):
        return (x - p["mean"]) / mg.sqrt(p["var"] + 1e-5) * p["gamma"] + p["beta"]

    def forward(x):
        h = mg.relu(bn(conv(x, net["stem"], 1), net["stem_bn"]))
        for blk in blocks:
            out = mg.relu(bn(conv(h, blk["w1"], blk["stride"]), blk["bn1"]))
            out = bn(conv(out, blk["w2"], 1), blk["bn2"])
            skip = bn(conv(h, blk["proj"], blk["stride"]), blk["proj_bn"]) if "proj" in blk else h
            h = mg.relu(out + skip)
        return mg.matmul(mg.mean(h, axis=(2, 3)), net["fc_w"]) + net["fc_b"]

    x = np.ascontiguousarray(d["x"].transpose(0, 3, 1, 2))
    if mode == "eager":
        xt = mg.tensor(x)
        return lambda: forward(xt)

    def build():
        images = mg.placeholder(x.shape, x.dtype, name="images")
        return {"images": images}, forward(images), []

    return _mg_run(mg, mode, build, {"images": x})


WORKLOADS = [
    Workload("tiny", "66 elementwise ops on a vector", "vector length",
             (16, 1024, 4096, 65536, 2**20), (16, 65536), tiny_data,
             twice(lambda d: chain_np(d["x"].astype(np.float64))), tiny_torch, tiny_tf, tiny_mg),
    Workload("mlp", "MLP training step (spiral, 2-32-32-2, float64)", "batch size",
             (100, 200, 500, 2000, 10000), (200,), mlp_data,
             lambda d: mlp_losses_np(d["params"], d["X"], d["Y"]),
             mlp_torch, mlp_tf, mlp_mg),
    Workload("matmul", "n x n float32 matrix product", "n",
             (64, 256, 1024), (64, 1024), matmul_data,
             twice(lambda d: d["a"].astype(np.float64) @ d["b"]), matmul_torch, matmul_tf,
             matmul_mg),
    Workload("cnn", "ResNet-style CNN, 8 x 32 x 32 images", "width (channels)",
             (4, 8, 16, 32), (16,), cnn_data, twice(lambda d: cnn_np(d["x"], d["net"])),
             cnn_torch, cnn_tf, cnn_mg),
]


# ----------------------------------------------------------------------------- modes


@dataclass
class Mode:
    name: str
    eager: str | None  # the eager mode this graph mode is compared with (None: it is eager)
    group: str  # modes of one group are timed in rounds of their own (a framework on a device)
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
        # dynamic=False: one graph specialised to each size, as the other graph modes get.
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
            modes.append(Mode(name + tag, eager, f"torch{tag}", build))
    return modes


def tf_modes() -> list[Mode]:
    import tensorflow as tf

    tag = " [GPU]" if tf.config.list_physical_devices("GPU") else ""
    captures = {"tf eager": lambda fn: fn, "tf.function": tf.function,
                "tf.function+xla": lambda fn: tf.function(fn, jit_compile=True)}
    return [Mode(name + tag, None if name == "tf eager" else f"tf eager{tag}", "tensorflow",
                 lambda w, d, c=capture: w.tf(d, c))
            for name, capture in captures.items()]


def mg_modes() -> list[Mode]:
    return [Mode(f"mg {mode}", None if mode == "eager" else "mg eager", "minigraph",
                 lambda w, d, m=mode: w.minigraph(d, m))
            for mode in ("eager", "graph", "fused")]


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
    comparisons: dict[str, bench.Comparison] = field(default_factory=dict)  # group -> rounds
    cold: dict[str, float] = field(default_factory=dict)  # mode -> the first first call
    first_calls: dict[str, bench.Timing] = field(default_factory=dict)  # mode -> fresh builds
    problems: dict[str, str] = field(default_factory=dict)  # mode -> why it was not timed

    def comparison_of(self, name: str) -> bench.Comparison:
        return next(c for c in self.comparisons.values() if name in c.timings)


def _first_result(mode: Mode, w: Workload, data: dict):
    """Build ``mode`` from scratch and make its first call: (function, first result)."""
    if mode.name.startswith("torch.compile"):
        import torch

        torch._dynamo.reset()  # compile afresh: the cache of compiled graphs is per process
    fn = mode.build(w, data)
    first = fn()
    bench.sync_result(first)
    return fn, first


def run_size(w: Workload, size: int, modes: list[Mode], opts) -> SizeResult:
    data = w.data(size)
    expected = w.reference(data)
    groups, result = {}, SizeResult()
    for mode in modes:
        try:
            start = time.perf_counter()
            fn, first = _first_result(mode, w, data)
            result.cold[mode.name] = time.perf_counter() - start
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
            groups.setdefault(mode.group, {})[mode.name] = fn
    eager_of = {m.name: m.eager for m in modes if m.eager}
    for group, fns in groups.items():
        pairs = {g: e for g, e in eager_of.items() if g in fns and e in fns}
        result.comparisons[group] = bench.compare(
            fns, pairs=pairs, clock=opts.clock, progress=opts.progress,
            desc=f"{w.name} {size} {group}", **{**TIMING, "repeats": opts.repeats})
    if opts.first_calls:
        for mode in modes:
            if mode.eager and mode.name in result.cold and mode.name not in result.problems:
                result.first_calls[mode.name] = bench.first_calls(
                    lambda m=mode: _first_result(m, w, data)[0], repeats=opts.first_calls,
                    name=mode.name, sync=None)
    return result


def report_size(w: Workload, size: int, res: SizeResult) -> list[str]:
    """Rows of the printed table: time, ratio to eager and verdict, first calls, break-even."""
    lines = [f"\n{w.name}: {w.title}, {w.size_label} = {size}"]
    lines.append(f"  {'mode':<20}{'median ± IQR/2':>22}{'vs eager [95%]':>26}  {'verdict':<10}"
                 f"{'cold first':>11}{'first call':>11}  break-even")
    for c in res.comparisons.values():
        verdicts = c.verdicts()
        for name, timing in c.timings.items():
            v = verdicts.get(name)
            ratio = (f"{v.ratio.estimate:.3g}× [{v.ratio.low:.3g}, {v.ratio.high:.3g}]"
                     if v else "")
            firsts = res.first_calls.get(name)
            first = bench.format_time(firsts.median) if firsts else ""
            if v is None:
                even = ""
            else:
                be = bench.break_even_of(firsts or res.cold[name], c, name)
                even = (f"{be.calls:,} ({be.low:,}-{be.high:,})" if be.outcome == "pays back"
                        else be.outcome)
            lines.append(
                f"  {name:<20}{bench.format_time(timing.median, timing.iqr / 2):>22}"
                f"{ratio:>26}  {(v.outcome if v else ''):<10}"
                f"{bench.format_time(res.cold[name]):>11}{first:>11}  {even}")
    for name, problem in res.problems.items():
        lines.append(f"  {name:<20}{problem}")
    return lines


def save_figure(results: dict, eager_of: dict[str, str], path: Path) -> None:
    """Time against size (top) and graph time / its own eager time (bottom), per workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(4 * len(results) + 1.5, 7),
                             layout="constrained", squeeze=False)
    legend = {}
    names = dict.fromkeys(n for _, sweeps in results.values() for s in sweeps.values()
                          for n in s.names)
    colors = {name: f"C{i % 10}" for i, name in enumerate(names)}  # one colour per mode
    for col, (w, sweeps) in enumerate(results.values()):
        top, bottom = axes[0, col], axes[1, col]
        for sweep in sweeps.values():
            if not sweep.comparisons:
                continue
            sweep.plot(ax=top, xlabel=w.size_label, colors=colors)
            pairs = {n: eager_of[n] for n in sweep.names if n in eager_of}
            sweep.plot_ratio(pairs, ax=bottom, xlabel=w.size_label, colors=colors)
        top.set_title(w.title, fontsize="medium")
        bottom.set_ylabel("graph time / its eager time")
        # A mode has one colour in every panel, so one legend for the figure is enough.
        for ax in (top, bottom):
            if ax.get_legend() is not None:
                legend.update(zip(*reversed(ax.get_legend_handles_labels()), strict=True))
                ax.get_legend().remove()
    modes = [name for name in legend if " / " not in name]
    fig.legend([legend[n] for n in modes], modes, loc="outside right upper", fontsize="small")
    fig.savefig(path, dpi=90)
    plt.close(fig)


def set_threads(n: int) -> None:
    """Give each framework ``n`` threads: one, as lesson 10, is steadier on a shared machine."""
    import tensorflow as tf
    import torch

    torch.set_num_threads(n)
    tf.config.threading.set_intra_op_parallelism_threads(n)
    tf.config.threading.set_inter_op_parallelism_threads(n)


def default_out() -> Path:
    """Where results go unless ``--out`` says otherwise: outside the repository."""
    return Path(tempfile.gettempdir()) / "course-benchmarks"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes, 2 first calls")
    parser.add_argument("--out", type=Path, default=default_out(),
                        help=f"where to write frameworks.json and .png (default {default_out()})")
    parser.add_argument("--only", default="", help="comma-separated workloads, e.g. tiny,mlp")
    parser.add_argument("--backend", default="inductor",
                        help="torch.compile backend (inductor, aot_eager, eager, ...)")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads for each framework (default 1, as lesson 10; 0: theirs)")
    parser.add_argument("--first-calls", type=int, default=None,
                        help="fresh builds per graph mode for its first-call time (default 5; "
                             "2 with --quick; 0 skips them)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction,
                        default=sys.stderr.isatty(), help="progress bars (default: on a terminal)")
    opts = parser.parse_args(argv)
    opts.repeats = TIMING["repeats"]
    if opts.first_calls is None:
        opts.first_calls = 2 if opts.quick else 5

    from course_utils import quiet

    with quiet.silenced_fd2():  # TensorFlow's start-up notices; threads before its runtime starts
        if opts.threads:
            set_threads(opts.threads)
        modes = torch_modes(opts.backend) + tf_modes() + mg_modes()
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # fresh tf.functions are built on purpose (first calls)
    on_gpu = any("[" in m.name for m in modes)
    # CPU time when every mode runs on one thread of this process, as in lesson 10: other jobs
    # on the machine cannot add to it. With several threads or a GPU, only the wall clock sees
    # all the work.
    opts.clock = time.process_time if opts.threads == 1 and not on_gpu else time.perf_counter
    chosen = [w for w in WORKLOADS if not opts.only or w.name in opts.only.split(",")]
    eager_of = {m.name: m.eager for m in modes if m.eager}
    env = devices.report().as_dict()
    clock_name = "CPU time" if opts.clock is time.process_time else "wall clock"
    print(f"torch {env['torch']} ({env['lessons run torch on']}, {env['torch threads']} threads), "
          f"TensorFlow {env['tensorflow']} ({env['TensorFlow GPU']}), {env['usable cpus']} CPUs, "
          f"torch.compile backend {opts.backend!r}, {clock_name}, "
          f"{'quick' if opts.quick else 'full'} run")

    started = time.perf_counter()
    results, extra = {}, {}
    for w in chosen:
        per_size = []
        extra[w.name] = {"title": w.title, "size_label": w.size_label, "cold_first_call": {},
                         "first_calls": {}, "verdicts": {}, "break_even": {}, "problems": {}}
        sizes = w.quick_sizes if opts.quick else w.sizes
        for size in sizes:
            res = run_size(w, size, modes, opts)
            print("\n".join(report_size(w, size, res)), flush=True)
            info = extra[w.name]
            info["problems"][str(size)] = res.problems
            info["cold_first_call"][str(size)] = res.cold
            info["first_calls"][str(size)] = {n: t.to_dict() for n, t in res.first_calls.items()}
            info["verdicts"][str(size)] = {n: v.to_dict() for c in res.comparisons.values()
                                           for n, v in c.verdicts().items()}
            info["break_even"][str(size)] = {
                n: bench.break_even_of(res.first_calls.get(n) or res.cold[n],
                                       res.comparison_of(n), n).calls
                for n in eager_of if any(n in c.timings for c in res.comparisons.values())}
            per_size.append(res)
        groups = dict.fromkeys(g for r in per_size for g in r.comparisons)
        sweeps = {}
        for g in groups:
            kept = [(s, r.comparisons[g]) for s, r in zip(sizes, per_size, strict=True)
                    if g in r.comparisons]
            sweeps[g] = bench.Sweep([s for s, _ in kept], [c for _, c in kept])
        results[w.name] = (w, sweeps)

    opts.out.mkdir(parents=True, exist_ok=True)
    data = {"kind": "frameworks", "environment": env, "platform": platform.platform(),
            "quick": opts.quick, "backend": opts.backend, "threads": opts.threads or None,
            "clock": clock_name, "timing": TIMING, "eager_of": eager_of,
            "seconds": time.perf_counter() - started,
            "workloads": {name: {**extra[name],
                                 "sweeps": {g: s.to_dict() for g, s in sweeps.items()}}
                          for name, (_, sweeps) in results.items()}}
    (opts.out / "frameworks.json").write_text(json.dumps(data, indent=1, ensure_ascii=False))
    save_figure(results, eager_of, opts.out / "frameworks.png")
    print(f"\nwrote {opts.out / 'frameworks.json'} and {opts.out / 'frameworks.png'} "
          f"in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
