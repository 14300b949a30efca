"""The static judge (course_utils.grading.static, issue 36): what an answer reaches, read from its
source in the grader, and how that scores. Each answer is a solutions notebook of the course with
one answer cell replaced, judged against the untouched notebook."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
import pytest

from course_utils.grading import static
from course_utils.grading.format import exercise_id, is_solution
from course_utils.grading.notebook.report import ExerciseResult
from course_utils.grading.notebook.run import code_cells

ROOT = Path(__file__).resolve().parents[1]
_NOTEBOOKS: dict[str, nbformat.NotebookNode] = {}


def canonical(name: str) -> nbformat.NotebookNode:
    if name not in _NOTEBOOKS:
        _NOTEBOOKS[name] = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    return _NOTEBOOKS[name]


def judged(name: str, exercise: str, answer: str | None = None, *, first: bool = True
           ) -> static.Judgement:
    """The judgement of ``exercise`` when its (first) answer cell holds ``answer``."""
    reference = canonical(name)
    nb = copy.deepcopy(reference)
    if answer is not None:
        cell = next(c for c in nb.cells if is_solution(c) and exercise_id(c) == exercise)
        cell.source = answer
    return static.judge(code_cells(nb), reference.cells)[exercise]


TOPO = "def topo_order(outputs):\n    {}\n"
GRAPHLIB = TOPO.format(
    "import graphlib\n    ts = graphlib.TopologicalSorter({n: n.inputs for n in outputs})\n"
    "    return list(ts.static_order())")


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb")))
def test_the_solutions_reach_nothing_forbidden(name):
    for exercise, found in static.judge(code_cells(canonical(name)),
                                        canonical(name).cells).items():
        assert not found.machinery and not found.forbidden, (exercise, found)


@pytest.mark.parametrize("answer, route", [
    (GRAPHLIB, "graphlib"),
    (TOPO.format("from graphlib import TopologicalSorter as T\n    g = T\n"
                 "    return list(g({n: n.inputs for n in outputs}).static_order())"),
     "graphlib"),
    (TOPO.format("ts = getattr(__import__('graphlib'), 'TopologicalSorter')\n"
                 "    return list(ts({n: n.inputs for n in outputs}).static_order())"),
     "graphlib"),
    # The in-kernel name the check once read: rebinding it changes nothing here.
    ("ORDERING = ()\n" + GRAPHLIB, "graphlib"),
    # Blinding the depth check's profiler (issue 36: 2/4 -> 4/4).
    ("import sys\n" + TOPO.format("sys.setprofile(None)\n    return []"), "sys.setprofile"),
    # The course's own answer, from the package.
    ("from course_utils.engine import topo_order\n", "course_utils.engine.topo_order"),
])
def test_a_forbidden_route_of_01_1_is_found_however_it_is_reached(answer, route):
    found = judged("01_computation_graphs", "01.1", answer)
    assert route in {r for _, r in found.forbidden}, found
    assert not found.machinery


@pytest.mark.parametrize("rule", [
    "lambda tangents, out, x: np.imag(np.tanh(np.asarray(x, dtype=complex) + 1e-20j "
    "* tangents[0])) / 1e-20",
    "lambda tangents, out, x: np.imag(np.tanh(x + 1e-20j * tangents[0])) / 1e-20",
    "lambda tangents, out, x: np.imag(np.tanh(x.astype('complex128'))) * tangents[0]",
    "lambda tangents, out, x: np.imag(np.tanh(np.complex128(x))) * tangents[0]",
])
def test_the_complex_step_is_a_forbidden_route_of_01_4(rule):
    found = judged("01_computation_graphs", "01.4", f'JVP["tanh"] = {rule}\n')
    assert found.forbidden, found


def test_a_copy_of_init_mlp_is_still_init_mlp():
    """Issue 36: a types.FunctionType copy of init_mlp dodged forbid in the kernel (00.2 2/2)."""
    found = judged("00_setup", "00.2", (
        "import types\n_mine = types.FunctionType(init_mlp.__code__, init_mlp.__globals__)\n"
        "def count_parameters(sizes):\n"
        "    return sum(w.size + b.size for w, b in _mine(sizes))\n"))
    assert "course_utils.data.init_mlp" in {r for _, r in found.forbidden}, found
    assert "types.FunctionType" in {h.what for h in found.hiding}


def test_pytorchs_silu_in_a_thread_is_still_pytorchs_silu():
    """Issue 36: PyTorch's SiLU kernels run in a short-lived thread went unseen by the op
    recorder (07.1 1/5 -> 5/5); the check's own list (NO_LIBRARY) holds the source too."""
    found = judged("07_pytorch_autograd", "07.1", (
        "import threading\nimport torch.nn.functional as F\n\n"
        "class SiLU(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        out = []\n        t = threading.Thread(target=lambda: out.append(F.silu(x)))\n"
        "        t.start()\n        t.join()\n        ctx.save_for_backward(x)\n"
        "        return out[0]\n"))
    assert "torch.nn.functional.silu" in {r for _, r in found.forbidden}, found


def test_other_lessons_routes_from_the_table():
    found = judged("02_static_graphs", "02.4", "def silu_impl(x):\n    return x\n"
                   "def silu_vjp(g, out, x):\n    return tuple(mg.gradients(out, [x], g))\n")
    assert "course_utils.minigraph.gradients" in {r for _, r in found.forbidden}
    found = judged("07_pytorch_autograd", "07.1", (
        "class SiLU(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        return x * torch.sigmoid(x)\n    @staticmethod\n"
        "    def backward(ctx, g):\n        return g.grad_fn(g)\n"))
    assert ".grad_fn" in {r for _, r in found.forbidden}


