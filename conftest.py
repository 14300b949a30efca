"""pytest set-up shared by the unit tests and the notebook runs (nbval)."""

import os

# TensorFlow logs its C++ start-up to stderr; warnings and errors still show.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_collection_modifyitems(session, config, items):
    """Leave stderr out of nbval's output comparison, on purpose.

    TensorFlow and TorchScript write deprecation notices and log lines to stderr whose text changes
    between versions and runs; the lessons' results are on stdout and in displayed values, which
    are still compared. A learner still sees stderr in JupyterLab.
    """
    for item in items:
        parent = getattr(item, "parent", None)
        skip = getattr(parent, "skip_compare", None)
        if skip is not None and "stderr" not in skip:
            parent.skip_compare = (*skip, "stderr")
