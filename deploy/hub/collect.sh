#!/usr/bin/env bash
# Collect one lesson's exercise notebook from every learner's home into a class folder that
# course-grade grades (README, "Teaching a class"):
#
#   deploy/hub/collect.sh /home 01_computation_graphs class-01
#
# copies /home/<learner>/graph-course/exercises/01_computation_graphs.ipynb to
# class-01/<learner>/01_computation_graphs.ipynb, with the learner's file's modification time,
# and records each file in class-01/manifest.tsv (learner, file, modified as ISO 8601 UTC, bytes,
# sha256), which course-grade --deadline reads. COURSE_FOLDER names the folder the class's
# nbgitpuller link pulls into (default graph-course); PYTHON, the Python that copies (default
# python3).
#
# No symbolic link is followed, at any depth: a learner whose home, graph-course/, exercises/ or
# notebook is a link (to a classmate's folder, to the instructor's solutions/) gets nothing
# collected and a warning. Each step opens the next name with O_NOFOLLOW below the folder
# already opened, so a link swapped in while collecting is not followed either.
set -euo pipefail
if [ $# -ne 3 ]; then
    echo "usage: $0 HOMES LESSON OUT   (e.g. $0 /home 01_computation_graphs class-01)" >&2
    exit 2
fi
exec "${PYTHON:-python3}" - "$1" "${2%.ipynb}" "$3" "${COURSE_FOLDER:-graph-course}" <<'EOF'
import contextlib, csv, errno, hashlib, os, stat, sys
from datetime import datetime, timezone

homes, lesson, out, course = sys.argv[1:5]
MAX_BYTES = 64 * 2**20  # course-grade reads no larger notebook
DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
steps = [course, "exercises", lesson + ".ipynb"]


def warn(text):
    print(f"warning: {text}", file=sys.stderr)


def fetch(homes_fd, learner):
    """(bytes, stat) of the learner's notebook, reached without following a link; None."""
    fds = []
    try:
        fd = os.open(learner, DIR, dir_fd=homes_fd)
        fds.append(fd)
        for k, name in enumerate(steps):
            last = k == len(steps) - 1
            fd = os.open(name, (os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK) if last else DIR,
                         dir_fd=fds[-1])
            fds.append(fd)
        info = os.fstat(fds[-1])
        if not stat.S_ISREG(info.st_mode):
            warn(f"{learner}: {'/'.join(steps)} is not a regular file: nothing collected")
            return None
        if info.st_size > MAX_BYTES:
            warn(f"{learner}: {'/'.join(steps)} has {info.st_size} bytes, more than "
                 f"course-grade reads ({MAX_BYTES}): nothing collected")
            return None
        with os.fdopen(os.dup(fds[-1]), "rb") as f:
            return f.read(MAX_BYTES + 1), info
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW met a link (or a file)
            where = "/".join([learner, *steps][:len(fds) + 1])
            warn(f"{learner}: {where} is a symbolic link or not a folder: nothing collected "
                 "(links are never followed)")
        elif e.errno != errno.ENOENT:  # no copy of the course (yet): nothing to say
            warn(f"{learner}: cannot read {'/'.join(steps)}: {e.strerror}")
        return None
    finally:
        for fd in fds:
            os.close(fd)


os.makedirs(out, exist_ok=True)
manifest = os.path.join(out, "manifest.tsv")
rows = {}
with contextlib.suppress(FileNotFoundError), open(manifest, newline="", encoding="utf-8") as f:
    rows = {row["file"]: row for row in csv.DictReader(f, delimiter="\t")}
homes_fd = os.open(homes, os.O_RDONLY | os.O_DIRECTORY)
n = 0
for learner in sorted(os.listdir(homes_fd)):
    if learner.startswith(".") or any(c in learner for c in "\t\n\r"):
        continue
    try:
        kind = os.stat(learner, dir_fd=homes_fd, follow_symlinks=False).st_mode
    except OSError:
        continue
    if stat.S_ISLNK(kind):
        warn(f"{learner}: the home folder is a symbolic link: nothing collected")
        continue
    if not stat.S_ISDIR(kind):
        continue
    found = fetch(homes_fd, learner)
    if found is None:
        continue
    data, info = found
    folder = os.path.join(out, learner)
    os.makedirs(folder, exist_ok=True)
    target = os.path.join(folder, lesson + ".ipynb")
    with open(target + ".tmp", "wb") as f:
        f.write(data)
    os.utime(target + ".tmp", ns=(info.st_mtime_ns, info.st_mtime_ns))
    os.replace(target + ".tmp", target)
    modified = datetime.fromtimestamp(info.st_mtime_ns / 1e9, timezone.utc)
    name = f"{learner}/{lesson}.ipynb"
    rows[name] = {"learner": learner, "file": name,
                  "modified": modified.isoformat(timespec="seconds"), "bytes": str(len(data)),
                  "sha256": hashlib.sha256(data).hexdigest()}
    n += 1
os.close(homes_fd)
with open(manifest + ".tmp", "w", newline="", encoding="utf-8") as f:
    writer = csv.DictWriter(f, ["learner", "file", "modified", "bytes", "sha256"],
                            delimiter="\t", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows[k] for k in sorted(rows))
os.replace(manifest + ".tmp", manifest)
print(f"collected {n} notebook(s) of {lesson} into {out} (times in {manifest})")
EOF
