"""Layer 3 of the grader: grading one notebook.

Restore the canonical checks (``restore``), run the notebook cell by cell (``run``), judge each
reply and check (``judge``, with the answer key, ``key``), watch for tampering around the checks
(``tamper_watch``), say errors as the learner reads them (``messages``), into a report
(``report``). Uses the layers below
(``running``, and the format and protocol); the commands above choose the options.
"""
