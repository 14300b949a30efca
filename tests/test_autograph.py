"""autograph=True: `if`/`while` on tensors become mg.cond/mg.while_loop; the rest stays Python.

Reference: the same function run eagerly, where Python's own `if`/`while` decide.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import course_utils.minigraph as mg

POSITIVE, NEGATIVE = mg.tensor([1.0, 2.0]), mg.tensor([-1.0, -3.0])


def ops_of(f, *args) -> list[str]:
    return [n.op for n in f.get_graph(*args)]


def same_as_eager(fn, *inputs) -> mg.Function:
    """Trace ``fn`` with autograph and check it against eager ``fn`` on every input."""
    f = mg.function(fn, autograph=True)
    for x in inputs:
        np.testing.assert_allclose(f(x).numpy(), fn(x).numpy(), rtol=1e-6)
    return f


def scale_or_flip(x):
    if mg.sum(x) > 0:
        y = x * 2.0
        tmp = y + 1.0  # read in this branch only: a temporary, not a result
        y = tmp - 1.0
    else:
        y = -x
    return y + 1.0


def test_an_if_on_a_tensor_becomes_one_cond_right_on_both_branches() -> None:
    f = same_as_eager(scale_or_flip, POSITIVE, NEGATIVE)
    assert f.trace_count == 1 and ops_of(f, POSITIVE).count("cond") == 1
    assert "y = ag__.if_stmt(mg.sum(x) > 0, if_true_" in f.autograph_source
    assert "%y = tuple_get(%cond, index=0)" in str(f.get_graph(POSITIVE))


def sign_class(x):
    s = mg.sum(x)
    if s > 1.0:
        label, size = 1.0, s
    elif s < -1.0:
        label, size = -1.0, -s
    else:
        label = 0.0
        size = s * 0.0
    return x * label + size


def test_elif_chains_and_several_results() -> None:
    f = same_as_eager(sign_class, POSITIVE, NEGATIVE, mg.tensor([0.1, 0.2]))
    assert ops_of(f, POSITIVE).count("cond") == 1  # the elif is a cond inside the else branch
    assert "label, size = ag__.if_stmt(s > 1.0, " in f.autograph_source


def returns_in_both(x):
    if mg.max(x) > 1.5:
        return x / mg.max(x)
    return x * 10.0  # after an `if` that returns: the else branch


def test_branches_that_return() -> None:
    f = same_as_eager(returns_in_both, POSITIVE, NEGATIVE)
    assert "return ag__.if_stmt" in f.autograph_source


def halve_until_small(x):
    steps = mg.tensor(0)
    while mg.sum(x * x) > 1.0:
        x = x / 2.0
        steps = steps + 1
    return x * mg.cast(steps, "float32")


def test_a_while_on_a_tensor_becomes_a_while_loop() -> None:
    f = same_as_eager(halve_until_small, mg.tensor([3.0, 4.0]), mg.tensor([0.1, 0.2]))
    assert ops_of(f, POSITIVE).count("while_loop") == 1 and f.trace_count == 1


def python_tests_stay_python(x, mode, n):
    if mode == "double":  # a Python test: decided while tracing
        x = x * 2.0
    i = 0
    while i < n:  # a Python loop: unrolled
        x = x + 1.0
        i += 1
    return x


def test_python_conditions_stay_python_and_are_part_of_the_signature() -> None:
    f = mg.function(python_tests_stay_python, autograph=True)
    assert f(POSITIVE, "double", 2).numpy().tolist() == [4.0, 6.0]
    assert f(POSITIVE, "keep", 1).numpy().tolist() == [2.0, 3.0]
    assert ops_of(f, POSITIVE, "double", 2) == ["placeholder", "constant", "mul", "constant",
                                                 "add", "constant", "add"]


def test_the_converted_function_sees_closures_and_globals_as_they_are_now() -> None:
    offset = mg.tensor([0.0, 0.0])

    def f(x):
        if mg.sum(x) > 0:
            x = x + offset
        return x

    traced = mg.function(f, autograph=True)
    with mg.no_grad():
        offset += 5.0
    assert traced(POSITIVE).numpy().tolist() == [6.0, 7.0]
    assert traced(NEGATIVE).numpy().tolist() == [-1.0, -3.0]


def test_errors_inside_converted_code_name_the_original_line() -> None:
    def f(x):
        if mg.sum(x) > 0:
            x = x * len(x)
        return x

    with pytest.raises(mg.TracingError, match=f"test_autograph.py:{f.__code__.co_firstlineno + 2}"):
        mg.function(f, autograph=True)(POSITIVE)


# --- what it cannot convert ----------------------------------------------------------------------


def breaks_out(x):
    for _ in range(3):
        if mg.sum(x) > 10.0:
            break
        x = x * 3.0
    return x


def assigns_an_item(x, out):
    if mg.sum(x) > 0:
        out["y"] = x
    return x


def one_branch_only(x):
    if mg.sum(x) > 0:
        y = x
    return y  # noqa: F821 (undefined when the test is false)


def lone_return(x):
    if mg.sum(x) > 0:
        return x


def loop_else(x):
    while mg.sum(x) < 10.0:
        x = x * 2.0
    else:
        x = x + 1.0
    return x


def first_assigned_in_loop(x):
    while mg.sum(x) < 10.0:
        x = x * 2.0
        last = x
    return last


@pytest.mark.parametrize("fn, args, reason", [
    (breaks_out, (), "`break`"),
    (assigns_an_item, ({},), "assigns to out['y']"),
    (one_branch_only, (), "`y` gets a value in one branch only"),
    (lone_return, (), "`return` that is not the last statement of both branches"),
    (loop_else, (), "`else` clause"),
    (first_assigned_in_loop, (), "`last` is first assigned inside the loop"),
])
def test_unsupported_code_on_a_tensor_raises_naming_the_line_and_why(fn, args, reason) -> None:
    f = mg.function(fn, autograph=True)  # converting succeeds: the test might be Python
    with pytest.raises(mg.TracingError) as info:
        f(POSITIVE, *args)
    lines, first = inspect.getsourcelines(fn)
    line = first + next(i for i, text in enumerate(lines) if "mg.sum(x)" in text)
    assert f"test_autograph.py:{line}" in str(info.value) and reason in str(info.value)


def test_unsupported_code_with_a_python_test_still_runs_as_python() -> None:
    def f(x, limit):
        for _ in range(3):
            if limit > 2:
                break
            x = x * 3.0
        return x

    assert mg.function(f, autograph=True)(POSITIVE, 1).numpy().tolist() == [27.0, 54.0]


def test_only_def_functions_with_source_convert() -> None:
    with pytest.raises(mg.TracingError, match="functions defined with `def`"):
        mg.function(lambda x: x, autograph=True)
    with pytest.raises(mg.TracingError, match="functions defined with `def`"):
        mg.function(np.sum, autograph=True)
