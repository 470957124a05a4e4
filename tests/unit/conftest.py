"""Shared fixtures. Tests that touch SGLang ask for ``sglang_cpu``; the pure-core tests do not."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # helper modules: sglang_cpu, strategies
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")


@pytest.fixture(scope="session")
def sglang_cpu():
    """Process-global SGLang CPU state (gloo world of one, published test ServerArgs, patches)."""
    import sglang_cpu as harness

    harness.init()
    return harness
