"""The Chinese edition reads as its own course (issue 38): every path and command in it leads to
the zh files, and a learner who runs the grading command a zh exercise notebook prints grades
that notebook and gets their points.

The English pages must not send a reader into zh/ either, except where they offer the Chinese
edition by name.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from answered import answered, solution_answers

from course_utils import editions as ed

ROOT = Path(__file__).resolve().parents[1]
STEMS = ed.stems()


def _markdown(path: Path) -> list[tuple[str, str]]:
    """(cell id, source) of every markdown cell of a notebook."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(c.get("id", ""), ed.source_of(c)) for c in nb["cells"]
            if c.get("cell_type") == "markdown"]


def _zh_notebooks() -> list[Path]:
    return sorted((ROOT / "zh" / "notebooks").glob("*.ipynb")) + \
        sorted((ROOT / "zh" / "exercises").glob("*.ipynb"))


def _zh_pages() -> list[Path]:
    return [ROOT / ed.README_ZH, *sorted((ROOT / "site" / "zh").glob("*.md"))]


# --- what counts as a path into the other edition ---------------------------------------------

#: A relative link or image target in markdown or HTML.
_TARGET = re.compile(r"\]\(<?([^)\s>]+)>?|\b(?:src|href)=[\"']([^\"']+)[\"']")
#: A path written from the course's root into the English lessons or exercises.
_ENGLISH_ROOT_PATH = re.compile(r"(?<![A-Za-z0-9_./\\-])(?:notebooks|exercises)/[\w.*]*")
#: `make lab` / `make grade` that open or grade the English edition (no COURSE_LANG, no NB=).
_MAKE = re.compile(r"\bmake (?:lab|grade)\b((?:[ \t]+[A-Z_]+=[^\s`]*)*)")
#: A path into zh/, written from the root.
_ZH_ROOT_PATH = re.compile(r"(?<![A-Za-z0-9_./\\-])zh/[\w./*-]*|README\.zh-CN\.md")


def _resolves_into(target: str, page: Path, zh: bool) -> bool:
    """Whether a relative link of ``page`` lands in the English edition's lessons, exercises or
    README (``zh``: the page is Chinese), or in the Chinese edition (an English page)."""
    target = target.split("#")[0]
    if not target or "://" in target or target.startswith(("/", "mailto:")):
        return False
    resolved = (page.parent / target).resolve()
    try:
        rel = resolved.relative_to(ROOT.resolve()).as_posix()
    except ValueError:
        return False
    if zh:
        return rel == "README.md" or rel.split("/")[0] in ("notebooks", "exercises") \
            or rel in ("site/index.md", "site/course.md", "site/run.md")
    return rel == ed.README_ZH or rel.startswith("zh/") or rel.startswith("site/zh/")


def crossings(text: str, page: Path, zh: bool) -> list[str]:
    """The places in ``text`` (a page of one edition) that lead into the other edition."""
    found = []
    for m in _TARGET.finditer(text):
        target = m[1] or m[2]
        if _resolves_into(target, page, zh):
            found.append(f"link to {target}")
    prose = _TARGET.sub(" ", text)
    if zh:
        found += [f"path {m[0]}" for m in _ENGLISH_ROOT_PATH.finditer(prose)]
        found += [f"command {m[0]!r} (the English edition's)" for m in _MAKE.finditer(prose)
                  if not re.search(r"\b(?:COURSE_LANG|NB)=", m[1])]
    else:
        found += [f"path {m[0]}" for m in _ZH_ROOT_PATH.finditer(prose)]
    return found


# A page about both editions may name the other one's files in a paragraph that says which
# edition they are (an English page: where it speaks of, or in, Chinese).
# README.zh-CN.md also documents the repository for its maintainers and instructors: those lines
# name the English folders on purpose (the zh notebooks are generated from them, never executed,
# and a class collects what its learners wrote).
_LABELLED_ZH = re.compile(r"英文版|English")
_LABELLED_EN = re.compile(r"Chinese|[\u4e00-\u9fff]")
_MAINTAINERS = re.compile(
    r"make (?:execute|exercises|test|release)|course-build-exercises|--release|发布视图|答案密钥"
    r"|^(?:notebooks|exercises)/ +|收集|subs/", re.M)


