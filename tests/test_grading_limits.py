"""Each kernel gets a fair share and a hard limit, as a normal user (issue 37).

An adversarial class run found four ways one submission could hurt the rest of the class while
every limit of the time held: 12 busy processes in their own sessions starved the kernel graded
beside it; 1.5 GiB written to the sandbox's ``/dev`` or held in System V shared memory passed
``--memory 1`` unseen; ``posix_fallocate`` put 6 GiB on the grader's disk before the
once-a-second watch saw it; and a ``while True: pass`` after working code scored full marks with
no note. Each test here attacks one of them with small limits (a few hundred MB, a few seconds).

The kernels run as a normal user: as root, in a private mount namespace as ``nobody``
(``setpriv``), so that neither cgroups nor root's exemptions hold them; the CPU test also runs
as root, where the limit is a cgroup's CPU quota.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import nbformat
import pytest
from machine_speed import slowness
from test_grading_attacks import nobody_script

from course_utils.grading import grade, sandbox
from course_utils.grading.build import build_notebook

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "tests" / "fixtures" / "grading" / "solutions"
SANDBOX = sandbox.bwrap_path() is not None
SLOW = slowness()
MiB = 2**20

pytestmark = [pytest.mark.slow]


def as_normal_user(code: str, tmp_path: Path) -> dict:
    """Run ``code`` (Python, which prints one JSON line last) as this user if it is not root,
    else as `nobody` (``nobody_script``); the result it printed. Skips where root cannot switch
    user here."""
    env = {"PYTHONPATH": str(ROOT / "src"), "CELL_TIMEOUT": f"{60 * SLOW:.0f}"}
    if os.getuid() != 0:
        script = tmp_path / "probe.py"
        script.write_text(code)
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=300 * SLOW, env={**os.environ, **env}, cwd=tmp_path)
    else:
        if shutil.which("setpriv") is None or shutil.which("unshare") is None:
            pytest.skip("as root, needs setpriv and unshare to run the kernel as a normal user")
        home = Path(tempfile.mkdtemp(prefix="cg-limits-", dir="/tmp"))  # nobody's, readable
        try:
            os.chmod(home, 0o755)
            script = home / "probe.py"
            script.write_text(code)
            os.chmod(script, 0o644)
            done = subprocess.run(
                nobody_script(f"{sys.executable} {script}", tmp_path, {**env, "HOME": str(home)}),
                capture_output=True, text=True, timeout=300 * SLOW, cwd=home)
        finally:
            shutil.rmtree(home, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def kernel_script(limits: str, cells: list[str], sandboxed: bool = True) -> str:
    """Source that runs ``cells`` in one kernel with ``Limits(limits)`` and prints, as JSON, what
    each reply was and the size of the kernel's folder on the grader's side after each."""
    return textwrap.dedent(f"""
        import json, os, sys
        from course_utils.grading.kernel import GiB, Kernel, Limits
        from course_utils.grading.supervise import disk_used
        timeout = float(os.environ["CELL_TIMEOUT"])
        out = []
        with Kernel(sandbox={sandboxed}, limits=Limits({limits})) as k:
            for cell in {cells!r}:
                r = k.execute(cell, timeout)
                log = (k.folder / "kernel.log").read_bytes()
                out.append({{"status": r.status, "stdout": r.stdout, "error": r.evalue,
                             "lost": r.why_lost, "host_bytes": disk_used(str(k.folder)),
                             "log_bytes": len(log), "log_start": log[:200].decode("latin-1"),
                             "log_end": log[-200:].decode("latin-1")}})
        print(json.dumps(out))
        """)


@pytest.mark.skipif(not SANDBOX, reason="bubblewrap (bwrap) cannot start a sandbox here")
def test_dev_and_shared_memory_hold_nothing_past_the_memory_limit(tmp_path):
    """Before: ``/dev`` was a writable tmpfs of half the machine's memory, ``/dev/shm`` a folder
    on the grader's disk, and System V segments lived in the kernel's IPC namespace: 1.5 GiB in
    any of them passed ``--memory 1`` as a normal user. Now ``/dev`` is read-only, ``shmget``
    is refused, and ``/dev/shm`` is the kernel's sized tmpfs, which counts as its memory."""
    cells = [
        "try:\n    open('/dev/hold', 'wb').write(b'x' * 2**20)\n    print('stored in /dev')\n"
        "except OSError as e:\n    print('refused:', e.strerror)",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print('shmget', libc.shmget(0, 300 * 2**20, 0o1600), ctypes.get_errno())",
        "import time\nwith open('/dev/shm/hold', 'wb') as f:\n    for _ in range(40):\n"
        "        f.write(b'x' * 2**23)\ntime.sleep(3)\nprint('held 320 MB')",
    ]
    dev, shm, held = as_normal_user(kernel_script("memory_bytes=GiB // 4", cells), tmp_path)
    assert dev["stdout"].strip() == "refused: Read-only file system", dev
    assert shm["stdout"].split() == ["shmget", "-1", "1"], shm  # EPERM
    assert held["status"] == "dead" and "more than 0.25 GiB of memory" in held["lost"], held
    assert "held" not in held["stdout"]


