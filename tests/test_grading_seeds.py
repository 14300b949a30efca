"""Grader-drawn seeds (issue 36): every check draws its inputs from a seed the grader draws at
grading time (``probe.run_rng``), and the expected values come from the answer key built for
that seed in a clean kernel.

Graded end to end on a tiny course written here (a visible and a hidden check whose inputs come
from the run's seed). The learner's answers below record the inputs they are called with in a
file, as a learner collecting a lookup table would.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import nbformat
import nbformat.v4 as v4
import numpy as np
import pytest

from course_utils.grading import grade
from course_utils.grading import key as answer_key
from course_utils.grading.build import build_notebook, notebook_bytes
from course_utils.grading.grade import grade_notebook
from course_utils.grading.probe import DEFAULT_SEED, SEED_VARIABLE, run_rng, run_seed

TIMEOUT = 30.0

SETUP = "import numpy as np"
SOLUTION = "def triple(x):\n    ### BEGIN SOLUTION\n    return 3.0 * x\n    ### END SOLUTION"
CHECK = '''from course_utils.grading.probe import report, run_rng

x = run_rng(1).normal(size=5)
report(got=np.asarray(triple(x), dtype=float))
### REFERENCE
report(x=x, want=3.0 * x)
### VERDICT
assert np.allclose(got, want), f"triple({x}): expected {want}, got {got}"'''
HIDDEN = '''from course_utils.grading.probe import report, run_rng

x = run_rng(2).uniform(-9.0, 9.0, size=4)
report(got=np.asarray(triple(x), dtype=float))
### REFERENCE
report(x=x, want=3.0 * x)
### VERDICT
assert np.allclose(got, want), f"hidden triple({x}): expected {want}, got {got}"'''
ABOUT = "other values than the visible check's; multiply each one"

#: An honest answer that also writes down every input it is called with (``{record}``).
RECORDING = '''import json

def triple(x):
    with open({record!r}, "a") as f:
        f.write(json.dumps([float(v) for v in x]) + "\\n")
    return 3.0 * x'''


def tiny_course(root: Path) -> Path:
    meta = {"solution": {"tags": ["solution"], "grading": {"id": "98.1"}},
            "check": {"tags": ["check"], "grading": {"id": "98.1", "points": 1}},
            "hidden": {"tags": ["check", "hidden"],
                       "grading": {"id": "98.1", "points": 1, "about": ABOUT}}}
    cells = [v4.new_code_cell(SETUP), v4.new_code_cell(SOLUTION, metadata=meta["solution"]),
             v4.new_code_cell(CHECK, metadata=meta["check"]),
             v4.new_code_cell(HIDDEN, metadata=meta["hidden"])]
    for k, cell in enumerate(cells):
        cell.id = f"c{k}"
    solutions = root / "solutions"
    solutions.mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'tiny'\n")
    nb = v4.new_notebook(cells=cells)
    (solutions / "98_seeds.ipynb").write_bytes(notebook_bytes(nb))
    (root / "exercises").mkdir()
    (root / "exercises" / "98_seeds.ipynb").write_bytes(
        notebook_bytes(build_notebook(nb, "98_seeds.ipynb")))
    return solutions


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("seeds")
    tiny_course(root)
    return root


def submission(course: Path, answer: str, name: str) -> Path:
    nb = nbformat.read(course / "exercises" / "98_seeds.ipynb", as_version=4)
    nb.cells[1].source = answer
    path = course / "sub" / name / "98_seeds.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(notebook_bytes(nb))
    return path


def graded(course: Path, answer: str, seed: int | None, name: str = "ada"):
    report = grade_notebook(submission(course, answer, name), course / "solutions",
                            timeout=TIMEOUT, seed=seed)
    assert not report.error, report.error
    [exercise] = report.exercises
    return report, exercise


def recorded(path: Path) -> list[list[float]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_seed_and_run_rng_follow_the_seed_in_the_environment(monkeypatch):
    monkeypatch.delenv(SEED_VARIABLE, raising=False)
    default = (run_seed(1), run_rng(1).normal(size=3))
    monkeypatch.setenv(SEED_VARIABLE, str(DEFAULT_SEED))
    assert run_seed(1) == default[0] and np.array_equal(run_rng(1).normal(size=3), default[1])
    monkeypatch.setenv(SEED_VARIABLE, "987654321")
    assert run_seed(1) != default[0] and run_seed(1) != run_seed(2)
    assert not np.array_equal(run_rng(1).normal(size=3), default[1])
    assert run_seed("02.1") == run_seed("02.1") and 0 <= run_seed("02.1") < 2**32


def test_two_gradings_draw_different_seeds_and_the_hidden_inputs_differ(course, tmp_path):
    seen = []
    for k in range(2):
        record = tmp_path / f"inputs{k}.jsonl"
        report, exercise = graded(course, RECORDING.format(record=str(record)), None
                                  if k == 0 else answer_key.draw_seed(), f"rec{k}")
        assert exercise.points == 2, exercise
        seen.append((report.seed, recorded(record)))
    (seed0, inputs0), (seed1, inputs1) = seen
    assert seed0 != seed1
    assert [len(x) for x in inputs0] == [len(x) for x in inputs1] == [5, 4]  # visible, hidden
    assert inputs0[1] != inputs1[1] and inputs0[0] != inputs1[0]
    # Not the inputs a learner sees in Jupyter (the default seed) either.
    assert inputs0[1] != [float(v) for v in np.random.default_rng(
        run_seed_with(DEFAULT_SEED, 2)).uniform(-9.0, 9.0, size=4)]


def run_seed_with(seed: int, k: int) -> int:
    import os

    old = os.environ.get(SEED_VARIABLE)
    os.environ[SEED_VARIABLE] = str(seed)
    try:
        return run_seed(k)
    finally:
        if old is None:
            del os.environ[SEED_VARIABLE]
        else:
            os.environ[SEED_VARIABLE] = old


def lookup_answer(inputs: list[list[float]]) -> str:
    """An answer that returns one grading's outputs for that grading's inputs, zeros else."""
    table = {tuple(x): tuple(3.0 * v for v in x) for x in inputs}
    return (f"TABLE = {table!r}\n\ndef triple(x):\n"
            "    return np.array(TABLE.get(tuple(float(v) for v in x), [0.0] * len(x)))")


def test_a_lookup_table_of_one_gradings_outputs_fails_on_another_and_seed_repeats_it(
        course, tmp_path):
    seed = answer_key.draw_seed()
    record = tmp_path / "inputs.jsonl"
    graded(course, RECORDING.format(record=str(record)), seed, "honest")
    table = lookup_answer(recorded(record))
    again, exercise = graded(course, table, seed, "lookup-same")  # the same seed: same inputs
    assert again.seed == seed and exercise.points == 2, exercise
    other, exercise = graded(course, table, answer_key.draw_seed(), "lookup-other")
    assert exercise.points == 0, exercise
    assert [c.status for c in exercise.checks] == ["fail", "fail"]


def test_the_key_is_cached_per_seed(course):
    path = course / "solutions" / "98_seeds.ipynb"
    seeds = [answer_key.draw_seed() for _ in range(2)]
    keys = [answer_key.load(path, course / "solutions", seed=s) for s in seeds]
    for seed, key in zip(seeds, keys, strict=True):
        assert key.seed == seed and answer_key.cache_path(path, seed=seed).is_file()
        cached = answer_key.load(path, course / "solutions", seed=seed, create=False)
        assert cached is not None and cached.seed == seed
        assert np.array_equal(cached.checks["c2"]["want"], key.checks["c2"]["want"])
    assert not np.allclose(keys[0].checks["c2"]["x"], keys[1].checks["c2"]["x"])
    assert answer_key.load(path, course / "solutions", seed=seeds[0] + 1, create=False) is None


#: A kernel that replaces numpy's generator so that the probe's inputs are ones, and answers
#: with the outputs for ones: what it did to its own inputs is not believed.
FIXED_RNG = '''import numpy as np

class Fixed:
    def normal(self, *args, size=None, **kwargs):
        return np.ones(size)
    uniform = normal

np.random.default_rng = lambda *args, **kwargs: Fixed()

def triple(x):
    return np.full(len(x), 3.0)'''


def test_a_kernel_that_replaces_numpys_generator_gains_nothing(course):
    _, exercise = graded(course, FIXED_RNG, answer_key.draw_seed(), "fixed-rng")
    assert exercise.points == 0, exercise
    _, honest = graded(course, "def triple(x):\n    return x + x + x", answer_key.draw_seed(),
                       "unusual")
    assert honest.points == 2, honest


#: Right on the visible check's five values, wrong on the hidden check's four.
WRONG_ON_HIDDEN = "def triple(x):\n    return 3.0 * x if len(x) == 5 else 2.0 * x"


def test_feedback_never_shows_the_seed_or_the_hidden_values_and_records_keep_it(
        course, tmp_path, capsys):
    out = tmp_path / "out"
    path = submission(course, WRONG_ON_HIDDEN, "hidden-wrong")
    args = [str(path), "--solutions", str(course / "solutions"), "--no-sandbox",
            "--trust-submissions", "--csv", str(out / "grades.csv"), "--feedback",
            str(out / "feedback"), "--seed", "4242424242"]
    out.mkdir()
    assert grade.main(args) == 1
    table = capsys.readouterr().out
    with open(out / "grades.csv", newline="") as f:
        [row] = list(csv.DictReader(f))
    assert row["seed"] == "4242424242" and row["points"] == "1"
    [page] = (out / "feedback").iterdir()
    html = page.read_text()
    assert "the hidden check of 98.1 gave a wrong result" in html
    hidden_x = np.random.default_rng(run_seed_with(4242424242, 2)).uniform(-9.0, 9.0, size=4)
    for text in (html, table, row["message"], row["details"]):
        assert "4242424242" not in text
        for v in hidden_x:  # as numpy prints them, to 4 decimals (a carry aside)
            assert repr(abs(float(v)))[:6] not in text, (v, text)
    assert grade.main([*args, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data[0]["seed"] == 4242424242
