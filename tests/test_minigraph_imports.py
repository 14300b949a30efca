"""minigraph's modules import one another without cycles (issue 17, item 9).

Each module may use the package namespace (``import course_utils.minigraph as mg``, looked up when
a rule runs); relative imports between its modules, at the top or inside a function, must form
a DAG, so that any module can be imported first.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import course_utils.minigraph as mg

PACKAGE = Path(mg.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def relative_imports(path: Path) -> set[str]:
    """The package modules ``path`` imports with relative imports, anywhere in the file."""
    here = module_name(path).split(".") if module_name(path) else []
    package = here[:-1] if path.name != "__init__.py" else here
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = [*base, *(node.module.split(".") if node.module else [])]
            if node.module is None:  # from . import x, y
                found |= {".".join([*target, a.name]) for a in node.names}
            else:
                found.add(".".join(target))
    known = {module_name(p) for p in PACKAGE.rglob("*.py")}
    return {m for m in found if m in known and m}


def test_relative_imports_form_a_dag() -> None:
    graph = {module_name(p): relative_imports(p) for p in PACKAGE.rglob("*.py")
             if p.name != "__init__.py" or p.parent != PACKAGE}
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        if m in path:
            cycle = " -> ".join([*path[path.index(m):], m])
            pytest.fail(f"import cycle: {cycle}")
        if m in done:
            return
        for n in sorted(graph.get(m, ())):
            visit(n, [*path, m])
        done.add(m)

    for m in sorted(graph):
        visit(m, [])
    assert "autograph" not in graph["tracing"] and "tracing" in graph["autograph"]


@pytest.mark.parametrize("first", ["autograph", "control_flow", "tracing", "serialize"])
def test_any_module_can_be_imported_first(first: str) -> None:
    code = (f"import course_utils.minigraph.{first}; import course_utils.minigraph as mg; "
            f"f = mg.function(lambda x: x * 2.0); print(f(mg.tensor([1.0])).numpy())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2.]"
