"""Grading a class (classroom.py): a roster, Canvas' file names, duplicates, the Canvas export,
results written as grading goes, --resume, and the kernels' threads and device."""

from __future__ import annotations

import csv
import hashlib
import json
import os
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
    read_overrides,
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
def test_a_grading_kernel_runs_one_thread_in_numpy_and_torch():
    code = ("import os, threadpoolctl, numpy, torch\n"
            "pools = {p['internal_api']: p['num_threads'] for p in "
            "threadpoolctl.threadpool_info()}\n"
            "print(torch.get_num_threads(), max(pools.values()), "
            "repr(os.environ['CUDA_VISIBLE_DEVICES']), torch.cuda.is_available())")
    with Kernel(sandbox=False, env=kernel_environment(1)) as k:
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
    columns = tmp_path / "columns.csv"
    columns.write_text("lesson,assignment\n00,Lesson 0: set-up (4700)\n"
                       "01,Lesson 1: computation graphs (4711)\n", encoding="utf-8")
    options = ["--roster", str(FIXTURES / "roster.csv"), "--canvas", str(out),
               "--csv", str(grades), "--jobs", "2", "--sandbox", "--allow-off-roster",
               "--canvas-columns", str(columns)]

    done = _grade(str(subs), *options)
    assert done.returncode == 1, done.stderr  # not everyone passed
    assert f"babbagecharles_102 handed in 00_setup 2 times: grading {newer} (the newest), " \
        f"not {older}" in done.stderr
    assert "turingalan_104 is not on the roster" in done.stderr
    possible_01 = sum(exercises(nbformat.read(ROOT / "solutions" / "01_computation_graphs.ipynb",
                                              as_version=4)).values())
    expected = [[cell.replace("{01_computation_graphs}", f"{possible_01:g}") for cell in row]
                for row in _rows(FIXTURES / "canvas_expected.csv")]
    assert _rows(out) == expected
    rows = _dicts(grades)
    assert {r["path"] for r in rows if r["learner"] == "babbagecharles_102"} == {str(newer), ""}
    assert len({r["path"] for r in rows if r["path"]}) == 4, "one notebook per student, lesson"
    missing = {(r["learner"], r["notebook"]) for r in rows if r["status"] == "missing"}
    assert missing == {("babbagecharles_102", "01_computation_graphs.ipynb"),
                       ("hoppergrace", "00_setup.ipynb"),
                       ("hoppergrace", "01_computation_graphs.ipynb")}, missing

    # An interrupted run: the progress file holds what was done; --resume grades the rest only.
    progress = tmp_path / "grades.progress.jsonl"
    lines = progress.read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)["sha256"] for line in lines)
    kept = [line for line in lines if "turingalan" not in line]
    progress.write_text("\n".join(kept) + "\n" + kept[-1][:40])  # and a line cut short
    # Meanwhile the instructor gives Grace a point for 00.3, handed in on paper (an overrides
    # file beside the CSV), and Ada's 00.1 one point less, in the CSV itself.
    (tmp_path / "grades.overrides.csv").write_text("exercise,learner,points,why\n"
                                                   "00.3,103,1,on paper\n")
    text = grades.read_text(encoding="utf-8").splitlines()
    k = next(i for i, line in enumerate(text) if line.startswith("lovelaceada_101,00_setup.ipynb,"
                                                                  "00.1,2,"))
    text[k] = text[k].replace(",00.1,2,", ",00.1,1,", 1)
    grades.write_text("\n".join(text) + "\n", encoding="utf-8")
    again = _grade(str(subs), *options, "--resume")
    assert "resuming: 3 of 4 notebook(s) already graded" in again.stderr, again.stderr
    graded = [line for line in again.stderr.splitlines() if line.startswith("grading ")]
    assert len(graded) == 1 and "turingalan" in graded[0], again.stderr
    expected[2][5] = "4"  # Ada: 5 - 1
    expected[4][5] = "1"  # Grace: the point on paper
    assert _rows(out) == expected
    after = {(r["learner"], r["exercise"]): r for r in _dicts(grades)}
    assert after[("lovelaceada_101", "00.1")]["points"] == "1"
    assert "edited by hand" in after[("lovelaceada_101", "00.1")]["notes"]
    assert len(after) == len(rows)


# --- who is who: the LMS user id, the roster's folder or file, missing work, Canvas' columns -----


