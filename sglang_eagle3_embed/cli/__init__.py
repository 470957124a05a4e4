"""``sglang-eagle3-embed``: the command line (no GPU needed; not imported by a server).

- ``ids`` explains which target tensors a draft config selects, under the plugin and under stock
  SGLang 0.5.23 (pure: imports neither torch nor sglang);
- ``check`` validates a deployment: the same arguments as ``sglang.launch_server``, resolved by
  SGLang's own argument resolution on the CPU, configs only (imports sglang when run);
- ``probe`` measures a draft under each candidate wiring and names the one it was trained for;
- ``demo`` shows the failure and the fix on the tiny pair, on CPU;
- ``pair`` builds (or finds in the cache) a tiny target/draft pair of a given size.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sglang_eagle3_embed import MODEL_IMPL, __version__
from sglang_eagle3_embed.core.draft_config import resolve_capture_plan, stock_reading
from sglang_eagle3_embed.core.errors import DraftConfigError
from sglang_eagle3_embed.core.findings import Severity

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
    from sglang_eagle3_embed.cli.check import render_json, render_table, run_check

    findings = run_check(argv)  # SGLang's parser exits 2 on bad arguments
    print(render_json(findings) if as_json else render_table(findings))
    return 1 if any(f.severity is Severity.ERROR for f in findings) else 0


def _cmd_probe(args) -> int:
    from sglang_eagle3_embed.doctor.probe import load_prompts, probe_folders

    prompts = load_prompts(args)
    report = probe_folders(args, prompts)
    print(json.dumps(report.as_dict(), indent=2) if args.json else report.table())
    if args.output:
        Path(args.output).write_text(json.dumps(report.as_dict(), indent=2))
    return 0 if report.is_named(report.result("plugin")) else 1


def _cmd_demo(args) -> int:
    from sglang_eagle3_embed.doctor.demo import run_demo

    return run_demo(args.cache)


def _cmd_pair(args) -> int:
    from dataclasses import replace

    from sglang_eagle3_embed.doctor.pair import GPU_PAIR, PairSpec, build_pair

    base = (GPU_PAIR if args.size == "gpu" else PairSpec()).target
    sizes = {"num_layers": args.layers, "hidden": args.hidden, "vocab": args.vocab, "heads": args.heads}
    target = replace(base, **{k: v for k, v in sizes.items() if v is not None})
    ids = tuple(args.ids) if args.ids else (GPU_PAIR if args.size == "gpu" else PairSpec()).ids
    spec = PairSpec(target=target, ids=ids, convention=args.convention, declare=args.declare)
    pair = build_pair(spec, args.cache, args.device)
    print(json.dumps({"target": str(pair.target), "draft": str(pair.draft)}))
    return 0


def _add_probe(sub) -> None:
    probe = sub.add_parser("probe", help="measure a draft under each candidate wiring (offline)")
    probe.add_argument("--target", required=True, help="target model folder")
    probe.add_argument("--draft", required=True, help="EAGLE-3 draft folder (LlamaForCausalLMEagle3)")
    probe.add_argument("--backend", default="hf", choices=["hf", "sglang-cpu", "engine"])
    probe.add_argument("--device", help="cpu (default) or cuda; the engine backend always uses cuda")
    probe.add_argument(
        "--engine-arg",
        action="append",
        metavar="KEY=VALUE",
        help="sglang.Engine argument for --backend engine (repeatable; VALUE parsed as JSON if it can be)",
    )
    probe.add_argument("--prompts", help="file: one prompt per line, text or a JSON list of token ids")
    probe.add_argument("--num-prompts", type=int, default=128)
    probe.add_argument("--prompt-len", type=int, default=8, help="length of generated prompts")
    probe.add_argument("--new-tokens", type=int, default=40, help="greedy tokens per prompt")
    probe.add_argument("--num-steps", type=int, default=7, help="chain length (--speculative-num-steps)")
    probe.add_argument("--seed", type=int, default=1234)
    probe.add_argument("--json", action="store_true", help="print JSON")
    probe.add_argument("--output", help="also write the JSON report to this file")
    probe.add_argument("--no-progress", action="store_true", help="no progress bar")
    probe.set_defaults(func=_cmd_probe)


def _add_pair(sub) -> None:
    pair = sub.add_parser("pair", help="build (or find in the cache) a tiny target/draft pair")
    pair.add_argument(
        "--size",
        choices=["cpu", "gpu"],
        default="cpu",
        help="cpu: 7 layers, ids -1 2 4 (the demo's); gpu: 16 layers, MLA widths SGLang's GPU kernels take",
    )
    pair.add_argument("--layers", type=int)
    pair.add_argument("--hidden", type=int)
    pair.add_argument("--vocab", type=int)
    pair.add_argument("--heads", type=int)
    pair.add_argument("--ids", type=int, nargs="+", help="layer ids the draft is trained on")
    pair.add_argument("--convention", default="layer_output", choices=["layer_output", "hidden_states"])
    pair.add_argument("--device", default="cpu", help="train on cpu (bit-reproducible) or cuda (faster)")
    pair.add_argument("--declare", action="store_true", help="write the convention into the draft config")
    pair.add_argument("--cache", help="cache folder (default: $SGLANG_EAGLE3_EMBED_CACHE or ~/.cache)")
    pair.set_defaults(func=_cmd_pair)


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
    _add_probe(sub)
    demo = sub.add_parser("demo", help="show the failure and the fix on a tiny pair, on CPU")
    demo.add_argument("--cache", help="cache folder (default: $SGLANG_EAGLE3_EMBED_CACHE or ~/.cache)")
    demo.set_defaults(func=_cmd_demo)
    _add_pair(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        build_parser().print_help()
        return 0
    if argv[0] == "check":  # everything after `check` belongs to SGLang's parser
        return _cmd_check(argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
