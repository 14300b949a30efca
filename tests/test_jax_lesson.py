"""Lesson 13's exercises rest on JAX's behaviour: the predictions in exercise 13.1's solution
(the answer key the grader compares a learner's literals with) are the trace counts that jax.jit
really produces, and the primitive names, jit's program count
and the lax.custom_root path that the checks of 13.2-13.5 read are what this JAX has (a new jax
version that differs fails here, not in a learner's grade). A few seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions" / "13_jax.ipynb"


def cell(nb: dict, cell_id: str) -> str:
    (found,) = [c for c in nb["cells"] if c.get("id") == cell_id]
    return "".join(found["source"])


def test_exercise_13_1_answers_are_the_real_trace_counts():
    nb = json.loads(SOLUTIONS.read_text())
    namespace: dict = {}
    exec("import jax\nimport jax.numpy as jnp\nimport numpy as np\n", namespace)
    exec(cell(nb, "s13-e1-calls"), namespace)
    traces = []
    scale = namespace["scale"]

    def counting(x, factor, mode="mul"):
        traces.append(1)
        return scale(x, factor, mode)

    f = jax.jit(counting, static_argnames="mode")
    counts = []
    for call in namespace["CALLS"]:
        call(f)
        counts.append(len(traces))
    answers: dict = {}
    exec(cell(nb, "s13-e1-sol"), answers)  # the literals the answer key takes from the solution
    for name, part in (("after_calls_1_to_4", counts[:4]), ("after_calls_5_to_8", counts[4:])):
        assert answers[name] == part, (
            f"{name}: jax.jit traced {part}, but the solution (the key) says {answers[name]}")


def test_what_the_exercise_checks_read_from_jax_is_there():
    """13.2 counts compiled programs with jit's `_cache_size()`; 13.2-13.5 look for primitives by
    name, inside sub-jaxprs (`jaxprs_in_params`). A JAX that renames them fails here."""
    import numpy as np
    from jax import lax
    from jax.extend.core import jaxprs_in_params

    jnp = jax.numpy
    f = jax.jit(lambda x, n: x * n, static_argnums=1)
    f(jnp.ones(2), 2)
    f(jnp.ones(2), 3)
    f(jnp.zeros(2), 3)
    assert f._cache_size() == 2
    f.clear_cache()
    assert f._cache_size() == 0
    # 13.2 asks that fast_update be what jax.jit returns: every jit shares one type (any
    # arguments), and it cannot be subclassed, so no Python object poses as one.
    assert type(f) is type(jax.jit(abs)) is type(jax.jit(lambda x: x, donate_argnums=0))
    with pytest.raises(TypeError):
        type("Posing", (type(f),), {})

    def names(closed):
        found = set()
        for eqn in closed.jaxpr.eqns:
            found.add(eqn.primitive.name)
            for sub in jaxprs_in_params(eqn.params):
                found |= names(jax.extend.core.ClosedJaxpr(sub, []))
        return found

    @jax.custom_vjp
    def rule(x):
        return x

    rule.defvjp(lambda x: (x, None), lambda _, g: (g,))
    cube = jax.custom_jvp(lambda x: x**3)
    cube.defjvps(lambda t, y, x: 3 * x**2 * t)

    def everything(x):
        host = jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x,
                                 vmap_method="sequential")
        loop = lax.while_loop(lambda v: v.sum() < 10.0, lambda v: v * 2.0, x)
        scanned = lax.scan(lambda c, a: (c + a, c), 0.0, x)[0]
        return jax.jit(lambda v: rule(v) + cube(v))(x) + host + loop + scanned

    found = names(jax.make_jaxpr(everything)(jnp.ones(3)))
    # the custom rules sit inside the jit's sub-jaxpr: finding them proves the recursion
    assert {"pure_callback", "while", "scan", "custom_vjp_call", "custom_jvp_call"} <= found, found
    closed_forms = names(jax.make_jaxpr(lambda c: jnp.cbrt(c) + c ** (1 / 3))(jnp.ones(2)))
    assert {"cbrt", "pow"} <= closed_forms, closed_forms
    # 13.4's check forbids lax.custom_root by these paths
    from jax._src.lax.control_flow import solves

    assert jax.lax.custom_root is solves.custom_root
