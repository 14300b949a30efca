"""Restoring check cells, scoring cell results (partial credit), messages, and the report views
(no kernels: fast)."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import nbformat
import nbformat.v4 as v4
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.grading.build import build_notebook
from course_utils.grading.format import exercise_id, is_check, is_solution
from course_utils.grading.grade import score
from course_utils.grading.kernel import Reply
from course_utils.grading.report import (
    CSV_COLUMNS,
    CheckResult,
    ExerciseResult,
    NotebookReport,
    csv_safe,
    escape,
    feedback_html,
    format_table,
    to_json,
    write_csv,
)
from course_utils.grading.restore import restore_checks
from course_utils.grading.run import CellResult, NotebookRun

FIXTURE = Path(__file__).parent / "fixtures" / "grading" / "solutions" / "99_fixture.ipynb"
CANONICAL = nbformat.read(FIXTURE, as_version=4)
EXERCISE = build_notebook(CANONICAL, "fixture")


def cell(nb, cell_id):
    return next(c for c in nb.cells if c.get("id") == cell_id)


def ids(nb):
    return [c.get("id") for c in nb.cells]


def checks_of(nb):
    return [(c.source, c.metadata) for c in nb.cells if is_check(c)]


# --- restore ------------------------------------------------------------------------------------


def test_an_untouched_notebook_is_unchanged_and_gets_no_notes():
    out = restore_checks(EXERCISE, CANONICAL)
    assert out.notes == {}
    assert [c.source for c in out.notebook.cells] == [c.source for c in EXERCISE.cells]


def test_an_edited_check_is_replaced_in_place_and_reported():
    learner = copy.deepcopy(EXERCISE)
    cell(learner, "check-1a").source = "assert True"
    cell(learner, "check-1b").metadata["grading"]["points"] = 100
    out = restore_checks(learner, CANONICAL)
    assert ids(out.notebook) == ids(EXERCISE)
    assert cell(out.notebook, "check-1a").source == cell(CANONICAL, "check-1a").source
    assert cell(out.notebook, "check-1b").metadata == cell(CANONICAL, "check-1b").metadata
    assert out.notes == {"99.1": [
        "its check cell (1 of 2, `got = double([1, 2])`) differs from the course's (edited, or an "
        "older copy of the exercises); the course's check ran instead",
        "its check cell (2 of 2, `got = tuple(double(np.zeros((2, 3))).shape)`) differs from the "
        "course's (edited, or an older copy of the exercises); the course's check ran instead"]}


def test_a_tag_that_changes_nbvals_verdict_counts_as_an_edit():
    learner = copy.deepcopy(EXERCISE)
    cell(learner, "check-2").metadata["tags"].append("raises-exception")
    cell(learner, "check-1a").metadata["scrolled"] = True  # JupyterLab's own: not an edit
    out = restore_checks(learner, CANONICAL)
    assert cell(out.notebook, "check-2").metadata == cell(CANONICAL, "check-2").metadata
    assert list(out.notes) == ["99.2"] and "edited" in out.notes["99.2"][0]


def test_a_check_disguised_as_markdown_is_still_restored():
    learner = copy.deepcopy(EXERCISE)
    i = ids(learner).index("check-2")
    learner.cells[i] = v4.new_markdown_cell("nothing to see", id="check-2")
    out = restore_checks(learner, CANONICAL)
    assert cell(out.notebook, "check-2").cell_type == "code"
    assert checks_of(out.notebook) == checks_of(CANONICAL)
    assert "edited" in out.notes["99.2"][0]


def test_a_deleted_check_goes_back_after_its_canonical_predecessor():
    learner = copy.deepcopy(EXERCISE)
    learner.cells.remove(cell(learner, "check-1a"))
    out = restore_checks(learner, CANONICAL)
    assert ids(out.notebook) == ids(EXERCISE)
    assert out.notes == {"99.1": ["its check cell (1 of 2, `got = double([1, 2])`) was deleted; "
                                  "the original was put back"]}


def test_a_hidden_check_is_put_in_without_a_note():
    canonical = copy.deepcopy(CANONICAL)
    hidden = v4.new_code_cell("assert double(7) == 14", id="hidden-1", metadata={
        "tags": ["check", "hidden"], "grading": {"id": "99.1", "points": 1}})
    canonical.cells.insert(ids(canonical).index("check-1b") + 1, hidden)
    exercise = build_notebook(canonical, "fixture")
    assert "hidden-1" not in ids(exercise), "the builder leaves hidden checks out"
    out = restore_checks(exercise, canonical)
    assert ids(out.notebook) == ids(canonical) and out.notes == {}


def test_without_cell_ids_a_deleted_check_goes_after_the_learners_solution_cell():
    learner = copy.deepcopy(EXERCISE)
    learner.cells.remove(cell(learner, "check-2"))
    learner.cells.append(v4.new_code_cell("print('my scratch work')", id="scratch"))
    for i, c in enumerate(learner.cells):
        c.id = f"renamed-{i}"  # as if another tool had re-saved the notebook
    out = restore_checks(learner, CANONICAL)
    sources = [c.source for c in out.notebook.cells]
    solution = next(i for i, c in enumerate(out.notebook.cells)
                    if is_solution(c) and exercise_id(c) == "99.2")
    assert sources[solution + 1] == cell(CANONICAL, "check-2").source
    assert sources[-1] == "print('my scratch work')"
    # The other checks were matched by tag and order, so they are not reported.
    assert list(out.notes) == ["99.2"]


def test_a_check_above_its_solution_is_moved_after_it():
    learner = copy.deepcopy(EXERCISE)
    moved = cell(learner, "check-1a")
    learner.cells.remove(moved)
    learner.cells.insert(0, moved)
    out = restore_checks(learner, CANONICAL)
    assert ids(out.notebook) == ids(EXERCISE)
    assert "above its solution" in out.notes["99.1"][0]


def test_an_extra_check_cell_still_runs_but_earns_nothing():
    learner = copy.deepcopy(EXERCISE)
    extra = copy.deepcopy(cell(learner, "check-2"))
    extra.id, extra.source = "mine", "assert True"
    learner.cells.append(extra)
    out = restore_checks(learner, CANONICAL)
    assert cell(out.notebook, "mine").source == "assert True"
    assert not is_check(cell(out.notebook, "mine"))
    assert "earns no points" in out.notes["99.2"][0]


@settings(max_examples=60, deadline=None)
@given(st.permutations(range(len(EXERCISE.cells))),
       st.sets(st.integers(0, len(EXERCISE.cells) - 1)), st.booleans())
def test_whatever_the_learner_does_the_canonical_checks_run_once_after_their_solution(
        order, deleted, renumber):
    learner = copy.deepcopy(EXERCISE)
    learner.cells = [learner.cells[i] for i in order if i not in deleted]
    if renumber:
        for i, c in enumerate(learner.cells):
            c.id = f"x{i}"
    out = restore_checks(learner, CANONICAL).notebook
    # Every canonical check, exactly once, as the course wrote it.
    assert sorted(map(json.dumps, checks_of(out))) == sorted(map(json.dumps, checks_of(CANONICAL)))
    # Each check runs after the learner's first solution cell for its exercise (if they kept one).
    for i, c in enumerate(out.cells):
        if is_check(c):
            mine = [j for j, s in enumerate(out.cells)
                    if is_solution(s) and exercise_id(s) == exercise_id(c)]
            assert not mine or mine[0] < i
    # The learner's other cells are all there, in their order.
    others = [c.source for c in learner.cells if not is_check(c)]
    assert [c.source for c in out.cells if not is_check(c)] == others


# --- score --------------------------------------------------------------------------------------

CODE = [c for c in CANONICAL.cells if c.cell_type == "code"]
# setup, sol-1, check-1a, check-1b, sol-2, check-2
POSSIBLE = {"99.1": 2.0, "99.2": 1.0}


def results(**outcomes):
    """Cell results for CODE: every cell passes except the ones given as index=(outcome, msg)."""
    out = [CellResult(i, "passed") for i in range(len(CODE))]
    for key, (outcome, message) in outcomes.items():
        out[int(key[1:])] = CellResult(int(key[1:]), outcome, message)
    return out


def graded(**outcomes):
    return {e.exercise: (e.status, e.points, e.message) for e in score(CODE, results(**outcomes),
                                                                       POSSIBLE)}


def test_all_checks_pass_earns_all_points():
    assert graded() == {"99.1": ("pass", 2.0, ""), "99.2": ("pass", 1.0, "")}


def test_each_check_scores_its_own_points():
    got = graded(c3=("failed", "AssertionError: expected shape (2, 3), got (3,)"))
    assert got["99.1"] == ("fail", 1, "AssertionError: expected shape (2, 3), got (3,)")
    assert got["99.2"][0] == "pass"
    exercise = score(CODE, results(c3=("failed", "AssertionError: x")), POSSIBLE)[0]
    assert [(c.cell, c.points, c.possible, c.status) for c in exercise.checks] == [
        (3, 1, 1, "pass"), (4, 0, 1, "fail")]


def test_the_first_failing_check_decides_the_status_and_every_failure_is_kept():
    got = score(CODE, results(c2=("timeout", "timed out after 5 s (interrupted)"),
                              c3=("failed", "AssertionError: x\nsecond line")), POSSIBLE)[0]
    assert (got.status, got.points, got.message) == (
        "timeout", 0, "the check timed out after 5 s (interrupted)")
    assert [c.message for c in got.checks] == [
        "the check timed out after 5 s (interrupted)", "AssertionError: x\nsecond line"]


def test_a_failing_solution_cell_is_blamed_for_its_check():
    got = graded(c4=("error", "NotImplementedError: Exercise 99.2: your code here"),
                 c5=("error", "NameError: name 'length' is not defined"))
    assert got["99.2"] == ("error", 0, "NotImplementedError: Exercise 99.2: your code here "
                           "(in your solution, code cell 5)")
    assert got["99.1"][0] == "pass"


def test_a_timed_out_solution_cell_makes_the_exercise_time_out():
    got = graded(c1=("timeout", "timed out after 5 s (interrupted)"),
                 c2=("error", "NameError: name 'double' is not defined"),
                 c3=("error", "NameError: name 'double' is not defined"))
    assert got["99.1"][:2] == ("timeout", 0)


def test_an_earlier_setup_failure_makes_a_failed_check_an_error():
    got = graded(c0=("error", "ModuleNotFoundError: No module named 'nump'"),
                 c2=("failed", "AssertionError: expected [2 4], got None"))
    status, points, message = got["99.1"]
    assert (status, points) == ("error", 1)
    assert message.startswith("AssertionError: expected [2 4], got None (after code cell 1")
    assert message.endswith("failed: ModuleNotFoundError: No module named 'nump')")


def test_another_exercises_failure_is_not_blamed():
    got = graded(c1=("error", "NotImplementedError: Exercise 99.1: your code here"),
                 c5=("failed", "AssertionError: expected 5.0, got 4.0"))
    assert got["99.2"] == ("fail", 0, "AssertionError: expected 5.0, got 4.0")


def test_a_tampered_check_costs_the_whole_exercise():
    got = score(CODE, results(c3=("tampered", "the kernel was tampered with: the builtin `len`")),
                POSSIBLE)
    assert [(e.exercise, e.status, e.points) for e in got] == [
        ("99.1", "tampered", 0), ("99.2", "pass", 1)]
    assert got[0].notes == ["the kernel was tampered with: the builtin `len`"]


# --- messages from execute replies --------------------------------------------------------------


def explain(ename, evalue, traceback=(), cells=None, counts=None):
    run = NotebookRun(5)
    run.cells, run._count = cells or {}, counts or {}
    return run.explain(Reply("error", ename, evalue, list(traceback)))


def test_the_whole_message_is_kept_and_the_summary_is_its_first_line():
    full, summary, where = explain("AssertionError", "expected [ 0. -1.8]\n     got [ 0. -1.7]")
    assert full == "AssertionError: expected [ 0. -1.8]\n     got [ 0. -1.7]"
    assert summary == "AssertionError: expected [ 0. -1.8]" and where == ""


def test_a_tf_function_error_shows_its_root_cause_and_the_learners_line():
    from ipykernel.compiler import get_tmp_hash_seed, murmur2_x86

    body = "@tf.function\ndef f(x):\n    return tf.matmul(x, x)\n"
    name = murmur2_x86(body, get_tmp_hash_seed())
    evalue = ("in user code:\n\n"
              f'    File "/tmp/ipykernel_41/{name}.py", line 3, in f  *\n'
              "        return tf.matmul(x, x)\n\n"
              "    InvalidArgumentError: Matrix size-incompatible: In[0]: [2,3], In[1]: [2,3]")
    traceback = ["\x1b[0;31mValueError\x1b[0m  Traceback (most recent call last)",
                 "Cell \x1b[0;32mIn[7], line 1\x1b[0m\n----> 1 f(x)\n"]
    full, summary, where = explain("ValueError", evalue, traceback, cells={4: body, 5: "f(x)"},
                                   counts={7: 5})
    assert summary == "InvalidArgumentError: Matrix size-incompatible: In[0]: [2,3], In[1]: [2,3]"
    assert "code cell 5, line 3, in f" in full and "ipykernel_41" not in full
    assert where == "code cell 5, line 3: `return tf.matmul(x, x)`"


def test_the_learners_line_is_the_deepest_notebook_frame():
    traceback = ["---", "Cell In[3], line 2\n      1 y = 2\n----> 2 f(0)\n",
                 "Cell In[2], line 2, in f(x)\n----> 2     return 1/x\n", "ZeroDivisionError"]
    _, _, where = explain("ZeroDivisionError", "division by zero", traceback,
                          cells={0: "def f(x):\n    return 1/x", 1: "y = 2\nf(0)"},
                          counts={2: 0, 3: 1})
    assert where == "code cell 1, line 2: `return 1/x`"


# --- report views -------------------------------------------------------------------------------

REPORTS = [
    NotebookReport("subs/ada.ipynb", "ada", "99_fixture.ipynb", [
        ExerciseResult("99.1", 2, 2, "pass", notes=["its check cell was edited; the original "
                                                    "check ran instead"]),
        ExerciseResult("99.2", 0, 1, "error", "NameError: name 'x' is not defined, really",
                       checks=[CheckResult(6, 0, 1, "error", "NameError: name 'x' is not "
                                           "defined, really\nhint: run the cells above",
                                           "code cell 5, line 1: `print(x)`")])]),
    NotebookReport("subs/bob.ipynb", "bob", "", [], error="not a notebook: the file is not JSON"),
]


def test_the_table_shows_points_status_message_totals_details_and_notes():
    table = format_table(REPORTS)
    assert "  99.1*        2/2  pass" in table
    assert "  99.2         0/1  error     NameError: name 'x' is not defined, really" in table
    assert "  total        2/3" in table
    assert ("  details:\n    99.2, check in code cell 6 (0/1): error\n"
            "      NameError: name 'x' is not defined, really\n      hint: run the cells above\n"
            "      at code cell 5, line 1: `print(x)`\n") in table
    assert "* 99.1: its check cell was edited" in table
    assert "error: not a notebook" in table
    assert table.endswith("all: 2/3 points; 0 of 2 notebooks fully passed")


def test_a_long_message_is_clipped_in_its_row_but_whole_in_the_details():
    long = "AssertionError: expected " + " ".join(str(i) for i in range(60)) + " got nothing"
    report = NotebookReport("a.ipynb", "a", "99_fixture.ipynb", [ExerciseResult(
        "99.1", 0, 1, "fail", long, checks=[CheckResult(3, 0, 1, "fail", long)])])
    table = format_table([report])
    row = next(line for line in table.splitlines() if line.startswith("  99.1"))
    assert row.endswith("...") and len(row) < 130
    assert long in table


def test_control_characters_from_a_submission_cannot_redraw_or_split_the_table():
    evil = "ev\nil\x1b[2J\u202eenilno"
    report = NotebookReport(f"subs/{evil}.ipynb", evil, "99_fixture.ipynb", [ExerciseResult(
        "99.1", 0, 1, "fail", "AssertionError: \x1b[31mred", checks=[
            CheckResult(3, 0, 1, "fail", "AssertionError: \x1b[31mred\nline 2")])])
    table = format_table([report])
    assert "\x1b" not in table and "\u202e" not in table
    assert table.splitlines()[0] == ("subs/ev\\nil\\x1b[2J\\u202eenilno.ipynb  (learner "
                                     "ev\\nil\\x1b[2J\\u202eenilno, graded as 99_fixture.ipynb)")
    assert "      line 2" in table  # the message's own lines stay lines
    assert escape("a\tb\x00") == "a\\tb\\x00"


def test_csv_has_one_row_per_learner_and_exercise_with_the_details(tmp_path):
    write_csv(REPORTS, tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [(r["learner"], r["exercise"], r["points"], r["possible"], r["status"]) for r in rows] \
        == [("ada", "99.1", "2", "2", "pass"), ("ada", "99.2", "0", "1", "error"),
            ("bob", "", "0", "0", "error")]
    assert rows[1]["message"] == "NameError: name 'x' is not defined, really"
    assert rows[1]["details"] == ("99.2, check in code cell 6 (0/1): error\n"
                                  "  NameError: name 'x' is not defined, really\n"
                                  "  hint: run the cells above\n"
                                  "  at code cell 5, line 1: `print(x)`")
    assert rows[0]["notes"].startswith("its check cell was edited")


def test_csv_cells_a_spreadsheet_would_run_as_formulas_are_neutralised(tmp_path):
    formula = '=HYPERLINK("http://x","y")'
    report = NotebookReport("s.ipynb", "+cmd|' /C calc'!A0", "99_fixture.ipynb", [
        ExerciseResult("99.1", 0, 1, "error", f"{formula}: boom", notes=["@SUM(1+1)"]),
        ExerciseResult("99.2", 1, 1, "pass")])
    write_csv([report], tmp_path / "g.csv")
    with open(tmp_path / "g.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["learner"] == "'+cmd|' /C calc'!A0"
    assert rows[0]["message"] == "'" + formula + ": boom"
    assert rows[0]["notes"] == "'@SUM(1+1)"
    assert [csv_safe(x) for x in ("-1", "\t=x", "a=b", "")] == ["'-1", "'\t=x", "a=b", ""]


def test_json_is_machine_readable_and_holds_the_same_details():
    data = json.loads(to_json(REPORTS))
    assert [(d["learner"], d["points"], d["possible"], d["passed"]) for d in data] == [
        ("ada", 2, 3, False), ("bob", 0, 0, False)]
    ex = data[0]["exercises"][1]
    assert ex["status"] == "error" and ex["checks"][0]["where"].startswith("code cell 5")
    with_indent = "\n".join("    " + line for line in ex["details"].splitlines())
    assert with_indent in format_table(REPORTS)


def test_feedback_html_escapes_the_submission_and_shows_every_failing_check():
    report = NotebookReport("s.ipynb", "<script>x</script>", "99_fixture.ipynb", [
        ExerciseResult("99.1", 0, 1, "fail", "AssertionError: <b>", checks=[
            CheckResult(3, 0, 1, "fail", "AssertionError: <b>\nexpected 2, got 3")])])
    page = feedback_html(report)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "expected 2, got 3" in page and "What to look at" in page
