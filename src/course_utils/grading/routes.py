"""The routes an answer must not take, kept where no notebook cell can rebind them (issue 36).

Two readers use these tuples:

- check cells import them *in the check itself* (``from course_utils.grading.routes import
  ORDERING``) and hand them to ``forbid``: a name the learner's notebook rebinds (``ORDERING =
  ()`` in an answer cell emptied 01.1's ``forbid``) changes nothing, and rebinding the module's
  own entry is tampering (this module is in the tamper probe's baseline);
- the grader's static judge (``static.py``) reads the answer cells' source and caps an exercise
  whose answer reaches one of its routes (``FORBIDDEN``, plus the string literals of the
  ``forbid(...)`` calls in the exercise's canonical checks, plus the package's own answers from
  ``answers_in_package``).

A route is a dotted name (``"torch.autograd"``: the module and everything in it), a shell
pattern (``"numpy.complex*"``), ``".attr"`` (that attribute of any object: ``".grad_fn"``), or
one of the pseudo-names the static judge gives what has no dotted name (``COMPLEX_LITERAL``:
``1j``; ``COMPLEX_DTYPE``: ``dtype="complex128"``).
"""

from __future__ import annotations

#: The library's and other frameworks' automatic differentiation (lessons 01, 02, 04, 07).
AUTODIFF = ("course_utils.minigraph.gradients", "course_utils.minigraph.Tensor.backward",
            "course_utils.minigraph.autodiff.backprop", "course_utils.minigraph.eager.backprop",
            "torch.autograd.grad", "torch.autograd.backward", "torch.Tensor.backward",
            "jax.grad", "jax.vjp", "jax.value_and_grad", "jax.jacrev", "jax.jacfwd", "jax.jvp",
            "jax.linearize")
#: Symbolic differentiation: a computer algebra system derives the rule or the gradient graph
#: (third attack review: 02.5's second derivative from ``sympy.diff``, rebuilt as graph nodes, 4/4).
SYMBOLIC = ("sympy", "symengine", "autograd", "mpmath", "numdifftools", "findiff",
            "scipy.differentiate", "scipy.misc.derivative")
#: The frameworks, whole: the exercises on minigraph and the course's engine (lessons 01, 02, 04)
#: need none of them, and each has more doors to its autodiff and its graph utilities than a list
#: of functions can name (third attack review: 02.5's second derivative from jax.experimental.jet
#: rebuilt as engine nodes, 01.1's order from jax._src.util.toposort, 01.3's gradients from
#: torch._C._ImperativeEngine, 01.4's tangents from torch._make_dual). A scratch cell that
#: compares an answer with PyTorch is not the answer (``static._answer_cells``).
FRAMEWORKS = ("jax", "jaxlib", "flax", "tensorflow", "keras", "tf_keras", "torch", "functorch",
              *SYMBOLIC)
#: Forward mode done by a library (exercise 01.4).
FORWARD = ("torch.func.jvp", "torch.func.jacfwd", "torch.autograd.functional.jvp",
           "torch.autograd.forward_ad.make_dual", "course_utils.engine.backprop",
           "course_utils.engine_forward.jvp",
           *(f"course_utils.engine_forward.{op}_jvp"  # the course's own rules of 01.4
             for op in ("add", "mul", "tanh", "exp", "log", "matmul", "sum")))
#: A topological order a library works out (exercise 01.1).
ORDERING = ("graphlib.TopologicalSorter.prepare",  # first: reached through any alias
            "graphlib.TopologicalSorter", "networkx.topological_sort",
            "networkx.lexicographical_topological_sort", "networkx.topological_generations",
            "networkx.algorithms.dag.topological_generations")

COMPLEX_LITERAL = "literal:complex"
COMPLEX_DTYPE = "numpy.complex_dtype"
#: Complex numbers, where the point is a derivative rule (the complex step gives J t to
#: rounding with no derivative written).
COMPLEX = ("builtins.complex", "numpy.complex*", "numpy.csingle", "numpy.cdouble",
           "numpy.clongdouble", "numpy.clongfloat", "cmath", COMPLEX_LITERAL, COMPLEX_DTYPE)
