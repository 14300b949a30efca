"""Prose that cannot contradict its run: what a lesson's markdown may say about its own outputs.

A lesson is committed executed, and its timing cells are re-run on other machines (``make
execute``), where the figures and verdicts change. nbval ignores those outputs, rightly, so
nothing would notice prose that describes an older run. Two rules hold the prose to its run; a
figure or verdict of the run is printed by the cell that measured it, and the prose says what to
look for and why.

1. **Figures come from the outputs.** A figure in a markdown cell (a number with a unit of time,
   a rate, a ratio such as ``1.5×`` or ``2.5x``, or a percentage) must appear, as a number and a
   unit, in some stored output of the same notebook. A cell that states a figure from elsewhere
   (the article, a setting of the code, another machine's measurement) lists it in its metadata,
   ``{"cited": ["20% (the article)", "2 seconds (the time cap)"]}``; the Chinese edition inherits
   the list with the cell. The course's own constants, the verdicts' margin and confidence
   (``bench.MARGIN``, ``bench.CONFIDENCE``), need no listing.
2. **A sentence about the run decides nothing itself.** A sentence that refers to the run ("on
   the run shown", "this run", "on our machines", 本次运行, ...) must not put a verdict word
   (faster, slower, within 10%, no measurable difference, cannot tell; 更快, 更慢, ...), an
   order of magnitude (tens of, milliseconds, 几十, 毫秒, ...) or an outcome ("ten times as fast",
   "the largest share", "it did") in a clause, unless that clause points to where the run says it
   ("whether", "how much", 是否, 多少...). "The development machine" and "the machines the course
   is tested on" are such runs too.

``python -m course_utils.claims check`` lists what breaks them in every lesson of both editions;
``python -m course_utils.claims readme`` writes the README's claims table (both languages), whose
run-dependent figures are read from lesson 10's stored outputs (``--check``: exit 1 where the
committed README differs). ``tests/test_prose_claims.py`` runs both.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import bench
from .editions import ROOT, source_of

# ----------------------------------------------------------------------------- figures

_NUMBER = r"(?<![\w.])(\d{1,3}(?:[,\u202f]\d{3})+|\d+(?:\.\d+)?)"
#: unit as written -> the unit compared; a number followed by a space and another number is a
#: shape ("200 × 32"), not a ratio, and is left alone.
UNITS = {
    "ns": "ns", "nanosecond": "ns", "nanoseconds": "ns", "纳秒": "ns",
    "µs": "µs", "us": "µs", "microsecond": "µs", "microseconds": "µs", "微秒": "µs",
    "ms": "ms", "millisecond": "ms", "milliseconds": "ms", "毫秒": "ms",
    "s": "s", "second": "s", "seconds": "s", "秒": "s",
    "min": "min", "minute": "min", "minutes": "min", "分钟": "min",
    "%": "%", "×": "×", "x": "×", "倍": "×",
    "req/s": "/s", "requests/s": "/s", "QPS": "/s",
}
_UNIT = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
FIGURE = re.compile(_NUMBER + r"[ \u00a0\u202f]?(" + _UNIT + r")(?![\w/])(?![ \u00a0]?\d)")


def figures(text: str) -> list[tuple[str, str, str]]:
    """Every figure in ``text``: (number, unit compared, as written).

    >>> figures("16.5 ms against 1,400 µs, and 20%; a 200 × 32 state")
    [('16.5', 'ms', '16.5 ms'), ('1400', 'µs', '1,400 µs'), ('20', '%', '20%')]
    """
    return [(_plain(m.group(1)), UNITS[m.group(2)], m.group(0)) for m in FIGURE.finditer(text)
            if m.group(0) != "0x"]  # a hexadecimal address (0x7f0d...) is no ratio


def _plain(number: str) -> str:
    return number.replace(",", "").replace("\u202f", "")


def _keys(text: str) -> set[tuple[float, str]]:
    """The figures of ``text`` as (value, unit): 100% and 100.0% are one figure."""
    return {(float(n), u) for n, u, _ in figures(text)}


def _constants() -> set[tuple[float, str]]:
    """The course's own figures, which every lesson may state: the margin, the confidence and
    the error rate it allows."""
    return {(round(100 * share, 9), "%")
            for share in (bench.MARGIN, bench.CONFIDENCE, 1 - bench.CONFIDENCE)}


def prose(markdown: str) -> str:
    """A markdown cell's prose: code, math, link targets and HTML comments taken out."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"`[^`\n]*`", " ", text)
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*?\$", " ", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r"<!--.*?-->", " ", text, flags=re.S)


