"""Exercises built from solutions, graded through nbval.

One concern per module:

- ``format``: the solution markers and the grading metadata, and the rules a solutions notebook
  must follow (``validate``);
- ``build``: ``course-build-exercises``, which writes ``exercises/`` from ``solutions/``;
- ``restore``: puts the canonical check cells back into a learner's notebook;
- ``run``: runs a notebook through nbval in a subprocess, one pytest item per cell, with a
  per-cell timeout, and restarts after a cell that kills its kernel;
- ``pytest_plugin``: the pytest plugin that records each cell's outcome for ``run``;
- ``report``: ``ExerciseResult`` and ``NotebookReport``, and the table, CSV and JSON views;
- ``grade``: ``course-grade``, which ties these together.

The exercise format is documented for course authors in CONTRIBUTING.md. Submodules are not
imported here, so that ``python -m course_utils.grading.grade`` runs without a warning.
"""
