"""Tamper detection: is the kernel still the one the checks were written for?

A check cell trusts what it does not control: that ``assert`` raises, that a raised exception
reaches the grader as an error, that ``np.allclose`` is numpy's, that ``In`` holds what the
learner ran. Code in a submission can change each of them from inside the kernel: wrap
``do_execute`` or the session's ``send`` so an error is reported as ``ok``, patch
``ExecutionResult.success``, register a hook that clears the error, swap ``__builtins__`` so the
checks import fake modules, set a trace function that jumps over ``assert`` lines...

So, around every check cell, the grader runs silent requests (``silent=True,
store_history=False``: nothing in ``In``, ``Out`` or ``_``). The *probe*
(``probe_source.py``) runs as a user expression, with the interpreter's own builtins (found from
a class made at start-up, not from the learner's namespace), and returns a fingerprint:

- **groups**: every module of the machinery (IPython, ipykernel, jupyter_client, zmq, traitlets,
  tornado, asyncio, importlib, traceback, ast, numpy, math, the course's package, builtins, ...)
  and every class defined in it, entry by entry: functions, classes and descriptors by identity
  (a patch changes it), data by type; the same for the shell, the kernel and the machinery
  objects they hold (session, streams, compiler, display hooks, formatters). Sent as one hash per
  group; when a hash differs, the grader asks for that group's entries and names what changed;
- **hooks**: ``sys.excepthook``/``displayhook``/``breakpointhook``, trace and profile functions
  (also threading's), the import system's ``meta_path`` and ``path_hooks``, the thread switch
  interval, and whether ``__builtins__`` and ``sys`` are the interpreter's own;
- **IPython**: input and AST transformers, the custom exception handler, event callbacks (a
  callback added later must be a genuine package function, not one made in a cell whatever file
  name its code claims), torch's comparison helpers once loaded (genuine, and never changed);
  names in the namespace that shadow ``np``/``torch``/... or a builtin a check calls;
- **the call stack** that reached the probe (code objects from ``dispatch_shell`` down): a wrapper
  around ``do_execute`` or ``user_expressions`` that hides itself from the fingerprint still
  shows here;
- **the last cell**: ``sys.last_value`` and the errors of ``last_execution_result``, as IPython
  recorded them. The probe taken right after a check (a user expression of the check's own
  request) must find no error in the check's result and ``sys.last_value`` still the canary's
  exception from just before the check: a check that raised but came back ``ok`` is caught even
  when nothing in the fingerprint changed;
- **the input history**: IPython's ``input_hist_raw`` against what the grader sent.

The *canary*, ``assert False, <nonce>``, must fail with exactly that ``AssertionError``: if it
"passes", assertions or errors no longer reach the grader, whatever did it. The nonce is fresh
for every run and unknown to the kernel until the request arrives.

The probe's answer comes back as the message of an exception (IPython's ``_user_obj_error``),
not through the display formatter, where a registered printer could rewrite it.

This raises the bar; it is not a proof: code in the kernel runs with the same rights as the
probe (``ctypes`` can change anything). Run untrusted submissions with ``--sandbox`` so that at
least nothing outside the kernel can be touched.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course_utils.grading.transport import ANCHOR as _ANCHOR

_SOURCE = (Path(__file__).with_name("probe_source.py").read_text(encoding="utf-8")
           + "\nraise probe(nonce, mode, want, known, __builtins__)\n")
def probe_expression(nonce: str, mode: str = "check", want: Iterable[str] = (),
                     known: dict[str, int] | None = None) -> str:
    """The user expression that runs the probe (see the module docstring). ``known``: the
    quick hashes of the last probe (``Baseline.quick``), to skip modules that did not change."""
    return (f"(lambda B: B['exec']({_SOURCE!r}, {{'__builtins__': B, 'nonce': {nonce!r}, "
            f"'mode': {mode!r}, 'want': {sorted(want)!r}, 'known': {dict(known or {})!r}}}))"
            f"({_ANCHOR})")


def gc_expression(on: bool) -> str:
    """The user expression that turns the kernel's automatic garbage collection off (right
    before a check) or back on (after it), with the interpreter's own builtins. While a check
    and its probe run, no collection can run a submission's ``__del__``, finalizer or weakref
    callback in between (one that patched numpy for the check and put it back for the probe);
    the probe after the check reports whether the check turned collection back on."""
    return f"(lambda B: B['__import__']('gc').{'enable' if on else 'disable'}())({_ANCHOR})"


def parse(nonce: str, reply_status: str, expressions: dict[str, Any]
          ) -> tuple[dict[str, Any] | None, str]:
    """The fingerprint from the probe's execute reply, or (None, what went wrong)."""
    if reply_status != "ok":
        return None, f"the grader's probe did not run ({reply_status})"
    found = expressions.get("probe", {})
    if found.get("status") != "error" or found.get("ename") != "Exception":
        if found.get("status") == "error":
            first = str(found.get("evalue", "")).strip().splitlines()[:1]
            return None, (f"the grader's probe failed with {found.get('ename', '?')}: "
                          f"{first[0][:200] if first else ''}")
        return None, "the grader's probe came back altered"
    try:
        data = json.loads(found.get("evalue", ""))
    except (ValueError, TypeError):
        return None, "the grader's probe came back altered"
    if not isinstance(data, dict) or data.get("nonce") != nonce:
        return None, "the grader's probe came back altered"
    return data, ""


