"""AutoGraph in miniature: rewrite ``if`` and ``while`` statements so tensors can steer them.

``mg.function(fn, autograph=True)`` parses ``fn``'s source with ``ast`` and turns each ``if`` and
``while`` into a call that decides when it runs: on a tensor test it builds ``mg.cond`` /
``mg.while_loop``; on a Python test it is plain Python. ``f.autograph_source`` shows the result:

>>> import course_utils.minigraph as mg
>>> @mg.function(autograph=True)
... def shrink(x):
...     if mg.sum(x) > 4.0:
...         x = x / 2.0
...     return x
>>> print(shrink.autograph_source)
def shrink(x):
<BLANKLINE>
    def if_true_3(x):
        x = x / 2.0
        return x
<BLANKLINE>
    def if_false_3(x):
        return x
    x = ag__.if_stmt(mg.sum(x) > 4.0, if_true_3, if_false_3, (x,), ('x',))
    return x
>>> shrink(mg.tensor([3.0, 3.0])), shrink(mg.tensor([1.0, 1.0]))
(tensor([1.5, 1.5], dtype=float32), tensor([1., 1.], dtype=float32))

The supported subset. An ``if`` becomes a cond whose results are the names either branch assigns
(a name assigned in one branch only must exist before the ``if``, unless it is a temporary read
nowhere else). Both branches may instead end in ``return`` (``if c: return a`` followed by more
code counts as an ``if``/``else``). A ``while`` becomes a while_loop whose loop variables are
the names its body assigns, each of which must exist before the loop. ``elif`` chains and
nesting work; ``for`` loops stay Python and are unrolled while tracing. An ``if`` or ``while``
outside the subset (a ``break``, ``continue`` or lone ``return`` in it, a ``while ... else``,
assigning ``x.attr`` or ``x[i]``, ``global``/``nonlocal``/``del``/``yield``) stays Python: a
Python test still works, and a tensor test raises ``TracingError`` naming the line and the
reason. Conditions joined by ``and``/``or``/``not`` are Python operators and need Python values.
Nested functions and lambdas are not converted; decorators on ``fn`` are dropped.

NB: ``tf.autograph.to_code(fn)`` shows TensorFlow's version, which covers far more (``break``,
``return`` anywhere, ``for`` over tensors) with the same run-time dispatch.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import textwrap
import types
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from . import tracing
from .control_flow import BranchGraph, _cond, _enclosing_graph, _while
from .eager import Tensor
from .errors import TracingError, user_source
from .graph import Node, get_default_graph

# --- the run-time half: what the rewritten code calls as ``ag__.*`` ------------------------------


def if_stmt(test: Any, if_true: Callable, if_false: Callable, args: tuple,
            names: tuple[str, ...] | None) -> Any:
    """``if_true(*args)`` if ``test`` else ``if_false(*args)``: an ``mg.cond`` for a tensor test.

    ``names`` are the variables the branches assign (they name the cond's results); ``None``
    when both branches ``return``.
    """
    return _cond(test, lambda: if_true(*args), lambda: if_false(*args),
                 names=None if names is None else list(names))


def while_stmt(test: Callable, body: Callable, init: tuple, names: tuple[str, ...]) -> Any:
    """``while test(*vars): vars = body(*vars)``: an ``mg.while_loop`` when the test is a tensor.

    One loop variable is passed and returned bare, several as a tuple.
    """
    single = len(names) == 1
    step = (lambda *v: (body(*v),)) if single else body
    if _symbolic_test(test, init):
        graph = _enclosing_graph(*init)
        result = tuple(_while(graph, test, step, list(init), names=list(names)))
    else:
        result = tuple(init)
        while test(*result):
            result = tuple(step(*result))
    return result[0] if single else result


def _symbolic_test(test: Callable, init: tuple) -> bool:
    """Is the loop's test a tensor? Try it once, in a scratch graph whose nodes are dropped."""
    graph = get_default_graph()
    if not graph.captures_outer:  # not tracing
        return any(isinstance(v, Node) for v in init)
    with BranchGraph(graph).as_default():
        return isinstance(test(*init), (Node, Tensor))


def python_bool(test: Any, reason: str) -> bool:
    """The test of an ``if``/``while`` autograph left as Python: fine for a Python value."""
    if isinstance(test, Node) or (isinstance(test, Tensor) and get_default_graph().captures_outer):
        raise TracingError(f"autograph could not convert the `if`/`while` at {user_source()} into "
                           f"mg.cond/mg.while_loop: {reason}; yet its test is a tensor. Rewrite "
                           f"it within autograph's supported subset, or call mg.cond/"
                           f"mg.while_loop yourself")
    return bool(test)


# --- the conversion -------------------------------------------------------------------------------


def convert(fn: Callable) -> tuple[Callable, str]:
    """Rewrite ``fn``'s ``if``/``while`` statements; return the new function and its source."""
    name = getattr(fn, "__name__", repr(fn))
    if not isinstance(fn, types.FunctionType) or name == "<lambda>":
        raise TracingError(f"autograph converts functions defined with `def`, not {name}")
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        raise TracingError(f"autograph needs the source of {name}, and Python cannot find it "
                           f"(a function typed at an interactive prompt?)") from None
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)  # line numbers of the file, for errors
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise TracingError(f"autograph converts plain `def` functions; {name} is not one")
    fdef.decorator_list = []
    converter = _Converter(fn.__code__.co_filename, fdef)
    params = [a.arg for a in (*fdef.args.posonlyargs, *fdef.args.args, *fdef.args.kwonlyargs,
                              fdef.args.vararg, fdef.args.kwarg) if a is not None]
    fdef.body = converter.block(fdef.body, set(params))
    return _compile(fn, fdef), ast.unparse(fdef)


