"""The data and the initial weights that every lesson shares.

Lessons 02 and 06-12 train the same small MLP on the same two-class spiral, starting from the
same weights, so that every framework can be checked against every other one: same inputs, same
parameters, same loss, same gradients.

>>> X, y = spiral(n_per_class=50, seed=0)
>>> X.shape, y.shape, X.dtype, y.dtype
((100, 2), (100,), dtype('float64'), dtype('int64'))
>>> [w.shape for w, b in init_mlp((2, 8, 2), seed=0)]
[(2, 8), (8, 2)]
"""

from __future__ import annotations

import numpy as np

#: The layer sizes of the course's MLP: 2 inputs, two hidden layers, 2 classes.
MLP_SIZES: tuple[int, ...] = (2, 32, 32, 2)


def spiral(
    n_per_class: int = 100,
    n_classes: int = 2,
    *,
    turns: float = 1.25,
    noise: float = 0.15,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Interleaved spiral arms, one per class, in the unit disc.

    Args:
        n_per_class: points on each arm.
        n_classes: number of arms (classes).
        turns: how many half-turns each arm makes; more is harder to separate.
        noise: standard deviation of the Gaussian noise added to the angle.
        seed: seed of the numpy generator, so every lesson sees the same points.

    Returns:
        ``X`` of shape ``(n_per_class * n_classes, 2)`` (float64) and labels ``y`` (int64).
    """
    rng = np.random.default_rng(seed)
    radius = np.linspace(0.05, 1.0, n_per_class)
    xs, ys = [], []
    for k in range(n_classes):
        angle = (
            turns * np.pi * radius
            + 2 * np.pi * k / n_classes
            + rng.normal(0.0, noise, n_per_class)
        )
        xs.append(np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1))
        ys.append(np.full(n_per_class, k, dtype=np.int64))
    return np.concatenate(xs), np.concatenate(ys)


def init_mlp(
    sizes: tuple[int, ...] = MLP_SIZES, *, seed: int = 0, dtype: type = np.float64
) -> list[tuple[np.ndarray, np.ndarray]]:
    """He-uniform weights and zero biases for an MLP with the given layer sizes.

    Returns one ``(W, b)`` pair per layer with ``W`` of shape ``(fan_in, fan_out)`` so that a layer
    is ``x @ W + b`` in every framework (PyTorch's ``nn.Linear`` stores ``W.T``).
    """
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        limit = np.sqrt(6.0 / fan_in)
        w = rng.uniform(-limit, limit, size=(fan_in, fan_out)).astype(dtype)
        params.append((w, np.zeros(fan_out, dtype=dtype)))
    return params


def one_hot(y: np.ndarray, n_classes: int, dtype: type = np.float64) -> np.ndarray:
    """Rows of the identity matrix picked by the integer labels ``y``."""
    return np.eye(n_classes, dtype=dtype)[y]
