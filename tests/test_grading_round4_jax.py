"""Issue 36, round 4: the fourth attack review's routes in lesson 13 (and 08.5's setting).

- 13.2: the warm-up factors in one small array constant (``jnp.asarray(FACTORS)[...]``, 4/4):
  ``checks.jaxpr_scalars`` counted scalar constants only; it counts the numbers of array
  constants too (a table is a table whatever its shape).
- 13.3: a ``jax.custom_vjp`` around a ``lax.while_loop``, with a hand-written BPTT as its
  backward (5/5): the exercise asks jax.grad to go through the learner's loop. JAX's rule makers
  are routes of 13.3 (``routes.CUSTOM_RULES``), and the checks refuse a rule's primitive in
  rnn_scan's program.
- 13.5: ``isinstance(X, jax.core.Tracer)`` chose vmap(grad) under make_jaxpr and a Python loop on
  concrete arrays (6/6). The checks score what the program they trace computes
  (``checks.jaxpr_run``), and lesson 13's answers may not ask JAX about its trace
  (``routes.TRACE_STATE``).
- 13.4: a rule from ``jax.jvp`` of a Newton step, jax.jvp kept as ``next(map(getattr, [jax],
  ["jvp"]))`` (6/6, past the static judge): the rule checks make JAX's forward mode and Jacobians
  raise while they run (``forbid`` replaces the functions' bodies, so a kept name raises too).
- 08.5: ``torch._dynamo.config.assume_static_by_default = False`` for the whole process instead
  of marking the dimension (3/3): a route of 08.5 (``routes.DYNAMIC_SETTINGS``) whose message says
  what to use instead; lesson 08's own ``with torch._dynamo.config.patch(...)`` stays free.
"""

from __future__ import annotations

import pytest
from test_grading_static import judged

from course_utils.grading import routes, static
from course_utils.grading.notebook.report import ExerciseResult

jax = pytest.importorskip("jax")


def test_jaxpr_scalars_counts_the_numbers_of_an_array_constant():
    """A table of eleven warm-up factors held as one array constant is eleven numbers (the old
    count, scalars only, saw at most the step's literals); the solution's warm-up holds two, the
    course's unusual table built in the program from arange four."""
    from course_utils.grading.checks import jaxpr_scalars

    jax.config.update("jax_enable_x64", True)
    jnp, warmup = jax.numpy, 10
    factors = [(k + 1) / warmup for k in range(warmup)] + [1.0]

    def looked_up(w, g, step, base_lr):
        return w - base_lr * jnp.asarray(factors)[jnp.minimum(step, warmup)] * g

    def computed(w, g, step, base_lr):
        return w - jnp.where(step < warmup, base_lr * (step + 1) / warmup, base_lr) * g

    def built_in_the_program(w, g, step, base_lr):
        table = jnp.append(jnp.arange(1, warmup + 1) / warmup, 1.0)
        return w - base_lr * table[jnp.minimum(step, warmup)] * g

    def count(f):
        return jaxpr_scalars(jax.make_jaxpr(jax.jit(f))(jnp.ones(2), jnp.ones(2), 3, 0.5))

    assert count(looked_up) >= len(set(factors)) > 5
    assert count(computed) <= 5 and count(built_in_the_program) <= 5


def test_jaxpr_run_scores_what_the_traced_program_computes():
    """A function that computes one thing under a trace and another on arrays: jaxpr_run's values
    are the traced program's (against numpy), and its jaxpr is that program."""
    import numpy as np

    from course_utils.grading.checks import jaxpr_primitives, jaxpr_run

    jnp = jax.numpy

    def forked(x, pair):
        if isinstance(x, jax.core.Tracer):
            return {"a": jnp.sin(x) * pair[0], "b": [pair[1] + 1.0]}
        return {"a": x, "b": [pair[1]]}

    x, pair = np.linspace(0.0, 1.0, 5), (np.float64(2.0), np.ones(3))
    program, out = jaxpr_run(forked, x, pair)
    assert "sin" in jaxpr_primitives(program)
    assert set(out) == {"a", "b"} and len(out["b"]) == 1
    np.testing.assert_allclose(np.asarray(out["a"]), np.sin(x) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out["b"][0]), np.full(3, 2.0))


