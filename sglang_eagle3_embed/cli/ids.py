"""``sglang-eagle3-embed ids``: which target tensors a draft config selects, under the plugin and
under stock SGLang 0.5.23 (pure: imports neither torch nor sglang)."""

from __future__ import annotations

import json

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.cli._exit import EXIT_FINDINGS, EXIT_OK
from sglang_eagle3_embed.core.draft_config import resolve_capture_plan, stock_reading
from sglang_eagle3_embed.core.errors import DraftConfigError, InputError
from sglang_eagle3_embed.core.model_folder import config_file, layer_count, read_config, read_json

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    ids = sub.add_parser("ids", help="explain which target tensors a draft config selects")
    ids.add_argument("draft", help="draft model folder or its config.json")
    where = ids.add_mutually_exclusive_group(required=True)
    where.add_argument("--target", help="target model folder or its config.json")
    where.add_argument("--num-layers", type=int, help="the target's num_hidden_layers")
    ids.add_argument("--json", action="store_true", help="print JSON")
    ids.set_defaults(func=run)


def run(args) -> int:
    draft = read_config(args.draft, "draft config", any_json=True)  # any JSON: the plan judges it
    if args.num_layers is not None:
        if args.num_layers < 1:
            raise InputError(f"--num-layers {args.num_layers}: a target has at least one layer")
        layers = args.num_layers
    else:
        file = config_file(args.target, "target config")
        layers = layer_count(
            read_json(file, "target config"), file, "target config", "pass --num-layers N instead"
        )
    stock_indices, stock_outcome = stock_reading(draft, layers)
    try:
        plan = resolve_capture_plan(draft, layers)
    except DraftConfigError as exc:
        result = {"ok": False, "error": str(exc), "rule": exc.rule, "stock_sglang": stock_outcome}
    else:
        result = {
            "ok": True,
            "ids": None if plan.ids is None else list(plan.ids),
            "source": plan.source,
            "convention": plan.convention.value,
            "capture_indices": list(plan.indices),
            "plugin": plan.describe(),
            "warnings": [w.message for w in plan.warnings],
            "stock_sglang": stock_outcome,
            "stock_capture_indices": stock_indices,
        }
    if args.json:
        print(json.dumps(result, indent=2))
    elif result["ok"]:
        print(f"target layers         : {layers}")
        print(f"ids                   : {result['ids']} (from {plan.source})")
        print(f"convention            : {plan.convention.value}")
        print(f"--model-impl {MODEL_IMPL}: captures [{plan.describe()}]")
        print(f"stock SGLang          : {stock_outcome}")
        for warning in plan.warnings:
            print(f"warning [{warning.rule}]: {warning.message}")
    else:
        print(f"error: {result['error']}")
        print(f"stock SGLang: {stock_outcome}")
    return EXIT_OK if result["ok"] else EXIT_FINDINGS
