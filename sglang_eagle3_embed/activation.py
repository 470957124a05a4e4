"""Per-process activation state of the plugin. Pure module.

Every SGLang process runs the entry point anew (``srt/plugins/__init__.py:103-141``), so each has
its own state: :func:`sglang_eagle3_embed.plugin.register` sets it, the glue in
:mod:`sglang_eagle3_embed.patch` reads it to stop launches that ask for an inactive plugin.
"""

from __future__ import annotations

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.errors import PluginInactiveError

__all__ = ["State", "requested", "require_active"]


class State:
    """This process's activation: ``active``, else the ``reason`` why not."""

    active = False
    reason = "the sglang_eagle3_embed plugin was never registered in this process"


def requested(config) -> bool:
    """Whether a ServerArgs or ModelConfig asks for the plugin."""
    return getattr(config, "model_impl", None) == MODEL_IMPL


def require_active() -> None:
    if not State.active:
        raise PluginInactiveError(
            f"--model-impl {MODEL_IMPL} was requested, but the plugin is not active: {State.reason}"
        )
