"""The SGLang releases the plugin supports, and what differs between them. Pure module.

Everything the plugin and its CPU harness touch is the same in 0.5.21, 0.5.22 and 0.5.23 but for
line numbers (``docs/patches.md`` has a column per release), except what :class:`Release` records.
Every other module asks :func:`current` instead of comparing version strings. Line references are
``srt/...`` paths of each release's wheel.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata

from sglang_eagle3_embed import __version__
from sglang_eagle3_embed.core.errors import PluginInactiveError

__all__ = [
    "OVERRIDE_ENV",
    "RELEASES",
    "SUPPORTED",
    "Release",
    "current",
    "installed_sglang_version",
    "release",
]

OVERRIDE_ENV = "SGLANG_EAGLE3_EMBED_ALLOW_UNSUPPORTED_SGLANG"
"""Set to ``1`` to activate on another SGLang version anyway (logged as an error-level warning)."""


@dataclass(frozen=True)
class Release:
    version: str
    first_step: str
    """The first step of ``run_resolution_pipeline``, which the resolution guard wraps: the earliest
    point in the launcher, before any subprocess or GPU work."""
    capture_only: bool
    """Whether ``--enable-return-aux-hidden-states`` (capture-only mode, used by ``probe --backend
    engine``) exists."""
    absent_platform_facts: tuple[str, ...] = ()
    """Platform facts ``override_platform`` refuses on this release (``check`` answers as the
    serving GPU through it, ``doctor/serving_machine.py``)."""


RELEASES: dict[str, Release] = {
    # pipeline.py:43 handle_mega_moe; no capture-only fields (exec_.py); no is_mps and no is_sm110
    # platform fact (runtime_context.py:1771-1785)
    "0.5.21": Release("0.5.21", "handle_mega_moe", False, absent_platform_facts=("is_mps", "is_sm110")),
    # pipeline.py:45 handle_deprecated_dp_attention; no capture-only fields
    "0.5.22": Release("0.5.22", "handle_deprecated_dp_attention", capture_only=False),
    # pipeline.py:45; capture-only mode at exec_.py:130,152 and validation_hook.py:697-753
    "0.5.23": Release("0.5.23", "handle_deprecated_dp_attention", capture_only=True),
}
SUPPORTED = tuple(RELEASES)
RANGE = f"sglang>={SUPPORTED[0]},<=" + SUPPORTED[-1]
"""The supported range as users read it (pyproject.toml pins ``sglang>=0.5.21,<0.5.24``)."""


def installed_sglang_version() -> str | None:
    """The installed SGLang's version from its package metadata (never imports sglang)."""
    try:
        return metadata.version("sglang")
    except metadata.PackageNotFoundError:
        return None


def release(installed: str | None, environ: Mapping[str, str] = os.environ) -> tuple[Release, str | None]:
    """The :class:`Release` for ``installed``, with a loud warning when activated by the override;
    raises :class:`PluginInactiveError` naming the supported range otherwise."""
    if installed in RELEASES:
        return RELEASES[installed], None
    problem = (
        f"sglang_eagle3_embed {__version__} supports SGLang {', '.join(SUPPORTED)} ({RANGE}), but "
        f"{'no sglang' if installed is None else f'sglang {installed}'} is installed. Its hooks rely "
        f"on those releases' internals (the DeepSeek capture loop, get_model_architecture, the "
        f"resolution pipeline) and could capture the wrong tensors on another release."
    )
    if environ.get(OVERRIDE_ENV) == "1":
        newest = RELEASES[SUPPORTED[-1]]
        return (
            newest,
            f"{problem} Activating anyway because {OVERRIDE_ENV}=1, as if it were {newest.version}.",
        )
    raise PluginInactiveError(
        f"{problem} Install a release in {RANGE}, or set {OVERRIDE_ENV}=1 to try anyway."
    )


def current(installed: str | None = None) -> Release:
    """What differs in the installed release (``installed``: that version instead), the newest's
    for any other version. A lookup that never refuses: whether the plugin activates is
    :func:`release`'s answer (``plugin.register``), and the resolution guard registers on an
    unsupported release too, to stop the launches that ask for the inactive plugin."""
    return RELEASES.get(installed or installed_sglang_version(), RELEASES[SUPPORTED[-1]])
