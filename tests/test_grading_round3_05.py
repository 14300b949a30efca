"""Issue 36, round 3: lesson 05's checks against the routes the second attack review found (and
their relatives), graded by the shortcut audit with those fixtures alone. Each check about using a
mechanism now verifies that the result came from it:

- 05.1: an eager "tracer" with forged counters (fn run on every call, a throw-away graph run), or
  fn's graph recorded and run but fn's eager values returned: fn's Python must run once per
  trace, a Python value fn read while tracing stays as the graph recorded it, what a call
  returns is what run computed on it, and with the engine's sum op scaled inside run the values
  follow.
- 05.3: a cond whose branches return the same value, computed before it (or a cond of ones
  multiplying it): the graph is run with the cond's predicate forced, both ways, and must give
  x / |x| one way and x the other; and no root may be taken outside the cond's branches (the
  double-where value computed before a cond that picks between it and x).
- 05.5: the closed form in an op registered for the answer, or Newton steps beside a bisection
  loop whose result is dropped: the graph's ops must be minigraph's own, and run with the loop
  body's `if` decided the other way the result must move off the root.
- 05.6: numpy training, the engine called on dummies for the counters, or the static trainer's
  results returned by train_traced with a trace whose counter was set by hand: with the vjp rule
  that starts each backward pass scaled, each mode must train as gradient descent with the
  learning rate scaled alike, its losses must be those its runs (or its tape) computed, and the
  traced mode's runs must be fed the parameters each step is called with.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from course_utils.grading import audit

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

SHORTCUTS = {
    "05.1": ["shortcut-eager-forged-counters", "shortcut-graph-run-eager-returned"],
    "05.3": ["shortcut-same-value-cond", "shortcut-where-times-cond",
             "shortcut-where-value-picked-by-cond"],
    "05.5": ["shortcut-registered-op", "shortcut-newton-beside-loop"],
    "05.6": ["shortcut-numpy-dummy-counts", "shortcut-traced-is-static"],
}
UNUSUAL = {
    "05.1": ["unusual-function-with-attributes", "unusual-keyed-by-text"],
    "05.3": ["unusual-equal-test", "unusual-cond-of-the-scale"],
    "05.5": ["unusual-counted-halvings", "unusual-flipped-test"],
    "05.6": ["unusual-own-loss-no-neg", "unusual-value-and-grad"],
}


def audited(chosen: dict[str, list[str]],
            tmp_path: Path) -> dict[tuple[str, str], audit.VariantResult]:
    """The audit of solutions/05_tracing.ipynb with only the named fixtures of each exercise, by
    (exercise, variant name), the solution's rows included (no generated shortcuts)."""
    for exercise, names in chosen.items():
        folder = tmp_path / "05_tracing" / exercise
        folder.mkdir(parents=True)
        for name in names:
            shutil.copy(audit.fixtures_root(ROOT) / "05_tracing" / exercise / f"{name}.py", folder)
    results = audit.audit_notebook("05_tracing", root=ROOT, fixtures=tmp_path, generated=False)
    return {(r.exercise, r.variant.name): r for r in results}


def points_of_passed_checks(result: audit.VariantResult) -> float:
    """What the checks gave, before the static judge's cap (the checks must hold a route alone)."""
    return sum(c.points for c in result.checks if c.outcome == "passed")


def test_lesson_05_results_must_come_from_the_mechanism(tmp_path):
    found = audited({ex: SHORTCUTS[ex] + UNUSUAL[ex] for ex in SHORTCUTS}, tmp_path)
    for exercise, names in UNUSUAL.items():
        for name in ("solution", *names):
            result = found[exercise, name]
            assert result.points == result.possible, audit.format_results([result], True)
    # The checks themselves hold these routes to half, whatever the static judge says.
    for exercise, names in SHORTCUTS.items():
        for name in names:
            result = found[exercise, name]
            assert points_of_passed_checks(result) <= result.possible / 2, \
                audit.format_results([result], True)
