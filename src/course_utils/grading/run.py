"""Run a notebook through nbval in a subprocess and say what happened to each code cell.

The notebook runs as pytest items (``pytest --nbval-lax --nbval-current-env
--nbval-cell-timeout=T``) on a temporary copy, in its own kernel, with its working directory in
that temporary folder; ``pytest_plugin.py`` writes down each cell's outcome.

What nbval (0.11) does when a cell runs past the timeout, and what the grader adds:

1. nbval interrupts the kernel (SIGINT). Usually the cell stops with KeyboardInterrupt, nbval
   fails it ("Timeout of T seconds exceeded") and the later cells still run in the same kernel
   (pytest lists them as xfailed/xpassed; the plugin records what really happened).
2. If the cell survives the interrupt for 5 more seconds (it catches KeyboardInterrupt, or is
   stuck in C code), nbval shuts the kernel down and every later cell fails with "Kernel dead on
   test start". A kernel that dies by itself (``os._exit``, a segfault) ends the same way.
   Then the grader runs the notebook again in a fresh kernel, with that cell, and every cell that
   timed out or crashed so far, replaced by a comment, and keeps the new results for the cells
   after it. Later exercises are so still graded, in a kernel that lacks only what the bad cells
   would have done. Each restart is reported in a note.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import nbformat
import nbformat.v4 as v4
from nbformat import NotebookNode

from course_utils.grading.format import tags

Outcome = Literal["passed", "failed", "error", "timeout", "crashed", "skipped", "not run"]

PLUGIN = "course_utils.grading.pytest_plugin"
#: nbval waits this long for a timed-out cell to answer the interrupt (IPyNbCell.output_timeout).
INTERRUPT_GRACE_S = 5.0
KERNEL_STARTUP_S = 120.0  # generous: kernels start slowly on a busy machine
SKIPPED_SOURCE = "# course-grade: not run again; in an earlier run this cell {}"
_WHAT = {"timeout": "timed out", "crashed": "crashed the kernel"}


@dataclass(frozen=True)
class CellResult:
    """What happened to one code cell."""

    index: int  # position among the notebook's code cells (nbval's "Cell N")
    outcome: Outcome  # "failed" is an AssertionError; "error" any other exception
    message: str = ""  # the first line of the failure, e.g. "AssertionError: expected 4, got 5"
    kernel_lost: bool = False  # the kernel was gone after this cell (crashed, or had to be stopped)


def run_notebook(nb: NotebookNode, timeout: float, name: str = "notebook.ipynb"
                 ) -> tuple[list[CellResult], list[str]]:
    """Run the code cells of ``nb`` with a per-cell timeout; one result per code cell, and notes.

    ``name`` is the file name the notebook runs under. Nothing is written outside a temporary
    folder. Cells after a cell that lost the kernel are run again without it (module docstring).
    """
    code = [cell for cell in nb.cells if cell.get("cell_type") == "code"]
    final: dict[int, CellResult] = {}
    notes: list[str] = []
    start = 0
    while start < len(code):
        bad = {i: r.outcome for i, r in final.items() if r.outcome in ("timeout", "crashed")}
        results = _run_once(_runnable(code, bad), timeout, name)
        if all(r.outcome == "not run" for r in results):  # no kernel (a busy machine?): retry once
            results = _run_once(_runnable(code, bad), timeout, name)
        lost = next((r.index for r in results[start:] if r.kernel_lost), len(code) - 1)
        final.update({i: results[i] for i in range(start, lost + 1)})
        if lost + 1 < len(code):
            what = "crashed the kernel" if results[lost].outcome == "crashed" else \
                "ignored the interrupt after its timeout, so its kernel was stopped"
            notes.append(f"code cell {lost + 1} {what}; the cells after it ran again in a fresh "
                         "kernel, without it")
        start = lost + 1
    return [final[i] for i in range(len(code))], notes


def _runnable(code: list[NotebookNode], bad: dict[int, str]) -> NotebookNode:
    """A clean notebook of the code cells (no outputs), with the ``bad`` ones made harmless."""
    cells = []
    for i, cell in enumerate(code):
        source = SKIPPED_SOURCE.format(_WHAT[bad[i]]) if i in bad else str(cell.get("source", ""))
        # Only the tags: nbval reads its options (e.g. raises-exception) from them.
        metadata = {"tags": tags(cell)} if tags(cell) else {}
        cells.append(v4.new_code_cell(source, metadata=metadata, id=f"cell-{i}"))
    return v4.new_notebook(cells=cells)


def _run_once(nb: NotebookNode, timeout: float, name: str) -> list[CellResult]:
    """One nbval run in a fresh kernel; a result for every code cell."""
    n = len(nb.cells)
    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp:
        folder = Path(tmp)
        notebook = folder / (re.sub(r"[^\w-]", "_", Path(name).stem) + ".ipynb")
        nbformat.write(nb, notebook)
        (folder / "pytest.ini").write_text("[pytest]\n")  # keep the course's pytest config out
        log = folder / "cells.jsonl"
        command = [
            sys.executable, "-m", "pytest", notebook.name, "-p", "nbval.plugin", "-p", PLUGIN,
            "--nbval-lax", "--nbval-current-env", f"--nbval-cell-timeout={timeout:g}",
            f"--nbval-kernel-startup-timeout={KERNEL_STARTUP_S:g}",
            f"--grading-log={log}", "-c", "pytest.ini", "--rootdir", ".", "--noconftest",
            "-p", "no:cacheprovider", "-q",
        ]
        # Only the plugins named above: no xdist, no PYTEST_ADDOPTS from the caller's session.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        budget = KERNEL_STARTUP_S + 60 + n * (timeout + INTERRUPT_GRACE_S + 5)
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            output, _ = process.communicate(timeout=budget)
            missing = f"not run: nbval stopped early (pytest exit code {process.returncode}): " \
                f"{_last_line(output)}"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the kernel notices its parent is gone
            process.communicate()
            missing = f"not run: the whole run took over {budget:g} s and was stopped"
        records = _read_log(log)
    results = {r["cell"]: _classify(r, timeout) for r in records if isinstance(r.get("cell"), int)}
    return [results.get(i, CellResult(i, "not run", missing)) for i in range(n)]


def _classify(record: dict[str, Any], timeout: float) -> CellResult:
    """Turn one line of the plugin's log into a CellResult."""
    i, exception, message = record["cell"], record.get("exception"), record.get("message", "")
    ename, evalue = record.get("ename", ""), str(record.get("evalue", ""))
    if exception is None:
        return CellResult(i, "passed")
    if exception == "Skipped":
        return CellResult(i, "skipped", "skipped (NBVAL_SKIP)")
    if record.get("phase") == "setup":
        return CellResult(i, "not run", f"not run: the kernel did not start: {message}")
    if record.get("kernel_exit") is not None:
        return CellResult(i, "crashed", f"the kernel died with exit code {record['kernel_exit']}",
                          kernel_lost=True)
    if message.startswith("Kernel dead"):
        return CellResult(i, "not run", "not run: the kernel died in an earlier cell")
    if message.startswith("Timeout"):
        if record.get("kernel_alive", True):
            return CellResult(i, "timeout", f"timed out after {timeout:g} s (interrupted)")
        return CellResult(i, "timeout", f"timed out after {timeout:g} s and ignored the "
                          "interrupt; its kernel was stopped", kernel_lost=True)
    if ename:
        first = evalue.strip().splitlines()[0] if evalue.strip() else ""
        return CellResult(i, "failed" if ename == "AssertionError" else "error",
                          f"{ename}: {first}" if first else ename)
    return CellResult(i, "error", f"{exception}: {message}")


def _read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a kill
            continue
    return records


def _last_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"
