"""`make lab`, the README's "start the course" command, serves the course."""

import pytest
from lab_server import running_lab


@pytest.mark.slow
def test_make_lab_serves_the_course():
    with running_lab() as lab:
        listing = lab.get_json("api/contents/notebooks")
        names = {item["name"] for item in listing["content"]}
        assert "00_setup.ipynb" in names, f"the server does not serve the lessons: {names}"
        specs = lab.get_json("api/kernelspecs")["kernelspecs"]
        displays = {name: spec["spec"]["display_name"] for name, spec in specs.items()}
        assert displays.get("graph-course") == "Python 3 (graph course)", displays
