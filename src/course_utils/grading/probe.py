"""The kernel side of a check: report what the learner's code returned, as plain data.

A check cell in the probe-and-verdict format has up to three sections::

    # Check 02.1: relu on values worked out by hand.
    from course_utils.grading.probe import report

    x = run_rng(1).normal(size=5)            # inputs: built here, from the run's seed
    report(got=relu(x))                      # the call of the learner's code; plain data out
    ### REFERENCE (the expected values: worked out with the solutions, kept by the instructor)
    report(want=np.maximum(x, 0.0))
    ### VERDICT (run by the grader, on the values reported above)
    assert np.allclose(got, want), f"relu of {x.size} values: expected {want}, got {got}"

When ``course-grade`` grades a notebook, only the first section (the *probe*) runs in the
learner's kernel. What it ``report``\\ s leaves the kernel as JSON plus raw array bytes (never
pickle; sizes, nesting and dtypes bounded) and is read by the grader (``verdict.py``). The
reference section ran once, with the solutions, in a clean kernel: its reports are the answer
key (``key.py``), which the instructor keeps. The verdict runs in the grader's own process, on
the reported values and the key's. So the expected values, the tolerances and a hidden check's
logic never enter the learner's kernel, and nothing done there can change them.

Run in Jupyter, the cell runs top to bottom in the kernel, as any cell does: ``report`` binds each
name to the plain value it reported, so the verdict sees there what the grader would see.

Predictions (``prediction``, ``predicted``) are read by the grader from the notebook's source;
in the kernel these only say what was recorded (see ``verdict.py``).

**The run's seed.** A probe builds its inputs from ``run_rng(k)`` (a numpy Generator) or
``run_seed(k)`` (an int in [0, 2**32), for helpers that take a seed: ``random_graph(seed)``,
``torch.manual_seed``), ``k`` naming the stream (an int or a string; one per check, or per
input of a check). Both come from the seed the grader drew for this grading (``course-grade``
draws one per run, with ``secrets``; ``--seed N`` repeats a grading) and gave the kernel in its
environment (``SEED_VARIABLE``) when it started it; the answer key's clean kernel gets the same
seed, so the reference section sees the same inputs as the probe. Run in Jupyter, with no seed
given, they use ``DEFAULT_SEED``. Nothing the kernel does to its seed or its random generators
is believed: a kernel that changes them gets other inputs than the reference had, and its
outputs do not match.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import sys
from typing import Any

from course_utils.grading.transport import DTYPES, MAX_DEPTH, MAX_REPORT_BYTES, decode_value

__all__ = ["MAX_REPORT_BYTES", "DTYPES", "DEFAULT_SEED", "SEED_VARIABLE", "dumps", "encode",
           "predicted", "prediction", "report", "run_rng", "run_seed"]

_pending: dict[str, str] = {}  # name -> its encoded value (JSON), for the grader to take
_cell: list[Any] = [None]  # the execution count the pending reports belong to


#: The environment variable that carries the grading run's seed into a kernel (``kernel.py``
#: sets it from ``NotebookRun``'s seed), and the seed used when it is not set (Jupyter).
SEED_VARIABLE = "COURSE_GRADE_SEED"
DEFAULT_SEED = 0


def base_seed() -> int:
    """The run's seed: ``SEED_VARIABLE`` when the grader set it, else ``DEFAULT_SEED``."""
    text = os.environ.get(SEED_VARIABLE, "").strip()
    return int(text) if text.isdigit() else DEFAULT_SEED


def run_seed(k: int | str = 0) -> int:
    """An int in [0, 2**32) for stream ``k`` of this run: the same for the same run seed and
    ``k``, unrelated for another of either. For helpers that take a seed.

    >>> run_seed(1) == run_seed(1) != run_seed(2)
    True
    """
    digest = hashlib.sha256(f"course-grade:{base_seed()}:{k}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def run_rng(k: int | str = 0):  # numpy is imported only when a probe needs it
    """A numpy Generator for stream ``k`` of this run: ``np.random.default_rng(run_seed(k))``."""
    import numpy as np

    return np.random.default_rng(run_seed(k))


class ReportError(TypeError):
    """A check reported something that is not plain data (a course bug, or an odd answer)."""


def encode(value: Any, where: str = "value", depth: int = 0) -> Any:
    """``value`` as JSON-ready plain data, tagged where JSON has no type of its own.

    None, bool, int, float, str stay (subclasses become the base type, read with the base
    type's own methods, so an overridden ``__eq__`` or ``__float__`` is never called);
    ``{"$tuple": [...]}``, ``{"$dict": [[k, v], ...]}``, ``{"$set": [...]}``,
    ``{"$complex": [re, im]}``, ``{"$array": [dtype, shape, base64 bytes]}``. Anything else
    (a learner's object, a graph node) raises ``ReportError``: turn it into plain values first.
    """
    if depth > MAX_DEPTH:
        raise ReportError(f"report: {where} is nested more than {MAX_DEPTH} deep")
    if value is None or value is True or value is False:
        return value
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, complex):
        return {"$complex": [complex.__complex__(value).real, complex.__complex__(value).imag]}
    if isinstance(value, list):
        return [encode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(list.copy(value))]
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, f"{where}[{i}]", depth + 1)
                           for i, v in enumerate(tuple.__iter__(value))]}
    if isinstance(value, dict):
        return {"$dict": [[encode(k, f"{where} key", depth + 1),
                           encode(v, f"{where}[{k!r}]", depth + 1)]
                          for k, v in dict.items(dict(value))]}
    if isinstance(value, set | frozenset):
        return {"$set": [encode(v, f"{where} item", depth + 1) for v in frozenset(value)]}
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.generic):
        value = np.asarray(value)
        kind = value.dtype.kind
        if kind == "b":
            return bool(value)
        if kind in "iu":
            return int(value)
        if kind == "f":
            return float(value)
        if kind == "c":
            return {"$complex": [float(value.real), float(value.imag)]}
        raise ReportError(f"report: {where} is a numpy {value.dtype} scalar; report numbers")
    if np is not None and isinstance(value, np.ndarray):
        array = np.asarray(value)  # a subclass becomes a plain ndarray
        if array.dtype.name not in DTYPES:
            raise ReportError(f"report: {where} is an array of dtype {array.dtype}; report "
                              f"arrays of numbers or booleans ({', '.join(DTYPES)})")
        little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
        return {"$array": [array.dtype.name, list(array.shape),
                           base64.b64encode(little.tobytes()).decode("ascii")]}
    raise ReportError(f"report: {where} is a {type(value).__name__}, not plain data; report "
                      "numbers, strings, booleans, None, lists, tuples, dicts or numpy arrays "
                      "(e.g. float(got), np.asarray(got, dtype=float), [n.name for n in order])")


