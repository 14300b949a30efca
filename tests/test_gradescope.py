"""The Gradescope bundle (gradescope.py): what it holds (checks and answer key, no solutions), and
its run_autograder run against a temporary /autograder-shaped folder, writing results.json in
Gradescope's schema: hidden checks only in their own after_published tests; without bubblewrap
(a fake bwrap that exits 1) a refusal, or, with --allow-unsandboxed, grades that say so and that
a planted IPython package or a look for solutions/ does not change."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from course_utils.grading import build, gradescope
from course_utils.grading.format import (
    exercises,
    is_hidden,
    is_solution,
    solution_regions,
    validate,
)

ROOT = Path(__file__).resolve().parents[1]
VISIBILITY = {"visible", "hidden", "after_due_date", "after_published"}
PARTIAL_00 = {  # 00.1 without the shape check (1 of 2), 00.2 right (2 of 2), 00.3 not answered
    "00.1": "def mean_squared_error(pred, target):\n"
            "    return float(np.mean((np.asarray(pred) - np.asarray(target)) ** 2))",
    "00.2": "def count_parameters(sizes):\n"
            "    return sum((n_in + 1) * n_out for n_in, n_out in zip(sizes, sizes[1:]))",
}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("gs") / "gs-00"
    assert build.main(["--gradescope", str(target), "--lessons", "00"]) == 0
    return target


@pytest.fixture(scope="module")
def unsandboxed_bundle(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("gs") / "gs-00"
    assert build.main(["--gradescope", str(target), "--lessons", "00",
                       "--allow-unsandboxed"]) == 0
    return target


def _solution_lines() -> set[str]:
    """The lines of 00's solution regions that give an answer away (not blank, not a marker)."""
    nb = nbformat.read(ROOT / "solutions" / "00_setup.ipynb", as_version=4)
    found = set()
    for cell in nb.cells:
        lines = cell.source.splitlines()
        for begin, end in solution_regions(cell.source) if is_solution(cell) else []:
            found |= {line.strip() for line in lines[begin + 1:end] if len(line.strip()) > 12}
    return found


def test_the_bundle_holds_the_checks_and_key_and_no_solution(bundle):
    assert not (bundle / "solutions").exists()
    assert sorted(p.name for p in (bundle / "checks").glob("*.ipynb")) == ["00_setup.ipynb"]
    checks = nbformat.read(bundle / "checks" / "00_setup.ipynb", as_version=4)
    assert any(is_hidden(c) for c in checks.cells), "the bundle grades with the hidden checks"
    validate(checks, "checks", stubs=True)
    seeds = json.loads((bundle / "bundle.json").read_text())["seeds"]
    assert len(seeds) == len(set(seeds)) == gradescope.SEEDS, "seeds drawn when it is built"
    key = json.loads((bundle / ".answer-key" / f"00_setup.seed-{seeds[0]}.json").read_text())
    assert key["notebook"] == "00_setup.ipynb" and key["checks"] and key["literals"]
    answers = _solution_lines()
    assert len(answers) >= 3
    for path in bundle.rglob("*.ipynb"):
        text = path.read_text()
        assert not [a for a in answers if a in text], f"{path} holds a solution"
    for script in ("setup.sh", "run_autograder"):
        assert os.access(bundle / script, os.X_OK), script
        subprocess.run(["bash", "-n", str(bundle / script)], check=True)  # parses
    setup = (bundle / "setup.sh").read_text()
    assert '"/autograder/source[cpu]"' in setup and "download.pytorch.org/whl/cpu" in setup
    assert "[dev]" not in setup and "ruff" not in setup
    with zipfile.ZipFile(bundle.with_name("gs-00.zip")) as z:
        names = set(z.namelist())
    assert {"setup.sh", "run_autograder", "checks/00_setup.ipynb",
            *(f".answer-key/00_setup.seed-{s}.json" for s in seeds),
            "bundle.json", "src/course_utils/grading/gradescope.py", "pyproject.toml"} <= names
    assert not any(n.startswith(("tests/", "exercises/", "notebooks/", "solutions/"))
                   for n in names)
    assert json.loads((bundle / "bundle.json").read_text())["allow_unsandboxed"] is False
    assert build.main(["--gradescope", str(bundle)]) == 2, "refuses an existing folder"