HONEST_GETATTR = TOPO.format(
    "order, done = [], set()\n"
    "    stack = [(n, False) for n in reversed(list(outputs))]\n"
    "    while stack:\n"
    "        node, ready = stack.pop()\n"
    "        if node in done:\n            continue\n"
    "        if ready:\n            done.add(node)\n            order.append(node)\n"
    "        else:\n            stack.append((node, True))\n"
    "            stack.extend((x, False) for x in reversed(getattr(node, 'inputs')))\n"
    "    return order") + (
    "class Walker:\n    def __init__(self, **fields):\n        for k, v in fields.items():\n"
    "            setattr(self, k, v)\n    def get(self, name):\n"
    "        return getattr(self, name)\n")


def test_honest_getattr_costs_nothing_and_is_not_flagged():
    found = judged("01_computation_graphs", "01.1", HONEST_GETATTR)
    assert not found.forbidden and not found.machinery and not found.hiding, found


def test_a_computed_getattr_on_another_object_is_flagged_at_no_cost():
    found = judged("01_computation_graphs", "01.1",
                   HONEST_GETATTR + "field = 'in' + 'puts'\nwidth = len(getattr(a, field))\n")
    assert [h.what for h in found.hiding] == ["getattr with a computed name"]
    assert not found.forbidden and not found.machinery
    result = ExerciseResult("01.1", 4, 4, "pass")
    static.apply([result], {"01.1": found}, [f"code cell {i + 1}" for i in range(80)])
    assert result.points == 4 and result.status == "pass"
    assert "getattr with a computed name" in result.notes[0] and "line" in result.notes[0]


@pytest.mark.parametrize("attack", [
    "import course_utils.grading.probe as p\np._pending = {}\n",
    "__import__('course_utils.grading.probe')\n",
    "import sys\nsys.modules['course_utils.grading.probe']._take = print\n",
    "import json\njson._default_encoder = None\n",
    "import importlib\nimportlib.import_module('course_utils.grading.verdict')\n",
])
def test_reaching_the_grader_scores_0_for_this_exercise_and_every_later_one(attack):
    found = static.judge(code_cells(_with("00_setup", "00.1", "def mean_squared_error(p, t):\n"
                                          "    return 0.5\n" + attack)),
                         canonical("00_setup").cells)
    assert found["00.1"].machinery and found["00.2"].machinery, found
    results = [ExerciseResult("00.1", 2, 2, "pass"), ExerciseResult("00.2", 2, 2, "pass")]
    static.apply(results, found, [f"code cell {i + 1}" for i in range(20)])
    assert [(r.points, r.status) for r in results] == [(0, "tampered")] * 2
    assert "grader's machinery" in results[0].notes[0] and "line" in results[0].notes[0]
    # 00.2's own answer is honest: its note says the machinery was reached before its checks
    # (fourth attack review: an honest 11.7 read "your answer reaches the grader's machinery")
    assert results[0].notes[0].startswith("your answer reaches"), results[0].notes
    assert results[1].notes[0].startswith("code before this exercise's checks reaches"), \
        results[1].notes


def _with(name: str, exercise: str, answer: str) -> nbformat.NotebookNode:
    nb = copy.deepcopy(canonical(name))
    next(c for c in nb.cells if is_solution(c) and exercise_id(c) == exercise).source = answer
    return nb


def test_a_shortcut_scores_at_most_half_and_says_where():
    found = judged("01_computation_graphs", "01.1", GRAPHLIB)
    result = ExerciseResult("01.1", 4, 4, "pass")
    static.apply([result], {"01.1": found}, [f"code cell {i + 1}" for i in range(80)])
    assert result.points == 2 and result.status == "fail"
    assert "graphlib" in result.message and "line 2" in result.message
    low = ExerciseResult("01.1", 1, 4, "fail", "AssertionError: ...")
    static.apply([low], {"01.1": found}, [])
    assert low.points == 1 and low.status == "fail" and "graphlib" in low.notes[0]


def test_a_helper_in_an_earlier_cell_counts_for_the_answer_that_uses_it():
    nb = _with("01_computation_graphs", "01.1",
               "import graphlib\ndef helper(outputs):\n"
               "    return list(graphlib.TopologicalSorter().static_order())\n"
               "def topo_order(outputs):\n    return helper(outputs)\n")
    found = static.judge(code_cells(nb), canonical("01_computation_graphs").cells)
    assert found["01.1"].forbidden
    nb.cells.insert(1, nbformat.v4.new_code_cell(
        "def seconds(x):\n    return np.imag(np.exp(x + 1e-20j)) / 1e-20\n"))
    answer = next(c for c in nb.cells if is_solution(c) and exercise_id(c) == "01.4")
    answer.source = 'JVP["exp"] = lambda tangents, out, x: seconds(x) * tangents[0]\n'
    found = static.judge(code_cells(nb), canonical("01_computation_graphs").cells)
    assert found["01.4"].forbidden and not found["01.3"].forbidden


def test_an_answer_nested_too_deeply_is_a_note_not_an_error():
    deep = "x = " + "+".join(["1"] * 100_000) + "\n"  # ast.parse: RecursionError
    found = judged("00_setup", "00.1", "def mean_squared_error(p, t):\n    return 0.5\n" + deep)
    result = ExerciseResult("00.1", 0, 2, "fail", "AssertionError: ...")
    static.apply([result], {"00.1": found}, [])
    assert found.problems and "nested too deeply" in result.notes[-1]
    assert result.status == "fail"


