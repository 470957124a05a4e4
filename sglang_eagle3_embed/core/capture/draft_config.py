"""Read an EAGLE-3 draft's ``config.json`` and decide which target tensors to capture.

Pure module: imports neither torch nor sglang. :func:`resolve_capture_plan` is the one
place where a draft config becomes capture indices; the model glue, the CLI and the tests
all call it.

Where the ids may live (both are read, consistently with how SGLang's draft counts its inputs):

- nested ``eagle_config.eagle_aux_hidden_state_layer_ids`` (SGLang / SpecForge style; the only
  place stock SGLang's target reads, ``model_runner_components/spec_aux_hidden_state.py:185-196``);
- top-level ``eagle_aux_hidden_state_layer_ids`` (vLLM speculators style; stock SGLang's target
  ignores it and silently captures its defaults).

The convention may be declared with ``eagle_aux_hidden_state_layer_ids_convention`` at either
place; a list containing ``-1`` is always in the ``layer_output`` convention.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sglang_eagle3_embed.core.capture.conventions import default_of, missing_advice, undeclared_advice
from sglang_eagle3_embed.core.capture.ids import (
    CONVENTION_FIELD,
    IDS_FIELD,
    Convention,
    describe_capture_indices,
    id_range,
    id_to_capture_index,
    parse_convention,
    stock_capture_indices,
    validate_ids,
)
from sglang_eagle3_embed.core.errors import DraftConfigError, positive_int, shown
from sglang_eagle3_embed.core.findings import Finding, Severity
from sglang_eagle3_embed.core.rule_ids import (
    DRAFT_AUX_COUNT,
    DRAFT_CONFIG_SHAPE,
    DRAFT_IDS_CONFLICT,
    DRAFT_IDS_CONVENTION,
    DRAFT_IDS_MISSING,
    DRAFT_IDS_RANGE,
    DRAFT_IDS_UNDECLARED,
    DRAFT_USE_AUX_OFF,
    TARGET_CONFIG,
)

__all__ = ["DRAFT_ARCHS", "LLAMA_DRAFT", "MLA_DRAFT", "CapturePlan", "DraftIds", "fc_captures", "fc_width",
           "read_draft_ids", "resolve_capture_plan"]  # fmt: skip

LLAMA_DRAFT = "LlamaForCausalLMEagle3"
MLA_DRAFT = "Eagle3DeepseekV2ForCausalLM"
DRAFT_ARCHS = (LLAMA_DRAFT, MLA_DRAFT)
"""SGLang 0.5.23's EAGLE-3 draft architectures (Llama and MLA attention)."""

NESTED = "eagle_config"
TOP_LEVEL = "top level"
DEFAULT = "SGLang default"
DEFAULT_NUM_AUX = 3  # llama_eagle3.py / kimi_k25_eagle3.py fall back to 3 aux states


def fc_width(captures: int, hidden: int) -> int:
    """The features a draft's fc reads: ``captures`` target states of width ``hidden``, concatenated."""
    return captures * hidden


def fc_captures(fc_in: int, hidden: int) -> int | None:
    """How many target states of width ``hidden`` a fc of ``fc_in`` features reads (None: not whole)."""
    return None if fc_in % hidden else fc_in // hidden


@dataclass(frozen=True)
class DraftIds:
    """What a draft config says about its aux hidden states, before any interpretation."""

    ids: tuple[int, ...] | None
    source: str
    declared: Convention | None
    use_aux_hidden_state: bool
    draft_num_aux: int
    """How many aux states the draft's fc reads: ``num_aux_hidden_states``, else the nested ids'
    length, else 3 (``srt/models/llama_eagle3.py:156-161``)."""


def _optional(mapping: Mapping, key: str, where: str, kind: type):
    """``mapping[key]`` if it is of ``kind`` (bools are not ints), None if absent, else an error."""
    value = mapping.get(key)
    if value is None:
        return None
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value
    raise DraftConfigError(
        f"{where}{key} is {shown(value)}; expected a JSON {kind.__name__}.", rule=DRAFT_CONFIG_SHAPE
    )


