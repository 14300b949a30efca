"""Tamper detection: is the kernel still the one the checks were written for?

A check cell trusts a few things it does not control: that ``assert`` raises, that a raised
exception reaches the grader, that ``np.allclose`` is numpy's, that ``In`` holds what the learner
ran (``check_predictions`` reads it). A submission can change each of them from inside the kernel
(``get_ipython().ast_transformers``, ``set_custom_exc``, ``builtins``, ...). So, around every
check cell, the grader runs two silent requests (``silent=True, store_history=False``: they leave
no trace in ``In``, ``Out`` or ``_``). The *probe* computes a fingerprint of what the checks rely
on, as a user expression (evaluated directly, past the input and AST transformers):

- IPython: the instance overrides and class methods that run a cell and show its errors
  (``run_cell``, ``run_code``, ``showtraceback``, ...), the custom exception handler, the input
  and AST transformers, the event callbacks defined outside installed packages;
- ``builtins`` (every name), ``sys.excepthook``;
- numpy's comparison helpers, ``math.isclose``, the module ``np`` names in the learner's namespace,
  and (once loaded) torch's and the course's check helpers;
- the input history: IPython's ``input_hist_raw`` against what the grader sent, and ``In``
  against it.

The grader compares each fingerprint with the one taken right after the kernel started, before
any learner code ran (``compare``), and with the history it sent. The *canary*,
``assert False, <nonce>``, must fail with exactly that ``AssertionError``: if it "passes",
assertions or errors no longer reach the grader (asserts removed, cells blanked, errors
swallowed), whatever did it. The nonce is fresh for every run and unknown to the kernel until
the request arrives, so a learner's code cannot tell the canary from a check in advance.

This raises the bar; it is not a proof. Code in the kernel can still lie in ways no in-process
probe sees (it runs with the same rights as the probe). Run untrusted submissions with
``--sandbox`` so that at least nothing outside the kernel can be touched.
"""

from __future__ import annotations

import ast
import hashlib
import json
from typing import Any

