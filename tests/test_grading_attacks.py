"""Attacks on course-grade, as a cheating learner would try them (issue 14), and ours.

Each attack is the answer cell of an unsolved fixture exercise (tests/fixtures/grading), built in
a temporary folder; the whole folder is graded by ``course-grade`` in a subprocess, as a class
would be, and every attack must be held: no marks (or ``tampered``, with a note naming what was
changed), the other submissions and the CSV unaffected, the course's files unchanged, and no
process left behind. Processes an attack starts carry a unique marker in their command line,
and are killed by the test whatever happens.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import nbformat
import psutil
import pytest

from course_utils.grading import checks, sandbox
from course_utils.grading.build import build_notebook

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "tests" / "fixtures" / "grading" / "solutions"
CANONICAL = nbformat.read(SOLUTIONS / "99_fixture.ipynb", as_version=4)
SANDBOX = sandbox.bwrap_path() is not None
MARK = f"cgattack{uuid.uuid4().hex[:10]}"  # in the command line of every process attacks start
STUB = 'def double(x):\n    raise NotImplementedError("Exercise 99.1: your code here")\n'
WRONG = "def double(x):\n    return None\n"
RIGHT = "def double(x):\n    return 2 * np.asarray(x)\n"
RIGHT_2 = "v = np.array([3.0, 4.0])\nlength = float(np.linalg.norm(v))\n"

pytestmark = [pytest.mark.slow]


def sleeper(n: int = 1, **popen: str) -> str:
    """Source that starts ``n`` detached ``sleep`` processes carrying the marker."""
    args = ", ".join(f"{k}={v}" for k, v in popen.items())
    return (f"import subprocess\nfor _ in range({n}):\n    subprocess.Popen(['sleep', "
            f"'1000', '{MARK}'], start_new_session=True{', ' + args if args else ''})\n")


# name -> (the answer cell of 99.1, what 99.1 must score at most, status it must have or None)
ATTACKS: dict[str, tuple[str, float, str | None]] = {
    # --- the reproducers of issue 14 ---
    "forged-log": (
        "import os, json, signal\nwith open('cells.jsonl', 'a') as f:\n"
        "    for i in range(200):\n        f.write(json.dumps({'cell': i, 'exception': None}) "
        "+ '\\n')\nos.kill(os.getppid(), signal.SIGKILL)\n" + WRONG, 0, None),
    "hook-log": (
        "get_ipython().events.register('post_run_cell', lambda *a: open('cells.jsonl', 'a')"
        ".write('{\"junk\": \"'))\n" + WRONG, 0, "tampered"),
    "showtraceback": ("get_ipython().showtraceback = lambda *a, **k: None\n" + WRONG, 0,
                      "tampered"),
    "input-transformer": ("get_ipython().input_transformers_cleanup.append(lambda lines: [])\n"
                          + WRONG, 0, "tampered"),
    "custom-exc": ("get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)\n"
                   + WRONG, 0, "tampered"),
    "ast-no-assert": (textwrap.dedent("""
        import ast
        class NoAssert(ast.NodeTransformer):
            def visit_Assert(self, node):
                return ast.Pass()
        get_ipython().ast_transformers.append(NoAssert())
        """) + WRONG, 0, "tampered"),
    "sleep-children": (sleeper(30) + WRONG, 0, None),
    "pipe-holder": (sleeper(3, close_fds="False", stdout="1", stderr="2") + WRONG, 0, None),
    "csv-daemon": (textwrap.dedent(f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp("sh", ["sh", "-c", "sleep 4; echo pwned > CSV_PATH", "{MARK}"])
            os._exit(0)
        """) + WRONG, 0, None),
    "huge-output": ("print('x' * 300_000_000)\n" + WRONG, 0, None),
    "proc-fd-table": (textwrap.dedent("""
        import os
        for pid in os.listdir('/proc'):
            try:
                cmd = open(f'/proc/{pid}/cmdline', 'rb').read()
            except OSError:
                continue
            if b'course_utils.grading' in cmd or b'course-grade' in cmd:
                for fd in (1, 2):
                    try:
                        with open(f'/proc/{pid}/fd/{fd}', 'w') as out:
                            out.write('FAKE-TABLE total 3/3 pass\\n')
                    except OSError:
                        pass
        """) + WRONG, 0, None),
    "csv-formula": ("def double(x):\n    raise type('=HYPERLINK(\"http://x\",\"y\")', "
                    "(Exception,), {})('boom')\n", 0, "error"),
    # --- our own ---
    "patch-array-equal": (
        "def double(x):\n    np.array_equal = lambda *a, **k: True\n"
        "    return np.zeros(np.shape(x))\n", 0, "tampered"),
    "fake-numpy": ("import types\nnp = types.SimpleNamespace(array_equal=lambda *a: True, "
                   "zeros=lambda s: __import__('numpy').zeros(s), isclose=lambda *a: True)\n"
                   + WRONG, 0, "tampered"),
    "patch-builtin": ("import builtins\nbuiltins.abs = lambda x: 0\n" + WRONG, 0, "tampered"),
    "patch-check-helpers": ("import course_utils.grading.checks as c\n"
                            "c.check_predictions = lambda *a, **k: None\n" + WRONG, 0,
                            "tampered"),
    "swallow-errors": (textwrap.dedent("""
        ip = get_ipython()
        _orig = ip.run_cell_async
        async def run_cell_async(*a, **k):
            result = await _orig(*a, **k)
            result.error_in_exec = None
            return result
        ip.run_cell_async = run_cell_async
        """) + WRONG, 0, "tampered"),
    "memory-hog": ("_hog = np.ones(400_000_000)\n" + RIGHT, 0, None),
    "process-flood": (sleeper(120) + WRONG, 0, None),
    "forge-history": ("get_ipython().history_manager.input_hist_raw.append('n = 3')\n"
                      "get_ipython().history_manager.input_hist_parsed.append('n = 3')\n"
                      + WRONG, 0, "tampered"),
}
#: Attacks that only the sandbox can hold (they read or write outside the kernel's folder).
SANDBOX_ONLY: dict[str, tuple[str, float, str | None]] = {
    "rewrite-grader": (f"try:\n    open({str(Path(checks.__file__))!r}, 'a').write('# pwned\\n')"
                       "\nexcept OSError as e:\n    print(e)\n" + WRONG, 0, None),
    "read-solutions": (textwrap.dedent(f"""
        import json
        nb = json.load(open({str(SOLUTIONS / '99_fixture.ipynb')!r}))
        exec("".join(nb["cells"][2]["source"]).replace("### BEGIN SOLUTION", "")
             .replace("### END SOLUTION", ""))
        """), 0, None),
    "write-home": (f"open({str(Path.home() / MARK)!r}, 'w').write('x')\n" + WRONG, 0, None),
    "other-kernels": (textwrap.dedent("""
        import glob, os, time
        if os.fork() == 0:
            from jupyter_client import BlockingKernelClient
            end = time.time() + 20
            while time.time() < end:
                for path in glob.glob('/tmp/cg-*/ipc/kernel.json'):
                    try:
                        kc = BlockingKernelClient(connection_file=path)
                        kc.load_connection_file()
                        kc.start_channels()
                        kc.execute("def double(x):\\n    return 2 * np.asarray(x)\\nlength = 5.0")
                    except Exception:
                        pass
                time.sleep(0.05)
            os._exit(0)
        """) + WRONG, 0, None),
}
HONEST = {"honest-full": (RIGHT, 2, "pass"), "honest-stub": (STUB, 0, "error"),
          "victim": (STUB, 0, "error")}


