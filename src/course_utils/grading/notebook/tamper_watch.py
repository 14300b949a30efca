"""The tamper probe's watch over one kernel while its check cells run.

The kernel is fingerprinted once fresh (``take_baseline``); around each check cell the grader
takes another fingerprint (in the check's own request, as a user expression, and if need be
afresh) and runs a canary, and ``changes`` says, one sentence each, what differs from the
baseline: patched functions and modules, the input history against what the grader sent, the
last exception IPython showed, a canary that did not raise as it should. The probe's source
and its comparisons are ``running/tamper.py``'s; this is their use for one notebook's run.

    watch = TamperWatch(kernel, nonce)
    watch.take_baseline()            # "" (or why the probe did not run)
    ...                              # the check runs with watch.probe_expression()
    watch.changes(sent, watch.after_check(reply), last=last)   # [] when nothing changed
"""

from __future__ import annotations

import secrets

from course_utils.grading.running import tamper
from course_utils.grading.running.kernel import Kernel, Reply

#: How many more times the tamper probe looks when its walk met a dict that changed size
#: while it read it: a thread the submission left running (an event loop's tasks being torn
#: down, a server's worker) can do that honestly; a kernel that does it on every look is still
#: reported.
PROBE_RETRIES = 3


def _raced(found: tuple[dict | None, str]) -> bool:
    """Whether a probe failed only because something changed size while it was read."""
    return found[0] is None and "changed size during iteration" in found[1]


class TamperWatch:
    """Fingerprints and canaries of one kernel, against its fresh baseline. ``nonce``: the
    run's secret, which a forged probe answer cannot know."""

    def __init__(self, kernel: Kernel, nonce: str) -> None:
        self.kernel = kernel
        self.nonce = nonce
        self.baseline: tamper.Baseline | None = None
        self.last: dict | None = None  # the last exception IPython showed, as left (see changes)
        self._shown: str | None = None
        #: (how many sources were sent, the history they make), kept between checks
        self.expected: tuple[int, dict[str, str]] | None = None

    def take_baseline(self) -> str:
        """Fingerprint the fresh kernel; "" or why the probe did not run."""
        data, problem = self.fingerprint("baseline")
        if data is None:
            return problem
        self.baseline = tamper.Baseline.of(data)
        return ""

    def probe_expression(self) -> str:
        """The user expression that fingerprints the kernel right after a check, in its request."""
        return tamper.probe_expression(self.nonce, known=self.baseline.quick)

    def after_check(self, reply: Reply) -> tuple[dict | None, str]:
        """The fingerprint a check's own request took; looked at afresh where another thread
        was changing a dict while the probe read it."""
        probed = tamper.parse(self.nonce, "ok", reply.user_expressions)
        for _ in range(PROBE_RETRIES):
            if not _raced(probed):
                break
            probed = self.fingerprint()
        return probed

    def fingerprint(self, mode: str = "check", want: list[str] = (),
                     retries: int = PROBE_RETRIES) -> tuple[dict | None, str]:
        reply = self.kernel.execute("", 90.0 if mode == "baseline" else 30.0, silent=True,
                                    store_history=False, user_expressions={
                                        "probe": tamper.probe_expression(
                                            self.nonce, mode, want, self.baseline.quick
                                            if self.baseline is not None else None)})
        found = tamper.parse(self.nonce, reply.status, reply.user_expressions)
        if _raced(found) and retries > 0:
            return self.fingerprint(mode, want, retries - 1)
        if found[0] is not None:
            self._shown = found[0].get("last", {}).get("shown")
        return found

    def collection(self, on: bool) -> None:
        """Automatic garbage collection on or off in the kernel (off while a check runs; see
        ``tamper.gc_expression``); nothing if the kernel is gone."""
        if self.kernel.alive():
            self.kernel.execute("", 30.0, silent=True, store_history=False,
                                user_expressions={"gc": tamper.gc_expression(on)})

    def details(self, groups: list[str]) -> dict | None:
        """The probe's detail on ``groups`` (what exactly changed), or None."""
        data, _ = self.fingerprint("detail", groups)
        return None if data is None else data.get("details", {})

    def canary(self) -> str:
        """Run the canary (an exception that must reach the grader as raised); "" or what was
        wrong with it ("" too when the kernel died)."""
        nonce = secrets.token_hex(8)
        reply = self.kernel.execute(tamper.canary_source(nonce), 30.0, silent=True,
                                    store_history=False)
        if reply.kernel_lost:
            return ""
        problem = tamper.check_canary(nonce, reply.status, reply.ename, reply.evalue)
        self.last = {"canary": nonce} if not problem else None
        return problem

    def changes(self, sent: list[str], probed: tuple[dict | None, str] | None = None, *,
                last: dict | None = None, canary: bool = True) -> list[str]:
        """What changed since the baseline (empty: nothing), from a fingerprint (``probed``: the
        one taken in a check's own request, right after it; else a fresh probe), and a canary
        (``canary``). ``sent``: what the grader stored in the kernel's history, in order;
        ``last``: the last exception IPython showed before that check."""
        if not self.kernel.alive() or self.baseline is None:
            return []
        now, problem = probed if probed is not None else self.fingerprint()
        changed = []
        self.last = None
        if now is not None:
            changed = tamper.compare(self.baseline, now, self.details)
            if self.expected is None or self.expected[0] != len(sent):
                self.expected = (len(sent), tamper.expected_history(sent))
            changed += [p for p in (tamper.check_history(now, self.expected[1]),
                                    tamper.check_last(now, last) if probed else "") if p]
            self.last = {"id": self._shown}  # the last probe's answer (a detail one, maybe)
        if not canary:
            return changed if now is not None else [problem] if self.kernel.alive() else []
        canary_problem = self.canary()
        if now is None:
            return [problem, canary_problem] if canary_problem else [problem] \
                if self.kernel.alive() else []
        return changed + ([canary_problem] if canary_problem else [])
