"""The course package as a learner's kernel sees it while one lesson is graded.

The grader runs from the course's repository, whose ``course_utils`` holds the course's own
answers to some exercises (``answers_in_package``: lesson 01's engine, lesson 03's passes, the
tape's reverse mode, ...). A release withholds them until their lesson's solutions are out, but
a kernel importing the grader's package would find them again: by a name built at run time, by a
second copy of the module loaded from its file, by reading the file. No check can follow every
such route, so the kernel that grades lesson NN is given a copy of the package in which every
answer to an exercise of lesson NN or later is withheld, as a release withholds it (the region
raises ``AnswerWithheld``, ``withheld.WITHHELD`` names the exercises, so set-up cells take the
learner's own code as they do in a release). Earlier lessons' answers stay: a lesson builds on
the ones before it (lesson 05's eager cells call lesson 04's ``tape.backward``).

In the sandbox the copy is bound over the package's folder, so the real files are out of reach
by any path; without it the kernel's ``PYTHONPATH`` names the copy (a kernel outside the
sandbox can read the grader's files anyway: only the sandbox is a boundary). The answer key's
clean kernel keeps the whole package: it runs the course's own solutions.

>>> sorted(withheld_for("02", {"01.1", "02.2", "04.2"}))
['02.2', '04.2']
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from course_utils.grading import answers_in_package

#: The package folder the grader (and its kernels) import: src/course_utils.
PACKAGE = Path(__file__).resolve().parents[2]


def withheld_for(lesson: str, exercises: set[str]) -> set[str]:
    """The exercise ids (``"04.2"``) among ``exercises`` whose answers a kernel grading
    ``lesson`` ("04") must not find: those of that lesson and every later one."""
    return {ex for ex in exercises if ex.split(".", 1)[0] >= lesson}


def _where(exercise: str) -> str:
    return f"your answer to exercise {exercise} in its exercise notebook"


@functools.cache
def package_view(lesson: str) -> Path | None:
    """A copy of the package (its folder, ``.../course_utils``) with the answers to ``lesson``
    and later lessons withheld; made once per process and lesson, removed at exit. None when
    the package answers no exercise of those lessons (the grader's own package will do)."""
    src = PACKAGE.parent
    every = {ex for answer in answers_in_package.scan(src) if not answer.kept
             for ex in answer.exercises}
    withheld = withheld_for(lesson, every)
    if not withheld:
        return None
    root = Path(tempfile.mkdtemp(prefix=f"course-view-{lesson}-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    view = root / "src" / PACKAGE.name
    shutil.copytree(PACKAGE, view, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    answers_in_package.strip_package(view.parent, withheld, _where)
    for path in [root, *root.rglob("*")]:  # readable by the kernel's user, written by none
        path.chmod(0o755 if path.is_dir() else 0o644)
    return view


def lesson_of(notebook_name: str) -> str | None:
    """``"05"`` for ``05_tracing.ipynb``; None for a name without a lesson number.

    >>> lesson_of("05_tracing.ipynb"), lesson_of("notes.ipynb")
    ('05', None)
    """
    head = notebook_name.split("_", 1)[0]
    return head if head.isdigit() and len(head) == 2 else None


__all__ = ["PACKAGE", "lesson_of", "package_view", "withheld_for"]
