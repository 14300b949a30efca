"""Convolution and pooling on numpy strides (im2col): the impls behind ``mg.conv2d`` and friends.

Layouts are PyTorch's: images NCHW (batch, channels, height, width), conv weights OIHW (out
channels, in channels, kernel height, kernel width). Every op here starts from ``windows``: a
strided *view* of the (padded) image with one ``kh x kw`` patch per output position, shape
``(N, C, Ho, Wo, kh, kw)``, made without copying a number. Then

- a convolution is one ``tensordot`` of those patches with the weights (numpy copies the
  patches into one matrix, "im2col", and hands it to BLAS as a single matrix product);
- a pooling is a ``max`` or ``mean`` over the two window axes;
- every gradient with respect to an image puts patch-shaped values back where their patches came
  from, adding where windows overlap (``col2im``).

>>> x = np.arange(16.0).reshape(1, 1, 4, 4)
>>> windows(x, (2, 2), (2, 2), (0, 0)).shape                  # 2 x 2 windows of 2 x 2
(1, 1, 2, 2, 2, 2)
>>> conv2d(x, np.ones((1, 1, 2, 2)), stride=(2, 2), padding=(0, 0))[0, 0]
array([[10., 18.],
       [42., 50.]])
>>> max_pool2d(x, kernel_size=(2, 2), stride=(2, 2))[0, 0]
array([[ 5.,  7.],
       [13., 15.]])

NB: PyTorch's CPU convolution also lowers to im2col + GEMM when nothing better (oneDNN) applies;
``torch.nn.functional.unfold`` is ``windows`` reshaped to a matrix.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

Pair = tuple[int, int]


def out_size(size: int | None, kernel: int | None, stride: int, pad: int) -> int | None:
    """Positions of a ``kernel``-wide window on ``size + 2 * pad`` cells, ``stride`` apart."""
    if size is None or kernel is None:
        return None
    return (size + 2 * pad - kernel) // stride + 1


def windows(x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair) -> np.ndarray:
    """The ``(N, C, Ho, Wo, kh, kw)`` view of each window of the zero-padded ``x``."""
    (ph, pw), (sh, sw) = padding, stride
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    return sliding_window_view(x, kernel, axis=(2, 3))[:, :, ::sh, ::sw]


def col2im(cols: np.ndarray, shape: tuple[int, ...], stride: Pair, padding: Pair) -> np.ndarray:
    """The adjoint of ``windows``: add each ``(N, C, Ho, Wo, kh, kw)`` patch value back into an
    image of ``shape`` (NCHW), where its window came from; cells under no window get 0."""
    n, c, h, w = shape
    (ph, pw), (sh, sw) = padding, stride
    _, _, ho, wo, kh, kw = cols.shape
    out = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    for i in range(kh):  # one strided add per kernel offset: kh * kw numpy calls in all
        for j in range(kw):
            out[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw] += cols[..., i, j]
    return out[:, :, ph:ph + h, pw:pw + w]


# --- convolution: the op and the two ops its gradient is made of ---------------------------------


def conv2d(x: np.ndarray, w: np.ndarray, stride: Pair, padding: Pair) -> np.ndarray:
    """``out[n, o] = sum over c, i, j of w[o, c, i, j] * x_padded[n, c, s*h + i, s*w + j]``."""
    cols = windows(x, w.shape[2:], stride, padding)  # N C Ho Wo kh kw
    out = np.tensordot(cols, w, axes=((1, 4, 5), (1, 2, 3)))  # N Ho Wo O
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


def conv2d_input_grad(g: np.ndarray, w: np.ndarray, like: np.ndarray, stride: Pair,
                      padding: Pair) -> np.ndarray:
    """d(sum(g * conv2d(x, w))) / dx, for an ``x`` shaped like ``like``."""
    cols = np.tensordot(g, w, axes=((1,), (0,)))  # N Ho Wo C kh kw
    return col2im(cols.transpose(0, 3, 1, 2, 4, 5), like.shape, stride, padding)


def conv2d_weight_grad(g: np.ndarray, x: np.ndarray, like: np.ndarray, stride: Pair,
                       padding: Pair) -> np.ndarray:
    """d(sum(g * conv2d(x, w))) / dw, for a ``w`` shaped like ``like``."""
    cols = windows(x, like.shape[2:], stride, padding)  # N C Ho Wo kh kw
    return np.tensordot(g, cols, axes=((0, 2, 3), (0, 2, 3)))  # O C kh kw


# --- pooling --------------------------------------------------------------------------------------
# The usual pooling (2x2 windows, stride 2, on an even image) tiles the image exactly: then a
# window is a pair of axes of a plain reshape, (N, C, Ho, kh, Wo, kw), and nothing needs strides.


def _tiles(shape: tuple[int, ...], kernel_size: Pair, stride: Pair) -> bool:
    """Do the windows tile the image exactly (no overlap, no cells left over)?"""
    return (kernel_size == stride and shape[2] % kernel_size[0] == 0
            and shape[3] % kernel_size[1] == 0)


def pool_windows(x: np.ndarray, kernel_size: Pair, stride: Pair) -> np.ndarray:
    """The ``(N, C, Ho, Wo, kh * kw)`` values of each window (a copy)."""
    if _tiles(x.shape, kernel_size, stride):
        (n, c, h, w), (kh, kw) = x.shape, kernel_size
        tiles = x.reshape(n, c, h // kh, kh, w // kw, kw).transpose(0, 1, 2, 4, 3, 5)
        return tiles.reshape(n, c, h // kh, w // kw, kh * kw)
    cols = windows(x, kernel_size, stride, (0, 0))
    return cols.reshape(*cols.shape[:4], -1)


def pool_col2im(cols: np.ndarray, shape: tuple[int, ...], kernel_size: Pair,
                stride: Pair) -> np.ndarray:
    """``col2im`` of ``(N, C, Ho, Wo, kh * kw)`` window values: an image of ``shape``."""
    (n, c, h, w), (kh, kw) = shape, kernel_size
    cols = cols.reshape(*cols.shape[:4], kh, kw)
    if _tiles(shape, kernel_size, stride):
        return cols.transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h, w)
    return col2im(cols, shape, stride, (0, 0))


def max_pool2d(x: np.ndarray, kernel_size: Pair, stride: Pair) -> np.ndarray:
    if _tiles(x.shape, kernel_size, stride):
        (n, c, h, w), (kh, kw) = x.shape, kernel_size
        return x.reshape(n, c, h // kh, kh, w // kw, kw).max(axis=(3, 5))
    return windows(x, kernel_size, stride, (0, 0)).max(axis=(4, 5))


def _argmax(x: np.ndarray, kernel_size: Pair, stride: Pair) -> np.ndarray:
    """Where in each window (a flat index < kh * kw) its maximum is; the first one on ties, as
    PyTorch's CPU kernel picks it."""
    return pool_windows(x, kernel_size, stride).argmax(axis=-1)


