"""The plugin fixes the failure and costs nothing, on the real SGLang 0.5.23 server.

The GPU-sized trained pair (16-layer DeepSeek-V3 target, EAGLE-3 draft on ids [-1, 4, 10]) is served
with EAGLE-3. The server's measured ``spec_accept_length`` (``completion_tokens / spec_verify_ct``,
``srt/managers/tokenizer_manager.py:3166-3167``) is compared with the offline ``probe`` prediction for
the same prompts and settings; stock SGLang is shown failing; greedy outputs are compared token for
token with no speculation. Every engine runs in its own process (``engine_run.py``).

Lossless, in bf16: verification (an extend over the draft tokens) and plain decoding run different
kernels, so their logits differ in the last bits, and where the target's top two tokens are nearly
tied the greedy pick can differ: plain decoding does this itself between batch sizes and between GPU
layouts, and stock SGLang's speculation does it too (docs/benchmarks.md). The tests therefore ask the
no-speculation engine for each position's margin (top-1 minus top-2 logprob) and require
(1) at least 32 prompts identical token for token in every mode, and
(2) every other output explained: it leaves the reference at a near-tie (margin below ``NEAR_TIE``),
or plain decoding in another batching or layout produced it (``engine_run.unexplained``)."""

import json
import os
from pathlib import Path

import pytest
import torch

from sglang_eagle3_embed.doctor.pair import write_config_variant
from tests.gpu.engine_run import divergences, failure, launch_environment, unexplained

pytestmark = pytest.mark.gpu
OURS = "sglang_eagle3_embed"
NUM_PROMPTS, PROMPT_LEN, NEW_TOKENS = 48, 8, 40
MIN_IDENTICAL = 32  # prompts identical token for token in every mode
BF16 = {"dtype": "bfloat16"}  # the pair is saved in float32; served in bf16, as real models are
# accept-length runs compare no outputs: they skip the piecewise prefill CUDA graph capture (about
# 20 s per EAGLE-3 engine); decode, verify and draft graphs stay on. The lossless runs keep it on.
NO_PREFILL_GRAPH = {"disable_prefill_cuda_graph": True}
TRAINED = (0, 5, 11)  # capture indices of ids [-1, 4, 10]


def spec(steps, topk=1, tokens=None):
    return dict(
        speculative_algorithm="EAGLE3", speculative_num_steps=steps, speculative_eagle_topk=topk,
        speculative_num_draft_tokens=tokens or steps + 1,
    )  # fmt: skip


@pytest.fixture(scope="module")
def prompts(gpu_pair):
    return gpu_pair.language.sample(NUM_PROMPTS, PROMPT_LEN, torch.Generator().manual_seed(2026))


@pytest.fixture(scope="module")
def drafts(gpu_pair, tmp_path_factory):
    top = write_config_variant(
        gpu_pair.draft, tmp_path_factory.mktemp("top") / "draft", placement="top-level"
    )
    # stock SGLang's workaround: the trained tensors written as capture indices by hand
    hand = write_config_variant(
        gpu_pair.draft, tmp_path_factory.mktemp("hand") / "draft", placement="nested", ids=list(TRAINED)
    )
    return {"nested": str(gpu_pair.draft), "top-level": str(top), "hand-written": str(hand)}


@pytest.fixture(scope="module")
def serve(gpu_pair, prompts, run_engine):
    """Run (once) and return a named engine configuration over the prompts."""
    results = {}

    def get(name, modes=("all",), timeout=300, top_logprobs=None, **kwargs):
        if name not in results:
            job = {"prompts": prompts.tolist(), "max_new_tokens": NEW_TOKENS, "modes": list(modes)}
            job.update({"top_logprobs": top_logprobs} if top_logprobs else {})
            results[name] = run_engine(
                name, timeout=timeout, job=job, model_path=str(gpu_pair.target), **BF16, **kwargs
            )
        return results[name]

    return get


