"""``course-grade``: grade exercise notebooks, with partial credit, in isolated kernels.

    course-grade exercises/00_setup.ipynb                      # a learner grades their own work
    course-grade subs/ --csv grades.csv --feedback feedback/   # an instructor grades a class

For each notebook (``notebook/pipeline.py``): find its solutions notebook (by file name, else by
its exercise ids), put the canonical check cells back, hidden checks included (``restore.py``),
run a copy cell by cell in a fresh kernel below a supervisor, sandboxed with bubblewrap where it
is installed (``run.py``, ``running/kernel.py``, ``running/sandbox.py``), and score each check
cell on its own. The learner's file is only read. This module is the command: its options, the
class (``classroom.py``), the sandbox or the course guard, the answer keys before any submission
runs, the grading of every notebook, and the outputs. How it works, and what is guaranteed with
and without the sandbox: CONTRIBUTING.md.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import hashlib
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nbformat

from course_utils.editions import localize_table, report_language
from course_utils.grading import verdict as verdicts
from course_utils.grading.commands import classroom
from course_utils.grading.layout import RELEASE_CHECKS, find_course_root
from course_utils.grading.notebook import key as answer_key
from course_utils.grading.notebook.pipeline import (  # noqa: F401 (grade.X as before)
    _KEYS,
    EXTRA_CELLS,
    _answer_key,
    _find_canonical,
    _has_answers,
    _learner_name,
    _printable,
    _read_notebook,
    _Ungradable,
    grade_notebook,
    hidden_feedback,
    score,
    session_seed,
)
from course_utils.grading.notebook.report import (
    NotebookReport,
    escape,
    feedback_html,
    feedback_name,
    format_table,
    to_json,
    write_csv,
)
from course_utils.grading.notebook.restore import _SOLUTIONS
from course_utils.grading.running import sandbox as bwrap
from course_utils.grading.running.guard import (  # noqa: F401 (grade.X as before)
    GRADER,
    CourseGuard,
    _site_folders,
)
from course_utils.grading.running.kernel import (
    GiB,
    Limits,
    descendants,
    fair_share,
    kill_descendants,
)


def collect(paths: Sequence[str | Path], solutions: Path) -> list[tuple[Path, str, bool]]:
    """(notebook, learner, given) for each file given (``given``: named on the command line,
    so a symbolic link is followed), and each ``*.ipynb`` under each folder given (links there
    are refused when graded; folders that are links are not entered)."""
    found = []
    for given in map(Path, paths):
        if given.is_dir():
            for nb in sorted(given.rglob("*.ipynb")):
                if ".ipynb_checkpoints" not in nb.parts:
                    found.append((nb, _learner_name(nb, solutions, given), False))
        else:
            found.append((given, _learner_name(given, solutions), True))
    return found


def _shared_canonical(todo: list[tuple[Path, str, bool]], solutions: Path) -> Path | None:
    """When every readable submission in a batch is graded against one notebook, that one: an
    empty or broken file in the same batch is then graded against it too (a row per exercise)."""
    found = set()
    for path, _, given in todo:
        try:
            nb = _read_notebook(path, given)
        except ValueError:
            nb = None
        try:
            canonical = _find_canonical(path, nb, solutions)
        except Exception:  # whatever a submission holds, the class is graded
            canonical = None
        if canonical is not None:
            found.add(canonical)
    return found.pop() if len(found) == 1 else None


def _canonicals(todo: list[tuple[Path, str, bool]], solutions: Path, forced: Path | None
                ) -> list[Path]:
    """The canonical notebooks the submissions in ``todo`` will be graded against."""
    if forced is not None:
        return [forced]
    found: dict[Path, None] = {}
    for path, _, given in todo:
        try:
            nb = _read_notebook(path, given)
        except ValueError:
            nb = None
        with contextlib.suppress(Exception):
            canonical = _find_canonical(path, nb, solutions)
            if canonical is not None:
                found[canonical] = None
    return list(found)


def _others(todo: list[tuple[Path, str, bool]], solutions: Path) -> str:
    """Why grading ``todo`` without the sandbox needs ``--trust-submissions`` ("" if it does
    not): more than one learner, or a notebook outside the course that holds ``solutions`` (a
    learner's own checkout, whose exercises, solutions and copies they may grade as they like)."""
    learners = sorted({learner for _, learner, _ in todo})
    if len(learners) > 1:
        return f"these are the notebooks of {len(learners)} learners"
    course = solutions.resolve().parent
    if not (course / "pyproject.toml").is_file():
        course = bwrap.course_root() or course
    for path, _, _ in todo:
        with contextlib.suppress(OSError, RuntimeError):
            if course not in path.resolve().parents:
                return f"{path} is not in this course's folder ({course})"
    return ""


def _harden() -> None:
    """Keep processes of the same user out of ``/proc/<grader>/fd`` (no fake lines written to
    the grader's output through ``/proc/<pid>/fd/1``; root is not kept out, the sandbox is), and
    make the grader a child subreaper: a process that outlives its kernel's supervisor is
    re-parented here, and ``main`` kills it at the end."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER = 36


def canonical_folder(explicit: Path | None, start: Path | None = None,
                     paths: Sequence[str | Path] = ()) -> Path:
    """``--solutions``; else, in the nearest course folder above ``start`` (default: cwd), or
    above one of the notebooks ``paths`` (a learner in their home on a Hub grading
    ``graph-course/exercises/01_x.ipynb``), its ``solutions/`` or, in a release, its
    ``.course-checks/``; else the package's checkout. FileNotFoundError saying what to run."""
    if explicit is not None:
        return explicit
    here = (start or Path.cwd()).resolve()
    starts = [here] + [Path(p).resolve().parent for p in paths]
    for first in dict.fromkeys(starts):
        for folder in [first, *first.parents]:
            if (folder / "pyproject.toml").is_file():
                for name in ("solutions", RELEASE_CHECKS):
                    if (folder / name).is_dir():
                        return folder / name
    try:
        return find_course_root(start) / "solutions"
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no copy of the course holds these notebooks or {here}: the checks come from the "
            f"course's folder (its {RELEASE_CHECKS}/ or solutions/). On a class server, grade "
            "in the folder the class's link pulled the course into, e.g. cd ~/graph-course && "
            "course-grade exercises/01_computation_graphs.ipynb; or name the checks with "
            f"--solutions ~/graph-course/{RELEASE_CHECKS}") from None


