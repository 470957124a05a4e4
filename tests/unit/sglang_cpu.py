"""Run SGLang 0.5.23's real DeepseekV2 forward on CPU (test support, not product code).

From ``../shared/research/cpu_tiny_forward.py`` (verified to match HF transformers to 3e-6):
a gloo world of one, a published test ServerArgs, three module-level CPU patches, torch_native
attention over an MLA KV pool, and ForwardBatch builders. :func:`init` runs once per process.
"""

from __future__ import annotations

import copy
import os
import socket
from dataclasses import dataclass
from types import SimpleNamespace

import torch

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
    from sglang.test.test_utils import publish_build_topology

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(_free_port())
    init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo")
    publish_build_topology(tp_size=1, ep_size=1, pp_size=1, attention_backend="torch_native")
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


@dataclass(frozen=True)
class TinySpec:
    """A tiny DeepSeek configuration, drawn by hypothesis or written by hand."""

    kind: str = "v3"  # "v2" (softmax greedy router) or "v3" (sigmoid noaux_tc router)
    num_layers: int = 4
    hidden: int = 64
    heads: int = 4
    kv_lora_rank: int = 16
    qk_rope: int = 8
    qk_nope: int = 16
    v_head: int = 16
    experts: int = 4
    experts_per_tok: int = 2
    first_k_dense: int = 1
    q_lora_rank: int | None = 32
    yarn: bool = True
    n_group: int = 2
    vocab: int = 128


def hf_config(spec: TinySpec):
    from transformers import DeepseekV2Config, DeepseekV3Config

    common = dict(
        vocab_size=spec.vocab,
        hidden_size=spec.hidden,
        intermediate_size=2 * spec.hidden,
        moe_intermediate_size=spec.hidden // 2,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.heads,
        n_routed_experts=spec.experts,
        n_shared_experts=1,
        num_experts_per_tok=spec.experts_per_tok,
        first_k_dense_replace=spec.first_k_dense,
        moe_layer_freq=1,  # sglang reads it
        kv_lora_rank=spec.kv_lora_rank,
        qk_rope_head_dim=spec.qk_rope,
        qk_nope_head_dim=spec.qk_nope,
        v_head_dim=spec.v_head,
        max_position_embeddings=256,
        q_lora_rank=spec.q_lora_rank,
    )
    if spec.yarn:
        common["rope_parameters"] = {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 64,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        }
    if spec.kind == "v2":
        return DeepseekV2Config(
            **common,
            architectures=["DeepseekV2ForCausalLM"],
            norm_topk_prob=False,
            topk_method="greedy",
            n_group=1,
            topk_group=1,
            scoring_func="softmax",
            routed_scaling_factor=1.0,
        )
    return DeepseekV3Config(
        **common,
        architectures=["DeepseekV3ForCausalLM"],
        norm_topk_prob=True,
        n_group=spec.n_group,
        topk_group=1,
        topk_method="noaux_tc",
        scoring_func="sigmoid",
    )


def hf_model(config, seed: int = 0):
    """HF transformers reference with random weights (norms near 1, router bias random)."""
    from transformers import DeepseekV2Config
    from transformers import DeepseekV2ForCausalLM as HFDeepseekV2
    from transformers import DeepseekV3ForCausalLM as HFDeepseekV3

    torch.manual_seed(seed)
    cls = HFDeepseekV2 if isinstance(config, DeepseekV2Config) else HFDeepseekV3
    model = cls(copy.deepcopy(config)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0, 0.05) if "norm" in name else p.normal_(0.0, 0.1)
        for name, b in model.named_buffers():
            if "e_score_correction_bias" in name:
                b.normal_(0.0, 0.1)
    return model


def sglang_model(cls, config, hf):
    """Build an SGLang model class from ``config`` (deep-copied: SGLang rewrites it) with HF's weights."""
    model = cls(copy.deepcopy(config), quant_config=None).eval()
    model.load_weights(list(hf.state_dict().items()))
    return model


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


def run_batches(model, config, prompts, decode_tokens, extends, rows):
    """Prefill ``prompts``, decode ``decode_tokens`` (one each), extend each by ``extends``.

    Calls the model body, as the CUDA-graph runners do; returns each request's aux captures for
    all its tokens in sequence order (prompt, decoded token, extension)."""
    rt = CpuRuntime(config)
    with torch.no_grad():
        outputs = []
        for fb in (rt.extend(rows, prompts), rt.decode(rows, decode_tokens), rt.extend(rows, extends)):
            out = model.model(fb.input_ids, fb.positions, fb)
            if not isinstance(out, tuple):  # stock SGLang when no listed layer matched
                raise RuntimeError("captured 0 aux hidden states: the model body returned none")
            outputs.append(out[1])
    per_request, offsets = [], [0, 0, 0]
    for p, e in zip(prompts, extends):
        pieces = []
        for step, n in enumerate((len(p), 1, len(e))):
            pieces.append(outputs[step][offsets[step] : offsets[step] + n])
            offsets[step] += n
        per_request.append(torch.cat(pieces))
    return per_request


def hf_hidden_states(hf, tokens):
    """HF ``output_hidden_states`` for one sequence: a list of [T, H] tensors, index 0 = embedding."""
    with torch.no_grad():
        out = hf(torch.tensor([tokens]), output_hidden_states=True)
    return [h[0] for h in out.hidden_states]


def write_draft(folder, draft_fields: dict, hidden: int = 64) -> str:
    """A minimal EAGLE-3 draft config (LlamaForCausalLMEagle3) that SGLang's ModelConfig can read."""
    import json
    from pathlib import Path

    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 2 * hidden,
        "vocab_size": 128,
        **draft_fields,
    }
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / "config.json").write_text(json.dumps(config))
    return str(folder)


class published_eagle3_launch:
    """Publish ServerArgs of an EAGLE-3 launch with ``draft_path`` while in the ``with`` block
    (SGLang's own test override), so the plugin reads the draft the way a server would."""

    def __init__(self, draft_path: str):
        from sglang.srt.runtime_context import get_context

        self._override = get_context().override_server_args(
            speculative_algorithm="EAGLE3", speculative_draft_model_path=draft_path
        )

    def __enter__(self):
        return self._override.install()

    def __exit__(self, *exc):
        self._override.restore()
