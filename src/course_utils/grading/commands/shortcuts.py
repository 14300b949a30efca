"""Shortcuts the shortcut audit writes itself, for every exercise (issue 36).

The course's fixtures (``tests/fixtures/shortcuts``) are shortcuts someone thought of; these are
made from each exercise's solution cells and what the notebook shows, so an exercise whose checks
a whole kind of shortcut fools is found without anyone writing that shortcut. Each is held to at
most half the points. The kinds, besides ``answers_in_package.course_import_answer`` (the course's
own implementation imported):

- **lookup** (:func:`lookup_sources`): every callable the answer defines (a ``def``, ``f =
  lambda ...``, a rule table's ``T["add"] = lambda ...``) replaced by a table from the arguments
  it was called with to what it returned, over everything a learner can see run: the solution
  cells' own examples, the set-up cells, the visible checks' probes (never a hidden check).
  The table is recorded in the audit's kernel by running the real answer once with a recorder
  around each callable (:data:`RECORDER`, :func:`recording_sources`); an argument list not in
  the table returns the most frequent recorded result (a constant). A learner who copies what
  the visible checks and examples print can write the same table.
- **mechanism on a dummy** (:func:`mechanism_sources`): where the answer (the code inside its
  solution regions) hands a function to a mechanism (``tf.function``, ``mg.function``,
  ``jax.jit``, ``torch.jit.script``/``trace``, ``torch.compile``, the lesson's ``trace``), as a
  decorator or a call, the mechanism is still
  built and called once, on a dummy (the first call's arguments with every number made 1), and
  every call returns the function run eagerly, outside the mechanism. Attributes are read from
  the mechanism's object, so a counter or a graph found there looks right.
- **forbidden route** (:func:`route_sources`): a library route of the exercise
  (``routes.FORBIDDEN`` and the ``forbid(...)`` literals of its checks) substituted for the
  answer, where a route has a generic substitute: a topological order from ``graphlib`` or
  ``networkx`` for an answer function whose exercise forbids them, and the complex step for a
  table of derivative rules (``VJP[op]``/``JVP[op]`` lambdas) whose exercise forbids complex
  numbers.
- **every forbidden route** (:func:`route_variants`): the answer with one added statement that
  takes one route of the exercise (:func:`route_statement`: ``import m``, ``from m import
  name``, ``x.attr``, a shell pattern's concrete member, ``1j``), for the audit to judge from
  its source alone: the static cap does not depend on the checks, so these are never run.

Each function returns ``None`` with nothing to make, else the new solution-cell sources; the
audit (``audit.py``) runs them like fixtures and prints, per exercise, which it tried and why the
others were not.
"""

from __future__ import annotations

import ast
import base64
import fnmatch
import pickle
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from course_utils.grading import routes

#: The key a lookup table files a call under, the same in the recorder and in the answer: the
#: arguments' values (arrays by shape, dtype and a digest of their bytes; an object by its type
#: and its repr when that is not an address), never their identity.
KEY_SOURCE = r'''
def _lookup_key(value):
    import hashlib
    import numpy as _np
    parts = []

    def walk(v, depth):
        if depth > 8 or len(parts) > 20000:
            parts.append("...")
            return
        if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
            parts.append(f"{type(v).__name__}:{v!r}")
            return
        if isinstance(v, (list, tuple)):
            parts.append(f"{type(v).__name__}[{len(v)}")
            for x in v:
                walk(x, depth + 1)
            parts.append("]")
            return
        if isinstance(v, dict):
            parts.append("{")
            for k in v:
                walk(k, depth + 1)
                walk(v[k], depth + 1)
            parts.append("}")
            return
        arr = None
        try:
            if isinstance(v, (_np.ndarray, _np.generic)):
                arr = _np.asarray(v)
            elif hasattr(v, "detach") and hasattr(v, "numpy"):
                arr = _np.asarray(v.detach().cpu().numpy())
            elif hasattr(v, "numpy") and callable(v.numpy):
                arr = _np.asarray(v.numpy())
            elif isinstance(getattr(v, "data", None), _np.ndarray):
                arr = v.data
        except Exception:
            arr = None
        if arr is not None and arr.dtype != object:
            digest = hashlib.sha1(_np.ascontiguousarray(arr).tobytes()).hexdigest()
            parts.append(f"{type(v).__qualname__}{arr.shape}{arr.dtype}:{digest}")
            return
        try:
            text = repr(v)[:300]
        except Exception:
            text = ""
        parts.append(f"object:{type(v).__qualname__}:{'' if ' at 0x' in text else text}")

    walk(value, 0)
    return hashlib.sha1("|".join(parts).encode()).hexdigest()
'''

