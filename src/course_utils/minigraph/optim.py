"""Optimizers for eager tensors: ``mg.optim.SGD`` and ``mg.optim.Adam``, as in ``torch.optim``.

An optimizer holds the parameters (tensors that require grad) and whatever it remembers between
steps (momentum, Adam's moment estimates). ``step()`` updates each parameter from its ``.grad``;
``zero_grad()`` clears the gradients before the next ``backward()``, which would otherwise add to
them. The arithmetic is PyTorch's, operation for operation, so in float64 both give the same
parameters step after step:

>>> import numpy as np, course_utils.minigraph as mg
>>> w = mg.tensor([1.0, -2.0], requires_grad=True)
>>> opt = mg.optim.SGD([w], lr=0.1, momentum=0.9)
>>> for _ in range(2):
...     opt.zero_grad()
...     mg.sum(w * w).backward()                   # gradient 2w
...     opt.step()
>>> w
tensor([ 0.46, -0.92], dtype=float32, requires_grad=True)

An update replaces a parameter's array (and counts as an in-place change, so a tape that used the
old value will refuse to run backward through it); a traced function that captured the tensor
reads the new value on its next call.

NB: ``torch.optim.SGD`` and ``torch.optim.Adam`` (their defaults: ``maximize=False``, no AMSGrad);
in TensorFlow, ``tf.keras.optimizers.SGD`` / ``Adam`` differ in where epsilon goes.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from .eager import Tensor
from .errors import GradientError, user_source


class Optimizer:
    """What every optimizer shares: its parameters, ``zero_grad()`` and per-parameter state."""

    def __init__(self, params: Iterable[Tensor], **hyper: Any) -> None:
        self.params = list(params)
        where = f"mg.optim.{type(self).__name__} at {user_source()}"
        if not self.params:
            raise GradientError(f"{where}: no parameters; pass the tensors to train, e.g. "
                                f"[w, b]")
        seen: dict[int, int] = {}
        for i, p in enumerate(self.params):
            if not isinstance(p, Tensor) or not p.requires_grad or not p.is_leaf:
                raise GradientError(
                    f"{where}: parameter {i} is {p!r:.60}; parameters are leaf tensors made with "
                    f"mg.tensor(..., requires_grad=True)")
            if seen.setdefault(id(p), i) != i:
                raise GradientError(f"{where}: parameter {i} is parameter {seen[id(p)]} again; "
                                    f"each step would update it twice. List each tensor once")
        for name, value in hyper.items():
            if (not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_))
                    or not math.isfinite(value) or value < 0):
                raise GradientError(f"{where}: {name} must be a finite number >= 0, got "
                                    f"{value!r:.40}")
        # numpy scalars become Python floats: an np.float64 lr would widen a float32 update.
        self.hyper = {name: value if type(value) in (int, float) else float(value)
                      for name, value in hyper.items()}
        self.state: dict[int, dict[str, Any]] = {id(p): {} for p in self.params}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear each parameter's ``.grad`` (to ``None``, as PyTorch does by default)."""
        for p in self.params:
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = Tensor(np.zeros_like(p.grad.numpy()))

    def step(self) -> None:
        """Update every parameter that has a gradient."""
        for i, p in enumerate(self.params):
            if p.grad is not None:
                if p.grad.shape != p.shape:  # (the .grad setter checks too; p.data may not)
                    raise GradientError(
                        f"{type(self).__name__}.step() at {user_source()}: parameter {i} is "
                        f"{p.shape} but its .grad is {p.grad.shape}; call zero_grad() and "
                        f"backward() again")
                new = self.update(p.numpy(), p.grad.numpy(), self.state[id(p)])
                p._data = np.asarray(new, dtype=p.dtype)  # a new array: saved ones stay
                p._version += 1

    def update(self, param: np.ndarray, grad: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        """The new value of one parameter; ``state`` is its memory between steps."""
        raise NotImplementedError

    def __repr__(self) -> str:
        hyper = ", ".join(f"{k}={v}" for k, v in self.hyper.items())
        return f"<mg.optim.{type(self).__name__}({len(self.params)} params, {hyper})>"


class SGD(Optimizer):
    """Gradient descent, with optional momentum (heavy ball, or Nesterov) and weight decay.

    ``buf = momentum * buf + (1 - dampening) * g`` (``buf = g`` on the first step), then
    ``p -= lr * buf`` (``lr * (g + momentum * buf)`` with Nesterov). NB: ``torch.optim.SGD``.
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening,
                         weight_decay=weight_decay)
        if not isinstance(nesterov, (bool, np.bool_)):
            raise GradientError(f"mg.optim.SGD at {user_source()}: nesterov is True or False, "
                                f"got {nesterov!r:.40}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise GradientError("mg.optim.SGD: nesterov=True needs momentum > 0 and dampening 0")
        self.nesterov = nesterov

    def update(self, param: np.ndarray, grad: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        h = self.hyper
        if h["weight_decay"]:
            grad = grad + h["weight_decay"] * param
        if h["momentum"]:
            buf = state.get("momentum_buffer")
            buf = grad.copy() if buf is None else h["momentum"] * buf + (1 - h["dampening"]) * grad
            state["momentum_buffer"] = buf
            grad = grad + h["momentum"] * buf if self.nesterov else buf
        return param - h["lr"] * grad


class Adam(Optimizer):
    """Adam: steps scaled by running estimates of the gradient's mean and uncentred variance.

    ``m = lerp(m, g, 1 - beta1)``, ``v = beta2 * v + (1 - beta2) * g * g``, then
    ``p -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)``. NB:
    ``torch.optim.Adam`` (with ``weight_decay`` added to the gradient, as there, not AdamW's).
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise GradientError(f"mg.optim.Adam at {user_source()}: betas is a pair (beta1, "
                                f"beta2) such as (0.9, 0.999), got {betas!r:.40}")
        beta1, beta2 = betas
        super().__init__(params, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                         weight_decay=weight_decay)
        if not (beta1 < 1 and beta2 < 1):
            raise GradientError(f"mg.optim.Adam: betas must be below 1, got {betas}")

    def update(self, param: np.ndarray, grad: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        h = self.hyper
        if h["weight_decay"]:
            grad = grad + h["weight_decay"] * param
        t = state["step"] = state.get("step", 0) + 1
        m = state.get("exp_avg", np.zeros_like(param))
        v = state.get("exp_avg_sq", np.zeros_like(param))
        weight = 1 - h["beta1"]  # torch.lerp(m, g, weight), both of its formulas
        m = m + weight * (grad - m) if weight < 0.5 else grad - (grad - m) * (1 - weight)
        v = v * h["beta2"] + (1 - h["beta2"]) * (grad * grad)
        state["exp_avg"], state["exp_avg_sq"] = m, v
        step_size = h["lr"] / (1 - h["beta1"] ** t)
        denom = np.sqrt(v) / math.sqrt(1 - h["beta2"] ** t) + h["eps"]
        return param - step_size * (m / denom)
