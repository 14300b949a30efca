"""The digits data and the digits CNN in every mode: the same loss curve, to 1e-10 in float64.

Eight modes (minigraph eager, static Session, traced, codegen; PyTorch eager and torch.compile;
TensorFlow eager and tf.function) train the CNN of ``course_utils.models`` from the same initial
weights on the same batches. Each is checked against minigraph eager: every step's loss, the
parameters after the last step, and the logits on the held-out images, which give every mode the
same held-out accuracy (printed; after a few steps it is near chance: the benchmark
``benchmarks/conv.py`` trains longer).

torch.compile runs with ``backend="aot_eager"`` here: it traces the forward and backward graphs
exactly as the default inductor backend does, but runs them with PyTorch's kernels instead of
generating and compiling C++, which takes 10-30 s on two cores (the benchmark uses inductor).
numpy's BLAS gets one thread: on a shared two-core machine, OpenBLAS threads waiting for each
other make small convolutions ten times slower.
"""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from course_utils import data, models

STEPS, BATCH = 3, 32


@pytest.fixture(scope="module")
def digits64() -> data.Digits:
    return data.load_digits(dtype="float64")


@pytest.fixture(scope="module")
def runs(digits64: data.Digits) -> dict[str, tuple[list[float], dict, np.ndarray]]:
    out = {}
    with threadpool_limits(1):
        for mode in models.MODES:
            options = {"backend": "aot_eager"} if mode == "torch.compile" else {}
            trainer, losses = models.train(mode, digits64, steps=STEPS, batch_size=BATCH,
                                           lr=0.2, **options)
            out[mode] = (losses, trainer.params(), trainer.logits(digits64.X_test))
    return out


@pytest.mark.parametrize("mode", models.MODES[1:])
def test_every_mode_gives_minigraph_eagers_losses_parameters_and_logits(
        runs: dict, mode: str, digits64: data.Digits) -> None:
    losses, params, logits = runs[mode]
    ref_losses, ref_params, ref_logits = runs["minigraph eager"]
    assert len(losses) == STEPS
    np.testing.assert_allclose(losses, ref_losses, rtol=0, atol=1e-10)
    for name, value in params.items():
        assert value.dtype == np.float64
        np.testing.assert_allclose(value, ref_params[name], rtol=0, atol=1e-10, err_msg=name)
    np.testing.assert_allclose(logits, ref_logits, rtol=0, atol=1e-10)
    acc = models.accuracy(logits, digits64.y_test)
    print(f"{mode}: held-out accuracy after {STEPS} steps {acc:.3f}")
    assert acc == models.accuracy(ref_logits, digits64.y_test)


def test_the_first_loss_is_the_loss_of_the_initial_weights(runs: dict,
                                                           digits64: data.Digits) -> None:
    """Checked by hand with numpy: the model's definition, not one framework's, is the reference."""
    p = models.init_cnn()
    first = next(models.batches(len(digits64.X_train), BATCH, 1))
    x, y = digits64.X_train[first], digits64.y_train[first]

    def conv_relu_pool(h: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        padded = np.pad(h, ((0, 0), (0, 0), (1, 1), (1, 1)))
        n, _, height, width = h.shape
        out = np.zeros((n, w.shape[0], height, width))
        for i in range(height):
            for j in range(width):
                patch = padded[:, :, i:i + 3, j:j + 3]
                out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
        out = np.maximum(out + b[None, :, None, None], 0)
        return out.reshape(n, w.shape[0], height // 2, 2, width // 2, 2).max(axis=(3, 5))

    h = conv_relu_pool(conv_relu_pool(x, p["conv1_w"], p["conv1_b"]), p["conv2_w"], p["conv2_b"])
    logits = h.reshape(len(x), 64) @ p["fc_w"] + p["fc_b"]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    expected = -log_probs[np.arange(len(y)), y].mean()
    assert runs["minigraph eager"][0][0] == pytest.approx(expected, rel=1e-12)


def test_training_lowers_the_loss() -> None:
    digits = data.load_digits()
    with threadpool_limits(1):
        trainer, losses = models.train("minigraph codegen", digits, steps=60, lr=0.2)
    assert trainer.dtype == np.float32
    assert np.mean(losses[-10:]) < 0.85 * np.mean(losses[:10])  # from ln 10 = 2.30 to ~1.8


# --- the data -----------------------------------------------------------------------------------


def test_load_digits_is_a_fixed_stratified_split_of_sklearns_images() -> None:
    from sklearn.datasets import load_digits as sklearn_digits

    d = data.load_digits(seed=0)
    assert d.X_train.shape == (1347, 1, 8, 8) and d.X_test.shape == (450, 1, 8, 8)
    assert d.X_train.dtype == np.float32 and d.y_train.dtype == np.int64
    assert d.X_train.min() >= 0.0 and d.X_train.max() == 1.0
    counts = np.bincount(d.y_test, minlength=10)
    all_counts = np.bincount(sklearn_digits().target)
    np.testing.assert_array_equal(counts, np.round(0.25 * all_counts))  # each digit's quarter
    again = data.load_digits(seed=0, dtype="float64")
    np.testing.assert_array_equal(again.X_test, d.X_test.astype(np.float64))
    other = data.load_digits(seed=1)
    assert not np.array_equal(other.y_train, d.y_train)
    # train and test are disjoint and together every image once
    images = sklearn_digits().images.reshape(-1, 64) / 16
    both = np.concatenate([d.X_train, d.X_test]).reshape(-1, 64).astype(np.float64)
    assert sorted(map(bytes, (both * 16).astype(np.uint8))) == sorted(
        map(bytes, (images * 16).astype(np.uint8)))


def test_batches_cover_each_epoch_once_and_repeat_by_seed() -> None:
    order = list(models.batches(10, 3, 7, seed=4))
    assert len(order) == 7 and all(len(b) == 3 for b in order)
    assert len(set(np.concatenate(order[:3]))) == 9  # epoch 1: 3 batches of distinct images
    assert [b.tolist() for b in order] == [b.tolist() for b in models.batches(10, 3, 7, seed=4)]
    with pytest.raises(ValueError, match="batch_size"):
        next(models.batches(10, 11, 1))
