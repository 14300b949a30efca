"""Who handed in what: a class folder's notebooks as learners and lessons.

``course-grade`` lists a class folder's notebooks (``grade.collect``); ``Submissions`` reads
Canvas' file names where the folder is a Canvas download (the learner is the Canvas user, the
lesson the name the file was handed in as), keeps only the newest of a learner's uploads of one
lesson (the others named in a warning), matches every learner to the roster (one not on it
stops the run unless ``off_roster``), and says who handed nothing in (``missing``).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from course_utils.grading.commands.roster import (
    CanvasName,
    Student,
    canvas_learner,
    parse_canvas_name,
)
from course_utils.grading.notebook.report import ExerciseResult, NotebookReport

Item = tuple[Path, str, bool]  # (notebook, learner, given), as grade.collect makes them


def file_sha256(path: Path) -> str:
    """A file's sha256 in hex; "" for one that cannot be read or is not a plain file."""
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


class Submissions:
    """The notebooks to grade (``todo``: Canvas names read, duplicates dropped), each one's
    lesson and Canvas name, and each learner's roster row.

    ``folders``: the folders given on the command line (only there are Canvas' names read);
    ``canvas_download``: read them in every such folder, not only where every notebook is
    named so; ``off_roster``: a learner not on the roster is a warning, not an error."""

    def __init__(self, todo: list[Item], solutions: Path, *, roster: list[Student] | None = None,
                 folders: Sequence[str | Path] = (), canvas_download: bool = False,
                 off_roster: bool = False, warn: Callable[[str], None] | None = None) -> None:
        self.solutions = solutions
        self.roster = roster
        self.warn = warn or (lambda text: print(f"warning: {text}", file=sys.stderr))
        self.folders = {Path(f).resolve() for f in folders if Path(f).is_dir()}
        self.canvas_download = canvas_download
        self.canvas: dict[Path, CanvasName] = {}
        self.lesson_of: dict[Path, str] = {}
        self.student_of: dict[str, Student] = {}  # learner -> roster row
        self._canvas_folders: dict[Path, bool] = {}
        self.todo = self._dedupe([self._read_name(item) for item in todo])
        self._match_roster(off_roster)

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

        got = {(self.who(r.learner), Path(r.notebook).stem) for r in reports if r.notebook}
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

    def who(self, learner: str) -> str:
        """The roster's student id of a learner, else the learner."""
        student = self.student_of.get(learner) or next(
            (s for s in self.roster or [] if s.learner() == learner), None)
        return student.student_id if student is not None else learner