def _class_run(folder: Path, roster: list | None = None, **options) -> classroom.ClassRun:
    """The class run course-grade would make of ``folder`` (nothing graded)."""
    from course_utils.grading.grade import collect

    todo = collect([folder], ROOT / "solutions")
    return classroom.ClassRun(todo, ROOT / "solutions", roster=roster, folders=[folder],
                              warn=lambda text: None, **options)


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((ROOT / "exercises" / "00_setup.ipynb").read_bytes())
    return path


def _roster(tmp_path: Path, text: str) -> list:
    (tmp_path / "roster.csv").write_text(text, encoding="utf-8")
    return read_roster(tmp_path / "roster.csv")


def test_a_roster_folder_names_the_learners_file_or_folder(tmp_path):
    subs = tmp_path / "subs"
    _touch(subs / "ola.ipynb")
    _touch(subs / "kari" / "00_setup.ipynb")
    roster = _roster(tmp_path, "student_id,name,folder\n1,Ola,ola.ipynb\n2,Kari,kari/\n")
    run = _class_run(subs, roster)
    assert {learner: s.student_id for learner, s in run.student_of.items()} == \
        {"ola": "1", "kari": "2"}


def test_canvas_files_are_grouped_by_user_id_not_by_name(tmp_path):
    download = tmp_path / "download"
    first = _touch(download / "smithjohn_201_9001_00_setup.ipynb")
    second = _touch(download / "smithjohn_202_9002_00_setup.ipynb")  # another John Smith
    run = _class_run(download)
    assert sorted((str(p), learner) for p, learner, _ in run.todo) == \
        [(str(first), "smithjohn_201"), (str(second), "smithjohn_202")]
    roster = _roster(tmp_path, "Student,ID,SIS User ID,SIS Login ID,Section\n"
                     "\"Smith, John\",201,,,\n\"Smith, John\",202,,,\n")
    run = _class_run(download, roster)
    assert {learner: s.student_id for learner, s in run.student_of.items()} == \
        {"smithjohn_201": "201", "smithjohn_202": "202"}


def test_canvas_names_are_read_only_in_a_canvas_download_folder(tmp_path):
    subs = tmp_path / "subs"
    planted = _touch(subs / "ada" / "lovelaceada_103_99999_00_setup.ipynb")
    _touch(subs / "grace" / "00_setup.ipynb")
    run = _class_run(subs)
    assert planted not in run.canvas
    assert {learner for _, learner, _ in run.todo} == {"ada", "grace"}
    mixed = tmp_path / "mixed"  # a Canvas-shaped name beside other files: not a download ...
    odd = _touch(mixed / "lovelaceada_103_99999_00_setup.ipynb")
    _touch(mixed / "grace.ipynb")
    assert odd not in _class_run(mixed).canvas
    run = _class_run(mixed, canvas_download=True)  # ... unless the instructor says it is one
    assert run.canvas[odd].user_id == "103"


def test_a_notebook_of_a_learner_off_the_roster_is_an_error_naming_it(tmp_path):
    subs = tmp_path / "subs"
    _touch(subs / "ola.ipynb")
    stranger = _touch(subs / "mallory.ipynb")
    roster = _roster(tmp_path, "student_id,folder\n1,ola\n")
    with pytest.raises(ValueError, match=f"not on the roster: mallory \\({stranger}\\)"):
        _class_run(subs, roster)
    run = _class_run(subs, roster, off_roster=True)
    assert "mallory" not in run.student_of
    # From the command line: exit 2 before anything is graded, the file named.
    done = _grade(str(subs), "--roster", str(tmp_path / "roster.csv"), "--canvas",
                  str(tmp_path / "canvas.csv"))
    assert done.returncode == 2 and str(stranger) in done.stderr, done.stderr
    assert "grading " not in done.stderr


def _report(learner: str, lesson: str, points: float) -> classroom.NotebookReport:
    possible = exercises(nbformat.read(ROOT / "solutions" / f"{lesson}.ipynb", as_version=4))
    first = next(iter(possible))
    return classroom.NotebookReport(f"subs/{learner}.ipynb", learner, f"{lesson}.ipynb", [
        classroom.ExerciseResult(ex, points if ex == first else 0, p, "fail")
        for ex, p in possible.items()])


