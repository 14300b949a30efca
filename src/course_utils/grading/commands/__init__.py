"""Layer 4 of the grader: what people do with it.

A learner's or instructor's ``course-grade`` (``grade``), a class run's CSV, Canvas file and
``--resume`` (``classroom``), who handed in what (``submissions``), the roster and Canvas' names
(``roster``), lateness and overrides (``adjustments``), ``course-build-exercises`` (``build``),
releases (``release``, ``release_files``) and the Gradescope bundle (``gradescope``). Nothing below
imports these.
"""