def _units(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each paragraph, and of each line of a code block; a
    toctree's lines are left out (they name documents relative to their page: in site/zh/, the
    zh ones)."""
    units, paragraph, fence = [], [], None
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            if paragraph:
                units.append(paragraph)
            paragraph = []
            fence = None if fence is not None else line.lstrip()
            continue
        if fence is not None:
            if not fence.startswith("```{toctree}"):
                units.append([(number, line)])
        elif line.strip():
            paragraph.append((number, line))
        elif paragraph:
            units.append(paragraph)
            paragraph = []
    if paragraph:
        units.append(paragraph)
    return [(unit[0][0], "\n".join(line for _, line in unit)) for unit in units]


def _page_problems(path: Path, zh: bool) -> list[str]:
    problems = []
    labelled = _LABELLED_ZH if zh else _LABELLED_EN
    for number, unit in _units(path.read_text(encoding="utf-8")):
        if labelled.search(unit) or (zh and path.name == ed.README_ZH
                                     and _MAINTAINERS.search(unit)):
            continue
        problems += [f"{path.relative_to(ROOT)}:{number}: {what}"
                     for what in crossings(unit, path, zh)]
    return problems


def test_no_zh_page_leads_into_the_english_edition():
    problems = []
    for path in _zh_notebooks():
        for cell_id, source in _markdown(path):
            problems += [f"{path.relative_to(ROOT)} cell {cell_id!r}: {what}"
                         for what in crossings(source, path, zh=True)]
    for path in _zh_pages():
        problems += _page_problems(path, zh=True)
    assert not problems, (
        "the Chinese edition sends its reader to the English files (a zh notebook's paths are "
        "rewritten by `python -m course_utils.editions build`; README.zh-CN.md and site/zh/ "
        "are written by hand):\n" + "\n".join(problems))


def test_no_english_page_leads_into_the_zh_edition():
    problems = []
    for folder in ("notebooks", "exercises"):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            for cell_id, source in _markdown(path):
                problems += [f"{path.relative_to(ROOT)} cell {cell_id!r}: {what}"
                             for what in crossings(source, path, zh=False)]
    for path in [ROOT / "README.md", *sorted((ROOT / "site").glob("*.md"))]:
        problems += _page_problems(path, zh=False)
    assert not problems, "\n".join(problems)


def test_the_checks_find_a_path_into_the_other_edition():
    """The two checks above can fail: each kind of crossing is found, the right forms are not."""
    page = ROOT / "zh" / "exercises" / "01_computation_graphs.ipynb"
    bad = ("用 `make grade NB=exercises/01_computation_graphs.ipynb` 评分；见 "
           "[第 02 课](../../notebooks/02_static_graphs.ipynb)、[README](../../README.md)；"
           "`make grade` 为全部练习评分，`course-grade exercises/` 也是。")
    found = crossings(bad, page, zh=True)
    assert len(found) == 5, found
    good = ("用 `make grade NB=zh/exercises/01_computation_graphs.ipynb` 评分；见 "
            "[第 02 课](../notebooks/02_static_graphs.ipynb)、[README](../../README.zh-CN.md)、"
            "[答案](../../solutions/01_computation_graphs.ipynb)；`make grade COURSE_LANG=zh`。")
    assert crossings(good, page, zh=True) == []
    english = ROOT / "notebooks" / "01_computation_graphs.ipynb"
    assert len(crossings("see `zh/notebooks/01_computation_graphs.ipynb` and "
                         "[中文](../zh/notebooks/01_computation_graphs.ipynb)", english,
                         zh=False)) == 2


def test_the_build_rewrites_whatever_the_translation_says():
    text = ("用下面的命令评分：\n\n    make grade NB=exercises/01_x.ipynb\n\n"
            "在 `exercises/01_x.ipynb` 或 notebooks/ 中；`course-grade exercises/01_x.ipynb`；"
            "`make lab` 与 `make grade` 以及 `make lab PORT=8890`；已经对的："
            "`zh/exercises/01_x.ipynb`、`make grade NB=zh/exercises/01_x.ipynb`、"
            "`make lab COURSE_LANG=zh`、[链接](../exercises/01_x.ipynb)、`solutions/01_x.ipynb`、"
            "https://example.org/notebooks/x。")
    out = ed.own_paths(text)
    assert "    make grade NB=zh/exercises/01_x.ipynb\n" in out
    assert "在 `zh/exercises/01_x.ipynb` 或 zh/notebooks/ 中" in out
    assert "`course-grade zh/exercises/01_x.ipynb`" in out
    assert ("`make lab COURSE_LANG=zh` 与 `make grade COURSE_LANG=zh` 以及 "
            "`make lab PORT=8890 COURSE_LANG=zh`") in out
    assert ("已经对的：`zh/exercises/01_x.ipynb`、`make grade NB=zh/exercises/01_x.ipynb`、"
            "`make lab COURSE_LANG=zh`、[链接](../exercises/01_x.ipynb)、`solutions/01_x.ipynb`、"
            "https://example.org/notebooks/x。") in out
    assert ed.own_paths(out) == out
    # a link to the English folder itself goes to the zh folder
    assert ed.map_target("../exercises/", "notebooks", "zh/notebooks") == "../exercises"
    assert ed.map_target("../README.md#x", "notebooks", "zh/notebooks") == \
        "../../README.zh-CN.md#x"


# --- a learner follows the zh exercise notebook's own grading command ----------------------------

STEM = "01_computation_graphs"


def _grading_commands(path: Path, command: str = "make grade") -> list[str]:
    """The ``command`` lines (``make grade ...``) a notebook's markdown tells its learner to
    run, without a comment after them."""
    return [m[0].strip() for _, source in _markdown(path)
            for m in re.finditer(re.escape(command) + r"[^\n`#]*", source)]


@pytest.mark.slow
def test_the_grading_command_a_zh_exercise_notebook_prints_gives_full_marks(tmp_path):
    """Exercise notebook 01 in zh/, answered with the solutions' code, graded by the command its
    own text prints, run in the course's folder: every point, and the report in Chinese."""
    zh_exercises = ROOT / "zh" / "exercises" / f"{STEM}.ipynb"
    commands = set(_grading_commands(zh_exercises))
    assert commands == {f"make grade NB=zh/exercises/{STEM}.ipynb"}, commands
    hub = set(_grading_commands(zh_exercises, "course-grade"))  # on a class server
    assert hub == {f"course-grade zh/exercises/{STEM}.ipynb"}, hub
    words = next(iter(commands)).split()
    # A copy of the course (its set-up files and solutions) holding the answered notebook where
    # the command looks for it: the learner's checkout, without touching this one's files.
    course = tmp_path / "course"
    for name in ("pyproject.toml", "Makefile"):
        (course / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, course / name)
    shutil.copytree(ROOT / "solutions", course / "solutions")
    nb, pasted = answered(zh_exercises, solution_answers(STEM))
    assert pasted >= 4
    target = course / words[2].removeprefix("NB=")
    target.parent.mkdir(parents=True)
    nbformat.write(nb, target)
    venv = ROOT / ".venv"
    # The course's own environment: VENV points make at it, -o keeps make from reinstalling it.
    done = subprocess.run(["make", "-s", f"VENV={venv}", "-o", str(venv / ".installed"),
                           *words[1:]], cwd=course, capture_output=True, text=True,
                          timeout=1200)
    report = done.stdout
    assert done.returncode == 0, report[-4000:] + done.stderr[-4000:]
    assert f"按 {STEM}.ipynb 评分" in report, report  # the Chinese report of this notebook
    total = re.search(r"^  合计 +(\d+)/(\d+)$", report, re.M)
    assert total and total[1] == total[2] and int(total[2]) >= 20, report
    assert " fail " not in report and " error " not in report, report


