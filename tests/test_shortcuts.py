"""The shortcut audit of every exercise (tests/fixtures/shortcuts), one kernel per notebook.

For each solutions notebook: the solution earns full marks, the stub of exercises/ earns zero
with every check failing cleanly, every ``shortcut-*.py`` fixture at most half the points (or its
``# expect:``, which may only be stricter), every ``partial-*.py`` fixture below full marks, every
``unusual-*.py`` fixture full marks. This replaces a separate nbval pass over
solutions/ and a grading run per notebook: the audit runs each solutions notebook top to bottom.
See ``course_utils/grading/audit.py`` and CONTRIBUTING.md ("Shortcut fixtures").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_audit import held_by_the_checks

from course_utils.grading import audit

ROOT = Path(__file__).resolve().parents[1]
STEMS = [p.stem for p in sorted((ROOT / "solutions").glob("*.ipynb"))]
#: Shortcuts the checks alone hold to half, whatever the static judge's cap adds (the fourth
#: attack review's routes of lessons 02 and 13: the rules' provenance, the program's tables,
#: custom rules and tracer forks), asserted on this audit's rows rather than by a second audit.
HELD_BY_THE_CHECKS = {
    "02_static_graphs": [("02.2", "shortcut-forward-diagonal-dummy-rules"),
                         ("02.4", "shortcut-library-rules-by-record"),
                         ("02.4", "shortcut-library-rules-by-vars"),
                         ("02.5", "shortcut-richardson-of-gradient"),
                         ("02.5", "shortcut-stencil-of-f"),
                         ("02.5", "shortcut-forward-over-forward")],
    "13_jax": [("13.2", "shortcut-small-array-of-factors"),
               ("13.3", "shortcut-custom-vjp-around-while-loop"),
               ("13.4", "shortcut-jvp-kept-by-getattr-value"),
               ("13.5", "shortcut-tracer-fork")],
}

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("stem", STEMS)
def test_every_variant_of_every_exercise_scores_as_it_should(stem):
    results = audit.audit_notebook(stem, root=ROOT)
    assert results, f"{stem} has no exercises"
    wrong = [r for r in results if not r.ok]
    assert not wrong, "\n" + audit.format_results(wrong)
    held_by_the_checks({(r.exercise, r.variant.name): r for r in results},
                       *HELD_BY_THE_CHECKS.get(stem, ()))


def test_every_fixture_folder_names_an_exercise_and_holds_only_fixtures():
    known = set()
    for stem in STEMS:
        import nbformat

        from course_utils.grading.format import exercises

        nb = nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
        known |= {(stem, ex) for ex in exercises(nb)}
    problems = []
    for folder in sorted(audit.fixtures_root(ROOT).glob("*/*")):
        if (folder.parent.name, folder.name) not in known:
            problems.append(f"{folder.relative_to(ROOT)}: no such exercise")
        for path in folder.iterdir():
            if not (path.suffix == ".py" and
                    path.stem.startswith(tuple(f"{k}-" for k in audit.FIXTURE_KINDS))):
                problems.append(f"{path.relative_to(ROOT)}: not shortcut-*.py, partial-*.py or "
                                f"unusual-*.py")
    assert not problems, "\n".join(problems)


def test_every_exercise_has_two_shortcuts_and_an_unusual_answer():
    missing = audit.coverage(ROOT)
    assert not missing, "\n".join(missing)


# --- the runner itself, on a tiny notebook -----------------------------------------------------


def test_fixture_parsing_splits_cells_and_reads_the_expectation(tmp_path):
    folder = tmp_path / "99.1"
    folder.mkdir()
    (folder / "shortcut-two.py").write_text(
        "# shortcut: hard-codes the answer\n# expect: <= 1\nx = 1\n# %%\ny = 2\n")
    (folder / "unusual-one.py").write_text("# unusual: recursion\nx = 1\n")
    shortcut, unusual = audit.load_fixtures(folder, 2)
    assert (shortcut.kind, shortcut.description, shortcut.expect) == (
        "shortcut", "hard-codes the answer", ("<=", "1"))
    assert shortcut.sources[1] == "y = 2" and not shortcut.problem
    assert unusual.problem.startswith("has 1 cell source(s) but the exercise has 2")


def _fixture(folder, name, *lines):
    (folder / f"{name}.py").write_text("\n".join([*lines, "x = 1", ""]))


def test_a_shortcut_may_not_expect_more_than_half_and_a_partial_not_full_marks(tmp_path):
    _fixture(tmp_path, "shortcut-a-below-full", "# shortcut: the old rule", "# expect: < full")
    _fixture(tmp_path, "shortcut-b-three", "# shortcut: three of four", "# expect: <= 3")
    _fixture(tmp_path, "shortcut-c-at-least", "# shortcut: unbounded", "# expect: >= 1")
    _fixture(tmp_path, "shortcut-d-one", "# shortcut: stricter than half", "# expect: <= 1")
    _fixture(tmp_path, "shortcut-e-half", "# shortcut: half, said", "# expect: <= half")
    _fixture(tmp_path, "shortcut-f-default", "# shortcut: no expectation")
    _fixture(tmp_path, "partial-a-full", "# partial: not partial", "# expect: full")
    _fixture(tmp_path, "partial-b-three", "# partial: an edge case", "# expect: == 3")
    _fixture(tmp_path, "unusual-a", "# unusual: right")
    problems = {v.name: v.problem for v in audit.load_fixtures(tmp_path, 1, possible=4)}
    refused = {name for name, problem in problems.items() if problem}
    assert refused == {"shortcut-a-below-full", "shortcut-b-three", "shortcut-c-at-least",
                       "partial-a-full"}
    assert problems["shortcut-a-below-full"].startswith(
        "`# expect: < full` lets a shortcut earn more than half the points (2 of 4)")
    assert "rename the file partial-<slug>.py" in problems["shortcut-a-below-full"]
    assert "a partial answer must score below full" in problems["partial-a-full"]
    # Without the exercise's points nothing can be judged yet.
    assert not any(v.problem for v in audit.load_fixtures(tmp_path, 1))


@pytest.mark.parametrize(("kind", "points", "ok"), [
    ("shortcut", 3, False), ("shortcut", 2, True), ("shortcut", 0, True),
    ("partial", 3, True), ("partial", 4, False), ("unusual", 4, True), ("unusual", 3, False)])
def test_the_default_rules_shortcut_at_most_half_partial_below_full(kind, points, ok):
    result = audit.VariantResult("99_x", "99.1", audit.Variant(f"{kind}-x", kind, ["x = 1"]),
                                 points, 4)
    audit._judge(result)
    assert result.ok is ok, result.why
    assert result.expected == {"shortcut": "<= 2", "partial": "< 4", "unusual": "== 4"}[kind]
    if not ok:
        assert result.why == f"scored {points}/4, expected {result.expected}"


def test_a_wrong_fixture_is_reported_with_its_name_and_checks(tmp_path):
    """A tiny course: one exercise, two checks; a 'shortcut' that is right and an 'unusual'
    answer that is wrong must both be reported, naming the variant and the checks."""
    import shutil

    shutil.copytree(ROOT / "tests" / "fixtures" / "grading" / "solutions", tmp_path / "solutions")
    (tmp_path / "pyproject.toml").write_text("")
    folder = tmp_path / "tests" / "fixtures" / "shortcuts" / "99_fixture" / "99.1"
    folder.mkdir(parents=True)
    (folder / "shortcut-actually-right.py").write_text(
        "# shortcut: not a shortcut at all\ndef double(x):\n    return np.asarray(x) * 2\n")
    (folder / "unusual-wrong.py").write_text(
        "# unusual: wrong for 2-D input\ndef double(x):\n    return [2 * v for v in x]\n")
    (folder / "shortcut-hard-coded.py").write_text(
        "# shortcut: the first checked case only\n"
        "def double(x):\n    return np.array([2, 4])\n")
    (folder / "shortcut-lenient.py").write_text(
        "# shortcut: asks for the old rule\n# expect: < full\n"
        "def double(x):\n    return np.array([2, 4])\n")
    (folder / "partial-lists-only.py").write_text(
        "# partial: the first checked case only, called a partial mistake\n"
        "def double(x):\n    return np.array([2, 4])\n")
    results = {(r.exercise, r.variant.name): r for r in audit.audit_notebook(
        "99_fixture", root=tmp_path, timeout=20)}
    assert [(k, r.ok) for k, r in results.items()] == [
        (("99.1", "solution"), True), (("99.1", "stub"), True),
        (("99.1", "partial-lists-only"), True),
        (("99.1", "shortcut-actually-right"), False), (("99.1", "shortcut-hard-coded"), True),
        (("99.1", "shortcut-lenient"), False), (("99.1", "unusual-wrong"), False),
        # Every check of 99.1 is visible: a lookup of what they call scores full marks.
        (("99.1", "generated-lookup"), False),
        (("99.2", "solution"), True), (("99.2", "stub"), True)]
    wrong = [r for r in results.values() if not r.ok]
    text = audit.format_results(wrong)
    assert "99.1 shortcut-actually-right (shortcut: not a shortcut at all): scored 2/2, " \
        "expected <= 1" in text
    assert "99.1 shortcut-lenient (shortcut: asks for the old rule): `# expect: < full` lets a " \
        "shortcut earn more than half the points (1 of 2)" in text
    assert results["99.1", "partial-lists-only"].expected == "< 2"
    assert "99.1 unusual-wrong (unusual: wrong for 2-D input): scored 1/2, expected == 2" in text
    assert "check in code cell 3 (1/1): passed" in text
    assert "check in code cell 4 (0/1): error" in text
    assert "AttributeError: 'list' object has no attribute 'shape'" in text


def test_the_audit_generates_a_lookup_from_the_visible_checks_only(tmp_path):
    """The tiny course again, its second check of 99.1 hidden: the lookup the audit writes from
    the calls a learner sees (the visible check's) passes that check and fails the hidden one,
    and the table says which generated shortcuts were tried and why the others were not."""
    import shutil

    import nbformat

    shutil.copytree(ROOT / "tests" / "fixtures" / "grading" / "solutions", tmp_path / "solutions")
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "solutions" / "99_fixture.ipynb"
    nb = nbformat.read(path, as_version=4)
    shape_check = [c for c in nb.cells if "zeros((2, 3))" in c.source][0]
    shape_check.metadata["tags"] = ["check", "hidden"]
    nbformat.write(nb, path)
    notes: dict[str, list[str]] = {}
    results = audit.audit_notebook("99_fixture", root=tmp_path, timeout=20, notes=notes)
    lookup = [r for r in results if r.variant.name == "generated-lookup"]
    assert [(r.exercise, r.points, r.ok, [c.cell for c in r.failed_checks]) for r in lookup] == [
        ("99.1", 1, True, [4])]
    assert lookup[0].variant.description.startswith(
        "a lookup of every call a learner sees: double (1 argument lists of 1 calls)")
    text = audit.format_results(results, notes=notes)
    assert "  99_fixture 99.1:\n    generated-lookup 1/2 (a lookup" in text
    assert "    not made, lookup: the answer is values, not functions" in text
    assert "    not made, routes: the exercise forbids no library route" in text


def test_a_known_generated_shortcut_above_half_is_printed_but_not_counted_wrong(monkeypatch):
    monkeypatch.setattr(audit, "KNOWN_ABOVE_HALF", {"99.1 generated-lookup": "reported"})
    rows = []
    for name, points in [("generated-lookup", 3), ("generated-mechanism-dummy", 3),
                         ("generated-lookup", 1)]:
        variant = audit.Variant(name, "shortcut", ["x = 1"], "d", generated=True)
        rows.append(audit.VariantResult("99_x", "99.1", variant, points, 4))
        audit._judge(rows[-1])
    assert [r.ok for r in rows] == [True, False, True]
    assert rows[0].why == "known: reported (scored 3/4, expected <= 2)"
    text = audit.format_results(rows)
    assert "generated-lookup 3/4 ABOVE HALF, known (d)" in text
    assert "generated-mechanism-dummy 3/4 ABOVE HALF (d)" in text
    assert "generated-lookup 1/4 (known entry no longer needed) (d)" in text


def test_the_lookup_is_recorded_with_the_learners_seed_and_graded_with_the_audits(tmp_path):
    """Checks that draw their inputs with run_rng (grader-drawn seeds): the lookup copies what a
    learner's Jupyter shows (DEFAULT_SEED), the audit grades with AUDIT_SEED, so even the
    visible check meets other inputs and the lookup scores 0."""
    from tests.test_grading_seeds import tiny_course

    tiny_course(tmp_path)
    results = audit.audit_notebook("98_seeds", root=tmp_path, timeout=20)
    lookup = [r for r in results if r.variant.name == "generated-lookup"]
    assert [(r.points, r.ok) for r in lookup] == [(0, True)], audit.format_results(results)
    assert "triple (1 argument lists of 1 calls)" in lookup[0].variant.description
    assert all(r.ok for r in results), audit.format_results(results)


def test_the_audit_pastes_the_packages_answer_and_judges_each_route_from_the_source(
        tmp_path, monkeypatch):
    """The tiny course with a package that answers 99.1 and routes 99.1 forbids: the audit runs
    the package's answer pasted into the answer cell (generated-course-paste), judges one
    variant per route from its source without running it, reports a route the judge does not
    see (here one whose statement is made to reach nothing) as wrong, and says per exercise
    what it tried and why not the rest."""
    import shutil

    from course_utils.grading import routes, shortcuts

    shutil.copytree(ROOT / "tests" / "fixtures" / "grading" / "solutions", tmp_path / "solutions")
    (tmp_path / "pyproject.toml").write_text("")
    package = tmp_path / "src" / "course_utils"
    package.mkdir(parents=True)
    (package / "toy.py").write_text(
        'import numpy as np\n\n\ndef twice(values):\n    """The package\'s answer."""\n'
        "    ### BEGIN SOLUTION 99.1\n    arr = np.asarray(values)  # once\n    return arr + arr\n"
        "    ### END SOLUTION\n")
    monkeypatch.setitem(routes.FORBIDDEN, "99.1", ("graphlib", "torch.autograd.grad",
                                                   ".grad_fn", routes.COMPLEX_LITERAL,
                                                   "computed:torch"))
    spelled = shortcuts.route_statement
    monkeypatch.setattr(shortcuts, "route_statement", lambda route, obj="object()": (
        (["_route = 0"], route) if route == "graphlib" else spelled(route, obj)))
    notes: dict[str, list[str]] = {}
    results = audit.audit_notebook("99_fixture", root=tmp_path, timeout=20, notes=notes)
    rows = {(r.exercise, r.variant.name): r for r in results}
    paste = rows["99.1", "generated-course-paste"]
    assert paste.variant.description.endswith("course_utils.toy.twice")
    assert paste.variant.sources[0].splitlines()[:3] == [
        "def double(x):", "    v1 = np.asarray(x)", "    return v1 + v1"]
    # It answers as the package does; the grader's copy judge reads its own package, not toy.
    assert paste.points == 2
    judged = {name.removeprefix("generated-static-route-"): r for (ex, name), r in rows.items()
              if r.variant.static_only}
    assert sorted(judged) == [".grad_fn", "graphlib", "literal:complex", "torch.autograd.grad"]
    assert all(r.exercise == "99.1" and r.checks == [] for r in judged.values())
    assert [k for k, r in judged.items() if not r.ok] == ["graphlib"]
    assert judged["graphlib"].why.startswith("the static judge does not see graphlib")
    assert judged["torch.autograd.grad"].points == 1  # half of 2, capped from the source
    text = audit.format_results(results, notes=notes)
    assert ("generated-static-route: 4 forbidden routes, one added statement each, judged from "
            "the source (not run): MISSED 1: graphlib") in text
    assert "not made, static routes: no statement spells computed:torch" in text
    assert "not made, course-paste: the package answers no part of it" in text  # 99.2
    assert "not made, static routes: the exercise forbids no route of its own" in text
    table = text.split("\n\n")[0]
    assert "generated-static-route-graphlib" in table  # the wrong one is a row
    assert "generated-static-route-.grad_fn" not in table  # the right ones summed up
