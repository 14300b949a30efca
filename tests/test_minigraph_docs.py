"""The examples in minigraph's docstrings are part of its documentation: they must stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

# The core modules; the tracing, passes and codegen modules can join this list.
CORE = ["attrs", "autodiff", "conv", "eager", "errors", "functional", "graph", "interpreter",
        "operators", "ops", "optim", "session", "shapes"]
MODULES = ["course_utils.minigraph"] + [f"course_utils.minigraph.{m}" for m in CORE] + [
    "course_utils.data"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
