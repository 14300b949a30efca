"""What an answer reaches, judged from its source in the grader's process (issue 36).

The learner's kernel can lie about anything that runs in it; the source of the notebook it was
given cannot. So the grader reads the code cells of the submitted notebook with ``ast`` (after
IPython's input transformations, as the kernel would run them), never running them, and works
out for each exercise:

- **what the answer reaches**: modules and attributes, as dotted names. ``import torch.autograd
  as ag``, ``from torch import autograd``, ``ag.grad``, ``g = ag; g.grad``,
  ``getattr(ag, "grad")``, ``vars(ag)["grad"]``, ``ag.__dict__.get("grad")``,
  ``operator.attrgetter("grad")(ag)`` (a bound getter too; ``methodcaller`` likewise),
  ``__import__("graphlib")``, ``sys.modules["x"]`` and names bound from them are followed; a name
  under the course's own package is also matched at its object's home, so a re-export
  (``course_utils.minigraph.onnx.prune`` is ``session.prune``) takes the route its home does
  (``_home``; the frameworks are not imported for this, their routes name what learners spell);
  a name the notebook's own set-up cells imported (``mg``, ``init_mlp``) is
  resolved the same way; builtins are ``builtins.<name>``; a complex literal (``1j``) and a
  complex dtype given as a string are named ``routes.COMPLEX_LITERAL`` and
  ``routes.COMPLEX_DTYPE``; code that writes into a library's namespace (an attribute of one of
  its modules or classes set or deleted, by assignment, ``setattr`` or its ``__dict__``; not its
  settings, nor an object made by calling it, ``m = nn.Linear(2, 2)``, which is the answer's own)
  reaches ``routes.LIBRARY_WRITE``;
- **what hides what it reaches**: ``getattr``/``setattr``/``delattr`` with a computed name (not
  on ``self``/``cls``, an object's own attributes), ``exec``, ``eval``, ``compile``,
  ``__import__``, ``importlib``, ``globals()``, ``vars()``, frame access (``sys._getframe``,
  ``inspect``, ``f_back``, ``f_globals``, ...), ``gc``, ``ctypes``, ``sys.setprofile`` and
  ``settrace``.

The answer of an exercise is its solution cells and, in the cells the learner added or changed
(after them, before the next exercise's, or earlier), the statements that define or change a name
the answer or the exercise's checks use, followed until nothing new is added: a scratch cell that
compares the answer with a library is not the answer; one that redefines what the checks call is.

``apply`` then scores: an answer that reaches **the grader's machinery** (``course_utils.grading``,
``sys.modules``, json's encoder, the kernel's own modules) scores 0 for that exercise and is
flagged; one that reaches **a forbidden route** of its exercise (``routes.FORBIDDEN``, the string
literals of the ``forbid(...)`` calls in the exercise's canonical checks, the package's own
answers from ``answers_in_package``) scores at most half its points, with the line named; so
does code whose reach cannot be read (``routes.UNREADABLE``: a computed import, a module loaded
from its file, ``exec``/``eval``/``compile``; ``routes.COMPUTED``: a computed ``getattr``,
namespace key or attrgetter that could reach one of the exercise's routes; ``REFLECTION``:
``vars(x)``, ``x.__dict__``, ``dataclasses.astuple``/``asdict``, ``inspect.getmembers`` on a
library's object where a route of the exercise lies, ``_Reader.reflect``); the other hiding
constructs are noted for the instructor at no cost.

>>> found = analyse("import torch.autograd as ag\\nf = ag\\ndef d(x):\\n    return f.grad(x)\\n")
>>> sorted({r.what for r in found.reached if r.what.startswith("torch")})
['torch.autograd', 'torch.autograd.grad']
>>> [h.what for h in analyse("getattr(x, 'a' + b)\\ngetattr(self, name)\\n").hiding]
['getattr with a computed name']
"""

from __future__ import annotations

import ast
import builtins
import fnmatch
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from course_utils.grading import routes
from course_utils.grading.notebook import copies

#: Reflection on an object (``_Reader.reflect``), as ``REFLECTION + dotted name``: held to half
#: where a route of the exercise lies under that name or under its route's module
#: (``_computed_route``).
REFLECTION = "reflection:"
#: What only the grader and the kernel's machinery use: an answer that reaches one scores 0.
MACHINERY = ("course_utils.grading", "sys.modules", "json._default_encoder", "json.encoder",
             "json.scanner", "ipykernel", "IPython.core", "jupyter_client", "zmq",
             "sys.meta_path", "sys.path_hooks", "sys.addaudithook", "builtins.__builtins__")
#: Dotted names that hide what the code reaches (noted for the instructor, no cost).
HIDING = {"builtins.exec": "exec", "builtins.eval": "eval", "builtins.compile": "compile",
          "builtins.__import__": "__import__", "importlib": "importlib",
          "builtins.globals": "globals()", "builtins.vars": "vars()",
          "sys._getframe": "frame access (sys._getframe)",
          "sys._current_frames": "frame access (sys._current_frames)",
          "gc": "the garbage collector (gc)",
          **{f"inspect.{name}": f"frame access (inspect.{name})" for name in (
              "currentframe", "stack", "trace", "getouterframes", "getinnerframes",
              "getframeinfo")},
          "ctypes": "ctypes", "sys.setprofile": "sys.setprofile", "sys.settrace": "sys.settrace",
          "threading.setprofile": "threading.setprofile",
          "threading.settrace": "threading.settrace", "types.FunctionType": "types.FunctionType",
          "types.CodeType": "types.CodeType"}
#: Attributes that reach frames, globals or code whatever object they are read from.
HIDING_ATTRS = ("f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "gi_frame",
                "cr_frame", "ag_frame", "__globals__", "__builtins__", "__subclasses__",
                "__code__", "__closure__")
#: The course's functions that return a library's module (``tf = quiet.tensorflow()`` is
#: ``import tensorflow as tf`` without the start-up log lines): their result is that module.
MODULE_MAKERS = {"course_utils.quiet.tensorflow": "tensorflow", "course_utils.quiet.torch": "torch"}
#: Methods that change a dict in place: on a library's namespace dict (``vars(torch)``,
#: ``torch.__dict__``) they write into the library.
_DICT_WRITES = ("update", "setdefault", "__setitem__", "__delitem__", "pop", "popitem", "clear")
#: Functions that set or delete an attribute of their first argument.
_ATTR_WRITERS = ("builtins.setattr", "builtins.delattr", "builtins.object.__setattr__",
                 "builtins.object.__delattr__", "builtins.type.__setattr__",
                 "builtins.type.__delattr__")
#: The key under which ``env`` keeps, for a function of the answer's, which of its parameters
#: it writes into (``def put(m, f): m.f = f``): "position:name" pairs; no identifier holds "\0".
_WRITES = "\0writes:"
_COMPLEX_DTYPES = ("complex", "complex64", "complex128", "complex256", "c8", "c16", "c32",
                   "F", "D", "G", "cfloat", "cdouble", "csingle", "clongdouble")
#: Functions that read one attribute of their first argument by the name given second, as
#: ``getattr`` does (``inspect.getattr_static(mg, "compile_c")`` is ``mg.compile_c``).
_GETTERS = ("builtins.getattr", "builtins.hasattr", "inspect.getattr_static",
            "builtins.object.__getattribute__", "builtins.type.__getattribute__")
