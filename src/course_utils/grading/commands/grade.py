"""``course-grade``: grade exercise notebooks, with partial credit, in isolated kernels.

    course-grade exercises/00_setup.ipynb                      # a learner grades their own work
    course-grade subs/ --csv grades.csv --feedback feedback/   # an instructor grades a class

For each notebook: find its solutions notebook (by file name, else by its exercise ids), put the
canonical check cells back, hidden checks included (``restore.py``), run a copy cell by cell in a
fresh kernel below a supervisor, sandboxed with bubblewrap where it is installed (``run.py``,
``kernel.py``, ``sandbox.py``), and score each check cell on its own. The learner's file is only
read. How it works, and what is guaranteed with and without the sandbox: CONTRIBUTING.md.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import hashlib
import json
import re
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from course_utils.editions import localize_table, report_language
from course_utils.grading import static
from course_utils.grading import verdict as verdicts
from course_utils.grading.commands import classroom
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
from course_utils.grading.layout import RELEASE_CHECKS, find_course_root
from course_utils.grading.notebook import key as answer_key
from course_utils.grading.notebook.report import (
    CheckResult,
    ExerciseResult,
    NotebookReport,
    escape,
    feedback_html,
    feedback_name,
    format_table,
    to_json,
    write_csv,
)
from course_utils.grading.notebook.restore import _SOLUTIONS, _solutions_notebook, restore_checks
from course_utils.grading.notebook.run import CellResult, code_cells, run_notebook, time_budget
from course_utils.grading.running import sandbox as bwrap
from course_utils.grading.running.kernel import (
    GiB,
    Limits,
    descendants,
    fair_share,
    kill_descendants,
)

GRADER = Path(__file__).resolve().parents[1]  # course_utils/grading: this code and checks.py
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


class CourseGuard:
    """Without the sandbox, the kernel could rewrite the grader or the check sources on disk
    and change every later grade, or plant code that every later Python runs. The guard keeps
    the bytes of every file under ``folders`` (the grading package, the solutions) and of the
    start-up hooks of the interpreter's site folders (``*.pth``, ``sitecustomize.py``,
    ``usercustomize.py``); after each submission it puts back whatever changed, deletes what
    was added, and says what it was. Files under ``watched`` (the rest of the course's package)
    are compared too, and a change is reported, but not undone (someone may be editing the
    course). Compiled files (``__pycache__``) under both that are new or changed are deleted
    (Python would load a planted one instead of the source). The rest of the virtualenv is not
    watched: grading without the sandbox is not isolated, and the grader says so."""

    def __init__(self, folders: Sequence[Path], watched: Sequence[Path] = ()) -> None:
        self.folders = [f for f in folders if f.is_dir()]
        self.watched = [f for f in watched if f.is_dir()]
        self.sites = _site_folders()
        self.files = self._read(self.folders)
        self.seen = self._read(self.watched, sites=False)
        self.caches = self._caches()
        self.lock = threading.Lock()

    def _read(self, folders: Sequence[Path], sites: bool = True) -> dict[Path, bytes]:
        files = {}
        paths = [p for folder in folders for p in folder.rglob("*")
                 if "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts]
        paths += [p for site in self.sites for p in _startup_hooks(site)] if sites else []
        for path in paths:
            if path.is_file():
                try:
                    files[path] = path.read_bytes()
                except OSError:
                    continue
        return files

    def _caches(self) -> dict[Path, tuple[int, int]]:
        found = {}
        for folder in self.folders + self.watched:
            for path in folder.rglob("__pycache__/*"):
                with contextlib.suppress(OSError):
                    st = path.stat()
                    found[path] = (st.st_mtime_ns, st.st_size)
        return found

    def restore(self) -> list[str]:
        """Put changed, deleted and new files back as they were; the paths that had changed."""
        with self.lock:
            now = self._read(self.folders)
            changed = sorted({p for p in self.files if now.get(p) != self.files[p]}
                             | (set(now) - set(self.files)))
            seen = {p: data for p, data in self._read(self.watched, sites=False).items()
                    if p not in now}
            edited = sorted({p for p in self.seen if p not in now and seen.get(p) !=
                             self.seen[p]} | (set(seen) - set(self.seen)))
            self.seen = {**{p: d for p, d in self.seen.items() if p in now}, **seen}  # once
            for path in changed:
                try:
                    if path in self.files:
                        path.parent.mkdir(parents=True, exist_ok=True)
                        if path.is_symlink():
                            path.unlink()
                        path.write_bytes(self.files[path])
                    else:
                        path.unlink()
                except OSError:
                    continue
            for path, stamp in self._caches().items():
                if self.caches.get(path) != stamp:
                    with contextlib.suppress(OSError):
                        path.unlink()  # a compiled file we did not see made: Python recompiles
            return [str(p) for p in changed] + [f"{p} (not put back)" for p in edited]


def _site_folders() -> list[Path]:
    """The folders whose ``*.pth`` and ``sitecustomize`` every Python of this venv runs: the
    site folders, and every folder on ``sys.path`` (a ``sitecustomize.py`` planted in the
    course's ``src/``, which an editable install puts there, runs in every later Python)."""
    import site

    folders = [*site.getsitepackages(), site.getusersitepackages(), *filter(None, sys.path)]
    return [Path(f) for f in dict.fromkeys(folders) if Path(f).is_dir()]


def _startup_hooks(site_folder: Path) -> list[Path]:
    found = list(site_folder.glob("*.pth"))
    return found + [site_folder / n for n in ("sitecustomize.py", "usercustomize.py")
                    if (site_folder / n).exists()]


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
            validate(reference, str(canonical_path), stubs=solutions.name != "solutions")
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
        limits = _cpu_limited(limits, time_budget(len(code_cells(reference)) + EXTRA_CELLS,
                                                  timeout))
        results, report.notes = run_notebook(
            restored.notebook, timeout, canonical_path.name, sandbox=sandbox, limits=limits,
            hidden=[solutions, answer_key.folder(solutions), *hidden], labels=labels,
            budget=time_budget(len(code_cells(reference)) + EXTRA_CELLS, timeout),
            specs=specs, key=key, references=key is None, seed=seed, env=kernel_env)
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
    # What the answers may not do, judged from their source here (never from the kernel).
    static.apply(report.exercises, static.judge(code, reference.cells), labels)
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
    gave a wrong result or raised (the exception's name only). Never the verdict's message nor
    the kernel's: either may hold the hidden inputs or the expected values (issue 36: lookup
    tables grown from such messages scored full marks)."""
    about = str(grading(cell).get("about") or "").strip().rstrip(".") or (
        f"inputs the visible checks of {ex} do not try: the exercise's text says what kind; "
        "make sure your answer does not depend on the visible checks' inputs")
    found = _ERROR_NAME.match(message)
    if status == "fail":
        what = "gave a wrong result"
    elif found and found.group(1) != "AssertionError":
        what = f"raised {found.group(1)}"
    else:
        what = "did not finish"
    return (f"the hidden check of {ex} {what}. It tries {about}. A hidden check never shows "
            "its inputs or expected values: try cases of that kind yourself")


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


def collect(paths: Sequence[str | Path], solutions: Path) -> list[tuple[Path, str, bool]]:
    """(notebook, learner, given) for each file given (``given``: named on the command line,
    so a symbolic link is followed), and each ``*.ipynb`` under each folder given (links there
    are refused when graded; folders that are links are not entered)."""
    found = []
    for given in map(Path, paths):
        if given.is_dir():
            for nb in sorted(given.rglob("*.ipynb")):
                if ".ipynb_checkpoints" not in nb.parts:
                    found.append((nb, _learner_name(nb, solutions, given), False))
        else:
            found.append((given, _learner_name(given, solutions), True))
    return found


def _shared_canonical(todo: list[tuple[Path, str, bool]], solutions: Path) -> Path | None:
    """When every readable submission in a batch is graded against one notebook, that one: an
    empty or broken file in the same batch is then graded against it too (a row per exercise)."""
    found = set()
    for path, _, given in todo:
        try:
            nb = _read_notebook(path, given)
        except ValueError:
            nb = None
        try:
            canonical = _find_canonical(path, nb, solutions)
        except Exception:  # whatever a submission holds, the class is graded
            canonical = None
        if canonical is not None:
            found.add(canonical)
    return found.pop() if len(found) == 1 else None


def _canonicals(todo: list[tuple[Path, str, bool]], solutions: Path, forced: Path | None
                ) -> list[Path]:
    """The canonical notebooks the submissions in ``todo`` will be graded against."""
    if forced is not None:
        return [forced]
    found: dict[Path, None] = {}
    for path, _, given in todo:
        try:
            nb = _read_notebook(path, given)
        except ValueError:
            nb = None
        with contextlib.suppress(Exception):
            canonical = _find_canonical(path, nb, solutions)
            if canonical is not None:
                found[canonical] = None
    return list(found)


def _others(todo: list[tuple[Path, str, bool]], solutions: Path) -> str:
    """Why grading ``todo`` without the sandbox needs ``--trust-submissions`` ("" if it does
    not): more than one learner, or a notebook outside the course that holds ``solutions`` (a
    learner's own checkout, whose exercises, solutions and copies they may grade as they like)."""
    learners = sorted({learner for _, learner, _ in todo})
    if len(learners) > 1:
        return f"these are the notebooks of {len(learners)} learners"
    course = solutions.resolve().parent
    if not (course / "pyproject.toml").is_file():
        course = bwrap.course_root() or course
    for path, _, _ in todo:
        with contextlib.suppress(OSError, RuntimeError):
            if course not in path.resolve().parents:
                return f"{path} is not in this course's folder ({course})"
    return ""


def _harden() -> None:
    """Keep processes of the same user out of ``/proc/<grader>/fd`` (no fake lines written to
    the grader's output through ``/proc/<pid>/fd/1``; root is not kept out, the sandbox is), and
    make the grader a child subreaper: a process that outlives its kernel's supervisor is
    re-parented here, and ``main`` kills it at the end."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER = 36


def canonical_folder(explicit: Path | None, start: Path | None = None,
                     paths: Sequence[str | Path] = ()) -> Path:
    """``--solutions``; else, in the nearest course folder above ``start`` (default: cwd), or
    above one of the notebooks ``paths`` (a learner in their home on a Hub grading
    ``graph-course/exercises/01_x.ipynb``), its ``solutions/`` or, in a release, its
    ``.course-checks/``; else the package's checkout. FileNotFoundError saying what to run."""
    if explicit is not None:
        return explicit
    here = (start or Path.cwd()).resolve()
    starts = [here] + [Path(p).resolve().parent for p in paths]
    for first in dict.fromkeys(starts):
        for folder in [first, *first.parents]:
            if (folder / "pyproject.toml").is_file():
                for name in ("solutions", RELEASE_CHECKS):
                    if (folder / name).is_dir():
                        return folder / name
    try:
        return find_course_root(start) / "solutions"
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no copy of the course holds these notebooks or {here}: the checks come from the "
            f"course's folder (its {RELEASE_CHECKS}/ or solutions/). On a class server, grade "
            "in the folder the class's link pulled the course into, e.g. cd ~/graph-course && "
            "course-grade exercises/01_computation_graphs.ipynb; or name the checks with "
            f"--solutions ~/graph-course/{RELEASE_CHECKS}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; exit status 0 only when every exercise passed."""
    parser = argparse.ArgumentParser(
        prog="course-grade", description="Grade exercise notebooks: partial credit, full "
        "feedback, each in an isolated kernel.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="notebooks or folders")
    parser.add_argument("--solutions", type=Path, help="solutions folder (default: the course's)")
    parser.add_argument("--notebook", metavar="NN_topic",
                        help="grade every file against this solutions notebook")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="per-cell timeout (default: 60)")
    parser.add_argument("--csv", type=Path, metavar="OUT.csv",
                        help="also write one row per learner and exercise to this file")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--lang", choices=["auto", "en", "zh"], default="auto",
                        help="language of the report's headings and summary lines "
                        "(default: zh when every notebook graded is one of the "
                        "Chinese edition's, e.g. zh/exercises/; check messages stay "
                        "English)")
    parser.add_argument("--feedback", type=Path, metavar="DIR",
                        help="write one HTML report per submission into DIR")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at once")
    parser.add_argument("--memory", type=float, default=6.0, metavar="GiB",
                        help="memory limit per submission (default: 6)")
    parser.add_argument("--disk", type=float, default=4.0, metavar="GiB",
                        help="limit on the files a submission writes in its own folders, "
                        "its /tmp when sandboxed (default: 4)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--sandbox", dest="sandbox", action="store_true", default=None,
                       help="run each kernel under bubblewrap (the default where bwrap works)")
    group.add_argument("--no-sandbox", dest="sandbox", action="store_false",
                       help="run kernels as plain processes (still in their own session, with "
                       "limits, and cleaned up)")
    parser.add_argument("--trust-submissions", action="store_true",
                        help="without the sandbox, grade several learners' notebooks, or any "
                        "outside this course, anyway (their code runs with your rights)")
    classroom.add_arguments(parser)  # --roster, --canvas, --resume, --threads, --device
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if args.seed is not None and not 0 <= args.seed < 2**63:
        parser.error(f"--seed must be a whole number from 0 to 2**63 - 1, got {args.seed}")
    try:
        solutions = canonical_folder(args.solutions, paths=args.paths)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not solutions.is_dir():
        print(f"error: {solutions} is not a folder of solutions notebooks", file=sys.stderr)
        return 2
    canonical = None
    if args.notebook:
        canonical = solutions / f"{Path(args.notebook).stem}.ipynb"
        if not canonical.is_file():
            print(f"error: no {canonical}", file=sys.stderr)
            return 2
    _SOLUTIONS.clear()
    for notebook in sorted(solutions.glob("*.ipynb")):  # before any submission runs
        with contextlib.suppress(Exception):  # a broken one is reported where it is used
            _SOLUTIONS[notebook.resolve()] = nbformat.read(notebook, as_version=4)
    todo = collect(args.paths, solutions)
    if not todo:
        print(f"error: no notebooks in {' '.join(args.paths)}", file=sys.stderr)
        return 2
    try:  # Canvas' file names, duplicates, the roster, --resume (classroom.py)
        class_run = classroom.start(args, todo, solutions)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    todo = class_run.todo
    if canonical is None and len(todo) > 1:
        canonical_for_broken = _shared_canonical(todo, solutions)
    else:
        canonical_for_broken = None

    sandbox = args.sandbox
    available = bwrap.bwrap_path() is not None
    if sandbox is None:
        sandbox = available
    if sandbox and not available:
        print(f"error: --sandbox: {bwrap.why_not_available()}", file=sys.stderr)
        return 2
    jobs = max(1, args.jobs)
    if not sandbox:
        why = "--no-sandbox" if args.sandbox is False else bwrap.why_not_available()
        untrusted = _others(todo, solutions)
        if untrusted and not args.trust_submissions:
            print(f"error: not graded: {untrusted}, and there is no sandbox ({why}). Without "
                  "it a submission's code runs with your rights: a process it leaves running "
                  "can change the next learner's grade, a sitecustomize.py or .pth file it "
                  "plants runs in every later Python, and a change it makes to the solutions "
                  "while another learner is graded scores that learner 'tampered'. Grade with "
                  "the sandbox (README, 'Grading a class'), or pass --trust-submissions if you "
                  "trust every submission", file=sys.stderr)
            return 2
        print(f"warning: grading is not isolated ({why}): a submission's code runs with your "
              "rights and can read and write your files; see README, 'Grading a class'",
              file=sys.stderr)
        if jobs > 1:  # the course guard can only tell whose change it found one at a time
            print(f"note: without the sandbox submissions are graded one at a time (--jobs "
                  f"{jobs} ignored), so that a change to the course's files is blamed on the "
                  "submission that made it", file=sys.stderr)
            jobs = 1
    kernel_env = classroom.configure(args, jobs)  # threads, device; timeout on a busy machine
    if argv is None:  # the command line (not a call from Python, e.g. in a lesson's kernel)
        _harden()
    _KEYS.clear()  # the answer keys for this run's seed, read (or built) before any submission
    seed = class_run.seed
    for path in _canonicals(todo, solutions, canonical):
        nb = _SOLUTIONS.get(path.resolve())
        if nb is not None and verdicts.specs(nb.cells) and _has_answers(nb):
            print(f"answer key of {path.name} ...", file=sys.stderr, flush=True)
            try:
                _answer_key(path, solutions, nb, seed, kernel_env)
            except _Ungradable as e:  # each of its submissions says so in its rows
                print(f"error: {e}", file=sys.stderr)
    hidden = [Path(p).resolve() for p in args.paths]
    hidden += [p.resolve() for p in (args.csv, args.feedback, args.canvas, class_run.progress)
               if p is not None]
    guard = None if sandbox else CourseGuard([GRADER, solutions, answer_key.folder(solutions)],
                                             watched=[GRADER.parent])
    limits = Limits(memory_bytes=int(args.memory * GiB), disk_bytes=int(args.disk * GiB),
                    cpus=fair_share(jobs))  # issue 37: a kernel's many processes slow only it

    def grade(item: tuple[Path, str, bool]) -> NotebookReport:
        path, learner, given = item
        sys.stdout.flush()
        print(f"grading {escape(str(path))} ...", file=sys.stderr, flush=True)
        forced = canonical or class_run.canonical_for(path)
        if forced is None and canonical_for_broken is not None:
            try:
                _read_notebook(path, given)
            except ValueError:
                forced = canonical_for_broken
        try:
            return grade_notebook(path, solutions, timeout=args.timeout, learner=learner,
                                  sandbox=sandbox, limits=limits, hidden=hidden,
                                  canonical=forced, guard=guard, links=given, seed=seed,
                                  kernel_env=kernel_env)
        except Exception as e:  # a bug met by an odd file: that file's row says so, the rest
            return NotebookReport(_printable(str(path)), _printable(learner), "", [],  # goes on
                                  error=f"the grader failed on this file: {type(e).__name__}: "
                                  f"{e}", seed=seed)
        finally:  # one at a time without the sandbox: what is left below us is this one's
            if not sandbox:
                kill_descendants(keep=before)

    before = descendants()
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            reports = list(pool.map(class_run.wrap(grade), todo))
    finally:
        kill_descendants(keep=before)
    lang = args.lang if args.lang != "auto" else report_language([item[0] for item in todo])
    print(to_json(reports) if args.json else localize_table(format_table(reports), lang))
    if args.csv:
        write_csv(reports, args.csv)
        print(f"wrote {args.csv}", file=sys.stderr)
    classroom.finish(class_run, args, reports)  # --canvas
    if args.feedback:
        args.feedback.mkdir(parents=True, exist_ok=True)
        names = _unique([feedback_name(r) for r in reports])
        for report, name in zip(reports, names, strict=True):
            (args.feedback / name).write_text(feedback_html(report), encoding="utf-8")
        print(f"wrote {len(reports)} feedback page(s) to {args.feedback}", file=sys.stderr)
    return 0 if all(r.passed for r in reports) else 1


def _unique(names: list[str]) -> list[str]:
    """File names made unique by a short hash where two learners clean to the same name."""
    seen: dict[str, int] = {}
    for name in names:
        seen[name] = seen.get(name, 0) + 1
    out: list[str] = []
    taken = set(names)
    for k, name in enumerate(names):
        if seen[name] > 1:  # a tagged name may not be another learner's name either
            n = 0
            while True:
                tag = hashlib.sha256(f"{k}:{n}".encode()).hexdigest()[:6]
                tagged = name.removesuffix(".html") + f"-{tag}.html"
                if tagged not in taken:
                    break
                n += 1
            taken.add(tagged)
            name = tagged
        out.append(name)
    return out


if __name__ == "__main__":
    sys.exit(main())
