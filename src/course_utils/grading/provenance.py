"""Whether a result came from the mechanism an exercise is about (issue 36, provenance).

Check cells import these helpers (where no notebook cell can rebind them) to perturb a table of
derivative rules while an answer runs, or to see which of a library's rules ran:

- ``scaled_rules(table, factors)``: within the block, each rule of ``table`` (op name -> vjp rule,
  changed in place, so that whoever holds the table sees it) returns its gradients times its op's
  factor. Gradients built by calling the rules change as the rules say; gradients got another way
  (forward mode, differences of the function, derivatives written elsewhere) do not. The check
  wants what the scaled rules give, which the reference computes with the solution under the same
  factors (drawn from the grading's seed).
- ``rules_run(rules, build)``: ``build()`` and how often each rule of ``rules`` (name -> function)
  ran meanwhile, told apart by their code (a copy of a function, or the same function reached by
  another route, is the same rule): a derivative rule of the learner's that chains the library's
  rules shows them running beyond those the graph's own nodes need.
"""

from __future__ import annotations

import collections
import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

__all__ = ["drawn_factors", "rules_run", "scaled_rules"]


@contextlib.contextmanager
def scaled_rules(table: MutableMapping[str, Callable[..., Any]],
                 factors: Mapping[str, float]) -> Iterator[None]:
    """Within the block, ``table[op]`` for each op in ``factors`` returns each gradient of its
    rule (``None`` kept) times ``factors[op]``; the other rules are untouched. The table is
    changed in place and restored afterwards, whatever happens::

        with scaled_rules(VJP, {"tanh": 1.5, "mul": 0.75}):
            (dx,) = gradients(y, [x])  # nodes built from the scaled rules
    """

    def scaled(rule: Callable[..., Any], k: float) -> Callable[..., Any]:
        def rule_scaled(*args: Any, **kwargs: Any) -> tuple:
            return tuple(None if g is None else g * k for g in rule(*args, **kwargs))
        return rule_scaled

    real = dict(table)
    table.update({op: scaled(real[op], k) for op, k in factors.items() if op in real})
    try:
        yield
    finally:
        table.update(real)


def _key(fn: Any) -> tuple | None:
    code = getattr(fn, "__code__", None)
    return None if code is None else (code.co_filename, code.co_firstlineno, code.co_code)


def rules_run(rules: Mapping[str, Any], build: Callable[[], Any]) -> tuple[Any, dict[str, int]]:
    """``build()`` and, by name, how many times each function of ``rules`` ran meanwhile (on
    this thread; functions without Python code, such as builtins, are not counted)::

        result, ran = rules_run({name: op.vjp for name, op in OPS.items()}, backward)
    """
    keys = {key: name for name, fn in rules.items() if (key := _key(fn)) is not None}
    ran: collections.Counter[str] = collections.Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            name = keys.get((code.co_filename, code.co_firstlineno, code.co_code))
            if name is not None:
                ran[name] += 1

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = build()
    finally:
        sys.setprofile(before)
    return result, dict(ran)


def drawn_factors(stream: str, ops: tuple[str, ...], low: float = 0.5, high: float = 2.0
                  ) -> dict[str, float]:
    """One factor per op in [low, high), drawn from the grading run's seed (stream ``stream``):
    the same in the learner's kernel and in the reference's, another for another run."""
    from course_utils.grading.probe import run_rng

    return dict(zip(ops, run_rng(stream).uniform(low, high, len(ops)).tolist(), strict=True))
