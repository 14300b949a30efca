"""minigraph: a small but real graph framework, eager and static, built on one op table.

>>> import course_utils.minigraph as mg
>>> w = mg.tensor([[1.0], [2.0]], requires_grad=True)      # eager: runs now
>>> loss = mg.mean((mg.tensor([[3.0, 4.0]]) @ w) ** 2)
>>> loss.backward(); w.grad
tensor([[66.],
        [88.]], dtype=float32)
>>> with mg.Graph().as_default() as g:                     # static: build, then run
...     x = mg.placeholder((None, 2), name="x")
...     v = mg.Variable([[1.0], [2.0]], name="v")
...     loss = mg.mean((x @ v) ** 2, name="loss")
...     (dv,) = mg.gradients(loss, [v])
...     init = mg.global_variables_initializer()
>>> with mg.Session(g) as sess:
...     _ = sess.run(init)
...     sess.run(dv, feed_dict={x: [[3.0, 4.0]]})
array([[66.],
       [88.]], dtype=float32)

Files, one concern each: ``ops.py`` (the op table), ``shapes.py`` (shapes, dtypes and each
op's shape rule), ``attrs.py`` (what each op's attrs may hold), ``conv.py`` (convolution and
pooling on numpy strides), ``graph.py`` (Node, Graph, builders), ``eager.py`` (Tensor, tape),
``autodiff.py`` (the backward walk, ``gradients``), ``functional.py`` (``apply`` and the op
functions), ``operators.py`` (``+``, ``@``, ...), ``interpreter.py``, ``session.py``,
``errors.py``; ``tracing.py`` (``mg.function``), ``control_flow.py`` (``cond``,
``while_loop``), ``autograph.py`` (``if``/``while`` to cond/while_loop), ``serialize.py``
(``save``, ``load``), ``optim.py`` (``mg.optim.SGD``, ``mg.optim.Adam``).
"""

from .autodiff import gradients
from .eager import Tensor, is_grad_enabled, no_grad, tensor
from .errors import (
    ArgumentError,
    CompileError,
    DTypeError,
    ExecutionError,
    FeedError,
    GradientError,
    GraphError,
    MinigraphError,
    MissingFeedError,
    SerializationError,
    ShapeError,
    TracingError,
    UninitializedVariableError,
    UnknownOpError,
)
from .functional import (
    abs,
    add,
    apply,
    avg_pool2d,
    broadcast_like,
    broadcast_to,
    cast,
    clip,
    concat,
    conv2d,
    cross_entropy,
    div,
    equal,
    exp,
    expand_dims,
    getitem,
    getitem_grad,
    greater,
    greater_equal,
    identity,
    less,
    less_equal,
    log,
    log_softmax,
    logsumexp,
    matmul,
    max,
    max_pool2d,
    maximum,
    mean,
    minimum,
    mul,
    neg,
    not_equal,
    one_hot,
    ones_like,
    pow,
    relu,
    reshape,
    sigmoid,
    size,
    softmax,
    sqrt,
    square,
    squeeze,
    sub,
    sum,
    tanh,
    transpose,
    unbroadcast,
    var,
    where,
)
from .graph import (
    Graph,
    Node,
    Variable,
    assign,
    assign_sub,
    constant,
    get_default_graph,
    global_variables_initializer,
    group,
    placeholder,
    reset_default_graph,
)
from .interpreter import Interpreter
from .ops import OPS, Op, get_op, register_op
from .session import Session
from .shapes import broadcast_rule, same_shape_rule

# isort: split
# optimization, codegen, memory, profiling
from .codegen import CompiledGraph, codegen
from .compile_c import CompiledC, compile_c
from .memory import MemoryPlan, memory_plan
from .passes import optimize
from .profile import Profile, profile

# isort: split
# tracing, control flow, saving
from . import (
    autograph,  # noqa: F401 (installs itself as mg.function's autograph=True)
    onnx,  # noqa: F401 (mg.onnx.export, mg.onnx.load; imports the onnx package when used)
    optim,
)
from .control_flow import cond, while_loop
from .serialize import LoadedFunction, load, save
from .tracing import ConcreteFunction, Function, function

__all__ = [
    # errors
    "MinigraphError", "ShapeError", "DTypeError", "GraphError", "UnknownOpError", "FeedError",
    "MissingFeedError", "UninitializedVariableError", "GradientError", "TracingError",
    "SerializationError", "ExecutionError", "ArgumentError", "CompileError",
    # the op table
    "Op", "OPS", "register_op", "get_op", "apply", "same_shape_rule", "broadcast_rule",
    # eager mode
    "Tensor", "tensor", "no_grad", "is_grad_enabled",
    # static mode
    "Graph", "Node", "get_default_graph", "reset_default_graph", "placeholder", "Variable",
    "constant", "assign", "assign_sub", "group", "global_variables_initializer", "gradients",
    "Session", "Interpreter",
    # ops
    "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "tanh", "sigmoid", "relu",
    "identity", "maximum", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "where", "cast", "sum", "mean", "max", "softmax", "log_softmax", "cross_entropy", "one_hot",
    "matmul", "reshape", "transpose", "broadcast_to", "getitem", "concat", "expand_dims",
    "squeeze", "ones_like", "size", "unbroadcast", "broadcast_like", "getitem_grad",
    "minimum", "square", "abs", "clip", "logsumexp", "var", "conv2d", "max_pool2d", "avg_pool2d",
    # optimization, codegen, memory, profiling
    "optimize", "codegen", "CompiledGraph", "compile_c", "CompiledC", "memory_plan", "MemoryPlan",
    "profile", "Profile",
    # tracing, control flow, saving
    "function", "Function", "ConcreteFunction", "cond", "while_loop", "save", "load",
    "LoadedFunction", "optim",
]
