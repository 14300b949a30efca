"""Run a notebook's code cells in one kernel and say, from the kernel's replies, what happened.

``NotebookRun`` drives one kernel (``kernel.py``) through a notebook, cell by cell:

- each cell gets ``timeout`` seconds; then the kernel is interrupted, and if the cell ignores the
  interrupt for five more seconds the kernel is stopped;
- a cell's outcome comes from the ``execute_reply`` to the request the grader sent: ``passed``,
  ``failed`` (an ``AssertionError``), ``error`` (any other exception), ``timeout``, ``crashed``
  (the kernel died: ``os._exit``, a segfault, the memory limit) (``judge.py``; for a
  probe-and-verdict check, the verdict on its report too);
- around every check cell it runs the tamper probe (``tamper_watch.py``); a check with a changed
  kernel around it is ``tampered``;
- the message is the whole error, with the notebook's cells named as the learner counts them
  and the learner's line where it went wrong (``messages.py``).

After a cell loses the kernel, ``run_notebook`` starts a fresh one, runs the earlier cells again
(without the cells that lost a kernel), and goes on after the lost cell, so later exercises are
still graded. ``NotebookRun`` is also what the shortcut audit (``audit.py``) uses, with its
namespace snapshots (``snapshot``/``restore``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from pathlib import Path

from nbformat import NotebookNode

from course_utils.grading import verdict as verdicts
from course_utils.grading.format import is_check, tags
from course_utils.grading.notebook import messages
from course_utils.grading.notebook.judge import (  # noqa: F401 (run.X as before)
    CellResult,
    Outcome,
    judge_reply,
    judge_report,
)
from course_utils.grading.notebook.messages import CellNames
from course_utils.grading.notebook.tamper_watch import TamperWatch
from course_utils.grading.probe import SEED_VARIABLE
from course_utils.grading.running.kernel import (
    INTERRUPT_GRACE_S,
    Kernel,
    KernelError,
    Limits,
    Reply,
)

SKIP_MARK = "NBVAL_SKIP"
RAISES_MARK = "NBVAL_RAISES_EXCEPTION"


class NotebookRun:
    """One kernel running cells of one notebook; restartable. Use as a context manager."""

    def __init__(self, timeout: float, *, sandbox: bool = False, limits: Limits | None = None,
                 hidden: list[Path] | None = None, probe: bool = True,
                 startup_timeout: float = 120.0, seed: int | None = None,
                 env: Mapping[str, str] | None = None, package: Path | None = None) -> None:
        self.timeout = timeout
        #: The copy of course_utils its kernels import (``answers_view``: the graded lesson's
        #: answers withheld); None: the grader's own package.
        self.package = package
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
        self.watch: TamperWatch | None = None  # the tamper probe's, from start
        self._nonce = secrets.token_hex(8)
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
        return self._names().label(index)

    def _names(self) -> CellNames:
        return CellNames(self.cells, self.check_cells, self.labels, self._count)

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
                             startup_timeout=self.startup_timeout, env=env,
                             package=self.package)
        self.kernel.start()
        self.sent, self._count = [], {}
        self.watch = TamperWatch(self.kernel, self._nonce)
        if self.probe:
            problem = self.watch.take_baseline()
            if problem:
                raise KernelError(f"the grader's probe did not run in a fresh kernel: {problem}")

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
        watch = self.watch
        probing = check and self.probe and watch is not None and watch.baseline is not None
        before = watch.changes(self.sent, canary=False) if probing and not self._checked else []
        last = watch.last if watch else None  # the last exception shown, as the check must leave it
        expressions = {"probe": watch.probe_expression()} if probing else {}
        nonce = secrets.token_hex(8)
        if spec is not None:
            expressions["report"] = verdicts.report_expression(nonce)
        if probing:
            watch.collection(on=False)
        reply = self._execute(index, spec.probe if spec is not None else source,
                              user_expressions=expressions or None)
        after = []
        if probing and reply.status == "ok":
            probed = watch.after_check(reply)  # a dict another thread was changing: looked again
            after = watch.changes(self.sent, probed, last=last)
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
            watch.collection(on=True)
        result = judge_reply(index, reply, timeout=self.timeout, label=self.label(index),
                             raises="raises-exception" in cell_tags or RAISES_MARK in source,
                             output_bytes=self.limits.output_bytes, explain=self.explain)
        changed = list(dict.fromkeys(before + after))
        if changed and result.outcome in ("passed", "failed", "error"):
            result.outcome, result.tampered = "tampered", changed
            result.message = "the kernel was tampered with: " + "; ".join(changed)
            result.summary, result.where = result.message, ""
        if spec is not None and result.outcome == "passed":
            earlier = [self.cells[j] for j in sorted(self.cells)
                       if j < index and j not in self.check_cells]
            judge_report(result, spec, reply, nonce, key=self.key, earlier=earlier,
                         reference=self._reference if self.references else None)
        return result

    def _spec(self, cell: NotebookNode | str, source: str) -> verdicts.CheckSpec | None:
        """The canonical probe-and-verdict check this cell is, or None (an old-style check, or
        a cell that is not the canonical one: it runs whole in the kernel, as any cell)."""
        found = self.specs.get(str(cell.get("id", ""))) if not isinstance(cell, str) else None
        return found if found is not None and found.source == source else None

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

    # -- messages ---------------------------------------------------------------------------

    def explain(self, reply: Reply) -> tuple[str, str, str]:
        """(the whole message, a one-line summary, the learner's line) for an error reply."""
        return messages.explain(reply, self._names())

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
        if self.watch is not None:
            self.watch.expected = None
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
                 seed: int | None = None, env: Mapping[str, str] | None = None,
                 package: Path | None = None) -> tuple[list[CellResult], list[str]]:
    """Run the code cells of ``nb``; one result per code cell, and notes about the run.

    After a cell that lost the kernel, a fresh kernel runs the earlier cells again (not the
    ones that lost a kernel) and the run goes on after it. ``budget`` bounds the whole run in
    seconds (default: every cell's timeout plus start-ups); cells after it are "not run".
    ``labels`` name the code cells in messages (default ``code cell N``); ``name`` is only used
    in notes. ``specs``, ``key``, ``references``: the probe-and-verdict checks of the canonical
    notebook, the answer key, and whether to work out missing expected values in this kernel
    (see ``NotebookRun``). ``seed``: the grading run's seed, from which the checks' probes
    (and, without a key, their references) build their inputs (``probe.run_rng``). ``env``:
    variables for its kernels (threads, device: ``kernel.kernel_environment``). ``package``:
    the copy of course_utils its kernels import (``answers_view.package_view``).
    """
    code = code_cells(nb)
    results: list[CellResult] = []
    notes: list[str] = []
    bad: set[int] = set()
    if budget is None:
        budget = time_budget(len(code), timeout)
    deadline = time.monotonic() + budget
    run = NotebookRun(timeout, sandbox=sandbox, limits=limits, hidden=hidden, probe=probe,
                      seed=seed, env=env, package=package)
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
