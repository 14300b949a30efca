"""Checks as probe plus verdict (issue 25): the transport, the answer key, and the attacks that
moved out of reach once expected values, tolerances and verdicts left the learner's kernel.

The transport is tested on its own (no kernel). The attacks are graded end to end with
``grade_notebook`` on a tiny course written here (a solutions notebook in the new format, its
answer key built from it), and on lesson 00 as converted; each answer below scored full marks
when the check computed its expected value in the kernel.
"""

from __future__ import annotations

import base64
import json
import pickle
import subprocess
import sys
from pathlib import Path

import nbformat
import nbformat.v4 as v4
import numpy as np
import pytest

from course_utils.grading import key as answer_key
from course_utils.grading import verdict
from course_utils.grading.build import build_notebook, notebook_bytes
from course_utils.grading.grade import grade_notebook
from course_utils.grading.probe import MAX_REPORT_BYTES, ReportError, encode

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 30.0

# -- the transport ---------------------------------------------------------------------------------


def roundtrip(**fields):
    return verdict.decode(json.dumps({k: encode(v) for k, v in fields.items()}))


def test_plain_values_and_arrays_come_back_equal_with_their_types():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = roundtrip(x=1, y=2.5, s="é", t=(1, [2, None]), d={(1, 2): True}, a=a,
                    c=1 + 2j, b=np.array([True, False]), n=np.int64(7), f=np.float64(0.5))
    assert got["t"] == (1, [2, None]) and got["d"] == {(1, 2): True} and got["c"] == 1 + 2j
    assert got["a"].dtype == np.float32 and got["a"].shape == (3, 4)
    assert np.array_equal(got["a"], a) and got["b"].dtype == bool
    assert type(got["n"]) is int and type(got["f"]) is float


def test_a_learners_object_or_an_object_array_is_refused_in_the_kernel():
    class Yes:
        def __eq__(self, other):
            return True

    with pytest.raises(ReportError, match="not plain data"):
        encode(Yes())
    with pytest.raises(ReportError, match="dtype object"):
        encode(np.array([Yes()], dtype=object))

    class Sneaky(float):
        def __eq__(self, other):
            return True

    assert type(encode(Sneaky(3.0))) is float  # a subclass becomes the plain value


def array(dtype: str, shape: list, data: bytes) -> str:
    return json.dumps({"a": {"$array": [dtype, shape, base64.b64encode(data).decode()]}})


