"""Releases for a class: the lessons learners get so far, as a git repository to push.

    course-build-exercises --release ../class --lessons 01,02   # lessons 00, 01, 02
    course-build-exercises --release ../class --lessons 03      # later: adds 03, a new commit

A release holds the chosen lessons (lesson 00, set-up and grading, always), their exercises built
fresh from ``solutions/`` (no solution, no hidden check), ``.course-checks/`` (the same exercise
notebooks: the checks ``course-grade`` restores when a learner grades their own work), the
package and the set-up files. No ``solutions/``, no ``tests/`` (the shortcut fixtures hold right
answers). Its README and Makefile are its own (``release_files.py``): the README says what the
release holds, how to start it and grade in it, and which answers it withholds; the Makefile
offers what works there, and its other targets say why they are absent.

The package's own answers to exercises (code marked ``### BEGIN SOLUTION NN.k`` in
``src/course_utils``: lesson 01's engine, the passes lesson 03 asks for, ...) are withheld: each
region becomes a line raising ``AnswerWithheld`` that names the exercise and the learner's own
answer, until the instructor releases that lesson's solutions::

    course-build-exercises --release ../class --lessons 02 --solutions 01   # 01 has closed

The manifest records the lessons whose solutions are out, so a later release keeps them out
(``answers_in_package.py``; CONTRIBUTING.md, "Answers in the package").

The folder is a git repository with one commit per release, so an instructor pushes it where
learners pull from (an nbgitpuller link, ``git clone``). Releasing again into the same folder keeps
the lessons released before, adds the new ones, and commits only if something changed; a file a
learner changed in their clone stays theirs (nbgitpuller merges, it never overwrites their edits).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import nbformat

from course_utils.grading import answers_in_package
from course_utils.grading.commands import release_files
from course_utils.grading.format import is_hidden
from course_utils.grading.layout import RELEASE_CHECKS

#: Written into every release: which lessons it holds (a later release adds to them).
MANIFEST = ".course-release.json"
#: What a release holds besides notebooks: the package and the set-up files. Never solutions/
#: or tests/.
ITEMS = ("src", "jupyter", "benchmarks", "docs", "pyproject.toml", "environment.yml",
         "Makefile", "LICENSE", ".gitignore")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info",
                                "results")
def copy_items(root: Path, target: Path, items: tuple[str, ...]) -> None:
    """Copy each of ``items`` (files or folders of the course) that exists into ``target``,
    without caches and build leftovers (``IGNORE``)."""
    for item in items:
        source = root / item
        if source.is_dir():
            shutil.copytree(source, target / item, ignore=IGNORE)
        elif source.is_file():
            shutil.copy2(source, target / item)


#: The commit's author: the release tool, not whoever runs it (their name may be private).
GIT_IDENTITY = ["-c", "user.name=course-build-exercises", "-c",
                "user.email=course-build-exercises@localhost", "-c", "commit.gpgsign=false"]


class ReleaseError(ValueError):
    """A release that cannot be made; the message says what to do."""


def parse_lessons(text: str | None, available: Iterable[str]) -> list[str]:
    """``"01,2, 03"`` -> the notebook stems of those lessons (``01_computation_graphs``, ...),
    lesson 00 always included; ``None`` -> every lesson. Raises ReleaseError naming a number that
    matches no lesson.

    >>> parse_lessons("2", ["00_setup", "01_a", "02_b"])
    ['00_setup', '02_b']
    """
    stems = sorted(available)
    if text is None:
        return stems
    by_number = {stem.split("_", 1)[0]: stem for stem in stems}
    wanted = {stem for stem in stems if stem.startswith("00_")}
    for part in filter(None, (p.strip() for p in text.split(","))):
        number = part.zfill(2) if part.isdigit() else part.split("_", 1)[0]
        if number not in by_number:
            raise ReleaseError(f"--lessons: no lesson {part!r}; the lessons are "
                               f"{', '.join(sorted(by_number))}")
        wanted.add(by_number[number])
    return sorted(wanted)


def previous_lessons(target: Path, key: str = "lessons") -> list[str]:
    """The lessons an earlier release wrote to ``target`` (empty for a new folder); with
    ``key="solutions"``, the lessons whose solutions it released."""
    manifest = target / MANIFEST
    if not manifest.is_file():
        return []
    return list(json.loads(manifest.read_text(encoding="utf-8")).get(key, []))


def parse_solutions(text: str | None, available: Iterable[str]) -> list[str]:
    """``--solutions "01,2"`` -> the lesson numbers ``["01", "02"]`` whose answers in the
    package a release may ship. Raises ReleaseError naming a number that matches no lesson.

    >>> parse_solutions("1, 03", ["00_setup", "01_a", "03_c"])
    ['01', '03']
    """
    numbers = {stem.split("_", 1)[0] for stem in available}
    wanted = set()
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        number = part.zfill(2) if part.isdigit() else part.split("_", 1)[0]
        if number not in numbers:
            raise ReleaseError(f"--solutions: no lesson {part!r}; the lessons are "
                               f"{', '.join(sorted(numbers))}")
        wanted.add(number)
    return sorted(wanted)


def withhold_answers(target: Path, stems: list[str], solutions: list[str]) -> list[str]:
    """Strip from the release's package every answer to an exercise of a lesson not in
    ``solutions``; return one line per withheld function (``course_utils.engine.topo_order
    (01.1)``)."""
    by_number = {stem.split("_", 1)[0]: stem for stem in stems}

    def where(exercise: str) -> str:
        stem = by_number.get(exercise.split(".", 1)[0])
        return f"exercises/{stem}.ipynb, exercise {exercise}" if stem else f"exercise {exercise}"

    every = {ex for answer in answers_in_package.scan(target / "src")
             for ex in answer.exercises}
    withheld = {ex for ex in every if ex.split(".", 1)[0] not in solutions}
    done = answers_in_package.strip_package(target / "src", withheld, where)
    return [f"{a.dotted} ({' '.join(a.exercises)})" for a in done]


_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def unlink_missing(markdown: str, exists) -> str:
    """The markdown with every relative link whose file ``exists(path)`` denies made plain text;
    in the course map, a `` · [solutions](...)`` after an exercises link goes entirely.

    >>> unlink_missing("[a](x.md) · [solutions](solutions/x.ipynb) [b](http://e)", lambda p: 0)
    'a [b](http://e)'
    """
    markdown = re.sub(r"\s*·\s*\[solutions\]\(solutions/[^)]*\)", "", markdown)

    def fix(match: re.Match) -> str:
        bang, text, target = match.groups()
        path = target.split("#", 1)[0]
        if "://" in target or target.startswith(("#", "mailto:")) or not path or exists(path):
            return match.group(0)
        return "" if bang else text
    return _LINK.sub(fix, markdown)


def _git(target: Path, *args: str) -> str:
    done = subprocess.run(["git", *GIT_IDENTITY, *args], cwd=target, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise ReleaseError(f"git {' '.join(args)} failed in {target}: "
                           f"{(done.stderr or done.stdout).strip()}")
    return done.stdout


def _empty_or_release(target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise ReleaseError(f"{target} is a file; give a folder")
    if target.is_dir() and any(target.iterdir()) and not (target / MANIFEST).is_file():
        raise ReleaseError(f"{target} exists and is not a release of this course (no {MANIFEST}); "
                           "give a new folder, or the folder of an earlier release")


def write_release(root: Path, target: Path, wanted: dict[Path, bytes],
                  lessons_arg: str | None = None, commit: bool = True,
                  solutions_arg: str | None = None) -> str:
    """Write or update the release in ``target``; return a one-line summary.

    ``wanted``: {exercises/<name>: bytes} as ``build.plan`` makes them, for every lesson.
    ``lessons_arg``: ``--lessons`` as given (``None``: every lesson). ``solutions_arg``:
    ``--solutions`` as given, the lessons whose answers in the package the release ships (added
    to those an earlier release shipped). Raises ReleaseError.
    """
    _empty_or_release(target)
    available = [p.stem for p in wanted]
    lessons = sorted(set(previous_lessons(target)) | set(parse_lessons(lessons_arg, available)))
    solutions = sorted(set(previous_lessons(target, "solutions"))
                       | set(parse_solutions(solutions_arg, available)))
    missing = [s for s in lessons if s not in available]
    if missing:
        raise ReleaseError(f"{', '.join(missing)}: released before but not in solutions/ now")
    target.mkdir(parents=True, exist_ok=True)
    if not (target / ".git").is_dir():
        _git(target, "init", "--quiet", "--initial-branch=main")
    for item in (*ITEMS, "notebooks", "exercises", RELEASE_CHECKS):
        path = target / item
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    copy_items(root, target, ITEMS)
    try:
        withheld = withhold_answers(target, available, solutions)
    except ValueError as e:  # a marker the package scan refuses
        raise ReleaseError(str(e)) from None
    for folder in ("notebooks", "exercises", RELEASE_CHECKS):
        (target / folder).mkdir()
    by_stem = {p.stem: data for p, data in wanted.items()}
    for stem in lessons:
        lesson = root / "notebooks" / f"{stem}.ipynb"
        if lesson.is_file():
            shutil.copy2(lesson, target / "notebooks" / lesson.name)
        for folder in ("exercises", RELEASE_CHECKS):
            (target / folder / f"{stem}.ipynb").write_bytes(by_stem[stem])
    leaked = [str(p.relative_to(target)) for p in target.rglob("*.ipynb")
              if ".git" not in p.parts
              and any(is_hidden(c) for c in nbformat.read(p, as_version=4).cells)]
    if leaked:
        raise ReleaseError(f"{', '.join(leaked)} holds a hidden check")
    readme = release_files.release_readme(
        (root / "README.md").read_text(encoding="utf-8"), lessons, root,
        solutions=solutions, withheld=withheld)
    (target / "README.md").write_text(unlink_missing(readme, lambda rel: (target / rel).exists()),
                                      encoding="utf-8")
    (target / "Makefile").write_text(release_files.release_makefile(), encoding="utf-8")
    (target / MANIFEST).write_text(
        json.dumps({"lessons": lessons, "solutions": solutions}, indent=1) + "\n",
        encoding="utf-8")
    numbers = ", ".join(s.split("_", 1)[0] for s in lessons)
    if withheld:
        numbers += (f" (the package's answers to {len(withheld)} function(s) withheld until "
                    "their lessons' solutions: --solutions NN)")
    if not commit:
        return f"wrote {target}: lessons {numbers}"
    _git(target, "add", "--all")
    if not _git(target, "status", "--porcelain").strip():
        return f"{target}: lessons {numbers}, nothing changed since the last release"
    _git(target, "commit", "--quiet", "-m", f"Release lessons {numbers}")
    head = _git(target, "rev-parse", "--short", "HEAD").strip()
    return (f"wrote {target}: lessons {numbers}, committed as {head}; push it where learners "
            "pull from (README, 'Teaching a class')")