def test_a_roster_student_with_nothing_handed_in_is_missing_not_zero(tmp_path):
    subs = tmp_path / "subs"
    _touch(subs / "ola.ipynb")
    _touch(subs / "kari.ipynb")
    roster = _roster(tmp_path, "student_id,name,folder\n1,Ola,ola\n2,Kari,kari\n3,Per,per\n")
    run = _class_run(subs, roster)
    reports = [_report("ola", "00_setup", 2), _report("kari", "00_setup", 0)]
    missing = run.missing(reports, ["00_setup"])
    assert [(r.learner, {e.status for e in r.exercises}) for r in missing] == \
        [("per", {"missing"})]
    rows = run.write_canvas(reports + missing, {"00_setup": 5}, tmp_path / "canvas.csv")
    assert [row[1:2] + row[5:] for row in rows[2:]] == [["1", "2"], ["2", "0"], ["3", "missing"]]
    run.missing_value = ""
    assert run.write_canvas(reports + missing, {"00_setup": 5})[4][5] == ""


def test_canvas_columns_come_from_a_mapping_or_the_exported_gradebook(tmp_path):
    lessons = ["00_setup", "01_computation_graphs", "02_static_graphs"]
    mapping = tmp_path / "columns.csv"
    mapping.write_text("lesson,assignment\n00,Set-up (4700)\n"
                       "01_computation_graphs.ipynb,\"Graphs, week 1 (4711)\"\n")
    assert classroom.read_columns(mapping, lessons, strict=False) == {
        "00_setup": "Set-up (4700)", "01_computation_graphs": "Graphs, week 1 (4711)"}
    with pytest.raises(ValueError, match="no Canvas assignment for 02_static_graphs"):
        classroom.read_columns(mapping, lessons)
    mapping.write_text("lesson,assignment\n01,Graphs week 1\n")
    with pytest.raises(ValueError, match="line 2: 'Graphs week 1' is not a Canvas assignment"):
        classroom.read_columns(mapping, lessons)
    export = tmp_path / "export.csv"
    export.write_text("Student,ID,SIS User ID,SIS Login ID,Section,Lesson 0: set-up (4700),"
                      "Lesson 1 - graphs (4711),Quiz 12 (4799),Current Score\n"
                      "    Points Possible,,,,,5,20,10,\n")
    assert classroom.read_columns(export, lessons, strict=False) == {
        "00_setup": "Lesson 0: set-up (4700)", "01_computation_graphs": "Lesson 1 - graphs (4711)"}
    subs = tmp_path / "subs"
    _touch(subs / "ola.ipynb")
    run = _class_run(subs, _roster(tmp_path, "student_id,folder\n1,ola\n"),
                     columns=classroom.read_columns(export, lessons, strict=False))
    rows = run.write_canvas([_report("ola", "00_setup", 2)], {"00_setup": 5})
    assert rows[0][5:] == ["Lesson 0: set-up (4700)"] and rows[2][5:] == ["2"]


# --- collecting from homes, late work, overrides ---------------------------------------------

COLLECT = ROOT / "deploy" / "hub" / "collect.sh"
WHEN = 1_800_000_000  # 2027-01-15T08:00:00Z, the time Ada last saved her notebook


def _home(homes: Path, learner: str) -> Path:
    exercises_folder = homes / learner / "graph-course" / "exercises"
    exercises_folder.mkdir(parents=True)
    return exercises_folder


