"""The course's site (`make site`), both editions, in headless Chromium.

The site is built once (or taken from COURSE_SITE=<folder of a build>) and served on loopback;
every page of both languages is opened once, and each check below reads what that visit saw:
the page and its images load, nothing comes from the network, math is rendered by the site's own
MathJax (no raw `$$` left), no internal link is broken (files and #anchors), and the language
switch lands on the same page in the other language. The Chinese pages are checked for Chinese
interface text, their own sidebar and search; and the checks themselves are checked on a toy site
(a missing image or font fails; a request cancelled by the test's own navigation does not).
"""

from __future__ import annotations

import functools
import html
import http.server
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--no-default-browser-check",
]
MATHJAX_VERSION = "3.2.2"  # the Makefile's
MATHJAX = ROOT / "build" / "mathjax" / "node_modules" / "mathjax" / "es5"
SITE_PACKAGES = ("sphinx", "myst_nb", "sphinx_book_theme")

playwright_api = pytest.importorskip("playwright.sync_api")
_missing = [name for name in SITE_PACKAGES if importlib.util.find_spec(name) is None]
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)"),
    pytest.mark.skipif(bool(_missing) and not os.environ.get("COURSE_SITE"),
                       reason=f"needs the site extra (pip install -e '.[site]'): no {_missing}"),
    pytest.mark.skipif(not (MATHJAX / "tex-mml-chtml.js").exists() and not shutil.which("npm")
                       and not os.environ.get("COURSE_SITE"),
                       reason="needs npm to install MathJax (or `make site` run before)"),
]


def stems() -> list[str]:
    return [p.stem for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]


def pages() -> list[str]:
    """Every page of both editions, as paths in the site."""
    out = ["index.html", "course.html", "run.html", "README.html",
           "zh/index.html", "zh/run.html", "README.zh-CN.html"]
    for stem in stems():
        for folder in ("notebooks", "exercises", "zh/notebooks", "zh/exercises"):
            out.append(f"{folder}/{stem}.html")
    return out


def counterpart(page: str) -> str:
    """The same page in the other language."""
    pairs = {"course.html": "zh/index.html", "run.html": "zh/run.html",
             "README.html": "README.zh-CN.html", "index.html": "zh/index.html"}
    if page.startswith("zh/notebooks/") or page.startswith("zh/exercises/"):
        return page.removeprefix("zh/")
    if page.startswith(("notebooks/", "exercises/")):
        return "zh/" + page
    if page == "zh/index.html":
        return "course.html"
    reverse = {zh: en for en, zh in pairs.items() if en != "index.html"}
    return pairs.get(page) or reverse[page]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    given = os.environ.get("COURSE_SITE")
    if given:
        return Path(given)
    if not (MATHJAX / "tex-mml-chtml.js").exists():
        subprocess.run(["npm", "install", "--prefix", str(ROOT / "build" / "mathjax"), "--no-save",
                        "--no-audit", "--no-fund", "--no-package-lock",
                        f"mathjax@{MATHJAX_VERSION}"], check=True, capture_output=True,
                       timeout=300)
    work = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, str(ROOT / "site" / "build.py"), "--mathjax", str(MATHJAX),
         "--out", str(work / "html"), "--stage", str(work / "stage")],
        capture_output=True, text=True, timeout=900)
    output = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, f"the site did not build:\n{output}"
    warnings = "\n".join(line for line in done.stderr.splitlines() if "WARNING" in line)
    assert not warnings, f"Sphinx warned (broken references, bad markup):\n{warnings[:4000]}"
    return work / "html"


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # no request log on stderr
        pass


@dataclass
class Visit:
    status: int = 0
    failed: list[str] = field(default_factory=list)  # requests that failed or answered >= 400
    cancelled: list[str] = field(default_factory=list)  # aborted by the test's own navigation
    outside: list[str] = field(default_factory=list)  # requests that left the site
    broken_images: list[str] = field(default_factory=list)
    images: int = 0
    math: int = 0  # Sphinx math elements on the page
    unrendered: int = 0  # of those, without MathJax output inside
    rendered: int = 0  # MathJax output elements
    raw_math: list[str] = field(default_factory=list)  # `$$` or `\(` left in the page's text
    links: list[str] = field(default_factory=list)  # absolute hrefs of every <a>
    switch: str | None = None  # where the language switch link went, after a click
    done: bool = False  # the test has read the page and is about to navigate away


