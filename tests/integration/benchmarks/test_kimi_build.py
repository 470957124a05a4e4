"""The Kimi-K2.5-shaped pair's builder (``benchmarks/kimi_build.py``) at ``--quick`` on the CPU: the
folders it writes are Kimi-K2.5's layout, SGLang's own Kimi-K2.5 class loads the target and its
forward gives the plugin's captures of the seed's trained ids as the narrow model computes them (INT4
experts and bf16 weights rounded alike), stock SGLang's reading of the shipped ids reads other
tensors, the wide draft computes what the narrow draft computes, and a stopped build resumes."""

import dataclasses
import json
import os
import shutil

import pytest
import torch

from benchmarks import kimi_build
from benchmarks.kimi_pair import KimiPairSpec, place_trained
from sglang_eagle3_embed.core.capture.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from sglang_eagle3_embed.core.capture.stock_sglang import stock_reading
from sglang_eagle3_embed.doctor import cache
from sglang_eagle3_embed.doctor.eagle3_draft import load_draft
from sglang_eagle3_embed.doctor.quantized import dequantized_weights
from sglang_eagle3_embed.doctor.tiny_target import Language
from sglang_eagle3_embed.doctor.weights import read_safetensors

SPEC = KimiPairSpec.quick()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("kimi")
    result = kimi_build.build(out, SPEC, "cpu", log=lambda *_: None)
    return {name: out / name for name in result["folders"]} | {"result": result, "out": out}


@pytest.mark.releases
def test_the_target_is_kimi_k25_with_int4_experts_one_shard_per_layer(built):
    folder = built["target"]
    config = json.loads((folder / "config.json").read_text())
    text = config["text_config"]
    assert config["architectures"] == ["KimiK25ForConditionalGeneration"]
    assert text["num_hidden_layers"] == SPEC.num_layers and text["hidden_size"] == SPEC.text["hidden_size"]
    assert text["n_routed_experts"] == text["num_experts_per_tok"] == SPEC.experts
    assert text["quantization_config"]["format"] == "pack-quantized"
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    shards = {f for f in index.values() if f != "vision.safetensors"}
    assert len(shards) == SPEC.num_layers + 1
    weights = read_safetensors(folder)
    assert set(weights) == set(index)
    packed = [k for k, v in weights.items() if v.dtype == torch.int32 and k.endswith("weight_packed")]
    assert len(packed) == (SPEC.num_layers - 1) * SPEC.experts * 3  # every MoE layer's gate, up, down
    assert all(".mlp.experts." in k for k in packed)
    assert weights["language_model.model.embed_tokens.weight"].shape == (
        SPEC.text["vocab_size"], SPEC.text["hidden_size"],
    )  # fmt: skip


@pytest.mark.releases
def test_sglangs_kimi_k25_captures_what_the_narrow_model_computes(built, sglang_cpu):
    """SGLang's Kimi-K2.5 class (the plugin's) on the folder: the plugin's capture of the trained ids
    equals the narrow model's states at the trained layers, zero beyond the narrow width, and stock
    SGLang's reading of the shipped ids holds other tensors at every position."""
    from sglang.srt.utils.hf_transformers.config import get_config

    from sglang_eagle3_embed.patch import deepseek_models as models

    harness = sglang_cpu
    config = get_config(str(built["target"]), trust_remote_code=False)
    config.encoder_only = config.language_only = False
    kimi = harness.build(models.KimiK25ForConditionalGeneration, config)
    kimi.load_weights(list(dequantized_weights(read_safetensors(built["target"])).items()))
    prompt = [5, 9, 17, 3, 40, 41, 7]

    def captures(indices=None):
        if indices is None:  # the plugin's reading of the fixed draft's config
            with harness.published_eagle3_launch(str(built["draft-fixed"])):
                kimi.set_eagle3_layers_to_capture(list(SPEC.ids))
        else:  # what stock SGLang's reading of the shipped config captures
            kimi.language_model.model.layers_to_capture = list(indices)
        batch = harness.CpuRuntime(config.text_config).extend([1], [prompt])
        with torch.no_grad():
            return kimi(batch.input_ids, batch.positions, batch).hidden_states

    served = captures()
    narrow = kimi_build.load_narrow(built["narrow"], SPEC)
    reference = harness.hf_hidden_states(kimi_build.as_written(narrow), prompt)
    h, H = reference[0].shape[-1], SPEC.text["hidden_size"]
    states = served.view(len(prompt), 3, H)
    for k, i in enumerate(kimi_build.narrow_ids(SPEC)):
        assert not states[:, k, h:].any(), f"capture {k}: the stream beyond the narrow width is not zero"
        assert torch.allclose(states[:, k, :h], reference[i + 1], atol=1e-4), k

    stock = stock_reading({"eagle_config": {IDS_FIELD: list(SPEC.config_ids)}}, SPEC.num_layers).indices
    plan = resolve_capture_plan({"eagle_config": {IDS_FIELD: list(SPEC.ids)}}, SPEC.num_layers).indices
    assert stock != plan
    read = captures(stock).view(len(prompt), 3, H)
    for k in range(3):
        gap = ((read[:, k] - states[:, k]).norm() / states[:, k].norm()).item()
        assert gap > 0.1, f"position {k}: stock reads the trained tensor (relative difference {gap:.3f})"


