"""course_utils.tape's answers (issue 36): ``backward`` answers exercise 04.2 and ``tape_order``
04.4, so they carry the solution markers and a class's release withholds them until lesson 04's
solutions are out. There, lesson 05's eager gradient (``Tensor.backward``, ``tape.grad``) raises
``AnswerWithheld`` saying which exercise it answers and where the learner's own answer is, and a
release with ``--solutions 04`` runs it again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from course_utils.grading import build

ROOT = Path(__file__).resolve().parents[1]

LOSS = """
from course_utils.engine import reduce_sum
from course_utils.tape import Tensor, grad, tape_order
from course_utils.withheld import AnswerWithheld

w = Tensor([1.0, 2.0], requires_grad=True)
loss = reduce_sum(w * w + w)
"""


def _run(release: Path, code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(release / "src")}
    return subprocess.run([sys.executable, "-c", code], cwd=release, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_release_withholds_the_tapes_answers_until_lesson_04s_solutions(tmp_path):
    release = tmp_path / "release"
    assert build.main(["--release", str(release), "--lessons", "05",
                       "--solutions", "01,02"]) == 0
    shipped = (release / "src/course_utils/tape.py").read_text(encoding="utf-8")
    for line in ("input_grads = VJP[op](g, v.data, *[x.data for x in inputs], **attrs)",
                 "return topo_order([t], recorded_inputs)"):
        assert line in (ROOT / "src/course_utils/tape.py").read_text(encoding="utf-8")
        assert line not in shipped, f"a release without lesson 04's solutions ships {line!r}"
    done = _run(release, LOSS + """
assert Tensor.__module__ == "course_utils.tape"
for call in (loss.backward, lambda: grad(loss, [w]), lambda: tape_order(loss)):
    try:
        call()
    except AnswerWithheld as e:
        print(e)
    else:
        print("not withheld")
""")
    assert done.returncode == 0, done.stderr
    own = "until then, use your own from exercises/04_dynamic_graphs.ipynb"
    backward, through_grad, order = done.stdout.splitlines()
    assert backward == ("course_utils.tape.backward is exercise 04.2's answer: it is released "
                        f"with lesson 04's solutions; {own}, exercise 04.2"), backward
    assert through_grad == backward, "lesson 05's grad runs the same withheld backward"
    assert order.startswith("course_utils.tape.tape_order is exercise 04.4's answer") and \
        order.endswith(f"{own}, exercise 04.4"), order

    # Lesson 04 closes: its solutions bring both back, and the gradient is 2w + 1 (by hand).
    assert build.main(["--release", str(release), "--solutions", "04"]) == 0
    done = _run(release, LOSS + """
loss.backward()
print(w.grad.tolist(), grad(loss, [w])[0].tolist(), len(tape_order(loss)))
""")
    assert done.returncode == 0, done.stderr
    # w, w * w, w * w + w, the sum: the tensors on the tape, inputs first
    assert done.stdout.split() == ["[3.0,", "5.0]", "[3.0,", "5.0]", "4"], done.stdout
