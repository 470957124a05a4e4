"""A trainable twin of SGLang's ``LlamaForCausalLMEagle3`` (torch + transformers; no sglang).

SGLang only runs EAGLE-3 drafts; training one needs a differentiable copy with the same parameter
names, so that a checkpoint saved from it loads into SGLang 0.5.23 unchanged
(``srt/models/llama_eagle3.py:325-380`` maps ``midlayer.*`` to ``layers.0``). The layer mirrors
``srt/models/llama_eagle3.py:93-121,237-270``: ``fc`` maps the concatenated target hidden states
to the draft width, the single layer attends over ``cat([input_layernorm(embeds),
hidden_norm(fc(aux))])`` (a 2H-wide qkv) with the fc output as residual, then the MLP, and a final
norm on ``mlp_out + residual``. Building blocks are transformers' Llama modules.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Eagle3Draft", "draft_config_dict"]


def draft_config_dict(hidden: int, vocab: int, heads: int, ids: list[int], target_hidden: int) -> dict:
    """An SGLang-loadable ``config.json`` for the draft (``LlamaForCausalLMEagle3``)."""
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "num_hidden_layers": 1,
        "vocab_size": vocab,
        "draft_vocab_size": vocab,
        "target_hidden_size": target_hidden,
        "max_position_embeddings": 256,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(ids), "use_aux_hidden_state": True},
    }


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


class Eagle3Draft(nn.Module):
    """``forward(embeds [B,T,H], aux [B,T,K*Ht]) -> logits [B,T,V]`` with causal attention."""

    def __init__(self, config_dict: dict):
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding

        super().__init__()
        fields = {k: v for k, v in config_dict.items() if k != "eagle_config"}
        self.config = LlamaConfig(**fields)
        self.config.head_dim = self.config.hidden_size // self.config.num_attention_heads
        ids = config_dict["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
        hidden = self.config.hidden_size
        self.target_hidden = config_dict["target_hidden_size"]
        self.fc = nn.Linear(len(ids) * self.target_hidden, hidden, bias=False)
        self.midlayer = _MidLayer(self.config)
        self.norm = LlamaRMSNorm(hidden, eps=self.config.rms_norm_eps)
        self.lm_head = nn.Linear(hidden, config_dict["draft_vocab_size"], bias=False)
        self.rotary = LlamaRotaryEmbedding(self.config)

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


def target_states(target, tokens: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """HF ``output_hidden_states`` (index 0 = embedding output) and the target's greedy tokens."""
    with torch.no_grad():
        out = target(tokens, output_hidden_states=True)
    return list(out.hidden_states), out.logits.argmax(-1)


def draft_inputs(target, states, greedy, tokens, capture_indices):
    """EAGLE-3 step 1: at position t the draft reads aux_t and embed(x_{t+1}) and should predict the
    target's greedy token after x_{t+1}. Returns (embeds, aux, labels) over positions 0..T-2."""
    embed = target.get_input_embeddings()
    with torch.no_grad():
        embeds = embed(tokens[:, 1:])
    aux = torch.cat([states[i][:, :-1] for i in capture_indices], dim=-1)
    return embeds, aux, greedy[:, 1:]


def chain_targets(tokens: torch.Tensor, greedy: torch.Tensor, steps: int):
    """Training-time test inputs and labels for :func:`~sglang_eagle3_embed.doctor.chain.draft_chain`:
    step ``j`` at start ``t`` embeds the true ``tokens[t+j]`` and should predict ``greedy[t+j]``
    (the target's next token there); starts past the end are masked out."""
    batch, length = tokens.shape
    n = length - 1
    feed, labels, valid = [], [], []
    for j in range(1, steps + 1):
        index = torch.arange(n, device=tokens.device) + j
        ok = index <= length - 1
        index = index.clamp(max=length - 1)
        labels.append(greedy[:, index])
        valid.append(ok.expand(batch, n))
        if j < steps:
            feed.append(tokens[:, (torch.arange(n, device=tokens.device) + j + 1).clamp(max=length - 1)])
    return feed, labels, valid


def train_draft(
    target,
    language,
    ids: list[int],
    *,
    convention=None,
    steps: int = 300,
    ttt_steps: int = 3,
    batch: int = 32,
    seq_len: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    device: str = "cpu",
):
    """Distil an EAGLE-3 draft for ``target`` on ``cat`` of the tensors named by ``ids`` (read in
    ``convention``, layer outputs by default), unrolled over ``ttt_steps`` chained steps as EAGLE-3
    trains ("training-time test"), so that later chain steps are useful too."""
    from sglang_eagle3_embed.core.ids import Convention, id_to_capture_index
    from sglang_eagle3_embed.doctor.chain import draft_chain

    config = target.config
    indices = [id_to_capture_index(i, convention or Convention.LAYER_OUTPUT) for i in ids]
    torch.manual_seed(seed)
    draft = Eagle3Draft(
        draft_config_dict(
            config.hidden_size, config.vocab_size, config.num_attention_heads, ids, config.hidden_size
        )
    )
    draft.to(device)
    target.to(device)
    embedding = target.get_input_embeddings()

    def frozen(x):
        with torch.no_grad():
            return embedding(x)

    optimizer = torch.optim.AdamW(draft.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed + 2)
    for _ in range(steps):
        tokens = language.sample(batch, seq_len, gen).to(device)
        states, greedy = target_states(target, tokens)
        aux = torch.cat([states[i] for i in indices], dim=-1)
        feed, labels, valid = chain_targets(tokens, greedy, ttt_steps)
        logits = draft_chain(draft, frozen, tokens, aux, ttt_steps, feed=feed)
        loss = sum(
            0.8**j * nn.functional.cross_entropy(lg[ok], lb[ok])
            for j, (lg, lb, ok) in enumerate(zip(logits, labels, valid))
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    target.cpu()
    return draft.cpu().eval()


def agreement(draft, target, tokens: torch.Tensor, capture_indices: list[int]) -> float:
    """Top-1 agreement of the draft's first step with the target, fed ``capture_indices``."""
    states, greedy = target_states(target, tokens)
    embeds, aux, labels = draft_inputs(target, states, greedy, tokens, capture_indices)
    with torch.no_grad():
        return (draft(embeds, aux).argmax(-1) == labels).float().mean().item()
