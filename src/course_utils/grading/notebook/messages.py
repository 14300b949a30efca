"""The message a learner reads for a cell that raised: whole, in one line, and where.

A kernel's error names the notebook's cells as ipykernel's files (``/tmp/ipykernel_7/123.py``,
``Cell In[4]``); these name them as the learner counts them (``code cell 3, line 2``, counting
the blank lines a cell starts with, which IPython drops before compiling), cut the stack frames
an error's message lists to the learner's cells (one line says how many others were left out),
and, for TensorFlow's "in user code:" errors, take the root cause as the summary rather than the
header. ``CellNames`` is what they need to know of the run: each cell's source, which cells are
checks, the labels, and which execution count ran which cell.

    explain(Reply("error", "ValueError", "bad shape"), CellNames({0: "f(1)"}))
    # ('ValueError: bad shape', 'ValueError: bad shape', '')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from course_utils.grading.running.kernel import Reply

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CELL_FRAME = re.compile(r"^Cell In\[(\d+)\], line (\d+)")
_CELL_FILE = re.compile(r'File "(?:[^"\n]*/)?ipykernel_\d+/(\d+)\.py", line (\d+)')
_SYNTAX_FILE = re.compile(r"\((\d+)\.py, line (\d+)\)")  # SyntaxError: ... (123.py, line 2)
#: A stack frame inside an error's message (TensorFlow prints the frames of "in user code" and of
#: where a tensor "was defined"): ``File "/path/x.py", line 3, in f``.
_FRAME_LINE = re.compile(r'^(\s*)File "[^"\n]*", line \d+')
#: Lines that head a framework's error message and say nothing themselves: the root cause is
#: further down (TensorFlow's tf.function errors, TorchScript's interpreter errors).
_HEADERS = re.compile(r"^(in user code:|The following operation failed in the TorchScript "
                      r"interpreter\.|Traceback of TorchScript.*:|Graph execution error:)$")
_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Interrupt|Unsupported)\b.*)$")


@dataclass
class CellNames:
    """What messages need to know of a run's cells."""

    sources: dict[int, str]  # cell index -> the source it last ran
    checks: set[int] = field(default_factory=set)  # the check cells' indices
    labels: list[str] = field(default_factory=list)  # how code cell i is named (else default)
    counts: dict[int, int] = field(default_factory=dict)  # execution count -> cell index

    def label(self, index: int) -> str:
        """How messages name a code cell: as the learner counts it in their own notebook."""
        return self.labels[index] if index < len(self.labels) else f"code cell {index + 1}"


def explain(reply: Reply, cells: CellNames) -> tuple[str, str, str]:
    """(the whole message, a one-line summary, the learner's line) for an error reply."""
    evalue = _name_cell_files(_learners_frames(reply.evalue.rstrip(), cells), cells)
    full = f"{reply.ename}: {evalue}" if evalue.strip() else reply.ename
    lines = [line for line in evalue.splitlines() if line.strip()]
    first = lines[0].strip() if lines else ""
    if _HEADERS.match(first):
        causes = [m.group(1).strip() for line in lines[1:] if (m := _ERROR_LINE.match(line))]
        # The root cause names its own error type; else say the outer one.
        summary = causes[-1] if causes else f"{reply.ename}: {lines[-1].strip()}"
    else:
        summary = f"{reply.ename}: {first}" if first else reply.ename
    return full, summary, _where(reply, cells)

def _name_cell_files(text: str, cells: CellNames) -> str:
    """``File "/tmp/ipykernel_7/123.py", line 4`` -> ``code cell 3, line 4``."""
    if "ipykernel_" not in text and ".py, line" not in text:
        return text
    names = _cell_file_names(cells.sources)

    def name(match: re.Match) -> str:
        index = names.get(match.group(1))
        if index is None:
            return match.group(0)
        line = int(match.group(2)) + _blank_lead(cells.sources[index])
        where = f"{cells.label(index)}, line {line}"
        return f"({where})" if match.group(0).startswith("(") else where

    return _SYNTAX_FILE.sub(name, _CELL_FILE.sub(name, text))

def _learners_frames(text: str, cells: CellNames) -> str:
    """The stack frames an error's message lists (TensorFlow lists the kernel's 20-odd
    frames of ipykernel and asyncio, and its own), cut to those in the learner's cells: each
    run of other frames (a check's cell, the kernel, a library; with its source line)
    becomes one line saying how many were left out."""
    if "File \"" not in text:
        return text
    names = _cell_file_names(cells.sources)
    lines, out = text.splitlines(), []
    dropped, indent, i = 0, "", 0
    while i < len(lines):
        frame = _FRAME_LINE.match(lines[i])
        cell = _CELL_FILE.search(lines[i]) if frame else None
        index = names.get(cell.group(1)) if cell else None
        if frame is None or (index is not None and index not in cells.checks):
            if dropped:
                out.append(f"{indent}({_left_out(dropped)})")
                dropped = 0
            out.append(lines[i])
            i += 1
            continue
        dropped, indent = dropped + 1, frame.group(1)
        i += 1
        following = lines[i] if i < len(lines) else ""
        if following.strip() and not _FRAME_LINE.match(following) and \
                len(following) - len(following.lstrip()) > len(indent):
            i += 1  # the frame's source line
    if dropped:
        out.append(f"{indent}({_left_out(dropped)})")
    return "\n".join(out)

def _where(reply: Reply, cells: CellNames) -> str:
    """The deepest traceback frame in a notebook cell: ``code cell 3, line 2: `...```."""
    frames = []
    for entry in reply.traceback:
        first = _ANSI.sub("", entry).lstrip().splitlines()[0] if entry.strip() else ""
        m = _CELL_FRAME.match(first)
        if m and int(m.group(1)) in cells.counts:
            index = cells.counts[int(m.group(1))]
            frames.append((index, int(m.group(2)) + _blank_lead(cells.sources.get(index, ""))))
    for m in _CELL_FILE.finditer(reply.evalue):  # frames inside a tf.function
        index = _cell_file_names(cells.sources).get(m.group(1))
        if index is not None:
            frames.append((index, int(m.group(2)) + _blank_lead(cells.sources[index])))
    # A check's own assertion needs no pointer: the message says it. Point at learner code.
    frames = [(i, n) for i, n in frames if i not in cells.checks]
    if not frames:
        return ""
    index, line = frames[-1]
    source = cells.sources.get(index, "").splitlines()
    text = source[line - 1].strip() if 0 < line <= len(source) else ""
    return f"{cells.label(index)}, line {line}" + (f": `{text}`" if text else "")


def _blank_lead(source: str) -> int:
    """How many blank lines start a cell. IPython drops them before it compiles the cell (its
    ``leading_empty_lines`` transform), so a traceback's ``line 2`` of a cell that starts with
    three blank lines is the learner's line 5."""
    lines = source.splitlines()
    for i, line in enumerate(lines):
        if line.strip():
            return i
    return 0


def _left_out(n: int) -> str:
    return f"{n} frame{'s' if n != 1 else ''} not in your code left out"


def _cell_file_names(cells: dict[int, str]) -> dict[str, int]:
    """ipykernel's file name for each cell source (``/tmp/ipykernel_<pid>/<hash>.py``)."""
    from ipykernel.compiler import get_tmp_hash_seed, murmur2_x86

    return {str(murmur2_x86(source, get_tmp_hash_seed())): index
            for index, source in cells.items()}
