"""Run the course's PyTorch CUDA paths on a GPU and print what they did, as a markdown report.

    python benchmarks/gpu_check.py                                  # on a machine with a CUDA GPU
    python benchmarks/gpu_check.py --out benchmarks/results-gpu.md  # ... and keep the report
    python benchmarks/gpu_check.py --device cpu --backend eager --quick  # a dry run on the CPU

Needs only torch, numpy and ``course_utils`` (no TensorFlow, no Jupyter), so it runs on a bare GPU
machine with ``pip install -e .`` and a CUDA build of torch. It checks what the lessons can only
describe on a CPU-only machine:

1. device selection: ``devices.torch_device()``, ``COURSE_DEVICE=cpu``, the GPU's details;
2. the synchronised timer: a large matrix product timed without and with synchronisation (lesson
   10 §10), and ``bench``'s ``sync="auto"`` waiting for CUDA tensors;
3. eager vs ``torch.compile`` vs CUDA graphs (a captured ``torch.cuda.CUDAGraph``, and
   ``torch.compile(mode="reduce-overhead")``, which captures them for you) on lesson 10's tiny-ops
   chain, the course MLP's training step and the ResNet-style CNN: each checked against numpy, then
   timed in interleaved rounds with verdicts against eager;
4. ``torch.export`` on CUDA: the CNN exported with its input on the GPU, run, saved as ``.pt2``,
   loaded and run again.

Without a CUDA device, sections 3 and 4 say so and are skipped, unless ``--device cpu`` asks for a
dry run of the same code on the CPU (CUDA graphs still need CUDA); the test suite runs that.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from course_utils import bench, devices

HERE = Path(__file__).resolve().parent


def _frameworks():
    """benchmarks/frameworks.py as a module: the workloads and their numpy references."""
    spec = importlib.util.spec_from_file_location("course_frameworks_bench", HERE / "frameworks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


fw = _frameworks()


# ----------------------------------------------------------------------------- report


class Report:
    """Markdown, printed as it is written and kept for ``--out``."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        self("| " + " | ".join(header) + " |")
        self("|" + "---|" * len(header))
        for row in rows:
            self("| " + " | ".join(row) + " |")
        self()

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


# ----------------------------------------------------------------------------- captures


def cuda_graph(fn: Callable, example: tuple) -> Callable:
    """``fn`` captured as a CUDA graph (static shapes and buffers), replayed on every call.

    With inputs that require grad (a training step), ``torch.cuda.make_graphed_callables`` captures
    the forward and the backward as graphs behind one autograd node. Otherwise a plain
    ``torch.cuda.CUDAGraph``: warm up on a side stream, capture one call, and replay it after
    copying new inputs into the captured buffers (as lesson 10 §10 does).
    """
    if any(getattr(a, "requires_grad", False) for a in example):
        return torch.cuda.make_graphed_callables(fn, tuple(example))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # libraries set themselves up lazily: not inside the capture
        for _ in range(3):
            fn(*example)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fn(*example)

    def replay(*args):
        for arg, buffer in zip(args, example, strict=True):
            if arg.data_ptr() != buffer.data_ptr():
                buffer.copy_(arg)
        graph.replay()
        return static_out

    return replay


def captures(device: torch.device, backend: str) -> dict[str, Callable | str]:
    """Mode name -> ``capture(fn, example_args)``, or the reason the mode cannot run here."""
    cuda = device.type == "cuda"
    needs_cuda = "needs a CUDA device"
    return {
        "eager": lambda fn, example: fn,
        f"torch.compile ({backend})":
            lambda fn, example: torch.compile(fn, backend=backend, dynamic=False),
        "torch.compile (reduce-overhead)":
            (lambda fn, example: torch.compile(fn, mode="reduce-overhead", dynamic=False))
            if cuda else needs_cuda,
        "CUDA graph": cuda_graph if cuda else needs_cuda,
    }


# ----------------------------------------------------------------------------- sections


def section_devices(report: Report) -> torch.device:
    report("## 1. Device selection")
    report()
    chosen = devices.torch_device()
    saved = os.environ.get("COURSE_DEVICE")
    os.environ["COURSE_DEVICE"] = "cpu"
    try:
        forced = devices.torch_device()
    finally:
        if saved is None:
            del os.environ["COURSE_DEVICE"]
        else:
            os.environ["COURSE_DEVICE"] = saved
    rows = [["torch", torch.__version__], ["`devices.torch_device()`", str(chosen)],
            ["with `COURSE_DEVICE=cpu`", str(forced)]]
    details = devices.cuda_details()
    if details is None:
        rows.append(["CUDA", "no CUDA device: torch.cuda.is_available() is False"])
    else:
        rows += [[k, v] for k, v in details.items()]
    report.table(["what", "value"], rows)
    return chosen


