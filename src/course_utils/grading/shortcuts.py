"""Moved to ``course_utils.grading.commands.shortcuts`` (issue 41: the grader in layers).

This path keeps working for the code, notebooks and commands that name it."""

import sys

from course_utils.grading.commands import shortcuts as _moved

sys.modules[__name__] = _moved
