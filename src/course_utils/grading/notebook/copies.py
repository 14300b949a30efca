"""Course code pasted into an answer, judged from its source (issue 36).

An answer that imports or calls the package's own implementation of its exercise reaches a
route the static judge sees (``routes``, ``answers_in_package``). One that *copies its text*
reaches nothing: 10.4's ``median_interval`` was ``bench._median_rank``'s body pasted under
another name (6/6), and a release keeps that function, since earlier lessons run it.

So the judge compares each answer with the package functions its exercise is about (the ones
``answers_in_package`` marks for it, and the ones its checks forbid): both are read into tokens
from their syntax trees (docstrings, comments and annotations dropped, names and parameters
renamed, attribute names and constants kept), and the answer's windows of :data:`WINDOW` tokens,
in which each identifier is renamed by the position it first appears at, are looked up among the
package function's, and so are its simple statements of :data:`STATEMENT` tokens or more, whole.
Renaming variables, reordering statements, adding lines (between each two of the course's, too)
or splitting the code into other functions leaves the shared windows and statements shared.

A package function counts as copied when the windows and statements the answer shares cover
:data:`MIN_TOKENS` of its tokens or more (about six lines of code: an honest answer may share
a short piece, a loop header, a three-line rule) and at least :data:`MIN_SHARE` of it, or
:data:`ALWAYS_TOKENS` however long it is. A function shorter than :data:`MIN_TOKENS` with
:data:`SHORT_STATEMENTS` simple statements or more counts when the answer holds
:data:`ALIKE_SHARE` of it (the audit's pasted ``bench._calls_to_repay``, 47 tokens in five
statements, scored 4/4 on 10.1); a rule of one or two statements (01.2's ``add_vjp``,
minigraph's one-call ``_max_pool2d``) is the formula an honest answer writes too.

>>> course = tokens("def rank(n, c):\\n    t, b, k = 2 ** n, 0, 0\\n    return k")
>>> renamed = tokens("def mine(m, q):\\n    s, u, j = 2 ** m, 0, 0\\n    return j")
>>> covered(windows(renamed), course) == len(course)
True
>>> covered(windows(tokens("def mine(m):\\n    return [x + 1 for x in m]")), course)
0
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Tokens in one window the answer and the course's function must share.
WINDOW = 10
#: A copy covers at least this many tokens of the course's function (about six lines)...
MIN_TOKENS = 60
#: ... and this share of it, unless it covers :data:`ALWAYS_TOKENS` (a long function's half).
MIN_SHARE = 0.6
ALWAYS_TOKENS = 300
#: A function shorter than MIN_TOKENS is judged whole from this many simple statements on.
SHORT_STATEMENTS = 4
#: Where the canonical solution is written like the course's function: the share a copy covers.
ALIKE_SHARE = 0.85
#: What the static judge's finding for a copy is named: ``COPY + dotted name``.
COPY = "copy:"
#: A simple statement of this many tokens or more counts when the answer holds it whole.
STATEMENT = 6
_NAME = "\0"  # marks an identifier's token: renamed by position in each window


def _docstring(body: Sequence[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[0], ast.Expr) \
        and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)


def _label(node: ast.AST) -> str | None:
    """The token a node carries besides its kind: an attribute's or keyword's name, a
    definition's name (renamed like any identifier)."""
    if isinstance(node, ast.Attribute):
        return "." + node.attr
    if isinstance(node, ast.keyword):
        return f"{node.arg}=" if node.arg else None
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return _NAME + node.name
    return None


