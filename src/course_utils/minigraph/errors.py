"""Errors that say what went wrong, where, and what to do next.

Every minigraph error names the node (or the eager op), its op, and the file and line of *your*
code that created it: the first stack frame outside ``course_utils``. Catch ``MinigraphError`` to
catch them all; catch a subclass to catch one kind.

>>> import course_utils.minigraph as mg
>>> with mg.Graph().as_default():  # doctest: +ELLIPSIS
...     x = mg.placeholder((None, 3), name="x")
...     w = mg.placeholder((4, 2), name="w")
...     y = x @ w
Traceback (most recent call last):
...
course_utils.minigraph.errors.ShapeError: while building %matmul = matmul(%x, %w) \
defined at ...:4: matmul inner dimensions differ: (None, 3) @ (4, 2) multiplies 3 columns by ...
  inputs: %x is (None, 3) float32 (defined at ...:2); %w is (4, 2) float32 (defined at ...:3)
"""

from __future__ import annotations

import os
import sys

# Frames from files under this folder belong to course_utils; the first other frame is the user's.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class MinigraphError(Exception):
    """Base class of every error minigraph raises on purpose."""


class ShapeError(MinigraphError):
    """Shapes that cannot work together: found when the node is built, not when it runs."""


class DTypeError(MinigraphError):
    """A dtype an op cannot take (``exp`` of integers, float labels, strings...)."""


class GraphError(MinigraphError):
    """A malformed graph, or values from two different graphs mixed in one op."""


class UnknownOpError(GraphError):
    """An op name that is not in ``mg.OPS``: register it with ``mg.register_op`` first."""


class FeedError(MinigraphError):
    """A bad ``feed_dict`` entry: wrong shape or dtype, or a node that cannot be fed."""


class MissingFeedError(FeedError):
    """A fetch needs a placeholder that ``feed_dict`` does not give."""


class UninitializedVariableError(MinigraphError):
    """A Variable read in a Session before ``global_variables_initializer()`` ran there."""


class GradientError(MinigraphError):
    """A gradient that cannot be computed: ``backward()`` of a non-scalar, a wrong vjp..."""


class TracingError(MinigraphError):
    """Python asked for a concrete value (``if``, ``bool``) of a symbolic one while tracing."""


class SerializationError(MinigraphError):
    """A saved graph that cannot be written or read back."""


class ArgumentError(MinigraphError, TypeError):
    """A call whose arguments do not fit: too many or too few, an unknown keyword, a value of
    the wrong kind (a string where a graph belongs). Also a ``TypeError``, as Python's own is."""


class CompileError(MinigraphError):
    """A graph ``mg.compile_c`` cannot lower to C (an op without a C template, a value it cannot
    lay out), or no C compiler to build it with."""


class ExecutionError(MinigraphError):
    """An op failed while the graph ran; the original exception is chained as ``__cause__``."""


def user_source() -> str:
    """``"file.py:LINE"`` of the innermost frame outside course_utils: where the user called us.

    Only the file's base name is kept, so messages (and notebook outputs) do not depend on where
    the course is checked out.
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
