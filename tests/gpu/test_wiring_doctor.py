"""The wiring doctor on a GPU: ``probe --backend engine`` (SGLang 0.5.23 capture-only engine) names
the same wiring and predicts the same accept lengths as ``--backend hf`` on the GPU-sized pair."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ENGINE = [  # required by the GPU bundle (shared/gpu/README.md)
    *("--engine-arg", "attention_backend=triton", "--engine-arg", "sampling_backend=pytorch"),
    *("--engine-arg", "disable_radix_cache=true", "--engine-arg", "mem_fraction_static=0.4"),
    *("--engine-arg", "dtype=bfloat16"),  # as served; the pair is saved in float32
]


def probe(pair, backend, logs, *extra):
    out = logs / f"probe-{backend}.json"
    cmd = [
        sys.executable, "-m", "sglang_eagle3_embed.cli", "probe", "--target", str(pair.target),
        "--draft", str(pair.draft), "--backend", backend, "--num-prompts", "64", "--no-progress",
        "--output", str(out), *extra,
    ]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=480, check=False)
    (logs / f"probe-{backend}.log").write_text(run.stdout + run.stderr)
    assert run.returncode in (0, 1) and out.exists(), run.stderr[-3000:]
    return json.loads(out.read_text())


def test_engine_backend_agrees_with_hf(gpu_pair, tmp_path):
    logs = Path(os.environ.get("EAGLE3_EMBED_GPU_LOGS", tmp_path))
    hf = probe(gpu_pair, "hf", logs, "--device", "cuda")
    engine = probe(gpu_pair, "engine", logs, *ENGINE)
    trained = [0, 5, 11]  # ids [-1, 4, 10]
    assert hf["plugin_ok"] and trained in hf["best"]
    assert engine["plugin_ok"] and trained in engine["best"]
    for a, b in zip(hf["wirings"], engine["wirings"]):
        assert a["names"] == b["names"]
        if "accept_length" in a:
            assert abs(a["accept_length"] - b["accept_length"]) <= 0.3, (a, b)  # bf16 vs fp32
