"""Layer 3 of the grader: grading one notebook.

Restore the canonical checks (``restore``), run the notebook cell by cell and judge each check
(``run``), with the answer key (``key``), into a report (``report``). Uses the layers below
(``running``, and the format and protocol); the commands above choose the options.
"""
