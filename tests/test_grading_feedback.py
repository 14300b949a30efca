"""Feedback that points at the right thing (issue 26 §3).

- An error's message lists only the learner's frames (TensorFlow lists the kernel's 20-odd frames
  of ipykernel and asyncio, and its own), and says how many others it left out.
- One error that several checks ran into is shown once.
- ``line N`` names the line as the learner sees it, in a cell that starts with blank lines too.
- The verdicts of 07.1 and 07.4 diagnose what the answer did wrong, from the values the probe
  reported: the probes and verdicts of ``solutions/07_pytorch_autograd.ipynb`` run here on the
  committed shortcut fixtures, in this process (torch, no kernel).
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from course_utils.grading import probe
from course_utils.grading import verdict as verdicts
from course_utils.grading.kernel import Reply
from course_utils.grading.report import CheckResult, ExerciseResult, NotebookReport, format_table
from course_utils.grading.run import NotebookRun

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "shortcuts" / "07_pytorch_autograd"


# --- frames in a message ------------------------------------------------------------------------


def cell_file(source: str) -> str:
    from ipykernel.compiler import get_tmp_hash_seed, murmur2_x86

    return f"/tmp/ipykernel_9/{murmur2_x86(source, get_tmp_hash_seed())}.py"


LEARNER = ("\n@tf.function\ndef collatz_path(n):\n    path = [n]\n    while n != 1:\n"
           "        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        path.append(n)\n"
           "    return tf.stack(path)\n")
CHECK = "for n in (1, 2):\n    collatz_path(tf.constant(n))\n"
KERNEL = [f'        File "/venv/lib/python3.11/site-packages/{name}.py", line {n}, in f{n}'
          for n, name in enumerate(["ipykernel/kernelbase", "tornado/platform/asyncio",
                                    "asyncio/base_events", "IPython/core/interactiveshell"] * 6)]


def tf_message(graph_id: int) -> str:
    """TensorFlow's InaccessibleTensorError as a kernel reports it (shortened, same shape)."""
    return "\n".join([
        "in user code:", "",
        f'    File "{cell_file(LEARNER)}", line 7, in collatz_path  *',
        "        return tf.stack(path)",
        '    File "/venv/lib/python3.11/site-packages/tensorflow/core/function/capture/'
        'capture_container.py", line 144, in capture_by_value',
        "        graph._validate_in_scope(tensor)  # pylint: disable=protected-access", "",
        "    InaccessibleTensorError: <tf.Tensor 'while/cond/Identity:0' shape=() dtype=int64> "
        "is out of scope and cannot be used here.", "",
        "    <tf.Tensor 'while/cond/Identity:0' shape=() dtype=int64> was defined here:",
        '        File "<frozen runpy>", line 198, in _run_module_as_main', *KERNEL,
        f'        File "{cell_file(CHECK)}", line 2, in <module>',
        f'        File "{cell_file(LEARNER)}", line 4, in collatz_path',
        f'        File "{cell_file(LEARNER)}", line 5, in collatz_path', "",
        f"    The tensor cannot be accessed from FuncGraph(name=collatz_path, id={graph_id})"])


def explained(evalue: str) -> tuple[str, str, str]:
    run = NotebookRun(5)
    run.cells, run.check_cells = {12: LEARNER, 13: CHECK}, {13}
    return run.explain(Reply("error", "InaccessibleTensorError", evalue, []))


def test_a_message_keeps_the_learners_frames_and_counts_the_others():
    full, summary, where = explained(tf_message(140416423641792))
    lines = full.splitlines()
    assert "site-packages" not in full and "frozen runpy" not in full and "ipykernel_" not in full
    # the learner's frames, with their lines counted as in the cell (it starts with a blank line)
    assert "    code cell 13, line 8, in collatz_path  *" in lines
    assert "        return tf.stack(path)" in lines
    assert "        code cell 13, line 5, in collatz_path" in lines
    assert "        code cell 13, line 6, in collatz_path" in lines
    # TensorFlow's frame with its source line, then the runpy, kernel and check frames
    assert "    (1 frame not in your code left out)" in lines
    assert f"        ({1 + len(KERNEL) + 1} frames not in your code left out)" in lines
    assert "graph._validate_in_scope" not in full and "code cell 14" not in full
    assert summary.startswith("InaccessibleTensorError: <tf.Tensor 'while/cond/Identity:0'")
    assert where == "code cell 13, line 6: `n = n // 2 if n % 2 == 0 else 3 * n + 1`"
    assert len(lines) < 20, full


