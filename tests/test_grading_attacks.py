"""Attacks on course-grade, as a cheating learner would try them (issue 14), and ours.

Each attack is the answer cell of an unsolved fixture exercise (tests/fixtures/grading), built in
a temporary folder; the whole folder is graded by ``course-grade`` in a subprocess, as a class
would be, and every attack must be held: no marks (or ``tampered``, with a note naming what was
changed), the other submissions and the CSV unaffected, the course's files unchanged, and no
process left behind. Processes an attack starts carry a unique marker in their command line,
and are killed by the test whatever happens.

One class run per mode holds all the attacks of that mode (a kernel per submission, two at a
time): the sandboxed run every attack, the run without the sandbox those the sandbox would
otherwise hold (processes, files, the grader's output, the course's files); the tamper probes
work the same way in both modes.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import nbformat
import nbformat.v4 as v4
import psutil
import pytest
from grader_copy import grader_copy
from machine_speed import slowness

from course_utils.grading import checks, grade, sandbox
from course_utils.grading.build import build_notebook
from course_utils.grading.kernel import GiB, Kernel, Limits
from course_utils.grading.notebook import pipeline

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "tests" / "fixtures" / "grading" / "solutions"
CANONICAL = nbformat.read(SOLUTIONS / "99_fixture.ipynb", as_version=4)
SANDBOX = sandbox.bwrap_path() is not None
MARK = f"cgattack{uuid.uuid4().hex[:10]}"  # in the command line of every process attacks start
STUB = 'def double(x):\n    raise NotImplementedError("Exercise 99.1: your code here")\n'
WRONG = "def double(x):\n    return None\n"
RIGHT = "def double(x):\n    return 2 * np.asarray(x)\n"
RIGHT_2 = "v = np.array([3.0, 4.0])\nlength = float(np.linalg.norm(v))\n"
GRADER = Path(checks.__file__).parent
#: How much slower than an idle two-core machine this one runs now: every time limit below is
#: stretched by it (issue 24), and the tests assert outcomes, not seconds.
SLOW = slowness()
#: A variable of the grader's environment that no kernel may see (issue 25).
SECRET = ("CG_GRADER_SECRET", "s3cret-" + uuid.uuid4().hex[:8])
#: Code that puts the right answer of 99.1 in place if ``SOURCE`` (an expression giving a
#: notebook's JSON text) can be had, and prints why not otherwise.
TAKE_ANSWER = textwrap.dedent("""
    import json, subprocess, course_utils
    from pathlib import Path
    _root = Path(course_utils.__file__).resolve().parents[2]
    try:
        _nb = json.loads(SOURCE)
        _src = next("".join(c["source"]) for c in _nb["cells"] if c.get("id") == "sol-1")
        exec(_src.replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""))
    except Exception as e:
        print("no answer:", type(e).__name__, e)
    """)

pytestmark = [pytest.mark.slow]


def sleeper(n: int = 1, **popen: str) -> str:
    """Source that starts ``n`` detached ``sleep`` processes carrying the marker."""
    args = ", ".join(f"{k}={v}" for k, v in popen.items())
    return (f"import subprocess\nfor _ in range({n}):\n    subprocess.Popen(['sleep', "
            f"'1000', '{MARK}'], start_new_session=True{', ' + args if args else ''})\n")


#: The learner's function sends an execute_reply for the check that calls it, with the grader's
#: probe evaluated by the learner, so the check "passes" before it fails; then THEN.
FORGE = textwrap.dedent("""
    def double(x):
        ip = get_ipython(); k = ip.kernel
        parent = k.get_parent("shell")
        content = {"status": "ok", "execution_count": ip.execution_count, "payload": [],
                   "user_expressions": ip.user_expressions(
                       parent["content"].get("user_expressions") or {})}
        stream = (k.shell_channel_thread.manager.get_subshell_to_shell_channel_socket(None)
                  if k._supports_kernel_subshells else k.shell_stream)
        k.session.send(stream, "execute_reply", content, parent, ident=k._parent_ident["shell"])
        k.session.send(k.iopub_socket, "status", {"execution_state": "idle"}, parent)
        THEN
        return None
    """)
#: Patches numpy.array_equal while a cell's code is on the stack and the grader's probe is not,
#: from wherever the interpreter calls ``_flip`` (never from a thread).
FLIP = textwrap.dedent("""
    import sys, numpy, gc, signal, time
    _real = numpy.array_equal
    def _flip(*_):
        try:
            f, in_check = sys._getframe(1), False
            while f is not None:
                if "probe" in f.f_code.co_name:
                    in_check = False
                    break
                in_check = in_check or "ipykernel_" in f.f_code.co_filename
                f = f.f_back
            numpy.array_equal = (lambda *a, **k: True) if in_check else _real
        except Exception:
            pass
    """)
#: Code compiled under the file name of ipykernel's own module, so it looks like a package's.
IN_PACKAGE_CLOTHES = ("exec(compile({source!r}, __import__('ipykernel.ipkernel').ipkernel"
                      ".__file__, 'exec'), _scope)\n")


def clothed(source: str, then: str) -> str:
    return "_shell, _kernel = get_ipython(), get_ipython().kernel\n_scope = {'_shell': _shell}\n" \
        + IN_PACKAGE_CLOTHES.format(source=textwrap.dedent(source)) + textwrap.dedent(then)


# name -> (the answer cell of 99.1, what 99.1 may score at most, the status it must have (or
# None, or a tuple of statuses it may have), a text its message or notes must hold (or ""))
Attack = tuple[str, float, str | tuple[str, ...] | None, str]
ATTACKS: dict[str, Attack] = {
    # --- the reproducers of issue 14 ---
    "forged-log": (
        "import os, json, signal\nwith open('cells.jsonl', 'a') as f:\n"
        "    for i in range(200):\n        f.write(json.dumps({'cell': i, 'exception': None}) "
        "+ '\\n')\nos.kill(os.getppid(), signal.SIGKILL)\n" + WRONG, 0, None, ""),
    "hook-log": (
        "get_ipython().events.register('post_run_cell', lambda *a: open('cells.jsonl', 'a')"
        ".write('{\"junk\": \"'))\n" + WRONG, 0, "tampered", "post_run_cell hooks"),
    "showtraceback": ("get_ipython().showtraceback = lambda *a, **k: None\n" + WRONG, 0,
                      "tampered", "traceback display"),
    "input-transformer": ("get_ipython().input_transformers_cleanup.append(lambda lines: [])\n"
                          + WRONG, 0, "tampered", "input transformers"),
    "custom-exc": ("get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)\n"
                   + WRONG, 0, "tampered", "custom exception handler"),
    "ast-no-assert": (textwrap.dedent("""
        import ast
        class NoAssert(ast.NodeTransformer):
            def visit_Assert(self, node):
                return ast.Pass()
        get_ipython().ast_transformers.append(NoAssert())
        """) + WRONG, 0, "tampered", "AST transformers"),
    "sleep-children": (sleeper(30) + WRONG, 0, None, ""),
    "pipe-holder": (sleeper(3, close_fds="False", stdout="1", stderr="2") + WRONG, 0, None, ""),
    "csv-daemon": (textwrap.dedent(f"""
        import os
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp("sh", ["sh", "-c", "while [ ! -s CSV_PATH ]; do sleep 0.2; done; "
                                 "echo pwned > CSV_PATH", "{MARK}"])
            os._exit(0)
        """) + WRONG, 0, None, ""),
    "huge-output": ("print('x' * 300_000_000)\n" + WRONG, 0, None, "printed more than 1.0 MB"),
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
        """) + WRONG, 0, None, ""),
    "csv-formula": ("def double(x):\n    raise type('=HYPERLINK(\"http://x\",\"y\")', "
                    "(Exception,), {})('boom')\n", 0, "error", ""),
    # --- the first round's own ---
    "patch-array-equal": (
        "def double(x):\n    np.array_equal = lambda *a, **k: True\n"
        "    return np.zeros(np.shape(x))\n", 0, "tampered", "numpy.array_equal"),
    "fake-numpy": ("import types\nnp = types.SimpleNamespace(array_equal=lambda *a: True, "
                   "zeros=lambda s: __import__('numpy').zeros(s), isclose=lambda *a: True)\n"
                   + WRONG, 0, "tampered", "`np` in your namespace"),
    "patch-builtin": ("import builtins\nbuiltins.abs = lambda x: 0\n" + WRONG, 0, "tampered",
                      "the builtin `abs`"),
    "patch-check-helpers": ("import course_utils.grading.checks as c\n"
                            "c.check_predictions = lambda *a, **k: None\n" + WRONG, 0,
                            "tampered", "check_predictions"),
    "swallow-errors": (textwrap.dedent("""
        ip = get_ipython()
        _orig = ip.run_cell_async
        async def run_cell_async(*a, **k):
            result = await _orig(*a, **k)
            result.error_in_exec = None
            return result
        ip.run_cell_async = run_cell_async
        """) + WRONG, 0, "tampered", "run_cell_async"),
    "memory-hog": ("_hog = np.ones(400_000_000)\n" + RIGHT, 0, "error",
                   "more than 2 GiB of memory"),
    "process-flood": (sleeper(120) + WRONG, 0, None, ""),
    "forge-history": ("get_ipython().history_manager.input_hist_raw.append('n = 3')\n"
                      "get_ipython().history_manager.input_hist_parsed.append('n = 3')\n"
                      + WRONG, 0, "tampered", "input history"),
    # --- the red team's (each one below gained full marks, or hurt the grader, before its
    # fix): lies told deeper than IPython's surface, where the first probe did not look ---
    "execution-result": (textwrap.dedent("""
        from IPython.core.interactiveshell import ExecutionResult
        _ok = ExecutionResult.success
        ExecutionResult.success = property(
            lambda self: True if not self.info.silent else _ok.fget(self))
        """) + WRONG, 0, "tampered", "ExecutionResult.success"),
    "do-execute-in-package-clothes": (clothed("""
        async def do_execute(code, silent, store_history=True, user_expressions=None,
                             allow_stdin=False, **kw):
            reply = await _real(code, silent, store_history, user_expressions, allow_stdin, **kw)
            if not silent and reply.get("status") == "error":
                reply = {"status": "ok", "execution_count": reply["execution_count"],
                         "payload": [],
                         "user_expressions": _shell.user_expressions(user_expressions or {})}
            return reply
        """, """
        _scope["_real"] = _kernel.do_execute
        _kernel.do_execute = _scope["do_execute"]
        """) + WRONG, 0, "tampered", "do_execute"),
    "session-send": (textwrap.dedent("""
        _kernel = get_ipython().kernel
        _send = _kernel.session.send
        def send(stream, kind, content=None, parent=None, *a, **k):
            if (kind == "execute_reply" and content and content.get("status") == "error"
                    and parent and not parent["content"].get("silent")):
                content = {"status": "ok", "execution_count": content.get("execution_count"),
                           "payload": [], "user_expressions": get_ipython().user_expressions(
                               parent["content"].get("user_expressions") or {})}
            return _send(stream, kind, content, parent, *a, **k)
        _kernel.session.send = send
        """) + WRONG, 0, "tampered", "session.send"),
    "json-clean": (textwrap.dedent("""
        import ipykernel.kernelbase as kb
        _clean = kb.json_clean
        def json_clean(obj):
            if isinstance(obj, dict) and obj.get("status") == "error" and "evalue" in obj:
                obj = {"status": "ok", "execution_count": obj.get("execution_count"),
                       "payload": [], "user_expressions": {}}
            return _clean(obj)
        kb.json_clean = json_clean
        """) + WRONG, 0, "tampered", "json_clean"),
    "hook-in-package-clothes": (clothed("""
        def clear(result):
            if result is not None and not result.info.silent:
                result.error_in_exec = None
        """, """
        get_ipython().events.register("post_run_cell", _scope["clear"])
        """) + WRONG, 0, "tampered", "post_run_cell hooks"),
    "class-run-cell": (textwrap.dedent("""
        from IPython.core.interactiveshell import InteractiveShell
        _run = InteractiveShell.run_cell_async
        async def run_cell_async(self, raw_cell, *a, silent=False, **k):
            result = await _run(self, raw_cell, *a, silent=silent, **k)
            if not silent:
                result.error_in_exec = result.error_before_exec = None
            return result
        InteractiveShell.run_cell_async = run_cell_async
        """) + WRONG, 0, "tampered", "InteractiveShell.run_cell_async"),
    "compiler-strips-asserts": (textwrap.dedent("""
        import ast
        _shell = get_ipython()
        class Compiler(type(_shell.compile)):
            def __call__(self, source, filename, symbol):
                body = getattr(source, "body", [])
                canary = len(body) == 1 and isinstance(body[0], ast.Assert) \
                    and isinstance(body[0].test, ast.Constant)
                if isinstance(source, ast.AST) and not canary:
                    return compile(source, filename, symbol, self.flags, True, optimize=1)
                return super().__call__(source, filename, symbol)
        _new = Compiler()
        _new.__dict__.update(_shell.compile.__dict__)
        _shell.compile = _new
        """) + WRONG, 0, "tampered", "compile"),
    "trace-fakes-numpy": (textwrap.dedent("""
        import sys, types, linecache
        _fake = types.SimpleNamespace(array_equal=lambda *a, **k: True,
                                      isclose=lambda *a, **k: True)
        def _line(frame, event, arg):  # numpy is fake only while a line with `assert` runs
            g = frame.f_globals
            if "_real_np" in g:
                g["np"] = g.pop("_real_np")
            if event == "line" and linecache.getline(
                    frame.f_code.co_filename, frame.f_lineno).lstrip().startswith("assert"):
                g["_real_np"], g["np"] = g["np"], _fake
            return _line
        sys.settrace(lambda frame, event, arg:
                     _line if "ipykernel_" in frame.f_code.co_filename else None)
        """) + "def double(x):\n    return np.zeros(np.shape(x))\n", 0, "tampered",
        "sys.gettrace()"),
    "racing-thread": (textwrap.dedent("""
        import sys, threading, time, numpy
        _real = numpy.array_equal
        def _race():
            main = threading.main_thread().ident
            while True:
                frame, in_check = sys._current_frames().get(main), False
                while frame is not None:
                    if "probe" in frame.f_code.co_name:
                        in_check = False
                        break
                    in_check = in_check or "ipykernel_" in frame.f_code.co_filename
                    frame = frame.f_back
                numpy.array_equal = (lambda *a, **k: True) if in_check else _real
                time.sleep(0)
        threading.Thread(target=_race, daemon=True).start()
        def double(x):
            return np.zeros(np.shape(x))
        """), 0, "tampered", "a thread your code started"),
    "swap-function-body": ("import course_utils.grading.checks as c\n"
                           "c.check_predictions.__code__ = (lambda *a, **k: None).__code__\n"
                           + WRONG, 0, "tampered", "check_predictions"),
    "array-function-liar": (textwrap.dedent("""
        class Liar:
            shape = (2, 3)
            def __array_function__(self, func, types, args, kwargs):
                return True
        def double(x):
            return Liar()
        """), 0, "tampered", "__array_function__"),
    "swap-builtins": ("import builtins\n__builtins__ = dict(vars(builtins), len=lambda x: 2)\n"
                      + WRONG, 0, "tampered", "__builtins__"),
    "poison-sys-modules": ("import sys, types\n"
                           "sys.modules['course_utils.grading.checks'] = types.ModuleType('x')\n"
                           + WRONG, 0, "tampered", "course_utils.grading.checks"),
    "import-hook": (textwrap.dedent("""
        import sys
        class Finder:
            def find_spec(self, name, path=None, target=None):
                return None
        sys.meta_path.insert(0, Finder())
        """) + WRONG, 0, "tampered", "sys.meta_path"),
    "shadow-exception": ("NotImplementedError = AssertionError\n" + WRONG, 0, "tampered",
                         "shadows the builtin NotImplementedError"),
    "forge-reply": (FORGE.replace("THEN", "pass"), 0, "tampered", "answered twice"),
    # Whether the grader sees the death while it waits for the check's reply or when the
    # canary after it goes unanswered is a race; either way the kernel "died".
    "forge-reply-then-exit": (FORGE.replace("THEN", "import os; os._exit(0)"), 0, "error",
                              "died"),
    # What a check's call into the answer can do: stop the interpreter, ask for input, recurse.
    "exit-in-check": ("import sys\ndef double(x):\n    sys.exit(0)\n", 0, "error", "SystemExit"),
    "input-in-check": ("def double(x):\n    return input('x? ')\n", 0, "error",
                       "StdinNotImplementedError"),
    # Formatting a 3000-frame traceback takes seconds: on a busy machine it may time out
    # (issue 24). What matters is that it scores nothing, and the next cells still run.
    "recursion-in-check": ("def double(x):\n    return double(x)\n", 0, ("error", "timeout"),
                           ""),
    # --- the second red team's: code the interpreter runs inside a check without a thread (a
    # garbage-collection callback, a signal handler, an audit hook) patches numpy while the
    # check runs and puts it back when the grader's probe runs ---
    "gc-callback-race": (FLIP + "gc.callbacks.append(lambda phase, info: _flip())\n"
                         "def double(x):\n    gc.collect()\n    return np.zeros(np.shape(x))\n",
                         0, "tampered", "gc.callbacks"),
    "gc-callbacks-hidden": (FLIP + "gc.callbacks.append(lambda phase, info: _flip())\n"
                            "gc.callbacks = []\n"
                            "def double(x):\n    gc.collect()\n    return np.zeros(np.shape(x))\n",
                            0, "tampered", "gc.callbacks"),
    "signal-handler-race": (FLIP + "signal.signal(signal.SIGALRM, lambda *a: _flip())\n"
                            "signal.setitimer(signal.ITIMER_REAL, 1e-3, 1e-3)\n"
                            "def double(x):\n    time.sleep(0.01)\n"
                            "    return np.zeros(np.shape(x))\n", 0, None, ""),
    "audit-hook-race": (FLIP + "sys.addaudithook(lambda event, args: _flip())\n"
                        "def double(x):\n    sys._getframe()\n    return np.zeros(np.shape(x))\n",
                        0, "tampered", "sys.addaudithook"),  # the grader reads it in the source
    "del-cycle-race": (FLIP + textwrap.dedent("""
        class _Cycle:  # garbage the collector frees (and the __del__ makes more of)
            def __init__(self):
                self.me = self
            def __del__(self):
                _flip()
                _Cycle()
        _Cycle()
        def double(x):
            gc.collect()
            return np.zeros(np.shape(x))
        """), 0, "tampered", "defines __del__"),
    # No __del__: a weakref callback on garbage with a cycle, which the collector frees (the
    # grader turns automatic collection off while a check and its probe run) ...
    "weakref-cycle-race": (FLIP + textwrap.dedent("""
        import weakref
        _refs = []
        def _again(ref=None):
            if ref is not None:
                _refs.remove(ref)
                _flip()
            cycle = type("Cycle", (), {})()
            cycle.me = cycle
            _refs.append(weakref.ref(cycle, _again))
        _again()
        def double(x):
            gc.collect()
            return np.zeros(np.shape(x))
        """), 0, "tampered", "numpy.array_equal"),
    # ... and turning it back on is seen.
    # (a check that fails needs no probe: here the answer is right, to show it is seen)
    "gc-enable-in-check": ("import gc\ndef double(x):\n    gc.enable()\n"
                           "    return 2 * np.asarray(x)\n", 0, "tampered", "gc.enable()"),
    # A value that answers `==` for itself (the fixture's check compares `tuple(...)`).
    "liar-eq-shape": ("class _Eq:\n    def __eq__(self, other):\n        return True\n"
                      "class _Liar:\n    shape = _Eq()\ndef double(x):\n    return _Liar()\n",
                      0, None, ""),
    # Output and files.
    "huge-error": ("def double(x):\n    raise ValueError('z' * 20_000_000)\n", 0, "error",
                   "more characters not shown"),
    "html-in-error": ("def double(x):\n    raise ValueError('<script>alert(1)</script>')\n",
                      0, "error", "<script>"),
    "disk-fill": ("import os, tempfile, time\nwith open(os.path.join(tempfile.gettempdir(), "
                  "'fill'), 'wb') as f:\n    for _ in range(40):\n        f.write(b'x' * 2**23)\n"
                  "        f.flush()\n    time.sleep(3)\n" + WRONG, 0, "error", "wrote more than"),
    # --- issue 25: the grader's environment, and memory in no process's resident set ---
    "grader-environment": (WRONG + f"import os\nif os.environ.get({SECRET[0]!r}) == "
                           f"{SECRET[1]!r}:\n    exec({RIGHT!r})\n", 0, None, ""),
    # 3 x 896 MiB in memfd files (each under the 1 GiB file-size limit): 2.6 GiB that no
    # process's RSS shows; it scored full marks under --memory 2.
    "memfd-hog": ("import os\n_fds = []\nfor _ in range(3):\n    _fd = os.memfd_create('hold')\n"
                  "    for _ in range(112):\n        os.write(_fd, b'x' * 2**23)\n"
                  "    _fds.append(_fd)\n" + RIGHT, 0, "error", "more than 2 GiB of memory"),
}
#: Attacks that only the sandbox can hold (they read or write outside the kernel's folder).
SANDBOX_ONLY: dict[str, Attack] = {
    # In the sandbox the kernel's /tmp is a tmpfs of --disk's size: the write fails there
    # (issue 37), where without it the supervisor's watch stops the kernel.
    "disk-fill": (ATTACKS["disk-fill"][0], 0, "error", "No space left on device"),
    "rewrite-grader": (f"try:\n    open({str(Path(checks.__file__))!r}, 'a').write('# pwned\\n')"
                       "\nexcept OSError as e:\n    print(e)\n" + WRONG, 0, None, ""),
    "read-solutions": (textwrap.dedent(f"""
        import json
        nb = json.load(open({str(SOLUTIONS / '99_fixture.ipynb')!r}))
        exec("".join(nb["cells"][2]["source"]).replace("### BEGIN SOLUTION", "")
             .replace("### END SOLUTION", ""))
        """), 0, None, ""),
    "write-home": (f"open({str(Path.home() / MARK)!r}, 'w').write('x')\n" + WRONG, 0, None, ""),
    # --- issue 25: the course's answers, found from inside the kernel: git's history, and the
    # right-answer fixtures under tests/, both found through course_utils.__file__ ---
    "git-show-solutions": (WRONG + TAKE_ANSWER.replace("SOURCE", (
        "subprocess.run(['git', '-C', str(_root), 'show', 'HEAD:tests/fixtures/grading/"
        "solutions/99_fixture.ipynb'], capture_output=True, text=True).stdout")), 0, None, ""),
    "fixtures-via-package": (WRONG + TAKE_ANSWER.replace("SOURCE", (
        "(_root / 'tests/fixtures/grading/submissions/full/99_fixture.ipynb').read_text()")),
        0, None, ""),
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
        """) + WRONG, 0, None, ""),
}
#: The grader without the sandbox runs from a copy of the package (tests/grader_copy.py), and
#: start-up hooks are planted in that copy's folder (on its sys.path, as src/ is through the
#: editable install) and in a site folder of its own (its PYTHONUSERBASE), not in the
#: checkout's src/ and the virtualenv's site-packages, which every Python of the course shares:
#: a course guard of another grader running meanwhile (the other pytest worker's
#: test_grading_grade.py, another test run) watches those too, took a hook planted there for
#: its own learner's doing, scoring them 'tampered', and deleted it before this grader's guard
#: could report it. The guard watches every site and sys.path folder alike
#: (test_the_guard_watches_the_shared_site_and_sys_path_folders).
HOOKS = Path(tempfile.gettempdir()) / f"{MARK}-hooks"
USER_SITE = (HOOKS / "user" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
             / "site-packages")
PTH = USER_SITE / f"zz_{MARK}.pth"
PYC = HOOKS / "src" / "course_utils" / "grading" / "__pycache__" / f"zz_{MARK}.cpython-311.pyc"
SITECUSTOMIZE = HOOKS / "src" / "sitecustomize.py"
#: What only the sandbox prevents, caught and undone without it (the course guard, the
#: supervisor's watch). Graded against a copy of the solutions (SOLUTIONS_COPY).
NO_SANDBOX_ONLY: dict[str, Attack] = {
    "rewrite-checks": (textwrap.dedent("""
        import json
        p = "SOLUTIONS_COPY/99_fixture.ipynb"
        nb = json.load(open(p))
        for c in nb["cells"]:
            if "check" in c["metadata"].get("tags", []):
                c["source"] = "pass"
        json.dump(nb, open(p, "w"))
        """) + WRONG, 0, "tampered", "changed the course's files"),
    "plant-pth": (f"open({str(PTH)!r}, 'w').write('/nonexistent\\n')\n" + WRONG, 0, "tampered",
                  "changed the course's files"),
    "plant-pyc": (f"open({str(PYC)!r}, 'wb').write(b'junk')\n" + WRONG, 0, None, ""),
    # On sys.path through the editable install: every later Python would run it (issue 25).
    "plant-sitecustomize": (f"open({str(SITECUSTOMIZE)!r}, 'w').write('import os\\n')\n"
                            + WRONG, 0, "tampered", "changed the course's files"),
    "stop-supervisor": ("import os, signal, time\nos.kill(os.getppid(), signal.SIGSTOP)\n"
                        "time.sleep(3)\n" + WRONG, 0, "error", "stopped its supervisor"),
}
HONEST = {"honest-full": (RIGHT, 2, "pass", ""), "honest-stub": (STUB, 0, "error", ""),
          "victim": (STUB, 0, "error", "")}
XSS_NAMES = ("<img src=x onerror=alert(1)>", "img src=x onerror=alert(1)")
#: A learner whose name is a formula, with a newline and a right-to-left override.
ODD_NAME = "=cmd|evil\nname\u202e"


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
    for path in (Path.home() / MARK, PTH, PYC):
        path.unlink(missing_ok=True)
    shutil.rmtree(HOOKS, ignore_errors=True)


def grade_folder(folder: Path, solutions: Path, *args: str, watch_memory: bool = False,
                 env: dict[str, str] | None = None
                 ) -> tuple[dict, subprocess.CompletedProcess, int]:
    """Run course-grade on ``folder`` (JSON out); the reports by learner, the run, peak RSS."""
    command = [sys.executable, "-m", "course_utils.grading.grade", str(folder), "--solutions",
               str(solutions), "--json", "--timeout", f"{20 * SLOW:.0f}", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=ROOT,
                               env={**os.environ, SECRET[0]: SECRET[1], **(env or {})})
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
    out, err = process.communicate(timeout=600 * SLOW)
    done = subprocess.CompletedProcess(command, process.returncode, out, err)
    assert process.returncode in (0, 1), err
    reports = {r["learner"]: r for r in json.loads(out)}
    return reports, done, peak[0]


def grade_answers(folder: Path, lesson: str, cell_id: str, answers: dict[str, str]) -> dict:
    """Grade a class folder with one learner per answer (named as in ``answers``): each hands in
    ``solutions/<lesson>.ipynb`` with the answer cell ``cell_id`` holding that answer, graded
    against the solutions (sandboxed where the machine can). The reports by learner."""
    for name, answer in answers.items():
        nb = nbformat.read(ROOT / "solutions" / f"{lesson}.ipynb", as_version=4)
        next(c for c in nb.cells if c.get("id") == cell_id).source = answer
        (folder / name).mkdir(parents=True)
        nbformat.write(nb, folder / name / f"{lesson}.ipynb")
    reports, _, _ = grade_folder(folder, ROOT / "solutions", "--jobs", "2", *(
        ["--sandbox"] if SANDBOX else ["--no-sandbox", "--trust-submissions"]))
    return reports


def build(folder: Path, attacks: dict, replace: dict[str, str]) -> None:
    """A class folder: one learner per attack and honest answer, and odd files."""
    folder.mkdir()
    for name, (answer, *_) in {**attacks, **HONEST}.items():
        answer_2 = RIGHT_2 if name in ("honest-full", "memory-hog") else None
        for old, new in replace.items():
            answer = answer.replace(old, new)
        (folder / name).mkdir()
        nbformat.write(submission(answer, answer_2), folder / name / "99_fixture.ipynb")
    # Not a notebook anyone could run: a link to another learner's file, a FIFO (reading it would
    # block), JSON nested 200,000 deep (it stopped the whole class), a notebook of 5 MB of code,
    # check cells of the learner's own with absurd points and another check's cell id.
    (folder / "link-to-victim").mkdir()
    os.symlink(folder / "honest-full" / "99_fixture.ipynb",
               folder / "link-to-victim" / "99_fixture.ipynb")
    (folder / "fifo").mkdir()
    os.mkfifo(folder / "fifo" / "99_fixture.ipynb")
    (folder / "json-bomb").mkdir()
    (folder / "json-bomb" / "99_fixture.ipynb").write_text(
        '{"cells": ' + "[" * 200_000 + "]" * 200_000 + "}")
    big = submission(WRONG)
    big.cells.insert(1, v4.new_code_cell("x = 1\n" * 900_000))
    (folder / "big-source").mkdir()
    nbformat.write(big, folder / "big-source" / "99_fixture.ipynb")
    odd = submission(WRONG)
    for points in ["1e308", float("nan"), -5, 10**9]:
        odd.cells.append(v4.new_code_cell("assert True", metadata={
            "tags": ["check"], "grading": {"id": "99.1", "points": points}}))
    odd.cells.insert(2, v4.new_code_cell("assert True", id="check-1a", metadata={
        "tags": ["check"], "grading": {"id": "99.2", "points": 100}}))
    (folder / "odd-metadata").mkdir()  # as JSON: nbformat.write would renumber the cell id
    (folder / "odd-metadata" / "99_fixture.ipynb").write_text(json.dumps(odd))
    (folder / ODD_NAME).mkdir()
    nbformat.write(submission(RIGHT), folder / ODD_NAME / "99_fixture.ipynb")
    # HTML in a learner's name, and two names that make the same feedback file name.
    for name in XSS_NAMES:
        (folder / name).mkdir()
        nbformat.write(submission(WRONG), folder / name / "99_fixture.ipynb")
    not_utf8 = os.path.join(os.fsencode(folder), b"bytes-\xff")  # stopped the CSV and HTML
    os.mkdir(not_utf8)
    shutil.copy(folder / "honest-full" / "99_fixture.ipynb",
                os.path.join(not_utf8, b"99_fixture.ipynb"))


def check_reports(reports: dict, attacks: dict) -> None:
    problems = []
    for name, (_, most, status, says) in {**attacks, **HONEST}.items():
        ex = {e["exercise"]: e for e in reports[name]["exercises"]}
        got = ex["99.1"]
        text = " ".join([got["message"], *got["notes"], *reports[name]["notes"],
                         *(c["message"] for c in got["checks"])])
        allowed = (status,) if isinstance(status, str) else status
        if got["points"] > most or (status is not None and got["status"] not in allowed) \
                or says not in text:
            problems.append(f"{name}: 99.1 {got['status']} {got['points']} ({text[:300]})")
        want_2 = 1 if name in ("honest-full", "memory-hog") else 0
        if ex["99.2"]["points"] != want_2:
            problems.append(f"{name}: 99.2 scored {ex['99.2']['points']}, expected {want_2}")
    for name, says in [("link-to-victim", "symbolic link"), ("big-source", "too much code"),
                       ("fifo", "not a regular file"), ("json-bomb", "nested too deeply")]:
        if [e["status"] for e in reports[name]["exercises"]] != ["error", "error"] \
                or says not in reports[name]["error"]:
            problems.append(f"{name}: {reports[name]['exercises']}")
    odd = reports["odd-metadata"]
    if odd["points"] != 0 or odd["possible"] != 3:
        problems.append(f"odd-metadata: {odd['points']}/{odd['possible']}")
    for name, points in ((ODD_NAME, 2), ("bytes-\\udcff", 3)):  # copies of honest answers
        if reports[name]["points"] != points:
            problems.append(f"{name!r}: {reports[name]['points']}")
    assert not problems, "\n".join(problems)


def common_assertions(reports: dict, done, csv_path: Path, feedback: Path,
                      attacks: dict) -> None:
    check_reports(reports, attacks)
    assert "FAKE-TABLE" not in done.stdout + done.stderr
    for name in ("huge-error",):
        if name in attacks:
            assert len(json.dumps(reports[name])) < 2**20, "an error's text must be capped"
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    formula = next(r for r in rows if r["learner"] == "csv-formula" and r["exercise"] == "99.1")
    assert formula["message"].startswith("'=HYPERLINK("), formula["message"]
    odd = [r for r in rows if r["learner"].startswith("'=cmd|evil")]
    assert len(odd) == 2, "a learner named '=...' with a newline: one row per exercise, quoted"
    pages = list(feedback.iterdir())
    assert len(pages) == len(reports), "one feedback page per submission, none overwritten"
    for page in pages:
        assert "<script>" not in page.read_text() and "<img" not in page.read_text(), page.name
    time.sleep(1)  # the csv-daemon waits for the CSV: it must be dead, and the CSV intact
    with open(csv_path, newline="") as f:
        assert list(csv.DictReader(f)) == rows
    assert marked() == [], "processes an attack started survived the grading"


def run_class(tmp_path: Path, attacks: dict, solutions: Path, *args: str,
              env: dict[str, str] | None = None) -> tuple[dict, object, Path, Path, int]:
    folder, csv_path, feedback = tmp_path / "subs", tmp_path / "grades.csv", tmp_path / "fb"
    build(folder, attacks, {"CSV_PATH": str(csv_path), "SOLUTIONS_COPY": str(solutions)})
    t0 = time.monotonic()
    reports, done, peak = grade_folder(folder, solutions, "--csv", str(csv_path), "--jobs", "2",
                                       "--memory", "2", "--disk", "0.25", "--feedback",
                                       str(feedback), *args, watch_memory=True, env=env)
    assert time.monotonic() - t0 < 420 * SLOW, "an attack stretched grading past its budget"
    return reports, done, csv_path, feedback, peak


def cgroup_folders() -> list[Path]:
    """The folders of this process's cgroups, for the pids and memory controllers (v1) or the
    unified hierarchy (v2): where the supervisor makes a kernel's cgroups (see supervise.py)."""
    found = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        names = ["unified", ""] if hierarchy == "0" else [
            c for c in controllers.split(",") if c in ("pids", "memory")]
        for name in names:
            folder = Path("/sys/fs/cgroup", name, path.lstrip("/"))
            if folder.is_dir() and (folder / "cgroup.procs").exists():
                found.append(folder)
                break
    return found


def kernel_cgroups() -> set[Path]:
    """The cgroups kernels graded as root get (see supervise.py)."""
    return {c for folder in cgroup_folders() for c in folder.glob("course-grade-*")}


def assert_no_cgroup_left(before: set[Path]) -> None:
    """Every cgroup made for a kernel of this run is gone (an empty one left behind is a leak;
    one with processes belongs to someone else's grading still running)."""
    deadline = time.monotonic() + 5 * SLOW
    while True:
        left = []
        for c in kernel_cgroups() - before:
            with contextlib.suppress(OSError):
                if not (c / "cgroup.procs").read_text().strip():
                    left.append(c)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left, f"cgroups left behind: {left}"


def grader_files() -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in GRADER.rglob("*.py")}