def _shell() -> Any:
    module = sys.modules.get("IPython")
    return module.get_ipython() if module is not None else None  # type: ignore[attr-defined]


def report(**fields: Any) -> None:
    """Report each keyword's value as plain data for the check's verdict.

    The value is encoded at once (a later change to the object changes nothing) and bound, as
    the plain value the grader will see, to the same name in the calling cell's namespace.
    The JSON text is written here (``dumps``), not by the ``json`` module, whose encoder a cell
    could replace; the grader takes the texts with code of its own, which trusts no function
    of the kernel's (``verdict.report_expression``).
    """
    ip = _shell()
    count = getattr(ip, "execution_count", None)
    if _cell[0] != count:  # a new cell: what an earlier cell reported is no longer wanted
        _pending.clear()
        _cell[0] = count
    caller = sys._getframe(1).f_globals

    for name, value in fields.items():
        encoded = encode(value, f"`{name}`")
        _pending[name] = dumps(encoded)
        if sum(len(t) for t in _pending.values()) > MAX_REPORT_BYTES:
            del _pending[name]
            raise ReportError(f"report: `{name}` makes this check's report larger than "
                              f"{MAX_REPORT_BYTES // 2**20} MB; report a smaller value")
        caller[name] = decode_value(encoded)  # plain: as the grader sees it


def dumps(encoded: Any) -> str:
    r"""``encode``'s output as JSON text (ASCII; NaN and the infinities as ``json`` writes
    them), made with the base types' own methods only.

    >>> dumps({"$tuple": [1, 2.5, "é\n", None, True, float("nan")]})
    '{"$tuple": [1, 2.5, "\\u00e9\\u000a", null, true, NaN]}'
    """
    kind = type(encoded)
    if encoded is None:
        return "null"
    if kind is bool:
        return "true" if encoded else "false"
    if kind is int:
        return int.__repr__(encoded)
    if kind is float:
        if encoded != encoded:
            return "NaN"
        if encoded in (math.inf, -math.inf):
            return "Infinity" if encoded > 0 else "-Infinity"
        return float.__repr__(encoded)
    if kind is str:
        return _quote(encoded)
    if kind is list:
        return "[" + ", ".join([dumps(v) for v in encoded]) + "]"
    if kind is dict:
        return "{" + ", ".join([_quote(k) + ": " + dumps(v) for k, v in encoded.items()]) + "}"
    raise ReportError(f"report: cannot write a {kind.__name__} as JSON")


def _quote(text: str) -> str:
    """A JSON string literal, ASCII only (every other character as a \\u escape)."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
    return '"' + "".join(out) + '"'


# -- predictions, as a learner running the notebook sees them -------------------------------------


def prediction(name: str) -> Any:
    """The literal the learner wrote for ``name`` (from the cells run so far); AssertionError
    if there is none, or it is not a literal. The grader reads it from the notebook instead."""
    import ast

    from course_utils.grading.checks import _find_source, _history

    node = _find_source(name, _history())
    if node is None:
        raise AssertionError(f"`{name}` is not set: write your prediction as `{name} = ...`")
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise AssertionError(f"`{name}` must be a value you write down (a number, a string, "
                             f"True/False), not computed: found `{ast.unparse(node)}`") from None


def predicted(*names: str) -> None:
    """In the kernel: say that the predictions are recorded (each must be a literal). The
    grader compares them with the course's answers in its own process; this notebook does not
    hold them."""
    for name in names:
        prediction(name)
    print(f"your predictions ({', '.join(names)}) are recorded; course-grade compares them "
          "with the course's answers. Now run the measurement below.")
