"""The Gradescope bundle (gradescope.py): what it holds, and its run_autograder run against a
temporary /autograder-shaped folder, writing results.json in Gradescope's schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from course_utils.grading import build
from course_utils.grading.format import exercises, is_hidden

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


def test_the_bundle_holds_the_scripts_the_package_and_only_its_lessons_solutions(bundle):
    assert sorted(p.name for p in (bundle / "solutions").glob("*.ipynb")) == ["00_setup.ipynb"]
    key = nbformat.read(bundle / "solutions" / "00_setup.ipynb", as_version=4)
    assert any(is_hidden(c) for c in key.cells), "the bundle grades with the hidden checks"
    for script in ("setup.sh", "run_autograder"):
        assert os.access(bundle / script, os.X_OK), script
        subprocess.run(["bash", "-n", str(bundle / script)], check=True)  # parses
    setup = (bundle / "setup.sh").read_text()
    assert '"/autograder/source[cpu]"' in setup and "download.pytorch.org/whl/cpu" in setup
    assert "[dev]" not in setup and "ruff" not in setup
    with zipfile.ZipFile(bundle.with_name("gs-00.zip")) as z:
        names = set(z.namelist())
    assert {"setup.sh", "run_autograder", "solutions/00_setup.ipynb",
            "src/course_utils/grading/gradescope.py", "pyproject.toml"} <= names
    assert not any(n.startswith(("tests/", "exercises/", "notebooks/")) for n in names)
    assert build.main(["--gradescope", str(bundle)]) == 2, "refuses an existing folder"


def _autograder(tmp_path: Path, bundle: Path, notebook: nbformat.NotebookNode | None) -> dict:
    """Unzip the bundle as Gradescope does, hand in ``notebook``, run run_autograder."""
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
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    done = subprocess.run([str(root / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text())


def _check_schema(data: dict) -> None:
    assert set(data) >= {"score", "tests", "output", "visibility", "stdout_visibility"}
    for test in data["tests"]:
        assert set(test) >= {"name", "score", "max_score", "output", "visibility"}, test
        assert test["visibility"] in VISIBILITY and test["status"] in ("passed", "failed")
        assert 0 <= test["score"] <= test["max_score"]
    assert data["score"] == sum(t["score"] for t in data["tests"])


@pytest.mark.slow
def test_run_autograder_writes_a_test_per_check_in_gradescopes_schema(tmp_path, bundle):
    nb = nbformat.read(ROOT / "exercises" / "00_setup.ipynb", as_version=4)
    for cell in nb.cells:
        exercise = cell.metadata.get("grading", {}).get("id")
        if "solution" in cell.metadata.get("tags", []) and exercise in PARTIAL_00:
            cell.source = PARTIAL_00[exercise]
    data = _autograder(tmp_path, bundle, nb)
    _check_schema(data)
    key = nbformat.read(ROOT / "solutions" / "00_setup.ipynb", as_version=4)
    checks = [c for c in key.cells if "check" in c.metadata.get("tags", [])]
    assert len(data["tests"]) == len(checks), "one Gradescope test per check cell"
    assert sum(t["max_score"] for t in data["tests"]) == sum(exercises(key).values())
    by_exercise: dict[str, float] = {}
    for test in data["tests"]:
        exercise = test["number"].rsplit(".", 1)[0]
        by_exercise[exercise] = by_exercise.get(exercise, 0) + test["score"]
    assert by_exercise == {"00.1": 1, "00.2": 2, "00.3": 0}
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
