"""Findings of the validation rules. Pure module."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Finding", "Severity"]


class Severity(str, Enum):
    ERROR = "error"
    """Stops the launch: SGLang would fail late or serve silently wrong output."""
    WARNING = "warning"
    """Logged once: SGLang changes something harmless or keeps a legacy reading."""


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    message: str
