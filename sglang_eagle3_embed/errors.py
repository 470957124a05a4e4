"""Exceptions raised by the plugin. Pure module."""

from __future__ import annotations

__all__ = [
    "DraftConfigError",
    "Eagle3EmbedError",
    "PluginInactiveError",
    "UnsupportedModeError",
    "ValidationError",
]


class Eagle3EmbedError(RuntimeError):
    """Base class: every message names what was wrong and how to fix it."""


class DraftConfigError(Eagle3EmbedError, ValueError):
    """The draft's ``config.json`` does not say unambiguously which tensors it reads.

    ``rule`` is the id of the validation rule (``docs/validation.md``) the problem belongs to."""

    def __init__(self, message: str, rule: str = "draft-config-shape"):
        super().__init__(message)
        self.rule = rule


class ValidationError(Eagle3EmbedError):
    """The startup validator found errors; the message lists them with their fixes."""

    def __init__(self, findings):
        self.findings = list(findings)
        lines = [f"[{f.rule}] {f.message}" for f in self.findings]
        super().__init__(
            "sglang_eagle3_embed refused this launch before any GPU work:\n  " + "\n  ".join(lines)
        )


class UnsupportedModeError(Eagle3EmbedError):
    """A parallel or scheduling mode that cannot deliver the captures the draft needs."""


class PluginInactiveError(Eagle3EmbedError):
    """``--model-impl sglang_eagle3_embed`` was requested but the plugin could not activate."""
