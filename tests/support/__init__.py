"""Test support: strategies, tiny SGLang models, rule examples, the plugin probe."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (the working directory of every subprocess the tests start)."""


def needs_capture_only():
    """A pytest mark: skip where the installed SGLang has no capture-only mode (before 0.5.23)."""
    import pytest

    from sglang_eagle3_embed.core.releases import current

    installed = current()
    return pytest.mark.skipif(
        not installed.capture_only,
        reason=f"SGLang {installed.version} has no --enable-return-aux-hidden-states (0.5.23 and later)",
    )
