"""``sglang-eagle3-embed ids``: which target tensors a draft config selects, under the plugin and
under stock SGLang 0.5.23 for the target's architecture (pure: imports neither torch nor sglang)."""

from __future__ import annotations

import json

from sglang_eagle3_embed import FAMILY, MODEL_IMPL
from sglang_eagle3_embed.cli._args import add_model_arguments, json_overrides
from sglang_eagle3_embed.cli._exit import EXIT_FINDINGS, EXIT_OK
from sglang_eagle3_embed.core.capture.conventions import default_of, missing_advice, undeclared_advice
from sglang_eagle3_embed.core.capture.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.capture.stock_sglang import stock_reading
from sglang_eagle3_embed.core.errors import DraftConfigError, InputError
from sglang_eagle3_embed.core.readers.hub import locate
from sglang_eagle3_embed.core.readers.model_folder import config_file, layer_count, read_json
from sglang_eagle3_embed.core.readers.overrides import apply_overrides
from sglang_eagle3_embed.core.rule_ids import (
    DRAFT_CONFIG_SHAPE,
    DRAFT_IDS_CONFLICT,
    DRAFT_IDS_INVALID,
    DRAFT_IDS_MISSING,
)

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    ids = sub.add_parser("ids", help="explain which target tensors a draft config selects")
    ids.add_argument(
        "draft", help="draft model folder, its config.json, or a hub repo id (from the local cache)"
    )
    where = ids.add_mutually_exclusive_group(required=True)
    where.add_argument("--target", help="target model folder, its config.json, or a hub repo id")
    where.add_argument("--num-layers", type=int, help="the target's num_hidden_layers")
    add_model_arguments(ids)
    ids.add_argument("--json", action="store_true", help="print JSON")
    ids.set_defaults(func=run)


def _read(path: str, revision: str | None, download_dir: str | None, what: str):
    """``(config file, its JSON)`` of a model folder, a config.json, or a cached hub id."""
    file = config_file(locate(path, revision, download_dir, what), what)
    return file, read_json(file, what)


def run(args) -> int:
    overrides = json_overrides(args.json_model_override_args)
    _, draft = _read(args.draft, args.speculative_draft_model_revision, args.download_dir, "draft config")
    draft = apply_overrides(draft, overrides)  # any JSON: the plan judges it
    arch = None  # --num-layers: a DeepSeek-family target, the one the plugin serves
    if args.num_layers is not None:
        if args.num_layers < 1:
            raise InputError(f"--num-layers {args.num_layers}: a target has at least one layer")
        layers = args.num_layers
    else:
        file, target = _read(args.target, args.revision, args.download_dir, "target config")
        target = apply_overrides(target, overrides)
        layers = layer_count(target, file, "target config", "pass --num-layers N instead")
        archs = target.get("architectures") if isinstance(target, dict) else None
        if archs is not None:  # absent: read as the DeepSeek family, as with --num-layers
            named = isinstance(archs, list) and archs and isinstance(archs[0], str)
            arch = archs[0] if named else repr(archs)
    stock = stock_reading(draft, layers, arch)
    stock_fields = {
        "stock_sglang": stock.outcome,
        "stock_reading": stock.reading,
        "stock_capture_indices": None if stock.indices is None else list(stock.indices),
    }
    if arch is not None and arch not in FAMILY:
        return _stock_only(args, arch, layers, draft, stock, stock_fields, malformed=not named)
    try:
        plan = resolve_capture_plan(draft, layers)
    except DraftConfigError as exc:
        result = {"ok": False, "error": str(exc), "rule": exc.rule, **stock_fields}
    else:
        known = default_of(plan.ids, plan.source, layers)
        result = {
            "ok": True,
            "ids": None if plan.ids is None else list(plan.ids),
            "source": plan.source,
            "convention": plan.convention.value,
            "numbering": f"{known.name}'s default for {layers} layers" if known else None,
            "capture_indices": list(plan.indices),
            "plugin": plan.describe(),
            "warnings": [w.message for w in plan.warnings],
            **stock_fields,
        }
    if arch is not None:
        result["target_architecture"] = arch
    if args.json:
        print(json.dumps(result, indent=2))
    elif result["ok"]:
        print(f"target layers         : {layers}")
        print(f"target architecture   : {arch or 'not given (read as the DeepSeek family)'}")
        print(f"ids                   : {result['ids']} (from {plan.source})")
        convention = plan.convention.value
        if result["numbering"]:
            convention += f" ({result['numbering']}, read right by stock SGLang)"
        print(f"convention            : {convention}")
        print(f"--model-impl {MODEL_IMPL}: captures [{plan.describe()}]")
        print(f"stock SGLang          : {stock.outcome}")
        for warning in plan.warnings:
            print(f"warning [{warning.rule}]: {warning.message}")
    else:
        print(f"error: {result['error']}")
        print(f"stock SGLang{f' ({arch})' if arch else ''}: {stock.outcome}")
    return EXIT_OK if result["ok"] else EXIT_FINDINGS


def _stock_only(args, arch: str, layers: int, draft, stock, stock_fields: dict, malformed: bool) -> int:
    """A target outside the DeepSeek family: the plugin does not serve it, so stock SGLang's own
    reading is the answer. Exit 1 when that fails, when the target's ``architectures`` is not a
    list of class names, or when the draft config is malformed whatever reads it; else 0, with the
    warnings worded for that reading."""
    plugin = f"not for {arch}: the plugin serves the DeepSeek family ({', '.join(FAMILY)})"
    error, warnings = None, []
    if malformed:
        error = f"the target's config.json has architectures = {arch}; expected a list of model class names"
    else:
        try:
            plan = resolve_capture_plan(draft, layers)
        except DraftConfigError as exc:
            if exc.rule in MALFORMED:
                error = str(exc)
        else:
            if stock.indices is not None and plan.warnings:
                warnings = [_stock_warning(w.rule, plan.ids, layers, arch, stock) for w in plan.warnings]
    ok = error is None and (stock.reading == "not modelled" or stock.serves)
    result = {"ok": ok, "target_architecture": arch, "plugin": plugin, "warnings": warnings, **stock_fields}
    if error:
        result["error"] = error
    if args.json:
        print(json.dumps(result, indent=2))
        return EXIT_OK if ok else EXIT_FINDINGS
    print(f"target layers         : {layers}")
    print(f"target architecture   : {arch}")
    print(f"--model-impl {MODEL_IMPL}: {plugin}")
    print(f"stock SGLang          : {stock.outcome}")
    if error:
        print(f"error: {error}")
    for warning in warnings:
        print(f"warning: {warning}")
    return EXIT_OK if ok else EXIT_FINDINGS


MALFORMED = (DRAFT_CONFIG_SHAPE, DRAFT_IDS_INVALID, DRAFT_IDS_CONFLICT)
"""The capture plan's refusals that hold whatever model reads the config."""


def _stock_warning(rule: str, ids, layers: int, arch: str, stock) -> str:
    if rule == DRAFT_IDS_MISSING:
        return missing_advice(layers, stock.indices)
    return undeclared_advice(ids, layers, f"stock SGLang's {arch} ({stock.reading})", stock.indices)
