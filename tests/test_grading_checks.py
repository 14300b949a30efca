"""The check-cell helpers: forbid a shortcut; predictions checked by digest (no kernel: fast)."""

from __future__ import annotations

import ast
import contextlib
import json
import subprocess
import sys

import numpy as np
import pytest

from course_utils.grading.checks import (
    AtenOps,
    ForbiddenCall,
    check_predictions,
    digest,
    forbid,
    literal_assignments,
)

# --- forbid -------------------------------------------------------------------------------------


def test_a_forbidden_call_raises_inside_the_block_and_is_restored_after():
    original = np.linalg.norm
    with pytest.raises(ForbiddenCall, match="your answer called numpy.linalg.norm: write it"), \
            forbid("numpy.linalg.norm", why="write it"):
        np.linalg.norm([3.0, 4.0])
    assert np.linalg.norm is original
    assert np.linalg.norm([3.0, 4.0]) == 5.0


def test_a_swallowed_forbidden_call_still_fails_the_check():
    def sneaky():
        try:
            return np.linalg.norm([3.0, 4.0])
        except Exception:
            return 5.0

    with pytest.raises(ForbiddenCall, match="numpy.linalg.norm"), forbid("numpy.linalg.norm"):
        assert sneaky() == 5.0


def test_an_answer_that_does_not_call_it_passes_and_methods_can_be_forbidden():
    class Tensor:
        def backward(self):
            return "library"

        @staticmethod
        def helper():
            return "static"

    import types

    module = types.ModuleType("fake_mod_for_forbid")
    module.Tensor = Tensor
    sys.modules["fake_mod_for_forbid"] = module
    try:
        with forbid("fake_mod_for_forbid.Tensor.backward", "fake_mod_for_forbid.Tensor.helper",
                    "not_installed_pkg.fn") as called:
            assert np.sum([1, 2]) == 3
        assert called == []
        with pytest.raises(ForbiddenCall), forbid("fake_mod_for_forbid.Tensor.helper"):
            Tensor.helper()
        assert Tensor().backward() == "library" and Tensor.helper() == "static"
    finally:
        del sys.modules["fake_mod_for_forbid"]


def test_forbidding_a_name_that_does_not_exist_is_an_error_of_the_check():
    with pytest.raises(AttributeError, match="does not exist"), forbid("numpy.no_such_thing"):
        pass


# --- predictions --------------------------------------------------------------------------------

RIGHT = {"n_nodes": digest("n_nodes", 7), "faster": digest("faster", "graph"),
         "shape": digest("shape", (2, 3))}


def test_literal_predictions_that_are_right_pass():
    sources = ["x = 1", "n_nodes = 7\nfaster = 'graph'", "shape = (2, 3)"]
    check_predictions(RIGHT, sources=sources,
                      namespace={"n_nodes": 7, "faster": "graph", "shape": (2, 3)})


def test_wrong_predictions_are_named_without_the_right_answer():
    sources = ["n_nodes = 6\nfaster = 'graph'\nshape = (3, 2)"]
    with pytest.raises(AssertionError) as e:
        check_predictions(RIGHT, sources=sources, namespace={})
    message = str(e.value)
    assert message.startswith("1 of 3 predictions right; not right: `n_nodes`, `shape`.")
    assert "7" not in message and "(2, 3)" not in message


def test_a_computed_prediction_is_refused_and_the_latest_assignment_counts():
    with pytest.raises(AssertionError, match="must be a value you write down.*found `len"):
        check_predictions({"n_nodes": RIGHT["n_nodes"]}, sources=["n_nodes = len(nodes)"],
                          namespace={})
    check_predictions({"n_nodes": RIGHT["n_nodes"]}, sources=["n_nodes = 3", "n_nodes = 7"],
                      namespace={"n_nodes": 7})


def test_a_missing_or_changed_prediction_is_reported():
    with pytest.raises(AssertionError, match="`faster` is not set"):
        check_predictions({"faster": RIGHT["faster"]}, sources=["x = 1"], namespace={})
    with pytest.raises(AssertionError, match="`n_nodes` was changed after you wrote it down"):
        check_predictions({"n_nodes": RIGHT["n_nodes"]}, sources=["n_nodes = 7"],
                          namespace={"n_nodes": 8})


