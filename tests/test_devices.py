"""course_utils.devices against the frameworks' own answers."""

import importlib.metadata
import os
import platform
import threading
import time

import numpy as np
import pytest
import torch

from course_utils import devices


def test_versions_are_the_installed_ones():
    found = devices.versions()
    assert found["python"] == platform.python_version()
    assert found["numpy"] == np.__version__
    assert found["torch"] == importlib.metadata.version("torch")
    assert torch.__version__.startswith(found["torch"])


def test_tensorflow_version_matches_the_import():
    tf = pytest.importorskip("tensorflow")
    assert devices.versions()["tensorflow"] == tf.__version__


def test_missing_package_is_reported_not_raised():
    assert devices.package_version("no-such-package-xyz") is None


def test_cpu_threads_match_torch():
    threads = devices.cpu_threads()
    assert threads["torch_threads"] == torch.get_num_threads()
    assert 1 <= threads["usable_cpus"] <= threads["logical_cpus"]


def test_torch_device_follows_cuda(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert devices.torch_device().type == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert devices.torch_device() == torch.device("cpu")


def test_course_device_overrides(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert devices.torch_device() == torch.device("cpu")


def test_torch_gpu_agrees_with_torch():
    if torch.cuda.is_available():
        assert devices.torch_gpu().startswith("cuda:0")
    else:
        assert devices.torch_gpu() in (None, "mps")


def test_report_rows_text_and_html():
    rep = devices.report()
    table = rep.as_dict()
    assert table["numpy"] == np.__version__
    assert table["lessons run torch on"] == str(devices.torch_device())
    assert "TensorFlow GPU" in table and "torch GPU" in table
    text, page = str(rep), rep._repr_html_()
    assert all(key in text for key in table)
    assert page.count("<tr>") == len(table)


def test_course_env_command_prints_the_report(capsys):
    assert devices.main([]) == 0
    assert "numpy" in capsys.readouterr().out


def test_jax_devices_match_jax():
    jax = pytest.importorskip("jax")
    assert devices.jax_devices() == [f"{d.platform}:{d.id}" for d in jax.devices()]
    assert devices.report().as_dict()["JAX devices"] == ", ".join(devices.jax_devices())


def test_synchronize_waits_on_cuda_only(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    devices.synchronize("cpu")
    assert calls == []
    devices.synchronize("cuda:1")
    assert calls == [torch.device("cuda:1")]
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    devices.synchronize()  # the course device: the CPU here
    assert len(calls) == 1


def test_cuda_details_only_with_a_gpu():
    details = devices.cuda_details()
    if torch.cuda.is_available():
        assert details["name"] == torch.cuda.get_device_name(0)
    else:
        assert details is None


# ----------------------------------------------------------------------------- gpu_check.py


def _gpu_check_module():
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("course_gpu_check", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the report of a machine without CUDA")
def test_gpu_check_without_cuda_says_so_and_skips(capsys, tmp_path):
    gpu_check = _gpu_check_module()
    out = tmp_path / "report.md"
    assert gpu_check.main(["--quick", "--out", str(out)]) == 0
    report = out.read_text()
    assert report.strip() == capsys.readouterr().out.split("\nwrote ")[0].strip()  # as printed
    assert "## 1. Device selection" in report and "## 2. The synchronised timer" in report
    assert "no CUDA device" in report and "No CUDA device: skipped" in report
    assert "## 3." in report and "### " not in report  # no workload was run


def test_gpu_check_dry_run_on_the_cpu(tmp_path):
    # The same code paths a GPU runs (capture, compile, check against numpy, timing, export and
    # a .pt2 round trip), on the CPU, as a script in its own process.
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[1] / "benchmarks" / "gpu_check.py"
    out = tmp_path / "report.md"
    done = subprocess.run([sys.executable, str(script), "--device", "cpu", "--backend", "eager",
                           "--quick", "--out", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = out.read_text()
    assert "failed" not in report and "Traceback" not in report, report
    assert report.count("agrees with numpy") == 4  # eager, torch.compile; export, .pt2 reload
    assert report.count("needs a CUDA device") == 2  # reduce-overhead and CUDA graph
    assert "## 4. torch.export on the device" in report and "| cpu |" in report


def test_cpu_model_and_flags_reads_cpuinfo():
    info = ("processor : 0\nmodel name : Example Xeon\nflags : fpu sse avx2 avx512f avx512_vnni"
            " avx512_bf16 amx_tile amx_bf16\n\nprocessor : 1\nmodel name : Example Xeon\n")
    assert devices.cpu_model_and_flags(info) == (
        "Example Xeon", ["AVX2", "AVX-512", "AVX512-VNNI", "AVX512-BF16", "AMX", "AMX-BF16"])
    assert devices.cpu_model_and_flags("model name : Old\nflags : fpu sse2\n") == ("Old", [])


def test_timing_context_names_the_cpu_its_units_and_the_load():
    line = devices.timing_context()
    model, flags = devices.cpu_model_and_flags()
    assert line.startswith(f"CPU: {model}; vector units: ")
    assert all(flag in line for flag in flags)
    assert f"{devices.cpu_threads()['usable_cpus']} usable core(s)" in line and "load" in line


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_thread_shares_one_thread_for_work_on_the_calling_thread():
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("per-thread CPU times come from Linux's /proc")
    shares = devices.thread_shares(lambda: _spin(0.01), seconds=0.3)
    assert len(shares) == 1 and shares[0] > 0.95


def test_thread_shares_sees_two_threads_that_work_at_once():
    """Two threads of a pool spinning while the caller waits (they take turns under the GIL, as
    a pool's threads share a busy core): two shares of about half each, none for the caller."""
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("per-thread CPU times come from Linux's /proc")
    stop = threading.Event()

    def work():
        while not stop.is_set():
            _spin(0.001)

    pool = [threading.Thread(target=work, daemon=True) for _ in range(2)]
    for thread in pool:
        thread.start()
    try:
        shares = devices.thread_shares(lambda: time.sleep(0.01), seconds=0.4)
    finally:
        stop.set()
        for thread in pool:
            thread.join()
    assert len(shares) == 2 and all(0.3 < s < 0.7 for s in shares), shares


def test_thread_shares_is_none_without_proc(monkeypatch):
    monkeypatch.setattr(devices.os.path, "isdir", lambda path: False)
    assert devices.thread_shares(lambda: None) is None