#: Run in the audit's kernel before the recording: wraps a callable so that each call files
#: (key of its arguments, pickled result) under the callable's name.
RECORDER = KEY_SOURCE + r'''
__course_audit_calls = []


def __course_audit_wrap(name, f):
    import functools
    import pickle

    if not callable(f) or isinstance(f, type):
        return f

    @functools.wraps(f)
    def recorded(*args, **kwargs):
        try:
            key = _lookup_key((args, kwargs))
        except Exception:
            key = None
        out = f(*args, **kwargs)
        if key is not None and len(__course_audit_calls) < 5000:
            try:
                __course_audit_calls.append((name, key, pickle.dumps(out)))
            except Exception:
                pass
        return out
    return recorded


def __course_audit_dump(limit=3_000_000):
    import base64
    import collections
    import pickle

    tables, size = {}, 0
    for name, key, blob in __course_audit_calls:
        entry = tables.setdefault(name, {"table": {}, "counts": collections.Counter(),
                                         "calls": 0})
        entry["calls"] += 1
        entry["counts"][blob] += 1
        if key not in entry["table"] and size + len(blob) < limit:
            entry["table"][key] = blob
            size += len(blob)
    out = {name: {"table": e["table"], "fallback": e["counts"].most_common(1)[0][0],
                  "calls": e["calls"]} for name, e in tables.items()}
    return base64.b64encode(pickle.dumps(out)).decode("ascii")
'''


@dataclass
class Callable_:
    """A callable an answer defines at the top level of a solution cell."""

    target: str  # how the answer binds it: "topo_order", 'VJP["add"]'
    cell: int  # which solution cell (0-based among the exercise's)
    node: ast.stmt  # the statement that binds it
    params: list[str]  # a def's or lambda's positional parameters


def _target(node: ast.stmt) -> tuple[str, ast.AST] | None:
    """(the bound name or subscript, the value) of ``f = lambda``/``T[k] = lambda`` or a def."""
    if isinstance(node, ast.FunctionDef):
        return node.name, node
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
            isinstance(node.value, ast.Lambda):
        t = node.targets[0]
        if isinstance(t, ast.Name) or (isinstance(t, ast.Subscript) and
                                       isinstance(t.value, ast.Name) and
                                       isinstance(t.slice, ast.Constant)):
            return ast.unparse(t), node.value
    return None


def callables(sources: list[str]) -> tuple[list[Callable_], str]:
    """The callables the answer's cells define, or ([], why none can be looked up)."""
    found = []
    for k, source in enumerate(sources):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return [], "a solution cell is not plain Python"
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                return [], (f"the answer defines a class ({node.name}): its methods' calls "
                            "are not recorded")
            bound = _target(node)
            if bound:
                args = bound[1].args
                found.append(Callable_(bound[0], k, node,
                                       [a.arg for a in (*args.posonlyargs, *args.args)]))
    if not found:
        return [], ("the answer is values, not functions: a lookup of what the notebook shows "
                    "is the answer itself")
    return found, ""


def _insert_after(source: str, edits: list[tuple[int, list[str]]]) -> str:
    """``source`` with lines inserted after the 1-based line numbers given."""
    lines = source.splitlines()
    for after, new in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[after:after] = new
    return "\n".join(lines)


def recording_sources(sources: list[str], found: list[Callable_]) -> list[str]:
    """The solution cells with each callable wrapped by the recorder right after it is bound
    (so the cells' own examples are recorded too)."""
    out = []
    for k, source in enumerate(sources):
        edits = [(c.node.end_lineno, [f"{c.target} = __course_audit_wrap({c.target!r}, "
                                      f"{c.target})"])
                 for c in found if c.cell == k]
        out.append(_insert_after(source, edits))
    return out


def decode_tables(dumped: str) -> dict:
    """The recorder's dump (:data:`RECORDER`), read back: name -> {"table", "fallback",
    "calls"} (keys are digests, results pickled bytes)."""
    return pickle.loads(base64.b64decode(dumped))  # noqa: S301 (the audit's own kernel)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _regions(source: str) -> list[tuple[int, int]]:
    """The 1-based lines of each ``### BEGIN SOLUTION`` and its ``### END SOLUTION``."""
    regions, begin = [], None
    for n, line in enumerate(source.splitlines(), start=1):
        text = line.strip()
        if text.startswith("### BEGIN SOLUTION"):
            begin = n
        elif text.startswith("### END SOLUTION") and begin is not None:
            regions.append((begin, n))
            begin = None
    return regions


