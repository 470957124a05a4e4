"""For every rule, a launch that fires it and a close one that does not. Pure data.

Used by the tests (through SGLang's real argument resolution) and by ``docs/validation.md``.
``TARGET`` and ``DRAFT`` stand for folders built from :data:`BASE_TARGET` and
:data:`BASE_DRAFT` with the scenario's changes; a PD pair's scenario has the other side's command
line too (``check ARGS --pd-peer PEER_ARGS``), which may name ``PEER_TARGET`` and ``PEER_DRAFT``,
folders built from the scenario's target and draft with its peer changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core import rule_ids
from sglang_eagle3_embed.core.capture.draft_config import LLAMA_DRAFT
from sglang_eagle3_embed.core.capture.ids import CONVENTION_FIELD, IDS_FIELD

__all__ = [
    "BASE_DRAFT",
    "BASE_TARGET",
    "EXAMPLES",
    "Scenario",
    "launch",
    "materialize",
    "materialize_peer",
    "pd",
]

BASE_TARGET = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_group": 1,
    "topk_group": 1,
    "kv_lora_rank": 16,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "vocab_size": 128,
    "max_position_embeddings": 256,
}
BASE_DRAFT = {
    "architectures": [LLAMA_DRAFT],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "vocab_size": 128,
    "eagle_config": {IDS_FIELD: [-1, 2, 4]},
}
LAYERS = tuple(f"model.layers.{i}.self_attn.o_proj.weight" for i in range(BASE_TARGET["num_hidden_layers"]))
"""A target checkpoint's decoder layers, one tensor each (what the layer rules read of it)."""
MTP_LAYER = tuple(
    f"model.layers.{BASE_TARGET['num_hidden_layers']}.{m}.weight" for m in ("eh_proj", "enorm", "hnorm")
)
"""The MTP layer a DeepSeek-V3 checkpoint stores after its decoder layers."""
DELETE = object()
"""A draft/target change value that removes the key."""


def launch(*extra: str, steps=(3, 1, 4), algorithm="EAGLE3", draft=True, impl=MODEL_IMPL) -> tuple[str, ...]:
    """A launch command line: the base EAGLE-3 deployment plus ``extra`` flags."""
    flags = ["--model-path", "TARGET", "--speculative-algorithm", algorithm]
    if draft:
        flags += ["--speculative-draft-model-path", "DRAFT"]
    for name, value in zip(("num-steps", "eagle-topk", "num-draft-tokens"), steps):
        if value is not None:
            flags += [f"--speculative-{name}", str(value)]
    if impl:
        flags += ["--model-impl", impl]
    return (*flags, *extra)


@dataclass(frozen=True)
class Scenario:
    flags: tuple[str, ...] = field(default_factory=launch)
    draft: dict = field(default_factory=dict)
    """Changes to BASE_DRAFT (a nested dict replaces the whole value; DELETE removes a key)."""
    target: dict = field(default_factory=dict)
    fc_in_features: int | None = None
    """Write a draft weight file whose fc.weight reads this many features, beside its decoder layer
    (``midlayer.*``)."""
    weights: bytes | None = None
    """Write these bytes as the draft's model.safetensors (a damaged checkpoint)."""
    target_weights: tuple[str, ...] = LAYERS
    """Write a target model.safetensors holding these tensor names (one element each; none: no file)."""
    env: dict = field(default_factory=dict)
    peer: tuple[str, ...] | None = None
    """A PD pair's other command line (``check --pd-peer``): the pair's rules run on both."""
    peer_target: dict = field(default_factory=dict)
    """Changes to the scenario's target config for ``PEER_TARGET``."""
    peer_draft: dict = field(default_factory=dict)
    """Changes to the scenario's draft config for ``PEER_DRAFT``."""


def pd(mode: str, *extra: str, **kwargs) -> tuple[str, ...]:
    """A PD side's command line: :func:`launch` with ``--disaggregation-mode mode``."""
    return launch("--disaggregation-mode", mode, *extra, **kwargs)


