"""Tiny DeepseekV3 target and EAGLE-3 draft configs for GPU engine tests (random weights).

The trained, realistic pair comes with the wiring doctor (doctor/pair.py); these only exercise loading,
capture under CUDA graphs and losslessness."""

import json
from pathlib import Path

HIDDEN = 512
VOCAB = 2048


def build_target(folder: Path, num_layers: int = 8, seed: int = 0) -> str:
    import torch
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    if (folder / "config.json").exists():
        return str(folder)
    config = DeepseekV3Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=1024, moe_intermediate_size=256,
        num_hidden_layers=num_layers, num_attention_heads=8, num_key_value_heads=8, n_shared_experts=1,
        n_routed_experts=8, num_experts_per_tok=2, first_k_dense_replace=1, n_group=1, topk_group=1,
        kv_lora_rank=512, q_lora_rank=256, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
        max_position_embeddings=4096, rope_scaling=None, tie_word_embeddings=False, moe_layer_freq=1,
        topk_method="noaux_tc", scoring_func="sigmoid", routed_scaling_factor=2.5, norm_topk_prob=True,
    )  # fmt: skip
    torch.manual_seed(seed)
    DeepseekV3ForCausalLM(config).to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)
    return str(folder)


def write_draft(folder: Path, draft_fields: dict) -> str:
    """An EAGLE-3 draft config (weights loaded with load_format=dummy)."""
    config = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": HIDDEN,
        "intermediate_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 1,
        "vocab_size": VOCAB, "draft_vocab_size": VOCAB, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "torch_dtype": "bfloat16", "tie_word_embeddings": False, "hidden_act": "silu",
        **draft_fields,
    }  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)
