"""The course's editions: the Chinese (zh-CN) notebooks, generated from the English ones.

The English notebooks (``notebooks/NN_topic.ipynb`` and ``exercises/NN_topic.ipynb``) are the
single source. A translation is kept per markdown cell in ``zh/translations/NN_topic.json``::

    {"lesson":    {"<cell id>": {"en_sha256": "...", "en": "<English source>", "zh": "<中文>"}},
     "exercises": {"<cell id>": {...}}}

``en_sha256`` is the SHA-256 of the English cell's source (UTF-8) the translation was made from,
and ``en`` that source, so a stale translation can be compared with the new English.

``build`` writes ``zh/notebooks/NN_topic.ipynb`` and ``zh/exercises/NN_topic.ipynb``: the English
notebook with each markdown cell's source replaced by its translation (relative links rewritten
so they work from ``zh/``, every path and command pointed at the zh files, soft line breaks
between Chinese characters joined); code cells, outputs, cell ids and metadata are copied as
they are, so the grader, the checks and nbval's recorded outputs are shared, and the Chinese
notebooks are never executed on their own. A markdown cell without an up-to-date translation
keeps its English text (the Chinese edition never says something the English no longer says),
and ``check`` fails.

Commands (``python -m course_utils.editions COMMAND [STEM ...]``):

``build``  write the zh notebooks;
``check``  exit 1, listing cells, when a translation is missing or stale, a translation names a
           cell the English no longer has, or a zh notebook is not what ``build`` would write
           (its code cells differ from the English, or it is out of date);
``todo``   what a translator has to do, per lesson: missing cells (with their English) and stale
           ones (a diff of the old English against the new);
``review`` for a reviewer: translated cells whose code spans, code blocks, math, link targets,
           numbers or markdown structure differ from the English (some differences are right).
"""

from __future__ import annotations

import argparse
import copy
import difflib
import hashlib
import json
import posixpath
import re
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: The repository root (``src/course_utils/editions.py`` -> three levels up).
ROOT = Path(__file__).resolve().parents[2]
#: The edition's folder, and the README of the edition.
ZH = "zh"
README_ZH = "README.zh-CN.md"
#: (key in the translation file, English folder): the two notebooks of a lesson.
KINDS = (("lesson", "notebooks"), ("exercises", "exercises"))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def source_of(cell: dict) -> str:
    """A cell's source as one string (notebooks store it as a list of lines or as a string)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _lines(text: str) -> list[str]:
    """A source as nbformat writes it: a list of lines, each but the last ending in a newline."""
    return text.splitlines(keepends=True)


def dumps_notebook(nb: dict) -> str:
    """A notebook serialised exactly as nbformat writes it (the course's notebooks round-trip)."""
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def dumps_translations(obj: dict) -> str:
    """A translation file, in its fixed format."""
    return json.dumps(obj, ensure_ascii=False, indent=1) + "\n"


def stems(root: Path = ROOT) -> list[str]:
    """Every lesson, by the English lesson notebooks on disk."""
    return [p.stem for p in sorted((root / "notebooks").glob("*.ipynb"))]


def translation_path(stem: str, root: Path = ROOT) -> Path:
    return root / ZH / "translations" / f"{stem}.json"


def zh_path(folder: str, stem: str, root: Path = ROOT) -> Path:
    return root / ZH / folder / f"{stem}.ipynb"


def load_translations(stem: str, root: Path = ROOT) -> dict:
    """The translation file of a lesson ({} parts when there is none yet); a malformed file is an
    error that names it."""
    path = translation_path(stem, root)
    if not path.is_file():
        return {"lesson": {}, "exercises": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e}); fix the file and run again") from None
    if not isinstance(data, dict) or set(data) - {"lesson", "exercises"}:
        raise ValueError(f"{path}: expected an object with the keys 'lesson' and 'exercises', "
                         f"got {sorted(data) if isinstance(data, dict) else type(data).__name__}")
    for key in ("lesson", "exercises"):
        part = data.setdefault(key, {})
        for cell_id, entry in part.items():
            if not (isinstance(entry, dict) and {"en_sha256", "zh"} <= set(entry)
                    and isinstance(entry["zh"], str)):
                raise ValueError(f"{path}: {key} cell {cell_id!r} needs the keys 'en_sha256', "
                                 f"'en' and 'zh' (strings), got {entry!r:.200}")
    return data