def _answered_values(source: str) -> list[ast.Assign]:
    """The top-level assignments of values (not callables) inside a solution region of one
    cell (``### BEGIN SOLUTION`` ... ``### END SOLUTION``): what a lookup of the callables
    leaves unanswered."""
    regions = _regions(source)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [node for node in tree.body if isinstance(node, ast.Assign) and _target(node) is None
            and any(a < node.lineno and node.end_lineno < b for a, b in regions)]


def lookup_sources(sources: list[str], found: list[Callable_], tables: dict
                   ) -> tuple[list[str], str] | None:
    """The answer with every recorded callable replaced by its lookup table; None when no
    callable was called where a learner can see it."""
    used = {c.target: tables[c.target] for c in found if tables.get(c.target, {}).get("table")}
    if not used:
        return None
    none = pickle.dumps(None)
    blob = base64.b64encode(pickle.dumps({
        c.target: (used[c.target]["table"], used[c.target]["fallback"]) if c.target in used
        else ({}, none) for c in found})).decode("ascii")
    head = ["# generated lookup: every call a learner can see, its result copied",
            "import base64 as _b64", "import pickle as _pickle", KEY_SOURCE.strip(), "",
            f"_LOOKUP = _pickle.loads(_b64.b64decode({blob!r}))", "",
            "def _looked_up(target):",
            "    table, fallback = _LOOKUP[target]",
            "",
            "    def answer(*args, **kwargs):",
            "        return _pickle.loads(table.get(_lookup_key((args, kwargs)), fallback))",
            "    return answer", ""]
    out, blanked = [], []
    for k, source in enumerate(sources):
        lines = source.splitlines()
        edits = [(c.node.lineno - len(getattr(c.node, "decorator_list", [])), c.node.end_lineno,
                  f"{c.target} = _looked_up({c.target!r})") for c in found if c.cell == k]
        for node in _answered_values(source):  # predictions and other values: not answered
            targets = " = ".join(ast.unparse(t) for t in node.targets)
            edits.append((node.lineno, node.end_lineno, f"{targets} = None"))
            blanked.append(targets)
        for first, last, new in sorted(edits, reverse=True):
            lines[first - 1:last] = [" " * _indent(lines[first - 1]) + new]
        out.append("\n".join(lines))
    out[0] = "\n".join(head) + "\n" + out[0]
    what = ", ".join(f"{t} ({len(e['table'])} argument lists of {e['calls']} calls)"
                     for t, e in used.items())
    if blanked:
        what += f"; the answer's values left unanswered (None): {', '.join(blanked)}"
    unseen = [c.target for c in found if c.target not in used]
    also = f"; never called where a learner sees it, so None: {', '.join(unseen)}" \
        if unseen else ""
    return out, f"a lookup of every call a learner sees: {what}; else a constant{also}"


# --- the mechanism called once on a dummy --------------------------------------------------------

#: What builds a mechanism from a function (or module), by how an answer writes it.
MECHANISMS = ("tf.function", "mg.function", "jax.jit", "torch.jit.script", "torch.jit.trace",
              "torch.compile", "trace")

DUMMY_SOURCE = r'''
def _audit_dummy(v):
    if isinstance(v, (list, tuple)):
        try:
            return type(v)(_audit_dummy(x) for x in v)
        except TypeError:
            return [_audit_dummy(x) for x in v]
    if isinstance(v, dict):
        return {k: _audit_dummy(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, str)):
        return v
    try:
        return v * 0 + 1
    except Exception:
        return v


class _AuditDummied:
    """The mechanism, called once on a dummy; every call answered by the eager function."""

    def __init__(self, made, eager):
        self.__dict__["_made"], self.__dict__["_eager"] = made, eager
        self.__dict__["_called"] = False

    def __call__(self, *args, **kwargs):
        if not self.__dict__["_called"]:
            self.__dict__["_called"] = True
            try:
                self._made(*_audit_dummy(args), **_audit_dummy(kwargs))
            except Exception:
                pass
        return self._eager(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.__dict__["_made"], name)
'''


def _mechanism(node: ast.AST) -> str | None:
    """The mechanism a decorator or call's function names (``tf.function``), or None."""
    target = node.func if isinstance(node, ast.Call) else node
    try:
        name = ast.unparse(target)
    except Exception:
        return None
    return name if name in MECHANISMS else None


