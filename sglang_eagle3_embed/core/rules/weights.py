"""The startup rules that read the weights' safetensors headers (no tensor is read): the layers the
target's and the draft's weights hold against the layers their configs build, the target's MTP
layer, and the draft's fc. Pure module; :mod:`sglang_eagle3_embed.core.rules.table` runs them.

The configs are those SGLang builds (``--json-model-override-args`` applied to both,
:mod:`sglang_eagle3_embed.core.readers.overrides`), and the weights those of the folder SGLang loads (a hub
id's cached snapshot included, :mod:`sglang_eagle3_embed.core.readers.hub`). A rule whose weights were not
read says so (not checked), never ``ok``.
"""

from __future__ import annotations

from functools import wraps

from sglang_eagle3_embed.core.capture.draft_config import CapturePlan, fc_width
from sglang_eagle3_embed.core.errors import positive_int
from sglang_eagle3_embed.core.findings import NotChecked
from sglang_eagle3_embed.core.readers.coverage import absent, target_coverage
from sglang_eagle3_embed.core.readers.deployment import Deployment
from sglang_eagle3_embed.core.readers.model_folder import MTP_MODULES, describe_layers
from sglang_eagle3_embed.core.rule_ids import (
    DRAFT_FC_SKIPPED,
    DRAFT_FC_WIDTH,
    DRAFT_LAYER_COUNT,
    MTP_LAYER_MISSING,
    TARGET_LAYER_COUNT,
)
from sglang_eagle3_embed.core.rules.draft import with_plan
from sglang_eagle3_embed.core.rules.registry import rule


def _weights_not_read(d: Deployment) -> NotChecked:
    why = d.target_weights_error or "they could not be read"
    return NotChecked(f"the target's weights were not read: {why}")


def _with_layers(model: str):
    """For a rule comparing the ``model``'s (``target`` or ``draft``) config with the layers its
    weights hold: EAGLE-3 launches whose config was read; not checked where the weights were not."""

    def wrap(check):
        @wraps(check)
        def checked(d: Deployment):
            config, layers = (d.target, d.target_layers) if model == "target" else (d.draft, d.draft_layers)
            if not d.eagle3 or config is None:
                return
            if layers is not None:
                yield from check(d)
            elif model == "target":
                yield _weights_not_read(d)
            else:
                why = (
                    "its weights could not be read"
                    if d.draft_weights_error
                    else "no *.safetensors weights to read"
                )
                yield NotChecked(f"the draft's layers are unknown: {why}")

        return checked

    return wrap


@rule(TARGET_LAYER_COUNT)
@_with_layers("target")
def _target_layer_count(d: Deployment):
    found = target_coverage(d.target_text, d.target_layers)
    if found is None or found.ok:
        return
    yield _layer_count(
        "target's",
        found.count,
        d.target_layers,
        found.missing,
        found.extra,
        d.overridden("num_hidden_layers", "text_config"),
        _target_fix(found, d.target_layers),
        _mtp_note(found, d.target_text),
    )


def _target_fix(found, layers) -> str:
    """What to do about the target's layers: a count beyond the weights (their tail missing) is
    a download stopped early, or a count to lower; a hole in the middle, a download to redo; layers
    beyond the count, the count to raise."""
    contiguous = len(layers) == max(layers, default=-1) + 1
    if found.missing and not contiguous:
        return "download the target's weights again (an interrupted download?)"
    if found.missing:
        return (
            f"download the target's missing weights (an interrupted download?), or set num_hidden_layers "
            f"to {found.plain} if the model has {found.plain} layers"
        )
    mtp = [i for i in found.extra if layers[i] & MTP_MODULES]
    if found.plain == found.count and mtp:  # MTP layers the config does not allow
        return (
            f"set num_nextn_predict_layers to {max(mtp) - found.count + 1}: {describe_layers(mtp)} of the "
            f"weights {'is an MTP layer' if len(mtp) == 1 else 'are MTP layers'} (eh_proj, enorm, hnorm)"
        )
    return f"set num_hidden_layers to {found.plain}, the decoder layers the weights hold"


def _mtp_note(found, text) -> str:
    """Why a layer past the count is not taken as an MTP layer, where the config allows some."""
    nextn = text.get("num_nextn_predict_layers")
    nextn = nextn if positive_int(nextn) else 0
    if found.missing or not any(i < found.count + nextn for i in found.extra):
        return ""
    allowed = f"layer {found.count}" if nextn == 1 else f"layers {found.count}-{found.count + nextn - 1}"
    return (
        f" (num_nextn_predict_layers {nextn} allows MTP {allowed}, and an MTP layer holds eh_proj, "
        f"enorm and hnorm)"
    )


def _layer_count(model: str, count: int, held, missing, extra, source: str, fix: str, note: str = "") -> str:
    """The message of a model (``target's``, ``draft's``) whose config builds ``count`` decoder
    layers where its weights hold ``held``; ``source`` says when an override set the count, ``note``
    why a layer past it is not one the config allows."""
    if missing:
        effect = f"SGLang would run {describe_layers(missing)} of the {model[:-2]} on uninitialised memory"
    else:
        effect = f"SGLang would skip {describe_layers(extra)} of the {model[:-2]}"
    if source:
        fix = (
            "drop num_hidden_layers from --json-model-override-args: SGLang applies it to the draft's "
            "config as well as the target's (srt/configs/model_config.py:962)"
        )
    return (
        f"the {model} config builds {count} decoder layer{'s' if count > 1 else ''} (num_hidden_layers "
        f"{count}{source}), but its weights hold {describe_layers(held)}: {effect}, silently{note}. Fix: {fix}."
    )


