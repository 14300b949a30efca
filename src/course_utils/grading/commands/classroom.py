"""Grading a class: a roster, Canvas' file names, grades an LMS imports, and runs that resume.

``course-grade`` calls this module around its own grading (``grade.py`` stays about grading
one notebook):

- **Roster** (``--roster roster.csv``): one row per student, with a student id (a column named
  ``student_id``, ``id`` or Canvas' ``ID``), optionally a name (``name`` or ``Student``) and the
  name of their folder or file in the class folder (``folder`` or ``file``: ``ola``, ``ola/``
  and ``ola.ipynb`` all name ``subs/ola/`` and ``subs/ola.ipynb``). A Canvas gradebook export
  works as it is: its ``ID`` is the Canvas user id in the downloaded file names. A notebook of
  a learner who is not on the roster stops the run (exit 2, the file named) unless
  ``--allow-off-roster``; a student on it who handed in nothing for a lesson is ``missing``.
- **Canvas' file names**: a submissions download names each file
  ``name_12345_67890_01_computation_graphs.ipynb`` (the student's name, their Canvas user id, the
  file's id, the file name they handed in; ``name_LATE_...`` when late; ``...graphs-1.ipynb`` for
  a second upload). Such names are read only in a Canvas download folder: a folder given on the
  command line whose notebooks are all named so, or any folder given with ``--canvas-download``;
  never in a learner's own folder, where a file so named is just a file. A Canvas file is
  graded against the lesson its own name says, as the learner ``name_12345``: the user id, not
  the name, says who it is (two students both called ``smithjohn`` stay two learners). When one
  learner handed in one lesson several times, the newest (largest file id, then upload number)
  is graded and the others are named in a warning.
- **Canvas grades** (``--canvas OUT.csv``): one row per student, one column per lesson (its
  points), a second row with the points possible (as Canvas' own export has), and
  ``--missing-value`` (default ``missing``) for a lesson a student did not hand in, never a
  silent 0; the CSV gets a row per exercise of it, status ``missing``. With a roster, every
  student on it gets a row, in its order. The columns are named as Canvas names its
  assignments, ``Lesson 01 (4711)``, so that an import fills them instead of creating new ones:
  from ``--canvas-columns``, a CSV of ``lesson,assignment`` or the gradebook Canvas exported
  (each lesson's column is the assignment whose name holds its number), or from the roster when
  it is such an export.
- **Late work** (``--deadline 2027-03-01T23:59+01:00``): a ``late`` column in the CSV. A
  Canvas file is late when Canvas said so (``_LATE_`` in its name); a collected file when the
  time ``deploy/hub/collect.sh`` recorded for it in the class folder's ``manifest.tsv`` (the
  learner's file's modification time) is after the deadline; any other file by its own
  modification time. ``--late-penalty P`` takes P percent off a late lesson's points in the
  Canvas file (default 0: late work is flagged, not penalised).
- **Overrides** (``--overrides FILE``, default ``grades.overrides.csv`` beside ``--csv`` when
  it exists): rows of ``exercise,learner,points,why`` that set an exercise's points by hand;
  every CSV and Canvas file written, during the run and after ``--resume``, applies them (the
  row's notes say so). ``--resume`` also turns points edited by hand in the CSV into overrides
  (appended to the file, ``why``: edited by hand), so that no hand edit is lost.
- **Results as grading goes**: each finished notebook is appended to a progress file next to
  the CSV (``grades.csv`` -> ``grades.progress.jsonl``) and the CSV is rewritten with every
  notebook graded so far, so an interrupted run keeps its work. ``--resume`` reads the progress
  file and grades only what is not in it (a file whose bytes changed is graded again).
- **The run's seed**: every check's inputs are drawn from one seed per run (``key.draw_seed``;
  ``--seed N`` repeats a grading), so each lesson's answer key is built once for the run. The
  progress file's reports hold it, and ``--resume`` goes on with it; the CSV's ``seed`` column
  keeps it for the instructor.
- **Kernels' threads and device** (``--threads``, default 1; ``--device``, default ``cpu``):
  the environment variables every grading kernel starts with (``kernel_environment``), so that
  ``--jobs N`` runs N kernels on N cores instead of N kernels each starting a thread per core.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from course_utils.grading.notebook.report import (
    CheckResult,
    ExerciseResult,
    NotebookReport,
    csv_safe,
    write_csv,
)
from course_utils.grading.running.kernel import (  # noqa: F401 (classroom.X as before)
    THREAD_VARIABLES,
    kernel_environment,
)

# --- threads and device -------------------------------------------------------------------------

# kernel_environment (kernel.py) gives the variables; configure() chooses them for a run.


def busy_timeout(timeout: float, jobs: int, cores: int | None = None) -> float:
    """The per-cell timeout to use when ``jobs`` kernels share ``cores`` cores: stretched by
    jobs/cores when there are more kernels than cores. A cell that imports TensorFlow takes
    several seconds alone and proportionally longer on an oversubscribed machine; without this, a
    class graded with --jobs 8 on 2 cores would time out cells that pass when graded alone.

    >>> busy_timeout(60, jobs=4, cores=2), busy_timeout(60, jobs=2, cores=8)
    (120.0, 60.0)
    """
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
            (os.cpu_count() or 1)
    return float(timeout) * max(1.0, jobs / max(1, cores))


# --- Canvas file names and the roster -----------------------------------------------------------

_CANVAS = re.compile(r"^(?P<name>[^_/]+?)(?P<late>_LATE)?_(?P<user>\d+)_(?P<file_id>\d+)_"
                     r"(?P<original>.+)$")
_UPLOAD = re.compile(r"^(?P<stem>.+?)-(?P<n>\d+)$")


@dataclass(frozen=True)
class CanvasName:
    """What a Canvas submissions download says in a file name."""

    name: str  # the student's name as Canvas writes it (lastfirst, lower case)
    user_id: str
    file_id: int
    lesson: str  # the file name they handed in, without ".ipynb" and Canvas' "-N" suffix
    upload: int  # Canvas' "-N" for a second, third... upload of the same name (0: the first)
    late: bool


def parse_canvas_name(filename: str) -> CanvasName | None:
    """``ada_12345_67890_01_computation_graphs-1.ipynb`` -> its parts; None for another name.

    >>> found = parse_canvas_name("lovelaceada_LATE_12345_67890_01_computation_graphs-1.ipynb")
    >>> found.name, found.user_id, found.file_id, found.lesson, found.upload, found.late
    ('lovelaceada', '12345', 67890, '01_computation_graphs', 1, True)
    >>> parse_canvas_name("01_computation_graphs.ipynb") is None
    True
    """
    stem = filename[:-len(".ipynb")] if filename.endswith(".ipynb") else filename
    found = _CANVAS.match(stem)
    if not found:
        return None
    lesson, upload = found["original"], 0
    numbered = _UPLOAD.match(lesson)
    if numbered:
        lesson, upload = numbered["stem"], int(numbered["n"])
    return CanvasName(found["name"], found["user"], int(found["file_id"]), lesson, upload,
                      bool(found["late"]))


@dataclass
class Student:
    """A roster row."""

    student_id: str
    name: str = ""
    folder: str = ""
    extra: dict[str, str] = field(default_factory=dict)  # Canvas' SIS columns, when given

    def identifiers(self) -> set[str]:
        return {k for k in (folder_key(self.folder), self.student_id) if k}

    def learner(self) -> str:
        """The learner's name in reports when nothing was handed in."""
        return folder_key(self.folder) or self.student_id


