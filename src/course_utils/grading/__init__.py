"""Exercises built from solutions, graded in isolated kernels, and audited against shortcuts.

Four layers, each using only itself and the ones below (``tests/test_grading_layers.py``); what
a lower layer needs (a kernel's environment and limits, the run's seed) is passed down:

1. here, the exercise format and the check protocol, whose paths check cells import:
   ``format`` (solution markers, grading metadata, a check's sections, ``validate``),
   ``layout`` (the course's folders, a notebook's bytes), ``probe`` (the kernel's side of a
   check), ``transport`` (the report's wire format and limits), ``verdict`` (the grader's side),
   ``checks`` (``forbid``, ``check_predictions``), ``routes``, ``answers_in_package``;
2. ``running/``: running code safely: ``kernel`` (the kernel driver, with ``launch``, ``channels``
   and ``supervisor_link``), ``supervise`` (the process that owns a kernel's processes and limits),
   ``sandbox`` (bubblewrap), ``tamper`` and ``probe_source`` (the tamper probe), ``guard`` (the
   course's files, without the sandbox);
3. ``notebook/``: grading one notebook: ``pipeline`` (``grade_notebook``), ``restore`` (the
   canonical checks put back), ``run`` (cell by cell; ``judge``, ``tamper_watch`` and ``messages``
   for each reply), ``key`` (the answer key), ``report`` (results and their views), and ``static``
   (the answers' source judged);
4. ``commands/``: what people do with it: ``grade`` (``course-grade``), ``classroom`` (a class run,
   with ``submissions``, ``roster`` and ``adjustments``), ``build`` (``course-build-exercises``),
   ``release`` and ``release_files``, ``gradescope``; and ``audit`` and ``shortcuts`` (the shortcut
   audit).

The modules here that only say "moved to" keep the old paths working
(``course_utils.grading.grade`` is ``course-grade``'s entry point). The exercise format and how
the grader works are documented in CONTRIBUTING.md. Submodules are not imported here, so that
``python -m course_utils.grading.grade`` runs without a warning.
"""