def _venv(folder: Path, package: Path) -> Path:
    """A Python environment like the one setup.sh installs: ``package`` copied into its own
    site-packages (as pip installs it), every other package a link to this one's (inside the
    environment's prefix, where the probe expects a library's files; the sandbox would not
    show the links' targets). The grader then runs from the copy, and its course guard watches
    and puts back the copy, never the checkout's src/, where other work may be going on.
    Returns its python."""
    import site

    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    base = Path(getattr(sys, "_base_executable", sys.executable))
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").symlink_to(base)
    (folder / "pyvenv.cfg").write_text(f"home = {base.parent}\n"
                                       "include-system-site-packages = false\n")
    packages = folder / "lib" / version / "site-packages"
    packages.mkdir(parents=True)
    for ours in map(Path, site.getsitepackages()):
        for entry in ours.iterdir():
            if not entry.name.startswith(("__editable__", package.name)) and \
                    not (packages / entry.name).exists():
                (packages / entry.name).symlink_to(entry)
    shutil.copytree(package, packages / package.name,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return folder / "bin" / "python"


def _autograder(tmp_path: Path, bundle: Path, notebook: nbformat.NotebookNode | None, *,
                no_bwrap: bool = False, files: dict[str, str] | None = None,
                returncode: int = 0) -> dict:
    """Unzip the bundle as Gradescope does, hand in ``notebook`` (and ``files``: path -> text),
    run run_autograder; ``no_bwrap``: with a bwrap on PATH that exits 1, as where user
    namespaces are not allowed."""
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    (root / "results").mkdir()
    with zipfile.ZipFile(bundle.with_name("gs-00.zip")) as z:
        z.extractall(root / "source")
    for script in ("setup.sh", "run_autograder"):
        (root / "source" / script).chmod(0o755)
    (root / "run_autograder").write_bytes((root / "source" / "run_autograder").read_bytes())
    (root / "run_autograder").chmod(0o755)
    if notebook is not None:
        nbformat.write(notebook, root / "submission" / "00_setup.ipynb")
    for name, text in (files or {}).items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text)
    python = sys.executable  # the sandbox shows the kernel this one's packages
    if no_bwrap:  # without it, the course guard watches the grading package it runs from
        python = _venv(root / "venv", root / "source" / "src" / "course_utils")
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": str(python)}
    if no_bwrap:
        fake = tmp_path / "fake-bin"
        fake.mkdir()
        (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new "
                                    "namespace' >&2\nexit 1\n")
        (fake / "bwrap").chmod(0o755)
        env["PATH"] = f"{fake}:{env['PATH']}"
    done = subprocess.run([str(root / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == returncode, done.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text())


def _check_schema(data: dict) -> None:
    assert set(data) >= {"tests", "output", "visibility", "stdout_visibility"}
    assert set(data) <= {"score", "execution_time", "output", "visibility", "stdout_visibility",
                         "tests", "extra_data", "output_format", "leaderboard"}
    for test in data["tests"]:
        assert set(test) >= {"name", "score", "max_score", "output", "visibility"}, test
        assert test["visibility"] in VISIBILITY and test["status"] in ("passed", "failed")
        assert 0 <= test["score"] <= test["max_score"]
    # A top-level score would show learners the hidden checks' points at once; without it
    # Gradescope adds up the tests, each shown as its visibility says.
    assert "score" not in data or not data["tests"]


def _by_exercise(data: dict) -> dict[str, float]:
    """The points of each exercise: the sum of its tests' scores."""
    found: dict[str, float] = {}
    for test in data["tests"]:
        exercise = test["number"].rsplit(".", 1)[0]
        found[exercise] = found.get(exercise, 0) + test["score"]
    return found


def _answered(answers: dict[str, str]) -> nbformat.NotebookNode:
    nb = nbformat.read(ROOT / "exercises" / "00_setup.ipynb", as_version=4)
    for cell in nb.cells:
        exercise = cell.metadata.get("grading", {}).get("id")
        if "solution" in cell.metadata.get("tags", []) and exercise in answers:
            cell.source = answers[exercise]
    return nb


@pytest.mark.slow
def test_run_autograder_writes_a_test_per_check_in_gradescopes_schema(tmp_path, bundle):
    data = _autograder(tmp_path, bundle, _answered(PARTIAL_00))
    _check_schema(data)
    key = nbformat.read(ROOT / "solutions" / "00_setup.ipynb", as_version=4)
    checks = [c for c in key.cells if "check" in c.metadata.get("tags", [])]
    assert len(data["tests"]) == len(checks), "one Gradescope test per check cell"
    assert sum(t["max_score"] for t in data["tests"]) == sum(exercises(key).values())
    assert _by_exercise(data) == {"00.1": 1, "00.2": 2, "00.3": 0}
    hidden = [t for t in data["tests"] if t["visibility"] == "after_published"]
    assert len(hidden) == sum(is_hidden(c) for c in checks) >= 1
    failing = [t for t in data["tests"] if t["status"] == "failed"]
    assert any("ValueError" in t["output"] for t in failing), failing  # 00.1's shape check
    assert "00.3" in data["output"] and "total" in data["output"]


@pytest.mark.slow
def test_run_autograder_without_a_notebook_says_what_to_upload(tmp_path, bundle):
    data = _autograder(tmp_path, bundle, None)
    _check_schema(data)
    assert data["score"] == 0 and data["tests"] == []
    assert "upload 00_setup.ipynb" in data["output"]


#: 00.2 right for the visible check's kind of layer sizes only (under 10, and the course's
#: MLP): its hidden check, with sizes up to 64, fails (KeyError).
MEMORISED_00_2 = {**PARTIAL_00, "00.2": "def count_parameters(sizes):\n"
                  "    if max(sizes) < 10 or tuple(sizes) == (2, 32, 32, 2):\n"
                  "        return sum(a * b + b for a, b in zip(sizes, sizes[1:]))\n"
                  "    raise KeyError(tuple(sizes))"}


@pytest.mark.slow
def test_hidden_checks_reach_learners_only_when_the_grades_are_published(tmp_path, bundle):
    data = _autograder(tmp_path, bundle, _answered(MEMORISED_00_2))
    _check_schema(data)
    [hidden] = [t for t in data["tests"] if t["visibility"] != "visible"]
    assert hidden["visibility"] == "after_published"
    assert hidden["number"].startswith("00.2") and (hidden["score"], hidden["max_score"]) == (0, 1)
    assert "KeyError" in hidden["output"], hidden
    visible = [t for t in data["tests"] if t["visibility"] == "visible"]
    assert sum(t["score"] for t in visible) == 2  # 00.1: 1 of 2; 00.2: its visible check, 1
    # The top-level output, shown at once: the visible checks' report, nothing of the hidden.
    top = data["output"]
    assert "KeyError" not in top and "hidden" not in top.lower(), top
    row = next(line.split() for line in top.splitlines() if line.strip().startswith("00.2"))
    assert row[1:3] == ["1/1", "pass"], top
    total = next(line.split() for line in top.splitlines() if line.strip().startswith("total"))
    assert total[1] == f"2/{sum(t['max_score'] for t in visible):g}", top


def test_without_bubblewrap_run_autograder_refuses_and_says_why(tmp_path, bundle):
    data = _autograder(tmp_path, bundle, _answered(PARTIAL_00), no_bwrap=True, returncode=1)
    assert data["tests"] == [] and data["score"] == 0
    assert data["output"].startswith("NOT GRADED") and "--allow-unsandboxed" in data["output"]
    assert "cannot start a sandbox" in data["output"], data["output"]


@pytest.mark.slow
def test_unsandboxed_grades_say_so_and_a_submission_cannot_plant_or_peek(
        tmp_path, unsandboxed_bundle):
    root = tmp_path / "autograder"
    marker = tmp_path / "planted-module-ran"
    planted = (f"open({str(marker)!r}, 'a').write(__file__ + '\\n')\n"
               "raise SystemExit('a planted module ran')\n")
    # The answer to 00.3 looks for the solutions in the bundle (they would give it 1 point) and
    # plants IPython packages where the grader used to import from: source/ and source/src/.
    peek = (
        "import json, pathlib\n"
        f"source = pathlib.Path({str(root / 'source')!r})\n"
        f"planted = {planted!r}\n"
        "for folder in (source, source / 'src'):\n"
        "    (folder / 'IPython').mkdir(parents=True, exist_ok=True)\n"
        "    (folder / 'IPython' / '__init__.py').write_text(planted)\n"
        "for path in sorted(source.rglob('*.ipynb')):\n"
        "    for cell in json.loads(path.read_text())['cells']:\n"
        "        if 'BEGIN SOLUTION' in ''.join(cell['source']) and '00.3' in str(cell):\n"
        "            exec(''.join(cell['source']))\n")
    nb = _answered({**PARTIAL_00, "00.3": peek})
    # A package handed in next to the notebook, as Gradescope copies every uploaded file.
    data = _autograder(tmp_path, unsandboxed_bundle, nb, no_bwrap=True,
                       files={"IPython/__init__.py": planted, "IPython/core/__init__.py": ""})
    _check_schema(data)
    assert (root / "source" / "IPython" / "__init__.py").exists(), "the plant was made"
    assert not marker.exists(), marker.read_text()
    assert _by_exercise(data) == {"00.1": 1, "00.2": 2, "00.3": 0}, data["output"]
    assert data["output"].startswith("UNSANDBOXED"), data["output"][:300]
    assert all(t["output"].startswith("UNSANDBOXED") for t in data["tests"])


@pytest.mark.slow
def test_unsandboxed_a_submission_cannot_read_the_checks_or_the_answer_key(
        tmp_path, unsandboxed_bundle):
    """Without the sandbox the submission's code runs as the grader's user: before, an answer
    could read the hidden checks (``checks/``), the expected values (``.answer-key/``) and the
    seeds (``bundle.json``) from the bundle. Now the grader holds them in memory and deletes
    them from the container before the submission runs; the answer finds none of them, its
    grades are as they would be, and a second run in the same container refuses."""
    root = tmp_path / "autograder"
    found = tmp_path / "found.json"
    peek = (
        "import json, pathlib\n"
        f"source = pathlib.Path({str(root / 'source')!r})\n"
        "read = {}\n"
        "for path in sorted(source.rglob('*')):\n"
        "    if path.is_file() and ({'checks', '.answer-key'} & set(path.parts) or\n"
        "            path.name == 'bundle.json' and 'seeds' in json.loads(path.read_text())):\n"
        "        read[str(path)] = len(path.read_bytes())\n"
        f"pathlib.Path({str(found)!r}).write_text(json.dumps(read))\n")
    data = _autograder(tmp_path, unsandboxed_bundle, _answered({**PARTIAL_00, "00.3": peek}),
                       no_bwrap=True)
    _check_schema(data)
    assert json.loads(found.read_text()) == {}, "the submission read the checks or the key"
    assert _by_exercise(data) == {"00.1": 1, "00.2": 2, "00.3": 0}, data["output"]
    assert data["output"].startswith("UNSANDBOXED"), data["output"][:300]
    again = subprocess.run([str(root / "run_autograder")], capture_output=True, text=True,
                           timeout=600, env={**os.environ, "AUTOGRADER_ROOT": str(root),
                                             "AUTOGRADER_PYTHON": str(root / "venv/bin/python")})
    assert again.returncode == 1, again.stderr[-2000:]
    output = json.loads((root / "results" / "results.json").read_text())["output"]
    assert output.startswith("NOT GRADED") and "new container" in output, output