# Waits for everything the checks read: every image decoded (lazy ones made eager first), MathJax's
# typesetting, and the web fonts the page (and MathJax's output) asked for. Only then is the page's
# state read and the visit closed.
_PAGE_STATE = """async () => {
  const images = [...document.images];
  images.forEach(img => { img.loading = "eager"; });
  const loaded = await Promise.all(images.map(img =>
      img.decode().then(() => img.naturalWidth > 0, () => false)));
  if (document.querySelector(".math") && window.MathJax && MathJax.startup) {
      await MathJax.startup.promise;
  }
  await document.fonts.ready;
  const math = [...document.querySelectorAll("span.math, div.math")];
  const clone = document.body.cloneNode(true);
  clone.querySelectorAll("pre, code, script, style, mjx-container").forEach(e => e.remove());
  return {
    images: images.length,
    broken: images.filter((img, k) => !loaded[k]).map(img => img.getAttribute("src")),
    math: math.length,
    unrendered: math.filter(e => !e.querySelector("mjx-container")).length,
    rendered: document.querySelectorAll("mjx-container").length,
    text: clone.innerText,
    links: [...document.querySelectorAll("a[href]")].map(a => a.href),
  };
}"""

#: What Chromium reports for a request that a navigation cancelled (the page it belonged to was
#: left before the request finished).
CANCELLED = "net::ERR_ABORTED"


class Visitor:
    """Opens pages one after another in one tab and records, per page, what its requests did.

    Every request belongs to the document that made it: a visit owns the requests that start
    after its page's document has committed (the main frame navigated to it), so what the page
    left before (the language switch's page, still loading MathJax's fonts or lazy images while
    the test moves on) belongs to no visit: that page is checked on its own visit. A request that
    fails with ``net::ERR_ABORTED`` after its visit is done was cancelled by the test navigating
    on, not broken: it goes to ``cancelled``. Any other failure, or any failure while the page is
    still being read, is the page's (``failed``).
    """

    def __init__(self, page, base: str):
        self.page, self.base = page, base
        self.current: Visit | None = None
        self.arriving: tuple[str, Visit] | None = None  # (url, visit) until its document commits
        self.owner: dict = {}  # request -> the visit it started in
        page.on("framenavigated", self._navigated)
        page.on("request", self._request)
        page.on("requestfailed", self._failed)
        page.on("requestfinished", lambda request: self.owner.pop(request, None))
        page.on("response", self._response)

    def _navigated(self, frame) -> None:
        if self.arriving and frame == self.page.main_frame and \
                frame.url.split("#")[0] == self.arriving[0]:
            self.current, self.arriving = self.arriving[1], None

    def _request(self, request) -> None:
        if self.current is None:
            return
        self.owner[request] = self.current
        if not request.url.startswith(self.base) and \
                not request.url.startswith(("data:", "blob:", "about:")):
            self.current.outside.append(request.url)

    def _failed(self, request) -> None:
        visit = self.owner.pop(request, None)
        if visit is None:
            return
        entry = f"{request.url} ({request.failure})"
        if visit.done and request.failure == CANCELLED:
            visit.cancelled.append(entry)
        else:
            visit.failed.append(entry)

    def _response(self, response) -> None:
        visit = self.owner.get(response.request)
        if visit is not None and response.status >= 400:
            visit.failed.append(f"{response.url} (HTTP {response.status})")

    def visit(self, name: str, switch: bool = True) -> Visit:
        """Open ``name``, wait for what the checks read, read it; then click its language switch."""
        visit = Visit()
        self.current, self.arriving = None, (self.base + name, visit)
        response = self.page.goto(self.base + name, wait_until="load", timeout=60_000)
        assert self.current is visit, f"{name}: the page's document never committed"
        visit.status = response.status if response else 0
        state = self.page.evaluate(_PAGE_STATE)
        visit.images, visit.broken_images = state["images"], state["broken"]
        visit.math, visit.unrendered = state["math"], state["unrendered"]
        visit.rendered, visit.links = state["rendered"], state["links"]
        visit.raw_math = re.findall(r".{0,30}(?:\$\$|\\\(|\\\[).{0,30}", state["text"])
        visit.done, self.current = True, None
        link = self.page.locator("a.course-lang-switch")
        if switch and link.count() == 1:
            link.click()
            self.page.wait_for_load_state("domcontentloaded")
            visit.switch = self.page.url.removeprefix(self.base)
        return visit


