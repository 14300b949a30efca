"""What a learners' release says about itself: its README and its Makefile.

A release (``release.py``) holds the lessons given so far, their exercises, ``.course-checks/``
and the package; not ``solutions/``, ``tests/``, ``site/``, ``zh/`` or ``deploy/``. The course's
README and Makefile describe all of those, so a release gets its own, written from the templates
here: the README says what the release holds, how to start it, how to grade, what only the
instructor's grading sees and which answers the package withholds; the Makefile offers what works
in a release (``lab``, ``grade``, ``venv``, ``kernel``, ``clean``, ``help``, and ``env``, the
shared environment of a class's server, built from the release so that its package withholds what
the release withholds) and makes every other
target of the course's Makefile say why it is not there. Every command in the README's code blocks
works in a release (``tests/test_release.py`` runs them).

The course map rows come from the course README's table (``| 01 | [computation graphs](...) |
the point | ...``), so a release describes its lessons as the course does; a lesson without a row
there gets its notebook's title.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import nbformat

TITLE = "Computation graphs, from the inside"

#: Targets of the course's Makefile that a release cannot offer, and why (no quotes or dollars:
#: each goes into an echo).
ABSENT = {
    "test": "it runs the course's tests and shortcut audit, which need tests/ and solutions/",
    "unit": "it runs tests/, which a release does not hold",
    "notebooks": "it compares the lessons' outputs with the settings in tests/ (not here)",
    "lint": "it checks the course's sources with its developer tools (not installed here)",
    "execute": "it re-executes the lessons in place for the course's maintainers; run a lesson "
               "in JupyterLab instead (make lab)",
    "exercises": "it rebuilds exercises/ from solutions/, which a release does not hold",
    "audit": "it grades the course's shortcut fixtures against solutions/ (not here)",
    "release": "releases are made from the course's repository, which holds solutions/",
    "site": "it builds the course's web site from site/ and zh/ (not here)",
    "hub": "it starts a class's JupyterHub from deploy/ (not here)",
}

MAKEFILE = """\
# A class's release of the course "{title}" (README.md). Targets:
#   make lab      start the course: JupyterLab on notebooks/00_setup.ipynb
#   make grade    grade your exercises (NB=exercises/01_computation_graphs.ipynb for one)
#   make help     this list
#   make env      (instructors) a class's shared environment, with this release's package
# lab and grade create .venv on first use (about 4 minutes) and reuse it afterwards. The course's
# repository has more targets ({absent}); they need what a release does not hold, and here each
# says so.

PYTHON  ?= python3
VENV    ?= .venv
# `cpu` (default) or `gpu` builds of the frameworks, and JupyterLab.
EXTRAS  ?= cpu,lab
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PORT    ?= 8888
IP      ?= 127.0.0.1
KERNEL  := graph-course

.PHONY: help venv kernel lab grade clean env {absent}

help:
\t@echo "make lab                 start the course (JupyterLab on notebooks/00_setup.ipynb)"
\t@echo "make grade               grade every notebook in exercises/"
\t@echo "make grade NB=exercises/01_computation_graphs.ipynb   grade one notebook"
\t@echo "make venv, make kernel   set up .venv and the course's Jupyter kernel only"
\t@echo "make clean               remove .venv"
\t@echo "make env PREFIX=/opt/graph-course   (instructors) a class's shared environment"
\t@echo "not in a release: {absent} (make <target> says why)"

venv: $(STAMP)

# Rebuilt when pyproject.toml changes or when EXTRAS asks for something else.
$(STAMP): pyproject.toml
\t@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
\t$(BIN)/python -m pip install --quiet --upgrade pip
\t$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
\t@echo "$(EXTRAS)" > $@

kernel: venv
\t$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) \\
\t\t--display-name "Python 3 (graph course)" > /dev/null
\t@mkdir -p $(VENV)/share/jupyter/lab/settings
\t@cp jupyter/overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json

# JupyterLab prints its URL with the access token. (Containers often run as root, which
# JupyterLab refuses unless told.)
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)
lab: kernel
\t$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" --ip=$(IP) --port=$(PORT) $(LAB_ARGS) \\
\t\tnotebooks/00_setup.ipynb

grade: venv
\t$(BIN)/course-grade $(if $(filter command line,$(origin NB)),$(NB),exercises)

clean:
\trm -rf $(VENV)

# A class's server (the course's README, "Teaching a class"): one read-only environment for every
# learner, with this release's package installed, so that the course's answers to exercises stay
# out of it until a release with their lessons' solutions (then run `make env` here again).
PREFIX     ?= /opt/graph-course
ENV_EXTRAS ?= cpu,lab,hub
ENV_PIP    ?=
env:
\t$(PYTHON) -m venv --clear $(PREFIX)
\t$(PREFIX)/bin/python -m pip install --quiet --upgrade pip
\t$(PREFIX)/bin/python -m pip install --quiet $(ENV_PIP) ".[$(ENV_EXTRAS)]"
\t$(PREFIX)/bin/python -m ipykernel install --prefix $(PREFIX) --name $(KERNEL) \\
\t\t--display-name "Python 3 (graph course)" > /dev/null
\t@mkdir -p $(PREFIX)/share/jupyter/lab/settings
\t@cp jupyter/overrides.json $(PREFIX)/share/jupyter/lab/settings/overrides.json
\t@$(PREFIX)/bin/python -m compileall -q -j 0 $(PREFIX)/lib > /dev/null || true
\tchmod -R a+rX,go-w $(PREFIX)
{absent_rules}"""


def release_makefile() -> str:
    """The release's Makefile: what works in a release, and why the rest is absent."""
    rules = "".join(f'\n{target}:\n\t@echo "make {target}: not in a release: {why}." >&2; '
                    "exit 2\n" for target, why in ABSENT.items())
    return MAKEFILE.format(title=TITLE, absent=" ".join(ABSENT), absent_rules=rules)


