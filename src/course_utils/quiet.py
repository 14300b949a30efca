"""Start the frameworks without the log lines that alarm a learner, at the source.

In a lesson's first code cell::

    from course_utils import quiet

    tf = quiet.tensorflow()  # instead of `import tensorflow as tf`
    torch = quiet.torch()    # instead of `import torch`

TensorFlow's C++ runtime writes its start-up notices (``oneDNN custom operations are on ...``,
``All log messages before absl::InitializeLog() ...``) straight to file descriptor 2, before it
reads ``TF_CPP_MIN_LOG_LEVEL``, once when the library loads and once when its eager context
starts. No environment variable removes them in TensorFlow 2.21, so :func:`tensorflow` imports
TensorFlow and starts its context with descriptor 2 pointed at ``/dev/null``, then puts it back.
Warnings and errors that come later still show.

PyTorch's compiler stack (Dynamo, AOTAutograd, Inductor, ``torch.export``) logs warnings through
Python's ``logging``; :func:`torch` sets those loggers to ERROR, and :func:`torch_logs` collects
chosen logs (``"recompiles"``, ``"graph_breaks"``, ...) in a cell as text, to print or inspect.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
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


# ---------------------------------------------------------------------------------------------
# PyTorch: the compiler stack's log lines (Dynamo, AOTAutograd, Inductor, torch.export)
# ---------------------------------------------------------------------------------------------

#: The level PyTorch's own loggers are set to by :func:`torch`: warnings from Dynamo, Inductor,
#: AOTAutograd and the symbolic-shapes engine are hidden, errors still show.
TORCH_LOG_LEVEL = logging.ERROR

#: ``W1129 19:45:35.458000 571 torch/_dynamo/guards.py:3162] [0/1] ...``: the prefix PyTorch's
#: log formatter puts before a message (level letter, date, time, process, file:line).
_TORCH_LOG_PREFIX = re.compile(r"^[VDIWEC]\d{4} [\d:.]+ +\d+ [^\]]+\] ")


def torch() -> ModuleType:
    """Import PyTorch with its compiler logs at ERROR level; return the module.

    ``torch.compile`` and ``torch.export`` log warnings through Python's ``logging`` (lines such as
    ``W1129 ... symbolic_shapes.py:8866] Unable to find user code corresponding to {u0}``) that say
    nothing a learner can act on. This sets every ``torch.*`` logger to ERROR with PyTorch's own
    switch, ``torch._logging.set_logs(all=logging.ERROR)`` (the same as ``TORCH_LOGS="-all"``).
    Warnings raised with Python's ``warnings`` module (TorchScript's deprecation notices, for
    example) are not touched. If you set ``TORCH_LOGS`` yourself, it wins and nothing is changed.
    Use :func:`torch_logs` to see chosen logs (recompilations, graph breaks) in a cell::

        torch = quiet.torch()  # instead of `import torch`
    """
    import torch as torch_module

    if "TORCH_LOGS" not in os.environ:
        torch_module._logging.set_logs(all=TORCH_LOG_LEVEL)
    return torch_module


@contextlib.contextmanager
def torch_logs(*artifacts: str, level: int = logging.WARNING) -> Iterator[list[str]]:
    """Collect PyTorch's log messages of the block as lines of text, instead of printing them.

    ``artifacts`` are names ``TORCH_LOGS`` accepts (``"recompiles"``, ``"graph_breaks"``,
    ``"guards"``, ``"aot_graphs"``, ...); warnings of every ``torch.*`` logger are collected too
    (``level``). The lines come without the log prefix (level, time, process, file)::

        with quiet.torch_logs("recompiles") as lines:
            compiled(torch.ones(3)); compiled(torch.ones(4))
        print("\\n".join(lines))   # [0/1] Recompiling function f in ...: size mismatch at index 0

    After the block the logs are quiet again (as after :func:`torch`). When the ``TORCH_LOGS``
    environment variable is set, PyTorch ignores this request and the list stays empty.
    """
    torch_module = torch()
    lines: list[str] = []
    buffer = io.StringIO()
    # set_logs installs fresh stream handlers on sys.stderr as it is now: the buffer
    with contextlib.redirect_stderr(buffer):
        torch_module._logging.set_logs(all=level, **dict.fromkeys(artifacts, True))
    try:
        yield lines
    finally:
        if "TORCH_LOGS" not in os.environ:
            torch_module._logging.set_logs(all=TORCH_LOG_LEVEL)  # handlers back on stderr
        lines.extend(_TORCH_LOG_PREFIX.sub("", line) for line in buffer.getvalue().splitlines())
