"""Prose that cannot contradict its run (course_utils.claims): every lesson of both editions, the
README's claims table, and the rules themselves on the text that broke them (issue 39)."""

import json
import shutil
from pathlib import Path

import pytest

from course_utils import claims
from course_utils.editions import ROOT


def notebook(tmp_path: Path, markdown: str, output: str, name: str = "nb.ipynb",
             metadata: dict | None = None) -> Path:
    """A two-cell notebook: ``markdown`` (cell ``md``) and a code cell that printed ``output``."""
    nb = {"cells": [
        {"cell_type": "markdown", "id": "md", "metadata": metadata or {}, "source": markdown},
        {"cell_type": "code", "id": "code", "metadata": {}, "source": "print(...)",
         "outputs": [{"output_type": "stream", "name": "stdout", "text": output}]},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / name
    path.write_text(json.dumps(nb))
    return path


# ----------------------------------------------------------------------------- the course


def test_every_lesson_of_both_editions_states_only_what_its_outputs_show():
    problems = claims.check()
    assert len(claims.lessons()) >= 30  # 15 lessons, two editions: the check saw them all
    assert not problems, "\n".join(p.line() for p in problems)


def test_the_readme_claims_tables_are_what_lesson_10s_outputs_give():
    stale = claims.readme(write=False)
    assert not stale, (f"{stale}: the claims table differs from lesson 10's stored outputs; run "
                       "python -m course_utils.claims readme")


def test_the_readme_check_fails_when_a_figure_of_the_table_is_edited_by_hand(tmp_path):
    for name in ("README.md", "README.zh-CN.md", "docs/claims_table.md",
                 "docs/claims_table.zh-CN.md", "notebooks/10_performance.ipynb"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    assert claims.readme(write=False, root=tmp_path) == []
    readme = (tmp_path / "README.md").read_text()
    ratio = claims.run_figures(ROOT)["tf1_torch_ratio"][0]
    assert f"time ratio {ratio} " in readme  # the figure in the table is the lesson's
    (tmp_path / "README.md").write_text(readme.replace(f"time ratio {ratio} ", "time ratio 0.85 "))
    assert claims.readme(write=False, root=tmp_path) == ["README.md"]
    claims.readme(write=True, root=tmp_path)
    assert (tmp_path / "README.md").read_text() == readme


def test_the_table_reads_each_figure_from_its_cell():
    figures = claims.run_figures()
    assert set(figures) == set(claims.SOURCES)
    nb = json.loads((ROOT / "notebooks/10_performance.ipynb").read_text())
    low, high = figures["torch_ratio"][1:]
    assert f"95% interval {low} to {high}" in claims.output_text(
        {"cells": [c for c in nb["cells"] if c.get("id") == "l10-52"]})


# ----------------------------------------------------------------------------- rule 1: figures


def test_a_figure_the_outputs_do_not_hold_fails_and_one_they_hold_passes(tmp_path):
    out = "first call (trace + run): 16.5 ms   later calls: 1.40 ms ± 0.49 ms\n"
    assert claims.check_notebook(notebook(tmp_path, "It took 16.5 ms, then 1.4 ms.", out)) == []
    problems = claims.check_notebook(notebook(tmp_path, "It took 12 ms, then 1.4 ms.", out))
    assert [p.cell for p in problems] == ["md"] and "'12 ms'" in problems[0].what


@pytest.mark.parametrize("text", ["1.5×", "1.5x", "15 倍", "20%", "1,500 QPS", "2 seconds",
                                  "16.5 毫秒", "3 µs", "3 us"])
def test_what_counts_as_a_figure(tmp_path, text):
    assert claims.check_notebook(notebook(tmp_path, f"A run gave {text} here.", "nothing\n"))


@pytest.mark.parametrize("text", ["a 200 × 32 state", "at 0x7f0d2a> in memory", "within 10%",
                                  "a 95% interval", "`12 ms` in code", "$2 x$ in math",
                                  "66 ops on 4 MB", "[a link](../x_12%.md)"])
def test_what_does_not(tmp_path, text):
    assert claims.check_notebook(notebook(tmp_path, f"See {text}.", "nothing\n")) == []


def test_a_cited_figure_passes_and_the_chinese_edition_inherits_the_list(tmp_path):
    cited = {"cited": ["20% (the article's figure)", "15× (arithmetic on it)"]}
    english = notebook(tmp_path, "The article's 20%, a 15× gain.", "x\n", "en.ipynb", cited)
    assert claims.check_notebook(english) == []
    zh = notebook(tmp_path, "文章的 20%，提高到 15 倍。", "x\n", "zh.ipynb")
    assert len(claims.check_notebook(zh)) == 2
    assert claims.check_notebook(zh, english=english) == []


# ----------------------------------------------------------------------------- rule 2: verdicts

OLD = {  # the text issue 39 found, with what its notebook's outputs printed under it
    "l09-15": ("A trace costs much more than a call of the finished graph (on the run shown, "
               "milliseconds\nagainst microseconds).",
               "first call (trace + run): 16.5 ms   later calls: 1.40 ms\n"),
    "l10-53": ("Alone, the two PyTorch modes come out within 10% of each other on this network "
               "(the verdict above,\non the run shown): the 20% is not reproduced at this size.",
               "eager vs TorchScript: cannot tell from this run\n"),
    "l10-48": ("PyTorch's TorchScript has little to remove: on our machines its verdicts were *no "
               "measurable\ndifference* or *within* the margin.",
               "torchscript   faster 0.83× [0.72, 0.89]\n"),
    "l10-24b": ("Both kinds of first call are repaid eventually, because inductor is faster per "
                "call, and a warm cache\ncuts the wait by a large factor (the last line says by "
                "how much on the run shown): the cold compile\ntakes tens of thousands of calls.",
                "repaid after 113,873 calls\n"),
    "c63": ("on this model's tiny block that can outweigh what fusing saves: on the run shown it "
            "is no faster than eager (its ratio says whether it was slower).",
            "torch.compile  no (1.52×, 95% interval 1.38-1.97)\n"),
    "c84f-zh": ("在我们做过的运行中，它的追踪模式甚至比梯度带还慢。", "1.41×\n"),
    # the second round's review (issue 39's held-back review): runs named another way, and
    # outcomes said with other words
    "l14-time-after": ("- **Eager, interpreter and codegen** usually land close together here (on "
                       "the machine the course is\n  developed on, within 10% of each other).",
                       "minigraph codegen vs minigraph eager: within 10% (0.94×)\n"),
    "l14-time-after-b": ("- **ONNX Runtime**, if its verdict says *faster* (on the development "
                         "machine it ran the batch\n  more than ten times as fast as codegen), "
                         "wins",
                         "ONNX Runtime vs minigraph codegen: faster (time ratio 0.126)\n"),
    "l12-prof-torch-after": ("In the runs\nwe made the matrix product had the largest share, a "
                             "fifth to a third of the forward, and no op came\nnear most of it.",
                             "aten::mean  16.17%\n"),
    "c85": ("Mixed mode compiles that block; it pays in speed only when the block does enough "
            "work per call (on our runs\n  it did not, with inductor either; one whole "
            "tf.function did).",
            "TF model, one tf.function  yes (0.14×)\n"),
    "l11-big-read": ("If your run says that one call with 16 rows is faster than 16 calls of one "
                     "row (it did on every\nmachine we tried, by far more than the margin), that "
                     "gap is what batching sells.",
                     "eager: one call with 16 rows is cannot tell from this run\n"),
    "l14-zh": ("在开发本课程的机器上，它运行这个批量比代码生成快十倍以上。", "0.126×\n"),
}


@pytest.mark.parametrize("cell", sorted(OLD))
def test_the_old_text_about_the_run_fails(tmp_path, cell):
    markdown, output = OLD[cell]
    problems = claims.check_notebook(notebook(tmp_path, markdown, output))
    assert any("decides something itself" in p.what for p in problems)


@pytest.mark.parametrize("text", [
    "The verdict line says whether it was *slower* on the run shown.",
    "If your run says *faster*, the call costs less than the ops it saves.",
    "*cannot tell from this run* is the honest answer then, and another run may decide it.",
    "Expect a gap smaller than 20%: each convolution takes far longer than its dispatch.",
    "它的比值说明了在你的机器上是否更慢。",
    "Expect no single op to come near most of it; your run's table says how it splits.",
    "If the first two lines say True on your machine, as they did on the machines the course is "
    "tested on, runtimes differ.",
])
def test_pointing_at_the_run_or_describing_what_to_expect_passes(tmp_path, text):
    assert claims.check_notebook(notebook(tmp_path, text, "20%\n")) == []


def test_the_command_reports_and_fails(tmp_path, capsys, monkeypatch):
    path = notebook(tmp_path, "On our machines it was faster.", "x\n")
    monkeypatch.setattr(claims, "lessons", lambda root=ROOT: [(path, None)])
    assert claims.main(["check"]) == 1
    assert "decides something itself" in capsys.readouterr().out
