"""What a grade is (``CheckResult``, ``ExerciseResult``, ``NotebookReport``) and how it is shown:
a table with a details section, CSV, JSON, and an HTML feedback page.

>>> report = NotebookReport("subs/ada.ipynb", "ada", "00_setup.ipynb", [
...     ExerciseResult("00.1", 2, 2, "pass"),
...     ExerciseResult("00.2", 0, 1, "fail", "AssertionError: expected 1218, got 1216", checks=[
...         CheckResult(6, 0, 1, "fail", "AssertionError: expected 1218, got 1216\\nhint: W is "
...                     "n_in x n_out")])])
>>> print(format_table([report]))
subs/ada.ipynb  (learner ada, graded as 00_setup.ipynb)
  exercise  points  status    message
  00.1         2/2  pass
  00.2         0/1  fail      AssertionError: expected 1218, got 1216
  total        2/3
  details:
    00.2, check in code cell 6 (0/1): fail
      AssertionError: expected 1218, got 1216
      hint: W is n_in x n_out
"""

from __future__ import annotations

import csv
import html
import json
import re
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

Status = Literal["pass", "fail", "error", "timeout", "tampered", "recorded"]
CSV_COLUMNS = ("learner", "notebook", "exercise", "points", "possible", "status", "message",
               "details", "notes", "path", "seed")


@dataclass
class CheckResult:
    """One check cell's result: each check cell scores its own points (partial credit)."""

    cell: int  # 1-based position among the graded notebook's code cells
    points: float
    possible: float
    status: Status
    message: str = ""  # the whole failure: expected, got, hints; several lines
    where: str = ""  # the learner's line where it went wrong
    hidden: bool = False  # a hidden check (solutions/ only): its code is not shown
    label: str = ""  # how the learner finds it: "code cell 4", "the hidden check after ..."

    def text(self) -> str:
        """The message and where it happened, as shown in the details."""
        return self.message + (f"\nat {self.where}" if self.where else "")


@dataclass
class ExerciseResult:
    """The grade of one exercise: the sum of its checks' points.

    ``status`` is ``pass`` (every check passed), else the status of its first check that did not
    pass: ``fail`` (an AssertionError), ``error`` (any other exception, such as the stub's
    NotImplementedError, or an earlier cell it depends on failed), ``timeout``, or ``tampered``
    (the kernel was changed around its checks: 0 points). ``message`` is one line, for tables;
    the checks hold the whole messages.
    """

    exercise: str
    points: float
    possible: float
    status: Status
    message: str = ""
    notes: list[str] = field(default_factory=list)  # e.g. "its check cell was edited; ..."
    checks: list[CheckResult] = field(default_factory=list)

    def details(self) -> list[tuple[str, str]]:
        """(heading, full text) of each failing check; identical messages share one entry, and
        so does one error of the learner's code that several checks ran into (see
        ``same_error``): it is shown once, as the first of them reported it."""
        groups: list[tuple[list[CheckResult], str]] = []
        for c in self.checks:
            if c.status == "pass":
                continue
            if groups and (groups[-1][1] == c.text() or same_error(groups[-1][0][0], c)):
                groups[-1][0].append(c)
            else:
                groups.append(([c], c.text()))
        out = []
        for checks, text in groups:
            pts = f"{_num(sum(c.points for c in checks))}/{_num(sum(c.possible for c in checks))}"
            if all(c.label and not c.label.startswith("code cell") for c in checks):
                where = ", ".join(c.label for c in checks)  # checks the grader put in
            else:
                many = "s" if len(checks) > 1 else ""
                cells = ", ".join((c.label or f"code cell {c.cell}").removeprefix("code cell ")
                                  for c in checks)
                kind = "hidden check" if all(c.hidden for c in checks) else "check"
                where = f"{kind}{many} in code cell{many} {cells}"
            out.append((f"{self.exercise}, {where} ({pts}): {checks[0].status}",
                        text or "(no message)"))
        return out


_NUMBER = re.compile(r"[0-9]+")


def same_error(a: CheckResult, b: CheckResult) -> bool:
    """Two checks stopped by one error of the learner's code: both raised (not a failed
    assertion) at the same line of the learner's, with messages equal but for their numbers
    (TensorFlow names each trace's graphs with fresh ids; the frames left out differ by the
    check's own)."""
    return (a.status == b.status == "error" and bool(a.where) and a.where == b.where
            and _NUMBER.sub("#", a.message) == _NUMBER.sub("#", b.message))


