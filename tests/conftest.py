"""Fixtures shared by the CPU tiers. Tests that touch SGLang ask for ``sglang_cpu``; the pure-core
tests do not. Test support code lives in ``tests/support`` (importable as ``tests.support``: the
repository root is on pytest's ``pythonpath``, pyproject.toml)."""

import os

import pytest

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")


def pytest_configure(config):
    """One torch thread per xdist worker, whatever test a worker runs first: two workers with a
    thread per core each fight over the cores (a probe run can get 100 times slower), and results
    trained on the CPU depend on the thread count."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


@pytest.fixture(scope="session")
def sglang_cpu():
    """Process-global SGLang CPU state (gloo world of one, published test ServerArgs, patches) and
    the helpers that build tiny SGLang models and their HF references."""
    from tests.support import sglang_models as harness

    harness.init()
    return harness


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory):
    """The default CPU pair (PairSpec()), built once into a cache that xdist workers share
    (concurrent builds wait on the cache lock of :func:`sglang_eagle3_embed.doctor.pair.build_pair`),
    or that several pytest runs share where ``EAGLE3_EMBED_TEST_PAIR_CACHE`` names it (``tools.releases``
    runs each older release on one build: the pair is torch's work, not SGLang's)."""
    from sglang_eagle3_embed.doctor.pair import build_pair

    root = tmp_path_factory.getbasetemp()
    cache = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "pair-cache"
    return build_pair(cache_dir=os.environ.get("EAGLE3_EMBED_TEST_PAIR_CACHE") or cache)


@pytest.fixture(scope="session")
def tiny_kimi_pair(tiny_pair):
    """The default CPU pair with its target wrapped as Kimi-K2.5 (``pair --arch kimi-k25``)."""
    from sglang_eagle3_embed.doctor.kimi import build_kimi_pair

    return build_kimi_pair(tiny_pair.spec, tiny_pair.target.parent)


@pytest.fixture(scope="session")
def tiny_mla_pair(tiny_pair):
    """The default CPU pair's target with an MLA draft on the same ids (``pair --draft-arch mla``)."""
    from dataclasses import replace

    from sglang_eagle3_embed.doctor.pair import build_pair

    return build_pair(replace(tiny_pair.spec, draft_arch="mla"), tiny_pair.target.parent)
