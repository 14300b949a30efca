"""The digits CNN, written once per framework, trained from the same weights in every mode.

A small convolutional network for the 8x8 digits (``course_utils.data.load_digits``)::

    image (1, 8, 8) -> conv 3x3, 8 channels, padding 1 -> relu -> max-pool 2  -> (8, 4, 4)
                    -> conv 3x3, 16 channels, padding 1 -> relu -> max-pool 2 -> (16, 2, 2)
                    -> flatten (64) -> linear -> 10 logits

Its parameters are one dict of numpy arrays (:func:`init_cnn`): conv weights OIHW as PyTorch
keeps them, the linear layer as ``x @ fc_w + fc_b`` (``fc_w`` is (64, 10)), so every framework
starts from exactly the same numbers. Training is plain SGD on the mean cross-entropy, one batch
per step, the batches in an order fixed by a seed (:func:`batches`).

The modes (:data:`MODES`), each a :class:`Trainer` made by :func:`trainer`:

==================  ===========================================================================
``minigraph eager``   ``mg.tensor`` parameters, the tape, ``backward()``, ``mg.optim.SGD``
``minigraph static``  a TF1-style graph: placeholders, Variables, ``mg.gradients``,
                      ``mg.assign_sub``, run by ``mg.Session`` (the Interpreter, optimized)
``minigraph traced``  the forward pass and loss as an ``mg.function`` (one trace per batch
                      shape); its gradient is the symbolic gradient of that graph
``minigraph codegen`` the static graph, run by ``mg.Session(..., executor="codegen")``
``PyTorch eager``     ``torch.nn.functional`` ops, ``loss.backward()``, ``torch.optim.SGD``
``torch.compile``     the same loss function compiled (``backend="inductor"`` by default)
``TF eager``          ``tf.Variable`` parameters, ``tf.GradientTape``, ``assign_sub``
``tf.function``       the whole training step as one ``tf.function``
==================  ===========================================================================

Using it (what lesson 10 shows)::

    from course_utils import data, models

    digits = data.load_digits()                          # float32; dtype="float64" to compare
    t, losses = models.train("minigraph eager", digits, steps=300)
    logits = t.logits(digits.X_test)
    print(models.accuracy(logits, digits.y_test))        # held-out accuracy, about 0.95
    wrong = models.misclassified(logits, digits.y_test)  # indices into X_test, to show

    step = models.trainer("minigraph codegen", lr=0.1)   # from init_cnn(): time one step
    x, y = digits.X_train[:64], digits.y_train[:64]
    step.step(x, y)                                      # -> the loss before the update

``Trainer.step(x, y)`` does one SGD step and returns the batch loss before the update (a Python
float); ``Trainer.logits(x)`` gives numpy logits; ``Trainer.params()`` the current parameters
as numpy arrays, under the names of :func:`init_cnn`.

In float64 every mode computes the same losses (the test checks 1e-10 over several steps): the
frameworks differ only in rounding, never in what they compute. TensorFlow runs convolutions on
NHWC images on the CPU, so its model transposes to NHWC and back, and flattens in PyTorch's
(C, H, W) order. TensorFlow is imported through ``course_utils.quiet`` (no start-up log lines);
torch and TensorFlow are imported only by the modes that use them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import course_utils.minigraph as mg

#: Every mode :func:`trainer` knows, in the order lessons list them.
MODES = ("minigraph eager", "minigraph static", "minigraph traced", "minigraph codegen",
         "PyTorch eager", "torch.compile", "TF eager", "tf.function")

#: ``(name, shape)`` of each parameter, in order.
SHAPES = (("conv1_w", (8, 1, 3, 3)), ("conv1_b", (8,)), ("conv2_w", (16, 8, 3, 3)),
          ("conv2_b", (16,)), ("fc_w", (64, 10)), ("fc_b", (10,)))

Params = dict[str, np.ndarray]


def init_cnn(seed: int = 0, dtype: Any = np.float64) -> Params:
    """PyTorch's default initial values, drawn with numpy: each weight and bias uniform in
    ``+-1/sqrt(fan_in)`` (fan_in: the inputs one output sees)."""
    rng = np.random.default_rng(seed)
    params = {}
    fan_in = {"conv1": 1 * 3 * 3, "conv2": 8 * 3 * 3, "fc": 64}
    for name, shape in SHAPES:
        bound = 1.0 / np.sqrt(fan_in[name.split("_")[0]])
        params[name] = rng.uniform(-bound, bound, size=shape).astype(dtype)
    return params


def batches(n: int, batch_size: int, steps: int, seed: int = 0) -> Iterator[np.ndarray]:
    """``steps`` index arrays of ``batch_size``: the training set shuffled once per epoch (the
    last partial batch of an epoch is dropped, so every batch has the same shape)."""
    if not 0 < batch_size <= n:
        raise ValueError(f"batch_size must be between 1 and the {n} training images")
    rng = np.random.default_rng(seed)
    done = 0
    while done < steps:
        order = rng.permutation(n)
        for start in range(0, n - batch_size + 1, batch_size):
            if done == steps:
                return
            yield order[start:start + batch_size]
            done += 1


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    """The share of rows whose largest logit is at the label."""
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def misclassified(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Indices of the rows predicted wrong (their prediction is ``argmax(logits[i])``)."""
    return np.flatnonzero(np.argmax(logits, axis=1) != labels)


