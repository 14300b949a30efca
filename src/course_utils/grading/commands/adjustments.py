"""What the instructor adds to the grader's points: lateness, overrides, and hand edits kept.

- **Late work** (``--deadline``): a Canvas file is late when Canvas said so (``_LATE_`` in its
  name); a collected file when the time ``deploy/hub/collect.sh`` recorded for it in the class
  folder's ``manifest.tsv`` is after the deadline; any other file by its modification time.
  ``--late-penalty P`` takes P percent off a late lesson in the Canvas file.
- **Overrides** (``--overrides``): rows of ``exercise,learner,points,why`` that set an
  exercise's points by hand, applied to every file written (``Adjustments.adjusted``).
- **Hand edits**: before ``--resume`` rewrites the CSV, points edited in it become overrides
  (``Adjustments.keep_hand_edits``), so that none is lost.
"""

from __future__ import annotations

import copy
import csv
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from course_utils.grading.commands.submissions import Submissions, file_sha256
from course_utils.grading.notebook.report import NotebookReport

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


def number_text(x: float) -> str:
    """Points as a CSV cell holds them: ``2`` for 2.0, ``0.5``."""
    return f"{x:g}"


class Adjustments:
    """A class run's deadline and late penalty, and its overrides (read from ``overrides``, a
    file that may not exist yet). ``who``: a learner's roster id (overrides may name either)."""

    def __init__(self, *, deadline: datetime | None = None, late_penalty: float = 0.0,
                 overrides: Path | None = None, who: Callable[[str], str] = str,
                 warn: Callable[[str], None] | None = None) -> None:
        self.deadline, self.late_penalty = deadline, late_penalty
        self.overrides_path = overrides
        self.overrides = read_overrides(overrides) if overrides and overrides.is_file() else []
        self.who = who
        self.warn = warn or (lambda text: print(f"warning: {text}", file=sys.stderr))
        self.late: dict[Path, str] = {}  # path -> how late ("" when on time): see lateness
        self._late_by_name: dict[str, str] = {}
        self._unmatched: set[int] = set()

    def lateness(self, submissions: Submissions) -> dict[Path, str]:
        """How late each submission is (kept as ``late``): Canvas' own word for its files; with
        a deadline, the time collect.sh recorded (the manifest), else the file's modification
        time."""
        manifest: dict[Path, tuple[float, str]] = {}
        for folder in submissions.folders:
            manifest.update(read_manifest(folder / MANIFEST))
        late = {}
        canvas = submissions.canvas
        for path, _, _ in submissions.todo:
            if path in canvas:
                late[path] = "late (Canvas)" if canvas[path].late else ""
                continue
            if self.deadline is None:
                continue
            when, digest = manifest.get(path.resolve(), (None, ""))
            if when is None or (digest and digest != file_sha256(path)):
                try:
                    when = path.stat().st_mtime
                except OSError:
                    continue
            after = when - self.deadline.timestamp()
            late[path] = f"late ({_duration(after)} after the deadline)" if after > 0 else ""
        self.late = late
        self._late_by_name = {str(path): how for path, how in late.items()}
        return late

    def late_text(self, report: NotebookReport) -> str:
        """How late a report's notebook was, and the penalty ("" when on time)."""
        how = self._late_by_name.get(report.path, "")
        if how and self.late_penalty:
            how += f"; -{self.late_penalty:g}% in the Canvas file"
        return how

    def adjusted(self, reports: Sequence[NotebookReport], warn: bool = False
                 ) -> list[NotebookReport]:
        """Copies of ``reports`` with the overrides applied (an exercise's points set by hand,
        and a note saying so and why); ``warn``: name each override that matches nothing."""
        if not self.overrides:
            return list(reports)
        out = [copy.deepcopy(r) for r in reports]
        for o in self.overrides:
            hits = [e for r in out if o.learner in {r.learner, self.who(r.learner)}
                    for e in r.exercises if e.exercise == o.exercise]
            for e in hits:
                e.notes.append(f"points set by hand to {number_text(o.points)} (graded "
                               f"{number_text(e.points)}): {o.why}")
                e.points = o.points
                if e.status == "missing":  # work handed in some other way
                    e.status = "by hand"
            if warn and not hits and o.line not in self._unmatched:
                self._unmatched.add(o.line)
                self.warn(f"{self.overrides_path}, line {o.line}: no exercise {o.exercise} of "
                          f"{o.learner} was graded here; the override is not used")
        return out

    def keep_hand_edits(self, csv_out: Path | None, done: Iterable[NotebookReport]) -> None:
        """Before ``--resume`` rewrites the CSV (``csv_out``): points in it that differ from what
        the grader gave (``done``: the reports of the run resumed) become overrides, appended
        to the overrides file, so that they are kept."""
        if csv_out is None or not csv_out.is_file():
            return
        graded = {(r.learner, e.exercise): e.points for r in done for e in r.exercises}
        with open(csv_out, newline="", encoding="utf-8") as f:
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
                           and o.learner in {key[0], self.who(key[0])}}
            if base is not None and points != base and points not in set_by_hand:
                found.append(Override(key[1], key[0], points, "edited by hand in "
                                      f"{csv_out.name} (grader: {number_text(base)})", 0))
        if not found:
            return
        if self.overrides_path is None:
            self.overrides_path = default_overrides(csv_out)
        new = not self.overrides_path.is_file()
        with open(self.overrides_path, "a", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(OVERRIDE_COLUMNS)
            for o in found:
                writer.writerow([o.exercise, o.learner, number_text(o.points), o.why])
        self.overrides = read_overrides(self.overrides_path)
        self.warn(f"{len(found)} point(s) edited by hand in {csv_out} kept as overrides in "
                  f"{self.overrides_path}")
