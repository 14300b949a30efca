"""pyproject.toml and environment.yml describe the same environment."""

import re
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, from PyPI
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
#: The pyproject extras a conda user gets (environment.yml: the CPU, lab, dev and site environment).
CONDA_EXTRAS = ("cpu", "lab", "dev", "site")


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (PEP 503)."""
    name = re.split(r"[\[=<>!~ ;]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in CONDA_EXTRAS:
        requirements += project["optional-dependencies"][extra]
    return {_name(r): r.replace(" ", "") for r in requirements}


def conda_pins() -> tuple[dict[str, str], list[str]]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda_packages = [d for d in env["dependencies"] if isinstance(d, str)]
    pins = {_name(r): r.replace(" ", "") for r in pip_section if not r.startswith("-e")}
    return pins, conda_packages


def test_every_pin_is_exact():
    for name, requirement in pyproject_pins().items():
        assert "==" in requirement, f"{name} is not pinned exactly in pyproject.toml: {requirement}"


def test_environment_yml_matches_pyproject():
    pyproject, (conda, _) = pyproject_pins(), conda_pins()
    missing = sorted(set(pyproject) - set(conda))
    extra = sorted(set(conda) - set(pyproject))
    assert not missing, f"in pyproject.toml but not in environment.yml: {missing}"
    assert not extra, f"in environment.yml but not in pyproject.toml: {extra}"
    differ = {n: (pyproject[n], conda[n]) for n in pyproject if pyproject[n] != conda[n]}
    assert not differ, f"pins differ (pyproject.toml, environment.yml): {differ}"


def test_environment_yml_installs_the_package_and_graphviz():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    _, conda_packages = conda_pins()
    assert "-e ." in pip_section, "environment.yml must install the course package itself"
    assert "graphviz" in conda_packages and "pip" in conda_packages


def test_python_versions_agree():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    minimum = tuple(int(x) for x in project["requires-python"].removeprefix(">=").split("."))
    _, conda_packages = conda_pins()
    conda_python = next(p for p in conda_packages if p.startswith("python="))
    version = tuple(int(x) for x in conda_python.removeprefix("python=").split("."))
    assert version >= minimum, f"environment.yml's {conda_python} is below {minimum}"


@pytest.mark.parametrize("requirement", ["numpy==1.0", "torch==2.14.1"])
def test_a_changed_pin_is_caught(tmp_path, monkeypatch, requirement):
    """The check above really fails when one file changes a pin (on a copy of pyproject)."""
    text = (ROOT / "pyproject.toml").read_text()
    name = _name(requirement)
    old = pyproject_pins()[name]
    changed = tmp_path / "pyproject.toml"
    changed.write_text(text.replace(f'"{old}"', f'"{requirement}"'))
    (tmp_path / "environment.yml").write_text((ROOT / "environment.yml").read_text())
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    with pytest.raises(AssertionError, match="pins differ"):
        test_environment_yml_matches_pyproject()