def browse(base: str, names: list[str], profile: Path, switch: bool = True) -> dict[str, Visit]:
    """Every page of ``names``, opened once in a fresh Chromium profile."""
    with playwright_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1200, "height": 900})
        try:
            visitor = Visitor(context.new_page(), base)
            return {name: visitor.visit(name, switch) for name in names}
        finally:
            context.close()


@pytest.fixture(scope="module")
def visits(server, tmp_path_factory) -> dict[str, Visit]:
    """Every page, opened once; then its language switch, clicked."""
    return browse(server, pages(), tmp_path_factory.mktemp("chromium-profile"))


def problems_of(visits: dict[str, Visit]) -> list[str]:
    """What the site-alone check reports: bad status, failed requests, broken images, network."""
    problems = [f"{name}: HTTP {v.status}" for name, v in visits.items() if v.status != 200]
    problems += [f"{name}: {url}" for name, v in visits.items() for url in v.failed]
    problems += [f"{name}: image {src} did not load" for name, v in visits.items()
                 for src in v.broken_images]
    problems += [f"{name}: fetched from the network: {url}" for name, v in visits.items()
                 for url in v.outside]
    return problems


def test_every_page_and_its_images_load_from_the_site_alone(visits):
    problems = problems_of(visits)
    assert not problems, "\n".join(problems[:40])
    assert sum(v.images for v in visits.values()) > 0, "no page has an image (drawings, plots)"


def test_every_lesson_page_shows_its_drawings_and_plots(site):
    """The lessons' SVG drawings and PNG plots are on their pages, in both languages."""
    for stem in ("01_computation_graphs", "00_setup"):
        for prefix in ("", "zh/"):
            text = (site / prefix / "notebooks" / f"{stem}.html").read_text(encoding="utf-8")
            images = re.findall(r'<img[^>]+src="([^"]+)"', text)
            assert images, f"{prefix}notebooks/{stem}.html shows no image"


def test_math_is_rendered_by_the_sites_own_mathjax(visits, site):
    problems = [f"{name}: {v.unrendered} of {v.math} formulas not rendered"
                for name, v in visits.items() if v.unrendered]
    problems += [f"{name}: raw TeX left in the text: {m!r}" for name, v in visits.items()
                 for m in v.raw_math]
    assert not problems, "\n".join(problems[:40])
    with_math = [name for name, v in visits.items() if v.math]
    assert "notebooks/01_computation_graphs.html" in with_math
    assert "zh/notebooks/01_computation_graphs.html" in with_math
    assert all(visits[name].rendered for name in with_math)
    head = (site / "notebooks" / "01_computation_graphs.html").read_text(encoding="utf-8")
    scripts = re.findall(r'<script[^>]+src="([^"]*mathjax[^"]*)"', head, re.I)
    assert scripts and all("://" not in s for s in scripts), f"MathJax from {scripts}"


@functools.cache
def _ids(path: Path) -> frozenset[str]:
    return frozenset(re.findall(r'\bid="([^"]+)"', path.read_text(encoding="utf-8")))


def test_no_internal_link_is_broken(visits, server, site):
    problems = []
    for name, visit in visits.items():
        for href in visit.links:
            if not href.startswith(server):
                continue
            parts = urlsplit(href)
            target = site / unquote(parts.path).lstrip("/")
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                problems.append(f"{name}: {href} -> no such file")
            elif parts.fragment and target.suffix == ".html" and \
                    unquote(parts.fragment) not in _ids(target):
                problems.append(f"{name}: {href} -> no #{parts.fragment} in {target.name}")
    assert not problems, "\n".join(sorted(set(problems))[:40])


