"""Exercises built from solutions, graded in isolated kernels, and audited against shortcuts.

One concern per module:

- ``format``: the solution markers and the grading metadata (hidden checks included), and the
  rules a solutions notebook must follow (``validate``);
- ``build``: ``course-build-exercises``, which writes ``exercises/`` from ``solutions/``, and
  ``--release`` for a class;
- ``restore``: puts the canonical check cells (hidden ones too) back into a learner's notebook;
- ``kernel``: a small Jupyter kernel driver: verdicts from execute replies, output caps, kill all;
- ``supervise``: the process that owns a kernel's process tree and its resource limits;
- ``sandbox``: the bubblewrap command line for ``--sandbox``;
- ``tamper``: the probe and canary that tell whether the kernel is still the one checks expect;
- ``run``: runs a notebook cell by cell in one kernel, judges each cell, restarts after a crash;
- ``report``: ``CheckResult``, ``ExerciseResult`` and ``NotebookReport``, and the table, CSV, JSON
  and HTML views;
- ``grade``: ``course-grade``, which ties these together (partial credit, one row per exercise);
- ``audit``: the shortcut audit of every exercise (``tests/fixtures/shortcuts``);
- ``checks``: helpers for check cells (``forbid``, ``check_predictions``);
- ``probe``: the kernel side of a probe-and-verdict check (``report``: plain data out);
- ``verdict``: the grader side (sections, the bounded transport, the verdict run here);
- ``key``: the answer key, built from the solutions and kept by the instructor.

The exercise format and how the grader works are documented in CONTRIBUTING.md. Submodules are
not imported here, so that ``python -m course_utils.grading.grade`` runs without a warning.
"""
