"""A learner's release grades right answers right: the exercises of a lesson whose solutions the
release withholds, answered with the solutions' code and graded by ``course-grade`` in the release
as a learner runs it (the release's own package, no answer key), earn every point that is not a
prediction left to the instructor. Set-up cells and REFERENCE sections must not need the course's
withheld answers (CONTRIBUTING.md, "Answers in the package")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from answered import answered, solution_answers

from course_utils.grading import build

ROOT = Path(__file__).resolve().parents[1]


def _answer(release: Path, stem: str) -> None:
    """Paste the solutions' answers into the release's exercise notebook `stem`."""
    path = release / "exercises" / f"{stem}.ipynb"
    nb, pasted = answered(path, solution_answers(stem))
    assert pasted >= 3, f"{stem}: {pasted} answer cells"
    nbformat.write(nb, path)


def _grade(release: Path, stem: str) -> list[dict]:
    """course-grade run in the release, with the release's package, as JSON rows of checks."""
    env = {**os.environ, "PYTHONPATH": str(release / "src")}
    done = subprocess.run([sys.executable, "-m", "course_utils.grading.grade",
                           f"exercises/{stem}.ipynb", "--json", "--timeout", "600"],
                          cwd=release, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout)


def _not_full(report) -> list[str]:
    """Every check of the report that neither passed nor was recorded for the instructor."""
    text = json.dumps(report)
    assert '"status"' in text, text[:2000]
    bad = []

    def walk(item):
        if isinstance(item, dict):
            if "status" in item and item["status"] not in ("pass", "recorded"):
                bad.append(json.dumps(item)[:1500])
            for value in item.values():
                walk(value)
        elif isinstance(item, list):
            for value in item:
                walk(value)

    walk(report)
    return bad


def _clone(release: Path, learner: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", str(release), str(learner)], check=True)
    return learner


@pytest.mark.slow
def test_right_answers_earn_full_marks_in_a_release_that_withholds_their_solutions(tmp_path):
    # Week 1: lesson 01, its solutions withheld (the course's engine raises AnswerWithheld).
    release = tmp_path / "class"
    assert build.main(["--release", str(release), "--lessons", "01"]) == 0
    learner = _clone(release, tmp_path / "week1")
    stem = "01_computation_graphs"
    _answer(learner, stem)
    assert _not_full(_grade(learner, stem)) == [], f"{stem} in a release without its solutions"
    # Week 3: lesson 03 joins with 01's and 02's solutions released, 03's withheld.
    assert build.main(["--release", str(release), "--lessons", "03",
                       "--solutions", "01,02"]) == 0
    learner = _clone(release, tmp_path / "week3")
    stem = "03_graph_optimization"
    _answer(learner, stem)
    assert _not_full(_grade(learner, stem)) == [], f"{stem} in a release without its solutions"
