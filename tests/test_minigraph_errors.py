"""A catalogue of mistakes, each of which must raise a precise error that says where and what.

Every case builds something wrong and returns ``(trigger, names, at, hint)``: calling ``trigger``
must raise exactly the registered error class, whose message contains each of ``names`` (the
node or op), ``at`` (this file's line that defined it) and ``hint`` (what to do next).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import numpy as np
import pytest

import course_utils.minigraph as mg

CATALOGUE: dict[str, tuple[type[Exception], Callable]] = {}


def bad(error: type[Exception]) -> Callable:
    def register(case: Callable) -> Callable:
        CATALOGUE[case.__name__] = (error, case)
        return case

    return register


def here() -> str:
    """``"test_minigraph_errors.py:LINE"`` for the line that calls it."""
    frame = sys._getframe(1)
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


# --- feeding and fetching -----------------------------------------------------------------------


@bad(mg.MissingFeedError)
def missing_feed():
    with mg.Graph().as_default() as g:
        x, at = mg.placeholder((None, 2), name="x"), here()
        y = x * 2.0
    return lambda: mg.Session(g).run(y), ["%x", "%mul"], at, "feed_dict"


@bad(mg.FeedError)
def feed_of_wrong_shape():
    with mg.Graph().as_default() as g:
        x, at = mg.placeholder((None, 2), name="x"), here()
        y = x * 2.0
    return lambda: mg.Session(g).run(y, {x: np.ones((4, 3))}), ["%x", "(4, 3)"], at, "reshape"


@bad(mg.FeedError)
def feed_of_wrong_dtype():
    with mg.Graph().as_default() as g:
        labels, at = mg.placeholder((None,), "int64", name="labels"), here()
        y = labels + 1
    return lambda: mg.Session(g).run(y, {labels: [0.5, 1.5]}), ["%labels", "float64"], at, "dtype="


@bad(mg.FeedError)
def feeding_a_variable():
    with mg.Graph().as_default() as g:
        w, at = mg.Variable(np.ones(3), name="w"), here()
        y = w * 2.0
    return lambda: mg.Session(g).run(y, {w: np.zeros(3)}), ["%w", "variable"], at, "mg.assign"


@bad(mg.FeedError)
def feeding_a_node_of_another_graph():
    with mg.Graph().as_default():
        other, at = mg.placeholder((2,), name="other"), here()
    with mg.Graph().as_default() as g:
        y = mg.placeholder((2,), name="x") * 2.0
    return lambda: mg.Session(g).run(y, {other: np.ones(2)}), ["%other"], at, "mg.Session(graph)"


@bad(mg.GraphError)
def fetch_from_another_graph():
    with mg.Graph().as_default():
        y, at = mg.constant(1.0, name="y"), here()
    return lambda: mg.Session(mg.Graph()).run(y), ["%y"], at, "mg.Session(graph)"


@bad(mg.UninitializedVariableError)
def uninitialized_variable():
    with mg.Graph().as_default() as g:
        w, at = mg.Variable(np.ones(3), name="w"), here()
        y = mg.sum(w, name="total")
    return lambda: mg.Session(g).run(y), ["%w", "%total = sum(%w)"], at, \
        "global_variables_initializer()"


@bad(mg.UninitializedVariableError)
def variable_initialized_only_in_another_session():
    with mg.Graph().as_default() as g:
        w, at = mg.Variable(1.0, name="w"), here()
        init = mg.global_variables_initializer()
    mg.Session(g).run(init)
    return lambda: mg.Session(g).run(w), ["%w"], at, "in this Session"


@bad(mg.UninitializedVariableError)
def assign_sub_before_init():
    with mg.Graph().as_default() as g:
        w, at = mg.Variable(1.0, name="w"), here()
        step = mg.assign_sub(w, 0.1, name="step")
    return lambda: mg.Session(g).run(step), ["%w", "%step"], at, "global_variables_initializer"


# --- building graphs ----------------------------------------------------------------------------


@bad(mg.ShapeError)
def incompatible_broadcast():
    with mg.Graph().as_default():
        x = mg.placeholder((None, 3), name="x")
        y = mg.placeholder((4,), name="y")
        trigger, at = (lambda: mg.add(x, y, name="total")), here()
    return trigger, ["%total = add(%x, %y)", "(None, 3)", "(4,)"], at, "reshape one operand"


@bad(mg.ShapeError)
def matmul_shape_clash():
    with mg.Graph().as_default():
        x = mg.placeholder((None, 3), name="x")
        w = mg.Variable(np.ones((4, 2)), name="w")
        trigger, at = (lambda: x @ w), here()
    return trigger, ["%matmul = matmul(%x, %w)", "%x is (None, 3)", "%w is (4, 2)"], at, \
        "transpose one of them"


@bad(mg.ShapeError)
def reshape_to_the_wrong_size():
    with mg.Graph().as_default():
        x = mg.constant(np.ones((2, 3)), name="x")
        trigger, at = (lambda: mg.reshape(x, (4, 2))), here()
    return trigger, ["%reshape = reshape(%x, shape=(4, 2))"], at, "must stay the same"


@bad(mg.ShapeError)
def index_out_of_range():
    with mg.Graph().as_default():
        x = mg.placeholder((None, 3), name="x")
        trigger, at = (lambda: x[:, 5]), here()
    return trigger, ["%getitem = getitem(%x, index=[:, 5])"], at, "out of range"


@bad(mg.ShapeError)
def fancy_indexing():
    with mg.Graph().as_default():
        x = mg.placeholder((None, 3), name="x")
        trigger, at = (lambda: x[[0, 2]]), here()
    return trigger, ["getitem", "list"], at, "basic slicing"


@bad(mg.DTypeError)
def exp_of_integers():
    with mg.Graph().as_default():
        n = mg.placeholder((None,), "int64", name="n")
        trigger, at = (lambda: mg.exp(n)), here()
    return trigger, ["%exp = exp(%n)", "int64"], at, "mg.cast"


@bad(mg.DTypeError)
def float_labels_for_cross_entropy():
    with mg.Graph().as_default():
        logits = mg.placeholder((None, 2), name="logits")
        labels = mg.placeholder((None,), name="labels")
        trigger, at = (lambda: mg.cross_entropy(logits, labels)), here()
    return trigger, ["%cross_entropy = cross_entropy(%logits, %labels)", "float32"], at, \
        "integer class labels"


@bad(mg.DTypeError)
def where_with_a_float_condition():
    with mg.Graph().as_default():
        x = mg.placeholder((3,), name="x")
        trigger, at = (lambda: mg.where(x, x, 0.0)), here()
    return trigger, ["%where = where(%x, %x, %const)"], at, "compare first"


@bad(mg.GraphError)
def mixing_two_graphs():
    with mg.Graph().as_default():
        a = mg.placeholder((2,), name="a")
    with mg.Graph().as_default():
        b = mg.placeholder((2,), name="b")
    trigger, at = (lambda: a + b), here()
    return trigger, ["%a", "%b", "add"], at, "same graph"


@bad(mg.GraphError)
def assign_to_something_that_is_not_a_variable():
    with mg.Graph().as_default():
        x = mg.placeholder((2,), name="x")
        trigger, at = (lambda: mg.assign(x, [1.0, 2.0])), here()
    return trigger, ["mg.assign", "%x = placeholder()"], at, "mg.Variable"


@bad(mg.ShapeError)
def assign_of_the_wrong_shape():
    with mg.Graph().as_default():
        w = mg.Variable(np.ones(3), name="w")
        trigger, at = (lambda: mg.assign(w, np.ones(4), name="reset")), here()
    return trigger, ["%reset = assign(%w, %const)", "(4,)"], at, "variable"


@bad(mg.UnknownOpError)
def unknown_op():
    x = mg.tensor([1.0, 2.0])
    trigger, at = (lambda: mg.apply("sofmax", [x])), here()
    return trigger, ["'sofmax'"], at, "Did you mean softmax"


@bad(mg.TracingError)
def python_if_on_a_symbol():
    with mg.Graph().as_default():
        x = mg.placeholder((), name="x")
        positive, at = x > 0, here()
    return lambda: bool(positive), ["%greater"], at, "mg.cond"


@bad(mg.DTypeError)
def placeholder_with_a_bad_dtype():
    with mg.Graph().as_default():
        trigger, at = (lambda: mg.placeholder((2,), dtype="floaty", name="x")), here()
    return trigger, ["'floaty'"], at, "'float32'"


@bad(mg.GraphError)
def gradients_of_an_eager_tensor():
    t = mg.tensor(1.0, requires_grad=True)
    trigger, at = (lambda: mg.gradients(t * t, [t])), here()
    return trigger, ["mg.gradients", "tensor("], at, ".backward()"


# --- running ------------------------------------------------------------------------------------


@bad(mg.ExecutionError)
def label_out_of_range_at_run_time():
    with mg.Graph().as_default() as g:
        logits = mg.placeholder((None, 2), name="logits")
        labels = mg.placeholder((None,), "int64", name="labels")
        loss, at = mg.cross_entropy(logits, labels, name="ce"), here()
    feed = {logits: np.zeros((2, 2)), labels: [0, 7]}
    return lambda: mg.Session(g).run(loss, feed), \
        ["while executing %ce = cross_entropy(%logits, %labels)"], at, "[0, 2)"


@bad(mg.ExecutionError)
def reshape_that_fails_only_at_run_time():
    with mg.Graph().as_default() as g:
        x = mg.placeholder((None, 3), name="x")
        y, at = mg.reshape(x, (2, 3), name="two_rows"), here()
    return lambda: mg.Session(g).run(y, {x: np.ones((4, 3))}), \
        ["while executing %two_rows = reshape(%x, shape=(2, 3))"], at, "reshape"


# --- eager mode ---------------------------------------------------------------------------------


@bad(mg.ShapeError)
def eager_matmul_shape_clash():
    a, b = mg.tensor(np.ones((2, 3))), mg.tensor(np.ones((4, 5)))
    trigger, at = (lambda: a @ b), here()
    return trigger, ["matmul(<tensor (2, 3) float64>, <tensor (4, 5) float64>)"], at, \
        "transpose one of them"


@bad(mg.GradientError)
def backward_of_a_non_scalar():
    w = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = w * 2.0
    trigger, at = (lambda: y.backward()), here()
    return trigger, ["backward()", "(3,)"], at, ".sum().backward()"


@bad(mg.GradientError)
def backward_without_requires_grad():
    y = mg.tensor([1.0]) * 2.0
    trigger, at = (lambda: y.backward()), here()
    return trigger, ["backward()"], at, "requires_grad=True"


@bad(mg.GradientError)
def in_place_update_outside_no_grad():
    w = mg.tensor([1.0], requires_grad=True)

    def update() -> None:
        nonlocal w
        w -= 0.1

    trigger, at = update, f"{here().split(':')[0]}:{update.__code__.co_firstlineno + 2}"
    return trigger, ["in-place update"], at, "mg.no_grad()"


@bad(mg.DTypeError)
def requires_grad_on_integers():
    trigger, at = (lambda: mg.tensor([1, 2], requires_grad=True)), here()
    return trigger, ["mg.tensor", "int64"], at, "dtype='float32'"


# --- inputs an adversarial run found escaping minigraph's own errors (issue 17) -----------------


@bad(mg.ShapeError)
def ragged_list_given_to_tensor():
    trigger, at = (lambda: mg.tensor([[1.0, 2.0], [3.0]])), here()
    return trigger, ["mg.tensor", "value[1] has 1 item but value[0] has 2"], at, "pad"


@bad(mg.FeedError)
def ragged_list_fed_to_a_placeholder():
    with mg.Graph().as_default() as g:
        x, at = mg.placeholder((None, 2), name="x"), here()
        y = x * 2.0
    return lambda: mg.Session(g).run(y, {x: [[1.0, 2.0], [3.0]]}), ["%x", "ragged"], at, "pad"


@bad(mg.ShapeError)
def ragged_operand_of_an_eager_op():
    t = mg.tensor([1.0, 2.0])
    trigger, at = (lambda: t + [[1.0], [2.0, 3.0]]), here()
    return trigger, ["add", "ragged"], at, "pad"


@bad(mg.ShapeError)
def axis_that_is_not_an_int():
    t = mg.tensor([1.0, 2.0])
    trigger, at = (lambda: mg.sum(t, axis="a")), here()
    return trigger, ["mg.sum", "axis='a'"], at, "a tuple of ints or None"


@bad(mg.GraphError)
def session_of_something_that_is_not_a_graph():
    trigger, at = (lambda: mg.Session(3).run("x")), here()
    return trigger, ["mg.Session(3)", "int"], at, "pass the graph you built"


@bad(mg.ShapeError)
def placeholder_with_shape_none():
    with mg.Graph().as_default():
        trigger, at = (lambda: mg.placeholder(None, name="x")), here()
    return trigger, ["placeholder x", "None"], at, "(None, 3)"


@bad(mg.ShapeError)
def reshape_to_a_fractional_size():
    t = mg.tensor([1.0, 2.0])
    trigger, at = (lambda: mg.reshape(t, (2.5,))), here()
    return trigger, ["mg.reshape", "(2.5,)"], at, "ints"


@bad(mg.ShapeError)
def one_hot_depth_given_as_a_float_after_an_int():
    labels = mg.tensor([0, 1])
    mg.one_hot(labels, 2)  # fills the shape-rule cache for depth 2
    trigger, at = (lambda: mg.apply("one_hot", [labels], depth=2.0)), here()
    return trigger, ["one_hot", "2.0"], at, "positive int"


@bad(mg.GraphError)
def cycle_made_through_node_inputs():
    with mg.Graph().as_default() as g:
        a = mg.placeholder((2,), name="a")
        b, at = mg.exp(a, name="b"), here()
        c = mg.add(a, b, name="c")
    b.inputs = (c,)  # %b now reads %c, which reads %b
    return lambda: mg.Session(g).run(c, {a: [1.0, 2.0]}), ["%b", "%c", "cycle"], at, \
        "graph.validate()"


@bad(mg.ShapeError)
def conv2d_of_images_with_the_wrong_number_of_channels():
    x, w = mg.tensor(np.zeros((1, 3, 8, 8))), mg.tensor(np.zeros((4, 1, 3, 3)))
    trigger, at = (lambda: mg.conv2d(x, w)), here()
    return trigger, ["conv2d", "3 channels", "expect 1"], at, "OIHW"


@bad(mg.ShapeError)
def pooling_window_larger_than_the_image():
    with mg.Graph().as_default():
        x = mg.placeholder((None, 1, 2, 2), name="x")
        trigger, at = (lambda: mg.max_pool2d(x, 3)), here()
    return trigger, ["%max_pool2d", "3x3 window", "2x2 image"], at, "smaller kernel"


@bad(mg.ShapeError)
def getitem_attr_of_the_wrong_kind_in_a_graph():
    with mg.Graph().as_default():
        x = mg.placeholder((None, 2), name="x")
        trigger, at = (lambda: mg.apply("getitem", [x], index=("1:2",))), here()
    return trigger, ["%getitem", "index=('1:2',)"], at, "basic slicing"


# --- red team, round 2: bad inputs across the API ------------------------------------------------


@bad(mg.FeedError)
def feed_dict_that_is_a_list():
    with mg.Graph().as_default() as g:
        x = mg.placeholder((2,), name="x")
        y = x * 2.0
    trigger, at = (lambda: mg.Session(g).run(y, [(x, [1.0, 2.0])])), here()
    return trigger, ["feed_dict", "list"], at, "{x: array}"


@bad(mg.GraphError)
def node_named_with_an_int():
    with mg.Graph().as_default():
        trigger, at = (lambda: mg.placeholder((2,), name=3)), here()
    return trigger, ["node name 3", "placeholder"], at, "Python identifier (a str)"


@bad(mg.GraphError)
def node_with_a_dunder_name():
    with mg.Graph().as_default():
        x = mg.placeholder((2,), name="x")
        trigger, at = (lambda: mg.exp(x, name="__class__")), here()
    return trigger, ["'__class__'", "exp"], at, "drop the underscores (class)"


@bad(mg.GraphError)
def node_name_python_would_read_as_another():
    with mg.Graph().as_default():
        trigger, at = (lambda: mg.placeholder((2,), name="\uff58")), here()
    return trigger, ["NFKC", "placeholder"], at, "name it 'x'"


@bad(mg.GraphError)
def codegen_of_a_traced_function():
    f = mg.function(lambda a: a * 2.0)
    trigger, at = (lambda: mg.codegen(f)), here()
    return trigger, ["mg.codegen", "Function"], at, "f.get_graph(example_input)"


@bad(mg.GraphError)
def optimize_of_an_eager_tensor():
    trigger, at = (lambda: mg.optimize(mg.tensor([1.0]))), here()
    return trigger, ["mg.optimize", "Tensor"], at, "mg.Graph()"


@bad(mg.GraphError)
def codegen_output_that_is_not_a_node():
    with mg.Graph().as_default() as g:
        mg.placeholder((2,), name="x")
    trigger, at = (lambda: mg.codegen(g, outputs=[3])), here()
    return trigger, ["mg.codegen", "got 3"], at, "nodes of the graph or their names"


@bad(mg.ArgumentError)
def compiled_graph_called_without_its_input():
    with mg.Graph().as_default() as g:
        g.outputs = [mg.exp(mg.placeholder((2,), name="x"))]
    f = mg.codegen(g)
    trigger, at = (lambda: f()), here()
    return trigger, ["compiled graph", "got 0"], at, "takes 1 inputs (x)"


@bad(mg.FeedError)
def compiled_graph_given_a_ragged_list():
    with mg.Graph().as_default() as g:
        x, at = mg.placeholder((None, 2), name="x"), here()
        g.outputs = [mg.exp(x)]
    f = mg.codegen(g)
    return lambda: f([[1.0, 2.0], [3.0]]), ["%x", "ragged"], at, "pad the short ones"


@bad(mg.ArgumentError)
def traced_function_called_with_an_unknown_keyword():
    @mg.function
    def double(a):
        return a * 2.0

    trigger, at = (lambda: double(mg.tensor(1.0), b=2)), here()
    return trigger, ["double(a)", "unexpected keyword argument 'b'"], at, "double(a)"


@bad(mg.ArgumentError)
def unbroadcast_to_a_shape_instead_of_a_value():  # issue 25: was a raw AttributeError
    g = mg.tensor(np.ones((2, 3), np.float32))
    trigger, at = (lambda: mg.unbroadcast(g, (3,))), here()
    return trigger, ["mg.unbroadcast(g, like)", "got tuple (3,)"], at, "np.zeros((3,))"


@bad(mg.ArgumentError)
def mg_function_of_something_not_callable():
    trigger, at = (lambda: mg.function(3)), here()
    return trigger, ["mg.function", "int"], at, "def or lambda"


@bad(mg.TracingError)
def backward_inside_a_traced_function():
    def loss(a):
        return mg.sum(a * a).backward()

    at = f"test_minigraph_errors.py:{loss.__code__.co_firstlineno + 1}"
    return lambda: mg.function(loss)(mg.tensor([1.0])), ["backward()", "%sum"], at, \
        "mg.gradients(y, [x])"


@bad(mg.TracingError)
def requires_grad_set_on_a_symbol():
    def body(a):
        a.requires_grad = True
        return a

    at = f"test_minigraph_errors.py:{body.__code__.co_firstlineno + 1}"
    return lambda: mg.function(body)(mg.tensor([1.0])), [".requires_grad", "%a"], at, \
        "the tensors you call it with"


@bad(mg.ArgumentError)
def cond_branch_that_is_not_a_function():
    f, at = mg.function(lambda a: mg.cond(mg.sum(a) > 0, a, lambda: -a)), here()
    return lambda: f(mg.tensor([1.0])), ["mg.cond", "true_fn", "Node"], at, \
        "a function of no arguments"


@bad(mg.ArgumentError)
def cond_branch_that_takes_an_argument():
    trigger, at = (lambda: mg.cond(True, lambda z: z, lambda: 0.0)), here()
    return trigger, ["mg.cond", "true_fn", "<lambda>(z)"], at, "must take no arguments"


@bad(mg.ArgumentError)
def while_loop_without_loop_variables():
    trigger, at = (lambda: mg.while_loop(lambda: True, lambda: (), [])), here()
    return trigger, ["mg.while_loop", "loop_vars is empty"], at, "at least one value"


@bad(mg.ArgumentError)
def while_loop_over_a_dict():
    trigger, at = (lambda: mg.while_loop(lambda v: False, lambda v: v, {"v": 1.0})), here()
    return trigger, ["mg.while_loop", "dict"], at, "list or tuple"


@bad(mg.ArgumentError)
def while_loop_body_with_the_wrong_arity():
    init = [mg.tensor(0), mg.tensor(1.0)]
    trigger, at = (lambda: mg.while_loop(lambda i, v: i < 3, lambda i: i + 1, init)), here()
    return trigger, ["mg.while_loop", "body_fn", "2 arguments"], at, "one per loop variable"


@bad(mg.TracingError)
def eager_while_body_returning_two_values_for_one():
    trigger, at = (lambda: mg.while_loop(lambda v: v < 3, lambda v: (v + 1, v), [1])), here()
    return trigger, ["mg.while_loop", "2 values for 1 loop variables"], at, \
        "one new value per loop variable"


@bad(mg.GraphError)
def variable_created_inside_a_cond_branch():
    def branch(a):
        return mg.cond(mg.sum(a) > 0, lambda: a * mg.Variable(2.0, name="w"), lambda: a)

    at = f"test_minigraph_errors.py:{branch.__code__.co_firstlineno + 1}"
    return lambda: mg.function(branch)(mg.tensor([1.0])), ["%cond", "true_fn holds %w"], at, \
        "outside cond and while_loop"


@bad(mg.GraphError)
def assign_to_a_placeholder_through_apply():
    with mg.Graph().as_default():
        x = mg.placeholder((2,), name="x")
        trigger, at = (lambda: mg.apply("assign", [x, x])), here()
    return trigger, ["%assign", "%x (placeholder)"], at, "mg.Variable(initial_value)"


@bad(mg.GradientError)
def grad_ys_of_the_wrong_shape():
    with mg.Graph().as_default():
        x = mg.placeholder((2,), name="x")
        y = mg.sum(x * x, name="y")
        seed = mg.constant(np.ones(3, np.float32))
        trigger, at = (lambda: mg.gradients(y, [x], grad_ys=[seed])), here()
    return trigger, ["grad_ys[0]", "(3,) float32", "%y"], at, "has its y's shape"


@bad(mg.DTypeError)
def clip_of_integers_with_a_float_bound():
    t = mg.tensor([1, 2, 3])
    trigger, at = (lambda: mg.clip(t, 0.5, 2.5)), here()
    return trigger, ["clip", "int64", "0.5"], at, "mg.cast(x, 'float32')"


@bad(mg.DTypeError)
def negating_booleans():
    t = mg.tensor([True, False])
    trigger, at = (lambda: -t), here()
    return trigger, ["neg", "bool"], at, "mg.cast(x, 'float32')"


@bad(mg.ShapeError)
def max_over_an_empty_axis():
    t = mg.tensor(np.zeros((0, 3)))
    trigger, at = (lambda: mg.max(t, axis=0)), here()
    return trigger, ["max", "axis 0 of (0, 3)"], at, "reduce a non-empty axis"


@bad(mg.ShapeError)
def sum_over_a_negative_axis_out_of_range():
    t = mg.tensor(np.zeros((2, 3)))
    trigger, at = (lambda: mg.sum(t, axis=-3)), here()
    return trigger, ["sum", "axis -3"], at, "its axes are -2 to 1"


@bad(mg.ShapeError)
def conv2d_with_stride_zero():
    x, w = mg.tensor(np.zeros((1, 1, 5, 5))), mg.tensor(np.zeros((1, 1, 3, 3)))
    trigger, at = (lambda: mg.conv2d(x, w, stride=0)), here()
    return trigger, ["mg.conv2d", "stride=0"], at, "positive int"


@bad(mg.ShapeError)
def conv2d_kernel_larger_than_the_image():
    x, w = mg.tensor(np.zeros((1, 1, 3, 3))), mg.tensor(np.zeros((1, 1, 5, 5)))
    trigger, at = (lambda: mg.conv2d(x, w)), here()
    return trigger, ["conv2d", "5x5 window", "3x3 image"], at, "pad more"


@bad(mg.ShapeError)
def max_pool_with_a_kernel_of_one_number():
    x = mg.tensor(np.zeros((1, 1, 4, 4)))
    trigger, at = (lambda: mg.max_pool2d(x, (2,))), here()
    return trigger, ["mg.max_pool2d", "kernel_size=(2,)"], at, "two (height, width)"


@bad(mg.DTypeError)
def log_of_booleans():
    t = mg.tensor([True, False])
    trigger, at = (lambda: mg.log(t)), here()
    return trigger, ["log", "bool"], at, "mg.cast(x, 'float32')"


@bad(mg.GradientError)
def grad_of_the_wrong_shape():
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    trigger, at = (lambda: setattr(w, "grad", mg.tensor([1.0]))), here()
    return trigger, [".grad", "(2,) here", "(1,)"], at, ".grad = None"


@bad(mg.ShapeError)
def data_of_another_shape_for_a_parameter():
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    trigger, at = (lambda: setattr(w, "data", np.zeros(3, np.float32))), here()
    return trigger, ["tensor.data", "(2,) float32", "(3,) float32"], at, \
        "mg.tensor(value, requires_grad=True)"


@bad(mg.DTypeError)
def data_of_integers_for_a_parameter():
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    trigger, at = (lambda: setattr(w, "data", np.array([1, 2]))), here()
    return trigger, ["tensor.data", "int64"], at, "value.astype('float32')"


@bad(mg.GradientError)
def optimizer_given_one_parameter_twice():
    w = mg.tensor([1.0], requires_grad=True)
    trigger, at = (lambda: mg.optim.SGD([w, w], lr=0.1)), here()
    return trigger, ["mg.optim.SGD", "parameter 1 is parameter 0"], at, "List each tensor once"


@bad(mg.GradientError)
def learning_rate_that_is_nan():
    w = mg.tensor([1.0], requires_grad=True)
    trigger, at = (lambda: mg.optim.Adam([w], lr=float("nan"))), here()
    return trigger, ["mg.optim.Adam", "lr", "nan"], at, "finite number >= 0"


@bad(mg.GradientError)
def adam_betas_that_are_not_a_pair():
    w = mg.tensor([1.0], requires_grad=True)
    trigger, at = (lambda: mg.optim.Adam([w], betas=0.9)), here()
    return trigger, ["mg.optim.Adam", "betas"], at, "(0.9, 0.999)"


@bad(mg.ArgumentError)
def create_graph_given_as_a_string():
    w = mg.tensor(2.0, requires_grad=True)
    trigger, at = (lambda: (w * w).backward(create_graph="yes")), here()
    return trigger, ["backward()", "create_graph", "'yes'"], at, "True or False"


@bad(mg.DTypeError)
def backward_seeded_with_strings():
    w = mg.tensor([2.0], requires_grad=True)
    trigger, at = (lambda: (w * w).backward(gradient=["x"])), here()
    return trigger, ["backward()", "gradient="], at, "float32"


@bad(mg.DTypeError)
def and_of_float_values():
    t = mg.tensor([1.0, -1.0])
    trigger, at = (lambda: (t > 0) & t), here()
    return trigger, ["`&`", "float32"], at, "(x > 0) & (x < 1)"


@bad(mg.GraphError)
def eager_op_given_an_attr_it_does_not_take():
    t = mg.tensor([[1.0, 2.0]])
    trigger, at = (lambda: mg.apply("sum", [t], axes=0)), here()
    return trigger, ["sum", "no attr 'axes'"], at, "its attrs: axis, keepdims"


@bad(mg.ShapeError)
def if_on_a_tensor_of_many_numbers():
    t = mg.tensor([1.0, -1.0])
    trigger, at = (lambda: bool(t > 0)), here()
    return trigger, ["bool()", "shape (2,)"], at, "(t > 0).numpy().all()"


@bad(mg.ShapeError)
def item_of_a_tensor_of_many_numbers():
    t = mg.tensor([1.0, -1.0])
    trigger, at = (lambda: t.item()), here()
    return trigger, ["item()", "shape (2,)"], at, ".sum()"


@bad(mg.ShapeError)
def len_of_a_scalar_tensor():
    t = mg.tensor(1.0)
    trigger, at = (lambda: len(t)), here()
    return trigger, ["len()", "0-d tensor"], at, ".item()"


@bad(mg.DTypeError)
def tensor_of_an_int_too_large_for_64_bits():
    trigger, at = (lambda: mg.tensor(10**30)), here()
    return trigger, ["mg.tensor", "64 bits"], at, "write it as a float"


# --- the test -----------------------------------------------------------------------------------


def test_the_catalogue_is_large() -> None:
    assert len(CATALOGUE) >= 75


@pytest.mark.parametrize("name", CATALOGUE)
def test_each_mistake_raises_a_precise_error_naming_node_and_line(name: str) -> None:
    error, case = CATALOGUE[name]
    trigger, names, at, hint = case()
    with pytest.raises(mg.MinigraphError) as info:
        trigger()
    assert type(info.value) is error, f"expected {error.__name__}, got {info.value!r}"
    message = str(info.value)
    for fragment in [*names, at, hint]:
        assert fragment in message, f"{fragment!r} missing from:\n{message}"


def test_run_time_errors_chain_the_original_exception() -> None:
    trigger, *_ = label_out_of_range_at_run_time()
    with pytest.raises(mg.ExecutionError) as info:
        trigger()
    assert isinstance(info.value.__cause__, IndexError)


def test_validate_names_the_node_out_of_order() -> None:
    with mg.Graph().as_default() as g:
        x = mg.placeholder((2,), name="x")
        _, at = mg.exp(x, name="y"), here()
    g.nodes.reverse()
    with pytest.raises(mg.GraphError, match=f"%y = exp.*{at}.*input %x comes later"):
        g.validate()