def test_a_message_without_frames_is_left_alone():
    run = NotebookRun(5)
    text = 'expected "File x" to be read\n  File names differ'
    full, _, _ = run.explain(Reply("error", "ValueError", text, []))
    assert full == f"ValueError: {text}"


# --- one error, several checks -------------------------------------------------------------------


def test_one_error_that_three_checks_ran_into_is_shown_once():
    at = "code cell 13, line 6: `n = n // 2 if n % 2 == 0 else 3 * n + 1`"
    messages = [explained(tf_message(i))[0]
                for i in (140416423641792, 140416416108864, 9)]
    exercise = ExerciseResult("09.3", 0, 4, "error", "InaccessibleTensorError", checks=[
        CheckResult(14, 0, 2, "error", messages[0], at),
        CheckResult(15, 0, 1, "error", messages[1], at),
        CheckResult(16, 0, 1, "error", messages[2], at, hidden=True)])
    table = format_table([NotebookReport("a.ipynb", "a", "09_tf_function.ipynb", [exercise])])
    assert table.count("InaccessibleTensorError: <tf.Tensor") == 1, table
    assert "09.3, checks in code cells 14, 15, 16 (0/4): error" in table


def test_different_failures_keep_their_own_messages():
    at = "code cell 3, line 2: `return x`"
    exercise = ExerciseResult("99.1", 0, 3, "fail", "x", checks=[
        CheckResult(4, 0, 1, "fail", "AssertionError: expected 5 steps, got 4"),
        CheckResult(5, 0, 1, "fail", "AssertionError: expected 6 steps, got 4"),  # numbers matter
        CheckResult(6, 0, 1, "error", "ValueError: bad shape (3,)", at),
        CheckResult(7, 0, 1, "error", "ValueError: bad shape (4,)", "code cell 3, line 5: `y`")])
    details = exercise.details()
    assert len(details) == 4, details


# --- the line the learner sees -------------------------------------------------------------------


@pytest.mark.slow
def test_line_pointers_count_the_blank_lines_a_cell_starts_with():
    with NotebookRun(60, probe=False) as run:
        run.run_cell(0, "\n\n\ndef f(x):\n    return 1 / x\n")
        called = run.run_cell(1, "\n\ny = 2\nf(0)\n")
        direct = run.run_cell(2, "\n \n\t\nraise ValueError('boom')\n")
        chained = run.run_cell(3, "\n\nraise RuntimeError('outer') from ValueError('inner')\n")
        syntax = run.run_cell(4, "\n\nx = 1\nx = = 1\n")
    assert called.where == "code cell 1, line 5: `return 1 / x`", called.where
    assert direct.where == "code cell 3, line 4: `raise ValueError('boom')`", direct.where
    assert chained.message == "RuntimeError: outer", chained.message  # its cause is not repeated
    assert chained.where == "code cell 4, line 3: `raise RuntimeError('outer') from " \
        "ValueError('inner')`", chained.where
    assert syntax.message == "SyntaxError: invalid syntax (code cell 5, line 4)", syntax.message
    assert syntax.where == "code cell 5, line 4: `x = = 1`", syntax.where


# --- verdicts that diagnose (07.1, 07.4) ---------------------------------------------------------


@pytest.fixture(scope="module")
def lesson07():
    pytest.importorskip("torch")
    nb = nbformat.read(ROOT / "solutions" / "07_pytorch_autograd.ipynb", as_version=4)
    return {cell.get("id"): cell for cell in nb.cells}, verdicts.specs(nb.cells)


def judged(lesson, answer: str, check: str, setup=("c01",)) -> tuple[str, str]:
    """Run a check of 07 on an answer, here: the set-up cells, the answer, the check's probe
    and reference in one namespace, then its verdict on what they reported."""
    cells, specs = lesson
    namespace: dict = {"__name__": "__main__"}
    for cell_id in setup:
        exec(cells[cell_id].source, namespace)  # noqa: S102 (the course's own cells)
    exec(answer, namespace)  # noqa: S102 (the course's own fixtures)
    spec = specs[check]

    def section(source: str) -> dict:
        probe._pending.clear()
        exec(source, namespace)  # noqa: S102
        fields = {k: verdicts.decode_value(json.loads(v)) for k, v in probe._pending.items()}
        probe._pending.clear()
        return fields

    reported = section(spec.probe)
    reference = section(spec.reference) if spec.reference else {}
    return verdicts.judge(spec, reported, reference)


