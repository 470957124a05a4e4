"""The startup rules on the draft: its config and weights, the capture plan they give, and how
they fit the target. Pure module; :mod:`sglang_eagle3_embed.core.rules.table` runs them."""

from __future__ import annotations

from collections.abc import Mapping
from functools import wraps

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.capture.conventions import missing_advice, undeclared_advice
from sglang_eagle3_embed.core.capture.draft_config import DRAFT_ARCHS, LLAMA_DRAFT, MLA_DRAFT, CapturePlan
from sglang_eagle3_embed.core.capture.stock_sglang import reading_of, stock_reading
from sglang_eagle3_embed.core.errors import DraftConfigError, positive_int
from sglang_eagle3_embed.core.findings import NotChecked
from sglang_eagle3_embed.core.readers.deployment import Deployment
from sglang_eagle3_embed.core.rule_ids import (
    DRAFT_ARCHITECTURE,
    DRAFT_AUX_COUNT,
    DRAFT_CONFIG_SHAPE,
    DRAFT_CONFIG_UNREADABLE,
    DRAFT_IDS_CONFLICT,
    DRAFT_IDS_CONVENTION,
    DRAFT_IDS_INVALID,
    DRAFT_IDS_MISSING,
    DRAFT_IDS_RANGE,
    DRAFT_IDS_UNDECLARED,
    DRAFT_TARGET_HIDDEN,
    DRAFT_USE_AUX_OFF,
    DRAFT_VOCAB,
    DRAFT_WEIGHTS_UNREADABLE,
    STOCK_MISREADS_DRAFT,
    TARGET_CONFIG,
)
from sglang_eagle3_embed.core.rules.registry import rule


def plan_of(d: Deployment) -> CapturePlan | NotChecked:
    """The capture plan, or why a rule that reads it cannot be checked (other rules report why)."""
    if isinstance(d.capture, CapturePlan):
        return d.capture
    if isinstance(d.capture, DraftConfigError):
        return NotChecked(f"the draft's capture plan stopped at [{d.capture.rule}]")
    return NotChecked(d.no_capture)


def target_unreadable(error: str, consequence: str) -> str:
    """The finding on a target config.json that cannot be read: ``error``, what that stops
    (``consequence``), and the fix."""
    return (
        f"cannot read the target's config.json: {error}. {consequence} Fix: pass the target's model "
        f"folder as --model-path, with its original config.json."
    )


@rule(DRAFT_CONFIG_UNREADABLE)
def _draft_unreadable(d: Deployment):
    if d.eagle3 and d.raw.get("speculative_draft_model_path") and d.draft_error:
        yield f"cannot read the draft's config.json: {d.draft_error}. Fix the file, then launch again."


@rule(DRAFT_WEIGHTS_UNREADABLE)
def _draft_weights_unreadable(d: Deployment):
    if d.eagle3 and d.draft_weights_error:
        yield (
            f"cannot read the draft's weights: {d.draft_weights_error}. SGLang would fail while "
            f"loading the draft, after loading the target. Fix: download the draft again (or repair "
            f"its model.safetensors.index.json)."
        )


@rule(DRAFT_ARCHITECTURE)
def _draft_architecture(d: Deployment):
    if not d.eagle3 or d.draft_error or not isinstance(d.draft, Mapping):
        return  # no draft config read: other rules say why
    archs = d.draft.get("architectures")
    fix = f'set "architectures": ["{LLAMA_DRAFT}"] (an MLA draft: ["{MLA_DRAFT}"])'
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
        yield (
            f"the draft's config has architectures = {archs!r}, not a list of class names: SGLang "
            f"0.5.23 finds no class to load the draft with and fails at startup, after loading the "
            f"target. Fix: {fix} in the draft's config.json."
        )
    elif archs[0] not in DRAFT_ARCHS:
        yield (
            f"the draft's config names architectures {archs!r}: SGLang 0.5.23 loads the draft as "
            f"{archs[0]!r}, not as an EAGLE-3 draft ({' or '.join(DRAFT_ARCHS)}); an EAGLE-3 "
            f"checkpoint's fc and midlayer tensors fit none of its parameters, so SGLang logs "
            f"'Parameter ... not found' and serves a draft whose layers were never loaded. Fix: if "
            f"the weights are an EAGLE-3 draft's (fc.weight, midlayer.*), {fix}; otherwise this is "
            f"not an EAGLE-3 draft: serve it with the algorithm it was trained for."
        )


def with_plan(check):
    """For a rule that reads the capture plan: EAGLE-3 launches only; not checked without a plan
    (other rules say why); ``check(d, plan)`` otherwise."""

    @wraps(check)
    def checked(d: Deployment):
        if not d.eagle3:
            return
        plan = plan_of(d)
        if isinstance(plan, NotChecked):
            yield plan
            return
        yield from check(d, plan)

    return checked


@rule(DRAFT_CONFIG_SHAPE)
@rule(DRAFT_IDS_INVALID)
@rule(DRAFT_IDS_CONFLICT)
@rule(DRAFT_IDS_CONVENTION)
@rule(DRAFT_IDS_RANGE)
@rule(DRAFT_USE_AUX_OFF)
@rule(DRAFT_AUX_COUNT)
def _from_plan(d: Deployment, rule_id: str):
    """The capture plan's findings under ``rule_id``: its error or its warnings carrying that id.
    The rules above are the plan's: one reading of the draft's ids, each finding under its id."""
    if not d.eagle3:
        return
    if isinstance(d.capture, DraftConfigError) and d.capture.rule == rule_id:
        yield str(d.capture)
        return
    plan = plan_of(d)
    if isinstance(plan, NotChecked):
        yield plan
        return
    yield from (w.message for w in plan.warnings if w.rule == rule_id)


