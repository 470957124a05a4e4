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


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory):
    """The default CPU pair (PairSpec()), built once into a cache that xdist workers share
    (a concurrent build is resolved by :func:`sglang_eagle3_embed.tiny_target.publish`)."""
    import torch

    from sglang_eagle3_embed.pair import build_pair

    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)  # one thread per worker: oversubscribed cores slow torch down a lot
    root = tmp_path_factory.getbasetemp()
    cache = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "pair-cache"
    return build_pair(cache_dir=cache)