PREFILL = Scenario(pd("prefill"), peer=pd("decode"))
"""A matching PD pair: each pair rule's close example."""


def mismatch(*flags: str, steps=(3, 1, 4), impl=MODEL_IMPL, **changes) -> tuple[Scenario, Scenario]:
    """A pair rule's examples: a prefill whose decode side adds ``flags`` (``steps``, ``impl`` and
    the peer folders' ``changes`` as given), and the matching pair."""
    return Scenario(pd("prefill"), peer=pd("decode", *flags, steps=steps, impl=impl), **changes), PREFILL


EXAMPLES: dict[str, tuple[Scenario, Scenario]] = {
    rule_ids.PARTIAL_SPEC_TRIPLE: (
        Scenario(launch(steps=(None, 1, None))),
        Scenario(launch(steps=(3, 1, 4))),
    ),
    rule_ids.MODEL_IMPL_TYPO: (Scenario(launch(impl="sglang-eagle3-embed")), Scenario(launch())),
    rule_ids.PLUGIN_INACTIVE: (
        Scenario(env={"SGLANG_PLUGINS": "some_other_plugin"}),
        Scenario(env={"SGLANG_PLUGINS": "eagle3_embed"}),
    ),
    rule_ids.DRAFT_TOKENS_REWRITTEN: (
        Scenario(launch(steps=(1, 1, 16))),
        Scenario(launch(steps=(15, 1, 16))),
    ),
    rule_ids.PAGE_SIZE_FORCED: (
        Scenario(launch("--attention-backend", "flashmla", "--page-size", "1")),
        Scenario(launch("--attention-backend", "flashmla", "--page-size", "64")),
    ),
    rule_ids.CUDA_GRAPH_ABOVE_MAX_RUNNING: (
        Scenario(launch("--cuda-graph-max-bs-decode", "64")),
        Scenario(launch("--cuda-graph-max-bs-decode", "64", "--max-running-requests", "64")),
    ),
    rule_ids.DRAFT_PATH_MISSING: (Scenario(launch(draft=False)), Scenario(launch())),
    rule_ids.MTP_LAYER_MISSING: (
        Scenario(launch(algorithm="EAGLE", draft=False, impl=None), target_weights=LAYERS),
        Scenario(launch(algorithm="EAGLE", draft=False, impl=None), target_weights=(*LAYERS, *MTP_LAYER)),
    ),
    rule_ids.EAGLE_WITH_EAGLE3_DRAFT: (
        Scenario(launch(algorithm="EAGLE", impl=None)),
        Scenario(launch(algorithm="EAGLE3", impl=None)),
    ),
    rule_ids.DRAFT_CONFIG_UNREADABLE: (Scenario(draft={"__raw__": "{not json"}), Scenario()),
    rule_ids.DRAFT_WEIGHTS_UNREADABLE: (Scenario(weights=b"\x08\x00\x00\x00"), Scenario(fc_in_features=192)),
    rule_ids.TARGET_CONFIG: (Scenario(target={"num_hidden_layers": DELETE}), Scenario()),
    rule_ids.DRAFT_CONFIG_SHAPE: (Scenario(draft={"eagle_config": [-1, 2, 4]}), Scenario()),
    rule_ids.DRAFT_IDS_INVALID: (
        Scenario(draft={"eagle_config": {IDS_FIELD: [-1, 2, 2]}}),
        Scenario(draft={"eagle_config": {IDS_FIELD: [-1, 2, 3]}}),
    ),
    rule_ids.DRAFT_IDS_CONFLICT: (
        Scenario(draft={IDS_FIELD: [-1, 2, 5]}),
        Scenario(draft={IDS_FIELD: [-1, 2, 4]}),
    ),
    rule_ids.DRAFT_IDS_CONVENTION: (
        Scenario(draft={"eagle_config": {IDS_FIELD: [-1, 2, 4], CONVENTION_FIELD: "hidden_states"}}),
        Scenario(draft={"eagle_config": {IDS_FIELD: [-1, 2, 4], CONVENTION_FIELD: "layer_output"}}),
    ),
    rule_ids.DRAFT_IDS_RANGE: (
        Scenario(draft={"eagle_config": {IDS_FIELD: [-1, 2, 7]}}),
        Scenario(draft={"eagle_config": {IDS_FIELD: [-1, 2, 6]}}),
    ),
    rule_ids.DRAFT_USE_AUX_OFF: (
        Scenario(draft={"eagle_config": {IDS_FIELD: [-1, 2, 4], "use_aux_hidden_state": False}}),
        Scenario(draft={"eagle_config": {IDS_FIELD: [-1, 2, 4], "use_aux_hidden_state": True}}),
    ),
    rule_ids.DRAFT_AUX_COUNT: (
        Scenario(draft={"num_aux_hidden_states": 2}),
        Scenario(draft={"num_aux_hidden_states": 3}),
    ),
    rule_ids.DRAFT_IDS_MISSING: (Scenario(draft={"eagle_config": DELETE}), Scenario()),
    rule_ids.DRAFT_IDS_UNDECLARED: (
        Scenario(draft={"eagle_config": {IDS_FIELD: [1, 3, 5]}}),
        Scenario(draft={"eagle_config": {IDS_FIELD: [1, 3, 5], CONVENTION_FIELD: "layer_output"}}),
    ),
    rule_ids.TARGET_LAYER_COUNT: (Scenario(target_weights=LAYERS[:6]), Scenario(target_weights=LAYERS)),
    rule_ids.DRAFT_FC_WIDTH: (Scenario(fc_in_features=128), Scenario(fc_in_features=192)),
    rule_ids.DRAFT_LAYER_COUNT: (
        Scenario(launch("--json-model-override-args", '{"num_hidden_layers": 2}'), fc_in_features=192),
        Scenario(
            launch("--json-model-override-args", '{"max_position_embeddings": 256}'), fc_in_features=192
        ),
    ),
    rule_ids.DRAFT_FC_SKIPPED: (
        Scenario(draft={"hidden_size": 192, "target_hidden_size": 64}, fc_in_features=192),
        Scenario(draft={"hidden_size": 64, "target_hidden_size": 64}, fc_in_features=192),
    ),
    rule_ids.DRAFT_TARGET_HIDDEN: (
        Scenario(draft={"target_hidden_size": 32}),
        Scenario(draft={"target_hidden_size": 64}),
    ),
    rule_ids.DRAFT_VOCAB: (Scenario(draft={"vocab_size": 256}), Scenario(draft={"vocab_size": 128})),
    rule_ids.DRAFT_ARCHITECTURE: (
        Scenario(draft={"architectures": ["LlamaForCausalLM"]}),
        Scenario(draft={"architectures": [LLAMA_DRAFT]}),
    ),
    rule_ids.STOCK_MISREADS_DRAFT: (
        Scenario(launch(impl=None)),
        Scenario(launch(impl=None), draft={"eagle_config": {IDS_FIELD: [0, 3, 5]}}),
    ),
    rule_ids.TARGET_NOT_DEEPSEEK: (
        Scenario(target={"architectures": ["LlamaForCausalLM"], "model_type": "llama"}),
        Scenario(),
    ),
    rule_ids.PIPELINE_PARALLEL: (Scenario(launch("--pp-size", "2")), Scenario(launch("--tp-size", "1"))),
    rule_ids.TWO_BATCH_OVERLAP: (Scenario(launch("--enable-two-batch-overlap")), Scenario(launch())),
    rule_ids.JSON_OVERRIDE_EAGLE_CONFIG: (
        Scenario(launch("--json-model-override-args", '{"eagle_config": {"use_aux_hidden_state": true}}')),
        Scenario(launch("--json-model-override-args", '{"max_position_embeddings": 256}')),
    ),
    rule_ids.SGLANG_RESOLUTION: (
        Scenario(launch("--attention-backend", "trtllm_mla")),
        Scenario(launch("--attention-backend", "triton")),
    ),
    rule_ids.PD_PEER: (
        Scenario(launch("--disaggregation-mode", "decode")),
        Scenario(launch("--disaggregation-mode", "null")),
    ),
    rule_ids.PD_PAIR_ROLES: (Scenario(pd("decode"), peer=pd("decode")), PREFILL),
    rule_ids.PD_PAIR_TARGET: mismatch(
        "--model-path", "PEER_TARGET", peer_target={"max_position_embeddings": 512}
    ),
    rule_ids.PD_PAIR_DRAFT: mismatch(
        "--speculative-draft-model-path", "PEER_DRAFT", peer_draft={"intermediate_size": 256}
    ),
    rule_ids.PD_PAIR_MODEL_NAMES: mismatch("--model-path", "PEER_TARGET"),
    rule_ids.PD_PAIR_PLUGIN: mismatch(impl=None),
    rule_ids.PD_PAIR_SPECULATIVE: (
        Scenario(pd("prefill"), peer=("--model-path", "TARGET", "--disaggregation-mode", "decode")),
        PREFILL,
    ),
    rule_ids.PD_PAIR_SPECULATIVE_SETTINGS: mismatch(steps=(5, 1, 6)),
    rule_ids.PD_PAIR_CAPTURE: mismatch(impl=None),
    rule_ids.PD_PAIR_PAGE_SIZE: mismatch("--page-size", "16"),
    rule_ids.PD_PAIR_KV_CACHE_DTYPE: mismatch("--kv-cache-dtype", "fp8_e4m3"),
    rule_ids.PD_PAIR_TRANSFER_BACKEND: mismatch("--disaggregation-transfer-backend", "nixl"),
}


