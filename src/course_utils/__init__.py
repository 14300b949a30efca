"""course_utils: the Python side of the computation-graph course.

Subpackages and modules:

- ``course_utils.minigraph``: the small graph framework the lessons build.
- ``course_utils.data``: the seeded spiral data set and MLP initial weights every lesson shares.
- ``course_utils.devices``: versions, CPU/GPU discovery and the environment report.
- ``course_utils.viz``: draw any framework's graph in one visual style.
- ``course_utils.bench``: honest timing (warm-up, repeats, medians, ratios).
- ``course_utils.serving``: a model server on loopback with dynamic batching, and load tests.
- ``course_utils.grading``: build exercises from solutions and grade them with nbval.
"""

__version__ = "0.1.0"
