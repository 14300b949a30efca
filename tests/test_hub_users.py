"""The Hub path for learners who are Unix users of their own (The Littlest JupyterHub gives each
a system user), without a browser: the instructor's release served as deploy/hub/README.md says
(a bare repository that git lets other users read: safe.directory in the system's git config),
cloned by two learners, each as their own user, as nbgitpuller's first click does; a lesson
released later and pulled over a learner's edits; and a learner grading from their home folder
with course-grade, which finds the release's .course-checks/ above the notebook.

Needs root (useradd, runuser); skips otherwise. The system's git config is a file of the test's
(GIT_CONFIG_SYSTEM), standing for /etc/gitconfig. Grading runs as the learner where the shared
environment's Python is readable by other users, else as root from the learner's home (here the
course's .venv links to a Python under /root, which other users cannot enter).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                       reason="needs root: it adds two Unix users"),
    pytest.mark.skipif(not (shutil.which("useradd") and shutil.which("userdel")
                            and shutil.which("runuser") and shutil.which("git")),
                       reason="needs useradd, userdel, runuser and git"),
]


def _run(args: list[str], *, user: str | None = None, env: dict[str, str] | None = None,
         cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    if user is not None:  # a login-less shell of that user, with only the variables given
        args = ["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in
                                                              (env or {}).items()], *args]
        env = None
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    if check:
        assert done.returncode == 0, f"{args}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture
def learners():
    """Two Unix users with homes in a folder every user can enter; removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="cg-hub-users-"))
    base.chmod(0o755)
    names = [f"cg{os.getpid() % 100000}{x}" for x in "ab"]
    made = []
    try:
        for name in names:
            home = base / "home" / name
            _run(["useradd", "-M", "-d", str(home), "-s", "/bin/sh", name])
            made.append(name)
            home.mkdir(parents=True)
            shutil.chown(home, name, name)
            home.chmod(0o700)
        yield base, names
    finally:
        for name in made:
            _run(["userdel", name], check=False)
        shutil.rmtree(base, ignore_errors=True)


def _release(release: Path, lessons: str) -> None:
    _run([sys.executable, "-m", "course_utils.grading.build", "--release", str(release),
          "--lessons", lessons], cwd=ROOT)


def test_two_unix_users_pull_the_release_and_grade_from_their_homes(learners):
    base, (ada, grace) = learners
    srv = base / "srv"
    srv.mkdir()
    release, served = srv / "graph-course", srv / "graph-course.git"
    # deploy/hub/README.md, step 2, as root: the release, a bare copy learners pull from, and
    # git's permission for other users to read it.
    _release(release, "00")
    _run(["git", "clone", "-q", "--bare", str(release), str(served)])
    _run(["chmod", "-R", "a+rX", str(served)])
    system = base / "gitconfig"
    system.write_text(f"[safe]\n\tdirectory = {served}\n")
    system.chmod(0o644)
    url = f"file://{served}"

    def as_learner(name: str, *args: str, git_config: Path = system, cwd: str = "~",
                   check: bool = True) -> subprocess.CompletedProcess:
        home = base / "home" / name
        env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "GIT_CONFIG_SYSTEM": str(git_config)}
        where = str(home) if cwd == "~" else cwd
        return _run(["sh", "-c", f'cd "{where}" && "$@"', "sh", *args], user=name, env=env,
                    check=check)

    # Without the system's permission git refuses another user's repository: the README's
    # file:// release did not work for learners who are Unix users of their own.
    refused = as_learner(ada, "git", "clone", "-q", url, "graph-course",
                         git_config=Path("/dev/null"), check=False)
    assert refused.returncode != 0 and "dubious ownership" in refused.stderr, refused.stderr
    for name in (ada, grace):  # nbgitpuller's first click: a clone into ~/graph-course
        as_learner(name, "git", "clone", "-q", "--branch", "main", url, "graph-course")
        course = base / "home" / name / "graph-course"
        assert (course / "exercises" / "00_setup.ipynb").is_file()
        assert (course / ".course-checks" / "00_setup.ipynb").is_file()
        assert not (course / "solutions").exists()
        assert os.stat(course / "exercises" / "00_setup.ipynb").st_uid == \
            os.stat(base / "home" / name).st_uid, "the learner's own copy"

    # Ada answers 00.1 and 00.2 (her file), then the instructor releases lesson 01 and she
    # pulls it: her answers stay.
    mine = base / "home" / ada / "graph-course" / "exercises" / "00_setup.ipynb"
    key = nbformat.read(ROOT / "solutions" / "00_setup.ipynb", as_version=4)
    answers = {c.metadata["grading"]["id"]: c.source for c in key.cells
               if "solution" in c.metadata.get("tags", [])}
    nb = nbformat.read(mine, as_version=4)
    for cell in nb.cells:
        exercise = cell.metadata.get("grading", {}).get("id")
        if "solution" in cell.metadata.get("tags", []) and exercise in ("00.1", "00.2"):
            cell.source = answers[exercise]
    nbformat.write(nb, mine)
    shutil.chown(mine, ada, ada)
    _release(release, "01")
    _run(["git", "-C", str(release), "push", "-q", str(served), "main"])
    as_learner(ada, "git", "-C", "graph-course", "pull", "-q", "--ff-only", url, "main")
    course = base / "home" / ada / "graph-course"
    assert (course / "exercises" / "01_computation_graphs.ipynb").is_file()
    assert answers["00.1"] in [c.source for c in nbformat.read(mine, as_version=4).cells]

    # She grades lesson 00 from her home folder: course-grade finds the release's checks above
    # the notebook (no solutions/ anywhere in her home).
    grade = [str(BIN / "course-grade"), "graph-course/exercises/00_setup.ipynb"]
    usable = as_learner(ada, str(BIN / "python"), "-c", "pass", check=False).returncode == 0
    if usable:
        done = as_learner(ada, *grade, check=False)
    else:
        print(f"\n{BIN / 'python'} is not readable by other users: grading as root, from "
              f"{ada}'s home")
        done = _run(grade, cwd=base / "home" / ada, check=False,
                    env={**os.environ, "HOME": str(base / "home" / ada)})
    report = done.stdout
    assert "solutions/" not in done.stderr and "total" in report, done.stderr[-3000:] + report
    assert "graded as 00_setup.ipynb" in report, report
    rows = {line.split()[0]: line.split() for line in report.splitlines()
            if line.strip().startswith("00.")}
    assert rows["00.1"][1:3] == ["2/2", "pass"] and rows["00.2"][1:3] == ["1/1", "pass"], report
