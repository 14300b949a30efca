"""The tool chain: which C compiler, which BLAS, and the commands that build with them.

Compiler: the system's ``cc`` (or ``gcc``, ``clang``) when there is one, else Zig's bundled
clang from PyPI (``pip install ziglang``, the ``c`` extra: about 400 MB unpacked), run as
``python -m ziglang cc``. BLAS: OpenBLAS from the ``scipy-openblas32`` wheel (a core
dependency), whose routines carry a ``scipy_`` prefix (``scipy_cblas_sgemm``). Nothing is
downloaded when a graph compiles.

Every file the course writes goes inside the folder the caller gives, under names made here;
Zig's compiler keeps a cache of its own (``~/.cache/zig``: the C runtime it builds once, about
35 CPU-seconds the first time on a machine).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import CompileError

#: Optimisation flags: -O3 vectorises the fused loops for the machine's baseline instruction
#: set. No -march=native: a library built on one learner's machine must run on another's, and
#: no -ffast-math: the loops must round as numpy does.
CFLAGS = ("-O3", "-std=c99", "-fPIC", "-w")

#: What to say when no compiler is found.
INSTALL_HINT = ("install a C compiler (Debian/Ubuntu: apt install gcc; macOS: xcode-select "
                "--install; Windows: Visual Studio's Build Tools) or, on any system, Zig's from "
                "PyPI: pip install ziglang (or pip install -e '.[c]' in the course folder)")


def find_compiler() -> list[str]:
    """The command that compiles C here: ``["cc"]``, or ``[python, "-m", "ziglang", "cc"]``.

    Raises ``CompileError`` saying what to install when there is none.
    """
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return [path]
    if importlib.util.find_spec("ziglang") is not None:
        return [sys.executable, "-m", "ziglang", "cc"]
    raise CompileError(f"mg.compile_c needs a C compiler and found none (no cc, gcc or clang on "
                       f"PATH, and the ziglang package is not installed): {INSTALL_HINT}")


def blas() -> tuple[str, str, str]:
    """``(include dir, lib dir, library name)`` of scipy-openblas32."""
    try:
        import scipy_openblas32 as ob
    except ImportError as e:
        raise CompileError("mg.compile_c links OpenBLAS from the scipy-openblas32 package, "
                           "which is not installed: pip install scipy-openblas32 (a core "
                           "dependency of the course: pip install -e . installs it)") from e
    return ob.get_include_dir(), ob.get_lib_dir(), ob.get_library()


def library_suffix() -> str:
    return {"darwin": ".dylib", "win32": ".dll"}.get(sys.platform, ".so")


def run(command: Sequence[str], folder: Path, what: str) -> None:
    """Run one build command in ``folder``; a failure raises ``CompileError`` with its output."""
    result = subprocess.run(list(command), cwd=folder, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "LC_ALL": "C"})
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()
        lines = output.splitlines()
        tail = "\n".join(lines[:30]) + ("\n..." if len(lines) > 30 else "")
        raise CompileError(f"the C compiler failed while {what} (exit {result.returncode}) in "
                           f"{folder}:\n{tail}")


def build(folder: Path, stem: str, source: str, main: str | None,
          compiler: list[str]) -> tuple[Path, Path | None]:
    """Write ``stem.c`` (and ``stem_main.c``), compile them in ``folder``; return the shared
    library and the executable (None when ``main`` is None)."""
    include, libdir, libname = blas()
    c_file = folder / f"{stem}.c"
    c_file.write_text(source)
    obj = folder / f"{stem}.o"
    lib = folder / f"{stem}{library_suffix()}"
    link = [f"-L{libdir}", f"-Wl,-rpath,{libdir}", f"-l{libname}", "-lm"]
    run([*compiler, *CFLAGS, f"-I{include}", "-c", c_file.name, "-o", obj.name], folder,
        f"compiling {c_file.name}")
    run([*compiler, "-shared", obj.name, "-o", lib.name, *link], folder,
        f"linking {lib.name}")
    exe = None
    if main is not None:
        main_file = folder / f"{stem}_main.c"
        main_file.write_text(main)
        exe = folder / (stem + (".exe" if sys.platform == "win32" else ""))
        run([*compiler, *CFLAGS, main_file.name, obj.name, "-o", exe.name, *link], folder,
            f"building the program {exe.name}")
    return lib, exe