def test_magics_are_read_as_the_kernel_runs_them():
    found = static.analyse("%timeit -n1 f()\nimport graphlib as g\n!ls\n")
    assert "graphlib" in {r.what for r in found.reached}


def test_a_check_copied_into_a_scratch_cell_is_not_a_route_to_the_grader():
    """A learner who copies a check cell to run it again imports course_utils.grading as the
    check does: the course's own lines are not the learner's route; an alias of their own is."""
    nb = copy.deepcopy(canonical("00_setup"))
    check = next(c for c in nb.cells if c.get("id") == "ex-00-2-check")
    nb.cells.insert(nb.cells.index(check), nbformat.v4.new_code_cell(check.source))
    found = static.judge(code_cells(nb), canonical("00_setup").cells)
    assert not found["00.2"].machinery and not found["00.3"].machinery, found
    nb.cells.insert(nb.cells.index(check), nbformat.v4.new_code_cell(
        "import course_utils.grading.probe as p\n"))
    found = static.judge(code_cells(nb), canonical("00_setup").cells)
    assert found["00.2"].machinery and not found["00.1"].machinery


def test_a_forbid_tuple_named_in_a_set_up_cell_is_a_route():
    """02.1's checks call ``forbid(*RUNNERS)``, a tuple the notebook's set-up cell defines: a copy
    of ``engine.evaluate`` made through its code object (a new function, so the kernel's forbid
    misses it) still reaches evaluate, a route of 02.1 (the attack review scored it 6/6)."""
    found = judged("02_static_graphs", "02.1",
                   "import types\nfrom course_utils import engine\n"
                   "ev = engine.evaluate\n"
                   "_ev = types.FunctionType(ev.__code__, ev.__globals__)\n"
                   "def run(outputs, feed):\n    return _ev(outputs, feed)\n")
    assert {route for _, route in found.forbidden} == {"course_utils.engine.evaluate"}, found


def test_an_earlier_exercises_example_run_is_not_held_against_an_answer_using_its_function():
    """02.5's answer calls 02.2's ``gradients``; the lines after 02.2's function (an example run
    through ``engine.evaluate``, a route of 02.5) are 02.2's, not 02.5's. A statement that
    changes what the function uses in place still counts."""
    assert not judged("02_static_graphs", "02.5").forbidden
    nb = _with("02_static_graphs", "02.2", "from course_utils import engine\nVJP_TABLE = {}\n"
               "def gradients(y, xs):\n    return VJP_TABLE['f'](y, xs)\n"
               "VJP_TABLE.update(f=engine.gradients)\nprint(engine.evaluate([], {}))\n")
    found = static.judge(code_cells(nb), canonical("02_static_graphs").cells)["02.5"]
    assert {route for _, route in found.forbidden} == {"course_utils.engine.gradients"}, found


def test_the_complex_step_is_a_route_of_reverse_mode_by_hand():
    """04.2: gradients by replaying the tape's records on x + ih (attack review: 6/6)."""
    answer = ("def tape_gradient(tape, target, sources):\n"
              "    return [np.imag(replay(tape, s, 1e-30j)) / 1e-30 for s in sources]\n")
    found = judged("04_dynamic_graphs", "04.2", answer)
    assert {route for _, route in found.forbidden} == {static.routes.COMPLEX_LITERAL}, found
    assert not judged("04_dynamic_graphs", "04.2").forbidden


@pytest.mark.parametrize("answer", [
    "class Scale(nn.Module):\n    __module__ = 'torch.nn.modules.misc'\n",
    "class Scale(nn.Module):\n    pass\nScale.__module__ = 'torch.nn.modules.misc'\n",
    "Scale = type('Scale', (nn.Module,), {'__module__': 'torch.nn.modules.misc'})\n",
    "class Scale(nn.Module):\n    pass\nsetattr(Scale, '__qualname__', 'Identity')\n",
    # Code run in a namespace that claims to be torch's, or compiled under torch's file name
    # (an 08.1 check asks in which file a node's Python code was written).
    "ns = {}\nexec('def f(x):\\n    return x', {'__name__': 'torch.nn.functional'}, ns)\n",
    "scope = dict(__name__='torch.nn.functional', torch=torch)\n",
    "code = compile('def f(x):\\n    return x', torch.__file__, 'exec')\n",
    "import os\ncode = compile('x = 1', filename=os.path.join(os.path.dirname(torch.__file__), "
    "'functional.py'), mode='exec')\n",
])
def test_code_given_another_modules_name_is_a_route_of_every_exercise(answer):
    """08.1's check asks where the graph's code comes from: a leaf module whose class claims to
    be PyTorch's scored 4/4 in the attack review. Reading ``__module__`` costs nothing."""
    found = judged("08_torchscript_and_after", "08.1", answer)
    assert {route for _, route in found.forbidden} - set(static.routes.UNREADABLE) == {
        static.routes.FORGED_IDENTITY}, found
    assert not judged("08_torchscript_and_after", "08.1",
                      "print(nn.Linear.__module__, getattr(nn.Linear, '__qualname__'))\n").forbidden
    assert not judged("08_torchscript_and_after", "08.1", (
        "print(torch.__file__, __name__)\ntable = {'__doc__': 'mine'}\n")).forbidden


