"""Published launch lines and checkpoints, as ``check`` and ``ids`` see them: each launch line as its
source prints it, each checkpoint by its public config's shape, and the verdict SGLang on the
intended hardware would justify. ``tests/integration/cli/test_corpus.py`` runs them against
stand-in folders (:func:`stand_in`): the config and weights that hold every tensor name a rule
reads at its real shape, written sparse (a few KB on disk).

Sources are cited per entry: the SGLang repository (docs, cookbook) at the commit read, SGLang
issues and pull requests by number, SpecForge and TorchSpec files. A shape marked "assumed" was
not read from the checkpoint itself (published draft configs are not in the stored sources); the
entry says what it stands for.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.doctor.kimi import REAL_TEXT, REAL_VISION, kimi_config
from sglang_eagle3_embed.doctor.quantized import int4_config

__all__ = ["CHECKPOINTS", "LAUNCHES", "Checkpoint", "Launch", "stand_in"]


@dataclass(frozen=True)
class Checkpoint:
    """A published model or draft: its hub id, its config (the fields that matter, at their real
    values), the tensors a rule reads (name -> shape), and where the shape comes from."""

    repo: str
    config: dict
    source: str
    tensors: dict = field(default_factory=dict)


def _layers(prefix: str, count: int, hidden: int, mtp: int = 0) -> dict:
    """One tensor per decoder layer, and the MTP layers' own modules after them."""
    tensors = {f"{prefix}{i}.input_layernorm.weight": [hidden] for i in range(count)}
    for i in range(count, count + mtp):
        tensors.update({f"{prefix}{i}.{m}.weight": [hidden] for m in ("enorm", "hnorm")})
        tensors[f"{prefix}{i}.eh_proj.weight"] = [hidden, 2 * hidden]
    return tensors


def _deepseek(repo: str, source: str, **fields) -> Checkpoint:
    config = {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": 129280,
        "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
        "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1,
        "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1, "n_group": 8, "topk_group": 4,
        "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
        "v_head_dim": 128, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
        "norm_topk_prob": True, "max_position_embeddings": 163840, "num_nextn_predict_layers": 1,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                "weight_block_size": [128, 128]},
    }  # fmt: skip
    config.update(fields)
    layers = _layers("model.layers.", config["num_hidden_layers"], 7168, config["num_nextn_predict_layers"])
    return Checkpoint(repo, config, source, layers)


def _deepseek_v4(repo: str, source: str) -> Checkpoint:
    """DeepSeek-V4 keeps the original DeepSeek weight layout (``layers.{i}.attn_norm``, ``embed``,
    ``mtp.0``), which SGLang renames on load (srt/models/deepseek_v4.py:4620-4622, 5124, 5165)."""
    config = {
        "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "vocab_size": 129280,
        "hidden_size": 4096, "num_hidden_layers": 43, "num_nextn_predict_layers": 1, "num_attention_heads": 64,
        "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 1024,
        "o_lora_rank": 1024, "o_groups": 8, "moe_intermediate_size": 2048, "n_routed_experts": 256,
        "n_shared_experts": 1, "num_experts_per_tok": 6, "num_hash_layers": 3, "scoring_func": "sqrtsoftplus",
        "routed_scaling_factor": 1.5, "topk_method": "noaux_tc", "norm_topk_prob": True, "index_n_heads": 64,
        "index_head_dim": 128, "index_topk": 512, "sliding_window": 128, "hc_mult": 4, "hc_sinkhorn_iters": 20,
        "hc_eps": 1e-6, "compress_rope_theta": 160000, "compress_ratios": [0, 0, *[4, 128] * 20, 4, 0],
        "max_position_embeddings": 1048576, "rope_theta": 10000, "swiglu_limit": 10.0, "rms_norm_eps": 1e-6,
        "rope_scaling": {"type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                         "original_max_position_embeddings": 65536},
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "expert_dtype": "fp4",
        "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
    }  # fmt: skip
    tensors = {f"layers.{i}.attn_norm.weight": [4096] for i in range(43)}
    tensors.update({"embed.weight": [129280, 4096], "head.weight": [129280, 4096]})
    tensors.update({f"mtp.0.{m}.weight": [4096] for m in ("enorm", "hnorm")})
    return Checkpoint(repo, config, source, tensors)


def _glm(
    repo: str, arch: str, model_type: str, layers: int, hidden: int, source: str, **fields
) -> Checkpoint:
    config = {
        "architectures": [arch], "model_type": model_type, "num_hidden_layers": layers, "hidden_size": hidden,
        "vocab_size": 154880, "num_nextn_predict_layers": 1, "num_attention_heads": 64, "num_key_value_heads": 8,
        "head_dim": 128, "intermediate_size": 12288, "moe_intermediate_size": 1536, "n_routed_experts": 160,
        "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "n_group": 1,
        "topk_group": 1, "norm_topk_prob": True, "max_position_embeddings": 202752, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }  # fmt: skip
    config.update(fields)
    return Checkpoint(repo, config, source, _layers("model.layers.", layers, hidden, 1))


def _kimi(repo: str, source: str) -> Checkpoint:
    text = {**REAL_TEXT, "model_type": "deepseek_v3", "num_nextn_predict_layers": 0}
    config = kimi_config(text, REAL_VISION)
    config["text_config"]["quantization_config"] = int4_config()
    return Checkpoint(repo, config, source, _layers("language_model.model.layers.", 61, 7168))


def _eagle3(
    repo: str, source: str, hidden: int, vocab: int, ids, *, at: str = "nested", **fields
) -> Checkpoint:
    config = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": hidden,
        "intermediate_size": 18432, "num_hidden_layers": 1, "num_attention_heads": 64, "num_key_value_heads": 8,
        "vocab_size": vocab, "max_position_embeddings": 163840, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }  # fmt: skip
    if ids is not None and at == "nested":
        config["eagle_config"] = {IDS_FIELD: list(ids), "use_aux_hidden_state": True}
    elif ids is not None:
        config[IDS_FIELD] = list(ids)
    config.update(fields)
    count = len(ids) if ids else 3
    tensors = {"fc.weight": [hidden, count * hidden], "midlayer.input_layernorm.weight": [hidden]}
    return Checkpoint(repo, config, source, tensors)


