"""The README's course map matches the notebooks on disk, and its commands exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_every_link_in_the_readme_exists():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


def test_every_lesson_is_on_the_map_with_its_exercises_and_solutions():
    for folder in ("notebooks", "exercises", "solutions"):
        for nb in sorted((ROOT / folder).glob("*.ipynb")):
            assert f"({folder}/{nb.name})" in README, f"{folder}/{nb.name} is not on the course map"


def test_each_lesson_has_a_solution_and_an_exercise():
    lessons = {nb.name for nb in (ROOT / "notebooks").glob("*.ipynb")}
    for folder in ("exercises", "solutions"):
        have = {nb.name for nb in (ROOT / folder).glob("*.ipynb")}
        assert have == lessons, f"{folder}/ and notebooks/ differ: {sorted(have ^ lessons)}"


def test_the_two_commands_are_make_targets():
    makefile = (ROOT / "Makefile").read_text()
    for command in ("make lab", "make test"):
        assert command in README
        assert re.search(rf"^{command.split()[1]}:", makefile, re.M), f"no `{command}` target"
    assert re.search(r"^\s*make test\s*$", (ROOT / ".ci" / "run").read_text(), re.M), (
        ".ci/run must call the README's test command"
    )