def max_pool2d_grad(g: np.ndarray, x: np.ndarray, kernel_size: Pair, stride: Pair) -> np.ndarray:
    """Each window's gradient ``g`` sent to the position of its maximum in ``x``."""
    kh, kw = kernel_size
    cols = np.zeros((*g.shape, kh * kw), dtype=g.dtype)
    np.put_along_axis(cols, _argmax(x, kernel_size, stride)[..., None], g[..., None], axis=-1)
    return pool_col2im(cols, x.shape, kernel_size, stride)


def max_pool2d_select(u: np.ndarray, x: np.ndarray, kernel_size: Pair,
                      stride: Pair) -> np.ndarray:
    """``u`` read, in each window, where ``x`` has its maximum (the adjoint of the gradient)."""
    flat = pool_windows(u, kernel_size, stride)
    return np.take_along_axis(flat, _argmax(x, kernel_size, stride)[..., None], axis=-1)[..., 0]


def avg_pool2d(x: np.ndarray, kernel_size: Pair, stride: Pair) -> np.ndarray:
    if _tiles(x.shape, kernel_size, stride):
        (n, c, h, w), (kh, kw) = x.shape, kernel_size
        return x.reshape(n, c, h // kh, kh, w // kw, kw).mean(axis=(3, 5))
    return windows(x, kernel_size, stride, (0, 0)).mean(axis=(4, 5))


def avg_pool2d_grad(g: np.ndarray, like: np.ndarray, kernel_size: Pair,
                    stride: Pair) -> np.ndarray:
    """Each window's gradient ``g`` shared equally by the ``kh * kw`` cells it averaged."""
    kh, kw = kernel_size
    cols = np.broadcast_to((g / (kh * kw))[..., None], (*g.shape, kh * kw))
    return pool_col2im(cols, like.shape, kernel_size, stride)