def _walk(node: ast.AST, out: list[str], lines: list[int], spans: list[tuple[int, int]],
          line: int = 1) -> None:
    """Pre-order tokens of ``node`` (see :func:`tokens`), the line of each, and where each
    simple statement's tokens begin and end."""
    if isinstance(node, ast.expr_context):
        return
    start, line = len(out), getattr(node, "lineno", line)
    lines.append(line)
    if isinstance(node, ast.Name):
        out.append(_NAME + node.id)
        return
    if isinstance(node, ast.arg):
        out.append(_NAME + node.arg)
        return
    if isinstance(node, ast.Constant):
        out.append(repr(node.value))
        return
    out.append(type(node).__name__)
    label = _label(node)
    if label is not None:
        out.append(label)
        lines.append(line)
    for name, value in ast.iter_fields(node):
        if name in ("annotation", "returns", "type_comment", "decorator_list"):
            continue
        items = value if isinstance(value, list) else [value]
        if name == "body" and _docstring(items):
            items = items[1:]
        for item in items:
            if isinstance(item, ast.AST):
                _walk(item, out, lines, spans, line)
    if isinstance(node, ast.stmt) and not hasattr(node, "body"):
        spans.append((start, len(out)))


def tokens(source: str | ast.AST, lines: list[int] | None = None,
           spans: list[tuple[int, int]] | None = None) -> list[str]:
    """The tokens of some code (a source text or a tree): one per syntax node (its kind), an
    attribute's name, a keyword argument's name, a constant's value, and each identifier marked
    for renaming. Docstrings, comments, annotations and decorators are left out."""
    tree = ast.parse(source) if isinstance(source, str) else source
    out: list[str] = []
    at: list[int] = []
    found: list[tuple[int, int]] = []
    _walk(tree, out, at, found)
    if isinstance(tree, ast.Module):
        out, at, found = out[1:], at[1:], [(a - 1, b - 1) for a, b in found]
    if lines is not None:
        lines[:] = at
    if spans is not None:
        spans[:] = found
    return out


def _renamed(toks: Sequence[str]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    return tuple(seen.setdefault(t, f"${len(seen)}") if t.startswith(_NAME) else t
                 for t in toks)


def windows(toks: Sequence[str], spans: Sequence[tuple[int, int]] = ()
            ) -> list[tuple[str, ...]]:
    """Each window of :data:`WINDOW` tokens, its identifiers renamed by the position they first
    appear at in the window (``a = a + b`` and ``x = x + y`` read alike; ``a = b + a`` not);
    then each simple statement of :data:`STATEMENT` tokens or more (``spans``) renamed the same
    way, so that lines put between the course's lines leave those lines shared."""
    out = [_renamed(toks[i:i + WINDOW]) for i in range(len(toks) - WINDOW + 1)]
    return out + [("stmt", *_renamed(toks[a:b])) for a, b in spans if b - a >= STATEMENT]


def covered(answer: Iterable[tuple[str, ...]], course: Sequence[str],
            spans: Sequence[tuple[int, int]] = ()) -> int:
    """How many of ``course``'s tokens lie in a window or a statement (``spans``: its simple
    statements) that the answer's windows hold."""
    have = set(answer)
    hit = [False] * len(course)
    for i in range(len(course) - WINDOW + 1):
        if _renamed(course[i:i + WINDOW]) in have:
            hit[i:i + WINDOW] = [True] * WINDOW
    for a, b in spans:
        if b - a >= STATEMENT and ("stmt", *_renamed(course[a:b])) in have:
            hit[a:b] = [True] * (b - a)
    return sum(hit)


def is_copy(n: int, total: int, statements: int = 0) -> bool:
    """Whether covering ``n`` tokens of a function of ``total`` tokens (``statements`` simple
    statements) is a copy of it."""
    if total < MIN_TOKENS and statements >= SHORT_STATEMENTS:
        return n >= ALIKE_SHARE * total
    return n >= ALWAYS_TOKENS or (n >= MIN_TOKENS and n >= MIN_SHARE * total)


@dataclass(frozen=True)
class Copy:
    """A package function an answer copies: its dotted name, how many of its tokens the
    answer's code shares and how many it has, and where the copy starts in the answer (the code
    cell's index among the notebook's code cells, the line in it)."""

    dotted: str
    shared: int
    total: int
    cell: int
    line: int


# -- the course's functions -------------------------------------------------------------------


def _module_file(module: str) -> Path | None:
    from course_utils.grading.answers_in_package import package_folder

    parts = module.split(".")
    if not parts or parts[0] != "course_utils":
        return None
    path = package_folder().parent.joinpath(*parts)
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _definition(tree: ast.Module, qualified: Sequence[str]) -> ast.AST | None:
    """The function (or the table a module-level assignment builds) named ``qualified``
    (``["Tensor", "backward"]``) in a module's tree."""
    body: list[ast.stmt] = tree.body
    found: ast.AST | None = None
    for k, name in enumerate(qualified):
        found = None
        for node in body:
            named = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and node.name == name
            assigned = k == len(qualified) - 1 and isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets)
            if named or assigned:
                found = node
        if found is None:
            return None
        body = getattr(found, "body", [])
    return None if isinstance(found, ast.ClassDef) else found