@rule(TARGET_CONFIG)
def _target_config(d: Deployment):
    if d.eagle3 and d.target_error:
        yield target_unreadable(
            d.target_error, "Without it the plugin cannot tell which layers the draft's ids name."
        )
        return
    yield from _from_plan(d, TARGET_CONFIG)


@rule(DRAFT_IDS_MISSING)
@rule(DRAFT_IDS_UNDECLARED)
def _as_served(d: Deployment, rule_id: str):
    """The capture plan's warning under ``rule_id``, worded for the model that serves the launch:
    the plugin's plan keeps the DeepSeek family's first-id reading; a target outside the family is
    served by stock SGLang's own model of it, whose reading the message then states."""
    if d.plugin_requested or reading_of(d.target_arch) == "first-id":
        yield from _from_plan(d, rule_id)
        return
    found = list(_from_plan(d, rule_id))
    if not found or isinstance(found[0], NotChecked):
        yield from found
        return
    num_layers = d.target_text["num_hidden_layers"]
    stock = stock_reading(d.draft, num_layers, d.target_arch)
    if stock.indices is None:
        yield f"{found[0]} On {d.target_arch}, though, stock SGLang {stock.outcome}."
    elif rule_id == DRAFT_IDS_MISSING:
        yield missing_advice(num_layers, stock.indices)
    else:
        reader = f"stock SGLang's {d.target_arch} ({stock.reading}: +1 to every id)"
        yield undeclared_advice(plan_of(d).ids, num_layers, reader, stock.indices)


def _draft_and_target(check):
    """For a rule that compares the draft's config with the target's: EAGLE-3 launches only, and
    not checked unless both configs were read."""

    @wraps(check)
    def checked(d: Deployment):
        if not d.eagle3:
            return
        if d.no_capture:
            yield NotChecked(d.no_capture)
            return
        yield from check(d)

    return checked


def _described(value, name: str) -> str:
    return f"has no {name}" if value is None else f"{name} is {value!r}"


@rule(DRAFT_TARGET_HIDDEN)
@_draft_and_target
def _draft_target_hidden(d: Deployment):
    draft, target_hidden = d.draft_fields, d.target_text.get("hidden_size")
    if not positive_int(target_hidden):
        yield (
            f"the target's config {_described(target_hidden, 'hidden_size')}; expected a positive "
            f"integer, the width of its hidden states. Fix: use the target's original config.json."
        )
        return
    name = "target_hidden_size" if draft.get("target_hidden_size") is not None else "hidden_size"
    declared = draft.get(name)
    if not positive_int(declared):
        where = "" if name == "target_hidden_size" else " (and no target_hidden_size)"
        yield (
            f"the draft's config {_described(declared, name)}{where}; expected a positive integer, the "
            f"target's hidden_size {target_hidden}: SGLang sizes the draft's fc from it. Fix: set the "
            f"draft's {name} to {target_hidden}."
        )
        return
    if declared != target_hidden:
        name = "target_hidden_size" if name == "target_hidden_size" else "hidden_size (no target_hidden_size)"
        yield (
            f"the draft's {name} is {declared} but the target's hidden_size is {target_hidden}: the "
            f"draft was built for another target. Fix: use the draft trained for this target, or set "
            f"target_hidden_size to {target_hidden} if the draft's own width differs on purpose."
        )


@rule(DRAFT_VOCAB)
@_draft_and_target
def _draft_vocab(d: Deployment):
    draft, target_vocab = d.draft_fields, d.target_text.get("vocab_size")
    vocab, draft_vocab = draft.get("vocab_size"), draft.get("draft_vocab_size")
    if not positive_int(target_vocab):
        yield (
            f"the target's config {_described(target_vocab, 'vocab_size')}; expected a positive integer. "
            f"Fix: use the target's original config.json."
        )
        return
    if not positive_int(vocab):
        yield (
            f"the draft's config {_described(vocab, 'vocab_size')}; expected the target's vocab_size "
            f"{target_vocab}. Fix: set the draft's vocab_size to {target_vocab} (a reduced draft "
            f"vocabulary goes in draft_vocab_size)."
        )
    elif vocab != target_vocab:
        yield (
            f"the draft's vocab_size is {vocab} but the target's is {target_vocab}. Fix: set the "
            f"draft's vocab_size to {target_vocab} (a reduced draft vocabulary goes in draft_vocab_size)."
        )
    if draft_vocab is None:
        return
    if not positive_int(draft_vocab) or draft_vocab > target_vocab:
        yield (
            f"the draft's draft_vocab_size is {draft_vocab!r}; expected a positive integer no larger than "
            f"the target's vocab_size {target_vocab}. Fix: set it to the number of tokens the draft's "
            f"lm_head predicts, or remove it when that is the whole vocabulary."
        )


@rule(STOCK_MISREADS_DRAFT)
def _stock_misreads(d: Deployment):
    if not d.eagle3 or not d.family or d.plugin_requested:
        return
    plan = plan_of(d)
    if isinstance(plan, NotChecked):
        yield plan
        return
    stock = stock_reading(d.draft, d.target_text["num_hidden_layers"], d.target_arch)
    if stock.indices is None or list(plan.indices) != list(stock.indices):
        yield (
            f"the draft reads [{plan.describe()}], but stock SGLang {stock.outcome}. "
            f"Fix: add --model-impl {MODEL_IMPL}."
        )
