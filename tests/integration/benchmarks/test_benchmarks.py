"""The benchmarks cannot rot: the CPU ones run in --quick mode, the GPU ones render a result file and
refuse to measure without a GPU, and the GPU driver's parts that need none run here. Timings are
never asserted, only structure and sanity."""

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sglang_eagle3_embed.core.releases import installed_sglang_version
from tests.support import ROOT, cli

PNG = b"\x89PNG\r\n\x1a\n"


def bench(script: str, *args, check: bool = True) -> subprocess.CompletedProcess:
    run = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{script.removesuffix('.py')}", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if check:
        assert run.returncode == 0, run.stderr[-3000:]
    return run


def result(folder: Path, name: str) -> dict:
    """The JSON result, after checking that the PNG beside it is one."""
    assert (folder / f"{name}.png").read_bytes()[:8] == PNG
    return json.loads((folder / f"{name}.json").read_text())


@pytest.mark.releases
def test_startup_cost_quick(tmp_path):
    out = bench("startup_cost.py", "--quick", "--results", tmp_path).stdout
    r = result(tmp_path, "startup_cost")
    assert r["repetitions"] == 3 and r["goal_ms"] == 50.0
    for key in (
        "resolution_stock_ms",
        "resolution_plugin_ms",
        "validator_rules_ms",
        "plugin_import_fresh_ms",
    ):
        assert r[key]["median"] > 0 and r[key]["n"] == 3, key
    assert r["plugin_import_in_sglang_ms"] > 0 and r["plugin_register_ms"] > 0
    assert r["check_cli_s"] is None  # full runs only
    assert "what the plugin adds" in out and r["env"]["sglang"] == installed_sglang_version()


@pytest.mark.releases
def test_probe_throughput_quick(tiny_pair, tmp_path):
    pair = ["--target", tiny_pair.target, "--draft", tiny_pair.draft]
    out = bench(
        "probe_throughput.py", "--quick", "--no-progress", "--threads", 1, *pair, "--results", tmp_path
    )
    r = result(tmp_path, "probe_throughput")
    assert set(r["backends"]) == {"hf", "sglang-cpu"} and r["num_prompts"] == 8
    for b in r["backends"].values():
        assert (
            b["prompts_per_s"] > 0
            and b["tokens_per_s"] > b["prompts_per_s"]
            and b["load_s"] > 0
            and b["warmup_s"] > 0
        )
        assert b["wirings"] >= 5  # plugin, stock, neighbours, embedding dropped
    assert "| sglang-cpu |" in out.stdout


@pytest.mark.releases
def test_capture_overhead_quick(tiny_pair, tmp_path):
    """SGLang's DeepSeek forward on the CPU: the three captures are what they claim to be."""
    args = ("--quick", "--threads", 1, "--target", tiny_pair.target, "--results", tmp_path)
    out = bench("capture_overhead.py", *args).stdout
    (target,) = result(tmp_path, "capture_overhead")["targets"]
    configs = target["configs"]
    assert [configs[k]["capture_indices"] for k in ("none", "stock", "plugin")] == [[], [1, 3, 5], [0, 3, 5]]
    assert configs["plugin"]["bytes_prefill"] == configs["stock"]["bytes_prefill"] == 3 * 4 * 64 * 64 * 4
    assert configs["none"]["bytes_decode"] == 0
    for config in configs.values():
        assert config["prefill_ms"]["median"] > 0 and config["decode_ms"]["n"] == 3
    assert all(v > 0 for ratio in target["plugin_over"].values() for v in ratio.values())
    assert "| tiny CPU target | plugin / stock |" in out


def gpu_capture_result() -> dict:
    """A capture_overhead result as the GPU run writes it (two targets), with made-up numbers."""

    def times(ms):
        return {"median": ms, "q1": ms * 0.99, "q3": ms * 1.01, "n": 10}

    def target(name, hidden, ids):
        captures = {"none": [], "stock": [1, ids[1] + 1, ids[2] + 1], "plugin": [0, ids[1] + 1, ids[2] + 1]}
        configs = {
            k: {"capture_indices": v, "prefill_ms": times(2.0 + len(v) / 100), "decode_ms": times(0.5),
                "bytes_prefill": len(v) * 2048 * hidden * 2, "bytes_decode": len(v) * 16 * hidden * 2}
            for k, v in captures.items()
        }  # fmt: skip
        ratio = {"stock": {"prefill": 1.0, "decode": 1.0}, "none": {"prefill": 1.015, "decode": 1.0}}
        return dict(
            name=name, path="/x", ids=list(ids), hidden=hidden, layers=4, dtype="bfloat16", dtype_bytes=2,
            execution="CUDA graphs", batch=16, seq=128, configs=configs, plugin_over=ratio,
        )  # fmt: skip

    targets = [
        target("tiny GPU target", 128, (-1, 4, 10)),
        target("DeepSeek-V3 width, 4 layers", 7168, (-1, 1, 2)),
    ]
    return {"device": "cuda", "repetitions": 10, "targets": targets, "env": {"gpu": "NVIDIA H200"}}


def test_capture_overhead_renders_a_gpu_result(tmp_path):
    (tmp_path / "gpu.json").write_text(json.dumps(gpu_capture_result()))
    out = bench("capture_overhead.py", "--from-json", tmp_path / "gpu.json", "--results", tmp_path).stdout
    assert (tmp_path / "capture_overhead.png").read_bytes()[:8] == PNG
    assert "| DeepSeek-V3 width, 4 layers | plugin / stock |  | 1.0000 | 1.0000 |" in out
    assert "| DeepSeek-V3 width, 4 layers | plugin | [0, 2, 3] |" in out and "84.00 MiB" in out


def test_capture_overhead_pools_worker_processes(tmp_path):
    """With several worker processes per capture, their rounds are pooled for the ratios and each
    process's own median is kept and shown: the spread between processes is the noise floor."""
    from benchmarks import capture_overhead as co

    runs = {
        "none/0": [{"prefill": 0.001, "decode": 0.004}] * 3,
        "plugin/0": [{"prefill": 0.002, "decode": 0.003}] * 3,
        "none/1": [{"prefill": 0.003, "decode": 0.002}] * 2,
    }
    pooled, per_process = co.pool_processes(runs)
    assert pooled["none"] == {"prefill": [0.001] * 3 + [0.003] * 2, "decode": [0.004] * 3 + [0.002] * 2}
    assert per_process == {
        "none": {"prefill": [1.0, 3.0], "decode": [4.0, 2.0]},
        "plugin": {"prefill": [2.0], "decode": [3.0]},
    }
    result = gpu_capture_result()
    result["processes_per_capture"] = 2
    for config in co.CONFIGS:
        result["targets"][0]["configs"][config]["per_process_ms"] = {
            "prefill": [2.0, 2.25],
            "decode": [0.5, 0.75],
        }
    (tmp_path / "gpu.json").write_text(json.dumps(result))
    out = bench("capture_overhead.py", "--from-json", tmp_path / "gpu.json", "--results", tmp_path).stdout
    assert "| tiny GPU target | none | [] | 2.000 (2.000, 2.250) | 0.500 (0.500, 0.750) |" in out
    assert "| DeepSeek-V3 width, 4 layers | none | [] | 2.000 | 0.500 |" in out
    assert "2 worker processes per capture" in out


