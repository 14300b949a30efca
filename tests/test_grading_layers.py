"""The grader's modules stand in layers with no circle and no arrow up (issue 41).

The import graph is built from the source with ``ast`` (every import, at the top of a file or
inside a function), so a module that cannot be imported still shows its arrows. The layers,
each using only itself and the ones below:

1. ``grading/`` itself: the exercise format and the check protocol (the probe in the kernel,
   the verdict in the grader, the routes and ``forbid``); check cells import these paths;
2. ``grading/running/``: running code safely (the kernel driver, the supervisor, the sandbox,
   the tamper probe);
3. ``grading/notebook/``: grading one notebook (restore the checks, run, judge, the answer key,
   the report);
4. ``grading/commands/``: what people do with it (``course-grade``, a class, building exercises
   and releases, the Gradescope bundle, the shortcut audit).

A module that only keeps an old path working (``sys.modules[__name__] = <the moved module>``)
is no node of its own: an import of it is an import of the module it names, and no module of
the package may import the old path (it would hide the real arrow).
"""

from __future__ import annotations

import ast
from pathlib import Path

import course_utils.grading as grading

PACKAGE = Path(grading.__file__).parent
ROOT = "course_utils.grading"
#: A module's layer is its folder's; files of the top folder are layer 1.
FOLDERS = {"running": 2, "notebook": 3, "commands": 4}
#: Files that still sit in the top folder though their layer is higher (issue 41: others were
#: editing them while the rest moved); listed so that their arrows are judged at their layer.
NOT_YET_MOVED: dict[str, int] = {}


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def _imported(node: ast.AST, here: str, known: set[str]) -> set[str]:
    """The modules of the package that one import statement names (relative ones resolved)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = here.split(".")[: -node.level] if here else []
            module = ".".join([ROOT, *base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        # `from pkg import x` names the module pkg.x when there is one, else a name in pkg
        names = [f"{module}.{a.name}" for a in node.names]
    else:
        return set()
    found = set()
    for name in names:
        if name == ROOT or not name.startswith(ROOT + "."):
            continue
        inner = name[len(ROOT) + 1:]
        while inner and inner not in known:  # `from a.b import c` where c is a name in a.b
            inner = inner.rpartition(".")[0]
        if inner:
            found.add(inner)
    return found


def _shim_target(tree: ast.Module, imports: set[str]) -> str | None:
    """The module a shim stands for: one that sets ``sys.modules[__name__]``, else None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Subscript) and ast.unparse(t) == "sys.modules[__name__]"
                for t in node.targets):
            assert len(imports) == 1, f"a shim imports one module, not {sorted(imports)}"
            return next(iter(imports))
    return None


