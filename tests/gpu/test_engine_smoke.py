"""The plugin in a real SGLang 0.5.23 server on a GPU: loaded through its entry point in every
SGLang process, selected by --model-impl, capturing the embedding under CUDA graphs and eagerly.

Random weights: greedy equality with no speculation is not asserted here (a random bf16 target
has near-tied logits, so verify-vs-decode rounding flips tokens, with stock SGLang too); the
lossless and accept-length tests use the trained pair (test_acceptance.py)."""

import pytest

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
from tests.gpu.tiny_models import build_target, write_draft

pytestmark = pytest.mark.gpu
OURS = "sglang_eagle3_embed"
SPEC = dict(
    speculative_algorithm="EAGLE3", speculative_draft_load_format="dummy", speculative_num_steps=3,
    speculative_eagle_topk=1, speculative_num_draft_tokens=4,
)  # fmt: skip


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    target = build_target(root / "target", num_layers=8)
    nested = write_draft(root / "draft-nested", {"eagle_config": {IDS_FIELD: [-1, 2, 4]}})
    top = write_draft(root / "draft-top-unsorted", {IDS_FIELD: [4, -1, 2]})
    by_hand = write_draft(root / "draft-capture-indices", {"eagle_config": {IDS_FIELD: [0, 3, 5]}})
    return target, nested, top, by_hand


@pytest.fixture(scope="module")
def workaround(tiny, run_engine):
    """Stock SGLang with capture indices written by hand, [0, 3, 5]: the first id is not 1, so the
    heuristic keeps them and they capture [embedding, out2, out4], the plugin's reading of
    [-1, 2, 4]. Same captures and the same (seeded dummy) draft must give the same tokens, when
    both run the same execution path (CUDA graph or eager: their bf16 rounding differs)."""
    results = {}

    def run(cuda_graph: bool) -> dict:
        if cuda_graph not in results:
            extra = {} if cuda_graph else {"disable_cuda_graph": True}
            name = f"stock-workaround-{'graph' if cuda_graph else 'eager'}"
            result = run_engine(
                name, model_path=tiny[0], speculative_draft_model_path=tiny[3], **SPEC, **extra
            )
            assert result["ok"], result.get("traceback") or result["log"][-3000:]
            results[cuda_graph] = result
        return results[cuda_graph]

    return run


def test_stock_sglang_dies_on_embedding_ids(tiny, run_engine):
    result = run_engine("stock-nested", model_path=tiny[0], speculative_draft_model_path=tiny[1], **SPEC)
    assert not result["ok"]
    assert "captured 2 of 3 aux hidden states" in result["log"]


@pytest.mark.parametrize("cuda_graph", [True, False], ids=["cuda-graph", "eager"])
def test_plugin_captures_what_the_hand_written_indices_capture(tiny, workaround, run_engine, cuda_graph):
    extra = {} if cuda_graph else {"disable_cuda_graph": True}
    result = run_engine(
        f"plugin-nested-{'graph' if cuda_graph else 'eager'}", model_path=tiny[0], model_impl=OURS,
        speculative_draft_model_path=tiny[1], **SPEC, **extra,
    )  # fmt: skip
    assert result["ok"], result.get("traceback") or result["log"][-3000:]
    assert "EAGLE-3 draft reads [embedding output, output of layer 2, output of layer 4]" in result["log"]
    control = workaround(cuda_graph)
    assert result["outputs"] == control["outputs"]
    assert result["accept_length"] == control["accept_length"]


def test_plugin_honours_top_level_ids_in_draft_order(tiny, run_engine):
    result = run_engine(
        "plugin-top-unsorted",
        model_path=tiny[0],
        model_impl=OURS,
        speculative_draft_model_path=tiny[2],
        **SPEC,
    )
    assert result["ok"], result.get("traceback") or result["log"][-3000:]
    assert "[output of layer 4, embedding output, output of layer 2]" in result["log"]
    assert "from top level" in result["log"]
    assert all(a is not None and a >= 1.0 for a in result["accept_length"])


def test_seed_flags_are_refused_before_the_model_loads(tiny, run_engine):
    """--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 16."""
    seed = dict(SPEC, speculative_num_steps=1, speculative_num_draft_tokens=16)
    result = run_engine(
        "plugin-seed-flags", model_path=tiny[0], model_impl=OURS, speculative_draft_model_path=tiny[1], **seed
    )
    assert not result["ok"]
    assert result["error"].startswith("ValidationError")
    assert (
        "--speculative-num-steps 15" in result["error"]
        and "--speculative-num-draft-tokens 2" in result["error"]
    )
    assert "Load weight" not in result["log"]  # refused in the launcher, before any worker started
