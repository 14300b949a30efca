"""viz.draw on JAX jaxprs: the drawing holds exactly the jaxpr's equations, named as printed.

The reference for every check is JAX itself: the jaxpr's own equations and variables, and the
text ``print(jaxpr)`` writes. About two seconds (importing jax, a few small traces).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from course_utils import viz

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy
lax = jax.lax
core = pytest.importorskip("jax.extend.core")

RENDERERS = ["builtin", pytest.param("graphviz", marks=pytest.mark.skipif(
    shutil.which("dot") is None, reason="Graphviz `dot` is not on PATH (CI has it)"))]


def layer(x, w):
    return jnp.tanh(x @ w + 1.0).sum()


X, W = jnp.ones((2, 3)), jnp.full((3, 2), 0.5)


def mlp_loss(params, x, y):
    """The course MLP's loss: two relu layers (relu is a custom_jvp that calls a shared jaxpr)."""
    *hidden, (w, b) = params
    for wh, bh in hidden:
        x = jax.nn.relu(x @ wh + bh)
    logp = jax.nn.log_softmax(x @ w + b)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def mlp_args():
    rng = np.random.default_rng(0)
    sizes = [(2, 8), (8, 8), (8, 2)]
    params = [(jnp.asarray(rng.normal(size=s)), jnp.zeros(s[1])) for s in sizes]
    return params, jnp.asarray(rng.normal(size=(5, 2))), jnp.asarray([0, 1, 1, 0, 1])


def printed_binders(closed) -> list[tuple[str, str]]:
    """(first result name, primitive) of each top-level equation, read from print(jaxpr).

    Top-level equations are the lines indented by four spaces after the outer ``let``; shared
    sub-jaxprs that JAX hoists above it (``let relu = { ... } in``) come before that line.
    """
    text = str(closed)
    body = text[text.index("{ lambda", text.rindex(" in\n{ lambda") + 4
                           if " in\n{ lambda" in text else 0):]
    found = []
    for line in body.splitlines():
        m = re.match(r"^    (\w+):\S+(?: \w+:\S+)* = (\w+)", line)
        if m:
            found.append((m.group(1), m.group(2)))
    return found


def ops(d):
    """The boxes of the top-level equations, in order (sub-jaxprs' equations are inside boxes)."""
    return [n for n in d.graph.nodes if re.fullmatch(r"eqn:\d+", n.id)]


@pytest.mark.parametrize("renderer", RENDERERS)
def test_equations_inputs_and_output(renderer):
    closed = jax.make_jaxpr(layer)(X, W)
    d = viz.draw(closed, renderer=renderer)
    assert [n.label for n in ops(d)] == [e.primitive.name for e in closed.jaxpr.eqns]
    inputs = [n for n in d.graph.nodes if n.kind == "input"]
    assert [n.label for n in inputs] == ["a", "b"]
    assert [n.details for n in inputs] == [("x", "f64[2,3]"), ("w", "f64[3,2]")]
    add = ops(d)[1]
    assert add.details == ("d = add c 1.0",)  # the literal stays in the equation, as printed
    assert [e.label for e in d.graph.edges if e.dst == "output"] == ["f64[]"]
    texts = d.svg
    for word in ("dot_general", "tanh", "reduce_sum", "f64[2,2]", "output"):
        assert word in texts, f"{word!r} is not in the drawing"


def test_every_data_dependency_is_one_edge():
    """Into each equation's box come edges from the definers of its operands; an operand a
    sub-jaxpr reads flows into that sub-jaxpr's inputs instead, and its results into the box."""
    params, x, y = mlp_args()
    closed = jax.make_jaxpr(jax.value_and_grad(mlp_loss))(params, x, y)
    g = viz.draw(closed, renderer="builtin", max_nodes=1000).graph
    jaxpr = closed.jaxpr
    assert any(e.params.get("call_jaxpr") for e in jaxpr.eqns), "relu should be a custom_jvp_call"
    definer = {v: f"in:{n.label}" for v, n in zip(
        jaxpr.invars, [n for n in g.nodes if n.id.startswith("in:")], strict=True)}
    for k, eqn in enumerate(jaxpr.eqns):
        nid = f"eqn:{k}"
        want = {definer[v] for v in eqn.invars if not isinstance(v, core.Literal)}
        into_box = {e.src for e in g.edges if e.dst == nid and not e.src.startswith(nid + "/")}
        into_subs = {e.src for e in g.edges
                     if e.dst.startswith(nid + "/") and not e.src.startswith(nid + "/")}
        assert into_box | into_subs == want, (
            f"equation {k} ({eqn.primitive.name}): edges from {into_box | into_subs}, want {want}")
        if into_subs:  # each sub-jaxpr's results flow into the equation's box
            assert any(e.src.startswith(nid + "/") for e in g.edges if e.dst == nid)
        for v in eqn.outvars:
            definer[v] = nid
    want_out = {definer[v] for v in jaxpr.outvars}
    assert {e.src for e in g.edges if e.dst == "output"} == want_out