@pytest.mark.parametrize(
    "command",
    [
        ("speedup.py",),
        ("capture_overhead.py", "--device", "cuda"),
        ("probe_throughput.py", "--backends", "hf", "engine"),
        ("gpu_all.py",),
        ("step_times.py",),
        ("load.py",),
    ],
)
def test_gpu_measurements_say_they_need_a_gpu(command, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    run = bench(*command, "--results", tmp_path, check=False)
    assert run.returncode == 1 and "needs a CUDA GPU" in run.stderr, run.stderr[-2000:]


def test_gpu_all_plan():
    out = bench("gpu_all.py", "--dry-run").stdout
    assert "capture_overhead (at most 260 s):" in out and "--device cuda" in out
    assert "speedup (at most 420 s):" in out and "-m benchmarks.speedup --results" in out
    only = bench("gpu_all.py", "--dry-run", "--only", "speedup").stdout
    assert "capture_overhead" not in only and "speedup" in only


@pytest.mark.releases
def test_speedup_servers_resolve_in_sglang(tmp_path):
    """The five servers of speedup.py go through SGLang's own resolution (here on the CPU), with the
    plugin's startup validator: chains of n steps keep n + 1 draft tokens, the tree keeps its 8,
    only the nested draft's servers select the plugin, and stock SGLang reads the same draft."""
    from sglang.srt.arg_groups.overrides import resolution_result
    from sglang.srt.server_args import ServerArgs

    from benchmarks import speedup as sp
    from harness.rule_examples import Scenario, materialize

    materialize(Scenario(), tmp_path)  # an 8-layer DeepSeek-V3 target and a [-1, 2, 4] draft
    drafts = {"nested": tmp_path / "draft", "top-level": tmp_path / "draft"}
    seen = {}
    for name in sp.CONFIGS:
        server_args = ServerArgs(**{**sp.server_kwargs(name, tmp_path / "target", drafts), "device": "cpu"})
        server_args.resolve_once()
        keys = (
            "speculative_algorithm",
            "speculative_num_draft_tokens",
            "speculative_eagle_topk",
            "model_impl",
        )
        seen[name] = (*(resolution_result(server_args, key) for key in keys), server_args.mem_fraction_static)
    assert seen == {  # five side by side: 0.15 of the GPU's memory each
        "no-spec": (None, None, None, "auto", 0.15),
        "stock-3": ("EAGLE3", 4, 1, "auto", 0.15),
        "plugin-3": ("EAGLE3", 4, 1, "sglang_eagle3_embed", 0.15),
        "plugin-7": ("EAGLE3", 8, 1, "sglang_eagle3_embed", 0.15),
        "plugin-tree": ("EAGLE3", 8, 4, "sglang_eagle3_embed", 0.15),
    }


@pytest.mark.pinned_release
def test_gpu_capture_workers_resolve_in_sglang(tmp_path):
    """The GPU workers' ServerArgs go through SGLang's own resolution (here on the CPU): capture-only
    mode for stock and plugin, with the captures the worker is told to expect."""
    from sglang.srt.arg_groups.overrides import resolution_result
    from sglang.srt.server_args import ServerArgs

    from benchmarks import capture_overhead as co
    from harness.rule_examples import Scenario, materialize

    materialize(Scenario(), tmp_path)  # an 8-layer DeepSeek-V3 config in tmp_path / "target"
    args = SimpleNamespace(batch=16, seq=128, decode_steps=16)
    target = {"name": "tiny", "path": tmp_path / "target", "ids": (-1, 2, 4), "load_format": "auto"}
    for config, layer_ids in (("none", None), ("stock", [3, 5, 1]), ("plugin", [0, 3, 5])):
        job = co.worker_job(target, config, args)
        assert job["expect"] == {
            "layers_to_capture": co.capture_indices(config, target["ids"]),
            "plugin": config == "plugin",
        }
        server_args = ServerArgs(**{**job["server"], "device": "cpu"})
        server_args.resolve_once()
        assert resolution_result(server_args, "speculative_algorithm") is None  # no draft is ever loaded
        assert resolution_result(server_args, "aux_hidden_state_capture") == (
            None if config == "none" else "eagle3"
        )
        assert resolution_result(server_args, "return_aux_hidden_state_layer_ids") == layer_ids


@pytest.mark.releases
def test_wide_config_builds_in_sglang(tmp_path):
    """The realistic-width config builds SGLang's DeepseekV3ForCausalLM (on the meta device: no
    memory, a few seconds), as the GPU worker does with --load-format dummy: SGLang reads attributes
    that DeepseekV3Config lacks (moe_layer_freq)."""

    import torch
    from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM
    from transformers import AutoConfig

    from benchmarks import capture_overhead as co
    from sglang_eagle3_embed.doctor import sglang_cpu

    sglang_cpu.init()
    config = AutoConfig.from_pretrained(co.write_wide_config(tmp_path / "wide"))
    assert config.architectures == ["DeepseekV3ForCausalLM"] and config.torch_dtype == torch.bfloat16
    with torch.device("meta"):
        model = sglang_cpu.build(DeepseekV3ForCausalLM, config)
    layers = model.model.layers
    assert len(layers) == 4 and model.config.hidden_size == 7168
    assert [layer.is_layer_sparse for layer in layers] == [False, True, True, True]
    assert layers[1].mlp.experts.num_experts == 16


FAKE_WORKER = """
import json, sys
job, mark = json.loads(sys.argv[1]), "@@capture-worker "
print("an SGLang log line", flush=True)
if job.get("exit"):
    sys.exit(3)
print(mark + json.dumps({"ready": True, "body": job["body"], "layers_to_capture": [5, 3, 0]}), flush=True)
for line in sys.stdin:
    if line.strip() != "run":
        break
    print(mark + json.dumps({"prefill": 0.25, "decode": 0.125}), flush=True)
"""


def test_gpu_capture_worker_protocol(tmp_path, monkeypatch):
    """The driver's side of the worker protocol, against a stand-in worker: ready, checked, timed,
    stopped; a worker that dies is reported by name."""
    from benchmarks import capture_overhead as co

    (tmp_path / "fake.py").write_text(FAKE_WORKER)
    monkeypatch.setattr(co, "WORKER", [sys.executable, str(tmp_path / "fake.py")])
    expect = {"layers_to_capture": [0, 3, 5], "plugin": True}
    for body, fits in (("DeepseekV2Model", False), ("Eagle3EmbedDeepseekV2Model", True)):
        worker = co.Worker(f"plugin as {body}", {"body": body, "expect": expect}, tmp_path / f"{body}.log")
        try:
            worker.ready = worker.receive(timeout=30)
            if not fits:
                with pytest.raises(RuntimeError, match="built"):
                    co.check_ready(worker)
                continue
            co.check_ready(worker)
            runs = co.c.interleaved({"plugin": worker.run}, repeat=2, warmup=1)
            assert co.by_phase(runs) == {"plugin": {"prefill": [0.25, 0.25], "decode": [0.125, 0.125]}}
        finally:
            worker.stop()
        assert "an SGLang log line" in (tmp_path / f"{body}.log").read_text()
    dead = co.Worker("the dead one", {"exit": True, "expect": expect}, tmp_path / "dead.log")
    with pytest.raises(RuntimeError, match=r"the dead one.*exited"):
        dead.receive(timeout=30)
    dead.stop()


def test_acceptance_table_from_logs(tmp_path):
    """The acceptance table reads engine results and the offline prediction; missing runs say so."""
    (tmp_path / "offline.json").write_text(json.dumps({"3": {"0,5,11": 3.05, "2,8,13": 1.39}}))
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    (first / "offline.json").write_text(json.dumps({"3": {"0,5,11": 3.05, "2,8,13": 1.39}}))
    run = {"accept_length": [3.0, 3.4], "tokens_per_s": 155.7, "outputs": [[5, 6], [7, 8]]}
    single = {"accept_length": [3.0], "tokens_per_s": 80.5}
    meta = {"ok": True, "gpu": "NVIDIA H200", "sglang": "0.5.23"}
    (first / "plugin-steps3-topk1.json").write_text(
        json.dumps({**meta, "modes": {"all": {**run, "tokens_per_s": 1}}})
    )
    (second / "plugin-steps3-topk1.json").write_text(
        json.dumps({**meta, "modes": {"all": run, "one-by-one": single}})
    )
    (first / "stock-nested.log").write_text("[x] loading\n[y] RuntimeError: captured 2 of 3\n[z] killed\n")
    (second / "stock-top-level.json").write_text(json.dumps({"ok": False, "error": "no result after 300 s"}))
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.acceptance_table", str(first), str(second)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    ).stdout  # fmt: skip
    assert "NVIDIA H200, SGLang 0.5.23" in out and "output tokens/s, 2 at once |" in out
    assert "| plugin, steps 3, top-k 1 | 3.20 | 3.05 | 155.7 | 80.5 |" in out  # the later folder wins
    assert "| stock, nested ids | fails: [y] RuntimeError: captured 2 of 3 |  | | |" in out
    assert "| stock, top-level ids (serves its defaults) | fails: no result after 300 s | 1.39 | | |" in out
    assert "| plugin, steps 7, top-k 1 | not run | | | |" in out


def step_times_result():
    def steps(ms):
        return {"steps": {str(b): {"ms": v, "samples": [v]} for b, v in zip((1, 8, 32), ms)}}

    return {
        "accept": {"the seed's report": 1.6, "the plugin": 3.1},
        "models": {"kimi-k25": {"layers": "4 of 61", "plain": steps([2.0, 2.0, 2.5]), "plugin": steps([5.0, 6.0, 10.0])}},
    }  # fmt: skip


def test_step_times_renders_measured_and_derived_figures(tmp_path):
    (tmp_path / "in.json").write_text(json.dumps(step_times_result()))
    out = bench("step_times.py", "--quick", "--from-json", tmp_path / "in.json", "--results", tmp_path).stdout
    assert (tmp_path / "step_times.png").read_bytes()[:8] == PNG
    assert "| kimi-k25 | 4 of 61 | 1 | 2.00 | 5.00 | 2.50 |" in out
    assert "| kimi-k25 | 1 | 0.64x | 1.24x |" in out  # 1.6 x 2 / 5, 3.1 x 2 / 5
    assert "| kimi-k25 | 32 | 0.40x | 0.78x |" in out
    assert bench("step_times.py", "--quick", check=False).returncode == 2  # --quick only renders


@pytest.mark.releases
@pytest.mark.parametrize("model", ["kimi-k25", "v2-lite"])
def test_step_times_launches_pass_the_plugins_checks(model, tmp_path):
    """The real-width launches the benchmark makes, through the plugin's own pre-flight check."""
    from benchmarks.step_times import server_kwargs, write_targets

    target = write_targets(tmp_path)[model]
    extra = ["--trust-remote-code"] if server_kwargs(target, spec=True).get("trust_remote_code") else []
    run = cli(
        "check", "--model-path", target["target"], "--model-impl", "sglang_eagle3_embed", *extra,
        "--load-format", "dummy", "--skip-tokenizer-init", "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", target["draft"], "--speculative-draft-load-format", "dummy",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
        "--json",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


def scenario_result() -> dict:
    """One server's ``load_run.scenario`` result, as the stand-in run of
    ``tests/integration/gpu/test_serving_client.py`` gives it (two levels, a burst of 8)."""
    from harness import load_run

    idle = {"num_used_tokens": 0, "num_running_reqs": 0, "num_waiting_reqs": 0}
    phases = [
        {"round": r, "concurrency": c, "stream": s, "completed": load_run.requests(c), "output_throughput": 90.0 * c,
         "median_ttft_ms": 4.0, "p99_ttft_ms": 9.0, "median_tpot_ms": 1.0, "p99_tpot_ms": 2.0, **idle,
         "free_mb": 1000.0 - r}
        for r in (1, 2) for c in (1, 4) for s in (True, False)
    ]  # fmt: skip
    answers = {
        "disconnect": {"events_read": 3}, "abort": {"status": 200, "finish": "abort", "tokens": 3},
        "over-context": {"status": 400, "message": "too long"},
        **{f"invalid-{k}": {"status": 400, "message": "bad"} for k in load_run.INVALID},
        "burst": {"sent": 8, "whole": 8, "statuses": [200]},
    }  # fmt: skip
    same = {"outputs": [[5, 6]], "accept_length": [2.0]}
    return {
        "idle": {**idle, "free_mb": 1000.0}, "phases": phases, "end": {**idle, "free_mb": 998.0},
        "faults": {name: {**answers[name], "after": idle} for name in load_run.FAULTS},
        "before": same, "after": same,
    }  # fmt: skip


def test_load_renders_the_summary_of_the_scenario(tmp_path):
    """``benchmarks/load.py`` renders what the GPU test writes: ``load_run.summary`` of each
    server's scenario, or its error."""
    from harness import load_run

    runs = {load_run.PLUGIN: {"after": scenario_result()}, load_run.STOCK: {"error": "RuntimeError: boom"}}
    saved = tmp_path / "load_faults.json"
    saved.write_text(json.dumps({"servers": load_run.summary(runs), "env": {"date": "2026-12-01"}}))
    out = bench("load.py", "--quick", "--from-json", saved, "--results", tmp_path).stdout
    assert (tmp_path / "load_faults.png").read_bytes()[:8] == PNG
    assert "| plugin | 4 | no | 32 |" in out and "| plugin | 1 | yes | 32 |" in out
    assert "| burst | sent 8, whole 8, statuses [200]; KV after 0 |" in out
    assert "| same tokens before and after | yes |" in out


def test_speedup_renders_medians_spread_and_ratios(tmp_path):
    def run(rate, accept=None):
        return {"output_throughput": rate, "median_tpot_ms": 1000 / rate, "median_ttft_ms": 5.0,
                "accept_length": accept, "completed": 64}  # fmt: skip

    rounds = {
        "no-spec": {"1": [run(100), run(110), run(90)]},
        "plugin-3": {"1": [run(200, 3.1), run(165, 3.0), run(180, 3.2)]},
    }
    (tmp_path / "in.json").write_text(json.dumps({"rounds": rounds}))
    out = bench("speedup.py", "--quick", "--from-json", tmp_path / "in.json", "--results", tmp_path).stdout
    assert (tmp_path / "speedup.png").read_bytes()[:8] == PNG
    assert "| no speculation | 1 | 100 (90-110) | 10.00 | - | 1.00x |" in out
    assert "| plugin, 3 steps | 1 | 180 (165-200) | 5.56 | 3.10 | 2.00x |" in out  # ratios 2.0, 1.5, 2.0
    from benchmarks import speedup

    alone = speedup.render({"rounds": {"plugin-3": rounds["plugin-3"]}})  # no baseline: no ratio
    assert "| plugin, 3 steps | 1 | 180 (165-200) | 5.56 | 3.10 | - |" in alone
    assert bench("speedup.py", "--quick", check=False).returncode == 2


def test_real_speedup_merges_runs_and_sets_measured_beside_derived(tmp_path):
    """Servers measured by separate commands are one table: each round's ratio to no speculation's
    same round, and beside it the step-time formula's (accept length x decode / speculative step)."""
    from benchmarks import real_speedup as rs

    def run(rate, accept=None):
        return {"output_throughput": rate, "median_tpot_ms": 1000 / rate, "median_ttft_ms": 20.0,
                "accept_length": accept, "completed": 8, "duration": 10.0}  # fmt: skip

    first = {"rounds": {"no-spec": {"1": [run(100), run(120)]}}, "sizes": {"no-spec": {"1": 8}}}
    second = {"rounds": {"plugin-3": {"1": [run(180, 3.0), run(240, 3.0)]},
                         "plugin-7": {"1": [run(200, 4.0), run(200, 4.0)]}}}  # fmt: skip
    results = tmp_path / "results"
    for name, result in (("a", first), ("b", second)):
        (tmp_path / f"{name}.json").write_text(json.dumps(result))
    saved = ("--quick", "--from-json", tmp_path / "a.json", tmp_path / "b.json", "--results", results)
    plugin = "| plugin, 3 steps | 1 | 210 (180-240) | 4.86 | 20 | 3.00 | 20 (None) | 1.90x |"
    out = bench("real_speedup.py", *saved).stdout  # no step times in --results: nothing derived
    assert (results / "real_speedup.png").read_bytes()[:8] == PNG
    assert f"{plugin} - |" in out
    v2_lite = {"plain": {"steps": {"1": {"ms": 3.0}}}, "plugin": {"steps": {"1": {"ms": 5.0}}}}
    (results / "step_times.json").write_text(json.dumps({"models": {"v2-lite": v2_lite}}))
    out = bench("real_speedup.py", *saved).stdout  # step_times.py's result beside it: 3.0 x 3 / 5
    assert "| no speculation | 1 | 110 (100-120) | 9.17 | 20 | - | 20 (8) | 1.00x | - |" in out
    assert f"{plugin} 1.80x |" in out
    assert (
        "| plugin, 7 steps | 1 | 200 (200-200) | 5.00 | 20 | 4.00 | 20 (None) | 1.83x | - |" in out
    )  # not its step
    elsewhere = tmp_path / "step_times.json"
    elsewhere.write_text(
        json.dumps({"models": {"v2-lite": {**v2_lite, "plugin": {"steps": {"1": {"ms": 6.0}}}}}})
    )
    out = bench("real_speedup.py", *saved, "--step-times", elsewhere).stdout
    assert f"{plugin} 1.50x |" in out
    alone = rs.summarize(rs.merged([second]))  # no baseline measured: no ratio, no crash
    assert alone["plugin-3"]["1"]["vs_no_speculation"] is None
    assert "| 20 (None) | - | - |" in rs.render(rs.merged([second]))


def test_real_speedup_shows_warm_ups_where_a_lost_run_timed_nothing():
    """A server's warm-ups are its only figures where the machine was lost before its timed rounds:
    the table leaves them out (untimed), the lines below it say them, marked untimed, for the
    concurrencies without a timed run only, and ``merged`` keeps them."""
    from benchmarks import real_speedup as rs

    def run(rate, accept=None, completed=8):
        return {"output_throughput": rate, "median_tpot_ms": 1000 / rate, "median_ttft_ms": 20.0,
                "accept_length": accept, "completed": completed, "duration": 10.0}  # fmt: skip

    lost = {
        "rounds": {"plugin-9": {"1": [], "16": []}},
        "warmup": {"plugin-9": {"1": run(228.4, 6.918, 4)}},
    }
    timed = {
        "rounds": {"plugin-7": {"1": [run(210.0, 6.57)]}},
        "warmup": {"plugin-7": {"1": run(220.0, 6.6, 4)}},
    }
    out = rs.render(rs.merged([timed, lost]))
    assert (
        "plugin, 9 steps: warm-up at concurrency 1 (untimed, 4 requests): 228 tok/s, TPOT 4.38 ms, "
        "accept length 6.92"
    ) in out
    assert "| plugin, 9 steps |" not in out  # nothing timed: no row
    assert "| plugin, 7 steps | 1 | 210 (210-210) |" in out
    assert "plugin, 7 steps: warm-up" not in out  # its timed run says it


def test_speedup_orders_concurrencies_numerically_whatever_the_json_keeps():
    """A result saved with sorted keys keeps "16" before "4": the table and the plot's lines still
    run 1, 4, 16, 64."""
    from benchmarks import speedup

    run = {"output_throughput": 10.0, "median_tpot_ms": 1.0, "accept_length": None}
    rounds = json.loads(json.dumps({"no-spec": {c: [run] for c in ("1", "4", "16", "64")}}, sort_keys=True))
    assert list(rounds["no-spec"]) == ["1", "16", "4", "64"]
    assert list(speedup.summarize(rounds)["no-spec"]) == ["1", "4", "16", "64"]


def test_a_result_prints_its_table_before_its_plot_can_fail(tmp_path, capsys):
    """The GPU machine may lack matplotlib: the measured result is written and its table printed
    before the plot is drawn."""
    from benchmarks import _common

    def plot(result, folder):
        raise ModuleNotFoundError("No module named 'matplotlib'")

    args = SimpleNamespace(results=tmp_path)
    with pytest.raises(ModuleNotFoundError):
        _common.publish(args, "r", {"rows": 1}, plot, lambda r: "| the table |", measured_on="cpu")
    assert "| the table |" in capsys.readouterr().out
    assert json.loads((tmp_path / "r.json").read_text())["rows"] == 1


def test_real_speedup_sizes_timed_runs_and_interpolates_step_times():
    from benchmarks import real_speedup as rs

    assert rs.timed_prompts(throughput=300, output_len=128, seconds=8, concurrency=1, cap=2048) == 19
    assert rs.timed_prompts(throughput=5000, output_len=128, seconds=8, concurrency=64, cap=2048) == 320
    assert (
        rs.timed_prompts(throughput=10, output_len=128, seconds=8, concurrency=16, cap=2048) == 32
    )  # two waves
    assert rs.timed_prompts(throughput=1e6, output_len=128, seconds=8, concurrency=64, cap=2048) == 2048
    assert rs.rotated([1, 4, 16, 64], 1) == [4, 16, 64, 1]
    steps = {"plain": {"steps": {"1": {"ms": 2.0}, "8": {"ms": 4.0}}},
             "plugin": {"steps": {"1": {"ms": 4.0}, "8": {"ms": 4.0}}}}  # fmt: skip
    assert rs.step_ratio(steps, 1) == 0.5 and rs.step_ratio(steps, 8) == 1.0
    assert abs(rs.step_ratio(steps, 2) - (0.5 + 0.5 / 3)) < 1e-12  # a third of the way in log2
    assert rs.step_ratio(steps, 64) is None


@pytest.mark.releases
def test_real_speedup_servers_resolve_in_sglang(tmp_path):
    """Its four servers go through SGLang's own resolution (on the CPU): speedup.py's settings with
    one server's memory; only the nested draft's servers select the plugin."""
    from sglang.srt.arg_groups.overrides import resolution_result
    from sglang.srt.server_args import ServerArgs

    from benchmarks import real_speedup as rs
    from harness.rule_examples import Scenario, materialize

    materialize(Scenario(), tmp_path)
    drafts = {"nested": tmp_path / "draft", "top-level": tmp_path / "draft"}
    seen = {}
    for name in rs.SUITE.servers:
        server_args = ServerArgs(**{**rs.server_kwargs(name, tmp_path / "target", drafts), "device": "cpu"})
        server_args.resolve_once()
        keys = ("speculative_algorithm", "speculative_num_draft_tokens", "model_impl")
        seen[name] = (*(resolution_result(server_args, key) for key in keys), server_args.mem_fraction_static)
    assert seen == {
        "no-spec": (None, None, "auto", 0.6),
        "stock-3": ("EAGLE3", 4, "auto", 0.6),
        "plugin-3": ("EAGLE3", 4, "sglang_eagle3_embed", 0.6),
        "plugin-7": ("EAGLE3", 8, "sglang_eagle3_embed", 0.6),
    }


@pytest.mark.releases
def test_the_kimi_suite_serves_the_seeds_launch_lines_as_sglang_resolves_them(tmp_path):
    """The Kimi-K2.5 pair's servers through SGLang's own resolution (on the CPU): the seed's flags
    (1 step, top-k 1, 16 draft tokens) are served as 2 draft tokens, silently; only the corrected
    draft's servers select the plugin; the seed's draft goes to stock SGLang."""
    from sglang.srt.arg_groups.overrides import resolution_result
    from sglang.srt.server_args import ServerArgs

    from benchmarks import configs
    from harness.rule_examples import Scenario, materialize

    materialize(Scenario(), tmp_path)
    drafts = {"nested": tmp_path / "draft", "seed": tmp_path / "draft"}
    seen = {}
    for name in configs.KIMI_SPEEDUP.servers:
        kwargs = configs.KIMI_SPEEDUP.kwargs(name, tmp_path / "target", drafts)
        server_args = ServerArgs(**{**kwargs, "device": "cpu"})
        server_args.resolve_once()
        keys = ("speculative_num_steps", "speculative_num_draft_tokens", "model_impl")
        seen[name] = tuple(resolution_result(server_args, key) for key in keys)
    assert seen == {
        "no-spec": (None, None, "auto"),
        "stock-seed": (1, 2, "auto"),
        "stock-seed-15": (15, 16, "auto"),
        "plugin-1": (1, 2, "sglang_eagle3_embed"),
        "plugin-2": (2, 3, "sglang_eagle3_embed"),
        "plugin-3": (3, 4, "sglang_eagle3_embed"),
        "plugin-5": (5, 6, "sglang_eagle3_embed"),
        "plugin-7": (7, 8, "sglang_eagle3_embed"),
        "plugin-9": (9, 10, "sglang_eagle3_embed"),
    }


def test_memory_shares_follow_from_the_servers_side_by_side():
    """Each server's ``mem_fraction_static`` is its suite's share of the GPU divided among the
    servers that run at once: one more server side by side gets each a smaller share, servers one
    at a time get the whole share; no suite hands out more than the GPU."""
    import dataclasses

    from benchmarks import configs

    suites = [configs.SPEEDUP, configs.REAL_SPEEDUP, configs.KIMI_SPEEDUP, *configs.STEP_TIMES.values()]
    for suite in suites:
        for name in suite.servers:
            kwargs = suite.kwargs(name, "/target", {"nested": "/n", "top-level": "/t", "seed": "/s"})
            assert kwargs["mem_fraction_static"] == pytest.approx(suite.gpu_share / suite.at_once), name
        assert suite.at_once * suite.mem_fraction_static <= 1.0
    assert configs.SPEEDUP.at_once == len(configs.SPEEDUP.servers) == 5 and configs.REAL_SPEEDUP.at_once == 1
    fewer = dataclasses.replace(configs.SPEEDUP, servers=configs.SPEEDUP.servers[:4])
    assert fewer.mem_fraction_static == pytest.approx(configs.SPEEDUP.gpu_share / 4)
    with pytest.raises(ValueError, match="not in SERVERS"):
        configs.Suite(("plugin-11",), {}, 0.5, side_by_side=True)


def literals(source: str):
    """(line, what) of every literal a benchmark's code holds (docstrings, which are prose, left
    out) that names ``docs/``, and of every ``mem_fraction_static`` given a number."""
    import ast

    tree = ast.parse(source)
    prose = {
        id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
    }
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) and id(node) not in prose else None
        if isinstance(text, str) and (text.strip("/") == "docs" or "docs/" in text):
            yield node.lineno, f"reads docs: {node.value!r}"
        numbers = []
        if isinstance(node, ast.keyword) and node.arg == "mem_fraction_static":
            numbers.append(node.value)
        if isinstance(node, ast.Dict):
            numbers += [
                v
                for k, v in zip(node.keys, node.values)
                if isinstance(k, ast.Constant) and k.value == "mem_fraction_static"
            ]
        for value in numbers:
            if isinstance(value, ast.Constant) and isinstance(value.value, (int, float)):
                yield value.lineno, f"mem_fraction_static {value.value} outside benchmarks/configs.py"


PLANTED = '''"""Reads docs/img/step_times.json (prose: allowed)."""
STEP_TIMES = ROOT / "docs" / "img" / "step_times.json"
SHARED = dict(dtype="bfloat16", mem_fraction_static=0.15)
SERVER = {"mem_fraction_static": 0.6, "max_total_tokens": 131072}
OTHER = "docs/img/x.json"
'''


def test_no_benchmark_reads_docs_or_writes_its_own_memory_share():
    """Benchmarks read results files, never ``docs/``, and take every memory share from the
    registry (``benchmarks/configs.py``); the check itself finds planted ones."""
    found = {
        f"{path.name}:{line}: {what}"
        for path in sorted((ROOT / "benchmarks").glob("*.py"))
        for line, what in literals(path.read_text())
        if not (path.name == "configs.py" and what.startswith("mem_fraction_static"))
    }
    assert not found, found
    planted = [what for _, what in sorted(literals(PLANTED))]
    assert planted == [
        "reads docs: 'docs'",
        "mem_fraction_static 0.15 outside benchmarks/configs.py",
        "mem_fraction_static 0.6 outside benchmarks/configs.py",
        "reads docs: 'docs/img/x.json'",
    ], planted


def test_step_times_takes_accept_lengths_from_the_speedup_result(tmp_path):
    """The accept lengths the derived ratios are given for are measured ones: those of
    ``speedup.py``'s servers that take the timed step, read from its result (median over
    concurrencies of the medians over rounds), after any given with ``--accept``."""
    import argparse

    from benchmarks import step_times as st

    def runs(*accept):
        return [{"output_throughput": 100.0, "median_tpot_ms": 1.0, "accept_length": a} for a in accept]

    result = {"rounds": {
        "no-spec": {"1": runs(None, None), "4": runs(None, None)},
        "stock-3": {"1": runs(1.6, 1.8), "4": runs(1.7, 1.7), "16": runs(1.75, 1.75)},
        "plugin-3": {"1": runs(2.8, 3.0), "4": runs(3.1, 3.2), "16": runs(3.04, 3.04)},
        "plugin-7": {"1": runs(3.8, 3.8)},
    }}  # fmt: skip
    assert st.measured_accept(result) == {"stock-3": 1.7, "plugin-3": 3.04}
    (tmp_path / "speedup.json").write_text(json.dumps(result))
    p = argparse.ArgumentParser()
    args = SimpleNamespace(results=tmp_path, accept_from=None, accept=["the seed's report=1.6"])
    assert list(st.accept_lengths(args, p).items()) == [
        ("the seed's report", 1.6),
        ("stock SGLang, 3 steps", 1.7),
        ("plugin, 3 steps", 3.04),
    ]
    args = SimpleNamespace(results=tmp_path / "empty", accept_from=None, accept=None)
    assert st.accept_lengths(args, p) == {}


def test_server_ids_are_plain_and_labels_distinct():
    # an id names the server's log files: the device tool copies back no file whose name holds a
    # quote or a space
    from benchmarks import configs

    assert all(re.fullmatch(r"[a-z0-9-]+", i) and s.id == i for i, s in configs.SERVERS.items())
    labels = [s.label for s in configs.SERVERS.values()]
    assert len(set(labels)) == len(labels)


def test_real_speedup_asks_the_canary_of_a_server_and_reports_its_verdict(tiny_pair, tmp_path):
    """``--canary ID=FILE``: a server fed the trained tensors passes (exit 0, the trained wiring
    matched), one fed SGLang's default layers fails (exit 1, the defaults named); each answer is a
    line under the table. Bad ``--canary`` values stop the run before any server starts, naming the value."""
    from benchmarks import real_speedup as rs
    from tests.support.canary import record_expectations
    from tests.support.speculation import Speculation
    from tests.support.stand_in_server import serving

    steps = 7
    expect = record_expectations(tiny_pair, tmp_path / "expect.json", num_prompts=32, steps=steps)
    settings = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": steps, "speculative_eagle_topk": 1,
                "speculative_num_draft_tokens": steps + 1, "model_impl": "sglang_eagle3_embed"}  # fmt: skip
    (_, expectations) = rs.canary_files([f"plugin-7={expect}"], ["plugin-7"])["plugin-7"]
    answers = {}
    for name, indices in (("plugin-7", (0, 3, 5)), ("stock-3", (2, 3, 4))):
        speculate = Speculation(tiny_pair.target, tiny_pair.draft, indices, steps)
        with serving(speculate=speculate, settings=settings) as port:
            answers[name] = rs.ask_canary(f"http://127.0.0.1:{port}", expect, expectations)
    assert (
        answers["plugin-7"]["exit"] == 0 and answers["plugin-7"]["matched"] == answers["plugin-7"]["trained"]
    )
    assert answers["stock-3"]["exit"] == 1 and answers["stock-3"]["matched"] != answers["stock-3"]["trained"]
    run = {"output_throughput": 100.0, "median_tpot_ms": 10.0, "median_ttft_ms": 20.0, "accept_length": 3.0,
           "completed": 8, "duration": 10.0}  # fmt: skip
    table = rs.render({"rounds": {name: {"1": [run]} for name in answers}, "canary": answers})
    assert "canary, plugin, 7 steps: exit 0, served" in table
    assert "canary, stock SGLang, 3 steps: exit 1, served" in table
    # in the canary's own words: its verdict as `canary` prints it, naming the defaults served
    assert f"canary, stock SGLang, 3 steps: exit 1, {' '.join(answers['stock-3']['verdict'])}" in table
    assert ", as SGLang's default layers (" in answers["stock-3"]["verdict"][0]

    with socket.socket() as closed:  # a port nothing listens on: exit 2, the canary's line kept
        closed.bind(("127.0.0.1", 0))
        gone = rs.ask_canary(f"http://127.0.0.1:{closed.getsockname()[1]}", expect, expectations)
    assert gone["exit"] == 2 and "127.0.0.1" in gone["error"]
    assert rs.canary_line("plugin-7", gone).endswith(gone["error"])

    garbage = tmp_path / "garbage.json"
    garbage.write_text("not json")
    for value, named in (
        ("plugin-7", "write it as ID=FILE"),
        (f"plugin-5={expect}", "'plugin-5' is not a server of this run"),
        (f"no-spec={expect}", "does not speculate"),
        (f"plugin-7={garbage}", str(garbage)),
    ):
        with pytest.raises(SystemExit) as stopped:
            rs.canary_files([value], ["no-spec", "plugin-7"])
        assert named in str(stopped.value), (value, stopped.value)


