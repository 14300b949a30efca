"""Put the canonical check cells back into a learner's notebook before it is graded.

The learner gains nothing by editing a check: whatever their notebook holds, the checks that run
are the ones in ``solutions/``. A learner's cell is recognised as a given check by its cell id
(exercises keep the solution's cell ids), or else by its ``check`` tag and exercise id, in order.

- an edited check is replaced by the original, in place;
- a deleted check is put back where it belongs: after the learner's copy of the cell that
  precedes it in the canonical notebook, but never before the learner's solution cell for the
  same exercise (then: after the last such solution cell); with neither, at the end;
- a check moved above its exercise's solution cell is moved back the same way;
- a cell tagged ``check`` that matches no canonical check loses its grading metadata: it still
  runs, but earns nothing;
- a hidden check (tagged ``hidden``, only in ``solutions/``) is put in like a deleted one, without
  a note: the learner never had it.

Each of the others is reported in a note naming the check; the learner's cells are otherwise
left as they are.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from course_utils.grading.format import (
    CHECK_TAG,
    exercise_id,
    grading,
    is_check,
    is_hidden,
    is_solution,
    tags,
)

#: The solutions notebooks as ``main`` read them before grading anything: a submission graded
#: without the sandbox may rewrite the files while others are being graded.
_SOLUTIONS: dict[Path, NotebookNode] = {}


def _solutions_notebook(path: Path) -> NotebookNode:
    """The solutions notebook at ``path``: as read before grading started (``main``), else from
    the file; an unreadable one raises."""
    found = _SOLUTIONS.get(path.resolve())
    return copy.deepcopy(found) if found is not None else nbformat.read(path, as_version=4)


@dataclass
class Restored:
    """The notebook to run, and one note per check that had to be restored."""

    notebook: NotebookNode
    notes: dict[str, list[str]] = field(default_factory=dict)  # exercise id -> notes
    inserted: set[int] = field(default_factory=set)  # code cells the learner has no code cell for

    def labels(self) -> list[str]:
        """How to name each code cell of ``notebook`` so the learner finds it in their own
        notebook: ``code cell N`` counts the learner's code cells; a check the grader put in
        is ``the hidden check after code cell N`` (or ``the restored check ...``)."""
        out, number = [], 0
        for i, cell in enumerate(self.notebook.cells):
            if cell.get("cell_type") != "code":
                continue
            if i in self.inserted:
                kind = "hidden check" if is_hidden(cell) else "restored check"
                out.append(f"the {kind} after code cell {number}" if number else f"the {kind} "
                           "at the top")
            else:
                number += 1
                out.append(f"code cell {number}")
        return out

    def note(self, exercise: str, text: str) -> None:
        self.notes.setdefault(exercise, []).append(text)


def restore_checks(learner: NotebookNode, canonical: NotebookNode) -> Restored:
    """A copy of ``learner`` whose check cells are exactly those of ``canonical``.

    >>> import nbformat.v4 as v4
    >>> meta = {"tags": ["check"], "grading": {"id": "00.1", "points": 1}}
    >>> check = v4.new_code_cell("assert f() == 1", metadata=meta)
    >>> tampered = v4.new_code_cell("assert True", metadata=meta)
    >>> tampered.id = check.id
    >>> out = restore_checks(v4.new_notebook(cells=[tampered]), v4.new_notebook(cells=[check]))
    >>> out.notebook.cells[0].source, out.notes
    ('assert f() == 1', {'00.1': ["its check cell (`assert f() == 1`) differs from the course's \
(edited, or an older copy of the exercises); the course's check ran instead"]})
    """
    result = Restored(notebook=copy.deepcopy(learner))
    cells = result.notebook.cells
    checks = [c for c in canonical.cells if is_check(c)]

    # Match each canonical check to a learner cell: by cell id first, then by order among the
    # learner's cells tagged as checks of the same exercise.
    position = {c.get("id"): i for i, c in enumerate(cells) if c.get("id")}
    match: dict[int, int] = {}  # canonical check index -> learner cell index
    for k, check in enumerate(checks):
        if check.get("id") in position:
            match[k] = position[check.get("id")]
    taken = set(match.values())
    for k, check in enumerate(checks):
        if k in match:
            continue
        for i, cell in enumerate(cells):
            if i not in taken and is_check(cell) and exercise_id(cell) == exercise_id(check):
                match[k] = i
                taken.add(i)
                break

    for i, cell in enumerate(cells):
        if is_check(cell) and i not in taken:
            result.note(exercise_id(cell) or "?", "a cell tagged 'check' that is not one of the "
                        "course's checks ran, but earns no points")
            cell.metadata["tags"] = [t for t in cell.metadata["tags"] if t != CHECK_TAG]
            cell.metadata.pop("grading", None)

    # Replace matched checks in place (remembering edits); drop the ones to re-insert.
    keep: dict[int, int] = {}  # learner index -> canonical check index
    for k, i in match.items():
        ex = exercise_id(checks[k])
        if not _same_check(cells[i], checks[k]):
            result.note(ex, f"its check cell {_name(checks, k)}differs from the course's (edited, "
                        "or an older copy of the exercises); the course's check ran instead")
        solutions = [j for j, c in enumerate(cells) if is_solution(c) and exercise_id(c) == ex]
        if solutions and i < solutions[0]:
            result.note(ex, f"its check cell {_name(checks, k)}was above its solution; it ran "
                        "after the solution")
        else:
            keep[i] = k
    restored = [_fresh(checks[keep[i]]) if i in keep else c for i, c in enumerate(cells)
                if i in keep or i not in match.values()]
    # Which restored cells stand for a code cell of the learner's (messages count those).
    theirs = {id(new) for i, new in zip(
        [i for i in range(len(cells)) if i in keep or i not in match.values()], restored,
        strict=True) if cells[i].get("cell_type") == "code"}

    for k, check in enumerate(checks):
        if any(c.get("id") == check.get("id") for c in restored if is_check(c)):
            continue
        if k not in match and not is_hidden(check):
            result.note(exercise_id(check), f"its check cell {_name(checks, k)}was deleted; the "
                        "original was put back")
        restored.insert(_insertion_point(restored, canonical, check), _fresh(check))

    result.notebook.cells = restored
    result.inserted = {i for i, c in enumerate(restored)
                       if c.get("cell_type") == "code" and id(c) not in theirs}
    return result


def _insertion_point(cells: list[NotebookNode], canonical: NotebookNode, check: NotebookNode
                     ) -> int:
    """Where a missing check goes in ``cells`` (see the module docstring)."""
    ex = exercise_id(check)
    solutions = [i for i, c in enumerate(cells) if is_solution(c) and exercise_id(c) == ex]
    position = {c.get("id"): i for i, c in enumerate(cells) if c.get("id")}
    before = canonical.cells[: next(i for i, c in enumerate(canonical.cells) if c is check)]
    anchor = next((position[c.get("id")] for c in reversed(before) if c.get("id") in position),
                  None)
    if anchor is not None and (not solutions or anchor >= solutions[0]):
        return anchor + 1
    if solutions:
        return solutions[-1] + 1
    return len(cells)


def _name(checks: list[NotebookNode], k: int) -> str:
    """How a note names a check: its first line of code, and which of the exercise's checks
    it is when there are several (``(2 of 3, `# Check 00.1: ...`) ``)."""
    ex = exercise_id(checks[k])
    same = [c for c in checks if exercise_id(c) == ex and not is_hidden(c)]
    lines = [line.strip() for line in str(checks[k].source).splitlines() if line.strip()]
    first = lines[0] if lines else ""
    first = first if len(first) <= 50 else first[:47] + "..."
    position = f"{same.index(checks[k]) + 1} of {len(same)}, " if len(same) > 1 and \
        checks[k] in same else ""
    return f"({position}`{first}`) "


def _same_check(mine: NotebookNode, check: NotebookNode) -> bool:
    """Same code, tags and grading metadata (a tag such as raises-exception changes nbval's
    verdict). Other metadata, such as JupyterLab's ``scrolled``, may differ."""
    return (mine.get("cell_type") == "code" and mine.get("source") == check.source
            and sorted(tags(mine)) == sorted(tags(check)) and grading(mine) == grading(check))


def _fresh(check: NotebookNode) -> NotebookNode:
    cell = copy.deepcopy(check)
    cell.outputs, cell.execution_count = [], None
    return cell