def test_collect_records_each_files_time_and_follows_no_link_at_any_depth(tmp_path):
    homes, solutions = tmp_path / "home", tmp_path / "instructor" / "solutions"
    solutions.mkdir(parents=True)
    (solutions / "00_setup.ipynb").write_text("the instructor's solutions")
    ada = _touch(_home(homes, "ada") / "00_setup.ipynb")
    os.utime(ada, (WHEN, WHEN))
    (homes / "grace").mkdir()
    (homes / "grace" / "graph-course").mkdir()
    (homes / "grace" / "graph-course" / "exercises").symlink_to(ada.parent)  # Ada's work
    (homes / "bob").mkdir()
    (homes / "bob" / "graph-course").symlink_to(solutions.parent)  # no exercises/ there ...
    (solutions.parent / "exercises").symlink_to(solutions)  # ... but a link to solutions/
    (_home(homes, "carl") / "00_setup.ipynb").symlink_to(ada)
    (homes / "dave").symlink_to(homes / "ada")
    _home(homes, "erin")  # has not started lesson 00: nothing to collect, nothing to say
    out = tmp_path / "class-00"
    done = subprocess.run([str(COLLECT), str(homes), "00_setup", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "collected 1 notebook(s) of 00_setup" in done.stdout, done.stdout
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.ipynb")) == \
        ["ada/00_setup.ipynb"]
    for learner in ("grace", "bob", "carl", "dave"):
        assert f"warning: {learner}: " in done.stderr and "link" in done.stderr, done.stderr
    assert "erin" not in done.stderr
    assert (out / "ada" / "00_setup.ipynb").read_bytes() == ada.read_bytes()
    assert (out / "ada" / "00_setup.ipynb").stat().st_mtime == WHEN
    with open(out / "manifest.tsv", newline="", encoding="utf-8") as f:
        [row] = list(csv.DictReader(f, delimiter="\t"))
    assert row["learner"] == "ada" and row["file"] == "ada/00_setup.ipynb"
    assert row["modified"] == "2027-01-15T08:00:00+00:00"
    assert row["sha256"] == hashlib.sha256(ada.read_bytes()).hexdigest()


def test_late_work_by_the_collected_time_or_canvas_late_tag(tmp_path):
    homes, out = tmp_path / "home", tmp_path / "class-00"
    for learner, when in (("ada", WHEN), ("grace", WHEN + 5400)):
        os.utime(_touch(_home(homes, learner) / "00_setup.ipynb"), (when, when))
    subprocess.run([str(COLLECT), str(homes), "00_setup", str(out)], check=True,
                   capture_output=True)
    os.utime(out / "grace" / "00_setup.ipynb", (WHEN, WHEN))  # a copy's time is not the one
    deadline = classroom.parse_deadline("2027-01-15T09:00:00+01:00")  # 08:00 UTC
    run = _class_run(out, deadline=deadline)
    late = {learner: run.late[path] for path, learner, _ in run.todo}
    assert late == {"ada": "", "grace": "late (1.5 h after the deadline)"}, late
    assert _class_run(out).late == {}, "no deadline, no late column"
    download = tmp_path / "download"
    _touch(download / "hoppergrace_LATE_103_77_00_setup.ipynb")
    _touch(download / "lovelaceada_101_78_00_setup.ipynb")
    run = _class_run(download, deadline=deadline)
    assert sorted(run.late.values()) == ["", "late (Canvas)"]


def test_overrides_and_hand_edits_reach_every_export_and_survive_resume(tmp_path):
    subs = tmp_path / "subs"
    for learner in ("ola", "kari"):
        _touch(subs / f"{learner}.ipynb")
    roster = _roster(tmp_path, "student_id,name,folder\n1,Ola,ola\n2,Kari,kari\n3,Per,per\n")
    grades, canvas = tmp_path / "grades.csv", tmp_path / "canvas.csv"
    overrides = tmp_path / "grades.overrides.csv"
    overrides.write_text("exercise,learner,points,why\n00.3,3,1,handed in on paper\n")
    run = _class_run(subs, roster, csv_out=grades, canvas_out=canvas, overrides=overrides)
    reports = [_report("ola", "00_setup", 2), _report("kari", "00_setup", 1)]
    for report in reports:  # as grading goes
        item = next(item for item in run.todo if item[1] == report.learner)
        report.path = str(item[0])
        run.wrap(lambda _, r=report: r)(item)
    everything = reports + run.missing(reports, ["00_setup"])
    run.write_grades(everything)
    rows = {(r["learner"], r["exercise"]): r for r in _dicts(grades)}
    assert rows[("per", "00.3")]["points"] == "1" and "on paper" in rows[("per", "00.3")]["notes"]
    assert rows[("per", "00.1")]["status"] == "missing"
    # The instructor edits Kari's 00.1 in the CSV, then the run is resumed.
    text = grades.read_text().splitlines()
    k = next(i for i, line in enumerate(text) if line.startswith("kari,00_setup.ipynb,00.1,1,"))
    text[k] = text[k].replace("00.1,1,", "00.1,2,", 1)
    grades.write_text("\n".join(text) + "\n")
    again = _class_run(subs, roster, csv_out=grades, canvas_out=canvas, overrides=overrides,
                       resume=True)
    assert again.resumed() == 2
    assert [(o.exercise, o.learner, o.points) for o in read_overrides(overrides)] == \
        [("00.3", "3", 1.0), ("00.1", "kari", 2.0)]
    again.write_grades([again.done[again._key(item)] for item in again.todo] +
                       again.missing(reports, ["00_setup"]))
    rows = {(r["learner"], r["exercise"]): r for r in _dicts(grades)}
    assert rows[("kari", "00.1")]["points"] == "2" and rows[("per", "00.3")]["points"] == "1"
    csv_rows = again.write_canvas(everything, {"00_setup": 5})
    assert [row[1:2] + row[5:] for row in csv_rows[2:]] == [["1", "2"], ["2", "2"], ["3", "1"]]