#: ``operator.attrgetter("a", "b.c")`` and ``operator.methodcaller("m")``: objects that read
#: those attributes of (or call that method of) what they are applied to.
_ATTRGETTERS = ("operator.attrgetter", "_operator.attrgetter")
_METHODCALLERS = ("operator.methodcaller", "_operator.methodcaller")
#: Reflection: functions that hand out every attribute (or field) of their argument without
#: naming one (``dataclasses.astuple(op)[3]`` is the op's vjp rule), and methods that do the same
#: for their object (``op.__reduce_ex__(2)``, a named tuple's ``_asdict()``); ``vars(x)`` and
#: ``x.__dict__`` are reflection too unless read with a literal key (``_Reader.visit_Subscript``).
_REFLECTORS = ("builtins.vars", "dataclasses.astuple", "dataclasses.asdict", "inspect.getmembers",
               "inspect.getmembers_static", "attr.asdict", "attr.astuple", "attrs.asdict",
               "attrs.astuple")
_REFLECTING_METHODS = ("__reduce__", "__reduce_ex__", "__getstate__", "_asdict")


class _Made(str):
    """The dotted name of what an object was made by (``m = torch.nn.Linear(2, 2)``: ``m`` is a
    ``_Made("torch.nn.Linear")``): it reaches routes as its maker does, but writing to it is
    writing to an instance of the answer's, not into the library's namespace."""

    __slots__ = ()


class _Getter(_Made):
    """``operator.attrgetter(...)`` or ``operator.methodcaller(...)``: ``names`` are the
    attributes it reads of what it is applied to (None: a computed one; ``"a.b"`` reads ``a``,
    then its ``b``); ``calls``: a methodcaller, whose result is the method's."""

    def __new__(cls, maker: str, names: tuple[str | None, ...], calls: bool) -> _Getter:
        made = super().__new__(cls, maker)
        made.names, made.calls = names, calls
        return made


@dataclass(frozen=True)
class Finding:
    """One thing an answer's source does, where: the code cell (index among the notebook's
    code cells) and the line in it (1-based)."""

    cell: int
    line: int
    what: str


@dataclass
class Analysis:
    """What one cell's source reaches and hides, and the names it defines and loads."""

    reached: list[Finding] = field(default_factory=list)
    hiding: list[Finding] = field(default_factory=list)
    defines: set[str] = field(default_factory=set)
    loads: set[str] = field(default_factory=set)
    problem: str = ""  # the source could not be read (nested too deeply)
    #: Names whose object a top-level statement changes in place (``IMPL["add"] = f``,
    #: ``table.update(...)``, ``obj.attr = v``): that statement matters to whoever uses them.
    mutates: set[str] = field(default_factory=set)
    #: One analysis per top-level statement, in order (empty for a statement's own analysis).
    parts: list[Analysis] = field(default_factory=list)
    #: The code read, with its cell: the cell's tree, or the statement's (for ``copies``).
    trees: list[tuple[int, ast.AST]] = field(default_factory=list)