@functools.lru_cache(maxsize=256)
def course_code(dotted: str) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...]]:
    """The tokens of the package function (or module-level table) ``dotted`` and its simple
    statements' spans: empty when it is not one (a module, a class, a name outside the
    package)."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        path = _module_file(".".join(parts[:cut]))
        if path is None:
            continue
        try:
            node = _definition(ast.parse(path.read_text(encoding="utf-8")), parts[cut:])
        except (OSError, SyntaxError):
            return (), ()
        if node is None:
            return (), ()
        spans: list[tuple[int, int]] = []
        return tuple(tokens(node, spans=spans)), tuple(spans)
    return (), ()


def course_tokens(dotted: str) -> tuple[str, ...]:
    """The tokens of the package function ``dotted`` (:func:`course_code`)."""
    return course_code(dotted)[0]


def _windows(sources: Iterable[str | ast.AST]) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for source in sources:
        try:
            spans: list[tuple[int, int]] = []
            found.update(windows(tokens(source, spans=spans), spans))
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            continue
    return found


def _located(answer: Iterable[tuple[int, ast.AST]]) -> dict[tuple[str, ...], tuple[int, int]]:
    """Each window of the answer's code -> the (cell, line) it first starts at."""
    found: dict[tuple[str, ...], tuple[int, int]] = {}
    for cell, tree in answer:
        lines: list[int] = []
        spans: list[tuple[int, int]] = []
        try:
            toks = tokens(tree, lines, spans)
        except (RecursionError, MemoryError):
            continue
        starts = list(range(len(toks) - WINDOW + 1)) + [a for a, b in spans if b - a >= STATEMENT]
        for i, window in zip(starts, windows(toks, spans), strict=True):
            found.setdefault(window, (cell, lines[i]))
    return found


def alike(n: int, total: int) -> bool:
    """Whether the canonical solution, sharing ``n`` of a function's ``total`` tokens, is
    written like it: half of :data:`MIN_TOKENS` and half of the function."""
    return 2 * n >= MIN_TOKENS and 2 * n >= total


def copies(answer: Sequence[tuple[int, ast.AST]], candidates: Iterable[str],
           canonical: Sequence[str | ast.AST] = ()) -> list[Copy]:
    """The package functions among ``candidates`` (dotted names; routes that name no function
    of the package are skipped) that the ``answer``'s code copies (its statements or cells'
    trees, each with its code cell's index), most shared first.

    Where the exercise's ``canonical`` solution cells are written like the function
    (:func:`alike`: 03.2's ``session.prune``, 01.4's ``engine_forward.jvp``), an honest answer
    may come as close to it as the canonical one does (an unusual 01.3 fixture shares as much):
    only an answer that shares :data:`ALIKE_SHARE` of it and a window more than the canonical
    solution is a copy."""
    mine, course_answer = _located(answer), _windows(canonical)
    found = []
    for dotted in sorted(set(candidates)):
        course, spans = course_code(dotted) if dotted.startswith("course_utils.") else ((), ())
        if not course:
            continue
        n, theirs = covered(mine, course, spans), covered(course_answer, course, spans)
        if alike(theirs, len(course)):
            copy = n >= ALIKE_SHARE * len(course) and n >= theirs + WINDOW
        else:
            copy = is_copy(n, len(course), len(spans))
        if copy:
            cell, line = min(mine[w] for w in windows(course, spans) if w in mine)
            found.append(Copy(dotted, n, len(course), cell, line))
    return sorted(found, key=lambda c: -c.shared)
