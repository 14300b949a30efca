"""Issue 36, round 4: lesson 02's checks against the routes the fourth attack review found, graded
by the shortcut audit with those fixtures alone, and the helpers the checks use for it.

- 02.2: forward mode's diagonal, with each rule on a path called once on a dummy and thrown away
  (5/6): while the counting check runs, the rules in VJP are scaled by factors drawn from the
  grading's seed, and the gradient nodes must compute what the scaled rules give, on the random
  graphs and on a layer with a matmul.
- 02.4: minigraph's own rules of mul and sigmoid chained, taken from the op records
  (``dataclasses.astuple(mg.get_op(name))[3]``, ``vars(mg.get_op("mul"))["vj" "p"]``: 4/4): the
  checks see which built-in rules run while the gradient is built (``checks.rules_run``,
  rule by rule, however reached), and the op records are routes of 02.4.
- 02.5: f'' as a Richardson difference of the first-derivative graph, as a stencil of f's graph,
  or forward mode twice with a table of the answer's own (4/4 each): f'' built with the rules
  scaled must change as the rules say.
- 02.1: the course's own walk (``engine.topo_order``) told that fed nodes have no inputs (6/6):
  a route of 02.1, held to half by the static judge.
"""

from __future__ import annotations

import sys
import types

import numpy as np

import course_utils.minigraph as mg
from course_utils.grading.checks import rules_run, with_scaled_rules

# The fourth review's lesson-02 shortcuts (fixtures in tests/fixtures/shortcuts/02_static_graphs)
# are held to half by the checks alone, asserted in test_shortcuts (HELD_BY_THE_CHECKS) on the
# lesson's one audit; the solution and unusual answers' full marks there too.


def test_with_scaled_rules_leaves_the_rules_it_does_not_scale_as_they_are():
    """A rule that builds nodes adds none for an op without a factor (02.5 differentiates the
    gradient graph again: a node times 1.0 there would be scaled as a mul)."""
    def double(g, out, x):
        return (2 * g,)

    table = {"double": double, "other": double}
    seen = with_scaled_rules(table, {"double": 3.0}, lambda case: (table["other"] is double,
                                                                   table["double"](*case)),
                             [(1.0, None, None)])
    assert seen == [(True, (6.0,))]
    assert table == {"double": double, "other": double}


def test_scaled_rules_give_the_gradient_the_chain_rule_gives_with_each_factor():
    """Reverse mode through the engine's rules, scaled: d/dx sum(tanh(x) * x) becomes
    k_mul (k_tanh tanh'(x) x + tanh(x)), worked out by hand here."""
    from course_utils.engine import VJP, evaluate, placeholder, reduce_sum, tanh
    from course_utils.engine import gradients as engine_gradients

    x = placeholder("x")
    xs = np.linspace(-1.5, 1.5, 7)
    (dx,) = with_scaled_rules(VJP, {"mul": 1.25, "tanh": 0.75},
                              lambda y: engine_gradients(y, [x])[0], [reduce_sum(tanh(x) * x)])
    got = evaluate([dx], {x: xs})[dx]
    want = 1.25 * (0.75 * (1 - np.tanh(xs) ** 2) * xs + np.tanh(xs))
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12)


def test_rules_run_counts_each_rule_however_it_is_reached():
    def rule(g):
        return g

    copy = types.FunctionType(rule.__code__, {}, "renamed")  # another object, the same code

    def answer():
        rule(1)
        copy(2)
        return "done"

    before = sys.getprofile()
    assert rules_run({"rule": rule}, answer) == ("done", {"rule": 2})
    assert sys.getprofile() is before
    assert rules_run({"rule": rule, "len": len}, lambda: len("ab")) == (2, {})  # no Python code


def test_rules_run_sees_minigraph_run_the_rules_of_the_graphs_ops():
    """mg.gradients of sum(sigmoid(x) * x) runs the rules of sum, mul and sigmoid once each:
    the op nodes of the graph, counted from the graph itself."""
    builtin = {name: op.vjp for name, op in mg.OPS.items() if op.builtin}
    graph = mg.Graph()
    with graph.as_default():
        x = mg.placeholder((None,), "float64", name="x")
        y = mg.sum(mg.sigmoid(x) * x)
        nodes_before = list(graph.nodes)
        _, ran = rules_run(builtin, lambda: mg.gradients(y, [x]))
    ops = sorted(str(n.op) for n in nodes_before if n.op not in ("placeholder",))
    assert ran == {op: ops.count(op) for op in ops}