def test_the_language_switch_lands_on_the_same_page_in_the_other_language(visits):
    problems = []
    for name, visit in visits.items():
        want = counterpart(name)
        if visit.switch is None:
            problems.append(f"{name}: no language switch")
        elif visit.switch != want:
            problems.append(f"{name}: the switch went to {visit.switch}, expected {want}")
    assert not problems, "\n".join(problems)


def test_notebook_pages_link_their_source_and_the_run_page(visits, server):
    for name, visit in visits.items():
        if name.split("/")[-2:-1] in (["notebooks"], ["exercises"]):
            source = server + "_sources/" + name.removesuffix(".html") + ".ipynb"
            assert source in visit.links, f"{name}: no link to its notebook file"
            run = server + ("zh/run.html" if name.startswith("zh/") else "run.html")
            assert run in visit.links, f"{name}: no link to the run-it page"


# -- the Chinese pages in Chinese (issue 38, item 8), on the same build: each edition's pages speak
# its language (Sphinx's and the themes' interface strings, the search box, previous/next), keep to
# their own edition (sidebar with its captions, previous/next), the Chinese search finds every
# Chinese page that holds a term, no nbval marker shows in a code cell, the glossary link leads to
# a Chinese page, and tables fit the page. (In this file so that make test builds the site once:
# pytest-xdist's --dist loadfile keeps one file's tests, and its module fixtures, in one worker.)

CHINESE = [p for p in pages() if p.startswith("zh/") or p == "README.zh-CN.html"]
ENGLISH = [p for p in pages() if p not in CHINESE and p != "index.html"]


def _read(site: Path, page: str) -> str:
    return (site / page).read_text(encoding="utf-8")


