"""GPU end-to-end tests: `pytest -m gpu` (or `pytest -m gpu tests/gpu`) on a machine with CUDA and
SGLang 0.5.23. Without CUDA the test modules are not imported and the suite is one skipped test that
says why."""

import os
import time
from pathlib import Path

import pytest

from harness.engine_run import collect, launch, run_pool


def cuda_missing() -> str | None:
    """Why the GPU suite cannot run here, or None on a machine with a CUDA device."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return None if torch.cuda.is_available() else "no CUDA device"


NO_CUDA = cuda_missing()


class GpuSuiteSkipped(pytest.Item):
    """The one test that stands for the whole GPU suite on a machine without CUDA."""

    def runtest(self):
        pytest.skip(f"{NO_CUDA}: the GPU suite (tests/gpu) needs an NVIDIA GPU and SGLang with its kernels")

    def reportinfo(self):
        return self.path, None, self.name


class NotCollected(pytest.File):
    """A GPU test module on a machine without CUDA: not imported, one skipped test in its place."""

    def collect(self):
        item = GpuSuiteSkipped.from_parent(self, name="the GPU suite")
        item.add_marker(pytest.mark.gpu)
        return [item]


def pytest_pycollect_makemodule(module_path, parent):
    if NO_CUDA is not None:
        return NotCollected.from_parent(parent, path=module_path)
    return None


@pytest.hookimpl(trylast=True)  # after `-m` and `-k` chose
def pytest_collection_modifyitems(config, items):
    """Without CUDA, one skip for the whole suite, with its reason, rather than one per test."""
    for item in [i for i in items if isinstance(i, GpuSuiteSkipped)][1:]:
        items.remove(item)


@pytest.fixture(scope="session")
def gpu_logs(tmp_path_factory) -> Path:
    """Where engine logs and results go: $EAGLE3_EMBED_GPU_LOGS, else a temporary folder."""
    logs = Path(os.environ.get("EAGLE3_EMBED_GPU_LOGS", tmp_path_factory.mktemp("logs")))
    logs.mkdir(parents=True, exist_ok=True)
    return logs


@pytest.fixture(scope="session")
def run_engine(gpu_logs):
    """Start an Engine in a fresh process; return its JSON result plus its combined log. A run past
    ``timeout`` is killed with every process it spawned (``ok`` False, ``error`` names the modes
    that finished), so one hung engine cannot hold the GPU for the rest of the session."""

    def run(name: str, timeout: int = 420, job: dict | None = None, **engine_kwargs) -> dict:
        proc = launch(name, {"engine": engine_kwargs, **(job or {})}, gpu_logs)
        proc.started_at = time.time()
        return collect(name, proc, gpu_logs, proc.started_at + timeout)

    return run


@pytest.fixture(scope="session")
def run_engines(gpu_logs):
    """Run several engines side by side on the GPU (``engine_run.run_pool``)."""

    def run(jobs: dict[str, dict], timeout: int = 480) -> dict[str, dict]:
        return run_pool(jobs, gpu_logs, timeout)

    return run


@pytest.fixture(scope="session")
def gpu_pair():
    """The GPU-sized tiny pair (16-layer target, draft on ids [-1, 4, 10]), trained on the GPU the
    first time into $SGLANG_EAGLE3_EMBED_CACHE, then cached (on the CPU: minutes)."""
    import torch

    from sglang_eagle3_embed.doctor.pair import GPU_PAIR, build_pair

    torch.set_num_threads(min(8, os.cpu_count() or 1))
    return build_pair(GPU_PAIR, device=os.environ.get("EAGLE3_EMBED_PAIR_DEVICE", "cuda"))


@pytest.fixture(scope="session")
def gpu_kimi_pair(gpu_pair):
    """The GPU-sized pair with its target wrapped as Kimi-K2.5 (``pair --size gpu --arch kimi-k25``)."""
    from sglang_eagle3_embed.doctor.kimi import build_kimi_pair

    return build_kimi_pair(gpu_pair.spec, gpu_pair.target.parent)