# --- the model, once per framework -----------------------------------------------------------


def minigraph_logits(x: Any, p: dict[str, Any]) -> Any:
    """The CNN in minigraph: ``x`` and the parameters may be tensors or graph nodes."""
    h = mg.max_pool2d(mg.relu(mg.conv2d(x, p["conv1_w"], p["conv1_b"], padding=1)), 2)
    h = mg.max_pool2d(mg.relu(mg.conv2d(h, p["conv2_w"], p["conv2_b"], padding=1)), 2)
    return mg.reshape(h, (-1, 64)) @ p["fc_w"] + p["fc_b"]


def torch_logits(x: Any, p: dict[str, Any]) -> Any:
    import torch.nn.functional as F  # noqa: N812 (PyTorch's own convention)

    h = F.max_pool2d(F.relu(F.conv2d(x, p["conv1_w"], p["conv1_b"], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p["conv2_w"], p["conv2_b"], padding=1)), 2)
    return h.reshape(h.shape[0], 64) @ p["fc_w"] + p["fc_b"]


def tf_logits(x: Any, p: dict[str, Any]) -> Any:
    """TensorFlow's CPU convolutions take NHWC images and HWIO weights: transpose in, and back
    to NCHW before flattening, so the 64 features come in PyTorch's order."""
    from course_utils import quiet

    tf = quiet.tensorflow()
    pad = [[0, 0], [1, 1], [1, 1], [0, 0]]
    h = tf.transpose(x, (0, 2, 3, 1))
    for layer in ("conv1", "conv2"):
        w = tf.transpose(p[f"{layer}_w"], (2, 3, 1, 0))  # OIHW -> HWIO
        h = tf.nn.relu(tf.nn.conv2d(h, w, strides=1, padding=pad) + p[f"{layer}_b"])
        h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h = tf.reshape(tf.transpose(h, (0, 3, 1, 2)), (-1, 64))
    return h @ p["fc_w"] + p["fc_b"]


# --- trainers ----------------------------------------------------------------------------------


