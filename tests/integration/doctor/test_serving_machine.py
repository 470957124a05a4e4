"""``check`` on a machine without the serving GPU (``doctor/serving_machine.py``): SGLang's
resolution answered as the named GPU would answer it, so a launch is judged as on the serving
machine; the InfiniBand devices are left to the serving machine; nothing of the emulation stays."""

import json
import os

import pytest
import torch

from sglang_eagle3_embed.doctor.check import check_launch, parse_launch
from sglang_eagle3_embed.doctor.serving_machine import GPUS, as_serving_machine, ib_devices, serving_gpu
from tests.support.corpus import CHECKPOINTS, stand_in

pytestmark = pytest.mark.releases


@pytest.fixture(scope="module")
def dsa(tmp_path_factory) -> str:
    return str(stand_in(CHECKPOINTS["deepseek-ai/DeepSeek-V3.2-Exp"], tmp_path_factory.mktemp("dsa")))


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory) -> str:
    return str(stand_in(CHECKPOINTS["deepseek-ai/DeepSeek-V3-0324"], tmp_path_factory.mktemp("v3")))


def resolved(argv: list[str], gpu: str, *fields):
    from sglang.srt.arg_groups.overrides import resolution_result

    args = parse_launch([*argv, "--device", "cuda"])
    with as_serving_machine(GPUS[gpu], ib_devices(args)):
        args.resolve_once()
    return tuple(resolution_result(args, f) for f in fields)


def test_a_dsa_model_resolves_as_each_gpu_resolves_it(dsa):
    """DeepSeek-V3.2 asks the CUDA driver for the device capability: on the CPU, SGLang's own
    resolution stops; as the serving GPU, it picks that GPU's KV dtype and DSA backends."""
    fields = ("kv_cache_dtype", "dsa_prefill_backend", "dsa_decode_backend")
    assert resolved(["--model-path", dsa, "--tp", "8"], "h200", *fields) == (
        "bfloat16",
        "flashmla_sparse",
        "fa3",
    )
    assert resolved(["--model-path", dsa, "--tp", "8"], "b200", *fields) == ("fp8_e4m3", "trtllm", "trtllm")
    with pytest.raises(RuntimeError, match="NVIDIA driver"):
        parse_launch(["--model-path", dsa, "--device", "cuda"]).resolve_once()


def test_memory_sizes_the_chunked_prefill_as_on_the_gpu(deepseek):
    assert resolved(["--model-path", deepseek], "h200", "chunked_prefill_size") == (8192,)
    assert resolved(["--model-path", deepseek], "b200", "chunked_prefill_size") == (16384,)


def test_a_blackwell_backend_is_refused_as_an_h200_and_accepted_as_a_b200(deepseek):
    argv = ["--model-path", deepseek, "--tp", "8", "--attention-backend", "tokenspeed_mla"]
    argv += ["--kv-cache-dtype", "fp8_e4m3"]  # 0.5.22 requires it with this backend, 0.5.23 sets it
    refused = check_launch(argv, "h200").findings
    assert [f.rule for f in refused if f.severity.value == "error"] == ["sglang-resolution"]
    assert "Blackwell" in next(f.message for f in refused if f.rule == "sglang-resolution")
    assert not [f for f in check_launch(argv, "b200").findings if f.severity.value == "error"]


def test_deterministic_inference_is_not_refused_for_want_of_a_gpu(deepseek):
    """``--device cpu`` would pick the intel_amx backend, which deterministic inference refuses."""
    found = check_launch(["--model-path", deepseek, "--enable-deterministic-inference"], "h200").findings
    assert not [f for f in found if f.severity.value == "error"], found


def test_infiniband_devices_are_left_to_the_serving_machine(deepseek):
    argv = [
        "--model-path",
        deepseek,
        "--disaggregation-mode",
        "prefill",
        "--disaggregation-ib-device",
        "mlx5_1,mlx5_2",
    ]
    found = check_launch(argv, "h200")
    assert not [f for f in found.findings if f.severity.value == "error"]
    (step,) = found.not_checked_here
    assert "--disaggregation-ib-device mlx5_1,mlx5_2" in step and "serving machine" in step
    assert ib_devices(
        parse_launch(["--model-path", deepseek, "--disaggregation-ib-device", '{"0": "a,b", "1": "c"}'])
    ) == {"a", "b", "c"}


def test_nothing_of_the_emulation_stays(dsa):
    before_env, before_capability = dict(os.environ), torch.cuda.get_device_capability
    resolved(["--model-path", dsa], "b200", "kv_cache_dtype")
    assert dict(os.environ) == before_env  # resolution sets SGLANG_DSA_* variables for the process
    assert torch.cuda.get_device_capability is before_capability
    from sglang.srt.runtime_context import get_platform

    assert not get_platform().is_cuda


def test_the_gpu_named_or_this_machines_own(monkeypatch):
    assert serving_gpu(None) is GPUS["h200"]  # no CUDA here: the default
    assert serving_gpu("B200") is GPUS["b200"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert serving_gpu(None) is None  # a GPU machine answers for itself
    with pytest.raises(Exception, match="--gpu a100: not a GPU check knows"):
        serving_gpu("a100")


def test_the_command_says_how_it_resolved(deepseek):
    from tests.support import cli

    run = cli("check", "--json", "--gpu", "b200", "--model-path", deepseek)
    report = json.loads(run.stdout)
    assert run.returncode == 0 and report["resolved_as"].startswith("NVIDIA B200 (sm100"), report
    run = cli("check", "--gpu", "a100", "--model-path", deepseek)
    assert run.returncode == 2 and "--gpu a100" in run.stderr
