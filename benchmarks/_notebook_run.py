"""Run a lesson notebook top to bottom in a fresh kernel: the part lesson_times.py and
verdict_stability.py share.

:func:`run_notebook` reads the notebook, executes it with nbclient in a new ``python3`` kernel
whose working folder is the notebook's own (as Jupyter runs it), and returns the executed copy:
nothing is written back to the file. With ``empty_caches=True`` the compiler caches start empty
(:func:`empty_compiler_caches`), as on a learner's first run; ``cell_times`` collects how long
each code cell took.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
from nbclient import NotebookClient

#: Environment variable -> the subfolder of the temporary folder it points to: TorchInductor's and
#: Triton's caches, XLA's persistent compilation cache. (Not PYTHONPYCACHEPREFIX: it would send
#: every module's bytecode to an empty folder, so TensorFlow and PyTorch would be compiled from
#: source on import, which no learner's first run does: pip writes their bytecode at install.)
CACHE_VARIABLES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton",
                   "JAX_COMPILATION_CACHE_DIR": "jax"}


@contextlib.contextmanager
def empty_compiler_caches() -> Iterator[str]:
    """Point the compiler caches at empty folders of a new temporary folder for the block (a
    kernel started inside it inherits them), then put the environment back and delete the
    folder. Yields the folder."""
    with tempfile.TemporaryDirectory(prefix="lesson-times-") as cache:
        env = {k: f"{cache}/{sub}" for k, sub in CACHE_VARIABLES.items()}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield cache
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def run_notebook(path: Path, timeout: int, *, empty_caches: bool = False,
                 cell_times: dict[int, float] | None = None
                 ) -> tuple[nbformat.NotebookNode, float]:
    """Execute the notebook at ``path`` in a fresh kernel: (the executed notebook, wall seconds
    of the execution, kernel start included).

    ``timeout`` is the per-cell limit in seconds. ``empty_caches``: run inside
    :func:`empty_compiler_caches`. ``cell_times``: a dict that receives, for each cell index the
    client executed, its seconds (an error in a cell still records it).
    """
    nb = nbformat.read(path, as_version=4)
    with empty_compiler_caches() if empty_caches else contextlib.nullcontext():
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        if cell_times is not None:
            original = client.async_execute_cell

            async def timed(cell, cell_index, *args, **kwargs):
                start = time.perf_counter()
                try:
                    return await original(cell, cell_index, *args, **kwargs)
                finally:
                    cell_times[cell_index] = time.perf_counter() - start

            client.async_execute_cell = timed
        start = time.perf_counter()
        client.execute()
        wall = time.perf_counter() - start
    return nb, wall
