"""Gradescope autograder bundles: the course's grader in Gradescope's containers.

    course-build-exercises --gradescope gs-01 --lessons 01    # gs-01/ and gs-01.zip
    course-build-exercises --gradescope gs-01 --lessons 01 --allow-unsandboxed

Gradescope unzips the bundle into ``/autograder/source``, runs ``setup.sh`` once when it builds
the assignment's image, then, for each submission, copies the learner's files to
``/autograder/submission`` and runs ``/autograder/run_autograder``, which must leave
``/autograder/results/results.json``.

The bundle holds the package, the lessons' *checks* (``checks/NN_topic.ipynb``: the solutions
notebook with every solution region turned into its stub, hidden checks kept) and their answer
key (``.answer-key/``: the expected values, ``key.py``), never the solution notebooks. Here it
grades every notebook handed in with ``pipeline.grade_notebook`` against those checks and writes
one Gradescope test per check cell: its score and max_score, its message as output, and its
visibility: ``visible``, or ``after_published`` for a hidden check, so that its points and its
message reach the learner only when the instructor publishes the grades. The top-level
``output`` is the report of the visible checks only, and there is no top-level ``score``:
Gradescope adds up the tests, and keeps the total from learners while a test is unpublished.

The learner's kernel runs in the sandbox (bubblewrap). Where bubblewrap cannot start (it needs
user namespaces, which a Docker container may not have), ``run_autograder`` refuses: it writes a
results.json that says why, scores nothing, and exits 1, unless the bundle was built with
``--allow-unsandboxed``; then it grades, and every test's output and the top-level output say
that the submission ran unsandboxed (its code ran as the grader's user). The grader then reads
the checks and the answer key into memory and deletes them from the container (``_withhold``)
before any submission runs, so that the submission cannot read them (Gradescope grades each
submission in a new container; a second run in the same one refuses). Either way the grader runs
from a path a submission cannot plant modules in: ``python -I`` (no current folder, no
``PYTHONPATH``, no user site) started in a fresh empty folder, every module it uses later
imported before any submission runs, and the kernel in a scratch folder of its own
(``kernel.py``), not in ``/autograder/submission``.

**Seeds.** Every check draws its inputs from a grading run's seed (``probe.run_rng``), and the
bundle cannot build an answer key (it holds no solutions). So the bundle is built with
``SEEDS`` seeds drawn then (``key.draw_seed``) and the key of each (``.answer-key/NN.seed-S.json``,
``bundle.json``'s ``seeds``); each submission is graded with one of them chosen by
``secrets``, which the hidden stdout and ``extra_data`` of results.json name for the instructor
(never an output a learner reads). A learner who hands in many times meets at most ``SEEDS``
sets of inputs, none printed for a hidden check.

Run by hand (``AUTOGRADER_ROOT`` and ``AUTOGRADER_PYTHON`` move it out of ``/autograder``, which
is how the tests run it): ``python -I -m course_utils.grading.gradescope /autograder``.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import os
import pkgutil
import secrets
import shutil
import sys
import time
import zipfile
from pathlib import Path

import nbformat

from course_utils.grading.commands.release import copy_items
from course_utils.grading.notebook.report import NotebookReport, format_table
from course_utils.grading.probe import DEFAULT_SEED

#: What a bundle holds from the course, besides the chosen lessons' checks and answer key.
ITEMS = ("src", "pyproject.toml", "README.md", "LICENSE")
#: The bundle's folder of check notebooks (solutions stubbed out, hidden checks kept), and the
#: file that says which lessons it grades and whether it may grade without the sandbox.
CHECKS = "checks"
SETTINGS = "bundle.json"
#: Seeds a bundle carries the answer key of (each submission is graded with one of them).
SEEDS = 3
#: The PyTorch CPU wheels (PyPI's Linux torch is the CUDA build, several GB).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: How the output of a run that graded nothing, for want of the sandbox, begins.
REFUSED = "NOT GRADED"
#: The first line of every output of a run without the sandbox.
UNSANDBOXED = ("UNSANDBOXED: bubblewrap could not start in this container, and the bundle was "
               "built with --allow-unsandboxed: the submission's code ran as the grader's user")

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
# bundle's checks/ and answer key and writes results/results.json. AUTOGRADER_ROOT and
# AUTOGRADER_PYTHON move it out of /autograder (the course's tests do).
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
# The grader imports only the installed package and the standard library: python -I leaves out
# the current folder, PYTHONPATH and the user's site; the current folder is a new empty one
# (the supervisor it starts runs with -m there), never source/ or submission/.
unset PYTHONPATH PYTHONHOME PYTHONSTARTUP
cd "$(mktemp -d)" || exit 1
exec "$PYTHON" -I -m course_utils.grading.gradescope "$ROOT"
"""


