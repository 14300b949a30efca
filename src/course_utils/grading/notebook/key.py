"""The answer key: the expected values of every check, kept by the instructor, never shipped.

For each solutions notebook, the key holds

- for each probe-and-verdict check with a ``### REFERENCE`` section (``verdict.py``), the values
  that section reported when the solutions notebook ran top to bottom in a clean kernel given
  the grading run's seed. The probe's inputs are built in each kernel from that seed
  (``probe.run_rng``), so the learner's kernel and the solution's see equal inputs, and nothing
  a submission does to its own inputs or generators changes the key;
- the literals of the solution cells (the right predictions), read with ``ast``.

It is built once per version of the solutions (a hash of the notebook's bytes, the package's
version and its sources) and seed: by ``course-grade`` for the seed it drew for its run (one
run of a class: one key per lesson), or by ``course-build-exercises`` for ``DEFAULT_SEED`` (a
check that the solutions pass their own checks), and cached in
``<course>/.answer-key/<NN_topic>.seed-<seed>.json`` (the newest ``KEEP`` per notebook;
git-ignored; not in ``exercises/``, not in a release; hidden from the sandboxed kernel; kept as
bytes by the grader's course guard without the sandbox). The grader reads it before any
submission runs. A release has no key: a learner grading their own work there gets expected
values worked out in their own kernel, with the same seed, and their predictions are
``recorded`` for the instructor.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import secrets
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

import course_utils
from course_utils.grading import verdict as verdicts
from course_utils.grading.checks import literal_assignments
from course_utils.grading.format import is_solution
from course_utils.grading.probe import DEFAULT_SEED

KEY_FOLDER = ".answer-key"
FORMAT = 2
#: Keys kept per solutions notebook in the cache (the newest; one per grading run's seed).
KEEP = 12
_PACKAGE = Path(course_utils.__file__).resolve().parent
_LOCK = threading.Lock()


class KeyError_(RuntimeError):  # noqa: N801 (not the builtin KeyError)
    """The key could not be built: a solutions notebook fails its own checks, or will not run."""


@dataclass
class AnswerKey:
    notebook: str
    fingerprint: str
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)  # cell id -> fields
    literals: dict[str, Any] = field(default_factory=dict)  # prediction name -> right value
    seed: int = DEFAULT_SEED  # the run's seed the references were worked out with

    def to_json(self) -> str:
        from course_utils.grading.probe import encode

        return json.dumps({
            "format": FORMAT, "notebook": self.notebook, "fingerprint": self.fingerprint,
            "seed": self.seed, "checks": {k: {n: encode(v) for n, v in fields.items()}
                       for k, fields in sorted(self.checks.items())},
            "literals": {n: encode(v) for n, v in sorted(self.literals.items())},
        }, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AnswerKey:
        raw = json.loads(text)
        if raw.get("format") != FORMAT:
            raise ValueError("an answer key of another format")
        return cls(raw["notebook"], raw["fingerprint"],
                   {k: verdicts.decode_fields(v) for k, v in raw["checks"].items()},
                   verdicts.decode_fields(raw["literals"]), int(raw["seed"]))


def draw_seed() -> int:
    """A grading run's seed: 63 random bits from ``secrets`` (a learner cannot know or choose
    it before the grading; ``course-grade --seed N`` gives one to repeat a grading)."""
    return secrets.randbits(63)


def folder(solutions: Path) -> Path:
    """Where the keys of the notebooks in ``solutions`` live: ``<course>/.answer-key``."""
    return Path(solutions).resolve().parent / KEY_FOLDER


def fingerprint(data: bytes) -> str:
    """The version of a solutions notebook (its bytes) together with the package's."""
    digest = hashlib.sha256(data)
    digest.update(course_utils.__version__.encode())
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


def literals(nb: NotebookNode) -> dict[str, Any]:
    """The literal values assigned in the solution cells (the right predictions)."""
    found: dict[str, Any] = {}
    for cell in nb.cells:
        if is_solution(cell):
            for name, node in literal_assignments(str(cell.source)).items():
                try:
                    found[name] = ast.literal_eval(node)
                except (ValueError, TypeError, SyntaxError):
                    continue
    return found


