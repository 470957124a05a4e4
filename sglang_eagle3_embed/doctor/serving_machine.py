"""SGLang's argument resolution as the serving machine would run it, on a machine without its GPU
(``check``'s ``--gpu``). Wiring doctor only: a server never imports it.

Several steps of SGLang 0.5.23's resolution ask the machine they run on rather than the launch
(read off the installed source):

- every DSA model (DeepSeek-V3.2, GLM-5) asks the CUDA driver for the device capability
  (``srt/arg_groups/model_hook.py:341``) and picks its KV cache dtype and its DSA backends from it
  (``srt/arg_groups/overrides.py:512, 631``): without a driver, resolution stops;
- the GPU generation decides defaults and refusals through SGLang's platform facts
  (``srt/runtime_context.py:1849-1903``): the attention backend and page size (``overrides.py:
  1127-1201, 1340-1362``), ``tokenspeed_mla``/``cutedsl_mla`` and ``trtllm_mla`` only on Blackwell
  (``overrides.py:1204-1258``), the DeepSeek MoE runner (``overrides.py:764-855``), the
  deterministic backend (``overrides.py:1093-1123``); flags such as ``--enable-symm-mem`` are reset
  without CUDA (``platform_hook.py:63-110``);
- the GPU's memory sizes the chunked prefill, the decode graphs and ``mem_fraction_static``
  (``memory_hook.py:78-170, 324-328``; ``kv_shard_hook.py:97``; ``model_overrides/qwen3_vl.py:24``);
- the prefill CUDA graph defaults to ``breakable`` only where CUDA is present
  (``model_executor/cuda_graph_config.py:119-124``);
- ``--disaggregation-ib-device`` and ``--mooncake-ib-device`` must name InfiniBand devices of this
  machine (``validation_hook.py:536-547``);
- ``--device cpu`` would instead make the attention backend ``intel_amx``/``torch_native``
  (``platform_hook.py:158-173``), which refuses ``--enable-deterministic-inference``
  (``overrides.py:1119``) and turns off overlap scheduling for speculation
  (``speculative_hook.py:66-75``).

:func:`as_serving_machine` answers those questions as the named GPU would (SGLang's own
``override_platform`` for the platform facts; the capability, the memory, the prefill-graph default
and the InfiniBand view where SGLang reads them directly), and restores everything afterwards,
environment variables included (resolution sets some). The InfiniBand devices named are taken as
present, so SGLang still checks their format; whether they exist is left to the serving machine
(rule ``serving-machine``). Where a GPU is visible, nothing is emulated unless ``--gpu`` is given.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import types
from dataclasses import dataclass

from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.core.releases import current

__all__ = ["DEFAULT_GPU", "GPUS", "Gpu", "as_serving_machine", "ib_devices", "serving_gpu"]


@dataclass(frozen=True)
class Gpu:
    name: str
    capability: tuple[int, int]
    memory_mib: float
    """As ``nvidia-smi --query-gpu=memory.total`` reports it (what SGLang reads)."""

    def describe(self) -> str:
        major, minor = self.capability
        return f"{self.name} (sm{major}{minor}, {self.memory_mib / 1024:.0f} GiB)"


GPUS = {
    "h100": Gpu("NVIDIA H100 80GB HBM3", (9, 0), 81559.0),
    "h20": Gpu("NVIDIA H20", (9, 0), 97871.0),
    "h200": Gpu("NVIDIA H200", (9, 0), 143771.0),
    "b200": Gpu("NVIDIA B200", (10, 0), 183359.0),
}
DEFAULT_GPU = "h200"
"""The GPU the plugin is measured on (docs/benchmarks.md)."""


def serving_gpu(name: str | None) -> Gpu | None:
    """The GPU to resolve as: the one ``--gpu`` names, else the default where no CUDA device is
    visible, else None (resolve on this machine's own GPU)."""
    if name is None:
        import torch

        if torch.cuda.is_available():
            return None
        name = DEFAULT_GPU
    gpu = GPUS.get(name.lower())
    if gpu is None:
        raise InputError(f"--gpu {name}: not a GPU check knows; use one of {', '.join(GPUS)}")
    return gpu


def ib_devices(server_args) -> set[str]:
    """The InfiniBand device names a launch gives (``--disaggregation-ib-device``,
    ``--mooncake-ib-device``: a comma list, or a per-GPU JSON mapping)."""
    names: set[str] = set()
    for field in ("disaggregation_ib_device", "mooncake_ib_device"):
        value = getattr(server_args, field, None)
        if not isinstance(value, str) or not value.strip():
            continue
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        groups = parsed.values() if isinstance(parsed, dict) else [parsed]
        for group in groups:
            if isinstance(group, str):
                names.update(d.strip() for d in group.split(",") if d.strip())
    return names


def _module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@contextlib.contextmanager
def as_serving_machine(gpu: Gpu, infiniband: set[str] = frozenset()):
    """SGLang's hardware questions answered as ``gpu`` (see the module's docstring), with
    ``infiniband`` the InfiniBand devices present, until the block ends."""
    import torch
    from sglang.srt.runtime_context import override_platform

    major, minor = gpu.capability
    facts = dict(
        is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False, is_mps=False,
        is_sm90=major == 9, is_sm100=major == 10, is_sm100_or_sm110=major in (10, 11), is_sm110=major == 11,
        is_sm120=major == 12, is_blackwell=major in (10, 11, 12), is_hopper_with_cuda_12_3=major == 9,
        has_amx=False, has_flashinfer=True, device_sm=10 * major + minor, device_capability=gpu.capability,
    )  # fmt: skip
    for absent in current().absent_platform_facts:  # an older release does not ask these
        facts.pop(absent)

    def memory(device=None):
        return gpu.memory_mib

    sysfs = "/sys/class/infiniband"
    view = types.SimpleNamespace(
        path=types.SimpleNamespace(isdir=lambda p: p == sysfs or os.path.isdir(p)),
        listdir=lambda p: sorted(infiniband) if p == sysfs else os.listdir(p),
    )
    graphs = _module("sglang.srt.model_executor.cuda_graph_config")
    prefill_default = getattr(graphs, "default_prefill_backend", None)

    def prefill_graphs():
        """The default prefill CUDA-graph backend where CUDA is present (it reads ``is_cuda()``
        from ``sglang.srt.utils`` when called)."""
        import sglang.srt.utils as utils

        is_cuda, utils.is_cuda = utils.is_cuda, lambda: True
        try:
            return prefill_default()
        finally:
            utils.is_cuda = is_cuda

    patches = [
        (torch.cuda, "get_device_capability", lambda device=None: gpu.capability),
        (_module("sglang.srt.arg_groups.memory_hook"), "get_device_memory_capacity", memory),
        (_module("sglang.srt.arg_groups.kv_shard_hook"), "get_device_memory_capacity", memory),
        (_module("sglang.srt.arg_groups.model_overrides.qwen3_vl"), "get_device_memory_capacity", memory),
        (_module("sglang.srt.arg_groups.model_overrides.qwen3_vl"), "is_sm90_supported", lambda: major == 9),
        (_module("sglang.srt.arg_groups.moe_hook"), "is_sm100_supported", lambda: major == 10),
        (_module("sglang.srt.utils.common"), "is_sm100_supported", lambda: major == 10),
        (graphs, "default_prefill_backend", prefill_graphs),
        (_module("sglang.srt.arg_groups.validation_hook"), "os", view),
    ]
    # a release that lacks a module or a name does not ask that question
    patches = [(m, attr, new) for m, attr, new in patches if m is not None and hasattr(m, attr)]
    saved = [(m, attr, getattr(m, attr)) for m, attr, _ in patches]
    environment = dict(os.environ)
    try:
        for m, attr, new in patches:
            setattr(m, attr, new)
        with override_platform(**facts):
            yield
    finally:
        for m, attr, old in saved:
            setattr(m, attr, old)
        os.environ.clear()
        os.environ.update(environment)
