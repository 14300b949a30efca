"""The shortcuts the audit writes itself (``course_utils.grading.shortcuts``), run in this
process on small answers: each must do what its description says (look up, call the mechanism
once on a dummy, take the forbidden route) and give the answer's results where it can, since a
generated shortcut that is simply broken would prove nothing about the checks."""

from __future__ import annotations

import numpy as np
import pytest

from course_utils.grading import shortcuts


def _run(sources: list[str], ns: dict | None = None) -> dict:
    ns = {"np": np} if ns is None else ns
    for source in sources:
        exec(compile(source, "<answer>", "exec"), ns)  # noqa: S102 (the test's own sources)
    return ns


ANSWER = '''\
def scale(x, k=2.0):
    """k * x."""
    ### BEGIN SOLUTION
    return k * np.asarray(x, dtype=float)
    ### END SOLUTION


RULES = {}
RULES["neg"] = lambda g, out, x: (-g,)
print(scale([1.0]))
### BEGIN SOLUTION
predicted = 3  # a prediction: the lookup leaves it unanswered
### END SOLUTION
'''


def test_callables_finds_defs_and_rule_tables_and_refuses_classes_and_values():
    found, why = shortcuts.callables([ANSWER])
    assert [(c.target, c.params) for c in found] == [
        ("scale", ["x", "k"]), ("RULES['neg']", ["g", "out", "x"])] and not why
    assert shortcuts.callables(["class T:\n    pass\n"])[1].startswith(
        "the answer defines a class (T)")
    assert shortcuts.callables(["n = 3\n"])[1].startswith("the answer is values")


def test_the_lookup_answers_what_was_recorded_and_a_constant_otherwise():
    found, _ = shortcuts.callables([ANSWER])
    ns = _run([shortcuts.RECORDER, *shortcuts.recording_sources([ANSWER], found)])
    ns["scale"](np.array([1.0, 2.0]), k=3.0)  # a visible check's call
    ns["scale"]([5.0])
    tables = shortcuts.decode_tables(ns["__course_audit_dump"]())
    assert tables["scale"]["calls"] == 3  # the cell's own print, then the two above
    assert "RULES['neg']" not in tables  # never called: nothing to copy
    sources, description = shortcuts.lookup_sources([ANSWER], found, tables)
    assert "scale (3 argument lists of 3 calls)" in description
    assert "never called where a learner sees it, so None: RULES['neg']" in description
    looked = _run(sources)
    assert np.array_equal(looked["scale"](np.array([1.0, 2.0]), k=3.0), [3.0, 6.0])
    assert np.array_equal(looked["scale"]([5.0]), [10.0])
    # Other arguments: the most frequent result, whatever the input (a constant).
    assert looked["scale"](np.array([7.0, 7.0])).tolist() in ([2.0], [3.0, 6.0], [10.0])
    assert looked["RULES"]["neg"](1.0, 1.0, 1.0) is None
    assert looked["predicted"] is None and "left unanswered (None): predicted" in description
    assert "def scale" not in "\n".join(sources)  # no trace of the real answer


def test_the_lookup_key_reads_values_not_identities():
    ns = _run([shortcuts.KEY_SOURCE])
    key = ns["_lookup_key"]
    assert key(((np.arange(3.0),), {})) == key(((np.arange(3.0),), {}))
    assert key(((np.arange(3.0),), {})) != key(((np.arange(3.0) + 1,), {}))
    assert key(((np.arange(3.0),), {})) != key(((np.arange(3),), {}))  # dtype counts
    assert key(((object(),), {})) == key(((object(),), {}))  # an address is not a value


SET_UP = '''\
def fake_jit(f):
    calls = []

    def compiled(*args):
        calls.append(args)
        return "compiled"
    compiled.calls = calls
    return compiled
'''
MECHANISM = '''\
@fake_jit
def step(x):
    return x + 1


def run(xs):
    stepped = fake_jit(lambda v: v * 10)
    return [stepped(x) for x in xs]
'''