def test_names_are_the_printed_names():
    """Hoisted shared jaxprs (relu) and nested jit calls shift JAX's naming: we follow it."""
    params, x, y = mlp_args()
    for closed in (jax.make_jaxpr(layer)(X, W), jax.make_jaxpr(jax.grad(layer))(X, W),
                   jax.make_jaxpr(mlp_loss)(params, x, y),
                   jax.make_jaxpr(jax.value_and_grad(mlp_loss))(params, x, y)):
        d = viz.draw(closed, renderer="builtin", max_nodes=1000)
        binders = printed_binders(closed)
        assert len(binders) == len(closed.jaxpr.eqns), "the test's reading of print() is off"
        named = [(n.details[0].split(" = ")[0].split()[0], n.label) for n in ops(d)]
        assert named == binders


def control_flow(x):
    y = lax.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: -v, x)
    y = lax.while_loop(lambda v: v.sum() < 10.0, lambda v: v * 2.0, y)
    return lax.scan(lambda c, a: (c + a, c * a), 0.0, y)


@pytest.mark.parametrize("renderer", RENDERERS)
def test_sub_jaxprs_are_clusters_wired_to_their_equation(renderer):
    closed = jax.make_jaxpr(control_flow)(jnp.ones(3))
    d = viz.draw(closed, renderer=renderer)
    g = d.graph
    prims = {e.primitive.name: f"eqn:{k}" for k, e in enumerate(closed.jaxpr.eqns)}
    clusters = {c.label: c for c in g.clusters}
    assert sorted(clusters) == ["cond: branches[0]", "cond: branches[1]", "scan: jaxpr",
                                "while: body_jaxpr", "while: cond_jaxpr"]
    for label, c in clusters.items():
        owner = prims[label.split(":")[0]]
        assert c.members and all(m.startswith(f"{owner}/") for m in c.members), label
        members = [g.node(m) for m in c.members]
        assert [n.label for n in members if n.kind == "op"], f"{label} holds no equation"
        # the sub-jaxpr's results flow into its equation's box
        assert any(e.src in c.members and e.dst == owner for e in g.edges), label
    # cond: x flows into both branches' inputs; the branch index straight into the cond box
    cond = g.node(prims["cond"])
    assert cond.kind == "op" and cond.details[0].startswith("e = cond d a")
    for branch in ("branches[0]", "branches[1]"):
        (inp,) = [m for m in clusters[f"cond: {branch}"].members if "/in:" in m]
        assert [e.src for e in g.edges if e.dst == inp] == ["in:a"]
    assert [e.src for e in g.edges if e.dst == prims["cond"] and "/" not in e.src] == [
        prims["convert_element_type"]]
    # while: the carry flows into the test and into the body
    for part in ("cond_jaxpr", "body_jaxpr"):
        (inp,) = [m for m in clusters[f"while: {part}"].members if "/in:" in m]
        assert [e.src for e in g.edges if e.dst == inp] == [prims["cond"]]
    for text in ("cond: branches[1]", "while: body_jaxpr", "scan: jaxpr"):
        assert text in d.svg
    scan = next(e for e in closed.jaxpr.eqns if e.primitive.name == "scan")
    assert len([m for m in clusters["scan: jaxpr"].members if "/eqn:" in m]) == len(
        scan.params["jaxpr"].jaxpr.eqns)


def test_while_with_constants_routes_each_operand_to_its_part():
    def f(x, limit, factor):  # the test reads `limit`, the body reads `factor`: two constants
        return lax.while_loop(lambda v: v.sum() < limit, lambda v: v * factor, x)

    closed = jax.make_jaxpr(f)(jnp.ones(2), 10.0, 1.5)
    (eqn,) = closed.jaxpr.eqns
    assert (eqn.params["cond_nconsts"], eqn.params["body_nconsts"]) == (1, 1)
    g = viz.draw(closed, renderer="builtin").graph
    into = {c.label: sorted(e.src for e in g.edges
                            if e.dst in c.members and e.src.startswith("in:"))
            for c in g.clusters}
    assert into == {"while: cond_jaxpr": ["in:a", "in:b"], "while: body_jaxpr": ["in:a", "in:c"]}


