"""Profiling: per-node times and bytes of one run, slowest first."""

from __future__ import annotations

import time

import numpy as np
import pytest

import course_utils.minigraph as mg


def _slow(x):
    time.sleep(0.02)
    return x * 2


mg.register_op(mg.Op("slow_double", _slow, mg.same_shape_rule, doc="2x, slowly"), replace=True)


@pytest.fixture
def model():
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 64), "float64", name="x")
        w = mg.Variable(np.eye(64), name="w")
        h = mg.apply("slow_double", [mg.matmul(x, w, name="h")], name="slow")
        y = mg.sum(mg.tanh(h, name="t"), name="y")
        step = mg.assign_sub(w, mg.constant(np.full((64, 64), 0.5)), name="step")
        init = mg.global_variables_initializer()
    return g, x, w, y, step, init


def test_rows_cover_the_plan_slowest_first_and_sum_to_the_total(model) -> None:
    g, x, w, y, step, init = model
    feed = {x: np.ones((32, 64))}
    prof = mg.profile(g, y, feed, runs=3)
    with mg.Session(g) as sess:
        plan = sess.plan(y, feed)
    assert sorted(r.name for r in prof.rows) == sorted(n.name for n in plan.nodes)
    times = [r.seconds for r in prof.rows]
    assert times == sorted(times, reverse=True)
    assert prof.total == pytest.approx(sum(times))
    assert prof.top(2) == prof.rows[:2]
    # the op that sleeps 20 ms is the hot spot, measured independently by time.sleep's promise
    assert prof.top(1)[0].name == "slow" and prof.top(1)[0].seconds >= 0.02
    assert prof.wall >= prof.total * 0.9
    assert list(prof.by_op())[0] == "slow_double"


def test_bytes_and_shapes_are_those_of_the_real_values(model) -> None:
    g, x, w, y, step, init = model
    prof = mg.profile(g, y, {x: np.ones((32, 64))})
    rows = {r.name: r for r in prof.rows}
    assert (rows["h"].nbytes, rows["h"].shape) == (32 * 64 * 8, (32, 64))
    assert (rows["y"].nbytes, rows["y"].shape) == (8, ())
    assert rows["x"].source.startswith("test_profile.py:")
    text = str(prof)
    assert text.splitlines()[0].split() == ["node", "op", "time", "%", "output", "bytes", "shape"]
    assert text.splitlines()[1].startswith("slow ")
    assert "16.4 KB" in text and "total" in text.splitlines()[-1]


def test_profiling_a_session_runs_its_plan_on_its_variables(model) -> None:
    g, x, w, y, step, init = model
    with mg.Session(g) as sess:
        sess.run(init)
        prof = mg.profile(sess, [y, step], {x: np.ones((2, 64))}, runs=2)
        np.testing.assert_array_equal(sess.run(w), np.eye(64) - 1.0)  # two real runs
    assert {"step", "y"} <= {r.name for r in prof.rows}
    with mg.Session(g) as fresh, pytest.raises(mg.UninitializedVariableError):
        mg.profile(fresh, y, {x: np.ones((2, 64))})
