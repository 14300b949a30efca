"""The grader's side of a check: read what the probe reported, and judge it in this process.

A check cell in the probe-and-verdict format (``probe.py`` shows one) is cut into sections at two
marker lines, each at the start of a line::

    <probe: runs in the learner's kernel, ends by report(...)-ing plain data>
    ### REFERENCE  (optional: the expected values, reported in a clean kernel with the solutions)
    ### VERDICT    (assertions, run by the grader on the reported values)

The grader takes the sections from its canonical copy of the check (``solutions/``, or a
release's ``.course-checks/``), never from the learner's notebook or kernel, and

- sends only the probe to the kernel, then takes its report with a user expression of the same
  request (``report_expression``), answered as an exception's message with a fresh nonce;
- decodes it here (``decode``): JSON plus raw array bytes with their dtype (numbers and booleans
  only) and shape checked; never pickle; at most ``MAX_REPORT_BYTES``, nested at most
  ``MAX_DEPTH`` deep;
- takes the expected values from the answer key (``key.py``); with no key (a learner's release)
  it runs the reference section in the learner's own kernel, and says so;
- runs the verdict here (``judge``), with the grader's own numpy, on a namespace holding only the
  reported names, ``np``, ``math`` and the prediction helpers. An ``AssertionError`` is a failed
  check, with its message; any other error is an ``error`` naming the verdict.

Predictions: ``predicted("a", "b")`` in a verdict compares the literals the learner wrote for
``a`` and ``b`` (read with ``ast`` from the notebook's code cells before the check, never from the
kernel) with the literals of the solutions notebook (in the key). Without a key the check is
``recorded``: the instructor grades it.
"""

from __future__ import annotations

import ast
import base64
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from course_utils.grading.checks import _canonical, literal_assignments
from course_utils.grading.probe import DTYPES, MAX_DEPTH, MAX_REPORT_BYTES

REFERENCE = "### REFERENCE"
VERDICT = "### VERDICT"
#: At most this many values (scalars, list items, array elements count as one array) in a report.
MAX_ITEMS = 200_000


class TransportError(ValueError):
    """A report the grader refuses to read: too big, too deep, not the format, a bad array."""


class Recorded(Exception):  # noqa: N818 (not an error: the check is left to the instructor)
    """A prediction check graded without the answer key: recorded, for the instructor."""


# -- sections ------------------------------------------------------------------------------------


@dataclass
class CheckSpec:
    """One check cell in the probe-and-verdict format, from the canonical notebook."""

    cell_id: str
    source: str  # the whole cell, as the canonical notebook has it
    probe: str
    reference: str  # "" when the check needs no expected values (a property check)
    verdict: str


def sections(source: str) -> tuple[str, str, str] | None:
    """(probe, reference, verdict) of a check cell, or None for a check in the old format.

    Raises ValueError for markers out of order, repeated, or indented.

    >>> sections("report(got=1)\\n### VERDICT\\nassert got == 1")
    ('report(got=1)\\n', '', 'assert got == 1')
    """
    lines = source.splitlines(keepends=True)
    marks: dict[str, int] = {}
    for n, line in enumerate(lines):
        text = line.strip()
        for marker in (REFERENCE, VERDICT):
            if text.startswith(marker):
                if line[0].isspace():
                    raise ValueError(f"line {n + 1}: {marker} must start the line")
                if marker in marks:
                    raise ValueError(f"line {n + 1}: a second {marker}")
                marks[marker] = n
    if VERDICT not in marks:
        if REFERENCE in marks:
            raise ValueError(f"a {REFERENCE} section needs a {VERDICT} section after it")
        return None
    v = marks[VERDICT]
    r = marks.get(REFERENCE, v)
    if r > v:
        raise ValueError(f"{REFERENCE} must come before {VERDICT}")
    probe = "".join(lines[:r])
    reference = "".join(lines[r + 1:v]) if REFERENCE in marks else ""
    return probe, reference, "".join(lines[v + 1:])


def specs(cells: list[Mapping[str, Any]]) -> dict[str, CheckSpec]:
    """The probe-and-verdict checks among ``cells`` (a canonical notebook's), by cell id."""
    from course_utils.grading.format import is_check

    found = {}
    for cell in cells:
        if not is_check(cell) or not cell.get("id"):
            continue
        source = str(cell.get("source", ""))
        cut = sections(source)
        if cut is not None:
            found[str(cell["id"])] = CheckSpec(str(cell["id"]), source, *cut)
    return found


# -- transport -----------------------------------------------------------------------------------