@pytest.mark.parametrize("answer, route", [
    ("import subprocess\nout = subprocess.run(['python', '-c', 'import torch'])\n", "subprocess"),
    ("from multiprocessing import Pool\n", "multiprocessing"),
    ("import os\nos.system('python quantize.py')\n", "os.system"),
])
def test_another_process_is_a_route_of_every_exercise(answer, route):
    """What runs in another process is out of reach of every instrument a check puts in the
    kernel (11.5: PyTorch in a subprocess, unseen by the aten-op recorder, scored 5/5)."""
    found = judged("11_deployment", "11.5", answer)
    assert route in {r for _, r in found.forbidden}, found


def test_one_opaque_op_is_a_route_of_11_1():
    """11.1 builds the MLP from minigraph's ops: one op registered on the fly that runs the
    whole MLP in numpy scored 4/4 in the attack review."""
    found = judged("11_deployment", "11.1", "mg.register_op('mlp', lambda x: x)\n")
    assert {r for _, r in found.forbidden} == {"course_utils.minigraph.register_op"}, found


WRAPPED = ("import torch.fx\n\ndef _normalize_py(x):\n    scale = x.abs().max()\n"
           "    return x / scale if scale > 1 else x\n\n{}\ntorch.fx.wrap('_normalize_py')\n\n"
           "class _Wrapped(nn.Module):\n    def forward(self, x):\n"
           "        return _normalize_py(x)\n\nfixed = torch.fx.symbolic_trace(_Wrapped())\n")


@pytest.mark.parametrize("write", [
    "torch.nn.functional._normalize_py = _normalize_py",
    "import torch.nn.functional as F\nF._normalize_py = _normalize_py",
    "from torch.nn import functional\nfunctional._normalize_py = _normalize_py",
    "setattr(torch.nn.functional, '_normalize_py', _normalize_py)",
    "setattr(torch.nn.functional, '_normalize' + '_py', _normalize_py)",
    "object.__setattr__(torch.nn.functional, '_normalize_py', _normalize_py)",
    "torch.nn.functional.__setattr__('_normalize_py', _normalize_py)",
    "vars(torch.nn.functional)['_normalize_py'] = _normalize_py",
    "torch.nn.functional.__dict__['_normalize_py'] = _normalize_py",
    "torch.nn.functional.__dict__.update(_normalize_py=_normalize_py)",
    "vars(torch.nn.functional).setdefault('_normalize_py', _normalize_py)",
    "import sys\nsys.modules['torch.nn.functional']._normalize_py = _normalize_py",
    "nn.Module.__call__ = lambda self, x: _normalize_py(x)",
    "del torch.Tensor.abs",
    "def install():\n    torch.nn.functional._normalize_py = _normalize_py\ninstall()",
    "import course_utils.minigraph as mg2\nmg2.relu = _normalize_py",
    "np.maximum = _normalize_py",
])
def test_writing_into_a_librarys_namespace_is_a_route_of_every_exercise(write):
    """08.1 (attack review, 4/4): a Python function put into torch.nn.functional, fx.wrap'ed and
    traced, was a graph node that "is torch". Code written into a library module's or class's
    namespace, however it is written, is a route of every exercise (and no solution or unusual
    fixture of the course writes there: test_the_solutions_reach_nothing_forbidden)."""
    found = judged("08_torchscript_and_after", "08.1", WRAPPED.format(write))
    assert static.routes.LIBRARY_WRITE in {r for _, r in found.forbidden}, found
    result = ExerciseResult("08.1", 4, 4, "pass")
    static.apply([result], {"08.1": found}, [f"code cell {i + 1}" for i in range(40)])
    text = " ".join(result.notes)  # sys.modules is the grader's machinery too: 0, said so
    assert result.points <= 2 and ("library's namespace" in text or found.machinery), text


@pytest.mark.parametrize("honest", [
    "m = nn.Linear(2, 2)\nm.weight = nn.Parameter(torch.zeros(2, 2))\nm.extra = 1",
    "loaded = torch.export.load('m.pt2')\nloaded.note = 'mine'",
    "torch._dynamo.config.cache_size_limit = 64",
    "import torch._inductor.config as cfg\ncfg.fx_graph_cache = False",
    "torch.backends.cudnn.benchmark = True",
    "class Scale(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.k = 2.0\nScale.k = 3.0\nsetattr(Scale, 'k', 4.0)",
    "print(vars(torch.nn.functional)['relu'], torch.nn.functional.__dict__.get('relu'))",
    "table = {}\ntable.update(relu=torch.relu)\ntable['f'] = torch.nn.functional.relu",
])
def test_writing_to_ones_own_objects_and_a_librarys_settings_is_not(honest):
    found = judged("08_torchscript_and_after", "08.1",
                   "fixed = torch.jit.script(Normalize())\n" + honest + "\n")
    assert not found.forbidden and not found.machinery, found


def test_the_routes_through_quiet_tensorflow_are_tensorflows():
    """Lesson 06's set-up cell makes ``tf = quiet.tensorflow()`` (``import tensorflow as tf``
    without TensorFlow's start-up log lines): what is reached through it is TensorFlow's. 06.1
    builds the gradients and the update by hand: a v1.train optimizer scored 5/5."""
    answer = ("def logreg_graph(w0, b0, lr):\n    graph = tf.Graph()\n"
              "    with graph.as_default():\n"
              "        opt = v1.train.GradientDescentOptimizer(lr)\n"
              "        train = opt.minimize(None)\n    return graph\n")
    found = judged("06_tf1_sessions", "06.1", answer)
    assert {r for _, r in found.forbidden} == {"tensorflow.compat.v1.train"}, found
    assert not judged("06_tf1_sessions", "06.3", (
        "def train_fixed(params, lr, steps, build=tf1_mlp):\n    net = build(params)\n"
        "    with net.graph.as_default():\n"
        "        train = v1.train.GradientDescentOptimizer(lr).minimize(net.loss)\n"
        "    return net\n")).forbidden  # 06.3 asks for two bugs fixed: TF's own idiom fixes both