# --- links --------------------------------------------------------------------------------------

#: A markdown link or image target: ``](target)`` or ``](target "title")``; HTML src/href.
_MD_LINK = re.compile(r"(\]\()(<[^>\n]*>|[^)\s]+)((?:\s+\"[^\"\n]*\")?\))")
_HTML_LINK = re.compile(r"""(\b(?:src|href)=)(["'])([^"'\n]+)(\2)""")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def map_target(target: str, src_dir: str, dst_dir: str, root: Path = ROOT) -> str:
    """A relative link of a notebook in ``src_dir`` (e.g. ``notebooks``), as a notebook in
    ``dst_dir`` (e.g. ``zh/notebooks``) must write it: README.md becomes the Chinese README,
    lessons and exercises stay in the zh edition, every other file of the repository is the
    English tree's. Absolute URLs, anchors and targets that name no file are left alone."""
    bracketed = target.startswith("<") and target.endswith(">")
    bare = target[1:-1] if bracketed else target
    if not bare or bare.startswith(("#", "/")) or _SCHEME.match(bare):
        return target
    path, hash_, anchor = bare.partition("#")
    resolved = posixpath.normpath(posixpath.join(src_dir, path))
    if resolved.startswith("..") or not (root / resolved).exists():
        return target
    if resolved == "README.md":
        mapped = README_ZH
    else:
        folder, _, name = resolved.partition("/")
        if folder in ("notebooks", "exercises") and ("/" not in name and name.endswith(".ipynb")
                                                    or name in ("", ".")):
            mapped = f"{ZH}/{folder}" + (f"/{name}" if name not in ("", ".") else "")
        else:
            mapped = resolved
    new = posixpath.relpath(mapped, dst_dir) + hash_ + anchor
    return f"<{new}>" if bracketed else new


#: A path from the course's root into the English lesson or exercise folder, wherever a zh
#: notebook writes one (prose, a code span, a command: `make grade NB=exercises/01_x.ipynb`):
#: not one under zh/ already, nor a relative link (`../exercises/...`: map_target's work).
_ENGLISH_FOLDER = re.compile(r"(?<![A-Za-z0-9_./\\-])(notebooks|exercises)/")
#: `make lab` and `make grade` pick their edition by COURSE_LANG (Makefile); a command that names
#: neither the edition nor a notebook (NB=...) opens or grades the English one.
_MAKE_EDITION = re.compile(r"\bmake (?:lab|grade)\b((?:[ \t]+[A-Z_]+=[^\s`]*)*)")


def own_paths(text: str) -> str:
    """A zh notebook's text with every path and command pointed at the zh edition's own files,
    whatever the translation wrote: `exercises/NN.ipynb` -> `zh/exercises/NN.ipynb` (also in
    `make grade NB=...` and `course-grade ...`), and `make lab` / `make grade` without a
    notebook get `COURSE_LANG=zh`. Run after :func:`rewrite_links`."""
    text = _ENGLISH_FOLDER.sub(rf"{ZH}/\1/", text)

    def make(m: re.Match) -> str:
        return m[0] if re.search(r"\b(?:COURSE_LANG|NB)=", m[1]) else m[0] + " COURSE_LANG=zh"

    return _MAKE_EDITION.sub(make, text)


def rewrite_links(text: str, src_dir: str, dst_dir: str, root: Path = ROOT) -> str:
    """Every relative link and image in a markdown text, mapped by :func:`map_target`."""
    text = _MD_LINK.sub(
        lambda m: m[1] + map_target(m[2], src_dir, dst_dir, root) + m[3], text)
    return _HTML_LINK.sub(
        lambda m: m[1] + m[2] + map_target(m[3], src_dir, dst_dir, root) + m[4], text)


# --- Chinese typography -------------------------------------------------------------------------

