"""The plugin's hooks into SGLang 0.5.23 (glue; listed in docs/patches.md).

1. An AROUND hook on ``sglang.srt.model_loader.utils.get_model_architecture`` returns the plugin's
   classes for a target whose ``model_impl`` is ``sglang_eagle3_embed``; every other launch, and
   the draft model, get SGLang's answer untouched.
2. A wrapper of the first resolution step (``handle_deprecated_dp_attention``) that stops a launch
   asking for the plugin when the plugin is not active, before any subprocess or GPU work. SGLang
   swallows exceptions raised by plugins (``srt/plugins/__init__.py:83-84,135-136``) and treats an
   unknown ``--model-impl`` like ``sglang``, so without it a broken plugin would degrade silently.
3. A wrapper of the ``handle_speculative_decoding`` step: the startup validator
   (:mod:`sglang_eagle3_embed.validation`), for launches that ask for the plugin.
"""

from __future__ import annotations

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.errors import PluginInactiveError

__all__ = [
    "ARCH_TARGET",
    "GUARD_STEP",
    "VALIDATION_STEP",
    "State",
    "install",
    "requested",
    "require_active",
]

ARCH_TARGET = "sglang.srt.model_loader.utils.get_model_architecture"
GUARD_STEP = "handle_deprecated_dp_attention"
VALIDATION_STEP = "handle_speculative_decoding"


class State:
    """Per-process activation state (every SGLang process runs the entry point anew)."""

    active = False
    reason = "the sglang_eagle3_embed plugin was never registered in this process"
    installed = False


def requested(config) -> bool:
    """Whether a ServerArgs or ModelConfig asks for the plugin."""
    return getattr(config, "model_impl", None) == MODEL_IMPL


def require_active() -> None:
    if not State.active:
        raise PluginInactiveError(
            f"--model-impl {MODEL_IMPL} was requested, but the plugin is not active: {State.reason}"
        )


def _resolution_guard(server_args, previous) -> None:
    if requested(server_args):
        require_active()
        from sglang.srt.plugins.hook_registry import HookRegistry

        if ARCH_TARGET not in HookRegistry._patched:
            raise PluginInactiveError(
                f"--model-impl {MODEL_IMPL} was requested, but SGLang did not apply the plugin's "
                f"hook on {ARCH_TARGET} (see 'Failed to apply hooks' above, or call "
                f"sglang.srt.plugins.load_plugins() before building ServerArgs)."
            )
    previous(server_args)


def _around_get_model_architecture(original, model_config, *args, **kwargs):
    model_cls, arch = original(model_config, *args, **kwargs)
    if not requested(model_config) or getattr(model_config, "is_draft_model", False):
        return model_cls, arch
    require_active()
    from sglang_eagle3_embed.models import plugin_class_for

    return plugin_class_for(model_cls), arch


def _validate_launch(server_args, previous) -> None:
    from sglang_eagle3_embed.validation import validate_launch

    validate_launch(server_args, previous)


def install() -> list[str]:
    """Register the hooks, each on its own, so that the guard or the architecture hook alone
    still stops a launch that asks for the plugin when another failed. Returns the failures
    (empty when all registered). Idempotent. SGLang applies HookRegistry hooks after every
    plugin ran."""
    if State.installed:
        return []
    from sglang.srt.arg_groups.resolution_hooks import register_resolution_hook
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    errors = []
    try:
        register_resolution_hook(GUARD_STEP)(_resolution_guard)
    except Exception as exc:
        errors.append(f"registering the resolution guard on {GUARD_STEP!r} failed: {exc!r}")
    try:
        register_resolution_hook(VALIDATION_STEP)(_validate_launch)
    except Exception as exc:
        errors.append(f"registering the startup validator on {VALIDATION_STEP!r} failed: {exc!r}")
    try:
        HookRegistry.register(ARCH_TARGET, _around_get_model_architecture, HookType.AROUND)
    except Exception as exc:
        errors.append(f"registering the hook on {ARCH_TARGET} failed: {exc!r}")
    State.installed = True
    return errors
