"""A tiny DeepSeek-V3 target whose greedy continuation depends on its input (torch + transformers).

A randomly initialised target collapses to repeating one token, which makes speculation tests
meaningless. This one is trained briefly on a synthetic order-2 language: the next token is
``table[prev2 % groups][prev1]`` with probability ``p_best`` (else a second candidate), so the
target has to read the two previous tokens, and an EAGLE-3 draft, which sees the embedding of the
newest token itself, has to read the older one from the target's hidden states (the embedding
output carries it exactly). Built on demand, cached by its spec, reproducible from its seed.
The EAGLE-3 draft trained on it is the next part of the wiring doctor (issue #4).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

__all__ = ["Language", "TargetSpec", "build_target", "default_cache_dir", "train_target"]


@dataclass(frozen=True)
class TargetSpec:
    num_layers: int = 4
    hidden: int = 64
    vocab: int = 128
    heads: int = 4
    experts: int = 4
    groups: int = 4
    p_best: float = 0.85
    steps: int = 300
    batch: int = 32
    seq_len: int = 32
    lr: float = 3e-3
    seed: int = 0

    @property
    def key(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return f"target-L{self.num_layers}-H{self.hidden}-{hashlib.sha1(blob).hexdigest()[:10]}"


class Language:
    """The synthetic order-2 language of a :class:`TargetSpec` (fixed by its seed)."""

    def __init__(self, spec: TargetSpec):
        self.spec = spec
        gen = torch.Generator().manual_seed(spec.seed)
        self.table = torch.randint(spec.vocab, (spec.groups, spec.vocab, 2), generator=gen)

    def best_next(self, prev2: torch.Tensor, prev1: torch.Tensor) -> torch.Tensor:
        return self.table[prev2 % self.spec.groups, prev1][..., 0]

    def sample(self, batch: int, length: int, gen: torch.Generator) -> torch.Tensor:
        x = torch.empty(batch, length, dtype=torch.long)
        x[:, :2] = torch.randint(self.spec.vocab, (batch, 2), generator=gen)
        for t in range(2, length):
            candidates = self.table[x[:, t - 2] % self.spec.groups, x[:, t - 1]]
            second = (torch.rand(batch, generator=gen) >= self.spec.p_best).long()
            x[:, t] = candidates.gather(1, second[:, None])[:, 0]
        return x


def target_config(spec: TargetSpec):
    from transformers import DeepseekV3Config

    return DeepseekV3Config(
        vocab_size=spec.vocab, hidden_size=spec.hidden, intermediate_size=2 * spec.hidden,
        moe_intermediate_size=spec.hidden // 2, num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.heads, num_key_value_heads=spec.heads, n_routed_experts=spec.experts,
        n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=1, moe_layer_freq=1,
        n_group=1, topk_group=1, kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=8,
        qk_nope_head_dim=16, v_head_dim=16, max_position_embeddings=256, tie_word_embeddings=False,
        topk_method="noaux_tc", scoring_func="sigmoid", norm_topk_prob=True,  # read by SGLang
        architectures=["DeepseekV3ForCausalLM"],
    )  # fmt: skip


def train_target(spec: TargetSpec):
    """Train the target on its language (AdamW, cross entropy); returns it in eval mode."""
    from transformers import DeepseekV3ForCausalLM

    torch.manual_seed(spec.seed)
    model = DeepseekV3ForCausalLM(target_config(spec))
    language = Language(spec)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    gen = torch.Generator().manual_seed(spec.seed + 1)
    model.train()
    for _ in range(spec.steps):
        tokens = language.sample(spec.batch, spec.seq_len, gen)
        loss = model(tokens, labels=tokens).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def default_cache_dir() -> Path:
    return Path(os.environ.get("SGLANG_EAGLE3_EMBED_CACHE", Path.home() / ".cache" / "sglang_eagle3_embed"))


def build_target(spec: TargetSpec = TargetSpec(), cache_dir: Path | None = None) -> Path:
    """The trained target's folder (HF format, loadable by SGLang), built once per spec."""
    folder = Path(cache_dir or default_cache_dir()) / spec.key
    if (folder / "config.json").exists():
        return folder
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    train_target(spec).save_pretrained(tmp, safe_serialization=True)
    (tmp / "tiny_target_spec.json").write_text(json.dumps(asdict(spec), indent=2))
    tmp.rename(folder)
    return folder