@pytest.mark.releases
def test_the_wide_draft_computes_what_the_narrow_draft_computes(built):
    narrow, _ = load_draft(built["narrow-draft"])
    wide, _ = load_draft(built["draft"])
    with torch.no_grad():
        for p in narrow.parameters():
            p.copy_(p.to(torch.bfloat16).float())  # the wide draft is written in bf16
    h, H = narrow.fc.weight.shape[0], wide.fc.weight.shape[0]
    gen = torch.Generator().manual_seed(3)
    embeds, aux = torch.randn(2, 6, h, generator=gen), torch.randn(2, 6, 3, h, generator=gen)
    wide_embeds = torch.zeros(2, 6, H)
    wide_embeds[..., :h] = embeds
    wide_aux = torch.zeros(2, 6, 3, H)
    wide_aux[..., :h] = aux
    with torch.no_grad():
        want = narrow(embeds, aux.flatten(2))
        got = wide(wide_embeds, wide_aux.flatten(2))
    assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()


@pytest.mark.releases
def test_the_build_predicts_the_narrow_drafts_accept_length(built):
    """The build records the narrow draft's accept length, exact and as the folder rounds the
    target; a draft that predicts other tokens (its vocabulary rolled by one) scores no speculation."""
    quality = built["result"]["quality"]["draft"]
    assert set(quality) == {"exact", "as written"}
    narrow = kimi_build.load_narrow(built["narrow"], SPEC)
    draft, _ = load_draft(built["narrow-draft"])
    assert kimi_build.draft_quality(narrow, draft, SPEC) == quality
    assert quality["exact"]["accept_length"] > 1.5  # the quick target's greedy is easy to draft
    with torch.no_grad():
        draft.lm_head.weight.copy_(draft.lm_head.weight.roll(1, dims=0))
    wrong = kimi_build.draft_quality(narrow, draft, SPEC)
    assert wrong["exact"] | {"likeliest": None} == {"accept_length": 1.0, "agreement": 0.0, "likeliest": None}


@pytest.mark.releases
def test_the_served_check_asks_what_the_build_scored(built, monkeypatch):
    """``real_speedup``'s served check asks a server the prompts the build scored, and a server that
    computes what the folder holds (the narrow model as written, greedy) answers the tokens the
    build scored as written: the check's score and the build's are of the same tokens. A run on
    the folder carries the build's record when its requests are the ones the pair trained for."""
    from benchmarks import real_pair, real_speedup

    class Narrow:  # answers /generate for token ids as a server of the folder would
        def __init__(self, model):
            self.model, self.asked, self.answered = model, None, None

        def request(self, path, payload):
            if "input_ids" not in payload:
                return 400, "token ids only"
            self.asked = payload["input_ids"]
            tokens = torch.tensor(self.asked)
            with torch.no_grad():
                for _ in range(payload["sampling_params"]["max_new_tokens"]):
                    tokens = torch.cat([tokens, self.model(tokens).logits[:, -1:].argmax(-1)], dim=1)
            self.answered = tokens[:, len(self.asked[0]) :].tolist()
            return 200, [{"output_ids": out, "meta_info": {}} for out in self.answered]

    scored = []
    monkeypatch.setattr(
        real_pair, "language_hits", lambda _, prompts, out: scored.append((prompts, out)) or 0.0
    )
    narrow = kimi_build.load_narrow(built["narrow"], SPEC)
    draft, _ = load_draft(built["narrow-draft"])
    kimi_build.draft_quality(narrow, draft, SPEC)
    _, (prompts, as_written) = scored
    monkeypatch.undo()
    server = Narrow(kimi_build.as_written(narrow))
    language = Language(SPEC.target_spec())
    check = real_speedup.served_check(
        server, language, real_pair.serving_rows(language, SPEC.requests), SPEC.prompt_len
    )
    assert server.asked == prompts and server.answered == as_written
    assert check["ids"]["language_accuracy"] == built["result"]["quality"]["draft"]["as written"]["likeliest"]

    recorded = built["result"]["quality"]["draft"]
    (built["out"] / "kimi_build.json").write_text(json.dumps(built["result"]))
    assert real_speedup.folder_prediction(built["out"], SPEC, SPEC.requests) == recorded
    longer = dataclasses.replace(SPEC.requests, output_len=SPEC.requests.output_len + 1)
    assert real_speedup.folder_prediction(built["out"], SPEC, longer) is None  # other prompts' record


