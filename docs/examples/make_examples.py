"""Regenerate the example drawings in this folder: ``python docs/examples/make_examples.py``.

The same MLP (``course_utils.data.init_mlp``) drawn three ways; one neuron with the value and
the gradient of every node (``values=True, grads=True``); a traced function whose ``cond`` and
``while_loop`` bodies are clusters. All by the built-in renderer, so the files are
byte-identical on every machine, with or without Graphviz.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from course_utils import viz
from course_utils.data import MLP_SIZES, init_mlp, spiral

HERE = Path(__file__).parent


def minigraph_mlp() -> viz.Drawing:
    """The forward graph and loss of the course MLP, built in a minigraph Graph."""
    import course_utils.minigraph as mg

    graph = mg.Graph()
    with graph.as_default():
        h = mg.placeholder((None, 2), name="x")
        y = mg.placeholder((None,), "int64", name="y")
        layers = init_mlp(MLP_SIZES, seed=0, dtype=np.float32)
        for i, (w, b) in enumerate(layers, start=1):
            h = h @ mg.Variable(w, name=f"w{i}") + mg.Variable(b, name=f"b{i}")
            if i < len(layers):
                h = mg.relu(h)
        mg.mean(mg.cross_entropy(h, y), name="loss")
    return viz.draw(graph, renderer="builtin", title="minigraph: the course MLP and its loss")


def torch_autograd_mlp() -> viz.Drawing:
    """The autograd graph behind ``loss.backward()`` for the same MLP in PyTorch."""
    import torch

    model = torch.nn.Sequential(
        torch.nn.Linear(2, 32), torch.nn.ReLU(),
        torch.nn.Linear(32, 32), torch.nn.ReLU(),
        torch.nn.Linear(32, 2),
    )
    with torch.no_grad():  # nn.Linear stores W transposed
        for layer, (w, b) in zip(model[::2], init_mlp(MLP_SIZES, seed=0), strict=True):
            layer.weight.copy_(torch.from_numpy(w.T))
            layer.bias.copy_(torch.from_numpy(b))
    X, y = spiral(n_per_class=50, seed=0)
    loss = torch.nn.functional.cross_entropy(model(torch.tensor(X, dtype=torch.float32)),
                                             torch.from_numpy(y))
    return viz.draw(loss, params=dict(model.named_parameters()), renderer="builtin",
                    title="PyTorch: loss.grad_fn, the graph backward() walks")


def tf1_graph() -> viz.Drawing:
    """The article's TF1 example, ``y = x @ w + b``, with its variables and initializer."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (None, 2), name="x")
        w = tf.compat.v1.Variable(tf.ones((2, 1)), name="w")
        b = tf.compat.v1.Variable(tf.zeros((1,)), name="b")
        with tf.name_scope("linear"):
            tf.add(tf.matmul(x, w), b, name="y")
        tf.compat.v1.global_variables_initializer()
    return viz.draw(graph, renderer="builtin", title="TensorFlow 1: y = x @ w + b, in a tf.Graph")


def minigraph_values_grads() -> viz.Drawing:
    """One neuron, o = tanh(x1*w1 + x2*w2 + b), after ``o.backward()``: values and gradients."""
    import course_utils.minigraph as mg

    x1, x2 = mg.tensor(2.0, dtype="float64"), mg.tensor(0.0, dtype="float64")
    w1 = mg.tensor(-3.0, requires_grad=True, dtype="float64")
    w2 = mg.tensor(1.0, requires_grad=True, dtype="float64")
    b = mg.tensor(6.8813735870195432, requires_grad=True, dtype="float64")
    o = mg.tanh(x1 * w1 + x2 * w2 + b)
    o.backward()
    names = {"x1": x1, "x2": x2, "w1": w1, "w2": w2, "b": b}
    return viz.draw(o, params=names, values=True, grads=True, renderer="builtin",
                    title="minigraph eager: one neuron after o.backward(), values and gradients")


def minigraph_control_flow() -> viz.Drawing:
    """A traced function with ``mg.cond`` and ``mg.while_loop``: their bodies as clusters."""
    import course_utils.minigraph as mg

    @mg.function
    def halve_until_small(x):
        y = mg.cond(mg.sum(x) > 0, lambda: x, lambda: -x)
        return mg.while_loop(lambda v: mg.sum(v) > 1.0, lambda v: v * 0.5, y)

    halve_until_small(mg.tensor([3.0, 4.0]))
    return viz.draw(halve_until_small, renderer="builtin",
                    title="minigraph: cond and while_loop, their sub-graphs as clusters")


if __name__ == "__main__":
    for make in (minigraph_mlp, torch_autograd_mlp, tf1_graph, minigraph_values_grads,
                 minigraph_control_flow):
        path = make().save(HERE / f"{make.__name__}.svg")
        print("wrote", path)