# --- Chinese typography: no space between two CJK characters ------------------------------------

_GAP = re.compile(rf"[{ed.CJK}][*_]*[ \t\n]+[*_]*[{ed.CJK}]")
_ENDS_BLOCK = re.compile(r"^ {0,3}(?:#|\||<)|^\s*\|")


def cjk_gaps(markdown: str) -> list[str]:
    """Where a rendered markdown text has a space between two CJK characters: a space, or a line
    break inside a paragraph (rendered as a space), with emphasis markers between them or not.
    Code (blocks and spans), math and link targets are not prose; a break after a heading, a
    table row or an HTML line ends a block."""
    text = re.sub(r"^\s*(```|~~~).*?^\s*\1[^\n]*$", "", markdown, flags=re.M | re.S)
    text = re.sub(r"(`+).+?\1", "X", text, flags=re.S)
    text = re.sub(r"\$\$.+?\$\$|\$[^$\n]+\$", "X", text, flags=re.S)
    text = re.sub(r"\]\([^)\s]*\)", "]", text)
    lines = text.split("\n")
    joined = "".join(line + ("¶" if _ENDS_BLOCK.match(line) or not line.strip() else "\n")
                     for line in lines)
    return [joined[max(m.start() - 12, 0):m.end() + 12].replace("\n", "⏎")
            for m in _GAP.finditer(joined)]


