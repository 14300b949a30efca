"""The course's version of lesson 01's engine: graph nodes, an op table, a vjp table, backprop.

Lesson 01 has you write this engine yourself: the nodes, the order to visit them in, the forward
pass and the derivative rules. **Write your own there first**; this module is the course's answer,
kept in one place so that lessons 02-05 can ``from course_utils.engine import ...`` it instead of
printing it again (a printed engine would also print the answers to lesson 01's exercises).
The code that answers an exercise (01.1-01.3, 02.1, 02.2, 02.5) is marked ``### BEGIN SOLUTION
NN.k``: a class's release of the course withholds it until that lesson's solutions are released,
and raises :class:`course_utils.withheld.AnswerWithheld` there, naming the exercise whose answer
(your own) to use instead.

What is here, in the order lesson 01 builds it:

- :class:`Node`: one value of a graph, ``op`` applied to the values of ``inputs``;
  ``x + y``, ``x @ y`` and the other operators build nodes (:class:`Operators`);
- :func:`placeholder`, :func:`constant`, :func:`as_node` and :func:`apply`: ``apply`` builds a node
  when any input is a node, and computes the op at once when none is (so the op functions work on
  plain arrays too);
- ``IMPL``: op name -> a numpy function computing it;
- the op functions (:func:`add`, :func:`mul`, :func:`tanh`, :func:`matmul`, :func:`reduce_sum`,
  ...);
- ``VJP``: op name -> the vector-Jacobian product rule, ``(g, out, *inputs, **attrs)`` -> one
  gradient per input (``None`` where an input gets no gradient). The rules call the op
  functions, so on arrays they compute numbers and on nodes they build the gradient graph;
- :func:`topo_order` (without recursion, so a 20,000-node chain is fine), :func:`evaluate` and
  :func:`backprop`;
- and lesson 02's additions, for the lessons after it: :func:`variable`, :func:`run` (computes only
  what the fetches need) and :func:`gradients` (reverse mode whose vjp rules build nodes);
- :func:`mlp_loss`, the course's MLP as lessons 02 and 04 write it, for lesson 05's capstone.

Lesson 04's eager mode (``Tensor``, the tape, ``backward``) is in :mod:`course_utils.tape`.

``IMPL`` and ``VJP`` are module-level dicts, shared by every importer: a lesson that registers a
new op (``IMPL["variable"] = ...``) adds it for everyone in that kernel, which is what a lesson
wants when it grows the engine. Copy them (``dict(IMPL)``) to experiment without side effects.

>>> x, w = placeholder("x"), placeholder("w")
>>> y = tanh(x * w)
>>> values = evaluate([y], {x: 0.5, w: 2.0})
>>> round(float(values[y]), 4)
0.7616
>>> grads = backprop(y, values)
>>> round(float(grads[w]), 4)  # (1 - tanh(1)^2) * x
0.21
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable

import numpy as np

_counters: collections.defaultdict[str, itertools.count] = collections.defaultdict(itertools.count)


class Operators:
    """x + y, x - y, x * y, x / y, x @ y, -x: each operator calls an op function."""

    __array_ufunc__ = None  # for `array * node`, numpy steps aside and Python calls __rmul__

    def __add__(self, other): return add(self, other)
    def __radd__(self, other): return add(other, self)
    def __sub__(self, other): return sub(self, other)
    def __rsub__(self, other): return sub(other, self)
    def __mul__(self, other): return mul(self, other)
    def __rmul__(self, other): return mul(other, self)
    def __truediv__(self, other): return div(self, other)
    def __rtruediv__(self, other): return div(other, self)
    def __matmul__(self, other): return matmul(self, other)
    def __rmatmul__(self, other): return matmul(other, self)
    def __neg__(self): return neg(self)


class Node(Operators):
    """One value of a graph: `op` applied to the values of `inputs` (other Nodes), with `attrs`.

    Nodes compare and hash by identity, so they can be dict keys (``values[node]``).
    """

    def __init__(self, op: str, inputs: Iterable[Node] = (), attrs: dict | None = None,
                 name: str | None = None):
        self.op, self.inputs, self.attrs = op, tuple(inputs), dict(attrs or {})
        self.name = name or f"{op}_{next(_counters[op])}"

    def __repr__(self) -> str:
        args = [f"%{x.name}" for x in self.inputs]
        args += [f"{k}={v!r}" for k, v in self.attrs.items() if k != "value" and v is not None]
        return f"%{self.name} = {self.op}({', '.join(args)})"


def placeholder(name: str) -> Node:
    """An input of the graph: its value comes from the `feed` of :func:`evaluate`."""
    return Node("placeholder", name=name)


def constant(value, name: str | None = None) -> Node:
    """A fixed value, kept in the node's attrs."""
    return Node("const", attrs={"value": np.asarray(value)}, name=name)


