"""What a learner's release of the course raises where it withholds an answer.

Code of ``course_utils`` that answers an exercise (lesson 01's engine, the passes lesson 03 asks
for, ...) is marked ``### BEGIN SOLUTION NN.k`` ... ``### END SOLUTION``. In the repository it
runs as written; a release made with ``course-build-exercises --release`` replaces each marked
region by a line that raises :class:`AnswerWithheld`, naming the exercise and where the learner's
own answer is, until the instructor releases that lesson's solutions (``--solutions NN``).
See CONTRIBUTING.md, "Answers in the package".
"""

from __future__ import annotations


class AnswerWithheld(NotImplementedError):
    """This release withholds the course's answer to an exercise; use your own (the message
    says which exercise, and where your answer is)."""


__all__ = ["AnswerWithheld"]
