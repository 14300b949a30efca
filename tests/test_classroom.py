"""Grading a class (classroom.py): a roster, Canvas' file names, duplicates, the Canvas export,
results written as grading goes, --resume, and the kernels' threads and device."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.grading import classroom
from course_utils.grading.classroom import (
    busy_timeout,
    kernel_environment,
    parse_canvas_name,
    read_roster,
)
from course_utils.grading.format import exercises
from course_utils.grading.kernel import Kernel

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "classroom"

# --- Canvas' file names, the roster -----------------------------------------------------------


def test_canvas_names_give_the_student_the_lesson_and_which_upload_is_newest():
    found = parse_canvas_name("babbagecharles_102_9010_00_setup-1.ipynb")
    assert (found.name, found.user_id, found.file_id, found.lesson, found.upload, found.late) \
        == ("babbagecharles", "102", 9010, "00_setup", 1, False)
    late = parse_canvas_name("hoppergrace_LATE_103_77_01_computation_graphs.ipynb")
    assert (late.name, late.user_id, late.lesson, late.late) == \
        ("hoppergrace", "103", "01_computation_graphs", True)
    for plain in ("01_computation_graphs.ipynb", "ada.ipynb", "ada_12_x_01.ipynb"):
        assert parse_canvas_name(plain) is None, plain


def test_a_roster_reads_our_columns_or_a_canvas_gradebook_export(tmp_path):
    students = read_roster(FIXTURES / "roster.csv")
    assert [(s.student_id, s.name, s.folder) for s in students] == [
        ("101", "Ada Lovelace", "lovelaceada"), ("102", "Charles Babbage", "babbagecharles"),
        ("103", "Grace Hopper", "hoppergrace")]
    export = tmp_path / "export.csv"
    export.write_text("Student,ID,SIS User ID,SIS Login ID,Section,Quiz (1)\n"
                      "    Points Possible,,,,,10\n"
                      "\"Lovelace, Ada\",101,S-1,ada,Mon,4\n", encoding="utf-8")
    [ada] = read_roster(export)
    assert (ada.student_id, ada.name, ada.extra["SIS User ID"], ada.extra["Section"]) == \
        ("101", "Lovelace, Ada", "S-1", "Mon")


@pytest.mark.parametrize("text, message", [
    ("name,folder\nAda,ada\n", "no student id column"),
    ("student_id,folder\n,ada\n", "line 2: no student id"),
    ("student_id,folder\n1,ada\n2,ada\n", "line 3: 'ada' is also on line 2"),
    ("", "the roster is empty"),
])
def test_a_bad_roster_is_refused_naming_the_line(tmp_path, text, message):
    roster = tmp_path / "roster.csv"
    roster.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_roster(roster)


# --- threads, device, time on a busy machine --------------------------------------------------


def test_one_thread_per_library_and_the_cpu_by_default():
    env = kernel_environment()
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                 "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        assert env[name] == "1", name
    assert "intra_op_parallelism_threads=1" in env["XLA_FLAGS"]
    assert (env["COURSE_DEVICE"], env["CUDA_VISIBLE_DEVICES"], env["JAX_PLATFORMS"]) == \
        ("cpu", "", "cpu")
    assert "COURSE_DEVICE" not in kernel_environment(device="auto")
    assert kernel_environment(None, "auto") == {}
    with pytest.raises(ValueError, match="--threads"):
        kernel_environment(0)
    assert busy_timeout(60, jobs=4, cores=2) == 120
    assert busy_timeout(60, jobs=1, cores=2) == 60


@pytest.mark.slow
def test_a_grading_kernel_runs_one_thread_in_numpy_and_torch(monkeypatch):
    monkeypatch.setattr(classroom, "KERNEL_ENV", kernel_environment(1))
    code = ("import os, threadpoolctl, numpy, torch\n"
            "pools = {p['internal_api']: p['num_threads'] for p in "
            "threadpoolctl.threadpool_info()}\n"
            "print(torch.get_num_threads(), max(pools.values()), "
            "repr(os.environ['CUDA_VISIBLE_DEVICES']), torch.cuda.is_available())")
    with Kernel(sandbox=False) as k:
        reply = k.execute(code, timeout=120)
    assert reply.status == "ok", reply.evalue
    assert reply.stdout.split() == ["1", "1", "''", "False"], reply.stdout


# --- a small class on Canvas: a duplicate, a missing lesson, a student not on the roster ------


def _answered(name: str, answers: dict[str, str]) -> nbformat.NotebookNode:
    nb = nbformat.read(ROOT / "exercises" / name, as_version=4)
    for cell in nb.cells:
        exercise = cell.metadata.get("grading", {}).get("id")
        if "solution" in cell.metadata.get("tags", []) and exercise in answers:
            cell.source = answers[exercise]
    return nb


PARTIAL_00 = {  # 00.1 without the shape check (1 of 2), 00.2 right (2 of 2), 00.3 not answered
    "00.1": "def mean_squared_error(pred, target):\n"
            "    return float(np.mean((np.asarray(pred) - np.asarray(target)) ** 2))",
    "00.2": "def count_parameters(sizes):\n"
            "    return sum((n_in + 1) * n_out for n_in, n_out in zip(sizes, sizes[1:]))",
}


def _grade(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_utils.grading.grade", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _dicts(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_a_canvas_class_is_graded_into_the_expected_gradebook_and_resumes(tmp_path):
    subs = tmp_path / "submissions"
    subs.mkdir()
    older = subs / "babbagecharles_102_9002_00_setup.ipynb"
    newer = subs / "babbagecharles_102_9010_00_setup-1.ipynb"
    nbformat.write(_answered("00_setup.ipynb", {}), older)  # his first upload: nothing answered
    nbformat.write(_answered("00_setup.ipynb", PARTIAL_00), newer)
    (subs / "lovelaceada_101_9001_00_setup.ipynb").write_bytes(
        (ROOT / "solutions" / "00_setup.ipynb").read_bytes())
    (subs / "lovelaceada_101_9004_01_computation_graphs.ipynb").write_bytes(
        (ROOT / "solutions" / "01_computation_graphs.ipynb").read_bytes())
    nbformat.write(_answered("00_setup.ipynb", {}), subs / "turingalan_104_9020_00_setup.ipynb")
    out, grades = tmp_path / "canvas.csv", tmp_path / "grades.csv"
    options = ["--roster", str(FIXTURES / "roster.csv"), "--canvas", str(out),
               "--csv", str(grades), "--jobs", "2", "--sandbox"]

    done = _grade(str(subs), *options)
    assert done.returncode == 1, done.stderr  # not everyone passed
    assert f"babbagecharles handed in 00_setup 2 times: grading {newer} (the newest), " \
        f"not {older}" in done.stderr
    assert "turingalan is not on the roster" in done.stderr
    possible_01 = sum(exercises(nbformat.read(ROOT / "solutions" / "01_computation_graphs.ipynb",
                                              as_version=4)).values())
    expected = [[cell.replace("{01_computation_graphs}", f"{possible_01:g}") for cell in row]
                for row in _rows(FIXTURES / "canvas_expected.csv")]
    assert _rows(out) == expected
    rows = _dicts(grades)
    assert {r["path"] for r in rows if r["learner"] == "babbagecharles"} == {str(newer)}
    assert len({r["path"] for r in rows}) == 4, "one notebook per student and lesson"

    # An interrupted run: the progress file holds what was done; --resume grades the rest only.
    progress = tmp_path / "grades.progress.jsonl"
    lines = progress.read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)["sha256"] for line in lines)
    kept = [line for line in lines if "turingalan" not in line]
    progress.write_text("\n".join(kept) + "\n" + kept[-1][:40])  # and a line cut short
    again = _grade(str(subs), *options, "--resume")
    assert "resuming: 3 of 4 notebook(s) already graded" in again.stderr, again.stderr
    graded = [line for line in again.stderr.splitlines() if line.startswith("grading ")]
    assert len(graded) == 1 and "turingalan" in graded[0], again.stderr
    assert _rows(out) == expected
    assert len(_dicts(grades)) == len(rows)
