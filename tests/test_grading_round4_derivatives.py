"""Issue 36, round 4: a derivative rule that evaluates its op's nonlinearity at points other than
its input is a difference quotient, however many are combined. The third attack review's two
routes above half, graded by the shortcut audit with these fixtures alone:

- 01.4: each jvp rule a Richardson extrapolation (4 levels) of ``(IMPL[op](x + s t) - IMPL[op](x
  - s t)) / 2s``, inside the checks' 1e-12 (6/6). ``checks.ComplexUse`` now also reads, while a
  rule runs, where numpy's and math's nonlinear functions and the op tables' entries are
  evaluated, and the watched arrays keep their watch through numpy's converters.
- 07.1: a backward of central differences of the forward, extrapolated the same way (4/5).
  ``checks.AtPoint`` reads the inputs of every nonlinear ATen operator while forward and
  backward run.

A difference quotient spelled through an identity evaluates nothing at a shifted point
(tanh's addition theorem on ``out`` with a series for tanh(h t); sigmoid(x + h) as 1 / (1 + exp(-x)
exp(-h))): the rules check and 07.1's backward check now want the result to rounding (1e-14; 01.4's
hidden layer 5e-15), which exact rules meet (under 1e-15) and extrapolated quotients do not.

Honest rules keep full marks, unusual ones included: the op at x itself (``1/cosh(x)**2``,
``IMPL["exp"](x)``), numpy's converters, a loop; sigmoid from ``exp(-|x|)`` and a where.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from fixture_audit import assert_the_checks_hold
from test_grading_static import judged

from course_utils.grading.checks import AtPoint, ComplexUse, at_x, with_scaled_rules


@pytest.mark.slow
def test_01_4_rules_evaluated_at_shifted_points_are_difference_quotients(tmp_path):
    assert_the_checks_hold("01_computation_graphs",
                           {"01.4": ["shortcut-extrapolated-quotients",
                                     "shortcut-addition-theorems",
                                     "shortcut-plain-copies-captured-op"]},
                           {"01.4": ["unusual-derivatives-at-x", "unusual-kahn-op-functions"]},
                           tmp_path)


@pytest.mark.slow
def test_07_1_a_backward_from_shifted_forwards_is_a_difference_quotient(tmp_path):
    assert_the_checks_hold("07_pytorch_autograd",
                           {"07.1": ["shortcut-extrapolated-differences",
                                     "shortcut-identity-shifted-sigmoid"]},
                           {"07.1": ["unusual-stable-sigmoid", "unusual-saves-output-tanh",
                                     "unusual-setup-context"]},
                           tmp_path)


SILU = ("class SiLU(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        ctx.save_for_backward(x)\n        return x * torch.sigmoid(x)\n\n"
        "    @staticmethod\n    def backward(ctx, grad_out):\n        (x,) = ctx.saved_tensors\n"
        "        {}\n")


@pytest.mark.parametrize("exercise, answer, route", [
    # numbers taken out of PyTorch, where AtPoint's dispatch mode does not follow them
    ("07.1", SILU.format("return grad_out * torch.tensor([d(v) for v in x.tolist()])"),
     ".tolist"),
    ("07.1", SILU.format("import math\n        return grad_out * math.exp(x.item())"), "math"),
    ("07.1", SILU.format("return grad_out * torch.from_numpy(np.gradient(x.numpy()))"), "numpy"),
    ("07.1", SILU.format("return torch.frombuffer(memoryview(x.numpy()), dtype=x.dtype)"),
     "builtins.memoryview"),
    # numpy arrays read as plain memory, where ComplexUse's watch does not follow them
    ("01.4", "JVP['tanh'] = lambda ts, out, x: np.frombuffer(x.tobytes())\n", "numpy.frombuffer"),
    ("01.4", "from numpy.lib.stride_tricks import as_strided\n", "numpy.lib.stride_tricks"),
    ("01.4", "JVP['tanh'] = lambda ts, out, x: ts[0] * memoryview(x)[0]\n",
     "builtins.memoryview"),
])
def test_ways_to_take_numbers_out_of_the_recorders_are_routes(exercise, answer, route):
    name = "01_computation_graphs" if exercise == "01.4" else "07_pytorch_autograd"
    assert route in {r for _, r in judged(name, exercise, answer).forbidden}
    assert not judged(name, exercise).forbidden  # the solution reaches none


# -- the recorders and the helpers the check cells import, on their own ------------------------


def test_complex_use_reads_where_a_rule_evaluates_its_op():
    from course_utils.engine import IMPL

    rng = np.random.default_rng(4)
    x, t = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    want = t * (1 - np.tanh(x) ** 2)
    honest = {"out": lambda ts, out, x: ts[0] * (1 - out * out),
              "cosh": lambda ts, out, x: ts[0] / np.cosh(np.asarray(x, dtype=float)) ** 2,
              "tanh-half": lambda ts, out, x: ts[0] * (1 - (2 / (1 + np.exp(-2 * x)) - 1) ** 2)}
    shifted = {"impl": lambda ts, out, x: (IMPL["tanh"](np.asarray(x) + 1e-6 * np.asarray(ts[0]))
                                           - out) / 1e-6,
               "stretched": lambda ts, out, x: (np.tanh(x * (1 + 1e-7)) - out) / (1e-7 * x) * ts[0],
               "floats": lambda ts, out, x: ts[0] * np.reshape(
                   [(math.tanh(float(v) + 1e-7) - math.tanh(float(v))) / 1e-7 for v in x.ravel()],
                   np.shape(x))}
    for name, rule in {**honest, **shifted}.items():
        use, table = ComplexUse(), {"tanh": rule}
        with use.rules(table):
            got = table["tanh"]([t], np.tanh(x), x)
        assert bool(use.elsewhere) == (name in shifted), (name, use.elsewhere)
        assert np.allclose(got, want, atol=1e-5), name  # each computes J t (roughly)
    assert np.tanh.__class__ is np.ufunc and IMPL["tanh"] is np.tanh  # put back


def test_at_point_reads_where_a_backward_evaluates_sigmoid():
    torch = pytest.importorskip("torch")

    def backward_of(derivative):
        x = torch.linspace(-3, 3, 6, dtype=torch.float64)  # no 0: a relative step divides by x
        with AtPoint(x) as point:
            got = derivative(x)
        s = torch.sigmoid(x)
        assert torch.allclose(got, s * (1 + x * (1 - s)), atol=1e-6)
        return point.elsewhere

    silu = lambda v: v * torch.sigmoid(v)  # noqa: E731
    assert not backward_of(lambda x: torch.sigmoid(x) * (1 + x * torch.sigmoid(-x)))
    half_tanh = lambda x: 0.5 + 0.5 * torch.tanh(x / 2)  # noqa: E731
    assert not backward_of(lambda x: half_tanh(x) * (1 + x * (1 - half_tanh(x))))
    assert backward_of(lambda x: (silu(x + 1e-6) - silu(x - 1e-6)) / 2e-6) == {"sigmoid"}
    assert backward_of(lambda x: (silu(x * (1 + 1e-7)) - silu(x)) / (1e-7 * x)) == {"sigmoid"}


def test_with_scaled_rules_scales_every_rule_while_it_runs_and_puts_the_table_back():
    table = {"mul": lambda g, out, x, y: (g * y, g * x), "neg": lambda g, out, x: (-g,),
             "stop": lambda g, out, x: (None,)}
    original = dict(table)
    got = with_scaled_rules(table, {"mul": 3.0, "stop": 5.0}, lambda case: [
        table["mul"](*case), table["neg"](case[0], None, None), table["stop"](*case[:3])],
        [(2.0, None, 5.0, 7.0)])
    assert got == [[(42.0, 30.0), (-2.0,), (None,)]]  # 3 * (2 * 7, 2 * 5); neg unscaled
    assert table == original
    with pytest.raises(ZeroDivisionError):
        with_scaled_rules(table, {"neg": 2.0}, lambda case: 1 / 0, [()])
    assert table == original


def test_at_x_notes_the_calls_at_another_point():
    torch = pytest.importorskip("torch")
    x, elsewhere = torch.tensor([1.0, -2.0]), []
    f = at_x(lambda t: (t ** 2).sum(), x, elsewhere)
    assert float(f(x.clone().double())) == 5.0 and elsewhere == []
    f(x + 1e-3)
    f(x.reshape(2, 1))
    assert elsewhere == [1, 1]
