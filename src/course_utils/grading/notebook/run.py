"""Run a notebook's code cells in one kernel and say, from the kernel's replies, what happened.

``NotebookRun`` drives one kernel (``kernel.py``) through a notebook, cell by cell:

- each cell gets ``timeout`` seconds; then the kernel is interrupted, and if the cell ignores the
  interrupt for five more seconds the kernel is stopped;
- a cell's outcome comes from the ``execute_reply`` to the request the grader sent: ``passed``,
  ``failed`` (an ``AssertionError``), ``error`` (any other exception), ``timeout``, ``crashed``
  (the kernel died: ``os._exit``, a segfault, the memory limit);
- around every check cell it runs the tamper probe (``tamper.py``); a check with a changed
  kernel around it is ``tampered``;
- the message is the whole error (``ename: evalue``, every line), with the cell files of
  tracebacks named as the notebook's cells (``code cell 4, line 2``, counting the blank lines
  a cell starts with, which IPython drops before compiling) and the stack frames it lists cut
  to the learner's cells (one line says how many others were left out), plus the learner's line
  where it went wrong and a one-line summary that, for TensorFlow's "in user code:" errors, is
  the root cause rather than the header.

After a cell loses the kernel, ``run_notebook`` starts a fresh one, runs the earlier cells again
(without the cells that lost a kernel), and goes on after the lost cell, so later exercises are
still graded. ``NotebookRun`` is also what the shortcut audit (``audit.py``) uses, with its
namespace snapshots (``snapshot``/``restore``).
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from nbformat import NotebookNode

from course_utils.grading import verdict as verdicts
from course_utils.grading.format import is_check, tags
from course_utils.grading.probe import SEED_VARIABLE
from course_utils.grading.running import tamper
from course_utils.grading.running.kernel import (
    INTERRUPT_GRACE_S,
    Kernel,
    KernelError,
    Limits,
    Reply,
)

Outcome = Literal["passed", "failed", "error", "timeout", "crashed", "skipped", "not run",
                  "tampered", "recorded"]

SKIP_MARK = "NBVAL_SKIP"
RAISES_MARK = "NBVAL_RAISES_EXCEPTION"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CELL_FRAME = re.compile(r"^Cell In\[(\d+)\], line (\d+)")
_CELL_FILE = re.compile(r'File "(?:[^"\n]*/)?ipykernel_\d+/(\d+)\.py", line (\d+)')
_SYNTAX_FILE = re.compile(r"\((\d+)\.py, line (\d+)\)")  # SyntaxError: ... (123.py, line 2)
#: A stack frame inside an error's message (TensorFlow prints the frames of "in user code" and of
#: where a tensor "was defined"): ``File "/path/x.py", line 3, in f``.
_FRAME_LINE = re.compile(r'^(\s*)File "[^"\n]*", line \d+')
#: Lines that head a framework's error message and say nothing themselves: the root cause is
#: further down (TensorFlow's tf.function errors, TorchScript's interpreter errors).
_HEADERS = re.compile(r"^(in user code:|The following operation failed in the TorchScript "
                      r"interpreter\.|Traceback of TorchScript.*:|Graph execution error:)$")
_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Interrupt|Unsupported)\b.*)$")


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


#: How many more times the tamper probe looks when its walk met a dict that changed size
#: while it read it: a thread the submission left running (an event loop's tasks being torn
#: down, a server's worker) can do that honestly; a kernel that does it on every look is still
#: reported.
_PROBE_RETRIES = 3


def _raced(found: tuple[dict | None, str]) -> bool:
    """Whether a probe failed only because something changed size while it was read."""
    return found[0] is None and "changed size during iteration" in found[1]


class NotebookRun:
    """One kernel running cells of one notebook; restartable. Use as a context manager."""

    def __init__(self, timeout: float, *, sandbox: bool = False, limits: Limits | None = None,
                 hidden: list[Path] | None = None, probe: bool = True,
                 startup_timeout: float = 120.0, seed: int | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.timeout = timeout
        #: Variables for every kernel this run starts (``kernel_environment``: threads and
        #: device, chosen by the command that grades); the seed's is added to them.
        self.env = dict(env or {})
        #: The grading run's seed, given to every kernel this run starts (``probe.run_seed``);
        #: None: the kernel uses ``probe.DEFAULT_SEED``.
        self.seed = seed
        self.sandbox = sandbox
        self.limits = limits or Limits()
        self.hidden = hidden or []
        self.probe = probe
        self.startup_timeout = startup_timeout
        self.kernel: Kernel | None = None
        self.sent: list[str] = []  # what this kernel stored in its history, in order
        self.cells: dict[int, str] = {}  # cell index -> the source it last ran
        self.check_cells: set[int] = set()
        self.labels: list[str] = []  # how messages name code cell i (default "code cell i+1")
        self._count: dict[int, int] = {}  # execution count -> cell index
        self._baseline: dict | None = None
        self._nonce = secrets.token_hex(8)
        self._expected: tuple[int, dict[str, str]] | None = None
        self.restarts = 0
        self._checked = False  # the last request was a check cell, probed after it
        self._saved: tuple[list[str], dict[int, int]] = ([], {})  # for restore()
        #: Probe-and-verdict checks (``verdict.py``), by cell id, from the CANONICAL notebook:
        #: a check cell whose id and source match one is cut into sections; its probe runs in
        #: the kernel, its verdict here. Never taken from the notebook being run.
        self.specs: dict[str, verdicts.CheckSpec] = {}
        #: The answer key (``key.py``): expected values by check cell id, prediction literals.
        self.key = None
        #: With no key entry for a check: run its reference section in this kernel (a learner
        #: grading their own release, or the key being built); else the check is an error.
        self.references = False

    def label(self, index: int) -> str:
        """How messages name a code cell: as the learner counts it in their own notebook."""
        return self.labels[index] if index < len(self.labels) else f"code cell {index + 1}"

    def __enter__(self) -> NotebookRun:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the kernel -------------------------------------------------------------------------

    def start(self) -> None:
        """Start a kernel (KernelError if it cannot) and take the tamper baseline."""
        env = dict(self.env)
        if self.seed is not None:
            env[SEED_VARIABLE] = str(int(self.seed))
        self.kernel = Kernel(sandbox=self.sandbox, limits=self.limits, hidden=self.hidden,
                             startup_timeout=self.startup_timeout, env=env)
        self.kernel.start()
        self.sent, self._count, self._baseline, self._expected = [], {}, None, None
        self._last: dict | None = None  # see _tampering
        self._shown: str | None = None
        if self.probe:
            data, problem = self._fingerprint("baseline")
            if data is None:
                raise KernelError(f"the grader's probe did not run in a fresh kernel: {problem}")
            self._baseline = tamper.Baseline.of(data)

    def restart(self, replay: list[tuple[int, str]], deadline: float | None = None) -> None:
        """A fresh kernel that has run ``replay`` ((index, source) pairs; results ignored),
        as far as it gets by ``deadline`` (``time.monotonic()``; the notebook's budget)."""
        self.close()
        self.restarts += 1
        self.start()
        for index, source in replay:
            left = self.timeout if deadline is None else min(self.timeout,
                                                             deadline - time.monotonic())
            if left <= 1.0:
                return
            reply = self._execute(index, source, timeout=left)
            if reply.kernel_lost:  # it happened again: give up on replaying
                self.close()
                self.start()
                return

    def alive(self) -> bool:
        return self.kernel is not None and self.kernel.alive()

    def close(self) -> None:
        if self.kernel is not None:
            self.kernel.close()
            self.kernel = None

    # -- cells ------------------------------------------------------------------------------

    def _execute(self, index: int, source: str, timeout: float | None = None,
                 user_expressions: dict[str, str] | None = None) -> Reply:
        assert self.kernel is not None
        reply = self.kernel.execute(source, self.timeout if timeout is None else timeout,
                                    user_expressions=user_expressions)
        if not reply.kernel_lost or reply.execution_count is not None:
            self.sent.append(source)
        self.cells[index] = source
        if reply.execution_count is not None:
            self._count[reply.execution_count] = index
        self._checked = False
        return reply

    def run_cell(self, index: int, cell: NotebookNode | str, *, check: bool | None = None
                 ) -> CellResult:
        """Run one code cell (a notebook cell, or just its source) and judge it.

        Around a check cell: a fingerprint just before it (unless the cell before was a check,
        which left the kernel fingerprinted), one taken right after it in the same request (a
        user expression, evaluated when the check passed), and a canary after it. The last
        exception IPython showed must be the same before and after a check that passed.
        """
        source = cell if isinstance(cell, str) else str(cell.get("source", ""))
        cell_tags = [] if isinstance(cell, str) else tags(cell)
        check = (not isinstance(cell, str) and is_check(cell)) if check is None else check
        if SKIP_MARK in source or "nbval-skip" in cell_tags:
            return CellResult(index, "skipped", "skipped (NBVAL_SKIP)")
        if self.kernel is None or not self.kernel.alive():
            return CellResult(index, "not run", "not run: the kernel died in an earlier cell",
                              kernel_lost=True)
        if check:
            self.check_cells.add(index)
        spec = self._spec(cell, source) if check else None
        probing = check and self.probe and self._baseline is not None
        before = self._tampering(canary=False) if probing and not self._checked else []
        last = self._last  # the last exception IPython showed, as the check must leave it
        expressions = {"probe": tamper.probe_expression(
            self._nonce, known=self._baseline.quick)} if probing else {}
        nonce = secrets.token_hex(8)
        if spec is not None:
            expressions["report"] = verdicts.report_expression(nonce)
        if probing:
            self._collection(on=False)
        reply = self._execute(index, spec.probe if spec is not None else source,
                              user_expressions=expressions or None)
        after = []
        if probing and reply.status == "ok":
            probed = tamper.parse(self._nonce, "ok", reply.user_expressions)
            for _ in range(_PROBE_RETRIES):  # a dict another thread was changing: look again
                if not _raced(probed):
                    break
                probed = self._fingerprint()
            after = self._tampering(probed, last=last)
            if probed[0] is not None and probed[0].get("gc_enabled") is not False:
                after.append("the garbage collector, which the grader turns off while a check "
                             "runs, was turned back on (gc.enable())")
            self._checked = True
            if not self.alive():  # an honest kernel answers the canary after a check
                reply.status, reply.kernel_lost = "dead", True
                reply.why_lost = ("the kernel died right after the check, before the grader "
                                  "could confirm its result")
            if reply.msg_id in self.kernel.forged:
                after.append("the check was answered twice: code in the kernel sent a reply "
                             "of its own")
        if probing:
            self._collection(on=True)
        result = self._judge(index, source, reply,
                             raises="raises-exception" in cell_tags or RAISES_MARK in source)
        changed = list(dict.fromkeys(before + after))
        if changed and result.outcome in ("passed", "failed", "error"):
            result.outcome, result.tampered = "tampered", changed
            result.message = "the kernel was tampered with: " + "; ".join(changed)
            result.summary, result.where = result.message, ""
        if spec is not None and result.outcome == "passed":
            self._verdict(index, spec, reply, nonce, result)
        return result

    def _spec(self, cell: NotebookNode | str, source: str) -> verdicts.CheckSpec | None:
        """The canonical probe-and-verdict check this cell is, or None (an old-style check, or
        a cell that is not the canonical one: it runs whole in the kernel, as any cell)."""
        found = self.specs.get(str(cell.get("id", ""))) if not isinstance(cell, str) else None
        return found if found is not None and found.source == source else None

    def _verdict(self, index: int, spec: verdicts.CheckSpec, reply: Reply, nonce: str,
                 result: CellResult) -> None:
        """Judge a probe that ran: its report, the expected values, the verdict, here."""
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
        checks = getattr(self.key, "checks", None) or {}
        if spec.cell_id in checks:
            reference = checks[spec.cell_id]
        elif not spec.reference:
            reference = {}
        elif self.references:
            reference, problem = self._reference(spec)
            if reference is None:
                result.outcome, result.message = "error", problem
                result.summary = problem
                return
        else:
            result.outcome = "error"
            result.message = result.summary = (
                "the answer key has no expected values for this check; rebuild it with "
                "course-build-exercises (the instructor's copy of the course)")
            return
        result.reference = reference
        earlier = [self.cells[j] for j in sorted(self.cells)
                   if j < index and j not in self.check_cells]
        context = verdicts.Context(verdicts.learner_literals(earlier),
                                   getattr(self.key, "literals", None))
        outcome, message = verdicts.judge(spec, result.reported, reference, context)
        result.outcome, result.message = outcome, message  # type: ignore[assignment]
        result.summary = message.strip().splitlines()[0] if message.strip() else ""

    def _reference(self, spec: verdicts.CheckSpec) -> tuple[dict | None, str]:
        """Run a check's reference section in this kernel (no key: see ``references``)."""
        assert self.kernel is not None
        nonce = secrets.token_hex(8)
        reply = self.kernel.execute(spec.reference, self.timeout, silent=True,
                                    store_history=False, user_expressions={
                                        "report": verdicts.report_expression(nonce)})
        # The reference ran in the kernel between two checks: the next check takes a fresh
        # fingerprint (and the last exception IPython showed) instead of this check's, or an
        # exception shown inside the reference would read as one hidden by the next check.
        self._checked = False
        if reply.status != "ok":
            why = f"{reply.ename}: {reply.evalue}".strip(": ") if reply.ename else reply.status
            return None, f"the check's expected values could not be worked out: {why}"
        try:
            return verdicts.parse_report(nonce, reply.user_expressions.get("report")), ""
        except verdicts.TransportError as e:
            return None, f"the check's expected values could not be read: {e}"

    def _judge(self, index: int, source: str, reply: Reply, raises: bool) -> CellResult:
        notes = []
        if reply.dropped_bytes:
            notes.append(f"{self.label(index)} printed more than "
                         f"{_size(self.limits.output_bytes)}; the grader kept the first "
                         f"{_size(self.limits.output_bytes)} and dropped the rest")
        if reply.kernel_lost:
            what = reply.why_lost or "the kernel died"
            outcome: Outcome = "timeout" if reply.status == "timeout" else "crashed"
            if outcome == "timeout":
                message = f"timed out after {self.timeout:g} s and ignored the interrupt; " \
                    "its kernel was stopped"
            else:
                message = what
            return CellResult(index, outcome, message, kernel_lost=True, notes=notes)
        if reply.status == "timeout":
            return CellResult(index, "timeout", f"timed out after {self.timeout:g} s "
                              "(interrupted)", notes=notes)
        if reply.status == "ok" or raises:
            return CellResult(index, "passed", notes=notes)
        full, summary, where = self.explain(reply)
        outcome = "failed" if reply.ename == "AssertionError" else "error"
        return CellResult(index, outcome, full, summary=summary, where=where, notes=notes)

    # -- messages ---------------------------------------------------------------------------

    def explain(self, reply: Reply) -> tuple[str, str, str]:
        """(the whole message, a one-line summary, the learner's line) for an error reply."""
        evalue = self._name_cell_files(self._learners_frames(reply.evalue.rstrip()))
        full = f"{reply.ename}: {evalue}" if evalue.strip() else reply.ename
        lines = [line for line in evalue.splitlines() if line.strip()]
        first = lines[0].strip() if lines else ""
        if _HEADERS.match(first):
            causes = [m.group(1).strip() for line in lines[1:] if (m := _ERROR_LINE.match(line))]
            # The root cause names its own error type; else say the outer one.
            summary = causes[-1] if causes else f"{reply.ename}: {lines[-1].strip()}"
        else:
            summary = f"{reply.ename}: {first}" if first else reply.ename
        return full, summary, self._where(reply)

    def _name_cell_files(self, text: str) -> str:
        """``File "/tmp/ipykernel_7/123.py", line 4`` -> ``code cell 3, line 4``."""
        if "ipykernel_" not in text and ".py, line" not in text:
            return text
        names = _cell_file_names(self.cells)

        def name(match: re.Match) -> str:
            index = names.get(match.group(1))
            if index is None:
                return match.group(0)
            line = int(match.group(2)) + _blank_lead(self.cells[index])
            where = f"{self.label(index)}, line {line}"
            return f"({where})" if match.group(0).startswith("(") else where

        return _SYNTAX_FILE.sub(name, _CELL_FILE.sub(name, text))

    def _learners_frames(self, text: str) -> str:
        """The stack frames an error's message lists (TensorFlow lists the kernel's 20-odd
        frames of ipykernel and asyncio, and its own), cut to those in the learner's cells: each
        run of other frames (a check's cell, the kernel, a library; with its source line)
        becomes one line saying how many were left out."""
        if "File \"" not in text:
            return text
        names = _cell_file_names(self.cells)
        lines, out = text.splitlines(), []
        dropped, indent, i = 0, "", 0
        while i < len(lines):
            frame = _FRAME_LINE.match(lines[i])
            cell = _CELL_FILE.search(lines[i]) if frame else None
            index = names.get(cell.group(1)) if cell else None
            if frame is None or (index is not None and index not in self.check_cells):
                if dropped:
                    out.append(f"{indent}({_left_out(dropped)})")
                    dropped = 0
                out.append(lines[i])
                i += 1
                continue
            dropped, indent = dropped + 1, frame.group(1)
            i += 1
            following = lines[i] if i < len(lines) else ""
            if following.strip() and not _FRAME_LINE.match(following) and \
                    len(following) - len(following.lstrip()) > len(indent):
                i += 1  # the frame's source line
        if dropped:
            out.append(f"{indent}({_left_out(dropped)})")
        return "\n".join(out)

    def _where(self, reply: Reply) -> str:
        """The deepest traceback frame in a notebook cell: ``code cell 3, line 2: `...```."""
        frames = []
        for entry in reply.traceback:
            first = _ANSI.sub("", entry).lstrip().splitlines()[0] if entry.strip() else ""
            m = _CELL_FRAME.match(first)
            if m and int(m.group(1)) in self._count:
                index = self._count[int(m.group(1))]
                frames.append((index, int(m.group(2)) + _blank_lead(self.cells.get(index, ""))))
        for m in _CELL_FILE.finditer(reply.evalue):  # frames inside a tf.function
            index = _cell_file_names(self.cells).get(m.group(1))
            if index is not None:
                frames.append((index, int(m.group(2)) + _blank_lead(self.cells[index])))
        # A check's own assertion needs no pointer: the message says it. Point at learner code.
        frames = [(i, n) for i, n in frames if i not in self.check_cells]
        if not frames:
            return ""
        index, line = frames[-1]
        source = self.cells.get(index, "").splitlines()
        text = source[line - 1].strip() if 0 < line <= len(source) else ""
        return f"{self.label(index)}, line {line}" + (f": `{text}`" if text else "")

    # -- tampering --------------------------------------------------------------------------

    def _fingerprint(self, mode: str = "check", want: list[str] = (),
                     retries: int = _PROBE_RETRIES) -> tuple[dict | None, str]:
        assert self.kernel is not None
        reply = self.kernel.execute("", 90.0 if mode == "baseline" else 30.0, silent=True,
                                    store_history=False, user_expressions={
                                        "probe": tamper.probe_expression(
                                            self._nonce, mode, want, self._baseline.quick
                                            if self._baseline is not None else None)})
        found = tamper.parse(self._nonce, reply.status, reply.user_expressions)
        if _raced(found) and retries > 0:
            return self._fingerprint(mode, want, retries - 1)
        if found[0] is not None:
            self._shown = found[0].get("last", {}).get("shown")
        return found

    def _collection(self, on: bool) -> None:
        """Automatic garbage collection on or off in the kernel (off while a check runs; see
        ``tamper.gc_expression``); nothing if the kernel is gone."""
        if self.kernel is not None and self.kernel.alive():
            self.kernel.execute("", 30.0, silent=True, store_history=False,
                                user_expressions={"gc": tamper.gc_expression(on)})

    def _details(self, groups: list[str]) -> dict | None:
        data, _ = self._fingerprint("detail", groups)
        return None if data is None else data.get("details", {})

    def _canary(self) -> str:
        assert self.kernel is not None
        nonce = secrets.token_hex(8)
        reply = self.kernel.execute(tamper.canary_source(nonce), 30.0, silent=True,
                                    store_history=False)
        if reply.kernel_lost:
            return ""
        problem = tamper.check_canary(nonce, reply.status, reply.ename, reply.evalue)
        self._last = {"canary": nonce} if not problem else None
        return problem

    def _tampering(self, probed: tuple[dict | None, str] | None = None, *,
                   last: dict | None = None, canary: bool = True) -> list[str]:
        """What changed since the baseline (empty: nothing), from a fingerprint (``probed``: the
        one taken in a check's own request, right after it; else a fresh probe), and a canary
        (``canary``). ``last``: the last exception IPython showed before that check."""
        if self.kernel is None or not self.kernel.alive() or self._baseline is None:
            return []
        now, problem = probed if probed is not None else self._fingerprint()
        changes = []
        self._last = None
        if now is not None:
            changes = tamper.compare(self._baseline, now, self._details)
            if self._expected is None or self._expected[0] != len(self.sent):
                self._expected = (len(self.sent), tamper.expected_history(self.sent))
            changes += [p for p in (tamper.check_history(now, self._expected[1]),
                                    tamper.check_last(now, last) if probed else "") if p]
            self._last = {"id": self._shown}  # the last probe's answer (a detail one, maybe)
        if not canary:
            return changes if now is not None else [problem] if self.kernel.alive() else []
        canary_problem = self._canary()
        if now is None:
            return [problem, canary_problem] if canary_problem else [problem] \
                if self.kernel.alive() else []
        return changes + ([canary_problem] if canary_problem else [])

    # -- snapshots (the audit) --------------------------------------------------------------

    def snapshot(self) -> bool:
        """Remember the user namespace (and history, RNG states) to ``restore`` later."""
        reply = self.kernel.execute(_SNAPSHOT, 60.0, silent=True, store_history=False)
        self._saved = (list(self.sent), dict(self._count))
        return reply.status == "ok"

    def restore(self) -> bool:
        """Put the namespace saved by ``snapshot`` back (see ``_SNAPSHOT`` for the limits)."""
        reply = self.kernel.execute(_RESTORE, 60.0, silent=True, store_history=False)
        self.sent, self._count = list(self._saved[0]), dict(self._saved[1])
        self._expected = None
        return reply.status == "ok"


#: Save the user namespace in the kernel. Restored: every name (values of plain containers and
#: arrays are deep-copied, so appending to a list does not leak into the next variant), the
#: input history and execution count, and the random states of numpy, random and torch. Not
#: restored: objects changed in place that are not plain containers (a framework's graph or
#: model, a module's attributes), files written, and other process state.
_SNAPSHOT = r'''
def __course_grade_snapshot():
    import copy, random, sys
    ip = sys.modules["IPython"].get_ipython()
    plain = (list, dict, set, bytearray)
    np = sys.modules.get("numpy")
    if np is not None:
        plain = plain + (np.ndarray,)

    def keep(value):
        if isinstance(value, plain):
            try:
                return copy.deepcopy(value)
            except Exception:
                return value
        return value

    hm = ip.history_manager
    state = {
        "ns": {k: keep(v) for k, v in ip.user_ns.items() if k != "__course_grade_snapshot"},
        "plain": plain, "count": ip.execution_count,
        "raw": len(hm.input_hist_raw), "parsed": len(hm.input_hist_parsed),
        "out": dict(hm.output_hist), "random": random.getstate(),
        "numpy": np.random.get_state() if np is not None else None,
        "torch": sys.modules["torch"].get_rng_state() if "torch" in sys.modules else None,
    }
    sys.modules["__course_grade_state__"] = state
__course_grade_snapshot()
del __course_grade_snapshot
'''

_RESTORE = r'''
def __course_grade_restore():
    import copy, random, sys
    ip = sys.modules["IPython"].get_ipython()
    state = sys.modules["__course_grade_state__"]
    hm = ip.history_manager

    def fresh(value):
        if isinstance(value, state["plain"]):
            try:
                return copy.deepcopy(value)
            except Exception:
                return value
        return value

    ns = {k: fresh(v) for k, v in state["ns"].items()}
    ns["In"] = ns["_ih"] = hm.input_hist_parsed
    ns["Out"] = ns["_oh"] = hm.output_hist
    ip.user_ns.clear()
    ip.user_ns.update(ns)
    del hm.input_hist_raw[state["raw"]:]
    del hm.input_hist_parsed[state["parsed"]:]
    hm.output_hist.clear()
    hm.output_hist.update(state["out"])
    ip.execution_count = state["count"]
    random.setstate(state["random"])
    if state["numpy"] is not None:
        sys.modules["numpy"].random.set_state(state["numpy"])
    if state["torch"] is not None and "torch" in sys.modules:
        sys.modules["torch"].set_rng_state(state["torch"])
__course_grade_restore()
del __course_grade_restore
'''


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 1024:.0f} kB"