def test_floats_are_not_predictions_and_literal_assignments_reads_only_the_top_level():
    with pytest.raises(TypeError, match="a prediction must be"):
        digest("ratio", 1.5)
    found = literal_assignments("a = 1\nb: int = 2\nif True:\n    c = 3\nd, e = 4, 5\nf, g = h")
    assert sorted(found) == ["a", "b", "d", "e"]  # a tuple of literals is read element by element
    assert ast.literal_eval(found["e"]) == 5
    assert literal_assignments("this is not python") == {}


def test_the_digest_command_prints_the_dict_to_paste():
    done = subprocess.run([sys.executable, "-m", "course_utils.grading.checks", "n_nodes=7",
                           "faster='graph'"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.replace("'", '"')) == {
        "n_nodes": RIGHT["n_nodes"], "faster": RIGHT["faster"]}


def test_a_name_imported_into_the_learners_namespace_is_forbidden_too(monkeypatch):
    from course_utils.grading import checks

    namespace = {"norm": np.linalg.norm, "other": 1}
    monkeypatch.setattr(checks, "_user_namespace", lambda: namespace)
    with pytest.raises(ForbiddenCall, match="numpy.linalg.norm"), forbid("numpy.linalg.norm"):
        namespace["norm"]([3.0, 4.0])
    assert namespace["norm"] is np.linalg.norm and namespace["other"] == 1


def test_a_forbidden_class_kept_under_another_name_or_subclassed_cannot_be_instantiated():
    """`_S = graphlib.TopologicalSorter` (a private alias) or a subclass of the forbidden class
    reach it without its module's name; its ``__init__`` raises for the block, and is put back."""
    import graphlib

    alias = graphlib.TopologicalSorter

    class Mine(graphlib.TopologicalSorter):
        pass

    for make in (lambda: alias({1: [2]}), lambda: Mine({1: [2]})):
        with pytest.raises(ForbiddenCall, match="graphlib.TopologicalSorter"), \
                forbid("graphlib.TopologicalSorter"):
            make()
    assert list(alias({1: [2]}).static_order()) == [2, 1] == list(Mine({1: [2]}).static_order())
    # A class and one of its methods, in either order: each path is looked up before any is
    # patched.
    for paths in (("graphlib.TopologicalSorter", "graphlib.TopologicalSorter.prepare"),
                  ("graphlib.TopologicalSorter.prepare", "graphlib.TopologicalSorter")):
        with forbid(*paths):
            pass
    assert graphlib.TopologicalSorter is alias and "__init__" in vars(alias)


def test_a_reference_the_answer_kept_is_forbidden_too():
    """A default argument, a closure, a list: every copy of the reference reaches the function,
    whose body raises for the duration of the block (a closure's body too)."""
    import types

    def make_closure(k):
        def scaled(x):
            return k * x
        return scaled

    module = types.ModuleType("fake_mod_for_capture")
    module.run = lambda x: x + 1
    module.scaled = make_closure(3)
    sys.modules["fake_mod_for_capture"] = module
    try:
        def answer(x, _run=module.run, _kept=[module.scaled]):  # noqa: B006 (the attack)
            return _run(x) + _kept[0](x)

        assert answer(1) == 5
        with pytest.raises(ForbiddenCall, match="fake_mod_for_capture.run"), \
                forbid("fake_mod_for_capture.run", why="write it"):
            answer(1)
        with pytest.raises(ForbiddenCall, match="fake_mod_for_capture.scaled"), \
                forbid("fake_mod_for_capture.scaled"), \
                contextlib.suppress(ForbiddenCall):  # swallowed: the block still fails
            answer.__defaults__[1][0](2)
        assert answer(1) == 5 and module.scaled(2) == 6, "the bodies are put back"
    finally:
        del sys.modules["fake_mod_for_capture"]


# --- AtenOps --------------------------------------------------------------------------------------


def test_aten_ops_records_pytorch_operators_only_inside_the_block_and_not_numpy():
    torch = pytest.importorskip("torch")
    w = np.array([[0.5, -1.27], [0.006, 1.0]])
    with AtenOps() as aten:
        np.round(w / (np.abs(w).max() / 127))  # numpy by hand: no operator of PyTorch's
    assert aten.names == set()
    with AtenOps() as aten:
        t = torch.from_numpy(w)
        torch.round(t * 2.0).numpy()  # a function, an operator, and the way back to numpy
        t.abs().max()  # methods
    assert {"mul", "round", "abs", "max"} <= aten.names
    torch.exp(torch.ones(2))  # after the block: not recorded
    assert "exp" not in aten.names
    with pytest.raises(ValueError, match="inside"), AtenOps() as aten:
        raise ValueError("an error inside the block")
    torch.exp(torch.ones(2))  # the mode was popped on the way out
    assert aten.names == set()


def test_complex_use_sees_the_complex_step_and_not_a_derivative():
    """ComplexUse: exact jvp rules run watched record nothing and give numpy's values; rules that
    evaluate their op at x + i h t (through arithmetic, np.tanh, a reduction, or astype) are
    recorded; the table is the learner's again after the block, even after an error."""
    from course_utils.grading.checks import ComplexUse

    rng = np.random.default_rng(7)
    x, y, t, s = (rng.normal(size=shape) for shape in ((3, 2), (2, 4), (3, 2), (2, 4)))
    exact = {"tanh": lambda ts, out, a: ts[0] * (1.0 - out * out),
             "sum": lambda ts, out, a, axis=None: np.sum(ts[0], axis=axis),
             "matmul": lambda ts, out, a, b: ts[0] @ b + a @ ts[1]}
    use = ComplexUse()
    with use.rules(exact):
        got = [exact["tanh"]([t], np.tanh(x), x), exact["sum"]([t], x.sum(0), x, axis=0),
               exact["matmul"]([t, s], x @ y, x, y)]
    assert use.ops == set()
    for g, want in zip(got, [t * (1 - np.tanh(x) ** 2), t.sum(0), t @ y + x @ s], strict=True):
        np.testing.assert_allclose(np.asarray(g, dtype=float), want, rtol=1e-12)

    def complex_step(f, h=1e-30):
        return lambda ts, out, *xs, **attrs: np.imag(
            f(*[a + 1j * h * b for a, b in zip(xs, ts, strict=True)], **attrs)) / h

    def by_astype(ts, out, a):
        z = a.astype(complex)
        z.imag = 1e-30 * ts[0]
        return np.tanh(z).imag / 1e-30

    tricks = {"tanh": complex_step(np.tanh), "sum": complex_step(np.sum),
              "matmul": complex_step(np.matmul)}
    for op, args, kwargs in [("tanh", ([t], None, x), {}), ("sum", ([t], None, x), {"axis": 0}),
                             ("matmul", ([t, s], None, x, y), {})]:
        use = ComplexUse()
        with use.rules(tricks):
            tricks[op](*args, **kwargs)
        assert use.ops, f"the complex step of {op} went unseen"
    table = {"tanh": by_astype}
    use = ComplexUse()
    with pytest.raises(ZeroDivisionError), use.rules(table):
        table["tanh"]([t], None, x)
        raise ZeroDivisionError
    assert "astype" in use.ops and table == {"tanh": by_astype}


def test_jaxpr_primitives_counts_inside_jit_scan_and_custom_rules():
    """Lesson 13's checks count a program's loops, callbacks and size with the grader's own
    counter: equations inside jit, scan and a custom_vjp rule count too, and a Python loop grows
    the count with its length where a scan does not."""
    jax = pytest.importorskip("jax")
    from jax import lax

    from course_utils.grading.checks import jaxpr_primitives

    jnp = jax.numpy

    @jax.custom_vjp
    def rule(x):
        return jnp.sin(x)

    rule.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (g * jnp.cos(x),))

    def scanned(xs):
        return lax.scan(lambda c, x: (c + rule(x), c), 0.0, xs)[0]

    counts = jaxpr_primitives(jax.make_jaxpr(jax.jit(scanned))(jnp.ones(3)))
    assert counts["scan"] == 1 and counts["sin"] == 1 and counts["add"] >= 1
    assert any(name.startswith("custom_vjp") for name in counts)
    sizes = [sum(jaxpr_primitives(jax.make_jaxpr(scanned)(jnp.ones(n))).values()) for n in (2, 9)]
    assert sizes[0] == sizes[1]
    unrolled = [sum(jaxpr_primitives(jax.make_jaxpr(lambda xs: sum(jnp.sin(x) for x in xs))(
        jnp.ones(n))).values()) for n in (2, 9)]
    assert unrolled[0] < unrolled[1]