def canary_source(nonce: str) -> str:
    """A cell that must fail with ``AssertionError: <nonce>``."""
    return f"assert False, {nonce!r}"


def check_canary(nonce: str, status: str, ename: str, evalue: str) -> str:
    """'' if the canary failed as it must, else what that says about the kernel."""
    if status == "ok":
        return ("a failing assertion was reported as passing: assertions or errors no longer "
                "reach the grader (asserts removed, cells blanked, or errors swallowed)")
    if status != "error":
        return f"the grader's canary did not finish ({status})"
    if ename != "AssertionError" or evalue != nonce:
        return f"a failing assertion came back as {ename}: {evalue[:100]!r}"
    return ""


def check_last(now: dict[str, Any], before: dict[str, Any] | None) -> str:
    """'' if the kernel recorded no error for the check that was just reported as passing.

    ``before``: ``sys.last_value`` (the last exception IPython showed) before the check, as
    ``{"canary": nonce}`` (the canary's) or ``{"id": ...}`` (from the probe before it); it must
    be the same after a check that passed. None: not known.
    """
    last = now.get("last", {})
    if last.get("errors"):
        return ("a check that raised an exception was reported as passing (IPython recorded "
                f"{' and '.join(last['errors'])})")
    if before and ("canary" in before and last.get("canary") != before["canary"]
                   or "id" in before and last.get("id") != before["id"]):
        return ("a check that raised an exception was reported as passing (IPython showed "
                f"a {last.get('type')} during the check)")
    return ""


@dataclass
class Baseline:
    """The fingerprint of a fresh kernel, before any learner code ran."""

    data: dict[str, Any]
    details: dict[str, dict[str, str]]
    accepted: dict[str, int]  # group -> the hash known to hold no tampering
    late: dict[str, str] = field(default_factory=dict)  # first-seen tokens of late helpers
    quick: dict[str, int] = field(default_factory=dict)  # module -> its quick hash, last probe
    last: dict[str, int] = field(default_factory=dict)  # module -> its hash, last probe

    @classmethod
    def of(cls, data: dict[str, Any]) -> Baseline:
        groups = dict(data.get("groups", {}))
        return cls(data, data.get("details", {}), dict(groups), quick=dict(data.get("quick", {})),
                   last=groups)


#: Entries whose changes are named, for a learner, in words.
_LABELS = {
    "o:ip ast_transformers": "IPython's AST transformers (get_ipython().ast_transformers)",
    "o:ip showtraceback": "IPython's traceback display (showtraceback)",
    "o:ip _showtraceback": "IPython's traceback display (_showtraceback)",
    "o:ip CustomTB": "IPython's custom exception handler (set_custom_exc)",
    "ipython.custom_exceptions": "IPython's custom exception handler (set_custom_exc)",
    "ipython.ast_transformers": "IPython's AST transformers (get_ipython().ast_transformers)",
    "ipython.input_transformers_cleanup": "IPython's input transformers "
                                          "(input_transformers_cleanup)",
    "ipython.input_transformers_post": "IPython's input transformers (input_transformers_post)",
}


def _label(group: str, key: str) -> str:
    key = key.removeprefix("override:")
    if f"{group} {key}" in _LABELS:
        return _LABELS[f"{group} {key}"]
    key = key.removeprefix("trait:")
    if group == "m:builtins":
        return f"the builtin `{key}`"
    if group.startswith("m:"):
        return f"{group[2:]}.{key}"
    head, _, rest = group[2:].partition(".")
    path = ".".join(["get_ipython()" if head == "ip" else "get_ipython().kernel"]
                    + ([rest] if rest else []))
    if head == "ip":
        return f"IPython's {key} ({path}.{key})" if key else f"IPython's {path}"
    return f"{path}.{key}" if key else path


