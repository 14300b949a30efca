"""The course as a learner meets it: JupyterLab in headless Chromium, end to end.

Starts JupyterLab the way `make lab` does and drives Debian's Chromium with Playwright (no browser
download) through: running lesson 00, running lesson 02 and seeing a graph drawing, and answering an
exercise of lesson 01 and grading it. Screenshots of every step go to a folder the test prints
(``COURSE_SCREENSHOTS``, default ``screenshots/`` in the repository, which git ignores).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from lab_server import ROOT, running_lab
from machine_speed import slowness

CHROMIUM = Path("/usr/bin/chromium")
# A closed network: no first-run UI, no background fetches, no updates, no sync, no GPU.
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--no-default-browser-check",
]

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)"),
]

# Served by JupyterLab (so not a hidden folder), ignored by git, removed afterwards. Each run
# works in a folder of its own inside it: two runs at once in one checkout, or what a run
# killed midway left there, must not share or clash over a notebook.
SCRATCH = ROOT / "browser-test-scratch"
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook tab on show
#: How much slower than an idle two-core machine this one runs now (tests/machine_speed.py):
#: every time limit below is stretched by it, as the grading tests' are.
SLOW = slowness()
#: Playwright's limit for each action (a click, a screenshot, reading a cell's prompt): its 30 s,
#: stretched. At load 30 a screenshot of JupyterLab opening a lesson took longer than 30 s.
PLAYWRIGHT_TIMEOUT_MS = 30_000 * SLOW


@pytest.fixture(scope="module")
def shots() -> Path:
    folder = Path(os.environ.get("COURSE_SCREENSHOTS", ROOT / "screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nbrowser test screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def lab():
    with running_lab() as server:
        yield server


@pytest.fixture(scope="module")
def page(lab, tmp_path_factory):
    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh user-data dir every run
    with playwright_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 1000},
        )
        context.set_default_timeout(PLAYWRIGHT_TIMEOUT_MS)
        try:
            yield context.new_page()
        finally:
            context.close()


@pytest.fixture(scope="module", autouse=True)
def scratch():
    SCRATCH.mkdir(exist_ok=True)
    mine = Path(tempfile.mkdtemp(prefix="run-", dir=SCRATCH))
    yield mine
    shutil.rmtree(mine, ignore_errors=True)
    with contextlib.suppress(OSError):
        SCRATCH.rmdir()  # unless another run is still using it


def open_notebook(page, lab, path: str, timeout: float = 60.0 * SLOW) -> None:
    """Open a notebook and wait until the server says its kernel is up and idle."""
    page.goto(lab.url(f"lab/tree/{path}") + "&reset")  # reset: no tabs left from a previous step
    page.wait_for_selector(f"{PANEL} .jp-Cell", timeout=timeout * 1000)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        accept_kernel_dialog(page)
        states = [s["kernel"]["execution_state"] for s in lab.get_json("api/sessions")
                  if s["path"] == path]
        if states == ["idle"]:
            return
        page.wait_for_timeout(250)
    raise AssertionError(f"no idle kernel for {path} after {timeout:.0f} s")


def prompts(page) -> list[str]:
    cells = page.query_selector_all(f"{PANEL} .jp-CodeCell .jp-InputPrompt")
    return [p.text_content().strip() for p in cells]


def wait_until_run(page, timeout: float = 100.0 * SLOW) -> None:
    """Wait until cells have run and the kernel is idle, with nothing queued, for a full second.

    (The toolbar says "idle" before the kernel has even started, so idle alone proves nothing.)
    """
    indicator = f"{PANEL} .jp-Notebook-ExecutionIndicator"
    deadline, quiet_since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        accept_kernel_dialog(page)
        marks = prompts(page)
        ran = any(m[1:-2].isdigit() for m in marks)
        busy = any("*" in m for m in marks)
        idle = page.get_attribute(indicator, "data-status") == "idle"
        if ran and idle and not busy:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since > 1.0:
                return
        else:
            quiet_since = None
        page.wait_for_timeout(250)
    raise AssertionError(f"the notebook did not finish running within {timeout:.0f} s: {marks}")


def accept_kernel_dialog(page) -> None:
    """JupyterLab may ask which kernel to start; take its suggestion (this environment's Python)."""
    dialog = page.query_selector(".jp-Dialog:has-text('Select Kernel')")
    if dialog:
        dialog.query_selector(".jp-Dialog-button.jp-mod-accept").click()
        dialog.wait_for_element_state("hidden")


def wait_for_file(path: Path, ready, what: str, timeout: float = 30.0 * SLOW) -> None:
    """Wait until the file at ``path`` exists and ``ready(its text)`` holds (a save is written by
    the server some time after the key press that asked for it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            if ready(path.read_text()):
                return
        time.sleep(0.1)
    raise AssertionError(f"{what} within {timeout:.0f} s: {path}")


def answered(exercise: str, answer: str):
    """Whether a notebook's JSON text holds ``answer`` in a cell and no stub of ``exercise``."""
    def ready(text: str) -> bool:
        sources = [cell["source"] for cell in json.loads(text)["cells"]]
        code = "\n".join(s if isinstance(s, str) else "".join(s) for s in sources)
        return answer.strip() in code and f'NotImplementedError("Exercise {exercise}' not in code
    return ready


def run_all(page) -> None:
    accept_kernel_dialog(page)
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    wait_until_run(page)


def error_outputs(page) -> list[str]:
    """Texts of the outputs that show a Python exception (a traceback), not mere stderr."""
    outputs = page.query_selector_all(
        f"{PANEL} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
    )
    return [t for t in (o.text_content() for o in outputs) if "Traceback" in t or "Error" in t]


def test_lesson_00_runs_clean_and_shows_the_environment(page, lab, shots):
    open_notebook(page, lab, "notebooks/00_setup.ipynb")
    run_all(page)
    page.screenshot(path=shots / "1-lesson-00-run-all.png", full_page=False)
    assert not error_outputs(page), f"cells raised: {error_outputs(page)}"
    assert all(m[1:-2].isdigit() for m in prompts(page)), f"not every cell ran: {prompts(page)}"
    report = page.query_selector("table.course-env-report")
    assert report is not None, "the environment report table is not displayed"
    assert "numpy" in report.text_content()
    report.scroll_into_view_if_needed()
    page.screenshot(path=shots / "1b-lesson-00-environment-report.png")


def test_lesson_02_draws_its_graph(page, lab, shots):
    open_notebook(page, lab, "notebooks/02_static_graphs.ipynb")
    run_all(page)
    assert not error_outputs(page), f"cells raised: {error_outputs(page)}"
    drawings = page.query_selector_all(f"{PANEL} .jp-RenderedSVG")
    assert drawings, "no SVG graph drawing was rendered"
    drawings[0].scroll_into_view_if_needed()
    page.screenshot(path=shots / "2-lesson-02-graph-drawing.png")


def solution_source(notebook: Path, exercise: str) -> str:
    """The answer to `exercise` from the course's solutions, without the solution markers."""
    nb = nbformat.read(notebook, as_version=4)
    cell = next(c for c in nb.cells if "solution" in c.metadata.get("tags", [])
                and c.metadata.get("grading", {}).get("id") == exercise)
    return "\n".join(line for line in cell.source.splitlines()
                     if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))


