"""Arguments several commands share, by ``sglang.launch_server``'s names (pure)."""

from __future__ import annotations

from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.core.readers.overrides import override_error, parse_overrides

__all__ = ["add_cache_argument", "add_model_arguments", "json_overrides"]


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


def add_cache_argument(parser) -> None:
    """``--cache``: the folder the tiny pairs are built in and found again."""
    parser.add_argument("--cache", help="cache folder (default: $SGLANG_EAGLE3_EMBED_CACHE or ~/.cache)")


def json_overrides(text: str) -> dict:
    """``--json-model-override-args`` as an object, or an :class:`InputError` naming the value."""
    error = override_error(text)
    if error:
        raise InputError(error)
    return parse_overrides(text)