def folder_key(name: str) -> str:
    """A roster's folder or file name as the learner it names (``course-grade`` calls the
    learner of ``subs/ola/x.ipynb`` and of ``subs/ola.ipynb`` alike ``ola``).

    >>> folder_key("ola.ipynb"), folder_key("ola/"), folder_key("ola")
    ('ola', 'ola', 'ola')
    """
    name = name.strip().rstrip("/")
    return name[:-len(".ipynb")] if name.endswith(".ipynb") else name


def canvas_learner(found: CanvasName) -> str:
    """The learner a Canvas file belongs to: its name part and its user id, which decides.

    >>> canvas_learner(parse_canvas_name("smithjohn_104_9_00_setup.ipynb"))
    'smithjohn_104'
    """
    return f"{found.name}_{found.user_id}"


# --- Canvas' assignment columns -------------------------------------------------------------------

_ASSIGNMENT = re.compile(r"^(?P<title>.*\S)\s*\((?P<id>\d+)\)$")


def read_columns(path: str | Path, lessons: Sequence[str], *, strict: bool = True
                 ) -> dict[str, str]:
    """lesson -> Canvas' header of its assignment (``"Lesson 01: graphs (4711)"``), from a CSV
    of ``lesson,assignment`` rows or a gradebook Canvas exported (its header row read back: a
    lesson's column is the one assignment whose name holds the lesson's number). ValueError,
    naming the file, for a mapping row of a lesson the course does not have or a header that is
    not Canvas' ``Name (id)``, and (``strict``) for a lesson with no column or two."""
    path = Path(path)
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = [row for row in csv.reader(f) if any(cell.strip() for cell in row)]
    if not rows:
        raise ValueError(f"{path}: empty; it needs a header row")
    header = [h.strip() for h in rows[0]]
    lower = [h.lower() for h in header]
    found: dict[str, str] = {}
    if "lesson" in lower and "assignment" in lower:  # a mapping file
        at, to = lower.index("lesson"), lower.index("assignment")
        for line, row in enumerate(rows[1:], start=2):
            cells = [c.strip() for c in row] + [""] * len(header)
            lesson = _lesson_named(cells[at], lessons)
            if lesson is None:
                raise ValueError(f"{path}, line {line}: no lesson {cells[at]!r} (one of "
                                 f"{', '.join(lessons)})")
            if not _ASSIGNMENT.match(cells[to]):
                raise ValueError(f"{path}, line {line}: {cells[to]!r} is not a Canvas "
                                 "assignment header such as 'Lesson 01 (4711)': copy it from "
                                 "the first row of a gradebook Canvas exported")
            found[lesson] = cells[to]
    else:  # a gradebook export: each lesson's number in the assignments' names
        titles = {h: {int(n) for n in re.findall(r"\d+", m["title"])}
                  for h in header if (m := _ASSIGNMENT.match(h))}
        for lesson in lessons:
            number = int(lesson[:2]) if lesson[:2].isdigit() else None
            hits = [h for h, numbers in titles.items() if number in numbers]
            if len(hits) == 1:
                found[lesson] = hits[0]
            elif len(hits) > 1 and strict:
                raise ValueError(f"{path}: {len(hits)} assignments could be lesson {lesson} "
                                 f"({', '.join(hits)}); write a mapping file "
                                 "(lesson,assignment) and pass it as --canvas-columns")
    missing = [lesson for lesson in lessons if lesson not in found]
    if missing and strict:
        raise ValueError(f"{path}: no Canvas assignment for {', '.join(missing)}; add a row "
                         "'lesson,assignment' for each")
    return found