NEXTN_TARGETS = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM")
"""Targets whose checkpoint SGLang loads as ``DeepseekV3ForCausalLMNextN`` when it is its own
draft (srt/configs/model_config.py:1032-1036)."""


@rule(MTP_LAYER_MISSING)
def _mtp_layer_missing(d: Deployment):
    layers, count = d.target_layers, d.target_text.get("num_hidden_layers")
    if not d.drafts_from_target or d.target_arch not in NEXTN_TARGETS or not positive_int(count):
        return
    if layers is None:
        yield _weights_not_read(d)
        return
    if layers.get(count, frozenset()) >= MTP_MODULES:
        return
    yield (
        f"--speculative-algorithm {d.algorithm} without --speculative-draft-model-path: SGLang "
        f"would silently load the target's own MTP layer (model.layers.{count}: "
        f"{', '.join(sorted(MTP_MODULES))}) as the draft, but the target's weights hold "
        f"{describe_layers(layers)} and no MTP layer: the draft would run on uninitialised "
        f"weights and every draft token be rejected. Fix: pass --speculative-draft-model-path "
        f"DRAFT (an EAGLE-3 draft with --speculative-algorithm EAGLE3), or serve the checkpoint "
        f"with its MTP layer."
    )


def fc_width_mismatch(fc_in_features: int, plan: CapturePlan, hidden: int) -> str | None:
    """What is wrong when a draft's fc reads other than ``len(plan.indices) x hidden`` features
    (None when it reads that): rule ``draft-fc-width``, and ``probe``'s refusal before it loads a
    model (``doctor/request.py``)."""
    expected = fc_width(len(plan.indices), hidden)
    if fc_in_features == expected:
        return None
    return (
        f"the draft's fc.weight reads {fc_in_features} features but the target would "
        f"capture {len(plan.indices)} x {hidden} = {expected} ([{plan.describe()}]). The weights "
        f"were trained for another number of aux states: fix the ids or the checkpoint."
    )


@rule(DRAFT_FC_WIDTH)
@with_plan
def _draft_fc_width(d: Deployment, plan: CapturePlan):
    if d.draft_fc_in_features is None:
        if d.draft_weight_files:
            yield _no_fc(d, plan)
            return
        why = "its weights could not be read" if d.draft_weights_error else "no *.safetensors weights to read"
        yield NotChecked(f"the draft's fc width is unknown: {why}")
        return
    hidden = _read_width(d)
    if not positive_int(hidden):
        yield NotChecked(
            "neither the draft's target_hidden_size nor the target's hidden_size is a positive integer"
        )
        return
    mismatch = fc_width_mismatch(d.draft_fc_in_features, plan, hidden)
    if mismatch:
        yield mismatch


def _read_width(d: Deployment):
    """The width of each target state the draft's fc reads: its ``target_hidden_size`` when it has
    one, else the target's ``hidden_size`` (as SGLang's ``llama_eagle3.py`` sizes the fc)."""
    declared = d.draft_fields.get("target_hidden_size")
    return d.target_text.get("hidden_size") if declared is None else declared


def _no_fc(d: Deployment, plan: CapturePlan) -> str:
    names = ", ".join(f.rsplit("/", 1)[-1] for f in d.draft_weight_files[:3])
    more = f" and {len(d.draft_weight_files) - 3} more" if len(d.draft_weight_files) > 3 else ""
    return (
        f"the draft's weights ({names}{more}) hold no fc.weight (nor model.fc.weight), the layer of an "
        f"EAGLE-3 draft that reads the {len(plan.indices)} captured target states: SGLang loads only "
        f"the tensors a checkpoint holds, so the draft's fc would keep its random initial values. "
        f"Fix: pass the EAGLE-3 draft's own folder as --speculative-draft-model-path, or download "
        f"the draft again."
    )


@rule(DRAFT_LAYER_COUNT)
@_with_layers("draft")
def _draft_layer_count(d: Deployment):
    count = d.draft_fields.get("num_hidden_layers")
    if not positive_int(count):
        return  # transformers refuses such a config when SGLang reads it
    missing = absent(count, d.draft_layers)
    extra = sorted(i for i in d.draft_layers if i >= count)
    if not missing and not extra:
        return
    yield _layer_count(
        "draft's",
        count,
        d.draft_layers,
        missing,
        extra,
        d.overridden("num_hidden_layers"),
        f"set num_hidden_layers to {len(d.draft_layers)} in the draft's config.json, or download the "
        f"draft again",
    )


@rule(DRAFT_FC_SKIPPED)
@with_plan
def _draft_fc_skipped(d: Deployment, plan: CapturePlan):
    width, hidden = _read_width(d), d.draft_fields.get("hidden_size")
    if not (positive_int(width) and positive_int(hidden)):
        return  # draft-target-hidden names what is missing
    captured = len(plan.indices) * width
    if captured != hidden:
        return
    source = d.overridden("hidden_size") or d.overridden("target_hidden_size")
    yield (
        f"the target would capture {len(plan.indices)} x {width} = {captured} features "
        f"([{plan.describe()}]) and the draft's hidden_size is {hidden}{source}: SGLang applies the "
        f"draft's fc only when the two differ, so the trained fc would be skipped silently and the "
        f"draft's layer would read the raw captures. Fix: the draft's hidden_size must be the width "
        f"it was trained with and differ from the captured width; use the draft's original config"
        f"{' and drop the override' if source else ''}."
    )
