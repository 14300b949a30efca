"""The exercise format and course-build-exercises (no kernels: fast)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import nbformat.v4 as v4
import pytest

from course_utils.grading import build
from course_utils.grading.format import (
    BEGIN,
    END,
    FormatError,
    exercises,
    solution_regions,
    strip_solutions,
    validate,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_SOLUTIONS = ROOT / "tests" / "fixtures" / "grading" / "solutions"
STUB = 'raise NotImplementedError("Exercise 02.1: your code here")'


def solution_cell(source: str, ex: str | None = "02.1", cell_id: str = "sol"):
    grading = {"id": ex} if ex else {}
    return v4.new_code_cell(source, id=cell_id, metadata={"tags": ["solution"], "grading": grading})


def check_cell(source: str = "assert f() == 1", ex: str = "02.1", points=1, cell_id="chk"):
    grading = {"id": ex} if points is None else {"id": ex, "points": points}
    return v4.new_code_cell(source, id=cell_id, metadata={"tags": ["check"], "grading": grading})


# --- solution regions ---------------------------------------------------------------------------


def test_region_in_a_function_keeps_signature_docstring_and_indentation():
    source = f'def f(x):\n    """Doc."""\n    {BEGIN}\n    y = x + 1\n    return y\n    {END}\n'
    assert strip_solutions(source, "02.1") == f'def f(x):\n    """Doc."""\n    {STUB}\n'


def test_several_regions_and_a_top_level_region_each_become_a_stub():
    source = "\n".join([
        "a = 1", BEGIN, "b = 2", END,
        "def g():", f"        {BEGIN}", "        return 3", f"        {END}", "c = 4",
    ])
    assert strip_solutions(source, "02.1").splitlines() == [
        "a = 1", STUB, "def g():", f"        {STUB}", "c = 4"]


def test_text_outside_regions_is_kept_verbatim():
    # Invariant: removing the stubs from the exercise leaves exactly the lines outside regions.
    source = f"x = 1\n{BEGIN}\nsecret = 42\n{END}\ny = 2  # {BEGIN.lower()} is fine in code\n"
    lines = strip_solutions(source, "9.9").splitlines()
    kept = [line for line in lines if "NotImplemented" not in line]
    assert kept == ["x = 1", "y = 2  # ### begin solution is fine in code"]
    assert "secret" not in strip_solutions(source, "9.9")


@pytest.mark.parametrize("source, line", [
    (f"{BEGIN}\nx = 1", 1),                       # never closed
    (f"x = 1\n{END}", 2),                         # END without BEGIN
    (f"{BEGIN}\n{BEGIN}\n{END}\n{END}", 2),       # nested
    ("## BEGIN SOLUTION\nx = 1\n### END SOLUTION", 1),  # near-miss marker
])
def test_unbalanced_markers_name_the_line(source, line):
    with pytest.raises(ValueError, match=f"line {line}"):
        solution_regions(source)


# --- validation ---------------------------------------------------------------------------------


def good_notebook():
    return v4.new_notebook(cells=[
        v4.new_markdown_cell("# Title", id="md"),
        solution_cell(f"def f():\n    {BEGIN}\n    return 1\n    {END}"),
        check_cell(cell_id="chk1", points=2),
        check_cell("assert f() + 1 == 2", cell_id="chk2", points=0.5),
    ])


def test_a_good_notebook_validates_and_its_check_points_add_up():
    validate(good_notebook(), "nb.ipynb")
    assert exercises(good_notebook()) == {"02.1": 2.5}


@pytest.mark.parametrize("break_it, expected", [
    (lambda nb: nb.cells[1].metadata.pop("grading"), r"cell 2 .*solution cell without an exer"),
    (lambda nb: nb.cells[2].metadata["grading"].pop("points"), r"cell 3 .*check cell without poi"),
    (lambda nb: nb.cells[2].metadata["grading"].update(points=-1), r"cell 3 .*without points"),
    (lambda nb: setattr(nb.cells[1], "source", f"{BEGIN}\nx = 1"), r"cell 2 .*unbalanced.*line 1"),
    (lambda nb: setattr(nb.cells[1], "source", "x = 1"), r"cell 2 .*no ### BEGIN SOLUTION"),
    (lambda nb: nb.cells.append(v4.new_code_cell(f"{BEGIN}\nx\n{END}", id="loose")),
     r"cell 5 .*not tagged 'solution'"),
    (lambda nb: nb.cells.insert(1, nb.cells.pop(2)), r"cell 2 .*comes before its solution"),
    (lambda nb: [nb.cells.pop(3), nb.cells.pop(2)], r"cell 2 .*exercise 02.1 has no check cell"),
    (lambda nb: nb.cells.append(check_cell(ex="02.9", cell_id="c9")), r"cell 5 .*02.9 has a check"),
    (lambda nb: setattr(nb.cells[3], "id", "chk1"), r"cell 4 .*repeats the cell id"),
])
def test_format_errors_name_the_notebook_and_the_cell(break_it, expected):
    nb = good_notebook()
    break_it(nb)
    with pytest.raises(FormatError, match=r"^lesson\.ipynb: " + expected):
        validate(nb, "lesson.ipynb")


def test_exercise_ids_carry_the_lesson_number():
    validate(good_notebook(), "solutions/02_static_graphs.ipynb")
    with pytest.raises(FormatError, match=r"cell 2 .*has exercise id '02.1'; in this notebook "
                       r"ids start with 03\."):
        validate(good_notebook(), "solutions/03_graph_optimization.ipynb")


# --- building -----------------------------------------------------------------------------------


def test_build_notebook_strips_solutions_outputs_and_timing_but_keeps_the_rest():
    nb = good_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Py", "language": "python"}
    nb.cells[1].outputs = [v4.new_output("stream", text="hi")]
    nb.cells[1].execution_count = 3
    nb.cells[1].metadata["execution"] = {"iopub.status.idle": "2024-01-01T00:00:00Z"}
    before = nbformat.writes(nb)
    ex = build.build_notebook(nb, "nb")
    assert nbformat.writes(nb) == before, "the solutions notebook must not be modified"
    assert ex.cells[1].source == f"def f():\n    {STUB}"
    assert (ex.cells[1].outputs, ex.cells[1].execution_count) == ([], None)
    assert "execution" not in ex.cells[1].metadata
    assert [c.id for c in ex.cells] == [c.id for c in nb.cells]
    assert [c.metadata for c in ex.cells[2:]] == [c.metadata for c in nb.cells[2:]]
    assert ex.metadata == nb.metadata


def copy_course(tmp_path: Path) -> tuple[Path, Path]:
    """A scratch solutions/ (the fixture and lesson 00's) and where its exercises/ go."""
    solutions = tmp_path / "solutions"
    shutil.copytree(FIXTURE_SOLUTIONS, solutions)
    shutil.copy(ROOT / "solutions" / "00_setup.ipynb", solutions)
    return solutions, tmp_path / "exercises"


def run_build(solutions: Path, exercises: Path, *extra: str) -> int:
    return build.main(["--solutions", str(solutions), "--exercises", str(exercises), *extra])


def test_building_twice_gives_identical_bytes_and_check_then_passes(tmp_path, capsys):
    solutions, exercises = copy_course(tmp_path)
    assert run_build(solutions, exercises) == 0
    first = {p.name: p.read_bytes() for p in exercises.glob("*.ipynb")}
    assert set(first) == {p.name for p in solutions.glob("*.ipynb")}
    assert run_build(solutions, exercises) == 0
    assert {p.name: p.read_bytes() for p in exercises.glob("*.ipynb")} == first
    capsys.readouterr()
    assert run_build(solutions, exercises, "--check") == 0
    assert "up to date" in capsys.readouterr().out
    for data in first.values():
        assert BEGIN.encode() not in data and END.encode() not in data


def test_check_names_stale_missing_and_orphan_notebooks_and_writes_nothing(tmp_path, capsys):
    solutions, exercises = copy_course(tmp_path)
    run_build(solutions, exercises)
    source = solutions / "99_fixture.ipynb"
    nb = nbformat.read(source, as_version=4)
    nb.cells[2].source = nb.cells[2].source.replace("2 * x, elementwise.", "Twice x.")
    nbformat.write(nb, source)
    shutil.copy(source, solutions / "extra_lesson.ipynb")
    (exercises / "97_gone.ipynb").write_text("{}")
    before = {p: p.read_bytes() for p in exercises.iterdir()}
    capsys.readouterr()

    assert run_build(solutions, exercises, "--check") == 1
    out = capsys.readouterr().out
    assert f"stale: {exercises / '99_fixture.ipynb'}" in out
    assert f"missing: {exercises / 'extra_lesson.ipynb'}" in out
    assert f"orphan: {exercises / '97_gone.ipynb'}" in out
    assert {p: p.read_bytes() for p in exercises.iterdir()} == before


def test_a_format_error_fails_the_build_and_names_notebook_and_cell(tmp_path, capsys):
    solutions, exercises = copy_course(tmp_path)
    source = solutions / "99_fixture.ipynb"
    nb = nbformat.read(source, as_version=4)
    del nb.cells[3].metadata["grading"]["points"]
    nbformat.write(nb, source)
    assert run_build(solutions, exercises) == 1
    err = capsys.readouterr().err
    assert f"{source}: cell 4 (`got = double([1, 2])`): is a check cell without points" in err
    assert not (exercises / "99_fixture.ipynb").exists()


def test_the_module_runs_as_a_script(tmp_path):
    solutions, exercises = copy_course(tmp_path)
    command = [sys.executable, "-m", "course_utils.grading.build", "--solutions", str(solutions),
               "--exercises", str(exercises), "--check"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "missing:" in done.stdout, done.stdout + done.stderr
    assert "RuntimeWarning" not in done.stderr


def test_the_committed_solutions_follow_the_format():
    paths = sorted((ROOT / "solutions").glob("*.ipynb"))
    assert paths, "no solution notebooks found"
    for path in paths:
        validate(nbformat.read(path, as_version=4), str(path))  # raises FormatError


def test_a_change_inside_a_solution_region_leaves_the_exercise_up_to_date(tmp_path):
    # The exercise is a function of everything outside the regions, and only of that.
    solutions, exercises = copy_course(tmp_path)
    run_build(solutions, exercises)
    source = solutions / "99_fixture.ipynb"
    nb = nbformat.read(source, as_version=4)
    nb.cells[2].source = nb.cells[2].source.replace("2 * np.asarray(x)", "np.asarray(x) * 2")
    nbformat.write(nb, source)
    assert run_build(solutions, exercises, "--check") == 0


# --- hidden checks and releases -----------------------------------------------------------------


def test_hidden_is_only_for_check_cells_and_an_exercise_keeps_a_visible_check():
    hidden = check_cell(cell_id="hid")
    hidden.metadata["tags"].append("hidden")
    with pytest.raises(FormatError, match="every check of exercise 02.1 is hidden"):
        validate(v4.new_notebook(cells=[solution_cell(f"{BEGIN}\nx = 1\n{END}"), hidden]),
                 "02_x.ipynb")
    sol = solution_cell(f"{BEGIN}\nx = 1\n{END}")
    sol.metadata["tags"].append("hidden")
    with pytest.raises(FormatError, match="tagged 'hidden' but is not a check cell"):
        validate(v4.new_notebook(cells=[sol, check_cell()]), "02_x.ipynb")
    validate(v4.new_notebook(cells=[sol := solution_cell(f"{BEGIN}\nx = 1\n{END}"), check_cell(),
                                    hidden]), "02_x.ipynb")
    assert sol.metadata["tags"] == ["solution"]


def test_a_release_has_lessons_and_exercises_but_no_solutions_tests_or_hidden_checks(tmp_path):
    from course_utils.grading.format import is_check, is_hidden
    from course_utils.grading.grade import canonical_folder

    target = tmp_path / "class"
    assert build.main(["--release", str(target)]) == 0
    assert build.main(["--release", str(target)]) == 0, "a second release updates the first"
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert build.main(["--release", str(other)]) == 2, "refuses a folder that is not a release"
    names = {p.name for p in target.iterdir()}
    assert {"notebooks", "exercises", "src", "README.md", "pyproject.toml", "Makefile",
            build.RELEASE_CHECKS} <= names
    assert not {"solutions", "tests", ".ci", "screenshots"} & names
    solutions = sorted(p.name for p in (ROOT / "solutions").glob("*.ipynb"))
    for folder in ("exercises", build.RELEASE_CHECKS):
        assert sorted(p.name for p in (target / folder).glob("*.ipynb")) == solutions
    for name in solutions:
        nb = nbformat.read(target / "exercises" / name, as_version=4)
        assert not any(is_hidden(c) for c in nb.cells)
        assert any(is_check(c) for c in nb.cells)
        assert BEGIN not in nbformat.writes(nb)
    assert not list(target.rglob("__pycache__"))
    # A learner grading in the release: the checks come from .course-checks/.
    assert canonical_folder(None, start=target / "exercises") == target / build.RELEASE_CHECKS