@pytest.mark.skipif(not SANDBOX, reason="bubblewrap (bwrap) cannot start a sandbox here")
def test_every_attack_is_held_in_the_sandbox(tmp_path):
    grader, cgroups = grader_files(), kernel_cgroups()
    attacks = {**ATTACKS, **SANDBOX_ONLY}
    try:
        reports, done, csv_path, feedback, peak = run_class(tmp_path, attacks, SOLUTIONS,
                                                            "--sandbox")
    finally:
        changed = [p for p, data in grader.items() if p.read_bytes() != data]
    assert not changed, f"a submission changed the grader on disk: {changed}"
    common_assertions(reports, done, csv_path, feedback, attacks)
    assert peak < 600 * 2**20, f"the grader reached {peak / 2**20:.0f} MB"
    assert not (Path.home() / MARK).exists()
    assert "warning: grading is not isolated" not in done.stderr
    assert_no_cgroup_left(cgroups)


def test_the_attacks_that_need_no_sandbox_are_held_without_it(tmp_path):
    """What the sandbox would otherwise hold (processes, files, the grader's output, the course's
    files), and two probes; the probes work the same with and without the sandbox."""
    solutions = tmp_path / "solutions"
    shutil.copytree(SOLUTIONS, solutions)
    before = (solutions / "99_fixture.ipynb").read_bytes()
    keep = ("forged-log", "hook-log", "showtraceback", "sleep-children", "pipe-holder",
            "csv-daemon", "proc-fd-table", "csv-formula", "patch-array-equal", "process-flood",
            "disk-fill", "grader-environment", "memfd-hog")
    attacks = {**{k: ATTACKS[k] for k in keep}, **NO_SANDBOX_ONLY}
    if os.getuid() == 0:  # root may write to any process's /proc/<pid>/fd: only bwrap stops it
        attacks.pop("proc-fd-table")
    USER_SITE.mkdir(parents=True)
    hooks = {**grader_copy(HOOKS / "src"), "PYTHONUSERBASE": str(HOOKS / "user")}
    PYC.parent.mkdir()
    reports, done, csv_path, feedback, _ = run_class(tmp_path, attacks, solutions,
                                                     "--no-sandbox", "--trust-submissions",
                                                     env=hooks)
    common_assertions(reports, done, csv_path, feedback, attacks)
    assert done.stderr.count("warning: grading is not isolated (--no-sandbox)") == 1
    assert (solutions / "99_fixture.ipynb").read_bytes() == before, "the checks are put back"
    assert not PTH.exists() and not PYC.exists() and not SITECUSTOMIZE.exists(), \
        "planted start-up and compiled files deleted"
    assert [e["status"] for e in reports["rewrite-checks"]["exercises"]] == ["tampered"] * 2


