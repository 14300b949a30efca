"""course_utils.devices against the frameworks' own answers."""

import importlib.metadata
import platform

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
