"""Gradescope autograder bundles: the course's grader in Gradescope's containers.

    course-build-exercises --gradescope gs-01 --lessons 01    # gs-01/ and gs-01.zip

Gradescope unzips the bundle into ``/autograder/source``, runs ``setup.sh`` once when it builds
the assignment's image, then, for each submission, copies the learner's files to
``/autograder/submission`` and runs ``/autograder/run_autograder``, which must leave
``/autograder/results/results.json``. Here it grades every notebook handed in with
``grade.grade_notebook`` against the bundle's ``solutions/`` (hidden checks included) and writes
one Gradescope test per check cell: its score and max_score, its whole message as output, and
its visibility (``visible``; a hidden check ``after_published``, so learners see it once the
grades are out). The solutions stay in ``/autograder/source``; the learner's kernel runs in the
sandbox when bubblewrap works in the container, and without it the grader keeps the solutions'
and its own bytes and puts back any it finds changed (README, "Grading a class").

Run by hand (``AUTOGRADER_ROOT`` and ``AUTOGRADER_PYTHON`` move it out of ``/autograder``, which
is how the tests run it): ``python -m course_utils.grading.gradescope /autograder``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import zipfile
from pathlib import Path

import nbformat

from course_utils.grading.release import copy_items
from course_utils.grading.report import NotebookReport, format_table

#: What a bundle holds from the course, besides the chosen lessons' solutions notebooks.
ITEMS = ("src", "pyproject.toml", "README.md", "LICENSE")
#: The PyTorch CPU wheels (PyPI's Linux torch is the CUDA build, several GB).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip bubblewrap
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install --no-cache-dir --upgrade pip
# The course's package with the CPU builds of the frameworks and a Jupyter kernel; no developer
# tools, no JupyterLab server needed.
/autograder/venv/bin/pip install --no-cache-dir --extra-index-url {index} \\
    "/autograder/source[cpu]" "ipykernel=={ipykernel}"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission: it grades every notebook in submission/ against the
# bundle's solutions/ and writes results/results.json. AUTOGRADER_ROOT and AUTOGRADER_PYTHON
# move it out of /autograder (the course's tests do).
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
cd "$ROOT/source"
export PYTHONPATH="$ROOT/source/src"
exec "$PYTHON" -m course_utils.grading.gradescope "$ROOT"
"""


def _pin(root: Path, name: str) -> str:
    """The exact version pyproject.toml pins ``name`` to."""
    import re
    found = re.search(rf'"{re.escape(name)}==([^"]+)"', (root / "pyproject.toml").read_text())
    if not found:
        raise ValueError(f"pyproject.toml pins no {name}")
    return found.group(1)