def _zh_prose() -> list[tuple[str, str]]:
    """(where, markdown) of every text a Chinese reader reads: the zh notebooks' markdown
    cells, README.zh-CN.md and the site's Chinese pages."""
    out = [(f"{path.relative_to(ROOT)} cell {cell_id!r}", source)
           for path in _zh_notebooks() for cell_id, source in _markdown(path)]
    out += [(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))
            for path in _zh_pages()]
    return out


def test_no_space_or_line_break_between_two_cjk_characters():
    problems = [f"{where}: {gap!r}" for where, text in _zh_prose() for gap in cjk_gaps(text)]
    assert not problems, (
        f"{len(problems)} spaces between CJK characters in rendered Chinese prose (a line break "
        "inside a paragraph renders as a space; the zh notebooks are joined by `python -m "
        "course_utils.editions build`, README.zh-CN.md and site/zh/ are fixed in their "
        "source):\n" + "\n".join(problems[:60]))


def test_every_emphasis_of_the_chinese_prose_renders_as_emphasis():
    """No `*` is left as text by a markdown parser (CommonMark, as the site's): emphasis split
    across lines, or closed between punctuation and a letter, shows its asterisks."""
    markdown_it = pytest.importorskip("markdown_it")
    parser = markdown_it.MarkdownIt("commonmark").enable("table")

    def texts(tokens):
        for token in tokens:
            if token.children:
                yield from texts(token.children)
            elif token.type == "text":
                yield token.content

    problems = []
    for where, text in _zh_prose():
        text = re.sub(r"\$\$.+?\$\$|\$[^$\n]+\$", "X", text, flags=re.S)
        problems += [f"{where}: {t[:80]!r}" for t in texts(parser.parse(text))
                     if re.search(r"\*(?!\w*\.ipynb)", t)]
    assert not problems, "\n".join(problems)


def test_the_typography_checks_and_the_join():
    assert cjk_gaps("当某个输入需要梯度时，\n  它还会") and cjk_gaps("时， 它") \
        and cjk_gaps("*没有可测出的\n差异*") and cjk_gaps("**接下来。** 第 02 课")
    assert cjk_gaps("加上 **冻结**（frozen）") and cjk_gaps("高到两倍？**\n只有")
    for fine in ("## 标题\n正文", "| 中 |\n| 文 |", "段落。\n\n下一段", "在 `x` 中",
                 "```\n中文\n中文\n```", "第 02 课", "用\nPyTorch 写", "* 一\n* 二"):
        assert not cjk_gaps(fine), fine
    text = ("当某个输入需要梯度时，\n  它还会\n* 列表\n* **接下来。** 第 02 课\n## 标题\n"
            "正文*没有可测出的\n差异*（no）\n高到两倍？**\n只有 **冻结** 的\n\n"
            "```\n中文\n中文\n```")
    joined = ed.join_cjk_lines(text)
    assert not cjk_gaps(joined), cjk_gaps(joined)
    assert joined == ("当某个输入需要梯度时，它还会\n* 列表\n* **接下来**。第 02 课\n## 标题\n"
                      "正文*没有可测出的差异*（no）高到两倍**？只有**冻结**的\n\n```\n中文\n中文\n```")
    assert ed.join_cjk_lines(joined) == joined
    assert ed.join_cjk_lines("English\nlines stay\n`as` they are") == \
        "English\nlines stay\n`as` they are"


# --- the verdict words: glossed once per notebook ----------------------------------------------