@pytest.mark.parametrize("write", [
    "def put(module, name, f):\n    setattr(module, name, f)\nput(torch.nn.functional, "
    "'_normalize_py', _normalize_py)",
    "def put(module, f):\n    module._normalize_py = f\nput(f=_normalize_py, "
    "module=torch.nn.functional)",
    "put = lambda m, f: m.__dict__.update(_normalize_py=f)\nput(torch.nn.functional, "
    "_normalize_py)",
    "for m in (torch.nn.functional,):\n    m._normalize_py = _normalize_py",
])
def test_a_library_written_into_through_a_helper_or_a_loop_is_still_written_into(write):
    """The same write, one step removed: a function of the answer's that writes into its
    parameter, called with a library's module; a loop over library modules."""
    found = judged("08_torchscript_and_after", "08.1", WRAPPED.format(write))
    assert static.routes.LIBRARY_WRITE in {r for _, r in found.forbidden}, found
    honest = ("class Box:\n    pass\n\ndef put(obj, value):\n    obj.value = value\n"
              "put(Box(), 1)\nput(nn.Linear(2, 2), 2)\nfor f in (torch.relu, torch.tanh):\n"
              "    print(f(torch.ones(2)))\n")
    assert not judged("08_torchscript_and_after", "08.1",
                      "fixed = torch.jit.script(Normalize())\n" + honest).forbidden


def test_a_construct_in_the_code_an_exercise_gives_is_not_noted_but_one_the_answer_adds_is():
    """The second attack review: 10.4's released cell prints the predictions with
    `globals().get(name, '?')`, and every learner's 10.4 got the note 'constructs that hide what
    it reaches: globals()', the stub's included. The template's lines are the course's."""
    from course_utils.grading.format import strip_solutions

    reference = canonical("10_performance")
    index = next(i for i, c in enumerate(reference.cells) if is_solution(c)
                 and exercise_id(c) == "10.4" and "globals()" in c.source)

    def hiding(source: str) -> list[str]:
        nb = copy.deepcopy(reference)
        nb.cells[index].source = source
        return [h.what for h in static.judge(code_cells(nb), reference.cells)["10.4"].hiding]

    stub = strip_solutions(reference.cells[index].source, "10.4")
    assert hiding(reference.cells[index].source) == [] and hiding(stub) == []
    added = stub.replace('raise NotImplementedError("Exercise 10.4: your code here")',
                         "return globals()['ANSWERS'][tuple(ratios)]")
    assert hiding(added) == ["globals()"]
    # The same line in another exercise's answer is that answer's own: noted there.
    line = next(x for x in stub.splitlines() if "globals()" in x).strip()
    other = next(c for c in reference.cells if is_solution(c) and exercise_id(c) != "10.4")
    nb = copy.deepcopy(reference)
    cell = next(c for c in nb.cells if c.get("id") == other.get("id"))
    cell.source = "MEASURED = {}\nverdict = str\nfor name, ratios in MEASURED.items():\n    " + line
    found = static.judge(code_cells(nb), reference.cells)[exercise_id(other)]
    assert [h.what for h in found.hiding] == ["globals()"], found


@pytest.mark.parametrize("name, exercise, answer, route", [
    # The recursive walk in another thread, unseen by 01.1's depth check.
    ("01_computation_graphs", "01.1",
     "import _thread, threading\n" + TOPO.format(
         "threading.stack_size(1 << 26)\n    out = []\n"
         "    _thread.start_new_thread(out.append, (list(outputs),))\n    return out"),
     "_thread"),
    ("01_computation_graphs", "01.1",
     "from concurrent.futures import ThreadPoolExecutor as Pool\n"
     + TOPO.format("return Pool(1).submit(list, outputs).result()"),
     "concurrent.futures.ThreadPoolExecutor"),
    # 07.1's backward as a complex-step derivative.
    ("07_pytorch_autograd", "07.1",
     "class SiLU(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
     "        ctx.save_for_backward(x)\n        return x * torch.sigmoid(x)\n"
     "    @staticmethod\n    def backward(ctx, g):\n        (x,) = ctx.saved_tensors\n"
     "        z = x.to(torch.complex128) + 1e-30j\n"
     "        return g * ((z * torch.sigmoid(z)).imag / 1e-30).to(x.dtype)\n",
     "literal:complex"),
    # 07.5's forward mode through aten's own dual-number ops.
    ("07_pytorch_autograd", "07.5",
     "def hvp(loss_fn, w, v):\n    d = torch.ops.aten._make_dual(w, v, level=0)\n"
     "    return torch.ops.aten._unpack_dual(loss_fn(d), 0)[1]\n",
     "torch.ops.aten._make_dual*"),
])
def test_routes_the_second_attack_review_found(name, exercise, answer, route):
    found = judged(name, exercise, answer)
    assert route in {r for _, r in found.forbidden}, found


