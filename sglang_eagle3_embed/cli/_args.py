"""Arguments several commands share, by ``sglang.launch_server``'s names (pure)."""

from __future__ import annotations

import json

from sglang_eagle3_embed.core.errors import InputError

__all__ = ["add_model_arguments", "json_overrides"]


def add_model_arguments(parser, overrides: bool = True) -> None:
    """The launch arguments that say which models SGLang loads and how it reads their configs
    (``sglang.launch_server``'s names): hub revisions, the cache, config overrides."""
    parser.add_argument("--revision", help="the target's hub revision (branch, tag or commit; default main)")
    parser.add_argument("--speculative-draft-model-revision", help="the draft's hub revision (default main)")
    parser.add_argument(
        "--download-dir", help="the Hugging Face cache to read hub ids from (default: HF_HUB_CACHE, HF_HOME)"
    )
    if overrides:
        parser.add_argument(
            "--json-model-override-args",
            default="{}",
            help="config fields SGLang overrides in both the target's and the draft's config (JSON)",
        )


def json_overrides(text: str) -> dict:
    """``--json-model-override-args`` as an object, or an :class:`InputError` naming the value."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(
            f"--json-model-override-args {text[:200]!r}: not JSON ({exc}); pass a JSON object"
        ) from None
    if not isinstance(value, dict):
        raise InputError(
            f"--json-model-override-args {text[:200]!r}: a JSON {type(value).__name__}, not an object; "
            f"pass a JSON object of config fields"
        )
    return value
