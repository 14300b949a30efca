"""Helpers shared by the minigraph tests: random values, central differences, the course MLP."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

import course_utils.minigraph as mg


def values(data: st.DataObject, shape: tuple[int, ...], kind: str = "any") -> np.ndarray:
    """Random float64 values of ``shape`` that keep central differences honest.

    ``any``: |x| in [0.2, 1.5] (no kink of relu/abs near 0, no division by ~0); ``pos``: in
    [0.5, 2] (log, sqrt, pow bases); ``even``/``odd``: near even/odd integers, so an even and an
    odd value never tie (maximum); ``distinct``: all different by >= 0.2 (max).
    """
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    n = math.prod(shape)
    if kind == "any":
        out = rng.choice([-1.0, 1.0], n) * rng.uniform(0.2, 1.5, n)
    elif kind == "pos":
        out = rng.uniform(0.5, 2.0, n)
    elif kind in ("even", "odd"):
        out = 2.0 * rng.integers(-2, 3, n) + (kind == "odd") + rng.uniform(-0.2, 0.2, n)
    elif kind == "distinct":
        out = (rng.permutation(n) - n / 2) * 0.25 + rng.uniform(0, 0.05, n)
    else:
        raise ValueError(kind)
    return np.asarray(out, dtype=np.float64).reshape(shape)


def central_difference(f: Callable[[list[np.ndarray]], float], arrays: list[np.ndarray], i: int,
                       eps: float = 1e-6) -> np.ndarray:
    """d f / d arrays[i] by central differences (float64), one element at a time."""
    grad = np.zeros_like(arrays[i])
    for idx in np.ndindex(arrays[i].shape):
        plus = [a.copy() for a in arrays]
        minus = [a.copy() for a in arrays]
        plus[i][idx] += eps
        minus[i][idx] -= eps
        grad[idx] = (f(plus) - f(minus)) / (2 * eps)
    return grad


def mlp_logits(x: Any, params: Sequence[tuple[Any, Any]]) -> Any:
    """The course's MLP (relu hidden layers, linear last layer) for tensors and nodes alike."""
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = mg.relu(h)
    return h


def mlp_loss(x: Any, labels: Any, params: Sequence[tuple[Any, Any]]) -> Any:
    """Mean softmax cross-entropy of the MLP."""
    return mg.mean(mg.cross_entropy(mlp_logits(x, params), labels))


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def mlp_training_graph(lr: float = 0.5) -> tuple[mg.Graph, dict[str, Any]]:
    """The course MLP's static training step, TF1 style: placeholders, Variables, SGD assigns.

    Returns the graph and its named nodes: x, labels, logits, loss, grads, train, init.
    """
    from course_utils.data import MLP_SIZES, init_mlp

    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 2), "float64", name="x")
        labels = mg.placeholder((None,), "int64", name="labels")
        params = [(mg.Variable(w, name=f"w{i}"), mg.Variable(b, name=f"b{i}"))
                  for i, (w, b) in enumerate(init_mlp(MLP_SIZES, seed=0))]
        flat = [p for pair in params for p in pair]
        logits = mlp_logits(x, params)
        loss = mg.mean(mg.cross_entropy(logits, labels), name="loss")
        grads = mg.gradients(loss, flat)
        train = mg.group(*[mg.assign_sub(p, lr * gp) for p, gp in zip(flat, grads, strict=True)],
                         name="train")
        init = mg.global_variables_initializer()
    return g, {"x": x, "labels": labels, "logits": logits, "loss": loss, "grads": grads,
               "train": train, "init": init}