def stand_in_server(events: list):
    """``harness.server_run.Server`` for ``real_speedup.measure``: ready at once, its starts and
    stops appended to ``events``."""

    class Started:
        url, port = "http://stand-in", 1

        def __init__(self, name, kwargs, logs):
            self.name = name

        def start(self):
            events.append(("start", self.name))

        def wait_ready(self, timeout):
            return 1.0

        def stop(self):
            events.append(("stop", self.name))

    return Started


def test_real_speedup_asks_the_canary_before_the_timed_rounds(tmp_path, monkeypatch):
    """A server's canary verdict is asked right after its served check, before any warm-up or timed
    round, and written at once, as each warm-up's figures are: a run whose machine is lost before
    its timed rounds keeps them."""
    from argparse import Namespace

    from benchmarks import configs
    from benchmarks import real_speedup as rs
    from benchmarks.kimi_pair import KimiPairSpec

    asked = []

    class Gone(Exception):
        """The machine lost mid-run."""

    def canary(url, expect, expectations):
        asked.append(("canary", expect.name))
        return {"exit": 1, "verdict": ["SGLang's default layers served"]}

    def client(command, log):
        asked.append(("client", log.name))
        if log.name.startswith("warmup-4"):
            raise Gone
        record = {"output_throughput": 228.4, "accept_length": 6.9, "completed": 4, "median_tpot_ms": 3.9}
        Path(command[command.index("--output-file") + 1]).write_text(json.dumps(record) + "\n")

    spec = KimiPairSpec.quick()
    monkeypatch.setattr(
        rs,
        "setup",
        lambda pair, logs: (configs.KIMI_SPEEDUP, pair / "target", {"seed": pair / "draft"}, spec),
    )
    monkeypatch.setattr(
        rs, "canary_files", lambda pairs, servers: {"stock-seed": (tmp_path / "expect1.json", {})}
    )
    monkeypatch.setattr(rs, "Server", stand_in_server(asked))
    monkeypatch.setattr(rs, "served_check", lambda *args: {"ids": {}, "text": {}})
    monkeypatch.setattr(rs, "served_line", lambda *args: "served")
    monkeypatch.setattr(rs, "ask_canary", canary)
    monkeypatch.setattr(rs, "run_client", client)
    args = Namespace(
        pair=tmp_path, logs=tmp_path / "logs", results=tmp_path / "results", name="kimi-stock-seed",
        configs=["stock-seed"], canary=["stock-seed=expect1.json"], concurrency=[1, 4], rounds=2,
        seconds=12.0, prompt_len=spec.prompt_len, output_len=spec.seq_len - spec.prompt_len, dataset_size=16,
    )  # fmt: skip
    with pytest.raises(Gone):
        rs.measure(args)
    assert asked == [("start", "stock-seed"), ("canary", "expect1.json"), ("client", "warmup-1-stock-seed.log"),
                     ("client", "warmup-4-stock-seed.log"), ("stop", "stock-seed")]  # fmt: skip
    written = json.loads((tmp_path / "results" / "kimi-stock-seed.json").read_text())
    assert written["canary"] == {"stock-seed": {"exit": 1, "verdict": ["SGLang's default layers served"]}}
    assert written["rounds"] == {"stock-seed": {"1": [], "4": []}}
    assert written["warmup"]["stock-seed"]["1"]["output_throughput"] == 228.4
    assert list(written["warmup"]["stock-seed"]) == ["1"]


