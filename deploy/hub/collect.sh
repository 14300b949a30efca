#!/usr/bin/env bash
# Collect one lesson's exercise notebook from every learner's home into a class folder that
# course-grade grades (README, "Teaching a class"):
#
#   deploy/hub/collect.sh /home 01_computation_graphs class-01
#
# copies /home/<learner>/graph-course/exercises/01_computation_graphs.ipynb to
# class-01/<learner>/01_computation_graphs.ipynb. COURSE_FOLDER names the folder the class's
# nbgitpuller link pulls into (default graph-course). Symbolic links are skipped: a learner's
# link could point at another learner's notebook.
set -euo pipefail
if [ $# -ne 3 ]; then
    echo "usage: $0 HOMES LESSON OUT   (e.g. $0 /home 01_computation_graphs class-01)" >&2
    exit 2
fi
homes=$1 lesson=${2%.ipynb} out=$3 course=${COURSE_FOLDER:-graph-course}
mkdir -p "$out"
n=0
for home in "$homes"/*/; do
    nb="$home$course/exercises/$lesson.ipynb"
    if [ -f "$nb" ] && [ ! -L "$nb" ]; then
        learner=$(basename "$home")
        mkdir -p "$out/$learner"
        cp -- "$nb" "$out/$learner/$lesson.ipynb"
        n=$((n + 1))
    fi
done
echo "collected $n notebook(s) of $lesson into $out"
