"""The learner's kernel grades against a copy of course_utils without the graded lesson's answers
(issue 36, third attack review: 02.5 called engine.gradients by a name built at run time, 4/4;
02.2 and 04.2 loaded a second copy of engine.py / tape.py from its file, 6/6 each)."""

from __future__ import annotations

import textwrap

import pytest
from test_grading_limits import SANDBOX, as_normal_user

from course_utils.grading.running.answers_view import PACKAGE, lesson_of, package_view

pytestmark = [pytest.mark.slow]


def test_the_view_withholds_the_lesson_and_later_answers_and_keeps_the_earlier_ones():
    view = package_view("04")
    assert view is not None and view != PACKAGE and view.name == PACKAGE.name
    tape, engine = (view / "tape.py").read_text(), (view / "engine.py").read_text()
    assert 'raise AnswerWithheld("course_utils.tape.backward is exercise 04.2' in tape
    assert "AnswerWithheld(" not in engine  # lessons 01 and 02 are before 04: kept
    assert "'04.2'" in (view / "withheld.py").read_text()
    assert "'02.2'" not in (view / "withheld.py").read_text()
    # A later lesson keeps lesson 04's answers (lesson 05's eager cells call tape.backward).
    assert "AnswerWithheld(" not in (package_view("05") / "tape.py").read_text()
    # The grader's own package is untouched.
    assert "AnswerWithheld(" not in (PACKAGE / "tape.py").read_text()
    assert lesson_of("04_dynamic_graphs.ipynb") == "04" and lesson_of("x.ipynb") is None


def kernel_script(sandboxed: bool) -> str:
    """Source that starts a kernel on lesson 04's view and tries to reach tape.backward three
    ways: by a computed name, from a second copy of tape.py loaded from its file, and by reading
    the grader's own path to the file. Prints what each found, as JSON."""
    cell = textwrap.dedent(f"""
        import importlib.util, json
        import course_utils.tape as t
        found = {{}}
        try:
            getattr(t, "back" + "ward")(None)
        except Exception as e:
            found["name"] = type(e).__name__
        spec = importlib.util.spec_from_file_location("tape_copy", t.__file__)
        copy = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(copy)
        try:
            copy.backward(None)
        except Exception as e:
            found["copy"] = type(e).__name__
        text = open({str(PACKAGE / "tape.py")!r}).read()
        found["grader_path_withheld"] = "raise AnswerWithheld" in text
        print(json.dumps(found))
        """)
    return textwrap.dedent(f"""
        import json, os
        from course_utils.grading.running.answers_view import package_view
        from course_utils.grading.running.kernel import Kernel
        with Kernel(sandbox={sandboxed}, package=package_view("04")) as k:
            reply = k.execute({cell!r}, float(os.environ["CELL_TIMEOUT"]))
        print(reply.stdout.strip().splitlines()[-1] if reply.stdout.strip() else
              json.dumps({{"error": reply.evalue}}))
        """)


@pytest.mark.parametrize("sandboxed", [
    False, pytest.param(True, marks=pytest.mark.skipif(not SANDBOX, reason="no bubblewrap here"))])
def test_a_kernel_on_the_view_reaches_no_withheld_answer(sandboxed, tmp_path):
    found = as_normal_user(kernel_script(sandboxed), tmp_path)
    assert found.get("name") == "AnswerWithheld", found
    assert found.get("copy") == "AnswerWithheld", found
    # In the sandbox the view is bound over the package's folder: no path reaches the answers.
    # Outside it the grader's files are readable anyway (only the sandbox is a boundary).
    assert found["grader_path_withheld"] is sandboxed, found
