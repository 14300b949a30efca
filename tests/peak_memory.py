"""The peak resident memory of a piece of Python run in a fresh interpreter (issue 37's loaders).

``peak_of(code, *args)`` runs ``code`` with ``args`` in a child of a small wrapper process, which
prints the child's output and then ``RUSAGE_CHILDREN.ru_maxrss``: its only child, so nothing the
test process did before counts. The child imports the package from the same source tree as the
tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import course_utils

WRAPPER = """
import resource, subprocess, sys
done = subprocess.run([sys.executable, "-c", sys.argv[1], *sys.argv[2:]], capture_output=True,
                      text=True)
print(done.stdout.strip() or done.stderr[-2000:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def peak_of(code: str, *args: str, timeout: float = 300) -> tuple[str, int]:
    """(what ``code`` printed, the peak resident bytes of the process that ran it)."""
    src = str(Path(course_utils.__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-c", WRAPPER, code, *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": src})
    *said, peak = done.stdout.strip().splitlines()
    return "\n".join(said), int(peak)
