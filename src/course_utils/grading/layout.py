"""Where a course keeps its notebooks, and how a notebook is written to disk.

The course's folder (``find_course_root``), a release's copy of the checks (``RELEASE_CHECKS``),
the bytes of a notebook file (``notebook_bytes``, deterministic) and the timing metadata that
never reaches a learner (``TIMING_KEYS``). Every layer above reads these; this module reads
nothing of the package.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat import NotebookNode

#: Cell metadata written by Jupyter's "record timing" setting and the ExecuteTime extension.
TIMING_KEYS = ("execution", "ExecuteTime")
#: In a release (no solutions/), the exercise notebooks as built: the checks course-grade
#: restores when a learner grades their own work.
RELEASE_CHECKS = ".course-checks"


def find_course_root(start: Path | None = None, folder: str = "solutions") -> Path:
    """The course repository: the first folder, from ``start`` (default: cwd) upward, that holds
    ``folder`` (default ``solutions/``) and ``pyproject.toml``; failing that, the checkout this
    package lives in."""
    here = (start or Path.cwd()).resolve()
    package_checkout = Path(__file__).resolve().parents[3]  # src/course_utils/grading/layout.py
    for candidate in [here, *here.parents, package_checkout]:
        if (candidate / folder).is_dir() and (candidate / "pyproject.toml").is_file():
            return candidate
    raise FileNotFoundError(
        f"no course repository (a folder with {folder}/ and pyproject.toml) above {here}; "
        "run from inside the course, or pass --solutions"
    )


def notebook_bytes(nb: NotebookNode) -> bytes:
    """The file contents nbformat writes for ``nb`` (sorted keys, so deterministic)."""
    text = nbformat.writes(nb)
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")
