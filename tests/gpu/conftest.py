"""GPU end-to-end tests: `pytest -m gpu tests/gpu` on a machine with CUDA and SGLang 0.5.23."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gpu.engine_run import missing_result

ROOT = Path(__file__).resolve().parents[2]

# an engine that crashes would spend 65 s on crash diagnostics (py-spy and CUDA core dumps, then a
# 60 s wait: srt/managers/tokenizer_manager.py:3395-3397,3481-3501) before exiting; the tests read
# the log instead. Set either variable to 1 to get them back.
CRASH_DIAGNOSTICS_OFF = {"SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0", "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0"}


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="no CUDA device: GPU end-to-end tests need an NVIDIA GPU and sglang")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def run_engine(tmp_path_factory):
    """Start an Engine in a fresh process; return its JSON result plus its combined log. A run past
    ``timeout`` is killed with every process it spawned (``ok`` False, ``error`` names the modes
    that finished), so one hung engine cannot hold the GPU for the rest of the session."""
    logs = Path(os.environ.get("EAGLE3_EMBED_GPU_LOGS", tmp_path_factory.mktemp("logs")))
    logs.mkdir(parents=True, exist_ok=True)

    def run(name: str, timeout: int = 420, job: dict | None = None, **engine_kwargs) -> dict:
        result_path = logs / f"{name}.json"
        result_path.unlink(missing_ok=True)
        with open(logs / f"{name}.log", "w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.gpu.engine_run", str(result_path), json.dumps({"engine": engine_kwargs, **(job or {})})],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT,
                env={**CRASH_DIAGNOSTICS_OFF, **os.environ},
            )  # fmt: skip
            killed_at = None
            try:
                returncode = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                returncode, killed_at = proc.wait(), timeout
        result = json.loads(result_path.read_text()) if result_path.exists() else {}
        if "ok" not in result:
            done = list(result.get("modes", {}))
            result.update(ok=False, error=missing_result(name, returncode, killed_at, done))
        result["returncode"] = returncode
        result["log"] = (logs / f"{name}.log").read_text()
        return result

    return run


@pytest.fixture(scope="session")
def gpu_pair():
    """The GPU-sized tiny pair (16-layer target, draft on ids [-1, 4, 10]), trained on the GPU the
    first time into $SGLANG_EAGLE3_EMBED_CACHE, then cached (on the CPU: about 3 min)."""
    import torch

    from sglang_eagle3_embed.doctor.pair import GPU_PAIR, build_pair

    torch.set_num_threads(min(8, os.cpu_count() or 1))
    return build_pair(GPU_PAIR, device=os.environ.get("EAGLE3_EMBED_PAIR_DEVICE", "cuda"))