def report_expression(nonce: str) -> str:
    """The user expression that takes a probe's report from the kernel (see ``probe._take``),
    with the interpreter's own builtins."""
    from course_utils.grading.tamper import _ANCHOR

    return (f"(lambda B: B['__import__']('course_utils.grading.probe', None, None, "
            f"['_take'])._take({nonce!r}))({_ANCHOR})")


def parse_report(nonce: str, found: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields of a report from its user expression's answer; TransportError if it is not
    one, is altered, or breaks the limits."""
    if not isinstance(found, Mapping) or found.get("status") != "error" \
            or found.get("ename") != "Exception":
        raise TransportError("the check's report did not come back from the kernel")
    raw = load_json(str(found.get("evalue", "")))
    if raw.get("nonce") != nonce or not isinstance(raw.get("fields"), dict):
        raise TransportError("the check's report came back altered")
    return decode_fields(raw["fields"])


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


# -- the verdict ---------------------------------------------------------------------------------


@dataclass
class Context:
    """What a verdict may use besides the reported values: the learner's prediction literals
    (name -> expression, read from their code cells), and the key's (None: no key)."""

    learner: dict[str, ast.expr] = field(default_factory=dict)
    key: dict[str, Any] | None = None


def learner_literals(sources: list[str]) -> dict[str, ast.expr]:
    """Top-level assignments in ``sources`` (code cells in order): the last one of each name."""
    found: dict[str, ast.expr] = {}
    for source in sources:
        found.update(literal_assignments(source))
    return found


def _helpers(context: Context) -> dict[str, Any]:
    def prediction(name: str) -> Any:
        node = context.learner.get(name)
        if node is None:
            raise AssertionError(f"`{name}` is not set: write your prediction as "
                                 f"`{name} = ...` in your answer cell")
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise AssertionError(f"`{name}` must be a value you write down (a number, a "
                                 f"string, True/False), not computed: found "
                                 f"`{ast.unparse(node)[:200]}`") from None

    def predicted(*names: str) -> None:
        problems, wrong = [], []
        values = {}
        for name in names:
            try:
                values[name] = prediction(name)
            except AssertionError as e:
                problems.append(str(e))
        if context.key is None:
            if problems:
                raise AssertionError("\n".join(problems))
            raise Recorded(f"your predictions ({', '.join(f'`{n}`' for n in names)}) are "
                           "recorded; this copy of the course has no answer key, so your "
                           "instructor grades them. The measurement after the check shows "
                           "what really happens.")
        for name, value in values.items():
            if name not in context.key:
                raise KeyError(f"the answer key has no prediction `{name}`")
            try:
                right = _canonical(value) == _canonical(context.key[name])
            except TypeError as e:
                problems.append(f"`{name}`: {e}")
                continue
            if not right:
                wrong.append(f"`{name}`")
        lines = []
        if wrong:
            n_right = len(names) - len(problems) - len(wrong)
            lines.append(f"{n_right} of {len(names)} predictions right; not right: "
                         f"{', '.join(wrong)}. Run the measurement below and read why.")
        lines.extend(problems)
        if lines:
            raise AssertionError("\n".join(lines))

    def quiet(*_args: Any, **_kwargs: Any) -> None:
        """A verdict's ``print`` (for the learner running the cell in Jupyter) prints nothing
        in the grader."""

    return {"np": np, "math": math, "prediction": prediction, "predicted": predicted,
            "print": quiet}


def judge(spec: CheckSpec, reported: Mapping[str, Any], reference: Mapping[str, Any] | None,
          context: Context | None = None) -> tuple[str, str]:
    """Run a check's verdict here: ("passed", ""), ("failed", message), ("error", message) or
    ("recorded", message). ``reported``: the probe's fields from the learner's kernel;
    ``reference``: the expected fields (the key's, or the same kernel's without a key)."""
    namespace: dict[str, Any] = {"__builtins__": __builtins__, **dict(reported),
                                 **dict(reference or {})}
    namespace.update(_helpers(context or Context()))
    try:
        code = compile(spec.verdict, f"<verdict of check {spec.cell_id}>", "exec")
        exec(code, namespace)  # noqa: S102 (the course's own canonical check, never a learner's)
    except AssertionError as e:
        text = str(e)
        return "failed", f"AssertionError: {text}" if text else "AssertionError"
    except Recorded as e:
        return "recorded", str(e)
    except NameError as e:
        return "error", (f"the check's probe reported no `{getattr(e, 'name', '?')}`, which "
                         "its verdict needs")
    except Exception as e:
        return "error", f"the check's verdict failed: {type(e).__name__}: {e}"
    return "passed", ""