#: The probe's source, run with ``exec`` in a fresh namespace from a user expression (so it
#: defines nothing in the user namespace); it leaves its JSON fingerprint in ``out``.
PROBE = r'''
def __course_grade_probe(nonce, deep):
    import builtins, hashlib, json, math, sys
    ip = sys.modules["IPython"].get_ipython()
    prefixes = tuple(p for p in {sys.prefix, sys.base_prefix, sys.exec_prefix} if p)
    out = {}

    def ident(obj):
        func = getattr(obj, "__func__", None)
        if func is not None:  # a bound method: who it is bound to, and which function
            return "m%x.%x" % (id(getattr(obj, "__self__", None)), id(func))
        return "o%x" % id(obj)

    def origin(obj):
        code = getattr(getattr(obj, "__func__", obj), "__code__", None)
        if code is None:
            return "builtin"
        name = code.co_filename
        return "package" if name.startswith(prefixes) else "cell:" + name

    cls_names = ("run_cell", "run_cell_async", "run_ast_nodes", "run_code", "transform_cell",
                 "transform_ast", "showtraceback", "_showtraceback", "showsyntaxerror",
                 "set_custom_exc", "should_run_async", "_run_cell", "ex", "ev", "safe_execfile")
    for name in cls_names:
        if name in vars(ip):  # set on the shell itself, hiding the class's method
            out["ipython." + name] = "instance override " + ident(vars(ip)[name])
            continue
        for klass in type(ip).__mro__:
            if name in vars(klass):
                out["ipython." + name] = ident(vars(klass)[name])
                break
    out["ipython.CustomTB"] = ident(ip.CustomTB)
    out["ipython.custom_exceptions"] = repr(ip.custom_exceptions)
    itm = ip.input_transformer_manager
    lists = {"input_transformers_cleanup": ip.input_transformers_cleanup,
             "input_transformers_post": ip.input_transformers_post,
             "input_transformer_manager.cleanup_transforms": itm.cleanup_transforms,
             "input_transformer_manager.line_transforms": itm.line_transforms,
             "input_transformer_manager.token_transformers": itm.token_transformers,
             "ast_transformers": ip.ast_transformers}
    for name, items in lists.items():
        out["ipython." + name] = [ident(x) for x in items]
    for event, callbacks in ip.events.callbacks.items():
        mine = [origin(c) for c in callbacks if origin(c) != "package"]
        out["ipython.events." + event] = mine
    kernel = getattr(ip, "kernel", None)
    if kernel is not None:
        handlers = getattr(kernel, "shell_handlers", {})
        out["kernel.execute_request"] = origin(handlers.get("execute_request"))
        out["kernel.do_execute"] = origin(getattr(kernel, "do_execute", None))
    for name, value in vars(builtins).items():
        if name not in ("_", "__", "___"):
            out["builtins." + name] = ident(value)
    out["sys.excepthook"] = ident(sys.excepthook)
    out["math.isclose"] = ident(math.isclose)
    if deep:
        import numpy
        import course_utils.grading.checks
    np = sys.modules.get("numpy")
    if np is not None:
        out["sys.modules['numpy']"] = ident(np)
        for name in ("allclose", "isclose", "array_equal", "array_equiv", "all", "any", "abs",
                     "max", "min", "sum", "mean", "asarray", "array"):
            out["numpy." + name] = ident(getattr(np, name, None))
        for name in ("assert_allclose", "assert_array_equal", "assert_array_almost_equal",
                     "assert_equal", "assert_almost_equal"):
            out["numpy.testing." + name] = ident(getattr(np.testing, name, None))
        out["numpy.linalg.norm"] = ident(np.linalg.norm)
    checks = sys.modules.get("course_utils.grading.checks")
    if checks is not None:
        out["sys.modules['course_utils.grading.checks']"] = ident(checks)
        for name in ("forbid", "check_predictions", "digest", "literal_assignments",
                     "_history", "_find_source", "_same", "_canonical", "_resolve"):
            out["course_utils.grading.checks." + name] = ident(getattr(checks, name, None))
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "allclose"):
        for name in ("allclose", "equal", "isclose"):
            obj = getattr(torch, name, None)
            out["late:torch." + name] = ident(obj) + " " + origin(obj)
        testing = getattr(torch, "testing", None)
        obj = getattr(testing, "assert_close", None)
        out["late:torch.testing.assert_close"] = ident(obj) + " " + origin(obj)
    user = ip.user_ns
    aliases = {"np": "numpy", "torch": "torch", "tf": "tensorflow",
               "mg": "course_utils.minigraph", "jnp": "jax.numpy", "jax": "jax"}
    for name, module in aliases.items():
        if name in user and module in sys.modules and user[name] is not sys.modules[module]:
            out["namespace." + name] = "not the module " + module
    for name in ("AssertionError", "Exception", "ValueError", "TypeError", "isinstance",
                 "len", "abs", "all", "any", "float", "int", "bool", "repr", "str"):
        if name in user and user[name] is not getattr(builtins, name):
            out["namespace." + name] = "shadows the builtin " + name
    hm = ip.history_manager
    raw, parsed = hm.input_hist_raw, hm.input_hist_parsed
    history = {"raw": hashlib.sha256(json.dumps(raw).encode()).hexdigest(),
               "parsed": hashlib.sha256(json.dumps(parsed).encode()).hexdigest(),
               "In_is_parsed": user.get("In") is parsed and user.get("_ih") is parsed}
    return json.dumps({"nonce": nonce, "fingerprint": out, "history": history})


out = __course_grade_probe(nonce, deep)
'''


def probe_expression(nonce: str, deep: bool = False) -> str:
    """The user expression that runs the probe (``deep``: also import numpy and the check
    helpers, done once, for the baseline)."""
    return (f"(lambda d: (__import__('builtins').exec({PROBE!r}, d), d['out'])[1])"
            f"({{'nonce': {nonce!r}, 'deep': {deep!r}}})")


