"""Layer 2 of the grader: running a learner's code safely.

The kernel driver (``kernel``; what a kernel starts with, ``launch``; its Jupyter messages,
``channels``; the grader's side of its supervisor, ``supervisor_link``), the supervisor that owns a
kernel's processes and limits (``supervise``), the bubblewrap sandbox (``sandbox``) and the tamper
probe (``tamper``, whose source the kernel runs is ``probe_source.py``). These use only the format
and protocol (``course_utils.grading``); what a kernel gets (limits, environment, seed) is passed in
by the layers above.
"""