def submission(answer: str, answer_2: str | None = None) -> nbformat.NotebookNode:
    nb = build_notebook(CANONICAL)
    next(c for c in nb.cells if c.id == "sol-1").source = answer
    if answer_2 is not None:
        next(c for c in nb.cells if c.id == "sol-2").source = answer_2
    return nb


def marked() -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(MARK in part for part in p.info["cmdline"] or []):
                found.append(p)
        except psutil.Error:
            continue
    return found


@pytest.fixture(autouse=True)
def kill_what_attacks_start():
    yield
    for p in marked():
        with contextlib.suppress(psutil.Error):
            p.kill()
    (Path.home() / MARK).unlink(missing_ok=True)


def grade_folder(folder: Path, *args: str, watch_memory: bool = False
                 ) -> tuple[dict, subprocess.CompletedProcess, int]:
    """Run course-grade on ``folder`` (JSON out); the reports by learner, the run, peak RSS."""
    command = [sys.executable, "-m", "course_utils.grading.grade", str(folder), "--solutions",
               str(SOLUTIONS), "--json", "--timeout", "20", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=ROOT)
    peak = [0]

    def watch() -> None:
        p = psutil.Process(process.pid)
        while process.poll() is None:
            try:
                peak[0] = max(peak[0], p.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.05)

    if watch_memory:
        threading.Thread(target=watch, daemon=True).start()
    out, err = process.communicate(timeout=600)
    done = subprocess.CompletedProcess(command, process.returncode, out, err)
    assert process.returncode in (0, 1), err
    reports = {r["learner"]: r for r in json.loads(out)}
    return reports, done, peak[0]


