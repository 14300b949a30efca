"""Shared fixtures for the unit tests."""

# Fixture notebooks are inputs to the grading tests, not lessons: nbval must not collect them.
collect_ignore = ["fixtures"]