def test_a_loop_body_collapses_into_one_box():
    closed = jax.make_jaxpr(control_flow)(jnp.ones(3))
    full = viz.draw(closed, renderer="builtin").graph
    small = viz.draw(closed, renderer="builtin", max_nodes=14).graph
    assert len(small.nodes) <= 14 < len(full.nodes)
    groups = [n.label for n in small.nodes if n.kind == "group"]
    assert any(label.startswith("scan jaxpr") for label in groups), groups


def test_grad_collapses_into_forward_and_backward():
    closed = jax.make_jaxpr(jax.grad(layer))(X, W)
    scopes = {n.scope for n in viz.draw(closed, renderer="builtin").graph.nodes}
    assert not any(list(core.jaxprs_in_params(e.params)) for e in closed.jaxpr.eqns)
    assert {("jvp()",), ("transpose(jvp())",)} <= scopes
    d = viz.draw(closed, renderer="builtin", max_nodes=6)
    groups = sorted(n.label for n in d.graph.nodes if n.kind == "group")
    assert groups == ["jvp() (5 nodes)", "transpose(jvp()) (5 nodes)"]


def test_constants_literal_results_identity_and_unused_results():
    w = jnp.arange(6.0).reshape(3, 2)  # closed over: a constvar of the ClosedJaxpr

    def f(x):
        _ = jnp.sin(x)  # unused: the trace keeps it, printed as `_`
        return x @ w, x, 3.0

    closed = jax.make_jaxpr(f)(jnp.ones((4, 3)))
    assert str(closed).startswith("{ lambda a:f64[3,2]; b:f64[4,3]. let")
    d = viz.draw(closed, renderer="builtin")
    kinds = {n.id: (n.kind, n.label, n.details) for n in d.graph.nodes}
    assert kinds["const:a"] == ("const", "a", ("constant", "f64[3,2]"))
    assert kinds["in:b"] == ("input", "b", ("x", "f64[4,3]"))
    assert kinds["eqn:0"] == ("op", "sin", ("_ = sin b",))
    assert kinds["literal:2"][:2] == ("const", "3.0")
    assert [(e.src, e.label) for e in d.graph.edges if e.dst == "output"] == [
        ("eqn:1", "f64[4,2]"), ("in:b", "f64[4,3]"), ("literal:2", "f64[]")]
    assert d.graph.node("output").details == ("c, b, 3.0",)


def test_jaxpr_without_consts_and_a_traced_jit():
    closed = jax.make_jaxpr(layer)(X, W)
    open_ = viz.draw(closed.jaxpr, renderer="builtin")
    traced = viz.draw(jax.jit(layer).trace(X, W), renderer="builtin")
    assert [n.label for n in ops(open_)] == [n.label for n in ops(traced)] == [
        e.primitive.name for e in closed.jaxpr.eqns]


def test_highlight_by_primitive_or_variable():
    d = viz.draw(jax.make_jaxpr(layer)(X, W), renderer="builtin", highlight=["tanh", "c"])
    assert sorted(n.label for n in d.graph.nodes if n.highlight) == ["dot_general", "tanh"]


def test_supported_list_names_jaxprs():
    assert any("jaxpr" in s for s in viz.SUPPORTED)
    with pytest.raises(TypeError, match="make_jaxpr"):
        viz.draw(object())


def test_drawing_without_jax_never_imports_it():
    code = ("import sys; from course_utils.viz import draw, DrawGraph\n"
            "g = DrawGraph(); g.add_node('x', 'placeholder', kind='input')\n"
            "draw(g, renderer='builtin'); print('jax' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "COURSE_VIZ_RENDERER": ""})
    assert out.stdout.strip() == "False"


def test_custom_derivative_rules_draw_with_their_primal_jaxpr():
    @jax.custom_vjp
    def sine(x):
        return jnp.sin(x)

    sine.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (g * jnp.cos(x),))

    @jax.custom_jvp
    def cube(x):
        return x ** 3

    cube.defjvps(lambda t, y, x: 3 * x**2 * t)
    for f, primitive in ((sine, "custom_vjp_call"), (cube, "custom_jvp_call")):
        closed = jax.make_jaxpr(f)(jnp.ones(2))
        (eqn,) = closed.jaxpr.eqns
        assert eqn.primitive.name == primitive
        g = viz.draw(closed, renderer="builtin").graph
        (box,) = [n for n in g.nodes if n.id == "eqn:0"]
        assert box.details[0].startswith(f"b = {primitive}")
        assert not any("<" in line for line in box.details), box.details  # no callables' reprs
        (cluster,) = g.clusters
        inner = [n.label for n in g.nodes if n.id in cluster.members and n.kind == "op"]
        assert inner == [e.primitive.name for e in eqn.params["call_jaxpr"].jaxpr.eqns]