@pytest.mark.skipif(not SANDBOX, reason="bubblewrap (bwrap) cannot start a sandbox here")
def test_a_file_past_the_disk_limit_fails_there_and_never_reaches_the_graders_disk(tmp_path):
    """``posix_fallocate`` of 6 files of 64 MiB under ``--disk`` of 128 MiB, in the working
    folder and ``/tmp``: before, all six reached the grader's disk (the watch looks once a
    second); now the third fails with ENOSPC, in the kernel, and the grader's side of the
    kernel's folder holds only its log and connection file."""
    cell = textwrap.dedent("""
        import os
        made = []
        for i in range(6):
            path = f"/tmp/fill{i}" if i % 2 else f"fill{i}"
            fd = os.open(path, os.O_CREAT | os.O_WRONLY)
            try:
                os.posix_fallocate(fd, 0, 64 * 2**20)
                made.append(path)
            except OSError as e:
                print("stopped:", e.strerror)
                break
            finally:
                os.close(fd)
        print(len(made))
        """)
    [reply] = as_normal_user(kernel_script("memory_bytes=GiB, disk_bytes=128 * 2**20",
                                           [cell]), tmp_path)
    assert reply["status"] == "ok", reply
    assert reply["stdout"].split("\n")[:2] == ["stopped: No space left on device", "1"], reply
    assert reply["host_bytes"] < 4 * MiB, reply


@pytest.mark.parametrize("sandboxed", [True, False])
def test_what_the_kernel_prints_outside_jupyter_cannot_fill_the_graders_disk(sandboxed,
                                                                            tmp_path):
    """The kernel and a process it starts write 48 MiB to their stdout and stderr at the level
    of the operating system (ipykernel copies what reaches its descriptors 1 and 2 into the
    log, and a subprocess given ``sys.stdout`` writes there directly; the cell's output in
    Jupyter's messages is cut at 1 MB): before, all of it went to the kernel's log on the
    grader's disk (up to 1 GiB per file, ``RLIMIT_FSIZE``, before the disk watch looked); now
    the log holds at most 1 MiB, a note of what it dropped, and the end of what was written."""
    if sandboxed and not SANDBOX:
        pytest.skip("bubblewrap (bwrap) cannot start a sandbox here")
    cell = textwrap.dedent("""
        import os, subprocess, sys, time
        for fd in (1, 2) * 8:
            os.write(fd, b"x" * (2 * 2**20) + b"\\n")
        loud = "import os\\nfor _ in range(16): os.write(1, b'y' * 2**20)"
        subprocess.run([sys.executable, "-c", loud], stdout=sys.stdout, check=True)
        os.write(sys.stderr.fileno(), b"the last line\\n")
        time.sleep(1)
        """)
    wrote, after = as_normal_user(kernel_script("memory_bytes=GiB", [cell, "print('alive')"],
                                                sandboxed), tmp_path)
    assert wrote["status"] == "ok" and after["stdout"] == "alive\n", (wrote, after)
    assert after["log_bytes"] <= MiB, after["log_bytes"]
    assert after["host_bytes"] < 2 * MiB, after["host_bytes"]
    assert after["log_start"].startswith("[course-grade: ") and "dropped" in after["log_start"]
    assert after["log_end"].endswith("the last line\n"), after["log_end"][-60:]


