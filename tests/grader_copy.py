"""A copy of the course's package for a grader run without the sandbox, in a test.

Without the sandbox, the grader's course guard keeps the bytes of every file of the grading
package it runs from and puts back whatever changed while it graded. Run from the checkout, a
test's grader therefore scored its learners 'tampered' for an edit someone made to
src/course_utils/grading meanwhile (another engineer, an editor's save), and then wrote the old
bytes back over that edit. From a copy, it watches and restores the copy only.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import course_utils

PACKAGE = Path(course_utils.__file__).resolve().parent


def grader_copy(folder: Path) -> dict[str, str]:
    """Copy the package into ``folder``; the environment variables that make a Python
    subprocess import it from there (the copy comes first on sys.path)."""
    shutil.copytree(PACKAGE, folder / PACKAGE.name,
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(folder),
                                                        os.environ.get("PYTHONPATH")]))}
