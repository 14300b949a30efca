"""Answers in the package (answers_in_package.py): the course's own code that answers an exercise
is marked, a release withholds it until the lesson's solutions are released, and what a release
withholds still imports and says where the learner's own answer is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.grading import answers_in_package as aip
from course_utils.grading import build
from course_utils.grading.format import exercises
from course_utils.grading.release import MANIFEST

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def _code_lines(text: str, answer: aip.Answer) -> list[str]:
    lines = text.splitlines()[answer.begin + 1:answer.end]
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def _distinctive(answer: aip.Answer) -> str:
    """The longest code line of the region that occurs once in its module."""
    text = (SRC / answer.path).read_text(encoding="utf-8")
    once = [line for line in _code_lines(text, answer) if text.count(line) == 1]
    assert once, f"{answer.dotted}: no line of its region is unique in {answer.path}"
    return max(once, key=len)


def _run(release: Path, code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(release / "src")}
    return subprocess.run([sys.executable, "-c", code], cwd=release, env=env,
                          capture_output=True, text=True, timeout=300)


def test_every_marked_region_names_an_exercise_of_solutions():
    known = set()
    for path in (ROOT / "solutions").glob("*.ipynb"):
        known |= set(exercises(nbformat.read(path, as_version=4)))
    answers = aip.scan(SRC)
    assert answers, "the package marks no answer"
    unknown = [f"{a.path}:{a.begin + 1} ({a.dotted}) names {ex}"
               for a in answers for ex in a.exercises if ex not in known]
    assert not unknown, "\n".join(unknown)


def test_the_table_names_lesson_01s_engine_and_the_issues_routes():
    table = aip.table(SRC)
    assert "course_utils.engine.topo_order" in table["01.1"]
    assert "course_utils.engine.VJP" in table["01.2"], "the table the rules live in"
    assert "course_utils.engine_forward.jvp" in table["01.4"]
    assert "course_utils.engine.gradients" in table["02.5"]
    assert "course_utils.minigraph.passes.fold.fold_constants" in table["03.1"]
    assert "course_utils.minigraph.session.prune" in table["03.2"], "kept, but in the table"
    assert "course_utils.bench.break_even" in table["10.1"]
    assert "course_utils.minigraph.onnx._max_pool2d" in table["14.1"]


def test_markers_outside_a_function_or_without_an_exercise_are_refused():
    with pytest.raises(ValueError, match="outside a function"):
        aip.scan_text("### BEGIN SOLUTION 01.1\nx = 1\n### END SOLUTION\n", "course_utils/m.py")
    with pytest.raises(ValueError, match="name the exercise"):
        aip.scan_text("def f():\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION\n",
                      "course_utils/m.py")
    with pytest.raises(ValueError, match="looks like a marker"):
        aip.scan_text("def f():\n    ## BEGIN SOLUTION 01.1\n    pass\n", "course_utils/m.py")
    # a docstring that shows the markers is not a region (only real comments are)
    assert aip.scan_text('"""\n### BEGIN SOLUTION\n"""\n', "course_utils/m.py") == []


def test_strip_keeps_kept_functions_and_released_lessons_and_the_module_compiles():
    text = ("def f(x):\n    ### BEGIN SOLUTION 01.1\n    return x\n    ### END SOLUTION\n\n\n"
            "def g(x):\n    ### ALSO ANSWERS 01.1: lesson 00 needs it\n    return -x\n\n\n"
            "def h(x):\n    ### BEGIN SOLUTION 02.1\n    return 2 * x\n    ### END SOLUTION\n")
    answers = aip.scan_text(text, "course_utils/m.py")
    stripped = aip.strip(text, answers, {"01.1"}, lambda ex: f"exercises/{ex}.ipynb")
    namespace: dict = {}
    exec(compile(stripped, "m.py", "exec"), namespace)
    with pytest.raises(NotImplementedError, match=r"course_utils\.m\.f is exercise 01\.1's "
                       r"answer: it is released with lesson 01's solutions.*exercises/01\.1"):
        namespace["f"](1)
    assert namespace["g"](1) == -1 and namespace["h"](1) == 2


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("class") / "release"
    assert build.main(["--release", str(target), "--lessons", "01,02"]) == 0
    return target


def test_a_release_without_solutions_holds_none_of_the_answers(release):
    answers = [a for a in aip.scan(SRC) if not a.kept]
    assert len(answers) >= 20
    leaked = []
    for answer in answers:
        line = _distinctive(answer)
        if line in (release / "src" / answer.path).read_text(encoding="utf-8"):
            leaked.append(f"{answer.dotted}: {line}")
    assert not leaked, "\n".join(leaked)
    assert json.loads((release / MANIFEST).read_text())["solutions"] == []
    grep = subprocess.run(["grep", "-rnE", "^ *### BEGIN SOLUTION", "src/course_utils"],
                          cwd=release, capture_output=True, text=True)
    assert [line for line in grep.stdout.splitlines() if "/grading/" not in line] == []
    # kept answers stay: every Session prunes, every bench verdict needs the median's interval
    session = (release / "src/course_utils/minigraph/session.py").read_text()
    assert "### ALSO ANSWERS 03.2" in session and "needed, stack = set(), list(outputs)" in session


