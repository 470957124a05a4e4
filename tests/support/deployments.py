"""Launches as plain data for the pure rule tests: a tiny 8-layer DeepSeek-V3 target, an EAGLE-3
draft on ``[-1, 2, 4]``, the launch flags, and what the rules read of both checkpoints' weights."""

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.readers.deployment import Deployment
from sglang_eagle3_embed.core.readers.overrides import apply_overrides
from sglang_eagle3_embed.core.rules.table import Stage, evaluate

TARGET = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "num_hidden_layers": 8,
    "hidden_size": 64,
    "vocab_size": 128,
}
DRAFT = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "hidden_size": 64,
    "num_hidden_layers": 1,
    "vocab_size": 128,
    "eagle_config": {IDS_FIELD: [-1, 2, 4]},
}
RAW = {
    "speculative_algorithm": "EAGLE3",
    "speculative_draft_model_path": "DRAFT",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "model_impl": MODEL_IMPL,
}
READ = dict(
    draft_fc_in_features=192,
    draft_weight_files=("/models/draft/model.safetensors",),
    draft_layers=frozenset({0}),
    target_layers={i: frozenset({"self_attn", "mlp"}) for i in range(TARGET["num_hidden_layers"])},
)
"""What the rules read of both checkpoints' weights, all of it fitting the configs above."""


def deployment(target=TARGET, draft=DRAFT, raw=RAW, overrides=None, **kwargs) -> Deployment:
    """The launch of ``raw`` with both configs as SGLang builds them (``overrides`` applied) and
    ``READ`` unless ``kwargs`` says otherwise (a field set to None: not read)."""
    overrides = overrides or {}
    return Deployment(
        raw=raw,
        target=apply_overrides(target, overrides),
        draft=apply_overrides(draft, overrides),
        overrides=overrides,
        **{**READ, **kwargs},
    )


def findings(d: Deployment) -> list:
    return [f for stage in (Stage.PRE, Stage.POST) for f in evaluate(d, stage)]