class Trainer:
    """One framework's CNN with its own copy of the parameters and an SGD step."""

    mode = ""

    def __init__(self, params: Params, lr: float) -> None:
        self.lr = lr
        self.dtype = next(iter(params.values())).dtype
        self.setup({k: np.array(v) for k, v in params.items()})

    def setup(self, params: Params) -> None:
        raise NotImplementedError

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One SGD step on the batch; the batch's mean cross-entropy before the update."""
        raise NotImplementedError

    def logits(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def params(self) -> Params:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{self.mode} trainer, lr={self.lr}, {self.dtype}>"


class MinigraphEager(Trainer):
    mode = "minigraph eager"

    def setup(self, params: Params) -> None:
        self.p = {k: mg.tensor(v, requires_grad=True) for k, v in params.items()}
        self.opt = mg.optim.SGD(list(self.p.values()), lr=self.lr)

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        self.opt.zero_grad()
        loss = mg.mean(mg.cross_entropy(minigraph_logits(mg.tensor(x), self.p), y))
        loss.backward()
        self.opt.step()
        return loss.item()

    def logits(self, x: np.ndarray) -> np.ndarray:
        with mg.no_grad():
            return minigraph_logits(mg.tensor(x), self.p).numpy()

    def params(self) -> Params:
        return {k: v.numpy().copy() for k, v in self.p.items()}


class MinigraphTraced(MinigraphEager):
    """The forward pass and loss traced once per batch shape; the tape holds one call of the
    traced graph, whose backward is that graph's symbolic gradient."""

    mode = "minigraph traced"

    def setup(self, params: Params) -> None:
        super().setup(params)
        self.loss_fn = mg.function(lambda x, y: mg.mean(mg.cross_entropy(
            minigraph_logits(x, self.p), y)))
        self.logits_fn = mg.function(lambda x: minigraph_logits(x, self.p))

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        self.opt.zero_grad()
        loss = self.loss_fn(mg.tensor(x), mg.tensor(y))
        loss.backward()
        self.opt.step()
        return loss.item()

    def logits(self, x: np.ndarray) -> np.ndarray:
        with mg.no_grad():
            return self.logits_fn(mg.tensor(x)).numpy()


class MinigraphStatic(Trainer):
    """TF1 style: the whole training step is a graph, built once, run by a Session."""

    mode = "minigraph static"
    executor = "interpreter"

    def setup(self, params: Params) -> None:
        dtype = self.dtype.name
        with mg.Graph().as_default() as g:
            self.x = mg.placeholder((None, 1, 8, 8), dtype, name="x")
            self.y = mg.placeholder((None,), "int64", name="y")
            self.vars = {k: mg.Variable(v, name=k) for k, v in params.items()}
            self.logits_node = minigraph_logits(self.x, self.vars)
            self.loss = mg.mean(mg.cross_entropy(self.logits_node, self.y), name="loss")
            grads = mg.gradients(self.loss, list(self.vars.values()))
            self.train = mg.group(*[mg.assign_sub(v, self.lr * g)
                                    for v, g in zip(self.vars.values(), grads, strict=True)],
                                  name="train")
            init = mg.global_variables_initializer()
        self.graph = g
        self.session = mg.Session(g, executor=self.executor)
        self.session.run(init)

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        loss, _ = self.session.run([self.loss, self.train], {self.x: x, self.y: y})
        return float(loss)

    def logits(self, x: np.ndarray) -> np.ndarray:
        return self.session.run(self.logits_node, {self.x: x})

    def params(self) -> Params:
        return {k: np.array(v) for k, v in self.session.run(self.vars).items()}


class MinigraphCodegen(MinigraphStatic):
    mode = "minigraph codegen"
    executor = "codegen"


class TorchEager(Trainer):
    mode = "PyTorch eager"

    def setup(self, params: Params) -> None:
        import torch

        self.torch = torch
        self.p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
        self.opt = torch.optim.SGD(list(self.p.values()), lr=self.lr)
        self.loss_fn = self.make_loss()

    def make_loss(self) -> Callable:
        F = self.torch.nn.functional  # noqa: N806 (PyTorch's own convention)
        return lambda x, y: F.cross_entropy(torch_logits(x, self.p), y)

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        self.opt.zero_grad()
        loss = self.loss_fn(self.torch.from_numpy(x), self.torch.from_numpy(y))
        loss.backward()
        self.opt.step()
        return loss.item()

    def logits(self, x: np.ndarray) -> np.ndarray:
        with self.torch.no_grad():  # eager in both torch modes: the same model, no recompiles
            return torch_logits(self.torch.from_numpy(x), self.p).numpy()

    def params(self) -> Params:
        return {k: v.detach().numpy().copy() for k, v in self.p.items()}


class TorchCompile(TorchEager):
    """The loss function compiled by ``torch.compile``; AOTAutograd compiles its backward too.

    ``backend``: ``"inductor"`` (the default; generates C++ kernels, so the first step takes
    10-30 s) or ``"aot_eager"`` (traces forward and backward the same way, runs them with
    PyTorch's own kernels: seconds to compile; what the tests use).
    """

    mode = "torch.compile"
    backend = "inductor"

    def make_loss(self) -> Callable:
        return self.torch.compile(super().make_loss(), backend=self.backend)


class TFEager(Trainer):
    mode = "TF eager"

    def setup(self, params: Params) -> None:
        from course_utils import quiet

        self.tf = quiet.tensorflow()
        self.p = {k: self.tf.Variable(v, name=k) for k, v in params.items()}

    def _step(self, x: Any, y: Any) -> Any:
        tf = self.tf
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                y, tf_logits(x, self.p)))
        grads = tape.gradient(loss, list(self.p.values()))
        for v, g in zip(self.p.values(), grads, strict=True):
            v.assign_sub(self.lr * g)
        return loss

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        return float(self._step(self.tf.constant(x), self.tf.constant(y)))

    def logits(self, x: np.ndarray) -> np.ndarray:
        return tf_logits(self.tf.constant(x), self.p).numpy()

    def params(self) -> Params:
        return {k: v.numpy().copy() for k, v in self.p.items()}