class _Names(ast.NodeVisitor):
    """What a cell's reader keeps as it walks: a table of names -> dotted names (None: a local
    value), and what it found reached and hidden (the :class:`Analysis`)."""

    def __init__(self, env: dict[str, str | None], cell: int, out: Analysis) -> None:
        self.env, self.cell, self.out = env, cell, out
        self.local: set[str] | None = None  # names bound in the function being read
        #: ``vars(x)``/``x.__dict__`` nodes read with a literal key (an attribute access)
        self.literal_reads: list[ast.AST] = []
        #: the ``func`` of every call met (a getter called by name is read; one handed around
        #: as a value is not: ``_Reader.loose_getter``)
        self.called: set[int] = set()

    def define(self, name: str, value: str | None) -> None:
        """Bind ``name``: a cell-level name the cell defines, or a local of a function."""
        self.env[name] = value
        if self.local is None:
            self.out.defines.add(name)
        else:
            self.local.add(name)

    # -- names ---------------------------------------------------------------------------

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for, or None."""
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id == "__builtins__":  # the builtins module in a kernel's namespace
                return "builtins"
            return f"builtins.{node.id}" if hasattr(builtins, node.id) else None
        if isinstance(node, ast.Attribute):
            return _joined(self.resolve(node.value), node.attr)
        if isinstance(node, ast.Call):
            func = self.resolve(node.func)
            read = self.attribute_read(node, func)
            if read is not None:  # getattr(x, "a"), vars(x).get("a"), attrgetter("a")(x)
                obj, names, getter = read
                if len(names) != 1 or names[0] is None:
                    return None  # a computed name, or a tuple of attributes
                dotted = self.resolve(obj)
                for part in names[0].split(".") if getter is not None else names:
                    dotted = _joined(dotted, part)
                return _Made(dotted) if dotted and getter is not None and getter.calls \
                    else dotted
            if func in _ATTRGETTERS + _METHODCALLERS:
                texts = [None if isinstance(a, ast.Starred) else _string(a) for a in node.args]
                return _Getter(func, tuple(texts if func in _ATTRGETTERS else texts[:1]),
                               func in _METHODCALLERS)
            if func == "builtins.type" and len(node.args) == 1:
                return self.resolve(node.args[0])  # an object's class, named as the object
            if func in ("builtins.__import__", "importlib.import_module") and node.args:
                name = _string(node.args[0])
                if name is not None:  # __import__("a.b") is a; import_module("a.b") is a.b
                    return name.split(".")[0] if func == "builtins.__import__" else name
            if func in MODULE_MAKERS:
                return MODULE_MAKERS[func]
            # A call's result: an instance of what was called, for routes.
            return _Made(func) if func else None
        if isinstance(node, ast.Subscript):
            base = self.resolve(node.value)
            key = _string(node.slice)
            if base == "sys.modules" and key is not None:
                return key
            obj = self.dict_of(node.value)
            if obj is not None and key is not None:  # vars(mg)["compile_c"] is mg.compile_c
                return _joined(self.resolve(obj), key)
        return None

    def dict_of(self, node: ast.AST) -> ast.AST | None:
        """``x`` when ``node`` is ``vars(x)`` or ``x.__dict__`` (its namespace), else None."""
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return node.value
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
                and self.resolve(node.func) == "builtins.vars":
            return node.args[0]
        return None

    def attribute_read(self, node: ast.Call, func: str | None
                       ) -> tuple[ast.AST, tuple[str | None, ...], _Getter | None] | None:
        """For a call that reads attributes of an object by name (``getattr(x, n)``,
        ``inspect.getattr_static``, ``x.__getattribute__(n)``, ``vars(x).get(n)``, an
        ``operator.attrgetter``/``methodcaller`` applied to ``x``): the object's expression, the
        names (None: a computed one; dotted for an attrgetter) and the getter, if one; else
        None."""
        if func in _GETTERS and len(node.args) > 1:
            return node.args[0], (_string(node.args[1]),), None
        if isinstance(func, _Getter) and node.args:
            return node.args[0], func.names, func
        if isinstance(node.func, ast.Attribute) and node.args:
            method, owner = node.func.attr, node.func.value
            if method == "__getattribute__" and len(node.args) == 1:
                return owner, (_string(node.args[0]),), None
            if method in ("__getattribute__", "__getattr__") and len(node.args) == 2:
                return node.args[0], (_string(node.args[1]),), None  # type(m).__getattr__(m, n)
            obj = self.dict_of(owner)
            if obj is not None and method in ("get", "__getitem__"):
                return obj, (_string(node.args[0]),), None
        return None

    def bind(self, target: ast.AST, value: str | None) -> None:
        if isinstance(target, ast.Name):
            self.define(target.id, value)
        elif isinstance(target, ast.Tuple | ast.List):
            for item in target.elts:
                self.bind(item.value if isinstance(item, ast.Starred) else item, None)
        else:
            self.visit(target)

    def reach(self, node: ast.AST, what: str) -> None:
        self.out.reached.append(Finding(self.cell, getattr(node, "lineno", 1), str(what)))

    def library(self, node: ast.AST) -> str | None:
        """The library module or class ``node`` names (``routes.LIBRARIES``; not an instance
        made by calling one, not a library's settings), or None."""
        name = self.resolve(node)
        if name is None or isinstance(name, _Made) \
                or name.split(".")[0] not in routes.LIBRARIES \
                or any(fnmatch.fnmatchcase(name, p) for p in routes.SETTINGS):
            return None
        return name

    def namespace(self, node: ast.AST) -> str | None:
        """The library whose namespace dict ``node`` is (``torch.__dict__``, ``vars(torch)``,
        ``sys.modules``), or None."""
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return self.library(node.value)
        if isinstance(node, ast.Call) and self.resolve(node.func) == "builtins.vars" \
                and node.args:
            return self.library(node.args[0])
        return "sys.modules" if self.resolve(node) == "sys.modules" else None

    def hide(self, node: ast.AST, what: str) -> None:
        self.out.hiding.append(Finding(self.cell, getattr(node, "lineno", 1), what))

    def read(self, node: ast.AST, obj: ast.AST, name: str | None, how: str, *,
             dotted: bool = False) -> None:
        """``obj``'s attribute ``name`` read (``getattr(obj, name)``, ``vars(obj)[name]``, ...;
        ``dotted``: ``"a.b"`` is ``a``, then its ``b``, as an attrgetter reads it). A literal
        name is an attribute access; a computed one (None) could be any attribute: held to half
        where a route of the exercise lies under ``obj`` (``routes.COMPUTED``), and, where
        ``obj`` is an object a library's call made, as reflection on it (``reflect``). An
        object's own attributes (``self``, ``cls``) are free."""
        if name is not None:
            base = self.resolve(obj)
            for part in name.split(".") if dotted else [name]:
                base = _joined(base, part)
                if base is not None:
                    self.reach(node, base)
                self.reach(node, "." + part)
                if part in HIDING_ATTRS:
                    self.hide(node, f"the attribute {part}")
        elif not (isinstance(obj, ast.Name) and obj.id in ("self", "cls")):
            self.hide(node, f"{how} with a computed name")
            self.reach(node, routes.COMPUTED + (self.library(obj) or ""))
            if isinstance(self.resolve(obj), _Made):
                self.reach(node, REFLECTION + self.resolve(obj))

    def reflect(self, node: ast.AST, obj: ast.AST, how: str) -> None:
        """Reflection on ``obj``: every attribute (or field) of it handed out without one being
        named (``dataclasses.astuple(op)``, ``vars(x).values()``, ``inspect.getmembers``).

        What the judge cannot know: which value an attribute holds. A library's object can hold
        any of that library's functions (a minigraph op record holds its vjp rule), so reflection
        on a value the judge resolves to a dotted name (a library's module or class, or what
        calling one made) is ``REFLECTION + name``: held to half where a route of the
        exercise lies under that name or under the module of one of its routes, or is an
        attribute of any object (``_computed_route``). A value the judge cannot name (the
        answer's own objects, or a value it lost track of) is free: the rule holds to half only
        what it can tie to a route's library, and an honest answer names the attribute of a
        library's object it uses (``op.vjp`` is read and judged like any other attribute);
        enumerating every attribute of one is what an answer does to reach one unnamed."""
        base = self.resolve(obj)
        if base is None:
            return
        self.hide(node, f"every attribute of {base} handed out ({how})")
        self.reach(node, REFLECTION + base)


class _Binder(_Names):
    """The statements that bind names: imports, assignments, loops, ``with``, ``except``,
    functions, classes and comprehensions (each name's dotted name, or None)."""


    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.reach(node, alias.name)
            if alias.asname:
                self.define(alias.asname, alias.name)
            else:
                self.define(alias.name.split(".")[0], alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:  # a relative import in a notebook: nothing of the course's to follow
            return
        for alias in node.names:
            if alias.name == "*":
                self.reach(node, module)
                continue
            dotted = f"{module}.{alias.name}"
            self.reach(node, dotted)
            self.define(alias.asname or alias.name, dotted)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        value = self.resolve(node.value)
        for target in node.targets:
            self.bind(target, value)
            if isinstance(node.value, ast.Lambda) and isinstance(target, ast.Name):
                self.env[_WRITES + target.id] = _writes_into(node.value.args, [node.value.body])

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.bind(node.target, self.resolve(node.value) if node.value is not None else None)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name) and (self.local is None
                                                  or node.target.id not in self.local):
            self.out.loads.add(node.target.id)
        self.bind(node.target, None)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.bind(node.target, self.resolve(node.value))

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        # `for m in (torch.nn.functional, ...)`: m is a library's module or class in the body.
        items = node.iter.elts if isinstance(node.iter, ast.Tuple | ast.List | ast.Set) else []
        self.bind(node.target, next(filter(None, map(self.library, items)), None))
        for child in node.body + node.orelse:
            self.visit(child)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.bind(item.optional_vars, None)
        for child in node.body:
            self.visit(child)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.define(node.name, None)
        for child in node.body:
            self.visit(child)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d]:
            self.visit(default)
        if not isinstance(node, ast.Lambda):
            for decorator in node.decorator_list:
                self.visit(decorator)
            self.define(node.name, None)
        outer, outer_local = self.env, self.local
        self.env = dict(outer)  # the body's own names do not leak out (a fair approximation)
        self.local = set(outer_local or ())
        args = node.args
        for arg in args.posonlyargs + args.args + args.kwonlyargs \
                + [a for a in (args.vararg, args.kwarg) if a is not None]:
            self.define(arg.arg, None)
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
        for child in body:
            self.visit(child)
        self.env, self.local = outer, outer_local
        if not isinstance(node, ast.Lambda):
            self.env[_WRITES + node.name] = _writes_into(node.args, body)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for child in node.bases + [k.value for k in node.keywords] + node.decorator_list:
            self.visit(child)
        self.define(node.name, None)
        outer, outer_local = self.env, self.local
        self.env, self.local = dict(outer), set(outer_local or ())
        for child in node.body:
            self.visit(child)
        self.env, self.local = outer, outer_local

    def _comprehension(self, node: ast.AST) -> None:
        outer, outer_local = self.env, self.local
        self.env, self.local = dict(outer), set(outer_local or ())
        for generator in node.generators:  # type: ignore[attr-defined]
            self.visit(generator.iter)
            self.bind(generator.target, None)
            for condition in generator.ifs:
                self.visit(condition)
        for name in ("elt", "key", "value"):
            if getattr(node, name, None) is not None:
                self.visit(getattr(node, name))
        self.env, self.local = outer, outer_local

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    def visit_Global(self, node: ast.Global) -> None:
        self.out.defines.update(node.names)


