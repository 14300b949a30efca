"""course_utils.engine_forward: every jvp rule against central differences along the tangent and
against the engine's vjp rule (<v, J t> = <J^T v, t>), and the forward pass on a layer. And the
three tables agree: every op of ``IMPL`` has a vjp and a jvp rule (or is a leaf, named below), and
lesson 01's exercises hand the learner these tables less exactly the rules they ask for."""

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from course_utils import engine as E
from course_utils import engine_forward
from course_utils.engine_forward import JVP, jvp

ROOT = Path(__file__).resolve().parents[1]

RNG = np.random.default_rng(0)
A = RNG.normal(size=(4, 3))
# op -> (inputs, attrs, which inputs are differentiable); log takes positive values
CASES = {
    "add": ((A, RNG.normal(size=(3,))), {}, (0, 1)),
    "sub": ((RNG.normal(size=(4, 1)), A), {}, (0, 1)),
    "mul": ((A, RNG.normal(size=(4, 1))), {}, (0, 1)),
    "div": ((A, RNG.uniform(1.0, 2.0, size=(3,))), {}, (0, 1)),
    "neg": ((A,), {}, (0,)),
    "exp": ((A,), {}, (0,)),
    "log": ((np.abs(A) + 0.5,), {}, (0,)),
    "tanh": ((A,), {}, (0,)),
    "relu": ((A,), {}, (0,)),
    "matmul": ((A, RNG.normal(size=(3, 2))), {}, (0, 1)),
    "transpose": ((A,), {}, (0,)),
    "sum": ((A,), {"axis": 1}, (0,)),
    "logsumexp": ((A,), {"axis": -1}, (0,)),
    "unbroadcast": ((A, np.zeros(3)), {}, (0,)),
    "broadcast_like": ((RNG.normal(size=(4,)), A), {"axis": 1}, (0,)),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_jvp_rule_against_central_differences_and_the_vjp(op):
    inputs, attrs, diff = CASES[op]
    rng = np.random.default_rng(1)
    t = [rng.normal(size=np.shape(x)) if i in diff else np.zeros(np.shape(x))
         for i, x in enumerate(inputs)]
    out = E.IMPL[op](*inputs, **attrs)
    got = JVP[op](t, out, *inputs, **attrs)
    assert np.shape(got) == np.shape(out)
    h = 1e-6
    plus = E.IMPL[op](*[x + h * ti for x, ti in zip(inputs, t, strict=True)], **attrs)
    minus = E.IMPL[op](*[x - h * ti for x, ti in zip(inputs, t, strict=True)], **attrs)
    np.testing.assert_allclose(got, (plus - minus) / (2 * h), rtol=1e-6, atol=1e-7)
    v = rng.normal(size=np.shape(out))
    pulled = E.VJP[op](v, out, *inputs, **attrs)
    back = sum(float(np.sum(p * ti)) for p, ti in zip(pulled, t, strict=True) if p is not None)
    assert abs(float(np.sum(v * got)) - back) < 1e-10 * (1 + abs(back))


# Ops whose derivative is zero: their rules give no gradient (None) and zero tangents.
ZERO_DERIVATIVE = ("sign", "size", "ones_like", "zeros_like")


def test_zero_derivative_ops_have_zero_tangents():
    for op in ZERO_DERIVATIVE:
        out = E.IMPL[op](A)
        assert not np.any(JVP[op]([np.ones_like(A)], out, A))
        assert E.VJP[op](np.ones_like(out), out, A) == (None,)


def test_jvp_on_a_layer_matches_backprop():
    X, W, B, T = (E.placeholder(n) for n in "XWBT")
    loss = E.reduce_mean((E.tanh(X @ W + B) - T) * (E.tanh(X @ W + B) - T))
    feed = {X: RNG.normal(size=(5, 3)), W: RNG.normal(size=(3, 2)), B: RNG.normal(size=(2,)),
            T: RNG.normal(size=(5, 2))}
    t = {W: RNG.normal(size=(3, 2)), B: RNG.normal(size=(2,))}
    (value,), (tangent,) = jvp([loss], feed, t)
    values = E.evaluate([loss], feed)
    grads = E.backprop(loss, values)
    assert value == pytest.approx(float(values[loss]))
    assert float(tangent) == pytest.approx(sum(float(np.sum(grads[p] * t[p])) for p in t),
                                           rel=1e-12)
    # only the placeholders given: X and T have zero tangents
    (_,), (none,) = jvp([loss], feed, {})
    assert float(none) == 0.0



# --- the tables agree -------------------------------------------------------------------------

# Ops of IMPL with no derivative rule, on purpose: leaves. Their nodes have no inputs (the value
# is the attr `value`), so backprop and gradients skip them (`not node.inputs`) and jvp gives them
# a zero tangent before it looks for a rule. An op with inputs never belongs here: give it rules.
LEAVES = {
    "const": "constant(value): a fixed value",
    "variable": "variable(value), lesson 02's state: training changes it between runs",
}
TABLES = {"course_utils.engine.VJP": E.VJP, "course_utils.engine_forward.JVP": JVP}


def test_every_op_of_impl_has_a_vjp_and_a_jvp_rule_or_is_a_leaf():
    problems = []
    for name, table in TABLES.items():
        problems += [f"op {op!r} is in IMPL but {name} has no rule for it: add one (and a case "
                     f"to this file's tests), or, if it is a leaf, name it in LEAVES with why"
                     for op in sorted(set(E.IMPL) - set(table) - set(LEAVES))]
        problems += [f"{name} has a rule for op {op!r}, which IMPL lacks: add its forward "
                     f"computation to IMPL, or remove the rule"
                     for op in sorted(set(table) - set(E.IMPL))]
        problems += [f"op {op!r} is named in LEAVES (no derivative) but {name} has a rule for it: "
                     f"remove one of the two" for op in sorted(set(table) & set(LEAVES))]
    problems += [f"LEAVES names op {op!r}, which IMPL lacks"
                 for op in sorted(set(LEAVES) - set(E.IMPL))]
    assert not problems, "\n".join(problems)


def test_every_jvp_rule_is_tested_here():
    untested = set(JVP) - set(CASES) - set(ZERO_DERIVATIVE)
    assert not untested, (f"JVP rules without a case in this file: {sorted(untested)}; add them "
                          "to CASES (central differences) or to ZERO_DERIVATIVE")


def test_leaves_have_no_inputs_and_need_no_rule():
    x = E.placeholder("x")
    c, v = E.constant(np.array([2.0, -3.0])), E.variable(np.array([0.5, 1.5]))
    assert {c.op, v.op} == set(LEAVES) and c.inputs == () and v.inputs == ()
    y = E.reduce_sum(x * c + v * x)
    feed = {x: np.array([0.7, -0.2])}
    grads = E.backprop(y, E.evaluate([y], feed))  # no rule of const or variable is looked up
    np.testing.assert_allclose(grads[x], np.array([2.0, -3.0]) + np.array([0.5, 1.5]))
    t = np.array([1.0, 2.0])
    (_,), (tangent,) = jvp([y], feed, {x: t})
    assert float(tangent) == pytest.approx(float(np.dot(grads[x], t)), rel=1e-12)


def _cell(nb: dict, cell_id: str) -> ast.Module:
    found = [c for c in nb["cells"] if c.get("id") == cell_id]
    assert len(found) == 1, f"solutions/01_computation_graphs.ipynb: no cell with id {cell_id!r}"
    return ast.parse("".join(found[0]["source"]))


def _dict_keys(tree: ast.Module, name: str) -> set[str]:
    """The string keys of the dict literal assigned to `name` (``VJP = {...}``)."""
    return {key.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            and isinstance(node.value, ast.Dict) for key in node.value.keys}


def _entries_set(tree: ast.Module, name: str) -> set[str]:
    """The ops of the entries a cell sets one by one (``VJP["add"] = ...``)."""
    return {t.slice.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Subscript)
            and isinstance(t.value, ast.Name) and t.value.id == name}