def _is_data(token: str | None) -> bool:
    return token is None or token.startswith(("d", "M"))


def diff_entries(group: str, before: dict[str, str], after: dict[str, list]) -> list[str]:
    """The keys of a group whose change can matter (``after``: key -> [token, genuine]).

    In a module (and its classes): a function, class or descriptor replaced, added or removed,
    unless the new one is genuine package code (torch, for one, patches ``inspect.getfile`` as
    it loads). In an object (the shell, the kernel, the session, ...): a function it held
    replaced by one that is not genuine, its class changed, or any attribute that hides one of
    its class's (``kernel.do_execute = ...``). Data (counters, caches, parents) may change, but
    not into an object of a class made in a cell, nor, in ``course_utils.grading``, into
    anything of another type.
    """
    changed = []
    instance = group.startswith("o:")
    grading = group.startswith("m:course_utils.grading")
    for key, (token, genuine) in after.items():
        old = before.get(key)
        if old == token:
            continue
        if key == "__class__" or key.startswith("override:") and not (
                _is_data(token) and _is_data(old)):
            changed.append(key)
        elif not instance and old is not None and _is_data(token) and _is_data(old) \
                and (grading or not genuine):
            # Module data of another type: in the grader's own modules, any (the store a
            # report passes through); elsewhere, an object of a class made in a cell (a JSON
            # encoder whose ``encode`` lies).
            changed.append(key)
        elif genuine:
            continue
        elif instance:
            if old is not None and not _is_data(old):
                changed.append(key)
        elif not _is_data(token) or old is not None and not _is_data(old):
            changed.append(key)
    if not instance:
        changed += [key for key, token in before.items()
                    if key not in after and not _is_data(token)]
    return changed


def compare(baseline: Baseline, now: dict[str, Any],
            fetch: Callable[[list[str]], dict[str, dict[str, str]] | None]) -> list[str]:
    """What changed since the baseline, one readable line each (empty: nothing).

    ``fetch(groups)`` asks the kernel for the entries of groups whose hash differs.
    """
    base, changed = baseline.data, []
    groups = dict(now.get("groups", {}))
    for group, quick in now.get("quick", {}).items():  # not walked: unchanged since last time
        if group not in groups and baseline.quick.get(group) == quick and group in baseline.last:
            groups[group] = baseline.last[group]
    baseline.quick.update(now.get("quick", {}))
    baseline.last.update(groups)
    differ = []
    for group, value in baseline.accepted.items():
        if group not in groups:
            changed.append(f"{group[2:]} (no longer in sys.modules)" if group.startswith("m:")
                           else f"{_label(group, '')} (replaced)")
        elif groups[group] != value:
            differ.append(group)
    if differ:
        entries = fetch(differ)
        if entries is None:
            changed += [f"{g[2:]} (changed)" for g in differ]
        else:
            for group in differ:
                found = diff_entries(group, baseline.details.get(group, {}),
                                     entries.get(group, {}))
                if found:
                    changed += [_label(group, key) for key in found]
                else:
                    baseline.accepted[group] = groups[group]
    for key, value in now.get("sys", {}).items():
        if key in ("builtins", "sys"):
            if value != "genuine":
                changed.append(f"`{key}` (your namespace's __builtins__, or sys.modules, was "
                               "replaced)")
        elif value != base.get("sys", {}).get(key):
            changed.append(f"sys.{key}" if not key.startswith(("threading", "gc.")) else key)
    for key, value in now.get("explicit", {}).items():
        if value != base.get("explicit", {}).get(key):
            changed.append(_LABELS.get(key, f"IPython's {key[8:]}"))
    for name, hooks in now.get("importers", {}).items():
        known = {token for token, _ in base.get("importers", {}).get(name, [])}
        if any(token not in known and not genuine for token, genuine in hooks):
            changed.append(f"sys.{name} (an import hook that is not a library's)")
    for name, found in now.get("callbacks", {}).items():
        known = {token for token, _ in base.get("callbacks", {}).get(name, [])}
        if any(token not in known and not genuine for token, genuine in found):
            changed.append(f"{name} (a callback the interpreter calls inside any code, "
                           "the checks' too)")
    for event, callbacks in now.get("events", {}).items():
        known = {token for token, _ in base.get("events", {}).get(event, [])}
        if any(token not in known and not genuine for token, genuine in callbacks):
            changed.append(f"IPython's {event} hooks (get_ipython().events)")
    for key, (token, genuine) in now.get("late", {}).items():
        first = baseline.late.setdefault(key, token)
        if not genuine or token != first:
            changed.append(key)
    for found in now.get("liars", []):
        name, _, what = found.rpartition(" ")
        if what == "finalizer":
            changed.append(f"your function {name} is a weakref.finalize callback: the "
                           "interpreter would run it inside a check")
        elif what == "__del__":
            changed.append(f"your class {name} defines __del__: the interpreter runs it "
                           "inside whatever code runs when an object is freed, a check's too")
        else:
            changed.append(f"your class {name or found} defines __array_function__: numpy "
                           "would let it answer a check's comparison for itself")
    for name in now.get("threads", []):
        changed.append(f"a thread your code started ({name}) was running during the check")
    for name, what in now.get("namespace", {}).items():
        changed.append(f"`{name}` in your namespace {what}")
    if now.get("stack") != base.get("stack"):
        extra = [f for f in now.get("stack", []) if f not in base.get("stack", [])]
        where = extra[0].split("@")[0] if extra else "?"
        changed.append(f"the functions that run a cell were wrapped (`{where}` stands between "
                       "the kernel and the grader's probe)")
    return sorted(dict.fromkeys(changed))