def build_bundle(root: Path, target: Path, lessons_arg: str | None = None) -> str:
    """Write the bundle folder ``target`` and ``target.zip``; return a one-line summary.
    ValueError if ``target`` exists or a lesson is unknown."""
    from course_utils.grading.format import validate
    from course_utils.grading.release import parse_lessons

    target = Path(target)
    if target.exists():
        raise ValueError(f"{target} exists; give a new folder")
    available = [p.stem for p in sorted((root / "solutions").glob("*.ipynb"))]
    lessons = parse_lessons(lessons_arg, available)
    if lessons_arg is not None:  # a Gradescope assignment is a lesson; 00 only when asked for
        asked = {s.split("_", 1)[0] for s in lessons_arg.replace(" ", "").split(",") if s}
        lessons = [s for s in lessons if s.split("_", 1)[0] in {a.zfill(2) for a in asked}]
    for stem in lessons:
        validate(nbformat.read(root / "solutions" / f"{stem}.ipynb", as_version=4), stem)
    target.mkdir(parents=True)
    copy_items(root, target, ITEMS)
    (target / "solutions").mkdir()
    for stem in lessons:
        shutil.copy2(root / "solutions" / f"{stem}.ipynb", target / "solutions")
    (target / "setup.sh").write_text(SETUP_SH.format(index=TORCH_CPU_INDEX,
                                                     ipykernel=_pin(root, "ipykernel")))
    (target / "run_autograder").write_text(RUN_AUTOGRADER)
    for script in ("setup.sh", "run_autograder"):
        (target / script).chmod(0o755)
    archive = target.with_name(target.name + ".zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(target.rglob("*")):
            if path.is_file():
                info = zipfile.ZipInfo.from_file(path, str(path.relative_to(target)))
                info.date_time = (2020, 1, 1, 0, 0, 0)  # the same bytes for the same course
                z.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
    numbers = ", ".join(s.split("_", 1)[0] for s in lessons)
    return (f"wrote {target} and {archive}: lessons {numbers}; upload {archive.name} as the "
            "assignment's autograder (README, 'Teaching a class')")


# --- in the container ----------------------------------------------------------------------


def results(reports: list[NotebookReport], seconds: float, missing: str = "") -> dict:
    """Gradescope's results.json for these reports: a test per check cell."""
    tests = []
    for r in reports:
        lesson = Path(r.notebook or r.path).stem
        for e in r.exercises:
            checks = e.checks or []
            if not checks or e.status == "tampered" or r.error:  # one test for the exercise
                text = r.error or e.message or e.status
                if e.notes:
                    text += "\n" + "\n".join(e.notes)
                tests.append({"name": f"{lesson}: exercise {e.exercise}",
                              "number": e.exercise, "score": e.points,
                              "max_score": e.possible, "status": _status(e.points, e.possible),
                              "output": text, "visibility": "visible"})
                continue
            for k, c in enumerate(checks, start=1):
                label = c.label or f"code cell {c.cell}"
                tests.append({
                    "name": f"{lesson}: exercise {e.exercise}, {label}",
                    "number": f"{e.exercise}.{k}", "score": c.points, "max_score": c.possible,
                    "status": _status(c.points, c.possible),
                    "output": f"{c.status}" + (f": {c.text()}" if c.status != "pass" else ""),
                    "visibility": "after_published" if c.hidden else "visible"})
    score = sum(t["score"] for t in tests)
    output = missing or format_table(reports)
    return {"score": score, "execution_time": round(seconds, 1), "output": output,
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}


def _status(points: float, possible: float) -> str:
    return "passed" if possible and points >= possible else "failed"


def run(autograder: Path) -> dict:
    """Grade ``autograder/submission`` against ``autograder/source/solutions`` and write
    ``autograder/results/results.json``; return what was written."""
    from course_utils.grading import classroom
    from course_utils.grading import sandbox as bwrap
    from course_utils.grading.grade import GRADER, CourseGuard, grade_notebook

    t0 = time.monotonic()
    solutions = autograder / "source" / "solutions"
    submission = autograder / "submission"
    out = autograder / "results"
    out.mkdir(parents=True, exist_ok=True)
    notebooks = sorted(p for p in submission.rglob("*.ipynb")
                       if ".ipynb_checkpoints" not in p.parts) if submission.is_dir() else []
    sandbox = bwrap.bwrap_path() is not None
    classroom.KERNEL_ENV.update(classroom.kernel_environment(None, "cpu"))  # one learner: all cores
    reports = []
    for path in notebooks:
        guard = None if sandbox else CourseGuard([GRADER, solutions], watched=[GRADER.parent])
        report = grade_notebook(path, solutions, learner="you", sandbox=sandbox,
                                hidden=[submission, out], guard=guard, links=False)
        report.path = str(path.relative_to(submission))
        reports.append(report)
    lessons = ", ".join(p.name for p in sorted(solutions.glob("*.ipynb")))
    missing = "" if notebooks else f"No notebook was handed in: upload {lessons}."
    data = results(reports, time.monotonic() - t0, missing)
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, out / "results.json")
    return data


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    autograder = Path(args[0] if args else os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    data = run(autograder)
    print(data["output"])
    print(f"score {data['score']:g} of {sum(t['max_score'] for t in data['tests']):g}")
    return 0  # the score is in results.json; a failing learner is not a failing autograder


if __name__ == "__main__":
    sys.exit(main())
