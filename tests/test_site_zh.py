"""The site's Chinese pages in Chinese (issue 38, item 8), on the site test_site.py builds.

Each edition's pages speak its language (Sphinx's and the themes' interface strings, the search
box, previous/next), keep to their own edition (sidebar with its captions, previous/next), the
Chinese search finds every Chinese page that holds a term, no nbval marker shows in a code cell,
the glossary link leads to a Chinese page, and tables fit the page.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import urljoin

import pytest
import test_site
from test_site import CHROMIUM, CHROMIUM_FLAGS, pages, playwright_api

pytestmark = test_site.pytestmark
# test_site's fixtures: the site as built (or COURSE_SITE), and a server on loopback for it
site = test_site.site
server = test_site.server

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
