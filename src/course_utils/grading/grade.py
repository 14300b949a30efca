"""``course-grade``: grade exercise notebooks through nbval, safely.

    course-grade exercises/00_setup.ipynb            # a learner grades their own work
    course-grade subs/ --csv grades.csv              # an instructor grades a folder

For each notebook: find its solutions notebook (by file name, else by its exercise ids), put the
canonical check cells back (``restore.py``), run a temporary copy through nbval with a per-cell
timeout in a fresh kernel (``run.py``), and score each exercise: its points when all its check
cells pass, else nothing, with the first line of the failure. The learner's file is only read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from course_utils.grading.build import find_course_root
from course_utils.grading.format import (
    describe,
    exercise_id,
    exercises,
    is_check,
    is_solution,
    validate,
)
from course_utils.grading.report import (
    ExerciseResult,
    NotebookReport,
    format_table,
    to_json,
    write_csv,
)
from course_utils.grading.restore import restore_checks
from course_utils.grading.run import CellResult, run_notebook


def grade_notebook(path: str | Path, solutions: str | Path, *, timeout: float = 60.0,
                   learner: str | None = None) -> NotebookReport:
    """Grade one notebook file against the matching notebook in ``solutions``.

    Never raises for anything a learner can do to the file: an unreadable file, a broken cell or
    a dead kernel becomes an ``error`` in the report.
    """
    path, solutions = Path(path), Path(solutions)
    learner = learner if learner is not None else _learner_name(path, solutions)
    report = NotebookReport(str(path), learner, "", [])
    possible: dict[str, float] = {}
    try:
        try:
            nb, problem = _read_notebook(path), ""
        except ValueError as e:
            nb, problem = None, str(e)
        canonical_path = _find_canonical(path, nb, solutions)
        if canonical_path is None:
            raise _Ungradable(problem or f"no notebook in {solutions} has its name or exercises")
        report.notebook = canonical_path.name
        try:
            canonical = nbformat.read(canonical_path, as_version=4)
            validate(canonical, str(canonical_path))
        except Exception as e:  # the course's own notebook is broken (FormatError, bad JSON)
            raise _Ungradable(f"the solutions notebook cannot be used: {e}") from None
        possible = exercises(canonical)
        if nb is None:
            raise _Ungradable(problem)
        restored = restore_checks(nb, canonical)
        code = [c for c in restored.notebook.cells if c.get("cell_type") == "code"]
        results, report.notes = run_notebook(restored.notebook, timeout, canonical_path.name)
        if code and all(r.outcome == "not run" for r in results):
            raise _Ungradable(results[0].message)  # e.g. the kernel did not start
    except _Ungradable as e:
        report.error = str(e)
    except Exception as e:  # a notebook odd enough to break the grader still gets a report
        report.error = f"the grader could not run this notebook: {type(e).__name__}: {e}"
    if report.error:
        report.exercises = [ExerciseResult(ex, 0, p, "error", report.error)
                            for ex, p in possible.items()]
        return report
    report.exercises = score(code, results, possible)
    for e in report.exercises:
        e.notes = restored.notes.get(e.exercise, [])
    report.notes += [n for ex, notes in restored.notes.items() if ex not in possible
                     for n in notes]
    return report


class _Ungradable(Exception):
    """Why a notebook cannot be run at all; every exercise then gets this as its error."""


def score(code: list[NotebookNode], results: list[CellResult], possible: dict[str, float]
          ) -> list[ExerciseResult]:
    """Map cell results to exercises.

    An exercise earns its points only when all its check cells pass. Otherwise its status comes
    from the first check that did not pass: ``fail`` for an AssertionError, ``timeout`` if it
    timed out, else ``error``; and if an earlier cell failed that this exercise depends on (its
    own solution cell, or a cell outside every exercise such as a setup cell), the status is
    ``error`` (``timeout`` if that cell timed out) and the message names that cell.
    """
    graded = []
    for ex, total in possible.items():
        checks = [i for i, c in enumerate(code) if is_check(c) and exercise_id(c) == ex]
        failing = [i for i in checks if results[i].outcome != "passed"]
        if checks and not failing:
            graded.append(ExerciseResult(ex, total, total, "pass"))
            continue
        if not checks:  # cannot happen after restore_checks; kept so a bug shows as an error
            graded.append(ExerciseResult(ex, 0, total, "error", "its check cell did not run"))
            continue
        first = results[failing[0]]
        status = {"failed": "fail", "timeout": "timeout"}.get(first.outcome, "error")
        message = first.message if first.outcome != "timeout" else f"the check {first.message}"
        cause = _cause(code, results, ex, failing[0]) if status != "timeout" else None
        if cause is not None:
            cell, result = code[cause], results[cause]
            status = "timeout" if result.outcome == "timeout" else "error"
            if is_solution(cell):
                message = f"{result.message} (in your solution, code cell {cause + 1})"
            else:
                message = f"{message} (after code {describe(cell, cause)} failed: " \
                    f"{result.message})"
        graded.append(ExerciseResult(ex, 0, total, status, message))
    return graded


def _cause(code: list[NotebookNode], results: list[CellResult], ex: str, before: int
           ) -> int | None:
    """The earlier failed cell to blame: the first failed cell before ``before`` that is this
    exercise's solution cell or belongs to no exercise (a setup cell). The first, because later
    failures are usually its consequences (a NameError after a failed import)."""
    for i, cell in enumerate(code[:before]):
        blamable = not is_check(cell) and (not is_solution(cell) or exercise_id(cell) == ex)
        if blamable and results[i].outcome not in ("passed", "skipped"):
            return i
    return None


def _read_notebook(path: Path) -> NotebookNode:
    """Read a learner's file; ValueError saying what is wrong if it is not a notebook."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read the file: {e.strerror or e}") from None
    if not data.strip():
        raise ValueError("the file is empty, not a notebook")
    try:
        text = data.decode("utf-8")
        json.loads(text)
    except UnicodeDecodeError:
        raise ValueError("not a notebook: the file is not text") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"not a notebook: the file is not JSON ({e})") from None
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"not a notebook: {first[:120]}") from None
    cells = nb.get("cells")
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise ValueError("not a notebook: it has no list of cells")
    return nb