def output_text(nb: dict) -> str:
    """Every stored text output of a notebook (streams, plain-text results, errors), joined."""
    parts = []
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain") or ""
            parts.append("".join(text) if isinstance(text, list) else text)
            parts.extend(out.get("traceback", []) if out.get("output_type") == "error" else [])
    return "\n".join(parts)


# ----------------------------------------------------------------------------- sentences

#: phrases that point at one particular run, as opposed to "this run" in the definitions of the
#: verdicts ("decided from this run's rounds"), which any run fills in
_RUN = [r"\bthe runs? shown\b", r"\b(?:on|in) the run\b", r"\b(?:on|in) our (?:machines?|runs"
        r"|CPUs?)\b", r"\bruns? we (?:made|tried)\b",
        r"\b(?:machines?|CPUs?) we tried\b", r"\b(?:stored|committed) run\b",
        r"\bwe measured\b", r"\bdevelopment machines?\b",
        r"\bmachines? the course is (?:developed|tested) on\b", "这里展示的那次运行",
        "所示的那次运行", "在我们的机器上", "我们的运行", "在我们的 ?CPU 上", "我们测到",
        "我们试过的", "我们做过的", "开发机器", "开发本课程的机器"]
RUN_REFERENCE = re.compile("|".join(_RUN), re.I)
#: verdict phrases that name the run themselves ("cannot tell from this run") are verdicts, not
#: references to a run: they are taken out before looking for a reference
_VERDICT_NAMING_RUN = re.compile(r"cannot tell from this run|本次运行无法(?:判断|确定)", re.I)
_DECIDES = [r"\bfaster\b", r"\bslower\b", r"\bwithin (?:the )?(?:margin|\d+ ?%)",
            r"\bno measurable difference\b", r"\bcannot tell\b", r"\b(?:tens|hundreds|thousands"
            r"|millions) of\b", r"\b(?:nano|micro|milli)?seconds\b", r"\bseveral times\b",
            r"\b(?:twice|half|many times) as\b", r"\b\w+ times as (?:fast|slow)\b", r"\bas fast\b",
            r"\b(?:largest|smallest) share\b", r"\b(?:it|they) did(?: not)?\b", r"\bdid not\b",
            "更快", "更慢", "以内", "没有可测出的差异", "无法判断", "几十", "几百", "几千", "几万",
            "毫秒", "微秒", "好几倍", "份额最大", r"比[^，。；：,;:]{0,40}?[快慢]",
            "[快慢](?:了|得多)"]
