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

This module holds the class run (``ClassRun``: the progress file, the CSV and the Canvas file)
and ``course-grade``'s class options; who handed in what is ``submissions.py``, the roster and
Canvas' names ``roster.py``, lateness and overrides ``adjustments.py``.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from course_utils.grading.commands.adjustments import (  # noqa: F401 (classroom.X as before)
    MANIFEST,
    MANIFEST_COLUMNS,
    OVERRIDE_COLUMNS,
    Adjustments,
    Override,
    default_overrides,
    number_text,
    parse_deadline,
    read_manifest,
    read_overrides,
)
from course_utils.grading.commands.roster import (  # noqa: F401 (classroom.X as before)
    CANVAS_COLUMNS,
    CanvasName,
    Student,
    canvas_learner,
    folder_key,
    parse_canvas_name,
    read_columns,
    read_roster,
)
from course_utils.grading.commands.submissions import Item, Submissions, file_sha256
from course_utils.grading.notebook.report import (
    CheckResult,
    ExerciseResult,
    NotebookReport,
    csv_safe,
    write_csv,
)
from course_utils.grading.running.launch import (  # noqa: F401 (classroom.X as before)
    THREAD_VARIABLES,
    kernel_environment,
)

# --- threads and device -------------------------------------------------------------------------

# kernel_environment (running/launch.py) gives the variables; configure() chooses them for a run.


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


# --- a class run: results as they come, the CSV and the Canvas file ------------------------


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
    """One ``course-grade`` run over a class folder: the submissions to grade (``Submissions``:
    Canvas names read, duplicates dropped, a roster matched), lateness and overrides
    (``Adjustments``), the progress file, and the CSV and Canvas files."""

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
        self.missing_value = missing_value
        self.columns = dict(columns or {})  # lesson -> Canvas' assignment header
        self.submissions = Submissions(todo, solutions, roster=roster, folders=folders,
                                       canvas_download=canvas_download, off_roster=off_roster,
                                       warn=self.warn)
        # the same objects as the submissions' (they are filled once, above)
        self.todo, self.canvas = self.submissions.todo, self.submissions.canvas
        self.lesson_of, self.student_of = self.submissions.lesson_of, self.submissions.student_of
        self.adjustments = Adjustments(deadline=deadline, late_penalty=late_penalty,
                                       overrides=overrides, who=self.submissions.who,
                                       warn=self.warn)
        self.late = self.adjustments.lateness(self.submissions)  # path -> how late, or ""
        out = csv_out or canvas_out
        self.progress = progress_path(out) if out is not None else None
        self.done: dict[tuple[str, str], NotebookReport] = {}
        if resume:
            if self.progress is None:
                raise ValueError("--resume needs --csv or --canvas: the progress file is kept "
                                 "next to it")
            self.done = self._read_progress()
            self.adjustments.keep_hand_edits(csv_out, self.done.values())
        if self.progress is not None and not resume:
            self.progress.write_text("", encoding="utf-8")
        self.finished: dict[int, NotebookReport] = {}
        self.lock = threading.Lock()
        self.seed: int | None = None  # the run's seed (``start`` sets it: ``run_seed``)

    def canonical_for(self, path: Path) -> Path | None:
        """The solutions notebook a Canvas file's own name says (None: find it as usual)."""
        return self.submissions.canonical_for(path)

    def missing(self, reports: Sequence[NotebookReport], lessons: Sequence[str]
                ) -> list[NotebookReport]:
        """A ``missing`` report for each student and lesson with nothing handed in."""
        return self.submissions.missing(reports, lessons)

    # -- results as they come

    def _key(self, item: Item) -> tuple[str, str]:
        return str(item[0]), file_sha256(item[0])

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

    # -- the CSV

    def write_grades(self, reports: Sequence[NotebookReport], out: Path | None = None,
                     warn: bool = False) -> None:
        """The CSV: ``report.write_csv``'s columns with the overrides applied, and ``late``."""
        out = out or self.csv_out
        adjusted = self.adjustments.adjusted(reports, warn)
        tmp = out.with_name(out.name + ".tmp")
        write_csv(adjusted, tmp)
        with open(tmp, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        paths = [r.path for r in adjusted for _ in (r.exercises or [None])]
        lates = {r.path: self.adjustments.late_text(r) for r in adjusted}
        rows = [rows[0] + ["late"]] + [row + [csv_safe(lates.get(path, ""))]
                                       for row, path in zip(rows[1:], paths, strict=True)]
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(rows)
        os.replace(tmp, out)

    # -- the Canvas export

    def write_canvas(self, reports: Sequence[NotebookReport], possible: dict[str, float],
                     out: Path | None = None) -> list[list[str]]:
        """One row per student, one column per lesson (its points; ``missing_value`` when not
        handed in), a second row with each lesson's points possible; a lesson's column is
        named by ``columns`` (Canvas' assignment header) where it has one. Returns the rows."""
        out = out or self.canvas_out
        lessons = sorted({Path(r.notebook).stem for r in reports if r.notebook} | set(possible))
        points: dict[str, dict[str, float]] = {}
        for r in self.adjustments.adjusted(reports):
            if r.notebook and any(e.status != "missing" for e in r.exercises):
                lesson = Path(r.notebook).stem
                penalty = self.adjustments.late_penalty
                late = self.adjustments.late_text(r) and penalty
                points.setdefault(r.learner, {})[lesson] = \
                    r.points * (1 - penalty / 100) if late else r.points
        if self.roster is not None:
            students = self.roster
            by_student: dict[str, dict[str, float]] = {}
            for learner, got in points.items():
                by_student.setdefault(self.submissions.who(learner), {}).update(got)
            rows_for = [(s, by_student.get(s.student_id, {})) for s in students]
        else:
            ids = {canvas_learner(c): c.user_id for c in self.canvas.values()}
            rows_for = [(Student(ids.get(learner, ""), learner), got)
                        for learner, got in sorted(points.items())]
        rows = [list(CANVAS_COLUMNS) + [self.columns.get(x, x) for x in lessons],
                ["Points Possible", "", "", "", ""]
                + [number_text(possible.get(x, 0)) for x in lessons]]
        for student, got in rows_for:
            rows.append([csv_safe(student.name or student.folder), csv_safe(student.student_id),
                         csv_safe(student.extra.get("SIS User ID", "")),
                         csv_safe(student.extra.get("SIS Login ID", "")),
                         csv_safe(student.extra.get("Section", ""))]
                        + [number_text(got[lesson]) if lesson in got
                           else csv_safe(self.missing_value) for lesson in lessons])
        if out is not None:
            with open(out, "w", newline="", encoding="utf-8") as f:
                csv.writer(f).writerows(rows)
        return rows


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
