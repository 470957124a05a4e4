"""The startup rules on what the plugin supports (the target's family, parallel and overlap modes,
config overrides), and SGLang's own resolution refusing the launch. Pure module;
:mod:`sglang_eagle3_embed.core.rules.table` runs them."""

from __future__ import annotations

import traceback

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.capture.ids import CONVENTION_FIELD, IDS_FIELD
from sglang_eagle3_embed.core.capture.stock_sglang import reading_of
from sglang_eagle3_embed.core.errors import UnsupportedModeError
from sglang_eagle3_embed.core.readers.deployment import Deployment
from sglang_eagle3_embed.core.readers.overrides import parse_overrides
from sglang_eagle3_embed.core.rule_ids import (
    JSON_OVERRIDE_EAGLE_CONFIG,
    PIPELINE_PARALLEL,
    SGLANG_RESOLUTION,
    TARGET_NOT_DEEPSEEK,
    TWO_BATCH_OVERLAP,
)
from sglang_eagle3_embed.core.rules.draft import target_unreadable
from sglang_eagle3_embed.core.rules.registry import Refused, rule


@rule(TARGET_NOT_DEEPSEEK)
def _target_not_deepseek(d: Deployment):
    if not (d.plugin_requested and d.target is not None and not d.family):
        return
    if d.target_archs_malformed:
        archs = d.target.get("architectures")
        found = "has no architectures" if archs is None else f"has architectures = {archs!r}"
        yield (
            f"the target's config.json {found}; expected a list of model class names such as "
            f'["DeepseekV3ForCausalLM"]: SGLang picks the model class from it and --model-impl '
            f"{MODEL_IMPL} serves the DeepSeek family only. Fix: use the target's original config.json."
        )
        return
    yield str(UnsupportedModeError.not_deepseek(d.target_arch, reading_of(d.target_arch)))


@rule(PIPELINE_PARALLEL)
def _pipeline_parallel(d: Deployment):
    pp = d.value("pp_size") or 1
    if d.eagle3 and d.family and pp > 1:
        yield str(UnsupportedModeError.pipeline_parallel(pp, f"EAGLE3 on {d.target_arch}"))


@rule(TWO_BATCH_OVERLAP)
def _two_batch_overlap(d: Deployment):
    if d.eagle3 and d.family and d.value("enable_two_batch_overlap"):
        yield str(UnsupportedModeError.two_batch_overlap(f"EAGLE3 on {d.target_arch}"))


@rule(JSON_OVERRIDE_EAGLE_CONFIG)
def _json_override(d: Deployment):
    keys = {"eagle_config", IDS_FIELD, CONVENTION_FIELD, "num_aux_hidden_states"}
    touched = sorted(keys & set(parse_overrides(d.raw.get("json_model_override_args"))))
    if touched:
        yield (
            f"--json-model-override-args sets {', '.join(touched)}: SGLang applies it to the target's "
            f"config as well as the draft's. Fix: edit the draft's config.json instead."
        )


@rule(SGLANG_RESOLUTION)
def _sglang_resolution(d: Deployment):
    if not isinstance(d, Refused) or d.refusal is None:
        return
    if d.target_error:
        yield target_unreadable(
            d.target_error, "SGLang's argument resolution reads it first and cannot go on."
        )
        return
    text = str(d.refusal).strip()
    if not text:  # a bare assert: where it stands is all there is to say
        yield f"{type(d.refusal).__name__} with no message{_where(d.refusal)}"
        return
    yield f"{type(d.refusal).__name__}: {text}"


def _where(error: BaseException) -> str:
    """`` at srt/...py:LINE`` (the SGLang line that raised ``error``), or "" when unknown."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    file = frames[-1].filename.replace("\\", "/")
    file = file.split("/sglang/", 1)[1] if "/sglang/" in file else file.rsplit("/", 1)[-1]
    return (
        f" at {file}:{frames[-1].lineno}; run python -m sglang.launch_server with the same arguments "
        f"for SGLang's own traceback"
    )
