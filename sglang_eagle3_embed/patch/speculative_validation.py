"""Wrapper of the ``handle_speculative_decoding`` resolution step: the startup validator
(docs/patches.md §6).

At launch it runs the ``pre`` rules, then SGLang's step, then the ``post`` rules, comparing what the
user passed (``_raw_input``, ``srt/arg_groups/pipeline.py:29-32``) with what SGLang resolved
(``resolution_result``, ``srt/arg_groups/overrides.py:178-192``). It runs in the launcher before any
subprocess or GPU work, only for launches with ``--model-impl sglang_eagle3_embed``, and only then
imports the rules and the launch snapshot (:mod:`sglang_eagle3_embed.patch.launch_snapshot`): every
other process registers the hook and reads no rule. ``sglang-eagle3-embed check`` (the service
:mod:`sglang_eagle3_embed.doctor.check`) runs the same rules on the same snapshot of any launch
command line, without a GPU.
"""

from __future__ import annotations

import logging

from sglang_eagle3_embed.activation import State, requested

__all__ = ["STEP", "WHAT", "register", "validate_launch"]

STEP = "handle_speculative_decoding"
WHAT = f"the resolution step {STEP!r}"

logger = logging.getLogger("sglang_eagle3_embed")
_LOGGED: set = set()
"""The warnings logged in this process (each once, as both stages may find it)."""


def _report(findings) -> None:
    from sglang_eagle3_embed.core.errors import ValidationError
    from sglang_eagle3_embed.core.findings import Severity

    for finding in findings:
        if finding.severity is not Severity.ERROR and finding not in _LOGGED:
            _LOGGED.add(finding)
            logger.warning("sglang_eagle3_embed: [%s] %s", finding.rule, finding.message)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if errors:
        raise ValidationError(errors)


def validate_launch(server_args, previous) -> None:
    """Resolution-step wrapper: rules before and after SGLang's speculative resolution."""
    if not requested(server_args):
        previous(server_args)
        return
    from sglang_eagle3_embed.core.readers.model_folder import headers_read_once
    from sglang_eagle3_embed.core.rules.registry import Stage
    from sglang_eagle3_embed.core.rules.table import evaluate
    from sglang_eagle3_embed.patch.launch_snapshot import snapshot

    state = dict(plugin_active=State.active, plugin_reason=State.reason, fetch=True)
    with headers_read_once():  # both stages read the same weights
        _report(evaluate(snapshot(server_args, resolved=False, **state), Stage.PRE))
        previous(server_args)
        _report(evaluate(snapshot(server_args, resolved=True, **state), Stage.POST))


def register() -> None:
    from sglang.srt.arg_groups.resolution_hooks import register_resolution_hook

    register_resolution_hook(STEP)(validate_launch)
