"""The data and the initial weights that every lesson shares.

Lessons 02 and 06-12 train the same small MLP on the same two-class spiral, starting from the
same weights, so that every framework can be checked against every other one: same inputs, same
parameters, same loss, same gradients.

>>> X, y = spiral(n_per_class=50, seed=0)
>>> X.shape, y.shape, X.dtype, y.dtype
((100, 2), (100,), dtype('float64'), dtype('int64'))
>>> [w.shape for w, b in init_mlp((2, 8, 2), seed=0)]
[(2, 8), (8, 2)]

Real images for the CNN (``course_utils.models``): scikit-learn's bundled handwritten digits,
1797 grey 8x8 images of 0-9, read from scikit-learn's own files (no download), split once:

>>> digits = load_digits()
>>> digits.X_train.shape, digits.X_test.shape, digits.X_train.dtype, digits.y_train[:5]
((1347, 1, 8, 8), (450, 1, 8, 8), dtype('float32'), array([7, 7, 2, 7, 6]))
"""

from __future__ import annotations

from typing import NamedTuple

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


# --- handwritten digits ------------------------------------------------------------------------


class Digits(NamedTuple):
    """A train/test split of the digits: images ``(N, 1, 8, 8)`` in [0, 1], labels 0-9 (int64)."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


def load_digits(*, test_fraction: float = 0.25, seed: int = 0,
                dtype: str | type = "float32") -> Digits:
    """scikit-learn's 8x8 handwritten digits as NCHW images, split into train and test.

    The split is stratified (each digit keeps its share in both parts) and fixed by ``seed``, so
    every framework and every lesson trains and tests on the same images. Pixel values 0-16 are
    scaled to [0, 1]. ``dtype="float64"`` for exact comparisons across frameworks.

    Args:
        test_fraction: the share of each digit's images held out for testing.
        seed: seed of the numpy generator that shuffles each digit's images.
        dtype: the images' dtype (labels are always int64).

    Returns:
        ``Digits(X_train, y_train, X_test, y_test)``; the images in each part are shuffled.
    """
    from sklearn.datasets import load_digits as sklearn_digits  # bundled with scikit-learn

    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be between 0 and 1, got {test_fraction}")
    bunch = sklearn_digits()
    images = (bunch.images / 16.0).astype(dtype)[:, None, :, :]
    labels = bunch.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    train, test = [], []
    for digit in range(10):
        members = rng.permutation(np.flatnonzero(labels == digit))
        n_test = round(test_fraction * len(members))
        test.append(members[:n_test])
        train.append(members[n_test:])
    train_idx, test_idx = rng.permutation(np.concatenate(train)), rng.permutation(
        np.concatenate(test))
    return Digits(images[train_idx], labels[train_idx], images[test_idx], labels[test_idx])
