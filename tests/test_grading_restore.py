"""Restoring check cells, scoring cell results, and the report views (no kernels: fast)."""

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
from course_utils.grading.report import (
    CSV_COLUMNS,
    ExerciseResult,
    NotebookReport,
    format_table,
    to_json,
    write_csv,
)
from course_utils.grading.restore import restore_checks
from course_utils.grading.run import CellResult, _classify

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
    assert out.notes == {"99.1": ["its check cell was edited; the original check ran instead"] * 2}


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
    assert out.notes == {"99.1": ["its check cell was deleted; the original was put back"]}


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


def test_one_failing_check_of_two_earns_nothing():
    got = graded(c3=("failed", "AssertionError: expected shape (2, 3), got (3,)"))
    assert got["99.1"] == ("fail", 0, "AssertionError: expected shape (2, 3), got (3,)")
    assert got["99.2"][0] == "pass"


def test_the_first_failing_check_decides_the_status():
    got = graded(c2=("timeout", "timed out after 5 s (interrupted)"), c3=("failed", "x"))
    assert got["99.1"] == ("timeout", 0, "the check timed out after 5 s (interrupted)")


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
    assert (status, points) == ("error", 0)
    assert message.startswith("AssertionError: expected [2 4], got None (after code cell 1")
    assert message.endswith("failed: ModuleNotFoundError: No module named 'nump')")


def test_another_exercises_failure_is_not_blamed():
    got = graded(c1=("error", "NotImplementedError: Exercise 99.1: your code here"),
                 c5=("failed", "AssertionError: expected 5.0, got 4.0"))
    assert got["99.2"] == ("fail", 0, "AssertionError: expected 5.0, got 4.0")


# --- what the plugin's records mean -------------------------------------------------------------


def record(**fields):
    base = {"cell": 0, "phase": "call", "exception": "NbCellError", "message": "", "ename": "",
            "evalue": "", "kernel_exit": None, "kernel_alive": True}
    return base | fields


def test_classify_the_records_nbval_produces():
    assert _classify(record(exception=None), 5).outcome == "passed"
    got = _classify(record(ename="AssertionError", evalue="expected 1, got 2\nmore"), 5)
    assert (got.outcome, got.message) == ("failed", "AssertionError: expected 1, got 2")
    got = _classify(record(ename="ValueError", evalue=""), 5)
    assert (got.outcome, got.message) == ("error", "ValueError")
    got = _classify(record(message="Timeout of 5 seconds exceeded executing cell"), 5)
    assert (got.outcome, got.kernel_lost) == ("timeout", False)
    got = _classify(record(message="Timeout of 5 seconds exceeded while executing cell. Failed "
                           "to interrupt kernel", kernel_alive=False), 5)
    assert (got.outcome, got.kernel_lost) == ("timeout", True)
    got = _classify(record(message="Timeout of 5 seconds exceeded", kernel_exit=1,
                           kernel_alive=False), 5)
    assert (got.outcome, got.message, got.kernel_lost) == (
        "crashed", "the kernel died with exit code 1", True)
    got = _classify(record(exception="RuntimeError", message="Kernel dead on test start"), 5)
    assert got.outcome == "not run"
    got = _classify(record(phase="setup", exception="RuntimeError", message="no kernel"), 5)
    assert (got.outcome, got.message) == ("not run", "not run: the kernel did not start: no kernel")


# --- report views -------------------------------------------------------------------------------

REPORTS = [
    NotebookReport("subs/ada.ipynb", "ada", "99_fixture.ipynb", [
        ExerciseResult("99.1", 2, 2, "pass", notes=["its check cell was edited; the original "
                                                    "check ran instead"]),
        ExerciseResult("99.2", 0, 1, "error", "NameError: name 'x' is not defined, really")]),
    NotebookReport("subs/bob.ipynb", "bob", "", [], error="not a notebook: the file is not JSON"),
]


def test_the_table_shows_points_status_message_totals_and_notes():
    table = format_table(REPORTS)
    assert "  99.1*        2/2  pass" in table
    assert "  99.2         0/1  error    NameError: name 'x' is not defined, really" in table
    assert "  total        2/3" in table
    assert "* 99.1: its check cell was edited" in table
    assert "error: not a notebook" in table
    assert table.endswith("all: 2/3 points; 0 of 2 notebooks fully passed")


def test_csv_has_one_row_per_learner_and_exercise(tmp_path):
    write_csv(REPORTS, tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [(r["learner"], r["exercise"], r["points"], r["possible"], r["status"]) for r in rows] \
        == [("ada", "99.1", "2", "2", "pass"), ("ada", "99.2", "0", "1", "error"),
            ("bob", "", "0", "0", "error")]
    assert rows[1]["message"] == "NameError: name 'x' is not defined, really"
    assert rows[0]["notes"].startswith("its check cell was edited")


def test_json_is_machine_readable():
    data = json.loads(to_json(REPORTS))
    assert [(d["learner"], d["points"], d["possible"], d["passed"]) for d in data] == [
        ("ada", 2, 3, False), ("bob", 0, 0, False)]
    assert data[0]["exercises"][1]["status"] == "error"