class _Reader(_Binder):
    """Walks one cell in order, keeping a table of names -> dotted names (None: a local value),
    and records what each name, attribute, subscript, constant and call it meets reaches."""


    def loose_getter(self, node: ast.AST, dotted: str | None) -> None:
        """``getattr`` (or another function that reads an attribute by name, or reflection)
        used as a value, not called by name: ``map(getattr, [mg], ["compile_c"])``,
        ``(lambda f: f(sys, "modules"))(getattr)``, ``getattr.__call__(mg, "compile_c")``,
        ``functools.reduce(getattr, names, jax)`` (fourth attack review: each reached a route
        unseen). What it is applied to and the name it reads cannot be read: it could take
        any route, so it is held to half in every exercise (``routes.HIDDEN_GETATTR``)."""
        if dotted in _GETTERS + _ATTRGETTERS + _METHODCALLERS + _REFLECTORS \
                and not isinstance(dotted, _Made) and id(node) not in self.called:
            self.hide(node, f"{dotted.rpartition('.')[2]} used as a value")
            self.reach(node, routes.HIDDEN_GETATTR)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            if self.local is None or node.id not in self.local:
                self.out.loads.add(node.id)
            dotted = self.resolve(node)
            if dotted is not None:
                self.reach(node, dotted)
            self.loose_getter(node, dotted)
        elif isinstance(node.ctx, ast.Store):
            self.define(node.id, None)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Store | ast.Del) and self.library(node.value):
            self.reach(node, routes.LIBRARY_WRITE)  # torch.nn.functional.f = f
        if node.attr == "__dict__" and not any(n is node for n in self.literal_reads):
            self.reflect(node, node.value, "__dict__")  # x.__dict__.values()
        dotted = self.resolve(node)
        if dotted is not None:
            self.reach(node, dotted)
            self.loose_getter(node, dotted)
        self.reach(node, "." + node.attr)
        if node.attr in HIDING_ATTRS:
            self.hide(node, f"the attribute {node.attr}")
        self.visit(node.value)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Store | ast.Del) and self.namespace(node.value):
            self.reach(node, routes.LIBRARY_WRITE)  # vars(torch)["f"] = f
        dotted = self.resolve(node)
        if dotted is not None and self.resolve(node.value) == "sys.modules":
            self.reach(node, dotted)
        obj = self.dict_of(node.value)
        if obj is not None:  # vars(x)["a"] is x.a; with a computed key, any attribute of x
            key = _string(node.slice)
            if key is not None:
                self.literal_reads.append(node.value)
            self.read(node, obj, key, "a namespace read")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, complex):
            self.reach(node, routes.COMPLEX_LITERAL)
        elif isinstance(node.value, str) and "course_utils.grading" in node.value:
            self.reach(node, "course_utils.grading")

    def visit_Call(self, node: ast.Call) -> None:
        self.called.add(id(node.func))
        func = self.resolve(node.func)
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if (func in _ATTR_WRITERS and node.args and self.library(node.args[0])) or (
                attr in ("__setattr__", "__delattr__") and self.library(node.func.value)) or (
                attr in _DICT_WRITES and self.namespace(node.func.value)):
            self.reach(node, routes.LIBRARY_WRITE)  # setattr(torch, "f", f), vars(torch).update
        for written in (self.env.get(_WRITES + node.func.id) or "").split() \
                if isinstance(node.func, ast.Name) else ():
            position, name = written.split(":")  # a function of the answer's that writes there
            given = [a for i, a in enumerate(node.args) if i == int(position)] + [
                k.value for k in node.keywords if k.arg == name]
            if any(map(self.library, given)):
                self.reach(node, routes.LIBRARY_WRITE)  # def put(m): m.f = f; put(torch)
        read = self.attribute_read(node, func)
        if func is not None and func.rpartition(".")[2] in ("setattr", "delattr") \
                and func.startswith("builtins.") and len(node.args) > 1:
            read = node.args[0], (_string(node.args[1]),), None
        if read is not None:
            how = "operator.attrgetter" if isinstance(func, _Getter) \
                else (func or "").removeprefix("builtins.") or "__getattribute__"
            obj, names, getter = read
            if names[0] is not None and isinstance(node.func, ast.Attribute) \
                    and self.dict_of(node.func.value) is obj:
                self.literal_reads.append(node.func.value)  # vars(x).get("a") is x.a
            for name in names:
                if name is not None or how != "hasattr":  # hasattr hands out no value
                    self.read(node, obj, name, how, dotted=getter is not None)
        if func in _ATTRGETTERS + _METHODCALLERS:  # what it reads of whatever it is applied to
            getter = self.resolve(node)
            for name in getter.names if isinstance(getter, _Getter) else ():
                for part in name.split(".") if name is not None else ():
                    self.reach(node, "." + part)
                if name is None:
                    self.hide(node, f"{func.rpartition('.')[2]} with a computed name")
                    self.reach(node, routes.COMPUTED)
        if func in _REFLECTORS and node.args and not (
                func == "builtins.vars" and any(n is node for n in self.literal_reads)):
            self.reflect(node, node.args[0], func.rpartition(".")[2])
        elif attr in _REFLECTING_METHODS:
            self.reflect(node, node.func.value, attr)
        if func in ("builtins.__import__", "importlib.import_module"):
            target = self.resolve(node)
            if node.args and _string(node.args[0]) is not None and target is not None:
                self.reach(node, target)
            else:  # the resolved call is only _Made(the function): what it imports is unread
                self.hide(node, f"{func.rpartition('.')[2]} of a computed name")
                self.reach(node, routes.HIDDEN_IMPORT)
        for keyword in node.keywords:
            if keyword.arg == "dtype" and _complex_dtype(keyword.value):
                self.reach(node, routes.COMPLEX_DTYPE)
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("astype", "view") \
                and node.args and _complex_dtype(node.args[0]):
            self.reach(node, routes.COMPLEX_DTYPE)
        if func in ("numpy.asarray", "numpy.array", "numpy.zeros", "numpy.ones", "numpy.empty",
                    "numpy.full") and len(node.args) > 1 and _complex_dtype(node.args[-1]):
            self.reach(node, routes.COMPLEX_DTYPE)
        self.generic_visit(node)


