"""A tiny DeepSeek-V3 target whose greedy continuation depends on its input (torch + transformers).

A randomly initialised target collapses to repeating one token, which makes speculation tests
meaningless. This one is trained briefly on a synthetic language: the first token picks one of
``groups`` topics, and each next token is ``table[topic][previous token]`` with probability
``p_best`` (else a second candidate). The target must carry the topic from position 0 through its
layers; an EAGLE-3 draft never sees the first token in its own inputs, so it has to read the topic
from the target's hidden states: the draft really depends on the tensors it is fed.

Like a real LLM's, the embedding output is small (``embed_std``, frozen) and the residual stream
grows with depth (``growth``: layer ``i``'s output projections start ``growth**i`` larger), so the
embedding output and the layer outputs have different distributions, and a draft trained on
``cat([embedding, out_a, out_b])`` breaks when another tensor takes the embedding's place (the
failure in ``../shared/seed/``). Built on demand, cached by its spec, reproducible from its seed.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.doctor import cache
from sglang_eagle3_embed.doctor.tokenizer import write_tokenizer

__all__ = ["Language", "TargetSpec", "build_target", "cache_root", "default_cache_dir", "train_target"]


FOLDER_FORMAT = 3
"""What a target folder holds, in its cache key: 2 adds the tokenizer and drops the begin and end
token ids (the language has neither); 3 gives the tokenizer an unknown token."""


@dataclass(frozen=True)
class TargetSpec:
    num_layers: int = 7
    hidden: int = 64
    vocab: int = 128
    heads: int = 4
    experts: int = 4
    kv_lora_rank: int = 16  # GPU: SGLang's triton MLA decode wants kv_lora_rank + qk_rope in (288, 576)
    qk_rope: int = 8
    qk_nope: int = 16
    v_head: int = 16
    groups: int = 8
    embed_std: float = 0.005
    growth: float = 1.5
    p_best: float = 0.85
    steps: int = 400
    batch: int = 32
    seq_len: int = 32
    lr: float = 3e-3
    seed: int = 0

    @property
    def key(self) -> str:
        blob = json.dumps({**asdict(self), "format": FOLDER_FORMAT}, sort_keys=True).encode()
        return f"target-L{self.num_layers}-H{self.hidden}-{hashlib.sha1(blob).hexdigest()[:10]}"

    def validate(self) -> None:
        """Raise :class:`InputError` for sizes the target or its draft cannot be built with."""
        problems = []
        if self.num_layers < 1:
            problems.append(f"--layers {self.num_layers}: a target needs at least one layer")
        if self.heads < 1:
            problems.append(f"--heads {self.heads}: at least one attention head")
        elif self.hidden < 2 * self.heads or self.hidden % (2 * self.heads):
            problems.append(
                f"--hidden {self.hidden}: must be a positive multiple of 2 x --heads ({2 * self.heads}), "
                f"so that the draft's attention heads have an even (rotary) width"
            )
        if self.vocab < self.groups:
            problems.append(
                f"--vocab {self.vocab}: the synthetic language needs at least {self.groups} tokens "
                f"(one per topic)"
            )
        if problems:
            raise InputError("; ".join(problems))


GPU_TARGET = TargetSpec(
    num_layers=16, hidden=128, kv_lora_rank=256, qk_rope=32, qk_nope=32, v_head=32, growth=1.2
)
"""The GPU-sized target: deeper, and MLA dims that SGLang's triton kernels accept."""