def test_real_speedup_waits_for_a_folder_or_the_end_of_the_build(tmp_path, monkeypatch):
    """--building STATUS: a published folder (its manifest) is enough; without a folder only the
    build's end with 0 is; a build that ended otherwise, or without the folder, stops the run with
    the exit it ended with."""
    from benchmarks import real_speedup as rs
    from sglang_eagle3_embed.doctor.cache import MANIFEST

    status, target = tmp_path / "built", tmp_path / "target"
    slept = []

    def ends_with(code, publish=False):
        def sleep(seconds):
            slept.append(seconds)
            assert len(slept) < 10, "still waiting after the build ended"
            if len(slept) == 3:  # the build ends after three polls
                if publish:
                    target.mkdir(exist_ok=True)
                    (target / MANIFEST).write_text("{}")
                status.write_text(f"{code}\n")

        monkeypatch.setattr(rs.time, "sleep", sleep)

    rs.wait_for_build(None, target)  # no build running: nothing to wait for
    ends_with(0)
    rs.wait_for_build(status)
    assert slept == [rs.BUILD_POLL_S] * 3
    with pytest.raises(SystemExit, match=f"exit 0, before {target} was published"):
        rs.wait_for_build(status, target)  # the build ended without the folder
    status.unlink()
    slept.clear()
    ends_with(0, publish=True)
    rs.wait_for_build(status, target)
    assert len(slept) == 3
    rs.wait_for_build(status, target)  # published: no poll
    assert len(slept) == 3
    status.unlink()
    slept.clear()
    ends_with(1)
    with pytest.raises(SystemExit, match="the pair's build ended with exit 1; see its log"):
        rs.wait_for_build(status)


