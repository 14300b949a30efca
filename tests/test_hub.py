"""A class on JupyterHub, end to end (deploy/hub/): `make hub`, two learners in Chromium, the
instructor's grading.

JupyterHub from PyPI (the `hub` extra, in .venv), configurable-http-proxy from npm (in
deploy/hub/node_modules), SimpleLocalProcessSpawner and DummyAuthenticator, and the shared
environment (`make env`) as every learner's server and kernel. A learner logs in, opens the class's
nbgitpuller link, which clones a release of lessons 00-01 from a file:// git repository into
their home, runs lesson 01's first cells, answers exercise 01.1 and grades it with the shared
environment's `course-grade`; a second learner answers it wrongly; the instructor collects both
homes into a class folder and grades it with the full course (hidden checks included). Stopping
`make hub` must leave no process of it running.

The shared environment is COURSE_ENV if set (`COURSE_ENV=/opt/graph-course` tests one that
`make env` built), else the course's .venv, which has every package of it and this checkout's
code (an environment built earlier holds the package as it was then); the test skips, saying why,
when Chromium, npm or JupyterHub are missing.
"""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "hub"))
from lab_server import free_port  # noqa: E402
from run import marked  # noqa: E402  (deploy/hub/run.py)
from test_browser import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_FLAGS,
    PLAYWRIGHT_TIMEOUT_MS,
    SLOW,
    accept_kernel_dialog,
    answered,
    solution_source,
    wait_for_file,
)


def _shared_environment() -> Path:
    """COURSE_ENV, else the course's .venv, which holds everything the shared environment does
    (and the developer tools besides), with this checkout's code."""
    if os.environ.get("COURSE_ENV"):
        return Path(os.environ["COURSE_ENV"])
    return ROOT / ".venv"


COURSE_ENV = _shared_environment()
PROXY = ROOT / "deploy" / "hub" / "node_modules" / ".bin" / "configurable-http-proxy"
LESSON = "01_computation_graphs"

playwright_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("jupyterhub", reason="needs JupyterHub (the `hub` extra: make venv)")
pytestmark = [
    pytest.mark.browser, pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)"),
    pytest.mark.skipif(not PROXY.exists() and shutil.which("npm") is None,
                       reason="needs npm for configurable-http-proxy (apt-get install npm)"),
    pytest.mark.skipif(not (COURSE_ENV / "bin" / "jupyterhub-singleuser").exists(),
                       reason=f"no JupyterHub single-user server in {COURSE_ENV}: run `make "
                       f"env PREFIX={COURSE_ENV}` (or set COURSE_ENV)"),
]