def fixture(exercise: str, name: str) -> str:
    return (FIXTURES / exercise / f"{name}.py").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_backward_that_forgets_grad_out_is_asked_about_grad_out(lesson07):
    answer = fixture("07.1", "shortcut-ignores-grad-out")
    for check in ("c05", "4e4ebc0f"):  # the backward check and the hidden one
        outcome, message = judged(lesson07, answer, check)
        assert outcome == "failed"
        assert "multiply by grad_out" in message, message
        assert "nan" not in message and "inf" not in message.replace("info", ""), message


@pytest.mark.slow
def test_nan_or_inf_is_named_only_when_the_values_are_not_finite(lesson07):
    overflowing = (
        "class SiLU(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        ctx.save_for_backward(x)\n"
        "        return x * torch.sigmoid(x)\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad_out):\n"
        "        (x,) = ctx.saved_tensors\n"
        "        big = torch.exp(x) ** 12  # inf or 0 in float32 once |x| passes about 8\n"
        "        s = torch.sigmoid(x) * big / big\n"
        "        return grad_out * s * (1 + x * (1 - s))\n")
    outcome, message = judged(lesson07, overflowing, "4e4ebc0f")
    assert outcome == "failed" and "nan or inf at x = [-40.0, -12.0, 12.0, 40.0]" in message, \
        message
    assert "grad_out" not in message.split("got")[-1], message
    outcome, message = judged(lesson07, overflowing, "c05")  # |x| <= 4 there: finite, right
    assert outcome == "passed", message


@pytest.mark.slow
@pytest.mark.parametrize("name", ["shortcut-no-zero-grad", "shortcut-clears-after-step"])
def test_stale_gradients_get_the_stale_gradients_hint(lesson07, name):
    answer = fixture("07.4", name)
    outcome, message = judged(lesson07, answer, "c18", setup=("c01", "c15"))
    assert outcome == "failed"
    assert "was added to this step's gradient" in message, message
    outcome, message = judged(lesson07, answer, "03f2c6de", setup=("c01", "c15"))
    assert outcome == "failed" and "already in .grad" in message, message


@pytest.mark.slow
def test_the_solution_and_an_unusual_answer_pass_the_stale_gradient_checks(lesson07):
    cells, _ = lesson07
    for answer in (cells["c16"].source, fixture("07.4", "unusual-sum-loss-scaled-lr"),
                   fixture("07.4", "unusual-data-and-autograd-grad")):
        for check in ("c18", "03f2c6de"):
            assert judged(lesson07, answer, check, setup=("c01", "c15")) == ("passed", "")


# --- 09: TensorFlow's retracing warning, for the learner's code ---------------------------------


@pytest.mark.slow
def test_exercises_09_show_the_learners_retracing_warning_not_the_storms():
    """Exercise 09.2 is about retracing: the set-up keeps TensorFlow's warnings on, so a
    calm_step that still retraces says so; the storm it shows on purpose hides its own."""
    pytest.importorskip("tensorflow")
    nb = nbformat.read(ROOT / "solutions" / "09_tf_function.ipynb", as_version=4)
    cells = {cell.get("id"): cell.source for cell in nb.cells}
    retracing = (ROOT / "tests" / "fixtures" / "shortcuts" / "09_tf_function" / "09.2" /
                 "shortcut-tensors-no-signature.py").read_text(encoding="utf-8")
    warning = "triggered tf.function retracing"
    with NotebookRun(240, probe=False) as run:
        assert run.kernel.execute(cells["s09-01"], 240).status == "ok"
        storm = run.kernel.execute(cells["s09-09"], 240)
        assert storm.status == "ok" and "traces" in storm.stdout
        assert run.kernel.execute(retracing, 60).status == "ok"
        learner = run.kernel.execute("run_calm(0.0, batches, lrs)", 240)
    assert warning not in storm.stdout, storm.stdout
    assert learner.status == "ok" and warning in learner.stdout, learner.stdout
