"""Entry point of the ``sglang.srt.plugins`` group: ``eagle3_embed = sglang_eagle3_embed.plugin:register``.

SGLang calls :func:`register` in every process it starts (``srt/plugins/__init__.py:103-141``).
"""

from __future__ import annotations

import logging

from sglang_eagle3_embed import hooks
from sglang_eagle3_embed.compat import check_sglang_version, installed_sglang_version
from sglang_eagle3_embed.errors import PluginInactiveError

__all__ = ["register"]

logger = logging.getLogger("sglang_eagle3_embed")


def register() -> None:
    """Install the hooks, then activate if the installed SGLang is supported.

    Never raises (SGLang would only log it): a failure is recorded, and the hooks stop any launch
    that asks for ``--model-impl sglang_eagle3_embed`` with the reason. Other launches are untouched.
    """
    try:
        errors = hooks.install()
    except Exception as exc:
        errors = [f"registering its SGLang hooks failed: {exc!r}"]
    if errors:
        hooks.State.active = False
        hooks.State.reason = "; ".join(errors)
        logger.error("sglang_eagle3_embed inactive: %s", hooks.State.reason)
        return
    try:
        warning = check_sglang_version(installed_sglang_version())
    except PluginInactiveError as exc:
        hooks.State.active = False
        hooks.State.reason = str(exc)
        logger.error("sglang_eagle3_embed inactive: %s", exc)
        return
    if warning:
        logger.error("sglang_eagle3_embed: %s", warning)
    hooks.State.active = True
    hooks.State.reason = ""
