"""Refuse to activate on an SGLang release other than the one the hooks were written for.

Pure module: reads the installed version from package metadata, never imports sglang.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import metadata

from sglang_eagle3_embed import SUPPORTED_SGLANG_VERSION, __version__
from sglang_eagle3_embed.core.errors import PluginInactiveError

__all__ = ["OVERRIDE_ENV", "check_sglang_version", "installed_sglang_version"]

OVERRIDE_ENV = "SGLANG_EAGLE3_EMBED_ALLOW_UNSUPPORTED_SGLANG"
"""Set to ``1`` to activate on another SGLang version anyway (logged as an error-level warning)."""


def installed_sglang_version() -> str | None:
    try:
        return metadata.version("sglang")
    except metadata.PackageNotFoundError:
        return None


def check_sglang_version(installed: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """Return None when ``installed`` is supported, a loud warning when overridden, else raise."""
    if installed == SUPPORTED_SGLANG_VERSION:
        return None
    problem = (
        f"sglang_eagle3_embed {__version__} supports sglang=={SUPPORTED_SGLANG_VERSION} only, "
        f"but {'no sglang' if installed is None else f'sglang {installed}'} is installed. "
        f"Its hooks rely on {SUPPORTED_SGLANG_VERSION} internals (the DeepSeek capture loop, "
        f"get_model_architecture, the resolution pipeline) and could capture the wrong tensors "
        f"on another release."
    )
    if environ.get(OVERRIDE_ENV) == "1":
        return f"{problem} Activating anyway because {OVERRIDE_ENV}=1: this combination is untested."
    raise PluginInactiveError(
        f"{problem} Install sglang=={SUPPORTED_SGLANG_VERSION}, or set {OVERRIDE_ENV}=1 to try anyway."
    )
