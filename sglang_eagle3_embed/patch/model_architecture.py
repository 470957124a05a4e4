"""AROUND hook on ``sglang.srt.model_loader.utils.get_model_architecture`` (docs/patches.md §2).

For a target whose ``model_impl`` is ``sglang_eagle3_embed``, SGLang's answer is swapped for the
plugin's class of the same name (:mod:`sglang_eagle3_embed.patch.deepseek_models`); every other
launch, and the draft model, get SGLang's answer untouched.
"""

from __future__ import annotations

import importlib

from sglang_eagle3_embed.activation import requested, require_active

__all__ = ["TARGET", "WHAT", "applied", "around", "register"]

TARGET = "sglang.srt.model_loader.utils.get_model_architecture"
WHAT = TARGET


class _Probe:
    """A stand-in model config that only the plugin's hook answers (see :func:`applied`)."""


PROBE = _Probe()


def around(original, model_config, *args, **kwargs):
    if model_config is PROBE:
        return PROBE
    model_cls, arch = original(model_config, *args, **kwargs)
    if not requested(model_config) or getattr(model_config, "is_draft_model", False):
        return model_cls, arch
    require_active()
    from sglang_eagle3_embed.patch.deepseek_models import plugin_class_for

    return plugin_class_for(model_cls), arch


def register() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, around, HookType.AROUND)


def applied() -> bool:
    """Whether SGLang applied the hook in this process: the function at its public module path,
    called with :data:`PROBE`, is answered by the hook itself (SGLang's own function would fail on
    it). SGLang logs hooks it could not apply and goes on (``srt/plugins/hook_registry.py``)."""
    module, name = TARGET.rsplit(".", 1)
    try:
        return getattr(importlib.import_module(module), name)(PROBE) is PROBE
    except Exception:
        return False