class _Dummied(ast.NodeTransformer):
    def __init__(self, own: set[str], regions: list[tuple[int, int]]) -> None:
        self.used: list[str] = []
        self.own = own  # names the answer defines: its own mechanism is the exercise
        self.regions = regions  # where the answer is: a mechanism the course's code builds
        # around it (a given `@mg.function` over the learner's body) is not the answer's

    def mechanism(self, node: ast.AST) -> str | None:
        name = _mechanism(node)
        if name is None or name.split(".")[0] in self.own:
            return None
        inside = any(a < node.lineno <= b for a, b in self.regions) or not self.regions
        return name if inside else None

    def visit_Call(self, node: ast.Call) -> ast.AST:  # noqa: N802 (ast's visitor names)
        self.generic_visit(node)
        name = self.mechanism(node)
        if name and node.args:
            self.used.append(name)
            return ast.Call(ast.Name("_AuditDummied", ast.Load()), [node, node.args[0]], [])
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST | list[ast.AST]:  # noqa: N802
        self.generic_visit(node)
        kept, wrapped = [], []
        for deco in node.decorator_list:
            (wrapped if self.mechanism(deco) else kept).append(deco)
        if not wrapped:
            return node
        node.decorator_list = kept
        out: list[ast.AST] = [node]
        for deco in reversed(wrapped):  # the innermost decorator applies first
            self.used.append(ast.unparse(deco))
            made = ast.Call(deco, [ast.Name(node.name, ast.Load())], [])
            out.append(ast.Assign([ast.Name(node.name, ast.Store())], ast.Call(
                ast.Name("_AuditDummied", ast.Load()), [made, ast.Name(node.name, ast.Load())],
                []), lineno=node.lineno))
        return out


