"""A pytest plugin that records what nbval did with each notebook cell, for ``course-grade``.

The grader runs ``pytest --nbval-lax ... -p course_utils.grading.pytest_plugin
--grading-log=cells.jsonl`` in a subprocess. This plugin appends one JSON line per code cell as
soon as the cell has run (so the record survives a run that has to be killed)::

    {"cell": 3, "phase": "call", "exception": "NbCellError", "message": "Cell execution ...",
     "ename": "AssertionError", "evalue": "expected 4, got 5", "kernel_exit": null,
     "kernel_alive": true}

It records facts only; ``run.py`` decides what they mean. It also stops nbval from waiting out
the whole cell timeout for a reply from a kernel that has already died (``os._exit`` in a cell,
a segfault): nbval would report that, after the timeout, as a timeout.
"""

from __future__ import annotations

import json
import time
from queue import Empty

import pytest

_EXIT = pytest.StashKey["int | None"]()  # exit code of a kernel that died by itself during a cell
_ALIVE = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--grading-log", help="append one JSON line per notebook cell to this file")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    kernel = getattr(item.parent, "kernel", None)
    process = getattr(getattr(getattr(kernel, "km", None), "provisioner", None), "process", None)
    if process is not None:
        _stop_waiting_for_a_dead_kernel(item, kernel, process)
    try:
        return (yield)
    finally:
        item.stash[_ALIVE] = bool(kernel is not None and kernel.is_alive())


def _stop_waiting_for_a_dead_kernel(item, kernel, process) -> None:
    """Wrap nbval's waits (on this one kernel and notebook) so they give up once it has died."""
    parent = item.parent
    if getattr(kernel, "_grading_wrapped", False):
        return
    kernel._grading_wrapped = True
    await_reply, get_message = kernel.await_reply, parent.get_kernel_message

    def dead() -> bool:
        if process.poll() is None:
            return False
        item.session.stash[_EXIT] = process.poll()
        return True

    def wait_for_reply(msg_id, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:  # wait in short slices, looking at the process between them
            left = 0.25 if deadline is None else min(0.25, deadline - time.monotonic())
            try:
                return await_reply(msg_id, timeout=max(left, 0.0))
            except Empty:
                if dead() or (deadline is not None and time.monotonic() >= deadline):
                    raise

    def next_message(timeout=None, stream="iopub"):
        if dead():
            raise Empty
        return get_message(timeout=timeout, stream=stream)

    kernel.await_reply = wait_for_reply
    parent.get_kernel_message = next_message


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> None:
    path = item.config.getoption("grading_log")
    failed_setup = call.when == "setup" and call.excinfo is not None
    if not path or not (call.when == "call" or failed_setup):
        return
    exc = call.excinfo.value if call.excinfo else None
    error = next((o for o in getattr(item, "test_outputs", None) or []
                  if o.get("output_type") == "error"), {})
    exit_code = item.session.stash.get(_EXIT, None)
    item.session.stash[_EXIT] = None
    record = {
        "cell": getattr(item, "cell_num", None),
        "phase": call.when,
        "exception": type(exc).__name__ if exc is not None else None,
        "message": str(exc).strip().split("\n")[0] if exc is not None else "",
        "ename": error.get("ename", ""),
        "evalue": error.get("evalue", ""),
        "kernel_exit": exit_code,
        "kernel_alive": item.stash.get(_ALIVE, not failed_setup),
    }
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(record) + "\n")
