"""The static judge, round 3 of issue 36: the course's own code pasted into an answer
(course_utils.grading.notebook.copies). Each answer is a solutions notebook with one answer cell
replaced, judged against the untouched notebook (test_grading_static's helpers)."""

from __future__ import annotations

import copy
import inspect
import re
import textwrap

import pytest
from test_grading_static import ROOT, canonical

from course_utils import bench
from course_utils.grading import audit, static
from course_utils.grading.format import exercise_id, is_solution
from course_utils.grading.notebook import copies
from course_utils.grading.notebook.report import ExerciseResult
from course_utils.grading.notebook.run import code_cells
from course_utils.minigraph import session
from course_utils.minigraph.compile_c import lowering


def judged_cell(name: str, exercise: str, cell_id: str, answer: str) -> static.Judgement:
    """The judgement of ``exercise`` when its answer cell ``cell_id`` holds ``answer``."""
    reference = canonical(name)
    nb = copy.deepcopy(reference)
    cell = next(c for c in nb.cells if c.get("id") == cell_id)
    assert is_solution(cell) and exercise_id(cell) == exercise
    cell.source = answer
    return static.judge(code_cells(nb), reference.cells)[exercise]


def body(function, name: str) -> str:
    """``function``'s source, renamed ``name``, its docstring and comments left out."""
    source = textwrap.dedent(inspect.getsource(function))
    source = re.sub(r'\n    """.*?"""\n', "\n", source, count=1, flags=re.S)
    source = re.sub(r"  # .*", "", re.sub(r"\n *### .*", "", source))
    return source.replace(f"def {function.__name__}(", f"def {name}(", 1)


def copied(found: static.Judgement) -> list[str]:
    return [route for f, route in found.forbidden if f.what.startswith(copies.COPY)]


INTERVAL = ("def median_interval(ratios, confidence=0.95):\n"
            "    xs = sorted(float(v) for v in ratios)\n"
            "    k, _ = _rank(len(xs), confidence)\n"
            "    return xs[k - 1], xs[len(xs) - k]\n")
# The second attack review's 10.4 (6/6): bench._median_rank pasted as _rank, and its variants
# (names changed, a line added, annotations gone, the body inlined into median_interval).
RANK = body(bench._median_rank, "_rank")
RENAMED = (RANK.replace("total", "everything").replace("below", "under")
           .replace("k", "j").replace("n:", "count:").replace("(n", "(count")
           .replace(" n,", " count,").replace("2 ** n", "2 ** count")
           .replace(" -> tuple[int, float]", "").replace(": int", "").replace(": float", "")
           .replace("    everything,", "    steps = 0\n    everything,"))
INTERLEAVED = "\n".join(  # a line of its own before each line of the course's
    [RANK.splitlines()[0]] + [f"{line[:len(line) - len(line.lstrip())]}steps = len(str(n))\n{line}"
                              for line in RANK.splitlines()[1:] if line.strip()]) + "\n"
INLINED = ("def median_interval(ratios, confidence=0.95):\n"
           "    xs = sorted(ratios)\n    n = len(xs)\n"
           + "\n".join(RANK.splitlines()[1:-1]) + "\n    return xs[k - 1], xs[n - k]\n")


@pytest.mark.parametrize("answer", [RANK + "\n\n" + INTERVAL, RENAMED + "\n\n" + INTERVAL,
                                    INTERLEAVED + "\n\n" + INTERVAL, INLINED],
                         ids=["pasted", "renamed", "interleaved", "inlined"])
def test_bench_median_rank_pasted_into_10_4_is_the_course_code(answer):
    found = judged_cell("10_performance", "10.4", "s10-21", "import math\n" + answer)
    assert copied(found) == ["course_utils.bench._median_rank"], found.forbidden
    result = ExerciseResult("10.4", 6, 6, "pass")
    static.apply([result], {"10.4": found}, [f"code cell {i + 1}" for i in range(80)])
    assert result.points == 3 and "course_utils.bench._median_rank" in result.message


def test_whether_the_canonical_notebook_is_the_stubs_is_the_graders_word_not_its_text():
    """The pasted-code judge is skipped only when the grader says it grades against the
    exercises' stubs (``judge``'s ``stubs``). It used to guess from the canonical answer cells'
    text (NotImplementedError in them), so a course solution that merely names the exception
    turned the judge off for its exercise."""
    reference = copy.deepcopy(canonical("10_performance"))
    cell = next(c for c in reference.cells if c.get("id") == "s10-21")
    cell.source = "# never raises NotImplementedError\n" + cell.source
    nb = copy.deepcopy(reference)
    next(c for c in nb.cells if c.get("id") == "s10-21").source = (
        "import math\n" + RANK + "\n\n" + INTERVAL)
    found = static.judge(code_cells(nb), reference.cells)["10.4"]
    assert copied(found) == ["course_utils.bench._median_rank"], found.forbidden
    assert not copied(static.judge(code_cells(nb), reference.cells, stubs=True)["10.4"])