BUSY = textwrap.dedent("""
    import os, subprocess, sys, time
    spin = "import os\\nos.setsid() if os.getsid(0) != os.getpid() else None\\nwhile True: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", spin], start_new_session=True)
            for _ in range(12)]
    def used():
        total = 0.0
        for p in hogs:
            with open(f"/proc/{p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total
    time.sleep(1)
    t0, c0 = time.monotonic(), used()
    time.sleep(4)
    rate = (used() - c0) / (time.monotonic() - t0)
    for p in hogs:
        p.kill()
    print(f"{rate:.3f}")
    """)


@pytest.mark.parametrize("user", ["normal", "root"])
def test_a_kernel_that_starts_busy_processes_gets_only_its_share_of_the_cpus(user, tmp_path):
    """12 busy processes, each in its own session: before, they took the machine (a kernel
    graded beside them got 1/13 of it and timed out). With ``Limits(cpus=0.5)`` the whole tree
    uses about half a processor over four seconds, wherever its processes went: a cgroup's
    quota as root, the supervisor's throttle as a normal user. (On two cores the 12 would use
    both; this bound holds however busy the machine is.)"""
    limits = "cpus=0.5, cgroups=True"
    if user == "root":
        if os.getuid() != 0:
            pytest.skip("as root only")
        code = kernel_script(limits, [BUSY], sandboxed=SANDBOX)
        script = tmp_path / "probe.py"
        script.write_text(code)
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=300 * SLOW, env={**os.environ,
                                                       "PYTHONPATH": str(ROOT / "src"),
                                                       "CELL_TIMEOUT": f"{60 * SLOW:.0f}"})
        assert done.returncode == 0, done.stderr[-3000:]
        [reply] = json.loads(done.stdout.strip().splitlines()[-1])
    else:
        [reply] = as_normal_user(kernel_script(limits, [BUSY], sandboxed=SANDBOX), tmp_path)
    assert reply["status"] == "ok", reply
    rate = float(reply["stdout"].split()[-1])
    assert rate < 0.8, f"12 busy processes used {rate:.2f} processors with a share of 0.5"


@pytest.mark.skipif(not SANDBOX, reason="--jobs needs the sandbox (without it, one at a time)")
def test_course_grade_gives_each_kernel_the_machines_cpus_divided_by_jobs(monkeypatch):
    seen = {}

    def fake(path, solutions, **kw):
        seen["limits"] = kw["limits"]
        raise SystemExit(0)

    monkeypatch.setattr(grade, "grade_notebook", fake)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    full = ROOT / "tests/fixtures/grading/submissions/full/99_fixture.ipynb"
    with pytest.raises(SystemExit):
        grade.main([str(full), "--solutions", str(SOLUTIONS), "--jobs", "4", "--sandbox"])
    assert seen["limits"].cpus == 2.0


