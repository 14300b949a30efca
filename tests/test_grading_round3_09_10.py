"""Issue 36, round 3: lessons 09 and 10's checks against the routes the second attack review found
(and their relatives), graded by the shortcut audit with those fixtures alone. Each check about
using a mechanism now verifies that the result came from it:

- 09.2: the step computed eagerly and handed to a tf.function that passes it through (with or
  without the batch among its inputs), or a graph whose one op calls sgd_step back in Python:
  each step's graph is run again, at once, on a w and a batch the grader draws (the rest as it
  was given, captured tensors included), and must compute their SGD step; no call into Python.
- 09.3: an object that answers to a tf.function's methods (a plain class, or a subclass of
  TensorFlow's own Function) computing the path in Python and echoing it through a graph:
  collatz_path must be a tf.function by its type, its concrete function for a scalar n is given no
  integer tensor of rank 1 or more, and run alone on another n it computes that n's path.
- 10.3: the closed form plus in-place ops that change nothing (the write log forged), or each
  round in closed form from x: the writes into out are watched on elements the grader draws, and
  after each pair of ops they must hold the chain's next round; after a block's first op every
  op must read the block it writes.
"""

from __future__ import annotations

import pytest
from fixture_audit import assert_the_checks_hold

pytestmark = pytest.mark.slow

#: notebook -> exercise -> the fixtures that must be held to half by the checks alone
SHORTCUTS = {
    "09_tf_function": {
        "09.2": ["shortcut-eager-step-passthrough", "shortcut-step-outside-batch-given",
                 "shortcut-py-function-step"],
        "09.3": ["shortcut-python-path-echoed-by-a-graph",
                 "shortcut-tf-function-subclass-python-path"],
    },
    "10_performance": {
        "10.3": ["shortcut-closed-form-no-op-writes", "shortcut-each-round-from-x",
                 "shortcut-each-round-via-a-temporary"],
    },
}
#: notebook -> exercise -> right answers written differently: full marks, as the solution
UNUSUAL = {
    "09_tf_function": {
        "09.2": ["unusual-lr-in-a-variable", "unusual-batch-first-as-a-column"],
        "09.3": ["unusual-while-loop-where-no-autograph", "unusual-for-range-break"],
    },
    "10_performance": {
        "10.3": ["unusual-add-first-float64-scale", "unusual-reverse-no-copy"],
    },
}


@pytest.mark.parametrize("stem", sorted(SHORTCUTS))
def test_results_must_come_from_the_mechanism_the_exercise_is_about(stem, tmp_path):
    assert_the_checks_hold(stem, SHORTCUTS[stem], UNUSUAL[stem], tmp_path)