def read_draft_ids(config: Mapping) -> DraftIds:
    """Extract ids, their location, the declared convention and the draft's input count."""
    if not isinstance(config, Mapping):
        raise DraftConfigError(
            f"the draft config must be a JSON object, got {type(config).__name__}.", rule=DRAFT_CONFIG_SHAPE
        )
    nested = config.get(NESTED)
    if nested is not None and not isinstance(nested, Mapping):
        raise DraftConfigError(
            f"{NESTED} is {shown(nested)}; it must be an object. Stock SGLang ignores a malformed "
            f"{NESTED} silently and captures its default layers. Write "
            f'"{NESTED}": {{"{IDS_FIELD}": [...]}}.',
            rule=DRAFT_CONFIG_SHAPE,
        )
    nested = nested or {}

    found = {}
    for where, mapping in ((NESTED, nested), (TOP_LEVEL, config)):
        prefix = f"{NESTED}." if where == NESTED else ""
        if mapping.get(IDS_FIELD) is not None:
            found[where] = validate_ids(mapping[IDS_FIELD], where=prefix)
    if len(found) == 2 and found[NESTED] != found[TOP_LEVEL]:
        raise DraftConfigError(
            f"{NESTED}.{IDS_FIELD} = {shown(found[NESTED])} and top-level {IDS_FIELD} = "
            f"{shown(found[TOP_LEVEL])} disagree. SGLang's target reads the nested list and its "
            f"draft may count the other one; keep one list (or make both equal).",
            rule=DRAFT_IDS_CONFLICT,
        )
    source = NESTED if NESTED in found else TOP_LEVEL if TOP_LEVEL in found else DEFAULT
    ids = found.get(NESTED, found.get(TOP_LEVEL))

    declared = {}
    for where, mapping in ((NESTED, nested), (TOP_LEVEL, config)):
        prefix = f"{NESTED}." if where == NESTED else ""
        if mapping.get(CONVENTION_FIELD) is not None:
            declared[where] = parse_convention(mapping[CONVENTION_FIELD], where=prefix)
    if len(set(declared.values())) > 1:
        raise DraftConfigError(
            f"{NESTED}.{CONVENTION_FIELD} = {declared[NESTED].value!r} and top-level "
            f"{CONVENTION_FIELD} = {declared[TOP_LEVEL].value!r} disagree; keep one.",
            rule=DRAFT_IDS_CONFLICT,
        )

    use_aux = _optional(nested, "use_aux_hidden_state", f"{NESTED}.", bool)
    num_aux = _optional(config, "num_aux_hidden_states", "", int)
    if num_aux is not None and num_aux < 1:
        raise DraftConfigError(
            f"num_aux_hidden_states is {num_aux}; it must be a positive integer.", rule=DRAFT_CONFIG_SHAPE
        )
    if num_aux is None:
        num_aux = len(found[NESTED]) if NESTED in found else DEFAULT_NUM_AUX
    return DraftIds(
        ids=ids,
        source=source,
        declared=next(iter(declared.values()), None),
        use_aux_hidden_state=True if use_aux is None else use_aux,
        draft_num_aux=num_aux,
    )


@dataclass(frozen=True)
class CapturePlan:
    """Which target tensors to capture, in the order the draft reads them."""

    ids: tuple[int, ...] | None
    source: str
    convention: Convention
    indices: tuple[int, ...]
    """Capture indices (input of layer i; 0 = embedding output), in the draft's order."""
    warnings: tuple[Finding, ...] = ()

    @property
    def layers_to_capture(self) -> list[int]:
        """Ascending capture indices: SGLang's layer loop packs captures in this order."""
        return sorted(self.indices)

    @property
    def block_order(self) -> tuple[int, ...]:
        """``block_order[j]`` = the ascending-packed block that the draft reads at position j."""
        ascending = self.layers_to_capture
        return tuple(ascending.index(i) for i in self.indices)

    @property
    def needs_reorder(self) -> bool:
        return list(self.indices) != self.layers_to_capture

    def describe(self) -> str:
        return describe_capture_indices(self.indices)

    def log_line(self) -> str:
        ids = "no ids" if self.ids is None else f"ids {list(self.ids)}"
        return (
            f"sglang_eagle3_embed: EAGLE-3 draft reads [{self.describe()}] "
            f"({ids} from {self.source}, convention {self.convention.value}; "
            f"capture indices {list(self.indices)})"
        )


