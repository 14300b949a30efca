"""Memory planning: liveness and peak bytes by hand, by invariant, and against tracemalloc."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from test_passes import mlp_training_graph

import course_utils.minigraph as mg
from course_utils.minigraph import passes
from course_utils.minigraph.session import prune

MB = 1000 * 1000


def chain(n: int = 1000) -> mg.Graph:
    """x -> exp -> tanh -> exp -> sum: each value used once, by the next node."""
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, n), "float64", name="x")
        g.outputs = [mg.sum(mg.exp(mg.tanh(mg.exp(x, name="a"), name="b"), name="c"), name="s")]
    return g


def test_a_chain_holds_two_values_at_a_time_and_reuses_buffers() -> None:
    plan = mg.memory_plan(chain(), {"x": (125, 1000)})  # 1 MB per value
    assert [(v.name, v.defined, v.last_use, v.nbytes) for v in plan.values] == [
        ("x", 0, 1, MB), ("a", 1, 2, MB), ("b", 2, 3, MB), ("c", 3, 4, MB), ("s", 4, 4, 8)]
    # while b is computed, a and b are alive; the output s lives to the end
    assert plan.live_bytes == [0, MB, 2 * MB, 2 * MB, MB + 8]
    assert plan.peak_bytes == 2 * MB and plan.kept_bytes == 3 * MB + 8
    assert [v.buffer for v in plan.values] == ["input", "b0", "b1", "b0", "b2"]
    assert (plan.buffers, plan.buffer_bytes, plan.input_bytes) == (3, 2 * MB + 8, MB)
    assert "peak live bytes, freed after last use:  2 MB\n" in str(plan)


def test_views_take_no_bytes_and_keep_their_base_alive() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((100, 100), "float64", name="x")
        a = mg.exp(x, name="a")
        t = mg.transpose(a, name="t")  # a view of a
        b = mg.tanh(x, name="b")
        g.outputs = [mg.add(t, b, name="y")]
    plan = mg.memory_plan(g)
    values = {v.name: v for v in plan.values}
    assert values["t"].nbytes == 0 and values["t"].buffer == "view of %a"
    # a's own last reader is t (step 2), but y reads it through t at step 4
    assert values["a"].last_use == values["t"].last_use == 4
    assert plan.live_bytes == [0, 80_000, 80_000, 160_000, 240_000]  # a; a; a, b; a, b, y


def test_placeholders_need_concrete_shapes() -> None:
    with pytest.raises(mg.FeedError, match=r"concrete shape for placeholder %x"):
        mg.memory_plan(chain())
    plan = mg.memory_plan(chain(10), {"x": np.zeros((3, 10))})  # an array gives its shape
    assert plan.values[0].shape == (3, 10)


@pytest.mark.parametrize("optimized", [False, True])
def test_the_mlp_step_at_batch_256_needs_under_60_percent_when_values_are_freed(optimized) -> None:
    g, fetches, _ = mlp_training_graph()
    plan_graph = prune(g, fetches, ["x", "labels"])
    if optimized:
        plan_graph = passes.optimize(plan_graph)
    feed = {"x": (256, 2), "labels": (256,)}
    plan = mg.memory_plan(plan_graph, feed)
    assert plan.peak_bytes <= 0.6 * plan.kept_bytes, str(plan)
    assert plan.peak_bytes <= plan.buffer_bytes <= plan.kept_bytes
    assert plan.peak_bytes == max(plan.live_bytes)


# --- an independent reference: what numpy really allocates (tracemalloc sees numpy's buffers) ----


class KeepEverything(mg.Interpreter):
    """An Interpreter that frees nothing before the end of the run."""

    def _free_schedule(self) -> list[list[mg.Node]]:
        return [[] for _ in self.graph.nodes]


def measured_peak(interpreter: mg.Interpreter, feed: dict) -> int:
    interpreter.run(feed, {})  # warm up: numpy's first calls allocate caches of their own
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        interpreter.run(feed, {})
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_the_plan_predicts_the_bytes_numpy_really_allocates() -> None:
    g = chain()
    feed = {"x": np.random.default_rng(0).normal(size=(125, 1000))}
    plan = mg.memory_plan(g, feed)
    freed = measured_peak(mg.Interpreter(g), feed)
    kept = measured_peak(KeepEverything(g), feed)
    # a few hundred bytes of Python objects on top of the arrays
    assert plan.peak_bytes <= freed <= plan.peak_bytes + 20_000, (plan.peak_bytes, freed)
    assert plan.kept_bytes <= kept <= plan.kept_bytes + 20_000, (plan.kept_bytes, kept)
