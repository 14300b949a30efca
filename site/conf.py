"""Sphinx configuration of the course's site (both editions); `make site` builds it.

site/build.py stages the pages into a folder laid out like the repository and runs Sphinx with
this folder as its configuration directory. Every notebook is shown as committed, with its
outputs: nothing is executed. MathJax is served from the site's own _static/mathjax/.
"""

from __future__ import annotations

import gettext
import html
import re
from pathlib import Path

import pydata_sphinx_theme
import sphinx
import sphinx_book_theme
from docutils import nodes
from sphinx.builders.html._assets import _JavaScript

project = "Computation graphs, from the inside · 计算图：从内部看"
author = "the course's authors"
copyright = "the course's authors"  # noqa: A001 (Sphinx's name)

extensions = ["myst_nb"]
root_doc = "index"
exclude_patterns = ["solutions/**", "_build", "**/.ipynb_checkpoints"]
suppress_warnings = ["myst.header"]  # notebooks start a cell at "##" under a "#" title

# Notebooks are shown as committed (outputs included); the site never runs code.
nb_execution_mode = "off"
nb_output_stderr = "show"
nb_merge_streams = True
# No JavaScript from a CDN: the step-through widgets (lessons 01, 04) show their filmstrip, the
# text/html their output carries for pages without a kernel.
nb_ipywidgets_js = {}
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None),
                              ("html", "application/vnd.jupyter.widget-state+json", None)]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3  # links such as README.md#the-article-this-course-answers

# MathJax 3 from the site itself (npm's `mathjax`, copied into _static/mathjax by build.py).
mathjax_path = "mathjax/tex-mml-chtml.js"
html_static_path = ["_static"]  # build.py points this at the stage's _static (+ MathJax)
html_css_files = ["course.css"]

html_theme = "sphinx_book_theme"
html_title = "Computation graphs, from the inside · 计算图：从内部看"
html_last_updated_fmt = None
html_theme_options = {
    "show_navbar_depth": 1,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "navigation_with_keys": False,
    "search_bar_text": "Search…",
}
# One search index for both editions, split by jieba (Chinese words; Latin words as in English).
# build.py stages the course's own terms (docs/glossary.zh-CN.md) as jieba's user dictionary,
# so 梯度带 or 常量折叠 is one word to search for, not two.
html_search_language = "zh"
SEARCH_WORDS = "_search_words.zh.txt"  # in the staged source folder
html_copy_source = True
html_show_sourcelink = False

#: Page pairs of the two editions: English page -> Chinese page.
_PAIRS = {"course": "zh/index", "run": "zh/run", "README": "README.zh-CN", "index": "zh/index"}


def counterpart(docname: str) -> str | None:
    """The same page in the other language (None: no such page)."""
    if docname.startswith("zh/notebooks/") or docname.startswith("zh/exercises/"):
        return docname.removeprefix("zh/")
    if docname.startswith(("notebooks/", "exercises/")):
        return "zh/" + docname
    if docname == "zh/index":
        return "course"
    reverse = {zh: en for en, zh in _PAIRS.items() if en != "index"}
    return _PAIRS.get(docname) or reverse.get(docname)


def is_chinese(docname: str) -> bool:
    return docname.startswith("zh/") or docname in ("README.zh-CN", "docs/glossary.zh-CN")


# --- the Chinese pages in Chinese: interface strings, search page, sidebar, previous/next ------

#: Sphinx's `language` is one per build; the site has two. A Chinese page is rendered with the
#: Chinese catalogs of Sphinx, pydata-sphinx-theme and sphinx-book-theme installed for it alone.
_ZH_LOCALE = "zh_CN"


def _catalogs() -> tuple[gettext.NullTranslations, gettext.NullTranslations]:
    """(Sphinx's and pydata-sphinx-theme's messages, sphinx-book-theme's) in Chinese."""
    base = gettext.translation("sphinx", Path(sphinx.__file__).parent / "locale", [_ZH_LOCALE])
    theme = gettext.translation("sphinx", Path(pydata_sphinx_theme.__file__).parent / "locale",
                                ["zh"], fallback=True)
    theme.add_fallback(base)
    book = gettext.translation(
        "booktheme", Path(sphinx_book_theme.__file__).parent / "theme" / "sphinx_book_theme"
        / "static" / "locales", [_ZH_LOCALE], fallback=True)
    return theme, book


_ZH_MESSAGES, _ZH_BOOK = _catalogs()
#: The search page's and the search box's own strings (JavaScript), from Sphinx's catalog.
_ZH_JS = Path(sphinx.__file__).parent / "locale" / _ZH_LOCALE / "LC_MESSAGES" / "sphinx.js"
_ZH_JS_NAME = "translations.zh_CN.js"
#: The two editions' tables of contents: a page of one keeps to it (sidebar, previous/next).
_EDITION_ROOTS = ("course", "zh/index")


def _edition_order(app, root: str) -> list[str]:
    """The pages of an edition in reading order: its root, then its toctrees' entries."""
    order, includes = [], app.env.toctree_includes

    def walk(doc: str) -> None:
        if doc in order:
            return
        order.append(doc)
        for child in includes.get(doc, []):
            walk(child)

    walk(root)
    return order


def _rellink(app, pagename: str, other: str | None) -> dict | None:
    if other is None:
        return None
    return {"link": app.builder.get_relative_uri(pagename, other),
            "title": app.builder.render_partial(app.env.titles[other])["title"]}


