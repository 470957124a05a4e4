"""The GPU tests' own logic, on the CPU: each test asks for engines SGLang can start (every keyword
a ``ServerArgs`` argument, one configuration per engine name), and the exact comparisons report a
planted difference with its prompt, position and both tokens. Device time is scarce; a typo must not
cost an engine start."""

import inspect
import itertools
from types import SimpleNamespace

import pytest
import torch

from harness import load_run
from harness.acceptance_runs import DEFAULTS, RUNS, STOCK_TOP_LEVEL, TRAINED
from tests.gpu import served_pair
from tests.gpu import test_acceptance as acceptance
from tests.gpu import test_kimi as kimi
from tests.gpu import test_load_faults as load_faults
from tests.gpu import test_lossless as lossless
from tests.gpu import test_mla_draft as mla
from tests.gpu import test_multi_gpu as multi_gpu
from tests.gpu import test_quantized as quantized

PROMPTS = 48


def fake_result(modes, kwargs, prompts):
    if "pp_size" in kwargs:
        return {
            "ok": False,
            "log": "ValidationError: [pipeline-parallel] --pp-size 2 with EAGLE3",
            "error": "",
        }
    if kwargs.get("speculative_draft_model_path") == "NESTED" and "model_impl" not in kwargs:
        return {"ok": False, "log": "RuntimeError: captured 2 of 3 aux hidden states", "error": ""}
    outputs = [[len(p), i, i + 1] for i, p in enumerate(prompts)]
    run = {"outputs": outputs, "accept_length": [3.0] * len(prompts), "tokens_per_s": 1.0}
    return {"ok": True, "log": "", "modes": {m: run for m in modes}, **run}


def sglang_fields():
    from sglang.srt.server_args import ServerArgs

    return set(inspect.signature(ServerArgs).parameters)  # what sgl.Engine(**kwargs) accepts


def assert_sglang_arguments(kwargs_by_name: dict[str, dict]) -> None:
    """Every keyword of every engine or server is a ``ServerArgs`` argument."""
    fields = sglang_fields()
    for name, kwargs in kwargs_by_name.items():
        unknown = set(kwargs) - fields
        assert not unknown, f"{name}: not SGLang arguments: {sorted(unknown)}"


def differing(a: dict, b: dict) -> set[str]:
    """The keys whose values differ between two engines' or servers' arguments."""
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


@pytest.fixture
def recorded():
    calls = {}
    prompts = torch.zeros(PROMPTS, 8, dtype=torch.long)

    def serve(name, modes=("all",), timeout=300, **kwargs):
        assert calls.setdefault(name, kwargs) == kwargs, f"{name}: two configurations under one name"
        return fake_result(modes, kwargs, prompts.tolist())

    drafts = {"nested": "NESTED", "top-level": "TOP", "hand-written": "HAND"}
    return serve, drafts, calls


@pytest.mark.releases
def test_every_engine_the_acceptance_tests_start_takes_only_sglang_arguments(recorded):
    serve, drafts, calls = recorded
    acceptance.test_stock_fails_at_startup_on_nested_ids(serve, drafts)
    acceptance.test_request_cap_behaves_as_in_stock_sglang(serve, drafts)
    acceptance.test_pipeline_parallel_is_refused_before_gpu_work(serve, drafts)
    assert_sglang_arguments(calls)
    assert calls["stock-hand-written-cap8"]["speculative_draft_model_path"] == "HAND"
    assert calls["plugin-pp2"]["pp_size"] == 2


def test_the_acceptance_table_reads_every_run_the_gpu_test_starts():
    """``benchmarks/acceptance_table.py`` finds each of its rows under a name the GPU test serves."""
    calls = {}

    def serve(name, modes=("all",), timeout=300, **kwargs):
        calls[name] = kwargs
        result = fake_result(modes, kwargs, [[0] * 8] * PROMPTS)
        accept = 1.6 if name == STOCK_TOP_LEVEL.name else 3.0
        return {**result, "accept_length": [accept] * PROMPTS}

    drafts = {"nested": "NESTED", "top-level": "TOP", "hand-written": "HAND"}
    predicted = {3: {TRAINED: 3.0, DEFAULTS: 1.6}, 7: {TRAINED: 3.0}}
    plugin_test = acceptance.test_plugin_accept_length_matches_the_offline_prediction
    for steps, topk, tokens in next(m for m in plugin_test.pytestmark if m.name == "parametrize").args[1]:
        plugin_test(serve, drafts, predicted, steps, topk, tokens)
    acceptance.test_stock_fails_at_startup_on_nested_ids(serve, drafts)
    acceptance.test_stock_serves_top_level_ids_with_its_defaults(serve, drafts, predicted)
    assert {run.name for run in RUNS} <= set(calls)


@pytest.fixture(scope="module")
def pair():
    from sglang_eagle3_embed.doctor.pair import GPU_PAIR, Pair

    return Pair("TARGET", "DRAFT", GPU_PAIR)


