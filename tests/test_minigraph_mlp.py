"""The course MLP on the two-class spiral, trained eagerly and as a static graph.

Same data, same initial weights, same float64 arithmetic: the two modes must give the same loss
curve, and both must learn the spiral. The first gradients are also checked against PyTorch.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from minigraph_helpers import accuracy, mlp_logits, mlp_loss, mlp_training_graph

import course_utils.minigraph as mg
from course_utils.data import MLP_SIZES, init_mlp, spiral

LR, STEPS = 0.5, 150


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    return spiral(seed=0)


def train_eager(X: np.ndarray, y: np.ndarray) -> tuple[list[float], float]:
    params = [(mg.tensor(w, requires_grad=True), mg.tensor(b, requires_grad=True))
              for w, b in init_mlp(MLP_SIZES, seed=0)]
    flat = [p for pair in params for p in pair]
    losses = []
    for _ in range(STEPS):
        loss = mlp_loss(X, y, params)
        loss.backward()
        losses.append(loss.item())
        with mg.no_grad():
            for p in flat:
                p -= LR * p.grad
                p.grad = None
    with mg.no_grad():
        return losses, accuracy(mlp_logits(X, params).numpy(), y)


def train_static(X: np.ndarray, y: np.ndarray) -> tuple[list[float], float]:
    g, n = mlp_training_graph(LR)
    g.validate()
    feed = {n["x"]: X, n["labels"]: y}
    with mg.Session(g) as sess:
        sess.run(n["init"])
        losses = [float(sess.run([n["loss"], n["train"]], feed)[0]) for _ in range(STEPS)]
        return losses, accuracy(sess.run(n["logits"], {n["x"]: X}), y)


def test_eager_and_static_training_learn_the_spiral_with_the_same_loss_curve(data) -> None:
    X, y = data
    eager_losses, eager_acc = train_eager(X, y)
    static_losses, static_acc = train_static(X, y)
    assert eager_acc >= 0.95, f"eager training accuracy {eager_acc}"
    assert static_acc >= 0.95, f"static training accuracy {static_acc}"
    assert eager_losses[-1] < 0.25 * eager_losses[0]
    # The same numpy calls in the same order, so the curves agree to the last bit.
    assert static_losses == eager_losses


def test_first_gradients_agree_in_eager_static_and_pytorch(data) -> None:
    X, y = data
    init = init_mlp(MLP_SIZES, seed=0)

    params = [(mg.tensor(w, requires_grad=True), mg.tensor(b, requires_grad=True)) for w, b in init]
    mlp_loss(X, y, params).backward()
    eager = [p.grad.numpy() for pair in params for p in pair]

    g, n = mlp_training_graph(LR)
    with mg.Session(g) as sess:
        sess.run(n["init"])
        static = sess.run(n["grads"], {n["x"]: X, n["labels"]: y})

    tparams = [torch.tensor(a, requires_grad=True) for pair in init for a in pair]
    h = torch.tensor(X)
    for i in range(0, len(tparams), 2):
        h = h @ tparams[i] + tparams[i + 1]
        if i < len(tparams) - 2:
            h = torch.relu(h)
    torch.nn.functional.cross_entropy(h, torch.tensor(y)).backward()

    for e, s, t in zip(eager, static, tparams, strict=True):
        np.testing.assert_allclose(e, t.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(s, e)


def test_float32_model_stays_float32(data) -> None:
    X, y = data
    params = [(mg.tensor(w.astype(np.float32), requires_grad=True),
               mg.tensor(b.astype(np.float32), requires_grad=True)) for w, b in init_mlp()]
    loss = mlp_loss(X.astype(np.float32), y, params)
    loss.backward()
    assert loss.dtype == np.float32
    assert all(p.grad.dtype == np.float32 for pair in params for p in pair)
