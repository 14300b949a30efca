"""The shortcut audit: every exercise's checks must tell a real answer from a shortcut.

    python -m course_utils.grading.audit 01_computation_graphs 02_static_graphs
    python -m course_utils.grading.audit --all          # every notebook in solutions/

For each exercise ``NN.k`` the course keeps answers as fixtures::

    tests/fixtures/shortcuts/<notebook stem>/<NN.k>/shortcut-<slug>.py   # must score <= half
    tests/fixtures/shortcuts/<notebook stem>/<NN.k>/partial-<slug>.py    # must score < full
    tests/fixtures/shortcuts/<notebook stem>/<NN.k>/unusual-<slug>.py    # must score full

A shortcut skips the exercise's point (calls the library, hard-codes the checked values, does
the work outside the graph): it may earn at most half the points. A partial answer does the
point but makes a smaller mistake (a forgotten edge case): it must score below full marks.
An unusual answer is right, written differently: full marks.

A fixture's content replaces the exercise's solution cell (several solution cells: their
sources separated by a line that is exactly ``# %%``). Its first comment lines say what it is,
and may set what it must score instead of the default::

    # shortcut: recomputes shared nodes instead of caching them (skips "each node once")
    # expect: <= 1                     (or < 2, == 0, 0, half, full ...)

Besides the fixtures, the audit generates shortcuts of its own for every exercise it can
(``generated-<slug>``, held to "at most half"), and its table says which it tried:

- ``generated-course-import``: the course's own implementation imported. Where the package
  answers the exercise (code marked ``### BEGIN SOLUTION NN.k`` or ``### ALSO ANSWERS NN.k`` in
  ``src/course_utils``, ``answers_in_package.table``), the solution cells rewritten to call it
  (``answers_in_package.course_import_answer``).
- ``generated-course-paste``: the same package functions *pasted as text* into the answer cell
  (``answers_in_package.course_paste_answer``: read from their file, under the answer's name
  and parameters, locals renamed, docstrings and comments dropped), for the copy judge
  (``notebook/copies.py``) to hold to half.
- ``generated-lookup``: every callable the answer defines replaced by a table from the
  arguments it was called with to its results, recorded in the audit's kernel over what a
  learner sees run (the solution cells' examples, set-up cells, visible checks; never a hidden
  check), a constant for anything else (``shortcuts.lookup_sources``, :func:`record_lookup`).
- ``generated-mechanism-dummy``: the mechanism the answer builds (``tf.function``, ``jax.jit``,
  ``mg.function``, ``trace``, ...) called once on a dummy, every result computed eagerly
  (``shortcuts.mechanism_sources``).
- ``generated-route-<library>``: a forbidden route of the exercise substituted for the answer
  where it has a generic substitute (``shortcuts.route_sources``: graphlib's or networkx's order,
  derivative rules by the complex step).
- ``generated-static-route-<route>``: for every route of the exercise (``routes.FORBIDDEN``,
  its checks' ``forbid(...)`` literals, the package's answers; not ``routes.EVERY``), the
  solution with one added statement that takes it (``shortcuts.route_variants``), judged from
  its source alone and never run: the static cap does not depend on the checks
  (:func:`static_routes`). A route the judge misses is a wrong row; the others are summed up
  per exercise ("N forbidden routes ... each held to half").

Where a kind does not apply, the table's notes say why (``audit_notebook(notes=...)``).

Every variant is also judged from its source, as ``course-grade`` judges a submission
(``static.judge``): an answer that reaches a route its exercise forbids (the library's autodiff,
the course's own implementation, ...) scores at most half, one that reaches the grader's
machinery 0 (``static.limit``); the table's last column names what was found.

A shortcut's ``# expect:`` may only be stricter than "at most half" (``# expect: < full`` on a
shortcut is refused: name it ``partial-`` if it is a partial mistake, or fix the checks); a
partial's may not allow full marks.

Each notebook runs in ONE kernel: the solutions notebook top to bottom; at the first solution
cell of each exercise the user namespace is saved, and each variant runs in turn (its cells in
place of the solution cells, then the cells between them and the exercise's last check, then the
checks, each check scoring its own points), the namespace put back after each. The variants are
the exercise's stub (as in ``exercises/``: must score 0, every check failing cleanly), the
fixtures, and, last, the solution itself (must score full marks), after which the notebook goes
on. So the audit also proves that every solutions notebook runs and earns full marks.

What "put back" covers is said at ``run._SNAPSHOT``: names, plain containers and arrays,
history, random states; not objects changed in place (a framework graph, a module attribute).
A fixture that changes such state can affect the variants after it; keep fixtures to the
exercise's own functions and names.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import nbformat

from course_utils.grading import answers_in_package, routes
from course_utils.grading import probe as probe_module
from course_utils.grading import verdict as verdicts
from course_utils.grading.commands import shortcuts
from course_utils.grading.commands.build import find_course_root
from course_utils.grading.format import (
    exercise_id,
    exercises,
    is_check,
    is_hidden,
    is_solution,
    points,
    strip_solutions,
    validate,
)
from course_utils.grading.notebook import key as answer_key
from course_utils.grading.notebook import static
from course_utils.grading.notebook.run import CellResult, NotebookRun, code_cells
from course_utils.grading.running.kernel import KernelError

Kind = Literal["solution", "stub", "shortcut", "partial", "unusual"]
FIXTURE_KINDS = ("shortcut", "partial", "unusual")
#: The seed the audit grades with (fixed, so that its answer keys are cached between audits;
#: not probe.DEFAULT_SEED, the one a learner's notebook uses in Jupyter).
AUDIT_SEED = 1
SEPARATOR = "# %%"
_EXPECT = re.compile(
    r"^#\s*expect:\s*(<=|>=|==|<|>|=)?\s*(full|half|[0-9]+(?:\.[0-9]+)?)\s*(?:#.*)?$",
    re.IGNORECASE)
#: Generated shortcuts found above half and reported to whoever owns the exercise's checks
#: (issue 36), "<id> <variant>" -> what scores and why. Until the checks change, the audit
#: still prints them ("ABOVE HALF, known") but does not count them wrong; remove an entry once
#: its shortcut scores at most half (the table then says "known entry no longer needed").
KNOWN_ABOVE_HALF: dict[str, str] = {
    # Not a gap the checks or the copy judge can close: each of the seven rules is a one- or
    # two-line formula (engine.add_vjp is 17 tokens), and an honest answer written as named
    # functions (the fixture unusual-named-rules) shares all 17; no judge of the text tells the
    # course's formula pasted from the learner's own. What keeps it out of a class's hands is
    # the release, which withholds the marked rules until lesson 01's solutions are out.
    "01.2 generated-course-paste": ("engine.py's one-line rules pasted: the formulas an honest "
                                    "answer writes too; a release withholds them"),
}
_OPS = {"<": float.__lt__, "<=": float.__le__, "==": float.__eq__, ">": float.__gt__,
        ">=": float.__ge__}


@dataclass
class Variant:
    """One answer to an exercise: the solution, the stub, or a fixture."""

    name: str  # "solution", "stub", or the fixture's file stem ("shortcut-no-cache")
    kind: Kind
    sources: list[str]  # one per solution cell of the exercise
    description: str = ""
    expect: tuple[str, str] | None = None  # ("<", "3"), ("==", "full"); None: the default
    path: str = ""
    problem: str = ""  # a fixture that cannot be used, and why
    generated: bool = False  # made by the audit itself, not a fixture file
    static_only: bool = False  # judged from its source alone, never run (a forbidden route)


@dataclass
class CheckScore:
    cell: int  # 1-based code cell number in the solutions notebook
    points: float
    possible: float
    outcome: str
    message: str = ""
    where: str = ""


@dataclass
class VariantResult:
    notebook: str
    exercise: str
    variant: Variant
    points: float
    possible: float
    checks: list[CheckScore] = field(default_factory=list)
    ok: bool = False
    expected: str = ""  # the rule it was held to, e.g. "< 3"
    why: str = ""  # when not ok: what is wrong
    seconds: float = 0.0
    static: str = ""  # what the static judge found, when it lowered the score

    @property
    def failed_checks(self) -> list[CheckScore]:
        return [c for c in self.checks if c.outcome != "passed"]


def fixtures_root(root: Path | None = None) -> Path:
    return (root or find_course_root()) / "tests" / "fixtures" / "shortcuts"


def load_fixtures(folder: Path, n_cells: int, possible: float | None = None) -> list[Variant]:
    """The fixtures of one exercise (``folder`` = ``.../<stem>/<id>``), sorted by name.

    With ``possible`` (the exercise's points), an ``# expect:`` that a fixture's kind does not
    allow (a shortcut above half, a partial at full marks) makes the fixture a problem.
    """
    found = []
    for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
        kind = path.stem.split("-", 1)[0]
        if kind not in FIXTURE_KINDS:
            found.append(Variant(path.stem, "shortcut", [], path=str(path), problem=(
                "a fixture's name must start with shortcut-, partial- or unusual-")))
            continue
        text = path.read_text(encoding="utf-8")
        description, expect = "", None
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            m = _EXPECT.match(line.strip())
            if m:
                op = m.group(1) or "=="
                expect = ("==" if op == "=" else op, m.group(2).lower())
            elif line.lower().startswith(f"# {kind}:") and not description:
                description = line.split(":", 1)[1].strip()
        parts = _split(text)
        variant = Variant(path.stem, kind, parts, description, expect, str(path))  # type: ignore[arg-type]
        if len(parts) != n_cells:
            variant.problem = (f"has {len(parts)} cell source(s) but the exercise has {n_cells} "
                               f"solution cell(s); separate them with a line `{SEPARATOR}`")
        elif possible is not None:
            variant.problem = expectation_problem(variant, possible)
        found.append(variant)
    return found


def generated_shortcuts(exercise: str, sources: list[str], root: Path | None = None,
                        checks: Sequence[str] = (), notes: list[str] | None = None
                        ) -> list[Variant]:
    """The shortcuts the audit makes from the exercise's source alone (its solution cells'
    ``sources``, its check cells' ``checks``): the course's own implementation imported
    (``answers_in_package``), the mechanism on a dummy, the forbidden routes with a generic
    substitute (``shortcuts``). Why a kind was not made goes to ``notes``. The lookup needs the
    kernel: :func:`record_lookup`."""
    found = []
    notes = [] if notes is None else notes
    src = (root / "src") if root and (root / "src" / "course_utils").is_dir() else None
    imported = answers_in_package.course_import_answer(sources, exercise, src)
    if imported:
        found.append(Variant("generated-course-import", "shortcut", imported[0], imported[1],
                             generated=True))
    else:
        notes.append("course-import: no answer in the package that the rewrite reaches")
    pasted = answers_in_package.course_paste_answer(sources, exercise, src)
    if pasted:
        found.append(Variant("generated-course-paste", "shortcut", pasted[0], pasted[1],
                             generated=True))
    else:
        answered = answers_in_package.table(src).get(exercise)
        notes.append("course-paste: " + (
            "no function of the answer has the name or the parameters of the package's "
            f"({', '.join(answered)})" if answered else "the package answers no part of it"))
    dummied = shortcuts.mechanism_sources(sources)
    if dummied:
        found.append(Variant("generated-mechanism-dummy", "shortcut", dummied[0], dummied[1],
                             generated=True))
    else:
        notes.append("mechanism-dummy: the answer builds none of "
                     + ", ".join(shortcuts.MECHANISMS))
    # The routes of every exercise (another process, a forged module name) have no generic
    # substitute: listing them for each exercise would hide the exercise's own.
    forbidden = sorted(static.forbidden_routes(exercise, checks) - set(routes.EVERY))
    made = shortcuts.route_sources(sources, forbidden)
    for slug, changed, description in made:
        found.append(Variant(f"generated-{slug}", "shortcut", changed, description,
                             generated=True))
    if not made:
        notes.append("routes: " + (f"no generic substitute for {', '.join(forbidden[:4])}"
                                   + (" ..." if len(forbidden) > 4 else "")
                                   if forbidden else "the exercise forbids no library route"))
    return found


def static_routes(lesson: Lesson, ex: str, notes: list[str] | None = None
                  ) -> list[VariantResult]:
    """Shortcut (c) for every forbidden route of exercise ``ex`` (``routes.FORBIDDEN``, its
    checks' ``forbid(...)`` literals, the package's answers; not ``routes.EVERY``, the routes of
    every exercise): the solution with one added statement that takes the route
    (``shortcuts.route_variants``), judged from its source alone, as the grader judges it
    before any check runs. The cap does not depend on the checks, so each is scored as the
    solution (full marks) capped by the static judge (``judge_statically``), never run: one
    scoring above half is a route the judge misses. Routes no statement spells go to
    ``notes``."""
    code, cells = lesson.code, lesson.solution_cells[ex]
    checks = [str(code[j].source) for j in lesson.check_cells.get(ex, [])]
    setup = [str(c.source) for c in code if not is_check(c) and not is_solution(c)]
    forbidden = sorted(static.forbidden_routes(ex, checks, setup) - set(routes.EVERY))
    made, unspelled = shortcuts.route_variants([str(code[i].source) for i in cells], forbidden)
    possible = lesson.possible.get(ex, 0)
    out = []
    for route, changed, statement in made:
        variant = Variant(f"generated-static-route-{route}", "shortcut", changed,
                          f"reaches {route} by `{statement}`, judged from the source alone",
                          generated=True, static_only=True)
        result = VariantResult(lesson.stem, ex, variant, possible, possible)
        judge_statically(result, lesson.nb, code, cells)
        _judge(result)
        if not result.ok:
            result.why = (f"the static judge does not see {route} in `{statement}`: the answer "
                          f"would score as the solution does ({result.why})")
        out.append(result)
    if notes is not None:
        if not forbidden:
            notes.append("static routes: the exercise forbids no route of its own")
        if unspelled:
            notes.append(f"static routes: no statement spells {', '.join(unspelled)}")
    return out


def record_lookup(run: NotebookRun, code: list, ex: str, start: int, end: int,
                  cells: list[int]) -> tuple[Variant | None, str]:
    """The lookup shortcut of exercise ``ex`` (``generated-lookup``), or (None, why not).

    In the audit's kernel, from the namespace before the exercise: the solution cells run with
    a recorder around each callable they define, then the cells up to the exercise's last
    check that a learner sees run (set-up cells, this exercise's visible checks; never a hidden
    check). The caller puts the namespace back afterwards."""
    sources = [str(code[i].source) for i in cells]
    found, why = shortcuts.callables(sources)
    if not found:
        return None, why
    assert run.kernel is not None
    # What a learner sees ran with the seed of their Jupyter, not the one the audit grades with.
    variable = probe_module.SEED_VARIABLE
    seed = (f"import os as _os\n__course_audit_seed = _os.environ.get({variable!r})\n"
            f"_os.environ[{variable!r}] = {str(probe_module.DEFAULT_SEED)!r}\n")
    back = (f"import os as _os\nif __course_audit_seed is None:\n"
            f"    _os.environ.pop({variable!r}, None)\nelse:\n"
            f"    _os.environ[{variable!r}] = __course_audit_seed\n")
    reply = run.kernel.execute(seed + shortcuts.RECORDER, run.timeout, silent=True,
                               store_history=False)
    if reply.status != "ok":
        return None, f"the recorder did not start: {reply.ename}: {reply.evalue}"
    recording = dict(zip(cells, shortcuts.recording_sources(sources, found), strict=True))
    probe, run.probe = run.probe, False
    try:
        for j in range(start, end + 1):
            cell = code[j]
            if is_check(cell) and (exercise_id(cell) != ex or is_hidden(cell)):
                continue
            if not run.alive():
                return None, "the kernel died while the visible calls were recorded"
            if j in recording:
                run.run_cell(j, recording[j], check=False)
            else:
                run.run_cell(j, cell)
    finally:
        run.probe = probe
    reply = run.kernel.execute(back, run.timeout, silent=True, store_history=False,
                               user_expressions={"t": "__course_audit_dump()"})
    dumped = reply.user_expressions.get("t", {}) if reply.status == "ok" else {}
    if dumped.get("status") != "ok":
        return None, f"the recorded calls could not be read: {dumped.get('evalue', reply.status)}"
    tables = shortcuts.decode_tables(ast.literal_eval(dumped["data"]["text/plain"]))
    made = shortcuts.lookup_sources(sources, found, tables)
    if made is None:
        return None, ("no callable of the answer was called where a learner sees it: "
                      + ", ".join(c.target for c in found))
    return Variant("generated-lookup", "shortcut", made[0], made[1], generated=True), ""


def judge_statically(result: VariantResult, nb, code: list, solution_cells: list[int]) -> None:
    """Cap the variant's points as the grader's static judge would (``static.limit``) and say
    why in ``result.static``: its sources in place of the exercise's solution cells of the
    solutions notebook ``nb`` (``code``: its code cells). Only the exercise is judged, on the
    cells up to its last check: the judge reads nothing after them for it (an answer is its
    cells and the learner's cells before the next exercise's)."""
    sources = dict(zip(solution_cells, result.variant.sources, strict=True))
    last = max([i for i, cell in enumerate(code) if is_check(cell)
                and exercise_id(cell) == result.exercise] + list(solution_cells))
    cells = [{**cell, "source": sources.get(i, cell.source)} for i, cell in enumerate(code)
             if i <= last]
    found = static.judge(cells, nb.cells, only=[result.exercise]).get(result.exercise)
    most = static.limit(result.points, result.possible, found)
    if found is not None and most < result.points:
        what = (found.machinery[0].what if found.machinery else
                f"{found.forbidden[0][0].what} (forbidden: {found.forbidden[0][1]})")
        result.static = f"static: {what}, {_num(result.points)} -> {_num(most)}"
        result.points = most


def default_rule(kind: str) -> tuple[str, str]:
    """What a variant of this kind must score when its file sets no ``# expect:``."""
    return {"solution": ("==", "full"), "stub": ("==", "0"),
            "shortcut": ("<=", "half"), "partial": ("<", "full"),
            "unusual": ("==", "full")}[kind]


def expectation_problem(variant: Variant, possible: float) -> str:
    """Why the fixture's ``# expect:`` is not allowed for its kind ("" if it is).

    A shortcut skips the point, so its rule may only be stricter than "at most half": every
    score it allows must be <= possible / 2. A partial's rule may not allow full marks.
    """
    if variant.expect is None or variant.kind not in ("shortcut", "partial"):
        return ""
    op, value = variant.expect
    target = _target(value, possible)
    # The highest score the rule allows (scores lie in [0, possible]), and whether it is allowed
    # itself (`< 3` allows every score below 3, not 3).
    highest, reached = {"<": (min(target, possible), target > possible),
                        "<=": (min(target, possible), True), "==": (target, True),
                        ">": (possible, True), ">=": (possible, True)}[op]
    half = possible / 2
    if variant.kind == "shortcut":
        allows_above = highest > half
    else:
        allows_above = highest >= possible and reached
    if not allows_above:
        return ""
    if variant.kind == "shortcut":
        return (f"`# expect: {op} {value}` lets a shortcut earn more than half the points "
                f"({_num(half)} of {_num(possible)}). A shortcut skips the exercise's point: "
                f"make the check that tests the point carry at least half the points, or, if "
                f"this answer does the point and only makes a smaller mistake, rename the file "
                f"partial-<slug>.py")
    return (f"`# expect: {op} {value}` lets a partial answer earn full marks "
            f"({_num(possible)}); a partial answer must score below full (a right answer is "
            f"an unusual-<slug>.py)")


def _split(text: str) -> list[str]:
    parts, current = [], []
    for line in text.splitlines():
        if line.rstrip() == SEPARATOR:
            parts.append("\n".join(current).strip("\n"))
            current = []
        else:
            current.append(line)
    parts.append("\n".join(current).strip("\n"))
    return parts


def _judge(result: VariantResult) -> None:
    """Set ``ok``, ``expected`` and ``why`` from the variant's kind and its ``# expect:``."""
    v, full = result.variant, result.possible
    if v.problem:
        result.ok, result.expected, result.why = False, "-", v.problem
        return
    rule = v.expect or default_rule(v.kind)
    target = _target(rule[1], full)
    result.expected = f"{rule[0]} {_num(target)}"
    result.ok = _OPS[rule[0]](float(result.points), float(target))
    if not result.ok:
        result.why = f"scored {_num(result.points)}/{_num(full)}, expected {result.expected}"
    known = KNOWN_ABOVE_HALF.get(f"{result.exercise} {v.name}") if v.generated else None
    if known and not result.ok:
        result.ok, result.why = True, f"known: {known} ({result.why})"
    broken = [c for c in result.checks if c.outcome not in ("passed", "failed", "error")]
    if v.kind in ("stub", "solution") and broken:
        result.ok = False
        result.why = (result.why + "; " if result.why else "") + "the grader could not judge " \
            + ", ".join(f"check in code cell {c.cell} ({c.outcome})" for c in broken)
    if v.kind == "stub" and any(c.outcome == "error" and not c.message for c in result.checks):
        result.ok, result.why = False, "a check of the stub failed without a message"


def _target(value: str, possible: float) -> float:
    return possible if value == "full" else possible / 2 if value == "half" else float(value)


def _num(x: float) -> str:
    return f"{x:g}"


@dataclass
class Lesson:
    """A solutions notebook as the audit reads it: its code cells, each exercise's points, and
    which code cells are each exercise's solution and checks."""

    stem: str
    path: Path
    nb: nbformat.NotebookNode
    code: list
    possible: dict[str, float]
    solution_cells: dict[str, list[int]] = field(default_factory=dict)
    check_cells: dict[str, list[int]] = field(default_factory=dict)

    def replay(self, upto: int) -> list[tuple[int, str]]:
        """The cells before code cell ``upto`` that a fresh kernel runs again (no checks)."""
        return [(j, str(self.code[j].source)) for j in range(upto) if not is_check(self.code[j])]


def read_lesson(stem: str, root: Path) -> Lesson:
    """``solutions/<stem>.ipynb`` under ``root``, validated."""
    path = root / "solutions" / f"{stem}.ipynb"
    nb = nbformat.read(path, as_version=4)
    validate(nb, str(path))
    code = code_cells(nb)
    lesson = Lesson(stem, path, nb, code, exercises(nb))
    for i, cell in enumerate(code):
        ex = exercise_id(cell)
        if is_solution(cell):
            lesson.solution_cells.setdefault(ex, []).append(i)
        elif is_check(cell):
            lesson.check_cells.setdefault(ex, []).append(i)
    return lesson


def lesson_variants(lesson: Lesson, folder: Path, root: Path, generated: bool,
                    notes: dict[str, list[str]]) -> tuple[dict[str, list[Variant]],
                                                          list[VariantResult]]:
    """Each exercise's variants (the stub, the fixtures in ``folder``/<id>, and with
    ``generated`` the shortcuts the audit makes), and a wrong row for each fixture folder that
    names no exercise of the lesson."""
    code, variants = lesson.code, {}
    for ex, cells in lesson.solution_cells.items():
        stub = Variant("stub", "stub", [strip_solutions(code[i].source, ex) for i in cells])
        variants[ex] = [stub, *load_fixtures(folder / ex, len(cells),
                                             lesson.possible.get(ex, 0))]
        if generated:
            variants[ex] += generated_shortcuts(
                ex, [code[i].source for i in cells], root,
                [str(code[j].source) for j in lesson.check_cells.get(ex, [])],
                notes.setdefault(f"{lesson.stem} {ex}", []))
    strays = []
    for extra in sorted(folder.iterdir()) if folder.is_dir() else []:
        if extra.is_dir() and extra.name not in lesson.solution_cells:
            bad = Variant(extra.name, "shortcut", [], path=str(extra),
                          problem=f"{lesson.stem} has no exercise {extra.name}")
            strays.append(VariantResult(lesson.stem, extra.name, bad, 0, 0))
    return variants, strays


def audit_notebook(stem: str, *, root: Path | None = None, timeout: float = 120.0,
                   sandbox: bool = False, fixtures: Path | None = None,
                   progress: bool = False, generated: bool = True,
                   notes: dict[str, list[str]] | None = None) -> list[VariantResult]:
    """Run every variant of every exercise of ``solutions/<stem>.ipynb`` in one kernel
    (``generated``: the shortcuts the audit makes itself too, :func:`generated_shortcuts` and
    :func:`record_lookup`; ``notes``, when given, gets ``"<stem> <id>"`` -> why a kind of
    generated shortcut was not made)."""
    notes = {} if notes is None else notes
    root = root or find_course_root()
    lesson = read_lesson(stem, root)
    variants, results = lesson_variants(lesson, (fixtures or fixtures_root(root)) / stem, root,
                                        generated, notes)
    starts = {cells[0]: ex for ex, cells in lesson.solution_cells.items()}
    canonical: dict[int, CellResult] = {}

    def say(text: str) -> None:
        if progress:
            print(text, file=sys.stderr, flush=True)

    # Graded with a seed other than the one a learner's Jupyter uses (probe.DEFAULT_SEED), as
    # course-grade draws its own: an answer built from what a learner can see meets other inputs.
    run = NotebookRun(timeout, sandbox=sandbox, seed=AUDIT_SEED)
    run.specs = verdicts.specs(lesson.nb.cells)  # probe-and-verdict checks, judged with the key
    run.key = answer_key.load(lesson.path, root / "solutions", timeout=timeout,
                              seed=AUDIT_SEED) if run.specs else None
    try:
        run.start()
        for i, cell in enumerate(lesson.code):
            if i in starts:
                results += _audit_exercise(run, lesson, starts[i], variants[starts[i]],
                                           generated=generated, notes=notes, say=say)
            if not run.alive():
                run.restart(lesson.replay(i))
            canonical[i] = run.run_cell(i, cell)
    except KernelError as e:
        raise RuntimeError(f"{stem}: the kernel could not be started: {e}") from None
    finally:
        run.close()
    if generated:
        t0, before = time.monotonic(), len(results)
        for ex in lesson.solution_cells:
            results += static_routes(lesson, ex, notes.setdefault(f"{stem} {ex}", []))
        say(f"{stem}: {len(results) - before} forbidden routes judged from the source in "
            f"{time.monotonic() - t0:.1f} s")
    return _with_solutions(lesson, results, canonical)


def _audit_exercise(run: NotebookRun, lesson: Lesson, ex: str, variants: list[Variant], *,
                    generated: bool, notes: dict[str, list[str]],
                    say: Callable[[str], None]) -> list[VariantResult]:
    """Run each variant of exercise ``ex`` in ``run``'s kernel, which has run the cells before
    the exercise: the namespace is saved first and put back after each variant (a fresh
    kernel replays the cells before it where a variant lost the kernel). With ``generated``,
    the recorded lookup shortcut (``record_lookup``) is made first and joins ``variants``."""
    code, stem = lesson.code, lesson.stem
    cells = lesson.solution_cells[ex]
    i, end = cells[0], max(lesson.check_cells.get(ex, [cells[0]]))
    run.snapshot()
    if generated:
        say(f"{stem} {ex}: recording the calls a learner sees")
        lookup, why = record_lookup(run, code, ex, i, end, cells)
        if lookup is not None:
            variants.append(lookup)
        else:
            notes.setdefault(f"{stem} {ex}", []).append(f"lookup: {why}")
        if run.alive():
            run.restore()
        else:
            run.restart(lesson.replay(i))
            run.snapshot()
    results = []
    for variant in variants:
        result = VariantResult(stem, ex, variant, 0, lesson.possible.get(ex, 0))
        if not variant.problem:
            t0 = time.monotonic()
            # Tamper probes where a false alarm would show: the right answers.
            # (A stub or shortcut must score below full marks anyway.)
            run.probe = variant.kind == "unusual"
            try:
                _run_variant(run, code, ex, i, end, cells, variant, result)
            finally:
                run.probe = True
            result.seconds = time.monotonic() - t0
            judge_statically(result, lesson.nb, code, cells)
            if run.alive():
                run.restore()
            else:
                run.restart(lesson.replay(i))
                run.snapshot()
        _judge(result)
        say(f"{stem} {ex} {variant.name}: {_num(result.points)}/"
            f"{_num(result.possible)} {'ok' if result.ok else 'WRONG'}")
        results.append(result)
    return results


def _with_solutions(lesson: Lesson, results: list[VariantResult],
                    canonical: dict[int, CellResult]) -> list[VariantResult]:
    """The rows in order: fixture folders of no exercise first, then per exercise the solution
    itself (scored from the top-to-bottom run, ``canonical``) and its variants."""
    code = lesson.code
    ordered = [r for r in results if r.exercise not in lesson.solution_cells]
    for ex, cells in lesson.solution_cells.items():
        solution = Variant("solution", "solution", [code[i].source for i in cells])
        result = VariantResult(lesson.stem, ex, solution, 0, lesson.possible.get(ex, 0))
        result.checks = [_score(i, code[i], canonical.get(i))
                         for i in lesson.check_cells.get(ex, [])]
        result.points = sum(c.points for c in result.checks)
        judge_statically(result, lesson.nb, code, cells)
        _judge(result)
        last = max(lesson.check_cells.get(ex, [0]))
        failing = [(j, r) for j, r in sorted(canonical.items()) if j < last and
                   r.outcome not in ("passed", "skipped") and not is_check(code[j])]
        if failing and not result.ok:
            j, r = failing[0]
            result.why += f"; code cell {j + 1} failed first: {r.summary}"
        ordered += [result, *(r for r in results if r.exercise == ex)]
    return ordered


def _run_variant(run: NotebookRun, code: list, ex: str, start: int, end: int,
                 solution_cells: list[int], variant: Variant, result: VariantResult) -> None:
    replaced = dict(zip(solution_cells, variant.sources, strict=True))
    outcomes: dict[int, CellResult] = {}
    for j in range(start, end + 1):
        cell = code[j]
        if is_check(cell) and exercise_id(cell) != ex:
            continue  # another exercise's check: not this variant's business
        if not run.alive():
            outcomes[j] = CellResult(j, "not run", "not run: an earlier cell lost the kernel")
            continue
        outcomes[j] = run.run_cell(j, replaced[j]) if j in replaced else run.run_cell(j, cell)
    result.checks = [_score(j, code[j], outcomes.get(j)) for j in range(start, end + 1)
                     if is_check(code[j]) and exercise_id(code[j]) == ex]
    result.points = sum(c.points for c in result.checks)
    lost = [r for r in outcomes.values() if r.kernel_lost]
    if lost:
        result.checks.append(CheckScore(lost[0].index + 1, 0, 0, lost[0].outcome,
                                        lost[0].message))


def _score(index: int, cell, result: CellResult | None) -> CheckScore:
    worth = points(cell) or 0.0
    if result is None:
        return CheckScore(index + 1, 0, worth, "not run", "not run")
    message = result.message + (f"\n(at {result.where})" if result.where else "")
    return CheckScore(index + 1, worth if result.outcome == "passed" else 0, worth,
                      result.outcome, message.strip(), result.where)


# --- reports -----------------------------------------------------------------------------------


def format_results(results: list[VariantResult], verbose: bool = False,
                   notes: dict[str, list[str]] | None = None) -> str:
    """A table (one row per variant), then the details of every wrong row (``verbose``: all),
    then per exercise the generated shortcuts tried, their scores, and (``notes``, from
    :func:`audit_notebook`) why the other kinds were not made."""
    if not results:
        return "no exercises"
    rows = [("notebook", "exercise", "variant", "points", "expected", "verdict",
             "checks that failed")]
    for r in results:
        if r.variant.static_only and r.ok:
            continue  # summed up per exercise under "generated shortcuts tried"
        failed = ", ".join(f"cell {c.cell}" for c in r.failed_checks) or "-"
        if r.static:
            failed += f"; {r.static}"
        score = f"-/{_num(r.possible)}" if r.variant.problem else \
            f"{_num(r.points)}/{_num(r.possible)}"  # a fixture with a problem does not run
        rows.append((r.notebook, r.exercise, r.variant.name, score, r.expected,
                     "ok" if r.ok else "WRONG", failed))
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    lines = ["  ".join(f"{v:<{w}}" for v, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    detail = [r for r in results if (verbose and not r.variant.static_only) or not r.ok]
    if detail:
        lines += ["", "details:"]
        for r in detail:
            head = f"{r.notebook} {r.exercise} {r.variant.name}"
            if r.variant.description:
                head += f" ({r.variant.kind}: {r.variant.description})"
            lines.append(f"- {head}: {r.why or 'ok'}" + (f" [{r.variant.path}]"
                                                          if r.variant.path else ""))
            for c in r.checks:
                state = "passed" if c.outcome == "passed" else c.outcome
                lines.append(f"    check in code cell {c.cell} "
                             f"({_num(c.points)}/{_num(c.possible)}): {state}")
                if c.outcome != "passed" and c.message:
                    lines += [f"        {line}" for line in c.message.splitlines()]
    tried: dict[str, list[str]] = {}
    static_routes_: dict[str, list[VariantResult]] = {}
    for r in results:
        if r.variant.static_only:
            static_routes_.setdefault(f"{r.notebook} {r.exercise}", []).append(r)
        elif r.variant.generated:
            tried.setdefault(f"{r.notebook} {r.exercise}", []).append(
                f"{r.variant.name} {_num(r.points)}/{_num(r.possible)}{_above(r)}"
                f"{f' [{r.static}]' if r.static else ''} "
                f"({r.variant.description})")
    notes = notes or {}
    if tried or static_routes_ or any(notes.values()):
        lines += ["", "generated shortcuts tried:"]
        for where in dict.fromkeys([*tried, *static_routes_, *notes]):
            lines.append(f"  {where}:")
            lines += [f"    {name}" for name in tried.get(where, [])]
            judged = static_routes_.get(where, [])
            if judged:
                missed = [r.variant.name.removeprefix("generated-static-route-")
                          for r in judged if r.points > r.possible / 2]
                lines.append(f"    generated-static-route: {len(judged)} forbidden routes, one "
                             f"added statement each, judged from the source (not run): "
                             + (f"MISSED {len(missed)}: {', '.join(missed)}" if missed else
                                "each held to half"))
            if where not in tried and not judged:
                lines.append("    none")
            lines += [f"    not made, {why}" for why in notes.get(where, [])]
    wrong = sum(not r.ok for r in results)
    judged = sum(r.variant.static_only for r in results)
    lines += ["", f"{len(results) - judged} variants run, {judged} routes judged from the source, "
              f"{wrong} wrong (the rules, unless a fixture's "
              f"`# expect:` is stricter: solution and unusual == full, stub == 0, shortcut <= "
              f"half, partial < full)"]
    return "\n".join(lines)


def _above(r: VariantResult) -> str:
    known = f"{r.exercise} {r.variant.name}" in KNOWN_ABOVE_HALF
    if r.points > r.possible / 2:
        return " ABOVE HALF, known" if known else " ABOVE HALF"
    return " (known entry no longer needed)" if known else ""


def to_json(results: list[VariantResult]) -> str:
    return json.dumps([{**asdict(r), "failed_checks": [c.cell for c in r.failed_checks]}
                       for r in results], indent=2)


def coverage(root: Path | None = None) -> list[str]:
    """Exercises without two shortcut fixtures and one unusual answer (one line each).

    Partial answers (``partial-*.py``) do not count: they show a smaller mistake, not that
    skipping the point costs at least half the points.
    """
    root = root or find_course_root()
    missing = []
    for path in sorted((root / "solutions").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for ex in exercises(nb):
            folder = fixtures_root(root) / path.stem / ex
            names = [p.stem for p in folder.glob("*.py")] if folder.is_dir() else []
            shortcuts = sum(n.startswith("shortcut-") for n in names)
            unusual = sum(n.startswith("unusual-") for n in names)
            partial = sum(n.startswith("partial-") for n in names)
            if shortcuts < 2 or unusual < 1:
                also = f", {partial} partial(s), which do not count" if partial else ""
                missing.append(f"{path.stem} {ex}: {shortcuts} shortcut(s), {unusual} unusual "
                               f"answer(s){also} in {folder.relative_to(root)} (need 2 "
                               f"shortcuts and 1 unusual)")
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.grading.audit",
        description="Grade each exercise's shortcut and unusual answers (tests/fixtures/"
                    "shortcuts) in one kernel per notebook.")
    parser.add_argument("stems", nargs="*", metavar="NOTEBOOK",
                        help="notebook stems (01_computation_graphs) or paths to them")
    parser.add_argument("--all", action="store_true", help="every notebook in solutions/")
    parser.add_argument("--timeout", type=float, default=120.0, help="per-cell timeout (s)")
    parser.add_argument("--sandbox", action="store_true", help="run the kernels under bwrap")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-generated", action="store_true",
                        help="only the fixtures: not the shortcuts the audit makes itself")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="details for every variant, not only the wrong ones")
    parser.add_argument("--coverage", action="store_true",
                        help="also list exercises without 2 shortcut and 1 unusual fixtures "
                             "(partials do not count; exit 1 if any)")
    args = parser.parse_args(argv)
    root = find_course_root()
    stems = [Path(s).stem for s in args.stems]
    if args.all:
        stems = [p.stem for p in sorted((root / "solutions").glob("*.ipynb"))]
    if not stems:
        parser.error("name at least one notebook, or --all")
    results: list[VariantResult] = []
    notes: dict[str, list[str]] = {}
    status = 0
    for stem in stems:
        if not (root / "solutions" / f"{stem}.ipynb").is_file():
            print(f"error: no solutions/{stem}.ipynb", file=sys.stderr)
            status = 2
            continue
        t0 = time.monotonic()
        results += audit_notebook(stem, root=root, timeout=args.timeout, sandbox=args.sandbox,
                                  progress=not args.json, generated=not args.no_generated,
                                  notes=notes)
        print(f"{stem}: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    print(to_json(results) if args.json else format_results(results, args.verbose, notes))
    if args.coverage:
        missing = coverage(root)
        if missing:
            print("\nexercises without their fixtures:\n" + "\n".join(f"  {m}" for m in missing))
            status = status or 1
    if any(not r.ok for r in results):
        status = status or 1
    return status


if __name__ == "__main__":
    sys.exit(main())