def _compile(fn: types.FunctionType, fdef: ast.FunctionDef) -> Callable:
    """Compile the rewritten ``def`` as a closure over ``ag__`` and ``fn``'s own closure cells
    (so it sees their current values), with ``fn``'s globals (so it sees later updates)."""
    factory = ast.parse("def __autograph_factory():\n    pass").body[0]
    free = ("ag__", *fn.__code__.co_freevars)
    factory.body = [ast.parse(f"{v} = None").body[0] for v in free] + [
        fdef, ast.Return(ast.Name(fdef.name, ast.Load()))]
    module = ast.fix_missing_locations(ast.Module([factory], type_ignores=[]))
    namespace: dict[str, Any] = {}
    exec(compile(module, fn.__code__.co_filename, "exec"), fn.__globals__, namespace)
    code = next(c for c in namespace["__autograph_factory"].__code__.co_consts
                if inspect.iscode(c) and c.co_name == fdef.name)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))
    cells["ag__"] = types.CellType(sys.modules[__name__])
    own = cells.setdefault(fdef.name, types.CellType())  # for a function that calls itself
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(cells[v] for v in code.co_freevars))
    new.__kwdefaults__ = fn.__kwdefaults__
    if fdef.name not in fn.__code__.co_freevars:
        own.cell_contents = new
    return new