@pytest.mark.releases
def test_the_multi_gpu_pool_asks_only_for_sglang_arguments_and_compares_like_with_like(pair):
    jobs = multi_gpu.jobs_for(pair, "HAND", [[1, 2]])
    assert_sglang_arguments({name: job["engine"] for name, job in jobs.items()})
    for job in jobs.values():
        assert job["engine"]["max_total_tokens"]  # engines sharing the GPUs cap their KV pool
    for layout in multi_gpu.LAYOUTS:
        plugin, stock, plain = (jobs[f"{who}-{layout}"]["engine"] for who in ("plugin", "stock", "plain"))
        assert plugin["enable_deterministic_inference"] and plugin["tp_size"] == 2
        assert differing(plugin, stock) == {"model_impl", "speculative_draft_model_path"}
        assert "speculative_algorithm" not in plain and plain["tp_size"] == 2
    eager = jobs["stock-dp-attention2-eager"]["engine"]
    assert "model_impl" not in eager and "cuda_graph_max_bs_decode" not in eager


@pytest.mark.releases
def test_the_lossless_pool_asks_only_for_sglang_arguments_and_times_five_engines(pair, tmp_path):
    drafts = {"nested": "NESTED", "hand-written": "HAND"}
    jobs = lossless.jobs_for(pair, drafts, tmp_path)
    assert_sglang_arguments({name: job["engine"] for name, job in jobs.items()})
    for job in jobs.values():
        assert job["engine"]["max_total_tokens"]  # engines sharing the GPU cap their KV pool
    for a, b in lossless.CASES.values():  # the pairs compared differ in the draft and model_impl only
        differ = differing(jobs[a]["engine"], jobs[b]["engine"])
        assert differ == {"model_impl", "speculative_draft_model_path"}, (a, b, differ)
        assert jobs[a]["prompts"] == jobs[b]["prompts"] and jobs[a]["env"] == jobs[b]["env"]
    timed = [n for n, j in jobs.items() if "timing" in j]
    assert len(timed) == 5 and all(jobs[n]["timing"]["engines"] == len(jobs) for n in timed)
    lengths = {len(p) for p in jobs["plain"]["prompts"]}
    assert lengths == set(lossless.LENGTHS) and max(lengths) + lossless.NEW_TOKENS <= 256


def test_shared_prefix_prompts_share_the_prefix_and_differ_after_it(pair):
    prompts = lossless.shared_prefix_prompts(pair)
    assert len({tuple(p[:64]) for p in prompts}) == 1 and len({tuple(p[64:]) for p in prompts}) > 8


def fake_runs(planted_at=None):
    prompts = [[1] * 8, [2] * 40]
    outputs = [[10, 11, 12, 13], [20, 21, 22, 23]]
    runs = {}
    for name in [n for pair in lossless.CASES.values() for n in pair] + ["plain"]:
        run = {"outputs": [list(o) for o in outputs], "accept_length": [3.0, 3.0]}
        runs[name] = {"ok": True, "modes": {"all": run}, "prompts": prompts, **run}
    if planted_at is not None:
        runs["plugin-graph-s3"]["modes"]["all"]["outputs"][0][planted_at] = 99
    return runs


def test_a_planted_token_fails_the_plugin_stock_comparison_with_prompt_position_and_tokens():
    lossless.test_plugin_equals_stock_on_the_same_tensors(fake_runs(), "graph-s3")
    with pytest.raises(AssertionError, match=r"prompt 0 \(8 tokens\) at output position 2: 99 against 12"):
        lossless.test_plugin_equals_stock_on_the_same_tensors(fake_runs(planted_at=2), "graph-s3")


def test_the_plain_decoding_comparison_holds_within_one_tile_and_reports_beyond(capsys):
    lossless.test_speculation_equals_plain_decoding_while_both_kernels_agree(fake_runs(), "plugin-graph-s3")
    with pytest.raises(AssertionError, match="within 32 keys"):  # an 8-token prompt's 3rd token: 10 keys
        lossless.test_speculation_equals_plain_decoding_while_both_kernels_agree(
            fake_runs(planted_at=2), "plugin-graph-s3"
        )
    runs = fake_runs()
    runs["plugin-graph-s3"]["outputs"][1][2] = 99  # the 40-token prompt: past one tile, only reported
    runs["plugin-graph-s3"]["modes"]["all"]["outputs"][1][2] = 99
    lossless.test_speculation_equals_plain_decoding_while_both_kernels_agree(runs, "plugin-graph-s3")
    assert "1 of 2 outputs leave plain decoding" in capsys.readouterr().out


def test_timing_waits_for_every_engine_then_times_alone(tmp_path):
    import threading
    import time

    from harness.engine_run import timed

    spans = []

    class Engine:
        def generate(self, input_ids, sampling_params):
            start = time.time()
            time.sleep(0.05)
            spans.append((start, time.time()))
            return [{"output_ids": [1, 2], "meta_info": {}} for _ in input_ids]

    timing = {"barrier": str(tmp_path), "engines": 3, "modes": ["all"], "rounds": 2}
    (tmp_path / "crashed.gone").touch()  # a third engine that ended without finishing
    started = []

    def run(name):
        started.append(time.time())
        timed(Engine(), name, timing, [[1, 2, 3]], {})

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    threads[0].start()
    time.sleep(0.3)  # "a" is done first and must wait for "b"
    assert not spans
    threads[1].start()
    for t in threads:
        t.join(timeout=20)
    spans.sort()
    assert len(spans) == 6 and all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # never overlapping