def _writes_into(args: ast.arguments, body: list[ast.AST]) -> str:
    """Which parameters a function's ``body`` writes into ("position:name" pairs, a keyword-only
    one at position -1): sets or deletes their attributes, by assignment, ``setattr``,
    ``__setattr__`` or their ``__dict__`` (``vars(m)``)."""
    positional = [a.arg for a in args.posonlyargs + args.args]
    names = {*positional, *(a.arg for a in args.kwonlyargs)}

    def dict_of(node: ast.AST) -> ast.AST | None:  # m.__dict__ or vars(m): m
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return node.value
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "vars" and node.args:
            return node.args[0]
        return None

    written = set()
    for node in (n for part in body for n in ast.walk(part)):
        targets: list[ast.AST | None] = []
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
            targets.append(node.value)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            targets.append(dict_of(node.value))
        elif isinstance(node, ast.Call):
            func = node.func
            if getattr(func, "id", None) in ("setattr", "delattr") and node.args:
                targets.append(node.args[0])
            elif isinstance(func, ast.Attribute) and func.attr in ("__setattr__", "__delattr__"):
                targets += [func.value, *node.args[:1]]  # m.__setattr__, object.__setattr__(m)
            elif isinstance(func, ast.Attribute) and func.attr in _DICT_WRITES:
                targets.append(dict_of(func.value))
        written |= {t.id for t in targets if isinstance(t, ast.Name) and t.id in names}
    return " ".join(f"{positional.index(n) if n in positional else -1}:{n}"
                    for n in sorted(written))


def _joined(base: str | None, attr: str) -> str | None:
    """``base.attr``, an instance's attribute if ``base`` is one (``_Made``)."""
    if not base:
        return None
    return _Made(f"{base}.{attr}") if isinstance(base, _Made) else f"{base}.{attr}"


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _complex_dtype(node: ast.AST) -> bool:
    text = _string(node)
    return text is not None and text.lstrip("<>=|") in _COMPLEX_DTYPES


@functools.lru_cache(maxsize=4096)
def _python(source: str) -> str:
    """A cell as the kernel runs it: IPython's input transformations (magics, ``!cmd``)."""
    from course_utils.grading.running.tamper import _transform

    return _transform(source)


def _base(node: ast.AST) -> str | None:
    """The name at the root of ``a.b[c].d`` (None if it is not a name)."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


_IDENTITY = ("__module__", "__qualname__")
#: Keys of a namespace dict that name the module its code claims to come from: ``__name__`` in
#: the globals handed to ``exec`` or ``types.FunctionType`` becomes the ``__module__`` of every
#: function defined there.
_NAMESPACE_IDENTITY = (*_IDENTITY, "__name__")


def _forged_identity(stmt: ast.stmt) -> list[int]:
    """The lines where ``stmt`` gives a class or function another ``__module__`` or
    ``__qualname__``: stored as a name (a class body) or an attribute, a key of a dict literal
    or ``dict(...)`` (``type(name, bases, {...})``, the globals of ``exec``: ``__name__`` too), or
    ``setattr(obj, "__module__", ...)``; or compiles code under another file's name
    (``compile(source, torch.__file__, "exec")``: a check that asks where code was written reads
    its code object's file)."""
    lines = []
    for node in ast.walk(stmt):
        call = node if isinstance(node, ast.Call) else None
        name = getattr(call.func, "id", getattr(call.func, "attr", None)) if call else None
        filename = (call.args[1] if len(call.args) > 1 else next(
            (k.value for k in call.keywords if k.arg == "filename"), None)) \
            if name == "compile" else None
        if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
                and node.id in _IDENTITY) or (isinstance(node, ast.Attribute) and isinstance(
                    node.ctx, ast.Store) and node.attr in _IDENTITY) or (isinstance(
                    node, ast.Dict) and any(_string(k) in _NAMESPACE_IDENTITY
                                            for k in node.keys if k)) \
                or (name == "dict" and any(k.arg in _NAMESPACE_IDENTITY for k in call.keywords)) \
                or (name == "setattr" and len(call.args) > 1
                    and _string(call.args[1]) in _IDENTITY) \
                or (filename is not None and any(
                    (isinstance(n, ast.Attribute) and n.attr == "__file__")
                    or "site-packages" in (_string(n) or "") for n in ast.walk(filename))):
            lines.append(getattr(node, "lineno", 1))
    return lines


def _mutated(stmt: ast.stmt) -> set[str]:
    """The names whose object a top-level statement changes in place: item or attribute
    assignments and deletions (``IMPL["add"] = f``, ``del t[k]``), augmented assignments to
    them, and method calls on them (``table.update(...)``), also inside a top-level ``for``,
    ``if``, ``with`` or ``try``."""
    if isinstance(stmt, ast.For | ast.AsyncFor | ast.While | ast.If | ast.With | ast.AsyncWith
                  | ast.Try | ast.TryStar):
        inner = [*stmt.body, *getattr(stmt, "orelse", []), *getattr(stmt, "finalbody", []),
                 *(s for h in getattr(stmt, "handlers", []) for s in h.body)]
        return set().union(*(_mutated(s) for s in inner)) if inner else set()
    targets: list[ast.AST] = []
    if isinstance(stmt, ast.Assign):
        targets = [t for target in stmt.targets for t in ast.walk(target)]
    elif isinstance(stmt, ast.AugAssign | ast.AnnAssign):
        targets = [stmt.target]
    elif isinstance(stmt, ast.Delete):
        targets = list(stmt.targets)
    out = {_base(t) for t in targets if isinstance(t, ast.Attribute | ast.Subscript)}
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        out.add(_base(call.func.value))  # table.update(...), not print(engine.evaluate(...))
    out.discard(None)
    return out  # type: ignore[return-value]


def analyse(source: str, env: dict[str, str | None] | None = None, cell: int = 0
            ) -> Analysis:
    """What one cell reaches and hides; ``env`` (names bound by earlier cells) is updated with
    the names it binds. A cell that does not parse reaches nothing (it fails in the kernel)."""
    out = Analysis()
    env = {} if env is None else env
    try:
        tree = ast.parse(_python(source))
        out.trees.append((cell, tree))
        for stmt in tree.body:
            part = Analysis(mutates=_mutated(stmt), trees=[(cell, stmt)])
            _Reader(env, cell, part).visit(stmt)
            part.reached += [Finding(cell, line, routes.FORGED_IDENTITY)
                             for line in _forged_identity(stmt)]
            out.parts.append(part)
            out.reached += part.reached
            out.hiding += part.hiding
            out.defines |= part.defines
            out.loads |= part.loads
            out.mutates |= part.mutates
    except SyntaxError:
        pass
    except (RecursionError, MemoryError):
        out.problem = "it is nested too deeply for the grader to read; the instructor should " \
            "read it"
    return out


# -- the exercises ----------------------------------------------------------------------------


def matches(name: str, route: str) -> bool:
    """Whether a dotted name an answer reaches is (in) a route."""
    if route.startswith("."):
        return name == route
    return name == route or name.startswith(route + ".") or fnmatch.fnmatchcase(name, route)