class TFFunction(TFEager):
    """The whole step (forward, tape, updates) as one ``tf.function`` with a fixed signature,
    so a last batch of another size does not retrace it."""

    mode = "tf.function"

    def setup(self, params: Params) -> None:
        super().setup(params)
        tf = self.tf
        images = tf.TensorSpec((None, 1, 8, 8), tf.as_dtype(self.dtype))
        labels = tf.TensorSpec((None,), tf.int64)
        self._step = tf.function(self._step, input_signature=[images, labels])
        self._logits = tf.function(lambda x: tf_logits(x, self.p), input_signature=[images])

    def logits(self, x: np.ndarray) -> np.ndarray:
        return self._logits(self.tf.constant(x)).numpy()


TRAINERS: dict[str, type[Trainer]] = {t.mode: t for t in (
    MinigraphEager, MinigraphStatic, MinigraphTraced, MinigraphCodegen, TorchEager, TorchCompile,
    TFEager, TFFunction)}


def trainer(mode: str, params: Params | None = None, *, lr: float = 0.1,
            dtype: Any = None, **options: Any) -> Trainer:
    """A :class:`Trainer` for ``mode`` (one of :data:`MODES`), starting from ``params``
    (default: ``init_cnn()``), cast to ``dtype`` if given (else float32, like the images of
    ``load_digits()``). ``options`` set class attributes, e.g. ``backend="aot_eager"`` for
    ``torch.compile``."""
    if mode not in TRAINERS:
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if dtype is None:
        dtype = np.float32 if params is None else next(iter(params.values())).dtype
    params = init_cnn() if params is None else params
    cls = TRAINERS[mode]
    if options:
        cls = type(cls.__name__, (cls,), options)
    return cls({k: np.asarray(v, dtype) for k, v in params.items()}, lr)


def train(mode: str, digits: Any, *, steps: int, batch_size: int = 64, lr: float = 0.1,
          seed: int = 0, params: Params | None = None,
          progress: bool = False, **options: Any) -> tuple[Trainer, list[float]]:
    """Train the CNN in ``mode`` on ``digits`` (``data.load_digits(...)``) for ``steps`` SGD steps;
    returns the trainer and each step's loss. The images' dtype decides the parameters' dtype."""
    dtype = digits.X_train.dtype
    t = trainer(mode, init_cnn() if params is None else params, lr=lr, dtype=dtype, **options)
    order = batches(len(digits.X_train), batch_size, steps, seed)
    if progress:
        from tqdm.auto import tqdm

        order = tqdm(order, total=steps, desc=mode, leave=False)
    losses = [t.step(digits.X_train[i], digits.y_train[i]) for i in order]
    return t, losses