@pytest.fixture(scope="module")
def predicted(gpu_pair, prompts, tmp_path_factory):
    """The offline prediction (probe's scoring core, HF target on the GPU) per chain length."""
    from sglang_eagle3_embed.core.ids import stock_capture_indices
    from sglang_eagle3_embed.doctor.probe import HFBackend, load_draft, run_probe
    from sglang_eagle3_embed.doctor.wirings import Wiring

    backend = HFBackend(gpu_pair.target, "cuda")
    draft, token_map = load_draft(gpu_pair.draft, "cuda")
    defaults = tuple(stock_capture_indices(None, backend.num_layers))
    wirings = [Wiring(("trained",), TRAINED), Wiring(("SGLang's defaults",), defaults)]
    out = {}
    for steps in (3, 7):
        report = run_probe(
            backend, draft, token_map, wirings, prompts, new_tokens=NEW_TOKENS, steps=steps, progress=False
        )
        out[steps] = {r.wiring.indices: r.score.accept_length for r in report.results if r.score is not None}
    logs = Path(os.environ.get("EAGLE3_EMBED_GPU_LOGS", tmp_path_factory.mktemp("logs")))
    offline = {str(steps): {",".join(map(str, k)): v for k, v in by.items()} for steps, by in out.items()}
    (logs / "offline.json").write_text(json.dumps(offline))  # read by benchmarks/acceptance_table.py
    return out


def plugin_run(serve, drafts, steps, topk=1, tokens=None):
    """The plugin with the trained draft; steps 3 top-k 1 also runs at batch size 1 (tokens/s)."""
    modes = ("all", "one-by-one") if (steps, topk) == (3, 1) else ("all",)
    return serve(
        f"plugin-steps{steps}-topk{topk}", modes=modes, model_impl=OURS, **NO_PREFILL_GRAPH,
        speculative_draft_model_path=drafts["nested"], **spec(steps, topk, tokens),
    )  # fmt: skip


def assert_lossless(base, result, others=()):
    """``result``'s outputs in every mode against ``base`` (no speculation, with margins): at least
    ``MIN_IDENTICAL`` prompts identical in every mode, and every difference explained, by a near-tie
    or by plain decoding's own outputs in ``others`` (lists of outputs, one per prompt)."""
    assert base["ok"], base.get("traceback") or base["log"][-3000:]
    assert result["ok"], result.get("traceback") or result["log"][-3000:]
    expected, gaps = base["outputs"], base["margins"]
    assert base["margins_outputs"] == expected  # the scored pass generated the same tokens
    differing = set()
    for mode, run in result["modes"].items():
        found = divergences(run["outputs"], expected, gaps)
        print(f"{mode}: {len(found)} of {len(expected)} differ, (prompt, position, margin): {found}")
        real = unexplained(run["outputs"], expected, gaps, others)
        why = "no plain decoding run made them either"
        assert not real, f"{mode}: outputs differ where the target was not near a tie: {real}; {why}"
        differing |= {d[0] for d in found}
    assert len(expected) - len(differing) >= MIN_IDENTICAL, sorted(differing)


def plain_decoding(serve):
    """No speculation on one GPU, every prompt at once and one by one, with margins: the reference."""
    return serve("no-spec", modes=("all", "one-by-one"), top_logprobs=2)


def outputs_of(result):
    """Every mode's outputs of a run (each a list of outputs, one per prompt)."""
    return [run["outputs"] for run in result["modes"].values()]


def mean(values):
    values = [v for v in values if v is not None]
    assert values, "the server reported no spec_accept_length"
    return sum(values) / len(values)