SGLANG = "sgl-project/sglang"
CHECKPOINTS = {
    c.repo: c
    for c in (
        _deepseek(
            "deepseek-ai/DeepSeek-V3-0324",
            f"{SGLANG} docs/basic_usage/deepseek_v3.md; DeepSeek-V3 config.json",
        ),
        _deepseek(
            "deepseek-ai/DeepSeek-V3.2-Exp",
            f"{SGLANG} docs/basic_usage/deepseek_v32.md; DeepSeek-V3.2-Exp config.json (index_* fields)",
            architectures=["DeepseekV32ForCausalLM"],
            model_type="deepseek_v32",
            index_n_heads=64,
            index_head_dim=128,
            index_topk=2048,
        ),
        _deepseek_v4(
            "deepseek-ai/DeepSeek-V4-Flash",
            f"{SGLANG} docs_new/cookbook/autoregressive/DeepSeek/DeepSeek-V4.mdx (the repo); its config.json as "
            "transcribed in public tests (alibaba/rtp-llm's FLASH_BASE_CONFIG, 'as published on HF', plus the "
            "Instruct repo's expert_dtype fp4 and ue8m0 fp8 quantization_config)",
        ),
        _kimi("moonshotai/Kimi-K2.5", "ai-dynamo/aiconfigurator model_configs (the Kimi-K2.5 layout)"),
        _kimi("moonshotai/Kimi-K2.6", "the Kimi-K2.5 layout (Kimi-K2.6 shares it)"),
        _glm(
            "zai-org/GLM-4.6-FP8",
            "Glm4MoeForCausalLM",
            "glm4_moe",
            92,
            5120,
            "GLM-4.5/4.6 shape (92 layers, hidden 5120), assumed",
            vocab_size=151552,
        ),
        _glm(
            "zai-org/GLM-4.7-FP8",
            "Glm4MoeForCausalLM",
            "glm4_moe",
            92,
            5120,
            "the GLM-4.6 shape, assumed",
            vocab_size=151552,
        ),
        _glm(
            "zai-org/GLM-4.7-Flash",
            "Glm4MoeLiteForCausalLM",
            "glm4_moe_lite",
            47,
            2048,
            "ai-dynamo/aiconfigurator zai-org--GLM-4.7-Flash_config.json",
            num_attention_heads=20,
            q_lora_rank=768,
            kv_lora_rank=512,
            qk_nope_head_dim=192,
            qk_rope_head_dim=64,
            v_head_dim=256,
            n_routed_experts=64,
            num_experts_per_tok=4,
            first_k_dense_replace=1,
            moe_intermediate_size=1536,
            intermediate_size=10240,
        ),
        _glm(
            "zai-org/GLM-5-FP8",
            "GlmMoeDsaForCausalLM",
            "glm_moe_dsa",
            78,
            6144,
            "ai-dynamo/aiconfigurator zai-org--GLM-5-FP8_config.json",
            q_lora_rank=2048,
            kv_lora_rank=512,
            qk_nope_head_dim=192,
            qk_rope_head_dim=64,
            v_head_dim=256,
            index_n_heads=32,
            index_head_dim=128,
            index_topk=2048,
            n_routed_experts=256,
        ),
        _eagle3(
            "specforge/deepseek-v3-671b-eagle3",
            "SpecForge configs/deepseek-v3-671b-eagle3.json",
            7168,
            129280,
            [1, 29, 57],
            draft_vocab_size=32000,
        ),
        _eagle3(
            "lightseekorg/kimi-k2.5-eagle3",
            "TorchSpec configs/draft_models/kimi_k25_eagle3.json (the training config: no ids; the published "
            "config is assumed to be it)",
            7168,
            163840,
            None,
        ),
        _eagle3(
            "AQ-MedAI/Kimi-K25-eagle3",
            f"{SGLANG} PR #19689; config assumed: SpecForge's ids for 61 layers",
            7168,
            163840,
            [1, 29, 57],
        ),
        _eagle3(
            "lightseekorg/kimi-k2.6-eagle3",
            "the kimi-k2.5-eagle3 layout, assumed",
            7168,
            163840,
            None,
        ),
        _eagle3(
            "thoughtworks/GLM-4.7-Flash-Eagle3",
            "capture layers 1,22,43 (its training scripts), assumed nested",
            2048,
            154880,
            [1, 22, 43],
        ),
        _eagle3(
            "seed/kimi-k2.5-eagle3",
            "../shared/seed: cat([embed, layer3, layer31]) served with config ids [2, 30, 58]",
            7168,
            163840,
            [2, 30, 58],
            at="top-level",
        ),
    )
}