#: CJK ideographs, CJK symbols and punctuation, and full-width forms (，。：；（）！？ ...).
CJK = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
#: Of those, the punctuation.
CJK_PUNCT = "\u3000-\u303f\uff00-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"
#: Of those, the letters (ideographs).
CJK_LETTERS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# Emphasis with `*` only: `_` does not open or close between two letters (CommonMark).
_ENDS_CJK = re.compile(rf"([{CJK}])(\**)$")
_STARTS_CJK = re.compile(rf"^[ \t]*(\**)(?=[{CJK}])")
#: A line that ends its block: a heading, a table row, an HTML line.
_BLOCK_LINE = re.compile(r"^ {0,3}(?:#|\||<)|^\s*\|")
#: A space after emphasis that ends on CJK (`**冻结** 的`, `**接下来。** 第`), and before one
#: that starts on a CJK letter (`加上 **冻结**`), between CJK characters. (After punctuation the
#: space was needed: a closing `**` between punctuation and a letter does not close.)
_SPACE_AFTER_EMPHASIS = re.compile(rf"([{CJK}])(\*{{1,3}})[ \t]+(?=[{CJK}])")
_SPACE_BEFORE_EMPHASIS = re.compile(rf"([{CJK}])[ \t]+(\*{{1,3}})(?=[{CJK_LETTERS}])")


def _close_after(char: str, markers: str) -> str:
    """Emphasis closed after a CJK character, written so that it closes with no space after it:
    punctuation moves out (`。**` -> `**。`)."""
    return markers + char if re.match(rf"[{CJK_PUNCT}]", char) else char + markers


def join_cjk_lines(text: str) -> str:
    """Markdown with no soft line break or space between two CJK characters, as Chinese is
    written: a line break inside a paragraph renders as a space (in JupyterLab and on the site),
    so a paragraph wrapped like English (`需要梯度时，⏎它还会`) reads `时， 它`. Lines are joined
    where the characters on both sides are CJK (emphasis markers between them kept, so `*没有
    可测出的⏎差异*` stays one emphasis); emphasis that ends with CJK punctuation before a space
    or a break closes before the punctuation instead. Code blocks, headings and table rows are
    left alone."""
    out: list[str] = []
    fence = ""
    for line in text.split("\n"):
        stripped = line.lstrip()
        if fence:
            out.append(line)
            if stripped.startswith(fence):
                fence = ""
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            out.append(line)
            continue
        line = _SPACE_AFTER_EMPHASIS.sub(lambda m: _close_after(m[1], m[2]), line)
        line = _SPACE_BEFORE_EMPHASIS.sub(r"\1\2", line)
        prev = out[-1] if out else ""
        left, right = _ENDS_CJK.search(prev), _STARTS_CJK.match(line)
        if out and left and right and line.strip() and not _BLOCK_LINE.match(prev) \
                and not _BLOCK_LINE.match(line):
            out[-1] = prev[:left.start()] + _close_after(left[1], left[2]) \
                + line[right.end() - len(right[1]):]
        else:
            out.append(line)
    return "\n".join(out)


# --- building and checking ----------------------------------------------------------------------

@dataclass
class Problem:
    """One thing that keeps a lesson's zh edition from being complete and current."""

    stem: str
    kind: str  # "lesson" or "exercises"
    cell: str  # cell id ("" for the whole notebook)
    what: str  # missing | stale | orphan | code | out of date | no notebook
    old_en: str = ""
    new_en: str = ""

    def line(self) -> str:
        where = f"{self.stem} {self.kind}" + (f" cell {self.cell!r}" if self.cell else "")
        return f"{where}: {_EXPLAIN[self.what]}"


_EXPLAIN = {
    "missing": "no translation (add it to zh/translations/, see `todo`)",
    "stale": "the English changed since it was translated (en_sha256 differs; see `todo`)",
    "orphan": "translated, but the English notebook has no such markdown cell any more "
              "(remove it from the translation file)",
    "code": "the zh notebook's code cell (source, outputs or metadata) differs from the "
            "English; run `python -m course_utils.editions build`",
    "cells": "the zh notebook's cells (ids, order, types) or metadata differ from the English; "
             "run `python -m course_utils.editions build`",
    "out of date": "the zh notebook is not what `build` writes from the English notebook and "
                   "the translations; run `python -m course_utils.editions build`",
    "no notebook": "the zh notebook does not exist; run `python -m course_utils.editions build`",
}


@dataclass
class Edition:
    """A lesson's zh notebook as built, with the cells that kept their English."""

    stem: str
    kind: str
    notebook: dict
    problems: list[Problem] = field(default_factory=list)


