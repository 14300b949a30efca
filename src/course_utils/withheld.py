"""What a learner's release of the course raises where it withholds an answer.

Code of ``course_utils`` that answers an exercise (lesson 01's engine, the passes lesson 03 asks
for, ...) is marked ``### BEGIN SOLUTION NN.k`` ... ``### END SOLUTION``. In the repository it
runs as written; a release made with ``course-build-exercises --release`` replaces each marked
region by a line that raises :class:`AnswerWithheld`, naming the exercise and where the learner's
own answer is, until the instructor releases that lesson's solutions (``--solutions NN``).
See CONTRIBUTING.md, "Answers in the package".
"""

from __future__ import annotations

#: The exercises whose answers in this copy of the package are withheld: empty in the course's
#: repository; a release writes the ids it withholds here (``answers_in_package.strip_package``).
WITHHELD: frozenset[str] = frozenset()


class AnswerWithheld(NotImplementedError):
    """This release withholds the course's answer to an exercise; use your own (the message
    says which exercise, and where your answer is)."""


def is_withheld(exercise: str) -> bool:
    """True when this copy of the package withholds its answer to ``exercise`` ("01.2"): a
    cell that would use the course's code there (a setup cell that hands out the course's
    rules, a check's reference) can use the learner's own or another route instead.

    >>> is_withheld("01.2")  # the course's repository withholds nothing
    False
    """
    return exercise in WITHHELD


__all__ = ["AnswerWithheld", "WITHHELD", "is_withheld"]