def _lesson_named(text: str, lessons: Sequence[str]) -> str | None:
    """``01``, ``1``, ``01_computation_graphs`` or ``01_computation_graphs.ipynb`` -> the stem."""
    text = text.strip().removesuffix(".ipynb")
    for lesson in lessons:
        if text == lesson or (text.isdigit() and lesson[:2].isdigit()
                              and int(text) == int(lesson[:2])):
            return lesson
    return None


_ID_COLUMNS = ("student_id", "id", "student id")
_NAME_COLUMNS = ("name", "student")
_FOLDER_COLUMNS = ("folder", "file", "login")
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


def read_roster(path: str | Path) -> list[Student]:
    """The students of a roster CSV, in its order. ValueError, naming the file and line, for a
    roster without an id column, a row without an id, or an id or folder given twice."""
    path = Path(path)
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise ValueError(f"{path}: the roster is empty; it needs a header row with student_id "
                         "(or id) and folder")
    header = [h.strip() for h in rows[0]]
    lower = [h.lower() for h in header]

    def column(names: Sequence[str]) -> int | None:
        return next((lower.index(n) for n in names if n in lower), None)

    id_col, name_col, folder_col = (column(_ID_COLUMNS), column(_NAME_COLUMNS),
                                    column(_FOLDER_COLUMNS))
    if id_col is None:
        raise ValueError(f"{path}: no student id column (one of {', '.join(_ID_COLUMNS)}); "
                         f"the header is {', '.join(header)}")
    students, seen = [], {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        cells = [c.strip() for c in row] + [""] * (len(header) - len(row))
        if cells[0].lower() == "points possible" or "Points Possible" in cells[:2]:
            continue  # the second row of a Canvas gradebook export
        student = Student(cells[id_col], cells[name_col] if name_col is not None else "",
                          cells[folder_col] if folder_col is not None else "",
                          {h: cells[k] for k, h in enumerate(header) if h in CANVAS_COLUMNS[2:]})
        if not student.student_id:
            raise ValueError(f"{path}, line {line}: no student id")
        for key in student.identifiers():
            if key in seen:
                raise ValueError(f"{path}, line {line}: {key!r} is also on line {seen[key]}; "
                                 "each student id and folder must be on one row")
            seen[key] = line
        students.append(student)
    return students


# --- deadlines and overrides ---------------------------------------------------------------------

#: The file ``deploy/hub/collect.sh`` writes into a class folder: one row per notebook collected.
MANIFEST = "manifest.tsv"
MANIFEST_COLUMNS = ("learner", "file", "modified", "bytes", "sha256")
OVERRIDE_COLUMNS = ("exercise", "learner", "points", "why")


def parse_deadline(text: str) -> datetime:
    """An ISO 8601 time; without a zone, this machine's local time.

    >>> parse_deadline("2027-03-01T23:59:00Z").isoformat()
    '2027-03-01T23:59:00+00:00'
    """
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--deadline {text!r} is not an ISO time such as "
                         "2027-03-01T23:59+01:00") from None
    return when if when.tzinfo is not None else when.astimezone()


def read_manifest(path: Path) -> dict[Path, tuple[float, str]]:
    """collect.sh's manifest: each collected file (resolved) -> (its time, its sha256)."""
    found: dict[Path, tuple[float, str]] = {}
    if not path.is_file():
        return found
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            try:
                when = parse_deadline(row["modified"]).timestamp()
                found[(path.parent / row["file"]).resolve()] = (when, row.get("sha256") or "")
            except (KeyError, TypeError, ValueError, OSError):
                continue
    return found


def _duration(seconds: float) -> str:
    """A time in the unit a reader takes in at once.

    >>> _duration(90), _duration(5400), _duration(2 * 86400)
    ('2 min', '1.5 h', '2.0 days')
    """
    if seconds < 3600:
        return f"{max(1, round(seconds / 60))} min"
    return f"{seconds / 3600:.1f} h" if seconds < 86400 else f"{seconds / 86400:.1f} days"


@dataclass(frozen=True)
class Override:
    """An exercise's points set by hand (a row of the overrides file)."""

    exercise: str
    learner: str  # as in the CSV's learner column, or the roster's student id
    points: float
    why: str
    line: int


def default_overrides(csv_out: Path) -> Path:
    """``grades.csv`` -> ``grades.overrides.csv``."""
    return csv_out.with_name(csv_out.stem + ".overrides.csv")