def test_answer_an_exercise_and_grade_it(page, lab, shots, scratch):
    name = "01_computation_graphs.ipynb"
    shutil.copy(ROOT / "exercises" / name, scratch / name)
    answer = solution_source(ROOT / "solutions" / name, "01.1")

    where = scratch.relative_to(ROOT).as_posix()
    open_notebook(page, lab, f"{where}/{name}")
    stub = page.locator(f"{PANEL} .jp-CodeCell", has_text="Exercise 01.1").first
    stub.scroll_into_view_if_needed()
    stub.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(answer)  # no key events: the editor adds no indentation or brackets
    page.screenshot(path=shots / "3-exercise-01-answered.png")
    page.keyboard.press("Escape")
    page.keyboard.press("Control+S")
    # (It used to look for the stub in the file's JSON, where its quotes are escaped: never found.)
    wait_for_file(scratch / name, answered("01.1", answer), "the answer was not saved")

    grader = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f'from course_utils.grading import grade\n\nprint("exit code:", grade.main(["{name}"]))'
    )])
    grader.cells[0].id = "grade"
    nbformat.write(grader, scratch / "grade.ipynb")
    open_notebook(page, lab, f"{where}/grade.ipynb")
    run_all(page)
    output = page.locator(f"{PANEL} .jp-OutputArea-output").all_text_contents()
    page.screenshot(path=shots / "4-grading-report.png")
    table = "\n".join(output)
    row = next((line for line in table.splitlines() if line.strip().startswith("01.1")), "")
    assert "pass" in row.split(), f"exercise 01.1 did not pass:\n{table}"