@pytest.mark.parametrize("name, exercise, answer, route", [
    # A library imported by a computed name: the sympy route of 02.5 dodged (third attack review).
    ("02_static_graphs", "02.5", "import importlib\nsp = importlib.import_module('sym' + 'py')\n",
     static.routes.HIDDEN_IMPORT),
    ("02_static_graphs", "02.5", "sp = __import__(''.join(['sym', 'py']))\n",
     static.routes.HIDDEN_IMPORT),
    # A second copy of a module loaded from its file escapes every forbid on the first (11.1:
    # minigraph's ONNX reader; 11.7: course_utils.serving).
    ("11_deployment", "11.1", "import importlib.util\n"
     "spec = importlib.util.spec_from_file_location('course_utils.minigraph', 'onnx.py')\n",
     "importlib.util"),
    ("11_deployment", "11.7", "from importlib.machinery import SourceFileLoader\n"
     "m = SourceFileLoader('s', 'serving.py').load_module()\n", "importlib.machinery"),
    ("11_deployment", "11.7", "import runpy\nns = runpy.run_path('serving.py')\n", "runpy"),
    # Code run from a string.
    ("08_torchscript_and_after", "08.1", "ns = {}\nexec(source, ns)\n", "builtins.exec"),
    ("08_torchscript_and_after", "08.1", "code = compile('x = 1', '<mine>', 'exec')\n",
     "builtins.compile"),
    # getattr with a computed name on a library module a route lies under (06.1: the optimizers
    # under v1.train; 14.1: the course's MaxPool mapping under mg.onnx).
    ("06_tf1_sessions", "06.1", "opt = getattr(v1, 'tr' + 'ain').GradientDescentOptimizer(0.1)\n",
     "tensorflow.compat.v1.train"),
    ("14_minigraph_onnx", "14.1", "table = getattr(mg.onnx, 'EXPORT' + 'ERS')\n",
     "course_utils.minigraph.onnx.EXPORTERS"),
])
def test_code_whose_reach_cannot_be_read_is_a_route(name, exercise, answer, route):
    """Notes alone let every route be dodged by naming it at run time (third attack review: a
    computed import of sympy, private copies of the package's modules, a computed attribute of
    v1): what an answer reaches must be readable from its source, or it scores at most half."""
    found = judged(name, exercise, answer)
    assert route in {r for _, r in found.forbidden}, found
    result = ExerciseResult(exercise, 4, 4, "pass")
    static.apply([result], {exercise: found}, [f"code cell {i + 1}" for i in range(80)])
    assert result.points == 2 and "hides what it reaches" in result.message, result


@pytest.mark.parametrize("name, exercise, answer", [
    ("06_tf1_sessions", "06.1", "op = getattr(np, 'log' + 'addexp')\n"),  # no route under numpy
    ("14_minigraph_onnx", "14.1", "class Ctx:\n    def get(self, key):\n"
     "        return getattr(self, 'attr_' + key)\n"),
    ("02_static_graphs", "02.5", "import importlib\nnp2 = importlib.import_module('numpy')\n"),
    ("01_computation_graphs", "01.1", "width = len(getattr(node, 'in' + 'puts'))\n"),
])
def test_a_computed_name_that_can_reach_no_route_costs_nothing(name, exercise, answer):
    assert not judged(name, exercise, answer).forbidden


def _with_scratch(name: str, exercise: str, scratch: str) -> static.Judgement:
    """The judgement of ``exercise`` when the learner adds ``scratch`` as a new cell right after
    its (last) answer cell."""
    nb = copy.deepcopy(canonical(name))
    last = [c for c in nb.cells if is_solution(c) and exercise_id(c) == exercise][-1]
    nb.cells.insert(nb.cells.index(last) + 1, nbformat.v4.new_code_cell(scratch))
    return static.judge(code_cells(nb), canonical(name).cells)[exercise]


def test_a_scratch_cell_that_compares_with_a_library_is_not_the_answer():
    """A learner who checks 11.4's integers against PyTorch's, or 01.2's rules against autograd,
    in a cell of their own after the answer has not answered with PyTorch: only statements that
    define or change what the checks (or the answer) use count as the answer."""
    found = _with_scratch("11_deployment", "11.4", (
        "import torch\nw = np.linspace(-1, 1, 7)\nq, scale = quantize_int8(w)\n"
        "ref = torch.quantize_per_tensor(torch.tensor(w), scale, 0, torch.qint8).int_repr()\n"
        "print(np.array_equal(q, ref.numpy()))\n"))
    assert not found.forbidden, found
    found = _with_scratch("01_computation_graphs", "01.2", (
        "import torch\nt = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)\n"
        "print(torch.autograd.grad(torch.tanh(t).sum(), t))\n"))
    assert not found.forbidden, found
    # A cell that redefines what the checks call is the answer, wherever it is.
    found = _with_scratch("11_deployment", "11.4", (
        "import torch\n\n\ndef quantize_int8(w):\n    scale = np.abs(w).max() / 127\n"
        "    t = torch.quantize_per_tensor(torch.tensor(w), scale, 0, torch.qint8)\n"
        "    return t.int_repr().numpy(), scale\n"))
    assert "torch" in {route for _, route in found.forbidden}, found


def test_graded_against_the_stubs_an_answer_written_like_the_courses_function_is_no_copy():
    """A learner grading their own release (no solutions: the exercises' stubs are the canonical
    notebook) who writes 01.1 as the course's topo_order is written was held to half (the hub's
    class test): without the course's solution, such an answer cannot be told from a copy. The
    grader says that it grades against the stubs (``stubs=True``, as the pipeline does)."""
    stubs = nbformat.read(ROOT / "exercises" / "01_computation_graphs.ipynb", as_version=4)
    nb = copy.deepcopy(stubs)
    cell = next(c for c in nb.cells if is_solution(c) and exercise_id(c) == "01.1")
    cell.source = next(c.source for c in canonical("01_computation_graphs").cells
                       if is_solution(c) and exercise_id(c) == "01.1")
    assert not static.judge(code_cells(nb), stubs.cells, stubs=True)["01.1"].forbidden


