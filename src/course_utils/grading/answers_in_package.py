"""Answers in the package: which code of ``course_utils`` answers which exercise.

Some of the course's own code is the answer to an exercise (lesson 01's ``topo_order``, the
folding pass lesson 03 asks for, ...). Such code carries the markers ``solutions/`` uses, with the
exercise ids the region answers::

    def topo_order(outputs, inputs_of=None):
        \"\"\"...\"\"\"
        ### BEGIN SOLUTION 01.1
        ...
        ### END SOLUTION

A region lies inside a function body, so a release can replace it by a line that raises
:class:`course_utils.withheld.AnswerWithheld` and the module still imports (:func:`strip`).
Code that answers an exercise but that a release must keep working (earlier lessons run it: a
Session's pruning, bench's interval of the median) says so on the first line of its body, and
why::

    ### ALSO ANSWERS 03.2: every Session prunes with it, from lesson 01 on

Both kinds are in :func:`table`, the exercise id -> the package's functions that answer it, for
the grader (an answer that reaches one of them is the course's implementation, not the
learner's) and the shortcut audit (shortcut (b), the course's own implementation imported).
Only marked regions are withheld by a release.

>>> text = "def f(x):\\n    ### BEGIN SOLUTION 01.1\\n    return x\\n    ### END SOLUTION\\n"
>>> [(a.dotted, a.exercises) for a in scan_text(text, "course_utils/m.py")]
[('course_utils.m.f', ('01.1',))]
>>> print(strip(text, scan_text(text, "course_utils/m.py"), {"01.1"}, lambda ex: "here"),
...       end="")  # doctest: +ELLIPSIS
def f(x):
    from course_utils.withheld import AnswerWithheld
    raise AnswerWithheld("course_utils.m.f is exercise 01.1's answer: ... use your own from here")
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import textwrap
import tokenize
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from course_utils.grading.format import BEGIN_LINE, END, EXERCISE_ID

#: The first line of a function body that answers an exercise a release keeps working.
KEPT_PREFIX = "### ALSO ANSWERS"
_KEPT_LINE = re.compile(rf"^{KEPT_PREFIX}((?:[ ,]+{EXERCISE_ID})+)\s*:\s*(\S.*)$")
#: The package folder under the course's src/; the grader's own code is never an answer.
PACKAGE = "course_utils"
SKIP = ("grading",)


@dataclass(frozen=True)
class Answer:
    """One marked region (or one kept function) of the package."""

    path: str  # relative to src/, posix: "course_utils/engine.py"
    function: str  # the enclosing function's qualified name: "topo_order", "Tensor.backward"
    exercises: tuple[str, ...]  # ("01.1",), ("02.2", "02.5")
    begin: int  # 0-based line of the BEGIN marker (kept: of the ALSO ANSWERS line)
    end: int  # 0-based line of the END marker (kept: == begin)
    kept: bool = False  # an ALSO ANSWERS function: in the table, never withheld
    why: str = ""  # kept: why a release keeps it

    @property
    def module(self) -> str:
        parts = list(Path(self.path).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    @property
    def dotted(self) -> str:
        """``course_utils.engine.topo_order``: how an answer would reach it."""
        return f"{self.module}.{self.function}"

    @property
    def lessons(self) -> tuple[str, ...]:
        return tuple(sorted({ex.split(".", 1)[0] for ex in self.exercises}))


def _comments(text: str) -> dict[int, str]:
    """0-based line -> the comment on it (only real comments: never a docstring's text)."""
    found = {}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0] - 1] = tok.string.strip()
    return found


