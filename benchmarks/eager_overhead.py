"""Eager per-op cost, forward plus backward, on tiny tensors: minigraph against PyTorch.

    python benchmarks/eager_overhead.py      # about 20 s on 2 CPU cores

The workload is 50 blocks of ``h = tanh(h * w + b)`` on 16 float32 numbers, where w and b require
grad (150 ops), then ``h.sum().backward()``: what an RNN-like model does per step, with every op
recorded on the tape and every vjp run. On tensors this small the arithmetic is nothing, so the
time is the framework's own: dispatch, shape checks, the tape, the backward walk. Timed side by
side in interleaved rounds; the figure is time per op (forward + backward), and its ratio.

Target (issue 6): minigraph eager <= 1.0x PyTorch eager.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import course_utils.minigraph as mg
from course_utils import bench

BLOCKS, SIZE = 50, 16
OPS = 3 * BLOCKS + 1  # mul, add, tanh per block, and the final sum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=25)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    x, w, b = (rng.normal(size=SIZE).astype(np.float32) for _ in range(3))

    def minigraph_step() -> np.ndarray:
        mw, mb = mg.tensor(w, requires_grad=True), mg.tensor(b, requires_grad=True)
        h = mg.tensor(x)
        for _ in range(BLOCKS):
            h = mg.tanh(h * mw + mb)
        h.sum().backward()
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
    result = bench.compare({"PyTorch eager": torch_step, "minigraph eager": minigraph_step},
                           repeats=args.repeats, progress=False)
    print(f"{OPS} ops forward + backward on {SIZE} float32 numbers, per step:\n")
    print(result)
    ratio = result.ratios["minigraph eager"].median
    per_op = {name: t.median / OPS for name, t in result.timings.items()}
    print("\nper op (forward + backward): "
          + ", ".join(f"{n} {bench.format_time(s)}" for n, s in per_op.items()))
    print(f"minigraph eager {ratio:.2f}x PyTorch eager  (target <= 1.0x: "
          f"{'met' if ratio <= 1.0 else 'MISSED'})")


if __name__ == "__main__":
    main()