def _interpret(draft: DraftIds, num_layers: int) -> tuple[Convention, tuple[int, ...], list[Finding]]:
    if draft.ids is None:
        indices = tuple(stock_capture_indices(None, num_layers))
        warning = Finding(DRAFT_IDS_MISSING, Severity.WARNING, missing_advice(num_layers, indices))
        return Convention.SGLANG_STOCK, indices, [warning]
    if -1 in draft.ids:
        if draft.declared is Convention.HIDDEN_STATES:
            raise DraftConfigError(
                f"{IDS_FIELD} = {shown(draft.ids)} contains -1 but {CONVENTION_FIELD} is "
                f"'hidden_states', where the embedding output is 0. Either declare "
                f"'layer_output' (-1 = embedding output, k = output of layer k) or write the "
                f"embedding as 0.",
                rule=DRAFT_IDS_CONVENTION,
            )
        convention = Convention.LAYER_OUTPUT
    elif draft.declared is not None:
        convention = draft.declared
    else:
        indices = tuple(stock_capture_indices(draft.ids, num_layers))
        if default_of(draft.ids, draft.source, num_layers) is not None:
            return Convention.SGLANG_STOCK, indices, []  # a trainer's default where it writes it: read right
        reader = "stock SGLang's first-id heuristic (+1 only when the first id is 1), which the plugin keeps,"
        advice = undeclared_advice(draft.ids, num_layers, reader, indices)
        return Convention.SGLANG_STOCK, indices, [Finding(DRAFT_IDS_UNDECLARED, Severity.WARNING, advice)]
    return convention, tuple(id_to_capture_index(i, convention) for i in draft.ids), []


def _check_range(draft: DraftIds, convention: Convention, indices, num_layers: int) -> None:
    bad = [(i, x) for i, x in zip(draft.ids or indices, indices) if not 0 <= x < num_layers]
    if not bad:
        return
    if convention is Convention.SGLANG_STOCK:
        where = f"capture indices {shown(indices)} (stock SGLang's reading of {shown(draft.ids or ())})"
        allowed = f"0..{num_layers - 1}"
    else:
        lo, hi = id_range(convention, num_layers)
        where = f"{IDS_FIELD} = {shown(draft.ids)} ({convention.value})"
        allowed = f"{lo}..{hi}"
    hint = ""
    if any(i < -1 for i, _ in bad):
        hint = f" {min(i for i, _ in bad)} names no tensor: did you mean -1 (the embedding output)?"
    raise DraftConfigError(
        f"{where} has out-of-range entries {shown([i for i, _ in bad])} for a target with {num_layers} "
        f"layers; allowed: {allowed}.{hint} The DeepSeek family in SGLang captures the "
        f"embedding output and the outputs of layers 0..{num_layers - 2}; the output of the last "
        f"layer has no capture point. Check that the draft was trained for this target.",
        rule=DRAFT_IDS_RANGE,
    )


def resolve_capture_plan(config: Mapping, num_layers: int) -> CapturePlan:
    """Turn a draft config into a :class:`CapturePlan` for a target with ``num_layers`` layers.

    Raises :class:`DraftConfigError` for anything that stock SGLang would capture wrongly or
    fail on late: malformed ids, out-of-range ids, a count the draft's fc does not read.
    """
    if not positive_int(num_layers):
        raise DraftConfigError(
            f"the target's num_hidden_layers (text_config.num_hidden_layers for Kimi-K2.5) is "
            f"{num_layers!r}; expected a positive integer. Without it the plugin cannot tell which "
            f"layers the draft's ids name, and would stop only while loading the model. Fix: use "
            f"the target's original config.json.",
            rule=TARGET_CONFIG,
        )
    draft = read_draft_ids(config)
    if not draft.use_aux_hidden_state:
        raise DraftConfigError(
            f"{NESTED}.use_aux_hidden_state is false: SGLang would capture nothing and the draft "
            f"would read the final hidden state with its fc silently skipped. EAGLE-3 drafts read "
            f"aux hidden states: set it to true, or serve an EAGLE-1/2 draft with "
            f"--speculative-algorithm EAGLE.",
            rule=DRAFT_USE_AUX_OFF,
        )
    convention, indices, warnings = _interpret(draft, num_layers)
    _check_range(draft, convention, indices, num_layers)
    if len(set(indices)) != len(indices):
        raise DraftConfigError(
            f"capture indices {shown(indices)} ({convention.value} reading of "
            f"{shown(draft.ids) if draft.ids else 'the default ids'}) name one tensor twice for a "
            f"target with {num_layers} layers; stock SGLang would fail at startup with 'captured "
            f"{len(set(indices))} of {len(indices)} aux hidden states'. List the ids the draft was "
            f"trained on in {NESTED}.{IDS_FIELD}.",
            rule=DRAFT_IDS_RANGE,
        )
    if len(indices) != draft.draft_num_aux:
        raise DraftConfigError(
            f"the target would capture {len(indices)} tensors [{describe_capture_indices(indices)}] "
            f"but the draft's fc reads {draft.draft_num_aux} (num_aux_hidden_states, else the length "
            f"of {NESTED}.{IDS_FIELD}, else 3). Make num_aux_hidden_states equal the number of ids.",
            rule=DRAFT_AUX_COUNT,
        )
    return CapturePlan(draft.ids, draft.source, convention, indices, tuple(warnings))