def _edition_pages(app, pagename, templatename, context, doctree):
    """Each edition's pages in their own language, and kept to their own edition."""
    chinese = is_chinese(pagename)
    templates = app.builder.templates.environment
    if pagename == "zh/search":  # the theme loads the search scripts once on "the" search page
        context["pagename"] = "search"
    if chinese:
        templates.install_gettext_translations(_ZH_MESSAGES)
        context["translate"] = _ZH_BOOK.gettext
        context["language"] = "zh-CN"
        context["theme_search_bar_text"] = "搜索…"
        context["script_files"] = [*context.get("script_files", []),
                                   _JavaScript(f"_static/{_ZH_JS_NAME}", priority=900)]
        pathto = context["pathto"]
        context["pathto"] = lambda name, *args, **kw: pathto(
            "zh/search" if name == "search" else name, *args, **kw)
    else:
        templates.install_gettext_translations(app.builder._translator)
    # previous/next within the page's own edition; the bilingual home page has neither
    if pagename == app.config.root_doc:
        context["prev"] = context["next"] = None
    for root in _EDITION_ROOTS:
        order = _edition_order(app, root)
        if pagename in order:
            at = order.index(pagename)
            context["prev"] = _rellink(app, pagename, order[at - 1] if at else None)
            context["next"] = _rellink(app, pagename,
                                       order[at + 1] if at + 1 < len(order) else None)
            # the sidebar shows the edition's own table of contents, with its captions
            generate = context.get("generate_toctree_html")
            if generate is not None:
                def edition_toctree(kind, startdepth=1, *args, _generate=generate, **kw):
                    if kind == "sidebar" and startdepth == 0:
                        startdepth = 1
                    return _generate(kind, startdepth, *args, **kw)
                context["generate_toctree_html"] = edition_toctree
            break


def _chinese_search_page(app):
    """zh/search: the search page for the Chinese pages (same index, Chinese interface)."""
    if getattr(app.builder, "search", False):
        yield "zh/search", {}, "search.html"


def _copy_zh_js(app, exception):
    if exception is None and app.builder.format == "html":
        static = Path(app.outdir) / "_static"
        static.mkdir(parents=True, exist_ok=True)
        (static / _ZH_JS_NAME).write_bytes(_ZH_JS.read_bytes())
        # Sphinx 9's Chinese search ships the English stemmer (its js_stemmer_rawcode) but names
        # it ChineseStemmer in language_data.js, which no script defines: the search page stops
        # with "ChineseStemmer is not defined". Name the stemmer it ships.
        data = static / "language_data.js"
        if data.is_file():
            text = data.read_text(encoding="utf-8")
            fixed = text.replace("window.Stemmer = ChineseStemmer;",
                                 "window.Stemmer = EnglishStemmer;")
            if fixed != text and "var EnglishStemmer" in fixed:
                data.write_text(fixed, encoding="utf-8")


def _search_words(app):
    words = Path(app.srcdir) / SEARCH_WORDS
    if words.is_file():
        app.config.html_search_options = {**app.config.html_search_options, "dict": str(words)}


# --- code cells shown without the test suite's markers ------------------------------------------

_NBVAL = re.compile(r"^[ \t]*# NBVAL_[A-Z_]+[^\n]*\n?", re.M)


def _without_nbval_markers(app, doctree, docname):
    """A code cell's `# NBVAL_IGNORE_OUTPUT` (nbval's instruction to the course's tests) is not
    shown on the site: the notebook file keeps it."""
    for block in list(doctree.findall(nodes.literal_block)):
        parent = block.parent
        if parent is None or "cell_input" not in parent.get("classes", []):
            continue
        text = block.astext()
        stripped = _NBVAL.sub("", text)
        if stripped != text:
            block.children = [nodes.Text(stripped)]
            block.rawsource = stripped


def _course_bar(app, pagename, templatename, context, doctree):
    """A bar on top of every page: the same page in the other language, the notebook's source
    file (downloadable, and its path in the repository), and how to run it."""
    if doctree is None or "body" not in context:
        return
    pathto = context["pathto"]
    found = app.env.found_docs
    parts = []
    other = counterpart(pagename)
    if other in found:
        label, lang = ("English", "en") if is_chinese(pagename) else ("中文", "zh-CN")
        parts.append(f'<a class="course-lang-switch" hreflang="{lang}" lang="{lang}" '
                     f'href="{html.escape(pathto(other))}">{label}</a>')
    chinese = is_chinese(pagename)
    if pagename.startswith(("notebooks/", "exercises/", "zh/notebooks/", "zh/exercises/")):
        source = f"_sources/{pagename}.ipynb"
        label = "源文件" if chinese else "source"
        parts.append(f'<a class="course-source" download href="{html.escape(pathto(source, 1))}">'
                     f"{label}: <code>{html.escape(pagename)}.ipynb</code></a>")
    run_page = "zh/run" if chinese else "run"
    if run_page in found and pagename != run_page:
        label = "运行它" if chinese else "run it"
        parts.append(f'<a class="course-run" href="{html.escape(pathto(run_page))}">{label}</a>')
    if parts:
        bar = '<nav class="course-bar">' + " · ".join(parts) + "</nav>\n"
        context["body"] = bar + context["body"]


def setup(app):
    app.connect("html-page-context", _course_bar)
    app.connect("html-page-context", _edition_pages, priority=900)  # after the themes'
    app.connect("html-collect-pages", _chinese_search_page)
    app.connect("builder-inited", _search_words)
    app.connect("build-finished", _copy_zh_js)
    app.connect("doctree-resolved", _without_nbval_markers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

