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

import pytest
from fixture_audit import assert_the_checks_hold

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


def test_lesson_05_results_must_come_from_the_mechanism(tmp_path):
    assert_the_checks_hold("05_tracing", SHORTCUTS, UNUSUAL, tmp_path)
