"""What a grade is (``ExerciseResult``, ``NotebookReport``) and how it is shown: table, CSV, JSON.

>>> report = NotebookReport("subs/ada.ipynb", "ada", "00_setup.ipynb", [
...     ExerciseResult("00.1", 2, 2, "pass"),
...     ExerciseResult("00.2", 0, 1, "fail", "AssertionError: expected 1218, got 1216")])
>>> print(format_table([report]))
subs/ada.ipynb  (learner ada, graded as 00_setup.ipynb)
  exercise  points  status   message
  00.1         2/2  pass
  00.2         0/1  fail     AssertionError: expected 1218, got 1216
  total        2/3
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

Status = Literal["pass", "fail", "error", "timeout"]
CSV_COLUMNS = ("learner", "notebook", "exercise", "points", "possible", "status", "message",
               "notes")


@dataclass
class ExerciseResult:
    """The grade of one exercise.

    ``status`` is ``pass`` (every check cell passed; full points), ``fail`` (a check raised
    AssertionError), ``error`` (any other exception, including the stub's NotImplementedError,
    or an earlier cell failed) or ``timeout``. ``message`` is the first line of the failure.
    """

    exercise: str
    points: float
    possible: float
    status: Status
    message: str = ""
    notes: list[str] = field(default_factory=list)  # e.g. "its check cell was edited; ..."


@dataclass
class NotebookReport:
    """The grade of one learner's notebook."""

    path: str  # the file as given
    learner: str
    notebook: str  # the solutions notebook it was graded against ("" when none was found)
    exercises: list[ExerciseResult]
    notes: list[str] = field(default_factory=list)  # about the whole run (kernel restarts, ...)
    error: str = ""  # why the notebook could not be run at all ("" when it could)

    @property
    def points(self) -> float:
        return sum(e.points for e in self.exercises)

    @property
    def possible(self) -> float:
        return sum(e.possible for e in self.exercises)

    @property
    def passed(self) -> bool:
        """Every exercise passed (and there was something to grade)."""
        return not self.error and bool(self.exercises) and all(
            e.status == "pass" for e in self.exercises)

    def to_dict(self) -> dict:
        return {**asdict(self), "points": self.points, "possible": self.possible,
                "passed": self.passed}


def _num(x: float) -> str:
    return f"{x:g}"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def format_table(reports: list[NotebookReport], width: int = 90) -> str:
    """One block per notebook: exercise, points, status, message; a total; then the notes."""
    blocks = []
    for r in reports:
        graded_as = f"graded as {r.notebook}" if r.notebook else "no matching solutions notebook"
        lines = [f"{r.path}  (learner {r.learner}, {graded_as})"]
        if r.error:
            lines.append(f"  error: {r.error}")
        rows = [("exercise", "points", "status", "message")]
        rows += [(e.exercise + ("*" if e.notes else ""), f"{_num(e.points)}/{_num(e.possible)}",
                  e.status, _clip(e.message, width)) for e in r.exercises]
        rows.append(("total", f"{_num(r.points)}/{_num(r.possible)}", "", ""))
        widths = [max(len(row[k]) for row in rows) for k in range(3)]
        widths[2] = max(widths[2], len("timeout"))  # the same columns for every notebook
        for name, pts, status, message in rows:
            line = f"  {name:<{widths[0]}}  {pts:>{max(widths[1], 6)}}  {status:<{widths[2]}}"
            lines.append(f"{line}  {message}".rstrip())
        notes = [f"* {e.exercise}: {n}" for e in r.exercises for n in e.notes] + r.notes
        if notes:
            lines.append("  notes:")
            lines += [f"    {n}" for n in notes]
        blocks.append("\n".join(lines))
    if len(reports) > 1:
        points = sum(r.points for r in reports)
        possible = sum(r.possible for r in reports)
        passed = sum(r.passed for r in reports)
        blocks.append(f"all: {_num(points)}/{_num(possible)} points; "
                      f"{passed} of {len(reports)} notebooks fully passed")
    return "\n\n".join(blocks)


def write_csv(reports: list[NotebookReport], path: str | Path) -> None:
    """One row per learner and exercise (a notebook that could not be graded gets one row)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for r in reports:
            for e in r.exercises:
                writer.writerow([r.learner, r.notebook or r.path, e.exercise, _num(e.points),
                                 _num(e.possible), e.status, e.message,
                                 "; ".join(e.notes + r.notes)])
            if not r.exercises:
                writer.writerow([r.learner, r.notebook or r.path, "", "0", "0", "error",
                                 r.error, "; ".join(r.notes)])


def to_json(reports: list[NotebookReport]) -> str:
    """The reports as a JSON list, with each notebook's points, possible and passed."""
    return json.dumps([r.to_dict() for r in reports], indent=2)