@pytest.mark.parametrize("name, exercise, answer, route", [
    ("01_computation_graphs", "01.1", "from jax._src.util import toposort\n\n\n"
     "def topo_order(outputs):\n    return list(toposort.func('inputs', list(outputs)))\n", "jax"),
    ("01_computation_graphs", "01.1", "import threading\n\n\ndef topo_order(outputs):\n"
     "    threading._start_new_thread(print, ())\n", "threading"),
    ("01_computation_graphs", "01.3", "import torch\nENGINE = torch._C._ImperativeEngine()\n",
     "torch"),
    ("07_pytorch_autograd", "07.1", "from torch.utils._python_dispatch import "
     "_disable_current_modes\n", "torch.utils._python_dispatch"),
    ("07_pytorch_autograd", "07.1", "import torch\nf = torch._ops.ops.aten.silu.default\n",
     "torch._ops.ops.aten.silu*"),
    ("07_pytorch_autograd", "07.1", "import jax\ng = jax.vjp\n", "jax"),
])
def test_routes_the_third_attack_review_found(name, exercise, answer, route):
    assert route in {r for _, r in judged(name, exercise, answer).forbidden}


MG = "import course_utils.minigraph as mg\n"  # lesson 15's set-up does not import it


def _capped_unreadable(name: str, exercise: str, answer: str) -> static.Judgement:
    """The judgement of an answer the judge cannot read fully: held to half, the message says
    it hides what it reaches."""
    found = judged(name, exercise, answer)
    result = ExerciseResult(exercise, 4, 4, "pass")
    static.apply([result], {exercise: found}, [f"code cell {i + 1}" for i in range(80)])
    assert result.points == 2 and "hides what it reaches" in result.message, result
    return found


@pytest.mark.parametrize("name, exercise, answer, route", [
    # A namespace read with a literal key is an attribute access (fourth attack review: 15.1's
    # compiler as vars(mg)["compile" "_c"], 6/6; 02.4's mul rule as vars(op)["vj" "p"], 4/4).
    ("15_graph_without_python", "15.1", MG + 'backend = vars(mg)["compile" "_c"]\n',
     "course_utils.minigraph.compile_c"),
    ("15_graph_without_python", "15.1", MG + 'backend = mg.__dict__.get("compile_c")\n',
     "course_utils.minigraph.compile_c"),
    ("02_static_graphs", "02.4", 'rule = vars(mg.get_op("mul"))["vj" "p"]\n', ".vjp"),
    # operator.attrgetter and methodcaller read the attributes they name (fourth attack review:
    # attrgetter("jvp")(jax) for 13.4's rule, attrgetter("compile_c")(mg) for 15.1, 6/6 each).
    ("13_jax", "13.4", 'import operator\n_d = operator.attrgetter("jvp")(jax)\n', "jax.jvp"),
    ("13_jax", "13.4", 'from operator import attrgetter\nget = attrgetter("jvp")\nd = get(jax)\n',
     "jax.jvp"),
    ("15_graph_without_python", "15.1",
     MG + 'import operator\nimport course_utils\n'
     'backend = operator.attrgetter("minigraph.compile_c")(course_utils)\n',
     "course_utils.minigraph.compile_c"),
    ("15_graph_without_python", "15.1",
     MG + 'import operator\nadd, backend = operator.attrgetter("add", "compile_c")(mg)\n',
     "course_utils.minigraph.compile_c"),
    ("15_graph_without_python", "15.1",
     MG + 'import operator\ncompiled = operator.methodcaller("compile_c", None)(mg)\n',
     "course_utils.minigraph.compile_c"),
    ("15_graph_without_python", "15.1",
     MG + 'import inspect\nbackend = inspect.getattr_static(mg, "compile_c")\n',
     "course_utils.minigraph.compile_c"),
    ("15_graph_without_python", "15.1",
     MG + 'fetch = __builtins__.__dict__["getattr"]\nbackend = fetch(mg, "compile_c")\n',
     "course_utils.minigraph.compile_c"),
    ("15_graph_without_python", "15.1",
     MG + 'backend = type(mg).__getattribute__(mg, "compile_c")\n',
     "course_utils.minigraph.compile_c"),
    # A re-export of the course's package is the object at its home (fourth attack review:
    # minigraph.onnx's import of session.prune for 03.2, 4/4).
    ("03_graph_optimization", "03.2", "from course_utils.minigraph.onnx import prune\n",
     "course_utils.minigraph.session"),
    ("03_graph_optimization", "03.2", "keep = mg.onnx.prune\n", "course_utils.minigraph.session"),
    # Any walk of the library's that finds what an output needs (fourth attack review: the
    # live set from minigraph's backprop order, 03.2 4/4; 01.1's order from it too).
    ("03_graph_optimization", "03.2", "from course_utils.minigraph.autodiff import _toposort\n",
     "course_utils.minigraph.autodiff"),
    ("01_computation_graphs", "01.1", "import course_utils.minigraph.autodiff as ad\n"
     "order = ad._toposort\n", "course_utils.minigraph.autodiff"),
])
def test_attributes_read_by_a_literal_name_or_at_their_home_are_routes(name, exercise, answer,
                                                                        route):
    assert route in {r for _, r in judged(name, exercise, answer).forbidden}


