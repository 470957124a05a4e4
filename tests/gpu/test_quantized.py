"""Quantized targets on the real server: ``python -m sglang.launch_server`` over HTTP.

From the GPU pair (16-layer DeepSeek-V3 target, draft on ``[-1, 4, 10]``) and its Kimi-K2.5
wrapper, ``doctor/quantized.py`` writes the targets in the official checkpoints' formats:

- **FP8** block-wise, as deepseek-ai/DeepSeek-V3 ships it (``quantization_config`` copied from its
  ``config.json``: ``{"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
  "weight_block_size": [128, 128]}``), a ``DeepseekV3ForCausalLM``;
- **INT4** as moonshotai/Kimi-K2.5 ships it (compressed-tensors ``pack-quantized``, routed experts
  only, groups of 32, its ``ignore`` list), a ``KimiK25ForConditionalGeneration`` served with
  ``--trust-remote-code``.

Each is served side by side with the same draft (CUDA graphs, 3 steps, top-k 1): under
``--enable-deterministic-inference`` the plugin's tokens and per-request accept lengths equal stock
SGLang's on hand-written indices ``[0, 5, 11]`` for the same quantized target, all at once and one
at a time; the plugin's startup log names the three tensors; its accept length is within
:data:`MARGIN` of the plugin's on the bf16 target (the same trained weights unquantized).
SGLang's Marlin MoE kernels are built first (``tools/prebuild_marlin.py``); ``probe --backend
engine`` runs on both quantized targets, finds the draft's config read as the wiring it scores
best (exit 0), and the server reaches at least 0.9x its prediction for the trained wiring, the
criterion of the bf16 pair (``test_acceptance.py``).
"""

import json
import subprocess
import sys
import time

import pytest

from harness import engine_run
from harness.server_run import run_servers
from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.doctor.kimi import build_kimi_pair
from sglang_eagle3_embed.doctor.pair import write_config_variant
from sglang_eagle3_embed.doctor.quantized import write_fp8_target, write_int4_target
from tests.gpu.served_pair import NEW_TOKENS, NUM_PROMPTS, PROMPT_LEN, SERVED, TRAINED, probe_command
from tests.support import ROOT

pytestmark = pytest.mark.gpu

MARGIN = 0.10
"""How far a quantized target's served accept length may fall below the bf16 target's: the draft
was trained on the unquantized target's hidden states, which quantization moves a little."""
PROBE_FLOOR = 0.9
"""The served accept length over the probe's prediction, at least (``test_acceptance.py``'s)."""
LINE = "EAGLE-3 draft reads [embedding output, output of layer 4, output of layer 10]"


@pytest.fixture(scope="module")
def targets(gpu_pair, tmp_path_factory):
    """bf16 (the pair's own), FP8 (DeepSeek-V3) and INT4 (Kimi-K2.5) targets of the one pair."""
    kimi = build_kimi_pair(gpu_pair.spec, gpu_pair.target.parent)
    root = gpu_pair.target.parent
    return {
        "bf16": gpu_pair.target,
        "fp8": write_fp8_target(gpu_pair.target, root / f"fp8-{gpu_pair.target.name}"),
        "int4": write_int4_target(kimi.target, root / f"int4-{kimi.target.name}"),
    }


def jobs_for(targets, drafts, prompts) -> dict[str, dict]:
    exact = ("all", "one-by-one")

    def job(target: str, draft: str, modes=exact, **server):
        kimi = target == "int4"
        return {
            "server": {
                "model_path": str(targets[target]), "speculative_draft_model_path": drafts[draft],
                **SERVED, **engine_run.spec(3), **engine_run.DET, **({"trust_remote_code": True} if kimi else {}), **server,
            },
            "prompts": prompts, "max_new_tokens": NEW_TOKENS, "modes": list(modes),
        }  # fmt: skip

    return {
        "bf16-plugin": job("bf16", "nested", ("all",), model_impl=MODEL_IMPL),
        "fp8-plugin": job("fp8", "nested", model_impl=MODEL_IMPL),
        "fp8-stock-hand-written": job("fp8", "hand-written"),
        "int4-plugin": job("int4", "nested", model_impl=MODEL_IMPL),
        "int4-stock-hand-written": job("int4", "hand-written"),
    }


