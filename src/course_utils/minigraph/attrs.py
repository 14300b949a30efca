"""What an op's attrs may hold: one small vocabulary of kinds, checked where values come in.

Every built-in op declares its attrs in the op table (``Op.attrs``: attr name -> kind). The
public functions check what you pass (``mg.sum(x, axis="a")`` names the argument and says what
would do), ``Graph.add_node`` checks every node it adds, and ``mg.load`` checks every node of a
file before anything runs, so a crafted file cannot smuggle a string where an index belongs:

>>> from course_utils.minigraph import attrs as A
>>> A.axis(1), A.axis([0, 2]), A.index((0, slice(None, 2), None))
(1, (0, 2), (0, slice(None, 2, None), None))
>>> A.index(("__import__('os')",))
Traceback (most recent call last):
...
ValueError: an index holds ints, slices of ints, None and ... (basic slicing), got str

A kind is a function: it returns the value in its canonical form or raises ``ValueError``
saying what it wanted. ``check`` runs an op's kinds over a node's attrs and raises the
minigraph error of the kind (``ShapeError`` for shapes, axes and indices, ``DTypeError`` for
dtypes, ``GraphError`` otherwise), naming the attr.

NB: TensorFlow's ``REGISTER_OP(...).Attr("axis: int")`` declares attr types the same way, and
its GraphDef importer checks them before a graph runs.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .errors import DTypeError, GraphError, MinigraphError, ShapeError

Kind = Callable[[Any], Any]

#: The dtypes a minigraph value may have (numpy names): booleans, integers and floats.
DTYPES = frozenset(["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                    "uint64", "float16", "float32", "float64"])

#: No sane array has more axes; numpy's own limit is 64.
MAX_RANK = 64


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _describe(value: Any) -> str:
    return type(value).__name__


# --- the kinds ----------------------------------------------------------------------------------


def integer(value: Any) -> int:
    """An int (a bool is not one)."""
    if not _is_int(value):
        raise ValueError(f"wants an int, got {_describe(value)} {value!r}")
    return int(value)


def positive_int(value: Any) -> int:
    value = integer(value)
    if value <= 0:
        raise ValueError(f"wants a positive int, got {value}")
    return value


def boolean(value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"wants True or False, got {_describe(value)} {value!r}")
    return bool(value)


def number_or_none(value: Any) -> float | int | None:
    """A bound such as clip's: ``None`` (no bound), an int or a float that is not NaN."""
    if value is None or _is_int(value):
        return None if value is None else int(value)
    if isinstance(value, (float, np.floating)) and not math.isnan(value):
        return float(value)
    raise ValueError(f"wants a number or None, got {_describe(value)} {value!r}")


def axis(value: Any) -> int | tuple[int, ...] | None:
    """``None`` (every axis), an int, or a tuple of ints; a list is read as a tuple."""
    if value is None or _is_int(value):
        return None if value is None else _bounded(int(value))
    if isinstance(value, (tuple, list)) and all(_is_int(a) for a in value):
        if len(value) > MAX_RANK:
            raise ValueError(f"names {len(value)} axes; an array has at most {MAX_RANK}")
        return tuple(_bounded(int(a)) for a in value)
    raise ValueError(f"wants an int, a tuple of ints or None, got {_describe(value)} {value!r}")


def _bounded(a: int) -> int:
    if not -MAX_RANK <= a < MAX_RANK:
        raise ValueError(f"axis {a} is out of range for any array (rank <= {MAX_RANK})")
    return a


def permutation(value: Any) -> tuple[int, ...] | None:
    """Transpose's ``axes``: ``None`` (reverse them) or a tuple of ints."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return tuple(axis(tuple(value)))
    raise ValueError(f"wants a tuple of ints or None, got {_describe(value)} {value!r}")


def shape(value: Any) -> tuple[int | None, ...]:
    """A (partly known) shape: a tuple of sizes >= 0, ``None`` for a size known at run time."""
    if isinstance(value, (tuple, list)) and len(value) <= MAX_RANK and all(
            d is None or (_is_int(d) and d >= 0) for d in value):
        return tuple(None if d is None else int(d) for d in value)
    raise ValueError(f"wants a tuple of non-negative ints or None (at most {MAX_RANK}), got "
                     f"{value!r}")


def target_shape(value: Any) -> tuple[int, ...]:
    """Reshape's target: a tuple of ints >= 0 with at most one -1 (inferred)."""
    if isinstance(value, (tuple, list)) and len(value) <= MAX_RANK and all(
            _is_int(d) and d >= -1 for d in value) and list(value).count(-1) <= 1:
        return tuple(int(d) for d in value)
    raise ValueError(f"wants a tuple of non-negative ints with at most one -1, got {value!r}")


def pair(value: Any, *, least: int = 1) -> tuple[int, int]:
    """A size per spatial axis (height, width): one int for both, or two ints."""
    values = (value, value) if _is_int(value) else value
    if (isinstance(values, (tuple, list)) and len(values) == 2
            and all(_is_int(v) and v >= least for v in values)):
        return int(values[0]), int(values[1])
    low = "positive" if least == 1 else f">= {least}"
    raise ValueError(f"wants one {low} int or two (height, width), got {value!r}")