def test_real_speedup_starts_a_plain_server_beside_the_build_and_times_after_it(tmp_path, monkeypatch):
    """--building: the server without a draft starts once the target is published and is asked
    nothing before the build has ended; a server with a draft starts after the build; the build's
    prediction, written at its end, goes into the result."""
    from argparse import Namespace

    from benchmarks import configs
    from benchmarks import real_speedup as rs
    from benchmarks.kimi_pair import KimiPairSpec
    from sglang_eagle3_embed.doctor.cache import MANIFEST

    events = []
    status = tmp_path / "built"
    for folder in ("narrow", "target"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / MANIFEST).write_text("{}")

    def sleep(seconds):
        events.append("poll")
        assert events.count("poll") < 10, "still waiting after the build ended"
        if events.count("poll") == 2:  # the build ends while the plain server waits
            (tmp_path / "kimi_build.json").write_text(json.dumps({"quality": {"draft": {"mean": 3.7}}}))
            status.write_text("0\n")

    def served(server, *args):
        events.append(("served", server.name))
        return {"ids": {}, "text": {}}

    def client(command, log):
        record = {"output_throughput": 99.0, "accept_length": 1.0, "completed": 4, "median_tpot_ms": 9.0}
        Path(command[command.index("--output-file") + 1]).write_text(json.dumps(record) + "\n")

    spec = KimiPairSpec.quick()
    drafts = {"nested": tmp_path / "draft-fixed", "seed": tmp_path / "draft"}
    monkeypatch.setattr(rs, "setup", lambda pair, logs: (configs.KIMI_SPEEDUP, pair / "target", drafts, spec))
    monkeypatch.setattr(rs.time, "sleep", sleep)
    monkeypatch.setattr(rs, "Server", stand_in_server(events))
    monkeypatch.setattr(rs, "served_check", served)
    monkeypatch.setattr(rs, "served_line", lambda *args: "served")
    monkeypatch.setattr(rs, "run_client", client)
    args = Namespace(
        pair=tmp_path, logs=tmp_path / "logs", results=tmp_path / "results", name="kimi", building=status,
        configs=["no-spec", "plugin-9"], canary=None, concurrency=[1], rounds=1, seconds=12.0,
        prompt_len=spec.prompt_len, output_len=spec.seq_len - spec.prompt_len,
        dataset_size=configs.REQUESTS.dataset_size,
    )  # fmt: skip
    result = rs.measure(args)
    assert events == [("start", "no-spec"), "poll", "poll", ("served", "no-spec"), ("stop", "no-spec"),
                      ("start", "plugin-9"), ("served", "plugin-9"), ("stop", "plugin-9")]  # fmt: skip
    assert result["expected"] == {"mean": 3.7}

    # a server with a draft waits for the build's end before it starts
    events.clear()
    status.unlink()
    args.configs = ["plugin-9"]
    rs.measure(args)
    assert events[:3] == ["poll", "poll", ("start", "plugin-9")]