def test_the_pair_trains_on_the_requests_it_is_served():
    """The Kimi-K2.5-shaped pair's training sequences are the serving benchmark's requests, prompt
    plus output: no request reaches a position its target and draft never trained on."""
    from benchmarks import configs
    from benchmarks.real_pair import RealPairSpec
    from benchmarks.real_speedup import untrained_note

    assert KimiPairSpec().requests == configs.REQUESTS
    assert KimiPairSpec().seq_len == configs.REQUESTS.prompt_len + configs.REQUESTS.output_len
    assert untrained_note(configs.REQUESTS, KimiPairSpec().seq_len) is None
    assert untrained_note(configs.REQUESTS, RealPairSpec().seq_len) == (  # the V2-Lite pair's 64
        "note: a request reaches position 192; the pair trained on 64 tokens, past which its function is untrained"
    )


@pytest.mark.releases
def test_the_drafts_configs_are_the_seeds_and_the_fix(built):
    shipped = json.loads((built["draft"] / "config.json").read_text())
    fixed = json.loads((built["draft-fixed"] / "config.json").read_text())
    assert shipped["eagle_config"][IDS_FIELD] == list(SPEC.config_ids)
    assert fixed["eagle_config"][IDS_FIELD] == list(SPEC.ids)
    assert shipped["hidden_size"] == SPEC.text["hidden_size"]
    assert shipped["num_attention_heads"] == SPEC.text["num_attention_heads"]


@pytest.mark.parametrize("spec", [SPEC, KimiPairSpec()], ids=["quick", "real"])
def test_the_wide_draft_covers_the_targets_context(spec):
    # SGLang derives a draft's context from its own config and exits at start-up when the
    # target's is longer (srt/configs/model_config.py:1314)
    config = kimi_build.wide_draft_config(spec, spec.config_ids)
    assert config["max_position_embeddings"] >= spec.text["max_position_embeddings"]


def _stopped_build(out, module, name: str, stopping, **options) -> None:
    """A build into ``out`` stopped by ``stopping`` (put in place of ``module.name``);
    ``options``: ``build``'s keyword arguments."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, name, stopping)
        with pytest.raises(KeyboardInterrupt):
            kimi_build.build(out, SPEC, "cpu", log=lambda *_: None, **options)


def _with_narrow(built, out, *names):
    """``out`` holding copies of ``built``'s folders ``names`` (narrow first)."""
    out.mkdir()
    for name in names:
        shutil.copytree(built[name], out / name)
    return out


@pytest.mark.releases
def test_the_target_is_published_before_the_narrow_draft_trains(built, tmp_path):
    """A server without a draft starts on the target while the narrow draft trains
    (``real_speedup --building``): the target is the second folder, made of the narrow model alone."""
    out = _with_narrow(built, tmp_path / "again", "narrow")
    seen = []

    def training(narrow, spec, device="cpu"):
        seen.append((out / "target" / cache.MANIFEST).exists())
        raise KeyboardInterrupt("stopped")

    _stopped_build(out, kimi_build, "train_narrow_draft", training, reuse=True)
    assert seen == [True]
    assert cache.manifest_digest(out / "target") == cache.manifest_digest(built["target"])


@pytest.mark.releases
def test_a_target_written_beside_the_narrow_draft_is_the_same_bytes(built, tmp_path):
    """``target_beside``: the narrow draft starts training before the target is published (a
    process of its own writes it), and the build ends with the same four folders' bytes."""
    out = _with_narrow(built, tmp_path / "again", "narrow")
    train, seen = kimi_build.train_narrow_draft, []

    def training(narrow, spec, device="cpu"):
        seen.append((out / "target" / cache.MANIFEST).exists())
        return train(narrow, spec, device)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kimi_build, "train_narrow_draft", training)
        result = kimi_build.build(out, SPEC, "cpu", reuse=True, target_beside=True, log=lambda *_: None)
    assert seen == [False]
    assert result["manifests"] == built["result"]["manifests"]
    assert result["quality"] == built["result"]["quality"]
    assert {"target: write", "target: in all"} <= set(result["timings"])  # the writer's, sent back


@pytest.mark.releases
def test_a_failed_target_writer_fails_the_build_and_says_how_to_resume(built, tmp_path):
    out = _with_narrow(built, tmp_path / "again", "narrow", "narrow-draft")
    (out / f"target{kimi_build.PARTIAL}").write_text("a file where the writer keeps its shards")
    with pytest.raises(RuntimeError, match=r"target writer .* exited with 1.*--reuse"):
        kimi_build.build(out, SPEC, "cpu", reuse=True, target_beside=True, log=lambda *_: None)
    assert not (out / "target").exists()