def translate_notebook(stem: str, kind: str, folder: str, translations: dict,
                       root: Path = ROOT) -> Edition:
    """The zh notebook of one English notebook, and the translation problems met on the way."""
    english_path = root / folder / f"{stem}.ipynb"
    english = json.loads(english_path.read_text(encoding="utf-8"))
    nb = copy.deepcopy(english)
    part = translations.get(kind, {})
    edition = Edition(stem, kind, nb)
    seen = set()
    for index, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") != "markdown":
            continue
        cell_id = cell.get("id")
        if not cell_id:
            raise ValueError(f"{english_path}: markdown cell {index} has no id; the translations "
                             "are keyed by cell id (nbformat 4.5 gives every cell one)")
        seen.add(cell_id)
        en = source_of(cell)
        entry = part.get(cell_id)
        if entry is None:
            edition.problems.append(Problem(stem, kind, cell_id, "missing", new_en=en))
            text = en
        elif entry["en_sha256"] != sha256(en):
            edition.problems.append(Problem(stem, kind, cell_id, "stale",
                                            old_en=entry.get("en", ""), new_en=en))
            text = en
        else:
            text = entry["zh"]
        text = join_cjk_lines(own_paths(rewrite_links(text, folder, f"{ZH}/{folder}", root)))
        cell["source"] = _lines(text)
    edition.problems += [Problem(stem, kind, cell_id, "orphan") for cell_id in part
                         if cell_id not in seen]
    return edition


def editions(stem: str, root: Path = ROOT) -> list[Edition]:
    translations = load_translations(stem, root)
    return [translate_notebook(stem, kind, folder, translations, root)
            for kind, folder in KINDS if (root / folder / f"{stem}.ipynb").is_file()]


def build(stem_list: Sequence[str] | None = None, root: Path = ROOT) -> list[Problem]:
    """Write the zh notebooks; returns the translation problems (cells left in English)."""
    problems = []
    for stem in stem_list or stems(root):
        for edition in editions(stem, root):
            folder = dict(KINDS)[edition.kind]
            path = zh_path(folder, stem, root)
            path.parent.mkdir(parents=True, exist_ok=True)
            text = dumps_notebook(edition.notebook)
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
            problems += edition.problems
    return problems


def _code_differences(stem: str, kind: str, english: dict, zh: dict) -> list[Problem]:
    """Code cells that are not byte for byte the English ones; cells out of step."""
    def shape(nb):
        return [(c.get("id"), c.get("cell_type")) for c in nb.get("cells", [])]

    problems = []
    if shape(english) != shape(zh) or english.get("metadata") != zh.get("metadata"):
        problems.append(Problem(stem, kind, "", "cells"))
    zh_cells = {c.get("id"): c for c in zh.get("cells", [])}
    for cell in english["cells"]:
        if cell.get("cell_type") != "code":
            continue
        theirs = zh_cells.get(cell.get("id"))
        if theirs is None or dumps_notebook(theirs) != dumps_notebook(cell):
            problems.append(Problem(stem, kind, cell.get("id", ""), "code"))
    return problems


def check(stem_list: Sequence[str] | None = None, root: Path = ROOT) -> list[Problem]:
    """Everything that keeps the zh edition from being complete and current (empty: all good)."""
    problems = []
    for stem in stem_list or stems(root):
        for edition in editions(stem, root):
            problems += edition.problems
            folder = dict(KINDS)[edition.kind]
            path = zh_path(folder, stem, root)
            if not path.is_file():
                problems.append(Problem(stem, edition.kind, "", "no notebook"))
                continue
            text = path.read_text(encoding="utf-8")
            try:
                zh = json.loads(text)
            except json.JSONDecodeError:
                problems.append(Problem(stem, edition.kind, "", "out of date"))
                continue
            english = json.loads((root / folder / f"{stem}.ipynb").read_text(encoding="utf-8"))
            problems += _code_differences(stem, edition.kind, english, zh)
            if text != dumps_notebook(edition.notebook):
                problems.append(Problem(stem, edition.kind, "", "out of date"))
    return problems


