"""SGLang 0.5.23's real DeepSeek forward on CPU: the demo's and ``probe --backend sglang-cpu``'s glue.

From ``../shared/research/cpu_tiny_forward.py`` (verified to match HF transformers to 3e-6):
a gloo world of one, a published test ServerArgs, three module-level CPU patches (listed in
``docs/patches.md``; applied only by :func:`init`, which only CPU tools call, never a server),
torch_native attention over an MLA KV pool, and ForwardBatch builders.
"""

from __future__ import annotations

import copy
import os
import socket
from pathlib import Path
from types import SimpleNamespace

import torch

__all__ = ["CpuRuntime", "build", "init", "load_model", "prefill_captures"]

_INITIALISED = False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init() -> None:
    """Process-global SGLang state for CPU forwards (idempotent)."""
    global _INITIALISED
    if _INITIALISED:
        return
    from sglang.srt.distributed.parallel_state import (
        init_distributed_environment,
        initialize_model_parallel,
    )

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(_free_port())
    init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo")
    # The tiny configs have too few experts to fuse the shared one into: 0.5.21 and 0.5.22 fuse it
    # by default at construction (moe/utils.py:521-544, 545-568); 0.5.23 decides in the model
    # loader, which the harness does not use, so the flag changes nothing there.
    _publish_server_args(
        tp_size=1, ep_size=1, pp_size=1, attention_backend="torch_native", disable_shared_experts_fusion=True
    )
    initialize_model_parallel(backend="gloo")

    # (a) RoPE: without a platform, RotaryEmbedding falls through to a vllm import; claim CPU here.
    import sglang.srt.layers.rotary_embedding.base as rope_base
    import sglang.srt.layers.rotary_embedding.rope_variant as rope_variant

    rope_base._is_cpu = True
    # (b) YaRN builds its cos/sin cache on get_device(), which raises without an accelerator.
    rope_variant.get_device = lambda *a, **k: "cpu"
    # (c) torch_native re-reads the latent MLA cache, so force the absorbed MLA path.
    from sglang.srt.models.deepseek_common.attention_backend_handler import AttentionBackendRegistry
    from sglang.srt.models.deepseek_common.attention_forward_methods.forward_methods import (
        AttnForwardMethod,
    )

    AttentionBackendRegistry.register("torch_native", lambda attn, fb: AttnForwardMethod.MLA)
    _INITIALISED = True


def _publish_server_args(**fields) -> None:
    """Publish test ServerArgs as SGLang's own ``sglang.test.test_utils.publish_build_topology``
    does (the same in 0.5.21-0.5.23, ``test/test_utils.py:2003``/``2101``/``2101``), without
    importing that module: it imports SGLang's serving benchmark, which needs ``datasets``, absent
    from a plain server install."""
    from sglang.srt.distributed import parallel_state
    from sglang.srt.runtime_context import SpawnRanks, get_parallel, publish, reset_context
    from sglang.srt.server_args import ServerArgs

    reset_context()
    publish(ServerArgs(model_path="dummy", **fields), role="test", ranks=SpawnRanks(world_rank=0))
    if parallel_state._WORLD is not None:  # keep the gloo world across the reset
        get_parallel().override_permanently(world_group=parallel_state._WORLD)


def build(cls, config):
    """Construct an SGLang model class from ``config`` (deep-copied: SGLang rewrites it) outside any
    forward context: the :class:`CpuRuntime` publishes one for its forwards, and SGLang 0.5.21 and
    0.5.22 refuse construction-time reads inside one (``srt/layers/moe/utils.py``, 0.5.21: 521-544,
    0.5.22: 545-568)."""
    from sglang.srt.model_executor.forward_context import set_forward_context

    previous = set_forward_context(None)
    try:
        return cls(copy.deepcopy(config), quant_config=None).eval()
    finally:
        set_forward_context(previous)


def load_model(cls, folder: Path):
    """An SGLang model class built from a HF folder (``config.json`` + ``*.safetensors``) on CPU,
    unquantized: FP8 and int4 weights are dequantized to float32 first."""
    from transformers import AutoConfig

    from sglang_eagle3_embed.doctor.quantized import dequantized_weights
    from sglang_eagle3_embed.doctor.weights import read_safetensors

    init()
    config = AutoConfig.from_pretrained(folder)
    model = build(cls, config)
    model.load_weights(list(dequantized_weights(read_safetensors(folder)).items()))
    return model, config


