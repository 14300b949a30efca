"""How long grading a class takes: CPU-seconds and wall-seconds per submission.

    python benchmarks/grading.py                      # lessons 00 (light) and 06 (heavy)
    python benchmarks/grading.py --copies 8 --rounds 3 --light 00_setup --heavy 09_tf_function
    python benchmarks/grading.py --each --copies 2 --jobs 1   # every lesson, one by one

Grades ``--copies`` submissions of a light lesson (numpy only) and of a heavy one (it imports
TensorFlow), each submission the lesson's solutions notebook (every cell runs: the slowest a
learner's notebook gets), with ``course-grade --jobs 1`` and ``--jobs 4``, in the sandbox where
bubblewrap works. The configurations run in interleaved rounds; per submission it prints the
median over rounds of the wall time of the whole run divided by the submissions, and of the CPU
time of everything the run started (kernels, supervisors, sandboxes; sampled from the process
tree) divided likewise. Then an estimate for a class: ``--students`` x ``--lessons``
submissions on ``--cores`` cores with ``--jobs`` equal to the cores, from the CPU-seconds per
submission (grading is CPU bound when every core has a kernel), as a range from all-light to
all-heavy lessons. ``--each`` grades every lesson's solutions notebook instead (00-15) and
estimates a class from their sum: ``--students`` x every lesson, and x the lessons without
00_setup (the course's 15 lessons), per ``--cores``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
_BEFORE = [0.0]  # RUSAGE_CHILDREN's CPU seconds before the run being measured


def run_measured(command: list[str]) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run ``command``; (its result, wall seconds, CPU seconds of it and every process below
    it). The kernels run below supervisors and sandboxes that are not always waited for, so
    ``RUSAGE_CHILDREN`` misses them: the process tree is sampled every 0.1 s instead, keeping
    each process's last user + system time (a process living under 0.1 s is missed)."""
    seen: dict[tuple[int, float], float] = {}
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err, text=True)
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                tree = []
            for p in tree:
                try:
                    with p.oneshot():
                        times = p.cpu_times()
                        seen[(p.pid, p.create_time())] = times.user + times.system
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            time.sleep(0.1)
        wall = time.monotonic() - t0
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(command, proc.returncode, out.read(), err.read())
    cpu = sum(seen.values())
    return done, wall, max(cpu, usage.ru_utime + usage.ru_stime - _BEFORE[0])


def sandbox_flags() -> list[str]:
    if shutil.which("bwrap"):
        return ["--sandbox"]
    help_text = subprocess.run([sys.executable, "-m", "course_utils.grading.grade", "--help"],
                               capture_output=True, text=True).stdout
    extra = ["--trust-submissions"] if "--trust-submissions" in help_text else []
    return ["--no-sandbox", *extra]