@pytest.mark.parametrize("name, exercise, answer", [
    # A computed key or attrgetter on a module a route lies under: unreadable.
    ("15_graph_without_python", "15.1", MG + 'backend = vars(mg)["compile" + SUFFIX]\n'),
    ("15_graph_without_python", "15.1",
     MG + "import operator\nbackend = operator.attrgetter(NAME)(mg)\n"),
    # Reflection on a library's object where a route of the exercise lies (fourth attack review:
    # dataclasses.astuple(mg.get_op("mul"))[3], the mul rule, for 02.4, 4/4), or on the module.
    ("02_static_graphs", "02.4", "import dataclasses\n\n\ndef rule(name):\n"
     "    return dataclasses.astuple(mg.get_op(name))[3]\n"),
    ("02_static_graphs", "02.4", "import inspect\ntable = dict(inspect.getmembers(mg.Op))\n"),
    ("02_static_graphs", "02.4", "rules = list(type(mg.tensor([1.0])).__dict__.values())\n"),
    ("02_static_graphs", "02.4", "fields = vars(mg.ops).items()\n"),
    ("13_jax", "13.4", "import inspect\nd = dict(inspect.getmembers(jax))['jv' 'p']\n"),
])
def test_computed_names_and_reflection_on_a_routes_library_are_unreadable(name, exercise,
                                                                          answer):
    """What hands out every attribute of a library's object (or one by a computed name) can
    reach the exercise's routes unnamed: held to half, as a computed getattr is."""
    found = _capped_unreadable(name, exercise, answer)
    assert all(f.what.startswith((static.routes.COMPUTED, static.REFLECTION))
               for f, _ in found.forbidden[:1]), found


@pytest.mark.parametrize("name, exercise, answer", [
    # getattr handed around as a value, not called by name (fourth attack review: 15.1's
    # compiler, 13.4's jax.jvp, 11.1's ONNX reader and 11.4's sys.modules, full marks each).
    ("15_graph_without_python", "15.1", MG + "backend = next(map(getattr, [mg], [NAME]))\n"),
    ("15_graph_without_python", "15.1",
     MG + "import functools\nbackend = functools.reduce(getattr, [NAME], mg)\n"),
    ("15_graph_without_python", "15.1",
     MG + "backend = (lambda fetch: fetch(mg, NAME))(getattr)\n"),
    ("15_graph_without_python", "15.1", MG + "backend = getattr.__call__(mg, NAME)\n"),
    ("13_jax", "13.4", "import builtins\nread = builtins.getattr\nd = read(jax, NAME)\n"),
    ("11_deployment", "11.4", "import operator, sys\n"
     "mods = (lambda make: make('mod' 'ules')(sys))(operator.attrgetter)\n"),
])
def test_getattr_used_as_a_value_is_unreadable_in_every_exercise(name, exercise, answer):
    found = _capped_unreadable(name, exercise, answer)
    assert static.routes.HIDDEN_GETATTR in {f.what for f, _ in found.forbidden}, found


@pytest.mark.parametrize("name, exercise, answer", [
    # The answer's own objects: reflection and computed keys are free.
    ("02_static_graphs", "02.4", "import dataclasses\n\n\n@dataclasses.dataclass\nclass Cfg:\n"
     "    a: float = 1.0\n\n\nprint(dataclasses.asdict(Cfg()), vars(Cfg()).items())\n"),
    ("15_graph_without_python", "15.1", MG + "class Emitter:\n    def __init__(self):\n"
     "        self.lines = []\n\n    def get(self, key):\n        return self.__dict__[key]\n\n"
     "    def state(self):\n        return vars(self)['lines'], list(vars(self).values())\n"),
    # A library where no route of the exercise lies.
    ("15_graph_without_python", "15.1",
     MG + "import inspect\nnames = [n for n, _ in inspect.getmembers(np.linalg)]\n"),
    ("15_graph_without_python", "15.1", MG + "f = vars(np)['float' + '64']\n"),
    # attrgetter on the answer's own objects, and a literal one on a library outside the routes.
    ("15_graph_without_python", "15.1",
     MG + "import operator\nORDER = sorted([(2, 'b')], key=operator.itemgetter(0))\n"
     "by_name = operator.attrgetter('name')\n"),
    ("13_jax", "13.4", "import operator\nsquare_root = operator.attrgetter('sqrt')(jnp)\n"),
    # A re-export that reaches no route, and the same names as an honest answer spells them.
    ("03_graph_optimization", "03.2", "from course_utils.minigraph.onnx import Graph\n"),
    ("02_static_graphs", "02.4", "from course_utils.minigraph.ops import Op, register_op\n"),
])
def test_reflection_and_readers_that_can_reach_no_route_cost_nothing(name, exercise, answer):
    assert not judged(name, exercise, answer).forbidden


def test_a_re_export_is_matched_at_its_home():
    """The course's package is imported in the grader (cheap: no framework at import time);
    the frameworks are not, so their names are matched as spelled."""
    home = "course_utils.minigraph.session.prune"
    assert static._home("course_utils.minigraph.onnx.prune") == home
    home = "course_utils.minigraph.ops.get_op.vjp"  # an attribute of what get_op makes
    assert static._home("course_utils.minigraph.get_op.vjp") == home
    assert static._home("course_utils.minigraph.session") is None  # a module at its home
    assert static._home("torch.nn.functional.silu") is None
    assert static._home("course_utils.grading.probe.report") is None
