"""pytest set-up shared by the unit tests and the notebook runs (nbval)."""

import os
import shutil
import warnings

# TensorFlow logs its C++ start-up to stderr; warnings and errors still show.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_collection_modifyitems(session, config, items):
    """Leave stderr out of nbval's output comparison, on purpose.

    TensorFlow and TorchScript write deprecation notices and log lines to stderr whose text changes
    between versions and runs; the lessons' results are on stdout and in displayed values, which
    are still compared. A learner still sees stderr in JupyterLab. And a cell that needs what
    this machine lacks (a compiler) is run, not compared (``NEEDS``).
    """
    for item in items:
        parent = getattr(item, "parent", None)
        skip = getattr(parent, "skip_compare", None)
        if skip is not None and "stderr" not in skip:
            parent.skip_compare = (*skip, "stderr")
    _compare_only_what_this_machine_can_run(items)


#: What a lesson's cell may need (the list in its metadata, ``"needs": ["a C++ compiler"]``), and
#: how to tell whether this machine has it. Where it does not, the cell still runs (and says that
#: it skipped), and nbval leaves its output uncompared: the stored output shows what the cell does
#: where the need is met.
def _has_c_compiler() -> bool:
    from course_utils.minigraph.compile_c import CompileError, find_compiler

    try:
        find_compiler()
    except CompileError:
        return False
    return True


NEEDS = {
    "a C compiler": _has_c_compiler,  # the system's cc, or Zig's from the ziglang package
    "a C++ compiler": lambda: bool(shutil.which("g++") or shutil.which("clang++")),
}


def _compare_only_what_this_machine_can_run(items) -> None:
    found: dict[str, bool] = {}
    for item in items:
        cell = getattr(item, "cell", None)
        for need in (cell or {}).get("metadata", {}).get("needs", []):
            if need not in NEEDS:
                raise ValueError(f"{item.nodeid}: the cell needs {need!r}, which conftest.py "
                                 f"does not know; known: {sorted(NEEDS)}")
            if need not in found:
                found[need] = NEEDS[need]()
            if not found[need]:
                item.options["check"] = False
    missing = sorted(need for need, here in found.items() if not here)
    if missing:
        warnings.warn(f"this machine lacks {' and '.join(missing)}: the lessons' cells that need "
                      f"what is missing run and say they skip, and nbval does not compare their "
                      f"outputs", stacklevel=2)