def _tuples(tree: ast.Module, named: dict[str, set[str]]) -> None:
    """Add the tuples (or lists) of string literals ``tree`` assigns to a name at its top level
    to ``named`` (name -> the strings; a name assigned twice keeps both)."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Tuple | ast.List):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    named.setdefault(target.id, set()).update(
                        t for t in map(_string, stmt.value.elts) if t)


def forbid_literals(checks: Iterable[str], setup: Iterable[str] = ()) -> set[str]:
    """The string literals in the ``forbid(...)`` calls of some check cells' source, and the
    routes they pass by name: from ``routes`` (``forbid(*ORDERING)``) or a tuple of literals
    the check itself or one of the course's ``setup`` cells assigns (``forbid(*NO_LIBRARY)``,
    ``forbid(*RUNNERS)``). Read once per canonical notebook (a class's notebooks, the audit's
    variants share it)."""
    return set(_forbid_literals(tuple(checks), tuple(setup)))


@functools.lru_cache(maxsize=512)
def _forbid_literals(checks: tuple[str, ...], setup: tuple[str, ...]) -> frozenset[str]:
    found: set[str] = set()
    trees = []
    for source in checks:
        try:
            trees.append(ast.parse(_python(source)))
        except (SyntaxError, RecursionError, MemoryError):
            continue
    named: dict[str, set[str]] = {}  # NO_LIBRARY = ("torch.nn.functional.silu", ...)
    for source in setup:
        try:
            _tuples(ast.parse(_python(source)), named)
        except (SyntaxError, RecursionError, MemoryError):
            continue
    for tree in trees:
        _tuples(tree, named)
    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(
                    node.func, "attr", None)) == "forbid"):
                continue
            for arg in node.args:
                value = arg.value if isinstance(arg, ast.Starred) else arg
                name = getattr(value, "id", getattr(value, "attr", None))
                if isinstance(name, str) and isinstance(getattr(routes, name, None), tuple):
                    found.update(getattr(routes, name))
                found.update(named.get(name, ()) if isinstance(name, str) else ())
                for inner in ast.walk(value):
                    text = _string(inner)
                    if text is not None:
                        found.add(text)
    return frozenset(found)


@functools.lru_cache(maxsize=1)
def _package_answers() -> dict[str, tuple[str, ...]]:
    try:
        from course_utils.grading import answers_in_package
    except ImportError:
        return {}
    try:
        return {ex: tuple(paths) for ex, paths in answers_in_package.table().items()}
    except Exception:  # a package that cannot be scanned has no answers to hold against anyone
        return {}


def forbidden_routes(exercise: str, checks: Iterable[str], setup: Iterable[str] = ()
                     ) -> set[str]:
    """Every route an answer to ``exercise`` must not reach (its checks' sources given, and the
    course's set-up cells, where a check's ``forbid(*RUNNERS)`` may find its tuple)."""
    return (set(routes.EVERY) | set(routes.FORBIDDEN.get(exercise, ()))
            | forbid_literals(checks, setup)
            | set(_package_answers().get(exercise, ())))


@dataclass
class Judgement:
    """What the static judge found in one exercise's answer."""

    exercise: str
    machinery: list[Finding] = field(default_factory=list)
    forbidden: list[tuple[Finding, str]] = field(default_factory=list)  # (finding, route)
    hiding: list[Finding] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)  # cells too deep to read
    #: The machinery was reached only by code outside this exercise's answer (an earlier cell):
    #: the exercise scores 0 all the same, since every report after it may be forged.
    machinery_earlier: bool = False


def judge(cells: Sequence[Mapping[str, Any]], canonical: Sequence[Mapping[str, Any]], *,
          stubs: bool = False, only: Iterable[str] | None = None) -> dict[str, Judgement]:
    """The static judgement of each exercise of a submitted notebook's code ``cells`` (checks
    already restored), against the ``canonical`` notebook's cells. ``stubs``: the canonical
    notebook is the exercises' (a learner's own release, without the solutions; the grader
    knows which it graded against): the pasted-code judge is then skipped (``_copied``).
    ``only``: judge these exercises alone (the audit judges one exercise's variant)."""
    from course_utils.grading.format import exercise_id, is_check, is_solution

    course = {(str(c.get("id", "")), str(c.get("source", ""))) for c in canonical
              if c.get("cell_type") == "code"}
    code = [c for c in cells if c.get("cell_type", "code") == "code"]
    course_lines = {line.strip() for c in canonical
                    if c.get("cell_type") == "code" and not is_solution(c)
                    for line in _python(str(c.get("source", ""))).splitlines() if line.strip()}
    exercises = list(dict.fromkeys(exercise_id(c) for c in canonical
                                   if c.get("cell_type") == "code" and is_check(c)))
    checks = {ex: [str(c.get("source", "")) for c in canonical
                   if c.get("cell_type") == "code" and is_check(c) and exercise_id(c) == ex]
              for ex in exercises}
    setup = [str(c.get("source", "")) for c in canonical if c.get("cell_type") == "code"
             and not is_check(c) and not is_solution(c)]
    given, solutions = _templates_and_answers(canonical)
    env: dict[str, str | None] = {}
    learner: list[tuple[int, str | None, Analysis]] = []  # (cell, exercise or None, analysis)
    current: str | None = None
    for i, cell in enumerate(code):
        source = str(cell.get("source", ""))
        if is_check(cell):
            continue
        found = analyse(source, env, i)
        # A line the course's own cells hold (a check's `from course_utils.grading.probe import
        # report`, copied into a scratch cell to run a check again) is not the learner's route.
        lines = _python(source).splitlines()
        for part in [found, *found.parts]:
            part.reached = [f for f in part.reached if not (
                any(matches(f.what, m) for m in MACHINERY) and 0 < f.line <= len(lines)
                and lines[f.line - 1].strip() in course_lines)]
        if is_solution(cell):
            current = exercise_id(cell)
            learner.append((i, current, found))
        elif (str(cell.get("id", "")), source) not in course:
            learner.append((i, current, found))  # a cell the learner added or changed
    tagged, solution_cells = {i: ex for i, ex, _ in learner}, set(_solution_cells(code))
    first_check = {}
    for i, cell in enumerate(code):
        if is_check(cell):
            first_check.setdefault(exercise_id(cell), i)
    out = {}
    wanted = set(exercises if only is None else only)
    for ex in (e for e in exercises if e in wanted):
        result = Judgement(ex)
        routes_ = forbidden_routes(ex, checks[ex], setup)
        # Code that reaches the grader's machinery changes every check that runs after it.
        result.machinery += [f for i, _, found in learner if i < first_check.get(ex, len(code))
                             for f in found.reached if any(matches(f.what, m) for m in MACHINERY)]
        answer = _answer_cells(ex, learner, solution_cells, _loads(checks[ex]))
        result.machinery_earlier = bool(result.machinery) and not _machinery_in(answer)
        for found in answer:
            if found.problem:
                result.problems.append(Finding(0, 0, found.problem))
            result.hiding += found.hiding
            for f in found.reached:
                if any(matches(f.what, m) for m in MACHINERY):
                    result.machinery.append(f)
                elif f.what in HIDING or any(f.what.startswith(h + ".") for h in HIDING
                                             if "." not in h):
                    result.hiding.append(Finding(f.cell, f.line, HIDING.get(
                        f.what, HIDING.get(f.what.split(".")[0], f.what))))
                route = _route_of(f.what, routes_)
                if route is not None:
                    result.forbidden.append((f, route))
        if not stubs:
            result.forbidden += _copied(ex, answer, tagged, routes_, solutions.get(ex, []))
        result.hiding = [f for f in dict.fromkeys(result.hiding)
                         if not _given_line(f, code, given.get(ex, set()))]
        result.machinery = list(dict.fromkeys(result.machinery))
        result.forbidden = list(dict.fromkeys(result.forbidden))
        out[ex] = result
    return out