def mechanism_sources(sources: list[str]) -> tuple[list[str], str] | None:
    """The answer with every mechanism it builds (:data:`MECHANISMS`) called once on a dummy
    and its function run eagerly instead; None when the answer builds none."""
    out, used = [], []
    try:
        trees = [ast.parse(source) for source in sources]
    except SyntaxError:
        return None
    own = {n.name for tree in trees for n in tree.body
           if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    for source, tree in zip(sources, trees, strict=True):
        change = _Dummied(own, _regions(source))
        tree = ast.fix_missing_locations(change.visit(tree))
        used += change.used
        out.append(ast.unparse(tree) if change.used else source)
    if not used:
        return None
    out[0] = "# generated: the mechanism called once on a dummy, the result computed eagerly\n" \
        + DUMMY_SOURCE.strip() + "\n\n\n" + out[0]
    return out, ("the mechanism called once on a dummy, every result computed eagerly: "
                 + ", ".join(dict.fromkeys(used)))


# --- forbidden routes substituted for the answer ------------------------------------------------

_ORDER_BODY = {
    "graphlib": ["import graphlib",
                 "return list(graphlib.TopologicalSorter(_deps).static_order())"],
    "networkx": ["import networkx",
                 "_g = networkx.DiGraph()",
                 "_g.add_nodes_from(_deps)",
                 "_g.add_edges_from((x, n) for n, xs in _deps.items() for x in xs)",
                 "return list(networkx.topological_sort(_g))"],
}

_COMPLEX_VJP = '''\
def _complex_step_vjp(op):
    import numpy as _np
    from course_utils.engine import IMPL as _IMPL

    def rule(g, out, *xs, **attrs):
        grads = []
        for i, x in enumerate(xs):
            x = _np.asarray(x, dtype=float)
            gx = _np.zeros_like(x)
            for idx in _np.ndindex(x.shape):
                moved = x.astype(complex)
                moved[idx] += 1e-30j
                args = [_np.asarray(v, dtype=float) for v in xs]
                args[i] = moved
                gx[idx] = _np.sum(_np.asarray(g) * _np.imag(_IMPL[op](*args, **attrs)) / 1e-30)
            grads.append(gx)
        return tuple(grads)
    return rule
'''

_COMPLEX_JVP = '''\
def _complex_step_jvp(op):
    import numpy as _np
    from course_utils.engine import IMPL as _IMPL

    def rule(tangents, out, *xs, **attrs):
        moved = [_np.asarray(x, dtype=float) + 1e-30j * _np.asarray(t, dtype=float)
                 for x, t in zip(xs, tangents)]
        return _np.imag(_IMPL[op](*moved, **attrs)) / 1e-30
    return rule
'''


def _forbids(found: list[str], family: str) -> bool:
    return any(r == family or r.startswith(family + ".") for r in found)


def route_sources(sources: list[str], forbidden: Iterable[str]
                  ) -> list[tuple[str, list[str], str]]:
    """(slug, sources, description) for each forbidden route with a generic substitute
    (``forbidden``: the exercise's routes, ``static.forbidden_routes``)."""
    forbidden = list(forbidden)
    out: list[tuple[str, list[str], str]] = []
    found, _ = callables(sources)
    defs = [c for c in found if isinstance(c.node, ast.FunctionDef)]
    for lib, body in _ORDER_BODY.items():
        if not (_forbids(forbidden, lib) and len(defs) == 1 and defs[0].params):
            continue
        fn = defs[0]
        node = fn.node
        assert isinstance(node, ast.FunctionDef)
        first = fn.params[0]
        inputs_of = fn.params[1] if len(fn.params) > 1 else None
        follow = (f"({inputs_of} or (lambda _n: _n.inputs))" if inputs_of else
                  "(lambda _n: _n.inputs)")
        new = [f"_deps, _stack = {{}}, list({first})",
               "while _stack:",
               "    _n = _stack.pop()",
               "    if _n not in _deps:",
               f"        _deps[_n] = list({follow}(_n))",
               "        _stack.extend(_deps[_n])",
               *body]
        lines = sources[fn.cell].splitlines()
        indent = " " * node.body[0].col_offset
        lines[node.body[0].lineno - 1:node.end_lineno] = [indent + line for line in new]
        changed = list(sources)
        changed[fn.cell] = "\n".join(lines)
        out.append((f"route-{lib}", changed, f"the order worked out by {lib}"))
    tables = [c for c in found if "[" in c.target]
    if tables and (_forbids(forbidden, "numpy.complex*") or any(
            r in forbidden for r in ("builtins.complex", routes.COMPLEX_LITERAL))):
        changed = list(sources)
        kinds = set()
        for c in sorted(tables, key=lambda c: c.node.lineno, reverse=True):
            first = c.params[0] if c.params else ""
            kind = "jvp" if first.startswith("tangent") else "vjp" if first == "g" else None
            if kind is None:
                continue
            kinds.add(kind)
            key = ast.unparse(c.node.targets[0].slice)  # type: ignore[attr-defined]
            lines = changed[c.cell].splitlines()
            lines[c.node.lineno - 1:c.node.end_lineno] = [
                f"{c.target} = _complex_step_{kind}({key})"]
            changed[c.cell] = "\n".join(lines)
        if kinds:
            helpers = "\n".join(_COMPLEX_VJP if k == "vjp" else _COMPLEX_JVP
                                for k in sorted(kinds))
            first_cell = min(c.cell for c in tables)
            changed[first_cell] = helpers + "\n\n" + changed[first_cell]
            out.append(("route-complex-step", changed,
                        "every rule by the complex step (f(x + ih t), no derivative written)"))
    return out


# --- every forbidden route, reached by one added statement (judged from the source alone) ------

#: Pseudo-routes the static judge gives what has no dotted name, each as an answer spells it.
_PSEUDO = {routes.COMPLEX_LITERAL: ["_route = 1j"],
           routes.COMPLEX_DTYPE: ["import numpy", '_route = numpy.zeros(1, dtype="complex128")']}
_WILD = "*?["


def _module_part(dotted: str) -> str:
    """The longest prefix of ``dotted`` that is a module, found on disk without importing it
    (a framework's import costs seconds): ``torch.autograd.grad`` -> ``torch.autograd``,
    ``torch.ops.aten.silu`` -> ``torch`` (``ops`` is an attribute). A library that is not
    installed: its first name."""
    import importlib.util

    parts = dotted.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return parts[0]
    found, folders = parts[0], list(spec.submodule_search_locations)
    for k, name in enumerate(parts[1:], start=2):
        here = [f for folder in folders for f in (Path(folder) / name, Path(folder))]
        package = [f for f in here[::2] if (f / "__init__.py").is_file()]
        module = any(m.name.split(".")[0] == name and m.suffix in (".py", ".so", ".pyd")
                     for f in here[1::2] for m in f.glob(f"{name}.*"))
        if not (package or module):
            break
        found, folders = ".".join(parts[:k]), [str(f) for f in package]
    return found


def _concrete(pattern: str) -> str:
    """A member a shell pattern matches (``numpy.complex*`` -> ``numpy.complex64``,
    ``course_utils.minigraph.*.OPS`` -> ``course_utils.minigraph.ops.OPS``): found by walking
    the modules where the grader has them at hand (already imported, the standard library,
    numpy, the course's package), else the pattern with a wildcard segment read as ``x`` and
    other wildcards dropped (``torch.ops.aten.silu*`` -> ``torch.ops.aten.silu``)."""
    import importlib
    import sys

    def walk(obj: object, name: str, rest: list[str]) -> str | None:
        if not rest:
            return name
        if not any(c in rest[0] for c in _WILD):
            child = getattr(obj, rest[0], None)
            if child is None:
                try:
                    child = importlib.import_module(f"{name}.{rest[0]}")
                except ImportError:
                    return None
            return walk(child, f"{name}.{rest[0]}", rest[1:])
        for member in sorted(dir(obj), key=lambda n: (len(n), n)):
            if fnmatch.fnmatchcase(member, rest[0]):
                found = walk(getattr(obj, member, None), f"{name}.{member}", rest[1:])
                if found:
                    return found
        return None

    root, *rest = pattern.split(".")
    if root in sys.modules or root in (*sys.stdlib_module_names, "numpy", "course_utils"):
        try:
            found = walk(importlib.import_module(root), root, rest)
        except ImportError:
            found = None
        if found:
            return found
    return ".".join("x" if set(part) <= set(_WILD + "]") else
                    "".join(c for c in part if c not in _WILD + "]")
                    for part in pattern.split("."))


def route_statement(route: str, obj: str = "object()") -> tuple[list[str], str] | None:
    """The lines an answer adds to take ``route`` (an import and a use, as a learner writes
    them; ``obj``: an object at hand for an attribute route), and the name reached; None for
    a route no statement spells (``routes.EVERY``'s forged names and library writes)."""
    if route in _PSEUDO:
        return _PSEUDO[route], route
    if route.startswith("."):
        return [f"_route = {obj}{route}"], route
    if ":" in route:
        return None
    name = _concrete(route) if any(c in route for c in _WILD) else route
    if name.startswith("builtins."):
        return [f"_route = {name.removeprefix('builtins.')}"], name
    module = _module_part(name)
    rest = name[len(module):].lstrip(".")
    if not rest:  # a module: imported, then used
        return [f"import {module}", f"_route = {module}"], name
    first, _, more = rest.partition(".")
    return [f"from {module} import {first}",
            f"_route = {first}{'.' + more if more else ''}"], name


def route_variants(sources: list[str], forbidden: Iterable[str]
                   ) -> tuple[list[tuple[str, list[str], str]], list[str]]:
    """For each route in ``forbidden``, the answer with one added statement that takes it, at
    the start of the first function the answer defines (else the top of its first cell): a
    list of (route, sources, the statement), and the routes no statement spells."""
    made, unspelled = [], []
    trees = []
    for source in sources:
        try:
            trees.append(ast.parse(source))
        except SyntaxError:
            return [], list(forbidden)
    where = next(((k, node) for k, tree in enumerate(trees) for node in tree.body
                  if isinstance(node, ast.FunctionDef)), None)
    for route in sorted(set(forbidden)):
        obj = "object()"
        if where is not None:
            args = where[1].args
            params = [a.arg for a in (*args.posonlyargs, *args.args)]
            obj = params[0] if params else obj
        spelled = route_statement(route, obj)
        if spelled is None:
            unspelled.append(route)
            continue
        lines, _ = spelled
        changed = list(sources)
        if where is None:
            changed[0] = "\n".join([*lines, sources[0]])
        else:
            k, fn = where
            body = fn.body[1:] if _docstring(fn) and len(fn.body) > 1 else fn.body
            at = body[0].lineno - 1
            text = sources[k].splitlines()
            indent = " " * body[0].col_offset
            text[at:at] = [indent + line for line in lines]
            changed[k] = "\n".join(text)
        made.append((route, changed, "; ".join(lines)))
    return made, unspelled


def _docstring(fn: ast.FunctionDef) -> bool:
    first = fn.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
        and isinstance(first.value.value, str)


__all__ = ["KEY_SOURCE", "RECORDER", "MECHANISMS", "callables", "recording_sources",
           "decode_tables", "lookup_sources", "mechanism_sources", "route_sources",
           "route_statement", "route_variants"]