def _strings_in_update(tree: ast.Module, name: str) -> set[str]:
    """The op names written in a ``name.update(...)`` call, or in a tuple of names the cell
    assigns and the call uses (``SEVEN = ("add", ...)``, then ``VJP.update({... SEVEN})``)."""
    tuples = {target.id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
              for target in node.targets if isinstance(target, ast.Name)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "update" and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == name:
            parts = [node] + [tuples[n.id] for n in ast.walk(node)
                              if isinstance(n, ast.Name) and n.id in tuples]
            found |= {s.value for part in parts for s in ast.walk(part)
                      if isinstance(s, ast.Constant) and isinstance(s.value, str)}
    return {s for s in found if not re.fullmatch(r"\d\d\.\d+", s)}  # is_withheld("01.2")


def test_lesson_01_exercises_hand_out_the_tables_less_the_rules_the_learner_writes():
    """solutions/01's set-up gives the learner IMPL whole, and VJP and JVP without the rules that
    exercises 01.2 and 01.4 ask for: those gaps are the exercises, not drift. Each gap must be
    exactly what a solution cell fills, and the course's full tables must cover it."""
    nb = json.loads((ROOT / "solutions" / "01_computation_graphs.ipynb").read_text("utf-8"))
    impl = _dict_keys(_cell(nb, "s01-setup-impl"), "IMPL")
    course_impl = set(E.IMPL) - {"variable"}  # `variable` is lesson 02's
    assert impl == course_impl, (
        f"lesson 01's IMPL and course_utils.engine.IMPL differ: only in the notebook "
        f"{sorted(impl - course_impl)}, only in the engine {sorted(course_impl - impl)}")
    vjp_given = _dict_keys(_cell(nb, "s01-setup-vjp"), "VJP")
    vjp_asked = _entries_set(_cell(nb, "s01-sol2"), "VJP")
    vjp_copied = _strings_in_update(_cell(nb, "s01-setup-course-vjp"), "VJP")
    jvp_given = _dict_keys(_cell(nb, "s01-setup-jvp"), "JVP")
    jvp_asked = _entries_set(_cell(nb, "s01-sol4"), "JVP")
    assert len(vjp_asked) == len(jvp_asked) == 7 and vjp_asked == jvp_asked, (
        "exercises 01.2 and 01.4 ask for the rules of the same seven ops: "
        f"01.2 {sorted(vjp_asked)}, 01.4 {sorted(jvp_asked)}")
    assert not vjp_given & vjp_asked and not jvp_given & jvp_asked, (
        "the set-up gives away rules the exercises ask for: "
        f"VJP {sorted(vjp_given & vjp_asked)}, JVP {sorted(jvp_given & jvp_asked)}")
    assert vjp_asked <= vjp_copied, (  # 01.3 and 01.4 must not depend on the learner's 01.2
        f"after 01.2 the notebook copies the course's rules of {sorted(vjp_copied)}, "
        f"not all of 01.2's {sorted(vjp_asked)}")
    vjp_after = vjp_given | vjp_asked | vjp_copied
    assert vjp_after == set(E.VJP), (
        "after 01.2 lesson 01's VJP should name the ops of course_utils.engine.VJP; the notebook "
        f"lacks {sorted(set(E.VJP) - vjp_after)}, the engine {sorted(vjp_after - set(E.VJP))}")
    assert jvp_given | jvp_asked <= set(JVP), (
        f"lesson 01 has jvp rules course_utils.engine_forward.JVP lacks: "
        f"{sorted((jvp_given | jvp_asked) - set(JVP))}")
    # 01.4's checks forbid the course's own rule of each op it asks for, by its dotted name
    missing = [op for op in sorted(jvp_asked)
               if JVP[op] is not getattr(engine_forward, f"{op}_jvp", None)]
    assert not missing, (f"course_utils.engine_forward has no function <op>_jvp that is JVP[op] "
                         f"for {missing}: the checks of 01.4 forbid these names")
