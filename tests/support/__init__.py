"""Test support: strategies, tiny SGLang models, rule examples, the plugin probe."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (the working directory of every subprocess the tests start)."""
