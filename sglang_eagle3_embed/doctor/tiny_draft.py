"""The tiny EAGLE-3 draft of the tiny pair: its ``config.json`` and its distillation on a tiny
target (:class:`~sglang_eagle3_embed.doctor.eagle3_draft.Eagle3Draft`, the twin of SGLang's
``LlamaForCausalLMEagle3``), unrolled over chained steps as EAGLE-3 trains.
"""

from __future__ import annotations

import torch
from torch import nn

from sglang_eagle3_embed.core.capture.draft_config import LLAMA_DRAFT, MLA_DRAFT
from sglang_eagle3_embed.doctor.eagle3_draft import Eagle3Draft

__all__ = ["agreement", "draft_config_dict", "mla_draft_config_dict", "train_draft"]


def mla_draft_config_dict(target_config, ids: list[int]) -> dict:
    """An SGLang-loadable ``config.json`` for an MLA draft (``Eagle3DeepseekV2ForCausalLM``, as
    Kimi-K2.5's published MLA drafts): the target's width and MLA ranks, a query rank of the
    width (SGLang's MLA draft needs one), a dense MLP."""
    hidden = target_config.hidden_size
    config = draft_config_dict(
        hidden, target_config.vocab_size, target_config.num_attention_heads, ids, hidden
    )
    config.update(
        architectures=[MLA_DRAFT], model_type="deepseek_v3", q_lora_rank=hidden,
        kv_lora_rank=target_config.kv_lora_rank, qk_nope_head_dim=target_config.qk_nope_head_dim,
        qk_rope_head_dim=target_config.qk_rope_head_dim, v_head_dim=target_config.v_head_dim,
    )  # fmt: skip
    return config


def draft_config_dict(hidden: int, vocab: int, heads: int, ids: list[int], target_hidden: int) -> dict:
    """An SGLang-loadable ``config.json`` for the draft (``LlamaForCausalLMEagle3``)."""
    return {
        "architectures": [LLAMA_DRAFT],
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
    mla: bool = False,
    config_overrides: dict | None = None,
):
    """Distil an EAGLE-3 draft for ``target`` on ``cat`` of the tensors named by ``ids`` (read in
    ``convention``, layer outputs by default), unrolled over ``ttt_steps`` chained steps as EAGLE-3
    trains ("training-time test"), so that later chain steps are useful too. ``mla``: an MLA draft
    (:func:`mla_draft_config_dict`) instead of a Llama one; ``config_overrides``: keys of the draft's
    config set otherwise (its norms' epsilon, its MLP width)."""
    from sglang_eagle3_embed.core.capture.ids import Convention, id_to_capture_index
    from sglang_eagle3_embed.doctor.chain import draft_chain

    config = target.config
    indices = [id_to_capture_index(i, convention or Convention.LAYER_OUTPUT) for i in ids]
    torch.manual_seed(seed)
    draft = Eagle3Draft(
        {
            **(
                mla_draft_config_dict(config, ids)
                if mla
                else draft_config_dict(
                    config.hidden_size, config.vocab_size, config.num_attention_heads, ids, config.hidden_size
                )
            ),
            **(config_overrides or {}),
        }
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