def _blank_lead(source: str) -> int:
    """How many blank lines start a cell. IPython drops them before it compiles the cell (its
    ``leading_empty_lines`` transform), so a traceback's ``line 2`` of a cell that starts with
    three blank lines is the learner's line 5."""
    lines = source.splitlines()
    for i, line in enumerate(lines):
        if line.strip():
            return i
    return 0


def _left_out(n: int) -> str:
    return f"{n} frame{'s' if n != 1 else ''} not in your code left out"


def _cell_file_names(cells: dict[int, str]) -> dict[str, int]:
    """ipykernel's file name for each cell source (``/tmp/ipykernel_<pid>/<hash>.py``)."""
    from ipykernel.compiler import get_tmp_hash_seed, murmur2_x86

    return {str(murmur2_x86(source, get_tmp_hash_seed())): index
            for index, source in cells.items()}


def code_cells(nb: NotebookNode) -> list[NotebookNode]:
    return [cell for cell in nb.cells if cell.get("cell_type") == "code"]


def time_budget(n_cells: int, timeout: float) -> float:
    """Seconds a notebook of ``n_cells`` code cells may take in all: every cell's timeout and
    interrupt grace, and start-ups. ``course-grade`` counts the cells of the solutions
    notebook (plus a few), not the submission's: 10,000 cells of `sleep(59)` get no more."""
    return 120.0 + n_cells * (timeout + INTERRUPT_GRACE_S + 2.0)


