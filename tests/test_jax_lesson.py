"""Lesson 13's predictions are JAX's behaviour: the digests in exercise 13.1's checks are those of
the trace counts that jax.jit really produces (a new jax version that retraces differently fails
here, not in a learner's grade). About a second.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_utils.grading.checks import digest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions" / "13_jax.ipynb"


def cell(nb: dict, cell_id: str) -> str:
    (found,) = [c for c in nb["cells"] if c.get("id") == cell_id]
    return "".join(found["source"])


def test_exercise_13_1_digests_are_the_real_trace_counts():
    nb = json.loads(SOLUTIONS.read_text())
    namespace: dict = {}
    exec("import jax\nimport jax.numpy as jnp\nimport numpy as np\n", namespace)
    exec(cell(nb, "s13-e1-calls"), namespace)
    traces = []
    scale = namespace["scale"]

    def counting(x, factor, mode="mul"):
        traces.append(1)
        return scale(x, factor, mode)

    f = jax.jit(counting, static_argnames="mode")
    counts = []
    for call in namespace["CALLS"]:
        call(f)
        counts.append(len(traces))
    checks = {c.get("id"): "".join(c["source"]) for c in nb["cells"]}
    for cell_id, name, part in (("s13-e1-check-a", "after_calls_1_to_4", counts[:4]),
                                ("s13-e1-check-b", "after_calls_5_to_8", counts[4:])):
        stored = re.search(rf'"{name}": "([0-9a-f]+)"', checks[cell_id]).group(1)
        assert stored == digest(name, part), (
            f"{name}: jax.jit traced {part}, which is not what the check's digest encodes")