def _machinery_in(answer: Iterable[Any]) -> bool:
    """Whether an exercise's answer cells (their ``analyse`` results) reach the machinery."""
    return any(matches(f.what, m) for found in answer for f in found.reached for m in MACHINERY)


def _route_of(what: str, routes_: Iterable[str]) -> str | None:
    """The first route of ``routes_`` a finding's name takes, or None: by the name as spelled
    or at its object's home (a re-export of the course's package), against each route as
    written or at its own home (``course_utils.minigraph.gradients`` is defined in
    ``...autodiff``); a computed name or reflection by ``_computed_route``."""
    ordered = sorted(routes_)
    homes = {h: r for r in ordered if "*" not in r and (h := _home(r)) is not None}
    for name in _spellings(what):
        route = next((r for r in ordered if matches(name, r)), None) \
            or next((r for h, r in homes.items() if matches(name, h)), None) \
            or _computed_route(name, [*ordered, *homes])
        if route is not None:
            return homes.get(route, route)
    return None


def _computed_route(what: str, routes_: Iterable[str]) -> str | None:
    """For ``getattr`` with a computed name (``routes.COMPUTED + base``): the first route of the
    exercise it could reach, an attribute of any object or a name under ``base`` (a library's
    module or class), or None. For reflection (``REFLECTION + base``), also a route whose module
    ``base`` lies under: an object of that module, or one its functions made, may hold it."""
    if what.startswith(routes.COMPUTED):
        base, wide = what[len(routes.COMPUTED):], False
    elif what.startswith(REFLECTION):
        base, wide = what[len(REFLECTION):], True
    else:
        return None
    for route in sorted(routes_):
        if ":" in route:  # a pseudo-route (routes.COMPLEX_LITERAL, ...) is no name
            continue
        if route.startswith(".") or (base and (route == base or route.startswith(base + "."))):
            return route
        if wide and _under(base, _module_of(route)):
            return route
    return None


def _module_of(route: str) -> str:
    """The module a route lies in: ``jax.jvp`` -> ``jax``; a top-level one is its own
    (``sympy``); none in ``builtins``, whose objects (``object()``, a ``dict``) hold none of
    its functions (``builtins.complex``: only the module itself, ``vars(builtins)``, is held)."""
    parent = route.rpartition(".")[0]
    return route if not parent or parent == "builtins" else parent


def _under(name: str, module: str) -> bool:
    """Whether the dotted ``name`` is ``module`` (a shell pattern allowed) or lies under it."""
    parts = name.split(".")
    return any(fnmatch.fnmatchcase(".".join(parts[:k]), module) for k in range(1, len(parts) + 1))


def _spellings(what: str) -> list[str]:
    """A finding's name, and the same name at its object's home where the course's package
    re-exports it (``course_utils.minigraph.onnx.prune`` is ``...session.prune``), prefix
    (``routes.COMPUTED``, ``REFLECTION``) kept."""
    prefix = next((p for p in (routes.COMPUTED, REFLECTION) if what.startswith(p)), "")
    home = _home(what[len(prefix):])
    return [what] if home is None else [what, prefix + home]


_MISSING = object()


@functools.lru_cache(maxsize=4096)
def _home(name: str) -> str | None:
    """Where the object a dotted name under the course's own package (``course_utils``, safe
    and cheap to import in the grader: no framework at import time) is defined, when another
    module re-exports it: a module's ``__name__``, a function's or class's ``__module__`` and
    ``__qualname__``, other values named in the module they were read from; the rest of the
    name (an attribute the judge cannot look up, of a value a call made) kept. None when it is
    the name itself, outside the package, or in the grader's own machinery.

    The libraries the routes name (PyTorch, TensorFlow, JAX) are not imported for this: seconds
    per grading process, and code of theirs run in the grader; their routes name the paths
    learners spell (``routes.FRAMEWORKS`` holds whole frameworks where paths multiply)."""
    import importlib
    import importlib.util
    import types

    if not name.startswith("course_utils.") or matches(name, "course_utils.grading"):
        return None
    parts = name.split(".")
    try:
        obj: Any = importlib.import_module("course_utils")
    except Exception:
        return None
    home, k = "course_utils", 1
    while k < len(parts):
        part, found = parts[k], _MISSING
        if isinstance(obj, types.ModuleType):
            found = obj.__dict__.get(part, _MISSING)  # no module __getattr__ run
            sub = f"{obj.__name__}.{part}"
            if found is _MISSING and part != "__main__" and not matches(
                    sub, "course_utils.grading"):
                try:
                    found = importlib.import_module(sub) if importlib.util.find_spec(sub) \
                        else _MISSING
                except Exception:
                    found = _MISSING
        elif isinstance(obj, type):
            found = next((c.__dict__[part] for c in obj.__mro__ if part in c.__dict__), _MISSING)
        if found is _MISSING:
            break
        obj, k = found, k + 1
        if isinstance(obj, types.ModuleType):
            home = obj.__name__
        elif isinstance(getattr(obj, "__module__", None), str) \
                and isinstance(getattr(obj, "__qualname__", None), str) \
                and isinstance(obj, type | types.FunctionType):
            home = f"{obj.__module__}.{obj.__qualname__}"
        else:
            home = f"{home}.{part}"
    home = ".".join([home, *parts[k:]])
    return None if home == name else home


def _templates_and_answers(canonical: Sequence[Mapping[str, Any]]
                           ) -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    """Per exercise: the lines its cells give the learner around the answer (the released
    template: a hiding construct there is the course's, as 10.4's `globals().get(name, '?')`,
    not the learner's), and its canonical answer cells' code (for ``copies``)."""
    from course_utils.grading.format import exercise_id, is_solution, strip_solutions

    given: dict[str, set[str]] = {}
    solutions: dict[str, list[str]] = {}
    for c in canonical:
        if c.get("cell_type") == "code" and is_solution(c):
            source, ex = str(c.get("source", "")), exercise_id(c)
            template = _python(strip_solutions(source, ex))
            given.setdefault(ex, set()).update(
                line.strip() for line in template.splitlines() if line.strip())
            solutions.setdefault(ex, []).append(_python(source))
    return given, solutions


def _copied(exercise: str, answer: Sequence[Analysis], tagged: Mapping[int, str | None],
            routes_: Iterable[str], canonical: Sequence[str]) -> list[tuple[Finding, str]]:
    """The course's own code for the exercise pasted: it reaches nothing, it is a copy. An
    earlier exercise's cells the answer uses (02.5 calls 02.2's `gradients`) are judged as that
    exercise's answer, against that exercise's functions. Only against the course's solutions
    (``judge``'s ``stubs``): graded against the exercises' stubs (a learner's own release), an
    honest answer written like the course's function could not be told from a copy."""
    trees = [t for found in answer for t in found.trees if tagged.get(t[0]) in (exercise, None)]
    return [(Finding(c.cell, c.line, copies.COPY + c.dotted), c.dotted)
            for c in copies.copies(trees, routes_, canonical)]


def _given_line(f: Finding, code: Sequence[Mapping[str, Any]], given: set[str]) -> bool:
    """Whether a finding stands on a line the course's template of an exercise cell gives."""
    lines = _python(str(code[f.cell].get("source", ""))).splitlines() \
        if 0 <= f.cell < len(code) else []
    return 0 < f.line <= len(lines) and lines[f.line - 1].strip() in given