def _parser() -> argparse.ArgumentParser:
    """``course-grade``'s options, and the class's (``classroom.add_arguments``)."""
    parser = argparse.ArgumentParser(
        prog="course-grade", description="Grade exercise notebooks: partial credit, full "
        "feedback, each in an isolated kernel.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="notebooks or folders")
    parser.add_argument("--solutions", type=Path, help="solutions folder (default: the course's)")
    parser.add_argument("--notebook", metavar="NN_topic",
                        help="grade every file against this solutions notebook")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="per-cell timeout (default: 60)")
    parser.add_argument("--csv", type=Path, metavar="OUT.csv",
                        help="also write one row per learner and exercise to this file")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--lang", choices=["auto", "en", "zh"], default="auto",
                        help="language of the report's headings and summary lines "
                        "(default: zh when every notebook graded is one of the "
                        "Chinese edition's, e.g. zh/exercises/; check messages stay "
                        "English)")
    parser.add_argument("--feedback", type=Path, metavar="DIR",
                        help="write one HTML report per submission into DIR")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at once")
    parser.add_argument("--memory", type=float, default=6.0, metavar="GiB",
                        help="memory limit per submission (default: 6)")
    parser.add_argument("--disk", type=float, default=4.0, metavar="GiB",
                        help="limit on the files a submission writes in its own folders, "
                        "its /tmp when sandboxed (default: 4)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--sandbox", dest="sandbox", action="store_true", default=None,
                       help="run each kernel under bubblewrap (the default where bwrap works)")
    group.add_argument("--no-sandbox", dest="sandbox", action="store_false",
                       help="run kernels as plain processes (still in their own session, with "
                       "limits, and cleaned up)")
    parser.add_argument("--trust-submissions", action="store_true",
                        help="without the sandbox, grade several learners' notebooks, or any "
                        "outside this course, anyway (their code runs with your rights)")
    classroom.add_arguments(parser)  # --roster, --canvas, --resume, --threads, --device
    return parser


