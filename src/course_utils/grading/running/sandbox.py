"""``course-grade --sandbox``: a learner's kernel under bubblewrap sees what a learner has, no more.

``bwrap`` (Debian package ``bubblewrap``) starts the kernel in new namespaces, without root and
without a daemon. The kernel's file system is built from an allow-list, read-only, on an empty
root:

- the system (``/usr``, ``/bin``, ``/lib*``, ``/sbin``, ``/etc``, ``/sys``, and ``/nix`` where it
  exists), a fresh ``/dev`` (plus the GPUs' device nodes) and ``/proc``;
- the Python that runs the kernel, the virtualenv and the folders its ``sys.path`` needs
  (wherever they live, the home folder included);
- the *release view* of the course the grader belongs to (``RELEASE_VIEW``: ``notebooks/``,
  ``exercises/``, ``src/`` and the set-up files a learner gets), wherever it is checked out.

Nothing else exists inside: not the course's ``.git``, ``tests/`` (whose fixtures hold right
answers), ``solutions/``, ``benchmarks/``, ``.ci`` or CI files; not the class folder (other
learners' notebooks) nor the grader's outputs; not the home folder, ``/srv``, ``/opt``, ``/mnt``,
``/var`` or ``/run``. Paths in ``hidden`` that lie inside a visible folder (a class folder inside
``exercises/``) are covered by an empty one.

- the kernel's writable folders are one tmpfs of a fixed size (``--disk``, bwrap ``--size``):
  its ``/tmp``, with ``/var/tmp`` and ``/dev/shm`` links to it, its working folder and the folder
  of its Jupyter sockets (``ipc`` transport: unix sockets work across the network namespace; TCP
  on 127.0.0.1 would not; the grader reaches them through ``/proc/<pid>/root``). A write past the
  size fails there (``ENOSPC``) instead of reaching the grader's disk, and the supervisor counts
  what is in it as the kernel's memory (tmpfs pages are memory no process's resident set shows).
  Nothing of the grader's file system is writable inside;
- ``/dev`` is a small read-only tmpfs holding only ``null``, ``zero``, ``full``, ``random``,
  ``urandom`` and ``tty`` (and the GPUs'), so nothing can be stored there;
- there is no network (a new network namespace with only loopback), its own process namespace
  (it sees only its own processes: not the grader, not other learners' kernels; when its first
  process ends, the kernel of Linux kills every other), its own IPC and host name, a new session
  (no terminal to inject keystrokes into), no capabilities, and it dies with its parent. System V
  shared memory and message queues (memory no process maps and no file holds) cannot be made: a
  seccomp filter answers ``shmget`` and ``msgget`` with ``EPERM`` (``ipc_filter``).

The environment is the grader's business too: ``kernel.py`` builds it from an allow-list.
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

#: The system folders every program needs, bound read-only (a symbolic link, as ``/bin`` is on
#: a merged-/usr system, is recreated as the same link).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys", "/nix")
#: What the kernel sees of the course: what a learner already has (a release, see
#: ``build.RELEASE_ITEMS``) less ``benchmarks/``, plus the exercise notebooks. Never
#: ``solutions/``, ``tests/``, ``.git``, ``.ci`` or an answer key.
RELEASE_VIEW = ("notebooks", "exercises", "src", "jupyter", "docs", "README.md",
                "pyproject.toml", "environment.yml", "Makefile", "LICENSE")


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
        if not p:  # "" in sys.path: the current folder, never bound
            continue
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


def course_root() -> Path | None:
    """The checkout of the course this grader belongs to (the folder above ``src/`` holding
    ``pyproject.toml``), or None for a package installed elsewhere."""
    package = Path(__file__).resolve().parents[3]  # .../src (or site-packages)
    return package.parent if (package.parent / "pyproject.toml").is_file() else None


def visible_paths() -> list[Path]:
    """Every folder or file bound into the sandbox besides the system's, outermost only: the
    interpreter, the virtualenv, the ``sys.path`` entries, and the course's release view. A
    ``sys.path`` entry inside the course (or holding it: the current folder, pytest's root) is
    shown only where it lies in the release view or the virtualenv."""
    prefixes = _existing([sys.prefix, sys.base_prefix, sys.exec_prefix])
    course = course_root()
    view = _existing([course / item for item in RELEASE_VIEW]) if course is not None else []
    if course is None:
        view = _existing([Path(__file__).resolve().parents[3]])
    paths = list(prefixes)
    for entry in _existing(sys.path):
        if course is not None and (_inside(course, entry) or _inside(entry, course)) and not any(
                _inside(entry, allowed) for allowed in prefixes + view):
            continue
        paths.append(entry)
    system = [Path(s) for s in SYSTEM]
    paths = [p for p in paths if not any(_inside(p, s) for s in system)]
    return _outermost(_existing([*paths, *view]))


#: The device nodes a kernel gets in its ``/dev`` (a read-only tmpfs), besides the GPUs'.
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
#: What ``wrap`` puts after ``--seccomp``: the supervisor replaces it with the number of the
#: descriptor it opened on the filter (``ipc_filter``).
SECCOMP_FD = "@seccomp-fd"
#: System calls refused inside the sandbox, per machine: (``AUDIT_ARCH_*``, numbers, and the
#: x32 flag where the machine has that ABI too). ``shmget`` and ``msgget`` make System V shared
#: memory and message queues: memory that lives on with no process mapping it and no file
#: holding it, which no limit of a normal user could see.
REFUSED_CALLS = {"x86_64": (0xC000003E, (29, 68), 0x40000000),
                 "aarch64": (0xC00000B7, (194, 186), 0)}


def ipc_filter() -> bytes | None:
    """A classic-BPF seccomp program (``struct sock_filter`` entries) that answers the calls of
    ``REFUSED_CALLS`` with ``EPERM`` and allows every other, for this machine; None where the
    machine is not in the table."""
    import platform
    import struct

    known = REFUSED_CALLS.get(platform.machine())
    if known is None:
        return None
    arch, calls, x32 = known
    numbers = [*calls, *([x32 | n for n in calls] if x32 else [])]
    load_word, jump_equal, ret = 0x20, 0x15, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_RET|K
    n = len(numbers)
    program = [(load_word, 0, 0, 4),  # seccomp_data.arch
               (jump_equal, 0, n + 1, arch),  # another ABI (i386 on x86_64): allow
               (load_word, 0, 0, 0)]  # seccomp_data.nr
    program += [(jump_equal, n - i, 0, nr) for i, nr in enumerate(numbers)]
    program += [(ret, 0, 0, 0x7FFF0000),  # SECCOMP_RET_ALLOW
                (ret, 0, 0, 0x00050000 | 1)]  # SECCOMP_RET_ERRNO | EPERM
    return b"".join(struct.pack("=HBBI", *entry) for entry in program)


@functools.cache
def sized_tmpfs() -> bool:
    """Whether this ``bwrap`` can give a tmpfs a size (``--size``, bubblewrap 0.7 and later).
    Without it the kernel's tmpfs has the system's default size, and only the memory watch,
    which counts it, bounds it."""
    found = bwrap_path()
    if found is None:
        return False
    try:
        done = subprocess.run([found, "--ro-bind", "/", "/", "--unshare-all", "--size",
                               str(2**20), "--tmpfs", "/tmp", "true"], capture_output=True,
                              timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def wrap(command: list[str], *, hidden: Iterable[Path], cwd: Path,
         writable: Iterable[Path] = (), private: Iterable[Path] = (),
         files: dict[Path, Path] | None = None, tmp_bytes: int | None = None,
         seccomp: bool = False) -> list[str]:
    """``command`` run inside a bubblewrap sandbox (see the module docstring).

    ``/tmp`` is a private tmpfs of ``tmp_bytes`` (when ``sized_tmpfs()``); ``private`` folders
    (paths under ``/tmp``) are made in it, and ``files`` (path inside: file of the grader's) are
    bound read-only into them. ``writable`` folders of the grader's are bound read-write at the
    same paths (the kernel gets none). ``hidden`` folders (or files) that lie inside a visible
    folder are replaced by an empty, read-only one (nothing else is there to hide). With
    ``seccomp``, ``--seccomp SECCOMP_FD`` loads ``ipc_filter()`` from a descriptor the caller
    opens (the supervisor).
    """
    bwrap = bwrap_path()
    if bwrap is None:
        raise RuntimeError(why_not_available())
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL",
            "--hostname", "course-grade"]
    for name in SYSTEM:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    args += ["--proc", "/proc", "--tmpfs", "/run", "--remount-ro", "/run"]
    if tmp_bytes and sized_tmpfs():
        args += ["--size", str(int(tmp_bytes))]
    args += ["--tmpfs", "/tmp", "--symlink", "/tmp", "/var/tmp"]
    # /dev: only the harmless device nodes, and no room to store anything (bwrap's --dev is a
    # writable tmpfs as large as half the machine's memory); /dev/shm is the kernel's /tmp.
    args += ["--size", str(2**16), "--tmpfs", "/dev"] if sized_tmpfs() else ["--tmpfs", "/dev"]
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    args += ["--symlink", "/tmp", "/dev/shm", "--symlink", "/proc/self/fd", "/dev/fd"]
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        args += ["--symlink", f"/proc/self/fd/{i}", f"/dev/{name}"]
    visible = visible_paths()
    for path in visible:  # after /tmp: a course or virtualenv under /tmp is bound inside it
        args += ["--ro-bind", str(path), str(path)]
    for folder in private:
        args += ["--dir", str(folder)]
    for inside, outside in (files or {}).items():
        args += ["--ro-bind", str(outside), str(inside)]
    read_only = ["/run"]
    cover = [p for p in _existing(hidden) if any(_inside(p, v) for v in visible)]
    for path in sorted(set(cover), key=lambda p: len(p.parts)):  # outer folders first
        if path.is_dir():
            args += ["--tmpfs", str(path)]
            read_only.append(str(path))
        else:
            args += ["--ro-bind", "/dev/null", str(path)]
    # GPUs: the fresh /dev has no device nodes; bind the NVIDIA and DRM ones that exist, so a
    # course on a GPU machine grades on the GPU too.
    for device in sorted(glob.glob("/dev/nvidia*")) + [d for d in ("/dev/dri",)
                                                       if os.path.exists(d)]:
        args += ["--dev-bind", device, device]
    for folder in writable:
        args += ["--bind", str(folder), str(folder)]
    for folder in [*read_only, "/dev"]:  # after everything is mounted inside them
        args += ["--remount-ro", folder]
    if seccomp:
        args += ["--seccomp", SECCOMP_FD]
    args += ["--remount-ro", "/", "--chdir", str(cwd), "--"]
    return args + command