def _solution_cells(code: Sequence[Mapping[str, Any]]) -> Iterable[int]:
    from course_utils.grading.format import is_solution

    return (i for i, cell in enumerate(code) if is_solution(cell))


def _loads(checks: Iterable[str]) -> set[str]:
    """The names an exercise's check cells use (the answer's interface: ``run``, ``VJP``)."""
    return set(_check_loads(tuple(checks)))


@functools.lru_cache(maxsize=512)
def _check_loads(checks: tuple[str, ...]) -> frozenset[str]:
    loads: set[str] = set()
    for source in checks:
        loads |= analyse(source).loads
    return frozenset(loads)


def _answer_cells(exercise: str, learner: list[tuple[int, str | None, Analysis]],
                  solution_cells: set[int] = frozenset(), check_loads: set[str] = frozenset()
                  ) -> list[Analysis]:
    """The analyses of an exercise's answer: its solution cells, and in the learner's cells
    (those added after them, before the next exercise's, and the earlier ones) the statements
    that define or change a name the checks or the answer use (followed until nothing new is
    added). A scratch cell that compares the answer with a library (``torch.autograd.grad`` of
    the same function, after 01.2's rules) is not the answer; one that redefines what the checks
    call is."""
    own = [k for k, (_, ex, _) in enumerate(learner) if ex == exercise]
    if not own:
        return []
    whole_own = [k for k in own if learner[k][0] in solution_cells] or own
    loads: set[str] = set(check_loads)
    for k in whole_own:
        loads |= learner[k][2].loads
    # In an earlier cell, only the statements that define (or change in place) a name the
    # answer uses count: the example runs after another exercise's function (02.2's
    # `evaluate([dp, dq], ...)`) are that exercise's, not this one's.
    earlier = [(k, j, part) for k, (_, _, found) in enumerate(learner)
               if k not in whole_own and (k < max(own) or k in own)
               for j, part in enumerate(found.parts or [found])]
    whole = {k for k, (_, _, found) in enumerate(learner) if found.problem and k <= max(own)}
    chosen: set[tuple[int, int]] = set()
    changed = True
    while changed:
        changed = False
        for k, j, part in earlier:
            if (k, j) not in chosen and (part.defines | part.mutates) & loads:
                chosen.add((k, j))
                loads |= part.loads
                changed = True
    parts = {k: [part for kk, j, part in earlier if kk == k and (kk, j) in chosen]
             for k in {k for k, _ in chosen}}
    out = []
    for k in sorted(set(whole_own) | set(parts) | whole):
        out += [learner[k][2]] if k in whole_own or k in whole else parts[k]
    return out


# -- scoring ----------------------------------------------------------------------------------


def _where(f: Finding, labels: Sequence[str]) -> str:
    label = labels[f.cell] if f.cell < len(labels) else f"code cell {f.cell + 1}"
    return f"{label}, line {f.line}"


def _shown(name: str) -> str:
    if name == routes.COMPLEX_LITERAL:
        return "a complex literal (1j)"
    if name == routes.COMPLEX_DTYPE:
        return "a complex dtype"
    if name == routes.FORGED_IDENTITY:
        return ("code given another module's name (__module__, __qualname__, the __name__ of "
                "its namespace, or a library's file name)")
    if name == routes.HIDDEN_IMPORT:
        return "an import of a computed name"
    if name == routes.HIDDEN_GETATTR:
        return "getattr (or attrgetter, vars) handed around as a value, not called by name"
    if name.startswith(routes.COMPUTED):
        return ("an attribute read by a computed name (getattr, vars(...)[key], attrgetter) on "
                f"{name[len(routes.COMPUTED):] or 'an object'}")
    if name.startswith(REFLECTION):
        return (f"reflection on {name[len(REFLECTION):]}, which hands out every attribute "
                "without naming one: vars, __dict__, dataclasses.astuple/asdict, getmembers")
    if name in routes.UNREADABLE:
        return name.removeprefix("builtins.")
    if name == routes.LIBRARY_WRITE:
        return ("code written into a library's namespace (an attribute of its module or class "
                "set, by assignment, setattr or its __dict__)")
    return name.lstrip(".") if name.startswith(".") else name


def limit(points: float, possible: float, found: Judgement | None) -> float:
    """The most an exercise may score given its static judgement: 0 when its answer reaches
    the grader's machinery, half its points when it reaches a forbidden route (for the audit,
    which scores variants itself; ``apply`` for a graded notebook)."""
    if found is None:
        return points
    if found.machinery:
        return 0.0
    return min(points, possible / 2) if found.forbidden else points


def apply(results: Sequence[Any], judgements: Mapping[str, Judgement],
          labels: Sequence[str]) -> None:
    """Score ``results`` (``report.ExerciseResult``) by the static judgement, in place."""
    for result in results:
        found = judgements.get(result.exercise)
        if found is None:
            continue
        most = limit(result.points, result.possible, found)
        if found.machinery:
            f = found.machinery[0]
            text = (f"your answer reaches the grader's machinery ({_shown(f.what)}, at "
                    f"{_where(f, labels)}): this exercise scores 0")
            if found.machinery_earlier:
                text = (f"code before this exercise's checks reaches the grader's machinery "
                        f"({_shown(f.what)}, at {_where(f, labels)}): every report after it "
                        "could be forged, so this exercise scores 0 too")
            result.points, result.status, result.message = most, "tampered", text
            result.notes.append(text)
        elif found.forbidden:
            f, route = found.forbidden[0]
            home = _home(f.what) if not f.what.startswith((routes.COMPUTED, REFLECTION)) else None
            reached = _shown(f.what) + (f", that is {home}" if home else "")
            text = (f"a shortcut: your answer reaches {reached} (at {_where(f, labels)}), "
                    f"which exercise {result.exercise} asks you to do without "
                    f"({_shown(route)}): at most half the points")
            if route in routes.INSTEAD:  # what to use instead, where the route does not say
                text += f"; instead, {routes.INSTEAD[route]}"
            if route in routes.UNREADABLE or f.what.startswith((routes.COMPUTED, REFLECTION)):
                text = (f"your answer hides what it reaches ({_shown(f.what)}, at "
                        f"{_where(f, labels)}): the grader cannot read whether it takes a route "
                        f"exercise {result.exercise} asks you to do without, so it scores at most "
                        "half the points; name in your code what it uses")
            if f.what.startswith(copies.COPY):
                text = (f"a shortcut: your answer is a copy of the course's own {route} (from "
                        f"{_where(f, labels)}; renamed or rearranged, it is the same code), "
                        f"which exercise {result.exercise} asks you to write yourself: at most "
                        "half the points")
            if most < result.points:
                result.points, result.status, result.message = most, "fail", text
            result.notes.append(text)
        hidden = list(dict.fromkeys(f"{f.what} at {_where(f, labels)}"
                                    for f in found.hiding))
        if hidden:
            result.notes.append("for the instructor: the answer uses constructs that hide what "
                                "it reaches: " + "; ".join(hidden[:8])
                                + (" ..." if len(hidden) > 8 else ""))
        for problem in found.problems:
            result.notes.append(f"for the instructor: an answer cell of {result.exercise} "
                                f"could not be read by the static judge ({problem.what})")