def test_a_looping_answer_cell_is_noted_as_timeout(tmp_path):
    """``while True: pass`` after working code in an answer cell: the cell is interrupted at its
    time limit, the function it defined still passes its check, and the exercise is
    ``timeout`` with a note naming the cell (CONTRIBUTING's table), not a silent pass."""
    canonical = nbformat.read(SOLUTIONS / "99_fixture.ipynb", as_version=4)
    nb = build_notebook(canonical)
    next(c for c in nb.cells if c.id == "sol-1").source = (
        "def double(x):\n    return 2 * np.asarray(x)\n\nwhile True:\n    pass\n")
    path = tmp_path / "99_fixture.ipynb"
    nbformat.write(nb, path)
    report = grade.grade_notebook(path, SOLUTIONS, timeout=3 * SLOW)
    first = report.exercises[0]
    assert first.exercise == "99.1" and first.status == "timeout", first
    assert first.points == first.possible, first
    assert any("your solution" in n and "timed out" in n for n in first.notes), first.notes


# --- the grader's own work on a report, bounded (issue 37) -----------------------------------


def test_a_column_reported_against_a_row_is_refused_before_it_is_broadcast():
    """A (4000, 1) report against a (1, 4000) expected array: the verdict's ``np.isclose``
    broadcast them to 16 million values in the grader (the issue's 8000: 623 MB). The shapes
    are checked first; the grader allocates nothing of that size."""
    import tracemalloc

    import numpy as np

    from course_utils.grading import verdict

    spec = verdict.CheckSpec("c", "", "", "", "import numpy as np\n"
                             "assert np.isclose(got, want).all(), 'values differ'\n")
    got, want = np.zeros((4000, 1)), np.zeros((1, 4000))
    tracemalloc.start()
    try:
        outcome, message = verdict.judge(spec, {"got": got}, {"want": want})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MiB, f"the verdict allocated {peak / MiB:.0f} MB"
    assert outcome == "failed" and "`got` has shape (4000, 1) and `want` shape (1, 4000)" in \
        message and "(4000, 4000) (16,000,000 values)" in message, message
    # the same arrays in the shape the check asks for are compared as before
    assert verdict.judge(spec, {"got": got.T}, {"want": want}) == ("passed", "")


def test_a_verdict_message_quoting_megabytes_is_cut():
    from course_utils.grading import verdict

    spec = verdict.CheckSpec("c", "", "", "", "assert False, 'x' * 3_400_000\n")
    outcome, message = verdict.judge(spec, {}, None)
    assert outcome == "failed" and len(message) < verdict.MAX_MESSAGE_CHARS + 100, len(message)
    assert message.endswith("(3,395,904 more characters not shown)"), message[-80:]


def test_ipython_transforms_at_most_a_bounded_input(monkeypatch):
    """300 kB of ``%time`` lines: IPython tokenizes the whole cell again for each escape it
    rewrites, and the grader repeated that (45 CPU-s for the issue's cell). Now a cell over
    ``MAX_TRANSFORM_CHARS`` is transformed a line at a time; each line gives what IPython
    gives for it, and the parsed history of such a cell is not compared (the raw one is)."""
    from IPython.core.inputtransformer2 import TransformerManager

    from course_utils.grading import tamper

    lines = [f"%time x{i} = {i}" for i in range(20_000)]
    big = "\n".join(lines) + "\n"
    assert len(big) > 300_000
    sizes = []
    original = TransformerManager.transform_cell
    monkeypatch.setattr(TransformerManager, "transform_cell",
                        lambda self, cell: sizes.append(len(cell)) or original(self, cell))
    tamper._transform.cache_clear()
    got = tamper._transform(big)
    assert max(sizes) <= tamper.MAX_TRANSFORM_CHARS, max(sizes)
    reference = TransformerManager()  # IPython's own, on a part of the cell it can do quickly
    assert got.split("\n")[:50] == original(reference, "\n".join(lines[:50])).split("\n")[:50]
    small = "%time y = 1\nz = 2\n"
    assert tamper._transform(small) == original(reference, small).rstrip("\n")
    assert tamper.expected_history([small, big])["parsed"] is None
    assert tamper.expected_history([small])["parsed"] is not None
