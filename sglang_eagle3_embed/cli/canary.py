"""``sglang-eagle3-embed canary``: ask a running server (or a PD router) whether it feeds the draft
the tensors it was trained on, by its accept length on the prompts ``probe --expectations``
recorded (:mod:`sglang_eagle3_embed.doctor.canary`)."""

from __future__ import annotations

import json
import os

from sglang_eagle3_embed.cli._exit import EXIT_OK

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    canary = sub.add_parser(
        "canary", help="ask a running server whether it feeds the draft what it was trained on"
    )
    canary.add_argument("--url", required=True, help="the server or PD router, http://HOST:PORT")
    canary.add_argument(
        "--expect", help="expectations file written by probe --expectations (without it: measure only)"
    )
    canary.add_argument(
        "--api-key",
        default=os.environ.get("SGLANG_API_KEY"),
        help="the server's --api-key (default: $SGLANG_API_KEY)",
    )
    canary.add_argument("--timeout", type=float, default=300.0, help="seconds per HTTP call (default 300)")
    canary.add_argument(
        "--tolerance",
        type=float,
        help="relative allowance beside the noise for what the probe does not model (default 0.08)",
    )
    canary.add_argument("--num-prompts", type=int, default=8, help="prompts sent without --expect")
    canary.add_argument("--json", action="store_true", help="print JSON")
    canary.set_defaults(func=run)


def run(args) -> int:
    from sglang_eagle3_embed.core.canary.expectations import Expectations
    from sglang_eagle3_embed.core.errors import InputError
    from sglang_eagle3_embed.doctor.canary import run_canary

    if args.timeout <= 0:
        raise InputError(f"--timeout {args.timeout}: must be more than 0 seconds")
    if args.tolerance is not None and not 0 <= args.tolerance < 1:
        raise InputError(f"--tolerance {args.tolerance}: a fraction of the predicted accept length, 0 to 1")
    if args.num_prompts < 1:
        raise InputError(f"--num-prompts {args.num_prompts}: must be at least 1")
    if not args.url.startswith(("http://", "https://")):
        raise InputError(f"--url {args.url}: write the server's address as http://HOST:PORT")
    expectations = Expectations.read(args.expect) if args.expect else None
    result = run_canary(
        args.url,
        expectations,
        api_key=args.api_key,
        timeout=args.timeout,
        tolerance=args.tolerance,
        num_prompts=args.num_prompts,
    )
    print(json.dumps(result.as_dict(expectations), indent=2) if args.json else result.text())
    return result.exit_code if result.exit_code else EXIT_OK