@pytest.mark.parametrize("text, why", [
    (array("object", [1], b"\0" * 8), "dtype"),
    (array("float64", [2], b"\0" * 8), "needs 16 bytes"),
    (array("float64", [-1], b""), "shape"),
    (array("V8", [1], b"\0" * 8), "dtype"),
    (json.dumps({"a": {"$pickle": base64.b64encode(pickle.dumps(object)).decode()}}),
     "unknown tag"),
    (json.dumps({"a": {"py/object": "os.system"}}), "unknown tag"),
    (json.dumps({"a": {"$tuple": [1], "$dict": []}}), "not a tagged value"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply|not a JSON object"),
    ('{"a": ' + "[" * 40 + "1" + "]" * 40 + "}", "nested"),
    (json.dumps({"a": "x" * (MAX_REPORT_BYTES + 10_000)}), "at most"),
    (json.dumps({"a": [0] * 300_000}), "more than"),
    (pickle.dumps({"a": 1}), "not JSON"),
])
def test_the_grader_refuses_reports_outside_the_format(text, why):
    with pytest.raises(verdict.TransportError, match=why):
        verdict.decode(text)


def test_a_report_without_the_nonce_or_from_the_display_formatter_is_refused():
    good = {"status": "error", "ename": "Exception",
            "evalue": json.dumps({"nonce": "n1", "fields": {"got": 1}})}
    assert verdict.parse_report("n1", good) == {"got": 1}
    with pytest.raises(verdict.TransportError, match="altered"):
        verdict.parse_report("n2", good)
    with pytest.raises(verdict.TransportError, match="did not come back"):
        verdict.parse_report("n1", {"status": "ok", "data": {"text/plain": good["evalue"]}})


def test_sections_are_cut_at_the_markers_and_checked():
    probe, ref, ver = verdict.sections("a = 1\n### REFERENCE x\nb = 2\n### VERDICT y\nassert a\n")
    assert (probe, ref, ver) == ("a = 1\n", "b = 2\n", "assert a\n")
    assert verdict.sections("assert 1 == 1") is None
    for bad in ("### VERDICT\n### REFERENCE\n", "x\n### REFERENCE\n", "  ### VERDICT\n",
                "### VERDICT\n### VERDICT\n"):
        with pytest.raises(ValueError):
            verdict.sections(bad)


# -- a tiny course in the new format ---------------------------------------------------------------

SETUP = "import numpy as np\n\ndef scale(v):\n    return 2.0 * v"
SOLUTION = "def double(x):\n    ### BEGIN SOLUTION\n    return 2.0 * x\n    ### END SOLUTION"
CHECK = '''from course_utils.grading.probe import report

x = np.random.default_rng(0).normal(size=5)
report(got=np.asarray(double(x), dtype=float))
### REFERENCE (the answer key)
report(want=scale(x))
### VERDICT (in the grader)
assert np.allclose(got, want), f"expected {want}, got {got}"'''
HIDDEN = '''from course_utils.grading.probe import report

x = np.arange(4.0) - 7.5
report(got=np.asarray(double(x), dtype=float))
### REFERENCE
report(want=scale(x))
### VERDICT
SECRET_TOLERANCE = 1e-12
assert np.allclose(got, want, atol=SECRET_TOLERANCE), "hidden: HIDDEN-LOGIC-MARKER"'''
PREDICT = "### BEGIN SOLUTION\nn_nodes = 7\nfaster = 'graph'\n### END SOLUTION"
PREDICT_CHECK = '''from course_utils.grading.probe import predicted
### VERDICT
predicted("n_nodes", "faster")'''


def tiny_course(root: Path) -> Path:
    """``root/solutions/99_probe.ipynb`` (with its key built); returns the solutions folder."""
    meta = {"solution": {"tags": ["solution"], "grading": {"id": "99.1"}},
            "check": {"tags": ["check"], "grading": {"id": "99.1", "points": 1}},
            "hidden": {"tags": ["check", "hidden"], "grading": {"id": "99.1", "points": 1}},
            "psol": {"tags": ["solution"], "grading": {"id": "99.2"}},
            "pcheck": {"tags": ["check"], "grading": {"id": "99.2", "points": 1}}}
    cells = [v4.new_code_cell(SETUP), v4.new_code_cell(SOLUTION, metadata=meta["solution"]),
             v4.new_code_cell(CHECK, metadata=meta["check"]),
             v4.new_code_cell(HIDDEN, metadata=meta["hidden"]),
             v4.new_code_cell(PREDICT, metadata=meta["psol"]),
             v4.new_code_cell(PREDICT_CHECK, metadata=meta["pcheck"])]
    for k, cell in enumerate(cells):
        cell.id = f"c{k}"
    solutions = root / "solutions"
    solutions.mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'tiny'\n")
    nb = v4.new_notebook(cells=cells)
    (solutions / "99_probe.ipynb").write_bytes(notebook_bytes(nb))
    (root / "exercises").mkdir()
    (root / "exercises" / "99_probe.ipynb").write_bytes(
        notebook_bytes(build_notebook(nb, "99_probe.ipynb")))
    answer_key.load(solutions / "99_probe.ipynb", solutions)
    return solutions


def submit(root: Path, answer: str, predictions: str = "n_nodes = 7\nfaster = 'graph'") -> dict:
    """Grade the exercise with ``answer`` as its solution cell; {exercise: (points, message)}."""
    nb = nbformat.read(root / "exercises" / "99_probe.ipynb", as_version=4)
    nb.cells[1].source = answer
    nb.cells[3].source = predictions
    path = root / "sub" / "ada.ipynb"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(notebook_bytes(nb))
    report = grade_notebook(path, root / "solutions", timeout=TIMEOUT)
    assert not report.error, report.error
    return {e.exercise: (e.points, "\n".join(c.message for c in e.checks if c.message)) for e in
            report.exercises}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    tiny_course(root)
    return root


def test_the_key_holds_the_expected_values_and_the_literals_and_stays_out_of_exercises(course):
    key = answer_key.load(course / "solutions" / "99_probe.ipynb", course / "solutions",
                          create=False)
    assert key is not None and set(key.checks) == {"c2", "c3"}
    assert key.literals == {"n_nodes": 7, "faster": "graph"}
    assert answer_key.cache_path(course / "solutions" / "99_probe.ipynb").is_file()
    exercise = (course / "exercises" / "99_probe.ipynb").read_text()
    assert "HIDDEN-LOGIC-MARKER" not in exercise and "n_nodes = 7" not in exercise


WRITE_KEYS = """
import sys
from pathlib import Path
from course_utils.grading import key
text = Path(sys.argv[2]).read_text()
for _ in range(300):
    key.save(Path(sys.argv[1]), text)
"""


def test_two_processes_writing_one_key_at_once_leave_one_whole_key(tmp_path):
    # Two graders (or two test workers) that build the same key both write it. With one fixed
    # temporary name, one of them renamed the other's half-written file into place, and then
    # failed on a temporary file that was no longer there.
    cache = tmp_path / ".answer-key" / "99_probe.json"
    texts = [json.dumps({"writer": n, "pad": str(n) * 50_000}) for n in range(2)]
    for n, text in enumerate(texts):
        (tmp_path / f"key{n}.json").write_text(text)
    writers = [subprocess.Popen([sys.executable, "-c", WRITE_KEYS, str(cache),
                                 str(tmp_path / f"key{n}.json")], stderr=subprocess.PIPE,
                                text=True) for n in range(2)]
    errors = [w.communicate(timeout=120)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors
    assert cache.read_text() in texts
    assert sorted(p.name for p in cache.parent.iterdir()) == [".gitignore", "99_probe.json"]


def test_an_honest_answer_gets_full_marks(course):
    assert submit(course, "def double(x):\n    return x + x") == {"99.1": (2, ""),
                                                                   "99.2": (1, "")}


ATTACKS = {
    # Overwrites its input in place so that the reference, worked out afterwards from it, agrees.
    "in-place": "def double(x):\n    out = x * 3.0\n    x[:] = out / 2.0\n    return out",
    # Rebinds, in the check's frame, the helper the reference calls.
    "caller-frame": ("import sys\n\ndef double(x):\n"
                     "    sys._getframe(1).f_globals['scale'] = lambda v: 3.0 * v\n"
                     "    return 3.0 * x"),
    # Shadows the helper name the check uses, from its own cell.
    "shadowing": "def scale(v):\n    return 3.0 * v\n\ndef double(x):\n    return 3.0 * x",
    # Loosens numpy's default tolerances (the same function object: no fingerprint sees it).
    "loose-numpy": ("import numpy as np\nnp.allclose.__defaults__ = (1e9, 1e9, False)\n"
                    "np.isclose.__defaults__ = (1e9, 1e9, False)\n\n"
                    "def double(x):\n    return 3.0 * x"),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_an_answer_that_reaches_into_the_kernel_gains_nothing(course, attack):
    points, message = submit(course, ATTACKS[attack])["99.1"]
    assert points == 0, (attack, message)
    assert "expected" in message


def test_walking_up_the_stack_finds_no_verdict_and_no_expected_value(course):
    answer = ("import linecache, sys\n\ndef double(x):\n"
              "    frame, leaks = sys._getframe(1), []\n"
              "    while frame is not None:\n"
              "        text = ''.join(linecache.getlines(frame.f_code.co_filename))\n"
              "        if 'report(got' in text:  # the check cell's own frame\n"
              "            leaks += [m for m in ('HIDDEN-LOGIC-MARKER', 'SECRET_TOLERANCE', "
              "'report(want', 'VERDICT') if m in text]\n"
              "            leaks += [n for n in ('want',) if n in frame.f_globals]\n"
              "        frame = frame.f_back\n"
              "    if leaks:\n"
              "        raise RuntimeError(f'LEAK {leaks}')\n"
              "    return 2.0 * x")
    graded = submit(course, answer)
    assert graded["99.1"][0] == 2, graded  # it ran in both checks and found nothing to leak


def test_predictions_are_read_from_the_notebook_and_compared_in_the_grader(course):
    assert submit(course, "def double(x):\n    return 2 * x",
                  "n_nodes = 6\nfaster = 'graph'")["99.2"] == (
        0, "AssertionError: 1 of 2 predictions right; not right: `n_nodes`. Run the "
        "measurement below and read why.")
    points, message = submit(course, "def double(x):\n    return 2 * x",
                             "n_nodes = 3 + 4\nfaster = 'graph'")["99.2"]
    assert points == 0 and "not computed" in message
    # In the kernel, the right answers are nowhere to be found: a learner who rebinds a name
    # later, or reads the check, still gets nothing from it.
    points, _ = submit(course, "def double(x):\n    return 2 * x",
                       "import sys\nn_nodes = 1\nfaster = 'eager'\n"
                       "n_nodes = sys.modules.get('course_utils.grading.verdict') and 7")["99.2"]
    assert points == 0


def test_a_release_has_no_key_so_predictions_are_recorded_for_the_instructor(course, tmp_path):
    release = tmp_path / "release"
    (release / ".course-checks").mkdir(parents=True)
    (release / "pyproject.toml").write_text("[project]\nname = 'tiny'\n")
    data = (course / "exercises" / "99_probe.ipynb").read_bytes()
    (release / ".course-checks" / "99_probe.ipynb").write_bytes(data)
    nb = nbformat.reads(data.decode(), as_version=4)
    nb.cells[1].source = "def double(x):\n    return x + x"
    nb.cells[3].source = "n_nodes = 7\nfaster = 'graph'"
    (release / "mine.ipynb").write_bytes(notebook_bytes(nb))
    report = grade_notebook(release / "mine.ipynb", release / ".course-checks", timeout=TIMEOUT)
    rows = {e.exercise: e for e in report.exercises}
    assert rows["99.1"].points == 1 and rows["99.1"].status == "pass"  # visible check only
    assert rows["99.2"].status == "recorded" and rows["99.2"].points == 0
    assert "your instructor grades them" in rows["99.2"].message
    assert not (release / ".answer-key").exists() and report.passed


# -- the converted lessons -------------------------------------------------------------------------

# Every exercise notebook is in the probe-and-verdict format (a new one too: it is found here).
CONVERTED = tuple(sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb")))


@pytest.mark.parametrize("stem", CONVERTED)
def test_a_converted_lesson_ships_no_digest_no_expected_value_and_no_hidden_check(stem):
    nb = nbformat.read(ROOT / "exercises" / f"{stem}.ipynb", as_version=4)
    solutions = nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
    checks = [c for c in nb.cells if "check" in c.metadata.get("tags", [])]
    assert checks and all(verdict.sections(c.source) is not None for c in checks)
    assert all(verdict.sections(c.source) is not None for c in solutions.cells
               if "check" in c.metadata.get("tags", []))
    text = json.dumps(nb)
    assert "check_predictions" not in text
    for digest in ("00d752e0682bbd70", "5f4e932b83dcf564"):  # 00.3's old digests
        assert digest not in text


def test_lesson_00_attacks_on_the_check_namespace_gain_nothing(tmp_path):
    """00.2: an answer that rebinds init_mlp in the check's frame (the reference before), and
    00.1: one that loosens numpy's tolerances; each took the check's points in the old format."""
    nb = nbformat.read(ROOT / "exercises" / "00_setup.ipynb", as_version=4)
    solution = {c.get("metadata", {}).get("grading", {}).get("id"): c for c in nb.cells
                if "solution" in c.metadata.get("tags", [])}
    solution["00.1"].source = (
        "np.isclose.__defaults__ = (1.0, 1.0, False)\n\n"
        "def mean_squared_error(pred, target):\n"
        "    pred, target = np.asarray(pred, dtype=float), np.asarray(target, dtype=float)\n"
        "    if pred.shape != target.shape:\n"
        "        raise ValueError(f'{pred.shape} vs {target.shape}')\n"
        "    return float(np.mean((pred - target) ** 2)) * 1.4")
    solution["00.2"].source = (
        "import sys\n\ndef count_parameters(sizes):\n"
        "    fake = lambda s, seed=0: [(np.zeros((1, 1)), np.zeros(1))]\n"
        "    sys._getframe(1).f_globals['init_mlp'] = fake\n"
        "    return 2")
    solution["00.3"].source = "shape_after_broadcast = (3, 3)\nnumpy_raises = False"
    path = tmp_path / "00_setup.ipynb"
    path.write_bytes(notebook_bytes(nb))
    report = grade_notebook(path, ROOT / "solutions", timeout=60.0)
    rows = {e.exercise: e for e in report.exercises}
    assert rows["00.1"].points == 1, rows["00.1"]  # the shape check only
    assert "expected (0 + 0 + 4) / 3" in rows["00.1"].checks[0].message
    assert rows["00.2"].points == 0, rows["00.2"]
    assert "sizes (3, 2): expected 8, got 2" in rows["00.2"].checks[0].message
    assert rows["00.3"].points == 1