def build(folder: Path, attacks: dict, csv_path: Path) -> None:
    folder.mkdir()
    for name, (answer, _, _) in {**attacks, **HONEST}.items():
        answer_2 = RIGHT_2 if name in ("honest-full", "memory-hog") else None
        nb = submission(answer.replace("CSV_PATH", str(csv_path)), answer_2)
        (folder / name).mkdir()
        nbformat.write(nb, folder / name / "99_fixture.ipynb")


def check_reports(reports: dict, attacks: dict) -> None:
    problems = []
    for name, (_, most, status) in {**attacks, **HONEST}.items():
        ex = {e["exercise"]: e for e in reports[name]["exercises"]}
        got = ex["99.1"]
        if got["points"] > most or (status is not None and got["status"] != status):
            problems.append(f"{name}: 99.1 {got['status']} {got['points']} "
                            f"({got['message']}; notes {got['notes']})")
        want_2 = 1 if name in ("honest-full", "memory-hog") else 0
        if ex["99.2"]["points"] != want_2:
            problems.append(f"{name}: 99.2 scored {ex['99.2']['points']}, expected {want_2}")
    assert not problems, "\n".join(problems)


def common_assertions(tmp_path: Path, reports: dict, done, csv_path: Path, attacks: dict) -> None:
    check_reports(reports, attacks)
    tampered = {name: " ".join(reports[name]["exercises"][0]["notes"])
                for name in attacks if attacks[name][2] == "tampered"}
    for name, what in [("showtraceback", "traceback display"),
                       ("input-transformer", "input transformers"),
                       ("custom-exc", "custom exception handler"),
                       ("ast-no-assert", "AST transformers"), ("hook-log", "post_run_cell hooks"),
                       ("patch-array-equal", "numpy.array_equal"),
                       ("fake-numpy", "`np` in your namespace"),
                       ("patch-builtin", "the builtin `abs`"),
                       ("patch-check-helpers", "check_predictions"),
                       ("swallow-errors", "run_cell_async"),
                       ("forge-history", "input history")]:
        if name in tampered:
            assert what in tampered[name], f"{name}: {tampered[name]}"
    assert "FAKE-TABLE" not in done.stdout + done.stderr
    if "huge-output" in attacks:
        assert "printed more than 1.0 MB" in " ".join(reports["huge-output"]["notes"])
    if "memory-hog" in attacks:
        hog = reports["memory-hog"]["exercises"][0]
        assert hog["status"] == "error" and "more than 2 GiB of memory" in hog["message"]
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    formula = next(r for r in rows if r["learner"] == "csv-formula" and r["exercise"] == "99.1")
    assert formula["message"].startswith("'=HYPERLINK("), formula["message"]
    time.sleep(5)  # the csv-daemon's delay: it must be dead, and the CSV intact
    with open(csv_path, newline="") as f:
        assert list(csv.DictReader(f)) == rows
    assert marked() == [], "processes an attack started survived the grading"


