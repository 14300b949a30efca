"""minigraph's convolution (im2col on numpy strides) against PyTorch's, on the CPU, and the digits
CNN trained in both.

    python benchmarks/conv.py                # about a minute on 2 CPU cores
    python benchmarks/conv.py --threads 0    # the libraries' own thread counts

Three parts, each timed side by side in interleaved rounds (medians, ratios with their 95%
intervals, from ``course_utils.bench``):

1. ``conv2d`` forward + backward on a batch of 64 digits (64 x 1 x 8 x 8, eight 3x3 filters,
   padding 1, bias), gradients for the weights, the bias and the images: minigraph eager and
   PyTorch eager. Target (issue 17): minigraph within 3x of PyTorch.
2. One SGD step of the whole digits CNN (``course_utils.models``, two conv layers, max-pools, a
   linear layer; batch 64, float32): PyTorch eager, minigraph eager, minigraph codegen.
3. Training: ``--train-steps`` steps of that CNN from the same weights on the same batches, in
   minigraph codegen and PyTorch eager, then the held-out accuracy of each.

Each framework gets ``--threads`` CPU threads (default 1: numpy's BLAS through threadpoolctl,
PyTorch's intra-op pool): a server runs one model per core, and one thread is steady on a shared
machine, where idle BLAS threads waiting for each other slow small products tenfold.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

import course_utils.minigraph as mg
from course_utils import bench, data, models

TARGET = 3.0


def conv_layer(repeats: int) -> None:
    rng = np.random.default_rng(0)
    x = data.load_digits().X_train[:64]
    w, b = models.init_cnn(dtype=np.float32)["conv1_w"], rng.normal(size=8).astype(np.float32)

    def minigraph_step() -> np.ndarray:
        mx = mg.tensor(x, requires_grad=True)
        mw, mb = mg.tensor(w, requires_grad=True), mg.tensor(b, requires_grad=True)
        mg.sum(mg.square(mg.conv2d(mx, mw, mb, padding=1))).backward()
        return mw.grad.numpy()

    def torch_step() -> np.ndarray:
        tx = torch.tensor(x, requires_grad=True)
        tw, tb = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
        torch.square(torch.nn.functional.conv2d(tx, tw, tb, padding=1)).sum().backward()
        return tw.grad.numpy()

    np.testing.assert_allclose(minigraph_step(), torch_step(), rtol=1e-4, atol=1e-3)
    result = bench.compare({"PyTorch eager": torch_step, "minigraph eager": minigraph_step},
                           repeats=repeats, progress=False)
    print("1. conv2d forward + backward, 64 x 1 x 8 x 8 images, 8 filters 3x3, padding 1:\n")
    print(result)
    ratio = result.ratios["minigraph eager"]
    print(f"\nminigraph conv2d {ratio.estimate:.2f}x PyTorch CPU (95% interval "
          f"{ratio.low:.2f}-{ratio.high:.2f}); target within {TARGET}x: "
          f"{bench.against_target(ratio, TARGET)}\n")


def cnn_step(repeats: int) -> None:
    digits = data.load_digits()
    x, y = digits.X_train[:64], digits.y_train[:64]
    trainers = {mode: models.trainer(mode, lr=0.1)
                for mode in ("PyTorch eager", "minigraph eager", "minigraph codegen")}
    result = bench.compare({mode: (lambda t=t: t.step(x, y)) for mode, t in trainers.items()},
                           repeats=repeats, progress=False)
    print("2. one SGD step of the digits CNN, batch 64, float32:\n")
    print(result)
    print()


def training(steps: int) -> None:
    digits = data.load_digits()
    print(f"3. {steps} SGD steps (batch 64, lr 0.1) from the same weights, held-out accuracy on "
          f"{len(digits.X_test)} images:\n")
    for mode in ("minigraph codegen", "PyTorch eager"):
        start = time.perf_counter()
        trainer, losses = models.train(mode, digits, steps=steps, lr=0.1)
        seconds = time.perf_counter() - start
        accuracy = models.accuracy(trainer.logits(digits.X_test), digits.y_test)
        print(f"  {mode:18} loss {np.mean(losses[:10]):.3f} -> {np.mean(losses[-10:]):.3f}, "
              f"held-out accuracy {accuracy:.3f}  ({seconds:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads per framework (0: the libraries' defaults)")
    parser.add_argument("--train-steps", type=int, default=300)
    args = parser.parse_args()
    limits = threadpool_limits(args.threads) if args.threads else contextlib.nullcontext()
    if args.threads:
        torch.set_num_threads(args.threads)
    with limits:
        print(f"threads per framework: {args.threads or 'library defaults'}\n")
        conv_layer(args.repeats)
        cnn_step(args.repeats)
        training(args.train_steps)


if __name__ == "__main__":
    main()