def test_jaxpr_constants_finds_a_table_the_program_looks_values_up_in():
    """13.2 (attack review, 4/4): warm-up factors for 100,000 steps worked out in numpy and indexed
    by the step in the program. The largest constant, wherever it sits (the program's consts, a
    jit or scan inside it), is the table's size; a program that computes the factor holds only
    scalars."""
    jax = pytest.importorskip("jax")
    import numpy as np
    from jax import lax

    from course_utils.grading.checks import jaxpr_constants

    jnp = jax.numpy
    table = np.minimum(np.arange(100_000) + 1, 10) / 10

    def looked_up(step):
        return jnp.asarray(table)[step]

    def computed(step):
        return jnp.minimum(step + 1, 10) / 10

    assert jaxpr_constants(jax.make_jaxpr(looked_up)(3)) == 100_000
    inner = jax.make_jaxpr(lambda s: lax.scan(lambda c, x: (c + looked_up(s), c), 0.0,
                                              jnp.ones(2))[0])(3)
    assert jaxpr_constants(inner) == 100_000
    assert jaxpr_constants(jax.make_jaxpr(jax.jit(looked_up))(3)) == 100_000
    assert jaxpr_constants(jax.make_jaxpr(computed)(3)) <= 1


def test_moved_result_moves_a_solvers_solution_and_puts_the_solver_back():
    """13.4 (attack review, 6/6): a backward rule that works the cube root out again in closed
    form, ignoring the solution. With the solver's while_loop made to return a moved root, a rule
    that uses the solution it is handed gives the derivative at the moved root; the closed form
    gives the unmoved one. Central differences of the numpy cube root are the reference."""
    jax = pytest.importorskip("jax")
    import numpy as np
    from jax import lax

    from course_utils.grading.checks import moved_result

    jnp = jax.numpy

    def newton(c):
        def step(state):
            x, _, n = state
            return x - (x**3 - c) / (3 * x**2), x, n + 1

        x0 = jnp.maximum(c, 1.0)
        return lax.while_loop(lambda s: (s[2] < 100) & jnp.any(s[0] != s[1]), step,
                              step((x0, x0, 0)))[0]

    def rule(backward):
        f = jax.custom_vjp(newton)
        f.defvjp(lambda c: (newton(c), (newton(c), c)), backward)
        return jax.grad(lambda c: jnp.sum(f(c)))

    from_solution = rule(lambda res, g: (g / (3 * res[0] ** 2),))
    closed_form = rule(lambda res, g: (g / (3 * jnp.cbrt(res[1]) ** 2),))
    c, eps = jnp.array([0.5, 2.0, 27.0]), 1e-6  # float32 unless JAX runs in 64 bits
    c64 = np.asarray(c, dtype=np.float64)
    central = (np.cbrt(c64 + eps) - np.cbrt(c64 - eps)) / (2 * eps)
    for slope in (from_solution, closed_form):
        assert np.allclose(slope(c), central, rtol=1e-5)
    original = lax.while_loop
    jax.clear_caches()
    with moved_result(lax, "while_loop", 1.01):
        moved = np.cbrt(c64) * 1.01
        assert np.allclose(newton(c), moved, rtol=1e-6)
        assert np.allclose(from_solution(c), 1 / (3 * moved**2), rtol=1e-5)
        assert not np.allclose(closed_form(c), 1 / (3 * moved**2), rtol=1e-3)
    jax.clear_caches()
    assert lax.while_loop is original