#: Turning off the profiler a check measures call depth with (01.1's recursion check).
PROFILER = ("sys.setprofile", "sys.settrace", "threading.setprofile", "threading.settrace",
            "threading.setprofile_all_threads", "threading.settrace_all_threads")

#: Another thread: code run there is unseen by a check's profiler on the kernel's thread (01.1's
#: depth check; the second attack review ran the recursive walk in a `_thread` with a big stack).
THREADS = ("_thread", "threading.Thread", "threading.stack_size", "threading.Timer",
           "concurrent.futures.ThreadPoolExecutor", "concurrent.futures.thread")
#: The course's own walks of a graph, and what runs one: an order of the nodes (01.1's answer,
#: kept in the package as an earlier lesson's), the engine's and minigraph's runners and pruning.
#: Exercise 02.1 writes that walk (fourth attack review: engine.topo_order told that fed nodes
#: have no inputs did the pruning and the each-node-once walk, 6/6).
WALKS = ("course_utils.engine.topo_order", "course_utils.engine.evaluate",
         "course_utils.minigraph.Session", "course_utils.minigraph.session",
         "course_utils.minigraph.Interpreter", "course_utils.minigraph.interpreter",
         "course_utils.minigraph.autodiff")
#: minigraph's op records, whatever hands one out (an Op's vjp rule can be called): exercise 02.4
#: writes silu's rule, and the library's rules of mul and sigmoid chained would derive it (fourth
#: attack review: ``dataclasses.astuple(mg.get_op("mul"))[3]`` and ``vars(mg.get_op("mul"))``,
#: 4/4 each). Its checks also see which built-in rules run (``checks.rules_run``). Of the
#: ops module only the table, get_op and its private helpers (the built-in rules): the static judge
#: matches a name at its home too, and ``mg.register_op``/``mg.Op``, which every answer uses, live
#: there.
OP_RECORDS = ("course_utils.minigraph.OPS", "course_utils.minigraph.ops._*",
              "course_utils.minigraph.get_op", "course_utils.minigraph.codegen._BUILTINS",
              *(f"course_utils.minigraph.{module}.OPS" for module in (
                  "ops", "graph", "codegen", "interpreter", "memory", "serialize", "session",
                  "passes.cse", "passes.dce", "passes.fold", "passes.fuse")),
              *(f"course_utils.minigraph.{module}.get_op" for module in (
                  "ops", "graph", "functional")))
#: Python run on the host from a JAX program (lesson 13's exercises ask for the program itself).
HOST_CALLS = ("jax.pure_callback", "jax.experimental.io_callback",
              "jax.experimental.host_callback", "jax.experimental.pure_callback")
#: What tells an answer whether JAX is tracing it, and so lets it give the program a check
#: inspects one computation and the values a check scores another (fourth attack review: 13.5's
#: ``isinstance(X, jax.core.Tracer)`` chose vmap under make_jaxpr and a Python loop of jax.grad on
#: concrete arrays, 6/6): the tracer types and the trace state, and JAX's errors about tracers
#: (caught, they tell a tracer from an array). Lesson 13's answers need none of them.
TRACE_STATE = ("jax.core", "jax._src", "jax.interpreters", "jax.errors",
               "jax.ensure_compile_time_eval", "jax.extend.core.find_top_trace",
               "jax.extend.core.take_current_trace", "jax.extend.core.set_current_trace",
               "jax.extend.core.get_opaque_trace_state", "jax.extend.core.concrete_or_error",
               "jax.extend.core.TraceTag", "jax.extend.core.unsafe_*")
