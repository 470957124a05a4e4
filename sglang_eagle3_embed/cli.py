"""``sglang-eagle3-embed``: command-line tools that need no GPU.

- ``ids`` explains which target tensors a draft config selects, under the plugin and under stock
  SGLang 0.5.23 (pure: imports neither torch nor sglang);
- ``check`` validates a deployment: the same arguments as ``sglang.launch_server``, resolved by
  SGLang's own argument resolution on the CPU, configs only (imports sglang when run).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sglang_eagle3_embed import MODEL_IMPL, __version__
from sglang_eagle3_embed.draft_config import resolve_capture_plan, stock_reading
from sglang_eagle3_embed.errors import DraftConfigError
from sglang_eagle3_embed.findings import Severity

__all__ = ["main"]


def _usage_error(message: str) -> None:
    print(f"sglang-eagle3-embed: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _load_config(path: str) -> dict:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        _usage_error(f"cannot read {p}: {exc}")


def _target_layers(args) -> int:
    if args.num_layers is not None:
        return args.num_layers
    config = _load_config(args.target)
    text = config.get("text_config") or config  # Kimi-K2.5 nests the DeepSeek config
    layers = text.get("num_hidden_layers")
    if not isinstance(layers, int):
        _usage_error(f"{args.target} has no integer num_hidden_layers")
    return layers


def _cmd_ids(args) -> int:
    draft = _load_config(args.draft)
    layers = _target_layers(args)
    stock_indices, stock_outcome = stock_reading(draft, layers)
    try:
        plan = resolve_capture_plan(draft, layers)
    except DraftConfigError as exc:
        result = {"ok": False, "error": str(exc), "stock_sglang": stock_outcome}
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
        print(f"stock SGLang 0.5.23   : {stock_outcome}")
        for warning in plan.warnings:
            print(f"warning [{warning.rule}]: {warning.message}")
    else:
        print(f"error: {result['error']}")
        print(f"stock SGLang 0.5.23: {stock_outcome}")
    return 0 if result["ok"] else 1


CHECK_USAGE = """usage: sglang-eagle3-embed check [--json] <arguments of python -m sglang.launch_server>

Validate a deployment without a GPU and without weights (configs only): SGLang's own argument
resolution, then every rule of docs/validation.md. Exit 0: no error; 1: errors; 2: bad invocation."""


def _cmd_check(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(CHECK_USAGE)
        return 0 if argv else 2
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    from sglang_eagle3_embed.check_report import render_json, render_table
    from sglang_eagle3_embed.validation import run_check

    findings = run_check(argv)  # SGLang's parser exits 2 on bad arguments
    print(render_json(findings) if as_json else render_table(findings))
    return 1 if any(f.severity is Severity.ERROR for f in findings) else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang-eagle3-embed", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    ids = sub.add_parser("ids", help="explain which target tensors a draft config selects")
    ids.add_argument("draft", help="draft model folder or its config.json")
    where = ids.add_mutually_exclusive_group(required=True)
    where.add_argument("--target", help="target model folder or its config.json")
    where.add_argument("--num-layers", type=int, help="the target's num_hidden_layers")
    ids.add_argument("--json", action="store_true", help="print JSON")
    ids.set_defaults(func=_cmd_ids)
    sub.add_parser("check", help="validate a launch command line without a GPU", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "check":  # everything after `check` belongs to SGLang's parser
        return _cmd_check(argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
