"""Sphinx configuration of the course's site (both editions); `make site` builds it.

site/build.py stages the pages into a folder laid out like the repository and runs Sphinx with
this folder as its configuration directory. Every notebook is shown as committed, with its
outputs: nothing is executed. MathJax is served from the site's own _static/mathjax/.
"""

from __future__ import annotations

import html

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
    "search_bar_text": "Search / 搜索",
}
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
    return docname.startswith("zh/") or docname == "README.zh-CN"


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
    if chinese:
        context["language"] = "zh-CN"


def setup(app):
    app.connect("html-page-context", _course_bar)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