def _changed(base: dict, changes: dict) -> dict:
    config = dict(base)
    for key, value in changes.items():
        if value is DELETE:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def materialize(scenario: Scenario, root) -> list[str]:
    """Write the scenario's TARGET and DRAFT folders under ``root``; return its command line."""
    import json
    from pathlib import Path

    root = Path(root)
    target, draft = root / "target", root / "draft"
    target.mkdir(parents=True, exist_ok=True)
    draft.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(_changed(BASE_TARGET, scenario.target)))
    target_weights = target / "model.safetensors"
    if scenario.target_weights:
        import numpy as np
        from safetensors.numpy import save_file

        save_file({name: np.zeros((1,), np.float16) for name in scenario.target_weights}, target_weights)
    elif target_weights.exists():
        target_weights.unlink()
    raw = scenario.draft.get("__raw__")
    text = raw if raw is not None else json.dumps(_changed(BASE_DRAFT, scenario.draft))
    (draft / "config.json").write_text(text)
    weights = draft / "model.safetensors"
    if scenario.weights is not None:
        weights.write_bytes(scenario.weights)
    elif scenario.fc_in_features is not None:
        import numpy as np
        from safetensors.numpy import save_file

        hidden = _changed(BASE_DRAFT, scenario.draft).get("hidden_size", BASE_DRAFT["hidden_size"])
        save_file(
            {
                "fc.weight": np.zeros((hidden, scenario.fc_in_features), np.float16),
                "midlayer.self_attn.o_proj.weight": np.zeros((1,), np.float16),
            },
            weights,
        )
    elif weights.exists():
        weights.unlink()
    return [{"TARGET": str(target), "DRAFT": str(draft)}.get(a, a) for a in scenario.flags]


def materialize_peer(scenario: Scenario, root) -> list[str]:
    """Write ``PEER_TARGET`` and ``PEER_DRAFT`` under ``root`` (after :func:`materialize`); return
    the scenario's other command line."""
    import json
    import shutil
    from pathlib import Path

    root = Path(root)
    folders = {"TARGET": root / "target", "DRAFT": root / "draft"}
    for name, changes in (("TARGET", scenario.peer_target), ("DRAFT", scenario.peer_draft)):
        peer = root / f"peer-{name.lower()}"
        shutil.copytree(folders[name], peer, dirs_exist_ok=True)
        config = json.loads((peer / "config.json").read_text())
        (peer / "config.json").write_text(json.dumps(_changed(config, changes)))
        folders[f"PEER_{name}"] = peer
    return [str(folders[a]) if a in folders else a for a in scenario.peer]
