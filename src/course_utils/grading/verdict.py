"""The grader's side of a check: read what the probe reported, and judge it in this process.

A check cell in the probe-and-verdict format (``probe.py`` shows one) is cut into sections at two
marker lines, each at the start of a line::

    <probe: runs in the learner's kernel, ends by report(...)-ing plain data>
    ### REFERENCE  (optional: the expected values, reported in a clean kernel with the solutions)
    ### VERDICT    (assertions, run by the grader on the reported values)

The grader takes the sections from its canonical copy of the check (``solutions/``, or a
release's ``.course-checks/``), never from the learner's notebook or kernel, and

- sends only the probe to the kernel, then takes its report with a user expression of the same
  request (``report_expression``: the grader's own code, which calls no function of the
  kernel's), answered as an exception's message with a fresh nonce;
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
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from course_utils.grading.checks import _canonical, literal_assignments
from course_utils.grading.format import is_check, sections  # noqa: F401 (verdict.sections)
from course_utils.grading.transport import (  # noqa: F401 (verdict.decode & co. as before)
    ANCHOR,
    MAX_DEPTH,
    MAX_ITEMS,
    MAX_REPORT_BYTES,
    TransportError,
    decode,
    decode_fields,
    decode_value,
    load_json,
)


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

    @property
    def reports(self) -> frozenset[str] | None:
        """The names the probe's ``report(...)`` calls report (None: one of them reports
        ``**fields``, so any name): a report from the kernel may hold only these."""
        return reported_names(self.probe)


def reported_names(probe: str) -> frozenset[str] | None:
    """The keyword names of the ``report(...)`` calls in a probe's source (None when one
    passes ``**fields``).

    >>> sorted(reported_names("if x:\\n    report(a=1)\\nelse:\\n    report(a=2, b=3)\\n"))
    ['a', 'b']
    """
    names: set[str] = set()
    for node in ast.walk(ast.parse(probe)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "report":
            for keyword in node.keywords:
                if keyword.arg is None:
                    return None
                names.add(keyword.arg)
    return frozenset(names)


def specs(cells: list[Mapping[str, Any]]) -> dict[str, CheckSpec]:
    """The probe-and-verdict checks among ``cells`` (a canonical notebook's), by cell id."""
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


#: The code that takes a probe's report in the kernel (see ``report_expression``). It is sent
#: as text and run with the interpreter's own builtins; it calls no function of the kernel's
#: that a cell could replace: it reads ``course_utils.grading.probe._pending`` (which must be
#: a plain dict of plain strings, as ``report`` leaves it) with the base types' own methods,
#: and writes the JSON itself. A store that is not what ``report`` leaves there is answered
#: with ``TAMPERED`` and what is wrong.
TAMPERED = "course-grade: the report was tampered with: "
_TAKE = '''
def take(nonce, B):
    OBJ = ().__class__.__base__
    T, D, S, L = OBJ.__class__, {}.__class__, "".__class__, [].__class__
    boot = [c for c in OBJ.__subclasses__() if c.__module__ == "_frozen_importlib"
            and c.__name__ == "BuiltinImporter"][0]
    sys = D.get(boot.find_spec.__func__.__globals__, "sys")
    base = [c for c in OBJ.__subclasses__() if c.__module__ == "builtins"
            and c.__name__ == "BaseException"][0]
    error = [c for c in T.__subclasses__(base) if c.__module__ == "builtins"
             and c.__name__ == "Exception"][0]
    module = D.get(D.get(OBJ.__getattribute__(sys, "__dict__"), "modules"),
                   "course_utils.grading.probe")
    if T(module) is not T(sys):
        return error(TAMPERED + "course_utils.grading.probe is not the course's module")
    pending = D.get(OBJ.__getattribute__(module, "__dict__"), "_pending")
    if T(pending) is not D:
        return error(TAMPERED + "course_utils.grading.probe._pending was replaced (a "
                     + S(T(pending).__name__) + ", not a dict)")
    parts = []
    for name, text in L(D.items(pending)):
        if T(name) is not S or T(text) is not S or not S.isidentifier(name):
            return error(TAMPERED + "course_utils.grading.probe._pending holds something "
                         "report() never stores there")
        L.append(parts, '"' + name + '": ' + text)
    D.clear(pending)
    return error('{"nonce": "' + nonce + '", "fields": {' + ", ".join(parts) + "}}")
'''


def report_expression(nonce: str) -> str:
    """The user expression that takes a probe's report from the kernel (``_TAKE``), run with
    the interpreter's own builtins and answered as an exception's message with ``nonce``."""
    if not all(c in "0123456789abcdef" for c in nonce):
        raise ValueError("a report's nonce is hex digits")
    source = _TAKE + "\nraise take(nonce, __builtins__)\n"
    return (f"(lambda B: B['exec']({source!r}, {{'__builtins__': B, 'nonce': {nonce!r}, "
            f"'TAMPERED': {TAMPERED!r}}}))({ANCHOR})")


class Tampered(TransportError):  # noqa: N818 (what the grader found, not a bug)
    """A report whose store in the kernel was not what ``report`` leaves there."""


def parse_report(nonce: str, found: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields of a report from its user expression's answer; ``Tampered`` if its store
    was replaced, TransportError if it is not one, is altered, or breaks the limits."""
    if isinstance(found, Mapping) and found.get("status") == "error" \
            and str(found.get("evalue", "")).startswith(TAMPERED):
        raise Tampered(str(found["evalue"])[len(TAMPERED):][:300])
    if not isinstance(found, Mapping) or found.get("status") != "error" \
            or found.get("ename") != "Exception":
        raise TransportError("the check's report did not come back from the kernel")
    raw = load_json(str(found.get("evalue", "")))
    if raw.get("nonce") != nonce or not isinstance(raw.get("fields"), dict):
        raise TransportError("the check's report came back altered")
    return decode_fields(raw["fields"])


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
    problem = broadcast_problem({**dict(reported), **dict(reference or {})})
    if problem:  # issue 37: refused before any comparison allocates it
        return "failed", problem
    namespace: dict[str, Any] = {"__builtins__": __builtins__, **dict(reported),
                                 **dict(reference or {})}
    namespace.update(_helpers(context or Context()))
    try:
        code = compile(spec.verdict, f"<verdict of check {spec.cell_id}>", "exec")
        exec(code, namespace)  # noqa: S102 (the course's own canonical check, never a learner's)
    except AssertionError as e:
        text = _cut(str(e))
        return "failed", f"AssertionError: {text}" if text else "AssertionError"
    except Recorded as e:
        return "recorded", _cut(str(e))
    except NameError as e:
        return "error", (f"the check's probe reported no `{getattr(e, 'name', '?')}`, which "
                         "its verdict needs")
    except Exception as e:
        return "error", f"the check's verdict failed: {type(e).__name__}: {_cut(str(e))}"
    return "passed", ""


#: The longest message a verdict gives (a message may quote a reported value: a 3.4 MB one made
#: a 6.8 MB CSV, issue 37); the rest is cut with a note.
MAX_MESSAGE_CHARS = 4096
#: The most values a comparison of two reported (or expected) arrays may broadcast to, when
#: that is more than four times the larger of them: an (8000, 1) report against a (1, 8000)
#: expected array made ``np.isclose`` allocate 64 million values (623 MB) in the grader.
MAX_BROADCAST = 4_000_000


def _cut(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} ... ({len(text) - limit:,} more characters not shown)"


def broadcast_problem(fields: Mapping[str, Any]) -> str:
    """'' or why two of these arrays must not meet in a comparison: together they broadcast to
    more than ``MAX_BROADCAST`` values and four times the larger of them (a column against a
    row). Checked on shapes alone, before the verdict runs."""
    arrays = sorted(((int(np.prod(v.shape, dtype=object)), name, v.shape)
                     for name, v in fields.items() if isinstance(v, np.ndarray) and v.ndim),
                    key=lambda item: -item[0])
    for i, (size, name, shape) in enumerate(arrays):
        for other_size, other, other_shape in arrays[i + 1:]:
            if size * other_size <= MAX_BROADCAST:
                break  # sorted: every later one is smaller
            try:
                both = np.broadcast_shapes(shape, other_shape)
            except ValueError:
                continue
            values = int(np.prod(both, dtype=object))
            if values > MAX_BROADCAST and values > 4 * size:
                return (f"`{name}` has shape {tuple(shape)} and `{other}` shape "
                        f"{tuple(other_shape)}: compared, they would broadcast to {tuple(both)} "
                        f"({values:,} values); give the shape the exercise asks for")
    return ""
