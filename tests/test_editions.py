"""The Chinese edition (zh/): complete and current, generated faithfully, graded like the English.

`python -m course_utils.editions check` over every lesson, and the checker itself on a synthetic
lesson: a stale, missing or orphaned translation, a zh notebook not rebuilt, a code cell that
differs from the English. The grader scores a zh exercise notebook answered with the solutions'
code in full, and its summary lines come out in Chinese.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from answered import answered, solution_answers

from course_utils import editions as ed

ROOT = Path(__file__).resolve().parents[1]
STEMS = ed.stems()


@pytest.mark.parametrize("stem", STEMS)
def test_the_zh_edition_of_every_lesson_is_complete_and_current(stem):
    problems = ed.check([stem])
    assert not problems, (
        f"the zh edition of {stem} is not complete and current:\n"
        + "\n".join("  " + p.line() for p in problems)
        + f"\nTranslators: `python -m course_utils.editions todo {stem}` lists the cells (the old "
        "and new English of each stale one); edit zh/translations/, then "
        "`python -m course_utils.editions build`.")


def test_every_lesson_and_exercise_has_its_zh_notebook():
    for folder in ("notebooks", "exercises"):
        english = sorted(p.name for p in (ROOT / folder).glob("*.ipynb"))
        chinese = sorted(p.name for p in (ROOT / "zh" / folder).glob("*.ipynb"))
        differ = set(english) ^ set(chinese)
        assert chinese == english, f"zh/{folder}/ and {folder}/ differ: {differ}"


def test_the_readmes_link_each_other_the_site_and_every_zh_lesson():
    english = (ROOT / "README.md").read_text(encoding="utf-8")
    chinese = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    assert "](README.zh-CN.md)" in english and "](README.md)" in chinese
    assert "make site" in english and "make site" in chinese
    links = re.findall(r"\]\(([^)#]+)\)", chinese)
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert not missing, f"README.zh-CN.md links to files that do not exist: {missing}"
    for stem in STEMS:
        for folder in ("zh/notebooks", "zh/exercises", "solutions"):
            assert f"({folder}/{stem}.ipynb)" in chinese, f"{folder}/{stem} is not on the zh map"
    # every anchor the notebooks link to in the English README exists in the Chinese one
    for anchor in set(re.findall(r"README\.md#([\w-]+)", chinese + _all_markdown())):
        assert f'<a id="{anchor}"></a>' in chinese, f"README.zh-CN.md has no #{anchor}"


def _all_markdown() -> str:
    texts = []
    for path in sorted((ROOT / "zh" / "translations").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        texts += [entry["zh"] for part in data.values() for entry in part.values()]
    return "\n".join(texts)


# --- the checker on a synthetic lesson ----------------------------------------------------------

def _notebook(cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = cells
    return nb


def _write(path: Path, nb) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


@pytest.fixture
def course(tmp_path):
    """A course with one lesson, 99_demo, its exercises, a README and a source file; the
    translation of every markdown cell; the zh notebooks built."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    lesson = _notebook([
        md("# 99 · Demo\n\nSee [the README](../README.md#the-map), [the exercises]"
           "(../exercises/99_demo.ipynb), [the source](../src/demo.py), "
           "[the web](https://example.org/x.md) and `IMPL[op](g, out)`.", id="m1"),
        code("x = 1 + 1\nprint(x)", id="c1"),
        md("## Two\n\n![a drawing](../docs/pic.svg) and <img src=\"../docs/pic.svg\">", id="m2"),
    ])
    lesson.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="2\n")]
    lesson.cells[1].execution_count = 1
    exercises = _notebook([
        md("## Exercise 99.1 · Add (1 point)", id="e1"),
        code("def add(a, b):\n    raise NotImplementedError", id="e1-solution",
             metadata={"tags": ["solution"], "grading": {"id": "99.1"}}),
    ])
    _write(tmp_path / "notebooks" / "99_demo.ipynb", lesson)
    _write(tmp_path / "exercises" / "99_demo.ipynb", exercises)
    (tmp_path / "README.md").write_text("# demo\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "demo.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "pic.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    zh = {"m1": "# 99 · 演示\n\n见 [README](../README.md#the-map)、"
                "[练习](../exercises/99_demo.ipynb)、[源代码](../src/demo.py)、"
                "[网页](https://example.org/x.md) 和 `IMPL[op](g, out)`。",
          "m2": "## 二\n\n![一幅图](../docs/pic.svg) 和 <img src=\"../docs/pic.svg\">",
          "e1": "## 练习 99.1 · 加法（1 分）"}
    translations = {}
    for kind, folder in ed.KINDS:
        nb = json.loads((tmp_path / folder / "99_demo.ipynb").read_text())
        translations[kind] = {
            c["id"]: {"en_sha256": ed.sha256(ed.source_of(c)), "en": ed.source_of(c),
                      "zh": zh[c["id"]]}
            for c in nb["cells"] if c["cell_type"] == "markdown"}
    path = ed.translation_path("99_demo", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(ed.dumps_translations(translations), encoding="utf-8")
    assert ed.build(root=tmp_path) == []
    return tmp_path


def _cells(path: Path) -> dict:
    return {c["id"]: c for c in json.loads(path.read_text(encoding="utf-8"))["cells"]}


def _edit_english(root: Path, folder: str, cell_id: str, source: str) -> None:
    path = root / folder / "99_demo.ipynb"
    nb = nbformat.read(path, as_version=4)
    next(c for c in nb.cells if c.id == cell_id).source = source
    nbformat.write(nb, path)


def _whats(problems) -> set:
    return {(p.kind, p.cell, p.what) for p in problems}


def test_a_complete_edition_passes_and_keeps_code_outputs_and_metadata(course):
    assert ed.check(root=course) == []
    english = json.loads((course / "notebooks" / "99_demo.ipynb").read_text())
    chinese = json.loads((course / "zh" / "notebooks" / "99_demo.ipynb").read_text())
    assert chinese["metadata"] == english["metadata"]
    assert [c["id"] for c in chinese["cells"]] == [c["id"] for c in english["cells"]]
    assert chinese["cells"][1] == english["cells"][1]  # the code cell, outputs included
    assert ed.source_of(chinese["cells"][0]).startswith("# 99 · 演示")


def test_links_are_rewritten_to_work_from_the_zh_tree(course):
    cells = _cells(course / "zh" / "notebooks" / "99_demo.ipynb")
    text = ed.source_of(cells["m1"])
    assert "(../../README.zh-CN.md#the-map)" in text  # the Chinese README, anchor kept
    assert "(../exercises/99_demo.ipynb)" in text  # the zh exercises, beside zh/notebooks
    assert "(../../src/demo.py)" in text  # the English tree's files
    assert "(https://example.org/x.md)" in text and "`IMPL[op](g, out)`" in text
    text = ed.source_of(cells["m2"])
    assert "(../../docs/pic.svg)" in text and 'src="../../docs/pic.svg"' in text
    for target in ("../../README.zh-CN.md", "../exercises/99_demo.ipynb", "../../src/demo.py"):
        resolved = (course / "zh" / "notebooks" / target).resolve()
        assert resolved.relative_to(course.resolve())  # inside the course
    assert (course / "zh" / "notebooks" / "../../src/demo.py").resolve().is_file()


def test_a_changed_english_cell_makes_its_translation_stale(course):
    _edit_english(course, "notebooks", "m2", "## Two, changed\n\nNew text.")
    problems = ed.check(root=course)
    assert ("lesson", "m2", "stale") in _whats(problems)
    assert ("lesson", "", "out of date") in _whats(problems)  # zh notebook not rebuilt
    assert "m2" in "\n".join(p.line() for p in problems)
    todo = ed.todo_text(root=course)
    assert "-## Two" in todo and "+## Two, changed" in todo  # old vs new English
    assert ed.sha256("## Two, changed\n\nNew text.") in todo
    ed.build(root=course)  # a stale cell keeps the current English, never the old translation
    cells = _cells(course / "zh" / "notebooks" / "99_demo.ipynb")
    assert ed.source_of(cells["m2"]) == "## Two, changed\n\nNew text."
    assert _whats(ed.check(root=course)) == {("lesson", "m2", "stale")}


def test_a_missing_translation_fails(course):
    path = ed.translation_path("99_demo", course)
    data = json.loads(path.read_text())
    del data["exercises"]["e1"]
    path.write_text(ed.dumps_translations(data))
    ed.build(root=course)
    assert _whats(ed.check(root=course)) == {("exercises", "e1", "missing")}
    assert "## Exercise 99.1 · Add (1 point)" in ed.todo_text(root=course)


def test_a_new_english_cell_without_translation_and_an_orphan_fail(course):
    path = course / "notebooks" / "99_demo.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("A new paragraph.", id="m3"))
    nb.cells = [c for c in nb.cells if c.id != "m2"]
    nbformat.write(nb, path)
    ed.build(root=course)
    assert _whats(ed.check(root=course)) == {("lesson", "m3", "missing"),
                                             ("lesson", "m2", "orphan")}


def test_a_code_cell_that_differs_from_the_english_fails(course):
    path = course / "zh" / "exercises" / "99_demo.ipynb"
    nb = json.loads(path.read_text())
    nb["cells"][1]["source"] = ["def add(a, b):\n", "    return a + b"]
    path.write_text(ed.dumps_notebook(nb))
    assert {("exercises", "e1-solution", "code"), ("exercises", "", "out of date")} <= \
        _whats(ed.check(root=course))
    _edit_english(course, "notebooks", "c1", "x = 2\nprint(x)")  # English changed, not rebuilt
    assert ("lesson", "c1", "code") in _whats(ed.check(root=course))
    ed.build(root=course)
    assert ed.check(root=course) == []


def test_a_missing_zh_notebook_and_a_broken_translation_file_fail(course):
    (course / "zh" / "notebooks" / "99_demo.ipynb").unlink()
    assert ("lesson", "", "no notebook") in _whats(ed.check(root=course))
    ed.translation_path("99_demo", course).write_text('{"lesson": {"m1": {"zh": "x"}}}')
    with pytest.raises(ValueError, match=r"99_demo\.json.*'m1'"):
        ed.check(root=course)


def test_the_command_line_exits_1_and_lists_the_cells(course, capsys):
    assert ed.main(["check"], root=course) == 0
    _edit_english(course, "exercises", "e1", "## Exercise 99.1 · Add two numbers (1 point)")
    assert ed.main(["check", "99_demo"], root=course) == 1
    assert "99_demo exercises cell 'e1': the English changed" in capsys.readouterr().out
    assert ed.main(["todo"], root=course) == 0
    assert "+## Exercise 99.1 · Add two numbers (1 point)" in capsys.readouterr().out
    assert ed.main(["check", "42_nothing"], root=course) == 2


def test_review_points_at_changed_numbers_code_names_links_and_structure():
    en = ("## Exercise 01.2 · Three ops (4 points)\n\nCall `mg.optimize(g)`: 68 -> 50 nodes, "
          "see [the map](../README.md#the-map) and $x^2$.\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    good = ("## 练习 01.2 · 三个算子（4 分）\n\n调用 `mg.optimize(g)`：68 -> 50 个节点，"
            "见[地图](../README.md#the-map)和 $x^2$。\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    assert ed.review_cell(en, good) == []
    bad = ("### 练习 01.2 · 三个算子（5 分）\n\n调用 `mg.optimise(g)`：68 -> 50 个节点，"
           "见[地图](../README.md)和 $x^3$。\n\n| a | b |\n|---|---|")
    found = "\n".join(ed.review_cell(en, bad))
    for what in ("numbers only in the English: ['4'",
                 "code only in the Chinese: ['mg.optimise(g)']",
                 "links only in the Chinese: ['../README.md']", "math only in the English",
                 "headings only in the English: ['##']", "table rows only in the English"):
        assert what in found, f"review missed {what!r}:\n{found}"
    assert "01_computation_graphs" in ed.review_text(["01_computation_graphs"]) or \
        "no differences" in ed.review_text(["01_computation_graphs"])


# --- nbval and the exercise builder never see zh/ ---------------------------------------------

def test_nbval_does_not_collect_the_zh_notebooks():
    makefile = (ROOT / "Makefile").read_text()
    for line in makefile.splitlines():
        if "--nbval" in line:
            assert "zh" not in line, f"a Makefile line runs nbval on zh/: {line.strip()}"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--nbval", "--nbval-current-env",
         "-p", "no:randomly", "-p", "no:xdist", "notebooks"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    collected = [line for line in out.stdout.splitlines() if "::" in line]
    assert collected and not [line for line in collected if "zh/" in line]


# --- grading a Chinese exercise notebook --------------------------------------------------------

def test_the_report_is_localized_only_for_chinese_notebooks():
    assert ed.notebook_language(ROOT / "zh" / "exercises" / "00_setup.ipynb") == "zh"
    assert ed.notebook_language(ROOT / "exercises" / "00_setup.ipynb") == "en"
    assert ed.notebook_language(ROOT / "notebooks" / "00_setup.ipynb") == "en"  # quotes a title
    assert ed.report_language([ROOT / "zh" / "exercises" / "00_setup.ipynb",
                               ROOT / "exercises" / "00_setup.ipynb"]) == "en"
    table = ("exercises/00_setup.ipynb  (learner you, graded as 00_setup.ipynb)\n"
             "  exercise  points  status    message\n"
             "  00.1         1/2  fail      AssertionError: expected 4/3\n"
             "  total        1/2\n"
             "  details:\n"
             "    00.1, checks in code cells 3, 4 (1/2): fail\n"
             "      AssertionError: expected 4/3\n\n"
             "all: 1/2 points; 0 of 2 notebooks fully passed")
    assert ed.localize_table(table, "en") == table
    zh = ed.localize_table(table, "zh").splitlines()
    assert zh[0] == "exercises/00_setup.ipynb（学习者 you，按 00_setup.ipynb 评分）"
    assert zh[1].split() == ["练习", "分数", "状态", "信息"]
    assert zh[2] == table.splitlines()[2]  # exercise rows and messages stay as they are
    assert zh[3].split() == ["合计", "1/2"] and zh[4] == "  详情："
    assert zh[-1] == "全部：1/2 分；2 个笔记本中有 0 个全部通过"
    # the columns stay aligned (a CJK character takes two columns)
    assert ed._width(zh[1].split("分数")[0]) + 4 == ed._width(
        table.splitlines()[1].split("points")[0]) + len("points")


@pytest.mark.slow
def test_a_zh_exercise_notebook_with_the_solutions_code_scores_full_marks(tmp_path):
    from course_utils.grading import grade

    zh_exercises = ROOT / "zh" / "exercises" / "00_setup.ipynb"
    nb, pasted = answered(zh_exercises, solution_answers("00_setup"))
    assert pasted >= 3
    path = tmp_path / "00_setup.ipynb"
    nbformat.write(nb, path)
    assert ed.notebook_language(path) == "zh"
    report = grade.grade_notebook(path, ROOT / "solutions")
    assert report.notebook == "00_setup.ipynb"
    assert report.possible > 0 and report.points == report.possible, grade.format_table([report])
    assert all(e.status == "pass" for e in report.exercises), grade.format_table([report])
    # and unanswered, the zh notebook scores what the English one does: nothing
    report = grade.grade_notebook(zh_exercises, ROOT / "solutions")
    assert report.points == 0 and report.possible > 0
