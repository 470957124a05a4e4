"""``sglang-eagle3-embed``: the command line (no GPU needed; not imported by a server).

- ``ids`` explains which target tensors a draft config selects, under the plugin and under stock
  SGLang 0.5.23 (pure: imports neither torch nor sglang);
- ``check`` validates a deployment: the same arguments as ``sglang.launch_server``, resolved by
  SGLang's own argument resolution on the CPU, configs only (imports sglang when run);
- ``probe`` measures a draft under each candidate wiring and tells which one it was trained for;
- ``demo`` shows the failure and the fix on the tiny pair, on CPU;
- ``pair`` builds (or finds in the cache) a tiny target/draft pair of a given size.

Exit status of every command: 0 ok; 1 findings (the deployment or the draft is wrong, or the plugin
misreads it); 2 a bad invocation or unreadable input, with the path or flag and what to do. Input a
user can get wrong never ends in a traceback (``--debug`` shows one); with ``--json`` the output is
JSON, errors included.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

from sglang_eagle3_embed import MODEL_IMPL, __version__
from sglang_eagle3_embed.core.draft_config import resolve_capture_plan, stock_reading
from sglang_eagle3_embed.core.errors import DraftConfigError, InputError
from sglang_eagle3_embed.core.findings import Severity

__all__ = ["EXIT_FINDINGS", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse whose errors follow the contract (JSON with --json) instead of exiting itself."""

    def error(self, message):
        raise InputError(f"{message} (see {self.prog} --help)")


def config_file(path: str | Path) -> Path:
    """``path`` itself, or its ``config.json`` when it is a folder."""
    p = Path(path).expanduser()
    return p / "config.json" if p.is_dir() else p


def read_json(path: str | Path, what: str):
    """The JSON in ``path`` (a folder means its ``config.json``); :class:`InputError` naming the file."""
    p, file = Path(path).expanduser(), config_file(path)
    if not file.exists():
        where = "no such file or folder" if not p.exists() else "no config.json in it"
        raise InputError(f"{what} {file}: {where}. Pass the model folder (or its config.json).")
    try:
        text = file.read_text()
    except OSError as exc:
        raise InputError(f"{what} {file}: cannot be read: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} {file} is not valid JSON ({exc}); fix or download it again.") from None


def target_layers(target, where: Path) -> int:
    """``num_hidden_layers`` of the target config read from ``where`` (Kimi-K2.5: of its
    ``text_config``)."""
    if not isinstance(target, dict):
        raise InputError(f"target config {where} is not a JSON object but a {type(target).__name__}")
    text = target.get("text_config", target)
    if not isinstance(text, dict):
        raise InputError(f"target config {where}: text_config is not a JSON object")
    layers = text.get("num_hidden_layers")
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise InputError(
            f"target config {where} has no integer num_hidden_layers (found {layers!r}); "
            f"pass --num-layers N instead"
        )
    return layers


def _cmd_ids(args) -> int:
    draft = read_json(args.draft, "draft config")
    if args.num_layers is not None:
        if args.num_layers < 1:
            raise InputError(f"--num-layers {args.num_layers}: a target has at least one layer")
        layers = args.num_layers
    else:
        layers = target_layers(read_json(args.target, "target config"), config_file(args.target))
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


CHECK_USAGE = """usage: sglang-eagle3-embed check [--json] <arguments of python -m sglang.launch_server>

Validate a deployment without a GPU and without weights (configs only): SGLang's own argument
resolution, then every rule of docs/validation.md. A rule that could not be evaluated says
"not checked" and why. Exit 0: no error; 1: errors; 2: a bad invocation."""


def _cmd_check(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(CHECK_USAGE)
        if not argv:
            raise InputError("check needs the arguments of python -m sglang.launch_server")
        return EXIT_OK
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    from sglang_eagle3_embed.cli.check import LaunchArgumentsError, render_json, render_table, run_check

    try:
        findings = run_check(argv)
    except LaunchArgumentsError as exc:
        raise InputError(str(exc)) from None
    print(render_json(findings) if as_json else render_table(findings))
    return EXIT_FINDINGS if any(f.severity is Severity.ERROR for f in findings) else EXIT_OK


def _cmd_probe(args) -> int:
    from sglang_eagle3_embed.doctor.probe import check_output, probe_folders

    output = check_output(args.output)  # before the run: a report must not be lost at its end
    report = probe_folders(args)
    text = json.dumps(report.as_dict(), indent=2)
    print(text if args.json else report.table())
    if output:
        output.write_text(text)
    return EXIT_OK if report.plugin_ok else EXIT_FINDINGS


def _cmd_demo(args) -> int:
    from sglang_eagle3_embed.doctor.demo import run_demo

    return run_demo(args.cache)


def _cmd_pair(args) -> int:
    from dataclasses import replace

    from sglang_eagle3_embed.doctor import pair

    default = pair.GPU_PAIR if args.size == "gpu" else pair.PairSpec()
    sizes = {"num_layers": args.layers, "hidden": args.hidden, "vocab": args.vocab, "heads": args.heads}
    target = replace(default.target, **{k: v for k, v in sizes.items() if v is not None})
    ids = tuple(args.ids) if args.ids else default.ids
    spec = pair.PairSpec(target=target, ids=ids, convention=args.convention, declare=args.declare)
    spec.validate()  # before anything is trained or cached
    if args.arch == "kimi-k25":
        from sglang_eagle3_embed.doctor.kimi import build_kimi_pair

        built = build_kimi_pair(spec, args.cache, args.device)
    else:
        built = pair.build_pair(spec, args.cache, args.device)
    print(json.dumps({"ok": True, "target": str(built.target), "draft": str(built.draft)}))
    return EXIT_OK


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
    pair.add_argument(
        "--arch",
        choices=["deepseek-v3", "kimi-k25"],
        default="deepseek-v3",
        help="the target's architecture: DeepSeek-V3, or Kimi-K2.5 (the same text model in the "
        "multimodal wrapper, with a small random vision tower; serve it with --trust-remote-code)",
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
    pair.add_argument("--json", action="store_true", help="errors as JSON too (the result always is)")
    pair.set_defaults(func=_cmd_pair)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sglang-eagle3-embed",
        description=__doc__.splitlines()[0],
        epilog="Exit status: 0 ok, 1 findings, 2 a bad invocation or unreadable input. "
        "--debug (any command) shows the traceback of an error.",
    )
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


def _fail(message: str, as_json: bool, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    if as_json:
        print(json.dumps({"ok": False, "error": message, "exit_code": EXIT_USAGE}, indent=2))
    else:
        print(f"sglang-eagle3-embed: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    as_json = "--json" in argv
    if not argv:
        build_parser().print_help()
        return EXIT_OK
    try:
        if argv[0] == "check":  # everything after `check` belongs to SGLang's parser
            return _cmd_check(argv[1:])
        args = build_parser().parse_args(argv)
        return args.func(args)
    except InputError as exc:
        return _fail(str(exc), as_json, debug)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # never a traceback for a user; --debug shows it
        return _fail(f"{type(exc).__name__}: {exc} (run with --debug for the traceback)", as_json, debug)


if __name__ == "__main__":
    sys.exit(main())
