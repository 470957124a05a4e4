"""``sglang-eagle3-embed pair``: build (or find in the cache) a tiny target/draft pair of a given size
(:mod:`sglang_eagle3_embed.doctor.pair`)."""

from __future__ import annotations

import json

from sglang_eagle3_embed.cli._args import add_cache_argument
from sglang_eagle3_embed.cli._exit import EXIT_OK
from sglang_eagle3_embed.core.capture.draft_config import LLAMA_DRAFT, MLA_DRAFT
from sglang_eagle3_embed.core.readers.hub import check_repo

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
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
    pair.add_argument(
        "--draft-arch",
        choices=["llama", "mla"],
        default="llama",
        help=f"the draft's attention: llama ({LLAMA_DRAFT}) or mla ({MLA_DRAFT}, as Kimi-K2.5's MLA drafts)",
    )
    pair.add_argument(
        "--quantization",
        choices=["fp8", "int4"],
        help="also write the target as the official checkpoints ship it: fp8 block-wise (DeepSeek-V3, "
        "Kimi-K2), int4 compressed-tensors routed experts (Kimi-K2.5)",
    )
    add_cache_argument(pair)
    hub = pair.add_argument_group(
        "hub ids",
        "also put the pair into the local Hugging Face cache as hub ids ORG/NAME (the target) and "
        "ORG/NAME-eagle3 (the draft), so that launch lines can name them offline",
    )
    hub.add_argument("--hub-repo", metavar="ORG/NAME", help="the target's hub id")
    hub.add_argument("--revision", default="main", help="the branch to cache them under")
    hub.add_argument("--download-dir", help="the cache (default: HF_HUB_CACHE, HF_HOME)")
    pair.add_argument("--json", action="store_true", help="errors as JSON too (the result always is)")
    pair.set_defaults(func=run)


def run(args) -> int:
    from dataclasses import replace

    from sglang_eagle3_embed.doctor import pair

    default = pair.GPU_PAIR if args.size == "gpu" else pair.PairSpec()
    sizes = {"num_layers": args.layers, "hidden": args.hidden, "vocab": args.vocab, "heads": args.heads}
    target = replace(default.target, **{k: v for k, v in sizes.items() if v is not None})
    ids = tuple(args.ids) if args.ids else default.ids
    spec = pair.PairSpec(
        target=target, ids=ids, convention=args.convention, declare=args.declare, draft_arch=args.draft_arch
    )
    spec.validate()  # before anything is trained or cached
    if args.hub_repo:
        check_repo(args.hub_repo, "--hub-repo")
    if args.arch == "kimi-k25":
        from sglang_eagle3_embed.doctor.kimi import build_kimi_pair

        built = build_kimi_pair(spec, args.cache, args.device)
    else:
        built = pair.build_pair(spec, args.cache, args.device)
    target = built.target
    if args.quantization:
        from sglang_eagle3_embed.doctor import quantized

        write = quantized.write_fp8_target if args.quantization == "fp8" else quantized.write_int4_target
        target = write(target, target.parent / f"{args.quantization}-{target.name}")
    result = {"ok": True, "target": str(target), "draft": str(built.draft)}
    if args.hub_repo:
        from sglang_eagle3_embed.doctor.hub_cache import publish

        draft_repo = f"{args.hub_repo}-eagle3"
        publish(target, args.hub_repo, args.revision, args.download_dir)
        publish(built.draft, draft_repo, args.revision, args.download_dir)
        result.update(target_repo=args.hub_repo, draft_repo=draft_repo, revision=args.revision)
    print(json.dumps(result))
    return EXIT_OK