@pytest.mark.parametrize(("steps", "topk", "tokens"), [(3, 1, None), (7, 1, None), (3, 4, 8)])
def test_plugin_accept_length_matches_the_offline_prediction(serve, drafts, predicted, steps, topk, tokens):
    """top-k 1: measured >= 0.9 x predicted for the same chain. top-k 4: the tree contains the greedy
    chain (the top-1 path has the highest cumulative score at every depth), so the top-k 1 prediction
    is a lower bound and the same 0.9 x applies."""
    name = f"plugin-steps{steps}-topk{topk}"
    result = plugin_run(serve, drafts, steps, topk, tokens)
    assert result["ok"], result.get("traceback") or result["log"][-3000:]
    measured = mean(result["accept_length"])
    offline = predicted[steps][TRAINED]
    print(f"{name}: measured {measured:.2f}, offline {offline:.2f}")
    assert measured >= 0.9 * offline, (measured, offline)


def test_stock_fails_at_startup_on_nested_ids(serve, drafts):
    result = serve(
        "stock-nested", speculative_draft_model_path=drafts["nested"], **NO_PREFILL_GRAPH, **spec(3)
    )
    assert not result["ok"]
    assert "captured 2 of 3 aux hidden states" in result["log"] + result.get("error", "")


def test_stock_serves_top_level_ids_with_its_defaults(serve, drafts, predicted):
    """Stock SGLang ignores top-level ids and serves its default layers: the server measures what the
    probe predicts for that wiring, and a fraction of what the plugin gets from the same draft."""
    result = serve(
        "stock-top-level", speculative_draft_model_path=drafts["top-level"], **NO_PREFILL_GRAPH, **spec(3)
    )
    assert result["ok"], result.get("traceback") or result["log"][-3000:]
    measured = mean(result["accept_length"])
    defaults = predicted[3][(2, 8, 13)]  # SGLang's default layers for a 16-layer target
    plugin = plugin_run(serve, drafts, 3)
    print(f"stock top-level: measured {measured:.2f}, offline under the defaults {defaults:.2f}")
    assert abs(measured - defaults) <= 0.25 * defaults, (measured, defaults)
    assert measured <= 0.6 * mean(plugin["accept_length"]), measured


def test_greedy_outputs_are_lossless(serve, drafts):
    """Batch size 8 (prompts sent 8 at a time), batch size 1, and every prompt concurrently, with
    CUDA graphs (decode graphs captured up to batch size 48, so every decode replays one) and
    eagerly; see the module docstring for what "lossless" means in bf16."""
    base = plain_decoding(serve)
    # no speculation is not batch-invariant in bf16 either (seen: 4 of 48 prompts differ between
    # batch 48 and batch 1, at margins 0.03-0.06): between its own modes, only near-ties may differ
    assert_lossless(base, base)
    assert len({tuple(o[:4]) for o in base["outputs"]}) >= 16  # diverse continuations
    graph = serve(
        "plugin-lossless-graph", modes=("batches-of-8", "one-by-one", "concurrent"), model_impl=OURS,
        speculative_draft_model_path=drafts["nested"], cuda_graph_max_bs_decode=NUM_PROMPTS, **spec(3),
    )  # fmt: skip
    eager = serve(
        "plugin-lossless-eager", modes=("batches-of-8", "one-by-one"), model_impl=OURS,
        disable_cuda_graph=True, speculative_draft_model_path=drafts["nested"], **spec(3),
    )  # fmt: skip
    assert_lossless(base, graph, outputs_of(base))
    assert_lossless(base, eager, outputs_of(base))


def same_as_stock(serve, name, drafts, **kwargs):
    """The plugin on the trained ids and stock SGLang on the same captures written as capture
    indices by hand, under the same flags: the plugin changes no scheduling and no execution path,
    so both must finish (or fail) alike, with the same tokens. Returns both results."""
    plugin = serve(f"plugin-{name}", model_impl=OURS, speculative_draft_model_path=drafts["nested"], **kwargs)
    stock = serve(f"stock-hand-written-{name}", speculative_draft_model_path=drafts["hand-written"], **kwargs)
    engines = (("plugin", plugin), ("stock", stock))
    for who, result in engines:
        outcome = "finished" if result["ok"] else f"{result['error']}; raised {failure(result)}"
        print(f"{name}: {who} {outcome}")
    for who, result in engines:
        if not result["ok"] and (cause := launch_environment(result)):
            pytest.fail(
                f"{name}: the {who} engine could not start on this host ({cause}); nothing was compared"
            )
    assert plugin["ok"] == stock["ok"], (plugin.get("error"), stock.get("error"))
    if plugin["ok"]:
        assert plugin["outputs"] == stock["outputs"]
    else:  # failing alike: the same exception, not just any failure
        assert failure(plugin) == failure(stock), (plugin["error"], stock["error"])
    return plugin, stock


