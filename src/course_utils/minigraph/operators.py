"""Python operators shared by eager tensors and graph nodes.

``x * w + b`` means the same thing whether ``x`` is an ``mg.Tensor`` (it runs now) or an
``mg.Node`` (it adds nodes to a graph): every operator calls an ``mg`` function, which calls
``mg.apply``, the one place that decides.

``==`` and ``!=`` are left as identity, so values stay usable as dict keys and in ``x in list``;
use ``mg.equal`` / ``mg.not_equal``. NB: TensorFlow 1 graph tensors made the same choice.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Looked up when an operator runs, after the package has finished importing.
import course_utils.minigraph as mg

from .errors import DTypeError, user_source


class Operators:
    """Mixin: arithmetic, comparison, ``@``, ``[]`` and a few PyTorch-style methods."""

    # Make numpy hand ``ndarray + value`` back to our __radd__ instead of treating us as an object.
    __array_ufunc__ = None

    shape: tuple[int | None, ...]

    def __add__(self, other: Any) -> Any:
        return mg.add(self, other)

    def __radd__(self, other: Any) -> Any:
        return mg.add(other, self)

    def __sub__(self, other: Any) -> Any:
        return mg.sub(self, other)

    def __rsub__(self, other: Any) -> Any:
        return mg.sub(other, self)

    def __mul__(self, other: Any) -> Any:
        return mg.mul(self, other)

    def __rmul__(self, other: Any) -> Any:
        return mg.mul(other, self)

    def __truediv__(self, other: Any) -> Any:
        return mg.div(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return mg.div(other, self)

    def __pow__(self, other: Any) -> Any:
        return mg.pow(self, other)

    def __rpow__(self, other: Any) -> Any:
        return mg.pow(other, self)

    def __matmul__(self, other: Any) -> Any:
        return mg.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return mg.matmul(other, self)

    def __neg__(self) -> Any:
        return mg.neg(self)

    def __lt__(self, other: Any) -> Any:
        return mg.less(self, other)

    def __le__(self, other: Any) -> Any:
        return mg.less_equal(self, other)

    def __gt__(self, other: Any) -> Any:
        return mg.greater(self, other)

    def __ge__(self, other: Any) -> Any:
        return mg.greater_equal(self, other)

    __hash__ = object.__hash__  # identity, like __eq__

    # & | ~ combine comparisons: logical and, or, not of bool values, as in numpy and PyTorch.
    def __and__(self, other: Any) -> Any:
        return mg.where(*_bools("&", self, other), False)

    def __rand__(self, other: Any) -> Any:
        return mg.where(*_bools("&", other, self), False)

    def __or__(self, other: Any) -> Any:
        a, b = _bools("|", self, other)
        return mg.where(a, True, b)

    def __ror__(self, other: Any) -> Any:
        a, b = _bools("|", other, self)
        return mg.where(a, True, b)

    def __invert__(self) -> Any:
        (a,) = _bools("~", self)
        return mg.where(a, False, True)

    def __getitem__(self, index: Any) -> Any:
        return mg.getitem(self, index)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def T(self) -> Any:  # noqa: N802 (numpy's name)
        return mg.transpose(self)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Any:
        return mg.sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Any:
        return mg.mean(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Any:
        return mg.max(self, axis=axis, keepdims=keepdims)

    def reshape(self, *shape: Any) -> Any:
        return mg.reshape(self, shape[0] if len(shape) == 1 else shape)


def _bools(symbol: str, *values: Any) -> tuple[Any, ...]:
    """``values`` if each is a bool value (or a Python bool); else a ``DTypeError``."""
    for v in values:
        dtype = getattr(v, "dtype", None)
        if not isinstance(v, (bool, np.bool_)) and (dtype is None or dtype.kind != "b"):
            what = dtype if dtype is not None else type(v).__name__
            raise DTypeError(f"`{symbol}` at {user_source()} combines bool values (comparisons, "
                             f"such as (x > 0) & (x < 1)), got {what}; compare first, or cast "
                             f"with mg.cast(x, 'bool')")
    return values
