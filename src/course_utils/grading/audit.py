"""Moved to ``course_utils.grading.commands.audit`` (issue 41: the grader in layers).

This path keeps working for the code, notebooks and commands that name it."""

import sys

from course_utils.grading.commands import audit as _moved

if __name__ == "__main__":  # python -m course_utils.grading.audit
    sys.exit(_moved.main())
else:
    sys.modules[__name__] = _moved
