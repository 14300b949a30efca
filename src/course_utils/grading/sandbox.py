"""``course-grade --sandbox``: run a learner's kernel under bubblewrap.

``bwrap`` (Debian package ``bubblewrap``) starts the kernel in new namespaces, without root and
without a daemon. Inside the sandbox:

- the whole file system is read-only (so the course, its check sources, this grader and the
  virtualenv cannot be changed), and the home folder, the course's ``solutions/`` and the
  submissions being graded are hidden (empty);
- ``/tmp`` (and ``/var/tmp``, ``/dev/shm``) is a private, empty, writable folder of the
  kernel's own; the only other writable folders are the kernel's working folder and the folder
  of its Jupyter sockets (``ipc`` transport: unix sockets work across the network namespace;
  TCP on 127.0.0.1 would not). All of them live in the kernel's folder on the grader's side,
  whose size the supervisor watches (``--tmpfs`` would put them in memory no limit sees);
- there is no network (a new network namespace with only loopback), its own process namespace
  (it sees only its own processes: not the grader, not other learners' kernels; when its first
  process ends, the kernel of Linux kills every other), its own IPC and host name, a new session
  (no terminal to inject keystrokes into), no capabilities, and it dies with its parent.

Works as root and as a normal user (unprivileged user namespaces; or a setuid ``bwrap``).
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path


@functools.cache
def bwrap_path() -> str | None:
    """The ``bwrap`` executable if it is installed and can start a sandbox here, else None."""
    found = shutil.which("bwrap")
    if found is None:
        return None
    try:
        done = subprocess.run([found, "--ro-bind", "/", "/", "--unshare-all", "--dev", "/dev",
                               "--proc", "/proc", "--die-with-parent", "--cap-drop", "ALL",
                               "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return found if done.returncode == 0 else None


def why_not_available() -> str:
    """One line saying why there is no sandbox (for the grader's warning)."""
    found = shutil.which("bwrap")
    if found is None:
        return "bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    return (f"{found} cannot start a sandbox here: unprivileged user namespaces are disabled "
            "(Ubuntu 23.10+: sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0, or an "
            "AppArmor profile for bwrap; Debian: sudo sysctl kernel.unprivileged_userns_clone=1)")


def _existing(paths: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        try:
            path = Path(p).resolve()
        except (OSError, RuntimeError):
            continue
        if path.exists() and path not in out:
            out.append(path)
    return out


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _outermost(paths: list[Path]) -> list[Path]:
    """``paths`` without those that lie inside another of them (binding the outer one is enough)."""
    return [p for p in paths if not any(o != p and _inside(p, o) for o in paths)]


def wrap(command: list[str], *, writable: Iterable[Path], hidden: Iterable[Path],
         cwd: Path, scratch: Path | None = None) -> list[str]:
    """``command`` run inside a bubblewrap sandbox (see the module docstring).

    ``writable`` folders are bound read-write at the same paths; ``hidden`` folders (or files)
    are replaced by an empty, read-only one. ``scratch`` (a folder of the grader's, whose size
    the supervisor watches) holds the sandbox's ``/tmp`` (also ``/var/tmp``) and ``/dev/shm``;
    without it they are tmpfs, in memory the watchdog does not see. The Python that runs the
    kernel, the virtualenv and every ``sys.path`` entry stay visible even when they live in
    the hidden home folder.
    """
    bwrap = bwrap_path()
    if bwrap is None:
        raise RuntimeError(why_not_available())
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL",
            "--hostname", "course-grade", "--ro-bind", "/", "/", "--dev", "/dev",
            "--proc", "/proc", "--tmpfs", "/run", "--remount-ro", "/run"]
    if scratch is not None:
        for name in ("tmp", "shm"):
            (scratch / name).mkdir(exist_ok=True)
        args += ["--bind", str(scratch / "tmp"), "/tmp", "--bind", str(scratch / "tmp"),
                 "/var/tmp", "--bind", str(scratch / "shm"), "/dev/shm"]
    else:
        args += ["--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
    read_only = ["/run"]
    package = Path(__file__).resolve().parents[2]
    keep = _outermost(_existing([sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path,
                                 package]))
    # A course (or its virtualenv) that lives under /tmp, as a CI checkout may, would vanish
    # behind the private /tmp: bind it back read-only, as it is everywhere else. Hidden folders
    # inside it (solutions/) are hidden again below.
    course = package.parent if (package.parent / "pyproject.toml").is_file() else package
    private = [Path(p).resolve() for p in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(p)]
    for needed in _outermost(_existing([*keep, course])):
        if any(_inside(needed, p) for p in private):
            args += ["--ro-bind", str(needed), str(needed)]
    home = Path(os.path.expanduser("~")).resolve()
    hide = _existing(hidden)
    if home != Path("/") and home.is_dir():
        hide.append(home)
    for path in sorted(set(hide), key=lambda p: len(p.parts)):  # outer folders first
        if path.is_dir():
            args += ["--tmpfs", str(path)]
            read_only.append(str(path))
        else:
            args += ["--ro-bind", "/dev/null", str(path)]
        # What the kernel needs from a hidden folder is bound back, read-only (a deeper hidden
        # folder, such as solutions/ in a course under the home folder, is hidden again after).
        args += [a for needed in keep if needed != path and _inside(needed, path)
                 for a in ("--ro-bind", str(needed), str(needed))]
    # GPUs: the fresh /dev has no device nodes; bind the NVIDIA and DRM ones that exist, so a
    # course on a GPU machine grades on the GPU too.
    for device in sorted(glob.glob("/dev/nvidia*")) + [d for d in ("/dev/dri",)
                                                       if os.path.exists(d)]:
        args += ["--dev-bind", device, device]
    for folder in writable:
        args += ["--bind", str(folder), str(folder)]
    for folder in read_only:  # after everything is mounted inside them
        args += ["--remount-ro", folder]
    args += ["--chdir", str(cwd), "--"]
    return args + command
