"""Eager per-op cost, forward plus backward, on tiny tensors: minigraph against PyTorch.

    python benchmarks/eager_overhead.py      # about 30 s on 2 CPU cores

The workload is 50 blocks of ``h = tanh(h * w + b)`` on 16 float32 numbers, where w and b require
grad (150 ops), then ``h.sum().backward()``: what an RNN-like model does per step, with every op
recorded on the tape and every vjp run. On tensors this small the arithmetic is nothing, so the
time is the framework's own: dispatch, shape checks, the tape, the backward walk. Timed side by
side in interleaved rounds; the figure is the median time per step, per op, and its ratio.

A third row runs the same step with ``backward(create_graph=True)``, which records the backward
pass on the tape (what a second derivative needs): every vjp then goes through the full eager
dispatch. Plain ``backward()`` runs the same vjp rules on raw numpy arrays instead; the difference
between the two rows is what that saves.

Target (issue 17): minigraph eager <= 1.5x PyTorch eager. The verdict is printed from this run's
own numbers: met, missed, or undecided when the ratio's 95% interval straddles the target.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import course_utils.minigraph as mg
from course_utils import bench

BLOCKS, SIZE = 50, 16
OPS = 3 * BLOCKS + 1  # mul, add, tanh per block, and the final sum
TARGET = 1.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=25)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    x, w, b = (rng.normal(size=SIZE).astype(np.float32) for _ in range(3))

    def minigraph_step(create_graph: bool = False) -> np.ndarray:
        mw, mb = mg.tensor(w, requires_grad=True), mg.tensor(b, requires_grad=True)
        h = mg.tensor(x)
        for _ in range(BLOCKS):
            h = mg.tanh(h * mw + mb)
        h.sum().backward(create_graph=create_graph)
        return mw.grad.numpy()

    def torch_step() -> np.ndarray:
        tw = torch.tensor(w, requires_grad=True)
        tb = torch.tensor(b, requires_grad=True)
        h = torch.tensor(x)
        for _ in range(BLOCKS):
            h = torch.tanh(h * tw + tb)
        h.sum().backward()
        return tw.grad.numpy()

    np.testing.assert_allclose(minigraph_step(), torch_step(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(minigraph_step(True), minigraph_step(), rtol=1e-6)
    result = bench.compare({"PyTorch eager": torch_step, "minigraph eager": minigraph_step,
                            "minigraph, backward on the tape": lambda: minigraph_step(True)},
                           repeats=args.repeats, progress=False)
    print(f"{OPS} ops forward + backward on {SIZE} float32 numbers, per step:\n")
    print(result)
    per_op = {name: t.median / OPS for name, t in result.timings.items()}
    print("\nper op (forward + backward): "
          + ", ".join(f"{n} {bench.format_time(s)}" for n, s in per_op.items()))
    ratio = result.ratios["minigraph eager"]
    print(f"minigraph eager {ratio.estimate:.2f}x PyTorch eager (95% interval "
          f"{ratio.low:.2f}-{ratio.high:.2f}); target <= {TARGET}x: "
          f"{bench.against_target(ratio, TARGET)}")


if __name__ == "__main__":
    main()