def _sandbox_and_jobs(args: argparse.Namespace, todo: list[tuple[Path, str, bool]],
                      solutions: Path) -> tuple[bool, int] | None:
    """Whether the kernels run in the sandbox, and how many at once; None when nothing
    may be graded (said on stderr): no sandbox where it was asked for, or other
    people's notebooks without it and without --trust-submissions."""
    sandbox = args.sandbox
    available = bwrap.bwrap_path() is not None
    if sandbox is None:
        sandbox = available
    if sandbox and not available:
        print(f"error: --sandbox: {bwrap.why_not_available()}", file=sys.stderr)
        return None
    jobs = max(1, args.jobs)
    if not sandbox:
        why = "--no-sandbox" if args.sandbox is False else bwrap.why_not_available()
        untrusted = _others(todo, solutions)
        if untrusted and not args.trust_submissions:
            print(f"error: not graded: {untrusted}, and there is no sandbox ({why}). Without "
                  "it a submission's code runs with your rights: a process it leaves running "
                  "can change the next learner's grade, a sitecustomize.py or .pth file it "
                  "plants runs in every later Python, and a change it makes to the solutions "
                  "while another learner is graded scores that learner 'tampered'. Grade with "
                  "the sandbox (README, 'Grading a class'), or pass --trust-submissions if you "
                  "trust every submission", file=sys.stderr)
            return None
        print(f"warning: grading is not isolated ({why}): a submission's code runs with your "
              "rights and can read and write your files; see README, 'Grading a class'",
              file=sys.stderr)
        if jobs > 1:  # the course guard can only tell whose change it found one at a time
            print(f"note: without the sandbox submissions are graded one at a time (--jobs "
                  f"{jobs} ignored), so that a change to the course's files is blamed on the "
                  "submission that made it", file=sys.stderr)
            jobs = 1
    return sandbox, jobs


def _read_keys(canonicals: list[Path], solutions: Path, seed: int,
               kernel_env: Mapping[str, str]) -> None:
    """Read (or build) the answer key of each canonical notebook for this run's seed,
    before any submission runs; a key that cannot be built is said on stderr (its
    submissions say so in their rows)."""
    _KEYS.clear()  # the answer keys for this run's seed, read (or built) before any submission
    for path in canonicals:
        nb = _SOLUTIONS.get(path.resolve())
        if nb is not None and verdicts.specs(nb.cells) and _has_answers(nb):
            print(f"answer key of {path.name} ...", file=sys.stderr, flush=True)
            try:
                _answer_key(path, solutions, nb, seed, kernel_env)
            except _Ungradable as e:  # each of its submissions says so in its rows
                print(f"error: {e}", file=sys.stderr)


def _write_outputs(args: argparse.Namespace, todo: list[tuple[Path, str, bool]],
                   reports: list[NotebookReport], class_run: classroom.ClassRun) -> None:
    """The table (or JSON) on stdout, the CSV, the Canvas file (``classroom.finish``) and
    the feedback pages."""
    lang = args.lang if args.lang != "auto" else report_language([item[0] for item in todo])
    print(to_json(reports) if args.json else localize_table(format_table(reports), lang))
    if args.csv:
        write_csv(reports, args.csv)
        print(f"wrote {args.csv}", file=sys.stderr)
    classroom.finish(class_run, args, reports)  # --canvas
    if args.feedback:
        args.feedback.mkdir(parents=True, exist_ok=True)
        names = _unique([feedback_name(r) for r in reports])
        for report, name in zip(reports, names, strict=True):
            (args.feedback / name).write_text(feedback_html(report), encoding="utf-8")
        print(f"wrote {len(reports)} feedback page(s) to {args.feedback}", file=sys.stderr)