class Language:
    """The synthetic topic language of a :class:`TargetSpec` (fixed by its seed)."""

    def __init__(self, spec: TargetSpec):
        self.spec = spec
        gen = torch.Generator().manual_seed(spec.seed)
        self.table = torch.randint(spec.vocab, (spec.groups, spec.vocab, 2), generator=gen)

    def best_next(self, first: torch.Tensor, prev1: torch.Tensor) -> torch.Tensor:
        return self.table[first % self.spec.groups, prev1][..., 0]

    def sample(self, batch: int, length: int, gen: torch.Generator) -> torch.Tensor:
        x = torch.empty(batch, length, dtype=torch.long)
        x[:, :2] = torch.randint(self.spec.vocab, (batch, 2), generator=gen)
        for t in range(2, length):
            candidates = self.table[x[:, 0] % self.spec.groups, x[:, t - 1]]
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
        n_group=1, topk_group=1, kv_lora_rank=spec.kv_lora_rank, q_lora_rank=None,
        qk_rope_head_dim=spec.qk_rope, qk_nope_head_dim=spec.qk_nope, v_head_dim=spec.v_head,
        max_position_embeddings=256, tie_word_embeddings=False,
        topk_method="noaux_tc", scoring_func="sigmoid", norm_topk_prob=True,  # read by SGLang
        architectures=["DeepseekV3ForCausalLM"], bos_token_id=None, eos_token_id=None,
    )  # fmt: skip


def train_target(spec: TargetSpec, device: str = "cpu", config=None, prepare=None):
    """Train the target on its language (AdamW, cross entropy); returns it in eval mode, on the CPU.
    ``config``: the model's config when it is not ``target_config(spec)`` (a shape ``TargetSpec``
    cannot express); ``prepare``: called with the new model before training (a change its config
    cannot express). Bit-reproducible on the CPU; ``device="cuda"`` is faster but not bitwise
    reproducible."""
    from transformers import DeepseekV3ForCausalLM

    torch.manual_seed(spec.seed)
    model = DeepseekV3ForCausalLM(target_config(spec) if config is None else config)
    if prepare is not None:
        prepare(model)
    language = Language(spec)
    if spec.embed_std:
        embedding = model.get_input_embeddings().weight
        with torch.no_grad():
            embedding.normal_(0.0, spec.embed_std)
        embedding.requires_grad_(False)
    if spec.growth != 1.0:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith(("o_proj.weight", "down_proj.weight")):
                    p.mul_(spec.growth ** int(name.split(".")[2]))
    model.to(device)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=spec.lr)
    gen = torch.Generator().manual_seed(spec.seed + 1)
    model.train()
    for _ in range(spec.steps):
        tokens = language.sample(spec.batch, spec.seq_len, gen).to(device)
        loss = model(tokens, labels=tokens).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.cpu().eval()


CACHE_ENV = "SGLANG_EAGLE3_EMBED_CACHE"


def default_cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "sglang_eagle3_embed"))


def cache_root(cache_dir: Path | str | None = None) -> Path:
    """The cache folder: ``cache_dir`` (``--cache``), else ``$SGLANG_EAGLE3_EMBED_CACHE``, else
    ``~/.cache/sglang_eagle3_embed``. Raises :class:`~sglang_eagle3_embed.doctor.cache.CacheError`
    when it can never be a folder (:func:`~sglang_eagle3_embed.doctor.cache.not_a_folder`); it need
    not exist yet."""
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    problem = cache.not_a_folder(root)
    if problem:
        if cache_dir:
            named = f"--cache {root}"
        else:
            named = f"{CACHE_ENV}={root}" if CACHE_ENV in os.environ else f"the default cache {root}"
        raise cache.CacheError(
            f"{named} {problem}: point {cache.CHOOSE} at a folder (it is created if absent)."
        )
    return root


def build_target(spec: TargetSpec = TargetSpec(), cache_dir: Path | None = None, device: str = "cpu") -> Path:
    """The trained target's folder (HF format, loadable by SGLang), built once per spec and
    verified against its manifest on every call (:func:`sglang_eagle3_embed.doctor.cache.ensure`:
    a complete folder is read without a lock; a build or a repair holds the folder's lock)."""
    spec.validate()
    folder = cache_root(cache_dir) / spec.key

    def build(tmp: Path) -> None:
        train_target(spec, device).save_pretrained(tmp, safe_serialization=True)
        write_tokenizer(tmp, spec.vocab)
        (tmp / "tiny_target_spec.json").write_text(json.dumps(asdict(spec), indent=2))
        (tmp / "built_on.txt").write_text(f"{device} torch {torch.__version__}\n")

    return cache.ensure(folder, build)