def test_real_speedup_names_a_pair_folder_it_cannot_read(tmp_path):
    from benchmarks import real_speedup as rs

    with pytest.raises(
        SystemExit, match=r"not a folder benchmarks\.real_pair or benchmarks\.kimi_build built"
    ):
        rs.setup(tmp_path, tmp_path)


def test_real_speedup_checks_what_each_server_generates(tmp_path):
    """The served check scores a continuation by the language: the language's own likeliest tokens
    score 1, their neighbouring ids do not; against a server, asked as ids and as text, it records
    each request's accept length and a digest of the outputs per form, and its line says whether
    they are no speculation's."""
    import torch

    from benchmarks import configs
    from benchmarks import real_speedup as rs
    from benchmarks.real_pair import RealPairSpec, language_hits
    from harness.server_run import Server
    from sglang_eagle3_embed.doctor.tiny_target import Language
    from sglang_eagle3_embed.doctor.tokenizer import text_of
    from tests.support.stand_in_server import ACCEPT_LENGTH, serving

    language = Language(RealPairSpec.quick().target_spec())
    rows = language.sample(20, 24, torch.Generator().manual_seed(0))
    prompts, likeliest = rows[:4, :8].tolist(), []
    for prompt in prompts:
        tokens = list(prompt)
        for _ in range(6):
            tokens.append(int(language.best_next(torch.tensor(tokens[:1]), torch.tensor(tokens[-1:]))[0]))
        likeliest.append(tokens[len(prompt) :])
    assert language_hits(language, prompts, likeliest) == 1.0
    shifted = [[(t + 1) % language.spec.vocab for t in out] for out in likeliest]
    assert language_hits(language, prompts, shifted) < 0.5

    with serving() as port:  # the stand-in repeats an id prompt, and answers a text one with 0, 1, 2...
        check = rs.served_check(Server("stand-in", {"port": port}, tmp_path), language, rows, 8)
    count, new = configs.SERVED_CHECK[0], 16  # no further than the rows' 16 output tokens
    asked = rows[:count, :8].tolist()
    assert check["ids"]["language_accuracy"] == round(
        language_hits(language, asked, [(row * new)[:new] for row in asked]), 3
    )
    assert check["text"]["language_accuracy"] == round(
        language_hits(language, asked, [list(range(new))] * count), 3
    )
    assert check["ids"]["accept_lengths"] == check["text"]["accept_lengths"] == [ACCEPT_LENGTH] * count
    assert check["ids"]["prompt_tokens"] == [8] * count  # the stand-in counts a text's characters
    assert check["text"]["prompt_tokens"] == [len(text_of(p)) for p in asked]
    assert check["ids"]["outputs"] != check["text"]["outputs"]
    line = rs.served_line("plugin-3", {"no-spec": check, "plugin-3": check})
    assert line.startswith("served check, plugin, 3 steps: ids: likeliest ")
    assert (
        f"outputs {check['ids']['outputs']} (no speculation's), prompt tokens 8-8, accept length per request 2.00-2.00"
        in line
    )
    folder = {"as written": {"likeliest": 0.5}}  # the build's score of the same prompts
    assert "ids: likeliest " in line and "(the folder's" not in line
    assert "(the folder's 50.0%), outputs" in rs.served_line("no-spec", {"no-spec": check}, folder)
    assert check["ids"]["output_ids"] == [(row * new)[:new] for row in asked]
    other = {**check, "text": {**check["text"], "outputs": "0" * 16}}
    line = rs.served_line("plugin-3", {"no-spec": check, "plugin-3": other})
    assert "ids: likeliest" in line and "(no speculation's)" in line
    assert (
        f"text: likeliest {check['text']['language_accuracy']:.1%}, outputs {'0' * 16} (not no speculation's)"
        in line
    )
    moved = [list(out) for out in check["text"]["output_ids"]]  # two tokens of the second request
    moved[1][5] += 1
    moved[1][9] += 1
    other["text"]["output_ids"] = moved
    line = rs.served_line("plugin-3", {"no-spec": check, "plugin-3": other})
    assert (
        f"(not no speculation's: 1 of {count} requests differ, the first in request 1 at output token 5)"
        in line
    )
    old = {form: {k: v for k, v in c.items() if k != "output_ids"} for form, c in other.items()}
    assert "(not no speculation's), prompt" in rs.served_line("plugin-3", {"no-spec": check, "plugin-3": old})

    with socket.socket() as closed:  # nothing listens: each form records why, and the run goes on
        closed.bind(("127.0.0.1", 0))
        gone = rs.served_check(Server("gone", {"port": closed.getsockname()[1]}, tmp_path), language, rows, 8)
    assert set(gone) == {"ids", "text"} and all(
        v["error"].startswith("/generate answered None") for v in gone.values()
    )
    assert rs.served_line("plugin-3", {"no-spec": check, "plugin-3": gone}).startswith(
        "served check, plugin, 3 steps: ids: /generate answered None: "
    )