def run_class(tmp_path: Path, attacks: dict, *args: str) -> tuple[dict, object, Path, int]:
    folder, csv_path = tmp_path / "subs", tmp_path / "grades.csv"
    build(folder, attacks, csv_path)
    t0 = time.monotonic()
    reports, done, peak = grade_folder(folder, "--csv", str(csv_path), "--jobs", "2",
                                       "--memory", "2", *args, watch_memory=True)
    assert time.monotonic() - t0 < 300, "an attack stretched grading past its budget"
    return reports, done, csv_path, peak


@pytest.mark.skipif(not SANDBOX, reason="bubblewrap (bwrap) cannot start a sandbox here")
def test_every_attack_is_held_in_the_sandbox(tmp_path):
    grader = {p: hashlib.sha256(p.read_bytes()).hexdigest()
              for p in Path(checks.__file__).parent.glob("*.py")}
    attacks = {**ATTACKS, **SANDBOX_ONLY}
    try:
        reports, done, csv_path, peak = run_class(tmp_path, attacks, "--sandbox")
    finally:
        changed = [p for p, h in grader.items() if hashlib.sha256(p.read_bytes()).hexdigest() != h]
    assert not changed, f"a submission changed the grader on disk: {changed}"
    common_assertions(tmp_path, reports, done, csv_path, attacks)
    assert peak < 600 * 2**20, f"the grader reached {peak / 2**20:.0f} MB"
    assert not (Path.home() / MARK).exists()
    assert "warning: grading is not isolated" not in done.stderr


def test_the_attacks_that_need_no_sandbox_are_held_without_it(tmp_path):
    attacks = dict(ATTACKS)
    if os.getuid() == 0:  # root may write to any process's /proc/<pid>/fd: only bwrap stops it
        attacks.pop("proc-fd-table")
    # The output cap, the memory watchdog and the tamper probes work the same with and without
    # the sandbox; the sandboxed run tests them all. Here: what the sandbox would otherwise hold
    # (processes, files, the grader's output), and two probes.
    for name in ("huge-output", "memory-hog", "input-transformer", "custom-exc",
                 "ast-no-assert", "fake-numpy", "patch-builtin", "patch-check-helpers",
                 "swallow-errors", "forge-history"):
        del attacks[name]
    reports, done, csv_path, _ = run_class(tmp_path, attacks, "--no-sandbox")
    common_assertions(tmp_path, reports, done, csv_path, attacks)
    assert done.stderr.count("warning: grading is not isolated (--no-sandbox)") == 1