_VERDICT_GLOSS = re.compile(r"（`?(faster|slower|no measurable difference|cannot tell from this "
                            r"run|within 10%|within the margin|undecided)`?[，）]")


def test_each_printed_verdict_word_is_glossed_once_per_notebook():
    """`bench` prints its verdicts in English (the code cells are shared): a zh notebook gives
    each English word once, in its legend, and writes the Chinese after that."""
    problems = []
    for path in _zh_notebooks():
        words = [m[1] for _, source in _markdown(path) for m in _VERDICT_GLOSS.finditer(source)]
        problems += [f"{path.relative_to(ROOT)}: ({word}) {words.count(word)} times"
                     for word in sorted(set(words)) if words.count(word) > 1]
    assert not problems, "\n".join(problems)


# --- the messages a learner meets most, in the Chinese report ----------------------------------

def test_the_zh_report_gives_the_common_messages_in_chinese():
    table = "\n".join([
        "zh/exercises/00_setup.ipynb  (learner you, graded as 00_setup.ipynb)",
        "  exercise  points  status    message",
        "  00.1         0/2  error     NotImplementedError: Exercise 00.1: your code here",
        "  00.2         1/2  fail      AssertionError: identical arrays: expected 0, got 3",
        "  00.3         0/1  error     NotImplementedError: Exercise 00.3: your code here (in your "
        "solution, code cell 7)",
        "  total        1/5",
        "  details:",
        "    00.2, checks in code cells 6, the hidden check after code cell 6 (1/2): fail",
        "      AssertionError: identical arrays: expected 0, got 3",
        "      at code cell 5, line 7: `return a - b`",
        "    00.3, check in code cell 8 (0/1): error",
        "      timed out after 60 s (interrupted)",
        "      not run: the kernel died in an earlier cell",
        "      the kernel died (exit code 137)",
        "      `n_ops` is not set: write your prediction as `n_ops = ...` in your answer cell",
        "      1 of 3 predictions right; not right: `a`, `b`. Run the measurement below and read "
        "why.",
        "      ValueError: operands could not be broadcast together",
        "  notes:",
        "    00.1: its check cell (`assert x`) was deleted; the original was put back",
        "    00.2: its check cell (`assert y`) differs from the course's (edited, or an older copy "
        "of the exercises); the course's check ran instead",
    ])
    assert ed.localize_table(table, "en") == table
    zh = ed.localize_table(table, "zh").splitlines()
    unanswered = "还没有作答（把抛出它的那一行换成你的代码）"
    assert zh[2].endswith(f"NotImplementedError：练习 00.1 {unanswered}")
    assert zh[3].endswith("AssertionError: identical arrays: 期望 0，实际得到 3")
    assert zh[4].endswith(f"{unanswered}（出错的是你的答案：代码单元格 7）")
    assert zh[7] == "    00.2 的检查（代码单元格 6、代码单元格 6 之后的隐藏检查）：1/2，fail"
    assert zh[9] == "      位置：代码单元格 5 第 7 行：`return a - b`"
    assert zh[10] == "    00.3 的检查（代码单元格 8）：0/1，error"
    assert zh[11:16] == [
        "      60 秒后超时（已被中断）",
        "      没有运行：内核在前面的单元格中崩溃了",
        "      内核崩溃了（退出码 137）",
        "      `n_ops` 还没有赋值：把你的预测写成 `n_ops = ...`（写在你的答案单元格中）",
        "      3 个预测中对了 1 个；不对的：`a`, `b`。运行下面的测量，读一读原因。"]
    assert zh[16] == "      ValueError: operands could not be broadcast together"  # as it is
    assert zh[18] == "    00.1: 它的检查单元格 (`assert x`) 被删除了；原来的检查已放回"
    assert zh[19] == ("    00.2: 它的检查单元格 (`assert y`) 与课程的不同"
                      "（被编辑过，或是较早的练习副本）；运行的是课程的检查")
    # the learner's code in a message is never translated
    assert "`raise NotImplementedError(\"Exercise 00.1: your code here\")`" in ed.localize_table(
        "      at code cell 2, line 7: `raise NotImplementedError(\"Exercise 00.1: your code "
        "here\")`", "zh")
