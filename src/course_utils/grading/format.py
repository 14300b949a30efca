"""The exercise format: solution regions, grading metadata, and the rules that keep them honest.

A solution cell has metadata ``{"tags": ["solution"], "grading": {"id": "00.1"}}``::

    def double(x):
        \"\"\"Return 2 * x.\"\"\"
        ### BEGIN SOLUTION
        return 2 * x
        ### END SOLUTION

and becomes, in the exercise, the same cell with each region replaced by a stub::

    def double(x):
        \"\"\"Return 2 * x.\"\"\"
        raise NotImplementedError("Exercise 00.1: your code here")

A check cell has metadata ``{"tags": ["check"], "grading": {"id": "00.1", "points": 1}}`` and
asserts with a message that says what was expected and what came back. Several check cells may
share an id: the exercise is worth the sum of their points, and each check cell scores its own
points (partial credit). A check cell tagged ``["check", "hidden"]`` exists only in ``solutions/``:
the exercises and releases leave it out, and the instructor's grading runs it (held-out inputs
that a hard-coded answer cannot anticipate).

>>> print(strip_solutions("x = 1\\n### BEGIN SOLUTION\\ny = 2\\n### END SOLUTION", "00.1"))
x = 1
raise NotImplementedError("Exercise 00.1: your code here")

A BEGIN marker may name the exercises its region answers: ``### BEGIN SOLUTION 01.1`` (several:
``### BEGIN SOLUTION 02.2 02.5``). In a solution cell the names are optional (the cell's
``grading.id`` says it) and must include the cell's id; in the package (``src/course_utils``)
they are required: a release withholds the region until those exercises' lessons have their
solutions released (``answers_in_package.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbformat import NotebookNode

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
#: An exercise id as a marker names it: ``01.1``, ``14.1``.
EXERCISE_ID = r"\d\d\.\d+"
#: ``### BEGIN SOLUTION``, optionally followed by the exercise ids the region answers.
BEGIN_LINE = re.compile(rf"^{BEGIN}((?:[ ,]+{EXERCISE_ID})*)$")
SOLUTION_TAG = "solution"
CHECK_TAG = "check"
HIDDEN_TAG = "hidden"
#: The marker lines that cut a check cell into probe, reference and verdict (``sections``).
REFERENCE = "### REFERENCE"
VERDICT = "### VERDICT"


class FormatError(ValueError):
    """A notebook breaks the exercise format; the message names the notebook and each bad cell."""


# ---------------------------------------------------------------------------------------------
# Reading a cell's role. These accept anything a learner may have saved, so they never raise.
# ---------------------------------------------------------------------------------------------


def tags(cell: Mapping[str, Any]) -> list[str]:
    """The cell's tags, or ``[]`` when there are none (or they are not a list)."""
    found = _metadata(cell).get("tags", [])
    return [t for t in found if isinstance(t, str)] if isinstance(found, list) else []


def grading(cell: Mapping[str, Any]) -> dict[str, Any]:
    """The cell's ``grading`` metadata, or ``{}``."""
    found = _metadata(cell).get("grading", {})
    return dict(found) if isinstance(found, Mapping) else {}


def exercise_id(cell: Mapping[str, Any]) -> str | None:
    """The exercise a solution or check cell belongs to (``grading.id``), or None."""
    found = grading(cell).get("id")
    return found if isinstance(found, str) and found else None


def is_solution(cell: Mapping[str, Any]) -> bool:
    """True for a code cell tagged ``solution``."""
    return cell.get("cell_type") == "code" and SOLUTION_TAG in tags(cell)


def is_check(cell: Mapping[str, Any]) -> bool:
    """True for a code cell tagged ``check``."""
    return cell.get("cell_type") == "code" and CHECK_TAG in tags(cell)


def is_hidden(cell: Mapping[str, Any]) -> bool:
    """True for a check cell tagged ``hidden`` (it lives only in ``solutions/``)."""
    return is_check(cell) and HIDDEN_TAG in tags(cell)