def _grade_item(item: tuple[Path, str, bool], *, solutions: Path, canonical: Path | None,
                class_run: classroom.ClassRun, broken: Path | None, before: set[int],
                **options: Any) -> NotebookReport:
    """Grade one (notebook, learner, given) of the run; never raises (its report says what
    broke). ``broken``: the canonical notebook for a file that cannot be read; ``before``: the
    processes that were there before grading (without the sandbox, what is left below us after
    a submission is that submission's); ``options``: ``grade_notebook``'s."""
    path, learner, given = item
    sys.stdout.flush()
    print(f"grading {escape(str(path))} ...", file=sys.stderr, flush=True)
    forced = canonical or class_run.canonical_for(path)
    if forced is None and broken is not None:
        try:
            _read_notebook(path, given)
        except ValueError:
            forced = broken
    try:
        return grade_notebook(path, solutions, learner=learner, canonical=forced, links=given,
                              **options)
    except Exception as e:  # a bug met by an odd file: that file's row says so, the rest goes on
        return NotebookReport(_printable(str(path)), _printable(learner), "", [],
                              error=f"the grader failed on this file: {type(e).__name__}: {e}",
                              seed=options["seed"])
    finally:  # one at a time without the sandbox: what is left below us is this one's
        if not options["sandbox"]:
            kill_descendants(keep=before)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; exit status 0 only when every exercise passed."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if args.seed is not None and not 0 <= args.seed < 2**63:
        parser.error(f"--seed must be a whole number from 0 to 2**63 - 1, got {args.seed}")
    try:
        solutions = canonical_folder(args.solutions, paths=args.paths)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not solutions.is_dir():
        print(f"error: {solutions} is not a folder of solutions notebooks", file=sys.stderr)
        return 2
    canonical = None
    if args.notebook:
        canonical = solutions / f"{Path(args.notebook).stem}.ipynb"
        if not canonical.is_file():
            print(f"error: no {canonical}", file=sys.stderr)
            return 2
    _SOLUTIONS.clear()
    for notebook in sorted(solutions.glob("*.ipynb")):  # before any submission runs
        with contextlib.suppress(Exception):  # a broken one is reported where it is used
            _SOLUTIONS[notebook.resolve()] = nbformat.read(notebook, as_version=4)
    todo = collect(args.paths, solutions)
    if not todo:
        print(f"error: no notebooks in {' '.join(args.paths)}", file=sys.stderr)
        return 2
    try:  # Canvas' file names, duplicates, the roster, --resume (classroom.py)
        class_run = classroom.start(args, todo, solutions)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    todo = class_run.todo
    if canonical is None and len(todo) > 1:
        canonical_for_broken = _shared_canonical(todo, solutions)
    else:
        canonical_for_broken = None

    chosen = _sandbox_and_jobs(args, todo, solutions)
    if chosen is None:
        return 2
    sandbox, jobs = chosen
    kernel_env = classroom.configure(args, jobs)  # threads, device; timeout on a busy machine
    if argv is None:  # the command line (not a call from Python, e.g. in a lesson's kernel)
        _harden()
    seed = class_run.seed
    _read_keys(_canonicals(todo, solutions, canonical), solutions, seed, kernel_env)
    hidden = [Path(p).resolve() for p in args.paths]
    hidden += [p.resolve() for p in (args.csv, args.feedback, args.canvas, class_run.progress)
               if p is not None]
    guard = None if sandbox else CourseGuard([GRADER, solutions, answer_key.folder(solutions)],
                                             watched=[GRADER.parent])
    limits = Limits(memory_bytes=int(args.memory * GiB), disk_bytes=int(args.disk * GiB),
                    cpus=fair_share(jobs))  # issue 37: a kernel's many processes slow only it

    before = descendants()
    grade = functools.partial(
        _grade_item, solutions=solutions, canonical=canonical, class_run=class_run,
        broken=canonical_for_broken, before=before, timeout=args.timeout,
        sandbox=sandbox, limits=limits, hidden=hidden, guard=guard, seed=seed,
        kernel_env=kernel_env)
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            reports = list(pool.map(class_run.wrap(grade), todo))
    finally:
        kill_descendants(keep=before)
    _write_outputs(args, todo, reports, class_run)
    return 0 if all(r.passed for r in reports) else 1


def _unique(names: list[str]) -> list[str]:
    """File names made unique by a short hash where two learners clean to the same name."""
    seen: dict[str, int] = {}
    for name in names:
        seen[name] = seen.get(name, 0) + 1
    out: list[str] = []
    taken = set(names)
    for k, name in enumerate(names):
        if seen[name] > 1:  # a tagged name may not be another learner's name either
            n = 0
            while True:
                tag = hashlib.sha256(f"{k}:{n}".encode()).hexdigest()[:6]
                tagged = name.removesuffix(".html") + f"-{tag}.html"
                if tagged not in taken:
                    break
                n += 1
            taken.add(tagged)
            name = tagged
        out.append(name)
    return out


if __name__ == "__main__":
    sys.exit(main())