#: The longest cell whose input transformation the grader repeats as IPython does it: IPython
#: tokenizes the whole cell again after each escape it rewrites (``%magic``, ``!shell``,
#: ``x?``; up to 500 times), so a 300 kB cell of them cost the grader 45 CPU-s (issue 37). A
#: longer cell is transformed a line at a time (``_transform_lines``), which costs one pass.
MAX_TRANSFORM_CHARS = 64 * 1024


@functools.lru_cache(maxsize=4096)
def _transform(source: str) -> str:
    """What IPython stores in ``In`` for a cell (its input transformations, e.g. magics); for a
    cell longer than ``MAX_TRANSFORM_CHARS``, ``_transform_lines``'s likeness of it."""
    if len(source) > MAX_TRANSFORM_CHARS and not source.lstrip().startswith("%%"):
        return _transform_lines(source)
    return _transform_whole(source)


def _transform_whole(source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    global _MANAGER
    if _MANAGER is None:
        _MANAGER = TransformerManager()
    try:
        return _MANAGER.transform_cell(source).rstrip("\n")
    except Exception:  # IPython stores the cell as it is when it cannot transform it
        return source.rstrip("\n")


def _transform_lines(source: str) -> str:
    """Each line of ``source`` transformed by itself (a line with no escape character as it
    is): what IPython makes of a cell whose escapes each sit on a line of their own, at the cost
    of one pass. Good for reading what a cell calls; not always IPython's ``In``."""
    lines = []
    for line in source.rstrip("\n").split("\n"):
        escaped = any(c in line for c in "%!?") and len(line) <= MAX_TRANSFORM_CHARS
        lines.append(_transform_whole(line) if escaped and line.strip() else line)
    return "\n".join(lines)


_MANAGER = None


def expected_history(sent: list[str]) -> dict[str, str | None]:
    """The history digests the probe must report when the kernel ran exactly ``sent``;
    ``parsed`` is None where a cell over ``MAX_TRANSFORM_CHARS`` holds escapes (the grader does
    not repeat IPython's transformation of it: the raw history is still compared)."""
    raw = ["", *(s.rstrip("\n") for s in sent)]
    parsed = ["", *(_transform(s) for s in sent)]
    unsure = any(len(s) > MAX_TRANSFORM_CHARS and p != s.rstrip("\n")
                 for s, p in zip(sent, parsed[1:], strict=True))
    return {"raw": hashlib.sha256(json.dumps(raw).encode()).hexdigest(),
            "parsed": None if unsure else hashlib.sha256(json.dumps(parsed).encode()).hexdigest()}


def check_history(now: dict[str, Any], expected: dict[str, str | None]) -> str:
    """'' if the kernel's input history is what the grader sent, else what is wrong."""
    history = now.get("history", {})
    if history.get("raw") != expected["raw"]:
        return "the input history (IPython's In) differs from the cells the grader ran"
    if not history.get("In_is_parsed") or expected["parsed"] is not None and \
            history.get("parsed") != expected["parsed"]:
        return "the input history (IPython's In) was rewritten"
    return ""
