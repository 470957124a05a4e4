"""Exceptions raised by the plugin. Pure module."""

from __future__ import annotations

__all__ = ["DraftConfigError", "Eagle3EmbedError", "PluginInactiveError", "UnsupportedModeError"]


class Eagle3EmbedError(RuntimeError):
    """Base class: every message names what was wrong and how to fix it."""


class DraftConfigError(Eagle3EmbedError, ValueError):
    """The draft's ``config.json`` does not say unambiguously which tensors it reads."""


class UnsupportedModeError(Eagle3EmbedError):
    """A parallel or scheduling mode that cannot deliver the captures the draft needs."""


class PluginInactiveError(Eagle3EmbedError):
    """``--model-impl sglang_eagle3_embed`` was requested but the plugin could not activate."""
