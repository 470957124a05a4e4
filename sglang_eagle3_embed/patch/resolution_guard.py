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
from sglang_eagle3_embed.core.releases import RELEASES, SUPPORTED, current
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


def steps() -> list[str]:
    """The steps to try, in order: the installed release's first step, then every supported
    release's (newest first) for an SGLang the plugin does not know, where the guard must still
    register to stop the launches that ask for the inactive plugin."""
    if STEP:
        return [STEP]
    return list(dict.fromkeys([current().first_step, *(RELEASES[v].first_step for v in reversed(SUPPORTED))]))


def register() -> None:
    """Wrap the first step in :func:`steps` that SGLang accepts (it raises ``ValueError`` on a name
    outside its pipeline, registering nothing); raise the last refusal when none is."""
    from sglang.srt.arg_groups.resolution_hooks import register_resolution_hook

    *earlier, last = steps()
    for step in earlier:
        try:
            register_resolution_hook(step)(guard)
            return
        except ValueError:
            continue
    register_resolution_hook(last)(guard)