@pytest.mark.releases
def test_a_stopped_build_leaves_no_target_writer_behind(built, tmp_path):
    import multiprocessing

    out = _with_narrow(built, tmp_path / "again", "narrow")

    def training(narrow, spec, device="cpu"):
        raise KeyboardInterrupt("stopped")

    _stopped_build(out, kimi_build, "train_narrow_draft", training, reuse=True, target_beside=True)
    assert [p.name for p in multiprocessing.active_children()] == []


@pytest.mark.releases
def test_a_stopped_build_resumes_its_shards_and_rebuilds_the_same_bytes(built, tmp_path):
    """A build stopped after some target shards resumes them (not rewritten) and publishes the
    target with the same manifest as an uninterrupted build."""
    out = tmp_path / "again"
    shards = kimi_build.target_shards

    def stopping(narrow, spec, device="cpu", dtype=torch.bfloat16):
        for n, (name, make) in enumerate(shards(narrow, spec, device, dtype)):
            if n == 4:
                raise KeyboardInterrupt("stopped")
            yield name, make

    _stopped_build(out, kimi_build, "target_shards", stopping)
    partial = out / f"target{kimi_build.PARTIAL}"
    kept = {p.name: p.stat().st_mtime_ns for p in partial.glob("*.safetensors")}
    assert len(kept) == 4
    lines = []
    result = kimi_build.build(out, SPEC, "cpu", reuse=True, log=lines.append)
    assert any("5 written, 4 resumed" in line for line in lines), lines
    assert result["manifests"] == built["result"]["manifests"]
    assert cache.verify(out / "target") is None  # the digests taken while writing are the files'


@pytest.mark.releases
def test_a_build_stopped_while_publishing_the_target_keeps_its_shards(built, tmp_path):
    """Tens of GB are flushed and published after the last shard: a build stopped there resumes
    every shard and rewrites none."""
    out = tmp_path / "again"
    publish = cache.publish

    def stopping(tmp, folder, known=None):
        if folder.name == "target":
            raise KeyboardInterrupt("stopped")
        return publish(tmp, folder, known)

    _stopped_build(out, cache, "publish", stopping)
    lines = []
    result = kimi_build.build(out, SPEC, "cpu", reuse=True, log=lines.append)
    assert any("0 written, 9 resumed" in line for line in lines), lines
    assert result["manifests"] == built["result"]["manifests"]
    assert not (out / f"target{kimi_build.PARTIAL}").exists()


def test_the_trained_layers_are_placed_for_the_quick_spec():
    assert place_trained(SPEC.num_layers, SPEC.ids, SPEC.config_ids) == (0, 2, 3, 4, 5)
    assert kimi_build.narrow_ids(SPEC) == [-1, 1, 3]


@pytest.mark.releases
def test_real_speedup_serves_the_built_folder_with_the_kimi_suite(built, tmp_path):
    from benchmarks import configs, real_speedup

    suite, target, drafts, spec = real_speedup.setup(built["out"], tmp_path)
    assert suite is configs.KIMI_SPEEDUP and target == built["target"]
    assert drafts == {"nested": str(built["draft-fixed"]), "seed": str(built["draft"])}
    assert spec.target_spec() == SPEC.target_spec()  # the same language for the serving client
    for server in suite.servers:
        # SGLang's start-up warm-up sends KimiK25ForConditionalGeneration an image through the chat
        # template, which the built tokenizer has no placeholder for: every server skips it.
        assert suite.kwargs(server, target, drafts)["skip_server_warmup"] is True, server
    # the canary's expectations are recorded on the pair's language, which the target lacks a record
    # of (probe would draw uniform tokens): the prompts are written for probe --prompts
    prompts = real_speedup.write_probe_prompts(built["out"], tmp_path, tmp_path / "prompts.jsonl")
    rows = [json.loads(line) for line in prompts.read_text().splitlines()]
    assert (len(rows), {len(r) for r in rows}) == (
        real_speedup.PROBE_PROMPTS[0],
        {real_speedup.PROBE_PROMPTS[1]},
    )
    count, length = real_speedup.PROBE_PROMPTS
    language = Language(SPEC.target_spec()).sample(count, length, torch.Generator().manual_seed(2027))
    assert rows == language.tolist()


def test_a_gpu_build_trains_with_strictly_deterministic_algorithms(monkeypatch):
    """warn_only would leave memory-efficient attention's backward non-deterministic."""
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", "")  # recorded, so the test's value is undone
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG")
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    try:
        kimi_build._deterministic("cuda")
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.is_deterministic_algorithms_warn_only_enabled()
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
