"""Test support around :mod:`sglang_eagle3_embed.doctor.sglang_cpu` (SGLang's DeepSeek forward on CPU):
random tiny configs and HF references, batch runners, draft configs, published launches."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from sglang_eagle3_embed.doctor.sglang_cpu import CpuRuntime, build, init  # noqa: F401


def sglang_model(cls, config, hf):
    """Build an SGLang model class from ``config`` with HF's weights."""
    model = build(cls, config)
    model.load_weights(list(hf.state_dict().items()))
    return model


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
