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

Honest rules keep full marks, unusual ones included: the op at x itself (``1/cosh(x)**2``,
``IMPL["exp"](x)``), numpy's converters, a loop; sigmoid from ``exp(-|x|)`` and a where.
"""

from __future__ import annotations

import pytest
from fixture_audit import assert_the_checks_hold
from test_grading_static import judged


@pytest.mark.slow
def test_01_4_rules_evaluated_at_shifted_points_are_difference_quotients(tmp_path):
    assert_the_checks_hold("01_computation_graphs",
                           {"01.4": ["shortcut-extrapolated-quotients"]},
                           {"01.4": ["unusual-derivatives-at-x", "unusual-kahn-op-functions"]},
                           tmp_path)


@pytest.mark.slow
def test_07_1_a_backward_from_shifted_forwards_is_a_difference_quotient(tmp_path):
    assert_the_checks_hold("07_pytorch_autograd",
                           {"07.1": ["shortcut-extrapolated-differences"]},
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
