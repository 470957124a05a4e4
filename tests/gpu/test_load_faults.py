"""Under load and faults the plugin's server keeps serving, loses nothing and leaks nothing.

The GPU pair (served with its tokenizer) through ``python -m sglang.launch_server`` with EAGLE-3 at 3
steps, CUDA graphs and deterministic inference, three servers side by side: the plugin, stock SGLang
on the same tensors through hand-written indices (so that any failure can be placed), and the plugin
with a planted leak (the test-only ``keep-aux`` switch keeps every verify pass's aux hidden states
and a 1 MiB block). Each runs the scenario of ``load_run.py`` alone on the GPU: load from SGLang's
own client at concurrency 1 to 256 (the KV pool holds 256 requests of these lengths;
``--max-running-requests 64`` queues the rest), streaming and not, twice; then each fault; then the
fixed prompts again. ``python -m benchmarks.load`` renders the run's figures
(``$EAGLE3_EMBED_GPU_LOGS/load_faults.json``).
"""

import json
import threading

import pytest

from harness import load_run
from harness.engine_run import DET, finished, language_prompts, spec
from harness.environment import environment
from harness.server_run import run_servers
from sglang_eagle3_embed.doctor.pair import write_config_variant

pytestmark = pytest.mark.gpu

OURS = "sglang_eagle3_embed"
TRAINED = (0, 5, 11)
SERVERS = (load_run.PLUGIN, load_run.STOCK)
SERVER = dict(
    dtype="bfloat16", mem_fraction_static=0.2, max_total_tokens=65536, max_running_requests=64,
    cuda_graph_max_bs_decode=64, cuda_graph_max_bs_prefill=1024, **spec(3), **DET,
)  # fmt: skip
LEAK_SLACK_MB = 64


@pytest.fixture(scope="module")
def runs(gpu_pair, gpu_logs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults")
    hand = write_config_variant(gpu_pair.draft, folder / "hand", placement="nested", ids=list(TRAINED))
    prompts = language_prompts(gpu_pair, 16, 8)
    ready, lock = threading.Barrier(3), folder / "gpu.lock"
    common = {"model_path": str(gpu_pair.target), **SERVER}
    plugin = {**common, "model_impl": OURS, "speculative_draft_model_path": str(gpu_pair.draft)}

    def job(server, faults=True, env=None):
        after = load_run.scenario(gpu_logs, lock, gpu_pair.target, prompts, ready, faults)
        return {"server": server, "env": env, "prompts": prompts, "modes": [], "after": after,
                "on_error": ready.abort}  # fmt: skip

    jobs = {
        load_run.PLUGIN: job(plugin),
        load_run.STOCK: job({**common, "speculative_draft_model_path": str(hand)}),
        load_run.LEAK: job(plugin, faults=False, env={"EAGLE3_EMBED_GPU_TESTING": "keep-aux"}),
    }
    results = run_servers(jobs, gpu_logs, timeout=420)
    summary = {"servers": load_run.summary(results), "env": environment("cuda")}
    (gpu_logs / "load_faults.json").write_text(json.dumps(summary, indent=2, default=str))
    return results


def scenario_of(runs, name) -> dict:
    return finished(runs, name)[0]["after"]


@pytest.mark.parametrize("name", SERVERS)
def test_every_request_of_the_load_completes_and_frees_its_kv_tokens(runs, name):
    result = scenario_of(runs, name)
    phases, idle = result["phases"], result["idle"]["num_used_tokens"]
    for phase in phases:
        assert "error" not in phase, phase
        assert phase["completed"] == load_run.requests(phase["concurrency"]), phase
        assert phase["num_used_tokens"] == idle and phase["num_running_reqs"] == 0, (idle, phase)
    assert sum(p["completed"] for p in phases) == 2816


def memory_after_warm_up(phases) -> tuple[float, list[float]]:
    """Free GPU memory at the end of round 1 (every shape seen), and after each phase of round 2."""
    warm = [p["free_mb"] for p in phases if p["round"] == 1][-1]
    return warm, [p["free_mb"] for p in phases if p["round"] == 2]


@pytest.mark.parametrize("name", SERVERS)
def test_gpu_memory_does_not_grow_with_the_requests_served(runs, name):
    warm, later = memory_after_warm_up(scenario_of(runs, name)["phases"])
    assert all(free >= warm - LEAK_SLACK_MB for free in later), (warm, later)


def test_a_planted_aux_leak_is_caught(runs):
    """The check above, on the server that keeps every verify pass's aux hidden states."""
    warm, later = memory_after_warm_up(scenario_of(runs, load_run.LEAK)["phases"])
    assert later[-1] < warm - LEAK_SLACK_MB, (warm, later)


def fault(runs, name, case) -> dict:
    """The fault's record, once the server's load is back to its idle value after it."""
    result = scenario_of(runs, name)
    found, idle = result["faults"][case], result["idle"]["num_used_tokens"]
    assert found["after"]["num_used_tokens"] == idle and found["after"]["num_running_reqs"] == 0, found
    return found


@pytest.mark.parametrize("name", SERVERS)
def test_a_client_that_leaves_mid_stream_is_let_go(runs, name):
    assert fault(runs, name, "disconnect")["events_read"] == 3


@pytest.mark.parametrize("name", SERVERS)
def test_a_request_aborted_through_the_api_ends_as_aborted(runs, name):
    found = fault(runs, name, "abort")
    assert found["status"] == 200 and found["finish"] == "abort", found
    assert found["tokens"] < load_run.LONG["max_new_tokens"], found


@pytest.mark.parametrize("name", SERVERS)
def test_a_prompt_over_the_context_length_is_refused(runs, name):
    found = fault(runs, name, "over-context")
    assert found["status"] == 400 and "context length" in found["message"], found


@pytest.mark.parametrize("case", [f"invalid-{k}" for k in load_run.INVALID])
@pytest.mark.parametrize("name", SERVERS)
def test_invalid_sampling_parameters_are_refused(runs, name, case):
    found = fault(runs, name, case)
    assert found["status"] == 400 and case.removeprefix("invalid-") in found["message"], found


@pytest.mark.parametrize("name", SERVERS)
def test_a_burst_far_above_max_running_requests_is_served_whole(runs, name):
    found = fault(runs, name, "burst")
    assert found["whole"] == found["sent"] == load_run.BURST, found


@pytest.mark.parametrize("name", SERVERS)
def test_after_the_faults_the_same_prompts_give_the_same_tokens(runs, name):
    result = scenario_of(runs, name)
    before, after = result["before"], result["after"]
    assert after["outputs"] == before["outputs"]
    assert after["accept_length"] == before["accept_length"]
    assert result["end"]["num_used_tokens"] == result["idle"]["num_used_tokens"]


def test_plugin_and_stock_answer_every_fault_alike(runs):
    def statuses(name):
        return {case: found.get("status") for case, found in scenario_of(runs, name)["faults"].items()}

    assert statuses(load_run.PLUGIN) == statuses(load_run.STOCK)