DECIDES = re.compile("|".join(_DECIDES), re.I)
#: a clause that points to the run's own output, or a condition on it, claims nothing itself
POINTER = re.compile(r"\bwhether\b|\bhow (?:much|many|far|long)\b|\bwhich\b|\bif\b"
                     r"|是否|多少|哪|如何|如果", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|[。！？]|\n\s*\n|\n\s*[-*] |\n\s*\d+\. |\n#+ ")
#: a sentence's parts: split at semicolons, colons and parentheses, not at commas, so that a
#: condition ("if your run says X, ...") covers the clause it governs
_CLAUSE = re.compile(r"[;:()；：（）]")


def run_sentences(text: str) -> Iterable[tuple[str, str]]:
    """(sentence, clause) for each clause that decides something in a sentence about the run."""
    for sentence in _SENTENCE.split(text):
        sentence = " ".join(sentence.split())  # a phrase may be wrapped across lines
        if not RUN_REFERENCE.search(_VERDICT_NAMING_RUN.sub(" ", sentence)):
            continue
        for clause in _CLAUSE.split(sentence):
            if DECIDES.search(clause) and not POINTER.search(clause):
                yield sentence, clause.strip()


# ----------------------------------------------------------------------------- the check


@dataclass(frozen=True)
class Problem:
    path: str
    cell: str
    what: str

    def line(self) -> str:
        return f"{self.path} cell {self.cell}: {self.what}"


def cited(cell: dict) -> set[tuple[float, str]]:
    """The figures a cell's metadata lists as stated from elsewhere (``"cited"``)."""
    return {key for entry in cell.get("metadata", {}).get("cited", []) for key in _keys(entry)}


def check_notebook(path: Path, english: Path | None = None, root: Path = ROOT) -> list[Problem]:
    """What breaks the two rules in one notebook; ``english``: the notebook it was translated
    from, whose cells' ``cited`` lists count too (by cell id)."""
    nb = json.loads(path.read_text())
    found = _keys(output_text(nb)) | _constants()
    from_english = {}
    if english is not None:
        from_english = {c.get("id"): cited(c) for c in json.loads(english.read_text())["cells"]}
    name = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    problems = []
    for cell in nb["cells"]:
        if cell.get("cell_type") != "markdown":
            continue
        cid = cell.get("id", "?")
        text = prose(source_of(cell))
        allowed = found | cited(cell) | from_english.get(cid, set())
        for number, unit, written in figures(text):
            if (float(number), unit) not in allowed:
                problems.append(Problem(name, cid, (
                    f"the figure {written!r} is in no output of this notebook: print it from "
                    "the cell that measures it and say what to look for, or, if it comes from "
                    "elsewhere, list it in the cell's metadata \"cited\" (CONTRIBUTING.md)")))
        for sentence, clause in run_sentences(text):
            problems.append(Problem(name, cid, (
                f"a sentence about the run decides something itself ({clause!r} in "
                f"{sentence[:160]!r}): let the cell that measured print it, and point to it "
                "(\"the verdict line says whether ...\")")))
    return problems


def lessons(root: Path = ROOT) -> list[tuple[Path, Path | None]]:
    """(notebook, the English notebook it was translated from) for both editions' lessons."""
    english = sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    zh = [(root / "zh" / "notebooks" / p.name, p) for p in english]
    return [(p, None) for p in english] + [(z, e) for z, e in zh if z.exists()]


def check(root: Path = ROOT) -> list[Problem]:
    return [p for path, english in lessons(root) for p in check_notebook(path, english, root)]


# ----------------------------------------------------------------------------- README's table

#: (README, template, language): the table between the markers is the template filled in.
READMES = (("README.md", "docs/claims_table.md", "en"),
           ("README.zh-CN.md", "docs/claims_table.zh-CN.md", "zh"))
BEGIN = "<!-- claims table: generated by `python -m course_utils.claims readme` from {} -->"
END = "<!-- end of the claims table -->"
_LESSON_10 = "notebooks/10_performance.ipynb"
_INTERVAL = r"time ratio ([\d.]+), 95% interval ([\d.]+) to ([\d.]+)"
_TORCH_CLAIM = r"the claim, eager takes >= 1\.2x TorchScript's time: "
#: what each template field is read from: (cell id in lesson 10, pattern; its groups are joined)
SOURCES = {
    "torch_words": ("l10-52", r"eager vs TorchScript: (.+)"),
    "torch_claim": ("l10-52", _TORCH_CLAIM + r"(\w[\w ]*?) \("),
    "torch_ratio": ("l10-52", _TORCH_CLAIM + ".*?" + _INTERVAL),
    "mixed_ratio": ("l10-52c", r"eager / TorchScript, interleaved: ([\d.]+) \(95% interval "
                               r"([\d.]+) to ([\d.]+)\)"),
    "mixed_raised": ("l10-52c", r"interleaving raised eager's ratio: (.+)"),
    "tf1_torch_words": ("l10-55", r"from torch eager to a TF1 Session: (.+)"),
    "tf1_torch_claim": ("l10-55", r"of torch eager's time: (\w[\w ]*?) \("),
    "tf1_torch_ratio": ("l10-55", r"of torch eager's time: .*?" + _INTERVAL),
    "tf1_tf_words": ("l10-55", r"from tf eager to a TF1 Session: (.+)"),
    "tf1_tf_ratio": ("l10-55", r"of tf eager's time: .*?" + _INTERVAL),
}
#: the words lesson 10 prints, in Chinese, for the Chinese README
ZH_WORDS = {
    "supported": "支持", "ruled out here": "在这里被排除", "cannot tell": "无法判断",
    "not measurably": "没有可测出的升高", "yes, the intervals do not overlap": "是，两个区间不重叠",
}
_ZH_VERDICT = [(r"^faster than (.+)$", r"比 \1 更快"), (r"^slower than (.+)$", r"比 \1 更慢"),
               (r"^cannot tell from this run how it compares with (.+)$",
                r"本次运行无法判断它与 \1 相比如何"),
               (r"^no measurable difference from (.+) \(within (\d+)%\)$",
                r"与 \1 没有可测出的差异（在 \2% 以内）"),
               (r"^within (\d+)% of (.+) \(([\d.]+)×\)$", r"与 \2 相差在 \1% 以内（\3×）")]


def _cell_outputs(nb: dict, cid: str) -> str:
    cell = next((c for c in nb["cells"] if c.get("id") == cid), None)
    if cell is None:
        raise KeyError(f"{_LESSON_10} has no cell {cid!r}: the claims table reads its outputs "
                       f"(course_utils.claims.SOURCES)")
    return output_text({"cells": [cell]})


def run_figures(root: Path = ROOT) -> dict[str, str | tuple[str, ...]]:
    """The fields of the claims table, read from lesson 10's stored outputs."""
    nb = json.loads((root / _LESSON_10).read_text())
    fields = {}
    for name, (cid, pattern) in SOURCES.items():
        match = re.search(pattern, _cell_outputs(nb, cid))
        if match is None:
            raise ValueError(f"{_LESSON_10} cell {cid}: no line matches {pattern!r} for the "
                             f"claims table's {name!r}; re-execute the lesson, or update SOURCES")
        fields[name] = match.groups() if len(match.groups()) > 1 else match.group(1).strip()
    return fields


def _in(language: str, words: str) -> str:
    if language == "en":
        return words
    for pattern, replacement in _ZH_VERDICT:
        if re.match(pattern, words):
            return re.sub(pattern, replacement, words)
    return ZH_WORDS.get(words, words)


def _interval(ratio: tuple[str, ...], language: str) -> str:
    median, low, high = ratio
    if language == "en":
        return f"time ratio {median} (95% interval {low} to {high})"
    return f"时间比值 {median}（95% 区间 {low} 到 {high}）"


def _outcome(claim: str, language: str) -> str:
    en = {"supported": "Reproduced at the size tested", "ruled out here":
          "Not reproduced at the size tested", "cannot tell": "Undecided at the size tested"}
    zh = {"supported": "在所测的规模上复现了", "ruled out here": "在所测的规模上没有复现",
          "cannot tell": "在所测的规模上无法判断"}
    return (en if language == "en" else zh).get(claim, claim)


def table(language: str, root: Path = ROOT) -> str:
    """The claims table in ``language`` ("en", "zh"): the template with the run's fields."""
    template = (root / dict((lang, t) for _, t, lang in READMES)[language]).read_text()
    f = run_figures(root)
    values = {name: _in(language, f[name]) for name in
              ("torch_words", "torch_claim", "mixed_raised", "tf1_torch_words", "tf1_torch_claim",
               "tf1_tf_words")}
    values |= {name: _interval(f[f"{name}_ratio"], language)
               for name in ("torch", "mixed", "tf1_torch", "tf1_tf")}
    values |= {"torch_outcome": _outcome(f["torch_claim"], language),
               "tf1_outcome": _outcome(f["tf1_torch_claim"], language)}
    return template.format(**values).strip("\n")


def readme_with_table(readme: str, template: str, language: str, root: Path = ROOT) -> str:
    """``readme`` with the text between the markers replaced by :func:`table`."""
    begin = BEGIN.format(template)
    if begin not in readme or END not in readme:
        raise ValueError(f"the README has no {begin!r} ... {END!r} markers to put the table in")
    head, rest = readme.split(begin, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{begin}\n\n{table(language, root)}\n\n{END}{tail}"


def readme(write: bool, root: Path = ROOT) -> list[str]:
    """Write (or, ``write=False``, compare) both READMEs' tables; the names of those that differ."""
    stale = []
    for name, template, language in READMES:
        path = root / name
        text = path.read_text()
        new = readme_with_table(text, template, language, root)
        if new != text:
            stale.append(name)
            if write:
                path.write_text(new)
    return stale


def main(argv: Sequence[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.claims",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="list prose that states what the outputs do not show")
    write = sub.add_parser("readme", help="write the README's claims table from lesson 10")
    write.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    if args.command == "check":
        problems = check(root)
        for p in problems:
            print(p.line())
        print(f"{len(problems)} problem(s) in {len(lessons(root))} notebooks")
        return 1 if problems else 0
    stale = readme(write=not args.check, root=root)
    for name in stale:
        print(f"{name}: the claims table {'differs from' if args.check else 'rewritten from'} "
              f"lesson 10's stored outputs" + (": run python -m course_utils.claims readme"
                                               if args.check else ""))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