LAYER_OUT = "-1 is the embedding output"


@dataclass(frozen=True)
class Launch:
    """A launch line as published (flags and hub ids as its source prints them; a host-specific
    value replaced by a placeholder), and the verdict due: the exit status of ``check`` and the
    verdict of every rule that is not ``ok``."""

    name: str
    source: str
    argv: tuple[str, ...]
    exit: int = 0
    verdicts: dict = field(default_factory=dict)
    gpu: str = "h200"
    why: str = ""
    here: bool = False
    """Whether a step only the serving machine can show is reported as not checked here."""


def _line(text: str) -> tuple[str, ...]:
    return tuple(text.split())


SPEC3 = "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
LAUNCHES = (
    Launch(
        "deepseek-v3-mtp",
        f"{SGLANG} docs/basic_usage/deepseek_v3.md (Multi-token Prediction)",
        _line(
            "--model-path deepseek-ai/DeepSeek-V3-0324 --speculative-algorithm EAGLE --trust-remote-code --tp 8"
        ),
        why="its own MTP layer as the draft, which the checkpoint holds",
    ),
    Launch(
        "deepseek-v3-pd-ep-mtp-decode",
        f"{SGLANG} issue #7998 (decode command; --cuda-graph-max-bs as 0.5.23 "
        "spells it, --cuda-graph-max-bs-decode, and --enable-deepep-moe as --moe-a2a-backend deepep)",
        _line(
            "--model-path deepseek-ai/DeepSeek-V3-0324 --disaggregation-ib-device mlx5_1 --disaggregation-mode "
            "decode --dist-init-addr 10.0.7.67:5757 --tp-size 16 --dp-size 16 --enable-dp-attention "
            "--decode-log-interval 1 --moe-a2a-backend deepep --page-size 64 --trust-remote-code "
            "--moe-dense-tp-size 1 --enable-dp-lm-head --disable-radix-cache --watchdog-timeout 1000000 "
            "--deepep-mode low_latency --mem-fraction-static 0.8 --max-running-requests 32 --context-length "
            "73728 --ep-num-redundant-experts 32 --disable-shared-experts-fusion --cuda-graph-max-bs-decode 2 "
            "--speculative-algorithm EAGLE --speculative-num-steps 2 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 3 --nnodes 2 --node-rank 0"
        ),
        here=True,
        why="the InfiniBand device exists only on the serving machine: not checked here",
    ),
    Launch(
        "deepseek-v3-pd-mtp-prefill-as-published",
        f"{SGLANG} issue #6684 (prefill command, as posted)",
        _line(
            "--model-path deepseek-ai/DeepSeek-V3-0324 --cuda-graph-max-bs 8 --tensor-parallel-size 2 "
            "--trust-remote-code --disaggregation-mode prefill --disaggregation-ib-device "
            "mlx5_1,mlx5_2,mlx5_3,mlx5_4 --speculative-algo EAGLE --speculative-num-steps 3 "
            "--speculative-eagle-topk 2 --speculative-num-draft-tokens 4 --chunked-prefill-size 0"
        ),
        exit=2,
        why="SGLang 0.5.23's parser refuses it: --cuda-graph-max-bs is ambiguous there",
    ),
    Launch(
        "deepseek-v3-pd-mtp-prefill",
        f"{SGLANG} issue #6684 (prefill command, --cuda-graph-max-bs-decode)",
        _line(
            "--model-path deepseek-ai/DeepSeek-V3-0324 --cuda-graph-max-bs-decode 8 --tensor-parallel-size 2 "
            "--trust-remote-code --disaggregation-mode prefill --disaggregation-ib-device "
            "mlx5_1,mlx5_2,mlx5_3,mlx5_4 --speculative-algo EAGLE --speculative-num-steps 3 "
            "--speculative-eagle-topk 2 --speculative-num-draft-tokens 4 --chunked-prefill-size 0"
        ),
        here=True,
    ),
    Launch(
        "deepseek-v32-mtp",
        f"{SGLANG} docs/basic_usage/deepseek_v32.md (MTP)",
        _line(
            "--model deepseek-ai/DeepSeek-V3.2-Exp --tp 8 --dp 8 --enable-dp-attention --speculative-algorithm "
            f"EAGLE {SPEC3}"
        ),
        why="resolves only where the CUDA driver answers: as on the H200",
    ),
    Launch(
        "deepseek-v32-ep-cp",
        f"{SGLANG} docs/basic_usage/deepseek_v32.md (context parallel)",
        _line(
            "--model deepseek-ai/DeepSeek-V3.2-Exp --tp 8 --ep 8 --dp 2 --enable-dp-attention "
            "--enable-nsa-prefill-context-parallel --max-running-requests 32"
        ),
        exit=2,
        why="a flag of an earlier SGLang: 0.5.23's parser does not know it",
    ),
    Launch(
        "deepseek-v32-pd-prefill",
        f"{SGLANG} docs/basic_usage/deepseek_v32.md (PD prefill; no InfiniBand flag)",
        _line(
            "--model-path deepseek-ai/DeepSeek-V3.2-Exp --disaggregation-mode prefill --tp 8 --dp 8 "
            "--enable-dp-attention --dist-init-addr 10.0.0.1:5000 --trust-remote-code "
            "--disaggregation-bootstrap-port 8998 --mem-fraction-static 0.9"
        ),
    ),
    Launch(
        "deepseek-v4-flash-mtp",
        f"{SGLANG} docs_new/src/snippets/configs/deepseek-ai/deepseek-v4.jsx (the DeepSeek-V4 cookbook's "
        "verified cell h200/flash/fp4/low-latency; --host and --port left out)",
        _line(
            "--trust-remote-code --model-path deepseek-ai/DeepSeek-V4-Flash --tp 4 --moe-runner-backend marlin "
            f"--speculative-algorithm EAGLE {SPEC3}"
        ),
        why="its own MTP layer under EAGLE with topk 1, which srt/arg_groups/deepseek_v4_hook.py:148-158 allows",
    ),
    Launch(
        "deepseek-v4-flash-eagle3-plugin",
        "the control: the DeepSeek-V4 cookbook line with --model-impl sglang_eagle3_embed and an EAGLE-3 draft "
        "(no V4 draft is published: SpecForge's DeepSeek-V3 draft stands in)",
        _line(
            "--trust-remote-code --model-path deepseek-ai/DeepSeek-V4-Flash --tp 4 --moe-runner-backend marlin "
            "--model-impl sglang_eagle3_embed --speculative-algorithm EAGLE3 --speculative-draft-model-path "
            f"specforge/deepseek-v3-671b-eagle3 {SPEC3}"
        ),
        exit=1,
        verdicts={"sglang-resolution": "error"},
        why="SGLang refuses EAGLE3 on DeepseekV4ForCausalLM itself (srt/arg_groups/deepseek_v4_hook.py:148-154), "
        "before the plugin's rules run",
    ),
    Launch(
        "deepseek-v4-flash-mtp-plugin",
        "the control: the DeepSeek-V4 cookbook line with --model-impl sglang_eagle3_embed",
        _line(
            "--trust-remote-code --model-path deepseek-ai/DeepSeek-V4-Flash --tp 4 --moe-runner-backend marlin "
            f"--model-impl sglang_eagle3_embed --speculative-algorithm EAGLE {SPEC3}"
        ),
        exit=1,
        verdicts={"target-not-deepseek": "error"},
        why="DeepseekV4ForCausalLM is not in the family the plugin serves: refused, dropping --model-impl",
    ),
    Launch(
        "kimi-k25-eagle3-cookbook",
        f"{SGLANG} docs_new/cookbook/autoregressive/Moonshotai/Kimi-K2.5.mdx (4.2.5)",
        _line(
            "--model-path moonshotai/Kimi-K2.5 --tp 8 --reasoning-parser kimi_k2 --tool-call-parser kimi_k2 "
            f"--speculative-algorithm=EAGLE3 {SPEC3} --speculative-draft-model-path lightseekorg/kimi-k2.5-eagle3 "
            "--trust-remote-code"
        ),
        verdicts={"draft-ids-missing": "warning"},
        why="no ids: stock serves its default layers, SpecForge's and TorchSpec's default too (the warning "
        "says so and how to make sure)",
    ),
    Launch(
        "kimi-k25-eagle3-aq-medai",
        f"{SGLANG} PR #19689",
        _line(
            "--model-path moonshotai/Kimi-K2.5 --trust-remote-code --mem-fraction-static 0.9 --tp-size 8 "
            "--speculative-algorithm EAGLE3 --speculative-draft-model-path AQ-MedAI/Kimi-K25-eagle3 "
            "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
        ),
        why="SpecForge's ids for 61 layers, read right by stock SGLang",
    ),
    Launch(
        "kimi-k25-eagle3-plugin",
        "the cookbook line with --model-impl sglang_eagle3_embed and the AQ-MedAI draft",
        _line(
            "--model-path moonshotai/Kimi-K2.5 --trust-remote-code --tp-size 8 --model-impl sglang_eagle3_embed "
            f"--speculative-algorithm EAGLE3 --speculative-draft-model-path AQ-MedAI/Kimi-K25-eagle3 {SPEC3}"
        ),
        why="the plugin keeps stock SGLang's reading of SpecForge's ids",
    ),
    Launch(
        "kimi-k26-eagle3-b200",
        f"{SGLANG} issue #23490 (Kimi-K2.6 + EAGLE3 on B200, the workaround applied)",
        _line(
            "--model-path moonshotai/Kimi-K2.6 --tp 8 --speculative-algorithm=EAGLE3 "
            f"{SPEC3} --speculative-draft-model-path lightseekorg/kimi-k2.6-eagle3 "
            "--speculative-draft-attention-backend trtllm_mha --trust-remote-code"
        ),
        gpu="b200",
        verdicts={"draft-ids-missing": "warning"},
        why="trtllm_mha is a Blackwell backend: checked as on a B200",
    ),
    Launch(
        "kimi-k26-eagle-with-eagle3-draft",
        f"{SGLANG} issue #25673 (--speculative-algo EAGLE with an EAGLE-3 draft)",
        _line(
            "--model-path moonshotai/Kimi-K2.6 --tp 8 --ep 8 --mem-fraction-static 0.78 --max-running-requests 8 "
            "--chunked-prefill-size 32768 --trust-remote-code --speculative-algo EAGLE "
            f"{SPEC3} --speculative-draft-model-path AQ-MedAI/Kimi-K25-eagle3"
        ),
        exit=1,
        verdicts={"eagle-with-eagle3-draft": "error"},
        why="an EAGLE-3 draft under EAGLE: the user reports an acceptance rate under 0.02",
    ),
    Launch(
        "glm46-mtp",
        f"{SGLANG} docs/basic_usage/glm45.md (GLM-4.6-FP8)",
        _line(
            "--model-path zai-org/GLM-4.6-FP8 --tp-size 8 --tool-call-parser glm45 --reasoning-parser glm45 "
            f"--speculative-algorithm EAGLE {SPEC3} --mem-fraction-static 0.9 --served-model-name glm-4.6-fp8 "
            "--enable-custom-logit-processor"
        ),
    ),
    Launch(
        "glm47-mtp",
        "zai-org/GLM-4.5 README (GLM-4.7-FP8)",
        _line(
            "--model-path zai-org/GLM-4.7-FP8 --tp-size 8 --tool-call-parser glm47 --reasoning-parser glm45 "
            f"--speculative-algorithm EAGLE {SPEC3} --mem-fraction-static 0.8 --served-model-name glm-4.7-fp8"
        ),
    ),
    Launch(
        "glm47-flash-mtp",
        "GLM-4.7-Flash model card (sglang 0.5.8)",
        _line(
            "--model-path zai-org/GLM-4.7-Flash --tp-size 4 --tool-call-parser glm47 --reasoning-parser glm45 "
            f"--speculative-algorithm EAGLE {SPEC3} --mem-fraction-static 0.8 --served-model-name glm-4.7-flash"
        ),
    ),
    Launch(
        "glm47-flash-eagle3",
        "thoughtworks/GLM-4.7-Flash-Eagle3 README (RTX 4090 x4)",
        _line(
            "--model-path zai-org/GLM-4.7-Flash --tp-size 4 --speculative-algorithm EAGLE3 "
            "--speculative-draft-model-path thoughtworks/GLM-4.7-Flash-Eagle3 --speculative-num-steps 3 "
            "--speculative-eagle-topk 4 --speculative-num-draft-tokens 16 --mem-fraction-static 0.8 "
            "--disable-cuda-graph"
        ),
        why="first id 1: stock's first-id heuristic reads the outputs of layers 1, 22, 43, as trained",
    ),
    Launch(
        "glm5-mtp",
        f"{SGLANG} docs_new/cookbook/autoregressive/GLM/GLM-5.mdx (FP8 on H200)",
        _line(
            "--model-path zai-org/GLM-5-FP8 --tp 8 --tool-call-parser glm47 --reasoning-parser glm45 "
            f"--speculative-algorithm EAGLE {SPEC3} --enable-flashinfer-allreduce-fusion --mem-fraction-static 0.85"
        ),
        why="a DSA model: resolves only where the CUDA driver answers",
    ),
    Launch(
        "deepseek-v3-tokenspeed-on-h200",
        f"{SGLANG} srt/arg_groups/overrides.py:1244-1247 (a Blackwell backend)",
        _line("--model-path deepseek-ai/DeepSeek-V3-0324 --tp 8 --attention-backend tokenspeed_mla"),
        exit=1,
        verdicts={"sglang-resolution": "error"},
        why="tokenspeed_mla needs an SM100 GPU: refused as on an H200, a true refusal",
    ),
    Launch(
        "deepseek-v3-tokenspeed-on-b200",
        f"{SGLANG} srt/arg_groups/overrides.py:1244-1247 (0.5.22 requires the fp8 KV cache, 0.5.23 sets it)",
        _line(
            "--model-path deepseek-ai/DeepSeek-V3-0324 --tp 8 --attention-backend tokenspeed_mla "
            "--kv-cache-dtype fp8_e4m3"
        ),
        gpu="b200",
    ),
    Launch(
        "seed",
        "../shared/seed (Kimi-K2.5, ids at the top level, the seed's flags)",
        _line(
            "--model-path moonshotai/Kimi-K2.5 --trust-remote-code --tp 8 --speculative-algorithm EAGLE3 "
            "--speculative-draft-model-path seed/kimi-k2.5-eagle3 --speculative-num-steps 1 "
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 16"
        ),
        exit=1,
        verdicts={"draft-tokens-rewritten": "error"},
        why="16 draft tokens silently become 2. The top-level ids are speculators' default, which SGLang's "
        "defaults equal: that the draft was trained on other layers only probe can show",
    ),
)


def _sparse_safetensors(path: Path, tensors: dict) -> None:
    """A safetensors file whose header describes ``tensors`` (bf16, name -> shape) and whose data is
    a hole: as long as the header says, a few KB on disk."""
    header, offset = {}, 0
    for name, shape in sorted(tensors.items()):
        size = 2
        for d in shape:
            size *= d
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + offset)


def stand_in(checkpoint: Checkpoint, root: Path) -> Path:
    """The folder standing in for ``checkpoint``: its config and sparse weights."""
    folder = Path(root) / checkpoint.repo.replace("/", "--")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(checkpoint.config, indent=1))
    _sparse_safetensors(folder / "model.safetensors", checkpoint.tensors)
    return folder
