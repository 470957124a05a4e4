"""The EAGLE-3 draft as the probe runs it: a trainable twin of SGLang's EAGLE-3 drafts (torch +
transformers; no sglang), and :func:`load_draft`, which reads a draft folder into it.

SGLang only runs EAGLE-3 drafts; scoring a real draft offline, or training a tiny one
(:mod:`sglang_eagle3_embed.doctor.tiny_draft`), needs a differentiable copy with the same parameter
names, so that a checkpoint saved from it loads into SGLang 0.5.23 unchanged. Both of SGLang's
EAGLE-3 draft architectures have one layer of the same shape: ``fc`` maps the concatenated target
hidden states to the draft width, the layer attends over ``cat([input_layernorm(embeds),
hidden_norm(fc(aux))])`` (a 2H-wide input) with the fc output as residual, then the MLP, and a final
norm on ``mlp_out + residual``, whose pre-norm sum feeds the next draft step. They differ in the
attention:

- ``LlamaForCausalLMEagle3`` (``srt/models/llama_eagle3.py:93-121,237-270``; ``midlayer.*`` loads as
  ``layers.0``, 325-380): Llama attention with a 2H-wide qkv; transformers' Llama modules;
- ``Eagle3DeepseekV2ForCausalLM``, the MLA drafts of Kimi-K2.5/K2.6 (``srt/models/kimi_k25_eagle3.py:
  61-196, 258-314``; ``layers.0.*`` loads as ``midlayer``, 428-500): DeepSeek-V2 multi-latent attention
  whose ``q_a_proj`` and ``kv_a_proj_with_mqa`` read the 2H-wide input, and a dense MLP;
  transformers' DeepSeek-V3 modules (interleaved rope, as SGLang's non-neox rope).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from sglang_eagle3_embed.core.capture.draft_config import (
    DRAFT_ARCHS,
    LLAMA_DRAFT,
    MLA_DRAFT,
    fc_captures,
    fc_width,
    read_draft_ids,
)
from sglang_eagle3_embed.core.errors import InputError, positive_int
from sglang_eagle3_embed.core.readers.model_folder import read_config
from sglang_eagle3_embed.doctor.weights import read_safetensors

__all__ = ["Eagle3Draft", "load_draft"]


class _MidLayer(nn.Module):
    def __init__(self, config):
        from transformers.models.llama.modeling_llama import LlamaAttention, LlamaMLP, LlamaRMSNorm

        super().__init__()
        hidden = config.hidden_size
        wide = type(config)(**{**config.to_dict(), "hidden_size": 2 * hidden, "head_dim": config.head_dim})
        wide._attn_implementation = "sdpa"
        self.self_attn = LlamaAttention(wide, layer_idx=0)
        self.self_attn.o_proj = nn.Linear(config.num_attention_heads * config.head_dim, hidden, bias=False)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(hidden, eps=config.rms_norm_eps)
        self.hidden_norm = LlamaRMSNorm(hidden, eps=config.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(hidden, eps=config.rms_norm_eps)


class _MLAMidLayer(nn.Module):
    def __init__(self, config):
        from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
            DeepseekV3Attention,
            DeepseekV3MLP,
            DeepseekV3RMSNorm,
        )

        super().__init__()
        hidden, eps = config.hidden_size, config.rms_norm_eps
        config._attn_implementation = "sdpa"
        self.self_attn = attn = DeepseekV3Attention(config, layer_idx=0)
        # the 2H-wide input reaches MLA's down-projections (kimi_k25_eagle3.py:113-123)
        attn.q_a_proj = nn.Linear(2 * hidden, config.q_lora_rank, bias=False)
        attn.kv_a_proj_with_mqa = nn.Linear(
            2 * hidden, config.kv_lora_rank + config.qk_rope_head_dim, bias=False
        )
        attn.q_a_layernorm.variance_epsilon = attn.kv_a_layernorm.variance_epsilon = eps
        self.mlp = DeepseekV3MLP(config)
        self.input_layernorm = DeepseekV3RMSNorm(hidden, eps=eps)
        self.hidden_norm = DeepseekV3RMSNorm(hidden, eps=eps)
        self.post_attention_layernorm = DeepseekV3RMSNorm(hidden, eps=eps)


class Eagle3Draft(nn.Module):
    """``forward(embeds [B,T,H], aux [B,T,K*Ht]) -> logits [B,T,V]`` with causal attention; the
    architecture (Llama or MLA attention) is the config's. Its fc reads ``captures`` target states
    (default: as many as SGLang's draft counts in the config, :func:`read_draft_ids`)."""

    def __init__(self, config_dict: dict, captures: int | None = None):
        super().__init__()
        fields = {k: v for k, v in config_dict.items() if k != "eagle_config"}
        archs = config_dict.get("architectures") or ()
        self.architecture = MLA_DRAFT if MLA_DRAFT in archs else LLAMA_DRAFT
        if self.architecture == MLA_DRAFT:
            from transformers import DeepseekV3Config
            from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
                DeepseekV3RMSNorm as Norm,
            )
            from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
                DeepseekV3RotaryEmbedding as Rotary,
            )

            fields["model_type"] = "deepseek_v3"
            self.config = DeepseekV3Config(**fields)
            layer = _MLAMidLayer
        else:
            from transformers import LlamaConfig
            from transformers.models.llama.modeling_llama import LlamaRMSNorm as Norm
            from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding as Rotary

            self.config = LlamaConfig(**fields)
            self.config.head_dim = self.config.hidden_size // self.config.num_attention_heads
            layer = _MidLayer
        hidden = self.config.hidden_size
        self.captures = read_draft_ids(config_dict).draft_num_aux if captures is None else captures
        self.target_hidden = config_dict["target_hidden_size"]
        self.fc = nn.Linear(fc_width(self.captures, self.target_hidden), hidden, bias=False)
        self.midlayer = layer(self.config)
        self.norm = Norm(hidden, eps=self.config.rms_norm_eps)
        self.lm_head = nn.Linear(hidden, config_dict["draft_vocab_size"], bias=False)
        self.rotary = Rotary(self.config)

    def residual_in(self, aux: torch.Tensor) -> torch.Tensor:
        """``fc(aux)`` for target features; the draft's own hidden states pass as they are
        (SGLang applies fc only when the width differs, ``llama_eagle3.py:238``)."""
        return aux if aux.shape[-1] == self.config.hidden_size else self.fc(aux)

    def run(self, embeds, residual, positions=None, mask=None):
        """One pass of the layer: returns ``(logits, pre-norm hidden)``; the pre-norm hidden is what
        SGLang feeds the next draft step (``llama_eagle3.py:268-270``). ``mask`` is a boolean
        ``[T, T]`` attention mask (True = may attend); None means causal."""
        layer = self.midlayer
        x = torch.cat([layer.input_layernorm(embeds), layer.hidden_norm(residual)], dim=-1)
        if positions is None:
            positions = torch.arange(embeds.shape[1], device=embeds.device)
        cos_sin = self.rotary(x, positions[None].expand(embeds.shape[0], -1))
        attn_mask = None if mask is None else mask[None, None].expand(embeds.shape[0], 1, -1, -1)
        attn, _ = layer.self_attn(x, position_embeddings=cos_sin, attention_mask=attn_mask)
        residual = attn + residual
        pre_norm = layer.mlp(layer.post_attention_layernorm(residual)) + residual
        return self.lm_head(self.norm(pre_norm)), pre_norm

    def hidden(self, embeds: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:
        return self.norm(self.run(embeds, self.residual_in(aux))[1])

    def forward(self, embeds: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:
        return self.run(embeds, self.residual_in(aux))[0]

    def checkpoint(self) -> dict[str, torch.Tensor]:
        """Weights named as SGLang's loader expects (rotary buffers dropped)."""
        return {k: v.detach().clone() for k, v in self.state_dict().items() if not k.startswith("rotary")}


def load_draft(folder: Path, device: str = "cpu"):
    """The draft in ``folder`` as an :class:`Eagle3Draft` and its token map (``d2t``: draft vocab
    index -> target token id, or None when the vocabularies are equal). The number of captures it
    reads comes from its fc weight, which is what it was trained on."""
    config = read_config(folder, folder_only=True)
    archs = config.get("architectures") if isinstance(config.get("architectures"), list) else []
    if not any(a in DRAFT_ARCHS for a in archs):
        raise InputError(f"{folder}: probe reads {' and '.join(DRAFT_ARCHS)} drafts, got {archs}")
    config.setdefault("draft_vocab_size", config.get("vocab_size"))
    config["target_hidden_size"] = config.get("target_hidden_size") or config.get("hidden_size")
    fields = ("hidden_size", "vocab_size", "num_attention_heads", "draft_vocab_size", "target_hidden_size")
    if MLA_DRAFT in archs:
        fields += ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    missing = [k for k in fields if not positive_int(config.get(k))]
    if missing:
        raise InputError(f"{folder}/config.json has no positive integer {', '.join(missing)}")
    weights = {}
    for name, tensor in read_safetensors(folder).items():
        name = name.removeprefix("model.").replace("layers.0.", "midlayer.")
        weights[name] = tensor
    d2t = weights.pop("d2t", None)
    weights.pop("t2d", None)
    fc = weights.get("fc.weight")
    target_hidden = config["target_hidden_size"]
    captures = fc_captures(fc.shape[1], target_hidden) if fc is not None and fc.dim() == 2 else None
    if captures is None:
        shape = None if fc is None else tuple(fc.shape)
        raise InputError(
            f"{folder}: its fc.weight {shape} does not read a whole number of captures of "
            f"target_hidden_size {target_hidden}"
        )
    try:
        # on the meta device: every parameter comes from the weights, so none is initialised
        # (random numbers for a draft of Kimi-K2.5's width cost more than reading its weights)
        with torch.device("meta"):
            draft = Eagle3Draft(config, captures)
    except Exception as exc:  # transformers validates the fields its own way (strict dataclasses)
        raise InputError(
            f"--draft {folder}: its config.json cannot build the draft's layer "
            f"({type(exc).__name__}: {str(exc)[:200]}); use the draft's original config.json"
        ) from None
    dtypes = {k: p.dtype for k, p in draft.named_parameters()}
    weights = {k: v.to(dtypes[k]) if k in dtypes else v for k, v in weights.items()}
    try:
        missing, unexpected = draft.load_state_dict(weights, strict=False, assign=True)
    except RuntimeError as exc:
        raise InputError(f"{folder}: its weights do not match its config.json: {exc}") from None
    missing = [m for m in missing if not m.startswith("rotary") and m != "embed_tokens.weight"]
    if missing or [u for u in unexpected if u != "embed_tokens.weight"]:
        raise InputError(
            f"{folder}: weights do not match the draft config: missing {missing}, unexpected {unexpected}"
        )
    draft.rotary = type(draft.rotary)(draft.config)  # its buffers are computed, not loaded
    token_map = None if d2t is None else (torch.arange(d2t.numel()) + d2t).to(device)
    return draft.to(device).eval(), token_map