def test_a_short_shared_piece_is_not_a_copy():
    """The threshold both ways: an answer of one's own that shares the course's loop header and
    its first lines (a loop like the course's is what the exercise asks for) is not a copy; the
    whole function pasted is (test above), and so is the answer once it holds the rest."""
    lines = RANK.splitlines()
    own = ("def median_interval(ratios, confidence=0.95):\n"
           "    xs = sorted(ratios)\n    n = len(xs)\n"
           "    total, below, k = 2 ** n, 0, 0\n" + "\n".join(lines[2:4]) + "\n"
           "        if below_next * 2 > total * (1 - confidence):\n            break\n"
           "        below, k = below_next, k + 1\n"
           "    k = max(k, 1)\n    return xs[k - 1], xs[n - k]\n")
    course = copies.course_tokens("course_utils.bench._median_rank")
    shared = copies.covered(copies.windows(copies.tokens(own)), course)
    assert 0 < shared < copies.MIN_TOKENS
    assert not judged_cell("10_performance", "10.4", "s10-21", own).forbidden
    whole = own.replace("\n".join(lines[2:4]), "\n".join(lines[2:9]), 1)
    assert copies.is_copy(copies.covered(copies.windows(copies.tokens(whole)), course),
                          len(course))


def test_session_prune_pasted_into_03_2_is_the_course_code():
    """Session's pruning is kept in a release (every Session prunes with it) and the canonical
    03.2 answer is written like it: a copy still shares more of it than the canonical does."""
    answer = (body(session.prune, "_keep") + "\n\n"
              "def my_eliminate_dead_code(graph):\n"
              "    kept = [n for n in graph if OPS[n.op].stateful]\n"
              "    return _keep(graph, list(graph.outputs) + kept)\n")
    found = judged_cell("03_graph_optimization", "03.2", "s03-09", answer)
    assert copied(found) == ["course_utils.minigraph.session.prune"], found.forbidden


def test_the_course_compilers_fused_loop_pasted_into_15_1_is_the_course_code():
    answer = body(lowering.emit_loop, "_loop") + "\n\ndef emit_fused(records, n_inputs, ctype):\n" \
        "    return _loop(records, n_inputs, ctype)\n"
    found = judged_cell("15_graph_without_python", "15.1", "s15-sol", answer)
    assert "course_utils.minigraph.compile_c.lowering.emit_loop" in copied(found)


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb")))
def test_no_honest_fixture_is_a_copy(name):
    """Every unusual and partial fixture of the audit (honest answers, some written like the
    course's own code) is judged statically: none is a copy of a package function."""
    reference = canonical(name)
    code = code_cells(reference)
    for exercise in dict.fromkeys(exercise_id(c) for c in code if is_solution(c)):
        cells = [i for i, c in enumerate(code) if is_solution(c) and exercise_id(c) == exercise]
        for variant in audit.load_fixtures(audit.fixtures_root(ROOT) / name / exercise,
                                           len(cells)):
            if variant.problem or variant.kind not in ("unusual", "partial"):
                continue
            sources = dict(zip(cells, variant.sources, strict=True))
            nb = [{**c, "source": sources.get(i, c.source)} for i, c in enumerate(code)]
            found = static.judge(nb, reference.cells)[exercise]
            assert not copied(found), (exercise, variant.name, found.forbidden)


# --- 01.2: a rule is the derivative's formula, not a difference quotient of the op ----------

RULES = ('VJP["add"] = lambda g, out, x, y: (unbroadcast(g, x), unbroadcast(g, y))\n'
         'VJP["mul"] = lambda g, out, x, y: (unbroadcast(g * y, x), unbroadcast(g * x, y))\n'
         'VJP["matmul"] = lambda g, out, x, y: (g @ transpose(y), transpose(x) @ g)\n'
         'VJP["sum"] = lambda g, out, x, axis=None: (broadcast_like(g, x, axis=axis),)\n')
QUOTIENTS = {
    # the second attack review's (5/5): off by ~1e-11 on arrays, the op at x +- H on Nodes
    "second-order": "H = 1e-5\n\ndef slope(f, x):\n    return (f(x + H) - f(x - H)) / (2 * H)\n",
    # a fourth-order stencil: exact to ~1e-13 on arrays, so only the graph it builds tells
    "fourth-order": ("H = 1e-3\n\ndef slope(f, x):\n    return (8 * (f(x + H) - f(x - H))"
                     " - (f(x + 2 * H) - f(x - 2 * H))) / (12 * H)\n"),
    # a relative step: the op at x (1 +- H)
    "relative-step": ("H = 1e-6\n\ndef slope(f, x):\n"
                      "    return (f(x * (1 + H)) - f(x * (1 - H))) / (2 * H * x)\n"),
}
HONEST = RULES + (
    "def tanh_rule(g, out, x):\n    d = exp(x) + exp(-x)\n    return (g * 4 / (d * d),)\n\n"
    'VJP["tanh"] = tanh_rule\nVJP["exp"] = lambda g, out, x: (g * exp(x),)\n'
    'VJP["log"] = lambda g, out, x: (g * exp(-log(x)),)\n')