class CpuRuntime:
    """Pools, the torch_native backend and ForwardBatch builders (page size 1)."""

    def __init__(self, config, max_reqs: int = 8, max_ctx: int = 64, kv_slots: int = 512):
        from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend
        from sglang.srt.mem_cache.memory_pool import MLATokenToKVPool, ReqToTokenPool
        from sglang.srt.model_executor.forward_context import ForwardContext, set_forward_context

        self.req_pool = ReqToTokenPool(
            size=max_reqs, max_context_len=max_ctx, device="cpu", enable_memory_saver=False
        )
        self.kv_pool = MLATokenToKVPool(
            size=kv_slots,
            page_size=1,
            dtype=torch.float32,
            kv_lora_rank=config.kv_lora_rank,
            qk_rope_head_dim=config.qk_rope_head_dim,
            layer_num=config.num_hidden_layers,
            device="cpu",
            enable_memory_saver=False,
        )
        self.backend = TorchNativeAttnBackend(
            SimpleNamespace(device="cpu", req_to_token_pool=self.req_pool, token_to_kv_pool=self.kv_pool)
        )
        set_forward_context(ForwardContext(attn_backend=self.backend))
        self.next_slot = 1  # slot 0 is the padding slot
        self.seq_len: dict[int, int] = {}

    @classmethod
    def for_batch(cls, config, batch: int, length: int) -> CpuRuntime:
        """Pools sized for ``batch`` requests of up to ``length`` tokens each."""
        return cls(config, max_reqs=batch + 1, max_ctx=length + 1, kv_slots=batch * length + 2)

    def _alloc(self, n: int) -> torch.Tensor:
        loc = torch.arange(self.next_slot, self.next_slot + n, dtype=torch.int64)
        self.next_slot += n
        return loc

    def extend(self, rows, token_lists):
        """Prefill, or extend on a cached prefix, ``token_lists[i]`` for request row ``rows[i]``."""
        from sglang.srt.model_executor.forward_batch_info import (
            CaptureHiddenMode,
            ForwardBatch,
            ForwardMode,
        )

        prefix = [self.seq_len.get(r, 0) for r in rows]
        ext = [len(t) for t in token_lists]
        locs = []
        for r, p, n in zip(rows, prefix, ext):
            loc = self._alloc(n)
            self.req_pool.req_to_token[r, p : p + n] = loc.to(torch.int32)
            self.seq_len[r] = p + n
            locs.append(loc)
        seq = [p + n for p, n in zip(prefix, ext)]
        fb = ForwardBatch(
            forward_mode=ForwardMode.EXTEND,
            batch_size=len(rows),
            input_ids=torch.tensor([t for ts in token_lists for t in ts], dtype=torch.int64),
            req_pool_indices=torch.tensor(rows),
            seq_lens=torch.tensor(seq),
            out_cache_loc=torch.cat(locs),
            seq_lens_sum=sum(seq),
            seq_lens_cpu=torch.tensor(seq),
            positions=torch.cat([torch.arange(p, p + n) for p, n in zip(prefix, ext)]),
            extend_num_tokens=sum(ext),
            extend_seq_lens=torch.tensor(ext),
            extend_prefix_lens=torch.tensor(prefix),
            extend_start_loc=torch.tensor([sum(ext[:i]) for i in range(len(ext))]),
            extend_prefix_lens_cpu=prefix,
            extend_seq_lens_cpu=ext,
            capture_hidden_mode=CaptureHiddenMode.FULL,
        )
        self.backend.init_forward_metadata(fb)
        return fb

    def decode(self, rows, tokens):
        from sglang.srt.model_executor.forward_batch_info import (
            CaptureHiddenMode,
            ForwardBatch,
            ForwardMode,
        )

        locs, seq = [], []
        for r in rows:
            loc = self._alloc(1)
            p = self.seq_len[r]
            self.req_pool.req_to_token[r, p] = int(loc)
            self.seq_len[r] = p + 1
            locs.append(loc)
            seq.append(p + 1)
        fb = ForwardBatch(
            forward_mode=ForwardMode.DECODE,
            batch_size=len(rows),
            input_ids=torch.tensor(tokens),
            req_pool_indices=torch.tensor(rows),
            seq_lens=torch.tensor(seq),
            out_cache_loc=torch.cat(locs),
            seq_lens_sum=sum(seq),
            seq_lens_cpu=torch.tensor(seq),
            positions=torch.tensor([s - 1 for s in seq]),
            capture_hidden_mode=CaptureHiddenMode.FULL,
        )
        self.backend.init_forward_metadata(fb)
        return fb


def prefill_captures(model, config, tokens: torch.Tensor) -> torch.Tensor:
    """One prefill of ``tokens [B, T]`` through SGLang's model body: its packed aux captures,
    ``[B, T, K*H]``. Raises SGLang's own error where its capture comes up short."""
    batch, length = tokens.shape
    runtime = CpuRuntime.for_batch(config, batch, length)
    fb = runtime.extend(list(range(1, batch + 1)), tokens.tolist())
    with torch.no_grad():
        out = model.model(fb.input_ids, fb.positions, fb)
    if not isinstance(out, tuple):  # stock SGLang when no listed layer matched
        raise RuntimeError("captured 0 aux hidden states")
    return out[1].view(batch, length, -1)