def read_overrides(path: Path) -> list[Override]:
    """The rows of an overrides file. ValueError naming the file and line for a missing column,
    a row without exercise or learner, or points that are not a number of at least 0."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.reader(f))
    header = [h.strip().lower() for h in rows[0]] if rows else []
    if not set(OVERRIDE_COLUMNS) <= set(header):
        raise ValueError(f"{path}: the header must hold {', '.join(OVERRIDE_COLUMNS)}; it is "
                         f"{', '.join(header) or 'empty'}")
    at = {name: header.index(name) for name in OVERRIDE_COLUMNS}
    found = []
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        cells = [c.strip() for c in row] + [""] * len(header)
        exercise, learner, why = cells[at["exercise"]], cells[at["learner"]], cells[at["why"]]
        try:
            points = float(cells[at["points"]])
        except ValueError:
            points = -1.0
        if not exercise or not learner or not points >= 0:
            raise ValueError(f"{path}, line {line}: an override needs an exercise, a learner "
                             f"and points of at least 0 (got {', '.join(row)})")
        found.append(Override(exercise, learner, points, why or "set by hand", line))
    return found


# --- a class run: who handed in what, results as they come ----------------------------------------

Item = tuple[Path, str, bool]  # (notebook, learner, given), as grade.collect makes them


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        if not Path(path).is_file():  # a FIFO in a class folder would block the class
            return ""
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return ""
    return digest.hexdigest()


def report_from_dict(data: dict) -> NotebookReport:
    """A report as ``NotebookReport.to_dict`` wrote it (a progress file's line), rebuilt."""
    exercises = []
    for ex in data["exercises"]:
        checks = [CheckResult(**c) for c in ex.get("checks", [])]
        exercises.append(ExerciseResult(ex["exercise"], ex["points"], ex["possible"],
                                        ex["status"], ex.get("message", ""),
                                        list(ex.get("notes", [])), checks))
    return NotebookReport(data["path"], data["learner"], data["notebook"], exercises,
                          list(data.get("notes", [])), data.get("error", ""), data.get("seed"))


def progress_path(out: Path) -> Path:
    """Where a run whose CSV (or Canvas file) is ``out`` keeps its progress."""
    return out.with_name(out.stem + ".progress.jsonl")


class ClassRun:
    """One ``course-grade`` run over a class folder: the submissions to grade (Canvas names
    read, duplicates dropped, a roster matched), the progress file, and the Canvas export."""

    def __init__(self, todo: list[Item], solutions: Path, *, roster: list[Student] | None = None,
                 csv_out: Path | None = None, canvas_out: Path | None = None,
                 resume: bool = False, warn: Callable[[str], None] | None = None,
                 folders: Sequence[str | Path] = (), canvas_download: bool = False,
                 off_roster: bool = False, missing_value: str = "missing",
                 columns: dict[str, str] | None = None, deadline: datetime | None = None,
                 late_penalty: float = 0.0, overrides: Path | None = None) -> None:
        self.solutions = solutions
        self.roster = roster
        self.csv_out, self.canvas_out = csv_out, canvas_out
        self.warn = warn or (lambda text: print(f"warning: {text}", file=sys.stderr))
        self.folders = {Path(f).resolve() for f in folders if Path(f).is_dir()}
        self.canvas_download = canvas_download
        self.missing_value = missing_value
        self.columns = dict(columns or {})  # lesson -> Canvas' assignment header
        self.canvas: dict[Path, CanvasName] = {}
        self.lesson_of: dict[Path, str] = {}
        self.student_of: dict[str, Student] = {}  # learner -> roster row
        self._canvas_folders: dict[Path, bool] = {}
        self.todo = self._dedupe([self._read_name(item) for item in todo])
        self._match_roster(off_roster)
        self.deadline, self.late_penalty = deadline, late_penalty
        self.late = self._lateness()  # path -> how late ("" when on time)
        self._late_by_name = {str(path): how for path, how in self.late.items()}
        self.overrides_path = overrides
        self.overrides = read_overrides(overrides) if overrides and overrides.is_file() else []
        self._unmatched: set[int] = set()
        out = csv_out or canvas_out
        self.progress = progress_path(out) if out is not None else None
        self.done: dict[tuple[str, str], NotebookReport] = {}
        if resume:
            if self.progress is None:
                raise ValueError("--resume needs --csv or --canvas: the progress file is kept "
                                 "next to it")
            self.done = self._read_progress()
            self._keep_hand_edits()
        if self.progress is not None and not resume:
            self.progress.write_text("", encoding="utf-8")
        self.finished: dict[int, NotebookReport] = {}
        self.lock = threading.Lock()
        self.seed: int | None = None  # the run's seed (``start`` sets it: ``run_seed``)

    # -- who handed in what

    def is_canvas_download(self, folder: Path) -> bool:
        """True for a folder given on the command line that is a Canvas download: named so
        (``--canvas-download``) or holding only notebooks with Canvas' names."""
        folder = folder.resolve()
        if folder not in self._canvas_folders:
            names = [p.name for p in folder.glob("*.ipynb")] if folder in self.folders else []
            self._canvas_folders[folder] = folder in self.folders and (self.canvas_download or (
                bool(names) and all(parse_canvas_name(n) is not None for n in names)))
        return self._canvas_folders[folder]

    def _read_name(self, item: Item) -> Item:
        path, learner, given = item
        found = parse_canvas_name(path.name)
        if found is not None and self.is_canvas_download(path.parent) and \
                (self.solutions / f"{found.lesson}.ipynb").is_file():
            self.canvas[path] = found
            self.lesson_of[path] = found.lesson
            return path, canvas_learner(found), given
        if (self.solutions / path.name).is_file():
            self.lesson_of[path] = path.stem
        return item

    def _dedupe(self, todo: list[Item]) -> list[Item]:
        groups: dict[tuple[str, str], list[Item]] = {}
        for item in todo:
            lesson = self.lesson_of.get(item[0])
            if lesson is not None:
                groups.setdefault((item[1], lesson), []).append(item)
        dropped: set[Path] = set()
        for (learner, lesson), items in groups.items():
            if len(items) < 2:
                continue
            items = sorted(items, key=self._newness)
            kept, rest = items[-1], items[:-1]
            dropped |= {p for p, _, _ in rest}
            self.warn(f"{learner} handed in {lesson} {len(items)} times: grading {kept[0]} "
                      f"(the newest), not {', '.join(str(p) for p, _, _ in rest)}")
        return [item for item in todo if item[0] not in dropped]

    def _newness(self, item: Item) -> tuple:
        path = item[0]
        found = self.canvas.get(path)
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            mtime = 0
        return (found.file_id, found.upload, mtime) if found else (0, 0, mtime)

    def canonical_for(self, path: Path) -> Path | None:
        """The solutions notebook a Canvas file's own name says (None: find it as usual)."""
        if path in self.canvas:
            return self.solutions / f"{self.canvas[path].lesson}.ipynb"
        return None

    def _match_roster(self, off_roster: bool) -> None:
        """Each learner's roster row: a Canvas file by its user id, any other by the learner's
        folder or file name (or student id). A learner not on the roster is an error (ValueError
        naming the files) unless ``off_roster``: then a warning, and no row in the Canvas file."""
        if self.roster is None:
            return
        by_key = {key: s for s in self.roster for key in s.identifiers()}
        strangers: dict[str, list[Path]] = {}
        for path, learner, _ in self.todo:
            key = self.canvas[path].user_id if path in self.canvas else learner
            student = by_key.get(key)
            if student is None:
                strangers.setdefault(learner, []).append(path)
            else:
                self.student_of[learner] = student
        if strangers and not off_roster:
            named = "; ".join(f"{learner} ({', '.join(map(str, paths))})"
                              for learner, paths in sorted(strangers.items()))
            raise ValueError(f"not on the roster: {named}. Add them to the roster (its folder "
                             "column names a learner's folder or file), take the files out of "
                             "the class folder, or pass --allow-off-roster to grade them and "
                             "leave them out of the Canvas file")
        for learner in sorted(strangers):
            self.warn(f"{learner} is not on the roster: graded, but left out of the Canvas file")

    def missing(self, reports: Sequence[NotebookReport], lessons: Sequence[str]
                ) -> list[NotebookReport]:
        """A report for each roster student and lesson with nothing handed in: every exercise
        ``missing``, 0 points (without a roster: each learner seen, for the lessons others
        handed in)."""
        from course_utils.grading.format import exercises
        from course_utils.grading.notebook.restore import _solutions_notebook

        got = {(self._who(r.learner), Path(r.notebook).stem) for r in reports if r.notebook}
        if self.roster is not None:
            seen = {s.student_id: learner for learner, s in self.student_of.items()}
            people = [(s.student_id, seen.get(s.student_id, s.learner())) for s in self.roster]
        else:
            people = [(learner, learner) for learner in dict.fromkeys(r.learner for r in reports)]
        out = []
        for lesson in lessons:
            try:
                possible = exercises(_solutions_notebook(self.solutions / f"{lesson}.ipynb"))
            except Exception:  # a broken solutions notebook is reported in its rows already
                possible = {}
            for who, learner in people:
                if (who, lesson) not in got:
                    out.append(NotebookReport("", learner, f"{lesson}.ipynb", [
                        ExerciseResult(ex, 0, p, "missing", "nothing handed in")
                        for ex, p in (possible or {"": 0}).items()]))
        return out

    def _who(self, learner: str) -> str:
        """The roster's student id of a learner, else the learner."""
        student = self.student_of.get(learner) or next(
            (s for s in self.roster or [] if s.learner() == learner), None)
        return student.student_id if student is not None else learner

    # -- results as they come

    def _key(self, item: Item) -> tuple[str, str]:
        return str(item[0]), _sha256(item[0])

    def _read_progress(self) -> dict[tuple[str, str], NotebookReport]:
        done = {}
        if self.progress is None or not self.progress.is_file():
            return done
        for line in self.progress.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
                done[(entry["path"], entry["sha256"])] = report_from_dict(entry["report"])
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short when the run was stopped
        return done

    def wrap(self, grade: Callable[[Item], NotebookReport]) -> Callable[[Item], NotebookReport]:
        """``grade`` that skips what the progress file holds and records each new result."""
        index = {id(item): k for k, item in enumerate(self.todo)}

        def run(item: Item) -> NotebookReport:
            key = self._key(item)
            report = self.done.get(key)
            resumed = report is not None
            if not resumed:
                report = grade(item)
            with self.lock:
                self.finished[index.get(id(item), len(self.todo) + len(self.finished))] = report
                if not resumed and self.progress is not None:
                    entry = {"path": key[0], "sha256": key[1], "report": report.to_dict()}
                    with open(self.progress, "a", encoding="utf-8") as f:
                        f.write(json.dumps(entry) + "\n")
                        f.flush()
                        os.fsync(f.fileno())
                if self.csv_out is not None:
                    self.write_grades([self.finished[k] for k in sorted(self.finished)])
            return report
        return run

    def resumed(self) -> int:
        return sum(1 for item in self.todo if self._key(item) in self.done)

    # -- late work and overrides

    def _lateness(self) -> dict[Path, str]:
        """How late each submission is: Canvas' own word for its files; with a deadline, the
        time collect.sh recorded (the manifest), else the file's modification time."""
        manifest: dict[Path, tuple[float, str]] = {}
        for folder in self.folders:
            manifest.update(read_manifest(folder / MANIFEST))
        late = {}
        for path, _, _ in self.todo:
            if path in self.canvas:
                late[path] = "late (Canvas)" if self.canvas[path].late else ""
                continue
            if self.deadline is None:
                continue
            when, digest = manifest.get(path.resolve(), (None, ""))
            if when is None or (digest and digest != _sha256(path)):
                try:
                    when = path.stat().st_mtime
                except OSError:
                    continue
            after = when - self.deadline.timestamp()
            late[path] = f"late ({_duration(after)} after the deadline)" if after > 0 else ""
        return late

    def _late_text(self, report: NotebookReport) -> str:
        how = self._late_by_name.get(report.path, "")
        if how and self.late_penalty:
            how += f"; -{self.late_penalty:g}% in the Canvas file"
        return how

    def adjusted(self, reports: Sequence[NotebookReport], warn: bool = False
                 ) -> list[NotebookReport]:
        """Copies of ``reports`` with the overrides applied (an exercise's points set by hand,
        and a note saying so and why); ``warn``: name each override that matches nothing."""
        import copy

        if not self.overrides:
            return list(reports)
        out = [copy.deepcopy(r) for r in reports]
        for o in self.overrides:
            hits = [e for r in out if o.learner in {r.learner, self._who(r.learner)}
                    for e in r.exercises if e.exercise == o.exercise]
            for e in hits:
                e.notes.append(f"points set by hand to {_num(o.points)} (graded "
                               f"{_num(e.points)}): {o.why}")
                e.points = o.points
                if e.status == "missing":  # work handed in some other way
                    e.status = "by hand"
            if warn and not hits and o.line not in self._unmatched:
                self._unmatched.add(o.line)
                self.warn(f"{self.overrides_path}, line {o.line}: no exercise {o.exercise} of "
                          f"{o.learner} was graded here; the override is not used")
        return out

    def write_grades(self, reports: Sequence[NotebookReport], out: Path | None = None,
                     warn: bool = False) -> None:
        """The CSV: ``report.write_csv``'s columns with the overrides applied, and ``late``."""
        out = out or self.csv_out
        adjusted = self.adjusted(reports, warn)
        tmp = out.with_name(out.name + ".tmp")
        write_csv(adjusted, tmp)
        with open(tmp, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        paths = [r.path for r in adjusted for _ in (r.exercises or [None])]
        lates = {r.path: self._late_text(r) for r in adjusted}
        rows = [rows[0] + ["late"]] + [row + [csv_safe(lates.get(path, ""))]
                                       for row, path in zip(rows[1:], paths, strict=True)]
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(rows)
        os.replace(tmp, out)

    def _keep_hand_edits(self) -> None:
        """Before ``--resume`` rewrites the CSV: points in it that differ from what the grader
        gave become overrides, appended to the overrides file, so that they are kept."""
        if self.csv_out is None or not self.csv_out.is_file():
            return
        graded = {(r.learner, e.exercise): e.points for r in self.done.values()
                  for e in r.exercises}
        with open(self.csv_out, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        found = []
        for row in rows:
            key = (row.get("learner", ""), row.get("exercise", ""))
            try:
                points = float(row.get("points", ""))
            except ValueError:
                continue
            base = graded.get(key, 0.0 if row.get("status") in ("missing", "by hand") else None)
            set_by_hand = {o.points for o in self.overrides if o.exercise == key[1]
                           and o.learner in {key[0], self._who(key[0])}}
            if base is not None and points != base and points not in set_by_hand:
                found.append(Override(key[1], key[0], points, "edited by hand in "
                                      f"{self.csv_out.name} (grader: {_num(base)})", 0))
        if not found:
            return
        if self.overrides_path is None:
            self.overrides_path = default_overrides(self.csv_out)
        new = not self.overrides_path.is_file()
        with open(self.overrides_path, "a", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(OVERRIDE_COLUMNS)
            for o in found:
                writer.writerow([o.exercise, o.learner, _num(o.points), o.why])
        self.overrides = read_overrides(self.overrides_path)
        self.warn(f"{len(found)} point(s) edited by hand in {self.csv_out} kept as overrides in "
                  f"{self.overrides_path}")

    # -- the Canvas export

    def write_canvas(self, reports: Sequence[NotebookReport], possible: dict[str, float],
                     out: Path | None = None) -> list[list[str]]:
        """One row per student, one column per lesson (its points; ``missing_value`` when not
        handed in), a second row with each lesson's points possible; a lesson's column is
        named by ``columns`` (Canvas' assignment header) where it has one. Returns the rows."""
        out = out or self.canvas_out
        lessons = sorted({Path(r.notebook).stem for r in reports if r.notebook} | set(possible))
        points: dict[str, dict[str, float]] = {}
        for r in self.adjusted(reports):
            if r.notebook and any(e.status != "missing" for e in r.exercises):
                lesson = Path(r.notebook).stem
                late = self._late_text(r) and self.late_penalty
                points.setdefault(r.learner, {})[lesson] = \
                    r.points * (1 - self.late_penalty / 100) if late else r.points
        if self.roster is not None:
            students = self.roster
            by_student: dict[str, dict[str, float]] = {}
            for learner, got in points.items():
                by_student.setdefault(self._who(learner), {}).update(got)
            rows_for = [(s, by_student.get(s.student_id, {})) for s in students]
        else:
            ids = {canvas_learner(c): c.user_id for c in self.canvas.values()}
            rows_for = [(Student(ids.get(learner, ""), learner), got)
                        for learner, got in sorted(points.items())]
        rows = [list(CANVAS_COLUMNS) + [self.columns.get(x, x) for x in lessons],
                ["Points Possible", "", "", "", ""] + [_num(possible.get(x, 0)) for x in lessons]]
        for student, got in rows_for:
            rows.append([csv_safe(student.name or student.folder), csv_safe(student.student_id),
                         csv_safe(student.extra.get("SIS User ID", "")),
                         csv_safe(student.extra.get("SIS Login ID", "")),
                         csv_safe(student.extra.get("Section", ""))]
                        + [_num(got[lesson]) if lesson in got else csv_safe(self.missing_value)
                           for lesson in lessons])
        if out is not None:
            with open(out, "w", newline="", encoding="utf-8") as f:
                csv.writer(f).writerows(rows)
        return rows


def _num(x: float) -> str:
    return f"{x:g}"


# --- course-grade's options -----------------------------------------------------------------------


def add_arguments(parser) -> None:
    """The options of a class run, added to ``course-grade``'s parser."""
    parser.add_argument("--roster", type=Path, metavar="ROSTER.csv",
                        help="students: a CSV with student_id (or id, or Canvas' ID), name and "
                        "folder (the learner's folder or file in the class folder); a Canvas "
                        "gradebook export works as it is. A notebook of a learner not on it "
                        "is an error")
    parser.add_argument("--allow-off-roster", action="store_true",
                        help="with --roster: grade notebooks of learners not on it (a warning; "
                        "no row in the Canvas file) instead of stopping")
    parser.add_argument("--canvas", type=Path, metavar="OUT.csv",
                        help="write one row per student and one column per lesson (points; "
                        "--missing-value for a lesson not handed in), for Canvas' gradebook "
                        "import")
    parser.add_argument("--canvas-columns", type=Path, metavar="MAP.csv",
                        help="name --canvas's columns as Canvas' assignments: a CSV of "
                        "lesson,assignment ('01,Lesson 01 (4711)') or the gradebook Canvas "
                        "exported (a lesson's column: the assignment whose name holds its "
                        "number); default: the roster's, when it is such an export")
    parser.add_argument("--missing-value", default="missing", metavar="TEXT",
                        help="what --canvas writes for a lesson not handed in (default: "
                        "missing; '0' scores it 0, '' leaves Canvas' cell as it is)")
    parser.add_argument("--deadline", metavar="ISO-TIME",
                        help="flag work handed in after this time (2027-03-01T23:59+01:00; no "
                        "zone: local time) in the CSV's late column: by the time collect.sh "
                        "recorded, else the file's; Canvas' _LATE_ files are late whatever it is")
    parser.add_argument("--late-penalty", type=float, default=0.0, metavar="PERCENT",
                        help="take PERCENT off a late lesson's points in the Canvas file "
                        "(default 0: late work is flagged, not penalised)")
    parser.add_argument("--overrides", type=Path, metavar="FILE.csv",
                        help="points set by hand: rows of exercise,learner,points,why, applied "
                        "to every CSV and Canvas file (default: grades.overrides.csv beside "
                        "--csv grades.csv, when it exists)")
    parser.add_argument("--canvas-download", action="store_true",
                        help="read Canvas' file names (name_userid_fileid_lesson.ipynb) in every "
                        "folder given; by default only in a folder whose notebooks are all "
                        "named so")
    parser.add_argument("--resume", action="store_true",
                        help="go on with an interrupted run: grade only what the progress file "
                        "next to --csv (or --canvas) does not hold")
    parser.add_argument("--seed", type=int, metavar="N",
                        help="draw every check's inputs from seed N instead of a new random "
                        "one: repeats a grading (the CSV's seed column, the JSON's \"seed\"); "
                        "the answer key is built for it")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads per kernel for numpy, PyTorch, TensorFlow and XLA "
                        "(default: 1, so that --jobs N uses N cores)")
    parser.add_argument("--device", choices=("cpu", "auto"), default="cpu",
                        help="cpu (default): kernels see no GPU; auto: each framework picks")


def start(args, todo: list[Item], solutions: Path) -> ClassRun:
    """The class run ``course-grade`` grades; ValueError for a bad roster or --resume alone."""
    roster = read_roster(args.roster) if args.roster else None
    lessons = [p.stem for p in sorted(solutions.glob("*.ipynb"))]
    if not 0 <= args.late_penalty <= 100:
        raise ValueError(f"--late-penalty must be a percentage from 0 to 100, got "
                         f"{args.late_penalty:g}")
    overrides = args.overrides
    if overrides is None and args.csv is not None:
        overrides = default_overrides(args.csv)
    elif overrides is not None and not overrides.is_file():
        raise ValueError(f"--overrides: no file {overrides}")
    columns = {}
    if args.canvas_columns is not None:
        columns = read_columns(args.canvas_columns, lessons, strict=False)
    elif args.roster is not None:
        columns = read_columns(args.roster, lessons, strict=False)
    run = ClassRun(todo, solutions, roster=roster, csv_out=args.csv, canvas_out=args.canvas,
                   resume=args.resume, folders=args.paths,
                   canvas_download=args.canvas_download, off_roster=args.allow_off_roster,
                   missing_value=args.missing_value, columns=columns,
                   deadline=parse_deadline(args.deadline) if args.deadline else None,
                   late_penalty=args.late_penalty, overrides=overrides)
    named = {run.lesson_of.get(p) or p.stem for p, _, _ in run.todo} & set(lessons)
    unmapped = sorted(named - set(columns))
    if args.canvas is not None and args.canvas_columns is not None and unmapped:
        raise ValueError(f"{args.canvas_columns}: no Canvas assignment for "
                         f"{', '.join(unmapped)}; add a row 'lesson,assignment' for each")
    if args.resume:
        print(f"resuming: {run.resumed()} of {len(run.todo)} notebook(s) already graded "
              f"({run.progress})", file=sys.stderr)
    run.seed = run_seed(args, run)
    return run


def run_seed(args, run: ClassRun) -> int:
    """The run's seed: ``--seed``; with ``--resume``, the seed of the run it goes on with (the
    reports in its progress file); else a new one (``key.draw_seed``)."""
    from course_utils.grading.notebook.key import draw_seed

    if getattr(args, "seed", None) is not None:
        return int(args.seed)
    earlier = {r.seed for r in run.done.values() if r.seed is not None}
    if len(earlier) == 1:
        return earlier.pop()
    if len(earlier) > 1:
        run.warn(f"the progress file holds reports graded with {len(earlier)} seeds; the rest "
                 "are graded with a new one (--seed N to choose)")
    return draw_seed()


def configure(args, jobs: int) -> dict[str, str]:
    """The kernels' environment for --threads and --device (``kernel_environment``), for
    ``course-grade`` to hand to every kernel it starts; and stretch the per-cell timeout when
    there are more kernels than cores (``busy_timeout``), saying so when it does."""
    env = kernel_environment(args.threads, args.device)
    stretched = busy_timeout(args.timeout, jobs * args.threads)
    if stretched > args.timeout:
        print(f"note: {jobs} kernel(s) x {args.threads} thread(s) on fewer cores: each cell "
              f"gets {stretched:.0f} s instead of {args.timeout:.0f} s", file=sys.stderr)
        args.timeout = stretched
    return env


def finish(run: ClassRun, args, reports: Sequence[NotebookReport]) -> list[NotebookReport]:
    """After grading: a ``missing`` report for each roster student and lesson graded here with
    nothing handed in, added to the CSV (rewritten) and the Canvas file; returns every report,
    the missing ones included."""
    from course_utils.grading.format import exercises
    from course_utils.grading.notebook.restore import _solutions_notebook

    lessons = sorted({Path(r.notebook).stem for r in reports if r.notebook})
    everything = list(reports) + run.missing(reports, lessons)
    gone = len(everything) - len(reports)
    if gone:
        print(f"missing: {gone} notebook(s) of roster students not handed in", file=sys.stderr)
    if args.csv is not None:
        run.write_grades(everything, args.csv, warn=True)
    if args.canvas is None:
        return everything
    possible = {}
    for lesson in lessons:
        try:
            nb = _solutions_notebook(run.solutions / f"{lesson}.ipynb")
            possible[lesson] = sum(exercises(nb).values())
        except Exception:  # a broken solutions notebook is reported in its rows already
            possible[lesson] = max((r.possible for r in reports
                                    if Path(r.notebook).stem == lesson), default=0)
    for lesson in lessons:
        if lesson not in run.columns:
            run.warn(f"the Canvas file's column {lesson} is not one of Canvas' assignments: an "
                     "import creates a new assignment; map it with --canvas-columns")
    rows = run.write_canvas(everything, possible)
    print(f"wrote {args.canvas}: {len(rows) - 2} student(s), {len(rows[0]) - 5} lesson(s)",
          file=sys.stderr)
    return everything
