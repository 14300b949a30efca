"""``course-build-exercises``: write ``exercises/`` from ``solutions/``, the single source.

Each ``solutions/NN_topic.ipynb`` becomes ``exercises/NN_topic.ipynb``: solution regions turn
into stubs, hidden check cells are left out, outputs and execution counts are cleared, execution
timing metadata is dropped, and everything else (cells, cell ids, metadata) is kept, so building
twice gives identical bytes.

    course-build-exercises                  # write exercises/ from solutions/
    course-build-exercises --check          # write nothing; fail if exercises/ is stale (for CI)
    course-build-exercises --release DIR    # what learners get in a graded class (see release())
    course-build-exercises --release DIR --lessons 01,02   # lessons 00-02 only (release.py)
    course-build-exercises --release DIR --lessons 03 --solutions 01,02   # and the package's
                                            # answers to 01's and 02's exercises (release.py)
    course-build-exercises --gradescope DIR --lessons 01   # a Gradescope bundle (gradescope.py)
    course-build-exercises --gradescope DIR --lessons 01 --allow-unsandboxed  # (see there)

Writing ``exercises/`` also brings the answer key up to date (``key.py``): for each solutions
notebook with probe-and-verdict checks, the expected values reported by running it in a clean
kernel, and its prediction literals, cached in ``<course>/.answer-key/`` (never in
``exercises/`` or a release), for the seed a notebook run in Jupyter uses (``probe.DEFAULT_SEED``:
this checks that the solutions pass their own checks). ``--no-key`` skips it; ``course-grade``
builds the key of the seed it draws for its run itself.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from course_utils.grading.format import (
    FormatError,
    exercise_id,
    is_hidden,
    is_solution,
    strip_solutions,
    validate,
)
from course_utils.grading.layout import (  # noqa: F401 (build.X as before)
    RELEASE_CHECKS,
    TIMING_KEYS,
    find_course_root,
    notebook_bytes,
)


def build_notebook(solution: NotebookNode, name: str = "notebook") -> NotebookNode:
    """The exercise version of a solutions notebook (a new notebook; the input is untouched).

    Raises FormatError, naming ``name`` and the cell, if the notebook breaks the format.

    >>> import nbformat.v4 as v4
    >>> cell = v4.new_code_cell("def f():\\n    ### BEGIN SOLUTION\\n    return 1\\n"
    ...                         "    ### END SOLUTION", metadata={"tags": ["solution"],
    ...                         "grading": {"id": "00.1"}})
    >>> check = v4.new_code_cell("assert f() == 1", metadata={"tags": ["check"],
    ...                          "grading": {"id": "00.1", "points": 1}})
    >>> print(build_notebook(v4.new_notebook(cells=[cell, check])).cells[0].source)
    def f():
        raise NotImplementedError("Exercise 00.1: your code here")
    """
    validate(solution, name)
    nb = copy.deepcopy(solution)
    nb.cells = [cell for cell in nb.cells if not is_hidden(cell)]
    for cell in nb.cells:
        for key in TIMING_KEYS:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            if is_solution(cell):
                cell.source = strip_solutions(cell.source, exercise_id(cell))
    return nb


def plan(solutions: Path, exercises: Path) -> tuple[dict[Path, bytes], list[str]]:
    """What ``exercises/`` should hold: {path: bytes}, plus the format errors that stop a file."""
    wanted: dict[Path, bytes] = {}
    errors: list[str] = []
    for source in sorted(solutions.glob("*.ipynb")):
        try:
            nb = nbformat.read(source, as_version=4)
            wanted[exercises / source.name] = notebook_bytes(build_notebook(nb, str(source)))
        except FormatError as e:
            errors.append(str(e))
        except Exception as e:  # unreadable JSON and the like: report it, keep building others
            errors.append(f"{source}: cannot read it as a notebook: {e}")
    return wanted, errors


def release(root: Path, target: Path, lessons: str | None = None,
            solutions: str | None = None) -> list[str]:
    """Write (or add lessons to) the learners' copy of the course in ``target``, a git
    repository: the lessons (``lessons``: ``"01,02"``; lesson 00 always; default every lesson),
    their ``exercises/`` built fresh from ``solutions/`` (no solutions, no hidden checks), and
    ``.course-checks/``, the same exercise notebooks, which ``course-grade`` uses in place of
    ``solutions/`` when a learner grades their own work there; the package and the set-up files.
    No ``solutions/``, no ``tests/``; the package's answers to exercises withheld except for
    the lessons in ``solutions`` (``"01,02"``). Returns problems (empty when done). See
    ``release.py``.
    """
    from course_utils.grading.commands.release import ReleaseError, write_release

    wanted, errors = plan(root / "solutions", target / "exercises")
    if errors:
        return errors
    try:
        print(write_release(root, target, wanted, lessons, solutions_arg=solutions))
    except ReleaseError as e:
        return [str(e)]
    return []


def _parser() -> argparse.ArgumentParser:
    """``course-build-exercises``' options."""
    parser = argparse.ArgumentParser(
        prog="course-build-exercises", description="Write exercises/ from solutions/."
    )
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if exercises/ is stale, naming each file")
    parser.add_argument("--solutions", metavar="FOLDER or 01,02",
                        help="the solutions folder (default: the course's); with --release, "
                        "the lessons whose solutions are released: the package's answers to "
                        "their exercises ship (the others are withheld; a later release keeps "
                        "what an earlier one released)")
    parser.add_argument("--exercises", type=Path, help="exercises folder (default: the course's)")
    parser.add_argument("--no-key", action="store_true",
                        help="do not bring the answer key (.answer-key/) up to date")
    parser.add_argument("--release", type=Path, metavar="DIR",
                        help="write the learners' copy of the course to DIR (a new folder): "
                        "lessons, exercises, the package; no solutions, no hidden checks; a "
                        "git repository (an earlier release there gets the new lessons added)")
    parser.add_argument("--lessons", metavar="01,02",
                        help="with --release or --gradescope: only these lessons (00 always "
                        "comes with a release); default: every lesson")
    parser.add_argument("--gradescope", type=Path, metavar="DIR",
                        help="write a Gradescope autograder bundle (setup.sh, run_autograder) "
                        "to DIR, a new folder, and DIR.zip")
    parser.add_argument("--allow-unsandboxed", action="store_true",
                        help="with --gradescope: where bubblewrap cannot start in Gradescope's "
                        "container, grade without the sandbox (every result says so) instead "
                        "of refusing")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.gradescope:
        from course_utils.grading.commands.gradescope import build_bundle
        try:
            print(build_bundle(find_course_root(), args.gradescope, args.lessons,
                               allow_unsandboxed=args.allow_unsandboxed))
        except (FileNotFoundError, ValueError, RuntimeError) as e:  # RuntimeError: the key
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    if args.release:
        try:
            root = find_course_root()
        except FileNotFoundError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        problems = release(root, args.release, args.lessons, args.solutions)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2 if problems else 0
    try:
        root = None if args.solutions and args.exercises else find_course_root()
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    solutions = Path(args.solutions) if args.solutions else root / "solutions"
    exercises = args.exercises or root / "exercises"
    if not solutions.is_dir():
        print(f"error: {solutions} is not a folder", file=sys.stderr)
        return 2

    wanted, errors = plan(solutions, exercises)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    existing = set(exercises.glob("*.ipynb")) if exercises.is_dir() else set()
    orphans = sorted(p for p in existing if not (solutions / p.name).exists())
    changed = {p: b for p, b in wanted.items() if not p.exists() or p.read_bytes() != b}

    if args.check:
        for path in sorted(changed):
            state = "stale" if path.exists() else "missing"
            print(f"{state}: {path} (run course-build-exercises)")
        for path in orphans:
            print(f"orphan: {path} has no {solutions / path.name}; delete it")
        if changed or orphans or errors:
            return 1
        print(f"{exercises} is up to date ({len(wanted)} notebooks)")
        return 0

    exercises.mkdir(parents=True, exist_ok=True)
    for path, data in sorted(changed.items()):
        path.write_bytes(data)
        print(f"wrote {path}")
    for path in orphans:
        print(f"warning: {path} has no {solutions / path.name}; delete it", file=sys.stderr)
    print(f"{len(wanted) - len(changed)} unchanged, {len(changed)} written")
    if not args.no_key and not errors:
        errors = build_keys(solutions)
    return 1 if errors else 0


def build_keys(solutions: Path) -> list[str]:
    """Bring the answer key of every solutions notebook with probe-and-verdict checks up to
    date (run in a clean kernel where it changed); the problems, printed too."""
    from course_utils.grading.notebook import key as answer_key

    problems = []
    for path in sorted(solutions.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if not answer_key.uses_key(nb) or answer_key.load(path, solutions, create=False):
            continue
        print(f"answer key of {path.name}: running the solutions ...", flush=True)
        try:
            key = answer_key.load(path, solutions)
        except answer_key.KeyError_ as e:
            problems.append(str(e))
            print(f"error: {e}", file=sys.stderr)
            continue
        print(f"wrote {answer_key.cache_path(path, solutions)} "
              f"({len(key.checks)} checks, {len(key.literals)} literals)")
    return problems


if __name__ == "__main__":
    sys.exit(main())
