"""What each startup rule is, apart from its check: its severity, its :class:`Stage`, its title
and what SGLang 0.5.23 does without it, by id, in the order of
:mod:`~sglang_eagle3_embed.core.rule_ids` (the order of ``docs/validation.md``). Pure module.

One table, so that the whole validation surface reads in one place and a check in this package's
rule modules carries only its logic: ``@rule(ID)`` (:mod:`~sglang_eagle3_embed.core.rules.registry`)
joins a check to its entry here, and refuses an id that has none.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from sglang_eagle3_embed.core import rule_ids
from sglang_eagle3_embed.core.findings import Severity

__all__ = ["CATALOG", "Entry", "Stage"]


class Stage(str, Enum):
    """When a rule runs, in this order."""

    PRE = "pre"
    """On the flags as passed, before SGLang's speculative resolution (which would otherwise stop on
    a bare ``assert``)."""
    RESOLUTION = "resolution"
    """When SGLang's own argument resolution refuses the launch; reads a
    :class:`~sglang_eagle3_embed.core.rules.registry.Refused`."""
    POST = "post"
    """After SGLang's resolution: what it resolved, compared with what the user passed."""
    PAIR = "pair"
    """Both command lines of a PD pair, each after its own stages (``check ARGS --pd-peer
    PEER_ARGS``); reads a :class:`~sglang_eagle3_embed.core.rules.pair.Pair`."""

    def __str__(self) -> str:
        return self.value


class Entry(NamedTuple):
    """A rule's description, as ``docs/validation.md`` shows it."""

    severity: Severity
    stage: Stage
    title: str
    silent: str
    """What SGLang 0.5.23 does when the rule would fire, with the source line."""


# What SGLang does without several rules, each written once.
_SILENT_LOAD = (
    "builds every layer its config counts and loads only the tensors the checkpoint holds, without "
    "checking that any is missing"
)


_SILENT_MODELS = (
    "compares neither model nor its config when the two connect (conn.py:1584-1611 carries page "
    "size and KV-cache dtype): the decode side continues from a KV cache another model wrote"
)


_SILENT_HANDSHAKE = (
    "stops the decode server's scheduler at its first contact with the prefill "
    "(srt/disaggregation/common/conn.py:1320-1335), after both have loaded their weights"
)