def _functions(tree: ast.AST) -> list[tuple[str, int, int, list[int]]]:
    """(qualified name, first line, last line, the lines its body starts on), 0-based, for
    every function, nested ones included."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.append((name, child.lineno - 1, child.end_lineno - 1,
                                  [s.lineno - 1 for s in child.body]))
                visit(child, name + ("." if isinstance(child, ast.ClassDef) else ".<locals>."))
            else:
                visit(child, prefix)
    visit(tree, "")
    return found


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def scan_text(text: str, path: str) -> list[Answer]:
    """The answers marked in one module's source. Raises ValueError, naming the file and line,
    for a marker without exercise ids, an unclosed region, or a marker outside a function."""
    comments = _comments(text)
    functions = _functions(ast.parse(text))

    def enclosing(line: int) -> str:
        inside = [(first, name) for name, first, last, _ in functions if first < line <= last]
        if not inside:
            raise ValueError(f"{path}, line {line + 1}: an answer marker outside a function; a "
                             "release replaces the region by a `raise`, which must not run at "
                             "import: move the code into a function")
        return max(inside)[1]

    found: list[Answer] = []
    begin: int | None = None
    ids: tuple[str, ...] = ()
    for n in sorted(comments):
        text_n = comments[n]
        begin_line = BEGIN_LINE.match(text_n)
        kept = _KEPT_LINE.match(text_n)
        if begin_line:
            if begin is not None:
                raise ValueError(f"{path}, line {n + 1}: a BEGIN SOLUTION inside the region "
                                 f"opened on line {begin + 1}")
            ids = tuple(re.findall(EXERCISE_ID, begin_line[1]))
            if not ids:
                raise ValueError(f"{path}, line {n + 1}: name the exercise the region answers, "
                                 f"as in `### BEGIN SOLUTION 01.1`")
            begin = n
        elif text_n == END:
            if begin is None:
                raise ValueError(f"{path}, line {n + 1}: {END} without a BEGIN SOLUTION")
            lines = text.splitlines()
            if _indent(lines[n]) != _indent(lines[begin]):
                raise ValueError(f"{path}, lines {begin + 1}-{n + 1}: a region must begin and "
                                 "end at the same indentation, in one function body")
            found.append(Answer(path, enclosing(begin), ids, begin, n))
            begin = None
        elif kept:
            found.append(Answer(path, enclosing(n), tuple(re.findall(EXERCISE_ID, kept[1])), n,
                                n, kept=True, why=kept[2].strip()))
        elif "BEGIN SOLUTION" in text_n or "END SOLUTION" in text_n or \
                text_n.startswith(KEPT_PREFIX):
            raise ValueError(f"{path}, line {n + 1}: {text_n!r} looks like a marker but is not "
                             "`### BEGIN SOLUTION NN.k`, `### END SOLUTION` or "
                             "`### ALSO ANSWERS NN.k: why a release keeps it`")
    if begin is not None:
        raise ValueError(f"{path}, line {begin + 1}: BEGIN SOLUTION never closed by {END}")
    return found


def package_folder(src: Path | None = None) -> Path:
    """``src/course_utils`` of the course (default: where this package lives)."""
    return (src / PACKAGE) if src else Path(__file__).resolve().parents[1]


def python_files(src: Path | None = None) -> list[Path]:
    """The package's modules that may hold answers (not the grader's own)."""
    folder = package_folder(src)
    return [p for p in sorted(folder.rglob("*.py"))
            if "__pycache__" not in p.parts and p.relative_to(folder).parts[0] not in SKIP]


def scan(src: Path | None = None) -> list[Answer]:
    """Every answer marked in the package under ``src`` (default: this package)."""
    folder = package_folder(src)
    found = []
    for path in python_files(src):
        text = path.read_text(encoding="utf-8")
        if "SOLUTION" in text or KEPT_PREFIX in text:
            found += scan_text(text, path.relative_to(folder.parent).as_posix())
    return found


def _callers(text: str, names: set[str]) -> set[str]:
    """The module-level functions of a module that call one of ``names`` by name (directly),
    and its module-level tables that hold one (``VJP = {"add": add_vjp, ...}``)."""
    found = set()
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            called = {c.func.id for c in ast.walk(node)
                      if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
            if called & names and node.name not in names:
                found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            held = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if held & names:
                found |= {t.id for t in targets if isinstance(t, ast.Name)}
    return found


def table(src: Path | None = None, callers: bool = True) -> dict[str, list[str]]:
    """Exercise id -> the dotted names of the package's functions that answer it, sorted.

    With ``callers``, also the module-level functions of the same module that call one of them
    directly (``bench.break_even`` calls ``bench._calls_to_repay``): reaching those reaches the
    answer. Kept (``ALSO ANSWERS``) functions are included.
    """
    found: dict[str, set[str]] = {}
    by_path: dict[str, list[Answer]] = {}
    for answer in scan(src):
        by_path.setdefault(answer.path, []).append(answer)
    folder = package_folder(src)
    for path, answers in by_path.items():
        text = (folder.parent / path).read_text(encoding="utf-8")
        for answer in answers:
            names = {answer.dotted}
            top = answer.function.split(".", 1)[0]
            if callers and "." not in answer.function:
                names |= {f"{answer.module}.{c}" for c in _callers(text, {top})}
            for ex in answer.exercises:
                found.setdefault(ex, set()).update(names)
    return {ex: sorted(names) for ex, names in sorted(found.items())}


def message(answer: Answer, where: Callable[[str], str]) -> str:
    """What a withheld region raises: which exercise, when it is released, where the learner's
    own answer is (``where(exercise id)``)."""
    ids = " and ".join(answer.exercises)
    lessons = " and ".join(answer.lessons)
    own = "; ".join(dict.fromkeys(where(ex) for ex in answer.exercises))
    return (f"{answer.dotted} is exercise {ids}'s answer: it is released with lesson "
            f"{lessons}'s solutions; until then, use your own from {own}")


def strip(text: str, answers: Iterable[Answer], withheld: set[str],
          where: Callable[[str], str]) -> str:
    """``text`` with every marked region that answers an exercise in ``withheld`` replaced by
    two lines raising :class:`~course_utils.withheld.AnswerWithheld` (at the marker's
    indentation). Kept functions stay as they are."""
    lines = text.splitlines()
    out: list[str] = []
    done = 0
    for answer in sorted(answers, key=lambda a: a.begin):
        if answer.kept or not set(answer.exercises) & withheld:
            continue
        indent = _indent(lines[answer.begin])
        out += [*lines[done:answer.begin],
                f"{indent}from course_utils.withheld import AnswerWithheld",
                f"{indent}raise AnswerWithheld({message(answer, where)!r})"]
        done = answer.end + 1
    out += lines[done:]
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _record_withheld(text: str, withheld: set[str], path: Path) -> str:
    """``course_utils/withheld.py`` with its ``WITHHELD`` set to the ids withheld (written)."""
    line = "WITHHELD: frozenset[str] = frozenset()"
    if line not in text:
        raise ValueError(f"{path}: no line `{line}` to record the withheld exercises in")
    new = text.replace(line, f"WITHHELD: frozenset[str] = frozenset({sorted(withheld)!r})")
    path.write_text(new, encoding="utf-8")
    return new


def strip_package(src: Path, withheld: set[str], where: Callable[[str], str]) -> list[Answer]:
    """Withhold, in the copy of the package under ``src`` (a release's), every region that
    answers an exercise in ``withheld``; return the regions withheld. Each changed module is
    checked to still compile."""
    folder = package_folder(src)
    done = []
    for path in python_files(src):
        text = path.read_text(encoding="utf-8")
        if path.name == "withheld.py" and path.parent == folder:
            text = _record_withheld(text, withheld, path)
        if "SOLUTION" not in text:
            continue
        answers = scan_text(text, path.relative_to(folder.parent).as_posix())
        new = strip(text, answers, withheld, where)
        if new != text:
            compile(new, str(path), "exec")
            path.write_text(new, encoding="utf-8")
            done += [a for a in answers if not a.kept and set(a.exercises) & withheld]
    return done


# --- the shortcut audit's generated shortcut (b): the course's implementation imported ----------


def _signature(src: Path | None, dotted: str) -> ast.arguments | None:
    """The parameters of the package function ``dotted`` (None: not a module-level function)."""
    module, _, name = dotted.rpartition(".")
    path = package_folder(src).parent / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    if not path.is_file():
        return None
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node.args
    return None


def _positional(args: ast.arguments) -> list[str]:
    return [a.arg for a in (*args.posonlyargs, *args.args)]


def _delegate(fn: ast.FunctionDef, dotted: str, target: ast.arguments) -> list[str]:
    """A body for the answer's function ``fn`` that returns the package function's result on
    the same arguments (as many positional ones as it takes)."""
    module, _, name = dotted.rpartition(".")
    mine = _positional(fn.args)
    args = mine if target.vararg else mine[:len(_positional(target))]
    return [f"import {module} as _course_module",
            f"return _course_module.{name}({', '.join(args)})"]


def course_import_answer(sources: list[str], exercise: str,
                         src: Path | None = None) -> tuple[list[str], str] | None:
    """Exercise ``exercise``'s solution cells (``sources``) rewritten to use the course's own
    implementation from the package (:func:`table`), or None when the table has none for it or
    no rewrite applies. Returns (the new sources, what was imported).

    The rewrites: a function of the answer named like a package function of the table (``my_``
    dropped) returns the package function's result; a function that calls a name the table has
    imports it from the package first; failing both, the answer's only function returns the
    result of a package function with as many positional parameters; ``T[key] = ...`` becomes
    ``T[key] = <module>.T[key]`` where the table names ``<module>.T`` (a rule table).
    """
    paths = table(src).get(exercise, [])
    if not paths:
        return None
    by_name: dict[str, str] = {}
    for dotted in paths:
        by_name.setdefault(dotted.rpartition(".")[2], dotted)
    trees = []
    for source in sources:
        try:
            trees.append(ast.parse(source))
        except SyntaxError:
            return None
    functions = [n for t in trees for n in t.body if isinstance(n, ast.FunctionDef)]
    used: list[str] = []
    out = []
    for source, tree in zip(sources, trees, strict=True):
        lines = source.splitlines()
        edits: list[tuple[int, int, list[str], str]] = []  # (first, last, new lines, indent)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                dotted = by_name.get(node.name.removeprefix("my_"))
                target = _signature(src, dotted) if dotted else None
                called = {c.id for c in ast.walk(node) if isinstance(c, ast.Name)
                          and c.id in by_name and isinstance(c.ctx, ast.Load)}
                if target is None and len(functions) == 1 and not called:
                    for candidate in sorted(paths, key=lambda d: d.rpartition(".")[2]
                                            .startswith("_")):
                        sig = _signature(src, candidate)
                        if sig and len(_positional(sig)) == len(_positional(node.args)):
                            dotted, target = candidate, sig
                            break
                docstring = (len(node.body) > 1 and isinstance(node.body[0], ast.Expr)
                             and isinstance(node.body[0].value, ast.Constant))
                first = node.body[1 if docstring else 0]
                indent = " " * first.col_offset
                if target is not None:
                    edits.append((first.lineno - 1, node.end_lineno - 1,
                                  _delegate(node, dotted, target), indent))
                    used.append(dotted)
                elif called:
                    imports = [f"from {by_name[c].rpartition('.')[0]} import {c}"
                               for c in sorted(called)]
                    edits.append((first.lineno - 1, first.lineno - 2, imports, indent))
                    used += [by_name[c] for c in sorted(called)]
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Subscript) and \
                    isinstance(node.targets[0].value, ast.Name) and \
                    node.targets[0].value.id in by_name:
                name = node.targets[0].value.id
                key = ast.get_source_segment(source, node.targets[0].slice)
                new = [f"{name}[{key}] = _course_module.{name}[{key}]"]
                if by_name[name] not in used:
                    new.insert(0, f"import {by_name[name].rpartition('.')[0]} as _course_module")
                    used.append(by_name[name])
                edits.append((node.lineno - 1, node.end_lineno - 1, new, ""))
        for first_line, last_line, new, indent in sorted(edits, reverse=True):
            lines[first_line:last_line + 1] = [indent + line for line in new]
        out.append("\n".join(lines))
    if not used:
        return None
    return out, "the course's own implementation imported: " + ", ".join(dict.fromkeys(used))


# --- shortcut (b), pasted: the course's implementation copied as text into the answer ---------


@dataclass
class _Module:
    """A package module as the paste reads it: its top-level definitions and imports."""

    name: str  # course_utils.engine
    text: str
    defs: dict[str, ast.stmt]  # top-level def, class or assignment by the name it binds
    imports: dict[str, str]  # a name its imports bind -> that import, absolute


def _module(src: Path | None, module: str) -> _Module | None:
    path = package_folder(src).parent / Path(*module.split("."))
    init = path.is_dir()
    path = path / "__init__.py" if init else path.with_suffix(".py")
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    package = module if init else module.rpartition(".")[0]
    found = _Module(module, text, {}, {})
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.defs[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    found.defs[target.id] = node
        elif isinstance(node, ast.Import):
            for a in node.names:
                found.imports[a.asname or a.name.split(".")[0]] = (
                    f"import {a.name}" + (f" as {a.asname}" if a.asname else ""))
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]) \
                if node.level else ""
            origin = ".".join(p for p in (base, node.module or "") if p)
            for a in node.names:
                found.imports[a.asname or a.name] = (
                    f"from {origin} import {a.name}" + (f" as {a.asname}" if a.asname else ""))
    return found


def _bound_names(fn: ast.AST) -> set[str]:
    """The names a function binds inside (parameters, assignments, loops, nested functions,
    imports), not those it declares ``global`` or ``nonlocal``."""
    bound, declared = set(), set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node is not fn:
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared |= set(node.names)
    return bound - declared


class _Disguised(ast.NodeTransformer):
    """What a learner does to pasted code: locals renamed, docstrings and annotations
    dropped (comments go with ``ast.unparse``)."""

    def __init__(self, renamed: dict[str, str]) -> None:
        self.renamed = renamed

    def visit_Name(self, node: ast.Name) -> ast.Name:  # noqa: N802 (ast's visitor names)
        node.id = self.renamed.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:  # noqa: N802
        node.arg, node.annotation = self.renamed.get(node.arg, node.arg), None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:  # noqa: N802
        node.returns = None
        node.name = self.renamed.get(node.name, node.name)
        if len(node.body) > 1 and isinstance(node.body[0], ast.Expr) and \
                isinstance(node.body[0].value, ast.Constant) and \
                isinstance(node.body[0].value.value, str):
            node.body = node.body[1:]
        self.generic_visit(node)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:  # noqa: N802
        self.generic_visit(node)
        if node.value is None:
            return ast.Pass()
        return ast.Assign([node.target], node.value, lineno=node.lineno)


def _pasted(module: _Module, node: ast.AST, name: str | None = None,
            params: Sequence[str] = ()) -> ast.AST:
    """A package function (or a rule table's lambda), read from its file
    (``ast.get_source_segment``), disguised: renamed to ``name``, its first positional
    parameters to ``params``, its other locals to ``v1, v2, ...`` (parameters with a default or
    keyword-only keep their names: a caller may pass them by name)."""
    text = ast.get_source_segment(module.text, node) or ""
    tree = ast.parse(textwrap.dedent(text)).body[0]
    fn = tree.value if isinstance(tree, ast.Expr) else tree
    everything = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {
        a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)}
    args = fn.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    keep = {a.arg for a in args.kwonlyargs} | set(positional[len(positional)
                                                             - len(args.defaults):])
    renamed = dict(zip(positional, params, strict=False))  # the answer's first ones
    fresh = (f"v{k}" for k in range(1, 10_000) if f"v{k}" not in everything | set(params))
    for local in sorted(_bound_names(fn) - keep - set(renamed)):
        renamed[local] = next(fresh)
    if name is not None and isinstance(fn, ast.FunctionDef):
        renamed[fn.name] = name
    return ast.fix_missing_locations(_Disguised(renamed).visit(fn))


def _free(fn: ast.AST) -> list[str]:
    bound = _bound_names(fn)
    return list(dict.fromkeys(n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
                              and isinstance(n.ctx, ast.Load) and n.id not in bound))


class _Paster:
    """What :func:`course_paste_answer` pastes into one exercise's answer: the package's
    modules read once, the functions pasted and the imports written so far (each once)."""

    def __init__(self, src: Path | None, paths: list[str], regions: set[str],
                 answer_names: set[str]) -> None:
        self.src, self.paths, self.regions = src, paths, regions
        self.answer_names = answer_names  # names the answer's cells use: the notebook's
        self.modules: dict[str, _Module | None] = {}
        self.pasted: set[str] = set()  # package functions pasted so far (dotted)
        self.imported: set[str] = set()
        self.used: list[str] = []
        self.by_name: dict[str, str] = {}
        for dotted in sorted(paths, key=lambda d: d not in regions):
            self.by_name.setdefault(dotted.rpartition(".")[2], dotted)

    def read(self, dotted: str) -> tuple[_Module, ast.stmt] | None:
        module, _, name = dotted.rpartition(".")
        if module not in self.modules:
            self.modules[module] = _module(self.src, module)
        found = self.modules[module]
        node = found.defs.get(name) if found else None
        return (found, node) if found and node is not None else None

    def positional(self, dotted: str) -> int | None:
        found = self.read(dotted)
        if found and isinstance(found[1], ast.FunctionDef):
            return len(_positional(found[1].args))
        return None

    def paste(self, dotted: str, module: _Module, node: ast.AST, name: str | None = None,
              params: Sequence[str] = ()) -> list[str]:
        """The lines of ``node`` pasted (:func:`_pasted`), its helpers first."""
        self.pasted.add(dotted)
        self.used.append(dotted)
        fn = _pasted(module, node, name, params)
        return [*self.helpers(module, fn), ast.unparse(fn)]

    def helpers(self, module: _Module, fn: ast.AST) -> list[str]:
        """What pasted code needs: the exercise's answers it calls pasted, other names of its
        module imported as the module imports them (not those the answer's cells use)."""
        lines = []
        for name in _free(fn):
            if name in self.answer_names or hasattr(builtins, name):
                continue
            dotted, node = f"{module.name}.{name}", module.defs.get(name)
            if dotted in self.paths and isinstance(node, ast.FunctionDef):
                if dotted not in self.pasted:
                    lines += [*self.paste(dotted, module, node), ""]
            elif name in module.imports or node is not None:
                line = module.imports.get(name, f"from {module.name} import {name}")
                if line not in self.imported:
                    self.imported.add(line)
                    lines.append(line)
        return lines

    def function(self, node: ast.FunctionDef, source: str, functions: list[ast.FunctionDef]
                 ) -> list[str]:
        """The answer's function ``node`` pasted over (or left, with what it calls pasted)."""
        mine = _positional(node.args)
        dotted = self.by_name.get(node.name.removeprefix("my_"))
        if (dotted is None or self.positional(dotted) is None) and len(functions) == 1:
            dotted = next((d for d in sorted(self.paths, key=lambda d: (d not in self.regions, d))
                           if self.positional(d) == len(mine)), None)
        found = self.read(dotted) if dotted and dotted not in self.pasted else None
        if found and isinstance(found[1], ast.FunctionDef):
            theirs = _positional(found[1].args)
            new = self.paste(dotted, found[0], found[1], node.name, mine[:len(theirs)])
            if len(theirs) < len(mine) and not found[1].args.vararg:
                # the package function takes fewer: the answer's extra parameters, unused
                fn = ast.parse(new[-1]).body[0]
                fn.args.args += [ast.arg(p) for p in mine[len(theirs):]]
                given = dict(zip(mine[len(mine) - len(node.args.defaults):], node.args.defaults,
                                 strict=True))  # the answer's own defaults for them
                if fn.args.defaults or any(p in given for p in mine[len(theirs):]):
                    fn.args.defaults += [given.get(p, ast.Constant(None))
                                         for p in mine[len(theirs):]]
                new[-1] = ast.unparse(fn)
            return new
        own = {f.name for f in functions}
        new = []
        for name in sorted({c.id for c in ast.walk(node) if isinstance(c, ast.Name)
                            and c.id in self.by_name and c.id not in own}):
            found = self.read(self.by_name[name])
            if found and isinstance(found[1], ast.FunctionDef) \
                    and self.by_name[name] not in self.pasted:
                new += [*self.paste(self.by_name[name], found[0], found[1]), ""]
        return [*new, ast.get_source_segment(source, node) or ""] if new else []

    def entry(self, node: ast.Assign) -> list[str]:
        """``T[key] = ...`` as the package's table ``T`` has it: its function pasted."""
        target = node.targets[0]
        assert isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
        name, key = target.value.id, getattr(target.slice, "value", None)
        found = self.read(self.by_name[name])
        value = found[1].value if found and isinstance(
            found[1], (ast.Assign, ast.AnnAssign)) else None
        entry = next((v for k, v in zip(value.keys, value.values, strict=True)
                      if isinstance(k, ast.Constant) and k.value == key), None) \
            if isinstance(value, ast.Dict) else None
        rule = found[0].defs.get(entry.id) if isinstance(entry, ast.Name) else None
        if not (isinstance(rule, ast.FunctionDef) or isinstance(entry, ast.Lambda)):
            return []
        self.used.append(f"{self.by_name[name]}[{key!r}]")
        fn = _pasted(found[0], rule if isinstance(rule, ast.FunctionDef) else entry)
        if isinstance(fn, ast.Lambda):
            return [*self.helpers(found[0], fn), f"{name}[{key!r}] = {ast.unparse(fn)}"]
        return [*self.helpers(found[0], fn), ast.unparse(fn), f"{name}[{key!r}] = {fn.name}"]


def course_paste_answer(sources: list[str], exercise: str,
                        src: Path | None = None) -> tuple[list[str], str] | None:
    """Exercise ``exercise``'s solution cells (``sources``) with the course's own
    implementation *pasted as text* (the issue's 01.4 ``engine_forward.py`` and 03.1 ``fold.py``
    copied into an answer), or None where no paste fits. Returns (the new sources, what was
    pasted).

    Each function of the answer that :func:`course_import_answer` would make call a package
    function of :func:`table` (named alike, ``my_`` dropped; the answer's only function and a
    package function with as many positional parameters, the marked regions first) becomes that
    function's source, read from its file, renamed to the answer's name with the answer's
    parameters, its other locals renamed and its docstring, comments and annotations dropped
    (:func:`_pasted`); ``T[key] = ...`` becomes the package table's entry for ``key`` (its
    function pasted, then ``T[key] = name``); a package function the answer calls is pasted
    under its own name. The package functions a pasted one calls that answer the exercise are
    pasted too; every other name it needs and the answer's cells do not use is imported as its
    module imports it."""
    paths = table(src).get(exercise, [])
    if not paths:
        return None
    try:
        trees = [ast.parse(source) for source in sources]
    except SyntaxError:
        return None
    functions = [n for t in trees for n in t.body if isinstance(n, ast.FunctionDef)]
    paster = _Paster(src, paths, {f"{a.module}.{a.function}" for a in scan(src)
                                  if exercise in a.exercises},
                     {n.id for t in trees for n in ast.walk(t) if isinstance(n, ast.Name)}
                     | {f.name for f in functions})
    out = []
    for source, tree in zip(sources, trees, strict=True):
        lines = source.splitlines()
        edits: list[tuple[int, int, list[str]]] = []
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                new = paster.function(node, source, functions)
                first = node.lineno - len(node.decorator_list)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Subscript) and isinstance(
                    node.targets[0].value, ast.Name) and node.targets[0].value.id in \
                    paster.by_name and isinstance(node.targets[0].slice, ast.Constant):
                new, first = paster.entry(node), node.lineno
            else:
                continue
            if new:
                edits.append((first, node.end_lineno, new))
        for first, last, new in sorted(edits, reverse=True):
            lines[first - 1:last] = "\n".join(new).splitlines()
        out.append("\n".join(lines))
    if not paster.used:
        return None
    return out, ("the course's own implementation pasted as text (locals renamed, docstrings "
                 "and comments dropped): " + ", ".join(dict.fromkeys(paster.used)))


__all__ = ["course_import_answer", "course_paste_answer", "Answer", "scan", "scan_text", "table",
           "strip", "strip_package", "message",
           "KEPT_PREFIX"]