def test_the_mechanism_is_called_once_on_a_dummy_and_the_results_are_eager(monkeypatch):
    monkeypatch.setattr(shortcuts, "MECHANISMS", ("fake_jit",))
    sources, description = shortcuts.mechanism_sources([MECHANISM])
    assert description.endswith("fake_jit")
    ns = _run([SET_UP, *sources])
    assert [ns["step"](np.array([2.0])), ns["step"](np.array([5.0]))] == [3.0, 6.0]
    assert len(ns["step"].calls) == 1  # the mechanism's own attribute, read through
    (dummy,) = ns["step"].calls[0]
    assert dummy.tolist() == [1.0]  # a dummy, not the caller's input
    assert ns["run"]([1, 2]) == [10, 20]
    # The answer's own mechanism (lesson 05's trace class) is the exercise: not replaced.
    own = "class fake_jit:\n    pass\n\n\n@fake_jit\ndef f(x):\n    return x\n"
    assert shortcuts.mechanism_sources([own]) is None
    # A mechanism the course's code builds around the learner's body is not the answer's.
    given = "@fake_jit\ndef f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    assert shortcuts.mechanism_sources([given]) is None
    inside = "def g(h):\n    ### BEGIN SOLUTION\n    return fake_jit(h)\n    ### END SOLUTION\n"
    assert "_AuditDummied(fake_jit(h), h)" in shortcuts.mechanism_sources([inside])[0][0]


def test_graphlib_and_networkx_orders_replace_an_ordering_answer():
    answer = ("def topo_order(outputs):\n    \"\"\"Inputs first.\"\"\"\n    ### BEGIN SOLUTION\n"
              "    raise NotImplementedError\n    ### END SOLUTION\n")
    made = shortcuts.route_sources([answer], ["graphlib", "networkx"])
    assert [slug for slug, _, _ in made] == ["route-graphlib", "route-networkx"]
    class Node:  # hashable by identity, as the engine's nodes
        def __init__(self, *inputs):
            self.inputs = list(inputs)

    a = Node()
    b = Node(a)
    c = Node(a, b)
    for slug, sources, _ in made:
        order = _run(sources)["topo_order"]([c])
        assert order.index(a) < order.index(b) < order.index(c), slug
        assert "graphlib" in sources[0] or "networkx" in sources[0]
    assert shortcuts.route_sources([answer], ["torch.autograd"]) == []


def test_the_complex_step_replaces_a_table_of_derivative_rules():
    from course_utils.engine import IMPL

    answer = ('VJP = {}\nJVP = {}\n'
              'VJP["tanh"] = lambda g, out, x: (g * (1 - out * out),)\n'
              'VJP["matmul"] = lambda g, out, x, y: (g @ y.T, x.T @ g)\n'
              'JVP["mul"] = lambda tangents, out, x, y: tangents[0] * y + x * tangents[1]\n')
    ((slug, sources, _),) = shortcuts.route_sources([answer], ["numpy.complex*"])
    assert slug == "route-complex-step" and "1e-30j" in sources[0]
    ns = _run(sources)
    rng = np.random.default_rng(0)
    x, y, g = rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=(2, 4))
    gx, gy = ns["VJP"]["matmul"](g, IMPL["matmul"](x, y), x, y)
    np.testing.assert_allclose(gx, g @ y.T, rtol=1e-12)
    np.testing.assert_allclose(gy, x.T @ g, rtol=1e-12)
    (gt,) = ns["VJP"]["tanh"](g[0, :3], np.tanh(x[0]), x[0])
    np.testing.assert_allclose(gt, g[0, :3] * (1 - np.tanh(x[0]) ** 2), rtol=1e-12)
    t = rng.normal(size=(2, 3))
    np.testing.assert_allclose(ns["JVP"]["mul"]([t, t], None, x, x), 2 * t * x, rtol=1e-12)


@pytest.mark.parametrize("source", ["x = (", "def f(:\n    pass\n"])
def test_sources_that_do_not_parse_make_no_shortcut(source):
    assert shortcuts.mechanism_sources([source]) is None
    assert shortcuts.callables([source])[0] == []


