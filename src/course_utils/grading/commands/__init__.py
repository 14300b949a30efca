"""Layer 4 of the grader: what people do with it.

A learner's or instructor's ``course-grade`` (``grade``), a class's roster, Canvas files, CSV and
``--resume`` (``classroom``), ``course-build-exercises`` (``build``), releases (``release``,
``release_files``) and the Gradescope bundle (``gradescope``). Nothing below imports these.
"""