def test_request_cap_behaves_as_in_stock_sglang(serve, drafts):
    """With --max-running-requests 8, a one-request-at-a-time pass stalled once (see
    docs/benchmarks.md): it must behave exactly as in stock SGLang."""
    same_as_stock(
        serve, "cap8", drafts, modes=("one-by-one",), timeout=240, max_running_requests=8, **spec(3),
    )  # fmt: skip


# The lent 2 x H200 has NVLink multicast switched off; there FlashInfer's TRT-LLM all-reduce fusion,
# which SGLang turns on by itself for DeepSeek at TP > 1 on sm90 (srt/arg_groups/overrides.py:955-1001),
# hung while setting up its workspace, before serving (docs/benchmarks.md), so TP runs without it.
TP2 = {"tp_size": 2, "enforce_disable_flashinfer_allreduce_fusion": True}
DP2 = {"tp_size": 2, "dp_size": 2, "enable_dp_attention": True}


MULTI_GPU = [  # (name, GPUs needed, engine arguments, the refusal expected or None)
    ("tp2", 2, TP2, None),
    # decode graphs up to every prompt: an eager draft decode under DP attention is checked
    # against stock SGLang separately (test_dp_attention_eager_behaves_as_in_stock_sglang)
    ("dp-attention2", 2, {**DP2, "cuda_graph_max_bs_decode": NUM_PROMPTS}, None),
    ("pp2", 1, {"pp_size": 2}, "--pp-size 2 with"),  # refused in the launcher: no GPU used
]


@pytest.mark.parametrize(("name", "needs", "kwargs", "refused"), MULTI_GPU)
def test_multi_gpu(serve, drafts, name, needs, kwargs, refused):
    """Accept length within 5% of one GPU's, lossless as on one GPU; PP refused clearly."""
    if torch.cuda.device_count() < needs:
        pytest.skip(f"needs {needs} GPUs, this machine has {torch.cuda.device_count()} ")
    result = serve(
        f"plugin-{name}", model_impl=OURS, speculative_draft_model_path=drafts["nested"], **spec(3), **kwargs
    )
    if refused:
        assert not result["ok"] and refused in result["log"] + result.get("error", "")
        return
    assert result["ok"], result.get("traceback") or result["log"][-3000:]
    single = plugin_run(serve, drafts, 3)
    measured, one_gpu = mean(result["accept_length"]), mean(single["accept_length"])
    print(f"{name}: accept length {measured:.2f}, one GPU {one_gpu:.2f}")
    assert abs(measured - one_gpu) <= 0.05 * one_gpu, (measured, one_gpu)
    base = serve(f"no-spec-{name}", top_logprobs=2, **kwargs)  # the same layout without speculation
    # plain decoding on one GPU explains a difference too (seen: TP 2 without speculation left the
    # one-GPU tokens where the plugin on TP 2 kept them; docs/benchmarks.md)
    assert_lossless(base, result, [*outputs_of(base), *outputs_of(plain_decoding(serve))])


def test_dp_attention_eager_behaves_as_in_stock_sglang(serve, drafts):
    """DP attention with SGLang's default decode graphs (up to batch size 8): the 24 requests a rank
    holds run the draft decode eagerly. Whatever SGLang does there, the plugin must do the same."""
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, this machine has {torch.cuda.device_count()} ")
    same_as_stock(serve, "dp-attention2-eager", drafts, **DP2, **spec(3))
