"""course-grade end to end: real kernels, on the tiny fixture course.

A class of 30 submissions (the fixtures in tests/fixtures/grading/submissions/<case>/ and answers
of every kind) is graded once as an instructor would; each fixture must get the stated report,
and every file must be byte-identical afterwards. (That every
solutions notebook of the course earns full marks and every exercise notebook zero is proved by
the shortcut audit, tests/test_shortcuts.py, which runs each notebook once.) Attacks on the
grader: tests/test_grading_attacks.py.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
from grader_copy import grader_copy
from machine_speed import slowness

from course_utils.grading import grade
from course_utils.grading.build import build_notebook, notebook_bytes

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "grading"
SOLUTIONS = FIXTURES / "solutions"
#: Every time limit below is stretched by how much slower than an idle two-core machine this one
#: runs now (issue 24: at load 10 a cell of one second took twenty).
SLOW = slowness()
TIMEOUT = round(30.0 * SLOW)  # seconds per cell: the fixture cells take milliseconds
LOOP_TIMEOUT = round(2.0 * SLOW)  # for the cases that are meant to time out (setup cells too)
SANDBOX = grade.bwrap.bwrap_path() is not None

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
    "partial": ({"99.1": ("fail", 1, "AssertionError: expected [2 4], got [3 4]"),
                 "99.2": ("error", 0, "NotImplementedError: Exercise 99.2: your code here "
                          "(in your solution")}, []),
    "tampered": ({"99.1": ("fail", 1, "AssertionError: expected [2 4], got [3 4]"),
                  "99.2": ("pass", 1, "")},
                 ["99.1: its check cell (1 of 2, `got = double([1, 2])`) differs from the course's",
                  "99.1: its check cell (2 of 2, `got = tuple(double(np.zeros((2, 3))).shape)`) "
                  "was deleted"]),
    "deleted_check": ({"99.1": ("pass", 2, ""), "99.2": ("pass", 1, "")},
                      ["99.2: its check cell (`assert np.isclose(length, 5.0), f\"expected "
                       "5.0,...`) was deleted; the original was put back"]),
    "reordered": ({"99.1": ("pass", 2, ""), "99.2": ("pass", 1, "")},
                  ["99.1: its check cell (2 of 2, `got = tuple(double(np.zeros((2, 3))).shape)`) "
                   "was above its solution"]),
    "infinite_loop": ({"99.1": ("timeout", 0, f"the check timed out after {LOOP_TIMEOUT:g} s"),
                       "99.2": ("pass", 1, "")}, []),
    "stubborn_loop": ({"99.1": ("timeout", 0, "ignored the interrupt"), "99.2": ("pass", 1, "")},
                      ["code cell 2 ignored the interrupt after its timeout, so its kernel was "
                       "stopped; the cells after it ran again in a fresh kernel"]),
    "crash": ({"99.1": ("error", 0, "the kernel died (exit code 1) (in your solution"),
               "99.2": ("pass", 1, "")},
              ["code cell 2 lost the kernel (the kernel died (exit code 1)); the cells after "
               "it ran again"]),
    "syntax_error": ({"99.1": ("pass", 2, ""),
                      "99.2": ("error", 0, "SyntaxError: incomplete input (code cell 5, line 2)")},
                     []),
    "broken_setup": ({"99.1": ("error", 0, "No module named 'nump'"),
                      "99.2": ("error", 0, "No module named 'nump'")}, []),
    "not_a_notebook": ({"99.1": ("error", 0, "not a notebook: the file is not JSON"),
                        "99.2": ("error", 0, "not a notebook")}, []),
    "empty": ({"99.1": ("error", 0, "the file is empty"), "99.2": ("error", 0, "empty")}, []),
}


LOOPS = ("infinite_loop", "stubborn_loop")  # graded on their own, with a short timeout


def check_case(case: str, report: dict) -> None:
    expected, notes = CASES[case]
    assert report["notebook"] == "99_fixture.ipynb"
    got = {e["exercise"]: (e["status"], e["points"], e["message"]) for e in report["exercises"]}
    assert list(got) == list(expected), "every exercise of the canonical notebook, in order"
    for ex, (status, points, text) in expected.items():
        assert got[ex][:2] == (status, points), f"{case} {ex}: {got[ex]}"
        assert text in got[ex][2], f"{case} {ex}: expected {text!r} in {got[ex][2]!r}"
        assert (got[ex][2] == "") == (status == "pass")
    all_notes = [f"{e['exercise']}: {n}" for e in report["exercises"] for n in e["notes"]] \
        + report["notes"]
    for text in notes:
        assert any(text in n for n in all_notes), f"{case}: expected {text!r} in {all_notes}"
    if not notes:
        assert all_notes == []
    assert report["passed"] == (case in ("full", "deleted_check", "reordered"))


@pytest.mark.parametrize("case", [c for c in CASES if c not in LOOPS])
def test_each_fixture_submission_gets_the_stated_report(case, the_class):
    check_case(case, the_class["reports"][case])


@pytest.mark.parametrize("case", LOOPS)
def test_a_loop_costs_only_its_exercise_and_the_file_is_not_written(case):
    path = FIXTURES / "submissions" / case / "99_fixture.ipynb"
    before = sha256(path)
    report = grade.grade_notebook(path, SOLUTIONS, timeout=LOOP_TIMEOUT, sandbox=SANDBOX)
    assert sha256(path) == before, "the grader must never write the learner's file"
    check_case(case, json.loads(grade.to_json([report]))[0])


def test_a_path_that_does_not_exist_is_reported_not_raised(tmp_path):
    report = grade.grade_notebook(tmp_path / "99_fixture.ipynb", SOLUTIONS, timeout=TIMEOUT)
    assert report.error.startswith("cannot read the file") and not report.passed


def test_the_class_csv_has_a_row_per_learner_and_exercise(the_class):
    rows = [(r["learner"], r["notebook"], r["exercise"], r["points"], r["possible"],
             r["status"], r["message"], r["notes"]) for r in the_class["csv"]
            if r["learner"] in ("full", "partial", "tampered", "empty")]
    edited = "its check cell (1 of 2, `got = double([1, 2])`) differs from the course's (edited, " \
        "or an older copy of the exercises); the course's check ran instead"
    deleted = "its check cell (2 of 2, `got = tuple(double(np.zeros((2, 3))).shape)`) was " \
        "deleted; the original was put back"
    nb = "99_fixture.ipynb"
    empty = "the file is empty, not a notebook"
    assert rows == [
        # An empty file in a class folder: a row per exercise, error, full points possible.
        ("empty", nb, "99.1", "0", "2", "error", empty, ""),
        ("empty", nb, "99.2", "0", "1", "error", empty, ""),
        ("full", nb, "99.1", "2", "2", "pass", "", ""),
        ("full", nb, "99.2", "1", "1", "pass", "", ""),
        ("partial", nb, "99.1", "1", "2", "fail", "AssertionError: expected [2 4], got [3 4]", ""),
        ("partial", nb, "99.2", "0", "1", "error",
         "NotImplementedError: Exercise 99.2: your code here (in your solution, code cell 5)", ""),
        ("tampered", nb, "99.1", "1", "2", "fail", "AssertionError: expected [2 4], got [3 4]",
         f"{edited}; {deleted}"),
        ("tampered", nb, "99.2", "1", "1", "pass", "", ""),
    ]
    partial = next(r for r in the_class["csv"] if r["learner"] == "partial")
    assert partial["details"].startswith("99.1, check in code cell 3 (0/1): fail\n"
                                         "  AssertionError: expected [2 4], got [3 4]")


def test_the_class_gets_one_feedback_page_each_and_no_file_is_written(the_class):
    pages = sorted(p.name for p in the_class["feedback"].iterdir())
    assert len(pages) == 30 and "partial__99_fixture.html" in pages
    page = (the_class["feedback"] / "partial__99_fixture.html").read_text()
    assert "expected [2 4], got [3 4]" in page and "Exercise 99.2: your code here" in page
    assert the_class["hashes"]() == the_class["before"], "the grader never writes a submission"
    assert "all: " in the_class["stdout"] or the_class["stdout"].startswith("[")


def test_exit_code_and_json_for_a_full_submission(capsys):
    path = FIXTURES / "submissions" / "full" / "99_fixture.ipynb"
    assert grade.main([str(path), "--solutions", str(SOLUTIONS), "--json", "--timeout",
                       str(TIMEOUT)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(d["learner"], d["points"], d["possible"], d["passed"]) for d in data] == [
        ("full", 3, 3, True)]
    assert [len(e["checks"]) for e in data[0]["exercises"]] == [2, 1]


def test_the_module_runs_as_a_script_and_rejects_a_bad_timeout(capsys):
    empty = FIXTURES / "submissions" / "empty" / "99_fixture.ipynb"
    command = [sys.executable, "-m", "course_utils.grading.grade", str(empty),
               "--solutions", str(SOLUTIONS)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120 * SLOW)
    assert done.returncode == 1, done.stderr
    assert "99.1         0/2  error     the file is empty, not a notebook" in done.stdout
    assert "RuntimeWarning" not in done.stderr
    with pytest.raises(SystemExit) as stop:
        grade.main([str(empty), "--solutions", str(SOLUTIONS), "--timeout", "0"])
    assert stop.value.code == 2
    assert "--timeout must be a positive number" in capsys.readouterr().err


def test_a_hidden_check_runs_when_grading_and_costs_a_hard_coded_answer(tmp_path):
    """A check tagged hidden is not in the exercise; the grader restores it from solutions/."""
    import nbformat.v4 as v4

    solutions = tmp_path / "solutions"
    solutions.mkdir()
    canonical = nbformat.read(SOLUTIONS / "99_fixture.ipynb", as_version=4)
    at = next(i for i, c in enumerate(canonical.cells) if c.id == "check-1b") + 1
    canonical.cells.insert(at, v4.new_code_cell(
        "got = double([5, -1, 0.5])\nassert np.allclose(got, [10, -2, 1]), "
        "f\"expected [10 -2 1], got {got}\"", id="hidden-1",
        metadata={"tags": ["check", "hidden"], "grading": {"id": "99.1", "points": 1}}))
    nbformat.write(canonical, solutions / "99_fixture.ipynb")
    learner = build_notebook(canonical)
    assert "hidden-1" not in [c.id for c in learner.cells]
    sol = next(c for c in learner.cells if c.id == "sol-1")
    sol.source = ("def double(x):\n    x = np.asarray(x)\n"
                  "    return np.array([2, 4]) if x.shape == (2,) else np.zeros(x.shape)")
    path = tmp_path / "99_fixture.ipynb"
    nbformat.write(learner, path)
    report = grade.grade_notebook(path, solutions, timeout=TIMEOUT, sandbox=SANDBOX)
    ex = report.exercises[0]
    assert (ex.exercise, ex.points, ex.possible, ex.status) == ("99.1", 2, 3, "fail")
    assert [(c.cell, c.status, c.hidden) for c in ex.checks] == [
        (3, "pass", False), (4, "pass", False), (5, "fail", True)]
    assert ex.notes == [], "no 'deleted check' note for a check the learner never had"
    assert "99.1, the hidden check after code cell 4 (0/1): fail" in grade.format_table([report])


# --- a class: the same grades whatever the parallelism and the sandbox ---------------------------

DOUBLES = ["return 2 * np.asarray(x)", "return np.asarray(x) + np.asarray(x)", "return x",
           "return np.asarray(x) * 2.0", "return [2 * v for v in x]", "raise ValueError('no')",
           "return np.array([2, 4])", "print('hi' * 1000)\n    return 2 * np.asarray(x)"]
LENGTHS = ["length = float(np.sqrt(np.sum(v ** 2)))", "length = 5.0", "length = 4.0",
           "length = float(np.linalg.norm(v))", "length = v.sum()",
           'raise NotImplementedError("Exercise 99.2: your code here")']


def mixed_class(folder: Path) -> None:
    """30 submissions: the fixture cases that finish quickly, and answers of every kind."""
    folder.mkdir()
    quick = ["full", "partial", "tampered", "deleted_check", "reordered", "crash", "syntax_error",
             "broken_setup", "not_a_notebook", "empty"]
    for case in quick:
        shutil.copy(FIXTURES / "submissions" / case / "99_fixture.ipynb", folder / f"{case}.ipynb")
    base = nbformat.read(FIXTURES / "submissions" / "full" / "99_fixture.ipynb", as_version=4)
    for k in range(20):
        nb = copy.deepcopy(base)
        next(c for c in nb.cells if c.id == "sol-1").source = \
            f"def double(x):\n    {DOUBLES[k % len(DOUBLES)]}"
        next(c for c in nb.cells if c.id == "sol-2").source = \
            f"v = np.array([3.0, 4.0])\n{LENGTHS[k % len(LENGTHS)]}"
        nbformat.write(nb, folder / f"learner{k:02d}.ipynb")


def grades_of(reports: list[dict]) -> list[tuple]:
    return [(r["learner"], e["exercise"], e["points"], e["status"], e["message"],
             tuple(c["status"] for c in e["checks"])) for r in reports for e in r["exercises"]]


def grade_class(folder: Path, *args: str) -> subprocess.CompletedProcess:
    solutions, env = SOLUTIONS, None
    if "--no-sandbox" in args:
        # Its course guard would watch, and put back, the checkout's grading package and the
        # fixtures' solutions and answer key: an edit of the package, or a key written by
        # another pytest worker meanwhile, read as this class's tampering. It gets copies.
        work = Path(tempfile.mkdtemp(prefix="unsandboxed-", dir=folder.parent))
        solutions = work / "solutions"
        shutil.copytree(SOLUTIONS, solutions)
        env = {**os.environ, **grader_copy(work / "src")}
    command = [sys.executable, "-m", "course_utils.grading.grade", str(folder), "--solutions",
               str(solutions), "--json", "--timeout", str(TIMEOUT), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600 * SLOW, env=env)
    assert done.returncode == 1, done.stderr
    return done


@pytest.fixture(scope="module")
def the_class(tmp_path_factory):
    """The 30 submissions graded once as an instructor would (two jobs, sandboxed where bwrap
    works, CSV and feedback); several tests read this one run."""
    tmp = tmp_path_factory.mktemp("class")
    folder = tmp / "class"
    mixed_class(folder)

    def hashes() -> dict:
        return {p.name: sha256(p) for p in sorted(folder.iterdir())}

    before = hashes()
    done = grade_class(folder, "--jobs", "2", *(["--sandbox"] if SANDBOX else [
        "--no-sandbox", "--trust-submissions"]), "--csv", str(tmp / "grades.csv"), "--feedback",
        str(tmp / "feedback"))
    reports = json.loads(done.stdout)
    with open(tmp / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return {"folder": folder, "reports": {r["learner"]: r for r in reports}, "list": reports,
            "csv": rows, "feedback": tmp / "feedback", "stdout": done.stdout, "before": before,
            "hashes": hashes}


def test_a_class_of_30_grades_the_same_with_one_or_two_jobs_sandboxed_or_not(the_class):
    """The class run (two jobs, sandboxed) against one job without the sandbox: they differ in
    both, and must agree on every check of every learner. The attack tests run two jobs both
    ways."""
    first = grades_of(the_class["list"])
    assert len({learner for learner, *_ in first}) == 30
    assert sum(points for _, _, points, *_ in first) > 0
    other = grades_of(json.loads(grade_class(the_class["folder"], "--jobs", "1",
                                             "--no-sandbox", "--trust-submissions").stdout))
    assert other == first


def test_an_error_inside_tf_function_shows_its_root_cause_and_the_learners_line():
    """TensorFlow's own message starts with "in user code:"; the report shows the root cause and
    the line of the learner's function, not just the header."""
    pytest.importorskip("tensorflow")
    from course_utils.grading.run import NotebookRun

    answer = ("import tensorflow as tf\n\n@tf.function\ndef affine(x, w):\n"
              "    return tf.matmul(x, w)  # (2, 3) @ (2, 3): wrong shapes\n")
    check = "got = affine(tf.ones((2, 3)), tf.ones((2, 3)))\nassert got.shape == (2, 2)"
    with NotebookRun(120) as run:
        run.run_cell(0, answer)
        result = run.run_cell(1, check, check=True)
    assert result.outcome == "error"
    assert result.summary.startswith("ValueError: Dimensions must be equal"), result.summary
    assert "code cell 1, line 5, in affine" in result.message
    assert result.where == "code cell 1, line 5: `return tf.matmul(x, w)  # (2, 3) @ (2, 3): " \
        "wrong shapes`"


def test_notebook_option_grades_any_file_against_the_named_notebook(tmp_path, capsys):
    odd = tmp_path / "homework final (2).ipynb"
    odd.write_bytes(b"")
    assert grade.main([str(odd), "--solutions", str(SOLUTIONS), "--notebook", "99_fixture",
                       "--json", "--no-sandbox", "--trust-submissions"]) == 1
    report = json.loads(capsys.readouterr().out)[0]
    assert [(e["exercise"], e["status"], e["possible"]) for e in report["exercises"]] == [
        ("99.1", "error", 2), ("99.2", "error", 1)]
    assert grade.main([str(odd), "--solutions", str(SOLUTIONS), "--notebook", "nope"]) == 2
    assert "error: no " in capsys.readouterr().err


def test_feedback_file_names_stay_unique_when_a_learner_is_named_like_a_tagged_one():
    """Two learners that clean to one file name get tags; a third learner named like the first
    tag must not have their page overwritten (it was, before the red team's second pass)."""
    from course_utils.grading.grade import _unique
    first = _unique(["a__nb.html", "a__nb.html"])
    names = _unique(["a__nb.html", "a__nb.html", first[0], "b__nb.html"])
    assert len(set(names)) == 4 and names[2:] == [first[0], "b__nb.html"], names
