"""The SGLang glue: one module per SGLang symbol the plugin touches.

``docs/patches.md`` is the manifest (per symbol: why, how, upstream status, removal plan, test);
each module below has its test under ``tests/integration/patch/``.

=========================  ==================================================  ============================
module                     SGLang symbol                                       how
=========================  ==================================================  ============================
``model_architecture``     ``srt.model_loader.utils.get_model_architecture``   ``HookRegistry`` AROUND hook
``resolution_guard``       first resolution step (``Release.first_step``)      ``register_resolution_hook``
``speculative_validation`` resolution step ``handle_speculative_decoding``     ``register_resolution_hook``
``deepseek_models``        ``DeepseekV2/V3/V32ForCausalLM``, Kimi-K2.5         subclasses of the same name
``deepseek_capture``       ``DeepseekV2Model`` (the model body)                re-classed after construction
``canary_warmup``          ``srt.entrypoints.warmup.warmup`` (the registry)    a warmup named in ``--warmups``
=========================  ==================================================  ============================

The first three and the last register hooks (:func:`install`); ``deepseek_models`` and
``deepseek_capture`` are returned by the first, only for a target launched with
``--model-impl sglang_eagle3_embed``. The warmup runs only where ``--warmups`` names it.

What a server process runs
--------------------------
SGLang imports :mod:`sglang_eagle3_embed.plugin` in every process it starts; the modules it reaches
are all the plugin does at runtime (``tests/unit/patch/test_server_modules.py`` keeps this list
equal to what ``tests/unit/test_layout.py`` finds), and each kind of process imports only its part
(``tests/integration/patch/test_server_imports.py`` measures each against a ceiling):

- the glue, about 870 lines: ``plugin`` (50: registers the hooks once per process, checks the
  release, sets ``activation``, 30), this package (70), ``model_architecture`` (50),
  ``resolution_guard`` (60), ``speculative_validation`` (60) and ``launch_snapshot`` (170, what its
  rules read of a launch), ``deepseek_models`` (80), ``deepseek_capture`` (170, the only plugin
  code on the forward path), ``canary_warmup`` (30, in every process) and ``canary_check`` (180,
  loaded in the HTTP server's process when the warmup runs);
- the pure core they call (no torch, no sglang), about 3,600 lines: ``core.releases``,
  ``core.errors``, ``core.rule_ids`` (every process); ``core.capture`` and ``core.findings`` (the
  capture plan, in a worker at model load; ``capture.stock_sglang`` only to word a refusal);
  ``core.rules``, ``core.readers`` and ``core.pd`` (the startup rules, in the launcher, for a
  launch that asks for the plugin); ``core.canary`` (the warmup, when it runs).
"""

from __future__ import annotations

from sglang_eagle3_embed.patch import (
    canary_warmup,
    model_architecture,
    resolution_guard,
    speculative_validation,
)

__all__ = ["HOOKS", "install"]

HOOKS = (resolution_guard, speculative_validation, model_architecture, canary_warmup)
"""The modules that register a hook; each has ``WHAT`` (the hooked symbol) and ``register()``."""

_registered: set[str] = set()


def install() -> list[str]:
    """Register every hook not registered yet in this process, each on its own, so that the guard
    or the architecture hook alone still stops a launch that asks for the plugin when another
    failed. Returns the failures (empty when all are registered); a failed hook is tried again by
    the next call. SGLang applies HookRegistry hooks after every plugin ran."""
    errors = []
    for hook in HOOKS:
        if hook.WHAT in _registered:
            continue
        try:
            hook.register()
        except Exception as exc:
            errors.append(f"registering the hook on {hook.WHAT} failed: {exc!r}")
        else:
            _registered.add(hook.WHAT)
    return errors