def _find_canonical(path: Path, nb: NotebookNode | None, solutions: Path) -> Path | None:
    """The solutions notebook with the same file name, else the one sharing most exercise ids."""
    if (solutions / path.name).is_file():
        return solutions / path.name
    if nb is None:
        return None
    mine = {exercise_id(c) for c in nb.cells} - {None}
    overlap = {}
    for candidate in sorted(solutions.glob("*.ipynb")):
        try:
            theirs = {exercise_id(c) for c in nbformat.read(candidate, as_version=4).cells}
        except Exception:
            continue
        overlap[candidate] = len(mine & theirs)
    ranked = sorted(overlap.items(), key=lambda kv: -kv[1])
    if not ranked or ranked[0][1] == 0 or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
        return None
    return ranked[0][0]


def _learner_name(path: Path, solutions: Path, folder: Path | None = None) -> str:
    """``subs/ada/02_x.ipynb`` -> ada; ``subs/ada.ipynb`` -> ada; ``exercises/00_setup.ipynb``
    -> exercises (a file named like a solutions notebook belongs to the folder it is in)."""
    if folder is not None and len(path.relative_to(folder).parts) > 1:
        return path.relative_to(folder).parts[0]
    if (solutions / path.name).exists():
        return path.resolve().parent.name
    return path.stem


def collect(paths: Sequence[str | Path], solutions: Path) -> list[tuple[Path, str]]:
    """(notebook, learner) for each file given, and each ``*.ipynb`` under each folder given."""
    found = []
    for given in map(Path, paths):
        if given.is_dir():
            for nb in sorted(given.rglob("*.ipynb")):
                if ".ipynb_checkpoints" not in nb.parts:
                    found.append((nb, _learner_name(nb, solutions, given)))
        else:
            found.append((given, _learner_name(given, solutions)))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; exit status 0 only when every exercise passed."""
    parser = argparse.ArgumentParser(
        prog="course-grade", description="Grade exercise notebooks through nbval, safely.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="notebooks or folders")
    parser.add_argument("--solutions", type=Path, help="solutions folder (default: the course's)")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="per-cell timeout (default: 60)")
    parser.add_argument("--csv", type=Path, metavar="OUT.csv",
                        help="also write one row per learner and exercise to this file")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at once")
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    try:
        solutions = args.solutions or find_course_root() / "solutions"
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not solutions.is_dir():
        print(f"error: {solutions} is not a folder of solutions notebooks", file=sys.stderr)
        return 2
    todo = collect(args.paths, solutions)
    if not todo:
        print(f"error: no notebooks in {' '.join(args.paths)}", file=sys.stderr)
        return 2

    def grade(item: tuple[Path, str]) -> NotebookReport:
        print(f"grading {item[0]} ...", file=sys.stderr, flush=True)
        return grade_notebook(item[0], solutions, timeout=args.timeout, learner=item[1])

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        reports = list(pool.map(grade, todo))
    print(to_json(reports) if args.json else format_table(reports))
    if args.csv:
        write_csv(reports, args.csv)
        print(f"wrote {args.csv}", file=sys.stderr)
    return 0 if all(r.passed for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
