"""Exercise notebooks with the solutions' answers pasted in: how tests make an honest learner."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import nbformat

from course_utils.grading.format import is_solution

ROOT = Path(__file__).resolve().parents[1]


def solution_answers(stem: str) -> dict[str, str]:
    """The answer cells of ``solutions/<stem>.ipynb``, by cell id."""
    solutions = nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
    return {c.id: c.source for c in solutions.cells if is_solution(c)}


def answered(path: Path, answers: Mapping[str, str]) -> tuple[nbformat.NotebookNode, int]:
    """The exercise notebook at ``path`` with each answer cell whose id ``answers`` holds given
    that source, and how many cells were given one."""
    nb = nbformat.read(path, as_version=4)
    pasted = 0
    for cell in nb.cells:
        if is_solution(cell) and cell.id in answers:
            cell.source = answers[cell.id]
            pasted += 1
    return nb, pasted
