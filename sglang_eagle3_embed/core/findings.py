"""Findings of the validation rules. Pure module."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Finding", "NotChecked", "Severity"]


class Severity(str, Enum):
    ERROR = "error"
    """Stops the launch: SGLang would fail late or serve silently wrong output."""
    WARNING = "warning"
    """Logged once: SGLang changes something harmless or keeps a legacy reading."""
    NOT_CHECKED = "not checked"
    """The rule applies but lacks what it reads (its message says what): neither passed nor failed."""


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    message: str


@dataclass(frozen=True)
class NotChecked:
    """Yielded by a rule's check instead of a message when it cannot evaluate the launch."""

    why: str