# fmt: off
CATALOG: dict[str, Entry] = {
    rule_ids.PARTIAL_SPEC_TRIPLE: Entry(Severity.ERROR, Stage.PRE, "Top-k or draft tokens given without the number of steps", "stops with a bare AssertionError (srt/arg_groups/speculative_hook.py:1159-1163); with none of the three, picks (3, 1, 4) itself for DeepSeek/Kimi targets (1430-1461)"),
    rule_ids.MODEL_IMPL_TYPO: Entry(Severity.ERROR, Stage.PRE, "A --model-impl that looks like the plugin's but is not", "accepts any --model-impl string and treats an unknown one like 'sglang' (srt/arg_groups/fields/model.py:126; srt/model_loader/utils.py:228-231)"),
    rule_ids.PLUGIN_INACTIVE: Entry(Severity.ERROR, Stage.PRE, "--model-impl sglang_eagle3_embed given but the plugin is not active", "swallows plugin errors (srt/plugins/__init__.py:83,135) and serves the stock classes"),
    rule_ids.DRAFT_TOKENS_REWRITTEN: Entry(Severity.ERROR, Stage.POST, "--speculative-num-draft-tokens silently changed", "sets num_draft_tokens = num_steps + 1 when topk is 1, with only a log line (srt/arg_groups/speculative_hook.py:1255-1266), or under --speculative-adaptive, without one (1423-1427)"),
    rule_ids.PAGE_SIZE_FORCED: Entry(Severity.ERROR, Stage.POST, "--page-size silently changed", "forces the page size for some attention backends (srt/arg_groups/overrides.py:1143-1199, 1276-1296)"),
    rule_ids.CUDA_GRAPH_ABOVE_MAX_RUNNING: Entry(Severity.WARNING, Stage.POST, "Decode CUDA graphs larger than the running-request cap", "caps --max-running-requests at 48 for speculative decoding when unset (srt/arg_groups/speculative_hook.py:1086-1095), after the CUDA-graph batch sizes were chosen (pipeline.py:218)"),
    rule_ids.DRAFT_PATH_MISSING: Entry(Severity.ERROR, Stage.POST, "EAGLE-3 without --speculative-draft-model-path", "uses the target checkpoint as its own draft for DeepSeek-family targets (srt/arg_groups/speculative_hook.py:1120-1156)"),
    rule_ids.EAGLE_WITH_EAGLE3_DRAFT: Entry(Severity.ERROR, Stage.POST, "An EAGLE-3 draft served under --speculative-algorithm EAGLE or NEXTN", "captures no aux hidden states and skips the draft's fc because the widths match (srt/models/llama_eagle3.py:238-247): accept length about 1.0"),
    rule_ids.DRAFT_CONFIG_UNREADABLE: Entry(Severity.ERROR, Stage.PRE, "The draft's config.json cannot be read", "fails later while loading the draft, or reads no ids and captures defaults"),
    rule_ids.DRAFT_WEIGHTS_UNREADABLE: Entry(Severity.ERROR, Stage.PRE, "The draft's weights cannot be read (an interrupted download, a broken index)", "fails while loading the draft, after the target's weights were loaded"),
    rule_ids.DRAFT_ARCHITECTURE: Entry(Severity.ERROR, Stage.POST, "The draft's config names a class SGLang does not load as an EAGLE-3 draft", "loads the draft as that class, warns for each EAGLE-3 tensor it has no parameter for, and serves a draft whose layers were never loaded; or, without a list of class names, fails at startup after loading the target"),
    rule_ids.TARGET_CONFIG: Entry(Severity.ERROR, Stage.POST, "The target's config has no usable layer count", "stops only while loading the model, after its weights are read, when the plugin plans the captures"),
    rule_ids.DRAFT_CONFIG_SHAPE: Entry(Severity.ERROR, Stage.POST, "Malformed draft config fields", "ignores a malformed eagle_config and captures defaults"),
    rule_ids.DRAFT_IDS_INVALID: Entry(Severity.ERROR, Stage.POST, "Aux layer ids that are not distinct integers", "fails late or captures fewer states"),
    rule_ids.DRAFT_IDS_CONFLICT: Entry(Severity.ERROR, Stage.POST, "Nested and top-level ids (or conventions) disagree", "the target reads the nested list while the draft may size its fc from the other"),
    rule_ids.DRAFT_IDS_CONVENTION: Entry(Severity.ERROR, Stage.POST, "Id convention invalid or contradicting the ids", "guesses the convention from the first id (srt/models/deepseek_v2.py:3458-3473, PR #25454)"),
    rule_ids.DRAFT_IDS_RANGE: Entry(Severity.ERROR, Stage.POST, "Ids outside what the target can capture", "fails at startup with 'captured k of n aux hidden states' (srt/layers/aux_hidden_states.py:84-90)"),
    rule_ids.DRAFT_USE_AUX_OFF: Entry(Severity.ERROR, Stage.POST, "use_aux_hidden_state is false under EAGLE3", "captures nothing and skips the draft's fc silently"),
    rule_ids.DRAFT_AUX_COUNT: Entry(Severity.ERROR, Stage.POST, "Number of ids differs from what the draft's fc reads", "fails in a matmul or a static-buffer copy, or passes garbage"),
    rule_ids.DRAFT_IDS_MISSING: Entry(Severity.WARNING, Stage.POST, "No aux layer ids in the draft config", "captures its default [2, L//2, L-3] silently (srt/models/deepseek_v2.py:3462-3465)"),
    rule_ids.DRAFT_IDS_UNDECLARED: Entry(Severity.WARNING, Stage.POST, "Ids without -1 and without a declared convention", "reads them with the first-id heuristic (srt/models/deepseek_v2.py:3458-3473); the plugin keeps that reading and asks for a declaration"),
    rule_ids.DRAFT_TARGET_HIDDEN: Entry(Severity.ERROR, Stage.POST, "The draft's target_hidden_size differs from the target's hidden_size", "fails in the fc or in a static buffer copy (srt/speculative/eagle_utils.py:237-276)"),
    rule_ids.DRAFT_VOCAB: Entry(Severity.ERROR, Stage.POST, "Draft and target vocabularies disagree", "fails at load or maps draft tokens to the wrong target tokens"),
    rule_ids.STOCK_MISREADS_DRAFT: Entry(Severity.ERROR, Stage.POST, "Stock SGLang would capture other tensors than the draft was trained on", "dies at startup or serves the wrong tensors (first-id heuristic, nested ids only, ascending order)"),
    rule_ids.TARGET_LAYER_COUNT: Entry(Severity.ERROR, Stage.POST, "The target's config builds other decoder layers than its weights hold", f"{_SILENT_LOAD}: layers the weights lack run on uninitialised memory, layers they hold beyond the "
        f"count are skipped (srt/models/deepseek_common/deepseek_weight_loader.py:301-310); the draft "
        f"reads what that model computes"),
    rule_ids.MTP_LAYER_MISSING: Entry(Severity.ERROR, Stage.POST, "EAGLE without a draft on a target whose weights hold no MTP layer", "loads the target's own MTP (NextN) layer as the draft (srt/arg_groups/speculative_hook.py:1120-1143, srt/configs/model_config.py:1032-1036) from model.layers.{num_hidden_layers} (srt/models/deepseek_common/deepseek_weight_loader.py:570-578) without checking that any weight is missing: what the checkpoint lacks stays uninitialised, every draft token rejected"),
    rule_ids.DRAFT_FC_WIDTH: Entry(Severity.ERROR, Stage.POST, "The draft's fc weight does not read len(ids) x target hidden", "fails in the fc matmul (srt/models/llama_eagle3.py:163-167, 238-247)"),
    rule_ids.DRAFT_LAYER_COUNT: Entry(Severity.ERROR, Stage.POST, "The draft's config builds other decoder layers than its weights hold", f"{_SILENT_LOAD} (srt/models/llama_eagle3.py:198-204, 330-345): layers the weights lack run on "
        f"uninitialised memory in every draft step, layers they hold beyond the count are skipped"),
    rule_ids.DRAFT_FC_SKIPPED: Entry(Severity.ERROR, Stage.POST, "The captured width equals the draft's hidden size, so SGLang skips the draft's fc", "applies the draft's fc only when the captured width differs from its hidden size (srt/models/llama_eagle3.py:238-247): the trained fc is skipped and the draft reads the raw captures"),
    rule_ids.TARGET_NOT_DEEPSEEK: Entry(Severity.ERROR, Stage.POST, "--model-impl sglang_eagle3_embed on a target outside the DeepSeek family", "treats the unknown --model-impl like 'sglang'"),
    rule_ids.PIPELINE_PARALLEL: Entry(Severity.ERROR, Stage.POST, "Pipeline parallelism with EAGLE-3 on the DeepSeek family", "captures on the last stage only (srt/models/deepseek_v2.py:3459-3460); the embedding and early layers live on the first stage"),
    rule_ids.TWO_BATCH_OVERLAP: Entry(Severity.ERROR, Stage.POST, "Two-batch overlap with EAGLE-3 on the DeepSeek family", "runs the layers after first_k_dense_replace through model_forward_stages, which has no capture point (srt/models/deepseek_v2.py:3163-3172, 3202-3210)"),
    rule_ids.JSON_OVERRIDE_EAGLE_CONFIG: Entry(Severity.ERROR, Stage.POST, "--json-model-override-args touching the draft's aux-state fields", "applies the override to the target's config too (srt/configs/model_config.py:962)"),
    rule_ids.SGLANG_RESOLUTION: Entry(Severity.ERROR, Stage.RESOLUTION, "SGLang's own argument resolution refused the launch", "raises its own error; `check` reports it verbatim instead of a traceback"),
    rule_ids.PD_PEER: Entry(Severity.WARNING, Stage.POST, "A PD prefill or decode server whose other side check cannot see", "exchanges no capture plan between the prefill and the decode server (the handshake carries page size and KV-cache dtype, srt/disaggregation/common/conn.py:1320-1335, 1584-1611): a peer without the plugin fails at startup on nested -1 ids, or feeds the draft other tensors silently (docs/pd.md)"),
    rule_ids.PD_PAIR_ROLES: Entry(Severity.ERROR, Stage.PAIR, "The two command lines are not one prefill and one decode server", "checks each server's arguments alone, each knowing only its own --disaggregation-mode: nothing compares the two command lines before a router pairs them (docs/pd.md)"),
    rule_ids.PD_PAIR_TARGET: Entry(Severity.ERROR, Stage.PAIR, "The two sides load targets whose configs differ", _SILENT_MODELS),
    rule_ids.PD_PAIR_DRAFT: Entry(Severity.ERROR, Stage.PAIR, "The two sides load drafts whose configs differ", _SILENT_MODELS),
    rule_ids.PD_PAIR_MODEL_NAMES: Entry(Severity.WARNING, Stage.PAIR, "The two sides name a model differently, with the same config", "compares no model path or revision between the two servers (conn.py:1584-1611)"),
    rule_ids.PD_PAIR_PLUGIN: Entry(Severity.ERROR, Stage.PAIR, "The plugin serves one side only", "exchanges no capture plan (conn.py:1584-1611): each side feeds the draft what its own --model-impl captures"),
    rule_ids.PD_PAIR_SPECULATIVE: Entry(Severity.ERROR, Stage.PAIR, "One side speculates and the other does not, or with another algorithm", "compares no speculative setting between the two servers (conn.py:1584-1611)"),
    rule_ids.PD_PAIR_SPECULATIVE_SETTINGS: Entry(Severity.ERROR, Stage.PAIR, "The two sides resolve other speculative settings", "does not compare them: the decode side cuts the prefill's first proposal to its own top-k (srt/speculative/eagle_disaggregation.py:58-72) and drafts with its own settings after"),
    rule_ids.PD_PAIR_CAPTURE: Entry(Severity.ERROR, Stage.PAIR, "The draft reads other tensors on the two sides", "exchanges no capture plan (conn.py:1584-1611): a side without the plugin fails at startup on nested -1 ids, or feeds the draft its default layers silently (docs/pd.md)"),
    rule_ids.PD_PAIR_PAGE_SIZE: Entry(Severity.ERROR, Stage.PAIR, "The two sides resolve other page sizes", _SILENT_HANDSHAKE),
    rule_ids.PD_PAIR_KV_CACHE_DTYPE: Entry(Severity.ERROR, Stage.PAIR, "The two sides resolve other KV-cache dtypes", _SILENT_HANDSHAKE),
    rule_ids.PD_PAIR_TRANSFER_BACKEND: Entry(Severity.ERROR, Stage.PAIR, "The two sides pass other transfer backends", "does not name the backend in its handshake (conn.py:1584-1611): the two sides cannot exchange the KV cache"),
}
# fmt: on
