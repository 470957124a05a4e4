"""``sglang-eagle3-embed demo``: the failure and the fix on the tiny pair, on CPU
(:mod:`sglang_eagle3_embed.doctor.demo`)."""

from __future__ import annotations

from sglang_eagle3_embed.cli._args import add_cache_argument

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    demo = sub.add_parser("demo", help="show the failure and the fix on a tiny pair, on CPU")
    add_cache_argument(demo)
    demo.set_defaults(func=run)


def run(args) -> int:
    from sglang_eagle3_embed.doctor.demo import run_demo

    return run_demo(args.cache)