CRASH = {"ok": False, "error": "x: no result after 300 s", "log": "Traceback ...\nAssertionError\n"}


@pytest.mark.parametrize(
    ("plugin", "stock", "verdict"),
    [
        (CRASH, CRASH, None),  # failing alike
        (CRASH, {**CRASH, "log": "torch.OutOfMemoryError: CUDA out of memory"}, "AssertionError"),
        (
            {**CRASH, "error": "ValueError: detokenizer_port at 30235 is not available"},
            CRASH,
            "could not start",
        ),
    ],
    ids=["same-failure", "different-failures", "port-in-use"],
)
def test_failing_alike_means_the_same_failure_on_a_host_that_could_start_both(plugin, stock, verdict):
    results = {"plugin-x": plugin, "stock-hand-written-x": stock}

    def serve(name, **kwargs):
        return dict(results[name])

    drafts = {"nested": "NESTED", "hand-written": "HAND"}
    if verdict is None:
        acceptance.same_as_stock(serve, "x", drafts)
    elif verdict == "AssertionError":
        with pytest.raises(AssertionError):
            acceptance.same_as_stock(serve, "x", drafts)
    else:
        with pytest.raises(pytest.fail.Exception, match=verdict):
            acceptance.same_as_stock(serve, "x", drafts)


@pytest.mark.releases
def test_the_kimi_servers_ask_only_for_sglang_arguments_and_compare_like_with_like(pair):
    drafts = {"nested": "NESTED", "top-level": "TOP", "hand-written": "HAND"}
    jobs = kimi.jobs_for(pair, drafts, [[1, 2]])
    assert_sglang_arguments({name: job["server"] for name, job in jobs.items()})
    for job in jobs.values():
        assert job["server"]["trust_remote_code"] and job["server"]["max_total_tokens"]
    plugin, stock = jobs["kimi-plugin"]["server"], jobs["kimi-stock-hand-written"]["server"]
    assert differing(plugin, stock) == {"model_impl", "speculative_draft_model_path"}
    assert jobs["kimi-plain"]["server"]["enable_deterministic_inference"]
    assert_sglang_arguments({"probe --engine-arg": served_pair.probe_engine_args(trust_remote_code=True)})


@pytest.mark.releases
def test_the_quantized_servers_ask_only_for_sglang_arguments_and_compare_like_with_like():
    targets = {"bf16": "BF16", "fp8": "FP8", "int4": "INT4"}
    jobs = quantized.jobs_for(targets, {"nested": "NESTED", "hand-written": "HAND"}, [[1, 2]])
    assert_sglang_arguments({name: job["server"] for name, job in jobs.items()})
    for fmt in ("fp8", "int4"):
        plugin, stock = jobs[f"{fmt}-plugin"]["server"], jobs[f"{fmt}-stock-hand-written"]["server"]
        assert differing(plugin, stock) == {"model_impl", "speculative_draft_model_path"}
        assert plugin["model_path"] == targets[fmt] and plugin["enable_deterministic_inference"]
        assert jobs[f"{fmt}-plugin"]["modes"] == ["all", "one-by-one"]
    assert (
        jobs["int4-plugin"]["server"]["trust_remote_code"]
        and "trust_remote_code" not in jobs["fp8-plugin"]["server"]
    )
    assert differing(jobs["bf16-plugin"]["server"], jobs["fp8-plugin"]["server"]) == {"model_path"}


@pytest.mark.releases
def test_the_load_servers_and_sglangs_client_take_the_arguments_given(monkeypatch, tmp_path):
    import sys

    import sglang.benchmark.serving as client

    extra = {"model_path", "model_impl", "speculative_draft_model_path"}
    assert set(load_faults.SERVER) | extra <= sglang_fields()
    seen = {}
    monkeypatch.setattr(client, "run_benchmark", lambda args: seen.update(vars(args)))
    for stream in (True, False):
        command = load_run.load_command(31000, "/tok", 64, stream, tmp_path / "o.jsonl")
        monkeypatch.setattr(sys, "argv", ["serving", *command])
        client.cli_main()
        assert seen["dataset_name"] == "random-ids" and seen["max_concurrency"] == 64
        assert seen["num_prompts"] == 128 and seen["disable_stream"] is (not stream)


@pytest.mark.releases
def test_the_mla_servers_compare_like_with_like():
    pair = SimpleNamespace(target="TARGET", draft="DRAFT")
    jobs = mla.jobs_for(pair, "HAND", [[1, 2]])
    assert_sglang_arguments({name: job["server"] for name, job in jobs.items()})
    plugin, stock = jobs["mla-plugin"]["server"], jobs["mla-stock-hand-written"]["server"]
    assert differing(plugin, stock) == {"model_impl", "speculative_draft_model_path"}
    assert plugin["enable_deterministic_inference"] and jobs["mla-plugin"]["modes"] == ["all", "one-by-one"]