def grade_class(lesson: str, copies: int, jobs: int, flags: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one course-grade run over ``copies`` submissions."""
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as folder:
        for k in range(copies):
            learner = Path(folder) / f"learner{k:03d}"
            learner.mkdir()
            shutil.copy(ROOT / "solutions" / f"{lesson}.ipynb", learner / f"{lesson}.ipynb")
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        _BEFORE[0] = usage.ru_utime + usage.ru_stime
        done, wall, cpu = run_measured([sys.executable, "-m", "course_utils.grading.grade",
                                        folder, "--jobs", str(jobs), *flags])
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:]
    if done.returncode not in (0, 1) or "total" not in done.stdout:
        raise RuntimeError(f"course-grade failed on {lesson}: {last}")
    if done.returncode != 0:  # a solutions notebook that does not pass: a timeout, say
        print(f"  note: {lesson}, --jobs {jobs}: not every notebook passed: {last}",
              file=sys.stderr)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--light", default="00_setup")
    parser.add_argument("--heavy", default="06_tf1_sessions")
    parser.add_argument("--copies", type=int, default=4, help="submissions per run")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--lessons", type=int, default=14)
    parser.add_argument("--cores", type=int, nargs="+", default=[4, 16, 64])
    parser.add_argument("--each", action="store_true",
                        help="grade every lesson in solutions/ (not --light and --heavy)")
    args = parser.parse_args()
    flags = sandbox_flags()
    cores_here = len(os.sched_getaffinity(0))
    print(f"course-grade {' '.join(flags)} on {cores_here} core(s), {args.copies} submissions "
          f"per run, {args.rounds} round(s), load average {os.getloadavg()[0]:.1f} at the start")
    if args.each:
        each_lesson(args, flags)
        return
    configs = [(lesson, jobs) for lesson in (args.light, args.heavy) for jobs in args.jobs]
    walls: dict = {c: [] for c in configs}
    cpus: dict = {c: [] for c in configs}
    for _ in range(args.rounds):
        for lesson, jobs in configs:  # interleaved: a busy spell hits every configuration
            wall, cpu = grade_class(lesson, args.copies, jobs, flags)
            walls[(lesson, jobs)].append(wall / args.copies)
            cpus[(lesson, jobs)].append(cpu / args.copies)
    print("\n| lesson | --jobs | wall-s / submission | CPU-s / submission |")
    print("|---|---|---|---|")
    for lesson, jobs in configs:
        print(f"| {lesson} | {jobs} | {statistics.median(walls[(lesson, jobs)]):.1f} | "
              f"{statistics.median(cpus[(lesson, jobs)]):.1f} |")
    light = min(statistics.median(cpus[(args.light, j)]) for j in args.jobs)
    heavy = max(statistics.median(cpus[(args.heavy, j)]) for j in args.jobs)
    n = args.students * args.lessons
    print(f"\n{args.students} students x {args.lessons} lessons = {n} submissions; with --jobs "
          "equal to the cores, at the CPU-seconds per submission measured here:")
    for cores in args.cores:
        print(f"  {cores:3d} cores: {_hours(n * light / cores)} (every lesson as light as "
              f"{args.light}) to {_hours(n * heavy / cores)} (every lesson as heavy as "
              f"{args.heavy})")


def each_lesson(args: argparse.Namespace, flags: list[str]) -> None:
    """Every lesson's CPU- and wall-seconds per submission, then a class's CPU time from them."""
    lessons = sorted(p.stem for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    configs = [(lesson, jobs) for lesson in lessons for jobs in args.jobs]
    walls: dict = {c: [] for c in configs}
    cpus: dict = {c: [] for c in configs}
    for _ in range(args.rounds):
        for lesson, jobs in configs:
            wall, cpu = grade_class(lesson, args.copies, jobs, flags)
            walls[(lesson, jobs)].append(wall / args.copies)
            cpus[(lesson, jobs)].append(cpu / args.copies)
            print(f"  {lesson} --jobs {jobs}: {wall / args.copies:.1f} wall-s, "
                  f"{cpu / args.copies:.1f} CPU-s per submission", flush=True)
    print("\n| lesson | --jobs | wall-s / submission | CPU-s / submission |")
    print("|---|---|---|---|")
    for lesson, jobs in configs:
        print(f"| {lesson} | {jobs} | {statistics.median(walls[(lesson, jobs)]):.1f} | "
              f"{statistics.median(cpus[(lesson, jobs)]):.1f} |")
    per_lesson = {lesson: min(statistics.median(cpus[(lesson, j)]) for j in args.jobs)
                  for lesson in lessons}
    groups = [(f"all {len(lessons)} notebooks", lessons)]
    if "00_setup" in per_lesson:
        groups.append((f"the {len(lessons) - 1} lessons without 00_setup",
                       [lesson for lesson in lessons if lesson != "00_setup"]))
    for name, group in groups:
        student = sum(per_lesson[lesson] for lesson in group)
        total = args.students * student
        print(f"\n{args.students} students x {name}: {student:.0f} CPU-s per student, "
              f"{total / 3600:.1f} CPU-hours; with --jobs equal to the cores:")
        for cores in args.cores:
            print(f"  {cores:3d} cores: {_hours(total / cores)}")


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


if __name__ == "__main__":
    main()
