"""The shortcut audit run on a lesson with chosen fixtures only, and the rule a round of issue 36's
checks is held to: the solution and the unusual answers earn full marks, and the checks alone
(before the static judge's cap) hold each shortcut to half its points."""

from __future__ import annotations

import shutil
from pathlib import Path

from course_utils.grading import audit

ROOT = Path(__file__).resolve().parents[1]


def audited(stem: str, chosen: dict[str, list[str]],
            tmp_path: Path) -> dict[tuple[str, str], audit.VariantResult]:
    """The audit of solutions/<stem>.ipynb with only the named fixtures of each exercise, by
    (exercise, variant name), the solution's rows included (no generated shortcuts)."""
    for exercise, names in chosen.items():
        folder = tmp_path / stem / exercise
        folder.mkdir(parents=True)
        for name in names:
            shutil.copy(audit.fixtures_root(ROOT) / stem / exercise / f"{name}.py", folder)
    results = audit.audit_notebook(stem, root=ROOT, fixtures=tmp_path, generated=False)
    return {(r.exercise, r.variant.name): r for r in results}


def full_marks(found: dict[tuple[str, str], audit.VariantResult],
               *keys: tuple[str, str]) -> None:
    """Each of these variants (exercise, variant name) of ``audited`` earns full marks."""
    for key in keys:
        result = found[key]
        assert result.points == result.possible, audit.format_results([result], True)


def held_by_the_checks(found: dict[tuple[str, str], audit.VariantResult],
                       *keys: tuple[str, str]) -> None:
    """The checks that pass each of these variants are worth at most half its points, whatever
    the static judge says (its cap is not counted)."""
    for key in keys:
        result = found[key]
        passed = sum(c.points for c in result.checks if c.outcome == "passed")
        assert passed <= result.possible / 2, audit.format_results([result], True)


def assert_the_checks_hold(stem: str, shortcuts: dict[str, list[str]],
                           unusual: dict[str, list[str]], tmp_path: Path) -> None:
    """Audit ``stem`` with these fixtures: the solution and each unusual answer earn full
    marks; the checks that pass a shortcut are worth at most half, whatever the static judge
    says."""
    found = audited(stem, {ex: shortcuts[ex] + unusual.get(ex, []) for ex in shortcuts}, tmp_path)
    full_marks(found, *((ex, name) for ex, names in unusual.items()
                        for name in ("solution", *names)))
    held_by_the_checks(found, *((ex, name) for ex, names in shortcuts.items() for name in names))