_ROW = re.compile(r"^\|\s*(\d\d)\s*\|")


def course_map(course_readme: str, lessons: Iterable[str], root: Path) -> list[str]:
    """The course map's rows for ``lessons`` (stems), from the course README's table: lesson,
    the point, and the exercises link (the solutions link dropped); a lesson the table lacks gets
    its notebook's title."""
    lines = course_readme.splitlines()
    heading = [i for i, line in enumerate(lines) if line.strip().lower() == "## the course map"]
    if heading:  # the first table after the heading: the README has other tables by lesson
        table: list[str] = []
        for line in lines[heading[0] + 1:]:
            if line.startswith("|"):
                table.append(line)
            elif table:
                break
        lines = table
    rows = {}
    for line in lines:
        m = _ROW.match(line)
        if m:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 3:
                rows[m[1]] = cells
    out = ["| # | lesson | the point | your exercises |", "|---|---|---|---|"]
    for stem in lessons:
        number = stem.split("_", 1)[0]
        lesson = f"[{stem.split('_', 1)[1].replace('_', ' ')}](notebooks/{stem}.ipynb)"
        point = ""
        if number in rows:
            lesson, point = rows[number][1], rows[number][2]
        else:
            path = root / "notebooks" / f"{stem}.ipynb"
            if path.is_file():
                first = nbformat.read(path, as_version=4).cells[0].source.splitlines()
                point = first[0].lstrip("# ").strip() if first else ""
        out.append(f"| {number} | {lesson} | {point} | [exercises](exercises/{stem}.ipynb) |")
    return out


def release_readme(course_readme: str, lessons: list[str], root: Path, *,
                   solutions: Sequence[str] = (), withheld: Sequence[str] = ()) -> str:
    """The release's README. ``lessons``: the stems it holds; ``solutions``: the lesson numbers
    whose answers in the package it ships; ``withheld``: the package functions it withholds
    (``course_utils.engine.topo_order (01.1)``).

    Long because: most of it is the README's text, kept as the page a learner reads."""
    numbers = [stem.split("_", 1)[0] for stem in lessons]
    example = next((s for s in lessons if not s.startswith("00_")), lessons[0])
    map_rows = "\n".join(course_map(course_readme, lessons, root))
    if withheld:
        released = (f" (the answers of lesson {', '.join(solutions)} are released)"
                    if solutions else "")
        listed = "\n".join(f"- `{name}`" for name in withheld)
        answers = f"""## The course's own answers, withheld for now

Some of the package's code is the course's own answer to an exercise. Until your instructor
releases that lesson's solutions, this release holds, in its place, a line that raises
`AnswerWithheld` and names the exercise whose answer (yours) to use instead{released}:

{listed}

A lesson cell that runs one of these raises that message too (lesson 01's forward mode, say,
before lesson 01's solutions are out). The release that brings the solutions puts the code back;
your work is not touched.
"""
    else:
        answers = """## The course's own answers

Every lesson's solutions are released: the package here is the course's, complete.
"""
    return f"""# {TITLE}: your class's copy

A learners' release of the course, made by your instructor for your class: how deep-learning
frameworks build, differentiate, optimize and run computation graphs. It holds lessons
{", ".join(numbers)}. Your instructor adds the next lessons as the class goes on: pulling again
("Getting the next lessons" below) brings them and keeps your work.

## What is here

| folder | what it holds |
|---|---|
| `notebooks/` | the lessons, executed, with their outputs: read them, run them, change them |
| `exercises/` | one notebook per lesson for you to fill in and grade |
| `.course-checks/` | the exercises as released: the checks the grader puts back when it grades |
| `src/course_utils/` | the course's package: minigraph, viz, bench, the grader |
| `benchmarks/`, `docs/` | the scripts behind the course's performance figures; the glossary |

There is no `solutions/`, no `tests/` and no web site here: those stay in the course's repository
with your instructor. This release is in English only.

## The lessons

{map_rows}

## Start

On your class's server (JupyterHub) the course is installed: open `notebooks/00_setup.ipynb`. On
your own machine, with Python 3.10+ and `make`:

```
make lab
```

The first run creates a virtual environment in `.venv` and installs the course into it (about 4
minutes: PyTorch and TensorFlow are large), registers a Jupyter kernel named "Python 3 (graph
course)" and starts JupyterLab, which prints its address with an access token. `make help` lists
what `make` does here:

```
make help
```

## Grade yourself

In a terminal in this folder (JupyterLab: *File → New → Terminal*), on your own machine:

```
make grade NB=exercises/{example}.ipynb
```

and on a class server, where `course-grade` is already installed:

```
course-grade exercises/{example}.ipynb
```

The grader runs a copy of your notebook in a fresh kernel (your file is never written), puts back
the check cells as the course wrote them (`.course-checks/`), and scores each check on its own. It
prints one line per exercise and then what each failed check expected (`course-grade` exits
with status 1 while a notebook has checks that do not pass).

**What only your instructor's grading sees:** your instructor grades the notebooks you hand in with
the full course, which also runs **hidden checks** on inputs you have not seen (another shape,
another graph) and compares with its answer key. An exercise that passes here can still lose a
hidden check's points there; an exercise's text says when it has one. A prediction (a
predict-then-measure exercise) is only `recorded` here: it is scored there. The solutions are not
part of this release.

{answers}
## Getting the next lessons

Open your class's link again, or, in your clone of the class's repository:

```
git pull
```

A notebook you changed stays yours: pulling adds the new lessons and leaves your edits alone.
"""