def points(cell: Mapping[str, Any]) -> float | None:
    """The points a check cell is worth (``grading.points``), or None if absent or not positive."""
    found = grading(cell).get("points")
    ok = isinstance(found, (int, float)) and not isinstance(found, bool) and found > 0
    return float(found) if ok else None


def exercises(nb: NotebookNode) -> dict[str, float]:
    """Exercise id -> points possible, in the order the checks appear.

    >>> import nbformat.v4 as v4
    >>> check = {"tags": ["check"], "grading": {"id": "00.1", "points": 2}}
    >>> nb = v4.new_notebook(cells=[v4.new_code_cell("assert 1", metadata=check),
    ...                             v4.new_code_cell("assert 2", metadata=check)])
    >>> exercises(nb)
    {'00.1': 4.0}
    """
    total: dict[str, float] = {}
    for cell in nb.cells:
        if is_check(cell) and exercise_id(cell) and points(cell):
            total[exercise_id(cell)] = total.get(exercise_id(cell), 0.0) + points(cell)
    return total


def describe(cell: Mapping[str, Any], index: int) -> str:
    """How messages name a cell: its 1-based position and its first line of code.

    >>> describe({"cell_type": "code", "source": "\\ndef f(x):\\n    return x"}, 2)
    'cell 3 (`def f(x):`)'
    """
    lines = [line.strip() for line in str(cell.get("source", "")).splitlines() if line.strip()]
    first = lines[0] if lines else "empty"
    return f"cell {index + 1} (`{first[:40]}{'...' if len(first) > 40 else ''}`)"


def _metadata(cell: Mapping[str, Any]) -> Mapping[str, Any]:
    found = cell.get("metadata", {})
    return found if isinstance(found, Mapping) else {}


# ---------------------------------------------------------------------------------------------
# Solution regions
# ---------------------------------------------------------------------------------------------


def stub(exercise: str) -> str:
    """The line that replaces a solution region."""
    return f'raise NotImplementedError("Exercise {exercise}: your code here")'


def solution_regions(source: str) -> list[tuple[int, int]]:
    """The (begin, end) line numbers, 0-based and inclusive of the markers, of each region.

    Raises ValueError, naming the line, when the markers do not pair up.

    >>> solution_regions("a\\n  ### BEGIN SOLUTION\\n  b\\n  ### END SOLUTION")
    [(1, 3)]
    """
    return [(begin, end) for begin, end, _ in marked_regions(source)]


def marked_regions(source: str) -> list[tuple[int, int, tuple[str, ...]]]:
    """:func:`solution_regions` with the exercise ids each BEGIN marker names (``()``: none).

    >>> marked_regions("def f():\\n    ### BEGIN SOLUTION 02.2 02.5\\n    ### END SOLUTION")
    [(1, 2, ('02.2', '02.5'))]
    """
    regions: list[tuple[int, int, tuple[str, ...]]] = []
    begin: int | None = None
    ids: tuple[str, ...] = ()
    for n, line in enumerate(source.splitlines()):
        text = line.strip()
        begin_line = BEGIN_LINE.match(text)
        if begin_line:
            if begin is not None:
                raise ValueError(
                    f"line {n + 1}: {BEGIN} inside the region opened on line {begin + 1}; "
                    f"close that one with {END} first"
                )
            begin = n
            ids = tuple(re.findall(EXERCISE_ID, begin_line[1]))
        elif text == END:
            if begin is None:
                raise ValueError(f"line {n + 1}: {END} without a {BEGIN} before it")
            regions.append((begin, n, ids))
            begin = None
        elif text.startswith("#") and ("BEGIN SOLUTION" in text or "END SOLUTION" in text):
            # A near-miss such as "## BEGIN SOLUTION" would leave the answer in the exercise.
            raise ValueError(
                f"line {n + 1}: {text!r} looks like a marker but is not exactly {BEGIN!r} "
                f"(optionally followed by exercise ids, {BEGIN + ' 01.1'!r}) or {END!r}"
            )
    if begin is not None:
        raise ValueError(f"line {begin + 1}: {BEGIN} is never closed by {END}")
    return regions