def section_timer(report: Report, device: torch.device, quick: bool) -> None:
    report("## 2. The synchronised timer")
    report()
    n = 4096 if device.type == "cuda" else 512
    a = torch.randn(n, n, device=device)
    devices.synchronize(device)

    def one(wait: bool) -> float:
        devices.synchronize(device)
        start = time.perf_counter()
        a @ a
        if wait:
            devices.synchronize(device)
        return time.perf_counter() - start

    one(True)  # warm-up: cuBLAS picks its kernels on the first call
    rounds = [(one(False), one(True)) for _ in range(7 if quick else 21)]
    queued, waited = zip(*rounds, strict=True)
    timer = bench.Comparison({"without synchronize": bench.Timing("queued", list(queued), 1),
                              "with synchronize": bench.Timing("waited", list(waited), 1)},
                             baseline="without synchronize")
    v = timer.verdict("with synchronize")
    report(f"A {n} x {n} matrix product on `{device}`, one call at a time, "
           f"{len(rounds)} rounds:")
    report()
    report.table(["timing", "median", "verdict"],
                 [["stops when the call returns", bench.format_time(timer.timings[
                     "without synchronize"].median), "(baseline)"],
                  ["stops when the GPU is done", bench.format_time(timer.timings[
                      "with synchronize"].median), f"{v.outcome_text} ({v.ratio.median:.3g}×)"]])
    auto = bench.timeit(lambda: a @ a, warmup=2, repeats=5)
    report(f"`bench.timeit(lambda: a @ a)` with `sync=\"auto\"`: {auto} "
           f"(it waits for CUDA results inside the timed region).")
    report()
    if device.type != "cuda":
        report("On the CPU there is no queue: both timings measure the work, and the verdict is "
               "*same* (or *undecided* on a busy machine).")
        report()


def _clone(value):
    """Results copied out, so that a CUDA graph's next replay cannot overwrite them."""
    if isinstance(value, list | tuple):
        return [_clone(v) for v in value]
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def section_modes(report: Report, device: torch.device, backend: str, quick: bool) -> None:
    report("## 3. Eager vs torch.compile vs CUDA graphs")
    report()
    workloads = [
        ("66 elementwise ops (lesson 10 §2), length 1024", fw.tiny_torch, fw.tiny_data(1024),
         lambda d: fw.chain_np(d["x"].astype(np.float64)), 2),
        ("MLP training step, float32, batch 2000", fw.mlp_torch,
         fw.mlp_data(2000, dtype=np.float32),
         lambda d: fw.mlp_losses_np(d["params"], d["X"], d["Y"], steps=2), None),
        ("ResNet-style CNN, width 16, 8 images, inference", fw.cnn_torch, fw.cnn_data(16),
         lambda d: fw.cnn_np(d["x"], d["net"]), 2),
    ]
    if quick:
        workloads = workloads[:1]
    tolerance = 3e-2 if device.type == "cuda" else 2e-3  # TF32 convolutions on GPUs round more
    for title, build, data, reference, copies in workloads:
        report(f"### {title}")
        report()
        want = reference(data)
        expected = [want] * copies if copies else want
        modes = captures(device, backend)
        fns, firsts = {}, {}
        rows = {name: [name, "—", "—", "—", ""] for name in modes}
        for name, capture in modes.items():
            if isinstance(capture, str):
                rows[name] = [name, "—", "—", "—", capture]
                continue
            try:
                torch._dynamo.reset()
                start = time.perf_counter()
                fn = build(data, device, capture)
                results = [_clone(fn())]
                devices.synchronize(device)
                firsts[name] = time.perf_counter() - start
                results.append(_clone(fn()))
                problem = fw.check(results, expected, rtol=tolerance)
            except Exception as err:  # one broken mode must not hide the others
                problem = f"failed: {type(err).__name__}: {str(err).splitlines()[0][:160]}"
            if problem:
                rows[name] = [name, "—", "—", "—", problem]
            else:
                fns[name] = fn
        if fns:
            c = bench.compare(fns, baseline="eager", warmup=2, repeats=6,
                              max_time_s=2.0 if quick else 5.0, progress=False)
            for name, t in c.timings.items():
                v = None if name == "eager" else c.verdict(name)
                verdict = "(baseline)" if v is None else (
                    f"{v.outcome_text}: {v.ratio.estimate:.3g}× [{v.ratio.low:.3g}, "
                    f"{v.ratio.high:.3g}]")
                rows[name] = [name, bench.format_time(t.median, t.iqr / 2),
                              bench.format_time(firsts[name]), verdict,
                              "agrees with numpy"]
        report.table(["mode", "per call (median ± IQR/2)", "first call", "vs eager", "check"],
                     list(rows.values()))


