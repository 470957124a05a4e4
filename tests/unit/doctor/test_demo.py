"""The demo's pieces that need no model: the shipped pair is used only when its manifests vouch for
it, ``tools.demo_pair`` names every differing file, CPU training gets a fixed thread count and the
caller's back, SGLang's "no CUDA" warning and nothing else is dropped, and the closing lines give
the serve command that works from here."""

import json
import logging

import pytest
import torch

from sglang_eagle3_embed.doctor import demo
from sglang_eagle3_embed.doctor import pair as pair_module
from sglang_eagle3_embed.doctor.cache import publish, temporary
from sglang_eagle3_embed.doctor.pair import TRAIN_THREADS, PairSpec, shipped_pair
from tools.demo_pair import differences

SPEC = PairSpec()


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A stand-in for the package's demo_pair folder: both folders of PairSpec(), manifests written."""
    root = tmp_path / "demo_pair"
    for name in (SPEC.target.key, SPEC.key):
        tmp = temporary(root / name)
        (tmp / "config.json").write_text(json.dumps({"name": name}))
        (tmp / "model.safetensors").write_bytes(b"weights of " + name.encode())
        publish(tmp, root / name)
    monkeypatch.setattr(pair_module, "SHIPPED", root)
    return root


def test_the_shipped_pair_is_found_under_its_keys(shipped):
    found = shipped_pair(SPEC)
    assert (found.target, found.draft) == (shipped / SPEC.target.key, shipped / SPEC.key)


def test_another_spec_finds_no_shipped_pair(shipped):
    assert shipped_pair(PairSpec(ids=(-1, 1, 3))) is None


@pytest.mark.parametrize("damage", ["a changed byte", "a lost file", "a lost manifest"])
def test_a_damaged_shipped_pair_is_not_used_and_left_as_it_is(shipped, damage):
    weights = shipped / SPEC.key / "model.safetensors"
    if damage == "a changed byte":
        data = bytearray(weights.read_bytes())
        data[0] ^= 1
        weights.write_bytes(bytes(data))
    elif damage == "a lost file":
        weights.unlink()
    else:
        (shipped / SPEC.target.key / "manifest.json").unlink()
    assert shipped_pair(SPEC) is None
    assert (shipped / SPEC.key).is_dir() and (shipped / SPEC.target.key).is_dir()  # never removed


def test_differences_names_each_differing_file(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        (root / "x").mkdir(parents=True)
        (root / "x" / "same").write_bytes(b"1")
    (a / "x" / "changed").write_bytes(b"1")
    (b / "x" / "changed").write_bytes(b"2")
    (a / "only_a").write_bytes(b"")
    assert differences(a, a) == []
    assert differences(a, b) == [f"only_a: only in {a}", "x/changed: other bytes"]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_training_threads_are_fixed_on_the_cpu_only_and_restored(device):
    before = torch.get_num_threads()
    other = before + 1
    torch.set_num_threads(other)
    try:
        with pair_module._train_threads(device):
            inside = torch.get_num_threads()
        assert inside == (TRAIN_THREADS if device == "cpu" else other)
        assert torch.get_num_threads() == other
    finally:
        torch.set_num_threads(before)


def test_only_sglangs_no_cuda_warning_is_dropped():
    keep = demo._CpuOnly()

    def record(message):
        return logging.LogRecord("sglang.kernels.jit.utils.arch", logging.WARNING, "", 0, message, (), None)

    assert not keep.filter(record("Cannot detect CUDA architecture."))
    assert keep.filter(record("Cannot run `nvcc --version`: no such file"))


@pytest.mark.parametrize("loads", [True, False])
def test_the_closing_lines_end_with_the_serve_command(monkeypatch, loads):
    from sglang_eagle3_embed.doctor import check

    monkeypatch.setattr(check, "plugin_status", lambda: (loads, "its entry point is not installed"))
    lines = demo.closing_lines()
    assert "\n".join(lines).endswith("--model-impl sglang_eagle3_embed")
    assert "pip install -e ." in lines[0 if loads else 1]
    assert ("not load" in lines[0]) is not loads
    assert not any("pip install sglang-eagle3-embed" in line for line in lines)  # served by no index