def _get(url: str, patience: float) -> int:
    deadline = time.monotonic() + patience
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@contextlib.contextmanager
def running_hub(tmp: Path):
    """`make hub` on free ports, in its own process group; yields (base URL, homes, runtime);
    stops it with Ctrl-C's signal and checks that nothing of it is left."""
    if not PROXY.exists():
        subprocess.run(["npm", "install", "--prefix", str(PROXY.parents[2]), "--no-audit",
                        "--no-fund", "--loglevel=error"], check=True, timeout=300)
    port = free_port()
    runtime, homes = tmp / "hub-run", tmp / "homes"
    env = {**os.environ, "HUB_RUNTIME": str(runtime), "HUB_HOMES": str(homes),
           "HUB_API_PORT": str(free_port()), "PROXY_API_PORT": str(free_port()),
           "HUB_ADMINS": "instructor"}
    with open(tmp / "hub.log", "w") as log:
        hub = subprocess.Popen(["make", "--no-print-directory", "hub", f"HUB_PORT={port}",
                                f"PREFIX={COURSE_ENV}"], cwd=ROOT, env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _get(f"{base}/hub/api", patience=120 * SLOW)
        yield base, homes, runtime
    finally:
        token = (runtime / "hub.mark").read_text() if (runtime / "hub.mark").exists() else ""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(hub.pid, signal.SIGINT)
        try:
            hub.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(hub.pid, signal.SIGKILL)
            hub.wait()
        log = (tmp / "hub.log").read_text()
        left = marked(token) if token else []
        assert not left, f"processes of the Hub still running after it stopped: {left}"
        assert "nothing of it is running" in log, log[-3000:]


PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"


#: A GET of the single-user server's API from the page, as JupyterLab makes it: with the
#: _xsrf cookie's value in a header (JupyterHub refuses cookie-authenticated API requests
#: without it).
_GET_JSON = """async url => {
    const xsrf = document.cookie.split('; ').find(c => c.startsWith('_xsrf='));
    const headers = xsrf ? {'X-XSRFToken': decodeURIComponent(xsrf.slice(6))} : {};
    return (await fetch(url, {headers})).json();
}"""


def _wait_for_kernel(page, base: str, name: str, path: str, timeout: float = 180.0 * SLOW
                     ) -> None:
    """Wait until ``name``'s server says the kernel of the notebook at ``path`` is up and idle
    (the toolbar says "idle" before the kernel has even started)."""
    sessions = f"{base}/user/{name}/api/sessions"
    deadline, states = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        accept_kernel_dialog(page)
        found = page.evaluate(_GET_JSON, sessions)
        if not isinstance(found, list):
            raise AssertionError(f"{sessions}: {found}")
        states = [s["kernel"]["execution_state"] for s in found if s["path"] == path]
        if states == ["idle"]:
            return
        page.wait_for_timeout(250)
    raise AssertionError(f"no idle kernel for {name}'s {path} after {timeout:.0f} s: {states}")


def _run_cell(page, index: int, timeout: float = 120.0 * SLOW) -> None:
    """Run the notebook's code cell ``index`` (Shift+Enter in it) and wait for its number. The
    notebook's kernel is idle (``_wait_for_kernel``) before the first."""
    cell = page.locator(f"{PANEL} .jp-CodeCell").nth(index)
    prompt = cell.locator(".jp-InputPrompt")
    deadline = time.monotonic() + timeout
    accept_kernel_dialog(page)
    cell.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")
    mark = prompt.text_content().strip()
    while time.monotonic() < deadline:
        mark = prompt.text_content().strip()
        if mark[1:-2].isdigit():
            return
        page.wait_for_timeout(250)
    raise AssertionError(f"code cell {index + 1} did not run within {timeout:.0f} s: {mark}")


def _errors(page) -> list[str]:
    outputs = page.query_selector_all(
        f"{PANEL} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    return [t for t in (o.text_content() for o in outputs) if "Traceback" in t or "Error" in t]


def _learner_pulls(browser, base: str, name: str, link: str, shots: Path):
    """Log in as ``name`` through the class's link; return the page, on the pulled lesson."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(PLAYWRIGHT_TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"{base}/hub/login?next={urllib.parse.quote(link)}")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", "any")
    page.click("[type=submit]")
    page.wait_for_selector(f"{PANEL} .jp-Cell", timeout=180_000 * SLOW)  # spawn, pull, open
    page.screenshot(path=shots / f"hub-{name}-1-pulled.png")
    return context, page


def _answer(page, base: str, name: str, source: str, shots: Path, homes: Path) -> None:
    """Open the exercise notebook, write ``source`` into exercise 01.1's cell, save, and wait
    until the saved notebook on disk holds it."""
    page.goto(f"{base}/user/{name}/lab/tree/graph-course/exercises/{LESSON}.ipynb?reset")
    stub = page.locator(f"{PANEL} .jp-CodeCell", has_text="Exercise 01.1").first
    stub.wait_for(timeout=60_000 * SLOW)
    stub.scroll_into_view_if_needed()
    stub.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(source)
    page.keyboard.press("Escape")
    page.keyboard.press("Control+S")
    wait_for_file(homes / name / "graph-course" / "exercises" / f"{LESSON}.ipynb",
                  answered("01.1", source), f"{name}'s answer was not saved")
    page.screenshot(path=shots / f"hub-{name}-2-answered.png")


def test_a_class_on_jupyterhub(tmp_path):
    shots = Path(os.environ.get("COURSE_SCREENSHOTS", ROOT / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    release = tmp_path / "graph-course"
    subprocess.run([sys.executable, "-m", "course_utils.grading.build", "--release",
                    str(release), "--lessons", "01"], cwd=ROOT, check=True, capture_output=True)
    query = urllib.parse.urlencode({
        "repo": f"file://{release}", "branch": "main", "targetPath": "graph-course",
        "urlpath": f"lab/tree/graph-course/notebooks/{LESSON}.ipynb"})
    link = f"/hub/user-redirect/git-pull?{query}"
    answer = solution_source(ROOT / "solutions" / f"{LESSON}.ipynb", "01.1")
    t0 = time.monotonic()
    print(f"\nhub test: the shared environment is {COURSE_ENV}")

    with running_hub(tmp_path) as (base, homes, _), \
            playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=CHROMIUM_FLAGS)
        try:
            # Ada: the link pulls the release into her home and opens lesson 01.
            context, page = _learner_pulls(browser, base, "ada", link, shots)
            assert (homes / "ada" / "graph-course" / "exercises" / f"{LESSON}.ipynb").is_file()
            _wait_for_kernel(page, base, "ada", f"graph-course/notebooks/{LESSON}.ipynb")
            for i in range(3):  # lesson 01's first three code cells, one by one
                _run_cell(page, i)
            assert not _errors(page), _errors(page)
            page.screenshot(path=shots / "hub-ada-1b-lesson-01.png")

            # She answers 01.1 and grades it in her server, with the shared environment's
            # course-grade (the first on her PATH).
            _answer(page, base, "ada", answer, shots, homes)
            grader = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
                "!which course-grade\n"
                f"!cd graph-course && course-grade exercises/{LESSON}.ipynb")])
            grader.cells[0].id = "grade"
            grader.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                             "language": "python"}
            nbformat.write(grader, homes / "ada" / "grade.ipynb")
            page.goto(f"{base}/user/ada/lab/tree/grade.ipynb?reset")
            page.wait_for_selector(f"{PANEL} .jp-Cell", timeout=60_000 * SLOW)
            _wait_for_kernel(page, base, "ada", "grade.ipynb")
            _run_cell(page, 0, timeout=240 * SLOW)
            text = ""
            for _ in range(round(240 * SLOW)):  # the report comes at the end of the output
                text = "\n".join(page.locator(f"{PANEL} .jp-OutputArea-output")
                                 .all_text_contents())
                if "total" in text:
                    break
                page.wait_for_timeout(500)
            page.screenshot(path=shots / "hub-ada-3-graded.png")
            assert text.splitlines()[0].strip() == str(COURSE_ENV / "bin" / "course-grade"), text
            row = next((line for line in text.splitlines() if line.strip().startswith("01.1")),
                       "")
            assert "total" in text and row, f"no report from Ada's course-grade:\n{text}"
            assert "pass" in row.split(), f"Ada's 01.1 did not pass:\n{text}"
            context.close()

            # Grace: the same link; her answer ignores the order of the inputs.
            context, page = _learner_pulls(browser, base, "grace", link, shots)
            _answer(page, base, "grace", "def topo_order(outputs):\n"
                    "    return list(outputs)", shots, homes)
            context.close()
        finally:
            browser.close()

        # The instructor collects both homes into a class folder and grades it with the full
        # course (solutions and hidden checks), in the sandbox.
        klass = tmp_path / "class-01"
        collected = subprocess.run([str(ROOT / "deploy" / "hub" / "collect.sh"), str(homes),
                                    LESSON, str(klass)], capture_output=True, text=True,
                                   check=True)
        assert "collected 2 notebook(s)" in collected.stdout, collected.stdout
        grades = tmp_path / "grades.csv"
        done = subprocess.run([sys.executable, "-m", "course_utils.grading.grade", str(klass),
                               "--csv", str(grades), "--sandbox", "--jobs", "2"], cwd=ROOT,
                              capture_output=True, text=True, timeout=600 * SLOW)
        with open(grades, newline="", encoding="utf-8") as f:
            rows = {(r["learner"], r["exercise"]): r for r in csv.DictReader(f)}
        assert rows[("ada", "01.1")]["status"] == "pass", done.stdout[-3000:]
        assert rows[("grace", "01.1")]["status"] != "pass", done.stdout[-3000:]
    print(f"\nhub test: {time.monotonic() - t0:.0f} s from the release to the class's grades")
