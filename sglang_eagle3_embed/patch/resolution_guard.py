"""Wrapper of the first resolution step (docs/patches.md §3): ``handle_mega_moe`` in SGLang 0.5.21,
``handle_deprecated_dp_attention`` from 0.5.22 (:mod:`sglang_eagle3_embed.core.releases`).

Stops a launch that asks for ``--model-impl sglang_eagle3_embed`` when the plugin is not active,
or when SGLang did not apply the architecture hook, in the launcher before any subprocess or GPU
work. SGLang swallows exceptions raised by plugins (``srt/plugins/__init__.py:83-84,135-136``) and
treats an unknown ``--model-impl`` like ``sglang``, so without it a broken plugin would degrade
silently.
"""

from __future__ import annotations

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.activation import requested, require_active
from sglang_eagle3_embed.core.errors import PluginInactiveError
from sglang_eagle3_embed.core.releases import current
from sglang_eagle3_embed.patch import model_architecture

__all__ = ["STEP", "WHAT", "guard", "register"]

STEP: str | None = None
"""The step to wrap; None: the installed release's first step."""
WHAT = "the first resolution step"


def guard(server_args, previous) -> None:
    if requested(server_args):
        require_active()
        if not model_architecture.applied():
            raise PluginInactiveError(
                f"--model-impl {MODEL_IMPL} was requested, but SGLang did not apply the plugin's "
                f"hook on {model_architecture.TARGET} (see 'Failed to apply hooks' above, or call "
                f"sglang.srt.plugins.load_plugins() before building ServerArgs)."
            )
    previous(server_args)


def register() -> None:
    from sglang.srt.arg_groups.resolution_hooks import register_resolution_hook

    register_resolution_hook(STEP or current().first_step)(guard)
