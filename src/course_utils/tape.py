"""The course's version of lesson 04's eager mode for the engine: ``Tensor``, a tape, ``backward``.

Lesson 04 builds this on :mod:`course_utils.engine` (read it there first); lesson 05 and the
exercises of lessons 04 and 05 import it from here instead of printing it again.

- :class:`Tensor`: an eager value, numbers now (``.data``); a result of an op on a tensor that
  requires grad remembers how it was made in ``grad_fn = (op, inputs, attrs)``, PyTorch's design:
  the tape is a DAG hanging off each result, not one global list;
- :func:`eager_apply`: compute an op now with ``IMPL`` and record the entry when a gradient may be
  wanted; :func:`no_grad` turns recording off inside a ``with`` block;
- :func:`apply` with three cases: a Node input builds a node (lessons 01-02), a Tensor input runs
  eagerly with the tape, plain arrays compute;
- :func:`tape_order` and :func:`backward`: reverse mode over the tape, adding into the leaves'
  ``.grad``;
- :func:`grad`: lesson 05's one gradient call for both modes (nodes for a Node, arrays for a
  Tensor), which its capstone imports.

:func:`tape_order` and :func:`backward` answer exercises 04.4 and 04.2, so they carry the
solution markers: a class's release of the course withholds them until lesson 04's solutions
are released, and there ``Tensor.backward`` (and :func:`grad` on a Tensor) raises
:class:`course_utils.withheld.AnswerWithheld`, naming the exercise and where the learner's own
answer is. Lesson 05's eager cells run them: release lesson 05 with lesson 04's solutions.

**Importing this module sets** ``course_utils.engine.apply`` **to** :func:`apply`: the op functions
of the engine (``add``, ``tanh``, ``reduce_sum``, ...) look ``apply`` up in
``course_utils.engine`` each time they run, so from then on they (and the operators) also accept
tensors. That is what lesson 04 does by hand when it gives ``apply`` its third case.

>>> from course_utils.engine import reduce_sum
>>> w = Tensor([1.0, 2.0], requires_grad=True)
>>> loss = reduce_sum(w * w + w)
>>> loss.backward()
>>> w.grad.tolist()  # 2w + 1
[3.0, 5.0]
"""

from __future__ import annotations

import contextlib

import numpy as np

from course_utils import engine
from course_utils.engine import IMPL, VJP, Node, Operators, constant, topo_order

GRAD_ENABLED = True  # the no-grad switch: while it is False, eager ops record nothing


@contextlib.contextmanager
def no_grad():
    """Turn recording off inside the block; put it back as it was after, even on an error."""
    global GRAD_ENABLED
    saved, GRAD_ENABLED = GRAD_ENABLED, False
    try:
        yield
    finally:
        GRAD_ENABLED = saved


class Tensor(Operators):
    """An eager value: numbers now, and what reverse mode needs later."""

    def __init__(self, data, requires_grad: bool = False):
        self.data = np.asarray(data)        # the numbers
        self.requires_grad = requires_grad  # will a gradient with respect to it be wanted?
        self.grad = None                    # leaves only: d loss / d self, added by backward()
        self.grad_fn = None                 # (op, inputs, attrs) that made it; None: a leaf

    def __repr__(self) -> str:
        made = f", grad_fn={self.grad_fn[0]}" if self.grad_fn else ""
        wants = ", requires_grad=True" if self.requires_grad and not self.grad_fn else ""
        return f"Tensor({self.data}{wants}{made})"

    def backward(self) -> None:
        backward(self)


def eager_apply(op: str, inputs, attrs: dict) -> Tensor:
    """Compute `op` now; record how the result was made if a gradient may be wanted."""
    inputs = [x if isinstance(x, Tensor) else Tensor(x) for x in inputs]  # 2.0 -> a constant
    out = Tensor(IMPL[op](*[x.data for x in inputs], **attrs))
    if GRAD_ENABLED and any(x.requires_grad for x in inputs):
        out.requires_grad = True
        out.grad_fn = (op, inputs, attrs)  # the tape entry: all that VJP[op] will need
    return out


def as_node(x) -> Node:
    """A value met while building a graph: Nodes stay, anything else becomes a constant."""
    if isinstance(x, Node):
        return x
    return constant(x.data if isinstance(x, Tensor) else x)


def apply(op: str, *inputs, **attrs):
    """Build a node (a Node input), run eagerly with a tape (a Tensor input), or compute."""
    if any(isinstance(x, Node) for x in inputs):  # building a graph (lesson 02)
        return Node(op, [as_node(x) for x in inputs], attrs)
    if any(isinstance(x, Tensor) for x in inputs):  # eager, with a tape
        return eager_apply(op, inputs, attrs)
    return IMPL[op](*inputs, **attrs)  # plain arrays (the vjp rules in backward)


engine.apply = apply  # the op functions look `apply` up in course_utils.engine at each call


def recorded_inputs(v: Tensor) -> list[Tensor]:
    """What a tensor depends on along the tape: the inputs of its entry that require grad."""
    return [x for x in v.grad_fn[1] if x.requires_grad] if v.grad_fn is not None else []


def tape_order(t: Tensor) -> list[Tensor]:
    """The tensors recorded on the way to t (and the leaves that require grad), inputs first."""
    ### BEGIN SOLUTION 04.4
    return topo_order([t], recorded_inputs)  # lesson 01's walk, following grad_fn links
    ### END SOLUTION


def backward(t: Tensor) -> None:
    """Reverse mode over t's tape; add d t / d leaf into the .grad of each leaf that wants it."""
    ### BEGIN SOLUTION 04.2
    grads = {t: np.ones_like(t.data)}  # the seed
    for v in reversed(tape_order(t)):
        g = grads.get(v)
        if g is None:
            continue
        if v.grad_fn is None:  # a leaf that requires grad: keep its gradient
            v.grad = g if v.grad is None else v.grad + g
            continue
        op, inputs, attrs = v.grad_fn
        input_grads = VJP[op](g, v.data, *[x.data for x in inputs], **attrs)
        for x, gx in zip(inputs, input_grads, strict=True):
            if gx is not None and x.requires_grad:
                grads[x] = grads[x] + gx if x in grads else gx
    ### END SOLUTION


def grad(y, xs) -> list:
    """d y / d x for each x in xs, in whichever mode y was made (lesson 05): nodes of the
    gradient graph when y is a Node (building or tracing), arrays when y is a Tensor (``.grad``
    is cleared first, so what an earlier backward left there does not count)."""
    if isinstance(y, Node):
        return engine.gradients(y, xs)
    for x in xs:
        x.grad = None
    y.backward()
    return [x.grad if x.grad is not None else np.zeros_like(x.data) for x in xs]


__all__ = ["GRAD_ENABLED", "no_grad", "Tensor", "eager_apply", "as_node", "apply",
           "recorded_inputs", "tape_order", "backward", "grad"]