@dataclass
class NotebookReport:
    """The grade of one learner's notebook."""

    path: str  # the file as given
    learner: str
    notebook: str  # the solutions notebook it was graded against ("" when none was found)
    exercises: list[ExerciseResult]
    notes: list[str] = field(default_factory=list)  # about the whole run (kernel restarts, ...)
    error: str = ""  # why the notebook could not be run at all ("" when it could)
    #: The grading run's seed, from which the checks' inputs were drawn (``probe.run_rng``):
    #: for the instructor's records (JSON, CSV); never in the table or the feedback pages.
    seed: int | None = None

    @property
    def points(self) -> float:
        return sum(e.points for e in self.exercises)

    @property
    def possible(self) -> float:
        return sum(e.possible for e in self.exercises)

    @property
    def passed(self) -> bool:
        """Every exercise passed (and there was something to grade); predictions only
        ``recorded`` (a release, graded by the instructor) do not count as failures."""
        return not self.error and bool(self.exercises) and all(
            e.status in ("pass", "recorded") for e in self.exercises)

    def to_dict(self) -> dict:
        data = {**asdict(self), "points": self.points, "possible": self.possible,
                "passed": self.passed}
        for ex, result in zip(data["exercises"], self.exercises, strict=True):
            ex["details"] = details_text(result)
        return data


def _num(x: float) -> str:
    return f"{x:g}"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def escape(text: str, keep_newlines: bool = False) -> str:
    """Control and format characters (terminal escapes, bidi overrides, NUL, newlines in a name)
    written as escapes, so that text from a submission cannot redraw or split a table."""
    out = []
    for ch in str(text):
        if keep_newlines and ch in "\n\t":
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            out.append(ch.encode("unicode_escape").decode("ascii"))
        else:
            out.append(ch)
    return "".join(out)


def details_text(e: ExerciseResult) -> str:
    """The details of one exercise, as the table, the CSV and the JSON show them."""
    lines = []
    for heading, text in e.details():
        lines.append(heading)
        lines += [f"  {line}" for line in text.splitlines()]
    return "\n".join(lines)


def format_table(reports: list[NotebookReport], width: int = 90) -> str:
    """One block per notebook: a summary line per exercise, the total, the details of every
    failing check (whole messages), then the notes."""
    blocks = []
    for r in reports:
        graded_as = f"graded as {escape(r.notebook)}" if r.notebook else \
            "no matching solutions notebook"
        lines = [f"{escape(r.path)}  (learner {escape(r.learner)}, {graded_as})"]
        if r.error:
            lines.append(f"  error: {escape(r.error)}")
        rows = [("exercise", "points", "status", "message")]
        rows += [(escape(e.exercise) + ("*" if e.notes else ""),
                  f"{_num(e.points)}/{_num(e.possible)}", e.status,
                  _clip(escape(e.message.strip().splitlines()[0] if e.message.strip() else ""),
                        width)) for e in r.exercises]
        rows.append(("total", f"{_num(r.points)}/{_num(r.possible)}", "", ""))
        widths = [max(len(row[k]) for row in rows) for k in range(3)]
        widths[2] = max(widths[2], len("tampered"))  # the same columns for every notebook
        for name, pts, status, message in rows:
            line = f"  {name:<{widths[0]}}  {pts:>{max(widths[1], 6)}}  {status:<{widths[2]}}"
            lines.append(f"{line}  {message}".rstrip())
        details = [(h, t) for e in r.exercises for h, t in e.details()]
        if details and not r.error:
            lines.append("  details:")
            for heading, text in details:
                lines.append(f"    {escape(heading)}")
                lines += [f"      {line}".rstrip()
                          for line in escape(text, keep_newlines=True).splitlines()]
        notes = [f"* {e.exercise}: {n}" for e in r.exercises for n in e.notes] + r.notes
        if notes:
            lines.append("  notes:")
            lines += [f"    {escape(n)}" for n in notes]
        blocks.append("\n".join(lines))
    if len(reports) > 1:
        points = sum(r.points for r in reports)
        possible = sum(r.possible for r in reports)
        passed = sum(r.passed for r in reports)
        blocks.append(f"all: {_num(points)}/{_num(possible)} points; "
                      f"{passed} of {len(reports)} notebooks fully passed")
    return "\n\n".join(blocks)


_FORMULA = re.compile(r"^[=+\-@\t\r\n\uff1d\uff0b\uff0d\uff20]")