#: What defines a derivative rule in JAX: reverse mode then runs the rule instead of going
#: through the code it stands for (fourth attack review: 13.3's while_loop inside a custom_vjp
#: whose backward is a hand-written BPTT, 5/5, where the exercise asks jax.grad to go through
#: the learner's loop).
CUSTOM_RULES = ("jax.custom_vjp", "jax.custom_jvp", "jax.custom_gradient",
                "jax.custom_derivatives", "jax.custom_transpose", "jax.closure_convert",
                "jax.lax.custom_root", "jax.lax.custom_linear_solve", "jax.extend",
                ".defvjp", ".defjvp", ".defjvps", ".defvjp_all")
#: torch.compile's settings of which dimensions are dynamic, changed for the whole process (by
#: assignment, setattr, update, load_config, or a patch entered and never left): they say for
#: every dimension of every function compiled after them what exercise 08.5 asks the answer to
#: say for one dimension of one input, and stay set for what runs next (fourth attack review:
#: ``torch._dynamo.config.assume_static_by_default = False``, 3/3). A ``with
#: torch._dynamo.config.patch(...)`` block, lesson 08's own idiom, names none of them and is
#: undone when it ends (the course's fixture unusual-dynamic-by-config). Other exercises may set
#: settings like any user (``SETTINGS``).
DYNAMIC_SETTINGS = (*(f"torch._dynamo.config.{name}" for name in (
    "assume_static_by_default", "automatic_dynamic_shapes", "automatic_dynamic_shapes_mark_as",
    "dynamic_shapes", "force_parameter_static_shapes", "force_nn_module_property_static_shapes",
    "specialize_int", "specialize_float", "allow_ignore_mark_dynamic", "update", "load_config",
    "_config", "__setattr__", "__dict__")),
    "torch.fx.experimental._config", "torch.compiler.config", ".__enter__", ".enter_context")
#: What to use instead of a route, where the route alone does not say (the static judge adds it
#: to its message).
INSTEAD = {route: ("mark the dimension that varies on the input itself, before the first call "
                   "(torch._dynamo.mark_dynamic(x, 0)): a setting changed for the whole process "
                   "says that every dimension varies, for every function compiled after it")
           for route in DYNAMIC_SETTINGS}
#: An optimizer that builds a TensorFlow model's gradients and update for it (exercise 06.1 asks
#: for them by hand: ``v1.gradients``, ``assign_sub``, ``tf.group``).
TF_OPTIMIZERS = ("tensorflow.compat.v1.train", "tensorflow.train", "tensorflow.optimizers",
                 "tensorflow.keras.optimizers", "keras.optimizers", "tf_keras.optimizers",
                 "tensorflow.python.training", "tensorflow.python.keras.optimizer*",
                 "keras.src.optimizers", "tf_keras.src.optimizers")

#: A name taken from another module: an answer that gives its class or function another
#: ``__module__`` or ``__qualname__`` (in a class body, by assignment, in ``type(...)``'s dict or
#: with ``setattr``) passes for library code to a check that asks where code comes from (08.1:
#: a leaf module claiming ``torch.nn.modules.misc`` scored 4/4).
FORGED_IDENTITY = "forged:__module__"
#: Another process: what runs there is out of the reach of every instrument a check puts in the
#: kernel (11.5: PyTorch in a subprocess, unseen by the aten-op recorder, scored 5/5).
PROCESSES = ("subprocess", "multiprocessing", "concurrent.futures.ProcessPoolExecutor",
             "os.system", "os.popen", "os.fork", "os.forkpty", "os.exec*", "os.spawn*",
             "os.posix_spawn*", "pty", "asyncio.create_subprocess_exec",
             "asyncio.create_subprocess_shell")