def todo_text(stem_list: Sequence[str] | None = None, root: Path = ROOT) -> str:
    """Per lesson, the cells to translate (with their English) and to update (old vs new)."""
    out = []
    for stem in stem_list or stems(root):
        problems = [p for e in editions(stem, root) for p in e.problems]
        if not problems:
            continue
        counts = {w: sum(p.what == w for p in problems) for w in ("missing", "stale", "orphan")}
        out.append(f"== {stem} ({translation_path(stem, root).relative_to(root)}): "
                   + ", ".join(f"{n} {w}" for w, n in counts.items() if n))
        for p in problems:
            out.append(f"-- {p.kind} cell {p.cell!r}: {p.what}")
            if p.what == "missing":
                out.append(f"   en_sha256: {sha256(p.new_en)}")
                out += ["   | " + line for line in p.new_en.splitlines()]
            elif p.what == "stale":
                out.append(f"   new en_sha256: {sha256(p.new_en)}")
                diff = difflib.unified_diff(p.old_en.splitlines(), p.new_en.splitlines(),
                                            "old English", "new English", lineterm="", n=1)
                out += ["   " + line for line in diff]
    return "\n".join(out) if out else "nothing to do: every markdown cell has a current translation"


# --- a mechanical review of a translation ---------------------------------------------------------

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?:e-?\d+)?")
_LINK_TARGET = re.compile(r"\]\(([^)\s]+)")


def _parts(text: str) -> dict[str, list[str]]:
    """What a translation must carry over unchanged: code blocks, math, code spans, link
    targets, numbers outside code, and the markdown structure (headings, table rows, items)."""
    fences = _FENCE.findall(text)
    rest = _FENCE.sub(" ", text)
    math = _MATH.findall(rest)
    rest = _MATH.sub(" ", rest)
    spans = [m[2].strip() for m in _CODE_SPAN.finditer(rest)]
    prose = _CODE_SPAN.sub(" ", rest)
    lines = text.splitlines()
    return {
        "code blocks": fences, "math": math, "code": spans,
        "links": _LINK_TARGET.findall(prose),
        "numbers": _NUMBER.findall(_LINK_TARGET.sub(" ", prose)),
        "headings": [line.split(" ")[0] for line in lines if re.match(r"#+ ", line)],
        "table rows": [str(sum(1 for line in lines if line.startswith("|")))],
    }


def review_cell(en: str, zh: str) -> list[str]:
    """Differences between an English cell and its translation that a reviewer must look at:
    code, math, links, numbers or structure that are in one and not in the other."""
    want, got = _parts(en), _parts(zh)
    found = []
    for key in want:
        missing = list(want[key])
        for item in got[key]:
            if item in missing:
                missing.remove(item)
        extra = list(got[key])
        for item in want[key]:
            if item in extra:
                extra.remove(item)
        if missing:
            found.append(f"{key} only in the English: {missing}")
        if extra:
            found.append(f"{key} only in the Chinese: {extra}")
    return found


def review_text(stem_list: Sequence[str] | None = None, root: Path = ROOT) -> str:
    """Per lesson, the translated cells whose code, math, links, numbers or structure differ
    from the English: a list for the reviewer (some differences are right, e.g. zh/ paths)."""
    out = []
    for stem in stem_list or stems(root):
        translations = load_translations(stem, root)
        for kind, folder in KINDS:
            path = root / folder / f"{stem}.ipynb"
            if not path.is_file():
                continue
            for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
                entry = translations[kind].get(cell.get("id"))
                if cell.get("cell_type") != "markdown" or entry is None:
                    continue
                found = review_cell(source_of(cell), entry["zh"])
                if found:
                    out.append(f"{stem} {kind} cell {cell['id']!r}:")
                    out += [f"    {line}" for line in found]
    return "\n".join(out) if out else "no differences in code, math, links, numbers or structure"


# --- the grader's report in Chinese -----------------------------------------------------------

#: A notebook is Chinese when its markdown has at least this many CJK ideographs, and they are
#: at least this share of its letters (an English lesson quotes a Chinese title or two).
_CJK = re.compile(r"[\u4e00-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")
_CJK_MIN, _CJK_SHARE = 20, 0.1
#: Notebooks larger than this are not read to find their language (the grader refuses them).
_LANG_MAX_BYTES = 16 * 2**20