def import_graph(package: Path
                 ) -> tuple[dict[str, set[str]], dict[str, str], dict[str, set[str]]]:
    """(module -> the modules it imports, shims resolved; shim -> the module it stands for;
    module -> the old paths (shims) it imports). Module names are relative to the package
    (``running.kernel``); ``__init__`` files that import nothing of the package are left out."""
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    known = set(files)
    raw, shims = {}, {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        here = f"{here}.x" if here else "x"  # relative imports count from the module's folder
        imports = set().union(*(_imported(n, here, known) for n in ast.walk(tree))) - {name}
        target = _shim_target(tree, imports)
        if target is not None:
            shims[name] = target
        elif path.name != "__init__.py" or imports:
            raw[name] = imports
    graph = {m: {shims.get(n, n) for n in imports} for m, imports in raw.items()}
    old = {m: imports & set(shims) for m, imports in raw.items() if imports & set(shims)}
    return graph, shims, old


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each strongly connected group of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            group = []
            while True:
                n = stack.pop()
                group.append(n)
                if n == m:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return sorted(found)


def layer(module: str) -> int:
    if module in NOT_YET_MOVED:
        return NOT_YET_MOVED[module]
    folder, dot, _ = module.partition(".")
    return FOLDERS[folder] if dot else 1


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Each arrow from a module to one in a higher layer, as 'a (layer) -> b (layer)'."""
    return sorted(f"{m} ({layer(m)}) -> {n} ({layer(n)})" for m, imports in graph.items()
                  for n in imports if layer(n) > layer(m))


GRAPH, SHIMS, OLD_PATHS = import_graph(PACKAGE)



def test_no_import_circle() -> None:
    found = cycles(GRAPH)
    assert not found, "import circles in course_utils.grading: " + "; ".join(
        " <-> ".join(group) for group in found)


def test_every_arrow_points_down() -> None:
    assert not upward(GRAPH), "imports from a higher layer: " + "; ".join(upward(GRAPH))


def test_no_module_imports_an_old_path() -> None:
    found = {m: old for m, old in OLD_PATHS.items() if m not in NOT_YET_MOVED}
    assert not found, "; ".join(
        f"{m} imports {', '.join(sorted(old))} by an old path: import "
        + ", ".join(f"{ROOT}.{SHIMS[o]}" for o in sorted(old)) for m, old in found.items())


def test_every_module_has_a_layer() -> None:
    folders = {m.partition(".")[0] for m in GRAPH if "." in m}
    assert folders <= set(FOLDERS), f"a folder with no layer: {sorted(folders - set(FOLDERS))}"
    assert set(NOT_YET_MOVED) <= set(GRAPH)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / "grading"
    for name, source in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(source, encoding="utf-8")
    return package


def test_the_checks_find_the_old_circles_and_arrows(tmp_path: Path) -> None:
    """Three of the shapes issue 41 found: a lazy import inside a method (the kernel driver
    taking KERNEL_ENV from the class module), a circle of three, and an arrow up."""
    package = _package(tmp_path, {
        "running/__init__.py": "",
        "running/kernel.py": "def env():\n    from course_utils.grading.commands.classroom "
                             "import KERNEL_ENV\n    return KERNEL_ENV\n",
        "commands/__init__.py": "",
        "commands/classroom.py": "from course_utils.grading.running import kernel\n",
        "format.py": "def f():\n    from course_utils.grading.verdict import sections\n",
        "verdict.py": "from course_utils.grading import probe\n",
        "probe.py": "from . import format\n",
        "kernel.py": '"""Moved."""\nimport sys\n\nfrom course_utils.grading.running import '
                     "kernel as moved\n\nsys.modules[__name__] = moved\n",
        "report.py": "import course_utils.grading.kernel\n",
    })
    graph, shims, old = import_graph(package)
    assert shims == {"kernel": "running.kernel"}
    assert graph["report"] == {"running.kernel"} and old == {"report": {"kernel"}}
    assert cycles(graph) == [["commands.classroom", "running.kernel"],
                             ["format", "probe", "verdict"]]
    assert upward(graph) == ["report (1) -> running.kernel (2)",
                             "running.kernel (2) -> commands.classroom (4)"]


# --- one concern a piece: functions of at most about 80 lines, classes of at most about 250 ------

MAX_FUNCTION_LINES = 80
MAX_CLASS_LINES = 250
#: What a piece longer than that writes at its top (its docstring, or a comment right below its
#: ``def`` or ``class`` line) to say why it stays whole.
REASON = "Long because"
#: Pieces still over the limits with no reason written, to be split; the list may only shrink
#: (a piece that gets short enough must leave it, and a new long piece may not join it).
STILL_TO_SPLIT: set[str] = set()


def long_pieces(package: Path) -> dict[str, int]:
    """'module.Class.function' -> lines, for each piece over the limits without a reason."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        name = module_name(path, package)
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines))

        def visit(node: ast.AST, prefix: str, lines: list[str] = lines) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    size = child.end_lineno - child.lineno + 1
                    limit = MAX_CLASS_LINES if isinstance(child, ast.ClassDef) else \
                        MAX_FUNCTION_LINES
                    body = child.body[0]
                    top = "\n".join(lines[child.lineno - 1:body.end_lineno])  # def + first stmt
                    if size > limit and REASON not in top:
                        found[f"{prefix}{child.name}"] = size
                    visit(child, f"{prefix}{child.name}.")
                else:
                    visit(child, prefix)

        visit(tree, f"{name}.")
    return found


def test_no_piece_is_too_long_without_a_reason() -> None:
    found = long_pieces(PACKAGE)
    new = {k: v for k, v in found.items() if k not in STILL_TO_SPLIT}
    assert not new, (f"over {MAX_FUNCTION_LINES} lines (a function) or {MAX_CLASS_LINES} (a "
                     f"class): {new}; split it, or write at its top '{REASON} ...'")
    done = STILL_TO_SPLIT - set(found)
    assert not done, f"short enough now (or gone): take {sorted(done)} off STILL_TO_SPLIT"