def run_notebook(nb: NotebookNode, timeout: float, name: str = "notebook.ipynb", *,
                 sandbox: bool = False, limits: Limits | None = None,
                 hidden: list[Path] | None = None, probe: bool = True,
                 budget: float | None = None, labels: list[str] | None = None,
                 specs: dict | None = None, key: object = None, references: bool = False,
                 seed: int | None = None, env: Mapping[str, str] | None = None
                 ) -> tuple[list[CellResult], list[str]]:
    """Run the code cells of ``nb``; one result per code cell, and notes about the run.

    After a cell that lost the kernel, a fresh kernel runs the earlier cells again (not the
    ones that lost a kernel) and the run goes on after it. ``budget`` bounds the whole run in
    seconds (default: every cell's timeout plus start-ups); cells after it are "not run".
    ``labels`` name the code cells in messages (default ``code cell N``); ``name`` is only used
    in notes. ``specs``, ``key``, ``references``: the probe-and-verdict checks of the canonical
    notebook, the answer key, and whether to work out missing expected values in this kernel
    (see ``NotebookRun``). ``seed``: the grading run's seed, from which the checks' probes
    (and, without a key, their references) build their inputs (``probe.run_rng``). ``env``:
    variables for its kernels (threads, device: ``kernel.kernel_environment``).
    """
    code = code_cells(nb)
    results: list[CellResult] = []
    notes: list[str] = []
    bad: set[int] = set()
    if budget is None:
        budget = time_budget(len(code), timeout)
    deadline = time.monotonic() + budget
    run = NotebookRun(timeout, sandbox=sandbox, limits=limits, hidden=hidden, probe=probe,
                      seed=seed, env=env)
    run.labels = list(labels or [])
    run.specs, run.key, run.references = dict(specs or {}), key, references
    try:
        try:
            run.start()
        except KernelError as e:
            first = KernelError(f"not run: the kernel did not start: {e}")
            return [CellResult(i, "not run", str(first)) for i in range(len(code))], notes
        for i, cell in enumerate(code):
            left = deadline - time.monotonic()
            if left <= 1.0:
                message = f"not run: the notebook used up its time budget ({budget:.0f} s)"
                results += [CellResult(j, "not run", message) for j in range(i, len(code))]
                notes.append(f"{name} used up its time budget of {budget:.0f} s at code cell "
                             f"{i + 1}; the cells from there on did not run")
                break
            if not run.alive():
                replay = [(j, str(code[j].get("source", ""))) for j in range(i) if j not in bad
                          and results[j].outcome != "skipped"]
                try:
                    run.restart(replay, deadline)
                except KernelError as e:
                    results += [CellResult(j, "not run", f"not run: no fresh kernel: {e}")
                                for j in range(i, len(code))]
                    break
            run.timeout = min(timeout, max(1.0, deadline - time.monotonic()))
            result = run.run_cell(i, cell)
            if result.outcome == "timeout" and run.timeout < timeout:
                result.message = result.message.replace(
                    f"after {run.timeout:g} s", f"after {run.timeout:g} s (the notebook's time "
                    "budget ran out)")
            results.append(result)
            notes += result.notes
            if result.kernel_lost:
                bad.add(i)
                if i + 1 < len(code):
                    what = f"lost the kernel ({result.message})" if \
                        result.outcome == "crashed" else \
                        "ignored the interrupt after its timeout, so its kernel was stopped"
                    notes.append(f"{run.label(i)} {what}; the cells after it ran again in "
                                 "a fresh kernel, without it")
    finally:
        run.close()
    return results, notes