def strip_solutions(source: str, exercise: str) -> str:
    """Replace each solution region (markers included) by a stub at the marker's indentation.

    The code around a region (signature, docstring) stays, so the learner fills in a body.
    """
    lines = source.splitlines()
    out: list[str] = []
    done = 0
    for begin, end in solution_regions(source):
        marker = lines[begin]
        indent = marker[: len(marker) - len(marker.lstrip())]
        out += [*lines[done:begin], indent + stub(exercise)]
        done = end + 1
    out += lines[done:]
    return "\n".join(out) + ("\n" if source.endswith("\n") else "")


# ---------------------------------------------------------------------------------------------
# Validation of a solutions notebook
# ---------------------------------------------------------------------------------------------


def sections(source: str) -> tuple[str, str, str] | None:
    """(probe, reference, verdict) of a check cell, or None for a check in the old format.

    Raises ValueError for markers out of order, repeated, or indented.

    >>> sections("report(got=1)\\n### VERDICT\\nassert got == 1")
    ('report(got=1)\\n', '', 'assert got == 1')
    """
    lines = source.splitlines(keepends=True)
    marks: dict[str, int] = {}
    for n, line in enumerate(lines):
        text = line.strip()
        for marker in (REFERENCE, VERDICT):
            if text.startswith(marker):
                if line[0].isspace():
                    raise ValueError(f"line {n + 1}: {marker} must start the line")
                if marker in marks:
                    raise ValueError(f"line {n + 1}: a second {marker}")
                marks[marker] = n
    if VERDICT not in marks:
        if REFERENCE in marks:
            raise ValueError(f"a {REFERENCE} section needs a {VERDICT} section after it")
        return None
    v = marks[VERDICT]
    r = marks.get(REFERENCE, v)
    if r > v:
        raise ValueError(f"{REFERENCE} must come before {VERDICT}")
    probe = "".join(lines[:r])
    reference = "".join(lines[r + 1:v]) if REFERENCE in marks else ""
    return probe, reference, "".join(lines[v + 1:])


def validate(nb: NotebookNode, name: str, *, stubs: bool = False) -> None:
    """Raise FormatError listing every problem in a solutions notebook (one line each).

    ``stubs=True`` checks an exercise notebook instead (used as the canonical checks of a
    release, which has no solutions/): its solution cells hold stubs, not marked regions.

    Each line names the notebook and the cell and says how to fix it. Checked: cell ids (the
    exercise keeps them, so builds are reproducible), balanced markers, markers only in solution
    cells, an id on every solution and check cell (``NN.k`` in ``NN_topic.ipynb``), positive
    points on every check cell, and each exercise having both a solution and a check after it.
    """
    problems: list[str] = []
    number = re.match(r"(\d+)_", Path(name).name)  # "02_static_graphs.ipynb" -> exercises 02.k
    seen = _Seen()

    def problem(index: int, text: str) -> None:
        problems.append(f"{name}: {describe(nb.cells[index], index)}: {text}")

    for i, cell in enumerate(nb.cells):
        _validate_cell(cell, i, problem, seen, number[1] if number else None, stubs)
    _validate_order(seen, problem)
    if problems:
        raise FormatError("\n".join(problems))


@dataclass
class _Seen:
    """What ``validate`` met in the cells before: their ids, and each exercise's first solution
    cell, first check cell, and whether a check of it is visible."""

    ids: set[str] = field(default_factory=set)
    first_solution: dict[str, int] = field(default_factory=dict)
    first_check: dict[str, int] = field(default_factory=dict)
    visible: set[str] = field(default_factory=set)


