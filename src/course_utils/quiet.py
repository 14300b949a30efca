"""Start the frameworks without the log lines that alarm a learner, at the source.

TensorFlow's C++ runtime writes its start-up notices (``oneDNN custom operations are on ...``,
``All log messages before absl::InitializeLog() ...``) straight to file descriptor 2, before it
reads ``TF_CPP_MIN_LOG_LEVEL``, once when the library loads and once when its eager context
starts. No environment variable removes them in TensorFlow 2.21, so :func:`tensorflow` imports
TensorFlow and starts its context with descriptor 2 pointed at ``/dev/null``, then puts it back.
Warnings and errors that come later still show.

In a lesson's first code cell::

    from course_utils import quiet

    tf = quiet.tensorflow()  # instead of `import tensorflow as tf`
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from types import ModuleType

#: Set before TensorFlow loads: hide its C++ INFO and WARNING lines (errors still show).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@contextlib.contextmanager
def silenced_fd2() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null for the block (C++ code writes there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def tensorflow() -> ModuleType:
    """Import TensorFlow and start its eager context quietly; return the module.

    If the import fails, the exception still reaches you (only the C++ log lines are dropped).
    """
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    with silenced_fd2():
        import tensorflow as tf

        tf.constant(0.0)  # the eager context's start-up prints the notice a second time
    return tf