class _Converter:
    """Rewrites the statements of one function, keeping track of which names exist where."""

    def __init__(self, filename: str, fdef: ast.FunctionDef) -> None:
        self.filename = os.path.basename(filename)
        self.reads = Counter(_reads(fdef))  # how often each name is read in the whole function

    def block(self, stmts: list[ast.stmt], defined: set[str]) -> list[ast.stmt]:
        """Convert a statement list; ``defined``: names that have a value before it (updated)."""
        out: list[ast.stmt] = []
        for i, s in enumerate(stmts):
            if isinstance(s, ast.If) and not s.orelse and _ends_in_return(s.body):
                s.orelse, rest = stmts[i + 1:], True  # `if c: return a` + rest == if/else
            else:
                rest = False
            if isinstance(s, ast.If):
                new = self.convert_if(s, defined)
            elif isinstance(s, ast.While):
                new = self.convert_while(s, defined)
            else:
                new = [self.nested(s, defined)]
            out += new
            defined |= _assigned(new)
            if rest:
                break
        return out

    def nested(self, s: ast.stmt, defined: set[str]) -> ast.stmt:
        """Convert the blocks inside ``for``/``with``/``try``; other statements stay."""
        if isinstance(s, ast.For):
            s.body = self.block(s.body, defined | _stored(s.target))
            s.orelse = self.block(s.orelse, set(defined))
        elif isinstance(s, ast.With):
            s.body = self.block(s.body, defined.union(*(_stored(item.optional_vars)
                                                        for item in s.items)))
        elif isinstance(s, ast.Try):
            s.body = self.block(s.body, set(defined))
            for handler in s.handlers:
                handler.body = self.block(handler.body, defined | {handler.name} - {None})
            s.orelse = self.block(s.orelse, set(defined))
            s.finalbody = self.block(s.finalbody, set(defined))
        return s

    # --- if -------------------------------------------------------------------------------------

    def convert_if(self, s: ast.If, defined: set[str]) -> list[ast.stmt]:
        body = self.block(s.body, set(defined))
        orelse = self.block(s.orelse, set(defined))
        assigned = list(dict.fromkeys([*_assigned_in_order(body), *_assigned_in_order(orelse)]))
        returns = _ends_in_return(body) and _ends_in_return(orelse)
        in_both = _assigned(body) & _assigned(orelse)
        outputs = [] if returns else [n for n in assigned if n in defined or n in in_both]
        reason = _unsupported(body + orelse, loop=False) or self._if_problem(
            s, body, orelse, assigned, outputs, returns)
        if reason:
            s.test = _call("ag__.python_bool", s, s.test, ast.Constant(reason))
            s.body, s.orelse = body, orelse
            return [s]
        params = [n for n in assigned if n in defined]
        if not returns:
            body = body + [_returned(outputs, s)]
            orelse = orelse + [_returned(outputs, s)]
        true_name, false_name = f"if_true_{s.lineno}", f"if_false_{s.lineno}"
        call = _call("ag__.if_stmt", s, s.test, ast.Name(true_name, ast.Load()),
                     ast.Name(false_name, ast.Load()), _tuple(params, s),
                     ast.Constant(None) if returns else ast.Constant(tuple(outputs)))
        defs = [_def(true_name, params, body, s), _def(false_name, params, orelse, s)]
        if returns:
            return defs + [_at(ast.Return(call), s)]
        if not outputs:
            return defs + [_at(ast.Expr(call), s)]
        return defs + [_at(ast.Assign([_target(outputs, s)], call), s)]

    def _if_problem(self, s: ast.If, body: list, orelse: list, assigned: list[str],
                    outputs: list[str], returns: bool) -> str | None:
        if not returns and (_returns(body) or _returns(orelse)):
            return "it has a `return` that is not the last statement of both branches"
        if returns and (len(_returns(body)) > 1 or len(_returns(orelse)) > 1):
            return "a branch has a `return` before its end"
        local = Counter(_reads(s))
        for n in assigned:
            if n not in outputs and not returns and self.reads[n] > local[n]:
                return (f"`{n}` gets a value in one branch only and is read elsewhere; assign it "
                        f"in both branches or before the `if`")
        return None

    # --- while ----------------------------------------------------------------------------------

    def convert_while(self, s: ast.While, defined: set[str]) -> list[ast.stmt]:
        body = self.block(s.body, set(defined))
        assigned = _assigned_in_order(body)
        loop_vars = [n for n in assigned if n in defined]
        local = Counter(_reads(s))
        first = [n for n in assigned if n not in defined
                 and (self.reads[n] > local[n] or n in set(_reads(s.test)))]
        reason = (_unsupported(body, loop=True)
                  or ("it has an `else` clause" if s.orelse else None)
                  or (f"`{first[0]}` is first assigned inside the loop; give it a value before "
                      f"the loop" if first else None)
                  or (None if loop_vars else "its body assigns no variable that exists before it"))
        if reason:
            s.test = _call("ag__.python_bool", s, s.test, ast.Constant(reason))
            s.body = body
            return [s]
        test_name, body_name = f"loop_test_{s.lineno}", f"loop_body_{s.lineno}"
        call = _call("ag__.while_stmt", s, ast.Name(test_name, ast.Load()),
                     ast.Name(body_name, ast.Load()), _tuple(loop_vars, s),
                     ast.Constant(tuple(loop_vars)))
        return [_def(test_name, loop_vars, [_at(ast.Return(s.test), s)], s),
                _def(body_name, loop_vars, body + [_returned(loop_vars, s)], s),
                _at(ast.Assign([_target(loop_vars, s)], call), s)]


