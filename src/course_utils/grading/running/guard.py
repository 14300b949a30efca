"""Without the sandbox: the course guard, which keeps the grader's and the course's files as
they were before each submission ran (``CourseGuard``), and the folders it keeps (``GRADER``)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

GRADER = Path(__file__).resolve().parents[1]  # course_utils/grading: this code and checks.py


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