@pytest.fixture(scope="module")
def runs(gpu_pair, targets, gpu_logs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("quantized")
    drafts = {
        "nested": str(gpu_pair.draft),
        "hand-written": str(
            write_config_variant(gpu_pair.draft, folder / "hand", placement="nested", ids=list(TRAINED))
        ),
    }
    prompts = engine_run.language_prompts(gpu_pair, NUM_PROMPTS, PROMPT_LEN)
    prompts_file = folder / "prompts.jsonl"
    prompts_file.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    # SGLang compiles its Marlin MoE kernels (INT4 experts) on first use, minutes each, inside the
    # first prefill of every process that gets there: built first, in parallel, into its JIT cache.
    started = time.time()
    built = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "prebuild_marlin.py")],
        capture_output=True,
        text=True,
        timeout=540,
    )
    print(f"Marlin MoE kernels: {built.stdout.strip()} ({time.time() - started:.0f} s)")
    assert built.returncode == 0, built.stderr[-3000:]
    probes = {}
    for name in ("int4", "fp8"):
        report = gpu_logs / f"quantized-probe-{name}.json"
        log = open(gpu_logs / f"quantized-probe-{name}.log", "w")  # noqa: SIM115 (closed below)
        command = probe_command(targets[name], gpu_pair.draft, prompts_file, report, name == "int4")
        probes[name] = (
            subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT),
            log,
            report,
        )
    results = run_servers(jobs_for(targets, drafts, prompts), gpu_logs, timeout=480)
    predicted = {}
    for name, (proc, log, report) in probes.items():
        rc = proc.wait(timeout=600)
        log.close()
        wirings = json.loads(report.read_text())["wirings"] if report.exists() else []
        found = {tuple(w["capture_indices"]): w["accept_length"] for w in wirings if "accept_length" in w}
        predicted[name] = (rc, found.get(TRAINED))
        print(f"probe --backend engine on {name}: exit {rc}, trained wiring {found.get(TRAINED)}")
    for name, result in results.items():
        print(
            f"{name}: {engine_run.outcome(result)}, ready in {result.get('startup_s')} s, "
            f"accept length {engine_run.accept_mean(result['accept_length']) if result.get('ok') else None}"
        )
    return results, predicted


@pytest.mark.parametrize("fmt", ["fp8", "int4"])
def test_the_plugin_names_the_captures_at_startup(runs, fmt):
    (plugin,) = engine_run.finished(runs[0], f"{fmt}-plugin")
    assert LINE in plugin["log"], plugin["log"][-3000:]


@pytest.mark.parametrize("fmt", ["fp8", "int4"])
def test_plugin_equals_stock_on_the_same_tensors(runs, fmt):
    plugin, stock = engine_run.finished(runs[0], f"{fmt}-plugin", f"{fmt}-stock-hand-written")
    for mode, run in plugin["modes"].items():
        assert not engine_run.differences(run["outputs"], stock["modes"][mode]["outputs"]), mode
        assert run["accept_length"] == stock["modes"][mode]["accept_length"], mode


@pytest.mark.parametrize("fmt", ["fp8", "int4"])
def test_accept_length_stays_near_the_bf16_targets(runs, fmt):
    plugin, bf16 = engine_run.finished(runs[0], f"{fmt}-plugin", "bf16-plugin")
    measured, reference = (
        engine_run.accept_mean(plugin["accept_length"]),
        engine_run.accept_mean(bf16["accept_length"]),
    )
    print(f"{fmt}: accept length {measured:.3f}, bf16 {reference:.3f} ({measured / reference - 1:+.1%})")
    assert measured >= (1 - MARGIN) * reference


@pytest.mark.parametrize("fmt", ["fp8", "int4"])
def test_probe_runs_on_the_quantized_target(runs, fmt):
    results, predicted = runs
    (plugin,) = engine_run.finished(results, f"{fmt}-plugin")
    rc, offline = predicted[fmt]
    assert rc == 0 and offline, (
        f"probe --backend engine: exit {rc}, no prediction (quantized-probe-{fmt}.log)"
    )
    measured = engine_run.accept_mean(plugin["accept_length"])
    print(f"{fmt}: served {measured:.3f}, probe {offline:.3f} ({measured / offline:.3f}x)")
    assert measured >= PROBE_FLOOR * offline