#: Code written into a library's namespace: an attribute of one of its modules or classes set
#: or deleted (``torch.nn.functional.f = f``, ``nn.Module.__call__ = ...``), by ``setattr`` or
#: ``object.__setattr__``, or through the namespace's dict (``vars(torch)[...]``,
#: ``torch.__dict__.update(...)``). A check that asks whose code runs believes what lives there
#: (08.1: a Python function put into ``torch.nn.functional`` and wrapped by fx was a graph node
#: that "is torch": 4/4); and what a check calls from there is the answer's, not the library's.
LIBRARY_WRITE = "write:library"
#: The libraries (and the course's package) whose namespaces an answer must leave alone, and
#: the standard modules a check may trust as their own (08.1 trusts ``operator`` and ``math``).
LIBRARIES = ("torch", "functorch", "tensorflow", "keras", "tf_keras", "jax", "jaxlib", "flax",
             "optax", "numpy", "scipy", "onnx", "onnxruntime", "onnxscript", "course_utils",
             "builtins", "math", "operator", "_operator", "functools", "types")
#: A library's settings, which an answer may set like any user (``torch._dynamo.config.x = ...``,
#: ``torch.backends.cudnn.benchmark = True``): not a route.
SETTINGS = ("*.config", "*.config.*", "*._config", "*._config.*", "torch.backends.*")
#: Code whose reach cannot be read from its source: a module imported by a computed name, a
#: module loaded again from its file (a second copy escapes every ``forbid`` on the first), code
#: run from a string. Any of them can reach an exercise's forbidden routes unseen (third attack
#: review: ``importlib.import_module("sym" + "py")`` for 02.5, a private copy of minigraph's ONNX
#: reader for 11.1 and of ``course_utils.serving`` for 11.7), and no answer needs them.
HIDDEN_IMPORT = "hidden:import"
#: ``getattr`` (or attrgetter, reflection) used as a value rather than called by name:
#: ``map(getattr, [mg], ["compile_c"])``, ``(lambda f: f(sys, "modules"))(getattr)``: neither
#: the object nor the name it reads can be read (fourth attack review: 15.1, 13.4, 11.1, 11.4).
HIDDEN_GETATTR = "hidden:getattr"
UNREADABLE = (HIDDEN_IMPORT, HIDDEN_GETATTR, "builtins.exec", "builtins.eval", "builtins.compile",
              "importlib.util", "importlib.machinery", "importlib.reload", "importlib._bootstrap",
              "importlib._bootstrap_external", "runpy", "imp", "zipimport")
#: ``getattr`` with a computed name on a library's module or class, as ``COMPUTED + "tensorflow
#: .compat.v1"``: a route of an exercise when one of its routes lies under that module (06.1:
#: ``getattr(v1, "tr" + "ain")`` reached the optimizers; 14.1: ``getattr(mg.onnx, "EXPORT" +
#: "ERS")`` the course's MaxPool mapping), or, on any object, when a route is an attribute of
#: any object (07.2's ``.backward``).
COMPUTED = "computed:"
#: What switches off PyTorch's dispatch modes, the checks' op recorder among them (third attack
#: review: quantize_per_tensor for 11.4 and SiLU's own kernels for 07.1 inside
#: ``_disable_current_modes``, 4/4 and 5/5).
DISPATCH_ESCAPES = ("torch.utils._python_dispatch", "torch._C._DisableTorchDispatch",
                    "torch._C._pop_torch_dispatch_stack", "torch._C._unset_dispatch_mode",
                    "torch._C._ExcludeDispatchKeyGuard", "torch._C._set_dispatch_mode",
                    "torch._C._disabled_torch_dispatch_impl")
#: Ways to take an array's or a tensor's numbers where the checks' recorders of a derivative
#: rule do not follow them (``checks.ComplexUse``'s watched arrays, ``checks.AtPoint``'s dispatch
#: mode): as Python numbers, bytes or raw memory. A rule written with array or tensor operations
#: needs none of them; a rule that evaluates its op at x + s t on numbers taken out so is a
#: difference quotient the recorders cannot see (issue 36, round 4).
NUMBERS_OUT = (".tolist", ".item", ".tobytes", ".ctypes", ".data_ptr", "builtins.memoryview",
               "ctypes", "struct", "pickle", "marshal", "copyreg", "decimal", "fractions")
