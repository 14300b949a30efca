"""Lesson 11's exercises (probe-and-verdict since issue 25, headings per issue 26): each heading and
the opening table state the points the grader really gives, hidden checks included, and neither
the exercises nor their Chinese edition carry 11.8's old prediction digests."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
STEM = "11_deployment"
HEADING = re.compile(r"^## Exercise (\d+\.\d+) · .*\((\d+) points?(?:, (\d+) of them hidden)?\)$")
ROW = re.compile(r"^\| (\d+\.\d+) [^|]*\| (\d+) \| (\d+) \|$")


def graded_points(nb) -> dict[str, tuple[int, int]]:
    """exercise id -> (points of all its check cells, points of its hidden ones)."""
    found: dict[str, tuple[int, int]] = {}
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if "check" in tags:
            grading = cell.metadata["grading"]
            total, hidden = found.get(grading["id"], (0, 0))
            found[grading["id"]] = (total + grading["points"],
                                    hidden + (grading["points"] if "hidden" in tags else 0))
    return found


def test_headings_and_the_opening_table_state_the_points_graded():
    nb = nbformat.read(ROOT / "solutions" / f"{STEM}.ipynb", as_version=4)
    graded = graded_points(nb)
    headings, rows, total = {}, {}, None
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            if m := HEADING.match(line):
                headings[m.group(1)] = (int(m.group(2)), int(m.group(3) or 0))
            elif m := ROW.match(line):
                rows[m.group(1)] = (int(m.group(2)), int(m.group(3)))
            elif line.startswith("| total |"):
                total = tuple(int(v) for v in line.strip("| ").split(" | ")[1:])
    assert headings == graded, f"headings {headings} != graded {graded}"
    assert rows == graded, f"opening table {rows} != graded {graded}"
    assert total == (sum(p for p, _ in graded.values()), sum(h for _, h in graded.values()))


def test_no_prediction_digest_or_expected_literal_reaches_the_learner():
    old_digests = ("a8b63a04fd65a1c9", "c69bec4a051dbd9e", "3fc952ccc5c73f70",
                   "bcdfdf66f5c6664a", "d2f2f241427f7b99", "abb6ecbd35912850")
    for folder in ("exercises", "zh/exercises"):
        nb = nbformat.read(ROOT / folder / f"{STEM}.ipynb", as_version=4)
        text = json.dumps(nb)
        assert "check_predictions" not in text
        assert not [d for d in old_digests if d in text]
        answers = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])
                   and c.metadata["grading"]["id"] == "11.8"]
        assert answers and all("NotImplementedError" in c.source and "quint8" not in c.source
                               for c in answers)