def mlp_module(device: torch.device) -> torch.nn.Module:
    """The course MLP (2-32-32-2, float32) as an nn.Module with the course's initial weights."""
    layers = []
    for i, (W, b) in enumerate(fw.init_mlp(fw.MLP_SIZES, seed=0, dtype=np.float32)):
        linear = torch.nn.Linear(*W.shape)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(W.T.copy()))
            linear.bias.copy_(torch.from_numpy(b))
        layers += [linear] if i == len(fw.MLP_SIZES) - 2 else [linear, torch.nn.ReLU()]
    return torch.nn.Sequential(*layers).to(device)


def section_export(report: Report, device: torch.device) -> None:
    report("## 4. torch.export on the device")
    report()
    X, _ = fw.spiral(n_per_class=100, seed=0)
    x = torch.tensor(X, dtype=torch.float32, device=device)
    h = X
    for i, (W, b) in enumerate(fw.init_mlp(fw.MLP_SIZES, seed=0)):
        h = h @ W + b
        h = np.maximum(h, 0) if i < len(fw.MLP_SIZES) - 2 else h
    want, model, rows = h, mlp_module(device), []
    try:
        start = time.perf_counter()
        program = torch.export.export(model, (x,))
        export_s = time.perf_counter() - start
        module = program.module()
        got = _no_grad(module, x)
        rows.append(["export the MLP, then `.module()(x)`", bench.format_time(export_s),
                     fw.check([got], [want], rtol=3e-2) or "agrees with numpy"])
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "mlp.pt2"
            torch.export.save(program, path)
            again = _no_grad(torch.export.load(path).module(), x)
        rows.append(["save `.pt2`, load, run", "",
                     fw.check([again], [want], rtol=3e-2) or "agrees with numpy"])
        found = sorted({str(value.device) for value in program.state_dict.values()})
        rows.append(["where the exported weights live", "", ", ".join(found)])
        c = bench.compare({"eager": lambda: _no_grad(model, x),
                           "exported .module()": lambda: _no_grad(module, x)},
                          warmup=2, repeats=6, max_time_s=3.0, progress=False)
        v = c.verdict("exported .module()")
        rows.append(["per call: exported `.module()` vs eager",
                     bench.format_time(c.timings["exported .module()"].median),
                     f"{v.outcome_text} ({v.ratio.median:.3g}×)"])
    except Exception as err:
        rows.append(["failed", "", f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"])
    report.table(["step", "time", "result"], rows)


def _no_grad(module, x):
    with torch.no_grad():
        return module(x)


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None,
                        help="run sections 3-4 here (default: CUDA if present, else skip them)")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and workloads")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    opts = parser.parse_args(argv)

    report = Report()
    report("# GPU check: the course's PyTorch CUDA paths")
    report()
    command = " ".join(["python benchmarks/gpu_check.py",
                        *(argv if argv is not None else sys.argv[1:])])
    report(f"`{command}`, {time.strftime('%Y-%m-%d')}, torch {torch.__version__}, "
           f"torch.compile backend `{opts.backend}`.")
    report()
    chosen = section_devices(report)
    section_timer(report, chosen, opts.quick)
    device = torch.device(opts.device) if opts.device else chosen
    if device.type != "cuda" and opts.device is None:
        report("## 3. Eager vs torch.compile vs CUDA graphs; 4. torch.export on the device")
        report()
        report("No CUDA device: skipped. Run this script on a machine with an NVIDIA GPU and a "
               "CUDA build of torch, or with `--device cpu` for a dry run of the same code on the "
               "CPU (CUDA graphs still need CUDA).")
    else:
        try:
            section_modes(report, device, opts.backend, opts.quick)
            section_export(report, device)
        except Exception:  # keep what was measured; say what broke
            report("```\n" + traceback.format_exc() + "```")
    if opts.out:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text(report.text())
        print(f"\nwrote {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