def notebook_language(path: str | Path) -> str:
    """``"zh"`` for a notebook of the Chinese edition (its markdown is Chinese), else ``"en"``.
    A file that cannot be read as a notebook is ``"en"``: the grader reports it."""
    try:
        path = Path(path)
        if path.is_symlink() or path.stat().st_size > _LANG_MAX_BYTES:
            return "en"
        nb = json.loads(path.read_text(encoding="utf-8"))
        text = "".join(source_of(c) for c in nb.get("cells", [])
                       if isinstance(c, dict) and c.get("cell_type") == "markdown")
    except (OSError, ValueError, AttributeError, TypeError):
        return "en"
    cjk, latin = len(_CJK.findall(text)), len(_LATIN.findall(text))
    return "zh" if cjk >= _CJK_MIN and cjk >= _CJK_SHARE * (cjk + latin) else "en"


def report_language(paths: Sequence[str | Path]) -> str:
    """The language of a grading report: Chinese when every notebook graded is Chinese."""
    paths = list(paths)
    return "zh" if paths and all(notebook_language(p) == "zh" for p in paths) else "en"


def _width(text: str) -> int:
    """Columns a text takes in a terminal (CJK characters take two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _as_wide(zh: str, en: str, right: bool = False) -> str:
    """``zh`` padded to the columns ``en`` took, so the table's columns stay aligned."""
    pad = " " * max(_width(en) - _width(zh), 0)
    return pad + zh if right else zh + pad


_HEADER = re.compile(r"^(?P<path>\S.*?)  \(learner (?P<learner>.*), "
                     r"(?:graded as (?P<nb>.*)|no matching solutions notebook)\)$")
_COLUMNS = re.compile(r"^  exercise( +)points( +)status( +)message$")
_TOTAL = re.compile(r"^  total( +)(\S+)$")
_ALL = re.compile(r"^all: (\S+) points; (\d+) of (\d+) notebooks fully passed$")


#: The messages a learner meets most in a report, in Chinese: the grader's own (an unanswered
#: exercise, where it failed, time-outs, a dead kernel, predictions not written, edited checks)
#: and the checks' most common form ("expected X, got Y"). Other check messages stay English
#: (the check cells are shared with the English edition); statuses stay English (glossary).
_MESSAGES_ZH = [(re.compile(pattern), zh) for pattern, zh in (
    (r"NotImplementedError: Exercise (\S+): your code here",
     r"NotImplementedError：练习 \1 还没有作答（把抛出它的那一行换成你的代码）"),
    (r" \(in your solution, ([^)]*)\)", r"（出错的是你的答案：\1）"),
    (r"^(    \S+), checks? in (.+) \((\d+/\d+)\): (\w+)$",
     lambda m: f"{m[1]} 的检查（{_labels_zh(m[2])}）：{m[3]}，{m[4]}"),
    (r"^(      )at code cell (\d+), line (\d+): ", r"\1位置：代码单元格 \2 第 \3 行："),
    (r"^(      )at code cell (\d+): ", r"\1位置：代码单元格 \2："),
    (r"\bcode cells? (\d+)", r"代码单元格 \1"),
    (r"timed out after (\S+) s \(interrupted\)", r"\1 秒后超时（已被中断）"),
    (r"timed out after (\S+) s and ignored the interrupt; its kernel was stopped",
     r"\1 秒后超时，且没有响应中断；它的内核已被停止"),
    (r"the check timed out after (\S+) s", r"检查在 \1 秒后超时"),
    (r"not run: the kernel died in an earlier cell", "没有运行：内核在前面的单元格中崩溃了"),
    (r"the kernel died \(exit code (-?\d+)\)", r"内核崩溃了（退出码 \1）"),
    (r"the kernel died\b", "内核崩溃了"),
    (r"`(\w+)` is not set: write your prediction as `\1 = \.\.\.`( in your answer cell)?",
     r"`\1` 还没有赋值：把你的预测写成 `\1 = ...`（写在你的答案单元格中）"),
    (r"(\d+) of (\d+) predictions right; not right: (.*?)\. Run the measurement below and read "
     r"why\.", r"\2 个预测中对了 \1 个；不对的：\3。运行下面的测量，读一读原因。"),
    (r"\bexpected (.+?), got (.+)$", r"期望 \1，实际得到 \2"),
    (r"its check cell (.*?)differs from the course's \(edited, or an older copy of the "
     r"exercises\); the course's check ran instead",
     r"它的检查单元格 \1与课程的不同（被编辑过，或是较早的练习副本）；运行的是课程的检查"),
    (r"its check cell (.*?)was deleted; the original was put back",
     r"它的检查单元格 \1被删除了；原来的检查已放回"),
)]


