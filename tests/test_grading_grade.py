"""course-grade end to end: real nbval runs in real kernels, on fixtures and on the course.

Each adversarial fixture in tests/fixtures/grading/submissions/<case>/ is graded against the tiny
fixture solutions, must give the stated report, and must be byte-identical afterwards.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.grading import grade
from course_utils.grading.build import build_notebook, notebook_bytes

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "grading"
SOLUTIONS = FIXTURES / "solutions"
TIMEOUT = 8.0  # seconds per cell: the fixture cells take milliseconds, on a busy machine seconds
COURSE_TIMEOUT = 120.0

pytestmark = pytest.mark.slow


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_fixtures_are_what_make_fixtures_writes():
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    assert (SOLUTIONS / "99_fixture.ipynb").read_bytes() == notebook_bytes(make.solutions())
    for learner, nb in make.submissions().items():
        data = nb if isinstance(nb, bytes) else notebook_bytes(nb)
        assert (FIXTURES / "submissions" / learner / "99_fixture.ipynb").read_bytes() == data


# case: ({exercise: (status, points, text in the message)}, texts in the notes)
CASES = {
    "full": ({"99.1": ("pass", 2, ""), "99.2": ("pass", 1, "")}, []),
    "partial": ({"99.1": ("fail", 0, "AssertionError: expected [2 4], got [3 4]"),
                 "99.2": ("error", 0, "NotImplementedError: Exercise 99.2: your code here "
                          "(in your solution")}, []),
    "tampered": ({"99.1": ("fail", 0, "AssertionError: expected [2 4], got [3 4]"),
                  "99.2": ("pass", 1, "")},
                 ["99.1: its check cell was edited", "99.1: its check cell was deleted"]),
    "deleted_check": ({"99.1": ("pass", 2, ""), "99.2": ("pass", 1, "")},
                      ["99.2: its check cell was deleted; the original was put back"]),
    "reordered": ({"99.1": ("pass", 2, ""), "99.2": ("pass", 1, "")},
                  ["99.1: its check cell was above its solution"]),
    "infinite_loop": ({"99.1": ("timeout", 0, "the check timed out after 8 s"),
                       "99.2": ("pass", 1, "")}, []),
    "stubborn_loop": ({"99.1": ("timeout", 0, "ignored the interrupt"), "99.2": ("pass", 1, "")},
                      ["code cell 2 ignored the interrupt after its timeout, so its kernel was "
                       "stopped; the cells after it ran again in a fresh kernel"]),
    "crash": ({"99.1": ("error", 0, "the kernel died with exit code 1 (in your solution"),
               "99.2": ("pass", 1, "")},
              ["code cell 2 crashed the kernel; the cells after it ran again"]),
    "syntax_error": ({"99.1": ("pass", 2, ""), "99.2": ("error", 0, "SyntaxError")}, []),
    "broken_setup": ({"99.1": ("error", 0, "No module named 'nump'"),
                      "99.2": ("error", 0, "No module named 'nump'")}, []),
    "not_a_notebook": ({"99.1": ("error", 0, "not a notebook: the file is not JSON"),
                        "99.2": ("error", 0, "not a notebook")}, []),
    "empty": ({"99.1": ("error", 0, "the file is empty"), "99.2": ("error", 0, "empty")}, []),
}


@pytest.mark.parametrize("case", CASES)
def test_each_adversarial_submission_gets_the_stated_report_and_is_not_written(case):
    path = FIXTURES / "submissions" / case / "99_fixture.ipynb"
    before = sha256(path)
    report = grade.grade_notebook(path, SOLUTIONS, timeout=TIMEOUT)
    assert sha256(path) == before, "the grader must never write the learner's file"

    expected, notes = CASES[case]
    assert (report.learner, report.notebook) == (case, "99_fixture.ipynb")
    got = {e.exercise: (e.status, e.points, e.message) for e in report.exercises}
    assert list(got) == list(expected), "every exercise of the canonical notebook, in order"
    for ex, (status, points, text) in expected.items():
        assert got[ex][:2] == (status, points), f"{case} {ex}: {got[ex]}"
        assert text in got[ex][2], f"{case} {ex}: expected {text!r} in {got[ex][2]!r}"
        assert (got[ex][2] == "") == (status == "pass")
    all_notes = [f"{e.exercise}: {n}" for e in report.exercises for n in e.notes] + report.notes
    for text in notes:
        assert any(text in n for n in all_notes), f"{case}: expected {text!r} in {all_notes}"
    if not notes:
        assert all_notes == []
    assert report.passed == (case in ("full", "deleted_check", "reordered"))


def test_a_path_that_does_not_exist_is_reported_not_raised(tmp_path):
    report = grade.grade_notebook(tmp_path / "99_fixture.ipynb", SOLUTIONS, timeout=TIMEOUT)
    assert report.error.startswith("cannot read the file") and not report.passed


def test_csv_over_a_folder_of_three_submissions(tmp_path, capsys):
    subs = tmp_path / "subs"
    subs.mkdir()
    # One notebook per learner, under the learner's name: found by its exercise ids, not its name.
    for learner, case in [("alice", "full"), ("bob", "partial"), ("carol", "tampered")]:
        shutil.copy(FIXTURES / "submissions" / case / "99_fixture.ipynb", subs / f"{learner}.ipynb")
    out = tmp_path / "grades.csv"
    code = grade.main([str(subs), "--solutions", str(SOLUTIONS), "--timeout", str(TIMEOUT),
                       "--csv", str(out)])
    assert code == 1, "not everyone passed"
    with open(out, newline="") as f:
        rows = [(r["learner"], r["notebook"], r["exercise"], r["points"], r["possible"],
                 r["status"], r["message"], r["notes"]) for r in csv.DictReader(f)]
    edited = "its check cell was edited; the original check ran instead"
    deleted = "its check cell was deleted; the original was put back"
    nb = "99_fixture.ipynb"
    assert rows == [
        ("alice", nb, "99.1", "2", "2", "pass", "", ""),
        ("alice", nb, "99.2", "1", "1", "pass", "", ""),
        ("bob", nb, "99.1", "0", "2", "fail", "AssertionError: expected [2 4], got [3 4]", ""),
        ("bob", nb, "99.2", "0", "1", "error",
         "NotImplementedError: Exercise 99.2: your code here (in your solution, code cell 5)", ""),
        ("carol", nb, "99.1", "0", "2", "fail", "AssertionError: expected [2 4], got [3 4]",
         f"{edited}; {deleted}"),
        ("carol", nb, "99.2", "1", "1", "pass", "", ""),
    ]
    table = capsys.readouterr().out
    assert "all: 4/9 points; 1 of 3 notebooks fully passed" in table


def test_exit_code_and_json_for_a_full_submission(capsys):
    path = FIXTURES / "submissions" / "full" / "99_fixture.ipynb"
    assert grade.main([str(path), "--solutions", str(SOLUTIONS), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(d["learner"], d["points"], d["possible"], d["passed"]) for d in data] == [
        ("full", 3, 3, True)]


def test_the_module_runs_as_a_script_and_rejects_a_bad_timeout():
    empty = FIXTURES / "submissions" / "empty" / "99_fixture.ipynb"
    command = [sys.executable, "-m", "course_utils.grading.grade", str(empty),
               "--solutions", str(SOLUTIONS)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "99.1         0/2  error    the file is empty, not a notebook" in done.stdout
    assert "RuntimeWarning" not in done.stderr
    done = subprocess.run([*command, "--timeout", "0"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "--timeout must be a positive number" in done.stderr


# --- the course's own notebooks -----------------------------------------------------------------

COURSE = sorted((ROOT / "solutions").glob("*.ipynb"))


@pytest.mark.parametrize("path", COURSE, ids=[p.name for p in COURSE])
def test_every_solutions_notebook_earns_full_marks(path):
    report = grade.grade_notebook(path, ROOT / "solutions", timeout=COURSE_TIMEOUT)
    failures = [(e.exercise, e.status, e.message) for e in report.exercises if e.status != "pass"]
    assert report.exercises and report.passed, (report.error, failures, report.notes)
    assert report.points == report.possible > 0


@pytest.mark.parametrize("path", COURSE, ids=[p.name for p in COURSE])
def test_every_fresh_exercise_notebook_earns_nothing_and_grades_cleanly(path, tmp_path):
    exercise = tmp_path / path.name
    exercise.write_bytes(notebook_bytes(build_notebook(nbformat.read(path, as_version=4))))
    report = grade.grade_notebook(exercise, ROOT / "solutions", timeout=COURSE_TIMEOUT)
    assert report.error == "" and report.exercises, report.error
    assert report.points == 0, [(e.exercise, e.status) for e in report.exercises]
    assert all(e.status in ("error", "fail") and e.message for e in report.exercises)