def parse(nonce: str, reply_status: str, expressions: dict[str, Any]
          ) -> tuple[dict[str, Any] | None, str]:
    """The fingerprint from the probe's execute reply, or (None, what went wrong)."""
    if reply_status != "ok":
        return None, f"the grader's probe did not run ({reply_status})"
    found = expressions.get("probe", {})
    if found.get("status") != "ok":
        ename = found.get("ename", "?")
        first = str(found.get("evalue", "")).strip().splitlines()[:1]
        return None, f"the grader's probe failed with {ename}: {first[0][:200] if first else ''}"
    try:
        data = json.loads(ast.literal_eval(found["data"]["text/plain"]))
    except (KeyError, ValueError, SyntaxError, TypeError):
        return None, "the grader's probe came back altered (IPython's display formatter?)"
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


def compare(baseline: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What changed between two fingerprints, one readable line each (empty: nothing)."""
    before, after = baseline["fingerprint"], now["fingerprint"]
    changed = []
    for key, value in after.items():
        if key.startswith("late:"):
            # Loaded after the start (torch): must be the package's own, and stay the same.
            first = baseline.setdefault("late", {}).setdefault(key, value)
            if " cell:" in value or value != first:
                changed.append(key[5:])
        elif key.startswith("namespace."):
            changed.append(f"`{key[10:]}` in your namespace {value}")
        elif key not in before:
            if key.startswith("builtins."):
                continue  # a new builtin name (harmless; IPython adds some while running)
            if key.startswith("ipython.events.") and not value:
                continue
            changed.append(key)
        elif before[key] != value:
            changed.append(key)
    for key in before:
        if key not in after and not key.startswith(("late:", "builtins._")):
            changed.append(f"{key} (removed)")
    return sorted(dict.fromkeys(_label(c) for c in changed))


def _transform(source: str) -> str:
    """What IPython stores in ``In`` for a cell (its input transformations, e.g. magics)."""
    from IPython.core.inputtransformer2 import TransformerManager

    global _MANAGER
    if _MANAGER is None:
        _MANAGER = TransformerManager()
    try:
        return _MANAGER.transform_cell(source).rstrip("\n")
    except Exception:  # IPython stores the cell as it is when it cannot transform it
        return source.rstrip("\n")


_MANAGER = None


def expected_history(sent: list[str]) -> dict[str, str]:
    """The history digests the probe must report when the kernel ran exactly ``sent``."""
    raw = ["", *(s.rstrip("\n") for s in sent)]
    parsed = ["", *(_transform(s) for s in sent)]
    return {"raw": hashlib.sha256(json.dumps(raw).encode()).hexdigest(),
            "parsed": hashlib.sha256(json.dumps(parsed).encode()).hexdigest()}


def check_history(now: dict[str, Any], expected: dict[str, str]) -> str:
    """'' if the kernel's input history is what the grader sent, else what is wrong."""
    history = now.get("history", {})
    if history.get("raw") != expected["raw"]:
        return "the input history (IPython's In) differs from the cells the grader ran"
    if not history.get("In_is_parsed") or history.get("parsed") != expected["parsed"]:
        return "the input history (IPython's In) was rewritten"
    return ""


_LABELS = {
    "ipython.ast_transformers": "IPython's AST transformers (get_ipython().ast_transformers)",
    "ipython.input_transformers_cleanup": "IPython's input transformers "
                                          "(input_transformers_cleanup)",
    "ipython.input_transformers_post": "IPython's input transformers (input_transformers_post)",
    "ipython.showtraceback": "IPython's traceback display (showtraceback)",
    "ipython.CustomTB": "IPython's custom exception handler (set_custom_exc)",
    "ipython.custom_exceptions": "IPython's custom exception handler (set_custom_exc)",
}


def _label(key: str) -> str:
    if key in _LABELS:
        return _LABELS[key]
    if key.startswith("builtins."):
        return f"the builtin `{key[9:]}`"
    if key.startswith("ipython.events."):
        return f"IPython's {key[15:]} hooks (get_ipython().events)"
    if key.startswith("ipython."):
        return f"IPython's {key[8:]}"
    return key