def test_the_release_imports_and_its_stubs_say_where_the_learners_answer_is(release):
    done = _run(release, f"""
import course_utils.minigraph as mg, course_utils.engine as engine
import course_utils.engine_forward, course_utils.tape, course_utils.bench as bench
assert engine.__file__.startswith({str(release / "src")!r}), engine.__file__
from course_utils.withheld import AnswerWithheld, is_withheld
assert is_withheld("01.1") and is_withheld("14.1") and not is_withheld("00.1")
with mg.Graph().as_default() as g:  # minigraph still runs, its withheld passes skipped
    x = mg.placeholder((2,), name="x")
    y = mg.exp(x * mg.constant(1.0)) + mg.exp(mg.constant(0.0))
for call in (lambda: engine.topo_order([engine.placeholder("x")]),
             lambda: engine.VJP["tanh"](1.0, 0.5, 0.5),
             lambda: bench.break_even(1.0, 0.001, 0.002),
             lambda: mg.passes.fold_constants(g)):
    try:
        call()
    except AnswerWithheld as e:
        print(e)
    else:
        raise SystemExit("not withheld")
print([round(float(v), 3) for v in mg.Session(g).run(y, {{x: [0.0, 1.0]}})])
""")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == ("course_utils.engine.topo_order is exercise 01.1's answer: it is "
                        "released with lesson 01's solutions; until then, use your own from "
                        "exercises/01_computation_graphs.ipynb, exercise 01.1")
    assert "course_utils.engine.tanh_vjp is exercise 01.2's answer" in lines[1]
    assert "bench._calls_to_repay is exercise 10.1's answer" in lines[2]
    assert "exercises/10_performance.ipynb" in lines[2], "named though 10 is not released yet"
    assert "fold._try_fold is exercise 03.1's answer" in lines[3]
    assert lines[4] == "[2.0, 3.718]"


def test_solutions_01_restores_lesson_01s_answers_and_a_later_release_keeps_them(release):
    assert build.main(["--release", str(release), "--solutions", "01"]) == 0
    done = _run(release, "from course_utils.withheld import is_withheld as w\n"
                "print(w('01.2'), w('02.1'))")
    assert done.stdout.split() == ["False", "True"], done.stderr
    assert json.loads((release / MANIFEST).read_text())["solutions"] == ["01"]
    forward = (release / "src/course_utils/engine_forward.py").read_text()
    assert forward == (SRC / "course_utils/engine_forward.py").read_text()
    engine = (release / "src/course_utils/engine.py").read_text()
    for answer in aip.scan(SRC):
        if answer.path == "course_utils/engine.py":
            restored = _distinctive(answer) in engine
            assert restored == (answer.lessons == ("01",)), answer.dotted
    done = _run(release, "from course_utils.engine import *\n"
                "x, w = placeholder('x'), placeholder('w')\ny = tanh(x * w)\n"
                "print(round(float(backprop(y, evaluate([y], {x: 0.5, w: 2.0}))[w]), 4))")
    assert done.returncode == 0 and done.stdout.strip() == "0.21", done.stderr
    assert build.main(["--release", str(release), "--lessons", "03"]) == 0
    assert json.loads((release / MANIFEST).read_text())["solutions"] == ["01"]
    assert (release / "src/course_utils/engine_forward.py").read_text() == forward
    assert build.main(["--release", str(release), "--solutions", "42"]) == 2


def _solution_sources(stem: str) -> dict[str, list[str]]:
    from course_utils.grading.format import exercise_id, is_solution

    nb = nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
    found: dict[str, list[str]] = {}
    for cell in nb.cells:
        if is_solution(cell):
            found.setdefault(exercise_id(cell), []).append(cell.source)
    return found


