"""`make lab`, the README's "start the course" command, serves the course."""

import pytest
from lab_server import running_lab


@pytest.mark.slow
def test_make_lab_serves_the_course():
    # The kernel install lock, held while the kernelspecs are read: another `make lab` (the
    # browser test's, in the other pytest worker) would reinstall graph-course meanwhile.
    with running_lab(hold_kernel_lock=True) as lab:
        listing = lab.get_json("api/contents/notebooks")
        names = {item["name"] for item in listing["content"]}
        assert "00_setup.ipynb" in names, f"the server does not serve the lessons: {names}"
        specs = lab.get_json("api/kernelspecs")["kernelspecs"]
        displays = {name: spec["spec"]["display_name"] for name, spec in specs.items()}
        assert displays.get("graph-course") == "Python 3 (graph course)", displays