#: ... and for numpy arrays: a plain array over the same memory.
ARRAYS_OUT = ("numpy.frombuffer", "numpy.lib.stride_tricks", "numpy.ctypeslib")
#: ... and for tensors: numpy, Python's math and PyTorch's ways in and out of numpy and memory
#: (07.1's SiLU is written in torch; a Richardson extrapolation of central differences of the
#: forward scored 4/5 in the third attack review).
TENSORS_OUT = ("numpy", "math", "statistics", ".numpy", ".untyped_storage", ".storage",
               "torch.from_numpy", "torch.frombuffer")
#: Routes of every exercise: no answer needs them, and each hides what it does from the checks.
EVERY = (FORGED_IDENTITY, LIBRARY_WRITE, *PROCESSES, *UNREADABLE, *DISPATCH_ESCAPES)

#: Exercise id -> the routes the static judge holds its answer to, besides its checks'
#: ``forbid`` literals and the package's own answers.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "01.1": ("graphlib", "networkx", *WALKS, *PROFILER, *THREADS, "threading", *FRAMEWORKS),
    "01.2": (*AUTODIFF, *COMPLEX, *FRAMEWORKS),
    "01.3": (*AUTODIFF, *FRAMEWORKS),
    "01.4": (*AUTODIFF, *FORWARD, *COMPLEX, *FRAMEWORKS, *NUMBERS_OUT, *ARRAYS_OUT),
    "02.1": ("graphlib", "networkx", *WALKS, *FRAMEWORKS),
    # Reverse mode and derivative rules written by hand: the complex step would give the
    # derivatives to rounding with no rule written (04.2 replayed a tape's records on x + ih).
    "02.2": (*COMPLEX, *FRAMEWORKS),
    # 02.4 derives silu's rule: minigraph's own rules of mul and sigmoid chained (the product
    # rule done by the library's rules, third and fourth attack reviews: 4/4) would derive it
    # instead; the profiler its checks see the rules with runs on the kernel's thread.
    "02.4": ("course_utils.minigraph.gradients", "course_utils.minigraph.autodiff", *COMPLEX,
             *FRAMEWORKS, ".vjp", *OP_RECORDS, *PROFILER, *THREADS),
    "02.5": (*COMPLEX, *FRAMEWORKS),
    "04.2": (*COMPLEX, *FRAMEWORKS),
    # 03.2 works out what is live itself: a Session's plan (or anything else that prunes with
    # session.prune, the function that answers it and that releases keep) would do it for the
    # answer (third attack review: Session.plan's nodes copied, 4/4).
    # 03.2's liveness walk: a Session's pruning, and any other walk that finds what an output
    # needs (fourth attack review: minigraph.autodiff._toposort gave the live set, 4/4).
    "03.2": ("graphlib", "networkx", *WALKS, "course_utils.minigraph.codegen",
             "course_utils.minigraph.profile"),
    # 06.1 builds the gradients with v1.gradients and the update with assign ops: a TF
    # optimizer's compute_gradients/apply_gradients or minimize does both (attack review: 5/5).
    "06.1": TF_OPTIMIZERS,
    # 07.1's answer subclasses torch.autograd.Function: the autograd that would do its
    # backward for it is what is forbidden.
    "07.1": (".grad_fn", "torch.autograd.grad", "torch.autograd.backward",
             "torch.autograd.functional", "torch.autograd.forward_ad", "torch.func",
             "torch.Tensor.backward", "torch.nn.SiLU", "torch.nn.functional.silu",
             "torch.ops.aten.silu*", "torch._ops.ops.aten.silu*", "torch._C._nn.silu*",
             "torch._C._VariableFunctions.silu*", *COMPLEX,
             # another framework's vjp (third attack review: jax.vjp of x * sigmoid(x), 5/5)
             "jax", "jaxlib", "tensorflow", "keras", *SYMBOLIC,
             # numbers taken out of PyTorch, where the dispatch mode that reads where a
             # nonlinear op is evaluated (checks.AtPoint) does not follow them
             *NUMBERS_OUT, *TENSORS_OUT),
    # 07.2 walks grad_fn.next_functions itself: the engine that would walk the graph for it
    # (backward run under the profiler, its evaluate_function events counted: second attack
    # review, 3/3) is what is forbidden.
    "07.2": (".backward", "torch.autograd.grad", "torch.autograd.backward", "torch.Tensor.backward",
             "torch.profiler", "torch.autograd.profiler", "torch.autograd.profiler_util",
             "torch._C._autograd", "torch.autograd._engine_run_backward"),
    # 07.5 writes the double backward by hand: forward mode through its aten ops or private
    # bindings is the forward_ad its checks forbid (second attack review: aten._make_dual 4/5).
    "07.5": ("torch.ops.aten._make_dual*", "torch.ops.aten._unpack_dual*", "torch._VF._make_dual*",
             "torch._VF._unpack_dual*", "torch._C._functions", "torch.autograd.forward_ad"),
    # 11.1 builds the MLP with minigraph: minigraph's ONNX importer would build it from a file
    # written with onnx.helper or torch.onnx.
    "11.1": ("course_utils.minigraph.onnx", "course_utils.minigraph.register_op"),
    # 11.4 and 11.5 work out the scale, zero point and integers in numpy: ONNX Runtime's
    # quantization tools would do all three (and for 11.4 TensorFlow's fake quantization).
    # (Third attack review: PyTorch's quantize_per_tensor on a worker thread, or inside
    # _disable_current_modes, where the checks' aten recorder does not see it, 4/4 and 5/5; ONNX
    # Runtime's QuantizeLinear or DynamicQuantizeLinear node run in a session.) The exercises say
    # "write it with numpy": another framework in the answer is the route.
    "11.4": ("onnxruntime", "onnx", "tensorflow", "torch", "jax", "keras"),
    "11.5": ("onnxruntime", "onnx", "tensorflow", "torch", "jax", "keras"),
    # 08.5 says that one dimension varies, on the input: a setting of torch.compile changed for
    # the whole process would say it of every dimension, for every function compiled after it.
    "08.5": DYNAMIC_SETTINGS,
    # Lesson 13's programs compute in the program: the warm-up (13.2), the loop and its
    # gradient (13.3), the root and its rule (13.4; its text names the closed forms), not Python
    # on the host; and an answer does the same whether JAX traces it or not (TRACE_STATE).
    # 13.3's gradient is reverse mode through the learner's loop, not a rule (CUSTOM_RULES).
    "13.2": (*HOST_CALLS, *TRACE_STATE),
    "13.3": (*HOST_CALLS, *TRACE_STATE, *CUSTOM_RULES),
    # 13.4's rule is the derivative the learner writes from the solution: JAX's own
    # differentiation inside the rule (jax.jvp of a Newton step taken from the solution: third
    # attack review, 6/6) would derive it instead.
    "13.4": ("jax.numpy.cbrt", "jax.lax.cbrt", "numpy.cbrt", "scipy.special.cbrt", *HOST_CALLS,
             "jax.jvp", "jax.vjp", "jax.linearize", "jax.grad", "jax.value_and_grad",
             "jax.jacfwd", "jax.jacrev", "jax.jacobian", "jax.hessian", "jax.linear_transpose",
             "jax.experimental.jet", "jax.experimental.ode", "jax._src", "jax.interpreters",
             "jax.extend", "torch", "tensorflow", *SYMBOLIC, *TRACE_STATE),
    # 13.5's gradients come from vmap of grad: vmap's own rule replaced (custom_batching's
    # sequential_vmap is a loop) or a tracer test would let the values come from elsewhere.
    "13.5": (*HOST_CALLS, *TRACE_STATE, "jax.custom_batching"),
    # 15.1 writes the C of a fused loop: the course's compiler (its op -> C table, emit_loop)
    # would write it for the answer.
    "15.1": ("course_utils.minigraph.compile_c",),
}