def as_node(x) -> Node:
    """`x` itself if it is a Node, else a constant holding it."""
    return x if isinstance(x, Node) else constant(x)


def apply(op: str, *inputs, **attrs):
    """Add a node if any input is a Node (building a graph); else compute the op now."""
    if any(isinstance(x, Node) for x in inputs):
        return Node(op, [as_node(x) for x in inputs], attrs)
    return IMPL[op](*inputs, **attrs)


# --- forward: what each op computes --------------------------------------------------------------

def sum_to(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum g down to `shape`: undo numpy's broadcasting.

    >>> sum_to(np.ones((4, 2, 3)), (2, 1)).tolist()
    [[12.0], [12.0]]
    """
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for axis, n in enumerate(shape):
        if n == 1 and g.shape[axis] != 1:
            g = g.sum(axis=axis, keepdims=True)
    return g


def logsumexp_impl(x, axis=-1):
    """log(sum(exp(x))) along `axis`, kept as a size-1 axis; shifted by the max so exp never
    overflows."""
    m = np.max(x, axis=axis, keepdims=True)
    return m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def broadcast_like_impl(g, x, axis=None):
    """g broadcast to x's shape; `axis` (the axis a sum removed) is put back first."""
    if axis is not None:
        g = np.expand_dims(g, axis)
    return np.broadcast_to(g, np.shape(x)).copy()


IMPL: dict[str, Callable] = {
    "const": lambda value: value,
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "neg": np.negative,
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "sign": np.sign,
    "relu": lambda x: np.maximum(x, 0.0),
    "matmul": np.matmul, "transpose": lambda x: np.swapaxes(x, -1, -2),
    "sum": lambda x, axis=None: np.sum(x, axis=axis),
    "size": lambda x, axis=None: np.float64(np.size(x) if axis is None else np.shape(x)[axis]),
    "logsumexp": logsumexp_impl,
    "ones_like": np.ones_like, "zeros_like": np.zeros_like,
    "unbroadcast": lambda g, x: sum_to(g, np.shape(x)),
    "broadcast_like": broadcast_like_impl,
}


# --- the op functions: on Nodes they build the graph, on arrays they compute ---------------------

def add(x, y): return apply("add", x, y)
def sub(x, y): return apply("sub", x, y)
def mul(x, y): return apply("mul", x, y)
def div(x, y): return apply("div", x, y)
def neg(x): return apply("neg", x)
def exp(x): return apply("exp", x)
def log(x): return apply("log", x)
def tanh(x): return apply("tanh", x)
def relu(x): return apply("relu", x)
def sign(x): return apply("sign", x)
def matmul(x, y): return apply("matmul", x, y)
def transpose(x): return apply("transpose", x)
def reduce_sum(x, axis=None): return apply("sum", x, axis=axis)
def size(x, axis=None): return apply("size", x, axis=axis)
def logsumexp(x, axis=-1): return apply("logsumexp", x, axis=axis)
def ones_like(x): return apply("ones_like", x)
def zeros_like(x): return apply("zeros_like", x)
def unbroadcast(g, x): return apply("unbroadcast", g, x)
def broadcast_like(g, x, axis=None): return apply("broadcast_like", g, x, axis=axis)
def reduce_mean(x, axis=None): return reduce_sum(x, axis) / size(x, axis)


# --- backward: one vector-Jacobian product per op ------------------------------------------------

# The seven rules exercise 01.2 asks for, one function each: their bodies are the exercise's
# answer, which a learner's release withholds until lesson 01's solutions are out
# (CONTRIBUTING.md, "Answers in the package").
def add_vjp(g, out, x, y):
    ### BEGIN SOLUTION 01.2
    return unbroadcast(g, x), unbroadcast(g, y)
    ### END SOLUTION


def mul_vjp(g, out, x, y):
    ### BEGIN SOLUTION 01.2
    return unbroadcast(g * y, x), unbroadcast(g * x, y)
    ### END SOLUTION


def exp_vjp(g, out, x):
    ### BEGIN SOLUTION 01.2
    return (g * out,)
    ### END SOLUTION


def log_vjp(g, out, x):
    ### BEGIN SOLUTION 01.2
    return (g / x,)
    ### END SOLUTION


def tanh_vjp(g, out, x):
    ### BEGIN SOLUTION 01.2
    return (g * (1.0 - out * out),)
    ### END SOLUTION


# matmul's rule, like lesson 01's, takes both operands with the same batch axes (or plain
# matrices): it does not sum a broadcast batch axis back down.
def matmul_vjp(g, out, x, y):
    ### BEGIN SOLUTION 01.2
    return g @ transpose(y), transpose(x) @ g
    ### END SOLUTION


def sum_vjp(g, out, x, axis=None):
    ### BEGIN SOLUTION 01.2
    return (broadcast_like(g, x, axis=axis),)
    ### END SOLUTION


VJP: dict[str, Callable] = {  # op -> (g, out, *inputs, **attrs) -> one gradient per input
    "add": add_vjp,
    "sub": lambda g, out, x, y: (unbroadcast(g, x), unbroadcast(-g, y)),
    "mul": mul_vjp,
    "div": lambda g, out, x, y: (unbroadcast(g / y, x), unbroadcast(-g * out / y, y)),
    "neg": lambda g, out, x: (-g,),
    "exp": exp_vjp,
    "log": log_vjp,
    "tanh": tanh_vjp,
    "relu": lambda g, out, x: (g * sign(out),),
    "sign": lambda g, out, x: (None,),
    "matmul": matmul_vjp,
    "transpose": lambda g, out, x: (transpose(g),),
    "sum": sum_vjp,
    "size": lambda g, out, x, axis=None: (None,),
    "logsumexp": lambda g, out, x, axis=-1: (g * exp(x - out),),
    "ones_like": lambda g, out, x: (None,),
    "zeros_like": lambda g, out, x: (None,),
    "unbroadcast": lambda g, out, x, like: (broadcast_like(g, x), None),
    "broadcast_like": lambda g, out, x, like, axis=None:
        (unbroadcast(g, x) if axis is None else reduce_sum(g, axis=axis), None),
}


# --- running a graph ----------------------------------------------------------------------------

def topo_order(outputs: Iterable[Node],
               inputs_of: Callable[[Node], Iterable[Node]] | None = None) -> list[Node]:
    """Every node `outputs` depend on, each once, after all of its inputs; no recursion.

    An explicit stack of (node, inputs_done) pairs replaces the call stack, so the depth of the
    graph is limited by memory, not by Python's recursion limit. `inputs_of(node)` says what a
    node depends on (default: ``node.inputs``), so the same walk serves other graphs, such as
    lesson 04's tape (:func:`course_utils.tape.tape_order`).
    """
    ### BEGIN SOLUTION 01.1
    inputs_of = inputs_of or (lambda node: node.inputs)
    order, done = [], set()
    stack = [(node, False) for node in reversed(list(outputs))]
    while stack:
        node, inputs_done = stack.pop()
        if node in done:
            continue
        if inputs_done:
            done.add(node)
            order.append(node)
        else:
            stack.append((node, True))
            stack.extend((x, False) for x in reversed(list(inputs_of(node))) if x not in done)
    return order
    ### END SOLUTION


def evaluate(outputs: Iterable[Node], feed: dict) -> dict:
    """The value of every node that `outputs` depend on; `feed` gives the placeholders' values."""
    values = {}
    for node in topo_order(outputs):
        values[node] = (np.asarray(feed[node]) if node.op == "placeholder" else
                        IMPL[node.op](*[values[x] for x in node.inputs], **node.attrs))
    return values


def backprop(output: Node, values: dict) -> dict:
    """d output / d node for every node `output` depends on, given the forward `values`."""
    ### BEGIN SOLUTION 01.3
    grads = {output: np.ones_like(values[output])}
    for node in reversed(topo_order([output])):
        if node not in grads or not node.inputs:
            continue
        input_grads = VJP[node.op](grads[node], values[node],
                                   *[values[x] for x in node.inputs], **node.attrs)
        for x, gx in zip(node.inputs, input_grads, strict=True):
            if gx is not None:
                grads[x] = grads[x] + gx if x in grads else gx
    return grads
    ### END SOLUTION


# --- lesson 02's additions: state, a run that prunes, gradients as graph ------------------------

def variable(value, name: str | None = None) -> Node:
    """State: a value kept in the graph, read by every run, changed by training between runs."""
    return Node("variable", attrs={"value": np.array(value, dtype=np.float64)}, name=name)


IMPL["variable"] = lambda value: value


class MissingFeedError(KeyError):
    """A placeholder that a fetch needs has no value in feed_dict."""


def run(fetches, feed_dict: dict | None = None):
    """The value of `fetches` (a Node, or a list of Nodes), computing only what they need."""
    ### BEGIN SOLUTION 02.1
    feed_dict = feed_dict or {}
    nodes = fetches if isinstance(fetches, list) else [fetches]
    values = {}
    for node in topo_order(nodes):  # only what the fetches depend on
        if node in feed_dict:
            values[node] = np.asarray(feed_dict[node])
        elif node.op == "placeholder":
            raise MissingFeedError(f"placeholder %{node.name} has no value: add it to feed_dict")
        else:
            values[node] = IMPL[node.op](*[values[x] for x in node.inputs], **node.attrs)
    return [values[n] for n in nodes] if isinstance(fetches, list) else values[fetches]
    ### END SOLUTION


def gradients(y: Node, xs: list[Node]) -> list[Node]:
    """Nodes that compute d y / d x for each x in xs: reverse mode whose vjp rules build nodes."""
    ### BEGIN SOLUTION 02.2 02.5
    grads = {y: ones_like(y)}  # the seed, now a node
    for node in reversed(topo_order([y])):
        if node not in grads or not node.inputs:
            continue
        input_grads = VJP[node.op](grads[node], node, *node.inputs, **node.attrs)
        for x, gx in zip(node.inputs, input_grads, strict=True):
            if gx is not None:
                grads[x] = grads[x] + gx if x in grads else gx  # on nodes, `+` adds an add node
    return [grads[x] if x in grads else zeros_like(x) for x in xs]
    ### END SOLUTION


# --- the course's model, as lessons 02 and 04 write it (lesson 05's capstone imports it) ---------

def mlp_loss(params, X, Y):
    """Mean softmax cross-entropy of an MLP; params = [W0, b0, W1, b1, ...], relu between
    layers, Y one-hot. Only op functions: a graph on nodes, eager work on tensors."""
    h = X
    for i in range(0, len(params), 2):
        h = h @ params[i] + params[i + 1]
        if i < len(params) - 2:
            h = relu(h)
    return -reduce_mean(reduce_sum(Y * (h - logsumexp(h, axis=1)), axis=1))


__all__ = [
    "Operators", "Node", "placeholder", "constant", "as_node", "apply", "IMPL", "VJP",
    "add", "sub", "mul", "div", "neg", "exp", "log", "tanh", "relu", "sign", "matmul",
    "transpose", "reduce_sum", "size", "logsumexp", "ones_like", "zeros_like", "unbroadcast",
    "broadcast_like", "reduce_mean", "sum_to", "logsumexp_impl", "broadcast_like_impl",
    "add_vjp", "mul_vjp", "exp_vjp", "log_vjp", "tanh_vjp", "matmul_vjp", "sum_vjp",
    "topo_order", "evaluate", "backprop", "variable", "MissingFeedError", "run", "gradients",
    "mlp_loss",
]