def test_the_audits_generated_shortcut_imports_the_courses_answer_and_the_judge_sees_it():
    from course_utils.grading import audit

    ones, twos = _solution_sources("01_computation_graphs"), _solution_sources("02_static_graphs")
    (topo,), described = aip.course_import_answer(ones["01.1"], "01.1", SRC)
    assert "return _course_module.topo_order(outputs)" in topo, topo
    assert described.endswith("course_utils.engine.topo_order")
    rules, _ = aip.course_import_answer(ones["01.2"], "01.2", SRC)
    assert 'VJP["mul"] = _course_module.VJP["mul"]' in rules[0]
    (second,), _ = aip.course_import_answer(twos["02.5"], "02.5", SRC)
    assert "from course_utils.engine import gradients" in second  # gradients twice, the course's
    assert aip.course_import_answer(ones["01.1"], "00.1", SRC) is None  # no answer in the package
    # the audit holds it to half through the grader's static judge, as course-grade would
    nb = nbformat.read(ROOT / "solutions" / "01_computation_graphs.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    cells = [i for i, c in enumerate(code) if c.get("metadata", {}).get("grading", {})
             .get("id") == "01.1" and "solution" in c.metadata.get("tags", [])]
    variant = audit.Variant("generated-course-import", "shortcut", [topo], generated=True)
    result = audit.VariantResult("01_computation_graphs", "01.1", variant, 4.0, 4.0)
    audit.judge_statically(result, nb, code, cells)
    assert result.points == 2.0 and "course_utils.engine.topo_order" in result.static
    honest = audit.VariantResult("01_computation_graphs", "01.1", audit.Variant(
        "solution", "solution", ones["01.1"]), 4.0, 4.0)
    audit.judge_statically(honest, nb, code, cells)
    assert honest.points == 4.0 and not honest.static


def _judged(stem: str, exercise: str, sources: list[str], points: float):
    """The audit's static cap of ``sources`` in place of the exercise's solution cells."""
    from course_utils.grading import audit

    lesson = audit.read_lesson(stem, ROOT)
    result = audit.VariantResult(stem, exercise, audit.Variant(
        "generated-course-paste", "shortcut", sources, generated=True), points, points)
    audit.judge_statically(result, lesson.nb, lesson.code, lesson.solution_cells[exercise])
    return result


def test_the_audits_pasted_shortcut_is_the_packages_source_disguised_and_still_answers():
    """Shortcut (b) pasted (issue 36: 01.4's engine_forward.py copied as text 6/6, 03.1's fold.py
    5/5): the package function's source under the answer's name and parameters, its locals
    renamed, docstrings and comments gone, the helpers that answer the exercise pasted too and
    what else it needs imported; it computes what the package function computes."""
    import inspect

    from course_utils import bench

    tens = _solution_sources("10_performance")
    (paste,), described = aip.course_paste_answer(tens["10.1"], "10.1", SRC)
    assert described.endswith("pasted as text (locals renamed, docstrings and comments "
                              "dropped): course_utils.bench._calls_to_repay")
    assert paste.startswith("import math\ndef break_even_calls(first, graph, eager):")
    course = inspect.getsource(bench._calls_to_repay)
    assert "saved_per_call" in course and "saved_per_call" not in paste  # a local renamed
    assert '"""' not in paste.split("### END SOLUTION")[0] and "# 1e-9" not in paste
    namespace: dict = {"print": lambda *args: None}
    exec(compile(paste, "<paste>", "exec"), namespace)  # noqa: S102 (the package's own code)
    for args in [(68.5e-3, 499e-6, 4.96e-3), (1.0, 2.0, 3.0), (5.0, 1.0, 1.0), (0.5, 0.1, 0.2)]:
        assert namespace["break_even_calls"](*args) == bench._calls_to_repay(*args), args
    ones, threes = _solution_sources("01_computation_graphs"), \
        _solution_sources("03_graph_optimization")
    (forward,), _ = aip.course_paste_answer(ones["01.4"], "01.4", SRC)
    assert "def mul_jvp(" in forward and "JVP['mul'] = mul_jvp" in forward
    assert "def jvp(outputs, feed, tangents, rules=None):" in forward
    assert "from course_utils.engine import topo_order" in forward  # what it needs, imported
    (fold,), described = aip.course_paste_answer(threes["03.1"], "03.1", SRC)
    assert "def _try_fold(" in fold and "def my_fold_constants(graph):" in fold
    assert described.endswith("fold.fold_constants, course_utils.minigraph.passes.fold._try_fold")
    assert aip.course_paste_answer(ones["01.1"], "00.1", SRC) is None  # no answer in the package


@pytest.mark.parametrize(("stem", "exercise", "points", "copied"), [
    ("01_computation_graphs", "01.1", 4, "course_utils.engine.topo_order"),
    ("01_computation_graphs", "01.4", 6, "course_utils.engine_forward.jvp"),
    ("03_graph_optimization", "03.1", 5, "course_utils.minigraph.passes.fold._try_fold"),
    # bench._calls_to_repay is 47 tokens in five statements, under copies.MIN_TOKENS: the copy
    # judge let the whole function pasted through (the audit's generated-course-paste 4/4)
    ("10_performance", "10.1", 4, "course_utils.bench._calls_to_repay")])
def test_the_pasted_package_answer_is_judged_a_copy(stem, exercise, points, copied):
    (sources, _) = aip.course_paste_answer(_solution_sources(stem)[exercise], exercise, SRC)
    result = _judged(stem, exercise, sources, points)
    assert result.points == points / 2 and f"copy:{copied}" in result.static, result.static
    honest = _judged(stem, exercise, _solution_sources(stem)[exercise], points)
    assert honest.points == points and not honest.static
