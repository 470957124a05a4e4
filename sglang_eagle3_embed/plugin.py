"""Entry point of the ``sglang.srt.plugins`` group: ``eagle3_embed = sglang_eagle3_embed.plugin:register``.

SGLang calls :func:`register` in every process it starts (``srt/plugins/__init__.py:103-141``).
What this module imports is what a server process imports: the pure core and the SGLang glue in
:mod:`sglang_eagle3_embed.patch`, never the wiring doctor or the command line
(``tests/unit/test_layout.py``).
"""

from __future__ import annotations

import logging

from sglang_eagle3_embed import patch
from sglang_eagle3_embed.activation import State
from sglang_eagle3_embed.core.errors import PluginInactiveError
from sglang_eagle3_embed.core.releases import installed_sglang_version, release

__all__ = ["register"]

logger = logging.getLogger("sglang_eagle3_embed")


def register() -> None:
    """Install the hooks, then activate if the installed SGLang is supported.

    Never raises (SGLang would only log it): a failure is recorded, and the hooks stop any launch
    that asks for ``--model-impl sglang_eagle3_embed`` with the reason. Other launches are untouched.
    A hook whose registration failed is tried again by the next call.
    """
    try:
        errors = patch.install()
    except Exception as exc:
        errors = [f"registering its SGLang hooks failed: {exc!r}"]
    if errors:
        State.active = False
        State.reason = "; ".join(errors)
        logger.error("sglang_eagle3_embed inactive: %s", State.reason)
        return
    try:
        _, warning = release(installed_sglang_version())
    except PluginInactiveError as exc:
        State.active = False
        State.reason = str(exc)
        logger.error("sglang_eagle3_embed inactive: %s", exc)
        return
    if warning:
        logger.error("sglang_eagle3_embed: %s", warning)
    State.active = True
    State.reason = ""