def padding(value: Any) -> tuple[int, int]:
    return pair(value, least=0)


def dtype_name(value: Any) -> str:
    """A numpy dtype name that minigraph computes with (``"float32"``, ``"int64"``, ...)."""
    if isinstance(value, str):  # a name is looked up, never parsed
        name = value if value in DTYPES else None
    else:
        try:
            name = np.dtype(value).name
        except (TypeError, ValueError):
            name = None
    if name not in DTYPES:
        raise ValueError(f"wants a numeric dtype name such as 'float32' or 'int64', got "
                         f"{_short(value)}")
    return name


def index(value: Any) -> tuple:
    """Basic slicing: a tuple of ints, slices of ints, ``None`` and ``...``."""
    items = value if isinstance(value, tuple) else (value,)
    if len(items) > MAX_RANK:
        raise ValueError(f"an index of {len(items)} entries is longer than any array's rank")
    out = []
    for item in items:
        if isinstance(item, slice):
            parts = (item.start, item.stop, item.step)
            if not all(p is None or _is_int(p) for p in parts):
                bad = next(p for p in parts if not (p is None or _is_int(p)))
                raise ValueError(f"a slice holds ints or None, got {_describe(bad)} {bad!r}")
            out.append(slice(*(None if p is None else int(p) for p in parts)))
        elif item is None or item is Ellipsis:
            out.append(item)
        elif _is_int(item):
            out.append(int(item))
        else:
            raise ValueError(f"an index holds ints, slices of ints, None and ... (basic "
                             f"slicing), got {_describe(item)}")
    return tuple(out)


def array(value: Any) -> np.ndarray:
    """A numpy array of booleans, integers or floats (never objects, strings or records)."""
    if not isinstance(value, np.ndarray) or value.dtype.name not in DTYPES:
        what = f"a {value.dtype} array" if isinstance(value, np.ndarray) else _describe(value)
        raise ValueError(f"wants a numeric numpy array, got {what}")
    return value


def tuple_of(kind: Kind, what: str) -> Kind:
    """The kind "a tuple of ``kind`` values" (a list is read as a tuple)."""

    def kinds(value: Any) -> tuple:
        if not isinstance(value, (tuple, list)) or len(value) > 4096:
            raise ValueError(f"wants a tuple of {what}, got {_describe(value)}")
        return tuple(kind(v) for v in value)

    kinds.__name__ = f"tuple_of_{getattr(kind, '__name__', 'values')}"
    return kinds


def instance_of(cls: type, what: str, check: Kind | None = None) -> Kind:
    """The kind "an instance of ``cls``" (``what`` names it in messages), also passing ``check``
    on it if given: a cond's branch is ``instance_of(mg.Graph, "an mg.Graph")``."""

    def kind(value: Any) -> Any:
        if not isinstance(value, cls):
            raise ValueError(f"wants {what}, got {_describe(value)}")
        if check is not None:
            check(value)
        return value

    kind.__name__ = f"instance_of_{cls.__name__}"
    return kind


def literal(value: Any) -> Any:
    """What an op without declared attrs may be given in a file: plain numbers, strings, bools,
    ``None``, and tuples or lists of them (so codegen can pass them on as ``repr`` text)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, (tuple, list)) and len(value) <= 1024:
        return type(value)(literal(v) for v in value)
    raise ValueError(f"an op that declares no attrs takes plain numbers, strings and tuples of "
                     f"them, got {_describe(value)}")


#: The minigraph error a wrong value of each kind raises.
ERRORS: dict[Kind, type[MinigraphError]] = {
    axis: ShapeError, permutation: ShapeError, shape: ShapeError, target_shape: ShapeError,
    pair: ShapeError, padding: ShapeError, index: ShapeError, positive_int: ShapeError,
    dtype_name: DTypeError, array: DTypeError,
}


def check(op: Any, attrs: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``attrs`` checked against ``op.attrs`` (each value in its canonical form).

    An op that declares its attrs gets exactly those (missing ones take the op's defaults);
    one that declares none (``attrs is None``, e.g. an op you registered without saying) gets
    only plain literals. ``where`` starts each message.
    """
    kinds = op.attrs
    out = {}
    for key, value in attrs.items():
        if not (isinstance(key, str) and key.isidentifier() and not keyword.iskeyword(key)):
            raise GraphError(f"{where}: attr names are Python identifiers, got {_short(key)}")
        if kinds is None:
            kind = literal
        elif key in kinds:
            kind = kinds[key]
        else:
            known = ", ".join(kinds) or "none"
            raise GraphError(f"{where}: {op.name} takes no attr {key!r} (its attrs: {known})")
        try:
            out[key] = kind(value)
        except ValueError as e:
            raise ERRORS.get(kind, GraphError)(f"{where}: attr {key}={_short(value)}: {e}") \
                from None
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