def test_difference_quotients_of_the_op_functions_score_at_most_half_of_01_2(tmp_path):
    """Issue 36, second attack review: 01.2's tanh/exp/log rules written as difference quotients
    with the op functions (numbers on arrays, a graph on Nodes) scored 5/5. The checks now want
    the derivative exact to rounding (1e-12, relative) and, on Nodes, a graph that applies the
    op to nothing but its own input; an unusual honest rule set (tanh' through exp(x) and
    exp(-x), 1/x as exp(-log x)) keeps full marks."""
    from test_grading_attacks import grade_answers

    answers = {name: RULES + quotient + "".join(
        f'VJP["{op}"] = lambda g, out, x: (g * slope({op}, x),)\n' for op in ("tanh", "exp", "log"))
        for name, quotient in QUOTIENTS.items()} | {"honest": HONEST}
    reports = grade_answers(tmp_path / "subs", "01_computation_graphs", "s01-sol2", answers)
    for name in answers:
        got = {e["exercise"]: e for e in reports[name]["exercises"]}["01.2"]
        if name == "honest":
            assert got["points"] == got["possible"], got["message"]
        else:
            assert got["points"] <= got["possible"] / 2, (name, got["points"])
            assert "difference quotient" in got["message"], (name, got["message"])


# --- 15.1: one fused loop, each value a local variable, not an array per op -----------------

ATTACK_151 = (ROOT / "tests" / "fixtures" / "shortcuts" / "15_graph_without_python" / "15.1"
              / "shortcut-one-loop-per-op.py")
FORMS = ('FORMS = {"add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}",\n'
         '         "div": "{0} / {1}", "maximum": "({0} > {1} ? {0} : {1})", "neg": "-{0}",\n'
         '         "relu": "({0} < 0 ? 0 : {0})", "exp": "exp{f}({0})", "log": "log{f}({0})",\n'
         '         "tanh": "tanh{f}({0})"}\n\n\n')
UNROLLED = FORMS + '''def emit_fused(records, n_inputs, ctype):
    f = "f" if ctype == "float" else ""

    def lane(k):  # the chain at element i + k, each value a local v<value>_<k>
        def arg(a):
            return f"v{a}_{k}" if isinstance(a, int) else f"(({ctype}){float(a)!r})"
        lines = [f"    {ctype} v{j}_{k} = in[{j}][i + {k}];" for j in range(n_inputs)]
        for j, (op, args) in enumerate(records):
            expr = FORMS[op].format(*map(arg, args), f=f)
            lines.append(f"    {ctype} v{n_inputs + j}_{k} = {expr};")
        return lines + [f"    out[i + {k}] = v{n_inputs + len(records) - 1}_{k};"]

    lines = [f"void fused(int64_t n, const {ctype} *const *in, {ctype} *out) {{",
             "  int64_t i = 0;", "  for (; i + 4 <= n; i += 4) {"]
    for k in range(4):
        lines += lane(k)
    return "\\n".join(lines + ["  }", "  for (; i < n; i++) {", *lane(0), "  }", "}"])
'''
LOCAL_ARRAY = FORMS + '''def emit_fused(records, n_inputs, ctype):
    f, last = ("f" if ctype == "float" else ""), n_inputs + len(records) - 1

    def arg(a):
        return f"v[{a}]" if isinstance(a, int) else f"(({ctype}){float(a)!r})"

    lines = [f"void fused(int64_t n, const {ctype} *const *in, {ctype} *out) {{",
             "  for (int64_t i = 0; i < n; i++) {", f"    {ctype} v[{last + 1}];"]
    lines += [f"    v[{j}] = in[{j}][i];" for j in range(n_inputs)]
    for j, (op, args) in enumerate(records):
        lines.append(f"    v[{n_inputs + j}] = {FORMS[op].format(*map(arg, args), f=f)};")
    return "\\n".join(lines + [f"    out[i] = v[{last}];", "  }", "}"])
'''


def test_one_loop_per_op_over_a_buffer_scores_at_most_half_of_15_1(tmp_path):
    """Issue 36, second attack review: 15.1's emit_fused wrote one loop per op over a blocked
    scratch buffer (the op-by-op evaluation the lesson contrasts with fusion), 6/6. The checks
    now measure the compiled function's own memory (writable static data, stack frame): the
    buffer, static or on the stack, scores <= half; a fused loop unrolled by four (with its
    remainder loop) and one that keeps the values in a small local array per element keep 6/6."""
    from test_grading_attacks import grade_answers

    attack = ATTACK_151.read_text()
    answers = {"buffer": attack, "stack-buffer": attack.replace("static {T} v[", "{T} v["),
               "unrolled": UNROLLED, "local-array": LOCAL_ARRAY}
    assert answers["stack-buffer"] != attack
    reports = grade_answers(tmp_path / "subs", "15_graph_without_python", "s15-sol", answers)
    for name in answers:
        got = {e["exercise"]: e for e in reports[name]["exercises"]}["15.1"]
        if name in ("unrolled", "local-array"):
            assert got["points"] == got["possible"], (name, got["message"])
        else:
            assert got["points"] <= got["possible"] / 2, (name, got["points"])
            assert "a buffer per value" in got["message"], (name, got["message"])