def _pin(root: Path, name: str) -> str:
    """The exact version pyproject.toml pins ``name`` to."""
    import re
    found = re.search(rf'"{re.escape(name)}==([^"]+)"', (root / "pyproject.toml").read_text())
    if not found:
        raise ValueError(f"pyproject.toml pins no {name}")
    return found.group(1)


def checks_notebook(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The bundle's copy of a solutions notebook: every solution region replaced by its stub
    (as in ``exercises/``), outputs cleared, the hidden checks kept."""
    from course_utils.grading.format import exercise_id, is_solution, strip_solutions
    from course_utils.grading.layout import TIMING_KEYS

    nb = copy.deepcopy(solution)
    for cell in nb.cells:
        for key in TIMING_KEYS:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            if is_solution(cell):
                cell.source = strip_solutions(cell.source, exercise_id(cell))
    return nb


def build_bundle(root: Path, target: Path, lessons_arg: str | None = None,
                 allow_unsandboxed: bool = False) -> str:
    """Write the bundle folder ``target`` and ``target.zip``; return a one-line summary.
    ValueError if ``target`` exists or a lesson is unknown; ``key.KeyError_`` if a lesson's
    answer key cannot be built (its solutions fail their own checks)."""
    from course_utils.grading.commands.release import parse_lessons
    from course_utils.grading.format import validate
    from course_utils.grading.layout import notebook_bytes
    from course_utils.grading.notebook import key as answer_key

    target = Path(target)
    if target.exists():
        raise ValueError(f"{target} exists; give a new folder")
    solutions = root / "solutions"
    available = [p.stem for p in sorted(solutions.glob("*.ipynb"))]
    lessons = parse_lessons(lessons_arg, available)
    if lessons_arg is not None:  # a Gradescope assignment is a lesson; 00 only when asked for
        asked = {s.split("_", 1)[0] for s in lessons_arg.replace(" ", "").split(",") if s}
        lessons = [s for s in lessons if s.split("_", 1)[0] in {a.zfill(2) for a in asked}]
    notebooks = {}
    for stem in lessons:
        notebooks[stem] = nbformat.read(solutions / f"{stem}.ipynb", as_version=4)
        validate(notebooks[stem], stem)
    seeds = [answer_key.draw_seed() for _ in range(SEEDS)]
    keys = {(stem, seed): answer_key.load(solutions / f"{stem}.ipynb", solutions, seed=seed)
            for stem, nb in notebooks.items() if answer_key.uses_key(nb) for seed in seeds}
    target.mkdir(parents=True)
    copy_items(root, target, ITEMS)
    (target / CHECKS).mkdir()
    for stem, nb in notebooks.items():
        (target / CHECKS / f"{stem}.ipynb").write_bytes(notebook_bytes(checks_notebook(nb)))
    for (stem, seed), key in keys.items():
        answer_key.save(answer_key.cache_path(target / CHECKS / f"{stem}.ipynb", seed=seed),
                        key.to_json())
    (target / SETTINGS).write_text(json.dumps(
        {"lessons": lessons, "allow_unsandboxed": bool(allow_unsandboxed), "seeds": seeds},
        indent=1) + "\n")
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
    unsandboxed = "; grades without the sandbox where bubblewrap cannot start" \
        if allow_unsandboxed else ""
    return (f"wrote {target} and {archive}: lessons {numbers}{unsandboxed}; upload "
            f"{archive.name} as the assignment's autograder (README, 'Teaching a class')")


# --- in the container ----------------------------------------------------------------------


def results(reports: list[NotebookReport], seconds: float, missing: str = "",
            note: str = "") -> dict:
    """Gradescope's results.json for these reports: a test per check cell; a hidden check's
    points and message only in its own test, published with the grades (``after_published``);
    the top-level output from the visible checks only. ``note``: a first line of every output."""
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
    if note:
        for test in tests:
            test["output"] = f"{note}\n{test['output']}"
    output = missing or format_table([visible_report(r) for r in reports])
    data = {"execution_time": round(seconds, 1), "output": f"{note}\n\n{output}" if note
            else output, "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}
    if not tests:
        data["score"] = 0
    return data


def visible_report(report: NotebookReport) -> NotebookReport:
    """``report`` as a learner may see it before the grades are published: each exercise's
    points, status and message from its visible checks only (an exercise scored as a whole,
    for an error or a tampered kernel, stays whole: it has no hidden result to give away)."""
    shown = copy.deepcopy(report)
    exercises = []
    for e in shown.exercises:
        if e.checks and e.status != "tampered" and not report.error:
            checks = [c for c in e.checks if not c.hidden]
            if not checks:
                continue  # an exercise of hidden checks only
            failing = next((c for c in checks if c.status != "pass"), None)
            e = dataclasses.replace(e, points=sum(c.points for c in checks),
                                    possible=sum(c.possible for c in checks), checks=checks,
                                    status=failing.status if failing else "pass",
                                    message=failing.message if failing else "")
        exercises.append(e)
    shown.exercises = exercises
    return shown


def _status(points: float, possible: float) -> str:
    return "passed" if possible and points >= possible else "failed"


def _preload() -> None:
    """Import every module the grader may use later, before any submission runs: a module
    planted afterwards (in a folder the submission could write to) is then never imported."""
    import course_utils.grading as package

    names = [info.name for info in pkgutil.walk_packages(package.__path__,
                                                          package.__name__ + ".")]
    for name in names + ["IPython.core.inputtransformer2", "ipykernel.compiler", "psutil",
                         "numpy", "site"]:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional part the grader then does not use either
            continue


def _write(out: Path, data: dict) -> None:
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, out / "results.json")


def run(autograder: Path) -> dict:
    """Grade ``autograder/submission`` against ``autograder/source/checks`` and its answer key
    and write ``autograder/results/results.json``; return what was written. Without a working
    bubblewrap, and a bundle that does not allow it, the results say why nothing was graded
    (the output begins with ``REFUSED``)."""
    _preload()
    from course_utils.grading.commands import classroom
    from course_utils.grading.notebook import key as answer_key
    from course_utils.grading.notebook import pipeline, restore
    from course_utils.grading.running import guard as course_guard
    from course_utils.grading.running import sandbox as bwrap

    t0 = time.monotonic()
    source = autograder / "source"
    checks = source / CHECKS
    submission = autograder / "submission"
    out = autograder / "results"
    out.mkdir(parents=True, exist_ok=True)
    settings = json.loads((source / SETTINGS).read_text(encoding="utf-8"))
    if settings.get("withheld"):
        return _refuse(out, t0, f"{REFUSED}: this container already graded a submission without "
                       "the sandbox and deleted the checks and answer key then. Gradescope "
                       "grades each submission in a new container: regrade it there.")
    sandbox = bwrap.bwrap_path() is not None
    note = ""
    if not sandbox:
        if not settings.get("allow_unsandboxed"):
            why = bwrap.why_not_available()
            text = (f"{REFUSED}: the autograder refuses to run submissions without its sandbox, "
                    f"and {why}. Instructor: use a Gradescope base image where bubblewrap can "
                    "start, or rebuild the bundle with course-build-exercises --gradescope DIR "
                    "--allow-unsandboxed (README, 'Teaching a class').")
            data = {"score": 0, "execution_time": round(time.monotonic() - t0, 1),
                    "output": text, "visibility": "visible", "stdout_visibility": "visible",
                    "tests": []}
            _write(out, data)
            return data
        note = UNSANDBOXED
    # Everything the grader reads of the course, read now, before any submission runs.
    seed = secrets.choice([int(s) for s in settings.get("seeds") or [DEFAULT_SEED]])
    restore._SOLUTIONS.clear()
    pipeline._KEYS.clear()
    for path in sorted(checks.glob("*.ipynb")):
        restore._SOLUTIONS[path.resolve()] = nbformat.read(path, as_version=4)
        stored = answer_key.cache_path(path, seed=seed)
        if stored.is_file():
            pipeline._KEYS[(path.resolve(), seed)] = answer_key.AnswerKey.from_json(
                stored.read_text(encoding="utf-8"))
    notebooks = sorted(p for p in submission.rglob("*.ipynb")
                       if ".ipynb_checkpoints" not in p.parts) if submission.is_dir() else []
    canonicals = {path: _canonical(path, checks) for path in notebooks}
    lessons = ", ".join(p.name for p in sorted(checks.glob("*.ipynb")))
    if not sandbox and not _withhold(source, checks, settings):
        return _refuse(out, t0, f"{REFUSED}: without the sandbox the grader must delete the "
                       f"checks and answer key from {source} before a submission runs, and "
                       "could not.")
    kernel_env = classroom.kernel_environment(None, "cpu")  # one learner: all cores
    reports = []
    for path in notebooks:
        guard = None if sandbox else course_guard.CourseGuard(
            [course_guard.GRADER, checks, answer_key.folder(checks)],
            watched=[course_guard.GRADER.parent])
        report = pipeline.grade_notebook(path, checks, learner="you", sandbox=sandbox,
                                      hidden=[submission, out], guard=guard, links=False,
                                      canonical=canonicals[path],
                                      seed=seed, kernel_env=kernel_env)
        report.path = str(path.relative_to(submission))
        reports.append(report)
    missing = "" if notebooks else f"No notebook was handed in: upload {lessons}."
    data = results(reports, time.monotonic() - t0, missing, note)
    data["extra_data"] = {"seed": seed}  # for the instructor: the inputs' seed
    _write(out, data)
    return data


def _canonical(path: Path, checks: Path) -> Path | None:
    """The checks notebook ``path`` is graded against, found while ``checks`` is on disk."""
    from course_utils.grading.notebook import pipeline

    try:
        nb = pipeline._read_notebook(path, False)
    except ValueError:
        nb = None
    try:
        return pipeline._find_canonical(path, nb, checks)
    except Exception:  # grade_notebook reports it
        return None


def _withhold(source: Path, checks: Path, settings: dict) -> bool:
    """Without the sandbox the submission's code runs as the grader's user and can read any
    file the grader can: once the grader holds the checks and their answer key in memory,
    delete them and the seeds (``bundle.json``) from the container, and keep processes of the
    same user out of the grader's memory (``/proc/<pid>/mem``: non-dumpable; root with
    ``CAP_SYS_PTRACE``, which Docker does not grant, is not kept out). False if they are still
    there."""
    from course_utils.grading.commands import grade
    from course_utils.grading.notebook import key as answer_key

    folders = [checks, answer_key.folder(checks)]
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    kept = {k: v for k, v in settings.items() if k != "seeds"}
    (source / SETTINGS).write_text(json.dumps({**kept, "withheld": True}, indent=1) + "\n")
    grade._harden()
    return not any(folder.exists() for folder in folders)


def _refuse(out: Path, t0: float, text: str) -> dict:
    data = {"score": 0, "execution_time": round(time.monotonic() - t0, 1), "output": text,
            "visibility": "visible", "stdout_visibility": "visible", "tests": []}
    _write(out, data)
    return data


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    autograder = Path(args[0] if args else os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    data = run(autograder)
    refused = data["output"].startswith(REFUSED)
    print(data["output"], file=sys.stderr if refused else sys.stdout)
    if refused:
        return 1
    print(f"score {sum(t['score'] for t in data['tests']):g} of "
          f"{sum(t['max_score'] for t in data['tests']):g}; inputs drawn from seed "
          f"{data.get('extra_data', {}).get('seed')} (stdout: the instructor's only)")
    return 0  # the score is in results.json; a failing learner is not a failing autograder


if __name__ == "__main__":
    sys.exit(main())