def csv_safe(text: str) -> str:
    """A cell a spreadsheet shows as text: a leading ``= + - @`` (or tab, CR) makes LibreOffice
    and Excel read a formula (``=HYPERLINK(...)``), so such a cell gets a leading apostrophe."""
    text = str(text)
    return "'" + text if _FORMULA.match(text) else text


def write_csv(reports: list[NotebookReport], path: str | Path) -> None:
    """One row per learner and exercise (a notebook that could not be matched to a solutions
    notebook gets one row), with the file graded (``path``) and the grading run's seed
    (``seed``: ``course-grade --seed N`` grades with the same inputs again) in the last
    columns; text cells cannot be read as formulas."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for r in reports:
            for e in r.exercises:
                writer.writerow([csv_safe(r.learner), csv_safe(r.notebook or r.path),
                                 csv_safe(e.exercise), _num(e.points), _num(e.possible),
                                 e.status, csv_safe(e.message), csv_safe(details_text(e)),
                                 csv_safe("; ".join(e.notes + r.notes)), csv_safe(r.path),
                                 _seed(r)])
            if not r.exercises:
                writer.writerow([csv_safe(r.learner), csv_safe(r.notebook or r.path), "", "0",
                                 "0", "error", csv_safe(r.error), "",
                                 csv_safe("; ".join(r.notes)), csv_safe(r.path), _seed(r)])


def _seed(report: NotebookReport) -> str:
    return "" if report.seed is None else str(int(report.seed))


def to_json(reports: list[NotebookReport]) -> str:
    """The reports as a JSON list: each notebook's points, possible and passed, each exercise's
    checks and details."""
    return json.dumps([r.to_dict() for r in reports], indent=2)


# --- HTML feedback ------------------------------------------------------------------------------

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem;
       color: #1d1d1f; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { text-align: left; padding: .3rem .8rem; border-bottom: 1px solid #ddd; }
td.pts { text-align: right; font-variant-numeric: tabular-nums; }
.pass { color: #1a7f37; } .fail, .error, .timeout, .tampered { color: #b42318; }
pre { background: #f6f8fa; padding: .7rem; overflow-x: auto; white-space: pre-wrap; }
.note { color: #555; }
"""


def _first(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def feedback_html(r: NotebookReport) -> str:
    """A page for the learner: the table, every failing check's whole message, the notes."""
    e_ = html.escape
    rows = "".join(
        f"<tr><td>{e_(x.exercise)}</td><td class=pts>{_num(x.points)}/{_num(x.possible)}</td>"
        f"<td class={x.status}>{x.status}</td><td>{e_(_first(x.message))}</td></tr>"
        for x in r.exercises)
    parts = [f"<!doctype html><html lang=en><meta charset=utf-8><title>Feedback: "
             f"{e_(r.notebook or r.path)}</title><style>{_STYLE}</style><body>",
             f"<h1>{e_(r.notebook or r.path)}</h1>",
             f"<p>Learner: <b>{e_(r.learner)}</b>. Total: <b>{_num(r.points)}/"
             f"{_num(r.possible)}</b> points.</p>"]
    if r.error:
        parts.append(f"<p class=error>This notebook could not be run: {e_(r.error)}</p>")
    parts.append("<table><tr><th>exercise</th><th>points</th><th>status</th><th>message</th>"
                 f"</tr>{rows}</table>")
    details = [(h, t) for x in r.exercises for h, t in x.details()]
    if details and not r.error:
        parts.append("<h2>What to look at</h2>")
        for heading, text in details:
            parts.append(f"<h3>{e_(heading)}</h3><pre>{e_(text)}</pre>")
    notes = [f"{x.exercise}: {n}" for x in r.exercises for n in x.notes] + r.notes
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li class=note>{e_(n)}</li>"
                                                     for n in notes) + "</ul>")
    parts.append("<p class=note>Each check cell scores its own points. A check's message says "
                 "what was expected and what came back; fix the first problem first, as later "
                 "ones often follow from it.</p></body></html>")
    return "\n".join(parts)


def feedback_name(r: NotebookReport) -> str:
    """A safe file name for the learner's feedback page: ``<learner>__<notebook>.html``."""
    def clean(text: str) -> str:
        return re.sub(r"[^\w.-]+", "_", text).strip("._") or "x"
    return f"{clean(r.learner)}__{clean(Path(r.notebook or r.path).stem)}.html"