# --- (c) every forbidden route, one added statement each (judged from the source alone) ------

ROUTES = ["graphlib", "torch.autograd.grad", "course_utils.minigraph.Tensor.backward", ".grad_fn",
          "numpy.complex*", "torch.ops.aten.silu*", "builtins.complex",
          "literal:complex", "numpy.complex_dtype", "course_utils.engine.topo_order",
          "tf_keras.optimizers", "course_utils.minigraph.*.OPS"]


def test_each_route_is_spelled_as_a_learner_would_and_the_static_judge_reads_it():
    """Every kind of route (a module, a name in a module, a class's method, an attribute of
    any object, a shell pattern, a builtin, the complex pseudo-routes, a library that is not
    installed) gets one added statement inside the answer's function, and the source of each
    variant reaches that route as the grader reads it."""
    from course_utils.grading.notebook import static

    answer = ('def order(nodes):\n    """Inputs first."""\n    ### BEGIN SOLUTION\n'
              '    return list(nodes)\n    ### END SOLUTION\n')
    made, unspelled = shortcuts.route_variants([answer], [*ROUTES, "forged:__module__"])
    assert unspelled == ["forged:__module__"]
    assert sorted(route for route, _, _ in made) == sorted(ROUTES)
    spelled = {route: statement for route, _, statement in made}
    assert spelled["graphlib"] == "import graphlib; _route = graphlib"
    assert spelled["torch.autograd.grad"] == "from torch.autograd import grad; _route = grad"
    assert spelled[".grad_fn"] == "_route = nodes.grad_fn"  # the answer's own parameter
    assert spelled["numpy.complex*"].startswith("from numpy import complex")  # a real member
    assert spelled["torch.ops.aten.silu*"] == "from torch import ops; _route = ops.aten.silu"
    # a wildcard segment: a module of the course's package that holds the name
    assert spelled["course_utils.minigraph.*.OPS"] == (
        "from course_utils.minigraph.ops import OPS; _route = OPS")
    for route, sources, statement in made:
        (source,) = sources
        lines = source.splitlines()  # in the function's body, in the solution region
        at = lines.index("    return list(nodes)")
        assert lines[at - len(statement.split("; ")):at] == [
            "    " + line for line in statement.split("; ")], route
        reached = {f.what for f in static.analyse(source).reached}
        assert any(static.matches(what, route) for what in reached), (route, reached)
    # Without a function, at the top of the answer's first cell.
    ((_, (top, second), _),) = shortcuts.route_variants(["x = 1\n", "y = 2\n"], ["graphlib"])[0]
    assert top.splitlines() == ["import graphlib", "_route = graphlib", "x = 1"]
    assert second == "y = 2\n"


def test_the_forbidden_routes_of_01_1_are_each_held_to_half_from_the_source_alone():
    """The audit's shortcut (c) on a real exercise: every route of 01.1 (graphlib, networkx,
    the profilers, threads, the frameworks, the course's own engine) added to the solution is
    capped by the static judge, without a kernel."""
    from pathlib import Path

    from course_utils.grading import audit

    root = Path(__file__).resolve().parents[1]
    lesson = audit.read_lesson("01_computation_graphs", root)
    notes: list[str] = []
    results = audit.static_routes(lesson, "01.1", notes)
    names = {r.variant.name for r in results}
    assert {"generated-static-route-graphlib", "generated-static-route-torch",
            "generated-static-route-course_utils.engine.topo_order"} <= names
    assert len(results) >= 30 and all(r.variant.static_only for r in results)
    missed = [(r.variant.name, r.variant.description) for r in results if not r.ok]
    assert not missed
    assert all(r.points == r.possible / 2 and r.static.startswith("static: ") for r in results)
    text = audit.format_results(results, notes={"01_computation_graphs 01.1": notes})
    assert f"generated-static-route: {len(results)} forbidden routes" in text
    assert "each held to half" in text and "WRONG" not in text
