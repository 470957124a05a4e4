"""An MLA EAGLE-3 draft (``Eagle3DeepseekV2ForCausalLM``, the architecture of Kimi-K2.5's published
MLA drafts) on the real server: ``python -m sglang.launch_server`` over HTTP.

The GPU pair's target with a draft of MLA attention trained on ``[-1, 4, 10]``
(``pair --size gpu --draft-arch mla``), served with CUDA graphs, 3 steps, top-k 1: the plugin's
tokens and per-request accept lengths equal stock SGLang's on hand-written indices ``[0, 5, 11]``
under deterministic inference, and ``probe --backend engine`` (the MLA twin over SGLang's capture)
predicts the served accept length within the tolerance held for Llama drafts: served at least 0.9x
the prediction (``test_acceptance.py``).
"""

import json
import subprocess
from dataclasses import replace

import pytest

from harness import engine_run
from harness.server_run import run_servers
from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.doctor.pair import GPU_PAIR, build_pair, write_config_variant
from tests.gpu.served_pair import NEW_TOKENS, NUM_PROMPTS, PROMPT_LEN, SERVED, TRAINED, probe_command
from tests.support import ROOT

pytestmark = pytest.mark.gpu

PROBE_FLOOR = 0.9


@pytest.fixture(scope="module")
def mla_pair():
    """The GPU pair's target (cached, or trained on the GPU) with an MLA draft on its ids."""
    import os
    import time

    start = time.time()
    device = os.environ.get("EAGLE3_EMBED_PAIR_DEVICE", "cuda")
    pair = build_pair(replace(GPU_PAIR, draft_arch="mla"), device=device)
    print(f"MLA pair ready in {time.time() - start:.0f} s")
    return pair


def jobs_for(pair, hand_written, prompts) -> dict[str, dict]:
    def job(draft, **server):
        return {
            "server": {
                "model_path": str(pair.target), "speculative_draft_model_path": str(draft), **SERVED,
                **engine_run.spec(3), **engine_run.DET, **server,
            },
            "prompts": prompts, "max_new_tokens": NEW_TOKENS, "modes": ["all", "one-by-one"],
        }  # fmt: skip

    return {"mla-plugin": job(pair.draft, model_impl=MODEL_IMPL), "mla-stock-hand-written": job(hand_written)}


@pytest.fixture(scope="module")
def runs(mla_pair, gpu_logs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("mla")
    hand = write_config_variant(mla_pair.draft, folder / "hand", placement="nested", ids=list(TRAINED))
    prompts = engine_run.language_prompts(mla_pair, NUM_PROMPTS, PROMPT_LEN)
    prompts_file = folder / "prompts.jsonl"
    prompts_file.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    report = gpu_logs / "mla-probe.json"
    with open(gpu_logs / "mla-probe.log", "w") as log:  # the probe runs while the servers start
        probe = subprocess.Popen(
            probe_command(mla_pair.target, mla_pair.draft, prompts_file, report),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        results = run_servers(jobs_for(mla_pair, hand, prompts), gpu_logs, timeout=480)
        rc = probe.wait(timeout=600)
    wirings = json.loads(report.read_text())["wirings"] if report.exists() else []
    predicted = {tuple(w["capture_indices"]): w["accept_length"] for w in wirings if "accept_length" in w}
    for name, result in results.items():
        print(f"{name}: {engine_run.outcome(result)}, ready in {result.get('startup_s')} s")
    print(f"probe --backend engine: exit {rc}, trained wiring {predicted.get(TRAINED)}")
    return results, rc, predicted.get(TRAINED)


def test_plugin_equals_stock_on_the_same_tensors(runs):
    plugin, stock = engine_run.finished(runs[0], "mla-plugin", "mla-stock-hand-written")
    for mode, run in plugin["modes"].items():
        assert not engine_run.differences(run["outputs"], stock["modes"][mode]["outputs"]), mode
        assert run["accept_length"] == stock["modes"][mode]["accept_length"], mode


def test_probe_predicts_the_mla_drafts_served_accept_length(runs):
    results, rc, offline = runs
    (plugin,) = engine_run.finished(results, "mla-plugin")
    assert rc == 0 and offline, "probe --backend engine gave no prediction (mla-probe.log)"
    measured = engine_run.accept_mean(plugin["accept_length"])
    print(f"MLA draft: served {measured:.3f}, probe {offline:.3f} ({measured / offline:.3f}x)")
    assert measured >= PROBE_FLOOR * offline
