"""The wire between the learner's kernel and the grader: what a report may hold, and how the
grader reaches into the kernel.

A probe's report (``probe.report``) leaves the kernel as JSON plus raw array bytes: never
pickle; at most ``MAX_REPORT_BYTES``, nested at most ``MAX_DEPTH`` deep, ``MAX_ITEMS`` values,
arrays of ``DTYPES`` only. ``decode`` reads one back, refusing anything else with a
``TransportError``; the probe uses ``decode_value`` too, so that the learner's notebook sees
exactly what the grader will. ``ANCHOR`` is the expression through which the grader's own code
(the report's taker in ``verdict.py``, the tamper probe in ``running/tamper.py``) gets the
interpreter's builtins in the kernel without trusting a name there.

Both sides import this module, and it imports nothing of the package: the probe (in the kernel)
and the verdict (in the grader) meet here, below them both.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: Most bytes of JSON one check may report (a report over it is refused in the kernel, and
#: refused again by the grader).
MAX_REPORT_BYTES = 4 * 2**20
#: Deepest nesting of lists, tuples and dicts in a report.
MAX_DEPTH = 24
#: The numpy dtypes an array in a report may have: numbers and booleans only (no objects,
#: no strings, no structured dtypes), sent little-endian.
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128")
#: At most this many values (scalars, list items, array elements count as one array) in a report.
MAX_ITEMS = 200_000


class TransportError(ValueError):
    """A report the grader refuses to read: too big, too deep, not the format, a bad array."""


#: The interpreter's builtins, found without a name lookup: functions of the import system,
#: made at start-up, keep the builtins they were made with (a learner's ``__builtins__`` cannot
#: change them). Three of them must agree and come from the frozen bootstrap, and ``exec`` must
#: be the C builtin, before the probe runs; else the expression fails (``None['exec']``) and the
#: probe is reported as failed. Only attribute access, ``is`` and ``==`` on strings are used.
FIRST = ("[c for c in ().__class__.__base__.__subclasses__() if c.__module__ == "
         "'_frozen_importlib' and c.__name__ == {!r}][0]")
ANCHOR = ("(lambda F: F[0] if F[0] is F[1] is F[2] and F[0]['exec'].__class__ is "
          "().__class__.__base__.__subclasses__.__class__ and F[0]['exec'].__name__ == 'exec' "
          "and F[3] == F[4] == F[5] == '<frozen importlib._bootstrap>' else None)(("
          f"{FIRST.format('BuiltinImporter')}.find_spec.__func__.__builtins__, "
          f"{FIRST.format('FrozenImporter')}.find_spec.__func__.__builtins__, "
          f"{FIRST.format('ModuleSpec')}.__init__.__builtins__, "
          f"{FIRST.format('BuiltinImporter')}.find_spec.__func__.__code__.co_filename, "
          f"{FIRST.format('FrozenImporter')}.find_spec.__func__.__code__.co_filename, "
          f"{FIRST.format('ModuleSpec')}.__init__.__code__.co_filename))")


def load_json(text: str | bytes) -> dict[str, Any]:
    """A JSON object of at most ``MAX_REPORT_BYTES``; TransportError otherwise."""
    if len(text) > MAX_REPORT_BYTES + 4096:
        raise TransportError(f"the report is {len(text) / 2**20:.1f} MB; at most "
                             f"{MAX_REPORT_BYTES / 2**20:.0f} MB")
    try:
        raw = json.loads(text)
    except RecursionError:
        raise TransportError("the report is nested too deeply") from None
    except (ValueError, TypeError) as e:
        raise TransportError(f"the report is not JSON ({str(e)[:100]})") from None
    if not isinstance(raw, dict):
        raise TransportError("the report is not a JSON object")
    return raw


def decode(text: str | bytes) -> dict[str, Any]:
    """A JSON object of encoded fields (``{"got": <encoded>, ...}``) as plain values."""
    return decode_fields(load_json(text))


def decode_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Encoded fields (name -> ``probe.encode`` output) as plain values, within the limits."""
    budget = [MAX_ITEMS]
    out = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise TransportError(f"a report field is named {str(name)[:40]!r}, not a name")
        out[name] = _decode(value, 0, budget)
    return out


def decode_value(raw: Any) -> Any:
    """One encoded value (``probe.encode``) as a plain value."""
    return _decode(raw, 0, [MAX_ITEMS])


def _decode(raw: Any, depth: int, budget: list[int]) -> Any:
    if depth > MAX_DEPTH + 2:
        raise TransportError(f"the report is nested more than {MAX_DEPTH} deep")
    budget[0] -= 1
    if budget[0] < 0:
        raise TransportError(f"the report holds more than {MAX_ITEMS} values")
    if raw is None or isinstance(raw, bool | int | float | str):
        return raw
    if isinstance(raw, list):
        return [_decode(v, depth + 1, budget) for v in raw]
    if not isinstance(raw, dict) or len(raw) != 1:
        raise TransportError("the report holds an object that is not a tagged value")
    (tag, body), = raw.items()
    if tag == "$tuple" and isinstance(body, list):
        return tuple(_decode(v, depth + 1, budget) for v in body)
    if tag == "$dict" and isinstance(body, list):
        out = {}
        for pair in body:
            if not isinstance(pair, list) or len(pair) != 2:
                raise TransportError("a $dict entry is not a [key, value] pair")
            key = _decode(pair[0], depth + 1, budget)
            try:
                out[key] = _decode(pair[1], depth + 1, budget)
            except TypeError:  # an unhashable key
                raise TransportError("a $dict key is not hashable") from None
        return out
    if tag == "$set" and isinstance(body, list):
        try:
            return frozenset(_decode(v, depth + 1, budget) for v in body)
        except TypeError:
            raise TransportError("a $set item is not hashable") from None
    if tag == "$complex" and isinstance(body, list) and len(body) == 2 \
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in body):
        return complex(body[0], body[1])
    if tag == "$array" and isinstance(body, list) and len(body) == 3:
        return _array(*body)
    raise TransportError(f"the report holds an unknown tag {str(tag)[:40]!r}")


def _array(dtype: Any, shape: Any, data: Any) -> np.ndarray:
    # numpy is imported here: probe.report decodes in the kernel, where a report of no array
    # needs no numpy
    import numpy as np

    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise TransportError(f"an array of dtype {str(dtype)[:40]!r}: only {', '.join(DTYPES)}")
    if not isinstance(shape, list) or len(shape) > 32 or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise TransportError("an array's shape is not a list of sizes")
    if not isinstance(data, str):
        raise TransportError("an array's bytes are not base64 text")
    try:
        raw = base64.b64decode(data.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise TransportError("an array's bytes are not base64") from None
    kind = np.dtype(dtype).newbyteorder("<")
    count = math.prod(shape)
    if count * kind.itemsize != len(raw):
        raise TransportError(f"an array of shape {tuple(shape)} and dtype {dtype} needs "
                             f"{count * kind.itemsize} bytes, got {len(raw)}")
    return np.frombuffer(raw, dtype=kind).astype(np.dtype(dtype)).reshape(shape)