# The audit of 13_jax with this round's fixtures (the small table, the rule around a while_loop,
# jax.jvp kept through getattr passed as a value, the tracer fork, whose `# expect: == 0` holds
# its traced program to nothing) runs once, in test_shortcuts, which also asserts that the checks
# alone hold each to half (HELD_BY_THE_CHECKS) and that the unusual answers keep full marks.


BPTT = ("@jax.custom_vjp\ndef rnn_scan(params, xs, h0):\n    return _loop(params, xs, h0)\n\n\n"
        "rnn_scan.defvjp(_fwd, _bwd)\n")
FORK = ("def per_example_grads(loss, params, X, y):\n    if {}:\n"
        "        return jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(params, X, y)\n"
        "    return [jax.grad(loss)(params, X[i], y[i]) for i in range(len(X))]\n")


@pytest.mark.parametrize("exercise, answer, route", [
    ("13.3", BPTT, "jax.custom_vjp"),
    ("13.3", "from jax import custom_jvp\nrnn_scan = custom_jvp(_loop)\n", "jax.custom_jvp"),
    ("13.3", "rnn_scan = _wrapped\nrnn_scan.defjvp(_tangents)\n", ".defjvp"),
    ("13.3", "import jax.extend.core as jc\nPRIM = jc.Primitive('rnn')\n", "jax.extend"),
    ("13.5", FORK.format("isinstance(X, jax.core.Tracer)"), "jax.core"),
    ("13.5", FORK.format("not jax.extend.core.unsafe_am_i_under_a_jit_DO_NOT_USE()"),
     "jax.extend.core.unsafe_*"),
    ("13.5", "def per_example_grads(loss, params, X, y):\n    try:\n        np.asarray(X)\n"
     "    except jax.errors.TracerArrayConversionError:\n        return 0\n", "jax.errors"),
    ("13.2", "def warmup_update(w, grad, step, base_lr):\n"
     "    with jax.ensure_compile_time_eval():\n        return w\n",
     "jax.ensure_compile_time_eval"),
])
def test_lesson_13_answers_take_no_rule_and_ask_jax_nothing_about_its_trace(
        exercise, answer, route):
    found = judged("13_jax", exercise, answer)
    assert route in [r for _, r in found.forbidden], found


def test_08_5_a_dynamic_setting_for_the_whole_process_is_a_route_with_advice():
    """The attack's global assignment is a route, and the message says what to use; lesson 08's
    scoped patch (the course's unusual-dynamic-by-config) and mark_dynamic are free."""
    answer = ("def run_compiled(step, w0, batches, lrs):\n"
              "    torch._dynamo.config.assume_static_by_default = False\n"
              "    w = torch.tensor(w0, dtype=torch.float64)\n"
              "    for x, lr in zip(batches, lrs, strict=True):\n"
              "        w = step(w, x, torch.tensor(lr, dtype=torch.float64))\n"
              "    return float(w)\n")
    found = judged("08_torchscript_and_after", "08.5", answer)
    assert [r for _, r in found.forbidden] == ["torch._dynamo.config.assume_static_by_default"]
    result = ExerciseResult(exercise="08.5", points=3.0, possible=3.0, status="pass")
    static.apply([result], {"08.5": found}, [])
    assert result.points == 1.5 and "mark_dynamic(x, 0)" in result.message, result.message
    for route in ("setattr(torch._dynamo.config, 'specialize_float', False)\n",
                  "from torch._dynamo import config\nconfig.automatic_dynamic_shapes = False\n",
                  "torch._dynamo.config.patch(assume_static_by_default=False).__enter__()\n"):
        assert judged("08_torchscript_and_after", "08.5", route).forbidden, route
    scoped = answer.replace(
        "    torch._dynamo.config.assume_static_by_default = False\n", "").replace(
        "    for x", "    with torch._dynamo.config.patch(assume_static_by_default=False):\n"
        "      for x")
    assert not judged("08_torchscript_and_after", "08.5", scoped).forbidden
    assert set(routes.INSTEAD) <= set(routes.FORBIDDEN["08.5"])
