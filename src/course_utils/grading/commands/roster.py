"""A class's people: the roster file, Canvas' file names, and Canvas' assignment columns.

A roster is a CSV of one row per student (``read_roster``: a student id, optionally a name and
the learner's folder or file; a Canvas gradebook export works as it is). A Canvas submissions
download names each file ``name_12345_67890_01_computation_graphs.ipynb`` (``parse_canvas_name``:
the student's name, their Canvas user id, which decides who it is, the file's id and the lesson).
``read_columns`` names the Canvas export's columns as Canvas names its assignments.

    >>> parse_canvas_name("lovelaceada_12345_67890_01_computation_graphs.ipynb").user_id
    '12345'
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
