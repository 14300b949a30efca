"""Per-lesson releases (release.py): a git repository with the lessons given so far, a README
without links to what it lacks, and a lesson 00 whose grading demo runs there."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from course_utils.grading import build
from course_utils.grading.format import is_hidden
from course_utils.grading.release import MANIFEST, parse_lessons, unlink_missing

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True,
                          check=True).stdout


def test_lessons_are_chosen_by_number_and_lesson_00_always_comes():
    stems = ["00_setup", "01_computation_graphs", "02_static_graphs", "10_performance"]
    assert parse_lessons("01, 10", stems) == ["00_setup", "01_computation_graphs",
                                              "10_performance"]
    assert parse_lessons("2", stems) == ["00_setup", "02_static_graphs"]
    assert parse_lessons(None, stems) == stems
    with pytest.raises(ValueError, match="no lesson '7'"):
        parse_lessons("7", stems)


def test_links_to_missing_files_become_text_and_solutions_links_go():
    text = ("| 01 | [graphs](notebooks/01_x.ipynb) | [exercises](exercises/01_x.ipynb) · "
            "[solutions](solutions/01_x.ipynb) |\n[guide](CONTRIBUTING.md), "
            "[site](https://example.org/a), [map](#the-course-map), ![pic](docs/p.png)")
    have = {"exercises/01_x.ipynb"}
    assert unlink_missing(text, have.__contains__) == (
        "| 01 | graphs | [exercises](exercises/01_x.ipynb) |\nguide, "
        "[site](https://example.org/a), [map](#the-course-map), ")


def test_a_release_of_two_lessons_is_a_git_repository_and_grows_lesson_by_lesson(tmp_path):
    target = tmp_path / "class"
    assert build.main(["--release", str(target), "--lessons", "01"]) == 0
    for folder in ("notebooks", "exercises", build.RELEASE_CHECKS):
        assert sorted(p.name for p in (target / folder).glob("*.ipynb")) == \
            ["00_setup.ipynb", "01_computation_graphs.ipynb"], folder
    assert not {"solutions", "tests", ".answer-key"} & {p.name for p in target.iterdir()}
    for nb_path in target.rglob("*.ipynb"):
        if ".git" not in nb_path.parts:
            nb = nbformat.read(nb_path, as_version=4)
            assert not any(is_hidden(c) for c in nb.cells), nb_path
            assert "### BEGIN SOLUTION" not in nbformat.writes(nb), nb_path
    assert _git(target, "status", "--porcelain") == "", "everything is committed"
    assert len(_git(target, "log", "--oneline").splitlines()) == 1

    readme = (target / "README.md").read_text()
    missing = [link for link in LINK.findall(readme)
               if "://" not in link and not (target / link).exists()]
    assert not missing, f"the release README links to files it lacks: {missing}"
    assert "solutions/" not in "".join(LINK.findall(readme))
    assert "course-grade exercises/" in readme and "hidden checks" in readme
    for nb_path in (target / "notebooks").glob("*.ipynb"):  # lessons link to the README
        for link in LINK.findall(nb_path.read_text()):
            if "://" not in link and link.endswith((".md", ".ipynb")):
                assert (nb_path.parent / link).exists(), (nb_path.name, link)

    # The next week: lesson 02 joins, in a second commit; a learner's clone pulls it.
    clone = tmp_path / "learner"
    _git(tmp_path, "clone", "--quiet", str(target), str(clone))
    assert build.main(["--release", str(target), "--lessons", "2"]) == 0
    assert json.loads((target / MANIFEST).read_text())["lessons"] == [
        "00_setup", "01_computation_graphs", "02_static_graphs"]
    assert len(_git(target, "log", "--oneline").splitlines()) == 2
    _git(clone, "pull", "--quiet")
    assert (clone / "exercises" / "02_static_graphs.ipynb").is_file()
    assert build.main(["--release", str(target), "--lessons", "2"]) == 0
    assert len(_git(target, "log", "--oneline").splitlines()) == 2, "nothing new, no commit"
    assert build.main(["--release", str(target), "--lessons", "99"]) == 2


@pytest.mark.slow
def test_lesson_00_runs_cleanly_in_a_release_and_grades_with_what_the_release_has(tmp_path):
    target = tmp_path / "class"
    assert build.main(["--release", str(target), "--lessons", "01"]) == 0
    lesson = target / "notebooks" / "00_setup.ipynb"
    nb = nbformat.read(lesson, as_version=4)
    probe = nbformat.v4.new_code_cell("import course_utils\nprint(course_utils.__file__)\n"
                                      "print(grade.canonical_folder(None))")
    probe.id = "release-probe"
    nb.cells.append(probe)
    env = {**os.environ, "PYTHONPATH": str(target / "src")}  # the release's own package
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(lesson.parent)}}).execute(env=env)
    package, checks = probe.outputs[0]["text"].split()
    assert package.startswith(str(target / "src")), package
    assert checks == str(target / build.RELEASE_CHECKS)
    demo = next(c for c in nb.cells if c.get("id") == "setup-11c")
    table = "".join(o.get("text", "") for o in demo.outputs)
    assert "graded as 00_setup.ipynb" in table and "total" in table, table
    assert "hidden check" not in table, "a release has no hidden checks"
    own = next(c for c in nb.cells if c.get("id") == "setup-12")
    text = "".join(o.get("text", "") for o in own.outputs)
    assert "exit code: 1" in text and "NotImplementedError: Exercise 00.1" in text, text



def test_make_env_builds_a_read_only_environment_without_developer_tools():
    plan = subprocess.run(["make", "-n", "--no-print-directory", "env", "PREFIX=/srv/x"],
                          cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "-m venv --clear /srv/x" in plan
    assert '-m pip install --quiet  ".[cpu,lab,hub]"' in plan, plan
    assert "-e " not in plan, "the course is installed, not linked to this checkout"
    assert "ipykernel install --prefix /srv/x" in plan
    assert "chmod -R a+rX,go-w /srv/x" in plan, "read-only for everyone but its owner"
    hub = [line for line in plan.splitlines() if "pip install" in line]
    assert not any(tool in " ".join(hub) for tool in ("dev", "site", "ruff", "pytest-xdist"))


# --- the release's README and Makefile tell the truth about the release ------------------------

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: Commands that start a server and keep running: checked with `make -n`, not run.
SERVERS = (("make", "lab"),)


def _venv_shim(folder: Path) -> Path:
    """A VENV for the release's Makefile that runs the course's own environment (the one running
    these tests), so that `make grade` grades without installing anything."""
    bin_ = folder / "bin"
    bin_.mkdir(parents=True)
    course = Path(sys.executable).parent
    for tool in ("python", "course-grade", "jupyter"):
        (bin_ / tool).write_text(f'#!/bin/sh\nexec "{course / tool}" "$@"\n')
        (bin_ / tool).chmod(0o755)
    (folder / ".installed").write_text("cpu,lab\n")  # newer than the release's pyproject.toml
    return folder


def _commands(readme: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for block in FENCE.findall(readme)
            for line in block.splitlines() if line.split("#", 1)[0].strip()]


@pytest.mark.slow
def test_every_command_the_release_readme_names_works_in_the_release(tmp_path):
    target = tmp_path / "class"
    assert build.main(["--release", str(target), "--lessons", "01,02"]) == 0
    readme = (target / "README.md").read_text()
    for absent in ("make test", "make site", "solutions/0", "tests/test_", "zh/"):
        assert absent not in readme, absent
    commands = _commands(readme)
    assert {"make lab", "make help", "git pull",
            "make grade NB=exercises/01_computation_graphs.ipynb",
            "course-grade exercises/01_computation_graphs.ipynb"} <= set(commands), commands
    venv = _venv_shim(tmp_path / "venv")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "PYTHONPATH": str(target / "src")}  # the release's own package
    clone = tmp_path / "learner"
    _git(tmp_path, "clone", "--quiet", str(target), str(clone))
    for command in commands:
        argv = shlex.split(command)
        if argv[0] == "make":
            argv += [f"VENV={venv}"]
        if tuple(argv[:2]) in SERVERS:
            plan = subprocess.run(["make", "-n", *argv[1:]], cwd=target, env=env,
                                  capture_output=True, text=True)
            assert plan.returncode == 0, (command, plan.stderr)
            assert f"{venv}/bin/jupyter lab" in plan.stdout, plan.stdout
            continue
        where = clone if argv[:2] == ["git", "pull"] else target
        done = subprocess.run(argv, cwd=where, env=env, capture_output=True, text=True,
                              timeout=900)
        out = done.stdout + done.stderr
        if "grade" in command:  # an exercise notebook as released: checks fail, status 1
            assert done.returncode == (2 if argv[0] == "make" else 1), (command, out)
            assert argv[0] != "make" or "Error 1" in out, out  # make's 2, course-grade's 1
            assert "the grader could not run" not in out, (command, out)
            assert all(f"01.{k}" in out for k in (1, 2, 3, 4)) and "total" in out, out
        else:
            assert done.returncode == 0, (command, out)


def test_the_release_makefile_offers_what_works_and_says_why_the_rest_is_absent(tmp_path):
    target = tmp_path / "class"
    assert build.main(["--release", str(target), "--lessons", "01"]) == 0
    course = (ROOT / "Makefile").read_text()
    targets = {t for line in course.splitlines() if line.startswith(".PHONY:")
               for t in line.split(":", 1)[1].split()}
    assert {"test", "site", "audit", "exercises", "lab", "grade"} <= targets
    offered = {"venv", "kernel", "lab", "grade", "clean", "help", "env"}
    for name in sorted(targets - offered):
        done = subprocess.run(["make", "-s", name], cwd=target, capture_output=True, text=True)
        assert done.returncode == 2 and f"make {name}: not in a release: " in done.stderr, \
            (name, done.stdout, done.stderr)
    for name in sorted(offered & targets):  # every prerequisite resolves
        done = subprocess.run(["make", "-n", name], cwd=target, capture_output=True, text=True)
        assert done.returncode == 0, (name, done.stderr)
    assert "pytest" not in (target / "Makefile").read_text()
    # a class's shared environment gets the release's package (answers withheld), not the course's
    plan = subprocess.run(["make", "-n", "env", "PREFIX=/srv/x"], cwd=target, capture_output=True,
                          text=True, check=True).stdout
    assert '-m pip install --quiet  ".[cpu,lab,hub]"' in plan and "-e " not in plan, plan


def _exercise_notebooks() -> list[str]:
    """Every exercise notebook of both editions, as a path from the course's root."""
    return [f"{edition}/{path.name}" for edition in ("exercises", "zh/exercises")
            for path in sorted((ROOT / edition).glob("[0-9][0-9]_*.ipynb"))]


@pytest.mark.parametrize("notebook", _exercise_notebooks())
def test_every_exercise_notebook_says_course_grade_on_a_class_server_and_make_grade_elsewhere(
        notebook):
    """Issue 37: exercise notebooks 01-14 told every learner `make grade`, which on a class
    server builds the course's 3.8 GB environment in each home. Each names both commands, for
    its own path (an edition's own folder)."""
    nb = nbformat.read(ROOT / notebook, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert f"course-grade {notebook}" in text, "no command for a class server"
    assert f"make grade NB={notebook}" in text, "no command for the learner's own machine"