def _text(markup: str) -> str:
    """The visible text of a page, roughly: no scripts, styles or tags."""
    markup = re.sub(r"<(script|style)\b.*?</\1>", " ", markup, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


#: Interface strings of the theme on every page (the search box) and on a page with sections (the
#: page's table of contents), in English and in Chinese.
_SEARCH_BOX = {"en": 'placeholder="Search…"', "zh": 'placeholder="搜索…"'}
_PAGE_TOC = {"en": re.compile(r"</i>\s*Contents\s*</div>"),
             "zh": re.compile(r"</i>\s*目录\s*</div>")}
_PREV_NEXT = {"en": re.compile(r'prev-next-subtitle">(previous|next)<'),
              "zh": re.compile(r'prev-next-subtitle">(上一|下一)')}


def test_each_edition_speaks_its_language(site):
    problems = []
    for lang, mine, theirs in (("zh", CHINESE, "en"), ("en", ENGLISH, "zh")):
        for page in mine:
            text = _read(site, page)
            if lang == "zh" and not re.search(r'<html[^>]+lang="zh-CN"', text):
                problems.append(f"{page}: not <html lang=\"zh-CN\">")
            if _SEARCH_BOX[lang] not in text or _SEARCH_BOX[theirs] in text:
                problems.append(f"{page}: the search box is not in the page's language")
            if "onthispage" in text and (not _PAGE_TOC[lang].search(text)
                                         or _PAGE_TOC[theirs].search(text)):
                problems.append(f"{page}: the page's contents are not headed in its language")
            if _PREV_NEXT[theirs].search(text):
                problems.append(f"{page}: previous/next in the other language")
    assert not problems, "\n".join(problems)


def _rellinks(site: Path, page: str) -> dict[str, str]:
    text = _read(site, page)
    found = {}
    for kind in ("left-prev", "right-next"):
        m = re.search(rf'class="{kind}"\s+href="([^"]+)"', text)
        if m:
            found[kind] = urljoin(page, m[1])
    return found


def test_previous_and_next_keep_to_the_readers_edition(site):
    problems = []
    for page in CHINESE + ENGLISH:
        chinese = page in CHINESE
        for kind, target in _rellinks(site, page).items():
            if (target in CHINESE) != chinese:
                problems.append(f"{page}: {kind} leads to {target}, the other edition")
    assert not _rellinks(site, "index.html"), "the bilingual home page has previous/next"
    assert _rellinks(site, "zh/index.html")["right-next"].startswith("zh/")
    assert _rellinks(site, "zh/notebooks/01_computation_graphs.html") == {
        "left-prev": "zh/notebooks/00_setup.html",
        "right-next": "zh/notebooks/02_static_graphs.html"}
    assert not problems, "\n".join(problems)


def test_the_sidebar_shows_the_editions_captions(site):
    def captions(page):
        return re.findall(r'<span class="caption-text">([^<]+)</span>', _read(site, page))

    for page in ("zh/notebooks/04_dynamic_graphs.html", "zh/exercises/01_computation_graphs.html",
                 "zh/run.html"):
        assert captions(page)[:3] == ["开始", "课程", "练习"], (page, captions(page))
    for page in ("notebooks/04_dynamic_graphs.html", "run.html"):
        assert captions(page)[:3] == ["Start", "Lessons", "Exercises"], (page, captions(page))
    # and the Chinese sidebar lists no English page
    sidebar = _read(site, "zh/notebooks/04_dynamic_graphs.html").split('class="bd-sidebar')[1]
    sidebar = sidebar.split("</nav>")[0]
    assert "../../notebooks/" not in sidebar and "../../exercises/" not in sidebar


def _code_cells(markup: str) -> list[str]:
    """The text of a page's code cells (their input, as myst-nb renders it)."""
    return [_text(block) for block in re.findall(
        r'<div class="cell_input[^"]*".*?</pre>', markup, flags=re.S)]


def test_no_nbval_marker_is_shown(site):
    shown = [page for page in pages()
             if any("NBVAL_" in cell for cell in _code_cells(_read(site, page)))]
    assert sum(len(_code_cells(_read(site, page))) for page in pages()) > 100
    assert not shown, f"pages that show nbval's markers in a code cell: {shown}"
    # the lessons do carry them: the check above is not vacuous
    assert "# NBVAL_IGNORE_OUTPUT" in (Path(__file__).parents[1] / "notebooks" /
                                       "04_dynamic_graphs.ipynb").read_text(encoding="utf-8")


def _search_index(site: Path) -> dict:
    text = _read(site, "searchindex.js")
    return json.loads(text[text.index("(") + 1:text.rindex(")")])


@pytest.mark.parametrize("term", ["梯度带", "常量折叠", "占位符", "显式构建"])
def test_the_chinese_search_finds_every_chinese_page_with_a_term(site, term):
    index = _search_index(site)
    found = set()
    for table in ("terms", "titleterms"):
        hits = index[table].get(term, [])
        found |= {index["docnames"][k] for k in ([hits] if isinstance(hits, int) else hits)}
    holding = {page.removesuffix(".html") for page in CHINESE
               if term in _text(_read(site, page).split('<main', 1)[-1])}
    assert holding, f"no Chinese page says {term}"
    missing = holding - found
    assert not missing, f"the search index misses {term} on {sorted(missing)}"


def test_the_chinese_search_page_is_chinese_and_loads_its_scripts_once(site):
    text = _read(site, "zh/search.html")
    assert re.search(r'<html[^>]+lang="zh-CN"', text) and "<h1>搜索</h1>" in text
    for script in ("searchtools.js", "language_data.js", "searchindex.js"):
        assert text.count(script) == 1, f"zh/search.html loads {script} {text.count(script)} times"
    assert "translations.zh_CN.js" in text
    data = _read(site, "_static/language_data.js")
    stemmer = re.search(r"window\.Stemmer = (\w+);", data)[1]
    assert f"var {stemmer}=" in data or f"var {stemmer} =" in data, f"{stemmer} is not defined"
    # the Chinese pages' search box goes there
    assert 'action="../search.html"' in _read(site, "zh/notebooks/00_setup.html") and \
        'action="../../search.html"' not in _read(site, "zh/notebooks/00_setup.html")


def test_the_glossary_link_leads_to_a_chinese_glossary(site):
    index = _read(site, "zh/index.html")
    link = re.search(r'href="([^"]+)"[^>]*>\s*(?:<[^>]+>)*术语表', index)
    assert link, "zh/index.html has no 术语表 link"
    target = urljoin("zh/index.html", link[1]).split("#")[0]
    page = _read(site, target)
    assert re.search(r'<html[^>]+lang="zh-CN"', page), f"{target} is not a Chinese page"
    body = _text(page.split("<main", 1)[-1])
    assert "术语表" in body and "文章用语 ↔ 本课程用语" in body and "显式构建" in body
    assert "Translators" not in body and "Typography" not in body


def test_tables_fit_the_page(server):
    """The claims tables (README, lesson 00) wrap their text instead of running off the page."""
    wide = []
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            for name in ("README.html", "README.zh-CN.html", "notebooks/00_setup.html",
                         "zh/notebooks/00_setup.html"):
                page.goto(server + name, wait_until="load")
                tables = page.evaluate("""() => [...document.querySelectorAll('main table')]
                    .map(t => [t.scrollWidth, t.parentElement.clientWidth])""")
                assert tables, f"{name} has no table"
                wide += [f"{name}: table {k} is {w}px in {c}px" for k, (w, c) in
                         enumerate(tables) if w > c + 1]
        finally:
            browser.close()
    assert not wide, "\n".join(wide)


# -- the checks themselves: a broken page fails, a request the test's own navigation cancelled does
# not. A small site of three pages, served here, with a resource that never answers until the end.

_TOY_PAGES = {
    "/good.html": "<html><body><p>fine</p><img src='ok.svg' alt='ok'></body></html>",
    "/broken.html": (
        "<html><head><style>@font-face { font-family: Gone; src: url(gone.woff2); }"
        " p { font-family: Gone, serif; }</style></head>"
        "<body><p>text in a font that is not there</p>"
        "<img src='missing.png' alt='x'></body></html>"),
    # A request the page starts and the checks do not wait for: still in flight when the test
    # navigates on, so Chromium aborts it.
    "/pending.html": "<html><body><p>waiting</p><script>fetch('hang')</script></body></html>",
}
_OK_SVG = (b"<svg xmlns='http://www.w3.org/2000/svg' width='4' height='4'>"
           b"<rect width='4' height='4'/></svg>")


@pytest.fixture(scope="module")
def toy_site():
    release = threading.Event()
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802 (http.server's name)
            asked.append(self.path)
            if self.path == "/hang":
                release.wait(60)  # answers only when the test is over (or after a minute)
                body, kind, status = b"late", "text/plain", 200
            elif self.path in _TOY_PAGES:
                body, kind, status = _TOY_PAGES[self.path].encode(), "text/html", 200
            elif self.path == "/ok.svg":
                body, kind, status = _OK_SVG, "image/svg+xml", 200
            else:
                body, kind, status = b"not here", "text/plain", 404
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the browser gave up on /hang
                pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/", asked
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()


def test_a_page_with_a_missing_image_or_font_fails_the_check(toy_site, tmp_path):
    base, _ = toy_site
    visits = browse(base, ["good.html", "broken.html"], tmp_path / "profile", switch=False)
    assert problems_of({"good.html": visits["good.html"]}) == []
    problems = "\n".join(problems_of(visits))
    assert "broken.html: " + base + "missing.png (HTTP 404)" in problems, problems
    assert "broken.html: image missing.png did not load" in problems, problems
    assert "broken.html: " + base + "gone.woff2 (HTTP 404)" in problems, problems
    assert "good.html" not in problems, problems


def test_a_request_cancelled_by_the_tests_own_navigation_is_not_a_failure(toy_site, tmp_path):
    base, asked = toy_site
    visits = browse(base, ["pending.html", "good.html"], tmp_path / "profile", switch=False)
    assert "/hang" in asked, "the page never started its request: the test proves nothing"
    assert visits["pending.html"].cancelled == [f"{base}hang ({CANCELLED})"]
    assert problems_of(visits) == []
