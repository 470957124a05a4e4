"""The id of every rule, each written here once. Pure module.

An id is what a user reads (``[draft-ids-invalid]`` in a finding, a key of ``check --json``, a
section of ``docs/validation.md``), so it is stable. Everything else names a rule by its constant:
its row of ``core/rules/catalog.py`` and the ``@rule(ID)`` decorator on its check
(``core/rules/*.py``), the errors that carry it
(:class:`~sglang_eagle3_embed.core.errors.DraftConfigError`'s and
:class:`~sglang_eagle3_embed.core.errors.UnsupportedModeError`'s ``rule``), the findings the capture
plan warns with, the code that examines a finding's rule, and the examples of
the harness (``harness/rule_examples.py``). ``tests/unit/core/test_rule_ids.py`` keeps every rule
id string literal of the package in this module.

Listed in the order of :func:`sglang_eagle3_embed.core.rules.table.every_rule`, by the module that
declares the rule.
"""

from __future__ import annotations

# rules/flags: the launch flags
PARTIAL_SPEC_TRIPLE = "partial-spec-triple"
MODEL_IMPL_TYPO = "model-impl-typo"
PLUGIN_INACTIVE = "plugin-inactive"
DRAFT_TOKENS_REWRITTEN = "draft-tokens-rewritten"
PAGE_SIZE_FORCED = "page-size-forced"
CUDA_GRAPH_ABOVE_MAX_RUNNING = "cuda-graph-above-max-running"
DRAFT_PATH_MISSING = "draft-path-missing"
EAGLE_WITH_EAGLE3_DRAFT = "eagle-with-eagle3-draft"

# rules/draft: the draft, the capture plan it gives, and how it fits the target
DRAFT_CONFIG_UNREADABLE = "draft-config-unreadable"
DRAFT_WEIGHTS_UNREADABLE = "draft-weights-unreadable"
DRAFT_ARCHITECTURE = "draft-architecture"
TARGET_CONFIG = "target-config"
DRAFT_CONFIG_SHAPE = "draft-config-shape"
DRAFT_IDS_INVALID = "draft-ids-invalid"
DRAFT_IDS_CONFLICT = "draft-ids-conflict"
DRAFT_IDS_CONVENTION = "draft-ids-convention"
DRAFT_IDS_RANGE = "draft-ids-range"
DRAFT_USE_AUX_OFF = "draft-use-aux-off"
DRAFT_AUX_COUNT = "draft-aux-count"
DRAFT_IDS_MISSING = "draft-ids-missing"
DRAFT_IDS_UNDECLARED = "draft-ids-undeclared"
DRAFT_TARGET_HIDDEN = "draft-target-hidden"
DRAFT_VOCAB = "draft-vocab"
STOCK_MISREADS_DRAFT = "stock-misreads-draft"

# rules/weights: what the weights' headers hold
TARGET_LAYER_COUNT = "target-layer-count"
MTP_LAYER_MISSING = "mtp-layer-missing"
DRAFT_FC_WIDTH = "draft-fc-width"
DRAFT_LAYER_COUNT = "draft-layer-count"
DRAFT_FC_SKIPPED = "draft-fc-skipped"

# rules/modes: what the plugin supports, and SGLang's own resolution refusing the launch
TARGET_NOT_DEEPSEEK = "target-not-deepseek"
PIPELINE_PARALLEL = "pipeline-parallel"
TWO_BATCH_OVERLAP = "two-batch-overlap"
JSON_OVERRIDE_EAGLE_CONFIG = "json-override-eagle-config"
SGLANG_RESOLUTION = "sglang-resolution"

# rules/pd: a PD-disaggregated side and the other side it cannot see
PD_PEER = "pd-peer"

# rules/pair: the two command lines of a PD pair compared (``check ARGS --pd-peer PEER_ARGS``)
PD_PAIR_ROLES = "pd-pair-roles"
PD_PAIR_TARGET = "pd-pair-target"
PD_PAIR_DRAFT = "pd-pair-draft"
PD_PAIR_MODEL_NAMES = "pd-pair-model-names"
PD_PAIR_PLUGIN = "pd-pair-plugin"
PD_PAIR_SPECULATIVE = "pd-pair-speculative"
PD_PAIR_SPECULATIVE_SETTINGS = "pd-pair-speculative-settings"
PD_PAIR_CAPTURE = "pd-pair-capture"
PD_PAIR_PAGE_SIZE = "pd-pair-page-size"
PD_PAIR_KV_CACHE_DTYPE = "pd-pair-kv-cache-dtype"
PD_PAIR_TRANSFER_BACKEND = "pd-pair-transfer-backend"