def _validate_cell(cell: Mapping[str, Any], i: int, problem: Callable[[int, str], None],
                   seen: _Seen, number: str | None, stubs: bool) -> None:
    """The problems of cell ``i`` alone (``validate``), said through ``problem``."""
    cell_id = cell.get("id")
    if not cell_id:
        problem(i, "has no cell id; save the notebook with a current Jupyter (nbformat 4.5+)")
    elif cell_id in seen.ids:
        problem(i, f"repeats the cell id {cell_id!r}; give it a new one")
    seen.ids.add(cell_id)
    role = {t for t in tags(cell) if t in (SOLUTION_TAG, CHECK_TAG)}
    if HIDDEN_TAG in tags(cell) and role != {CHECK_TAG}:
        problem(i, "is tagged 'hidden' but is not a check cell; only check cells can be "
                "hidden")
    if cell.cell_type != "code":
        if role:
            problem(i, f"is a {cell.cell_type} cell tagged {sorted(role)}; only code cells "
                    "can be solution or check cells")
        return
    if len(role) == 2:
        problem(i, "is tagged both 'solution' and 'check'; split it into two cells")
        return
    try:
        marked = marked_regions(cell.source)
        regions = [(begin, end) for begin, end, _ in marked]
        unbalanced = False
    except ValueError as e:
        problem(i, f"unbalanced solution markers: {e}")
        marked, regions, unbalanced = [], [], True
    ex = exercise_id(cell)
    for _, _, named in marked:
        if named and ex not in named:
            problem(i, f"a marker names {' '.join(named)} but the cell is exercise {ex}; "
                    f"name {ex} or nothing")
    if ex and number and (is_solution(cell) or is_check(cell)) \
            and not ex.startswith(number + "."):
        problem(i, f"has exercise id {ex!r}; in this notebook ids start with {number}.")
    if is_solution(cell):
        if ex is None:
            problem(i, 'is a solution cell without an exercise id; add metadata '
                    '{"grading": {"id": "NN.k"}}')
        else:
            seen.first_solution.setdefault(ex, i)
        if not regions and not unbalanced and not stubs:
            problem(i, f"is a solution cell with no {BEGIN} ... {END} region; "
                    "mark the answer, or drop the 'solution' tag")
    elif is_check(cell):
        _validate_check(cell, i, ex, bool(regions), problem, seen)
    elif regions:
        problem(i, "has solution markers but is not tagged 'solution'; the answer would "
                "be left in the exercise. Tag it and give it a grading id")


def _validate_check(cell: Mapping[str, Any], i: int, ex: str | None, marked: bool,
                    problem: Callable[[int, str], None], seen: _Seen) -> None:
    """The problems of check cell ``i`` (``validate``)."""
    if ex is None:
        problem(i, 'is a check cell without an exercise id; add metadata '
                '{"grading": {"id": "NN.k", "points": 1}}')
    else:
        seen.first_check.setdefault(ex, i)
        if HIDDEN_TAG not in tags(cell):
            seen.visible.add(ex)
    if points(cell) is None:
        problem(i, "is a check cell without points; set grading.points to a positive "
                f"number (found {grading(cell).get('points')!r})")
    if marked:
        problem(i, f"is a check cell with solution markers; move the answer to a "
                f"solution cell of exercise {ex}")
    try:
        sections(cell.source)
    except ValueError as e:
        problem(i, f"its probe, reference and verdict sections are out of order: {e}")


def _validate_order(seen: _Seen, problem: Callable[[int, str], None]) -> None:
    """Each exercise's solution before its checks, and a visible check (``validate``)."""
    for ex, i in seen.first_solution.items():
        if ex not in seen.first_check:
            problem(i, f"exercise {ex} has no check cell; add one tagged 'check' with "
                    f'{{"grading": {{"id": "{ex}", "points": 1}}}}')
        elif seen.first_check[ex] < i:
            problem(seen.first_check[ex], f"the first check of exercise {ex} comes before its "
                    "solution cell; move it after")
    for ex, i in seen.first_check.items():
        if ex not in seen.visible:
            problem(i, f"every check of exercise {ex} is hidden; keep at least one visible, so "
                    "the learner can check their work")
        if ex not in seen.first_solution:
            problem(i, f"exercise {ex} has a check but no solution cell; add one tagged "
                    f'\'solution\' with {{"grading": {{"id": "{ex}"}}}}')