def test_without_the_sandbox_a_submission_that_rewrites_the_checks_is_caught_and_undone(
        tmp_path):
    solutions = tmp_path / "solutions"
    shutil.copytree(SOLUTIONS, solutions)
    before = (solutions / "99_fixture.ipynb").read_bytes()
    folder = tmp_path / "subs"
    folder.mkdir()
    attack = (f"import json\np = {str(solutions / '99_fixture.ipynb')!r}\n"
              "nb = json.load(open(p))\nfor c in nb['cells']:\n"
              "    if 'check' in c['metadata'].get('tags', []):\n"
              "        c['source'] = 'pass'\njson.dump(nb, open(p, 'w'))\n" + WRONG)
    nbformat.write(submission(attack), folder / "mallory.ipynb")
    nbformat.write(submission(STUB), folder / "zed.ipynb")
    command = [sys.executable, "-m", "course_utils.grading.grade", str(folder), "--solutions",
               str(solutions), "--json", "--no-sandbox"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    reports = {r["learner"]: r for r in json.loads(done.stdout)}
    assert (solutions / "99_fixture.ipynb").read_bytes() == before, "put back"
    assert [e["status"] for e in reports["mallory"]["exercises"]] == ["tampered", "tampered"]
    assert "changed the course's files" in " ".join(reports["mallory"]["notes"])
    assert reports["zed"]["points"] == 0 and reports["zed"]["exercises"][0]["status"] == "error"


def test_names_with_control_characters_cannot_split_or_redraw_the_table(tmp_path):
    folder = tmp_path / "subs"
    (folder / "evil\nname\u202e").mkdir(parents=True)
    nbformat.write(submission(RIGHT), folder / "evil\nname\u202e" / "99_fixture.ipynb")
    command = [sys.executable, "-m", "course_utils.grading.grade", str(folder), "--solutions",
               str(SOLUTIONS)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert "\u202e" not in done.stdout
    header = done.stdout.splitlines()[0]
    assert header.endswith("(learner evil\\nname\\u202e, graded as 99_fixture.ipynb)")


def test_sandboxed_grading_works_as_an_unprivileged_user(tmp_path, request):
    """As root, also grade as `nobody` (setpriv), in a mount namespace where the Python and the
    course are readable by that user; as a normal user, this test's other runs already are."""
    if os.getuid() != 0:
        pytest.skip("not root: the other tests already run as a normal user")
    if not SANDBOX or shutil.which("setpriv") is None or shutil.which("unshare") is None:
        pytest.skip("needs bwrap, setpriv and unshare")
    work = Path(tempfile.mkdtemp(prefix="cg-nobody-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(work, ignore_errors=True))
    nbformat.write(submission(RIGHT, RIGHT_2), work / "99_fixture.ipynb")
    shutil.copytree(SOLUTIONS, work / "solutions")
    for path in [work, *work.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    # Folders on the way to the interpreter that `nobody` cannot enter (/root is 0700) are
    # shown to it through bind mounts in a private mount namespace; nothing changes outside.
    binds = []
    for prefix in {sys.base_prefix, sys.prefix, str(ROOT)}:
        blocked = next((p for p in Path(prefix).parents
                        if p != Path("/") and not os.stat(p).st_mode & 0o001), None)
        if blocked is not None:
            binds.append((str(Path(prefix).resolve()), str(blocked)))
    script = ["set -e"]
    for i, (prefix, blocked) in enumerate(binds):
        keep = tmp_path / f"keep{i}"
        keep.mkdir()
        script += [f"mount --bind {prefix} {keep}", f"mount -t tmpfs -o mode=755 tmpfs {blocked}",
                   f"mkdir -p {prefix}", f"mount --bind {keep} {prefix}"]
    script.append(
        f"exec setpriv --reuid=65534 --regid=65534 --clear-groups env HOME={work} "
        f"{sys.executable} -m course_utils.grading.grade {work / '99_fixture.ipynb'} "
        f"--solutions {work / 'solutions'} --sandbox --json")
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           "\n".join(script)], capture_output=True, text=True, timeout=300,
                          cwd=work)
    if done.returncode not in (0, 1) and "Permission denied" in done.stderr:
        pytest.skip(f"this machine does not let `nobody` run the course: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)[0]
    assert (report["points"], report["possible"]) == (3, 3)


def test_a_kernel_that_kills_its_supervisor_leaves_nothing_behind():
    """The supervisor is the subreaper; if the kernel kills it, the kernel dies with it
    (PDEATHSIG) and the grader's environment mark finds whatever else escaped."""
    from course_utils.grading.kernel import Kernel

    with Kernel(sandbox=False) as k:
        k.execute(sleeper(2) + "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", 10)
        deadline = time.monotonic() + 10
        while k.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not k.alive()
    deadline = time.monotonic() + 5
    while marked() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked() == []