_KIND_ZH = {"hidden": "隐藏", "restored": "恢复的"}


def _labels_zh(labels: str) -> str:
    """Where a report's checks are ('code cells 6, the hidden check after code cell 6'), in
    Chinese ('代码单元格 6、代码单元格 6 之后的隐藏检查')."""
    labels = re.sub(r"the (hidden|restored) check after code cell (\d+)",
                    lambda m: f"代码单元格 {m[2]} 之后的{_KIND_ZH[m[1]]}检查", labels)
    return re.sub(r"\bcode cells? ", "代码单元格 ", labels).replace(", ", "、")


def localize_message(line: str) -> str:
    """One line of a report's rows, details or notes with the messages of ``_MESSAGES_ZH`` in
    Chinese (anything else as it is)."""
    for pattern, zh in _MESSAGES_ZH:
        line = pattern.sub(zh, line)
    return line


def localize_table(text: str, lang: str = "zh") -> str:
    """The grader's table (``report.format_table``) with its headings, column names, totals and
    summary line in ``lang``, and the messages learners meet most (``_MESSAGES_ZH``). Statuses,
    and check messages of other forms, stay as they are (the checks are shared with the English
    edition and speak English)."""
    if lang != "zh":
        return text
    out = []
    for line in text.split("\n"):
        if m := _HEADER.match(line):
            graded = f"按 {m['nb']} 评分" if m["nb"] is not None else "没有匹配的答案笔记本"
            line = f"{m['path']}（学习者 {m['learner']}，{graded}）"
        elif m := _COLUMNS.match(line):
            line = ("  " + _as_wide("练习", "exercise") + m[1] + _as_wide("分数", "points", True)
                    + m[2] + _as_wide("状态", "status") + m[3] + "信息")
        elif m := _TOTAL.match(line):
            line = "  " + _as_wide("合计", "total") + m[1] + m[2]
        elif line == "  details:":
            line = "  详情："
        elif line == "  notes:":
            line = "  注释："
        elif line.startswith("  error: "):
            line = "  错误：" + line[len("  error: "):]
        elif m := _ALL.match(line):
            line = f"全部：{m[1]} 分；{m[3]} 个笔记本中有 {m[2]} 个全部通过"
        else:
            line = localize_message(line)
        out.append(line)
    return "\n".join(out)


def main(argv: Sequence[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.editions",
        description="The Chinese edition: build zh/ from the English notebooks and "
        "zh/translations/, check it is complete and current, list what to translate.")
    parser.add_argument("command", choices=["build", "check", "todo", "review"])
    parser.add_argument("stems", nargs="*", metavar="NN_topic",
                        help="lessons (default: every lesson in notebooks/)")
    args = parser.parse_args(argv)
    known = stems(root)
    wanted = [Path(s).stem for s in args.stems] or known
    unknown = [s for s in wanted if s not in known]
    if unknown:
        print(f"error: no lesson notebooks/{unknown[0]}.ipynb (lessons: {', '.join(known)})",
              file=sys.stderr)
        return 2
    try:
        if args.command == "todo":
            print(todo_text(wanted, root))
            return 0
        if args.command == "review":
            print(review_text(wanted, root))
            return 0
        if args.command == "build":
            problems = build(wanted, root)
            print(f"wrote zh/notebooks and zh/exercises for {len(wanted)} lesson(s)")
            if problems:
                print(f"{len(problems)} markdown cell(s) kept their English (missing or stale "
                      "translations, see `todo`); `check` fails until they are translated")
            return 0
        problems = check(wanted, root)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if problems:
        print(f"the zh edition is not complete and current ({len(problems)} problem(s)):")
        print("\n".join("  " + p.line() for p in problems))
        return 1
    print(f"the zh edition is complete and current ({len(wanted)} lesson(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