def test_the_guard_watches_the_shared_site_and_sys_path_folders():
    """Where a planted start-up hook would run in every later Python of the course: the
    virtualenv's site-packages and src/ (on sys.path through the editable install)."""
    folders = grade._site_folders()
    assert Path(site.getsitepackages()[0]) in folders
    assert GRADER.parents[1] in folders


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
                           "\n".join(script)], capture_output=True, text=True,
                          timeout=300 * SLOW, cwd=work)
    if done.returncode not in (0, 1) and "Permission denied" in done.stderr:
        pytest.skip(f"this machine does not let `nobody` run the course: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)[0]
    assert (report["points"], report["possible"]) == (3, 3)


def test_what_the_kernel_needs_from_under_tmp_stays_visible_and_read_only(tmp_path, monkeypatch):
    """A CI checkout may put the course and its virtualenv under /tmp, which the sandbox replaces
    with a private one: every ``sys.path`` entry there is bound back, read-only."""
    if not SANDBOX:
        pytest.skip("needs bubblewrap")
    assert str(tmp_path.resolve()).startswith(tempfile.gettempdir())
    lib = tmp_path / "site"
    lib.mkdir()
    (lib / "beside_the_course.py").write_text("WHERE = 'found under /tmp'\n")
    monkeypatch.setattr(sys, "path", [*sys.path, str(lib)])
    probe = textwrap.dedent(f"""
        import sys
        sys.path.append({str(lib)!r})
        import beside_the_course
        print(beside_the_course.WHERE)
        try:
            open({str(lib / "planted.py")!r}, "w")
        except OSError as e:
            print("read-only:", type(e).__name__)
        """)
    command = sandbox.wrap([sys.executable, "-c", probe], writable=[], hidden=[], cwd=Path("/"))
    done = subprocess.run(command, capture_output=True, text=True, timeout=60 * SLOW)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["found under /tmp", "read-only: OSError"], done.stdout
    assert not (lib / "planted.py").exists()


def test_a_kernel_that_kills_its_supervisor_or_forks_too_much_leaves_nothing_behind():
    """The supervisor is the subreaper; if the kernel kills it, the kernel dies with it
    (PDEATHSIG) and the grader's environment mark finds whatever else escaped. A fork loop
    meets the process limit (RLIMIT_NPROC; for root, a pids cgroup where one can be made)."""
    fork = textwrap.dedent(f"""
        import os, signal
        children = []
        try:
            for _ in range(200):
                pid = os.fork()
                if pid == 0:
                    os.execvp("sleep", ["sleep", "1000", "{MARK}"])
                children.append(pid)
        except OSError as e:
            print("stopped at", len(children), type(e).__name__)
        for pid in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        """)
    with Kernel(sandbox=False, limits=Limits(processes=60)) as k:
        reply = k.execute(fork, 30 * SLOW)
        assert reply.status == "ok", reply.evalue
        limited = "stopped at" in reply.stdout
        k.execute(sleeper(2) + "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
                  10 * SLOW)
        deadline = time.monotonic() + 10 * SLOW
        while k.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not k.alive()
    deadline = time.monotonic() + 5 * SLOW
    while marked() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked() == []
    cgroups = Path("/sys/fs/cgroup/pids")
    if os.getuid() != 0 or (cgroups.is_dir() and os.access(cgroups, os.W_OK)):
        assert limited, f"200 forks went through a limit of 60: {reply.stdout}"


# --- issue 25: what the kernel can reach, the limits it meets, and the mode without a sandbox ---

#: Run in a grader process whose course_utils is a copy of the course at argv[1]: starts a
#: sandboxed kernel as the grader does for the learner `mallory` of the class at argv[2] and
#: prints, as JSON, which paths the kernel can see and what of the environment it has.
VIEW_PROBE = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    import course_utils.grading.kernel as K
    course, class_folder, real = map(Path, sys.argv[1:4])
    assert K.__file__.startswith(str(course)), K.__file__
    names = ["src/course_utils/__init__.py", "notebooks/00_x.ipynb", "exercises/00_x.ipynb",
             "pyproject.toml", "solutions/00_x.ipynb", "tests/fixtures/answer.txt", ".git/HEAD",
             "benchmarks/b.py", ".ci/run", ".answer-key/00_x.json", ".gitlab-ci.yml"]
    paths = {name: str(course / name) for name in names}
    paths.update({"victim": str(class_folder / "victim" / "99_fixture.ipynb"),
                  "mallory": str(class_folder / "mallory" / "99_fixture.ipynb"),
                  "checkout tests": str(real / "tests" / "fixtures"),
                  "checkout .git": str(real / ".git"),
                  "checkout solutions": str(real / "solutions")})
    code = ("import json, os\\nprint(json.dumps({'seen': {k: os.path.exists(v) for k, v in "
            f"{paths!r}.items()}}, 'secret': {os.environ['SECRET_NAME']!r} in os.environ, "
            "'home': os.environ['HOME'], 'names': sorted(os.environ)}))")
    with K.Kernel(sandbox=True, hidden=[class_folder / "mallory"]) as k:
        reply = k.execute(code, float(os.environ["CELL_TIMEOUT"]))
    print(reply.stdout or reply.status + " " + reply.evalue)
    """)
VISIBLE = ("src/course_utils/__init__.py", "notebooks/00_x.ipynb", "exercises/00_x.ipynb",
           "pyproject.toml")


def course_copy(base: Path) -> tuple[Path, Path]:
    """A course at ``base/course`` (the package under test and one file in each folder a
    checkout has) and a class folder at ``base/class``; everyone may read both."""
    course, class_folder = base / "course", base / "class"
    shutil.copytree(Path(checks.__file__).resolve().parents[1], course / "src" / "course_utils",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", course / "pyproject.toml")
    for name in ("notebooks/00_x.ipynb", "exercises/00_x.ipynb", "solutions/00_x.ipynb",
                 "tests/fixtures/answer.txt", ".git/HEAD", "benchmarks/b.py", ".ci/run",
                 ".answer-key/00_x.json", ".gitlab-ci.yml"):
        (course / name).parent.mkdir(parents=True, exist_ok=True)
        (course / name).write_text("the answer\n")
    for learner in ("victim", "mallory"):
        (class_folder / learner).mkdir(parents=True)
        nbformat.write(submission(RIGHT), class_folder / learner / "99_fixture.ipynb")
    for path in [base, *base.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return course, class_folder


def nobody_script(command: str, tmp_path: Path, env: dict[str, str]) -> list[str]:
    """``unshare`` + ``setpriv`` running ``command`` as `nobody`, in a private mount namespace
    where the folders on the way to the interpreter that `nobody` cannot enter (/root is 0700)
    are shown to it through bind mounts; nothing changes outside."""
    script = ["set -e"]
    blocked: dict[Path, list[Path]] = {}
    for prefix in {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), ROOT}:
        wall = next((p for p in prefix.parents
                     if p != Path("/") and not os.stat(p).st_mode & 0o001), None)
        if wall is not None:
            blocked.setdefault(wall, []).append(prefix)
    for i, (wall, prefixes) in enumerate(blocked.items()):
        for j, prefix in enumerate(prefixes):
            keep = tmp_path / f"keep{i}-{j}"
            keep.mkdir()
            script.append(f"mount --bind {prefix} {keep}")
        script.append(f"mount -t tmpfs -o mode=755 tmpfs {wall}")
        for j, prefix in enumerate(prefixes):
            script += [f"mkdir -p {prefix}", f"mount --bind {tmp_path / f'keep{i}-{j}'} {prefix}"]
    settings = " ".join(f"{k}={v}" for k, v in env.items())
    script.append(f"exec setpriv --reuid=65534 --regid=65534 --clear-groups env {settings} "
                  f"{command}")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script)]


@pytest.mark.skipif(not SANDBOX, reason="bubblewrap (bwrap) cannot start a sandbox here")
@pytest.mark.parametrize("user", ["this user", "nobody"])
@pytest.mark.parametrize("where", ["/tmp", "home", "/srv"])
def test_the_kernel_sees_the_release_view_of_the_course_wherever_it_is_checked_out(
        where, user, tmp_path, request):
    """The course's answers are out of reach: with the course checked out under /tmp, under the
    home folder or elsewhere, graded as root and as a normal user, a sandboxed kernel sees the
    release view (src/, notebooks/, exercises/, pyproject.toml), and not .git, tests/ (fixtures
    found through course_utils.__file__), solutions/, benchmarks/, .ci, CI files, an answer key,
    the rest of the class folder, nor the grader's environment. (Before issue 25 it saw all
    but the solutions and the class folder given on the command line.)"""
    if user == "nobody" and (os.getuid() != 0 or shutil.which("setpriv") is None
                             or shutil.which("unshare") is None):
        pytest.skip("as root only (a normal user's run is the other case), with setpriv")
    if user == "this user" and os.getuid() == 0 and where == "home" and not os.access(
            Path.home(), os.W_OK):
        pytest.skip("the home folder is not writable")
    parent = {"/tmp": Path("/tmp"), "/srv": Path("/srv") if os.access("/srv", os.W_OK)
              else Path("/opt")}.get(where)
    if parent is None:  # the home folder: root's own (0700), or the home we give `nobody`
        parent = Path.home() if user == "this user" else Path(tempfile.mkdtemp(
            prefix="cg-home-", dir="/srv" if os.access("/srv", os.W_OK) else "/opt"))
    if not os.access(parent, os.W_OK):
        pytest.skip(f"{parent} is not writable here")
    base = Path(tempfile.mkdtemp(prefix="cg-course-", dir=parent))
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    if parent.name.startswith("cg-home-"):
        request.addfinalizer(lambda: shutil.rmtree(parent, ignore_errors=True))
        os.chmod(parent, 0o755)
    course, class_folder = course_copy(base)
    probe = base / "probe.py"
    probe.write_text(VIEW_PROBE)
    os.chmod(probe, 0o644)
    env = {"PYTHONPATH": str(course / "src"), "SECRET_NAME": SECRET[0], SECRET[0]: SECRET[1],
           "CELL_TIMEOUT": f"{60 * SLOW:.0f}",
           "HOME": str(parent if user == "nobody" and where == "home" else Path.home())}
    command = f"{sys.executable} {probe} {course} {class_folder} {ROOT}"
    if user == "nobody":
        done = subprocess.run(nobody_script(command, tmp_path, env), capture_output=True,
                              text=True, timeout=300 * SLOW, cwd=course)
    else:
        done = subprocess.run(command.split(), capture_output=True, text=True, cwd=course,
                              timeout=300 * SLOW, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert [k for k, v in seen["seen"].items() if v] == list(VISIBLE), seen["seen"]
    assert not seen["secret"] and seen["home"].startswith("/tmp"), seen
    assert not {"SECRET_NAME", "CELL_TIMEOUT"} & set(seen["names"]), seen["names"]


@pytest.mark.skipif(not SANDBOX, reason="bubblewrap (bwrap) cannot start a sandbox here")
def test_a_learner_graded_alone_cannot_read_the_rest_of_the_class(request):
    """`course-grade subs/mallory` (one learner, as a loop over learners grades them): the other
    learners' notebooks are in the same class folder, and out of the kernel's sight wherever it
    is (not under /tmp, which the sandbox replaces anyway: in /srv, /opt, or the course)."""
    parent = next(p for p in (Path("/srv"), Path("/opt"), ROOT) if os.access(p, os.W_OK))
    folder = Path(tempfile.mkdtemp(prefix="cg-class-", dir=parent)) / "subs"
    request.addfinalizer(lambda: shutil.rmtree(folder.parent, ignore_errors=True))
    (folder / "victim").mkdir(parents=True)
    (folder / "mallory").mkdir()
    nbformat.write(submission(RIGHT, RIGHT_2), folder / "victim" / "99_fixture.ipynb")
    steal = WRONG + TAKE_ANSWER.replace(
        "SOURCE", repr(str(folder / "victim" / "99_fixture.ipynb")).join(["open(", ").read()"]))
    nbformat.write(submission(steal), folder / "mallory" / "99_fixture.ipynb")
    reports, done, _ = grade_folder(folder / "mallory", SOLUTIONS, "--sandbox")
    got = {e["exercise"]: e["points"] for e in reports["mallory"]["exercises"]}
    assert got == {"99.1": 0, "99.2": 0}, (got, done.stderr[-2000:])


def test_memory_held_in_files_counts_against_the_memory_limit():
    """1.5 GiB written to memfd files shows in no process's resident set; it passed a limit of
    0.5 GiB. A memory cgroup counts it (root), and without one (a normal user, or no writable
    controller: ``cgroups=False``) the supervisor counts the memory-backed files the kernel's
    processes hold open."""
    hog = textwrap.dedent("""
        import os, time
        fds = []
        for _ in range(3):
            fd = os.memfd_create("hold")
            for _ in range(64):
                os.write(fd, b"x" * 2**23)
            fds.append(fd)
        time.sleep(2)
        print("held 1.5 GiB")
        """)
    for cgroups in (True, False):
        with Kernel(sandbox=SANDBOX, limits=Limits(memory_bytes=GiB // 2,
                                                   cgroups=cgroups)) as k:
            reply = k.execute(hog, 60 * SLOW)
            assert reply.kernel_lost and "more than 0.5 GiB of memory" in reply.why_lost, (
                cgroups, reply.status, reply.stdout, reply.why_lost)
            assert "held" not in reply.stdout


def test_the_cpu_time_limit_is_set_and_stops_a_kernel_past_it(monkeypatch, tmp_path):
    """The README promises a CPU-time limit: each kernel process gets the notebook's time
    budget as RLIMIT_CPU (it was never set), and a kernel past its limit is stopped with a
    message saying so."""
    seen = {}

    def fake_run(nb, timeout, name, **kw):
        seen.update(kw)
        return [], []

    monkeypatch.setattr(pipeline, "run_notebook", fake_run)  # what grade_notebook calls
    grade.grade_notebook(ROOT / "tests/fixtures/grading/submissions/full/99_fixture.ipynb",
                         SOLUTIONS, timeout=10)
    assert seen["limits"].cpu_seconds == int(seen["budget"]) > 0
    with Kernel(sandbox=SANDBOX, limits=Limits(cpu_seconds=2)) as k:
        reply = k.execute("while True:\n    pass\n", 120 * SLOW)
    assert reply.kernel_lost and "more than 2 s of CPU time" in reply.why_lost, reply.why_lost


def test_a_notebook_bomb_is_refused_before_it_is_parsed(tmp_path):
    """40 MB of nested empty lists: 3.2 GB of the grader's memory before issue 25. Its bytes are
    measured first (size, nesting, number of values), and it is refused with a message naming
    the file, the grader staying small."""
    folder = tmp_path / "subs"
    (folder / "bomb").mkdir(parents=True)
    bomb = folder / "bomb" / "99_fixture.ipynb"
    with open(bomb, "w") as f:
        f.write('{"cells": [')
        f.write("[[], [[]], []], " * (40 * 2**20 // 16))
        f.write('[]], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    reports, done, peak = grade_folder(folder, SOLUTIONS,
                                       *([] if SANDBOX else ["--trust-submissions"]),
                                       watch_memory=True)
    assert peak < 400 * 2**20, f"the grader reached {peak / 2**20:.0f} MB"
    error = reports["bomb"]["error"]
    assert "99_fixture.ipynb" in error and "values" in error, error
    assert [e["status"] for e in reports["bomb"]["exercises"]] == ["error", "error"]


def test_without_the_sandbox_other_peoples_notebooks_need_trust_submissions(tmp_path):
    """Without bubblewrap a submission's daemon outlives its grading and changes the next
    learner's grade (here it would write the answer into the next kernel's way), a planted
    sitecustomize.py outlives it too, and an edit of the solutions gets an innocent learner
    scored 'tampered': grading several learners, or anyone's notebook outside this course,
    is refused unless --trust-submissions says so. One's own notebook in the course is graded
    as before."""
    folder = tmp_path / "subs"
    for learner in ("daemon", "next"):
        (folder / learner).mkdir(parents=True)
    nbformat.write(submission(sleeper(1) + WRONG), folder / "daemon" / "99_fixture.ipynb")
    nbformat.write(submission(STUB), folder / "next" / "99_fixture.ipynb")
    for paths in ([folder], [folder / "next" / "99_fixture.ipynb"]):
        command = [sys.executable, "-m", "course_utils.grading.grade", *map(str, paths),
                   "--solutions", str(SOLUTIONS), "--no-sandbox", "--json"]
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                              timeout=120 * SLOW)
        assert done.returncode == 2 and done.stdout == "", done.stderr[-2000:]
        assert "--trust-submissions" in done.stderr and "next learner's grade" in done.stderr
        assert "sitecustomize.py" in done.stderr and "grading " not in done.stderr
        assert marked() == [], "nothing ran"
    own = ROOT / "tests" / "fixtures" / "grading" / "submissions" / "full" / "99_fixture.ipynb"
    assert grade.main([str(own), "--solutions", str(SOLUTIONS), "--no-sandbox", "--json",
                       "--timeout", f"{30 * SLOW:.0f}"]) == 0


# --- issue 36: forged reports. Junk answers to exercise 00 (``return 0.5``) plus code that
# makes the check's report claim the right outputs: it re-runs the check's probe with right
# answers of its own, through the functions and data a report passes through in the kernel.
# Each scored 4/5 (00.1 and 00.2, the hidden check too) with no note; now each is tampered.
FORGER = textwrap.dedent("""
    def _right_mse(p, t):
        p, t = np.asarray(p, dtype=float), np.asarray(t, dtype=float)
        if p.shape != t.shape:
            raise ValueError(f"{p.shape} vs {t.shape}")
        return float(np.mean((p - t) ** 2))
    def _rerun():
        ns = get_ipython().user_ns
        saved = {k: ns[k] for k in ("mean_squared_error", "count_parameters") if k in ns}
        ns.update({k: v for k, v in (("mean_squared_error", _right_mse), ("count_parameters",
                   lambda s: sum(a * b + b for a, b in zip(s, s[1:])))) if k in saved})
        try:
            exec(ns["In"][-1], ns)
        finally:
            ns.update(saved)
    import course_utils.grading.probe as _p
    """)
FORGED_REPORTS = {  # name -> (the forger's last lines, what the tamper note names)
    "replace-take": ("_real = getattr(_p, '_take', None)\n"
                     "def _take(nonce):\n    _rerun()\n    return _real(nonce)\n"
                     "_p._take = _take\n", "course_utils.grading.probe._take"),
    "replace-report": ("_real, _busy = _p.report, []\n"
                       "def _report(**fields):\n    if not _busy:\n        _busy.append(1)\n"
                       "        try:\n            return _rerun()\n        finally:\n"
                       "            _busy.pop()\n    return _real(**fields)\n"
                       "_p.report = _report\n", "course_utils.grading.probe.report"),
    "pending-subclass": (textwrap.dedent("""
        class _Pending(dict):
            busy = False
            def items(self):
                if not _Pending.busy:
                    _Pending.busy = True
                    try:
                        _rerun()
                    finally:
                        _Pending.busy = False
                return dict.items(self)
        _p._pending = _Pending()
        """), "course_utils.grading.probe._pending"),
    "json-encoder": (textwrap.dedent("""
        import json, sys
        class _Encoder(json.JSONEncoder):
            busy = False
            def encode(self, o):
                if not _Encoder.busy and sys._getframe(2).f_code.co_name == "report":
                    name = sys._getframe(2).f_locals.get("name")
                    _Encoder.busy = True
                    try:
                        _rerun()
                    finally:
                        _Encoder.busy = False
                    if name in _p._pending:
                        return _p._pending[name]
                return super().encode(o)
        json._default_encoder = _Encoder(allow_nan=True)
        """), "json._default_encoder"),
}


def exercise_00(answers: dict[str, str]) -> nbformat.NotebookNode:
    """exercises/00_setup.ipynb with the answer cells of ``answers`` (exercise id -> source)."""
    nb = nbformat.read(ROOT / "exercises" / "00_setup.ipynb", as_version=4)
    for cell in nb.cells:
        if "solution" in cell.metadata.get("tags", []):
            exercise = cell.metadata.get("grading", {}).get("id")
            if exercise in answers:
                cell.source = answers[exercise]
    return nb


def test_a_forged_report_scores_nothing_and_is_noted(tmp_path):
    """Issue 36: what a report passes through in the kernel (the probe module's functions, its
    store, the JSON encoder) is the grader's to vouch for: the report is written by the probe
    module's own ``dumps`` and taken by the grader's own code, which checks the store's type;
    the probe module is in the tamper baseline, and module data that becomes an object of a
    class made in a cell is tampering. Graded as an instructor does, with the answer key."""
    folder = tmp_path / "subs"
    junk = {"00.1": "def mean_squared_error(pred, target) -> float:\n    return 0.5\n",
            "00.2": "def count_parameters(sizes) -> int:\n    return 0.5\n"}
    for name, (forge, _) in FORGED_REPORTS.items():
        (folder / name).mkdir(parents=True)
        answers = {**junk, "00.1": junk["00.1"] + FORGER + forge}
        nbformat.write(exercise_00(answers), folder / name / "00_setup.ipynb")
    # A field the check never reports, slipped into the genuine store from inside the check.
    (folder / "extra-field").mkdir()
    nbformat.write(exercise_00({**junk, "00.2": textwrap.dedent("""
        import course_utils.grading.probe as _p
        def count_parameters(sizes):
            _p._cell[0] = get_ipython().execution_count
            _p._pending["bonus"] = "1"
            return 0.5
        """)}), folder / "extra-field" / "00_setup.ipynb")
    (folder / "honest").mkdir()
    shutil.copy(ROOT / "solutions" / "00_setup.ipynb", folder / "honest" / "00_setup.ipynb")
    reports, _, _ = grade_folder(folder, ROOT / "solutions", *(
        ["--sandbox"] if SANDBOX else ["--no-sandbox", "--trust-submissions"]))
    assert reports["honest"]["points"] == reports["honest"]["possible"] == 5
    for name, (_, names) in FORGED_REPORTS.items():
        ex = {e["exercise"]: e for e in reports[name]["exercises"]}
        for exercise in ("00.1", "00.2"):
            got = ex[exercise]
            text = " ".join([got["message"], *got["notes"], *reports[name]["notes"]])
            assert got["points"] == 0 and got["status"] == "tampered" and names in text, \
                (name, exercise, got["points"], got["status"], text[:300])
    extra = {e["exercise"]: e for e in reports["extra-field"]["exercises"]}["00.2"]
    assert extra["status"] == "tampered" and "`bonus`, which this check never reports" in \
        " ".join([extra["message"], *extra["notes"]]), extra


def test_rebinding_a_checks_configuration_or_blinding_its_profiler_gains_nothing(tmp_path):
    """Issue 36: ``ORDERING = ()`` in an answer cell emptied 01.1's forbid list (graphlib 1/4 ->
    4/4), and ``sys.setprofile(None)`` blinded its depth check (a recursive answer 2/4 -> 4/4).
    The checks import their forbid lists from course_utils.grading.routes themselves, the depth
    check says when its profiler was replaced, and the static judge holds both answers to half
    the points, naming the line."""
    graphlib = ("ORDERING = ()\nimport graphlib\n\ndef topo_order(outputs):\n"
                "    ts, todo, seen = graphlib.TopologicalSorter(), list(outputs), set()\n"
                "    while todo:\n        n = todo.pop()\n        if n not in seen:\n"
                "            seen.add(n)\n            ts.add(n, *n.inputs)\n"
                "            todo.extend(n.inputs)\n    return list(ts.static_order())\n")
    blind = ("import sys, threading\nsys.setrecursionlimit(100_000)\n\n"
             "def topo_order(outputs):\n    sys.setprofile(None)\n    threading.setprofile(None)\n"
             "    order, seen = [], set()\n    def visit(n):\n        if n not in seen:\n"
             "            seen.add(n)\n            for x in n.inputs:\n                visit(x)\n"
             "            order.append(n)\n    for o in outputs:\n        visit(o)\n"
             "    return order\n")
    reports = grade_answers(tmp_path / "subs", "01_computation_graphs", "s01-sol1",
                            {"graphlib": graphlib, "blind": blind})
    # The blind answer's first route is its `import threading` (line 1): 01.1 refuses the
    # threading module whole since the third attack review (a recursive walk on a bare thread).
    for name, route, line in (("graphlib", "graphlib", 2), ("blind", "threading", 1)):
        ex = {e["exercise"]: e for e in reports[name]["exercises"]}
        got = ex["01.1"]
        text = " ".join([got["message"], *got["notes"]])
        assert got["points"] <= 2 and f"reaches {route} (at code cell 7, line {line})" in text, \
            (name, got["points"], text[:400])
        assert all(ex[e]["points"] == ex[e]["possible"] for e in ("01.2", "01.3", "01.4")), name
    checks = {e["exercise"]: e for e in reports["graphlib"]["exercises"]}["01.1"]["checks"]
    assert any("ForbiddenCall: your answer called graphlib" in c["message"] for c in checks), \
        "the checks' forbid no longer holds graphlib"


def test_a_hidden_check_shows_neither_its_inputs_nor_its_expected_values(tmp_path):
    """Issue 36: lookup tables grown from hidden checks' messages (00.2 2/2 after four gradings).
    An answer right on the visible cases only (their middle list is drawn from the run's seed, of
    three sizes; the hidden lists have other lengths, and one is (1, 1, 1)): the hidden check's
    verdict names its sizes and counts; what the grader writes says what kind of case failed and
    what to look at, in the table, the JSON, the CSV and the HTML feedback, and nothing of its
    inputs or values. Graded with --seed, so the hidden lists are known here."""
    seed = 36
    right = ("(len(sizes) == 3 and tuple(sizes) != (1, 1, 1)) or "
             "tuple(sizes) in ((3, 2), tuple(MLP_SIZES))")
    lookup = ("def count_parameters(sizes) -> int:\n"
              f"    if {right}:\n"
              "        return sum(a * b + b for a, b in zip(sizes, sizes[1:]))\n"
              "    return 0\n")
    raises = ("def count_parameters(sizes) -> int:\n"  # its error names the hidden input
              f"    if not ({right}):\n"
              "        raise ValueError(f'never seen {tuple(sizes)}')\n"
              "    return sum(a * b + b for a, b in zip(sizes, sizes[1:]))\n")
    own_class = raises.replace(  # the exception's class name carries the input (attack review)
        "raise ValueError(f'never seen {tuple(sizes)}')",
        "raise type('Sizes_' + '_'.join(map(str, sizes)), (ValueError,), {})('never seen')")
    import numpy as np

    rng = np.random.default_rng(_run_seed_of(seed, 3))  # the hidden check's own draw
    hidden_cases = [tuple(int(n) for n in rng.integers(1, 65, size=k)) for k in (2, 4, 5, 2)]
    folder = tmp_path / "subs"
    for name, answer in (("lookup", lookup), ("raises", raises), ("own-class", own_class)):
        (folder / name).mkdir(parents=True)
        nbformat.write(exercise_00({"00.2": answer}), folder / name / "00_setup.ipynb")
    csv_path, feedback = tmp_path / "grades.csv", tmp_path / "feedback"
    sandbox = ["--sandbox"] if SANDBOX else ["--no-sandbox", "--trust-submissions"]
    reports, done, _ = grade_folder(folder, ROOT / "solutions", "--csv", str(csv_path),
                                    "--feedback", str(feedback), "--seed", str(seed), *sandbox)
    table = subprocess.run([sys.executable, "-m", "course_utils.grading.grade", str(folder),
                            "--solutions", str(ROOT / "solutions"), "--seed", str(seed),
                            *sandbox],
                           capture_output=True, text=True, cwd=ROOT, timeout=600 * SLOW)
    for name, what in (("lookup", "gave a wrong result"), ("raises", "raised ValueError"),
                       ("own-class", "raised an exception.")):
        ex = {e["exercise"]: e for e in reports[name]["exercises"]}["00.2"]
        assert ex["points"] == 1, ex  # the visible check passes, the hidden one does not
        hidden = next(c for c in ex["checks"] if c["hidden"])
        assert what in hidden["message"] and "other layer sizes" in hidden["message"], hidden
    written = {"json": done.stdout, "table": table.stdout + table.stderr,
               "csv": csv_path.read_text(),
               **{p.name: p.read_text() for p in feedback.iterdir()}}
    for where, text in written.items():
        secrets_ = [str(c) for c in hidden_cases] + [
            f"expected {sum(a * b + b for a, b in zip(c, c[1:], strict=False))},"
            for c in hidden_cases] + ["Sizes_" + "_".join(map(str, c)) for c in hidden_cases]
        for secret in secrets_:
            assert secret not in text, f"{where} shows the hidden check's {secret!r}"


def _run_seed_of(seed: int, k: int) -> int:
    """``probe.run_seed(k)`` as a kernel given ``seed`` computes it."""
    import os

    from course_utils.grading.probe import SEED_VARIABLE, run_seed

    old = os.environ.get(SEED_VARIABLE)
    os.environ[SEED_VARIABLE] = str(seed)
    try:
        return run_seed(k)
    finally:
        if old is None:
            del os.environ[SEED_VARIABLE]
        else:
            os.environ[SEED_VARIABLE] = old
