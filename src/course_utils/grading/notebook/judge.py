"""What a cell's reply means: its outcome, its message, and for a probe-and-verdict check the
verdict on what its probe reported.

``judge_reply`` reads the kernel's reply to one cell: ``passed``, ``failed`` (an
``AssertionError``), ``error`` (any other exception), ``timeout``, ``crashed`` (the kernel
died). ``judge_report`` takes a check whose probe passed in the kernel and judges, here in the
grader, its report against the expected values (the answer key's, else its reference's).

    judge_reply(0, Reply("ok"), raises=False, timeout=60, output_bytes=2**20,
                label="code cell 1", explain=...).outcome     # 'passed'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from course_utils.grading import verdict as verdicts
from course_utils.grading.running.kernel import Reply

Outcome = Literal["passed", "failed", "error", "timeout", "crashed", "skipped", "not run",
                  "tampered", "recorded"]


@dataclass
class CellResult:
    """What happened to one code cell."""

    index: int  # position among the notebook's code cells (0-based; messages say index + 1)
    outcome: Outcome
    message: str = ""  # the whole failure, possibly several lines
    kernel_lost: bool = False  # the kernel was gone after this cell
    summary: str = ""  # one line for tables (defaults to the message's first line)
    where: str = ""  # the learner's line where it went wrong, e.g. "code cell 3, line 2: ..."
    notes: list[str] = field(default_factory=list)  # e.g. "output over 1 MB was cut"
    tampered: list[str] = field(default_factory=list)  # what changed around a check
    reported: dict | None = None  # a probe-and-verdict check: what its probe reported
    reference: dict | None = None  # ... and the expected values its verdict used

    def __post_init__(self) -> None:
        if not self.summary and self.message:
            self.summary = self.message.strip().splitlines()[0] if self.message.strip() else ""


def judge_reply(index: int, reply: Reply, *, raises: bool, timeout: float, output_bytes: int,
                label: str, explain: Callable[[Reply], tuple[str, str, str]]) -> CellResult:
    """What the kernel's reply to code cell ``index`` (named ``label``) says happened to it.

    ``raises``: the cell is meant to raise; ``timeout``: the cell's time limit;
    ``output_bytes``: the output kept per cell; ``explain``: an error reply's message."""
    notes = []
    if reply.dropped_bytes:
        notes.append(f"{label} printed more than "
                     f"{_size(output_bytes)}; the grader kept the first "
                     f"{_size(output_bytes)} and dropped the rest")
    if reply.kernel_lost:
        what = reply.why_lost or "the kernel died"
        outcome: Outcome = "timeout" if reply.status == "timeout" else "crashed"
        if outcome == "timeout":
            message = f"timed out after {timeout:g} s and ignored the interrupt; " \
                "its kernel was stopped"
        else:
            message = what
        return CellResult(index, outcome, message, kernel_lost=True, notes=notes)
    if reply.status == "timeout":
        return CellResult(index, "timeout", f"timed out after {timeout:g} s "
                          "(interrupted)", notes=notes)
    if reply.status == "ok" or raises:
        return CellResult(index, "passed", notes=notes)
    full, summary, where = explain(reply)
    outcome = "failed" if reply.ename == "AssertionError" else "error"
    return CellResult(index, outcome, full, summary=summary, where=where, notes=notes)


def judge_report(result: CellResult, spec: verdicts.CheckSpec, reply: Reply, nonce: str, *,
                 key: object, earlier: list[str],
                 reference: Callable[[verdicts.CheckSpec], tuple[dict | None, str]] | None
                 ) -> None:
    """Judge a probe that ran: its report, the expected values, the verdict, here; ``result``
    (the cell's, "passed" so far) is changed to say so.

    ``key``: the answer key (``key.py``), whose expected values come first; ``earlier``: the
    sources of the cells before the check (not checks), whose literals the verdict may name;
    ``reference``: works out a check's expected values in the kernel where the key has none
    (None: the check is then an error)."""
    try:
        result.reported = verdicts.parse_report(nonce, reply.user_expressions.get("report"))
        extra = sorted(set(result.reported) - (spec.reports or set(result.reported)))
        if extra:
            raise verdicts.Tampered(
                f"the report held {', '.join(f'`{n}`' for n in extra[:5])}, which this "
                "check never reports (only its probe's own report() calls may fill it)")
    except verdicts.Tampered as e:
        result.outcome, result.tampered = "tampered", [f"the check's report: {e}"]
        result.message = result.summary = "the kernel was tampered with: " + \
            result.tampered[0]
        result.reported = None
        return
    except verdicts.TransportError as e:
        result.outcome, result.message = "error", f"the check's report was refused: {e}"
        result.summary = result.message
        return
    checks = getattr(key, "checks", None) or {}
    if spec.cell_id in checks:
        expected = checks[spec.cell_id]
    elif not spec.reference:
        expected = {}
    elif reference is not None:
        expected, problem = reference(spec)
        if expected is None:
            result.outcome, result.message = "error", problem
            result.summary = problem
            return
    else:
        result.outcome = "error"
        result.message = result.summary = (
            "the answer key has no expected values for this check; rebuild it with "
            "course-build-exercises (the instructor's copy of the course)")
        return
    result.reference = expected
    context = verdicts.Context(verdicts.learner_literals(earlier),
                               getattr(key, "literals", None))
    outcome, message = verdicts.judge(spec, result.reported, expected, context)
    result.outcome, result.message = outcome, message  # type: ignore[assignment]
    result.summary = message.strip().splitlines()[0] if message.strip() else ""


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 1024:.0f} kB"
