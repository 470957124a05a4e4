"""``sglang-eagle3-embed probe``: measure a draft under each candidate wiring and tell which one it
was trained for (:mod:`sglang_eagle3_embed.doctor.probe`)."""

from __future__ import annotations

import json
import sys

from sglang_eagle3_embed.cli._args import add_model_arguments
from sglang_eagle3_embed.cli._exit import EXIT_FINDINGS, EXIT_OK
from sglang_eagle3_embed.core.readers.model_folder import user_path

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    probe = sub.add_parser("probe", help="measure a draft under each candidate wiring (offline)")
    probe.add_argument(
        "--target", required=True, help="target model folder, or a hub repo id (from the local cache)"
    )
    probe.add_argument(
        "--draft", required=True, help="EAGLE-3 draft folder (Llama or MLA attention), or a hub repo id"
    )
    add_model_arguments(probe, overrides=False)
    probe.add_argument("--backend", default="hf", choices=["hf", "sglang-cpu", "engine"])
    probe.add_argument(
        "--device",
        help="cpu (default) or cuda (cuda:N: one GPU of several); --backend sglang-cpu runs on the CPU, "
        "--backend engine on a GPU",
    )
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
    probe.add_argument(
        "--expectations",
        metavar="FILE",
        help="also write what a correctly wired server must show, for sglang-eagle3-embed canary --expect "
        "FILE and the startup self-check",
    )
    probe.add_argument("--no-progress", action="store_true", help="no progress bar")
    probe.set_defaults(func=run)


def request(args):
    """The typed request of ``args``: the one place where the probe's flags are read. A hub id is
    its snapshot in the local Hugging Face cache, found as SGLang finds it (never downloaded)."""
    from sglang_eagle3_embed.core.readers.hub import locate
    from sglang_eagle3_embed.doctor.request import ProbeRequest, parse_engine_args

    return ProbeRequest(
        target=locate(args.target, args.revision, args.download_dir, "--target"),
        draft=locate(args.draft, args.speculative_draft_model_revision, args.download_dir, "--draft"),
        backend=args.backend,
        device=args.device,
        engine_args=parse_engine_args(args.engine_arg),
        prompts=user_path(args.prompts) if args.prompts else None,
        num_prompts=args.num_prompts,
        prompt_len=args.prompt_len,
        new_tokens=args.new_tokens,
        num_steps=args.num_steps,
        seed=args.seed,
        progress=not args.no_progress and not args.json,
    )


def run(args) -> int:
    from sglang_eagle3_embed.core.atomic import check_writable, write_atomic
    from sglang_eagle3_embed.doctor.canary import expectations_of, undetermined
    from sglang_eagle3_embed.doctor.probe import probe_folders
    from sglang_eagle3_embed.doctor.request import check_output

    output = check_output(args.output)  # before the run: a report must not be lost at its end
    expect = check_writable(args.expectations, "--expectations") if args.expectations else None
    asked = request(args)
    report = probe_folders(asked)
    text = json.dumps(report.as_dict(), indent=2)
    print(text if args.json else report.table())
    if output:
        write_atomic(output, text, "--output")  # whole or not at all; the old file kept on failure
    if expect:
        why = undetermined(report)
        if why is not None:
            print(f"--expectations {expect}: not written: {why}", file=sys.stderr)
            return EXIT_FINDINGS
        expectations = expectations_of(report, asked).as_dict()
        write_atomic(expect, json.dumps(expectations, indent=2), "--expectations")
    return EXIT_OK if report.plugin_ok else EXIT_FINDINGS