def needs_kernel(nb: NotebookNode) -> bool:
    """True when some check's expected values come from running the solutions."""
    return any(spec.reference for spec in verdicts.specs(nb.cells).values())


def uses_key(nb: NotebookNode) -> bool:
    """True when some check of ``nb`` is graded with a key (probe-and-verdict checks)."""
    return bool(verdicts.specs(nb.cells))


def build(path: Path, data: bytes | None = None, timeout: float = 120.0,
          seed: int = DEFAULT_SEED, env: Mapping[str, str] | None = None) -> AnswerKey:
    """Run the solutions notebook at ``path`` in a clean kernel given ``seed`` (the grading
    run's) and collect its key. Raises ``KeyError_`` naming the cell (and the seed) when the
    solutions fail one of their own checks. ``env``: the kernel's variables (threads, device)."""
    from course_utils.grading.notebook.run import code_cells, run_notebook

    data = path.read_bytes() if data is None else data
    nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    key = AnswerKey(path.name, fingerprint(data), {}, literals(nb), int(seed))
    specs = verdicts.specs(nb.cells)
    if not needs_kernel(nb):
        return key
    results, _ = run_notebook(nb, timeout, path.name, probe=False, specs=specs, key=key,
                              references=True, seed=int(seed), env=env)
    problems = []
    for cell, result in zip(code_cells(nb), results, strict=True):
        spec = specs.get(str(cell.get("id", "")))
        if spec is None:
            continue
        if result.outcome != "passed":
            problems.append(f"{path}: check cell {spec.cell_id!r} does not pass with the "
                            f"solutions, seed {seed} ({result.outcome}): "
                            f"{result.summary or result.message}")
        elif spec.reference:
            key.checks[spec.cell_id] = dict(result.reference or {})
    if problems:
        raise KeyError_("\n".join(problems))
    return key


def cache_path(path: Path, solutions: Path | None = None, seed: int = DEFAULT_SEED) -> Path:
    """Where the key of the solutions notebook at ``path`` for ``seed`` is cached."""
    return folder(solutions or path.parent) / f"{path.stem}.seed-{int(seed)}.json"


def load(path: Path, solutions: Path | None = None, *, data: bytes | None = None,
         create: bool = True, timeout: float = 120.0, seed: int = DEFAULT_SEED,
         env: Mapping[str, str] | None = None) -> AnswerKey | None:
    """The key of the solutions notebook at ``path`` for ``seed``: from the cache when it is
    the key of these bytes and that seed, else built (``create``) and cached; None when not
    cached and not ``create``."""
    data = path.read_bytes() if data is None else data
    stamp = fingerprint(data)
    cache = cache_path(path, solutions, seed)
    with _LOCK:
        try:
            found = AnswerKey.from_json(cache.read_text(encoding="utf-8"))
            if found.fingerprint == stamp and found.notebook == path.name \
                    and found.seed == int(seed):
                return found
        except (OSError, ValueError, KeyError, TypeError, verdicts.TransportError):
            pass
        if not create:
            return None
        key = build(path, data, timeout, seed, env)
        save(cache, key.to_json())
        _prune(cache.parent, path.stem)
        return key


def _prune(where: Path, stem: str) -> None:
    """Keep the ``KEEP`` newest cached keys of a notebook (each grading run adds one)."""
    found = []
    for p in where.glob(f"{stem}.seed-*.json"):
        with contextlib.suppress(OSError):
            found.append((p.stat().st_mtime_ns, p))
    for _, p in sorted(found, reverse=True)[KEEP:]:
        with contextlib.suppress(OSError):
            p.unlink()


def save(cache: Path, text: str) -> None:
    """Write a key file whole, safely beside other processes writing it at the same time (two
    graders, two test workers): each writes a temporary file of its own, then renames it over
    ``cache``, so a reader sees one whole key or the other, never a torn one."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    ignore = cache.parent / ".gitignore"
    if not ignore.exists():
        _replace(ignore, "*\n")
    _replace(cache, text)


def _replace(path: Path, text: str) -> None:
    # A name no other writer uses (not mkstemp: its files are private, a key was not).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
