"""Grading one notebook, as one pipeline (``grade_notebook``).

Read the submission, bounded (``_read_notebook``); find its canonical notebook
(``_find_canonical``) and take its checks (``verdict.specs``) and answer key (``_answer_key``);
put the checks back (``restore.restore_checks``); run it cell by cell in a fresh kernel
(``run.run_notebook``); score each exercise (``score``); judge what the answers' source reaches
(``static``); a report (``report.NotebookReport``). Never raises for anything a learner can do.
What to run it with (timeout, limits, sandbox, seed, the kernels' environment, a course guard)
is chosen by the command that calls it (``commands/grade.py``, ``commands/gradescope.py``).
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from course_utils.grading import verdict as verdicts
from course_utils.grading.format import (
    describe,
    exercise_id,
    exercises,
    grading,
    is_check,
    is_hidden,
    is_solution,
    points,
    solution_regions,
    validate,
)
from course_utils.grading.notebook import key as answer_key
from course_utils.grading.notebook import static
from course_utils.grading.notebook.report import CheckResult, ExerciseResult, NotebookReport
from course_utils.grading.notebook.restore import _solutions_notebook, restore_checks
from course_utils.grading.notebook.run import CellResult, code_cells, run_notebook, time_budget
from course_utils.grading.running.answers_view import lesson_of, package_view
from course_utils.grading.running.guard import CourseGuard
from course_utils.grading.running.kernel import Limits

#: Cells a learner may add (scratch work) on top of the solutions notebook's, for the time
#: budget: a notebook's whole run gets every cell's timeout for that many cells, no more.
EXTRA_CELLS = 20
#: Largest submission file read (outputs included), and most source code in its code cells.
MAX_FILE_BYTES = 64 * 2**20
MAX_SOURCE_CHARS = 4 * 2**20
#: Bounds on a submission's JSON, checked on its bytes before it is parsed: how deep lists and
#: objects nest, and how many values (containers and items) it holds. A notebook of this course
#: nests about 6 deep and holds a few thousand values; 40 MB of ``[],`` (13 million lists) took
#: 3 GB of the grader's memory to parse.
MAX_JSON_DEPTH = 64
MAX_JSON_VALUES = 1_000_000
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _package_for(notebook: str, key: object) -> Path | None:
    """The course package the learner's kernel imports: with an answer key (an instructor's
    grading), a copy with the answers to this lesson and later ones withheld (answers_view);
    without one (a learner grading their own copy) the package as it is."""
    lesson = lesson_of(notebook)
    return package_view(lesson) if key is not None and lesson is not None else None


def _against_stubs(solutions: Path) -> bool:
    """Whether ``solutions`` holds the exercises' stubs, not the course's solutions (a learner
    grading their own release, ``--solutions exercises``; a Gradescope bundle's checks)."""
    return solutions.name != "solutions"


def grade_notebook(path: str | Path, solutions: str | Path, *, timeout: float = 60.0,
                   learner: str | None = None, sandbox: bool = False,
                   limits: Limits | None = None, hidden: Sequence[Path] = (),
                   canonical: Path | None = None, guard: CourseGuard | None = None,
                   links: bool = True, seed: int | None = None,
                   kernel_env: Mapping[str, str] | None = None) -> NotebookReport:
    """Grade one notebook file against the matching notebook in ``solutions``.

    Never raises for anything a learner can do to the file: an unreadable file, a broken cell or
    a dead kernel becomes an ``error`` in the report. ``canonical`` forces the solutions notebook
    (otherwise found by file name, then by exercise ids). ``links=False``: refuse a symbolic
    link (a file found in a class folder). ``seed``: the grading run's seed, from which the
    checks draw their inputs, given to the kernel and to the answer key's clean kernel (default:
    ``session_seed()``, one drawn for this process; ``course-grade`` draws one per run).
    ``kernel_env``: its kernels' threads and device (``classroom.configure``; default none).
    """
    path, solutions = Path(path), Path(solutions)
    seed = session_seed() if seed is None else int(seed)
    learner = learner if learner is not None else _learner_name(path, solutions)
    report = NotebookReport(_printable(str(path)), _printable(learner), "", [], seed=seed)
    possible: dict[str, float] = {}
    try:
        try:
            nb, problem = _read_notebook(path, links), ""
        except ValueError as e:
            nb, problem = None, str(e)
        canonical_path = canonical or _find_canonical(path, nb, solutions)
        if canonical_path is None:
            raise _Ungradable(problem or f"no notebook in {solutions} has its name or exercises")
        report.notebook = canonical_path.name
        try:
            reference = _solutions_notebook(canonical_path)
            validate(reference, str(canonical_path), stubs=_against_stubs(solutions))
        except Exception as e:  # the course's own notebook is broken (FormatError, bad JSON)
            raise _Ungradable(f"the solutions notebook cannot be used: {e}") from None
        possible = exercises(reference)
        if nb is None:
            raise _Ungradable(problem)
        specs = verdicts.specs(reference.cells)
        key = _answer_key(canonical_path, solutions, reference, seed, kernel_env) if specs else None
        restored = restore_checks(nb, reference)
        code = code_cells(restored.notebook)
        labels = restored.labels()
        budget = time_budget(len(code_cells(reference)) + EXTRA_CELLS, timeout)
        limits = _cpu_limited(limits, budget)
        results, report.notes = run_notebook(
            restored.notebook, timeout, canonical_path.name, sandbox=sandbox, limits=limits,
            hidden=[solutions, answer_key.folder(solutions), *hidden], labels=labels,
            budget=budget, specs=specs, key=key, references=key is None, seed=seed,
            env=kernel_env, package=_package_for(canonical_path.name, key))
        if specs and key is None:
            report.notes.append("this copy of the course has no answer key: the expected "
                                "values were worked out in your own kernel, and predictions "
                                "are recorded for your instructor to grade")
        if code and all(r.outcome == "not run" for r in results):
            raise _Ungradable(results[0].message)  # e.g. the kernel did not start
    except _Ungradable as e:
        report.error = str(e)
    except Exception as e:  # a notebook odd enough to break the grader still gets a report
        report.error = f"the grader could not run this notebook: {type(e).__name__}: {e}"
    changed = guard.restore() if guard is not None else []
    if report.error:
        report.exercises = [ExerciseResult(ex, 0, p, "error", report.error)
                            for ex, p in possible.items()]
        return report
    report.exercises = score(code, results, possible, labels)
    static.apply(report.exercises,  # what the answers may not do, from their source, not the kernel
                 static.judge(code, reference.cells, stubs=_against_stubs(solutions)), labels)
    for e in report.exercises:
        e.notes = restored.notes.get(e.exercise, []) + e.notes
    report.notes += [n for ex, notes in restored.notes.items() if ex not in possible
                     for n in notes]
    if changed:
        what = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        for e in report.exercises:
            e.points, e.status = 0, "tampered"
            e.message = "the submission changed the course's files"
        report.notes.append(f"the submission changed the course's files ({what}); they were put "
                            "back, and every exercise scores 0")
    return report


#: Answer keys read (or built) before any submission ran: (canonical notebook, seed) -> key.
_KEYS: dict[tuple[Path, int], answer_key.AnswerKey] = {}
#: The seed of gradings in this process that were given none (``session_seed``).
_SESSION_SEED: list[int] = []


def session_seed() -> int:
    """The seed of this process's gradings that name none (``grade_notebook`` called from
    Python): drawn once (``key.draw_seed``), so their answer keys are built once."""
    if not _SESSION_SEED:
        _SESSION_SEED.append(answer_key.draw_seed())
    return _SESSION_SEED[0]


def _has_answers(nb: NotebookNode) -> bool:
    """True for a solutions notebook (its solution cells hold marked answers), False for the
    exercise notebooks a release grades against."""
    for cell in nb.cells:
        if is_solution(cell):
            try:
                if solution_regions(str(cell.source)):
                    return True
            except ValueError:
                continue
    return False


def _answer_key(path: Path, solutions: Path, nb: NotebookNode, seed: int,
                env: Mapping[str, str] | None = None) -> answer_key.AnswerKey | None:
    """The key of the canonical notebook at ``path`` for ``seed``: as read before grading
    began, else read or built now; None in a release (no answers to build it from)."""
    found = _KEYS.get((path.resolve(), seed))
    if found is not None:
        return found
    if not _has_answers(nb):
        return None
    try:
        key = answer_key.load(path, solutions, seed=seed, env=env)
    except answer_key.KeyError_ as e:
        raise _Ungradable(f"the answer key cannot be built: {e}") from None
    if key is not None:
        _KEYS[(path.resolve(), seed)] = key
    return key


def _printable(text: str) -> str:
    """A file name as text every report can hold: bytes that are not UTF-8 (Python keeps them
    as lone surrogates, which no UTF-8 file or terminal takes) written as ``\\udcff``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class _Ungradable(Exception):
    """Why a notebook cannot be run at all; every exercise then gets this as its error."""


_STATUS = {"failed": "fail", "timeout": "timeout", "tampered": "tampered",
           "recorded": "recorded"}


def score(code: list[NotebookNode], results: list[CellResult], possible: dict[str, float],
          labels: list[str] | None = None) -> list[ExerciseResult]:
    """Map cell results to exercises; each check cell scores its own points.

    A check that did not pass is ``fail`` (AssertionError), ``timeout``, ``tampered``, or
    ``error``; and if an earlier cell failed that it depends on (its exercise's own solution
    cell, or a cell outside every exercise such as a setup cell), it is ``error`` (``timeout`` if
    that cell timed out) and the message names that cell. The exercise scores the sum of its
    checks' points (0 if any check was ``tampered``); its status and one-line message are those
    of its first check that did not pass. ``labels`` name the code cells in messages.
    """
    labels = labels or [f"code cell {i + 1}" for i in range(len(code))]
    graded = []
    for ex, total in possible.items():
        cells = [i for i, c in enumerate(code) if is_check(c) and exercise_id(c) == ex]
        if not cells:  # cannot happen after restore_checks; kept so a bug shows as an error
            graded.append(ExerciseResult(ex, 0, total, "error", "its check cell did not run"))
            continue
        checks, summaries = [], []
        for i in cells:
            check, summary = _score_check(code, results, ex, i, labels)
            checks.append(check)
            summaries.append(summary)
        failing = [k for k, c in enumerate(checks) if c.status != "pass"]
        result = ExerciseResult(ex, sum(c.points for c in checks), total, "pass", checks=checks)
        tampered = [checks[k] for k in failing if checks[k].status == "tampered"]
        if tampered:
            result.points, result.status = 0, "tampered"
            result.message = tampered[0].message
            result.notes.append(tampered[0].message)
        elif failing:
            result.status, result.message = checks[failing[0]].status, summaries[failing[0]]
        _note_looping_solution(code, results, ex, result, labels)
        graded.append(result)
    return graded


def _note_looping_solution(code: list[NotebookNode], results: list[CellResult], ex: str,
                           result: ExerciseResult, labels: list[str]) -> None:
    """An exercise whose own solution cell ran past its time limit is ``timeout`` (issue 37:
    ``while True: pass`` after working code scored full marks with no note). Its checks keep
    the points they earned on what the cell had defined before it was interrupted."""
    looped = [i for i, c in enumerate(code) if is_solution(c) and exercise_id(c) == ex
              and i < len(results) and results[i].outcome == "timeout"]
    if not looped or result.status in ("tampered", "timeout"):  # said already
        return
    note = f"{ex}: your solution, {labels[looped[0]]}, {results[looped[0]].message}"
    result.notes.append(note)
    if result.status == "pass":
        result.status, result.message = "timeout", note


def _score_check(code: list[NotebookNode], results: list[CellResult], ex: str, i: int,
                 labels: list[str]) -> tuple[CheckResult, str]:
    """One check cell's result, and the one-line summary for the exercise's row."""
    worth, r = points(code[i]) or 0.0, results[i]
    hidden = is_hidden(code[i])
    if r.outcome == "passed":
        return CheckResult(i + 1, worth, worth, "pass", hidden=hidden, label=labels[i]), ""
    status = _STATUS.get(r.outcome, "error")
    message, summary, where = r.message, r.summary, r.where
    if status == "timeout":
        message = summary = f"the check {r.message}"
    if status not in ("timeout", "tampered", "recorded"):
        cause = _cause(code, results, ex, i)
        if cause is not None:
            blamed = results[cause]
            status = "timeout" if blamed.outcome == "timeout" else "error"
            if is_solution(code[cause]):
                suffix = f" (in your solution, {labels[cause]})"
                message, summary = _first_line_plus(blamed.message, suffix), \
                    blamed.summary + suffix
                where = blamed.where
            else:
                suffix = f" (after {labels[cause]} (`{_first_code_line(code[cause])}`) " \
                    f"failed: {blamed.summary})"
                message, summary = _first_line_plus(message, suffix), summary + suffix
        if hidden and (cause is None or not is_solution(code[cause])):
            message = summary = hidden_feedback(code[i], ex, status, message)
            where = "" if where.startswith(labels[i]) else where
    return CheckResult(i + 1, 0, worth, status, message, where, hidden, labels[i]), summary


_ERROR_NAME = re.compile(r"^([A-Za-z_][\w.]*): ")


def hidden_feedback(cell: NotebookNode, ex: str, status: str, message: str) -> str:
    """What a learner reads of a hidden check that did not pass: the kind of case it tries and
    what to look at (the check's ``grading.about``, written for them), and whether the answer
    gave a wrong result or raised (a built-in exception's name only). Never the verdict's
    message nor the kernel's: either may hold the hidden inputs or the expected values (issue
    36: lookup tables grown from such messages scored full marks)."""
    about = str(grading(cell).get("about") or "").strip().rstrip(".") or (
        f"inputs the visible checks of {ex} do not try: the exercise's text says what kind; "
        "make sure your answer does not depend on the visible checks' inputs")
    found = _ERROR_NAME.match(message)
    if status == "fail":
        what = "gave a wrong result"
    elif found and found.group(1) != "AssertionError":
        what = f"raised {_builtin_error(found.group(1))}"
    else:
        what = "did not finish"
    return (f"the hidden check of {ex} {what}. It tries {about}. A hidden check never shows "
            "its inputs or expected values: try cases of that kind yourself")


def _builtin_error(name: str) -> str:
    """An exception's name as a hidden check's feedback may show it: a built-in exception's
    (``ValueError``), else none. A class an answer makes itself may carry the hidden input in its
    name (``type(f"Sizes_{n}", (ValueError,), {})``: the attack review of issue 36)."""
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, BaseException):
        return name
    return "an exception"


def _first_code_line(cell: NotebookNode) -> str:
    text = describe(cell, 0)  # 'cell 1 (`first line`)'
    return text[text.index("`") + 1:text.rindex("`")]


def _first_line_plus(message: str, suffix: str) -> str:
    first, _, rest = message.partition("\n")
    return first + suffix + ("\n" + rest if rest else "")


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


def _read_notebook(path: Path, links: bool = True) -> NotebookNode:
    """Read a learner's file; ValueError saying what is wrong if it is not a notebook.

    ``links=False`` (a file found in a class folder) refuses a symbolic link: in a folder of
    submissions it could point at another learner's notebook, or at a file of the grader's.
    """
    try:
        if not links and path.is_symlink():
            raise ValueError("the submission is a symbolic link, not a file; it was not read")
        if path.exists() and not path.is_file():  # a FIFO would block the grader for ever
            raise ValueError("the submission is not a regular file; it was not read")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ValueError(f"{path.name} is too big to grade ({size / 2**20:.0f} MB; at most "
                             f"{MAX_FILE_BYTES / 2**20:.0f} MB): clear its outputs and submit "
                             "it again")
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)  # it may have grown since
        if len(data) > MAX_FILE_BYTES:
            raise ValueError(f"{path.name} is too big to grade (over "
                             f"{MAX_FILE_BYTES / 2**20:.0f} MB)")
    except OSError as e:
        raise ValueError(f"cannot read the file: {e.strerror or e}") from None
    if not data.strip():
        raise ValueError("the file is empty, not a notebook")
    _check_json_bounds(data, path.name)
    try:
        text = data.decode("utf-8")
        json.loads(text)
    except UnicodeDecodeError:
        raise ValueError("not a notebook: the file is not text") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"not a notebook: the file is not JSON ({e})") from None
    except RecursionError:  # [[[[...]]]] 200,000 deep: one file must not stop the class
        raise ValueError("not a notebook: its JSON is nested too deeply") from None
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"not a notebook: {first[:120]}") from None
    cells = nb.get("cells")
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise ValueError("not a notebook: it has no list of cells")
    code = sum(len(str(c.get("source", ""))) for c in cells if c.get("cell_type") == "code")
    if code > MAX_SOURCE_CHARS:
        raise ValueError(f"the notebook holds too much code to grade ({code / 2**20:.1f} MB of "
                         f"source; at most {MAX_SOURCE_CHARS / 2**20:.0f} MB)")
    return nb


def _check_json_bounds(data: bytes, name: str) -> None:
    """ValueError naming the file if its JSON nests deeper than ``MAX_JSON_DEPTH`` or holds
    more than ``MAX_JSON_VALUES`` values; from the bytes, before anything is parsed, in time and
    memory proportional to the file. Strings are left out first (brackets in code do not
    count); malformed JSON passes, for the parser to describe."""
    bare = _JSON_STRING.sub(b'""', data)
    values = bare.count(b",") + bare.count(b"[") + bare.count(b"{")
    if values > MAX_JSON_VALUES:
        raise ValueError(f"{name} is not a notebook this grader reads: its JSON holds over "
                         f"{values:,} values (at most {MAX_JSON_VALUES:,}); clear its outputs "
                         "and submit it again")
    brackets = bare.translate(None, delete=_NOT_BRACKETS)
    for _ in range(MAX_JSON_DEPTH + 1):  # each round removes the innermost level
        if not brackets:
            return
        fewer = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if len(fewer) == len(brackets):
            return  # unbalanced: not JSON, which the parser reports
        brackets = fewer
    raise ValueError(f"not a notebook: its JSON is nested too deeply ({name}: more than "
                     f"{MAX_JSON_DEPTH} levels)")


def _cpu_limited(limits: Limits | None, budget: float) -> Limits:
    """``limits`` with a CPU-time limit (``RLIMIT_CPU``, per process, all its threads) of the
    notebook's time budget, unless one is set: an honest notebook uses a small part of it."""
    limits = limits or Limits()
    if limits.cpu_seconds is None:
        limits = dataclasses.replace(limits, cpu_seconds=int(budget))
    return limits


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
            theirs = {exercise_id(c) for c in _solutions_notebook(candidate).cells}
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