# --- looking at statements ------------------------------------------------------------------------

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _walk(node: ast.AST, into_loops: bool = True) -> Iterator[ast.AST]:
    """``node`` and what it contains, not looking inside functions and classes (nor inside
    loops, when ``into_loops`` is false): their statements belong to another scope (or loop)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if not (isinstance(n, _SCOPES) or (not into_loops and isinstance(n, _LOOPS))):
            stack.extend(reversed(list(ast.iter_child_nodes(n))))


def _walk_all(stmts: list[ast.stmt], into_loops: bool = True) -> Iterator[ast.AST]:
    for s in stmts:
        yield from _walk(s, into_loops)


def _assigned_in_order(stmts: list[ast.stmt]) -> list[str]:
    """Names these statements assign (``def`` and ``class`` names included), first seen first."""
    names = []
    for n in _walk_all(stmts):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.append(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(n.name)
    return list(dict.fromkeys(names))


def _assigned(stmts: list[ast.stmt]) -> set[str]:
    return set(_assigned_in_order(stmts))


def _stored(target: ast.AST | None) -> set[str]:
    return set() if target is None else {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _reads(node: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def _returns(stmts: list[ast.stmt]) -> list[ast.Return]:
    return [n for n in _walk_all(stmts) if isinstance(n, ast.Return)]


def _ends_in_return(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return)


def _unsupported(stmts: list[ast.stmt], loop: bool) -> str | None:
    """Why these branch (or loop body) statements cannot move into a function, if they can't."""
    for n in _walk_all(stmts, into_loops=False):
        if isinstance(n, (ast.Break, ast.Continue)):
            return f"it has a `{'break' if isinstance(n, ast.Break) else 'continue'}`"
    for n in _walk_all(stmts):
        if loop and isinstance(n, ast.Return):
            return "its body has a `return`"
        if isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, ast.Store):
            return (f"it assigns to {ast.unparse(n)}; only plain names can become results, so "
                    f"compute the value in both branches and assign it after")
        if isinstance(n, (ast.Global, ast.Nonlocal, ast.Delete)):
            return f"it has a `{type(n).__name__.lower()}` statement"
        if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)):
            return "it has a `yield` or `await`"
    return None


# --- making statements ----------------------------------------------------------------------------


def _at(node: ast.AST, where: ast.stmt) -> Any:
    """Give a new node (and its new children) the line of the statement it replaces, so errors
    and tracebacks point at the user's ``if``/``while``."""
    for n in ast.walk(node):
        if "lineno" in n._attributes and not hasattr(n, "lineno"):
            n.lineno, n.col_offset = where.lineno, where.col_offset
            n.end_lineno, n.end_col_offset = where.lineno, where.col_offset
    return node


def _call(func: str, where: ast.stmt, *args: ast.expr) -> ast.Call:
    module, name = func.split(".")
    return _at(ast.Call(ast.Attribute(ast.Name(module, ast.Load()), name, ast.Load()),
                        list(args), []), where)


def _tuple(names: list[str], where: ast.stmt) -> ast.Tuple:
    return _at(ast.Tuple([ast.Name(n, ast.Load()) for n in names], ast.Load()), where)


def _target(names: list[str], where: ast.stmt) -> ast.expr:
    """``x`` for one result, ``(x, y)`` for several."""
    if len(names) == 1:
        return _at(ast.Name(names[0], ast.Store()), where)
    return _at(ast.Tuple([ast.Name(n, ast.Store()) for n in names], ast.Store()), where)


def _returned(names: list[str], where: ast.stmt) -> ast.Return:
    value = ast.Name(names[0], ast.Load()) if len(names) == 1 else _tuple(names, where)
    return _at(ast.Return(value), where)


def _def(name: str, params: list[str], body: list[ast.stmt], where: ast.stmt) -> ast.FunctionDef:
    fdef = ast.parse(f"def {name}({', '.join(params)}):\n    pass").body[0]
    for n in ast.walk(fdef):  # the template's own line numbers are meaningless here
        for attr in ("lineno", "end_lineno", "col_offset", "end_col_offset"):
            if hasattr(n, attr):
                delattr(n, attr)
    fdef.body = body or [ast.Pass()]
    return _at(fdef, where)


tracing.AUTOGRAPH = convert  # mg.function(fn, autograph=True) calls it (see tracing.AUTOGRAPH)
